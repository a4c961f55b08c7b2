"""Implicit bias of the GD flow in regression on ``beta = u ⊙ v`` (``L = 2``): the potential it
minimises over the interpolators, its minimiser, and the two limits of the initialization scale.

Setting: data ``X`` (n, d), targets ``y`` (n,), the squared loss and the GD flow::

    L(beta) = ||X beta - y||^2 / (2n),     g = grad_beta L = X^T (X beta - y) / n,
    du/dt = -g ⊙ v,    dv/dt = -g ⊙ u,     beta = u ⊙ v.

Derivation (Woodworth et al. 2020, *Kernel and rich regimes in overparametrized models*, for
this parametrisation):

* ``d(u_j^2 - v_j^2)/dt = -2 g_j u_j v_j + 2 g_j v_j u_j = 0``: ``u_j^2 - v_j^2`` is conserved.
  Let ``k_j = |u_j(0)^2 - v_j(0)^2| / 2 > 0`` and ``c_j = sqrt(2 k_j)``.
* If ``u_j^2 > v_j^2`` write ``(u_j, v_j) = s_j c_j (cosh psi_j, sinh psi_j)``, otherwise
  ``s_j c_j (sinh psi_j, cosh psi_j)`` (``s_j = +-1`` fixed). Both branches give
  ``beta_j = k_j sinh(2 psi_j)`` and turn the flow into ``dpsi_j/dt = -g_j``.
* Hence ``2 psi(t) = a - 2 X^T int_0^t (X beta - y) / n``: ``w = asinh(beta / k) - a`` stays in the
  row space of ``X`` for all t, with ``a = asinh(beta0 / k)``, ``beta0 = u(0) ⊙ v(0)``.
* ``w = grad D(beta)`` for the strictly convex potential (``h'(x) = asinh(x)``)::

      D(beta) = sum_j k_j [ h(beta_j / k_j) - (beta_j / k_j) a_j ],   h(x) = x asinh(x) - sqrt(1 + x^2) + 1,

  so a limit that interpolates (``X beta = y``) satisfies the KKT conditions of
  ``min D(beta) s.t. X beta = y`` (``grad D(beta) = X^T lam``): it is that program's unique
  solution (:func:`woodworth_interpolator`). ``D(beta) - D(beta0)`` is the Bregman divergence of
  the hyperbolic entropy from ``beta0``.

Limits, for ``u(0) = alpha 1``, ``v(0) = 0`` (``k = alpha^2 / 2``, ``a = 0``):

* ``alpha -> inf``: ``k h(beta / k) = beta^2 / (2k) + O(beta^4 / k^3)``: the minimum l2-norm
  interpolator ``X^+ y`` (:func:`min_l2_interpolator`; the kernel regime), with an error
  ``O(alpha^-4)``.
* ``alpha -> 0``: ``k h(beta / k) = |beta| log(2 |beta| / k) - |beta| + o(1)``, i.e.
  ``D / log(1 / k) -> ||beta||_1``: the minimum l1-norm interpolator, basis pursuit
  (:func:`min_l1_interpolator`; the rich regime). The convergence is slow: Woodworth et al.
  guarantee a relative l1 gap ``eps`` once ``alpha`` is below about ``exp(-1/eps)``. Measured
  (n = 5, d = 12, ``tests/test_implicit_bias.py``): relative l1 gaps 4.2e-2, 1.2e-2, 3.1e-3 and
  distances to the (unique) basis-pursuit solution 0.25, 0.086, 0.025 at ``alpha`` = 1e-1,
  1e-2, 1e-3; the l2 limit is reached to 3.5e-6, 3.5e-10, 3.5e-14 at ``alpha`` = 10, 1e2, 1e3.

The engine's balanced initialization ``u(0) = v(0) = alpha`` is the degenerate case
``k = 0``: ``u_j = v_j`` is invariant, ``beta_j = u_j^2 >= 0`` for ever, and no potential of this
form exists (:func:`potential_parameters` refuses it).

Numerics
--------
The program is solved through its smooth, unconstrained convex dual (``h*(z) = cosh z - 1``)::

    phi(lam) = sum_j k_j cosh(a_j + (X^T lam)_j) - lam . y,
    grad phi = X beta(lam) - y,   hess phi = X diag(k cosh(a + X^T lam)) X^T,
    beta(lam) = k ⊙ sinh(a + X^T lam),

in an orthonormal basis ``Q`` of the row space of ``X`` (SVD, so a rank-deficient ``X`` is
handled and the dual variables are unique), by damped Newton steps (Cholesky of the
Jacobi-scaled Hessian, least squares where it is singular; each step capped at
:data:`MAX_STEP` in ``w``, then Armijo backtracking on ``phi``). The decrease of ``phi`` is
evaluated as ``sum_j 2 k_j sinh(w_j + t delta_j / 2) sinh(t delta_j / 2) - t delta . b``, accurate
for large ``k`` where ``phi`` itself is ``~ sum_j k_j`` and its changes are lost in rounding;
``k sinh(w)`` and ``k cosh(w)`` are formed in logarithms for ``|w| > 20`` (a tiny ``k`` times a
huge ``cosh``). Near the solution, where the change of ``phi`` is within the rounding of its
terms, the line search tests the decrease of ``||grad phi||^2`` instead. Measured on Gaussian
data (n = 5, d = 12): certified to residuals ~1e-15 for ``alpha`` from 1e-3 to 1e3 in at most
10 Newton steps; at most 18 over random systems up to n = 30, d = 80 with ``X`` and the init
scaled by 10^[-3, 3] (scalar, vector and signed inits); 118 at ``alpha = 1e-150`` (the step
cap: ``|w| ~ log(1/k) ~ 690``). ``k`` must be a normal float64 (``alpha`` within about
1e-154 .. 1e154).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy import linalg
from scipy.optimize import linprog

from flows.checks import integer, positive, real, real_array

__all__ = [
    "CONSISTENCY_TOLERANCE",
    "FAILED",
    "Interpolator",
    "MAX_ITERATIONS",
    "MAX_STEP",
    "NOT_CERTIFIED",
    "OPTIMAL",
    "PotentialParameters",
    "TOLERANCE",
    "min_l1_interpolator",
    "min_l2_interpolator",
    "optimality_residual",
    "potential",
    "potential_parameters",
    "woodworth_interpolator",
]

#: Status of a solution whose residual is at most the tolerance (certified optimal).
OPTIMAL = 0
#: Status of an approximate solution: the residual is above the tolerance (:attr:`Interpolator.message`).
NOT_CERTIFIED = 1
#: Status of a failed solve: no finite solution (``beta`` or the dual beyond float64, or the
#: LP solver failed); ``beta`` and ``lam`` are then NaN.
FAILED = -1

#: Default largest residual (:func:`optimality_residual`) of a solution reported optimal.
TOLERANCE = 1e-10
#: Largest relative least-squares residual ``||X beta - y||_inf / ||y||_inf`` of targets
#: accepted as interpolable.
CONSISTENCY_TOLERANCE = 1e-8
#: Default cap on the Newton steps of :func:`woodworth_interpolator`.
MAX_ITERATIONS = 200
#: Largest change of any ``w_j = asinh(beta_j / k_j) - a_j`` in one Newton step (``cosh`` changes
#: by at most ``e^MAX_STEP``).
MAX_STEP = 30.0
#: Cap on the halvings of one line search.
MAX_HALVINGS = 60
#: Steps at the rounding level without halving the primal residual after which Newton stops.
_STALL = 5
#: Armijo constant of the line search.
_ARMIJO = 1e-4
#: ``|w|`` above which ``k sinh(w)`` and ``k cosh(w)`` are formed in logarithms.
_LOG_SWITCH = 20.0
_EPS = float(np.finfo(float).eps)
_TINY = float(np.finfo(float).tiny)
_LOG2 = float(np.log(2.0))
_HIGHS_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}


class PotentialParameters(NamedTuple):
    """The parameters of the potential ``D`` (module doc) of one initialization.

    ``k`` (d,): ``|u_j(0)^2 - v_j(0)^2| / 2 > 0``; ``offset`` (d,): ``a_j = asinh(beta0_j / k_j)``
    with ``beta0 = u(0) ⊙ v(0)`` (0 for ``v(0) = 0``).
    """

    k: np.ndarray
    offset: np.ndarray


@dataclass(frozen=True, eq=False)
class Interpolator:
    """An interpolator ``X beta = y`` chosen by a criterion, with its certificate.

    Attributes
    ----------
    beta : (d,) the interpolator (NaN when :attr:`status` is :data:`FAILED`).
    lam : (n,) the dual variable of ``X beta = y``: ``grad D(beta) = asinh(beta / k) - a = X^T lam``
        (Woodworth), ``beta = X^T lam`` (l2), ``X^T lam`` a subgradient of ``||.||_1`` at
        ``beta`` (l1, ``||X^T lam||_inf <= 1``). The minimum-norm one where ``X`` has
        dependent rows.
    status : :data:`OPTIMAL` (0) if :attr:`residual` is at most the tolerance,
        :data:`NOT_CERTIFIED` (1) if not, :data:`FAILED` (-1) if no finite solution was found.
    message : what :attr:`status` means here.
    residual : ``max(primal, stationarity)``.
    primal : ``||X beta - y||_inf`` relative to the size of its terms
        (:func:`optimality_residual`).
    stationarity : the relative violation of the criterion's optimality condition:
        :func:`optimality_residual` (Woodworth); the distance of ``beta`` from the row space of
        ``X`` relative to ``||beta||_inf`` (l2); the largest violation of ``(X^T lam)_j =
        sign(beta_j)`` on the support and ``|X^T lam|_j <= 1`` off it, against
        ``1 + (|X|^T |lam|)_j`` (l1).
    iterations : Newton steps (Woodworth), LP solves (l1: 1), 0 (l2).
    criterion : 'woodworth', 'l2' or 'l1'.
    """

    beta: np.ndarray
    lam: np.ndarray
    status: int
    message: str
    residual: float
    primal: float
    stationarity: float
    iterations: int
    criterion: str


class _RowSpace(NamedTuple):
    """``X = U diag(s) Q^T`` on its numerical rank: ``Q`` (d, r) an orthonormal basis of the row
    space, and ``b = diag(s)^-1 U^T y`` (``X beta = y`` iff ``Q^T beta = b``; inf where beyond
    float64)."""

    U: np.ndarray
    s: np.ndarray
    Q: np.ndarray
    b: np.ndarray


# --------------------------------------------------------------------------- inputs


def _data(X, y) -> tuple[np.ndarray, np.ndarray]:
    """Finite ``X`` (n, d) and ``y`` (n,); ``X`` may be an object with ``.X`` and ``.y``."""
    if _is_data_set(X):
        if y is not None:
            raise ValueError("y must not be given with a data set (an object with .X and .y)")
        X, y = X.X, X.y
    if y is None:
        raise ValueError("y must be given with an array X")
    return target_arrays(X, y)


def target_arrays(X, y) -> tuple[np.ndarray, np.ndarray]:
    """Finite ``X`` (n, d) and targets ``y`` (n,) of matching lengths (``ValueError`` naming
    them otherwise)."""
    X = real_array(X, "X", ndim=2)
    y = real_array(y, "y", ndim=1)
    if y.shape[0] != X.shape[0]:
        raise ValueError(
            f"y must have one target per row of X: got {y.shape[0]} targets for {X.shape[0]} rows"
        )
    return X, y


def _is_data_set(value) -> bool:
    """Whether ``value`` is a data set: not an array, with attributes ``X`` and ``y``."""
    return not isinstance(value, np.ndarray) and hasattr(value, "X") and hasattr(value, "y")


def _parameters(init, d: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(k, log k, a)`` of ``init`` (:func:`potential_parameters`)."""
    if isinstance(init, (str, bytes)) or init is None:
        raise ValueError(f"init must be a number or an array of real numbers, got {init!r}")
    if np.ndim(init) == 0:
        alpha = positive(init, "init")
        if d is None:
            raise ValueError("d must be given with a scalar init")
        d = integer(d, "d", 1)
        u, v = np.full(d, alpha), np.zeros(d)
    else:
        arr = real_array(init, "init")
        if arr.ndim == 1:
            if np.any(arr <= 0):
                raise ValueError(
                    "init must be positive as a (d,) vector (u(0) = init, v(0) = 0); give a "
                    "(2, d) array [u(0); v(0)] for other signs"
                )
            u, v = arr, np.zeros_like(arr)
        elif arr.ndim == 2 and arr.shape[0] == 2:
            u, v = arr[0], arr[1]
        else:
            raise ValueError(
                f"init must be a positive scalar, a (d,) positive vector or a (2, d) array "
                f"[u(0); v(0)], got shape {arr.shape}"
            )
        if d is not None and u.shape[0] != integer(d, "d", 1):
            raise ValueError(f"init must have d = {d} columns, got {u.shape[0]}")
    degenerate = np.flatnonzero(np.abs(u) == np.abs(v))
    if degenerate.size:
        raise ValueError(
            f"init has u_j(0)^2 = v_j(0)^2 at coordinate(s) {degenerate.tolist()[:10]}: there "
            "u_j = +-v_j for all t (u_j - v_j or u_j + v_j is multiplied by a positive factor "
            "only), so beta_j = +-u_j^2 stays in one orthant for ever and the potential "
            "degenerates (k_j = 0); the implicit bias needs u_j(0)^2 != v_j(0)^2 for every j"
        )
    with np.errstate(over="ignore", under="ignore"):
        k = np.abs(u - v) * np.abs(u + v) / 2.0
    if not np.all(np.isfinite(k)) or np.any(k < _TINY):
        raise ValueError(
            "init: k_j = |u_j(0)^2 - v_j(0)^2| / 2 must be a normal float64 "
            f"(between {_TINY:.3g} and {np.finfo(float).max:.3g}); got "
            f"{np.min(k):.3g} .. {np.max(k):.3g}: rescale the data and init"
        )
    big = np.abs(u) > np.abs(v)
    ratio = np.where(big, v, u) / np.where(big, u, v)  # |ratio| < 1
    offset = 2.0 * np.arctanh(ratio)  # = asinh(beta0 / k) without forming beta0 / k
    return k, np.log(k), offset


