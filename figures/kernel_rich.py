"""Figure 18 (``fig18_kernel_rich``): from the kernel to the rich regime, GD and SAM flows in
regression against the implicit-bias limit of GD.

On the sparse regression of figure 17 (n = 20, d = 30, 3-sparse teacher), flows of GD, USAM
(rho = 0.1) and 1-USAM (rho = 0.2; the public code's 1-SAM at 0.1) from ``u = alpha``,
``v = 0`` run until the training loss falls to 1e-9; beside them the interpolator that
minimises GD's potential (:func:`analysis.implicit_bias.woodworth_interpolator`), and its two
ends: the minimum-l2 interpolator (alpha -> inf, the kernel regime) and the minimum-l1 one
(alpha -> 0, the rich regime; here the teacher itself). Panels: the test loss and the
l1 norm of the limit against alpha.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.implicit_bias import (
    min_l1_interpolator,
    min_l2_interpolator,
    woodworth_interpolator,
)
from flows.datasets import sparse_regression
from flows.results import Cause, Trajectory
from flows.sweep.registry import Result, Task

from .common import OKABE_ITO, Figure, Setting, figure_command, plt, save

ALPHAS18 = (0.03, 0.1, 0.3, 1.0, 3.0)
D18 = 30
FLOOR18 = 1e-9
RUNS18 = {"gd": {}, "usam": {"rho": 0.1}, "1-usam": {"rho": 0.2}}
#: 1-USAM starts at alpha = 0.1: from 0.03 its flow needs ~20 s to reach the floor.
FIRST18 = {"gd": 0, "usam": 0, "1-usam": 1}
LABELS18 = {"gd": "GD flow", "usam": "USAM flow (ρ = 0.1)", "1-usam": "1-USAM flow (ρ = 0.2)"}
COLORS18 = {"gd": "k", "usam": OKABE_ITO[5], "1-usam": OKABE_ITO[1]}


def _init(alpha: float) -> list[list[float]]:
    return [[alpha] * D18, [0.0] * D18]


def fig18_tasks(s: Setting) -> list[Task]:
    """One flow per algorithm and alpha, to the loss floor."""
    split = sparse_regression()
    return [
        Task(
            "simulate",
            {
                "X": split.train.X.tolist(),
                "y": split.train.y.tolist(),
                "task": "regression",
                "algorithm": a,
                "depth": 2,
                "alpha": _init(alpha),
                "t_max": 1e5,
                "n_points": 2,
                "loss_floor": FLOOR18,
                "rtol": 1e-9,
                **hp,
            },
        )
        for a, hp in RUNS18.items()
        for alpha in _alphas(a, s.quick)
    ]


def _alphas(algorithm: str, quick: bool) -> tuple[float, ...]:
    """The initialisation scales of ``algorithm``'s flows."""
    return ALPHAS18[max(FIRST18[algorithm], 2 if quick else 0) :]


def _test_loss(beta: np.ndarray, test) -> float:
    r = test.X @ beta - test.y
    return float(0.5 * np.mean(r * r))


def draw_fig18(results: list[Result], s: Setting, path: Path) -> None:
    """Test loss and ||beta||_1 of the limits against alpha."""
    split = sparse_regression()
    fine = np.geomspace(ALPHAS18[0], ALPHAS18[-1], 41)
    limits = [woodworth_interpolator(split.train, init=np.array(_init(a))).beta for a in fine]
    l2, l1 = min_l2_interpolator(split.train).beta, min_l1_interpolator(split.train).beta
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), constrained_layout=True)
    measures = [
        (lambda b: _test_loss(b, split.test), "test loss", "log"),
        (lambda b: float(np.sum(np.abs(b))), "‖β‖₁ of the limit", "linear"),
    ]
    for ax, (measure, label, scale) in zip(axes, measures, strict=True):
        ax.plot(fine, [measure(b) for b in limits], color="0.55", lw=4, alpha=0.6,
                label="GD's implicit-bias limit (Woodworth potential)")  # fmt: skip
        ax.axhline(measure(l2), color=OKABE_ITO[6], ls="--", label="min ℓ2 interpolator (α → ∞)")
        if scale == "linear":  # basis pursuit recovers the teacher: its test loss is ~1e-32
            ax.axhline(measure(l1), color=OKABE_ITO[2], ls="--",
                       label="min ℓ1 interpolator (α → 0) = the teacher")  # fmt: skip
        start = 0
        for a in RUNS18:
            alphas = _alphas(a, s.quick)
            runs = [Trajectory.from_arrays(r) for r in results[start : start + len(alphas)]]
            start += len(alphas)
            ends = [t.beta[-1] for t in runs]
            reached = [t.cause is Cause.LOSS_FLOOR for t in runs]
            values = [measure(b) for b in ends]
            ax.plot(alphas, values, "o-" if a != "gd" else "o", color=COLORS18[a], label=LABELS18[a],
                    ms=7 if a == "gd" else 5)  # fmt: skip
            for alpha, value, ok in zip(alphas, values, reached, strict=True):
                if not ok:
                    ax.plot(alpha, value, "s", mfc="none", mec="r", ms=11)
        ax.set(xscale="log", yscale=scale, xlabel="initialisation scale α (u = α, v = 0)",
               ylabel=label)  # fmt: skip
        ax.grid(alpha=0.3, which="both")
    axes[0].set_title("test loss of the interpolator reached (training loss 1e-9)")
    axes[1].set_title(f"sparsity: the teacher has ‖θ*‖₁ = {np.abs(split.teacher).sum():.3g}")
    axes[0].plot([], [], "s", mfc="none", mec="r", label="loss floor not reached")
    axes[0].legend(fontsize=8, loc="lower right")
    axes[1].legend(*axes[1].get_legend_handles_labels(), fontsize=8, loc="upper left")
    fig.suptitle(
        "Kernel → rich regime in regression: GD flows end at the Woodworth interpolator, SAM flows "
        "beyond it (β = u ⊙ v, sparse regression n = 20, d = 30)"
        + ("  [QUICK]" if s.quick else ""),
        fontsize=11,
    )
    save(fig, path)


KERNEL_RICH = Figure(
    "fig18_kernel_rich",
    "Test loss and l1 norm of the limits of GD, USAM and 1-USAM flows against alpha, with GD's "
    "implicit-bias limit and its l2 / l1 ends",
    "Do GD flows in regression end at the interpolator of Woodworth's potential for every "
    "initialisation scale, and how much sparser are the interpolators the SAM flows reach?",
    fig18_tasks,
    draw_fig18,
)


if __name__ == "__main__":
    figure_command(__spec__.name, KERNEL_RICH)
