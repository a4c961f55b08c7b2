"""The digits study, measured (settings and runs: :mod:`figures.digits`).

* ``digits_minor_first`` — Spearman rank correlation between the shares ``|beta_j| /
  ||beta||_1`` and the pixel strengths ``|mean_a - mean_b|`` over tau, with the times at which
  the leading pixel changes: GD strong pixels first, SAM weak first?
* ``digits_generalization`` — test accuracy, normalized l1 margin on the training set and the
  angles to the l1 (in the init's orthant) and l2 max-margin predictors over tau.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.maxmargin import normalized_margin
from analysis.saliency import (
    accuracy,
    angles_to,
    leader_changes,
    leader_strength_quantile,
    lowest_before,
    normalized_margins,
    share_strength_correlation,
    stronger_half,
)
from flows.sweep.registry import Result, Task

from .common import Figure, plt, save
from .digits import (
    ALGORITHMS,
    ASCII_NAMES,
    COLORS,
    DEPTH_STYLES,
    DEPTHS,
    LINE_STYLES,
    LOSS_FLOOR,
    NAMES,
    PAIRS,
    by_run,
    pair_data,
    quick_tag,
    study_tasks,
)

#: the early phase of a run, for the summaries: until the training loss has halved
EARLY = 0.5


def _positive(tau: np.ndarray) -> np.ndarray:
    """Samples with tau > 0 (the log axis)."""
    return tau > 0


def _tasks(quick: bool) -> list[Task]:
    return study_tasks(PAIRS, quick)


# --------------------------------------------------------------------------- minor first


def draw_minor_first(results: list[Result], quick: bool, path: Path) -> None:
    """Rows: depth; columns: pairs. Spearman(share, strength) against tau (log), a dot where
    the leading pixel changes, and a table of summaries per algorithm."""
    runs_ = by_run(PAIRS, results)
    fig, axes = plt.subplots(
        len(DEPTHS), len(PAIRS), figsize=(15.5, 8.8), constrained_layout=True, sharey=True
    )
    lowest = 0.0
    for row, depth in enumerate(DEPTHS):
        for col, pair in enumerate(PAIRS):
            ax = axes[row, col]
            data = pair_data(pair)
            lines = []
            for alg, _ in ALGORITHMS:
                res = runs_[(pair, depth, alg)]
                tau, lb = res["tau"], res["log_abs_beta"]
                rs = share_strength_correlation(lb, data.strength)
                keep = _positive(tau)
                ax.plot(tau[keep], rs[keep], color=COLORS[alg], **LINE_STYLES[alg])
                switches = leader_changes(tau, lb).switch_times
                k = np.searchsorted(tau, switches)
                k = k[(k < tau.size) & (tau[np.minimum(k, tau.size - 1)] > 0)]
                ax.plot(
                    tau[k],
                    rs[k],
                    ls="",
                    marker="o",
                    ms=4.5,
                    color=COLORS[alg],
                    mec="white",
                    mew=0.6,
                )
                if int(res["status"]) != 0:
                    ax.plot(
                        tau[-1], rs[-1], marker="X", ms=9, color=COLORS[alg], mec="black", mew=0.6
                    )
                early = lowest_before(rs, res["loss"], EARLY)
                strong = lowest_before(
                    share_strength_correlation(lb, data.strength, stronger_half(data.strength)),
                    res["loss"],
                    EARLY,
                )
                lowest = min(lowest, float(np.nanmin(rs)))
                first = leader_strength_quantile(lb, data.strength)[tau > 0][0]
                lines.append(
                    f"{ASCII_NAMES[alg]:8s} {early:+.2f}  {strong:+.2f}  {rs[-1]:+.2f}"
                    f"  {first:4.2f} {len(switches) - 1:3d}"
                )
            ax.axhline(0.0, color="0.5", lw=0.8)
            ax.set_xscale("log")
            ax.grid(alpha=0.3, which="both")
            ax.set_title(f"digits {pair[0]} vs {pair[1]}, L = {depth}", fontsize=11)
            ax.text(
                0.98,
                0.03,
                "         early  strong  end  1st\n"
                "         low rs  half    rs  lead  #\n" + "\n".join(lines),
                transform=ax.transAxes,
                ha="right",
                va="bottom",
                fontsize=8,
                family="monospace",
                bbox=dict(boxstyle="round", fc="white", alpha=0.9, ec="0.7"),
            )
            if row == len(DEPTHS) - 1:
                ax.set_xlabel("rescaled time τ (log scale)")
            if col == 0:
                ax.set_ylabel(
                    "Spearman ρₛ(share |βⱼ|/‖β‖₁, strength |mean₊ − mean₋|)\n"
                    "> 0: strong pixels lead;  < 0: weak pixels lead"
                )
    axes[0, 0].set_ylim(min(-0.5, lowest - 0.05), 1.05)  # room for the tables below 0
    handles = [
        plt.Line2D([], [], color=COLORS[a], label=NAMES[a], **LINE_STYLES[a]) for a, _ in ALGORITHMS
    ]
    handles += [
        plt.Line2D([], [], ls="", marker="o", color="0.3", label="leading pixel changes"),
        plt.Line2D(
            [],
            [],
            ls="",
            marker="X",
            ms=8,
            color="0.3",
            mec="black",
            label="run ended by the solver\nor its budget (status −1)",
        ),
    ]
    fig.legend(handles=handles, loc="outside right center", fontsize=9)
    fig.text(
        0.995,
        0.08,
        "table per panel:\n"
        "early low rs: lowest ρₛ\n  before the training\n  loss halves\n"
        "strong half: the same\n  over the pixels above\n  the median strength\n"
        "end rs: ρₛ at the end\n1st lead: strength\n  quantile of the first\n"
        "  leading pixel (1 =\n  the strongest)\n#: leader changes",
        ha="right",
        va="bottom",
        multialignment="left",
        fontsize=8.5,
    )
    fig.suptitle(
        "Minor first, measured: rank correlation between each pixel's share of β and "
        "its class-mean difference over time (ℓ2-SAM wide and light: at L = 2 LE-SAM "
        "lies on it)" + quick_tag(quick),
        fontsize=11,
    )
    save(fig, path)


# --------------------------------------------------------------------------- generalization

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
                keep = _positive(res["tau"])
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
    handles = [
        plt.Line2D([], [], color=COLORS[a], label=NAMES[a], **LINE_STYLES[a]) for a, _ in ALGORITHMS
    ]
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


MINOR_FIRST = Figure(
    "digits_minor_first",
    "digits 0v1, 3v8, 4v9: Spearman(share, pixel strength) vs tau with leader changes, "
    "GD / l2 / LE / linf-SAM, L = 2, 3",
    "Measured rather than eyeballed: does GD's predictor lean on the strong pixels from the "
    "start (rank correlation near +1) while SAM's leans first on weak ones (near 0 or below)?",
    _tasks,
    draw_minor_first,
)

GENERALIZATION = Figure(
    "digits_generalization",
    "digits 0v1, 3v8, 4v9: test accuracy, l1 margin, angles to l1 (orthant) / l2 max-margin vs tau",
    "Does relying on weak pixels first cost SAM test accuracy, and do all algorithms still end "
    "near the l1 max-margin predictor of their orthant at L = 2?",
    _tasks,
    draw_generalization,
)
