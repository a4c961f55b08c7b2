"""Exact solutions of the balanced single-example GD and l-inf-SAM flows.

Setting (SPEC sections 1, 2, 4): one example ``(mu, +1)`` with ``mu_j > 0``, an
``L``-layer diagonal linear network whose layers are all initialised at the same vector
``alpha > 0``.  The layers then stay equal to a common vector ``a(tau)``, the predictor is
``beta = a**L`` and, in the *rescaled* clock ``tau`` (``dtheta/dtau`` = gradient of the
margin evaluated at the perturbed point ``theta + eps``), the flows reduce to decoupled
scalar ODEs, one per coordinate ``j``:

* GD:        ``da_j/dtau = mu_j a_j**(L-1)``
* l-inf-SAM: ``da_j/dtau = mu_j (a_j - rho sign(mu_j a_j**(L-1)))**(L-1)``

Every branch is solved exactly here.  Results are returned in log space (``log|a_j|``
with the sign kept apart), so that exponentially or doubly-exponentially growing
solutions can be evaluated at any horizon without overflow; ``expm1``/``log1p`` are used
where cancellation would otherwise destroy the relative precision (small ``alpha``,
``alpha`` close to ``rho``, times close to a hitting time).

Notation used in the docstrings: ``k = L - 2``, ``b = a - rho``.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np

__all__ = ["ClosedFormSolution", "gd", "linf_sam"]


@dataclass(frozen=True)
class ClosedFormSolution:
    """Exact balanced solution ``a(tau)`` evaluated on a grid of rescaled times.

    Attributes
    ----------
    tau : np.ndarray, shape (T,)
        Rescaled times at which the solution is evaluated.
    log_abs_a : np.ndarray, shape (T, d)
        ``log|a_j(tau)|``; ``-inf`` where ``a_j == 0`` (after a hitting time, while the
        coordinate slides at 0), ``+inf`` exactly at a blow-up time and ``nan`` after it.
    sign_a : np.ndarray of int8, shape (T, d)
        ``sign(a_j(tau))`` in ``{-1, 0, 1}`` (kept at ``+1`` after a blow-up, where the
        magnitude is ``nan``).
    depth : int
        Number of layers ``L``.
    hit_time : np.ndarray, shape (d,)
        Time at which ``a_j`` reaches 0 and starts sliding there (``nan`` if never).
    blowup_time : np.ndarray, shape (d,)
        Finite blow-up time of ``a_j`` (``inf`` if it never blows up).
    """

    tau: np.ndarray
    log_abs_a: np.ndarray
    sign_a: np.ndarray
    depth: int
    hit_time: np.ndarray
    blowup_time: np.ndarray

    @property
    def a(self) -> np.ndarray:
        """``a = sign_a * exp(log_abs_a)``, shape (T, d) (``inf``/``nan`` where it overflows)."""
        with np.errstate(over="ignore", invalid="ignore"):
            return self.sign_a * np.exp(self.log_abs_a)

    @property
    def log_abs_beta(self) -> np.ndarray:
        """``log|beta_j| = L log|a_j|`` (``-inf`` kept where ``beta_j == 0``), shape (T, d)."""
        return self.depth * self.log_abs_a

    @property
    def sign_beta(self) -> np.ndarray:
        """``sign(beta_j) = sign(a_j)**L``, shape (T, d), int8."""
        return self.sign_a**self.depth

    @property
    def beta(self) -> np.ndarray:
        """``beta = sign_beta * exp(log_abs_beta)``, shape (T, d) (may overflow to ``inf``)."""
        with np.errstate(over="ignore", invalid="ignore"):
            return self.sign_beta * np.exp(self.log_abs_beta)


# --------------------------------------------------------------------------- validation


def _check_mu(mu) -> np.ndarray:
    msg = "'mu' must be a non-empty 1-D array of finite positive numbers"
    try:
        arr = np.asarray(mu, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{msg}, got {mu!r}") from exc
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{msg}, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{msg}, got {arr!r}")
    return arr.copy()


def _check_alpha(alpha, d: int) -> np.ndarray:
    msg = f"'alpha' must be a finite positive scalar or a 1-D array of length d={d}"
    try:
        arr = np.asarray(alpha, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{msg}, got {alpha!r}") from exc
    if arr.ndim == 0:
        arr = np.full(d, float(arr))
    elif arr.ndim != 1 or arr.shape[0] != d:
        raise ValueError(f"{msg}, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{msg}, got {arr!r}")
    return arr.copy()


def _check_rho(rho) -> float:
    msg = "'rho' must be a finite scalar >= 0"
    if isinstance(rho, (bool, np.bool_)):
        raise ValueError(f"{msg}, got {rho!r}")
    try:
        arr = np.asarray(rho, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{msg}, got {rho!r}") from exc
    if arr.ndim != 0 or not np.isfinite(arr) or arr < 0:
        raise ValueError(f"{msg}, got {rho!r}")
    return float(arr)


def _check_depth(depth) -> int:
    msg = "'depth' must be an integer >= 1"
    if isinstance(depth, (bool, np.bool_)):
        raise ValueError(f"{msg}, got {depth!r}")
    try:
        L = operator.index(depth)
    except TypeError as exc:
        raise ValueError(f"{msg}, got {depth!r}") from exc
    if L < 1:
        raise ValueError(f"{msg}, got {depth!r}")
    return int(L)


def _check_tau(tau) -> np.ndarray:
    msg = "'tau' must be a scalar or 1-D array of finite times >= 0"
    try:
        arr = np.asarray(tau, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{msg}, got {tau!r}") from exc
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{msg}, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{msg}, got {arr!r}")
    return arr.copy()


# --------------------------------------------------------------------------- branches
# All helpers take ``tau`` of shape (T, 1) and per-coordinate parameters of shape (1, m)
# and return arrays of shape (T, m) (plus per-coordinate event times of shape (m,)).


def _power_growth(b0: np.ndarray, mu: np.ndarray, k: int, tau: np.ndarray):
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


def _even_hit(alpha: np.ndarray, mu: np.ndarray, rho: float, k: int, tau: np.ndarray):
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


def _odd_saturate(alpha: np.ndarray, mu: np.ndarray, rho: float, k: int, tau: np.ndarray):
    """Odd ``L = k + 2 >= 3``, ``0 < alpha < rho``: increase to ``rho`` asymptotically.

    With ``c = rho - a > 0``: ``dc/dtau = -mu c**(L-1)``, so
    ``c**-k = (rho - alpha)**-k + k mu tau``, ``c = c0 (1 + s)**(-1/k)`` with
    ``c0 = rho - alpha``, ``s = k mu c0**k tau``, and
    ``a = rho - c = alpha - c0 expm1(-log1p(s) / k)`` (a sum of two non-negative terms,
    no cancellation).  ``a -> rho`` and ``beta -> rho**L`` as ``tau -> inf``.
    """
    c0 = rho - alpha
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        s = np.where(tau == 0, 0.0, k * mu * c0**k * tau)  # (inf * 0 if c0**k overflows)
        a = alpha - c0 * np.expm1(-np.log1p(s) / k)
    return np.log(a)


# --------------------------------------------------------------------------- public API


def _make(tau, log_abs_a, sign_a, depth, hit_time, blowup_time) -> ClosedFormSolution:
    arrays = [tau, log_abs_a, sign_a, hit_time, blowup_time]
    for arr in arrays:
        arr.setflags(write=False)
    return ClosedFormSolution(
        tau=tau,
        log_abs_a=log_abs_a,
        sign_a=sign_a,
        depth=depth,
        hit_time=hit_time,
        blowup_time=blowup_time,
    )


def gd(mu, alpha, depth: int, tau) -> ClosedFormSolution:
    """Exact balanced gradient flow, rescaled clock, single example ``(mu, +1)``.

    Solves, coordinate by coordinate, ``da_j/dtau = mu_j a_j**(L-1)``, ``a_j(0) = alpha_j``:

    * ``L = 1``:  ``a = alpha + mu tau`` (``logaddexp(log alpha, log mu + log tau)`` if it
      overflows);
    * ``L = 2``:  ``a = alpha e^{mu tau}``, evaluated as ``log a = log alpha + mu tau``;
    * ``L >= 3``: ``a = (alpha**-(L-2) - (L-2) mu tau)**(-1/(L-2))``, which blows up at
      ``tau* = 1 / ((L-2) mu alpha**(L-2))``; evaluated as
      ``log a = log alpha - log1p(-tau/tau*) / (L-2)``.

    Parameters
    ----------
    mu : array_like, shape (d,)
        Data point, finite and strictly positive.
    alpha : float or array_like, shape (d,)
        Balanced initialisation of every layer, finite and strictly positive.
    depth : int
        Number of layers ``L >= 1``.
    tau : float or array_like, shape (T,)
        Rescaled times, finite and ``>= 0``.

    Returns
    -------
    ClosedFormSolution
        ``hit_time`` is all ``nan`` (GD never reaches 0); ``blowup_time`` is ``tau*`` for
        ``L >= 3`` and ``inf`` otherwise; ``log_abs_a`` is ``nan`` after a blow-up.

    Raises
    ------
    ValueError
        If an argument is invalid (the message names the parameter).
    """
    mu = _check_mu(mu)
    d = mu.shape[0]
    alpha = _check_alpha(alpha, d)
    L = _check_depth(depth)
    tau = _check_tau(tau)
    t = tau[:, None]
    hit = np.full(d, np.nan)
    if L == 1:
        with np.errstate(over="ignore", divide="ignore"):
            lin = alpha[None, :] + mu[None, :] * t
            # log-space fallback where alpha + mu tau overflows float64
            log_a = np.where(
                np.isfinite(lin),
                np.log(lin),
                np.logaddexp(np.log(alpha)[None, :], np.log(mu)[None, :] + np.log(t)),
            )
        blow = np.full(d, np.inf)
    else:
        log_a, blow = _power_growth(alpha[None, :], mu[None, :], L - 2, t)
    log_a = np.ascontiguousarray(np.broadcast_to(log_a, (tau.shape[0], d)), dtype=float)
    sign = np.ones((tau.shape[0], d), dtype=np.int8)
    return _make(tau, log_a, sign, L, hit, np.asarray(blow, dtype=float).copy())


def linf_sam(mu, alpha, rho, depth: int, tau) -> ClosedFormSolution:
    """Exact balanced l-inf-SAM flow, rescaled clock, single example ``(mu, +1)``.

    Solves, coordinate by coordinate,
    ``da_j/dtau = mu_j (a_j - rho sign(mu_j a_j**(L-1)))**(L-1)``, ``a_j(0) = alpha_j > 0``.
    While ``a > 0`` the perturbed layer is ``a - rho``; put ``b = a - rho``,
    ``db/dtau = mu b**(L-1)``, ``k = L - 2``.

    * ``L = 1``: the field is ``mu`` whatever ``rho``: ``a = alpha + mu tau``.
    * ``alpha == rho`` (``L >= 2``): ``b = 0`` is an equilibrium, ``a == rho`` for all tau.
    * ``alpha > rho``: ``b`` follows the GD solution from ``b0 = alpha - rho``:
      ``L = 2``: ``a = rho + (alpha - rho) e^{mu tau}``, evaluated as
      ``log a = logaddexp(log rho, log(alpha - rho) + mu tau)``;
      ``L >= 3``: ``b = (b0**-k - k mu tau)**(-1/k)``, blow-up at
      ``tau_j = 1 / (k mu (alpha - rho)**k)``.
    * ``alpha < rho``, even ``L``: ``a`` decreases and reaches 0 at ``hit_time``
      (``L = 2``: ``log(rho/(rho - alpha)) / mu``; ``L >= 4``:
      ``((rho - alpha)**-k - rho**-k) / (k mu)``); afterwards the coordinate slides at 0
      (Filippov), ``a_j == 0`` and ``beta_j == 0`` exactly.
    * ``alpha < rho``, odd ``L >= 3``: ``(rho - a)**-k = (rho - alpha)**-k + k mu tau``;
      ``a`` increases to ``rho`` and ``beta -> rho**L``.

    ``rho = 0`` reproduces :func:`gd` exactly.

    Parameters
    ----------
    mu : array_like, shape (d,)
        Data point, finite and strictly positive.
    alpha : float or array_like, shape (d,)
        Balanced initialisation of every layer, finite and strictly positive.
    rho : float
        Perturbation radius, finite and ``>= 0``.
    depth : int
        Number of layers ``L >= 1``.
    tau : float or array_like, shape (T,)
        Rescaled times, finite and ``>= 0``.

    Returns
    -------
    ClosedFormSolution

    Raises
    ------
    ValueError
        If an argument is invalid (the message names the parameter).
    """
    mu = _check_mu(mu)
    d = mu.shape[0]
    alpha = _check_alpha(alpha, d)
    rho = np.float64(_check_rho(rho))  # numpy scalar: rho**k overflows to inf, not an error
    L = _check_depth(depth)
    tau = _check_tau(tau)
    if rho == 0.0 or L == 1:
        sol = gd(mu, alpha, L, tau)
        return sol

    T = tau.shape[0]
    t = tau[:, None]
    k = L - 2
    log_a = np.empty((T, d))
    sign = np.ones((T, d), dtype=np.int8)
    hit = np.full(d, np.nan)
    blow = np.full(d, np.inf)

    above = alpha > rho
    equal = alpha == rho
    below = alpha < rho

    if np.any(above):
        j = np.flatnonzero(above)
        log_b, blow_j = _power_growth((alpha[j] - rho)[None, :], mu[j][None, :], k, t)
        with np.errstate(invalid="ignore"):
            log_a[:, j] = np.where(np.isnan(log_b), np.nan, np.logaddexp(np.log(rho), log_b))
        blow[j] = blow_j
    if np.any(equal):
        log_a[:, np.flatnonzero(equal)] = np.log(rho)
    if np.any(below):
        j = np.flatnonzero(below)
        if L % 2 == 0:
            la, zero, hit_j = _even_hit(alpha[j][None, :], mu[j][None, :], rho, k, t)
            log_a[:, j] = la
            sign[:, j] = np.where(zero, 0, 1)
            hit[j] = hit_j
        else:
            log_a[:, j] = _odd_saturate(alpha[j][None, :], mu[j][None, :], rho, k, t)
    # exact initial condition, even where an event time underflows to 0 (extreme inputs)
    log_a[tau == 0, :] = np.log(alpha)
    sign[tau == 0, :] = 1
    return _make(tau, log_a, sign, L, hit, blow)
