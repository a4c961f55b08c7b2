"""Exact solutions of the balanced single-example GD and l-inf-SAM flows.

Setting (docs/theory.md §1, §2, §8): one example ``(mu, +1)`` with ``mu_j > 0``, an
``L``-layer diagonal linear network whose layers are all initialised at the same vector
``alpha > 0``.  The layers then stay equal to a common vector ``a(tau)``, the predictor is
``beta = a**L`` and, in the *rescaled* clock ``tau`` (``dtheta/dtau`` = gradient of the
margin evaluated at the perturbed point ``theta + eps``), the flows reduce to decoupled
scalar ODEs, one per coordinate ``j``:

* GD:        ``da_j/dtau = mu_j a_j**(L-1)``
* l-inf-SAM: ``da_j/dtau = mu_j (a_j - rho sign(mu_j a_j**(L-1)))**(L-1)``

Every branch is solved exactly (:mod:`flows.closed_form.branches`; inputs are checked by
:mod:`flows.closed_form.checks`).  Results are returned in log space (``log|a_j|``
with the sign kept apart), so that exponentially or doubly-exponentially growing
solutions can be evaluated at any horizon without overflow; ``expm1``/``log1p`` are used
where cancellation would otherwise destroy the relative precision (small ``alpha``,
``alpha`` close to ``rho``, times close to a hitting time).

Notation used in the docstrings: ``k = L - 2``, ``b = a - rho``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .branches import even_hit, growth_above_rho, linear_growth, odd_saturate, power_growth
from .checks import check_alpha, check_depth, check_mu, check_rho, check_tau

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
    mu, alpha = _checked_point(mu, alpha)
    L = check_depth(depth)
    tau = check_tau(tau)
    t = tau[:, None]
    if L == 1:
        log_a, blow = linear_growth(alpha[None, :], mu[None, :], t)
    else:
        log_a, blow = power_growth(alpha[None, :], mu[None, :], L - 2, t)
    shape = (tau.shape[0], mu.shape[0])
    log_a = np.ascontiguousarray(np.broadcast_to(log_a, shape), dtype=float)
    sign = np.ones(shape, dtype=np.int8)
    return _make(
        tau, log_a, sign, L, np.full(mu.shape[0], np.nan), np.asarray(blow, dtype=float).copy()
    )


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
    mu, alpha, depth, tau
        As for :func:`gd`.
    rho : float
        Perturbation radius, finite and ``>= 0``.

    Returns
    -------
    ClosedFormSolution

    Raises
    ------
    ValueError
        If an argument is invalid (the message names the parameter).
    """
    mu, alpha = _checked_point(mu, alpha)
    rho = np.float64(check_rho(rho))  # numpy scalar: rho**k overflows to inf, not an error
    L = check_depth(depth)
    tau = check_tau(tau)
    if rho == 0.0 or L == 1:
        return gd(mu, alpha, L, tau)
    log_a, sign, hit, blow = _linf_sam_branches(mu, alpha, rho, L, tau[:, None])
    # exact initial condition, even where an event time underflows to 0 (extreme inputs)
    log_a[tau == 0, :] = np.log(alpha)
    sign[tau == 0, :] = 1
    return _make(tau, log_a, sign, L, hit, blow)


def _checked_point(mu, alpha) -> tuple[np.ndarray, np.ndarray]:
    """``mu`` and ``alpha`` (broadcast to ``mu``'s length), checked."""
    mu = check_mu(mu)
    return mu, check_alpha(alpha, mu.shape[0])


def _linf_sam_branches(mu: np.ndarray, alpha: np.ndarray, rho: np.float64, L: int, t: np.ndarray):
    """``(log|a|, sign(a), hit_time, blowup_time)`` of the l-inf-SAM flow (``rho > 0``,
    ``L >= 2``) at the times ``t`` (T, 1), each coordinate by its branch: ``alpha_j`` above,
    equal to or below ``rho`` (and, below, the parity of ``L``)."""
    T, d, k = t.shape[0], mu.shape[0], L - 2
    log_a = np.empty((T, d))
    sign = np.ones((T, d), dtype=np.int8)
    hit = np.full(d, np.nan)
    blow = np.full(d, np.inf)
    above = np.flatnonzero(alpha > rho)
    if above.size:
        log_a[:, above], blow[above] = growth_above_rho(
            alpha[above][None, :], mu[above][None, :], rho, k, t
        )
    log_a[:, np.flatnonzero(alpha == rho)] = np.log(rho)
    below = np.flatnonzero(alpha < rho)
    if below.size and L % 2 == 0:
        log_a[:, below], zero, hit[below] = even_hit(
            alpha[below][None, :], mu[below][None, :], rho, k, t
        )
        sign[:, below] = np.where(zero, 0, 1)
    elif below.size:
        log_a[:, below] = odd_saturate(alpha[below][None, :], mu[below][None, :], rho, k, t)
    return log_a, sign, hit, blow


def _make(tau, log_abs_a, sign_a, depth, hit_time, blowup_time) -> ClosedFormSolution:
    """The solution record, its arrays made read-only."""
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