def potential_parameters(init, d: int | None = None) -> PotentialParameters:
    """``k`` and the offsets ``a = asinh(beta0 / k)`` of the potential of an initialization.

    Parameters
    ----------
    init : a positive scalar ``alpha`` (``u(0) = alpha 1``, ``v(0) = 0``: ``k = alpha^2 / 2``,
        ``a = 0``), a (d,) positive vector (``u(0) = init``, ``v(0) = 0``), or a (2, d) array
        ``[u(0); v(0)]`` of any signs with ``u_j(0)^2 != v_j(0)^2`` for every j.
    d : the number of features; required for a scalar ``init``, checked against a vector one.

    Returns
    -------
    PotentialParameters
        ``k_j = |u_j(0)^2 - v_j(0)^2| / 2`` (formed as ``|u - v| |u + v| / 2``, no cancellation)
        and ``a_j = asinh(beta0_j / k_j)``, computed as ``2 atanh(r_j)`` with ``r_j = v_j / u_j``
        (or ``u_j / v_j`` where ``|v_j| > |u_j|``), which is the same number.

    Raises
    ------
    ValueError
        Naming 'init': non-finite or mis-shaped, a non-positive scalar or vector, ``u_j(0)^2 =
        v_j(0)^2`` at some j (``beta_j`` then keeps its sign for ever and the potential
        degenerates), or ``k`` outside the normal float64 range.
    """
    k, _, offset = _parameters(init, d)
    return PotentialParameters(k=k, offset=offset)


