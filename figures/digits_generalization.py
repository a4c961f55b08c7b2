"""The digits study: test accuracy, training margin and angles to the max-margin predictors
over tau (``digits_generalization``; settings and runs: :mod:`figures.digits`).

Per pair: test accuracy, normalized l1 margin on the training set and the angles to the l1 (in
the init's orthant) and l2 max-margin predictors, GD / l2-SAM / LE-SAM / l_inf-SAM at L = 2
(solid) and 3 (dashed).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np

from analysis.maxmargin import normalized_margin
from analysis.saliency import accuracy, angles_to, normalized_margins
from flows.sweep.registry import Result

from .common import Figure, plt, save
from .digits import (
    ALGORITHMS,
    COLORS,
    DEPTH_STYLES,
    DEPTHS,
    LINE_STYLES,
    LOSS_FLOOR,
    PAIRS,
    algorithm_handles,
    by_run,
    pair_data,
    quick_tag,
    study_tasks,
)

#: the columns: (title, y label)
PANELS = (
    ("test accuracy", "fraction of the test set classified correctly"),
    ("normalized ℓ1 margin (train)", "minᵢ yᵢ⟨β, xᵢ⟩ / ‖β‖₁"),
    ("angle to the ℓ1 max-margin\nin the init's orthant", "angle [degrees]"),
    ("angle to the ℓ2 max-margin", "angle [degrees]"),
)


def _curves(res: Result, data) -> list[np.ndarray]:
    """The four quantities of :data:`PANELS` along one run."""
    lb, sb = res["log_abs_beta"], res["sign_beta"]
    return [
        accuracy(lb, sb, data.test.X, data.test.y),
        normalized_margins(lb, sb, data.train.X, data.train.y, 1),
        angles_to(lb, sb, data.references["ℓ1 in orthant"]),
        angles_to(lb, sb, data.references["ℓ2"]),
    ]


def draw_generalization(results: list[Result], quick: bool, path: Path) -> None:
    """Rows: pairs; columns: test accuracy, l1 margin, angles to the two references;
    L = 2 solid, L = 3 dashed."""
    runs_ = by_run(PAIRS, results)
    fig, axes = plt.subplots(len(PAIRS), len(PANELS), figsize=(18, 11.5), constrained_layout=True)
    for row, pair in enumerate(PAIRS):
        data = pair_data(pair)
        best = data.references["ℓ1 in orthant"]
        margin_best = normalized_margin(best, data.train.X, data.train.y, 1)
        for depth in DEPTHS:
            for alg, _ in ALGORITHMS:
                res = runs_[(pair, depth, alg)]
                keep = res["tau"] > 0
                for ax, values in zip(axes[row], _curves(res, data), strict=True):
                    ax.plot(
                        res["tau"][keep],
                        values[keep],
                        color=COLORS[alg],
                        ls=DEPTH_STYLES[depth],
                        **LINE_STYLES[alg],
                    )
        axes[row, 1].axhline(margin_best, color="0.4", lw=4, alpha=0.35)
        axes[row, 1].text(
            0.02,
            0.96,
            f"grey band: ℓ1 max-margin in the orthant, {margin_best:.4f}",
            transform=axes[row, 1].transAxes,
            va="top",
            fontsize=8.5,
        )
        axes[row, 1].set_ylim(max(-0.2, axes[row, 1].get_ylim()[0]), 1.25 * margin_best)
        for col, (title, ylabel) in enumerate(PANELS):
            ax = axes[row, col]
            ax.set_xscale("log")
            ax.grid(alpha=0.3, which="both")
            ax.set_title(f"digits {pair[0]} vs {pair[1]}: {title}", fontsize=10.5)
            ax.set_ylabel(ylabel)
            if row == len(PAIRS) - 1:
                ax.set_xlabel("rescaled time τ (log scale)")
        axes[row, 0].set_ylim(0.45, 1.01)
    handles = algorithm_handles()
    handles += [
        plt.Line2D([], [], color="0.3", lw=1.8, ls=DEPTH_STYLES[d], label=f"L = {d}")
        for d in DEPTHS
    ]
    fig.legend(handles=handles, loc="outside right center", fontsize=9.5)
    fig.suptitle(
        "Digits: test accuracy, training margin and distance to the max-margin "
        f"predictors over time (runs end at training loss {LOSS_FLOOR:g}; at L = 3 the "
        "ℓ1 / ℓ2 max-margins are references, not the expected limits)" + quick_tag(quick),
        fontsize=11.5,
    )
    save(fig, path)


GENERALIZATION = Figure(
    "digits_generalization",
    "digits 0v1, 3v8, 4v9: test accuracy, l1 margin, angles to l1 (orthant) / l2 max-margin vs tau",
    "Does relying on weak pixels first cost SAM test accuracy, and do all algorithms still end "
    "near the l1 max-margin predictor of their orthant at L = 2?",
    partial(study_tasks, PAIRS),
    draw_generalization,
)
