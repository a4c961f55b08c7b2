"""Figure 14 (``fig14_lesam_limits``): where USAM and LE-SAM go in direction (settings:
:mod:`figures.lesam`).

The angle of ``beta(tau)`` to the max-margin direction GD converges to at each depth (the l2
max-margin at L = 1, the l1 max-margin at L = 2), on the Gaussian blobs of figure 7
(:func:`figures.blobs.gaussian_blobs`) and on the n = 12, d = 3 teacher data of figure 6
(:func:`figures.maxmargin_angles.teacher_data`), from uniform ``alpha``. Matched settings per
data set: LE-SAM ``sigma = rho ||grad L(theta(0))||``, USAM ``rho / ||grad L(theta(0))||``
(:func:`figures.lesam.matched`); LE-SAM with each cap of ``rho_max``, and the warm-up + cosine
budget ending with the run with the last cap.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from flows.data import Dataset
from flows.sweep.registry import Result, Task

from . import style
from .blobs import gaussian_blobs
from .common import STOPPED_MARK, Figure, Setting, figure_command, plt, save, stopped_early
from .directions import angles_deg, references
from .lesam import RHO, Run, as_params, matched, run_style
from .maxmargin_angles import teacher_data
from .multi_sample import data_task

#: The data sets: name in titles, builder.
DATA = (("Gaussian blobs", gaussian_blobs), ("teacher data", teacher_data))
#: The reference each depth converges to under GD: the l2 max-margin at L = 1, l1 at L = 2.
LIMIT_P = {1: 2, 2: 1}
#: The matched runs drawn: GD, USAM and LE-SAM (l2-SAM and the official values left out).
DRAWN = ("gd", "usam", "le", "wc")


def horizon(s: Setting, k: int, depth: int) -> tuple[float, int]:
    """(t_max, n_points) of data set ``k`` at ``depth``."""
    if depth == 1:
        return s.horizon_L1[k], s.samples_L1[k]
    return s.horizon_L2, s.samples_L2


def fig14_runs(s: Setting) -> Iterator[tuple[str, np.ndarray, np.ndarray, int, float, int, Run]]:
    """(data name, X, y, depth, t_max, n, run) in task order."""
    for k, (name, build) in enumerate(DATA):
        X, y = build()
        for depth in (1, 2):
            t_max, n = horizon(s, k, depth)
            runs = matched(Dataset(X, y), s.alpha, depth, t_max, s.rho, s.rho_max, True)
            for run in runs:
                if run[0].startswith(DRAWN):
                    yield name, X, y, depth, t_max, n, run


def fig14_tasks(s: Setting) -> list[Task]:
    """GD, USAM and LE-SAM at L = 1 and 2 on the blobs and the teacher data."""
    return [
        data_task(X, y, alg, as_params(hp), depth, s.alpha, t_max, n, "simulate")
        for _, X, y, depth, t_max, n, (_, alg, hp, _) in fig14_runs(s)
    ]


def draw_fig14(results: list[Result], s: Setting, path: Path) -> None:
    """Angle to the depth's max-margin direction against tau, one panel per data set and
    depth (rows: data sets)."""
    fig, axes = plt.subplots(2, 2, figsize=(style.DOUBLE, 5.0), constrained_layout=True)
    panels: dict[tuple[str, int], list] = {}
    for (name, X, y, depth, _, _, run), res in zip(fig14_runs(s), results, strict=True):
        panels.setdefault((name, depth), []).append((X, y, run, res))
    any_stopped = False
    for ax, ((name, depth), runs) in zip(axes.ravel(), panels.items(), strict=True):
        refs = references(runs[0][0], runs[0][1])
        p = LIMIT_P[depth]
        between = np.degrees(np.arccos(np.clip(refs[1] @ refs[2], -1.0, 1.0)))
        for _, _, (key, _, _, label), res in runs:
            keep = res["tau"] > 0
            tau, angle = res["tau"][keep], angles_deg(res, refs[p])[keep]
            ax.plot(tau, angle, **run_style(key))
            if stopped_early(res, f"{label} on the {name}, L = {depth}", s):
                any_stopped = True
                ax.plot(tau[-1], angle[-1], **STOPPED_MARK)
        ax.axhline(between, color="0.5", lw=0.8, ls=(0, (4, 2)))
        ax.set(
            xscale="log",
            yscale="log",
            ylim=(1e-4, 120),
            xlabel=r"rescaled time $\tau$",
            ylabel=rf"angle to $\ell_{p}$ max-margin [deg]",
            title=f"{name}, L = {depth}: σ = {_sigma(runs):.3g}",
        )
        ax.grid(alpha=0.3, which="major")
    style.panel_letters(axes)
    handles = [
        plt.Line2D([], [], label=label, **run_style(key))
        for _, _, (key, _, _, label), _ in next(iter(panels.values()))
    ]
    handles.append(
        plt.Line2D(
            [],
            [],
            color="0.5",
            lw=0.8,
            ls=(0, (4, 2)),
            label=r"angle between the $\ell_1$ and $\ell_2$ max-margin directions",
        )  # fmt: skip
    )
    if any_stopped:
        handles.append(plt.Line2D([], [], label="run ended early", **STOPPED_MARK))
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncol=2,
        title=rf"$\alpha$ = {s.alpha:g}, matched at $\theta(0)$ to {style.label('l2-sam')} "
        rf"with $\rho$ = {s.rho:g} on each data set",
    )
    save(fig, path)


def _sigma(runs: list) -> float:
    """LE-SAM's matched constant budget among a panel's runs."""
    return next(hp["sigma"] for _, _, (key, _, hp, _), _ in runs if key.startswith("le"))


LIMITS = Figure(
    "fig14_lesam_limits",
    "Angle of beta to the max-margin direction of its depth (l2 at L = 1, l1 at L = 2) over "
    "tau: GD, USAM, LE-SAM (Gaussian blobs, teacher data n = 12, d = 3; alpha = {alpha})",
    "Do USAM and LE-SAM converge in direction to the max-margin solution GD converges to (ℓ2 "
    "at L = 1, ℓ1 at L = 2), or does LE-SAM's budget change the limit? Runs matched at θ(0) "
    "to ℓ2-SAM with ρ = {rho} on each data set (LE-SAM caps ρ_max = {rho_max}, the last also "
    "with the warm-up + cosine budget), α = {alpha}, to τ = {horizon_L1} at L = 1 (blobs, "
    "teacher data) and τ = {horizon_L2} at L = 2. Grey dashed: the angle between the two "
    "max-margin directions. × marks a run that ended early. The angles and losses at the end "
    "of the runs are in paper_repro.md.",
    fig14_tasks,
    draw_fig14,
    params={
        "alpha": 1.0,
        "rho": RHO,
        "rho_max": (1.5, 3.0),
        "horizon_L1": (1000.0, 200.0),
        "samples_L1": (501, 401),
        "horizon_L2": 8.0,
        "samples_L2": 321,
    },
    quick={"horizon_L1": (2.0, 2.0), "samples_L1": (21, 21), "horizon_L2": 2.0, "samples_L2": 21},
    example={"alpha": 0.9, "rho_max": (1.5, 2.5)},
)


if __name__ == "__main__":
    figure_command(__spec__.name, LIMITS)
