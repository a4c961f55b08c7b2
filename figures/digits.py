"""The digits study: GD and SAM flows on pairs of scikit-learn's 8x8 handwritten digits, the
analog of the paper's Grad-CAM figures (docs/theory.md §14: on images SAM with an intermediate
initialization attends to low-intensity pixels, GD to the digit).

This module holds the study's settings, its runs (task kind ``'digits_flow'``,
:func:`analysis.digits_runs.digits_flow`) and each pair's data and references. Its figures: the
saliency maps in :mod:`figures.digits_saliency`, the rank correlation between shares and pixel
strength in :mod:`figures.digits_minor_first`, test accuracy, margins and angles to the
max-margin predictors in :mod:`figures.digits_generalization`.

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
from functools import cache

import numpy as np

import analysis.digits_runs  # noqa: F401  (registers the task kind 'digits_flow')
from analysis.maxmargin import max_margin
from analysis.saliency import (
    orthant_l1_max_margin,
    orthant_signs,
    pixel_strength,
)
from flows.data import Dataset
from flows.datasets import DIGITS_SIDE, digits
from flows.sweep.registry import Result, Task

from .common import OKABE_ITO, Setting, plt

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


def study_tasks(pairs: tuple[tuple[int, int], ...], s: Setting) -> list[Task]:
    """Every run of ``pairs`` (see :func:`runs` for the order)."""
    return [run_task(pair, depth, alg, hp, s.quick) for pair, depth, alg, hp in runs(pairs)]


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


def algorithm_handles() -> list:
    """Legend entries of the algorithms, in their colours and line styles."""
    return [
        plt.Line2D([], [], color=COLORS[a], label=NAMES[a], **LINE_STYLES[a]) for a, _ in ALGORITHMS
    ]


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
