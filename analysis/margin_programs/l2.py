"""``min ||beta||_2`` s.t. ``Z beta >= 1``: an active-set guess from the least-distance
program, exact equilibrated KKT solves, and a primal active-set method where the guess is not
certified (:mod:`analysis.margin_programs`)."""

from __future__ import annotations

import numpy as np
from scipy.linalg import qr
from scipy.optimize import nnls

from .l1 import solve_scaled_l1
from .scaling import (
    CERTIFIED,
    RELATIVE_ZERO,
    Candidate,
    Scaled,
    Solution,
    constraint_residuals,
    equilibrated,
    in_data_units,
    refined_solve,
    worst,
)

#: ``1 - t h^T u`` below this after the first least-distance solve: solve again at a better t.
_CANCELLATION = 0.25


def solve_l2(Z: np.ndarray) -> Solution:
    """``min ||beta||_2`` s.t. ``Z beta >= 1`` (module doc): the exact KKT solution on the
    active set guessed by NNLS on the least-distance program; where that is not certified, a
    primal active-set method from the l1 solution. ``ValueError`` if the program is
    infeasible or its solution is outside float64 (naming X)."""
    program, columns = equilibrated(Z, p=2)
    best: Candidate | None = None
    mu = _least_distance_dual(Z[:, columns])
    if mu is not None and np.any(mu > 0):
        v, dual = _l2_equality(program, np.flatnonzero(mu > RELATIVE_ZERO * np.max(mu)))
        best = (v, dual, l2_residuals(program, v, dual))
    if best is None or worst(best[2]) > CERTIFIED:
        start = solve_scaled_l1(program, nonnegative=False)[0]  # same variables, feasible
        found = _active_set_l2(program, start)
        if best is None or worst(found[2]) < worst(best[2]):
            best = found
    v, mu, kkt = best
    return in_data_units(program, columns, Z.shape[1], v, mu, kkt, p=2)


def l2_residuals(program: Scaled, v: np.ndarray, mu: np.ndarray) -> dict:
    """Relative KKT residuals of the scaled l2 program ``min ||w * v||^2 / 2`` s.t.
    ``A v >= h``: stationarity ``w^2 v = A^T mu``, each coordinate measured against
    ``w_j^2 |v_j| + (|A|^T |mu|)_j``; duality gap ``||w * v||^2 - h^T mu`` relative to
    ``||w * v||^2``."""
    out = constraint_residuals(program, v, mu)
    w2 = program.w * program.w
    size = w2 * np.abs(v) + np.abs(program.A).T @ np.abs(mu)
    with np.errstate(invalid="ignore"):
        stat = np.abs(w2 * v - program.A.T @ mu) / size
    out["stationarity"] = float(np.max(np.where(size > 0, stat, 0.0)))
    energy = float(np.sum(w2 * v * v))  # 0 where the weights' squares underflow: uncertified
    gap = abs(energy - float(program.h @ mu))
    out["duality_gap"] = gap / energy if energy > 0 else np.inf
    return out


def _least_distance_dual(Z: np.ndarray) -> np.ndarray | None:
    """Multipliers of ``min ||beta||`` s.t. ``Z beta >= 1`` from the least-distance program on
    the rows of ``Z`` divided by their largest entry, at ``t = 1`` and again at
    ``t = 1 / ||beta||`` when ``1 - t h^T u`` cancels (module doc); None if both cancel.
    Only their support is used (an active-set guess)."""
    logs = _log_abs(Z)
    log_m = np.max(logs, axis=1)
    G = np.sign(Z) * np.exp(logs - log_m[:, None])
    h = np.exp(np.min(log_m) - log_m)
    first = _least_distance(G, h, 1.0)
    if first is None or first[2] >= _CANCELLATION:
        return None if first is None else first[1]
    norm = float(np.linalg.norm(first[0]))
    if not 0 < norm < np.inf:
        return None
    again = _least_distance(G, h, 1.0 / norm)
    return None if again is None else again[1]


