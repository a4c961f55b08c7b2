"""The multilinear ("canopy") rule of the sliding combination (:mod:`flows.integrator.filippov`):
the weights ``lambda`` in ``[0, 1]^k`` that keep ``k`` sliding surfaces, by Newton's method, with
a box-constrained least-squares fallback where Newton finds no exact solution."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: At most this many coupled surfaces slide at once (``2^k`` field evaluations per step).
MAX_COUPLED = 6
NEWTON_ITERATIONS = 50
#: Newton stops where every residual ``sum_m w_m rows[i, m]`` is below this fraction of the
#: terms it sums, ``sum_m w_m |rows[i, m]|``: near the faces of the box the weights make
#: those terms small (a ``lambda`` of 4e-9 puts 4e-9 on the side that moves 1e9 times faster),
#: and a tolerance on the row's largest rate would leave ``dG_j/dtau`` at 1e-4 of them, which
#: moves the state off the sliding surface (l_inf-SAM, teacher set 5 at depth 4: to 3.5e-3 of
#: ``sum_i |p_i z_ij|`` within 0.4 of tau at rtol 1e-10 and 1e-12 alike).
NEWTON_TOL = 1e-13
#: A Newton step below this ends it as solved: ``lambda`` is then at its rounding floor (where
#: the residual's is above :func:`_tolerance`'s estimate, further steps are noise, and an
#: ill-conditioned Jacobian turns them into jumps to another root of the system).
STEP_FLOOR = 8 * float(np.finfo(float).eps)


def vertex_signs(k: int) -> np.ndarray:
    """(2^k, k): row ``m`` holds the sides of the ``k`` surfaces (+1 where bit ``i`` of ``m`` is 0)."""
    m = np.arange(2**k)[:, None]
    return np.where((m >> np.arange(k)[None, :]) & 1, -1.0, 1.0)


def multilinear_weights(lam: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """``w_m = prod_i (lambda_i if signs[m, i] > 0 else 1 - lambda_i)``: (..., k) -> (..., M)."""
    factors = np.where(signs > 0, lam[..., None, :], 1.0 - lam[..., None, :])
    return np.prod(factors, axis=-1)


def _residual_and_jacobian(
    lam: np.ndarray, rows: np.ndarray, signs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``r_i = sum_m w_m(lambda) rows[i, m]`` (..., k) and ``dr_i / dlambda_j`` (..., k, k), for
    ``lam`` (..., k) and ``rows`` (..., k, M) with any leading axes.

    ``dw_m / dlambda_j = signs[m, j] prod_{i != j} factor_{m, i}``: the products of all factors
    but one, for every ``j`` at once, as products with factor ``j`` replaced by 1 (exact).
    """
    k = rows.shape[-2]
    factors = np.where(signs > 0, lam[..., None, :], 1.0 - lam[..., None, :])
    others = np.prod(np.where(_EYE[k][:, None, :], 1.0, factors[..., None, :, :]), axis=-1)
    jacobian = np.empty(rows.shape[:-1] + (k,))
    with np.errstate(invalid="ignore"):  # a non-finite one-sided field: NaN, the step is rejected
        residual = (rows @ np.prod(factors, axis=-1)[..., None])[..., 0]
        for i in range(k):
            jacobian[..., i] = (rows @ (signs[:, i] * others[..., i, :])[..., None])[..., 0]
    return residual, jacobian


def _tolerance(lam: np.ndarray, rows: np.ndarray, signs: np.ndarray, tol: float) -> np.ndarray:
    """The residual (..., k) at which Newton stops: ``tol`` times the terms each residual sums,
    ``sum_m w_m |rows[i, m]|``, or the rounding of the weights where that is larger (4 times
    ``sum_m |rows[i, m]| sum_j (prod_{l != j} f_ml) eps (lambda_j + f_mj)``: a factor
    ``f = 1 - lambda_j`` of a ``lambda_j`` next to 1 is known to ``eps`` only, not to
    ``eps f``)."""
    factors = np.where(signs > 0, lam[..., None, :], 1.0 - lam[..., None, :])  # (..., M, k)
    k = factors.shape[-1]
    others = np.prod(np.where(_EYE[k][:, None, :], 1.0, factors[..., None, :, :]), axis=-1)
    rounding = np.finfo(float).eps * (np.abs(lam[..., None, :]) + np.abs(factors))  # (..., M, k)
    magnitudes = np.abs(rows)
    with np.errstate(invalid="ignore"):  # outside the box the weights can be negative: sizes
        sizes = (magnitudes @ np.abs(np.prod(factors, axis=-1))[..., None])[..., 0]
        spread = np.sum(np.abs(np.swapaxes(others, -1, -2)) * rounding, axis=-1)
        floor = (magnitudes @ spread[..., None])[..., 0]
    return np.maximum(tol * sizes, 4.0 * floor)


#: Identity masks of :func:`_residual_and_jacobian`, by the number of surfaces.
_EYE = [np.eye(k, dtype=bool) for k in range(MAX_COUPLED + 2)]


