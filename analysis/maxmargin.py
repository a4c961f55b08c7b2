"""Max-margin reference classifiers (SPEC §6): the l2 and l1 max-margin directions.

* ``p = 2``: ``min ||beta||_2`` s.t. ``y_i <beta, x_i> >= 1`` (a QP). GD on a linear model
  (``L = 1``) and l2/l_inf-SAM with ``L = 1`` (Thm 3.1) converge in direction to it.
* ``p = 1``: ``min ||beta||_1`` s.t. the same constraints (an LP). GD with ``L = 2`` converges in
  direction to it; on the single example ``D_mu`` it is ``e_d`` (Thm 4.2 claims the same for
  l2-SAM when it does not collapse).

How they are solved
-------------------
* l2: as a *least-distance program* (Lawson & Hanson, *Solving Least Squares Problems*, ch. 23):
  with ``Z`` the rows ``y_i x_i``, ``u = argmin_{u >= 0} ||[Z^T; 1^T] u - e_{d+1}||`` (scipy's
  active-set NNLS) gives ``beta = Z^T u / (1 - 1^T u)`` and the dual ``lambda = u / (1 - 1^T u)``.
  The active set (``lambda_i > 0``) is then *polished*: the equality-constrained problem
  ``min ||beta||`` s.t. ``Z_S beta = 1`` is solved exactly (``beta = pinv(Z_S) 1``) and
  ``lambda_S`` from ``Z_S^T lambda_S = beta``; points violating the constraints are added to
  ``S`` and points with ``lambda_i < 0`` dropped, until the KKT conditions hold. The KKT
  residuals are reported in :attr:`MaxMargin.kkt`.
* l1: ``beta = p - q``, ``p, q >= 0``, ``min 1^T (p + q)`` s.t. ``Z (p - q) >= 1`` with
  ``scipy.optimize.linprog(method="highs")``; the dual ``lambda = -marginals`` of the
  inequality constraints. The vertex returned by HiGHS is polished in the same way (the square
  system of its active constraints on its support, solved exactly) when that improves the KKT
  residuals.

Non-uniqueness (l1)
-------------------
The l1 problem can have a whole face of solutions. On the single example ``{(mu, +1)}`` the
solution set is the convex hull of ``{sign(mu_j) e_j / |mu_j| : |mu_j| = max_k |mu_k|}``
(:func:`l1_solution_set_single_example`): unique (``e_d / mu_d``) when ``|mu_d|`` is strictly
largest, otherwise :func:`max_margin` returns *one vertex* of that face, the one HiGHS lands on
(which one is solver-dependent and not guaranteed). :attr:`MaxMargin.unique` says ``True``
when uniqueness is known, ``False`` when non-uniqueness is known (single example with ties) and
``None`` when it was not determined (l1, ``n > 1``). Angles to a non-unique l1 solution should be
measured to the solution *set*, e.g. with :func:`angle_to_set`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linprog, nnls

from flows.data import Dataset, finite_array, is_separable

from ._checks import numeric_array

__all__ = ["MaxMargin", "angle", "angle_to_set", "l1_solution_set_single_example", "max_margin",
           "max_margin_of", "normalized_margin"]

#: Relative threshold below which a dual variable / coordinate is treated as 0 in the polish.
_ZERO = 1e-12
_HIGHS_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}


@dataclass(frozen=True, eq=False)
class MaxMargin:
    """A max-margin solution.

    Attributes
    ----------
    beta : (d,) the raw solution (the minimum-norm ``beta`` with ``min_i y_i <beta, x_i> = 1``).
    direction : (d,) ``beta / ||beta||_2`` (always the l2-unit vector, for angle comparisons,
        whatever ``p``).
    margin : the normalized margin ``min_i y_i <beta, x_i> / ||beta||_p`` (``= 1 / ||beta||_p``
        at the optimum).
    p : 1 or 2.
    dual : (n,) dual variables ``lambda >= 0`` (``beta = Z^T lambda`` for p = 2;
        ``Z^T lambda`` is a subgradient of ``||.||_1`` at ``beta`` for p = 1).
    support : indices i with ``lambda_i > 0`` (the support vectors).
    unique : True / False if (non-)uniqueness is known, None if not determined (see module doc).
    kkt : KKT residuals: 'stationarity', 'dual_feasibility', 'primal_feasibility',
        'complementary_slackness', 'duality_gap', of the problem normalised to ``max|y_i x_i|
        = 1`` (so they do not depend on the scale of the data).
    """

    beta: np.ndarray
    direction: np.ndarray
    margin: float
    p: int
    dual: np.ndarray
    support: np.ndarray
    unique: bool | None
    kkt: dict = field(default_factory=dict)

    @property
    def norm(self) -> float:
        """``||beta||_p``."""
        return float(np.linalg.norm(self.beta, ord=self.p))

    def kkt_residual(self) -> float:
        """The largest KKT residual."""
        return float(max(self.kkt.values()))


# --------------------------------------------------------------------------- helpers


def _unit(u: np.ndarray) -> np.ndarray | None:
    """``u / ||u||_2`` computed without overflow or underflow (scaled by ``max|u_j|`` first);
    None for 0 or non-finite ``u``."""
    if not np.all(np.isfinite(u)):
        return None
    top = np.max(np.abs(u), initial=0.0)
    if top == 0:
        return None
    u = u / top
    return u / np.linalg.norm(u)


def angle(u, v) -> float:
    """Angle in radians (in ``[0, pi]``) between the directions of ``u`` and ``v``.

    ``nan`` when either vector is 0 (or not finite); ``cos`` is clipped to ``[-1, 1]``. Computed
    as ``2 atan2(||a - b||, ||a + b||)`` on the unit vectors, which stays accurate for angles
    near 0 and near pi (``arccos`` loses half the digits there). Scale-invariant at every
    float64 scale (the vectors are scaled by their largest entry before the norms).
    ``ValueError`` naming 'u' or 'v' if they are not numeric, empty, or of different sizes.
    """
    u = numeric_array(u, "u").ravel()
    v = numeric_array(v, "v").ravel()
    if u.size == 0 or v.size == 0:
        raise ValueError(f"u and v must not be empty, got sizes {u.size} and {v.size}")
    if u.shape != v.shape:
        raise ValueError(f"u and v must have the same size, got {u.size} and {v.size}")
    a, b = _unit(u), _unit(v)
    if a is None or b is None:
        return float("nan")
    return float(np.clip(2.0 * np.arctan2(np.linalg.norm(a - b), np.linalg.norm(a + b)),
                         0.0, np.pi))


def angle_to_set(u, vertices) -> float:
    """Smallest angle between ``u`` and the cone spanned by ``vertices`` (rows, nonnegative
    combinations), e.g. the l1 solution face of :func:`l1_solution_set_single_example`.

    Computed by NNLS: the closest point of the cone to ``u / ||u||``. When that point is 0
    (``u`` makes an angle >= pi/2 with every generator), the smallest angle is attained at a
    generator (on the section ``{w in cone : <u, w> = -1}`` the angle grows with ``||w||``,
    a convex function, so its maximum sits at a vertex), and it is the smallest angle
    to a nonzero vertex. ``nan`` if ``u`` is 0 or not finite, or every vertex is 0.

    Raises
    ------
    ValueError
        ``u`` not a numeric vector; ``vertices`` not a finite (k, d) array with ``d = u.size``.
    """
    u = numeric_array(u, "u").ravel()
    if u.size == 0:
        raise ValueError("u must not be empty")
    V = numeric_array(vertices, "vertices")
    if V.ndim == 1:
        V = V[None, :]
    if V.ndim != 2 or V.shape[0] == 0 or V.shape[1] != u.size or not np.all(np.isfinite(V)):
        raise ValueError(f"vertices must be a finite (k, {u.size}) array with k >= 1, got "
                         f"shape {V.shape}")
    a = _unit(u)
    scale = np.max(np.abs(V), axis=1)
    V = V[scale > 0] / scale[scale > 0, None]  # positive row scalings keep the cone
    if a is None or V.shape[0] == 0:
        return float("nan")
    coef, _ = nnls(V.T, a)
    w = V.T @ coef
    if np.linalg.norm(w) > 0:
        return angle(a, w)
    return min(angle(a, v) for v in V)


def normalized_margin(beta, X, y, p: int) -> float:
    """``min_i y_i <beta, x_i> / ||beta||_p`` (``nan`` for ``beta = 0``).

    Scale-invariant in ``beta`` (``beta`` is divided by its largest entry first), so valid for
    ``|beta|`` anywhere in float64. ``ValueError`` naming the parameter for a non-finite
    ``beta`` or ``X``, labels other than +-1, or mismatched shapes.
    """
    p = _check_p(p)
    X, y = _check_data(X, y)
    beta = finite_array(beta, "beta", ndim=1)
    if beta.shape[0] != X.shape[1]:
        raise ValueError(f"beta must have length d = {X.shape[1]}, got {beta.shape[0]}")
    top = np.max(np.abs(beta))
    if top == 0:
        return float("nan")
    b = beta / top
    scale_x = np.max(np.abs(X))
    if scale_x == 0:
        return 0.0
    with np.errstate(over="ignore"):
        return float(scale_x * (np.min(y * ((X / scale_x) @ b)) / np.linalg.norm(b, ord=p)))


def l1_solution_set_single_example(mu) -> np.ndarray:
    """Vertices (rows) of the l1 max-margin solution set of ``{(mu, +1)}``.

    The set is the convex hull of ``sign(mu_j) e_j / |mu_j|`` over the ``j`` with
    ``|mu_j| = max_k |mu_k|`` (exact ties). One row (``e_d / mu_d`` in the paper's setting
    ``0 < mu_1 < ... < mu_d``) means the solution is unique.
    """
    mu = finite_array(mu, "mu", ndim=1)
    top = np.max(np.abs(mu))
    if top == 0:
        raise ValueError("mu must have a non-zero entry (otherwise D_mu is not separable)")
    ties = np.flatnonzero(np.abs(mu) == top)
    out = np.zeros((ties.size, mu.size))
    out[np.arange(ties.size), ties] = np.sign(mu[ties]) / top
    return out


def _check_p(p) -> int:
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, float, np.integer, np.floating)) \
            or p not in (1, 2):
        raise ValueError(f"p must be 1 or 2, got {p!r}")
    return int(p)


def _check_data(X, y) -> tuple[np.ndarray, np.ndarray]:
    X = finite_array(X, "X", ndim=2)
    y = finite_array(y, "y", ndim=1)
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"y must have one label per row of X: got {y.shape[0]} labels for "
                         f"{X.shape[0]} rows")
    if not np.all(np.abs(y) == 1.0):
        raise ValueError("y must contain only labels -1 and +1")
    return X, y


def _kkt(Z: np.ndarray, beta: np.ndarray, lam: np.ndarray, p: int) -> dict:
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
        on = np.abs(beta) > _ZERO * max(1.0, np.max(np.abs(beta)))
        stat_on = np.max(np.abs(g[on] - np.sign(beta[on])), initial=0.0)
        stat_off = np.max(np.abs(g[~on]) - 1.0, initial=0.0)
        out["stationarity"] = float(max(stat_on, stat_off, 0.0))
        l1 = float(np.sum(np.abs(beta)))
        out["duality_gap"] = abs(l1 - float(lam.sum())) / max(1.0, l1)
    return out


def _worst(kkt: dict) -> float:
    return max(kkt.values())


# --------------------------------------------------------------------------- l2


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


def _l2(Z: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict]:
    n, d = Z.shape
    E = np.vstack([Z.T, np.ones((1, n))])
    f = np.zeros(d + 1)
    f[-1] = 1.0
    u, _ = nnls(E, f, maxiter=50 * max(n, d + 1))
    denom = 1.0 - u.sum()
    if not denom > 0:
        raise ValueError("data (X, y) are not linearly separable through the origin "
                         "(least-distance program infeasible)")
    beta, lam = Z.T @ u / denom, u / denom
    best = (beta, lam, _kkt(Z, beta, lam, 2))
    S = np.flatnonzero(lam > _ZERO * max(1.0, lam.max()))
    seen = set()
    for _ in range(2 * n + 2):  # active-set polish
        key = tuple(S)
        if key in seen or S.size == 0:
            break
        seen.add(key)
        b, l = _l2_equality(Z, S)
        kkt = _kkt(Z, b, l, 2)
        if _worst(kkt) < _worst(best[2]):
            best = (b, l, kkt)
        if _worst(kkt) <= 1e-13:
            break
        slack = Z @ b - 1.0
        drop = S[l[S] < 0]
        S = np.setdiff1d(S, drop)
        if np.min(slack) < -1e-13:  # add the most violated constraint
            S = np.union1d(S, [int(np.argmin(slack))])
    return best


# --------------------------------------------------------------------------- l1


def _l1_polish(Z: np.ndarray, beta: np.ndarray, lam: np.ndarray):
    """Exact vertex: active constraints ``S`` (``lam > 0``) on the support ``J`` of ``beta``."""
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
    l = np.zeros_like(lam)
    l[S] = l_S
    return b, l


def _l1(Z: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict]:
    n, d = Z.shape
    c = np.ones(2 * d)
    A_ub = -np.hstack([Z, -Z])
    res = linprog(c, A_ub=A_ub, b_ub=-np.ones(n), bounds=[(0, None)] * (2 * d),
                  method="highs", options=_HIGHS_OPTIONS)
    if res.status == 2:
        raise ValueError("data (X, y) are not linearly separable through the origin "
                         "(l1 max-margin LP infeasible)")
    if res.status != 0:
        raise RuntimeError(f"linprog failed on the l1 max-margin LP: {res.message}")
    beta = res.x[:d] - res.x[d:]
    lam = np.maximum(-np.asarray(res.ineqlin.marginals, dtype=float), 0.0)
    best = (beta, lam, _kkt(Z, beta, lam, 1))
    polished = _l1_polish(Z, beta, lam)
    if polished is not None:
        kkt = _kkt(Z, *polished, 1)
        if _worst(kkt) < _worst(best[2]):
            best = (*polished, kkt)
    return best


# --------------------------------------------------------------------------- API


def max_margin(X, y=None, p=None) -> MaxMargin:
    """The l_p max-margin classifier (p in {1, 2}) of separable data.

    Call as ``max_margin(X, y, p)`` with arrays, or ``max_margin(data, p=p)`` (also
    ``max_margin(data, p)``) with a :class:`flows.Dataset`.

    Raises
    ------
    ValueError
        ``p`` not 1 or 2 (the message names 'p'); bad shapes/labels; data that no linear
        predictor through the origin separates (the message says "not linearly separable");
        data at a scale where ``beta`` (~ ``1 / max|x|``) or the dual (~ ``1 / max|x|^p``) is
        not representable in float64 (the message names X).

    The problem is solved for ``Z / max|Z|`` (``Z`` the rows ``y_i x_i``) and scaled back
    (``beta / s``, ``dual / s^p``), so the answer is the same at every scale of ``X``; the KKT
    residuals are those of the normalised problem.
    """
    if isinstance(X, Dataset):
        if y is not None and np.ndim(y) == 0:
            if p is not None:
                raise ValueError("p given twice: call max_margin(data, p=...)")
            p = y
        elif y is not None:
            raise ValueError("y must not be given with a Dataset: call max_margin(data, p=...)")
        X, y = X.X, X.y
    if p is None:
        raise ValueError("p must be given: 1 or 2")
    p = _check_p(p)
    if y is None:
        raise ValueError("y must be given with an array X")
    X, y = _check_data(X, y)
    if not is_separable(X, y):
        raise ValueError("data (X, y) are not linearly separable through the origin: no beta "
                         "has y_i <beta, x_i> >= 1 for all i")
    Z = y[:, None] * X
    scale = float(np.max(np.abs(Z)))
    beta_s, lam_s, kkt = _l2(Z / scale) if p == 2 else _l1(Z / scale)
    with np.errstate(over="ignore", under="ignore"):
        beta = beta_s / scale
        lam = lam_s / scale if p == 1 else lam_s / scale / scale
    lost = ~np.isfinite(beta) | ((beta == 0) & (beta_s != 0))
    lost_dual = ~np.isfinite(lam) | ((lam == 0) & (lam_s != 0))
    if np.any(lost) or np.any(lost_dual):
        what = "beta (~ 1 / max|x|)" if np.any(lost) else \
            f"the dual variables (~ 1 / max|x|^{p})"
        raise ValueError(f"X: at max |x_ij| = {scale:.3g}, {what} of the l{p} max-margin "
                         f"problem are outside float64; rescale X (the direction does not "
                         f"depend on the scale)")
    support = np.flatnonzero(lam_s > _ZERO * max(1.0, float(np.max(lam_s))))
    if p == 2:
        unique: bool | None = True
    elif Z.shape[0] == 1:
        unique = l1_solution_set_single_example(Z[0]).shape[0] == 1
    else:
        unique = None
    return MaxMargin(beta=beta, direction=beta_s / np.linalg.norm(beta_s),
                     margin=normalized_margin(beta, X, y, p), p=p, dual=lam, support=support,
                     unique=unique, kkt=kkt)


def max_margin_of(data: Dataset, p) -> MaxMargin:
    """:func:`max_margin` of a :class:`flows.Dataset`."""
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flows.Dataset, got {type(data).__name__}")
    return max_margin(data, p=p)
