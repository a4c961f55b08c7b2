"""The digits study: what the flows' predictors become (settings and runs:
:mod:`figures.digits`).

* ``digits_generalization`` — test accuracy against tau, one panel per depth and pair: does
  relying on weak pixels first cost SAM test accuracy?
* ``digits_max_margin`` — at one depth (L = 2): the normalized l1 margin on the training set
  and the angles to the l1 max-margin predictor in the init's orthant and to the l2
  max-margin predictor: do the flows approach the l1 max-margin of their orthant?
* ``digits_kkt`` — at L = 3: the KKT residual of the l_{2/L} max-margin program (GD's limit
  there; its conditions at zero coordinates are vacuous, so the init's orthant does not change
  them) along the runs, from where beta first separates the training set.
"""

from __future__ import annotations

from itertools import product
from pathlib import Path

import numpy as np
from matplotlib.ticker import NullFormatter

from analysis.margin_programs.quasi_norm import kkt_check
from analysis.maxmargin import normalized_margin
from analysis.saliency import accuracy, angles_to, normalized_margins, scaled_beta
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

#: The rows of ``digits_max_margin``: (y label, the quantity along a run).
MARGIN_ROWS = (
    (
        "normalized ℓ1 margin\n$\\min_i y_i\\langle\\beta, x_i\\rangle / \\|\\beta\\|_1$",
        lambda r, d: normalized_margins(r["log_abs_beta"], r["sign_beta"], d.train.X, d.train.y, 1),
    ),
    (
        "angle to the ℓ1 max-margin\nin the init's orthant [°]",
        lambda r, d: angles_to(r["log_abs_beta"], r["sign_beta"], d.references["ℓ1 in orthant"]),
    ),
    (
        "angle to the ℓ2\nmax-margin [°]",
        lambda r, d: angles_to(r["log_abs_beta"], r["sign_beta"], d.references["ℓ2"]),
    ),
)
#: samples of a run (log-spaced in tau) at which the KKT residual is computed
KKT_SAMPLES = 16
EXAMPLE = {"pairs": ("3v8",), "alpha": 0.25, "rho": 0.8, "algorithms": ("gd", "l2-sam")}


def accuracy_along(res: Result, data: PairData) -> np.ndarray:
    """The predictor's accuracy on the pair's test set along a run."""
    return accuracy(res["log_abs_beta"], res["sign_beta"], data.test.X, data.test.y)


def kkt_curve(res: Result, data: PairData, depth: int) -> tuple[np.ndarray, np.ndarray]:
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


def curve(ax, alg: str, x: np.ndarray, y: np.ndarray, res: Result, s: Setting, what: str,
          **extra) -> bool:  # fmt: skip
    """One algorithm's curve in its colour and width (tau > 0), a cross at its last point if
    the run stopped early (returned)."""
    keep = x > 0
    ax.plot(x[keep], y[keep], color=style.ALGORITHM_STYLES[alg].color, label=name(alg, s),
            **WIDTHS[alg], **extra)  # fmt: skip
    stopped = stopped_early(res, what, s)
    if stopped and x.size:
        ax.plot(x[-1], y[-1], **STOPPED_MARK)
    return stopped


def legend(fig, s: Setting, stopped: bool, extra: tuple = ()) -> None:
    """The algorithms (and ``extra`` handles), and the cross if a run stopped early, below."""
    handles = algorithm_handles(s) + list(extra)
    if stopped:
        handles.append(stopped_handle("run stopped short of its horizon"))
    fig.legend(handles=handles, loc="outside lower center", ncol=3)


def what(alg: str, depth: int, pair: str) -> str:
    """A run's name in warnings."""
    return f"{style.plain_label(alg)} at L = {depth}, digits {pair}"


def grid(rows: int, cols: int, height: float = 1.6, **kwargs):
    """A figure two columns wide of ``rows`` x ``cols`` panels."""
    return plt.subplots(rows, cols, figsize=(style.DOUBLE, 0.9 + height * rows),
                        layout="constrained", squeeze=False, **kwargs)  # fmt: skip


def draw_accuracy(results: list[Result], s: Setting, path: Path) -> None:
    """Rows: depth; columns: pairs. Test accuracy against tau."""
    runs_ = by_run(s, results)
    fig, axes = grid(len(s.depths), len(s.pairs), sharey=True)
    stopped, lowest = False, 1.0
    for (row, depth), (col, pair) in product(enumerate(s.depths), enumerate(s.pairs)):
        ax, data = axes[row, col], pair_data(pair)
        for alg in s.algorithms:
            res = runs_[(pair, depth, alg)]
            acc = accuracy_along(res, data)
            lowest = min(lowest, float(np.min(acc)))
            stopped |= curve(ax, alg, res["tau"], acc, res, s, what(alg, depth, pair))
        ax.set_xscale("log")
        ax.grid(alpha=0.3)
        ax.set_title(f"{pair_title(pair)}, L = {depth}, α = {s.alpha:g}")
    for ax in axes[-1]:
        ax.set_xlabel("rescaled time τ")
    for ax in axes[:, 0]:
        ax.set_ylabel("test accuracy")
    axes[0, 0].set_ylim(min(0.5, lowest - 0.03), 1.01)
    legend(fig, s, stopped)
    save(fig, path)


