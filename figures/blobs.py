"""Figure 7 (``fig7_gaussian_blobs``): two Gaussian blobs with means ``+-(1, 2)``: the data with
the final directions of beta, the polar angle of beta against tau, and the training loss, for
GD / l2-SAM / l_inf-SAM at L = 2 and L = 1 (:mod:`figures.multi_sample`). Clock: the rescaled
one (docs/theory.md §3).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from flows import datasets
from flows.sweep.registry import Result, Task

from .common import OKABE_ITO, Figure, Setting, figure_command, plt, save
from .compared import ALGORITHMS, COLORS, NAMES
from .directions import (
    REF_COLORS,
    angles_deg,
    directions,
    draw_reference_rays,
    format_vector,
    references,
)
from .multi_sample import Horizons, multi_sample_tasks

FIG7_ALPHA = [1.5, 0.8]
FIG7_RHO = 1.0
FIG7_HORIZONS: Horizons = {
    True: {1: (5.0, 21), 2: (0.5, 21)},
    False: {1: (1000.0, 2001), 2: (8.0, 801)},
}
#: the depths of the runs, in task order, and their line styles
FIG7_DEPTHS = ((2, "-"), (1, "--"))


def gaussian_blobs() -> tuple[np.ndarray, np.ndarray]:
    """Figure 7's data, :func:`flows.datasets.gaussian_blobs` (means +-(1, 2), n = 40, std 0.6,
    seed 5), as arrays."""
    data = datasets.gaussian_blobs()
    return np.array(data.X), np.array(data.y)


def fig7_tasks(s: Setting) -> list[Task]:
    """Three algorithms at L = 2 then L = 1 on :func:`gaussian_blobs`."""
    X, y = gaussian_blobs()
    return multi_sample_tasks(
        X, y, tuple(d for d, _ in FIG7_DEPTHS), FIG7_ALPHA, FIG7_RHO, FIG7_HORIZONS, s.quick
    )


def draw_fig7(results: list[Result], s: Setting, path: Path) -> None:
    """Data with final-direction rays; polar angle of beta vs tau; loss vs tau."""
    X, y = gaussian_blobs()
    refs = references(X, y)
    fig, (ax0, ax1, ax2) = plt.subplots(
        1,
        3,
        figsize=(17, 5.6),
        constrained_layout=True,
        gridspec_kw={"width_ratios": [1.05, 1.2, 1.0]},
    )
    _draw_data(ax0, X, y, refs, results)
    _draw_polar_angles(ax1, refs, results)
    _draw_losses(ax2, results)
    fig.suptitle(
        f"Gaussian blobs, n = {len(y)}, means ±(1, 2), std 0.6 (seed 5); α = "
        f"{tuple(FIG7_ALPHA)}, ρ = {FIG7_RHO:g}, rescaled clock; ℓ∞-SAM with exact Filippov "
        "sliding" + ("  [QUICK]" if s.quick else ""),
        fontsize=10.5,
    )
    save(fig, path)


def _runs(results: list[Result]) -> Iterator[tuple[int, str, str, Result]]:
    """``(depth, line style, algorithm, result)`` of every run, in task order."""
    for i, (depth, ls) in enumerate(FIG7_DEPTHS):
        runs = results[i * len(ALGORITHMS) : (i + 1) * len(ALGORITHMS)]
        for alg, res in zip(ALGORITHMS, runs, strict=True):
            yield depth, ls, alg, res


def _draw_data(ax, X: np.ndarray, y: np.ndarray, refs: dict, results: list[Result]) -> None:
    """The two blobs, the points that ``e_1`` misclassifies, the max-margin rays and the final
    direction of every run (arrows)."""
    pos, neg = y > 0, y < 0
    ax.scatter(
        X[pos, 0],
        X[pos, 1],
        s=22,
        marker="o",
        color=OKABE_ITO[2],
        edgecolor="k",
        lw=0.4,
        label="y = +1 (mean (1, 2))",
    )
    ax.scatter(
        X[neg, 0],
        X[neg, 1],
        s=26,
        marker="s",
        color=OKABE_ITO[7],
        edgecolor="k",
        lw=0.4,
        label="y = −1 (mean −(1, 2))",
    )
    bad = y * X[:, 0] <= 0
    ax.scatter(
        X[bad, 0],
        X[bad, 1],
        s=170,
        facecolor="none",
        edgecolor=COLORS["linf-sam"],
        lw=1.5,
        label="point e₁ misclassifies",
    )
    R = 3.6
    names = {p: f"ℓ{p} max-margin" for p in refs}
    draw_reference_rays(ax, refs, R, names, lw=7, alpha=0.45, solid_capstyle="round")
    for _, ls, alg, res in _runs(results):
        u = directions(res)[-1]
        ax.annotate(
            "",
            xy=(R * u[0], R * u[1]),
            xytext=(0, 0),
            arrowprops=dict(
                arrowstyle="-|>", color=COLORS[alg], lw=1.8, ls=ls, shrinkA=0, shrinkB=0
            ),
        )
    ax.plot([], [], color="grey", lw=1.8, label="final β/‖β‖, L = 2 (solid)")
    ax.plot([], [], color="grey", lw=1.8, ls="--", label="final β/‖β‖, L = 1 (dashed)")
    for alg in ALGORITHMS:
        ax.plot([], [], color=COLORS[alg], lw=2.5, label=NAMES[alg])
    ax.axhline(0, color="0.6", lw=0.6)
    ax.axvline(0, color="0.6", lw=0.6)
    ax.set_aspect("equal")
    ax.set(
        xlim=(-3.4, 4.0),
        ylim=(-3.4, 4.0),
        xlabel="x₁ (and β₁ direction)",
        ylabel="x₂ (and β₂ direction)",
        title="data and final directions of β (arrows)",
    )
    ax.text(
        3.9,
        -0.25,
        "L = 2 ℓ∞-SAM → e₁",
        color=COLORS["linf-sam"],
        ha="right",
        va="top",
        fontsize=8.5,
    )
    ax.legend(fontsize=7.5, loc="upper left", framealpha=0.9)


def _draw_polar_angles(ax, refs: dict, results: list[Result]) -> None:
    """Polar angle of beta against tau, with the references' angles and a summary per run."""
    summary = []
    for depth, ls, alg, res in _runs(results):
        u = directions(res)
        phi = np.degrees(np.arctan2(u[:, 1], u[:, 0]))
        keep = res["tau"] > 0
        ax.plot(res["tau"][keep], phi[keep], color=COLORS[alg], ls=ls, lw=2)
        summary.append(
            f"L={depth} {NAMES[alg]}: φ = {phi[-1]:.2f}°, "
            f"∠ℓ1 = {angles_deg(res, refs[1])[-1]:.2g}°, "
            f"∠ℓ2 = {angles_deg(res, refs[2])[-1]:.2g}°"
        )
    for p, r in refs.items():
        phi = np.degrees(np.arctan2(r[1], r[0]))
        ax.axhline(
            phi, color=REF_COLORS[p], lw=6, alpha=0.45, label=f"ℓ{p} max-margin (φ = {phi:.1f}°)"
        )
    ax.set_xscale("log")
    ax.set(
        xlabel="rescaled time τ (log scale)",
        ylabel="polar angle φ of β = atan2(β₂, β₁) [deg]",
        title="direction of β(τ): L = 2 solid, L = 1 dashed",
        ylim=(-5, 95),
    )
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="center left")
    ax.text(
        0.98,
        0.12,
        "\n".join(summary),
        transform=ax.transAxes,
        fontsize=7.5,
        ha="right",
        va="bottom",
        bbox=dict(boxstyle="round", fc="white", alpha=0.9, ec="0.7"),
    )


