"""The digits study: GD and SAM flows on pairs of scikit-learn's 8x8 handwritten digits, the
analog of the paper's Grad-CAM figures (docs/theory.md §14: on images SAM with an intermediate
initialization attends to low-intensity pixels, GD to the digit).

This module holds the study's settings, its runs (task kind ``'digits_flow'``,
:func:`analysis.digits_runs.digits_flow`) and the saliency maps:

* ``digits_saliency_0v1``, ``digits_saliency_3v8``, ``digits_saliency_4v9`` — the shares
  ``|beta_j| / ||beta||_1`` as 8x8 images at matched training losses, GD / l2-SAM / LE-SAM /
  l_inf-SAM at depths 2 and 3.

The curves (rank correlation with the pixel strength, test accuracy, margins, angles to the
max-margin predictors) are in :mod:`figures.digits_curves`.

Settings (all pairs, both depths): alpha = 0.2; l2-SAM rho = 1 (alpha / rho = 0.2 is about
0.43 of the regime-3 boundary ``rho (mu_(1) + mu_(2)) / (2 sum mu_j^2)^(1/2)`` of every pair,
with ``mu`` the mean of ``y_i x_i``: the amplification regime); LE-SAM with the budget matched
to l2-SAM at the start (``sigma = rho ||grad L(theta_0)||``, ``rho_max = rho``); l_inf-SAM with
rho = 0.1 (below alpha: with ``alpha < rho`` every weight would shrink to 0). Initialization:
``|w_j| = alpha`` in every layer with ``sign(beta_j)`` = the sign of the pixel's class-mean
difference (a positive balanced init keeps ``beta >= 0``, and no digit pair is separable by such
a beta). Runs stop where the training loss falls to 1e-30 (or at tau = 80 for L = 2, 120 for
L = 3); see :func:`analysis.digits_runs.digits_flow` for why and how.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path

import numpy as np

import analysis.digits_runs  # noqa: F401  (registers the task kind 'digits_flow')
from analysis.amplification import shares
from analysis.maxmargin import max_margin
from analysis.saliency import (
    accuracy,
    first_below,
    orthant_l1_max_margin,
    orthant_signs,
    pixel_strength,
)
from flows.data import Dataset
from flows.datasets import DIGITS_SIDE, digits
from flows.sweep.registry import Result, Task

from .common import OKABE_ITO, Figure, plt, save

PAIRS = ((0, 1), (3, 8), (4, 9))
DEPTHS = (2, 3)
ALPHA = 0.2
RHO = 1.0
RHO_LINF = 0.1
LOSS_FLOOR = 1e-30
#: ``{quick: {depth: tau_max}}``
TAU_MAX = {False: {2: 80.0, 3: 120.0}, True: {2: 6.0, 3: 8.0}}
#: the algorithms compared, with their hyper-parameters and solver settings
ALGORITHMS: tuple[tuple[str, dict], ...] = (
    ("gd", {}),
    ("l2-sam", {"rho": RHO}),
    ("le-sam", {"rho_max": RHO, "sigma_start_fraction": 1.0}),
    # l_inf-SAM: its switching surfaces are events and its sliding is exact (flows.integrator.filippov);
    # on 64 pixels many surfaces come to slide at once (2^k one-sided fields per step, at most
    # 6 coupled ones). The runs that do not reach the floor end at that cap; every run needs
    # at most 2.9k evaluations, and this budget bounds the cost of any future stall
    ("linf-sam", {"rho": RHO_LINF, "max_nfev": 4_000}),
)

NAMES = {"gd": "GD", "l2-sam": "ℓ2-SAM", "le-sam": "LE-SAM", "linf-sam": "ℓ∞-SAM"}
COLORS = {
    "gd": OKABE_ITO[0],
    "l2-sam": OKABE_ITO[5],
    "le-sam": OKABE_ITO[3],
    "linf-sam": OKABE_ITO[6],
}
ASCII_NAMES = {"gd": "GD", "l2-sam": "l2-SAM", "le-sam": "LE-SAM", "linf-sam": "linf-SAM"}
#: line widths and opacities: l2-SAM wide and light, so that LE-SAM shows on top of it where
#: the two coincide (at L = 2 the budget hardly binds)
LINE_STYLES = {
    "gd": dict(lw=2.0),
    "l2-sam": dict(lw=4.5, alpha=0.45),
    "le-sam": dict(lw=1.6),
    "linf-sam": dict(lw=2.0),
}
DEPTH_STYLES = {2: "-", 3: "--"}


def run_task(pair: tuple[int, int], depth: int, algorithm: str, hp: dict, quick: bool) -> Task:
    """One ``'digits_flow'`` run (default split: seed 0, a quarter of each class for testing)."""
    return Task(
        "digits_flow",
        {
            "a": pair[0],
            "b": pair[1],
            "algorithm": algorithm,
            "depth": depth,
            "alpha": ALPHA,
            **hp,
            "tau_max": TAU_MAX[quick][depth],
            "loss_floor": LOSS_FLOOR,
        },
    )


def runs(pairs: tuple[tuple[int, int], ...]) -> list[tuple[tuple[int, int], int, str, dict]]:
    """``(pair, depth, algorithm, hyper-parameters)`` in task order: pair, depth, algorithm."""
    return [(pair, depth, alg, hp) for pair in pairs for depth in DEPTHS for alg, hp in ALGORITHMS]


def study_tasks(pairs: tuple[tuple[int, int], ...], quick: bool) -> list[Task]:
    """Every run of ``pairs`` (see :func:`runs` for the order)."""
    return [run_task(pair, depth, alg, hp, quick) for pair, depth, alg, hp in runs(pairs)]


def by_run(pairs: tuple[tuple[int, int], ...], results: list[Result]) -> dict[tuple, Result]:
    """Results keyed by ``(pair, depth, algorithm)``."""
    return {
        (pair, depth, alg): res
        for (pair, depth, alg, _), res in zip(runs(pairs), results, strict=True)
    }


@dataclass(frozen=True, eq=False)
class PairData:
    """A pair's data and references: training and test sets, pixel strength and orthant signs
    (of the training set), and the unit l2 / l1 / orthant-l1 max-margin predictors."""

    pair: tuple[int, int]
    train: Dataset
    test: Dataset
    strength: np.ndarray
    signs: np.ndarray
    references: dict


@cache
def pair_data(pair: tuple[int, int]) -> PairData:
    """:class:`PairData` of one pair (cached)."""
    train, test = digits(*pair)
    signs = orthant_signs(train.X, train.y)
    refs = {
        "ℓ2": max_margin(train, p=2).direction,
        "ℓ1": max_margin(train, p=1).direction,
        "ℓ1 in orthant": orthant_l1_max_margin(train.X, train.y, signs),
    }
    return PairData(pair, train, test, pixel_strength(train.X, train.y), signs, refs)


def image(v: np.ndarray) -> np.ndarray:
    """A length-64 pixel vector as the 8x8 image (row-major)."""
    return np.asarray(v).reshape(DIGITS_SIDE, DIGITS_SIDE)


def quick_tag(quick: bool) -> str:
    """``'  [QUICK]'`` on quick figures."""
    return "  [QUICK]" if quick else ""


# --------------------------------------------------------------------------- saliency maps

#: the columns: training loss at these fractions of its initial value (the same for every
#: algorithm of a pair and depth: they share the init), then the end of the run
LEVELS = (0.95, 0.75, 0.5, 0.1, 1e-3)


def _columns(res: Result) -> list[int | None]:
    """Sample index of each column: first sample with loss <= level * loss(0) (None: never),
    then the last sample."""
    hits = first_below(res["loss"], np.array(LEVELS) * res["loss"][0])
    return [int(k) if k >= 0 else None for k in hits] + [len(res["tau"]) - 1]


def _draw_header(axes, data: PairData) -> None:
    """First row: the class means, the strength and the orthant signs."""
    a, b = data.pair
    X, y = data.train.X, data.train.y
    panels = [
        (image(X[y > 0].mean(axis=0)), "gray", f"mean of digit {a} (y = +1)", (0, 1)),
        (image(X[y < 0].mean(axis=0)), "gray", f"mean of digit {b} (y = −1)", (0, 1)),
        (
            image(data.strength),
            "viridis",
            "strength |mean₊ − mean₋|\n(contour: half its max)",
            (0, None),
        ),
        (image(data.signs), "coolwarm", f"init sign of β (red: votes {a})", (-1, 1)),
    ]
    for ax, (img, cmap, title, (lo, hi)) in zip(axes, panels, strict=False):
        ax.imshow(img, cmap=cmap, vmin=lo, vmax=hi)
        ax.set_title(title, fontsize=8.5)
    axes[2].contour(
        image(data.strength), levels=[0.5 * data.strength.max()], colors="white", linewidths=1.0
    )
    text = (
        f"train n = {data.train.n}, test n = {data.test.n}\n"
        f"α = {ALPHA:g}; ℓ2/LE-SAM ρ = {RHO:g},\nℓ∞-SAM ρ = {RHO_LINF:g}\n\n"
        "maps: |βⱼ| / ‖β‖₁, each scaled\nto its own max (in the title)\n"
        "columns: first time the\ntraining loss ≤ level"
    )
    axes[-1].text(0.0, 0.5, text, fontsize=8.5, va="center", transform=axes[-1].transAxes)
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    for ax in axes[len(panels) :]:
        ax.axis("off")


def draw_saliency(pair: tuple[int, int], results: list[Result], quick: bool, path: Path) -> None:
    """Rows: (depth, algorithm); columns: matched training losses then the end of the run."""
    data = pair_data(pair)
    runs_ = by_run((pair,), results)
    n_cols = len(LEVELS) + 1
    n_rows = 1 + len(DEPTHS) * len(ALGORITHMS)
    fig, axes = plt.subplots(
        n_rows, n_cols, figsize=(1.75 * n_cols + 1.2, 1.55 * n_rows + 0.6), constrained_layout=True
    )
    _draw_header(axes[0], data)
    contour = image(data.strength)
    level = 0.5 * data.strength.max()
    row = 1
    for depth in DEPTHS:
        for alg, _ in ALGORITHMS:
            res = runs_[(pair, depth, alg)]
            sh = shares(res["log_abs_beta"])
            acc = accuracy(res["log_abs_beta"], res["sign_beta"], data.test.X, data.test.y)
            for col, k in enumerate(_columns(res)):
                ax = axes[row, col]
                ax.set_xticks([])
                ax.set_yticks([])
                if k is None:
                    ax.text(
                        0.5,
                        0.5,
                        "not\nreached",
                        ha="center",
                        va="center",
                        fontsize=8,
                        color="0.5",
                        transform=ax.transAxes,
                    )
                    ax.set_facecolor("0.95")
                    continue
                top = float(np.max(sh[k]))
                ax.imshow(image(sh[k] / top), cmap="magma", vmin=0.0, vmax=1.0)
                ax.contour(contour, levels=[level], colors="cyan", linewidths=0.7)
                ax.set_title(
                    f"τ={res['tau'][k]:.3g}, max {top:.2f}\ntest acc {acc[k]:.2f}",
                    fontsize=7.5,
                    pad=2,
                )
            axes[row, 0].set_ylabel(
                f"{NAMES[alg]}\nL = {depth}", fontsize=9.5, color=COLORS[alg], fontweight="bold"
            )
            row += 1
    for col, level_ in enumerate(LEVELS):
        axes[1, col].annotate(
            f"loss ≤ {level_:g} × initial",
            (0.5, 1.38),
            xycoords="axes fraction",
            ha="center",
            fontsize=9.5,
            fontweight="bold",
        )
    axes[1, -1].annotate(
        f"end (loss ≤ {LOSS_FLOOR:g},\nτ max or budget)",
        (0.5, 1.38),
        xycoords="axes fraction",
        ha="center",
        fontsize=9.5,
        fontweight="bold",
    )
    fig.suptitle(
        f"Digits {pair[0]} vs {pair[1]}: pixel shares |βⱼ|/‖β‖₁ at matched training "
        "loss (cyan contour: strong pixels)" + quick_tag(quick),
        fontsize=11,
    )
    save(fig, path)


def _saliency_figure(pair: tuple[int, int], kind: str) -> Figure:
    """The saliency figure of one pair (module-level callables: the sweep may draw it in a
    worker process)."""
    a, b = pair
    return Figure(
        f"digits_saliency_{a}v{b}",
        f"digits {a} vs {b} ({kind}): shares |beta_j|/|beta|_1 as 8x8 maps at matched loss, "
        "GD / l2 / LE / linf-SAM, L = 2, 3",
        f"On digits {a} vs {b}, which pixels does each algorithm's predictor rely on as training "
        "proceeds: the strong, stroke pixels (GD) or, first, the weak ones (SAM)?",
        partial(study_tasks, (pair,)),
        partial(draw_saliency, pair),
    )


SALIENCY_0V1 = _saliency_figure((0, 1), "easy pair")
SALIENCY_3V8 = _saliency_figure((3, 8), "hard pair")
SALIENCY_4V9 = _saliency_figure((4, 9), "hard pair")
