"""Figure 6 (``fig6_maxmargin_angles``): how fast the direction of beta approaches the
max-margin directions on generic separable data.

Seeded separable data (n = 12, d = 3, random teacher with a margin): angle between
``beta(tau)/|beta|`` and the l1 / l2 max-margin directions against the rescaled time, GD /
l2-SAM / l_inf-SAM at L = 1 and L = 2 (:mod:`figures.multi_sample`).

Clock: the rescaled one (docs/theory.md §3); for n > 1 the engine divides by
``c = (1/n) sum_i |l'(m_i(theta + eps))|``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flows import datasets
from flows.sweep.registry import Result, Task

from .common import Figure, Setting, figure_command, plt, save
from .compared import ALGORITHMS, COLORS, NAMES
from .directions import angles_deg, format_vector, references
from .multi_sample import Horizons, multi_sample_tasks

FIG6_RHO = 0.1
FIG6_ALPHA = 1.0
FIG6_HORIZONS: Horizons = {
    True: {1: (5.0, 21), 2: (1.0, 21)},
    False: {1: (3000.0, 6001), 2: (8.0, 801)},
}


def teacher_data() -> tuple[np.ndarray, np.ndarray]:
    """Figure 6's data, :func:`flows.datasets.teacher_data` (n = 12, d = 3, seed 90: a 30 deg
    angle between the l1 and l2 max-margin directions), as arrays."""
    data = datasets.teacher_data()
    return np.array(data.X), np.array(data.y)


def fig6_tasks(s: Setting) -> list[Task]:
    """Three algorithms at L = 1 and 2 on :func:`teacher_data` (depth-major)."""
    X, y = teacher_data()
    return multi_sample_tasks(X, y, (1, 2), FIG6_ALPHA, FIG6_RHO, FIG6_HORIZONS, s.quick)


def draw_fig6(results: list[Result], s: Setting, path: Path) -> None:
    """Angle to the l2 (solid) and l1 (dashed) max-margin directions against tau, log-log."""
    X, y = teacher_data()
    refs = references(X, y)
    between = np.degrees(np.arccos(np.clip(refs[1] @ refs[2], -1, 1)))
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2), constrained_layout=True)
    for ax, depth, runs in zip(axes, (1, 2), (results[:3], results[3:]), strict=True):
        lines = []
        for alg, res in zip(ALGORITHMS, runs, strict=True):
            tau = res["tau"]
            keep = tau > 0
            a2, a1 = angles_deg(res, refs[2]), angles_deg(res, refs[1])
            wide = dict(lw=5, alpha=0.35) if alg == "gd" else dict(lw=1.8)
            ax.plot(tau[keep], a2[keep], color=COLORS[alg], **wide)
            ax.plot(tau[keep], a1[keep], color=COLORS[alg], ls="--", **wide)
            lines.append(f"{NAMES[alg]}: ∠ℓ2 = {a2[-1]:.3g}°, ∠ℓ1 = {a1[-1]:.3g}°")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(1e-2 if not s.quick else None, 120)
        ax.set_xlabel("rescaled time τ (log scale)")
        ax.set_ylabel("angle between β(τ) and the max-margin direction\n[degrees, log scale]")
        ax.grid(alpha=0.3, which="both")
        ax.text(
            0.02,
            0.03,
            f"at τ = {runs[0]['tau'][-1]:g}:\n" + "\n".join(lines),
            transform=ax.transAxes,
            fontsize=8.5,
            va="bottom",
            bbox=dict(boxstyle="round", fc="white", alpha=0.9, ec="0.7"),
        )
        if depth == 1:
            ax.set_title("L = 1: all → ℓ2 max-margin (Thm 3.1), angle ∝ 1/τ (slow)", fontsize=10.5)
        else:
            ax.set_title("L = 2: GD → ℓ1 max-margin (KKT point); here both SAMs too", fontsize=10.5)
    handles = [
        plt.Line2D(
            [],
            [],
            color=COLORS[a],
            label=NAMES[a],
            **(dict(lw=5, alpha=0.35) if a == "gd" else dict(lw=1.8)),
        )
        for a in ALGORITHMS
    ]
    handles += [
        plt.Line2D([], [], color="grey", lw=2, label="angle to ℓ2 max-margin"),
        plt.Line2D([], [], color="grey", lw=1.5, ls="--", label="angle to ℓ1 max-margin"),
    ]
    fig.legend(handles=handles, loc="outside right center", fontsize=9)
    fig.suptitle(
        f"Separable data n = {len(y)}, d = {X.shape[1]} (teacher seed 90), α = "
        f"{FIG6_ALPHA:g}, ρ = {FIG6_RHO:g}; ℓ1 max-margin {format_vector(refs[1])}, "
        f"ℓ2 max-margin {format_vector(refs[2])}, {between:.1f}° apart"
        + ("  [QUICK]" if s.quick else ""),
        fontsize=10.5,
    )
    save(fig, path)


MAXMARGIN_ANGLES = Figure(
    "fig6_maxmargin_angles",
    "n=12, d=3 data: angle to l1/l2 max-margin vs tau, GD / l2-SAM / linf-SAM, L=1,2",
    "On generic separable data, does β(τ) approach the ℓ2 max-margin direction at L = 1 and "
    "the ℓ1 max-margin direction at L = 2, for GD and for both SAMs, and how fast?",
    fig6_tasks,
    draw_fig6,
)


if __name__ == "__main__":
    figure_command(__spec__.name, MAXMARGIN_ANGLES)
