"""The scaled form shared by the two max-margin programs: exact binary equilibration of
``Z``, the mapping back to the data's units, and the residuals common to both
(:mod:`analysis.margin_programs`)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.linalg import LinAlgWarning, lu_factor, lu_solve

#: Relative threshold below which a dual variable / coordinate is treated as 0.
RELATIVE_ZERO = 1e-12
#: Largest KKT residual of a solution taken as certified without a second method.
CERTIFIED = 1e-12
#: Largest KKT residual of a solution that counts as certified (``analysis.maxmargin`` reports
#: the same bound as ``KKT_TOLERANCE``).
CERTIFIED_TOLERANCE = 1e-8
#: Binary exponent standing for that of 0 (below every float's).
NO_EXPONENT = -(2**30)
#: Steps of iterative refinement of the exact solves.
REFINEMENTS = 3

#: ``(v, mu, kkt)``: a solution of a scaled program, its multipliers and KKT residuals.
Candidate = tuple[np.ndarray, np.ndarray, dict]


@dataclass(frozen=True)
class Solution:
    """A max-margin solution in the units of the data.

    Attributes
    ----------
    beta : (d,) the minimum-norm ``beta`` with ``Z beta >= 1``.
    direction : (d,) ``beta / ||beta||_2``, computed in logarithms (finite even where ``beta``
        is not).
    dual : (n,) the multipliers ``lambda >= 0`` of ``Z beta >= 1``.
    support : indices i with ``lambda_i > 0``.
    kkt : the relative KKT residuals (module doc).
    """

    beta: np.ndarray
    direction: np.ndarray
    dual: np.ndarray
    support: np.ndarray
    kkt: dict


@dataclass(frozen=True)
class Scaled:
    """A scaled program: constraints ``A v >= h`` (``|A| < 1``, ``h`` in (0, 1]), objective
    weights ``w = 2^w_exp`` (in (0, 1]), and the binary exponents that map ``(v, mu)`` back to
    ``(beta, lambda)`` exactly: ``beta_j = v_j 2^beta_exp[j]``, ``lambda_i = mu_i h_i
    2^dual_exp``."""

    A: np.ndarray
    h: np.ndarray
    w: np.ndarray
    w_exp: np.ndarray
    beta_exp: np.ndarray
    dual_exp: int


def equilibrated(Z: np.ndarray, p: int) -> tuple[Scaled, np.ndarray]:
    """The l_p program in the variables ``gamma = c * beta`` (module doc), on the non-zero
    columns of ``Z`` (a zero column has ``beta_j = 0`` at every optimum); those columns.

    The scales are powers of 2 (``c_j = 2^e_j`` with ``e_j`` the binary exponent of
    ``max_i |Z_ij|``, then the rows likewise), applied with ``ldexp``: the scaling and the
    mapping back are exact, whatever the scales."""
    columns = np.flatnonzero(np.any(Z != 0, axis=0))
    Zc = Z[:, columns]
    nonzero = Zc != 0
    exponents = np.where(nonzero, np.frexp(Zc)[1].astype(np.int64), NO_EXPONENT)
    e_c = np.max(exponents, axis=0)
    e_r = np.max(exponents - e_c, axis=1)
    if not np.all(np.any(nonzero, axis=1)):
        raise ValueError("data (X, y) are not linearly separable through the origin (a zero row)")
    top_h, top_w = int(np.max(-e_r)), int(np.max(-e_c))
    w_exp = -e_c - top_w
    program = Scaled(
        A=np.ldexp(Zc, -(e_c[None, :] + e_r[:, None])),
        h=np.ldexp(1.0, -e_r - top_h),
        w=np.ldexp(1.0, w_exp),
        w_exp=w_exp,
        beta_exp=top_h - e_c,
        dual_exp=p * (top_h + top_w),
    )
    return program, columns


def in_data_units(
    program: Scaled, columns: np.ndarray, d: int, v: np.ndarray, mu: np.ndarray, kkt: dict, p: int
) -> Solution:
    """The scaled solution ``(v, mu)`` as ``beta`` (on ``columns`` of a length-``d`` vector) and
    ``lambda`` (exact binary rescalings); ``ValueError`` naming X where ``beta``, or the
    multipliers of a certified solution, are outside float64 (an uncertified solution's
    multipliers that are not representable are NaN)."""
    terms = mu * program.h
    support = np.flatnonzero(terms > RELATIVE_ZERO * np.max(terms))
    exponents = np.where(v != 0, np.frexp(v)[1].astype(np.int64) + program.beta_exp, NO_EXPONENT)
    with np.errstate(over="ignore", under="ignore"):
        beta_c = np.ldexp(v, program.beta_exp)
        direction_c = np.ldexp(v, program.beta_exp - np.max(exponents))
        dual = np.ldexp(terms, program.dual_exp)
    lost = ~np.isfinite(beta_c) | ((beta_c == 0) & (v != 0))
    lost_dual = ~np.isfinite(dual) | ((dual == 0) & (terms != 0))
    certified = max(kkt.values()) <= CERTIFIED_TOLERANCE
    if np.any(lost) or (np.any(lost_dual) and certified):
        what = "beta" if np.any(lost) else "the dual variables"
        raise ValueError(
            f"X: {what} of the l{p} max-margin problem are outside float64 at this scale of "
            "X; rescale X (or its columns that are far from the others in scale)"
        )
    dual = np.where(lost_dual, np.nan, dual)  # an uncertified solution's unusable multipliers
    beta = np.zeros(d)
    beta[columns] = beta_c
    direction = np.zeros(d)
    direction[columns] = direction_c / np.linalg.norm(direction_c)
    return Solution(beta=beta, direction=direction, dual=dual, support=support, kkt=kkt)


def constraint_residuals(program: Scaled, v: np.ndarray, mu: np.ndarray) -> dict:
    """Primal feasibility of the margins ``(A v)_i / h_i - 1`` (those of the data), dual
    feasibility and complementary slackness relative to the dual objective ``sum |mu_i h_i|``."""
    slack = (program.A @ v) / program.h - 1.0
    terms = mu * program.h
    total = max(float(np.sum(np.abs(terms))), np.finfo(float).tiny)
    return {
        "dual_feasibility": float(max(0.0, -np.min(terms)) / total),
        "primal_feasibility": float(max(0.0, -np.min(slack))),
        "complementary_slackness": float(np.max(np.abs(terms * slack)) / total),
    }


def worst(kkt: dict) -> float:
    """The largest KKT residual."""
    return max(kkt.values())


def square_or_least_squares(M: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``M x = rhs`` by :func:`refined_solve` when ``M`` is square, else least squares."""
    if M.shape[0] == M.shape[1]:
        return refined_solve(M, rhs)
    return np.linalg.lstsq(M, rhs, rcond=None)[0]


def refined_solve(M: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``M x = rhs`` by LU with :data:`REFINEMENTS` steps of iterative refinement; the
    least-squares solution when ``M`` is singular."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", LinAlgWarning)
        try:
            factors = lu_factor(M, check_finite=False)
        except LinAlgWarning:
            return np.linalg.lstsq(M, rhs, rcond=None)[0]
    with np.errstate(all="ignore"):  # a pivot of a near-singular M may overflow the solution
        x = lu_solve(factors, rhs)
        for _ in range(REFINEMENTS):
            if not np.all(np.isfinite(x)):
                break
            x = x + lu_solve(factors, rhs - M @ x)
    return x if np.all(np.isfinite(x)) else np.linalg.lstsq(M, rhs, rcond=None)[0]


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
