"""The tilted (maximum-entropy) rule of the sliding combination
(:mod:`flows.integrator.filippov`): weights on all ``2^k`` one-sided fields, where the
multilinear rule (:mod:`flows.integrator.multilinear`) has no weights in ``[0, 1]^k``.

Filippov's set at a junction of ``k`` surfaces is every convex combination ``w`` of the
``M = 2^k`` one-sided fields whose normal rates ``r_v`` (columns of ``rows``, (k, M)) cancel:
``sum_v w_v r_v = 0``. The multilinear rule looks for ``w`` among products of ``k`` independent
shares; near a junction where the surfaces' rates are nearly parallel that family can miss the
set although it is not empty. The tilted rule takes the member of greatest entropy,

    w_v = exp(mu . r_v) / sum_u exp(mu . r_u),

whose ``mu`` (k) minimises the convex ``log sum_v exp(mu . r_v)`` (its gradient is
``sum_v w_v r_v``). The minimiser exists exactly when 0 lies inside the convex hull of the
``r_v``; as 0 reaches the hull's boundary, the weights concentrate on a face (the spread
``max_v mu . r_v - min_v mu . r_v``, the log of the ratio of the largest weight to the
smallest, grows without bound): the flow is about to leave some surface
(:data:`SPREAD_RELEASE`). ``|mu|`` itself can be large well inside the hull, where the rates
are nearly linearly dependent. For ``k = 1`` it is Filippov's unique combination. :class:`flows.integrator.filippov.FilippovField`
applies it to the rates in the rescaled clock (shares of ``tau``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: Newton steps (each with a backtracking line search) at most.
TILT_ITERATIONS = 100
#: Converged where ``|sum_v w_v r_v|`` is below this (rows scaled to 1); where the line search
#: can no longer decrease the log-sum-exp, the iterate is at rounding: converged below
#: ``ROUNDING_TOL``.
TILT_TOL = 1e-13
ROUNDING_TOL = 1e-10
#: The combination is on the hull's boundary (a surface releases) where the spread of the
#: exponents reaches this: the largest weight is then ``e^SPREAD_RELEASE`` times the smallest.
SPREAD_RELEASE = 700.0


class _Point:
    """The log-sum-exp at ``mu``: the exponents ``mu . r_v``, the weights, the value and the
    gradient ``sum_v w_v r_v`` (one pass, by the stable log-sum-exp)."""

    __slots__ = ("mu", "exponent", "w", "value", "gradient")

    def __init__(self, mu: np.ndarray, rows: np.ndarray):
        self.mu = mu
        self.exponent = mu @ rows
        top = self.exponent.max()
        scaled = np.exp(self.exponent - top)
        total = scaled.sum()
        self.w = scaled / total
        self.value = top + np.log(total)
        self.gradient = rows @ self.w

    @property
    def spread(self) -> float:
        """``max_v mu . r_v - min_v mu . r_v``: the log of the largest weight over the
        smallest."""
        return float(self.exponent.max() - self.exponent.min())

    def size(self) -> float:
        """``max |gradient|``."""
        return float(np.abs(self.gradient).max())


def solve_tilted(rows: np.ndarray) -> tuple[np.ndarray, float, bool]:
    """``(w (M,), spread, exact)`` of the tilted rule for normal rates ``rows`` (k, M), each
    row scaled by its largest entry first. Damped Newton on the log-sum-exp from ``mu = 0``
    (uniform weights; Hessian ``sum_v w_v r_v r_v^T - g g^T``); ``exact`` where
    ``|sum w r| <= TILT_TOL`` with the spread (the log of the largest weight over the
    smallest) below :data:`SPREAD_RELEASE`. Otherwise the last iterate (finite weights, not a
    solution). :func:`flows.compiled._sliding_kernels.tilted` is the same iteration for scaled
    rows, compiled."""
    scale = np.abs(rows).max(axis=-1)
    rows = rows / np.where(scale > 0, scale, 1.0)[:, None]
    ridge = 1e-14 * np.eye(rows.shape[0])
    point = _Point(np.zeros(rows.shape[0]), rows)
    for _ in range(TILT_ITERATIONS):
        g = point.gradient
        if point.size() <= TILT_TOL:
            return point.w, point.spread, point.spread < SPREAD_RELEASE
        hessian = (rows * point.w) @ rows.T - np.outer(g, g)
        try:
            step = np.linalg.solve(hessian + ridge, g)
        except np.linalg.LinAlgError:
            break
        size, slope = 1.0, float(g @ step)
        while size > 1e-12:
            trial = _Point(point.mu - size * step, rows)
            if (
                trial.value <= point.value - 1e-4 * size * slope
                or trial.size() < 0.5 * point.size()
            ):
                break  # near the minimum the value changes below rounding: the gradient decides
            size /= 2.0
        else:
            exact = point.size() <= ROUNDING_TOL and point.spread < SPREAD_RELEASE
            return point.w, point.spread, exact
        point = trial
        if point.spread > 2.0 * SPREAD_RELEASE:
            break
    return point.w, point.spread, False


def solve_tilted_in_tau(
    rates: np.ndarray, speeds: np.ndarray, compiled: Callable | None = None
) -> tuple[np.ndarray, np.ndarray, float, bool]:
    """The tilted rule on shares of rescaled time: ``(w_t (M,), w_tau (M,), spread, exact)``.

    ``rates`` (k, M) are the normal rates in the original clock scaled by ``1 / max c``, and
    ``speeds`` (M,) each vertex's ``c_v / max c``; the rule weighs the rates in the rescaled
    clock, ``rates / speeds`` (counted in ``t``, a side whose clock factor is 1e-30 of the
    others' has rates of 1e-30 too, and the maximum-entropy weights would pile onto it). Its
    shares ``w_tau`` combine the fields in the original clock with weights
    ``w_t ∝ w_tau / c_v``. A vertex whose clock factor underflows to 0 gets no weight.
    ``compiled``: :func:`solve_tilted` of the moving vertices' rates in the rescaled clock,
    compiled (the backend's, :meth:`flows.compiled.sliding.CompiledSliding.tilted`: the same
    divisions, then the same iteration).
    """
    moving = speeds > 0
    shares = np.zeros(len(speeds))
    if not moving.any():
        return shares, shares, np.inf, False
    if compiled is None:
        found, size, exact = solve_tilted(rates[:, moving] / speeds[moving])
    else:
        found, size, exact = compiled(rates, speeds)
    shares[moving] = found
    with np.errstate(divide="ignore"):  # a share that underflowed: log 0 = -inf, weight 0
        log_weights = np.log(found) - np.log(speeds[moving])  # speeds span 1e-300: in logs
    weights = np.zeros(len(speeds))
    weights[moving] = np.exp(log_weights - np.max(log_weights))
    return weights / np.sum(weights), shares, size, exact