def draw_max_margin(results: list[Result], s: Setting, path: Path) -> None:
    """Rows: the normalized l1 margin and the angles to the l1 (orthant) and l2 max-margin
    predictors; columns: pairs; one depth. The orthant's l1 max-margin as a grey line."""
    runs_ = by_run(s, results)
    (depth,) = s.depths
    fig, axes = grid(len(MARGIN_ROWS), len(s.pairs), height=1.45, sharex="col")
    stopped = False
    for col, pair in enumerate(s.pairs):
        data = pair_data(pair)
        best = normalized_margin(data.references["ℓ1 in orthant"], data.train.X, data.train.y, 1)
        for (row, (_, quantity)), alg in product(enumerate(MARGIN_ROWS), s.algorithms):
            res = runs_[(pair, depth, alg)]
            stopped |= curve(axes[row, col], alg, res["tau"], quantity(res, data), res, s,
                             what(alg, depth, pair))  # fmt: skip
        axes[0, col].axhline(best, color="0.5", lw=2.5, alpha=0.5, zorder=0)
        axes[0, col].set_ylim(max(-0.2, axes[0, col].get_ylim()[0]), 1.25 * best)
        axes[0, col].set_title(f"{pair_title(pair)}, L = {depth}, α = {s.alpha:g}")
        axes[-1, col].set_xlabel("rescaled time τ")
        for ax in axes[:, col]:
            ax.set_xscale("log")
            ax.grid(alpha=0.3)
    for ax, (label, _) in zip(axes[:, 0], MARGIN_ROWS, strict=True):
        ax.set_ylabel(label)
    reference = plt.Line2D([], [], color="0.5", lw=2.5, alpha=0.5,
                           label="ℓ1 max-margin in the init's orthant")  # fmt: skip
    legend(fig, s, stopped, (reference,))
    save(fig, path)


def draw_kkt(results: list[Result], s: Setting, path: Path) -> None:
    """Rows: depth; columns: pairs. The KKT residual of the l_{2/L} max-margin program at
    samples of each run where beta separates the training set."""
    runs_ = by_run(s, results)
    fig, axes = grid(len(s.depths), len(s.pairs), sharey=True)
    stopped, drawn = False, False
    for (row, depth), (col, pair) in product(enumerate(s.depths), enumerate(s.pairs)):
        ax, data = axes[row, col], pair_data(pair)
        curves = {alg: kkt_curve(runs_[(pair, depth, alg)], data, depth) for alg in s.algorithms}
        for alg, (tau, residual) in curves.items():
            res = runs_[(pair, depth, alg)]
            stopped |= curve(ax, alg, tau, residual, res, s, what(alg, depth, pair), marker=".")
        if any(tau.size for tau, _ in curves.values()):
            drawn = True
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
        else:
            ax.text(0.5, 0.5, "β does not separate\nthe training set", ha="center",
                    va="center", color="0.4", transform=ax.transAxes)  # fmt: skip
        ax.set_xlabel("rescaled time τ")
        ax.grid(alpha=0.3)
        ax.set_title(f"{pair_title(pair)}, L = {depth}, α = {s.alpha:g}")
    if drawn:
        axes[0, 0].set_yscale("log")
    for ax, depth in zip(axes[:, 0], s.depths, strict=True):
        ax.set_ylabel(f"KKT residual of the\n$\\ell_{{2/{depth}}}$ max-margin program")
    legend(fig, s, stopped)
    save(fig, path)


def one_depth(s: Setting) -> str | None:
    """What is wrong with a setting of ``digits_max_margin``: the study's checks, one depth."""
    if len(s.depths) != 1:
        return f"digits_max_margin draws one depth, got depths = {s.depths}"
    return check_study(s)


GENERALIZATION = Figure(
    "digits_generalization",
    "digits {pairs}: test accuracy vs tau, GD and SAM flows at L = {depths}",
    "Does relying on weak pixels first cost SAM test accuracy (runs end at training loss "
    "1e-30 or τ_max = {tau_max}; ×: the run stopped short of its horizon)?",
    study_tasks,
    draw_accuracy,
    params=PARAMS,
    quick=QUICK,
    example=EXAMPLE,
    check=check_study,
)

MAX_MARGIN = Figure(
    "digits_max_margin",
    "digits {pairs}: normalized l1 margin and angles to the l1 (orthant) and l2 max-margin "
    "predictors vs tau, L = {depths}",
    "At L = {depths}, do the flows approach the ℓ1 max-margin predictor of the init's orthant "
    "(grey: its margin) rather than the ℓ2 one, by the end of the runs (training loss 1e-30 or "
    "τ_max = {tau_max}; ×: the run stopped short of its horizon)?",
    study_tasks,
    draw_max_margin,
    params={**PARAMS, "depths": (2,), "tau_max": (80.0,)},
    quick={"tau_max": (6.0,)},
    example=EXAMPLE,
    check=one_depth,
)

KKT = Figure(
    "digits_kkt",
    "digits {pairs}: KKT residual of the $\\ell_{2/L}$ max-margin program along the runs, "
    "L = {depths}",
    "At L = {depths}, does every run approach a KKT point of the $\\ell_{2/L}$ max-margin program "
    "(the residual, from where β first separates the training set to the end of the run: "
    "training loss 1e-30 or τ_max = {tau_max}; ×: the run stopped short of its horizon; no "
    "curve: β never separates the training set)?",
    study_tasks,
    draw_kkt,
    params={**PARAMS, "depths": (3,), "tau_max": (120.0,)},
    quick={"tau_max": (8.0,)},
    example=EXAMPLE,
    check=check_study,
)


if __name__ == "__main__":
    figure_command(__spec__.name, GENERALIZATION, MAX_MARGIN, KKT)
