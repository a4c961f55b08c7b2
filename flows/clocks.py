"""Clocks: the same path, parametrized by rescaled time ``tau`` or by original time ``t``.

docs/theory.md §3. The engine always evaluates the *rescaled* field ``F = dtheta/dtau`` (the gradient of
the weighted margin at ``theta + eps``), related to the original one by
``dtheta/dt = -grad L(theta + eps) = c(theta + eps) F`` with
``c = (1/n) sum_i |l'(m_i(theta + eps))|`` (for one example ``c = -l'(m)``, the paper's clock;
for ``n > 1`` this is the natural generalisation, the mean loss-derivative weight).

A run integrates in its own clock ``s`` and carries ``tau`` along (``dtau/ds`` = 1 or ``c``).
The original time of a rescaled run, ``t(tau) = int_0^tau ds / c(s)``, is a stiff quadrature
(``log t`` follows the margin, which grows like ``exp(2 mu_d tau)``); it is computed afterwards
by an adaptive quadrature in log space, :func:`log_original_time`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Beyond ``-log c > LOG_T_LIMIT`` (margins near 1e100) ``log t`` is reported as ``+inf``.
LOG_T_LIMIT = 1e100
EPS = np.finfo(float).eps


@dataclass(frozen=True)
class Clock:
    """One clock: ``log(dtau/ds)`` from ``log c``, and whether ``s`` is the original time."""

    log_speed: Callable[[Any], Any]  # log c (a float or an array) -> log(dtau/ds)
    original: bool


CLOCKS: dict[str, Clock] = {
    "rescaled": Clock(log_speed=lambda log_c: 0.0, original=False),
    "original": Clock(log_speed=lambda log_c: log_c, original=True),
}


def get_clock(name: str) -> Clock:
    """Look ``name`` up in :data:`CLOCKS`; ``ValueError`` naming 'clock' if unknown."""
    try:
        return CLOCKS[name]
    except (KeyError, TypeError):
        raise ValueError(f"clock must be one of {sorted(CLOCKS)}, got {name!r}") from None


#: Chebyshev–Lobatto nodes on [0, 1] (they include 0, 1/2 and 1), on which ``K`` is sampled; a
#: uniform grid of 65 points on which its interpolant is inspected.
_NODES = 0.5 * (1.0 - np.cos(np.pi * np.arange(9) / 8))
_FINE = np.linspace(0.0, 1.0, 65)
#: Barycentric weights of :data:`_NODES`.
_BARYCENTRIC = np.array([1.0 / np.prod(xj - np.delete(_NODES, j)) for j, xj in enumerate(_NODES)])


def _lagrange_matrix(nodes: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Rows: the Lagrange basis of ``nodes`` evaluated at ``x``."""
    out = np.ones((len(x), len(nodes)))
    for j, xj in enumerate(nodes):
        for m, xm in enumerate(nodes):
            if m != j:
                out[:, j] *= (x - xm) / (xj - xm)
    return out


_INTERP_FINE = _lagrange_matrix(_NODES, _FINE)
#: Values at :data:`_NODES` -> coefficients of the interpolant in Chebyshev polynomials.
_TO_CHEBYSHEV = np.linalg.inv(np.polynomial.chebyshev.chebvander(2.0 * _NODES - 1.0, 8))
#: 32-point Gauss–Legendre rule on [0, 1], and the interpolant evaluated at its nodes.
_GL_X, _GL_W = np.polynomial.legendre.leggauss(32)
_GL_X, _GL_LOGW = 0.5 * (_GL_X + 1.0), np.log(0.5 * _GL_W)
_INTERP_GAUSS = _lagrange_matrix(_NODES, _GL_X)
#: Largest variation of ``K`` over an interval integrated by the Gauss–Legendre rule (its
#: relative error on ``exp(K)`` is below 1e-15 up to there).
GL_SPREAD = 80.0
#: Where ``K`` exceeds its maximum on an interval by more than this, ``exp(K)`` is negligible
#: (``e^-45 ~ 3e-20`` relative): a steep interval is narrowed to the window above.
PEAK_DROP = 45.0
#: Interpolation error (absolute, in ``K``) below which the interpolant is trusted to place that
#: window.
TRUSTED = 0.1
#: Refinements of the peak window (:func:`_peak_window`), each on a grid of 17 points.
WINDOW_STAGES = 3
_SUB = np.linspace(0.0, 1.0, 17)
#: An interval of at most this many float spacings of its times is accepted as it is (its nodes
#: are barely distinct floats).
ATOMIC_ULPS = 64
#: Bisection and narrowing levels of :func:`log_exp_integrals` (each at least halves an
#: interval).
MAX_LEVELS = 40
#: Intervals refined at once by :func:`log_exp_integrals`; past this, a level is accepted as is
#: (a bound on memory: each interval costs a few arrays of 65 numbers).
MAX_INTERVALS = 20_000


