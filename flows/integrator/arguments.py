"""The arguments of :func:`flows.simulate`: checks (``ValueError`` naming the argument) and
what follows from them before any integration (the collapse radius, the sign warning)."""

from __future__ import annotations

import functools
import numbers
import warnings
from collections.abc import Collection, Mapping

import numpy as np

from ..checks import choice, integer, positive
from ..clocks import CLOCKS
from ..data import Dataset, sign_constrained_separable
from ..initialization import kept_sign_pattern
from ..memo import recall
from ..model import LOSSES
from ..schedules import maximum_of
from ..user_frame import user_stacklevel

#: The largest ``rtol`` :func:`flows.simulate` takes: at 0.5, log|beta| is off by 1e-2.
MAX_RTOL = 0.1


def check_options(
    options: Mapping, max_points: int, methods: Collection[str], backends: Collection[str]
) -> dict:
    """The keyword settings of :func:`flows.simulate` (clock, loss, horizon, output grid,
    tolerances, solver, chart, budget, backend, original time, own steps), checked and in their
    working types (:mod:`flows.checks`)."""
    out = dict(options)
    choice(options["clock"], "clock", CLOCKS)
    choice(options["loss"], "loss", LOSSES)
    out["t_max"] = positive(options["t_max"], "t_max")
    out["n_points"] = integer(options["n_points"], "n_points", 2, max_points)
    out["max_nfev"] = integer(options["max_nfev"], "max_nfev", 1)
    if options["loss_floor"] is not None:
        out["loss_floor"] = positive(options["loss_floor"], "loss_floor")
    for flag in ("original_time", "continue_by_steps"):
        if not isinstance(options[flag], (bool, np.bool_)):
            raise ValueError(f"{flag} must be True or False, got {options[flag]!r}")
    if options["chart_scale"] is not None:
        out["chart_scale"] = positive(options["chart_scale"], "chart_scale")
    out["rtol"] = positive(options["rtol"], "rtol")
    if out["rtol"] > MAX_RTOL:
        raise ValueError(
            f"rtol must be <= {MAX_RTOL} (beyond it the solver's steps leave the path), "
            f"got {options['rtol']!r}"
        )
    out["atol"] = positive(options["atol"], "atol")
    choice(options["method"], "method", methods)
    choice(options["backend"], "backend", backends)
    if not isinstance(options["chart"], str):  # choose_chart checks the name
        raise ValueError(f"chart must be a chart name, got {options['chart']!r}")
    return out


#: Below this smallest nonzero initial entry the asinh chart takes that entry as its scale
#: (:func:`default_chart_scale`): with ``atol = 1e-100`` and ``rtol = 1e-10`` the chart
#: ``z = asinh(w)`` controls ``w`` relatively only down to ``|w| ~ 1e-90``.
SMALL_INIT = 1e-80


def default_chart_scale(groups: np.ndarray) -> float:
    """``delta`` of ``z = asinh(w / delta)`` for ``chart_scale=None``: 1, or the smallest nonzero
    ``|alpha|`` where that is below :data:`SMALL_INIT` (a vanishing initialisation, e.g.
    ``alpha = 1e-300``, is then integrated at its own scale)."""
    nonzero = np.abs(groups[groups != 0])
    smallest = float(nonzero.min()) if nonzero.size else 1.0
    return smallest if smallest < SMALL_INIT else 1.0


def warn_if_signs_cannot_separate(data: Dataset, alpha, depth: int, algorithm: str) -> None:
    """A ``RuntimeWarning`` when the initialization confines ``beta`` to an orthant that no
    separator of ``data`` lies in (:func:`sign_warning`)."""
    message = sign_warning(data, alpha, depth, algorithm)
    if message is not None:
        warnings.warn(message, RuntimeWarning, stacklevel=user_stacklevel())


def sign_warning(data: Dataset, alpha, depth: int, algorithm: str) -> str | None:
    """The warning's message where the initialization confines ``beta`` to an orthant that no
    separator of ``data`` lies in (:func:`flows.initialization.kept_sign_pattern`): the loss
    cannot tend to 0, and the flow typically stops at a stationary point. A signed (L, d)
    ``alpha`` with other signs is the fix. None where the signs can separate the data, or
    none are kept."""
    if data.regression:
        return None
    signs = _kept_signs(alpha, depth, data.d, algorithm)
    if signs is None or _separable_with_signs(data, signs):
        return None
    return (
        f"the initialization keeps sign(beta) = {[int(s) for s in signs]} (depth {depth}), "
        "and no predictor with these signs separates the data: the loss cannot tend to 0 "
        "(alpha=flows.orthant_init(signs, depth, scale) starts beta in the orthant of signs)"
    )


def _kept_signs(alpha, depth: int, d: int, algorithm: str) -> tuple[float, ...] | None:
    """:func:`flows.initialization.kept_sign_pattern` as a tuple (None: no orthant kept),
    looked up once per value for a scalar ``alpha`` (:func:`_kept_signs_of_scalar`)."""
    if isinstance(alpha, numbers.Real):
        return _kept_signs_of_scalar(float(alpha), depth, d, algorithm)
    signs = kept_sign_pattern(alpha, depth, d, algorithm=algorithm)
    return None if signs is None else tuple(signs.tolist())


@functools.lru_cache(maxsize=256)
def _kept_signs_of_scalar(
    alpha: float, depth: int, d: int, algorithm: str
) -> tuple[float, ...] | None:
    """:func:`_kept_signs` of a scalar ``alpha``, cached."""
    signs = kept_sign_pattern(alpha, depth, d, algorithm=algorithm)
    return None if signs is None else tuple(signs.tolist())


def _separable_with_signs(data: Dataset, signs: tuple) -> bool:
    """:func:`flows.data.sign_constrained_separable`, one LP per data set and signs (kept on
    the data set, :func:`flows.memo.recall`)."""
    return recall(
        data,
        ("separable with signs", signs),
        lambda: sign_constrained_separable(data, np.array(signs)),
    )


def largest_radius(algo, hp: Mapping, t_max: float) -> float:
    """The perturbation size for the collapse threshold: the radius at the largest value of
    every scheduled hyper-parameter over the run."""
    return float(algo.radius({k: maximum_of(v, t_max, k) for k, v in hp.items()}))
