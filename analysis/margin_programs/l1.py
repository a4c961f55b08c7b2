"""``min ||beta||_1`` s.t. ``Z beta >= 1``: the equilibrated LP, lexicographic across cost
scales, its vertex polished (:mod:`analysis.margin_programs`)."""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog, nnls

from .scaling import (
    CERTIFIED_TOLERANCE,
    Candidate,
    Scaled,
    Solution,
    constraint_residuals,
    equilibrated,
    in_data_units,
    square_or_least_squares,
    worst,
)

_HIGHS_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}
#: log2 of the largest cost ratio (largest / smallest column weight) one stage of the program
#: spans: well above HiGHS's dual tolerance 1e-10 ~ 2^-33 (at 2^-30 the cheap costs are
#: resolved only to a few per cent).
_STAGE_BITS = 20


def solve_l1(Z: np.ndarray, nonnegative: bool = False) -> Solution:
    """``min ||beta||_1`` s.t. ``Z beta >= 1`` (and ``beta >= 0`` if ``nonnegative``): the
    equilibrated LP, lexicographic across cost scales (module doc), its vertex polished when
    that lowers the KKT residuals.

    ``ValueError`` if the LP is infeasible or its solution is outside float64 (naming X),
    ``RuntimeError`` if HiGHS fails.
    """
    program, columns = equilibrated(Z, p=1)
    best = solve_scaled_l1(program, nonnegative)
    v, mu, kkt = best
    return in_data_units(program, columns, Z.shape[1], v, mu, kkt, p=1)


def solve_scaled_l1(program: Scaled, nonnegative: bool) -> Candidate:
    """``(v, mu, kkt)`` of the scaled l1 program ``min w^T |v|`` s.t. ``A v >= h``: in stages
    of comparable costs (:func:`_cost_groups`), and, where that is not certified, also in one
    stage (the weights too small for the solver then count as free); the candidate with the
    smaller KKT residuals.

    Stages are exact where the cost ratio between them exceeds what an optimum can trade (the
    cheaper columns' weights below rounding of the dearer ones'), and only approximate where
    a ratio of ``2^_STAGE_BITS`` or so separates columns that the optimum uses together: the
    KKT residuals tell the two apart.
    """
    groups = _cost_groups(program.w_exp)
    best = _staged_l1(program, groups, nonnegative)
    if len(groups) > 1 and worst(best[2]) > CERTIFIED_TOLERANCE:
        one = _staged_l1(program, [np.ones(program.w_exp.size, dtype=bool)], nonnegative)
        if worst(one[2]) < worst(best[2]):
            best = one
    return best


def _staged_l1(program: Scaled, groups: list[np.ndarray], nonnegative: bool) -> Candidate:
    """The lexicographic l1 program over ``groups`` (the most expensive first), its vertex
    polished when that lowers the KKT residuals."""
    fixed: list[tuple[np.ndarray, float]] = []
    for group in groups:
        v, mu, optimum = _l1_stage(program, group, fixed, nonnegative)
        fixed.append((group, optimum))
    if len(groups) > 1:  # the last stage's multipliers are not those of the whole program
        mu = _l1_dual(program, v)
    best = (v, mu, l1_residuals(program, v, mu))
    polished = _l1_vertex(program, v)
    if polished is not None and (not nonnegative or np.all(polished[0] >= 0)):
        kkt = l1_residuals(program, *polished)
        if worst(kkt) < worst(best[2]):
            best = (*polished, kkt)
    return best


def _cost_groups(w_exp: np.ndarray) -> list[np.ndarray]:
    """Boolean masks of the columns by cost ``2^w_exp``, the most expensive first, each spanning
    a cost ratio of at most ``2^_STAGE_BITS``: a set of columns that spans more is split at the
    widest gap between consecutive costs, and each part likewise (one group for data of
    comparable column scales; columns of close costs stay together)."""
    order = np.argsort(-w_exp, kind="stable")
    groups: list[np.ndarray] = []
    pending = [order]
    while pending:
        part = pending.pop()
        exps = w_exp[part]
        if exps[0] - exps[-1] <= _STAGE_BITS:
            groups.append(np.isin(np.arange(w_exp.size), part))
            continue
        cut = int(np.argmax(exps[:-1] - exps[1:])) + 1
        pending += [part[cut:], part[:cut]]  # the dearer part is split (and kept) first
    return groups


def _relative_weights(w_exp: np.ndarray, group: np.ndarray) -> np.ndarray:
    """The weights ``2^w_exp`` of the columns of ``group`` divided by their largest, 0 off it
    (computed on the group only: the others may be beyond float64 relative to it)."""
    top = int(np.max(w_exp[group]))
    return np.where(group, np.ldexp(1.0, np.where(group, w_exp - top, 0)), 0.0)


