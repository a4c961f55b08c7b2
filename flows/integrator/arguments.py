"""The arguments of :func:`flows.simulate`: checks (``ValueError`` naming the argument) and
what follows from them before any integration (the collapse radius, the sign warning)."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Collection, Mapping

import numpy as np

from ..clocks import CLOCKS
from ..data import Dataset, sign_constrained_separable
from ..initialization import kept_sign_pattern
from ..model import LOSSES
from ..schedules import maximum_of


def finite(value) -> bool:
    """Whether ``value`` is a finite number (also False for an int beyond float64)."""
    try:
        return bool(np.isfinite(float(value)))
    except (OverflowError, TypeError, ValueError):
        return False


def check_count(name: str, value, least: int, most: int | None = None) -> None:
    """An integer in ``[least, most]``; ``ValueError`` naming ``name`` otherwise."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, np.integer))
        or value < least
        or (most is not None and value > most)
    ):
        bound = f">= {least}" if most is None else f"in [{least}, {most}]"
        raise ValueError(f"{name} must be an integer {bound}, got {value!r}")


#: The largest ``rtol`` :func:`flows.simulate` takes: at 0.5, log|beta| is off by 1e-2.
MAX_RTOL = 0.1


def check_positive(name: str, value, types: tuple = (int, float)) -> None:
    """A finite number > 0 of one of ``types`` (not a bool); ``ValueError`` naming ``name``
    otherwise."""
    is_bool = isinstance(value, (bool, np.bool_))
    if is_bool or not (isinstance(value, types) and finite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def check_name(name: str, value, choices: Collection[str]) -> None:
    """A string among ``choices``; ``ValueError`` naming ``name`` otherwise (a list or an array
    is refused before it is looked up: it is unhashable or compares elementwise)."""
    if not isinstance(value, str) or value not in choices:
        shown = sorted(choices) if isinstance(choices, Mapping) else list(choices)  # keep order
        raise ValueError(f"{name} must be one of {shown}, got {value!r}")


def check_options(
    options: Mapping, max_points: int, methods: Collection[str], backends: Collection[str]
) -> None:
    """The keyword settings of :func:`flows.simulate` (clock, loss, horizon, output grid,
    tolerances, solver, chart, budget, backend, original time)."""
    check_name("clock", options["clock"], CLOCKS)
    check_name("loss", options["loss"], LOSSES)
    check_positive("t_max", options["t_max"], (int, float, np.integer, np.floating))
    check_count("n_points", options["n_points"], 2, max_points)
    check_count("max_nfev", options["max_nfev"], 1)
    if options["loss_floor"] is not None:
        check_positive("loss_floor", options["loss_floor"], (int, float, np.integer, np.floating))
    if not isinstance(options["original_time"], (bool, np.bool_)):
        raise ValueError(f"original_time must be True or False, got {options['original_time']!r}")
    check_positive("chart_scale", options["chart_scale"])
    check_positive("rtol", options["rtol"])
    if options["rtol"] > MAX_RTOL:
        raise ValueError(
            f"rtol must be <= {MAX_RTOL} (beyond it the solver's steps leave the path), "
            f"got {options['rtol']!r}"
        )
    check_positive("atol", options["atol"])
    check_name("method", options["method"], methods)
    check_name("backend", options["backend"], backends)
    if not isinstance(options["chart"], str):  # choose_chart checks the name
        raise ValueError(f"chart must be a chart name, got {options['chart']!r}")


def warn_if_signs_cannot_separate(data: Dataset, alpha, depth: int, algorithm: str) -> None:
    """A ``RuntimeWarning`` when the initialization confines ``beta`` to an orthant that no
    separator of ``data`` lies in (:func:`flows.initialization.kept_sign_pattern`): the loss
    cannot tend to 0, and the flow typically stops at a stationary point. A signed (L, d)
    ``alpha`` with other signs is the fix."""
    signs = kept_sign_pattern(alpha, depth, data.d, algorithm=algorithm)
    if signs is not None and not _separable_with_signs(data, tuple(signs)):
        warnings.warn(
            f"the initialization keeps sign(beta) = {signs.astype(int).tolist()} (depth {depth}), "
            "and no predictor with these signs separates the data: the loss cannot tend to 0 "
            "(use a signed (L, d) alpha to start in another orthant)",
            RuntimeWarning,
            stacklevel=4,
        )


@functools.lru_cache(maxsize=64)
def _separable_with_signs(data: Dataset, signs: tuple) -> bool:
    """Cached :func:`flows.data.sign_constrained_separable` (one LP per data set and signs)."""
    return sign_constrained_separable(data, np.array(signs))


def largest_radius(algo, hp: Mapping, t_max: float) -> float:
    """The perturbation size for the collapse threshold: the radius at the largest value of
    every scheduled hyper-parameter over the run."""
    return float(algo.radius({k: maximum_of(v, t_max, k) for k, v in hp.items()}))
