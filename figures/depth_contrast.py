"""Figure 1 (``fig1_depth_contrast``): where the direction of beta goes on one example, at
depth 1 and 2, against the max-margin references.

The single example ``mu = (1, 2)``, ``alpha = (1.5, 0.8)``, ``rho = 1``: paths of beta in the
plane for GD, l_inf-SAM and l2-SAM at L = 1 and L = 2, with the l1 (``e_2``) and l2
(``mu/|mu|``) max-margin rays. Thm 3.1 (L = 1: all three go to the l2 max-margin direction)
against Cor 3.5 (L = 2: l_inf-SAM goes to ``e_1`` because ``alpha_2 < rho``, while GD and
l2-SAM go to ``e_2``).

Figures 6 and 7, on the same theme, are in :mod:`figures.maxmargin_angles` and
:mod:`figures.blobs`; the shared pieces (directions, angles, references, legend colours) are in
:mod:`figures.directions`. Clock: the rescaled one (docs/theory.md §3).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flows.sweep.registry import Result, Task

from .common import Figure, Setting, figure_command, plt, save
from .compared import ALGORITHMS, COLORS, NAMES, rho_entry
from .directions import directions, draw_reference_rays, format_vector, log_norm
from .multi_sample import Horizons

FIG1_MU = [1.0, 2.0]
FIG1_ALPHA = [1.5, 0.8]
FIG1_RHO = 1.0
FIG1_HORIZONS: Horizons = {
    True: {1: (2.0, 41), 2: (0.5, 21)},
    False: {1: (300.0, 3001), 2: (5.0, 501)},
}
#: line style of each algorithm's path (GD wide and light, under the two SAMs)
PATH_STYLES = {
    "gd": dict(lw=5, alpha=0.35),
    "l2-sam": dict(lw=2.2, ls="--"),
    "linf-sam": dict(lw=1.6, ls="-"),
}
#: legend names of the max-margin rays by p
RAY_NAMES = {1: "ℓ1 max-margin e₂ =", 2: "ℓ2 max-margin μ/‖μ‖ ="}
#: panel titles by depth (formatted with the horizon ``tmax``)
TITLES = {
    1: "L = 1 (τ ≤ {tmax:g}): all three → ℓ2 max-margin (Thm 3.1)\n"
    "paths coincide: at L = 1 the rescaled field is μ whatever ε is",
    2: "L = 2 (τ ≤ {tmax:g}): GD, ℓ2-SAM → e₂ (ℓ1 max-margin);\n"
    "ℓ∞-SAM → e₁, the minor feature (Cor 3.5: α₂ = 0.8 < ρ)",
}


def fig1_tasks(s: Setting) -> list[Task]:
    """GD, l_inf-SAM, l2-SAM on D_mu at L = 1 and 2 (order: depth-major, ALGORITHMS)."""
    out = []
    for depth in (1, 2):
        t_max, n = FIG1_HORIZONS[s.quick][depth]
        for alg in ALGORITHMS:
            out.append(
                Task(
                    "simulate",
                    {
                        "mu": FIG1_MU,
                        "algorithm": alg,
                        "depth": depth,
                        "alpha": FIG1_ALPHA,
                        **rho_entry(alg, FIG1_RHO),
                        "t_max": t_max,
                        "n_points": n,
                        "original_time": False,
                    },
                )
            )
    return out


def draw_fig1(results: list[Result], s: Setting, path: Path) -> None:
    """Two panels: beta drawn as its direction times log(1 + |beta|), with the reference rays."""
    mu = np.array(FIG1_MU)
    refs = {1: np.array([0.0, 1.0]), 2: mu / np.linalg.norm(mu)}
    fig, axes = plt.subplots(1, 2, figsize=(12, 6.0), constrained_layout=True)
    for ax, depth, runs in zip(axes, (1, 2), (results[:3], results[3:]), strict=True):
        _draw_depth_panel(ax, depth, runs, refs)
    fig.suptitle(
        "Depth contrast on one example μ = (1, 2), α = (1.5, 0.8), ρ = 1, rescaled "
        "clock: each point has the direction of β and radius log(1+‖β‖₂)"
        + ("  [QUICK]" if s.quick else ""),
        fontsize=11,
    )
    save(fig, path)


def _draw_depth_panel(ax, depth: int, runs: list[Result], refs: dict) -> None:
    """One depth: the three paths, the reference rays, the start / end legend entries."""
    rmax = 0.0
    for alg, res in zip(ALGORITHMS, runs, strict=True):
        rmax = max(rmax, _draw_path(ax, alg, res))
    reach = 1.08 * rmax
    draw_reference_rays(
        ax, refs, reach, RAY_NAMES, lw=8, alpha=0.4, solid_capstyle="butt", zorder=0
    )
    ax.plot([], [], ls="", marker="o", color="grey", label="start (β(0) = α^L)")
    ax.plot([], [], ls="", marker="*", ms=12, color="grey", label="end of run")
    ax.set_xlim(-0.05 * reach, 1.05 * reach)
    ax.set_ylim(-0.05 * reach, 1.05 * reach)
    ax.set_aspect("equal")
    ax.grid(alpha=0.3)
    ax.set_xlabel("β₁ · log(1+‖β‖₂) / ‖β‖₂")
    ax.set_ylabel("β₂ · log(1+‖β‖₂) / ‖β‖₂")
    ax.set_title(TITLES[depth].format(tmax=runs[0]["tau"][-1]), fontsize=10.5)
    ax.legend(loc="center right", fontsize=8.5, framealpha=0.9)


def _draw_path(ax, alg: str, res: Result) -> float:
    """One run's path (direction times log(1 + |beta|)), its start and end, and where beta_2
    starts to slide; returns the largest radius drawn."""
    u = directions(res)
    r = np.logaddexp(0.0, log_norm(res))
    pts = u * r[:, None]
    ax.plot(
        pts[:, 0],
        pts[:, 1],
        color=COLORS[alg],
        **PATH_STYLES[alg],
        label=f"{NAMES[alg]}: final β/‖β‖ = {format_vector(u[-1])}",
    )
    ax.plot(*pts[-1], marker="*", ms=17, color=COLORS[alg], mec="black", mew=0.7, zorder=5)
    ax.plot(*pts[0], marker="o", ms=7, color="grey", zorder=4)
    slide = [
        t for t, kind in zip(res["event_tau"], res["event_kind"], strict=True) if kind == "sliding"
    ]
    if slide:
        k = int(np.searchsorted(res["tau"], slide[0]))
        ax.annotate(
            f"β₂ reaches 0 and slides\n(τ = {slide[0]:.2f})",
            pts[k],
            xytext=(pts[k][0] + 0.9, pts[k][1] + 1.2),
            fontsize=9,
            color=COLORS[alg],
            arrowprops=dict(arrowstyle="->", color=COLORS[alg]),
        )
    return float(np.nanmax(r))


DEPTH_CONTRAST = Figure(
    "fig1_depth_contrast",
    "mu=(1,2): beta paths of GD / linf-SAM / l2-SAM at L=1 and L=2 with max-margin rays",
    "Does depth decide the limit direction: at L = 1 do GD, ℓ∞-SAM and ℓ2-SAM all reach the "
    "ℓ2 max-margin direction, while at L = 2 ℓ∞-SAM ends on the minor feature e₁ (Cor 3.5) and "
    "GD and ℓ2-SAM on the ℓ1 max-margin e₂?",
    fig1_tasks,
    draw_fig1,
)


if __name__ == "__main__":
    figure_command(__spec__.name, DEPTH_CONTRAST)
