"""Figure 1 (``fig1_depth_contrast``): where the direction of beta goes on one example, at
each depth, against the max-margin references.

On the single example ``mu`` (today ``(1, 2)``), ``alpha = (1.5, 0.8)``, ``rho = 1``: the path
of beta in the plane for GD, l_inf-SAM and l2-SAM at L = 1 and L = 2, drawn as the direction
of beta times ``log(1 + |beta|_2)``, with the l1 (``e_d``) and l2 (``mu/|mu|``) max-margin
rays; the end of each path carries the algorithm's marker, and the time at which a coordinate
of l_inf-SAM reaches 0 and slides is annotated. Thm 3.1 (L = 1: all three go to the l2
max-margin direction) against Cor 3.5 (L = 2: l_inf-SAM goes to ``e_1`` because
``alpha_2 < rho``, while GD and l2-SAM go to ``e_2``).

Figures 6 and 7, on the same theme, are in :mod:`figures.maxmargin_angles` and
:mod:`figures.blobs`; the shared pieces (directions, angles, references) are in
:mod:`figures.directions`. Clock: the rescaled one (docs/theory.md §3).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flows.sweep.registry import Result, Task

from . import style
from .common import (
    STOPPED_MARK,
    Figure,
    Setting,
    figure_command,
    plt,
    save,
    show,
    stopped_early,
    stopped_handle,
)
from .compared import ALGORITHMS, check_algorithms, line_style, rho_entry
from .directions import directions, draw_reference_rays, log_norm

#: How the start of the paths is marked.
START_MARK = {"ls": "", "marker": "o", "mfc": "white", "mec": "0.3", "zorder": 6}
#: Legend names of the max-margin rays by p (``d``: the index of the largest feature).
RAY_NAMES = {1: r"$\ell_1$ max-margin $e_{{{d}}}$", 2: r"$\ell_2$ max-margin $\mu/\|\mu\|$"}


def fig1_tasks(s: Setting) -> list[Task]:
    """The algorithms on the example ``(mu, +1)`` at each depth (depth-major)."""
    return [
        Task(
            "simulate",
            {
                "mu": list(s.mu),
                "algorithm": alg,
                "depth": depth,
                "alpha": list(s.alpha),
                **rho_entry(alg, s.rho),
                "t_max": t_max,
                "n_points": n,
                "original_time": False,
            },
        )
        for depth, t_max, n in zip(s.depths, s.t_max, s.n_points, strict=True)
        for alg in s.algorithms
    ]


def references(mu: np.ndarray) -> dict[int, np.ndarray]:
    """The l1 (``e_j`` of the largest ``mu_j``) and l2 (``mu / |mu|``) max-margin directions
    of the single example ``(mu, +1)``."""
    e = np.zeros(mu.size)
    e[int(np.argmax(mu))] = 1.0
    return {1: e, 2: mu / np.linalg.norm(mu)}


def draw_fig1(results: list[Result], s: Setting, path: Path) -> None:
    """One panel per depth: each path of beta, the reference rays, the ends marked."""
    mu = np.asarray(s.mu, dtype=float)
    refs = references(mu)
    n = len(s.depths)
    fig, axes = plt.subplots(
        1,
        n,
        figsize=(style.DOUBLE, style.DOUBLE / max(n, 2) + 0.9),
        squeeze=False,
        constrained_layout=True,
    )
    k = len(s.algorithms)
    stopped = False
    for i, (ax, depth, t_max) in enumerate(zip(axes[0], s.depths, s.t_max, strict=True)):
        stopped |= _draw_depth_panel(ax, depth, t_max, results[i * k : (i + 1) * k], refs, s)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    if stopped:
        handles.append(stopped_handle())
        labels.append("run ended early")
    fig.legend(
        handles,
        labels,
        loc="outside lower center",
        ncol=min(len(labels), 4),
        title=rf"$\mu$ = {show(s.mu)}, $\alpha$ = {show(s.alpha)}, $\rho$ = {s.rho:g}",
    )
    style.panel_letters(axes[0])
    save(fig, path)


def _draw_depth_panel(
    ax, depth: int, t_max: float, runs: list[Result], refs: dict, s: Setting
) -> bool:
    """One depth: the paths, the reference rays named at their tips, the start point; whether
    a run ended early."""
    rmax, stopped = 0.0, False
    for alg, res in zip(s.algorithms, runs, strict=True):
        reach, early = _draw_path(ax, alg, res, depth, s)
        rmax, stopped = max(rmax, reach), stopped or early
    reach = 1.1 * rmax
    names = {p: name.format(d=len(s.mu)) for p, name in RAY_NAMES.items()}
    draw_reference_rays(
        ax, refs, reach, names, with_vector=False, lw=6, alpha=0.35, solid_capstyle="butt", zorder=0
    )
    start = np.asarray(s.alpha, dtype=float) ** depth
    point = np.log1p(np.linalg.norm(start)) * start / np.linalg.norm(start)
    ax.plot(*point, label=r"start $\beta(0) = \alpha^L$", **START_MARK)
    lim = (-0.05 * reach, 1.12 * reach)
    ax.set(xlim=lim, ylim=lim)
    ax.set_box_aspect(1.0)
    ax.grid(alpha=0.3, lw=0.4)
    ax.set_xlabel(r"$\beta_1 \log(1+\|\beta\|_2) / \|\beta\|_2$")
    ax.set_ylabel(r"$\beta_2 \log(1+\|\beta\|_2) / \|\beta\|_2$")
    ax.set_title(rf"$L$ = {depth}, $\tau \leq$ {t_max:g}")
    return stopped


def _draw_path(ax, alg: str, res: Result, depth: int, s: Setting) -> tuple[float, bool]:
    """One run's path (direction times log(1 + |beta|)), its end (the algorithm's marker, or ×
    if it ended early), the first time a coordinate reaches 0 and slides; returns the largest
    radius drawn and whether the run ended early."""
    u = directions(res)
    r = np.logaddexp(0.0, log_norm(res))
    pts = u * r[:, None]
    ax.plot(pts[:, 0], pts[:, 1], **line_style(alg))
    early = stopped_early(res, f"{style.label(alg)} at L = {depth}", s)
    end = (
        STOPPED_MARK
        if early
        else {
            "marker": style.ALGORITHM_STYLES[alg].marker,
            "ms": 5.0,
            "color": style.ALGORITHM_STYLES[alg].color,
            "mec": "black",
            "mew": 0.5,
            "ls": "",
        }
    )
    ax.plot(*pts[-1], zorder=5, **end)
    slide = res["event_tau"][res["event_kind"] == "sliding"]
    if slide.size:
        k = min(int(np.searchsorted(res["tau"], slide[0])), len(pts) - 1)
        ax.annotate(
            rf"$\beta_{{{int(res['event_j'][res['event_kind'] == 'sliding'][0]) + 1}}}$ = 0,"
            f" slides from\nτ = {slide[0]:.2f}",
            pts[k],
            xytext=(14, 18),
            textcoords="offset points",
            color=style.ALGORITHM_STYLES[alg].color,
            arrowprops={"arrowstyle": "->", "color": style.ALGORITHM_STYLES[alg].color, "lw": 0.7},
        )
    return float(np.nanmax(r)), early


def check_fig1(s: Setting) -> str | None:
    """A setting's problem: not two features, alpha not one per feature, horizons not one per
    depth, an unknown algorithm."""
    if len(s.mu) != 2 or len(s.alpha) != 2:
        return f"mu and alpha must have two values (a plane), got {show(s.mu)}, {show(s.alpha)}"
    if not len(s.depths) == len(s.t_max) == len(s.n_points):
        return "depths, t_max and n_points must have one value per depth"
    return check_algorithms(s.algorithms)


DEPTH_CONTRAST = Figure(
    "fig1_depth_contrast",
    "μ = {mu}, α = {alpha}, ρ = {rho}: paths of β at L = {depths} with the max-margin rays",
    "Each point has the direction of β and radius log(1 + ‖β‖₂); each path ends at its "
    "algorithm's marker. Does depth decide the limit direction on the single example μ = {mu} "
    "(α = {alpha}, ρ = {rho}): at L = 1 do GD, ℓ∞-SAM and ℓ2-SAM all reach the ℓ2 max-margin "
    "direction, while at L = 2 ℓ∞-SAM ends on the minor feature e₁ (Cor 3.5: α₂ < ρ, β₂ reaches "
    "0 and slides) and GD and ℓ2-SAM on the ℓ1 max-margin e₂?",
    fig1_tasks,
    draw_fig1,
    params={
        "mu": (1.0, 2.0),
        "alpha": (1.5, 0.8),
        "rho": 1.0,
        "depths": (1, 2),
        "algorithms": ALGORITHMS,
        "t_max": (300.0, 5.0),
        "n_points": (3001, 501),
    },
    quick={"t_max": (2.0, 0.5), "n_points": (41, 21)},
    example={"alpha": (1.4, 0.7), "rho": 0.9, "algorithms": ("gd", "linf-sam")},
    check=check_fig1,
)


if __name__ == "__main__":
    figure_command(__spec__.name, DEPTH_CONTRAST)
