"""The digits study, minor first measured (settings and runs: :mod:`figures.digits`).

* ``digits_minor_first`` — the Spearman rank correlation ``rho_s`` between the shares
  ``|beta_j| / ||beta||_1`` and the pixel strengths ``|mean_a - mean_b|`` over all pixels,
  against tau, with a marker where the leading pixel changes: does GD lean on the strong
  pixels from the start and SAM first on weaker ones?
* ``digits_strong_pixels`` — the same correlation over the stronger half of the pixels: does
  SAM hold the strongest pixels back (``rho_s < 0`` among them)?

The summaries (lowest ``rho_s`` before the training loss halves, the first leader's strength
quantile, the number of leader changes) are in ``paper_repro.md``.
"""

from __future__ import annotations

from functools import partial
from itertools import product
from pathlib import Path

import numpy as np

from analysis.saliency import leader_changes, share_strength_correlation, stronger_half
from flows.sweep.registry import Result

from . import style
from .common import (
    STOPPED_MARK,
    Figure,
    Setting,
    figure_command,
    plt,
    save,
    stopped_early,
    stopped_handle,
)
from .digits import (
    PARAMS,
    QUICK,
    WIDTHS,
    PairData,
    algorithm_handles,
    by_run,
    check_study,
    name,
    pair_data,
    pair_title,
    study_tasks,
)

#: The pixels of each figure's correlation (all, or the stronger half): which, and the y label.
PIXELS = {
    "all": (lambda data: None, "$\\rho_s$(share, strength)"),
    "strong": (lambda data: stronger_half(data.strength), "$\\rho_s$ over the stronger half"),
}


def draw_run(ax, alg: str, res: Result, data: PairData, mask, s: Setting, what: str) -> bool:
    """One run: rho_s against tau (tau > 0), the algorithm's marker where the leading pixel
    changes, a cross at the end of a run that stopped early (returned)."""
    tau, lb = res["tau"], res["log_abs_beta"]
    rs = share_strength_correlation(lb, data.strength, mask)
    keep = tau > 0
    look = style.algorithm_style(alg)
    ax.plot(tau[keep], rs[keep], color=look["color"], label=name(alg, s), **WIDTHS[alg])
    k = np.searchsorted(tau, leader_changes(tau, lb).switch_times)
    k = k[(k < tau.size) & (tau[np.minimum(k, tau.size - 1)] > 0)]
    ax.plot(tau[k], rs[k], ls="", marker=look["marker"], color=look["color"], mec="white",
            mew=0.4)  # fmt: skip
    stopped = stopped_early(res, what, s)
    if stopped:
        ax.plot(tau[-1], rs[-1], **STOPPED_MARK)
    return stopped


def draw_correlation(pixels: str, results: list[Result], s: Setting, path: Path) -> None:
    """Rows: depth; columns: pairs. rho_s(share, strength) over ``pixels`` against tau (log)."""
    runs_ = by_run(s, results)
    rows, cols = len(s.depths), len(s.pairs)
    fig, axes = plt.subplots(
        rows, cols, figsize=(style.DOUBLE, 0.9 + 1.7 * rows), layout="constrained",
        sharey=True, squeeze=False,
    )  # fmt: skip
    stopped, lowest = False, 0.0
    for (row, depth), (col, pair) in product(enumerate(s.depths), enumerate(s.pairs)):
        ax, data = axes[row, col], pair_data(pair)
        mask = PIXELS[pixels][0](data)
        for alg in s.algorithms:
            what = f"{style.plain_label(alg)} at L = {depth}, digits {pair}"
            res = runs_[(pair, depth, alg)]
            stopped |= draw_run(ax, alg, res, data, mask, s, what)
            lowest = min(lowest, float(np.nanmin(share_strength_correlation(
                res["log_abs_beta"], data.strength, mask))))  # fmt: skip
        ax.axhline(0.0, color="0.5", lw=0.6)
        ax.set_xscale("log")
        ax.grid(alpha=0.3, which="major")
        ax.set_title(f"{pair_title(pair)}, L = {depth}, α = {s.alpha:g}")
        if row == rows - 1:
            ax.set_xlabel("rescaled time τ")
    for ax in axes[:, 0]:
        ax.set_ylabel(PIXELS[pixels][1])
    axes[0, 0].set_ylim(min(-0.1, lowest - 0.08), 1.05)
    if pixels == "strong":
        for ax in axes.flat:
            ax.axhspan(-1.1, 0.0, color="0.92", zorder=0)
    handles = algorithm_handles(s)
    for handle, alg in zip(handles, s.algorithms, strict=True):
        handle.set_marker(style.ALGORITHM_STYLES[alg].marker)
    handles += [
        plt.Line2D(
            [], [], ls="", marker="o", color="0.4", label="marker: the leading pixel changes"
        )
    ]
    if stopped:
        handles.append(stopped_handle("run stopped short of its horizon"))
    fig.legend(handles=handles, loc="outside lower center", ncol=3)
    save(fig, path)


EXAMPLE = {"pairs": ("3v8",), "alpha": 0.25, "rho": 0.8, "algorithms": ("gd", "l2-sam")}

MINOR_FIRST = Figure(
    "digits_minor_first",
    "digits {pairs}: Spearman(share, pixel strength) vs tau with leader changes, L = {depths}",
    "ρₛ: the rank correlation between the shares |βⱼ|/‖β‖₁ and the strengths |m₊ − m₋| of "
    "the pixels; markers: the leading pixel changes; ×: the run stopped short of its horizon "
    "(τ_max = {tau_max}). Measured rather than eyeballed: does GD's predictor lean on the "
    "strong pixels from the start (ρₛ near +1) while SAM's leans first on weaker ones (ρₛ "
    "near 0)?",
    study_tasks,
    partial(draw_correlation, "all"),
    params=PARAMS,
    quick=QUICK,
    example=EXAMPLE,
    check=check_study,
)

STRONG_PIXELS = Figure(
    "digits_strong_pixels",
    "digits {pairs}: Spearman(share, pixel strength) over the stronger half of the pixels vs "
    "tau, L = {depths}",
    "ρₛ as in digits_minor_first, over the pixels above the median strength only; markers: "
    "the leading pixel changes; ×: the run stopped short of its horizon (τ_max = {tau_max}). "
    "Among the strong pixels, does SAM hold the strongest back (ρₛ < 0, shaded) while GD "
    "follows the strength (ρₛ near +1), as the single-example rate μⱼ(1 − ρμⱼ/N) predicts?",
    study_tasks,
    partial(draw_correlation, "strong"),
    params=PARAMS,
    quick=QUICK,
    example=EXAMPLE,
    check=check_study,
)


if __name__ == "__main__":
    figure_command(__spec__.name, MINOR_FIRST, STRONG_PIXELS)