def _l1_stage(
    program: Scaled, group: np.ndarray, fixed: list[tuple[np.ndarray, float]], nonnegative: bool
) -> tuple[np.ndarray, np.ndarray, float]:
    """One stage of the lexicographic l1 program: ``min sum_{j in group} w_j |v_j|`` s.t.
    ``A v >= h`` and, for every earlier (more expensive) group, its cost at most its optimum
    (its columns fixed at 0 where that optimum is 0). Cheaper columns are free. Returns ``(v, mu, optimum)``, ``mu`` the multipliers of ``A v >= h``."""
    A, h = program.A, program.h
    n, d = A.shape
    blocks = 1 if nonnegative else 2
    scale = np.ldexp(1.0, int(np.max(program.w_exp[group])))
    cost = _relative_weights(program.w_exp, group)
    rows, bounds_ub = [-np.hstack([A, -A][:blocks])], [-h]
    upper = np.full(d, np.inf)
    for mask, optimum in fixed:
        if optimum == 0:
            upper[mask] = 0.0
        else:
            weights = _relative_weights(program.w_exp, mask)
            rows.append(np.tile(weights, blocks)[None, :])
            bounds_ub.append(np.array([optimum]))
    res = linprog(
        np.tile(cost, blocks),
        A_ub=np.vstack(rows),
        b_ub=np.concatenate(bounds_ub),
        bounds=[(0.0, float(u)) for u in np.tile(upper, blocks)],
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
    v = res.x[:d] - (res.x[d:] if not nonnegative else 0.0)
    mu = np.maximum(-np.asarray(res.ineqlin.marginals[:n], dtype=float), 0.0) * scale
    optimum = float(np.sum(np.abs(v) * cost))
    return v, mu, optimum if optimum > 1e-12 else 0.0


def _l1_active(program: Scaled, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(S, J)``: the constraints active at ``v`` (relative slack at most 1e-9) and the
    support of ``v`` (``|v_j| > 1e-9 max|v|``)."""
    slack = (program.A @ v) / program.h - 1.0
    return np.flatnonzero(slack <= 1e-9), np.flatnonzero(np.abs(v) > 1e-9 * np.max(np.abs(v)))


def _l1_dual(program: Scaled, v: np.ndarray) -> np.ndarray:
    """Multipliers ``mu >= 0`` at the primal solution ``v`` of the l1 program: supported on the
    active constraints ``S``, with ``A_SJ^T mu_S = w_J sign(v_J)`` on the support ``J`` of ``v``
    (rows scaled to largest entry 1; an exact solve when the vertex is non-degenerate, NNLS
    when that has negative entries)."""
    S, J = _l1_active(program, v)
    mu = np.zeros(program.A.shape[0])
    if S.size == 0 or J.size == 0:
        return mu
    M = program.A[np.ix_(S, J)].T
    rows = np.max(np.abs(M), axis=1, keepdims=True)
    M, target = M / rows, program.w[J] * np.sign(v[J]) / rows[:, 0]
    mu_S = square_or_least_squares(M, target)
    if np.any(mu_S < 0):  # degenerate vertex: a nonnegative solution, exact on its support
        mu_S, _ = nnls(M, target)
        on = mu_S > 0
        exact = np.linalg.lstsq(M[:, on], target, rcond=None)[0]
        if np.all(exact >= 0):
            mu_S[on] = exact
    mu[S] = mu_S
    return mu


def _l1_vertex(program: Scaled, v: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The exact vertex near ``v``: ``A_SJ v_J = h_S`` on the active constraints ``S`` and the
    support ``J`` of ``v`` (:func:`_l1_active`), with its multipliers (:func:`_l1_dual`); None
    when either set is empty."""
    S, J = _l1_active(program, v)
    if J.size == 0 or S.size == 0:
        return None
    vertex = np.zeros_like(v)
    vertex[J] = square_or_least_squares(program.A[np.ix_(S, J)], program.h[S])
    return vertex, _l1_dual(program, vertex)


def l1_residuals(program: Scaled, v: np.ndarray, mu: np.ndarray) -> dict:
    """Relative KKT residuals of the scaled l1 program ``min w^T |v|`` s.t. ``A v >= h``:
    ``A^T mu`` must be ``w_j sign(v_j)`` on the support of ``v`` and at most ``w_j`` in modulus
    off it, each measured against ``w_j + (|A|^T |mu|)_j`` (so that rounding in a sum of large
    terms is not taken for a violation); duality gap ``w^T |v| - h^T mu`` relative to
    ``w^T |v|``."""
    out = constraint_residuals(program, v, mu)
    w = program.w
    g = program.A.T @ mu
    size = w + np.abs(program.A).T @ np.abs(mu)
    weighted = w * np.abs(v)
    on = np.abs(v) > 1e-9 * np.max(np.abs(v))
    with np.errstate(invalid="ignore", divide="ignore"):  # size 0: both sides exactly 0
        stat_on = np.abs(g - w * np.sign(v)) / size
        stat_off = (np.abs(g) - w) / size
    stat = np.where(size > 0, np.where(on, stat_on, stat_off), 0.0)
    out["stationarity"] = float(max(np.max(stat), 0.0))
    objective = float(np.sum(weighted))
    gap = abs(objective - float(program.h @ mu))
    out["duality_gap"] = gap / objective if objective > 0 else np.inf
    return out


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