def solve_multilinear(
    rates: np.ndarray, signs: np.ndarray, newton: Newton | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``lambda`` with ``sum_m w_m(lambda) rates[i, m] = 0`` for every ``i``.

    ``rates`` (..., k, M) are the normal rates of the ``k`` surfaces under the ``M = 2^k``
    one-sided fields ordered as :func:`vertex_signs` (leading axes: independent problems,
    solved together). The equations are affine in each ``lambda_i`` (exact in one Newton step
    for ``k = 1``); Newton starts from ``lambda = 1/2``, so the answer does not depend on
    earlier calls, and is not confined to ``[0, 1]``: outside it the surface no longer slides,
    which the release events watch. Where Newton finds no solution (nearly parallel surfaces:
    their conditions then nearly coincide), the combination closest to keeping every surface,
    by box-constrained least squares (:func:`_box_least_squares`): a weight that sits at 0 or
    1 there releases its surface. Returns ``(lambda (..., k), exact (...))``; ``lambda`` is
    always finite. ``newton``: Newton's method for one problem, ``(rows, signs, iterations,
    tol) -> (lambda, exact)`` (default :func:`_newton_one`; the compiled backend passes its own).
    """
    batch, (k, m) = rates.shape[:-2], rates.shape[-2:]
    scale = np.max(np.abs(rates), axis=-1)
    rows = rates / np.where(scale > 0, scale, 1.0)[..., None]
    if not batch:
        lam, solved = (newton or _newton_one)(rows, signs, NEWTON_ITERATIONS, NEWTON_TOL)
        return (lam if solved else _box_least_squares(rows, signs)), np.asarray(solved)
    lam, exact = _newton_stack(rows.reshape(-1, k, m), signs)
    return lam.reshape(batch + (k,)), exact.reshape(batch)


#: Newton's method for one multilinear system (see :func:`solve_multilinear`).
Newton = Callable[[np.ndarray, np.ndarray, int, float], tuple[np.ndarray, bool]]


def _newton_one(
    rows: np.ndarray, signs: np.ndarray, iterations: int, tol: float
) -> tuple[np.ndarray, bool]:
    """Newton's method for one problem (rows scaled to 1): ``(lambda, exact)``, the fast path
    of the solver's every field evaluation (:func:`_newton_stack` does the same for a stack)."""
    lam = np.full(rows.shape[0], 0.5)
    for _ in range(iterations):
        residual, jacobian = _residual_and_jacobian(lam, rows, signs)
        if np.all(np.abs(residual) <= _tolerance(lam, rows, signs, tol)):
            return lam, True
        try:
            step = np.linalg.solve(jacobian, residual)
        except np.linalg.LinAlgError:
            break
        lam = lam - step
        if not np.all(np.isfinite(lam)):
            break
        if np.max(np.abs(step)) <= STEP_FLOOR:
            return lam, True
    return lam, False


def _newton_stack(rows: np.ndarray, signs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_newton_one` for a stack of problems (n, k, M) at once: each problem iterates
    until it converges or fails, as it would alone."""
    lam = np.full(rows.shape[:2], 0.5)
    exact = np.zeros(len(rows), dtype=bool)
    going = np.ones(len(rows), dtype=bool)  # neither solved nor failed yet
    for _ in range(NEWTON_ITERATIONS):
        residual, jacobian = _residual_and_jacobian(lam, rows, signs)
        limit = _tolerance(lam, rows, signs, NEWTON_TOL)
        converged = going & np.all(np.abs(residual) <= limit, axis=-1)
        exact |= converged
        going &= ~converged
        if not going.any():
            break
        step, solved = _newton_steps(jacobian, residual)
        new = lam - step
        moved = going & solved & np.all(np.isfinite(new), axis=-1)
        going &= moved  # a singular Jacobian or a non-finite step: least squares
        lam[moved] = new[moved]
        floored = moved & (np.max(np.abs(step), axis=-1) <= STEP_FLOOR)
        exact |= floored
        going &= ~floored
    for i in np.flatnonzero(~exact):
        lam[i] = _box_least_squares(rows[i], signs)
    return lam, exact


def _newton_steps(jacobian: np.ndarray, residual: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``J^-1 r`` for each of the stacked systems (n, k, k), (n, k), and which were solvable
    (a singular one gets a zero step and False)."""
    try:
        return np.linalg.solve(jacobian, residual[..., None])[..., 0], np.ones(len(residual), bool)
    except np.linalg.LinAlgError:
        step = np.zeros_like(residual)
        solved = np.ones(len(residual), dtype=bool)
        for i in range(len(residual)):
            try:
                step[i] = np.linalg.solve(jacobian[i], residual[i])
            except np.linalg.LinAlgError:
                solved[i] = False
        return step, solved


def _box_least_squares(rows: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """``argmin ||r(lambda)||`` over ``[0, 1]^k`` by projected Levenberg–Marquardt steps from
    ``1/2`` (at most ``NEWTON_ITERATIONS``)."""
    k = rows.shape[0]
    lam = np.full(k, 0.5)
    damping = 1e-3
    residual, jacobian = _residual_and_jacobian(lam, rows, signs)
    cost = float(residual @ residual)
    for _ in range(NEWTON_ITERATIONS):
        normal = jacobian.T @ jacobian
        step = np.linalg.solve(normal + damping * (np.diag(np.diag(normal)) + 1e-12 * np.eye(k)),
                               jacobian.T @ residual)  # fmt: skip
        trial = np.clip(lam - step, 0.0, 1.0)
        r_trial, j_trial = _residual_and_jacobian(trial, rows, signs)
        c_trial = float(r_trial @ r_trial)
        if c_trial < cost:
            lam, residual, jacobian, cost = trial, r_trial, j_trial, c_trial
            damping = max(damping / 10.0, 1e-12)
            if cost <= NEWTON_TOL**2:
                break
        else:
            damping *= 10.0
            if damping > 1e12:
                break
    return lam
