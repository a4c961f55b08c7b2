"""The branches of the exact balanced solutions (:mod:`flows.closed_form.solutions`), in log space.

Each function solves one scalar ODE of a coordinate ``a_j`` exactly, for every coordinate in
a branch at once. They take ``tau`` of shape (T, 1) and per-coordinate parameters of shape
(1, m), and return arrays of shape (T, m) (plus per-coordinate event times of shape (m,)).

Notation: ``k = L - 2``, ``b = a - rho``.
"""

from __future__ import annotations

import numpy as np


def linear_growth(alpha: np.ndarray, mu: np.ndarray, tau: np.ndarray):
    """Solve ``da/dtau = mu``, ``a(0) = alpha > 0`` (GD at ``L = 1``): ``a = alpha + mu tau``.

    Evaluated as ``logaddexp(log alpha, log mu + log tau)`` where ``alpha + mu tau`` overflows
    float64. Returns ``(log_a, blowup_time)`` (never blows up: ``inf``).
    """
    with np.errstate(over="ignore", divide="ignore"):
        lin = alpha + mu * tau
        log_a = np.where(
            np.isfinite(lin), np.log(lin), np.logaddexp(np.log(alpha), np.log(mu) + np.log(tau))
        )
    return log_a, np.full(alpha.shape[-1], np.inf)


def power_growth(b0: np.ndarray, mu: np.ndarray, k: int, tau: np.ndarray):
    """Solve ``db/dtau = mu b**(k+1)``, ``b(0) = b0 > 0``, in log space.

    ``k = 0``:  ``log b = log b0 + mu tau`` (never blows up).
    ``k >= 1``: ``b**-k = b0**-k - k mu tau``, i.e.
    ``log b = log b0 - log(1 - tau/tau*) / k`` with ``tau* = 1 / (k mu b0**k)``;
    ``+inf`` at ``tau == tau*`` and ``nan`` for ``tau > tau*``.

    Returns ``(log_b, blowup_time)``.
    """
    log_b0 = np.log(b0)
    if k == 0:
        with np.errstate(over="ignore"):  # mu tau > 1.8e308: log b = +inf
            return log_b0 + mu * tau, np.full(b0.shape[-1], np.inf)
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        inv = k * mu * b0**k  # 1 / tau*
        t_star = 1.0 / inv
        s = tau * inv  # tau / tau*
        # log(1 - s): log1p for small s, otherwise from the exact difference tau* - tau
        # (exact by Sterbenz once tau >= tau*/2), so that 1 - s keeps full precision near
        # the blow-up and is > 0 for every tau < tau*.
        log_one_minus_s = np.where(
            s <= 0.5,
            np.log1p(-np.minimum(s, 0.5)),
            np.log((t_star - tau) * inv),
        )
        log_b = log_b0 - log_one_minus_s / k
    log_b = np.where(tau < t_star, log_b, np.where(tau == t_star, np.inf, np.nan))
    # a(0) = b0 even if tau* underflows to 0 (b0**k beyond float range)
    log_b = np.where(tau == 0, log_b0, log_b)
    return log_b, t_star.reshape(-1)


def growth_above_rho(alpha: np.ndarray, mu: np.ndarray, rho: float, k: int, tau: np.ndarray):
    """``L = k + 2 >= 2``, ``alpha > rho``: ``a = rho + b`` with ``b`` the GD solution
    (:func:`power_growth`) from ``b0 = alpha - rho``.

    ``L = 2``: ``log a = logaddexp(log rho, log(alpha - rho) + mu tau)``; ``L >= 3``: blow-up
    at ``1 / (k mu (alpha - rho)**k)``. Returns ``(log_a, blowup_time)`` (``log_a`` is ``nan``
    after a blow-up).
    """
    log_b, blowup = power_growth(alpha - rho, mu, k, tau)
    with np.errstate(invalid="ignore"):
        log_a = np.where(np.isnan(log_b), np.nan, np.logaddexp(np.log(rho), log_b))
    return log_a, blowup


def even_hit(alpha: np.ndarray, mu: np.ndarray, rho: float, k: int, tau: np.ndarray):
    """Even ``L = k + 2``, ``0 < alpha < rho``: decrease to 0 in finite time, then slide.

    With ``c = rho - a > 0``: ``dc/dtau = mu c**(L-1)``, ``c(0) = rho - alpha``.

    ``k = 0`` (L = 2): ``c = (rho - alpha) e^{mu tau}``, hitting time
    ``tau_hit = log(rho / (rho - alpha)) / mu = -log1p(-alpha/rho) / mu`` and
    ``a = rho - c = -rho expm1(mu (tau - tau_hit))``.

    ``k >= 2`` (even L >= 4): ``c**-k = (rho - alpha)**-k - k mu tau`` until ``c = rho``:
    ``tau_hit = ((rho - alpha)**-k - rho**-k) / (k mu)
    = expm1(-k log1p(-alpha/rho)) / (k mu rho**k)`` and, with
    ``s = k mu rho**k (tau_hit - tau) >= 0``, ``c = rho (1 + s)**(-1/k)``, i.e.
    ``a = -rho expm1(-log1p(s) / k)``.

    For ``tau >= tau_hit``: ``a == 0`` (Filippov sliding mode: the field points towards 0
    from both sides).  Returns ``(log_a, is_zero, hit_time)``.
    """
    x = np.log1p(-alpha / rho)  # log(1 - alpha/rho) < 0, precise for alpha << rho
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        if k == 0:
            t_hit = -x / mu
            log_a = np.log(rho) + np.log(-np.expm1(mu * (tau - t_hit)))
        else:
            A = k * mu * rho**k
            t_hit = np.expm1(-k * x) / A
            s = A * (t_hit - tau)
            log_a = np.log(rho) + np.log(-np.expm1(-np.log1p(s) / k))
    is_zero = tau >= t_hit
    log_a = np.where(is_zero, -np.inf, log_a)
    return log_a, is_zero, t_hit.reshape(-1)


def odd_saturate(alpha: np.ndarray, mu: np.ndarray, rho: float, k: int, tau: np.ndarray):
    """Odd ``L = k + 2 >= 3``, ``0 < alpha < rho``: increase to ``rho`` asymptotically.

    With ``c = rho - a > 0``: ``dc/dtau = -mu c**(L-1)``, so
    ``c**-k = (rho - alpha)**-k + k mu tau``, ``c = c0 (1 + s)**(-1/k)`` with
    ``c0 = rho - alpha``, ``s = k mu c0**k tau``, and
    ``a = rho - c = alpha - c0 expm1(-log1p(s) / k)`` (a sum of two non-negative terms,
    no cancellation).  ``a -> rho`` and ``beta -> rho**L`` as ``tau -> inf``.
    Returns ``log_a``.
    """
    c0 = rho - alpha
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        s = np.where(tau == 0, 0.0, k * mu * c0**k * tau)  # (inf * 0 if c0**k overflows)
        a = alpha - c0 * np.expm1(-np.log1p(s) / k)
    return np.log(a)
