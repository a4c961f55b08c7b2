"""The digits study: GD and SAM flows on pairs of scikit-learn's 8x8 handwritten digits, the
analog of the paper's Grad-CAM figures (docs/theory.md §14: on images SAM with an intermediate
initialization attends to low-intensity pixels, GD to the digit).

This module holds the study's parameters (:data:`PARAMS`), its runs (task kind
``'digits_flow'``, :func:`analysis.digits_runs.digits_flow`) and each pair's data and
references. Its figures: the saliency maps in :mod:`figures.digits_saliency`, the rank
correlation between shares and pixel strength in :mod:`figures.digits_minor_first`, test
accuracy, margins, angles to the max-margin predictors and KKT residuals in
:mod:`figures.digits_generalization`.

Settings (every pair and depth): alpha = 0.2; l2-SAM rho = 1 (alpha / rho = 0.2 is about
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

import re
from collections.abc import Callable
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

from . import style
from .common import Setting, plt

#: The study's parameters and their defaults: the digit pairs (``"3v8"``: digit 3 is y = +1),
#: the depths and each depth's horizon ``tau_max`` (in the order of ``depths``), the
#: initialization scale, l2-SAM's (and LE-SAM's largest) radius, l_inf-SAM's radius and the
#: algorithms compared.
PARAMS: dict[str, object] = {
    "pairs": ("0v1", "3v8", "4v9"),
    "depths": (2, 3),
    "tau_max": (80.0, 120.0),
    "alpha": 0.2,
    "rho": 1.0,
    "rho_linf": 0.1,
    "algorithms": ("gd", "l2-sam", "le-sam", "linf-sam"),
}
#: The smoke test's horizons.
QUICK: dict[str, object] = {"tau_max": (6.0, 8.0)}
LOSS_FLOOR = 1e-30

#: Each algorithm's hyper-parameters from a setting. l_inf-SAM: its switching surfaces are
#: events and its sliding is exact (flows.integrator.filippov); on 64 pixels many surfaces come
#: to slide at once (2^k one-sided fields per step, at most 6 coupled ones). The runs that do
#: not reach the floor end at that cap; every run needs at most 2.9k evaluations, and this
#: budget bounds the cost of any future stall.
HYPER: dict[str, Callable[[Setting], dict]] = {
    "gd": lambda s: {},
    "l2-sam": lambda s: {"rho": s.rho},
    "le-sam": lambda s: {"rho_max": s.rho, "sigma_start_fraction": 1.0},
    "linf-sam": lambda s: {"rho": s.rho_linf, "max_nfev": 4_000},
}
#: Each algorithm's radius as printed beside its name.
RADIUS: dict[str, Callable[[Setting], str]] = {
    "gd": lambda s: "",
    "l2-sam": lambda s: f"ρ = {s.rho:g}",
    "le-sam": lambda s: f"$\\rho_{{max}}$ = {s.rho:g}",
    "linf-sam": lambda s: f"ρ = {s.rho_linf:g}",
}
#: Line widths and opacities: l2-SAM wide and light, so that LE-SAM shows on top of it where
#: the two coincide (at L = 2 the budget hardly binds).
WIDTHS: dict[str, dict] = {
    "gd": {"lw": 1.2},
    "l2-sam": {"lw": 2.8, "alpha": 0.5},
    "le-sam": {"lw": 1.0},
    "linf-sam": {"lw": 1.2},
}


def pair_of(text: str) -> tuple[int, int]:
    """``"3v8"`` as ``(3, 8)`` (``ValueError`` otherwise)."""
    match = re.fullmatch(r"(\d)v(\d)", text)
    if match is None or match.group(1) == match.group(2):
        raise ValueError(f"a pair is two different digits as '3v8', got {text!r}")
    return int(match.group(1)), int(match.group(2))


def check_study(s: Setting) -> str | None:
    """What is wrong with a setting of the study: a pair not as ``3v8``, an unknown algorithm,
    a horizon per depth missing, a radius or scale that is not positive."""
    try:
        for pair in s.pairs:
            pair_of(pair)
    except ValueError as error:
        return str(error)
    unknown = [a for a in s.algorithms if a not in HYPER]
    if unknown:
        return f"algorithms must be among {list(HYPER)}, got {unknown}"
    if len(s.tau_max) != len(s.depths):
        return f"give one tau_max per depth: depths = {s.depths}, tau_max = {s.tau_max}"
    if min(s.alpha, s.rho, s.rho_linf, *s.tau_max) <= 0:
        return "alpha, rho, rho_linf and tau_max must be positive"
    return None


def horizon(s: Setting, depth: int) -> float:
    """The horizon ``tau_max`` of the runs at ``depth``."""
    return float(s.tau_max[list(s.depths).index(depth)])


def run_task(pair: str, depth: int, algorithm: str, s: Setting) -> Task:
    """One ``'digits_flow'`` run (default split: seed 0, a quarter of each class for testing)."""
    a, b = pair_of(pair)
    return Task(
        "digits_flow",
        {
            "a": a,
            "b": b,
            "algorithm": algorithm,
            "depth": depth,
            "alpha": s.alpha,
            **HYPER[algorithm](s),
            "tau_max": horizon(s, depth),
            "loss_floor": LOSS_FLOOR,
        },
    )


def runs(s: Setting) -> list[tuple[str, int, str]]:
    """``(pair, depth, algorithm)`` in task order: pair, depth, algorithm."""
    return [(pair, depth, alg) for pair in s.pairs for depth in s.depths for alg in s.algorithms]


def study_tasks(s: Setting) -> list[Task]:
    """Every run of the setting (see :func:`runs` for the order)."""
    return [run_task(pair, depth, alg, s) for pair, depth, alg in runs(s)]


def by_run(s: Setting, results: list[Result]) -> dict[tuple[str, int, str], Result]:
    """Results keyed by ``(pair, depth, algorithm)``."""
    return dict(zip(runs(s), results, strict=True))


def name(algorithm: str, s: Setting) -> str:
    """The algorithm's label with its radius: ``ℓ2-SAM, ρ = 1``."""
    radius = RADIUS[algorithm](s)
    return style.label(algorithm) + (f", {radius}" if radius else "")


def pair_title(pair: str) -> str:
    """``digits 3v8`` (the first digit is the class y = +1)."""
    return f"digits {pair}"


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
def pair_data(pair: str) -> PairData:
    """:class:`PairData` of one pair (``"3v8"``; cached)."""
    digits_pair = pair_of(pair)
    train, test = digits(*digits_pair)
    signs = orthant_signs(train.X, train.y)
    refs = {
        "ℓ2": max_margin(train, p=2).direction,
        "ℓ1": max_margin(train, p=1).direction,
        "ℓ1 in orthant": orthant_l1_max_margin(train.X, train.y, signs),
    }
    return PairData(digits_pair, train, test, pixel_strength(train.X, train.y), signs, refs)


def image(v: np.ndarray) -> np.ndarray:
    """A length-64 pixel vector as the 8x8 image (row-major)."""
    return np.asarray(v).reshape(DIGITS_SIDE, DIGITS_SIDE)


def algorithm_handles(s: Setting) -> list:
    """Legend entries of the setting's algorithms (their colours, widths and radii)."""
    return [
        plt.Line2D([], [], color=style.ALGORITHM_STYLES[a].color, label=name(a, s), **WIDTHS[a])
        for a in s.algorithms
    ]


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
