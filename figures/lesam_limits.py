"""Figure 14 (``fig14_lesam_limits``): where USAM and LE-SAM go in direction (settings:
:mod:`figures.lesam`).

Angle of ``beta(tau)`` to the l1 and l2 max-margin directions, at L = 1 and 2, on the Gaussian
blobs of figure 7 (:func:`figures.blobs.gaussian_blobs`) and on the n = 12, d = 3 teacher data
of figure 6 (:func:`figures.maxmargin_angles.teacher_data`), alpha = 1. Matched settings per
data set: l2-SAM's ``rho = 1``, LE-SAM ``sigma = ||grad L(theta(0))||``, USAM
``rho = 1 / ||grad L(theta(0))||`` (:func:`figures.lesam.matched`); LE-SAM caps
``rho_max = 1.5`` and 3, and the shape of the official warm-up + cosine budget ending with the run.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flows.sweep.registry import Result, Task

from .blobs import gaussian_blobs
from .common import Figure, Setting, figure_command, plt, save
from .directions import angles_deg, references
from .lesam import as_params, matched, run_style
from .maxmargin_angles import teacher_data
from .multi_sample import data_task

FIG14_KEYS = ("gd", "usam", "le15", "le3", "wc3")
#: (name, builder, {depth: (t_max, n_points)})
FIG14_SETS = (
    ("Gaussian blobs ±(1, 2), n = 40", gaussian_blobs, {1: (1000.0, 501), 2: (8.0, 321)}),
    ("teacher data n = 12, d = 3", teacher_data, {1: (200.0, 401), 2: (8.0, 321)}),
)
FIG14_ALPHA = 1.0


def fig14_runs(quick: bool):
    """(data name, X, y, depth, t_max, n, run tuple) in task order."""
    for name, build, horizons in FIG14_SETS:
        X, y = build()
        for depth in (1, 2):
            t_max, n = (2.0, 21) if quick else horizons[depth]
            for run in matched(X, y, FIG14_ALPHA, depth, t_max):
                if run[0] in FIG14_KEYS:
                    yield name, X, y, depth, t_max, n, run


def fig14_tasks(s: Setting) -> list[Task]:
    """GD, USAM and LE-SAM at L = 1 and 2 on the blobs and the teacher data."""
    return [
        data_task(X, y, alg, as_params(hp), depth, FIG14_ALPHA, t_max, n, "simulate")
        for _, X, y, depth, t_max, n, (_, alg, hp, _) in fig14_runs(s.quick)
    ]


def draw_fig14(results: list[Result], s: Setting, path: Path) -> None:
    """Angle to the l2 (solid) and l1 (dashed) max-margin directions against tau, per panel."""
    fig, axes = plt.subplots(2, 2, figsize=(14, 9.4), constrained_layout=True)
    panels: dict[tuple[str, int], list] = {}
    for (name, X, y, depth, _, _, run), res in zip(fig14_runs(s.quick), results, strict=True):
        panels.setdefault((name, depth), []).append((X, y, run, res))
    for ax, ((name, depth), runs) in zip(axes.ravel(), panels.items(), strict=True):
        refs = references(runs[0][0], runs[0][1])
        between = np.degrees(np.arccos(np.clip(refs[1] @ refs[2], -1.0, 1.0)))
        lines = []
        for _, _, (key, *_), res in runs:
            keep = res["tau"] > 0
            a2, a1 = angles_deg(res, refs[2]), angles_deg(res, refs[1])
            ax.plot(res["tau"][keep], a2[keep], **run_style(key))
            ax.plot(res["tau"][keep], a1[keep], **{**run_style(key), "ls": "--", "lw": 1.2})
            lines.append(
                f"{key:5s} to l2 {a2[-1]:7.3g}°  to l1 {a1[-1]:7.3g}°  loss {res['loss'][-1]:.2g}"
            )
        ax.set(
            xscale="log",
            yscale="log",
            ylim=(1e-4, 120),
            xlabel="rescaled time τ (log)",
            ylabel="angle to max-margin direction [deg]",
            title=f"{name}, L = {depth} (ℓ1 and ℓ2 max-margin {between:.1f}° apart)",
        )
        ax.grid(alpha=0.3, which="both")
        ax.text(
            0.02,
            0.02,
            f"at τ = {runs[0][3]['tau'][-1]:g}:\n" + "\n".join(lines),
            transform=ax.transAxes,
            fontsize=7.5,
            family="monospace",
            va="bottom",
            bbox=dict(fc="white", alpha=0.9, ec="0.6"),
        )
    handles = [
        plt.Line2D([], [], label=label, **run_style(key))
        for _, _, (key, _, _, label), _ in next(iter(panels.values()))
    ]
    handles += [
        plt.Line2D([], [], color="grey", lw=2, label="angle to ℓ2 max-margin"),
        plt.Line2D([], [], color="grey", lw=1.2, ls="--", label="angle to ℓ1 max-margin"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=4, fontsize=9)
    fig.suptitle(
        f"Limit directions of USAM and LE-SAM vs the max-margin solutions (α = "
        f"{FIG14_ALPHA:g}, matched to ℓ2-SAM ρ = 1 at θ(0))" + ("  [QUICK]" if s.quick else ""),
        fontsize=11,
    )
    save(fig, path)


LIMITS = Figure(
    "fig14_lesam_limits",
    "Angle of beta to the l1/l2 max-margin directions vs tau: GD, USAM, LE-SAM at L=1,2 (blobs, n=12 d=3)",
    "Do USAM and LE-SAM converge in direction to the same max-margin solution as GD (ℓ2 at L = 1, "
    "ℓ1 at L = 2), or does LE-SAM's budget change the limit?",
    fig14_tasks,
    draw_fig14,
)


if __name__ == "__main__":
    figure_command(__spec__.name, LIMITS)
