"""The digits study, minor first measured (``digits_minor_first``; settings and runs:
:mod:`figures.digits`).

Spearman rank correlation between the shares ``|beta_j| / ||beta||_1`` and the pixel strengths
``|mean_a - mean_b|`` over tau, with the times at which the leading pixel changes: GD strong
pixels first, SAM weak first?
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np

from analysis.saliency import (
    leader_changes,
    leader_strength_quantile,
    lowest_before,
    share_strength_correlation,
    stronger_half,
)
from flows.sweep.registry import Result

from .common import Figure, Setting, figure_command, plt, save
from .digits import (
    ALGORITHMS,
    ASCII_NAMES,
    COLORS,
    DEPTHS,
    LINE_STYLES,
    PAIRS,
    PairData,
    algorithm_handles,
    by_run,
    pair_data,
    quick_tag,
    study_tasks,
)

#: the early phase of a run, for the summaries: until the training loss has halved
EARLY = 0.5


def draw_minor_first(results: list[Result], s: Setting, path: Path) -> None:
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
            lines = []
            for alg, _ in ALGORITHMS:
                line, low = _draw_run(ax, alg, runs_[(pair, depth, alg)], pair_data(pair))
                lines.append(line)
                lowest = min(lowest, low)
            _finish_panel(ax, pair, depth, lines, last_row=row == len(DEPTHS) - 1, first=col == 0)
    axes[0, 0].set_ylim(min(-0.5, lowest - 0.05), 1.05)  # room for the tables below 0
    _draw_legend(fig)
    fig.suptitle(
        "Minor first, measured: rank correlation between each pixel's share of β and "
        "its class-mean difference over time (ℓ2-SAM wide and light: at L = 2 LE-SAM "
        "lies on it)" + quick_tag(s.quick),
        fontsize=11,
    )
    save(fig, path)


def _draw_run(ax, alg: str, res: Result, data: PairData) -> tuple[str, float]:
    """One run: Spearman(share, strength) against tau, dots at the leader changes, a cross
    where the run ended early; returns its line of the summary table and its lowest rs."""
    tau, lb = res["tau"], res["log_abs_beta"]
    rs = share_strength_correlation(lb, data.strength)
    keep = tau > 0
    ax.plot(tau[keep], rs[keep], color=COLORS[alg], **LINE_STYLES[alg])
    switches = leader_changes(tau, lb).switch_times
    k = np.searchsorted(tau, switches)
    k = k[(k < tau.size) & (tau[np.minimum(k, tau.size - 1)] > 0)]
    ax.plot(tau[k], rs[k], ls="", marker="o", ms=4.5, color=COLORS[alg], mec="white", mew=0.6)
    if int(res["status"]) != 0:
        ax.plot(tau[-1], rs[-1], marker="X", ms=9, color=COLORS[alg], mec="black", mew=0.6)
    early = lowest_before(rs, res["loss"], EARLY)
    strong = lowest_before(
        share_strength_correlation(lb, data.strength, stronger_half(data.strength)),
        res["loss"],
        EARLY,
    )
    first = leader_strength_quantile(lb, data.strength)[tau > 0][0]
    line = (
        f"{ASCII_NAMES[alg]:8s} {early:+.2f}  {strong:+.2f}  {rs[-1]:+.2f}"
        f"  {first:4.2f} {len(switches) - 1:3d}"
    )
    return line, float(np.nanmin(rs))


def _finish_panel(
    ax, pair: tuple[int, int], depth: int, lines: list[str], last_row: bool, first: bool
) -> None:
    """A panel's zero line, axes, title and summary table (x label on the ``last_row``, y label
    on the ``first`` column)."""
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
    if last_row:
        ax.set_xlabel("rescaled time τ (log scale)")
    if first:
        ax.set_ylabel(
            "Spearman ρₛ(share |βⱼ|/‖β‖₁, strength |mean₊ − mean₋|)\n"
            "> 0: strong pixels lead;  < 0: weak pixels lead"
        )


def _draw_legend(fig) -> None:
    """The algorithms and markers, and the key to the summary tables, right of the panels."""
    handles = algorithm_handles()
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


MINOR_FIRST = Figure(
    "digits_minor_first",
    "digits 0v1, 3v8, 4v9: Spearman(share, pixel strength) vs tau with leader changes, "
    "GD / l2 / LE / linf-SAM, L = 2, 3",
    "Measured rather than eyeballed: does GD's predictor lean on the strong pixels from the "
    "start (rank correlation near +1) while SAM's leans first on weak ones (near 0 or below)?",
    partial(study_tasks, PAIRS),
    draw_minor_first,
)


if __name__ == "__main__":
    figure_command(__spec__.name, MINOR_FIRST)