def _least_distance(
    G: np.ndarray, h: np.ndarray, t: float
) -> tuple[np.ndarray, np.ndarray, float] | None:
    """``(beta, mu, 1 - t h^T u)`` of ``min ||beta||`` s.t. ``G beta >= h`` from the
    least-distance program at right-hand side ``t h`` (module doc); None when
    ``1 - t h^T u <= 0`` (infeasible, or cancelled)."""
    n, d = G.shape
    E = np.vstack([G.T, t * h[None, :]])
    f = np.zeros(d + 1)
    f[-1] = 1.0
    if not np.all(np.isfinite(E)):
        return None
    u, _ = nnls(E, f, maxiter=50 * max(n, d + 1))
    denom = 1.0 - t * float(h @ u)
    if not denom > 0:
        return None
    return G.T @ u / (t * denom), u / (t * denom), denom


def _active_set_l2(program: Scaled, x: np.ndarray) -> Candidate:
    """Primal active-set method (Nocedal & Wright, *Numerical Optimization*, Alg. 16.3) for
    ``min ||w * v||^2 / 2`` s.t. ``A v >= h`` from the feasible point ``x``: each step solves
    the equality problem on the working set exactly (:func:`_l2_equality`), moves towards it up
    to the first blocking constraint (added), and at a minimiser of the working set drops the
    most negative multiplier; at most ``10 (n + d)`` steps. Returns ``(v, mu, kkt)``."""
    A, h = program.A, program.h
    work = _independent_rows(A, np.flatnonzero((A @ x) / h - 1.0 <= 1e-12))
    dual = np.zeros(A.shape[0])
    for _ in range(10 * sum(A.shape)):
        y, dual = _l2_equality(program, work)
        step = y - x
        if np.max(np.abs(step)) <= 1e-14 * np.max(np.abs(x)):
            terms = dual[work] * h[work]
            if work.size == 0 or np.min(terms) >= -1e-12 * np.sum(np.abs(terms)):
                break
            work = np.delete(work, int(np.argmin(terms)))
            continue
        slack = (A @ x) / h - 1.0
        rate = (A @ step) / h
        blocking = np.flatnonzero(rate < 0)
        blocking = blocking[~np.isin(blocking, work)]
        ratios = np.maximum(slack[blocking], 0.0) / -rate[blocking]
        if blocking.size and np.min(ratios) < 1.0:
            x = x + float(np.min(ratios)) * step
            work = np.append(work, blocking[int(np.argmin(ratios))])
        else:
            x = y
    return x, dual, l2_residuals(program, x, dual)


def _independent_rows(A: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """A maximal linearly independent subset of ``rows`` of ``A`` (QR with column pivoting)."""
    if rows.size == 0:
        return rows
    _, R, pivots = qr(A[rows].T, mode="economic", pivoting=True)
    diagonal = np.abs(np.diag(R))
    rank = int(np.sum(diagonal > 1e-12 * diagonal[0]))
    return np.sort(rows[pivots[:rank]])


def _l2_equality(program: Scaled, S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``min ||w * v||^2 / 2`` s.t. ``A_S v = h_S`` and its multipliers ``mu`` (zero off
    ``S``): the KKT system ``[[W^2, A_S^T], [A_S, 0]] [v; -mu] = [0; h_S]`` in the equilibrated
    variables, whose entries are all of scale <= 1, by LU with iterative refinement (whose
    componentwise accuracy the tiny weights of large columns need); a least-squares solution
    when the rows of ``A_S`` are dependent."""
    A, h, w = program.A, program.h, program.w
    d, k = A.shape[1], S.size
    if k == 0:
        return np.zeros(d), np.zeros(A.shape[0])
    M = np.zeros((d + k, d + k))
    M[:d, :d] = np.diag(w * w)
    M[:d, d:] = A[S].T
    M[d:, :d] = A[S]
    rhs = np.concatenate([np.zeros(d), h[S]])
    solution = refined_solve(M, rhs)
    mu = np.zeros(A.shape[0])
    mu[S] = -solution[d:]
    return solution[:d], mu


def _log_abs(Z: np.ndarray) -> np.ndarray:
    """``log|Z|`` (``-inf`` at zeros, without a warning)."""
    with np.errstate(divide="ignore"):
        return np.log(np.abs(Z))