def _draw_losses(ax, results: list[Result]) -> None:
    """Training loss against tau; the title gives where L = 2 l_inf-SAM stops."""
    for _, ls, alg, res in _runs(results):
        keep = res["tau"] > 0
        ax.plot(res["tau"][keep], res["loss"][keep], color=COLORS[alg], ls=ls, lw=2)
    stuck = results[ALGORITHMS.index("linf-sam")]  # L = 2, the first depth
    stuck_beta = np.sign(stuck["sign_beta"][-1]) * np.exp(stuck["log_abs_beta"][-1])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(1e-16, 2.0)
    ax.set(
        xlabel="rescaled time τ (log scale)",
        ylabel="training loss (logistic, mean)",
        title="loss: L = 2 ℓ∞-SAM stops at a non-separating\nstationary point "
        f"(β = {format_vector(stuck_beta)}, loss {stuck['loss'][-1]:.3g})",
    )
    ax.grid(alpha=0.3, which="both")
    handles = [plt.Line2D([], [], color=COLORS[a], lw=2, label=NAMES[a]) for a in ALGORITHMS]
    handles += [
        plt.Line2D([], [], color="grey", lw=2, label="L = 2"),
        plt.Line2D([], [], color="grey", lw=2, ls="--", label="L = 1"),
    ]
    ax.legend(handles=handles, fontsize=8, loc="lower left")


GAUSSIAN_BLOBS = Figure(
    "fig7_gaussian_blobs",
    "Gaussian blobs +-(1,2): final directions, direction angle and loss vs tau",
    "On two Gaussian blobs, where does the direction of β go for each algorithm at L = 1 and "
    "L = 2, and does ℓ∞-SAM at L = 2 stop at a non-separating stationary point?",
    fig7_tasks,
    draw_fig7,
)


if __name__ == "__main__":
    figure_command(__spec__.name, GAUSSIAN_BLOBS)
