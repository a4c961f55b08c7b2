"""``min sum_j |beta_j|^(2/L)`` s.t. ``Z beta >= 1``: KKT points of the depth-L max-margin
program, certified, with a global certificate by vertex enumeration (docs/theory.md §10).

The problem
-----------
Gradient descent on an L-layer diagonal network ``beta = w^(1) * ... * w^(L)`` with the
exponential or logistic loss on separable data converges in direction to a KKT point of the
parameter-space program (Lyu & Li 2020, *Gradient descent maximizes the margin of homogeneous
neural networks*; Gunasekar et al. 2018, *Implicit bias of gradient descent on linear
convolutional networks*)::

    (P_theta)   min ||theta||_2^2   s.t.   y_i <beta(theta), x_i> >= 1  for all i.

With ``Z`` the rows ``z_i = y_i x_i``, multipliers ``lambda >= 0`` and ``g = Z^T lambda``, its
stationarity is ``2 w_j^(l) = g_j prod_{k != l} w_j^(k)`` for every layer l and coordinate j.
Multiplied by ``w_j^(l)``: ``2 (w_j^(l))^2 = g_j beta_j`` for every l, so every KKT point is
balanced, ``|w_j^(l)| = |beta_j|^(1/L)``, where ``||theta||^2 = L sum_j |beta_j|^q``, ``q = 2/L``:
(P_theta) is the beta-space program ``min f(beta) = sum_j |beta_j|^q`` s.t. ``Z beta >= 1``. At
L = 2 it is the l1 max-margin LP; at L >= 3 a concave objective on each orthant (non-convex).

KKT conditions used (:attr:`KKTPoint.kkt`; ``beta`` scaled to ``min_i z_i.beta = 1``,
``lambda`` the multipliers of (P_theta), relative so that they do not depend on the scale of
the data)
-------------------------------------------------------------------------------------------
* ``primal_feasibility``: ``max(0, 1 - min_i z_i.beta)``.
* ``dual_feasibility``: ``max(0, -min_i lambda_i) / sum_i |lambda_i|``.
* ``complementary_slackness``: ``max_i |lambda_i (z_i.beta - 1)| / sum_i |lambda_i|``.
* ``stationarity``: ``max_j |g_j beta_j - 2 |beta_j|^q| / (2 f(beta))``, the parameter-space
  stationarity times ``w_j^(l)`` (the same for every layer at a balanced theta), measured
  against ``||theta||^2 / L = f``. On the support it is the beta-space condition
  ``q sign(beta_j) |beta_j|^(q-1) = (Z^T nu)_j`` with ``nu = lambda / L``; at ``beta_j = 0``
  both sides vanish.
* ``zero_coordinates``: at ``beta_j = 0`` every ``w_j^(l) = 0`` and the first-order condition
  holds trivially, at every depth. The second-order necessary condition of (P_theta) on the
  block ``(w_j^(1), ..., w_j^(L))`` (moving it changes ``beta_j`` only at order L, so the
  block lies in the critical cone) involves the Hessian of the Lagrangian there: ``2 I`` for
  L >= 3 (each second derivative of ``prod_l w_j^(l)`` keeps ``L - 2 >= 1`` zero factors): no
  condition, as the infinite slope of ``|t|^q`` at 0 says in beta. At L = 2 it is
  ``[[2, -g_j], [-g_j, 2]]``, positive semidefinite iff ``|g_j| <= 2``: the l1 dual
  feasibility, reported as ``max_j max(0, |g_j| - 2) / 2`` (0 for L >= 3). With it the KKT
  points at L = 2 are exactly the l1 max-margin solutions (without it every point that is
  l1-optimal on its own support would count).

The largest of these is :attr:`KKTPoint.kkt_residual`; at most :data:`KKT_TOLERANCE` certifies
a KKT point.

How the points are found
------------------------
Everything is solved in the exactly equilibrated variables ``v`` of
:func:`~analysis.margin_programs.scaling.equilibrated` (``A v >= h``, ``|A| < 1``; the objective
``sum_j omega_j |v_j|^q`` with ``omega = w^q`` in (0, 1]) and mapped back by powers of 2.

* Local solves: majorisation-minimisation (iteratively reweighted l1, Candès, Wakin & Boyd
  2008). ``|t|^q`` is concave in ``|t|``, so its tangent majorises it and each step is the LP
  ``min sum_j c_j |v_j|`` s.t. ``A v >= h`` with ``c_j = q omega_j (|v_j| + eps)^(q-1)``
  (HiGHS dual simplex: a vertex), which does not increase ``sum_j omega_j (|v_j| + eps)^q``.
  ``eps`` (relative to ``max |v|``) runs down :data:`EPSILONS` to 0, where zero coordinates are
  held at 0 (infinite weight); each stage iterates until the vertex repeats (at most
  ``max_iterations`` LPs). A fixed point at ``eps = 0`` is a vertex that is LP-optimal for the
  weights ``grad f`` on its support: a KKT point. Starts: the l1 max-margin solution,
  ``starts`` random ones (vertices favouring one coordinate, random vertices, random points of
  their convex hull), and the caller's ``points``.
* Vertex descent from each local solution: the adjacent vertices (along each edge that frees
  one of the ``d`` active constraints, rows or ``v_j = 0``, up to the next bound) are compared
  and the best is taken while it improves ``f`` (at most ``max_iterations`` moves). Where no
  neighbour is better a non-degenerate vertex is a KKT point again (``f`` is concave along
  each edge, so its derivative along every edge is non-negative), often a better one than the
  solve's: on 15 small data sets (n = 3 to 6, d = 3 to 5) at L = 3, 4, 6 with two seeds, the
  best point of the local solves (8 starts) was the global one in 90 of 90 cases with this
  step, in 75 without it.
* Polish: on the support ``S`` (coordinates contributing more than 1e-10 to some margin) and
  the active set ``T`` (margins within 1e-9 of 1) of a candidate, with its signs fixed, the
  program is smooth. At a vertex (``A_TS`` of rank ``|S|``) the point is the exact solution of
  ``|S|`` independent active constraints (LU with refinement); elsewhere Newton's method on the
  KKT system ``[q omega_S sign |v_S|^(q-1) - A_TS^T nu; A_TS v_S - h_T] = 0``
  (:data:`NEWTON_STEPS` at most). The multipliers then solve the stationarity rows on ``S``
  (exactly where the vertex is non-degenerate, NNLS and an exact re-solve on its support
  otherwise).
* Global certificate: ``f`` is concave on each orthant, and the feasible set meets each orthant
  in a polyhedron without lines on which ``f`` is bounded below, so its minimum there is at a
  vertex: a point where ``|S|`` linearly independent constraints ``z_i.beta = 1`` (``i`` in
  ``T``) hold with ``beta = 0`` off ``S``. All ``(S, T)`` with ``|S| = |T|`` are enumerated
  (``C(n + d, d) - 1`` square systems, in batches of many column sets at once) when that is at
  most ``max_vertex_systems``; the best feasible vertex is the global minimum (status
  ``'global'``), and every vertex whose multipliers are non-negative is a KKT point that is
  also returned, up to ``max_kkt_vertices`` of them (each is polished and compared with the
  others: a few data sets with small ``n`` and large ``d`` have tens of thousands). Past that
  cap the enumeration goes on for the minimum only, and :attr:`KKTPoints.truncated` says that
  KKT vertices were left out. When the count of systems exceeds ``max_vertex_systems``, the
  enumeration is skipped and the certificate says so.

Statuses (:attr:`KKTPoint.status`): ``'global'`` (certified KKT point attaining the enumerated
minimum; at L = 2 every certified KKT point, the program being convex), ``'local minimum'`` (a
certified vertex whose positive multipliers' constraints determine it: a strict local minimum,
since ``f`` increases to first order along every feasible direction on its support and like
``|t|^q`` off it), ``'kkt'`` (certified, not known to be a local minimum: e.g. the stationary
point of ``f`` on a face, a maximum along it), ``'uncertified'`` (a local solve whose residual
stays above the tolerance; :attr:`KKTPoint.certificate` says why).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations, islice
from math import comb

import numpy as np
from scipy.linalg import qr
from scipy.optimize import linprog, nnls

from flows.checks import integer, real_array
from flows.data import Dataset, classification_only

from .l1 import solve_scaled_l1
from .scaling import CERTIFIED_TOLERANCE, Scaled, equilibrated, refined_solve

__all__ = [
    "EPSILONS",
    "GLOBAL",
    "KKT",
    "KKT_TOLERANCE",
    "LOCAL_MINIMUM",
    "MAX_KKT_VERTICES",
    "MAX_VERTEX_SYSTEMS",
    "UNCERTIFIED",
    "KKTCheck",
    "KKTPoint",
    "KKTPoints",
    "kkt_check",
    "kkt_points",
    "kkt_residuals",
    "quasi_norm_objective",
]

#: Largest KKT residual of a certified KKT point.
KKT_TOLERANCE = CERTIFIED_TOLERANCE
#: Default cap on the square systems of the vertex enumeration (``C(n + d, d) - 1``).
MAX_VERTEX_SYSTEMS = 100_000
#: Default cap on the KKT vertices of the enumeration that are polished and returned (about a
#: millisecond each; n = 3, d = 40 has 4591 of them, n = 2, d = 400 has 52091).
MAX_KKT_VERTICES = 500
#: The smoothing ``eps / max|v|`` of the reweighted l1 stages, ending at 0.
EPSILONS = (1e-3, 0.0)
#: Cap on Newton steps of the polish off a vertex (and on step halvings per step).
NEWTON_STEPS = 50
#: Statuses of :class:`KKTPoint`.
GLOBAL, LOCAL_MINIMUM, KKT, UNCERTIFIED = "global", "local minimum", "kkt", "uncertified"

#: Contribution ``max_i |z_ij beta_j|`` (margins are 1) below which ``beta_j`` is 0.
_ZERO = 1e-10
#: Margin slack below which a constraint is active.
_ACTIVE = 1e-9
#: Relative size below which a multiplier is 0 (and a singular value, for the rank).
_RELATIVE = 1e-9
#: Largest number of LPs of one reweighted-l1 stage by default.
_MM_ITERATIONS = 30
#: Cap on the random starts and the caller's points.
_MAX_STARTS = 10_000
#: Largest number of floats of one batch of the enumeration (its margins, ``n`` per system).
_BATCH_FLOATS = 2**21
_HIGHS_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}


@dataclass(frozen=True, eq=False)
class KKTPoint:
    """A KKT point of the depth-L max-margin program (module doc).

    Attributes
    ----------
    beta : (d,) the point, scaled so that ``min_i y_i <beta, x_i> = 1``.
    direction : (d,) ``beta / ||beta||_2``.
    depth : L.
    objective : ``f(beta) = sum_j |beta_j|^(2/L)`` (``||theta||_2^2 / L`` at the balanced
        parameters).
    normalized_margin : ``min_i y_i <beta, x_i> / ||beta||_{2/L}`` with
        ``||beta||_{2/L} = f^(L/2)`` (Lyu & Li's ``min_i y_i f(theta; x_i) / ||theta||_2^L`` is
        ``L^(-L/2)`` times it).
    dual : (n,) the multipliers ``lambda >= 0`` of (P_theta) (``min ||theta||_2^2``):
        ``2 w_j^(l) = (Z^T lambda)_j prod_{k != l} w_j^(k)``; ``sum_i lambda_i = 2 f``.
    support : coordinates j with ``beta_j != 0``.
    support_vectors : examples i with ``lambda_i > 0``.
    kkt : the relative residuals of the module doc.
    kkt_residual : their largest.
    status : ``'global'``, ``'local minimum'``, ``'kkt'`` or ``'uncertified'`` (module doc).
    certificate : what backs the status, in words.
    """

    beta: np.ndarray
    direction: np.ndarray
    depth: int
    objective: float
    normalized_margin: float
    dual: np.ndarray
    support: np.ndarray
    support_vectors: np.ndarray
    kkt: dict
    kkt_residual: float
    status: str
    certificate: str

    @property
    def certified(self) -> bool:
        """Whether the point is a certified KKT point (``kkt_residual <= KKT_TOLERANCE``)."""
        return self.kkt_residual <= KKT_TOLERANCE


class KKTPoints(tuple):
    """The points of :func:`kkt_points`: a tuple of :class:`KKTPoint` (the best first), with
    what the search covered.

    Attributes
    ----------
    enumerated : whether the vertex enumeration ran (``C(n + d, d) - 1`` systems at most
        ``max_vertex_systems``): then the first point is the global minimum.
    truncated : whether the enumeration found more than ``max_kkt_vertices`` KKT vertices:
        only the first ``max_kkt_vertices`` of them (in the order of the enumeration) are
        among the points; the global minimum is there all the same.
    message : the two in words.
    """

    enumerated: bool
    truncated: bool
    message: str

    def __new__(cls, points, enumerated: bool, truncated: bool, message: str) -> KKTPoints:
        out = super().__new__(cls, points)
        out.enumerated, out.truncated, out.message = enumerated, truncated, message
        return out


@dataclass(frozen=True, eq=False)
class KKTCheck:
    """The KKT residuals of a direction (:func:`kkt_check`).

    Attributes
    ----------
    beta : (d,) the direction scaled to ``min_i y_i <beta, x_i> = 1``.
    dual : (n,) the multipliers that fit it best (non-negative least squares on the
        stationarity and complementary-slackness rows, each relative as in the module doc).
    kkt : the residuals at ``(beta, dual)``.
    kkt_residual : their largest.
    """

    beta: np.ndarray
    dual: np.ndarray
    kkt: dict
    kkt_residual: float


# --------------------------------------------------------------------------- public entries


def kkt_points(
    data: Dataset,
    depth,
    starts=8,
    seed=0,
    points=None,
    max_vertex_systems=MAX_VERTEX_SYSTEMS,
    max_iterations=_MM_ITERATIONS,
    max_kkt_vertices=MAX_KKT_VERTICES,
) -> KKTPoints:
    """KKT points of ``min sum_j |beta_j|^(2/L)`` s.t. ``y_i <beta, x_i> >= 1`` (module doc),
    distinct, sorted by objective (the best first).

    Parameters
    ----------
    data : separable classification data (a :class:`flows.Dataset`).
    depth : L, an integer >= 2.
    starts : number of random starts of the local solves (besides the l1 solution and
        ``points``; in turn vertices favouring one coordinate, random vertices and random points
        of their convex hull), at most 10,000.
    seed : seed of the random starts (an integer >= 0).
    points : optional (k, d) or (d,) starting points (e.g. a flow's final direction): each
        must separate the data; each is polished as it is and used as a start.
    max_vertex_systems : cap on the square systems of the vertex enumeration
        (``C(n + d, d) - 1``); above it the global certificate is skipped (0: always skipped).
    max_iterations : cap on the LPs of each reweighted-l1 stage and on the moves of each
        vertex descent (>= 1).
    max_kkt_vertices : cap on the KKT vertices of the enumeration that are polished and
        returned (>= 0); past it the enumeration looks for the minimum only
        (:attr:`KKTPoints.truncated`). With the defaults a call takes a few seconds at most
        on data of a few examples in d up to a few hundred.

    Returns
    -------
    :class:`KKTPoints` (a tuple of :class:`KKTPoint`): the certified ones and any local solve
    that stayed uncertified (status ``'uncertified'``: e.g. a point of ``points`` far from
    every KKT point of its support). With the enumeration, the first point has status
    ``'global'`` (ties: several).

    Raises
    ------
    ValueError
        Naming data (not a Dataset, regression data, or a scale at which ``beta`` leaves
        float64), depth, starts, seed, points, max_vertex_systems, max_iterations or
        max_kkt_vertices.
    """
    data, depth = _check_problem(data, depth)
    starts = integer(starts, "starts", 0, _MAX_STARTS)
    seed = integer(seed, "seed", 0)
    cap = integer(max_vertex_systems, "max_vertex_systems", 0)
    iterations = integer(max_iterations, "max_iterations", 1, 10_000)
    vertices = integer(max_kkt_vertices, "max_kkt_vertices", 0)
    problem = _Problem.of(data, depth)
    own = _check_points(points, problem)

    l1 = solve_scaled_l1(problem.program, False)[0]
    found = [_reweighted(problem, l1, iterations)]
    for start in _random_starts(problem, l1, starts, seed):
        found.append(_reweighted(problem, start, iterations))
    for v in own:
        found.append(_reweighted(problem, v, iterations))
    candidates = own + found + [_vertex_descent(problem, v, iterations) for v in found]
    polished = [p for p in (_polish(problem, v) for v in candidates) if p is not None]

    systems = comb(problem.A.shape[0] + problem.A.shape[1], problem.A.shape[1]) - 1
    kept = list(polished)
    best, truncated = None, False
    if systems <= cap:
        minimum, kkt_vertices, truncated = _enumerate(problem, vertices)
        best = _polish(problem, minimum)
        kept += [p for p in (_polish(problem, v) for v in kkt_vertices) if p is not None]
        if best is not None:
            kept.append(best)
    records = _records(problem, _distinct(problem, kept), best, systems, cap)
    if systems > cap:
        message = (
            f"vertex enumeration skipped ({systems} systems > max_vertex_systems = {cap}): the "
            "points of the local solves, global optimality not certified"
        )
    elif truncated:
        message = (
            f"vertex enumeration of {systems} systems; more than max_kkt_vertices = {vertices} "
            f"KKT vertices: the first {vertices} of them are returned, with the global minimum"
        )
    else:
        message = f"vertex enumeration of {systems} systems: every KKT vertex is returned"
    return KKTPoints(records, systems <= cap, truncated, message)


def kkt_check(data: Dataset, depth, beta) -> KKTCheck:
    """The KKT residuals (module doc) of the direction of ``beta`` for the depth-L program,
    with the multipliers fitted by non-negative least squares: small when ``beta`` points
    close to a KKT point (e.g. a flow's ``beta(t)``). ``ValueError`` naming data, depth or
    beta (wrong length, or a direction that does not separate the data)."""
    data, depth = _check_problem(data, depth)
    b = real_array(beta, "beta", ndim=1)
    if b.shape[0] != data.d:
        raise ValueError(f"beta must have length d = {data.d}, got {b.shape[0]}")
    Z = data.signed_features
    b = _normalized(Z, b / np.max(np.abs(b)) if np.any(b) else b, "beta")
    q = 2.0 / depth
    obj = quasi_norm_objective(b, depth)
    slack = Z @ b - 1.0
    M = np.vstack([(Z * b).T, np.diag(slack)])
    target = np.concatenate([np.abs(b) ** q / obj, np.zeros(Z.shape[0])])
    x, _ = nnls(M, target, maxiter=50 * M.shape[1])
    lam = 2.0 * obj * x
    kkt = kkt_residuals(Z, b, lam, depth)
    return KKTCheck(beta=b, dual=lam, kkt=kkt, kkt_residual=float(max(kkt.values())))


def quasi_norm_objective(beta, depth) -> float:
    """``sum_j |beta_j|^(2/L)`` (``ValueError`` naming beta or depth)."""
    b = real_array(beta, "beta", ndim=1)
    depth = integer(depth, "depth", 2)
    return float(np.sum(np.abs(b) ** (2.0 / depth)))


def kkt_residuals(Z: np.ndarray, beta: np.ndarray, lam: np.ndarray, depth: int) -> dict:
    """The relative KKT residuals of the module doc at ``(beta, lambda)``, ``Z`` the rows
    ``y_i x_i`` and ``beta`` scaled to ``min_i z_i.beta = 1``."""
    q = 2.0 / depth
    slack = Z @ beta - 1.0
    obj = float(np.sum(np.abs(beta) ** q))
    total = max(float(np.sum(np.abs(lam))), np.finfo(float).tiny)
    g = Z.T @ lam
    with np.errstate(over="ignore", invalid="ignore"):
        stationarity = float(np.max(np.abs(g * beta - 2.0 * np.abs(beta) ** q)) / (2.0 * obj))
    zero = float(max(0.0, np.max(np.abs(g)) - 2.0) / 2.0) if depth == 2 else 0.0
    out = {
        "primal_feasibility": float(max(0.0, -np.min(slack))),
        "dual_feasibility": float(max(0.0, -np.min(lam)) / total),
        "complementary_slackness": float(np.max(np.abs(lam * slack)) / total),
        "stationarity": stationarity,
        "zero_coordinates": zero,
    }
    return {k: (x if np.isfinite(x) else np.inf) for k, x in out.items()}


# --------------------------------------------------------------------------- the problem


@dataclass(frozen=True)
class _Problem:
    """The equilibrated program: ``Z`` in data units, ``A v >= h`` on the non-zero
    ``columns`` of ``Z``, ``beta_j = v_j 2^beta_exp[j]``, weights ``omega = w^q``."""

    Z: np.ndarray
    depth: int
    q: float
    program: Scaled
    columns: np.ndarray
    omega: np.ndarray

    @property
    def A(self) -> np.ndarray:
        return self.program.A

    @property
    def h(self) -> np.ndarray:
        return self.program.h

    @classmethod
    def of(cls, data: Dataset, depth: int) -> _Problem:
        Z = np.asarray(data.signed_features, dtype=float)
        program, columns = equilibrated(Z, p=1)
        q = 2.0 / depth
        with np.errstate(under="ignore"):
            omega = np.exp2(q * program.w_exp.astype(float))
        return cls(Z=Z, depth=depth, q=q, program=program, columns=columns, omega=omega)

    def margins(self, v: np.ndarray) -> np.ndarray:
        """``z_i.beta`` of the scaled ``v`` (the ratios ``(A v)_i / h_i``)."""
        return (self.A @ v) / self.h

    def beta(self, v: np.ndarray) -> np.ndarray:
        """``beta`` (d,) of the scaled ``v``, exactly (``ValueError`` naming data outside
        float64)."""
        with np.errstate(over="ignore", under="ignore"):
            beta_c = np.ldexp(v, self.program.beta_exp)
        if not np.all(np.isfinite(beta_c)) or np.any((beta_c == 0) & (v != 0)):
            raise ValueError(
                "data: the depth-L max-margin beta is outside float64 at this scale of X; "
                "rescale X (or its columns far from the others in scale)"
            )
        beta = np.zeros(self.Z.shape[1])
        beta[self.columns] = beta_c
        return beta

    def scaled(self, beta: np.ndarray) -> np.ndarray:
        """The scaled ``v`` of a length-d ``beta`` (its columns of ``Z``)."""
        with np.errstate(over="ignore", under="ignore"):
            return np.ldexp(beta[self.columns], -self.program.beta_exp)


def _check_problem(data, depth) -> tuple[Dataset, int]:
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flows.Dataset, got {type(data).__name__}")
    classification_only(data, "the depth-L max-margin KKT points")
    return data, integer(depth, "depth", 2)


def _check_points(points, problem: _Problem) -> list[np.ndarray]:
    """The caller's starting points as scaled ``v`` (``ValueError`` naming points)."""
    if points is None:
        return []
    arr = real_array(points, "points")
    if arr.ndim == 1:
        arr = arr[None, :]
    d = problem.Z.shape[1]
    if arr.ndim != 2 or arr.shape[1] != d:
        raise ValueError(f"points must be (k, d) or (d,) with d = {d}, got shape {arr.shape}")
    if arr.shape[0] > _MAX_STARTS:
        raise ValueError(f"points must hold at most {_MAX_STARTS} points, got {arr.shape[0]}")
    out = []
    for b in arr:
        if not np.any(b[problem.columns]):
            raise ValueError("points: every point must separate the data (found one that is 0)")
        v = problem.scaled(b / np.max(np.abs(b)))
        top = np.max(np.abs(v))
        v = v / top if top > 0 else v
        m = problem.margins(v)
        if not np.min(m) > 0:
            raise ValueError(
                "points: every point must separate the data (min_i y_i <beta, x_i> > 0), "
                f"found one with min margin {np.min(m):.3g}"
            )
        out.append(v / np.min(m))
    return out


def _normalized(Z: np.ndarray, beta: np.ndarray, name: str) -> np.ndarray:
    """``beta / min_i z_i.beta`` (``ValueError`` naming ``name`` if that is not > 0)."""
    m = Z @ beta
    if not np.min(m) > 0:
        raise ValueError(
            f"{name} must separate the data (min_i y_i <beta, x_i> > 0), got min margin "
            f"{np.min(m):.3g}"
        )
    return beta / np.min(m)


# --------------------------------------------------------------------------- local solves


def _weighted_lp(
    problem: _Problem, cost: np.ndarray, fixed: np.ndarray | None = None
) -> np.ndarray | None:
    """A vertex solving ``min sum_j cost_j |v_j|`` s.t. ``A v >= h`` (``v_j = 0`` where
    ``fixed``), by HiGHS dual simplex; None if it fails."""
    A, h = problem.A, problem.h
    n, d = A.shape
    c = cost / np.max(cost)
    upper = np.where(fixed, 0.0, np.inf) if fixed is not None else np.full(d, np.inf)
    bounds = [(0.0, float(u)) for u in np.tile(upper, 2)]
    res = linprog(
        np.tile(c, 2),
        A_ub=-np.hstack([A, -A]),
        b_ub=-h,
        bounds=bounds,
        method="highs-ds",
        options=_HIGHS_OPTIONS,
    )
    if res.status != 0:
        return None
    v = res.x[:d] - res.x[d:]
    m = problem.margins(v)
    return v / np.min(m) if np.min(m) > 0 else None


def _random_starts(problem: _Problem, l1: np.ndarray, count: int, seed: int) -> list[np.ndarray]:
    """``count`` random feasible starts, in turn: a vertex favouring one coordinate (the LP with
    weights ``omega`` and that coordinate's weight divided by 1000; the coordinates in a random
    order, then again), a random vertex (weights ``omega`` times log-normal factors of spread
    e^2), and a random point of the convex hull of the vertices drawn so far and the l1
    solution (Dirichlet weights: dense and feasible)."""
    rng = np.random.default_rng(seed)
    d = l1.size
    order = rng.permutation(d)
    vertices = [l1]
    out: list[np.ndarray] = []
    for k in range(count):
        if k % 3 == 2:
            weights = rng.dirichlet(np.ones(len(vertices)))
            out.append(np.sum(weights[:, None] * np.array(vertices), axis=0))
            continue
        if k % 3 == 0:
            cost = problem.omega.copy()
            cost[order[(k // 3) % d]] *= 1e-3
        else:
            cost = problem.omega * np.exp(2.0 * rng.normal(size=d))
        start = _weighted_lp(problem, cost)
        if start is not None:
            vertices.append(start)
            out.append(start)
    return out


def _reweighted(problem: _Problem, v0: np.ndarray, max_iterations: int) -> np.ndarray:
    """The reweighted-l1 (majorisation-minimisation) local solve from ``v0`` (module doc)."""
    q, omega = problem.q, problem.omega
    v = v0
    for eps_relative in EPSILONS:
        if eps_relative == 0:  # a certified KKT vertex is a fixed point: no LP needed
            polished = _polish(problem, v)
            if polished is not None and polished.vertex and polished.residual <= KKT_TOLERANCE:
                return polished.v
        for _ in range(max_iterations):
            top = np.max(np.abs(v))
            if q == 1.0:
                cost, fixed = omega, None
            elif eps_relative > 0:
                cost, fixed = q * omega * (np.abs(v) + eps_relative * top) ** (q - 1.0), None
            else:
                fixed = np.abs(v) <= _ZERO * top
                cost = q * omega * np.where(fixed, 1.0, np.abs(v)) ** (q - 1.0)
                cost = np.where(fixed, np.min(cost), cost)  # held at 0 by its bound
            new = _weighted_lp(problem, cost, fixed)
            if new is None:
                break
            moved = np.max(np.abs(new - v)) > 1e-12 * top
            v = new
            if not moved:
                break
        if q == 1.0:
            break
    return v


def _objective(problem: _Problem, v: np.ndarray) -> float:
    """The scaled objective ``sum_j omega_j |v_j|^q``."""
    return float(np.sum(problem.omega * np.abs(v) ** problem.q))


def _basis(problem: _Problem, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(v, S, T)``: the exact vertex of ``v``'s support ``S`` and ``|S|`` independent active
    rows ``T``; None where ``v`` is not a vertex."""
    v, S, T = _sets(problem, v)
    if S.size == 0 or T.size == 0:
        return None
    rows = T[_independent_rows(problem.A[np.ix_(T, S)])]
    if rows.size != S.size:
        return None
    exact = np.zeros_like(v)
    exact[S] = refined_solve(problem.A[np.ix_(rows, S)], problem.h[rows])
    if not np.min(problem.margins(exact)) >= 1.0 - _ACTIVE:
        return None
    return exact, S, rows


def _neighbours(problem: _Problem, v: np.ndarray, S: np.ndarray, T: np.ndarray) -> list:
    """The vertices adjacent to the vertex ``v`` (support ``S``, rows ``T``) in the polyhedra
    ``{A v >= h, s_j v_j >= 0}`` of the orthants it touches: along each edge that frees one of
    its ``d`` active constraints (a row of ``T``, or ``v_j = 0`` towards either sign), up to the
    first row or coordinate bound it meets (rays and degenerate steps are skipped)."""
    A, h = problem.A, problem.h
    d = v.size
    inverse = np.linalg.inv(A[np.ix_(T, S)])
    directions = []
    for a in range(S.size):  # leave row T[a]: B delta_S = e_a
        delta = np.zeros(d)
        delta[S] = inverse[:, a]
        directions.append(delta)
    for j in np.setdiff1d(np.arange(d), S):  # free v_j = 0, keep the rows of T
        for sign in (1.0, -1.0):
            delta = np.zeros(d)
            delta[j] = sign
            delta[S] = -inverse @ (A[T, j] * sign)
            directions.append(delta)
    out = []
    others = np.setdiff1d(np.arange(A.shape[0]), T)
    slack = A @ v - h
    for delta in directions:
        rate = A[others] @ delta
        falling = rate < -_RELATIVE * np.max(np.abs(A[others]), initial=0.0) * np.max(np.abs(delta))
        steps = [slack[others][falling] / -rate[falling]]
        shrinking = v[S] * delta[S] < 0
        steps.append(-v[S][shrinking] / delta[S][shrinking])
        step = np.concatenate(steps)
        if step.size == 0 or not np.min(step) > 0:
            continue  # a ray (f does not decrease along it) or a degenerate step
        new = v + np.min(step) * delta
        basis = _basis(problem, new)
        if basis is not None:
            out.append(basis)
    return out


def _vertex_descent(problem: _Problem, v: np.ndarray, max_steps: int) -> np.ndarray:
    """Local search over adjacent vertices from the vertex ``v``: move to the best neighbour
    (:func:`_neighbours`) while it lowers the objective, at most ``max_steps`` moves. A vertex
    with no better neighbour is a KKT point (``f`` is concave along each edge, so its
    derivative along every edge is non-negative)."""
    current = _basis(problem, v)
    if current is None:
        return v
    value = _objective(problem, current[0])
    for _ in range(max_steps):
        best, best_value = None, value * (1.0 - 1e-12)
        for basis in _neighbours(problem, *current):
            candidate = _objective(problem, basis[0])
            if candidate < best_value:
                best, best_value = basis, candidate
        if best is None:
            break
        current, value = best, best_value
    return current[0]


# --------------------------------------------------------------------------- polish


@dataclass(frozen=True)
class _Polished:
    """A polished candidate: ``beta`` in data units, multipliers, residuals, whether it is a
    strict local minimum (a vertex fixed by its positive multipliers' constraints)."""

    v: np.ndarray
    beta: np.ndarray
    dual: np.ndarray
    kkt: dict
    strict: bool
    vertex: bool

    @property
    def residual(self) -> float:
        return float(max(self.kkt.values()))


def _sets(problem: _Problem, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(v, S, T)``: ``v`` scaled to min margin 1 with its negligible coordinates set to 0, its
    support and its active constraints."""
    m = problem.margins(v)
    v = v / np.min(m)
    contribution = np.max(np.abs(problem.A * v) / problem.h[:, None], axis=0)
    v = np.where(contribution > _ZERO, v, 0.0)
    m = problem.margins(v)
    if not np.min(m) > 0:
        return v, np.zeros(0, dtype=int), np.zeros(0, dtype=int)
    v = v / np.min(m)
    S = np.flatnonzero(v)
    T = np.flatnonzero(problem.margins(v) - 1.0 <= _ACTIVE)
    return v, S, T


def _independent_rows(M: np.ndarray) -> np.ndarray:
    """Indices of a maximal set of linearly independent rows of ``M`` (QR with pivoting)."""
    if M.size == 0:
        return np.zeros(0, dtype=int)
    _, R, pivots = qr(M.T, mode="economic", pivoting=True)
    diagonal = np.abs(np.diag(R))
    rank = int(np.sum(diagonal > _RELATIVE * diagonal[0])) if diagonal.size else 0
    return np.sort(pivots[:rank])


def _polish(problem: _Problem, v: np.ndarray) -> _Polished | None:
    """The exact KKT point of ``v``'s support, signs and active set (module doc); None when
    ``v`` does not separate the data."""
    if not np.min(problem.margins(v)) > 0:
        return None
    v, S, T = _sets(problem, v)
    if S.size == 0 or T.size == 0:
        return None
    rows = T[_independent_rows(problem.A[np.ix_(T, S)])]
    vertex = rows.size == S.size
    if vertex:
        exact = np.zeros_like(v)
        exact[S] = refined_solve(problem.A[np.ix_(rows, S)], problem.h[rows])
        if np.min(problem.margins(exact)) > 0:
            v, S, T = _sets(problem, exact)
    elif problem.q < 1.0:
        v = _newton(problem, v, S, rows)
        v, S, T = _sets(problem, v)
    beta = _normalized(problem.Z, problem.beta(v), "data")
    dual, strict = _multipliers(problem, beta, S, T, vertex)
    return _Polished(
        v=v,
        beta=beta,
        dual=dual,
        kkt=kkt_residuals(problem.Z, beta, dual, problem.depth),
        strict=strict,
        vertex=vertex,
    )


def _newton(problem: _Problem, v: np.ndarray, S: np.ndarray, T: np.ndarray) -> np.ndarray:
    """Newton's method on the KKT system of the support ``S`` (signs fixed) and the independent
    active rows ``T``: ``q omega_S s |u|^(q-1) = A_TS^T nu``, ``A_TS s u = h_T``; the start when
    it does not converge, a sign would change or the solution violates another constraint."""
    q, omega = problem.q, problem.omega[S]
    A = problem.A[np.ix_(T, S)]
    h = problem.h[T]
    s = np.sign(v[S])
    k, m = S.size, T.size
    u = np.abs(v[S])
    rows = q * omega * u ** (q - 1.0)  # the size of each stationarity row, fixed at the start
    nu = np.linalg.lstsq(A.T, s * rows, rcond=None)[0]

    def residual(u: np.ndarray, nu: np.ndarray) -> np.ndarray:
        grad = q * omega * s * u ** (q - 1.0)
        return np.concatenate([(grad - A.T @ nu) / rows, A @ (s * u) - h])

    F = residual(u, nu)
    for _ in range(NEWTON_STEPS):
        if np.max(np.abs(F)) <= 1e-15:
            break
        J = np.zeros((k + m, k + m))
        J[:k, :k] = np.diag((q - 1.0) * q * omega * s * u ** (q - 2.0) / rows)
        J[:k, k:] = -A.T / rows[:, None]
        J[k:, :k] = A * s
        step = refined_solve(J, -F)
        scale = 1.0
        for _ in range(NEWTON_STEPS):
            trial_u = u + scale * step[:k]
            if np.all(trial_u > 0):
                trial = residual(trial_u, nu + scale * step[k:])
                if np.max(np.abs(trial)) < np.max(np.abs(F)):
                    break
            scale /= 2.0
        else:
            return v
        u, nu, F = trial_u, nu + scale * step[k:], trial
    out = np.zeros_like(v)
    out[S] = s * u
    if np.max(np.abs(F)) > 1e-12 or not np.min(problem.margins(out)) >= 1.0 - _ACTIVE:
        return v  # not converged, or the other constraints are violated there
    return out


def _multipliers(
    problem: _Problem, beta: np.ndarray, S: np.ndarray, T: np.ndarray, vertex: bool
) -> tuple[np.ndarray, bool]:
    """``(lambda, strict)``: the multipliers of (P_theta) on the active set ``T`` solving the
    stationarity rows ``sum_i x_i z_ij beta_j = |beta_j|^q / f`` (``j`` in ``S``,
    ``lambda = 2 f x``; each row scaled to largest entry 1), exactly where that system is
    square and non-singular with ``x >= 0``, else NNLS with an exact re-solve on its support;
    ``strict``: a vertex whose positive multipliers' constraints have rank ``|S|``."""
    Z, q = problem.Z, problem.q
    n = Z.shape[0]
    support = np.flatnonzero(beta)
    obj = float(np.sum(np.abs(beta) ** q))
    lam = np.zeros(n)
    if T.size == 0 or support.size == 0:
        return lam, False
    M = (Z[np.ix_(T, support)] * beta[support]).T
    target = np.abs(beta[support]) ** q / obj
    rows = np.max(np.abs(M), axis=1, keepdims=True)
    rows = np.where(rows > 0, rows, 1.0)
    M, target = M / rows, target / rows[:, 0]
    x = None
    if M.shape[0] == M.shape[1] and _independent_rows(M).size == M.shape[0]:
        x = refined_solve(M, target)
        if np.any(x < 0):
            x = None
    if x is None:
        x, _ = nnls(M, target, maxiter=50 * max(M.shape))
        on = x > 0
        if np.any(on):
            exact = np.linalg.lstsq(M[:, on], target, rcond=None)[0]
            if np.all(exact >= 0):
                x[on] = exact
    lam[T] = 2.0 * obj * x
    positive = T[x > _RELATIVE * max(float(np.max(x)), np.finfo(float).tiny)]
    strict = vertex and (
        _independent_rows(problem.A[np.ix_(positive, np.flatnonzero(problem.scaled(beta)))]).size
        == S.size
    )
    return lam, bool(strict)


# --------------------------------------------------------------------------- enumeration


def _enumerate(
    problem: _Problem, max_kkt_vertices: int
) -> tuple[np.ndarray, list[np.ndarray], bool]:
    """``(minimum, kkt, truncated)``: the vertex of least objective, the vertices whose
    multipliers are non-negative (the KKT vertices, before polishing; the first
    ``max_kkt_vertices`` distinct ones) and whether there were more. Every ``(S, T)`` with
    ``|S| = |T|`` is solved, in batches of many column sets (:func:`_systems`)."""
    A, h, omega, q = problem.A, problem.h, problem.omega, problem.q
    n, d = A.shape
    best, best_value = None, np.inf
    kkt: dict[bytes, np.ndarray] = {}
    truncated = False
    for rows, cols in _systems(n, d):
        M = A[rows[:, :, None], cols[:, None, :]]  # (m, k, k)
        sv = np.linalg.svd(M, compute_uv=False)
        ok = sv[:, -1] > _RELATIVE * sv[:, 0]
        if not np.any(ok):
            continue
        rows, cols, M = rows[ok], cols[ok], M[ok]
        u = np.linalg.solve(M, h[rows][:, :, None])[:, :, 0]  # (m', k)
        margins = np.einsum("imk,mk->im", A[:, cols], u) / h[:, None]  # (n, m')
        feasible = np.all(margins >= 1.0 - _ACTIVE, axis=0) & np.all(
            np.abs(u) > _ZERO * np.max(np.abs(u), axis=1, keepdims=True), axis=1
        )
        if not np.any(feasible):
            continue
        rows, cols, u, M = rows[feasible], cols[feasible], u[feasible], M[feasible]
        values = np.sum(omega[cols] * np.abs(u) ** q, axis=1)
        i = int(np.argmin(values))
        if values[i] < best_value:
            best_value = float(values[i])
            best = np.zeros(d)
            best[cols[i]] = u[i]
        if truncated:
            continue
        grad = q * omega[cols] * np.sign(u) * np.abs(u) ** (q - 1.0)
        nu = np.linalg.solve(np.transpose(M, (0, 2, 1)), grad[:, :, None])[:, :, 0]
        good = np.all(nu >= -_RELATIVE * np.max(np.abs(nu), axis=1, keepdims=True), axis=1)
        if q == 1.0 and np.any(good):  # L = 2: |(A^T nu)_j| <= omega_j off the support
            g = np.einsum("mk,mkd->md", nu, A[rows])
            good &= np.all(np.abs(g) <= omega * (1.0 + _RELATIVE), axis=1)
        for row in np.flatnonzero(good):
            v = np.zeros(d)
            v[cols[row]] = u[row]
            key = _key(v)
            if key in kkt:
                continue
            if len(kkt) == max_kkt_vertices:
                truncated = True
                break
            kkt[key] = v
    assert best is not None  # separable data have a feasible vertex
    return best, list(kkt.values()), truncated


def _systems(n: int, d: int):
    """The square systems ``(T, S)``, ``|T| = |S| = k`` for k = 1 .. min(n, d), in batches
    ``(rows (m, k), cols (m, k))``: for each column set ``S`` (in lexicographic order) every
    row set ``T``, about :data:`_BATCH_FLOATS` / ``(n k)`` systems a batch."""
    for k in range(1, min(n, d) + 1):
        Ts = np.array(list(combinations(range(n), k)), dtype=int)
        size = max(1, _BATCH_FLOATS // (n * k))
        row_batches = [Ts[i : i + size] for i in range(0, len(Ts), size)]
        columns = combinations(range(d), k)
        while True:
            Ss = np.array(list(islice(columns, max(1, size // len(Ts)))), dtype=int)
            if Ss.size == 0:
                break
            for T in row_batches:
                yield np.tile(T, (len(Ss), 1)), np.repeat(Ss, len(T), axis=0)


def _key(v: np.ndarray) -> bytes:
    """A rounding of ``v`` identifying a vertex found from several active sets."""
    return np.round(v / np.max(np.abs(v)), 9).tobytes() + np.round(np.max(np.abs(v)), 9).tobytes()


# --------------------------------------------------------------------------- records


def _distinct(problem: _Problem, found: list[_Polished]) -> list[_Polished]:
    """``found`` without repeats (margin contributions ``z_ij beta_j`` within 1e-8), keeping
    the smallest residual of each, sorted by objective."""
    order = sorted(found, key=lambda p: (quasi_norm_objective(p.beta, problem.depth), p.residual))
    kept: list[_Polished] = []
    contributions = np.empty((len(order),) + problem.Z.shape)  # z_ij beta_j of each kept
    for p in order:
        own = problem.Z * p.beta
        close = np.flatnonzero(
            np.max(np.abs(contributions[: len(kept)] - own), axis=(1, 2), initial=0.0) <= 1e-8
        )
        if close.size:
            i = int(close[0])
            if p.residual < kept[i].residual:
                kept[i] = p
                contributions[i] = own
        else:
            contributions[len(kept)] = own
            kept.append(p)
    return sorted(kept, key=lambda p: quasi_norm_objective(p.beta, problem.depth))


def _records(
    problem: _Problem, found: list[_Polished], best: _Polished | None, systems: int, cap: int
) -> tuple[KKTPoint, ...]:
    depth = problem.depth
    minimum = quasi_norm_objective(best.beta, depth) if best is not None else None
    out = []
    for p in found:
        obj = quasi_norm_objective(p.beta, depth)
        certified = p.residual <= KKT_TOLERANCE
        at_minimum = minimum is not None and obj <= minimum * (1.0 + 1e-10)
        if not certified:
            status = UNCERTIFIED
            certificate = (
                f"not certified: largest KKT residual {p.residual:.2g} > {KKT_TOLERANCE:g}"
            )
            if at_minimum:
                certificate += " (the enumerated minimum: global, but its multipliers are inexact)"
        elif depth == 2:
            status = GLOBAL
            certificate = (
                f"KKT point of the convex l1 program (L = 2), residual {p.residual:.2g}: a global "
                "minimum"
            )
        elif at_minimum:
            status = GLOBAL
            certificate = (
                f"KKT residual {p.residual:.2g}; the least objective over all {systems} vertex "
                "systems (concave objective on each orthant: its minimum is at a vertex)"
            )
        else:
            status = LOCAL_MINIMUM if p.strict else KKT
            what = (
                "a vertex fixed by the constraints of its positive multipliers: a strict local "
                "minimum"
                if p.strict
                else "not known to be a local minimum"
            )
            certificate = f"KKT residual {p.residual:.2g}; {what}"
            if minimum is None:
                certificate += (
                    f"; global optimality not certified: vertex enumeration skipped ({systems} "
                    f"systems > max_vertex_systems = {cap})"
                )
            elif obj < minimum * (1.0 - 1e-9):
                status = UNCERTIFIED
                certificate += "; below the enumerated minimum: the enumeration is inexact"
        beta = p.beta
        norm = np.linalg.norm(beta / np.max(np.abs(beta))) * np.max(np.abs(beta))
        lam = p.dual
        out.append(
            KKTPoint(
                beta=beta,
                direction=beta / norm,
                depth=depth,
                objective=obj,
                normalized_margin=float(np.min(problem.Z @ beta) / obj ** (depth / 2.0)),
                dual=lam,
                support=np.flatnonzero(beta),
                support_vectors=np.flatnonzero(
                    lam > _RELATIVE * max(float(np.max(lam)), np.finfo(float).tiny)
                ),
                kkt=p.kkt,
                kkt_residual=p.residual,
                status=status,
                certificate=certificate,
            )
        )
    return tuple(out)


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
