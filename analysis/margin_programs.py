"""The two max-margin programs of :mod:`analysis.maxmargin`, solved on normalised data.

Both take ``Z`` (n, d), the rows ``y_i x_i`` scaled to ``max|Z| = 1``, and return
``(beta, lambda, kkt)``: the solution of ``min ||beta||_p`` s.t. ``Z beta >= 1``, its dual
variables and the KKT residuals (:func:`kkt_residuals`).

* l2 (:func:`solve_l2`): as a *least-distance program* (Lawson & Hanson, *Solving Least Squares
  Problems*, ch. 23): ``u = argmin_{u >= 0} ||[Z^T; 1^T] u - e_{d+1}||`` (scipy's active-set
  NNLS) gives ``beta = Z^T u / (1 - 1^T u)`` and the dual ``lambda = u / (1 - 1^T u)``.
  The active set (``lambda_i > 0``) is then *polished*: the equality-constrained problem
  ``min ||beta||`` s.t. ``Z_S beta = 1`` is solved exactly (``beta = pinv(Z_S) 1``) and
  ``lambda_S`` from ``Z_S^T lambda_S = beta``; points violating the constraints are added to
  ``S`` and points with ``lambda_i < 0`` dropped, until the KKT conditions hold.
* l1 (:func:`solve_l1`): ``beta = p - q``, ``p, q >= 0``, ``min 1^T (p + q)`` s.t.
  ``Z (p - q) >= 1`` with ``scipy.optimize.linprog(method="highs")``; the dual
  ``lambda = -marginals`` of the inequality constraints. The vertex returned by HiGHS is
  polished in the same way (the square system of its active constraints on its support, solved
  exactly) when that improves the KKT residuals.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog, nnls

#: Relative threshold below which a dual variable / coordinate is treated as 0 in the polish.
RELATIVE_ZERO = 1e-12
_HIGHS_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}

Solution = tuple[np.ndarray, np.ndarray, dict]


def solve_l2(Z: np.ndarray) -> Solution:
    """``min ||beta||_2`` s.t. ``Z beta >= 1``: NNLS on the least-distance program, then the
    active-set polish (module doc). ``ValueError`` if the program is infeasible."""
    n, d = Z.shape
    E = np.vstack([Z.T, np.ones((1, n))])
    f = np.zeros(d + 1)
    f[-1] = 1.0
    u, _ = nnls(E, f, maxiter=50 * max(n, d + 1))
    denom = 1.0 - u.sum()
    if not denom > 0:
        raise ValueError(
            "data (X, y) are not linearly separable through the origin "
            "(least-distance program infeasible)"
        )
    beta, lam = Z.T @ u / denom, u / denom
    return _polish_l2(Z, (beta, lam, kkt_residuals(Z, beta, lam, 2)))


def solve_l1(Z: np.ndarray) -> Solution:
    """``min ||beta||_1`` s.t. ``Z beta >= 1``: the HiGHS vertex, polished when that lowers the
    KKT residuals. ``ValueError`` if the LP is infeasible, ``RuntimeError`` if HiGHS fails."""
    n, d = Z.shape
    c = np.ones(2 * d)
    A_ub = -np.hstack([Z, -Z])
    res = linprog(
        c,
        A_ub=A_ub,
        b_ub=-np.ones(n),
        bounds=[(0, None)] * (2 * d),
        method="highs",
        options=_HIGHS_OPTIONS,
    )
    if res.status == 2:
        raise ValueError(
            "data (X, y) are not linearly separable through the origin "
            "(l1 max-margin LP infeasible)"
        )
    if res.status != 0:
        raise RuntimeError(f"linprog failed on the l1 max-margin LP: {res.message}")
    beta = res.x[:d] - res.x[d:]
    lam = np.maximum(-np.asarray(res.ineqlin.marginals, dtype=float), 0.0)
    best = (beta, lam, kkt_residuals(Z, beta, lam, 1))
    polished = _l1_vertex(Z, beta, lam)
    if polished is not None:
        b, dual = polished
        kkt = kkt_residuals(Z, b, dual, 1)
        if _worst(kkt) < _worst(best[2]):
            best = (b, dual, kkt)
    return best


def kkt_residuals(Z: np.ndarray, beta: np.ndarray, lam: np.ndarray, p: int) -> dict:
    """Scale-aware KKT residuals of ``min ||beta||_p`` s.t. ``Z beta >= 1`` at ``(beta, lam)``.

    p = 2 (objective ``||beta||^2 / 2``): stationarity ``beta = Z^T lam``.
    p = 1: ``g = Z^T lam`` must be a subgradient of ``||.||_1``: ``g_j = sign(beta_j)`` on the
    support, ``|g_j| <= 1`` off it; duality gap ``||beta||_1 - 1^T lam``.
    """
    slack = Z @ beta - 1.0
    lam_scale = max(1.0, float(np.max(np.abs(lam))))
    out = {
        "dual_feasibility": float(max(0.0, -np.min(lam)) / lam_scale),
        "primal_feasibility": float(max(0.0, -np.min(slack))),
        "complementary_slackness": float(np.max(np.abs(lam * slack)) / lam_scale),
    }
    g = Z.T @ lam
    if p == 2:
        out["stationarity"] = float(np.max(np.abs(beta - g)) / max(1.0, np.max(np.abs(beta))))
        out["duality_gap"] = abs(float(beta @ beta - lam.sum())) / max(1.0, float(beta @ beta))
    else:
        on = np.abs(beta) > RELATIVE_ZERO * max(1.0, np.max(np.abs(beta)))
        stat_on = np.max(np.abs(g[on] - np.sign(beta[on])), initial=0.0)
        stat_off = np.max(np.abs(g[~on]) - 1.0, initial=0.0)
        out["stationarity"] = float(max(stat_on, stat_off, 0.0))
        l1 = float(np.sum(np.abs(beta)))
        out["duality_gap"] = abs(l1 - float(lam.sum())) / max(1.0, l1)
    return out


def _worst(kkt: dict) -> float:
    """The largest KKT residual."""
    return max(kkt.values())


def _polish_l2(Z: np.ndarray, best: Solution) -> Solution:
    """Active-set polish of an l2 solution: the best (smallest worst KKT residual) of ``best``
    and the exact equality-constrained solutions on the active sets visited."""
    n = Z.shape[0]
    lam = best[1]
    S = np.flatnonzero(lam > RELATIVE_ZERO * max(1.0, lam.max()))
    seen = set()
    for _ in range(2 * n + 2):
        key = tuple(S)
        if key in seen or S.size == 0:
            break
        seen.add(key)
        b, dual = _l2_equality(Z, S)
        kkt = kkt_residuals(Z, b, dual, 2)
        if _worst(kkt) < _worst(best[2]):
            best = (b, dual, kkt)
        if _worst(kkt) <= 1e-13:
            break
        slack = Z @ b - 1.0
        drop = S[dual[S] < 0]
        S = np.setdiff1d(S, drop)
        if np.min(slack) < -1e-13:  # add the most violated constraint
            S = np.union1d(S, [int(np.argmin(slack))])
    return best


def _l2_equality(Z: np.ndarray, S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``min ||beta||`` s.t. ``Z_S beta = 1`` and multipliers ``lam`` (zero off ``S``)."""
    ZS = Z[S]
    beta = np.linalg.lstsq(ZS, np.ones(S.size), rcond=None)[0]  # minimum-norm solution
    lam_S = np.linalg.lstsq(ZS.T, beta, rcond=None)[0]
    if np.any(lam_S < 0):  # dependent support vectors: pick a nonnegative representation
        nn, _ = nnls(ZS.T, beta)
        if np.max(np.abs(ZS.T @ nn - beta)) <= np.max(np.abs(ZS.T @ lam_S - beta)) + 1e-14:
            lam_S = nn
    lam = np.zeros(Z.shape[0])
    lam[S] = lam_S
    return beta, lam


def _l1_vertex(
    Z: np.ndarray, beta: np.ndarray, lam: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """Exact vertex: active constraints ``S`` (``lam > 0``) on the support ``J`` of ``beta``;
    None when either is empty."""
    scale_b = max(1.0, np.max(np.abs(beta)))
    J = np.flatnonzero(np.abs(beta) > 1e-9 * scale_b)
    S = np.flatnonzero(lam > 1e-9 * max(1.0, lam.max()))
    if J.size == 0 or S.size == 0:
        return None
    A = Z[np.ix_(S, J)]
    b_J = np.linalg.lstsq(A, np.ones(S.size), rcond=None)[0]
    l_S = np.linalg.lstsq(A.T, np.sign(beta[J]), rcond=None)[0]
    b = np.zeros_like(beta)
    b[J] = b_J
    dual = np.zeros_like(lam)
    dual[S] = l_S
    return b, dual