def _beta(beta, d: int) -> np.ndarray:
    """A finite (d,) ``beta``."""
    beta = real_array(beta, "beta", ndim=1)
    if beta.shape[0] != d:
        raise ValueError(f"beta must have length d = {d}, got {beta.shape[0]}")
    return beta


# --------------------------------------------------------------------------- the potential


def _k_sinh(k: np.ndarray, log_k: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``k sinh(w)``, in logarithms for ``|w| > 20`` (finite wherever the value is); ``+-inf``
    beyond float64."""
    big = np.abs(w) > _LOG_SWITCH
    with np.errstate(over="ignore"):
        small = k * np.sinh(np.where(big, 0.0, w))
        large = np.sign(w) * np.exp(log_k + np.abs(w) - _LOG2)  # e^{-2|w|} < 1e-17 dropped
    return np.where(big, large, small)


def _k_cosh(k: np.ndarray, log_k: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``k cosh(w)`` (as :func:`_k_sinh`)."""
    big = np.abs(w) > _LOG_SWITCH
    with np.errstate(over="ignore"):
        small = k * np.cosh(np.where(big, 0.0, w))
        large = np.exp(log_k + np.abs(w) - _LOG2)
    return np.where(big, large, small)


def potential(beta, init) -> float:
    """The potential ``D(beta) = sum_j k_j [h(beta_j / k_j) - (beta_j / k_j) a_j]`` (module doc).

    Evaluated as ``sum_j beta_j [asinh(x_j) - a_j - tanh(asinh(x_j) / 2)]`` with ``x = beta / k``
    (the same number: ``sqrt(1 + x^2) - 1 = x tanh(asinh(x) / 2)``), which keeps its relative
    accuracy at ``|x| << 1`` (large ``k``), where ``x asinh x`` and ``sqrt(1 + x^2) - 1`` cancel.
    ``+inf`` if ``beta / k`` overflows. ``ValueError`` naming 'beta' or 'init' for bad input.
    """
    beta = real_array(beta, "beta", ndim=1)
    k, _, a = _parameters(init, beta.shape[0] if np.ndim(init) == 0 else None)
    beta = _beta(beta, k.shape[0])
    with np.errstate(over="ignore", invalid="ignore"):
        x = beta / k
        s = np.arcsinh(x)
        terms = np.where(beta == 0, 0.0, beta * (s - a - np.tanh(s / 2.0)))
    return float(np.sum(terms))


def _row_space(X: np.ndarray, y: np.ndarray) -> _RowSpace:
    """The SVD of ``X`` on its numerical rank (singular values above ``max(n, d) eps s_max``),
    and ``b``; ``ValueError`` naming X, y if ``X beta = y`` has no solution (least-squares
    residual above :data:`CONSISTENCY_TOLERANCE` relative to ``||y||_inf``)."""
    U, s, Vt = linalg.svd(X, full_matrices=False)
    rank = int(np.sum(s > max(X.shape) * _EPS * s[0])) if s.size and s[0] > 0 else 0
    U, s, Q = U[:, :rank], s[:rank], Vt[:rank].T
    coefficients = U.T @ y
    leftover = float(np.max(np.abs(y - U @ coefficients)))
    scale = float(np.max(np.abs(y)))
    if leftover > CONSISTENCY_TOLERANCE * scale:
        raise ValueError(
            f"X, y: the targets cannot be interpolated: the least-squares residual "
            f"||X beta - y||_inf / ||y||_inf = {leftover / scale:.3g} > "
            f"{CONSISTENCY_TOLERANCE:g} (X has rank {rank} < n = {X.shape[0]} and y is not in "
            "its range; an interpolator needs a consistent X beta = y, typically d >= n and X "
            "of full row rank)"
        )
    with np.errstate(over="ignore"):  # tiny singular values and large targets: inf in b
        return _RowSpace(U=U, s=s, Q=Q, b=coefficients / s)


def _primal(X: np.ndarray, y: np.ndarray, beta: np.ndarray) -> float:
    """``||X beta - y||_inf / max(||y||_inf, max_i (|X| |beta|)_i)``."""
    with np.errstate(over="ignore", invalid="ignore"):
        error = float(np.max(np.abs(X @ beta - y)))
        scale = max(float(np.max(np.abs(y))), float(np.max(np.abs(X) @ np.abs(beta))))
    if not np.isfinite(error):
        return np.inf
    return error / scale if scale > 0 else 0.0


def _stationarity(Q: np.ndarray, s: np.ndarray, a: np.ndarray) -> float:
    """``||(I - Q Q^T) (s - a)||_inf / max(||s||_inf, ||a||_inf)`` (0 when both are 0)."""
    if not (np.all(np.isfinite(s))):
        return np.inf
    w = s - a
    off = w - Q @ (Q.T @ w)
    scale = max(float(np.max(np.abs(s))), float(np.max(np.abs(a))))
    return float(np.max(np.abs(off))) / scale if scale > 0 else 0.0


def optimality_residual(X, y, beta, init) -> tuple[float, float]:
    """``(primal, stationarity)`` residuals of ``beta`` as the minimiser of ``D`` on
    ``X beta = y``, independent of any solver.

    * primal: ``||X beta - y||_inf / max(||y||_inf, max_i (|X| |beta|)_i)``: relative to the size
      of its terms, so that rounding in a sum of large terms (``X beta0`` far larger than ``y``)
      is not taken for a violation; ``||y||_inf`` on data where ``X beta`` does not cancel.
    * stationarity: the distance of ``grad D(beta) = asinh(beta / k) - a`` from the row space of
      ``X`` (projection onto the orthogonal complement of ``range(X^T)``, an orthonormal basis
      from the SVD of ``X``), in the max norm, relative to the size of its terms
      ``max(||asinh(beta / k)||_inf, ||a||_inf)``.

    Both 0 characterise the minimiser (``D`` strictly convex, the constraint affine). Relative
    measures are scale-free: at large ``k`` (``asinh(beta / k) ~ beta / k``) a stationarity
    ``e`` is a relative error ``~ e`` in ``beta``'s component along the null space of ``X``.
    ``ValueError`` naming X, y, beta or init for bad input (not for inconsistent targets: the
    primal residual then says it).
    """
    X, y = _data(X, y)
    k, _, a = _parameters(init, X.shape[1])
    beta = _beta(beta, X.shape[1])
    U, s, Vt = linalg.svd(X, full_matrices=False)
    rank = int(np.sum(s > max(X.shape) * _EPS * s[0])) if s.size and s[0] > 0 else 0
    with np.errstate(over="ignore"):
        grad_terms = np.arcsinh(beta / k)
    return _primal(X, y, beta), _stationarity(Vt[:rank].T, grad_terms, a)


# --------------------------------------------------------------------------- the solver


def _newton_direction(H: np.ndarray, gradient: np.ndarray) -> tuple[np.ndarray, float]:
    """``(unit, size)`` with ``-H^{-1} gradient = size * unit``: ``size = max |gradient|`` and
    ``unit = -H^{-1} (gradient / size)`` (so that neither overflows where the gradient is
    near the float64 limit), by Cholesky of the Jacobi-scaled ``H``, minimum-norm least squares
    where that is not positive definite; ``unit`` NaN where ``H`` or the gradient is not
    finite, 0 for a zero gradient."""
    size = float(np.max(np.abs(gradient)))
    if not (np.all(np.isfinite(H)) and np.isfinite(size)):
        return np.full(gradient.shape, np.nan), size
    if size == 0.0:
        return np.zeros(gradient.shape), size
    scale = np.sqrt(np.maximum(np.diag(H), _TINY))
    Hs = H / scale[:, None] / scale[None, :]
    rhs = -(gradient / size) / scale
    try:
        step = linalg.cho_solve(linalg.cho_factor(Hs), rhs)
    except linalg.LinAlgError:
        step = linalg.lstsq(Hs, rhs)[0]
    with np.errstate(over="ignore"):  # an ill-conditioned H: inf, reported by the caller
        return step / scale, size


def _line_search(
    k: np.ndarray,
    log_k: np.ndarray,
    w: np.ndarray,
    step: np.ndarray,
    delta: np.ndarray,
    Q: np.ndarray,
    b: np.ndarray,
    gradient: np.ndarray,
) -> tuple[float, bool]:
    """``(t, at_rounding)``: the first ``t`` in ``1, 1/2, 1/4, ...`` (at most
    :data:`MAX_HALVINGS`) with the Armijo decrease ``phi(t) - phi(0) <= c t slope`` of the dual
    (``t = 0`` if none), and whether it was accepted on the merit below.

    Where that change is within the rounding of its own terms (near the solution, where
    ``phi`` changes by the square of the gradient) the test is made on the merit
    ``||grad phi||_2^2`` instead, along which the Newton direction also descends (its slope is
    ``-2 ||grad phi||_2^2``): ``||grad phi(t)||^2 <= (1 - 2 c t) ||grad phi(0)||^2``.

    Both tests are made in units of ``size = max |grad phi(0)|`` (> 0), so that the slope and
    the merit do not overflow with targets near the float64 limit."""
    size = float(np.max(np.abs(gradient)))
    unit = gradient / size
    slope = float(unit @ step)  # < 0: the Hessian is positive definite on the row space
    merit = float(unit @ unit)
    t = 1.0
    for _ in range(MAX_HALVINGS):
        with np.errstate(over="ignore", invalid="ignore"):
            half = 2.0 * _k_sinh(k, log_k, w + t * delta / 2.0) * np.sinh(t * delta / 2.0)
            linear = t * float(step @ b)
            change = float(np.sum(half)) - linear
            noise = 8.0 * _EPS * (float(np.sum(np.abs(half))) + abs(linear))
            relative = change / size
        if np.isfinite(change):
            if relative <= _ARMIJO * t * slope and change < -noise:
                return t, False
            if abs(change) <= noise:
                with np.errstate(over="ignore", invalid="ignore"):
                    trial = (Q.T @ _k_sinh(k, log_k, w + t * delta) - b) / size
                    value = float(trial @ trial)
                if value <= (1.0 - 2.0 * _ARMIJO * t) * merit:
                    return t, True
        t /= 2.0
    return 0.0, False


def woodworth_interpolator(
    X,
    y=None,
    init=None,
    *,
    tolerance: float = TOLERANCE,
    max_iterations: int = MAX_ITERATIONS,
) -> Interpolator:
    """The interpolator the GD flow on ``beta = u ⊙ v`` converges to (when it interpolates):
    ``argmin D(beta)`` s.t. ``X beta = y`` (module doc).

    Call as ``woodworth_interpolator(X, y, init)``, or ``woodworth_interpolator(data, init)``
    (also ``init=``) with an object holding ``.X`` and ``.y``.

    Parameters
    ----------
    X : (n, d) features; y : (n,) targets, with ``X beta = y`` consistent.
    init : the initialization (:func:`potential_parameters`): ``alpha > 0``, a (d,) positive
        vector, or ``[u(0); v(0)]`` (2, d).
    tolerance : largest residual (:func:`optimality_residual`) reported optimal.
    max_iterations : cap on the Newton steps.

    Returns
    -------
    Interpolator
        ``beta``, the dual ``lam`` (``asinh(beta / k) - a = X^T lam``), the status (0 certified,
        1 not: the message says why and ``beta`` is the last iterate, -1 no finite solution),
        the residuals (recomputed from ``beta``) and the Newton steps taken.

    Raises
    ------
    ValueError
        Naming X, y or init for bad input, and X, y when the targets cannot be interpolated.

    Method: damped Newton on the dual ``phi`` in the row-space basis (module doc), from
    ``w = a`` (``beta = beta0``). Once the primal residual is at most ``tolerance``, one more
    full Newton step is taken if it lowers the residual (quadratic convergence then reaches
    rounding level).
    """
    if _is_data_set(X) and init is None and y is not None:
        init, y = y, None
    X, y = _data(X, y)
    if init is None:
        raise ValueError("init must be given: alpha > 0, a (d,) vector or a (2, d) array")
    tolerance = real(tolerance, "tolerance", low=0.0, low_open=True)
    max_iterations = integer(max_iterations, "max_iterations", 0)
    k, log_k, a = _parameters(init, X.shape[1])
    space = _row_space(X, y)
    if not np.all(np.isfinite(space.b)):
        return _failed(
            X.shape,
            "woodworth",
            0,
            "no finite solution: the targets in the row space of X, diag(s)^-1 U^T y, are "
            "outside float64 (every interpolator is): rescale X or y",
        )
    Q, b = space.Q, space.b
    mu = np.zeros(Q.shape[1])
    w = a.copy()
    beta = _k_sinh(k, log_k, w)
    primal = _primal(X, y, beta)
    iterations, polished, note, stalled, best = 0, False, "", 0, primal
    while np.isfinite(primal):
        if primal <= tolerance and polished:
            break
        if iterations >= max_iterations:
            note = f"iteration cap max_iterations = {max_iterations} reached"
            break
        with np.errstate(over="ignore", invalid="ignore"):
            gradient = Q.T @ beta - b
            H = Q.T @ (_k_cosh(k, log_k, w)[:, None] * Q)
        unit, size = _newton_direction(H, gradient)
        unit_delta = Q @ unit
        top = float(np.max(np.abs(unit_delta))) if unit_delta.size else 0.0
        if size == 0.0 or top == 0.0 or not np.isfinite(top):
            note = (
                "the Newton step vanished (rounding level)"
                if np.isfinite(top)
                else "the Newton step is not finite (the Hessian or the gradient left float64)"
            )
            break
        factor = MAX_STEP / top if np.log(top) + np.log(size) > np.log(MAX_STEP) else size
        step, delta = unit * factor, unit_delta * factor  # capped at MAX_STEP in w
        iterations += 1
        if primal <= tolerance:  # the polishing step: full, kept only if it helps
            trial_w = w + delta
            trial_beta = _k_sinh(k, log_k, trial_w)
            trial_primal = _primal(X, y, trial_beta)
            if trial_primal < primal:
                mu, w, beta, primal = mu + step, trial_w, trial_beta, trial_primal
            polished = True
            continue
        t, at_rounding = _line_search(k, log_k, w, step, delta, Q, b, gradient)
        if t == 0:
            note = (
                f"the line search found no decrease in {MAX_HALVINGS} halvings "
                "(rounding level of the dual objective and of its gradient)"
            )
            break
        mu, w = mu + t * step, w + t * delta
        beta = _k_sinh(k, log_k, w)
        primal = _primal(X, y, beta)
        stalled = stalled + 1 if at_rounding and not primal < best / 2 else 0
        best = min(best, primal)
        if stalled >= _STALL:
            note = f"no progress in {_STALL} steps at the rounding level"
            break
    if not np.all(np.isfinite(beta)):
        message = "no finite solution: beta = k sinh(w) left float64 (rescale the data)"
        return _failed(X.shape, "woodworth", iterations, message)
    with np.errstate(over="ignore", invalid="ignore"):
        lam = space.U @ (mu / space.s)  # X^T lam = Q mu
    if not np.all(np.isfinite(lam)):
        message = "no finite solution: the dual lam left float64 (rescale the data)"
        return _failed(X.shape, "woodworth", iterations, message)
    with np.errstate(over="ignore"):
        stationarity = _stationarity(Q, np.arcsinh(beta / k), a)
    residual = max(primal, stationarity)
    status = OPTIMAL if residual <= tolerance else NOT_CERTIFIED
    if status == OPTIMAL:
        message = (
            f"optimal: residual {residual:.2g} <= {tolerance:g} after {iterations} Newton steps"
        )
    else:
        message = (
            f"not certified: residual {residual:.2g} > {tolerance:g} after {iterations} Newton "
            f"steps ({note or 'stopped'}); beta is the last iterate"
        )
    return Interpolator(
        beta=beta,
        lam=lam,
        status=status,
        message=message,
        residual=residual,
        primal=primal,
        stationarity=stationarity,
        iterations=iterations,
        criterion="woodworth",
    )


# --------------------------------------------------------------------------- the two limits


def min_l2_interpolator(X, y=None, *, tolerance: float = TOLERANCE) -> Interpolator:
    """The minimum l2-norm interpolator ``X^+ y`` (the ``alpha -> inf`` limit).

    From the SVD of ``X`` on its numerical rank: ``beta = Q diag(s)^-1 U^T y`` and
    ``lam = U diag(s)^-2 U^T y`` (``beta = X^T lam``), on the problem scaled as
    :func:`_scaled_problem` does (exact: ``beta`` and ``lam`` are mapped back by powers of 2), so
    the answer follows any scale of ``X`` and ``y``. Where ``beta`` or ``lam`` is beyond float64
    (``lam`` grows like ``y / X^2``: at ``X`` ~ 1e-160) the status is :data:`FAILED`. Call as
    ``min_l2_interpolator(X, y)`` or with an object holding ``.X`` and ``.y``. ``ValueError``
    naming X, y for bad input or targets that cannot be interpolated.
    """
    X, y = _data(X, y)
    tolerance = real(tolerance, "tolerance", low=0.0, low_open=True)
    scaled = _scaled_problem(X, y)
    space = _row_space(scaled.A, scaled.h)
    unit_beta = space.Q @ space.b
    off = unit_beta - space.Q @ (space.Q.T @ unit_beta)
    top = float(np.max(np.abs(unit_beta)))
    stationarity = float(np.max(np.abs(off))) / top if top > 0 else 0.0
    beta, lam = scaled.solution(unit_beta, space.U @ (space.b / space.s))
    for name, values in (("beta", beta), ("lam", lam)):
        if not np.all(np.isfinite(values)):
            return _failed(X.shape, "l2", 0, _beyond_float64(scaled, name))
    return _limit_result(beta, lam, _primal(X, y, beta), stationarity, tolerance, "l2", 0, "")


def min_l1_interpolator(X, y=None, *, tolerance: float = TOLERANCE) -> Interpolator:
    """The minimum l1-norm interpolator, basis pursuit (the ``alpha -> 0`` limit).

    The LP ``min 1^T (p + q)`` s.t. ``A (p - q) = h``, ``p, q >= 0``, ``beta = 2^k (p - q)``
    (``scipy.optimize.linprog``, HiGHS), on the problem scaled as :func:`_scaled_problem` does:
    rows of ``X`` and ``y`` by powers of 2 to largest entry of ``X`` in [1/2, 1), then ``y`` by
    one power ``2^k`` to largest entry in [1/2, 1). Both are exact and leave the solution
    set unchanged up to the factor ``2^k`` (basis pursuit is covariant: ``beta(s X, t y) =
    beta(X, y) t / s``), so the solver's absolute tolerances act at the same relative size
    whatever the scale of ``X`` and ``y``. The dual ``lam`` is the multiplier of the
    equalities (``||X^T lam||_inf <= 1``, ``= sign(beta_j)`` on the support). The vertex is
    then polished: ``A_J u_J = h`` on the support ``J`` and ``A_J^T nu = sign(u_J)`` by least
    squares, each kept if it keeps the signs and lowers the residuals. Basis pursuit may have a
    whole face of solutions: this is one vertex of it (the one HiGHS lands on). Where ``beta``
    or ``lam`` is beyond float64 the status is :data:`FAILED`.

    Call as ``min_l1_interpolator(X, y)`` or with an object holding ``.X`` and ``.y``.
    ``ValueError`` naming X, y for bad input or targets that cannot be interpolated.
    """
    X, y = _data(X, y)
    tolerance = real(tolerance, "tolerance", low=0.0, low_open=True)
    scaled = _scaled_problem(X, y)
    A, h = scaled.A, scaled.h
    _row_space(A, h)
    d = X.shape[1]
    res = linprog(
        np.ones(2 * d),
        A_eq=np.hstack([A, -A]),
        b_eq=h,
        bounds=(0.0, None),
        method="highs",
        options=_HIGHS_OPTIONS,
    )
    if res.status != 0 or res.x is None:
        return _failed(
            X.shape, "l1", 1, f"linprog (HiGHS) failed on the basis-pursuit LP: {res.message}"
        )
    unit, nu = _polished_l1(
        A, h, res.x[:d] - res.x[d:], np.asarray(res.eqlin.marginals, dtype=float)
    )
    beta, lam = scaled.solution(unit, nu, dual_scales=False)
    for name, values in (("beta", beta), ("lam", lam)):
        if not np.all(np.isfinite(values)):
            return _failed(X.shape, "l1", 1, _beyond_float64(scaled, name))
    return _limit_result(
        beta, lam, _primal(X, y, beta), _l1_stationarity(X, beta, lam), tolerance, "l1", 1, ""
    )


class _Scaled(NamedTuple):
    """``X beta = y`` scaled exactly (:func:`_scaled_problem`): ``A = 2^-e X`` row by row,
    ``h = 2^-(e + k) y``, so that ``A u = h`` with ``beta = 2^k u``."""

    A: np.ndarray
    h: np.ndarray
    rows: np.ndarray
    shift: int

    def solution(
        self, u: np.ndarray, nu: np.ndarray, dual_scales: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(beta, lam)`` of the scaled solution ``u`` and dual ``nu``, by powers of 2 (NaN
        where an entry leaves the float64 range, above or below): ``beta = 2^k u``,
        ``lam = 2^(k - e) nu`` for the l2 dual (``beta = X^T lam``), ``lam = 2^-e nu`` without
        ``dual_scales`` (the l1 dual, which does not depend on the size of ``y``)."""
        with np.errstate(over="ignore", under="ignore"):
            beta = np.ldexp(u, self.shift)
            lam = np.ldexp(nu, (self.shift if dual_scales else 0) - self.rows)
        return _representable(beta, u), _representable(lam, nu)


def _representable(values: np.ndarray, scaled: np.ndarray) -> np.ndarray:
    """``values`` (the scaled values times powers of 2), NaN where that overflowed or
    underflowed to 0."""
    lost = ~np.isfinite(values) | ((values == 0) & (scaled != 0))
    return np.where(lost, np.nan, values)


def _scaled_problem(X: np.ndarray, y: np.ndarray) -> _Scaled:
    """Rows of ``X`` and ``y`` scaled by ``2^-e_i`` to largest ``|X_ij|`` in [1/2, 1) (a zero
    row kept), and ``y`` by a further ``2^-k`` to largest entry in [1/2, 1) (``k = 0`` for
    ``y = 0``), in one step so that nothing overflows: the same interpolators up to the factor
    ``2^k``, exactly (but for targets below the float range relative to the largest), at a
    scale where the solvers' absolute tolerances and the products of the solution neither
    under- nor overflow."""
    top = np.max(np.abs(X), axis=1)
    rows = np.where(top > 0, np.frexp(np.where(top > 0, top, 1.0))[1], 0)
    powers = np.frexp(y)[1] - rows  # |y_i| 2^-e_i in [2^(p_i - 1), 2^p_i)
    shift = int(np.max(powers[y != 0])) if np.any(y) else 0
    with np.errstate(under="ignore"):
        h = np.ldexp(y, -rows - shift)
    return _Scaled(A=np.ldexp(X, -rows[:, None]), h=h, rows=rows, shift=shift)


def _beyond_float64(scaled: _Scaled, name: str) -> str:
    """The message of a solution or dual ``name`` beyond float64."""
    return (
        f"no finite solution: {name} is outside float64 at this scale of X and y (rows of X of "
        f"sizes 2^{int(np.min(scaled.rows))} to 2^{int(np.max(scaled.rows))}, y of size "
        f"2^{scaled.shift} beyond them): rescale X or y"
    )


def _failed(shape: tuple[int, int], criterion: str, iterations: int, message: str) -> Interpolator:
    """The :class:`Interpolator` of a solve without a finite solution: NaN ``beta`` and ``lam``."""
    n, d = shape
    return Interpolator(
        beta=np.full(d, np.nan),
        lam=np.full(n, np.nan),
        status=FAILED,
        message=message,
        residual=np.inf,
        primal=np.inf,
        stationarity=np.inf,
        iterations=iterations,
        criterion=criterion,
    )


def _l1_support(beta: np.ndarray) -> np.ndarray:
    """Indices with ``|beta_j| > 1e-9 max |beta|``."""
    top = float(np.max(np.abs(beta)))
    return np.flatnonzero(np.abs(beta) > 1e-9 * top) if top > 0 else np.zeros(0, dtype=int)


def _l1_stationarity(X: np.ndarray, beta: np.ndarray, lam: np.ndarray) -> float:
    """Largest violation of ``(X^T lam)_j = sign(beta_j)`` on the support and
    ``|X^T lam|_j <= 1`` off it, against ``1 + (|X|^T |lam|)_j``."""
    g = X.T @ lam
    size = 1.0 + np.abs(X).T @ np.abs(lam)
    on = np.zeros(beta.shape[0], dtype=bool)
    on[_l1_support(beta)] = True
    violation = np.where(on, np.abs(g - np.sign(beta)), np.maximum(np.abs(g) - 1.0, 0.0))
    return float(np.max(violation / size))


def _polished_l1(
    X: np.ndarray, y: np.ndarray, beta: np.ndarray, lam: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The LP vertex ``(beta, lam)`` solved exactly on its support (:func:`min_l1_interpolator`)."""
    J = _l1_support(beta)
    if J.size == 0 or J.size > X.shape[0]:
        return beta, lam
    candidate = np.zeros_like(beta)
    candidate[J] = linalg.lstsq(X[:, J], y)[0]
    if np.all(np.sign(candidate[J]) == np.sign(beta[J])) and _primal(X, y, candidate) < _primal(
        X, y, beta
    ):
        beta = candidate
    dual = linalg.lstsq(X[:, J].T, np.sign(beta[J]))[0]
    if _l1_stationarity(X, beta, dual) < _l1_stationarity(X, beta, lam):
        lam = dual
    return beta, lam


def _limit_result(
    beta: np.ndarray,
    lam: np.ndarray,
    primal: float,
    stationarity: float,
    tolerance: float,
    criterion: str,
    iterations: int,
    note: str,
) -> Interpolator:
    """The :class:`Interpolator` of a limit criterion, its status from its residuals."""
    residual = max(primal, stationarity)
    status = OPTIMAL if residual <= tolerance else NOT_CERTIFIED
    verdict = "optimal" if status == OPTIMAL else "not certified"
    sign = "<=" if status == OPTIMAL else ">"
    return Interpolator(
        beta=beta,
        lam=lam,
        status=status,
        message=f"{verdict}: residual {residual:.2g} {sign} {tolerance:g}{note}",
        residual=residual,
        primal=primal,
        stationarity=stationarity,
        iterations=iterations,
        criterion=criterion,
    )


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
