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


#: Chebyshev–Lobatto nodes on [0, 1] (they include 0, 1/2 and 1) and a fine grid on which the
#: interpolant of K is integrated by the exact rule for piecewise-linear K.
_NODES = 0.5 * (1.0 - np.cos(np.pi * np.arange(9) / 8))
_FINE = np.linspace(0.0, 1.0, 65)


def _lagrange_matrix(nodes: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Rows: the Lagrange basis of ``nodes`` evaluated at ``x``."""
    out = np.ones((len(x), len(nodes)))
    for j, xj in enumerate(nodes):
        for m, xm in enumerate(nodes):
            if m != j:
                out[:, j] *= (x - xm) / (xj - xm)
    return out


_INTERP_HIGH = _lagrange_matrix(_NODES, _FINE)
_INTERP_LOW = _lagrange_matrix(_NODES[::2], _FINE)
#: 16-point Gauss–Legendre rule on [0, 1], and the interpolants evaluated at its nodes.
_GL_X, _GL_W = np.polynomial.legendre.leggauss(16)
_GL_X, _GL_LOGW = 0.5 * (_GL_X + 1.0), np.log(0.5 * _GL_W)
_GL_HIGH = _lagrange_matrix(_NODES, _GL_X)
_GL_LOW = _lagrange_matrix(_NODES[::2], _GL_X)
#: Largest variation of ``K`` over an interval for which the Gauss–Legendre rule is used.
GL_SPREAD = 5.0


def _log_exp_gauss(length: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``log int exp(K)`` per row from ``K`` at the Gauss–Legendre nodes (rows of ``k``) of
    intervals of the given ``length`` (accurate to ~1e-12 while ``K`` varies by <= 5)."""
    top = np.max(k, axis=1, keepdims=True)
    return top[:, 0] + np.log(np.sum(np.exp(k - top + _GL_LOGW), axis=1)) + np.log(length)


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


#: Bisection levels of :func:`log_exp_integrals` (an interval is never split below 2^-40 of
#: its original length).
MAX_LEVELS = 40
#: Intervals refined at once by :func:`log_exp_integrals`; past this, a level is accepted as is
#: (a bound on memory: each interval costs a few arrays of 65 numbers).
MAX_INTERVALS = 20_000


def _interval_rule(length: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``log int exp(K)`` on intervals of ``length`` from ``K`` at the 9 nodes (rows of ``k``),
    and an error estimate.

    Where ``K`` varies by at most :data:`GL_SPREAD`, Gauss–Legendre on the interpolant;
    elsewhere (up to sharp endpoint peaks, late in a run, where ``log t ~ K`` is large and the
    relative tolerance loose) exponential chords, 64 and 32 of them combined by Richardson
    extrapolation (their error is O(h^2)). The interpolation error is estimated by the same
    rule on the degree-4 interpolant through every other node.
    """
    spread = np.max(k, axis=1) - np.min(k, axis=1)
    gentle = spread <= GL_SPREAD
    value = np.full(len(length), np.nan)
    error = np.full(len(length), np.inf)
    if np.any(gentle):
        g = k[gentle]
        value[gentle] = _log_exp_gauss(length[gentle], g @ _GL_HIGH.T)
        error[gentle] = np.abs(
            value[gentle] - _log_exp_gauss(length[gentle], g[:, ::2] @ _GL_LOW.T)
        )
    steep = ~gentle
    if np.any(steep):
        s, h = k[steep], length[steep] * _FINE[1]
        k5 = s @ _INTERP_HIGH.T
        fine = _log_exp_chords(h, k5)
        half = _log_exp_chords(2.0 * h, k5[:, ::2])
        coarse = _log_exp_chords(h, s[:, ::2] @ _INTERP_LOW.T)
        err = np.maximum(np.abs(fine - half) / 3.0, np.abs(fine - coarse))
        value[steep] = np.where(np.isfinite(err), fine + (fine - half) / 3.0, fine)
        error[steep] = err
    return value, error


def log_exp_integrals(
    a: np.ndarray,
    b: np.ndarray,
    K: Callable[[np.ndarray, np.ndarray], np.ndarray],
    tol: float = 1e-9,
) -> np.ndarray:
    """``log int_{a_i}^{b_i} exp(K)`` for many intervals at once, adaptively.

    ``K(s, ref)`` evaluates the exponent at times ``s`` (a batch); ``ref`` holds, for each
    time, the midpoint of the original interval it belongs to, so that the caller can take
    one-sided values at the interval ends (where ``K`` may jump). On each interval ``K`` is
    interpolated through 9 Chebyshev–Lobatto nodes (degree 8) and integrated by
    :func:`_interval_rule`; intervals whose error estimate exceeds ``tol`` (relative, in log)
    are bisected, all of one level in one batch of ``K`` evaluations, up to
    :data:`MAX_LEVELS` levels.
    """
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
        with np.errstate(invalid="ignore", over="ignore"):
            value, error = _interval_rule(hi - lo, k)
            done = (error <= tol * np.maximum(1.0, np.abs(value))) | ~np.isfinite(k).all(axis=1)
        if last:
            done[:] = True
        np.logaddexp.at(total, owner[done], value[done])
        split = ~done
        mid = 0.5 * (lo[split] + hi[split])
        lo, hi = np.concatenate([lo[split], mid]), np.concatenate([mid, hi[split]])
        owner = np.concatenate([owner[split], owner[split]])
    return total


def log_original_time(
    grid: np.ndarray,
    breakpoints: np.ndarray,
    K: Callable[[np.ndarray, np.ndarray], np.ndarray],
    tol: float = 1e-9,
) -> np.ndarray:
    """``log t(tau) = log int_0^tau exp(K)``, ``K = -log c``, at the increasing times ``grid``.

    The integral is cut at the grid times and at ``breakpoints`` (event times, where ``K``
    may jump, and solver steps, within each of which the path is one polynomial); the pieces
    are integrated together by :func:`log_exp_integrals` (``K(s, ref)`` as there) and
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
    logs = log_exp_integrals(lo[:n_ok], hi[:n_ok], K, tol)
    at_edges = np.full(edges.shape, np.inf)
    at_edges[: n_ok + 1] = np.logaddexp.accumulate(np.concatenate([[-np.inf], logs]))
    out[1:] = at_edges[np.searchsorted(edges, grid[1:])]
    return out
