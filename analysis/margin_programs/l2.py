"""``min ||beta||_2`` s.t. ``Z beta >= 1``: an active-set guess from the least-distance
program, exact equilibrated KKT solves, and a primal active-set method where the guess is not
certified (:mod:`analysis.margin_programs`)."""

from __future__ import annotations

import numpy as np
from scipy.linalg import qr
from scipy.optimize import nnls

from flows.fused import log_magnitudes

from .l1 import solve_scaled_l1
from .scaling import (
    CERTIFIED,
    CERTIFIED_TOLERANCE,
    Candidate,
    Scaled,
    Solution,
    constraint_residuals,
    equilibrated,
    in_data_units,
    refined_solve,
    worst,
)

#: log2 of the spread of the column weights beyond which the active-set candidate is always
#: computed (2^20 ~ 1e6).
_SPREAD_BITS = 20
#: ``1 - t h^T u`` below this after the first least-distance solve: solve again at a better t.
_CANCELLATION = 0.25


def solve_l2(Z: np.ndarray) -> Solution:
    """``min ||beta||_2`` s.t. ``Z beta >= 1`` (module doc): candidates are the exact KKT
    solution on the active set guessed by NNLS on the least-distance program, that program's own
    solution, and, where neither is certified, a primal active-set method from the l1 solution;
    the certified one with the smallest residual, else the feasible one of smallest norm
    (:func:`_choose`). ``ValueError`` if the program is infeasible or its solution is outside
    float64 (naming X)."""
    program, columns = equilibrated(Z, p=2)
    candidates: list[Candidate] = []
    guess = _least_distance_guess(Z[:, columns])
    if guess is not None:
        for v, dual in (
            _l2_equality(program, np.flatnonzero(guess[1] > 0)),
            _in_scaled(program, *guess),
        ):
            candidates.append(_candidate(program, v, dual))
    spread = int(np.max(program.w_exp) - np.min(program.w_exp))
    if spread > _SPREAD_BITS or not any(worst(c[2]) <= CERTIFIED for c in candidates):
        # far apart column scales: the residuals of the tiny-weight coordinates are weak
        # evidence (their stationarity is rounding against the others' terms), so the
        # active-set method's exact solves are always added
        start = solve_scaled_l1(program, nonnegative=False)[0]  # same variables, feasible
        candidates.append(_active_set_l2(program, start))
    v, mu, kkt = _choose(program, candidates)
    return in_data_units(program, columns, Z.shape[1], v, mu, kkt, p=2)


def _candidate(program: Scaled, v: np.ndarray, mu: np.ndarray) -> Candidate:
    """``(v, mu, kkt)`` with the residuals of :func:`l2_residuals` (NaN ones count as inf)."""
    with np.errstate(all="ignore"):
        kkt = l2_residuals(program, v, mu)
    return v, mu, {k: (x if np.isfinite(x) else np.inf) for k, x in kkt.items()}


def _choose(program: Scaled, candidates: list[Candidate]) -> Candidate:
    """The candidate with the smallest largest KKT residual when one is certified (at most
    :data:`~analysis.margin_programs.scaling.CERTIFIED_TOLERANCE`); otherwise the
    feasible one (margins >= 1 - 1e-9) of smallest objective ``||w * v||`` (compared in
    logarithms: where the weights' squares underflow the residuals cannot certify a solution, but
    the objective still orders them); otherwise the smallest residual."""
    certified = [c for c in candidates if worst(c[2]) <= CERTIFIED_TOLERANCE]
    if certified:
        return min(certified, key=lambda c: worst(c[2]))
    feasible = [c for c in candidates if c[2]["primal_feasibility"] <= 1e-9]
    if feasible:
        return min(feasible, key=lambda c: _log_objective(program, c[0]))
    return min(candidates, key=lambda c: worst(c[2]))


def _log_objective(program: Scaled, v: np.ndarray) -> float:
    """``log ||w * v||_2`` without under- or overflow."""
    with np.errstate(divide="ignore"):
        terms = np.log(program.w) + log_magnitudes(v)
    top = float(np.max(terms))
    if not np.isfinite(top):
        return top
    return top + 0.5 * float(np.log(np.sum(np.exp(2.0 * (terms - top)))))


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


def _least_distance_guess(Z: np.ndarray) -> tuple[np.ndarray, np.ndarray, float] | None:
    """``(x, u, log_scale)`` of the least-distance program on the rows of ``Z`` divided by their
    largest entry ``m_i`` (``G x >= h``, ``h_i = min(m) / m_i``): ``beta = x exp(-log_scale)``
    and ``lambda_i = u_i exp(-log m_i - log_scale)``, ``log_scale = log min(m)``; at ``t = 1``
    and again at ``t = 1 / ||x||`` when ``1 - t h^T u`` cancels (module doc); None if both
    cancel. Its support guesses the active set; the solution itself is a candidate."""
    logs = log_magnitudes(Z)
    log_m = np.max(logs, axis=1)
    G = np.sign(Z) * np.exp(logs - log_m[:, None])
    h = np.exp(np.min(log_m) - log_m)
    first = _least_distance(G, h, 1.0)
    if first is None or first[2] >= _CANCELLATION:
        found = first
    else:
        norm = float(np.linalg.norm(first[0]))
        found = _least_distance(G, h, 1.0 / norm) if 0 < norm < np.inf else None
    if found is None or not np.any(found[1] > 0):
        return None
    x, u, _ = found
    return x, u * np.exp(np.min(log_m) - log_m), float(np.min(log_m))


def _in_scaled(
    program: Scaled, x: np.ndarray, lam_scaled: np.ndarray, log_scale: float
) -> tuple[np.ndarray, np.ndarray]:
    """The least-distance solution (:func:`_least_distance_guess`) in the program's variables:
    ``v = beta 2^-beta_exp``, ``mu_i = lambda_i / (h_i 2^dual_exp)``, in logarithms."""
    with np.errstate(divide="ignore", over="ignore", under="ignore"):
        log_v = log_magnitudes(x) - log_scale - program.beta_exp * np.log(2.0)
        v = np.sign(x) * np.exp(log_v)
        log_mu = (
            log_magnitudes(lam_scaled)
            - 2.0 * log_scale
            - np.log(program.h)
            - program.dual_exp * np.log(2.0)
        )
        mu = np.exp(log_mu)
    return v, mu


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


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
