"""The digits study: test accuracy, training margin and angles to the max-margin predictors
over tau (``digits_generalization``; settings and runs: :mod:`figures.digits`).

Per pair: test accuracy, normalized l1 margin on the training set, the angles to the l1 (in
the init's orthant, L = 2) and l2 max-margin predictors, and the KKT residual of the depth-L
max-margin program at L = 3 (GD's limit there; its conditions at zero coordinates are vacuous,
so the init's orthant does not change them), GD / l2-SAM / LE-SAM / l_inf-SAM at L = 2 (solid)
and 3 (dashed).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np

from analysis.margin_programs.quasi_norm import kkt_check
from analysis.maxmargin import normalized_margin
from analysis.saliency import accuracy, angles_to, normalized_margins, scaled_beta
from flows.sweep.registry import Result

from .common import Figure, Setting, figure_command, plt, save
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
    ("angle to the ℓ1 max-margin\nin the init's orthant (L = 2)", "angle [degrees]"),
    ("angle to the ℓ2 max-margin", "angle [degrees]"),
    (
        "KKT residual of the ℓ_{2/3} max-margin\nprogram (L = 3)",
        "largest relative residual",
    ),
)
#: samples of a run (log-spaced in tau) at which the KKT residual is computed
KKT_SAMPLES = 16


def _curves(res: Result, data, depth: int) -> list[np.ndarray]:
    """The first four quantities of :data:`PANELS` along one run (the l1 angle at L = 2 only:
    at L = 3 GD's limit is a KKT point of the l_{2/3} program, not the l1 one)."""
    lb, sb = res["log_abs_beta"], res["sign_beta"]
    l1 = angles_to(lb, sb, data.references["ℓ1 in orthant"])
    return [
        accuracy(lb, sb, data.test.X, data.test.y),
        normalized_margins(lb, sb, data.train.X, data.train.y, 1),
        l1 if depth == 2 else np.full_like(l1, np.nan),
        angles_to(lb, sb, data.references["ℓ2"]),
    ]


def kkt_curve(res: Result, data, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """``(tau, residual)``: the KKT residual of the depth-L max-margin program
    (:func:`analysis.margin_programs.quasi_norm.kkt_check`) at ``KKT_SAMPLES`` log-spaced samples
    of a run where beta separates the training set."""
    tau, lb, sb = res["tau"], res["log_abs_beta"], res["sign_beta"]
    beta = scaled_beta(lb, sb)
    separating = np.flatnonzero((tau > 0) & np.all(beta @ data.train.signed_features.T > 0, axis=1))
    if not separating.size:
        return np.empty(0), np.empty(0)
    picks = np.unique(
        np.searchsorted(
            tau, np.geomspace(tau[separating[0]], tau[separating[-1]], KKT_SAMPLES)
        ).clip(separating[0], separating[-1])
    )
    picks = picks[np.isin(picks, separating)]
    return tau[picks], np.array([kkt_check(data.train, depth, beta[i]).kkt_residual for i in picks])


def draw_generalization(results: list[Result], s: Setting, path: Path) -> None:
    """Rows: pairs; columns: test accuracy, l1 margin, angles to the two references;
    L = 2 solid, L = 3 dashed."""
    runs_ = by_run(PAIRS, results)
    fig, axes = plt.subplots(len(PAIRS), len(PANELS), figsize=(22, 11.5), constrained_layout=True)
    for row, pair in enumerate(PAIRS):
        data = pair_data(pair)
        best = data.references["ℓ1 in orthant"]
        margin_best = normalized_margin(best, data.train.X, data.train.y, 1)
        for depth in DEPTHS:
            for alg, _ in ALGORITHMS:
                res = runs_[(pair, depth, alg)]
                keep = res["tau"] > 0
                for ax, values in zip(axes[row][:-1], _curves(res, data, depth), strict=True):
                    ax.plot(
                        res["tau"][keep],
                        values[keep],
                        color=COLORS[alg],
                        ls=DEPTH_STYLES[depth],
                        **LINE_STYLES[alg],
                    )
                if depth < 3:  # at L = 2 the flow's orthant is the reference (third column)
                    continue
                axes[row, -1].plot(
                    *kkt_curve(res, data, depth),
                    color=COLORS[alg],
                    ls=DEPTH_STYLES[depth],
                    marker=".",
                    **LINE_STYLES[alg],
                )
        axes[row, -1].set_yscale("log")
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
        axes[row, -1].set_xlim(axes[row, 0].get_xlim())
    handles = algorithm_handles()
    handles += [
        plt.Line2D([], [], color="0.3", lw=1.8, ls=DEPTH_STYLES[d], label=f"L = {d}")
        for d in DEPTHS
    ]
    fig.legend(handles=handles, loc="outside right center", fontsize=9.5)
    fig.suptitle(
        "Digits: test accuracy, training margin and distance to the max-margin "
        f"predictors over time (runs end at training loss {LOSS_FLOOR:g}; at L = 3 GD's limit is "
        "a KKT point of the ℓ_{2/3} program: right column)" + quick_tag(s.quick),
        fontsize=11.5,
    )
    save(fig, path)


GENERALIZATION = Figure(
    "digits_generalization",
    "digits 0v1, 3v8, 4v9: test accuracy, l1 margin, angles to l1 (orthant) / l2 max-margin and "
    "the l_{2/3} KKT residual (L = 3) vs tau",
    "Does relying on weak pixels first cost SAM test accuracy, and do all algorithms still end "
    "near the l1 max-margin predictor of their orthant at L = 2?",
    partial(study_tasks, PAIRS),
    draw_generalization,
)


if __name__ == "__main__":
    figure_command(__spec__.name, GENERALIZATION)
