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


def _log_exp_chord(a: float, b: float, ka: float, kb: float) -> float:
    """``log int_a^b exp(K)`` for ``K`` linear between ``K(a) = ka`` and ``K(b) = kb``."""
    dk = abs(kb - ka)
    if dk < 1e-12:
        return float(np.log(b - a) + 0.5 * (ka + kb))
    return float(max(ka, kb) + np.log(b - a) + np.log(-np.expm1(-dk)) - np.log(dk))


def _log_exp_integral(a: float, b: float, ka: float, kb: float, K: Callable[[float], float],
                      tol: float, depth: int = 0) -> float:
    """``log int_a^b exp(K)`` by adaptive bisection of the exponential-chord rule.

    The chord rule is exact for linear ``K``; its error is ``O(h^2 K'')`` while ``K' h`` is
    small and ``O(K'' / K'^2)`` once the integrand is an endpoint peak, so bisection until two
    levels agree to ``tol`` (relative, in log) converges in both regimes; the accepted value is
    Richardson-extrapolated (``fine + (fine - coarse) / 3``).
    """
    m = 0.5 * (a + b)
    km = K(m)
    coarse = _log_exp_chord(a, b, ka, kb)
    fine = float(np.logaddexp(_log_exp_chord(a, m, ka, km), _log_exp_chord(m, b, km, kb)))
    if abs(fine - coarse) <= tol * max(1.0, abs(fine)) or depth >= 40:
        return fine + (fine - coarse) / 3.0
    return float(np.logaddexp(_log_exp_integral(a, m, ka, km, K, tol, depth + 1),
                              _log_exp_integral(m, b, km, kb, K, tol, depth + 1)))


def log_original_time(tau: np.ndarray, log_c: Callable[[float], float],
                      tol: float = 1e-6) -> np.ndarray:
    """``log t(tau) = log int_0^tau exp(K)``, ``K = -log c``, for increasing ``tau`` from 0.

    Cumulative over the intervals of ``tau`` in log space (``logaddexp``), each by
    :func:`_log_exp_integral`. Entries past the point where ``K`` exceeds
    :data:`LOG_T_LIMIT` are ``+inf`` (``t`` is then beyond ``exp(1e100)``).
    """
    tau = np.asarray(tau, dtype=float)
    out = np.full(tau.shape, np.inf)
    out[0] = -np.inf

    def K(s: float) -> float:
        return -log_c(s)

    k_prev = K(tau[0])
    for i in range(1, len(tau)):
        k_next = K(tau[i])
        if not k_next <= LOG_T_LIMIT:
            break
        piece = (_log_exp_integral(tau[i - 1], tau[i], k_prev, k_next, K, tol)
                 if tau[i] > tau[i - 1] else -np.inf)
        out[i] = np.logaddexp(out[i - 1], piece)
        k_prev = k_next
    return out
