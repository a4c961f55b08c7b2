"""Clocks: the same path, parametrized by rescaled time ``tau`` or by original time ``t``.

SPEC §3. The engine always evaluates the *rescaled* field ``F = dtheta/dtau`` (the gradient of
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

from dataclasses import dataclass
from typing import Callable

import numpy as np

#: Beyond ``-log c > LOG_T_LIMIT`` (margins near 1e100) ``log t`` is reported as ``+inf``.
LOG_T_LIMIT = 1e100


@dataclass(frozen=True)
class Clock:
    """One clock: ``log(dtau/ds)`` from ``log c``, and whether ``s`` is the original time."""

    log_speed: Callable[[float], float]
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
_NODES = 0.5 * (1.0 - np.cos(np.pi * np.arange(5) / 4))
_FINE = np.linspace(0.0, 1.0, 513)


def _lagrange_matrix(nodes: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Rows: the Lagrange basis of ``nodes`` evaluated at ``x``."""
    out = np.ones((len(x), len(nodes)))
    for j, xj in enumerate(nodes):
        for m, xm in enumerate(nodes):
            if m != j:
                out[:, j] *= (x - xm) / (xj - xm)
    return out


_INTERP5 = _lagrange_matrix(_NODES, _FINE)
_INTERP3 = _lagrange_matrix(_NODES[[0, 2, 4]], _FINE)


def _log_exp_chords(h: float, k: np.ndarray) -> float:
    """``log int exp(K)`` for ``K`` piecewise linear through values ``k`` on a grid of step ``h``."""
    dk = np.abs(np.diff(k))
    top = np.maximum(k[1:], k[:-1])
    with np.errstate(divide="ignore"):
        pieces = np.where(dk < 1e-12, 0.5 * (k[1:] + k[:-1]),
                          top + np.log(-np.expm1(-np.maximum(dk, 1e-12))) - np.log(np.maximum(dk, 1e-12)))
    best = np.max(pieces)
    return float(best + np.log(np.sum(np.exp(pieces - best))) + np.log(h))


def _log_exp_integral(a: float, b: float, ka: float, kb: float, K: Callable[[float], float],
                      tol: float, depth: int = 0) -> float:
    """``log int_a^b exp(K)`` for smooth ``K``, adaptively.

    ``K`` is interpolated through 5 Chebyshev–Lobatto nodes (degree 4) and, as an error
    estimate, through 3 of them (degree 2); each interpolant is integrated exactly as a
    piecewise-linear exponent on 512 sub-intervals (the expensive ``K`` is evaluated only at
    the nodes). If the two disagree by more than ``tol`` (relative, in log) the interval is
    bisected. The exponential-chord rule is accurate both while ``K' h`` is small and once the
    integrand is a sharp endpoint peak (``K' h >> 1``), so this converges in both regimes.
    """
    values = np.array([ka, K(a + _NODES[1] * (b - a)), K(0.5 * (a + b)),
                       K(a + _NODES[3] * (b - a)), kb])
    h = (b - a) * _FINE[1]
    fine = _log_exp_chords(h, _INTERP5 @ values)
    coarse = _log_exp_chords(h, _INTERP3 @ values[[0, 2, 4]])
    if abs(fine - coarse) <= tol * max(1.0, abs(fine)) or depth >= 30:
        return fine
    m, km = 0.5 * (a + b), values[2]
    return float(np.logaddexp(_log_exp_integral(a, m, ka, km, K, tol, depth + 1),
                              _log_exp_integral(m, b, km, kb, K, tol, depth + 1)))


def log_original_time(tau: np.ndarray, log_c: Callable[[float], float],
                      breakpoints=(), tol: float = 1e-6) -> np.ndarray:
    """``log t(tau) = log int_0^tau exp(K)``, ``K = -log c``, for increasing ``tau`` from 0.

    Cumulative over the intervals of ``tau`` in log space (``logaddexp``), each split at the
    ``breakpoints`` (event times, where ``K`` may have a kink) and integrated by
    :func:`_log_exp_integral`. Entries past the point where ``K`` exceeds
    :data:`LOG_T_LIMIT` are ``+inf`` (``t`` is then beyond ``exp(1e100)``).
    """
    tau = np.asarray(tau, dtype=float)
    out = np.full(tau.shape, np.inf)
    out[0] = -np.inf
    cuts = np.asarray(sorted(breakpoints), dtype=float)

    def K(s: float) -> float:
        return -log_c(s)

    k_prev = K(tau[0])
    for i in range(1, len(tau)):
        a, b = tau[i - 1], tau[i]
        edges = np.concatenate([[a], cuts[(cuts > a) & (cuts < b)], [b]])
        ks = [k_prev] + [K(e) for e in edges[1:]]
        if not ks[-1] <= LOG_T_LIMIT:
            break
        piece = -np.inf
        for lo, hi, klo, khi in zip(edges[:-1], edges[1:], ks[:-1], ks[1:]):
            if hi > lo:
                piece = np.logaddexp(piece, _log_exp_integral(lo, hi, klo, khi, K, tol))
        out[i] = np.logaddexp(out[i - 1], piece)
        k_prev = ks[-1]
    return out