def _interpolate(k: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The interpolant through ``k`` (rows: values at :data:`_NODES`) at points ``x`` (one row
    of points in [0, 1] per row of ``k``), by the barycentric formula (a node's own value where
    a point is a node)."""
    d = x[:, :, None] - _NODES
    exact = d == 0.0
    w = np.where(exact, 0.0, _BARYCENTRIC / np.where(exact, 1.0, d))
    values = np.einsum("mqj,mj->mq", w, k) / np.sum(w, axis=2)
    node = np.take_along_axis(k, np.argmax(exact, axis=2), axis=1)
    return np.where(np.any(exact, axis=2), node, values)


def _interpolation_error(k: np.ndarray) -> np.ndarray:
    """Estimate of ``max |K - P|`` for the degree-8 interpolant ``P`` through each row of ``k``.

    From its Chebyshev coefficients ``a_n``: if they decay at a rate ``r < 1/2`` (estimated from
    ``a_5 .. a_8``), the neglected tail ``sum_{n > 8} |a_n| ~ |a_8| r / (1 - r)``, doubled;
    otherwise (under-resolved) ``4 (|a_7| + |a_8|)``.
    """
    a = np.abs(k @ _TO_CHEBYSHEV.T)
    last = a[:, 7] + a[:, 8]
    r = np.minimum(1.0, np.sqrt(last / (a[:, 5] + a[:, 6] + 1e-300)))
    geometric = 2.0 * np.maximum(a[:, 8], r * a[:, 7]) * r / (1.0 - np.minimum(r, 0.5))
    return np.where(r < 0.5, geometric, 4.0 * last)


def _log_exp_gauss(length: np.ndarray, kg: np.ndarray) -> np.ndarray:
    """``log int exp(P)`` per row over intervals of the given ``length`` from ``P`` at the
    32 Gauss–Legendre nodes (rows of ``kg``; accurate to ~1e-15 while ``P`` varies by <= 80)."""
    top = np.max(kg, axis=1, keepdims=True)
    return top[:, 0] + np.log(np.sum(np.exp(kg - top + _GL_LOGW), axis=1)) + np.log(length)


def _log_exp_chords(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``log int exp(K)`` per row, ``K`` piecewise linear through the values ``k[i]`` (shape
    (M, P)) on a grid of step ``h[i]``."""
    dk = np.abs(np.diff(k, axis=1))
    top = np.maximum(k[:, 1:], k[:, :-1])
    safe = np.maximum(dk, 1e-12)
    pieces = np.where(
        dk < 1e-12, 0.5 * (k[:, 1:] + k[:, :-1]), top + np.log(-np.expm1(-safe)) - np.log(safe)
    )
    best = np.max(pieces, axis=1, keepdims=True)
    return best[:, 0] + np.log(np.sum(np.exp(pieces - best), axis=1)) + np.log(h)


def _peak_window(k: np.ndarray, fine: np.ndarray, floor: np.ndarray) -> tuple[np.ndarray, ...]:
    """``[x_lo, x_hi]`` (fractions of each interval) outside which the interpolant through
    ``k`` stays below ``floor``: located on :data:`_FINE`, then :data:`WINDOW_STAGES` times
    within the bracketing cell on the 17-point grid :data:`_SUB` (to ``64 * 16^3`` ths of the
    interval), on the sides where the window does not reach the interval's end."""
    n, m = _FINE.size, _SUB.size
    above = fine >= floor[:, None]
    first = np.argmax(above, axis=1)
    last = n - 1 - np.argmax(above[:, ::-1], axis=1)
    x_lo, x_hi = _FINE[np.maximum(first - 1, 0)], _FINE[np.minimum(last + 1, n - 1)]
    low, high = np.flatnonzero(first > 0), np.flatnonzero(last < n - 1)
    cell = _FINE[1]
    for _ in range(WINDOW_STAGES):
        sub = x_lo[low, None] + cell * _SUB
        i = np.argmax(_interpolate(k[low], sub) >= floor[low, None], axis=1) - 1
        x_lo[low] = sub[np.arange(low.size), np.maximum(i, 0)]
        sub = (x_hi[high] - cell)[:, None] + cell * _SUB
        i = m - np.argmax(_interpolate(k[high], sub)[:, ::-1] >= floor[high, None], axis=1)
        x_hi[high] = sub[np.arange(high.size), np.minimum(i, m - 1)]
        cell *= _SUB[1]
    return x_lo, x_hi


#: An interval rule: ``(lo, hi, k, tol, last) -> (value, done, narrow, x_lo, x_hi)``.
Rule = Callable[..., tuple[np.ndarray, ...]]


def _interval_rule(
    lo: np.ndarray, hi: np.ndarray, k: np.ndarray, tol: float, last: bool
) -> tuple[np.ndarray, ...]:
    """One level of :func:`log_exp_integrals` on intervals ``[lo, hi]`` with ``K`` at the nodes
    (rows of ``k``): ``log int exp(K)``, whether it is accepted, and for the others whether to
    narrow them to a window ``[x_lo, x_hi]`` (fractions) or to bisect them.

    ``K`` is interpolated (degree 8). An interval is accepted when the interpolation error
    estimate is below ``tol`` relative to the value (or below the resolution of ``K`` in
    floats: ``K`` varies by ``spread * ulp(s) / length`` between representable times) and
    ``exp(P)`` is integrated accurately: by Gauss–Legendre where ``P`` varies by at most
    :data:`GL_SPREAD`, on the whole interval or, for a steeper one, on the window where ``P``
    is within :data:`PEAK_DROP` of its maximum (the rest is negligible); or, where any value
    between ``max P + log(length)`` and the lower bound ``max P + log(length) - 1 -
    log(64 spread)`` (Markov's inequality) is within tolerance, by exponential chords on
    :data:`_FINE`. A steep interval with a trusted interpolant (error below :data:`TRUSTED`,
    the tolerance or the resolution) whose window is too steep for the rule is narrowed to the
    window (and sampled again there); anything else is bisected. At the ``last`` level, and on
    an interval only :data:`ATOMIC_ULPS` floats long, everything is accepted (by chords where
    nothing better applies).
    """
    length = hi - lo
    error = _interpolation_error(k)
    fine = k @ _INTERP_FINE.T
    top = np.max(fine, axis=1)
    spread = top - np.min(fine, axis=1)
    scale = np.maximum(1.0, np.abs(top))
    reach = np.maximum(np.abs(lo), np.abs(hi))
    floor = 100.0 * EPS * spread * reach / length
    atomic = length <= ATOMIC_ULPS * np.spacing(reach)
    gauss = spread <= GL_SPREAD
    flat = ~gauss & ((10.0 + np.log1p(spread) <= tol * scale) | atomic | last)
    value = np.full(len(lo), np.nan)
    value[gauss] = _log_exp_gauss(length[gauss], k[gauss] @ _INTERP_GAUSS.T)
    value[flat] = _log_exp_chords(length[flat] * _FINE[1], fine[flat])
    steep = ~gauss & ~flat & (error <= np.maximum(TRUSTED, tol * scale) + floor)
    x_lo, x_hi = np.zeros(len(lo)), np.ones(len(lo))
    windowed = np.zeros(len(lo), dtype=bool)
    if np.any(steep):
        ks = k[steep]
        lo_s, hi_s = _peak_window(ks, fine[steep], top[steep] - PEAK_DROP - 2.0 * error[steep])
        kg = _interpolate(ks, lo_s[:, None] + (hi_s - lo_s)[:, None] * _GL_X)
        fits = np.maximum(top[steep], np.max(kg, axis=1)) - np.min(kg, axis=1) <= GL_SPREAD
        windowed[steep] = fits
        value[windowed] = _log_exp_gauss((length[steep] * (hi_s - lo_s))[fits], kg[fits])
        x_lo[steep], x_hi[steep] = lo_s, hi_s
    done = (gauss | flat | windowed) & (error <= tol * np.maximum(1.0, np.abs(value)) + floor)
    broken = ~np.isfinite(k).all(axis=1)  # c = 0 somewhere (K = +inf): t is infinite; else NaN
    value[broken] = np.where(np.any(k[broken] == np.inf, axis=1), np.inf, np.nan)
    done |= atomic | last | broken
    narrow = steep & ~done & (x_hi - x_lo <= 0.5)
    return value, done, narrow, x_lo, x_hi


def log_exp_integrals(
    a: np.ndarray,
    b: np.ndarray,
    K: Callable[[np.ndarray, np.ndarray], np.ndarray],
    tol: float = 1e-9,
    rule: Rule | None = None,
) -> np.ndarray:
    """``log int_{a_i}^{b_i} exp(K)`` for many intervals at once, adaptively.

    ``K(s, ref)`` evaluates the exponent at times ``s`` (a batch); ``ref`` holds, for each
    time, the midpoint of the original interval it belongs to, so that the caller can take
    one-sided values at the interval ends (where ``K`` may jump). Each level samples ``K`` at 9
    Chebyshev–Lobatto nodes of every open interval (one batch) and applies
    :func:`_interval_rule`: accepted intervals are added (in log space) to their original
    interval; the others are narrowed to their peak window or bisected, up to
    :data:`MAX_LEVELS` levels. ``tol`` is relative in log. ``rule`` replaces
    :func:`_interval_rule` by an implementation with the same signature and results (the
    compiled backend's, :func:`flows.compiled._quadrature_kernels.interval_rule`).
    """
    rule = _interval_rule if rule is None else rule
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    ref = 0.5 * (a + b)
    total = np.full(a.shape, -np.inf)
    lo, hi, owner = a, b, np.arange(a.size)
    for level in range(MAX_LEVELS + 1):
        if lo.size == 0:
            break
        nodes = lo[:, None] + _NODES[None, :] * (hi - lo)[:, None]
        k = K(nodes.ravel(), np.repeat(ref[owner], _NODES.size)).reshape(nodes.shape)
        last = level == MAX_LEVELS or lo.size > MAX_INTERVALS
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            value, done, narrow, x_lo, x_hi = rule(lo, hi, k, tol, last)
        np.logaddexp.at(total, owner[done], value[done])
        length = hi - lo
        keep, split = ~done & narrow, ~done & ~narrow
        mid = 0.5 * (lo[split] + hi[split])
        lo, hi, owner = (
            np.concatenate([lo[keep] + x_lo[keep] * length[keep], lo[split], mid]),
            np.concatenate([lo[keep] + x_hi[keep] * length[keep], mid, hi[split]]),
            np.concatenate([owner[keep], owner[split], owner[split]]),
        )
    return total


def log_original_time(
    grid: np.ndarray,
    breakpoints: np.ndarray,
    K: Callable[[np.ndarray, np.ndarray], np.ndarray],
    tol: float = 1e-9,
    rule: Rule | None = None,
) -> np.ndarray:
    """``log t(tau) = log int_0^tau exp(K)``, ``K = -log c``, at the increasing times ``grid``.

    The integral is cut at the grid times and at ``breakpoints`` (event times, where ``K``
    may jump, and solver steps, within each of which the path is one polynomial); the pieces
    are integrated together by :func:`log_exp_integrals` (``K(s, ref)`` and ``rule`` as there) and
    accumulated in log space. Entries from the first time where ``K`` exceeds
    :data:`LOG_T_LIMIT` on are ``+inf`` (``t`` is then beyond ``exp(1e100)``).
    """
    grid = np.asarray(grid, dtype=float)
    out = np.full(grid.shape, np.inf)
    out[0] = -np.inf
    inner = np.asarray(breakpoints, dtype=float)
    inner = inner[(inner > grid[0]) & (inner < grid[-1])]
    edges = np.unique(np.concatenate([grid, inner]))
    if edges.size < 2:
        return out
    lo, hi = edges[:-1], edges[1:]
    beyond = ~(K(hi, 0.5 * (lo + hi)) <= LOG_T_LIMIT)
    n_ok = int(np.argmax(beyond)) if np.any(beyond) else lo.size
    logs = log_exp_integrals(lo[:n_ok], hi[:n_ok], K, tol, rule)
    at_edges = np.full(edges.shape, np.inf)
    at_edges[: n_ok + 1] = np.logaddexp.accumulate(np.concatenate([[-np.inf], logs]))
    out[1:] = at_edges[np.searchsorted(edges, grid[1:])]
    return out
