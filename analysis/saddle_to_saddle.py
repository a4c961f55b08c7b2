"""The vanishing-initialization limit of the GD flow in regression on ``beta = u ⊙ v``
(``L = 2``): a staircase of saddles of the squared loss, visited at explicit jump times.

Setting (as :mod:`analysis.implicit_bias`): data ``X`` (n, d), targets ``y`` (n,), and::

    L(beta) = ||X beta - y||^2 / (2n),     g(beta) = grad L(beta) = X^T (X beta - y) / n,
    du/dt = -g ⊙ v,    dv/dt = -g ⊙ u,     beta = u ⊙ v,     u(0) = alpha 1,  v(0) = 0.

Pesme & Flammarion 2023 (*Saddle-to-saddle dynamics in diagonal linear networks*, NeurIPS)
describe the limit ``alpha -> 0`` of this flow in the accelerated time
``t~ = t / log(1/alpha)`` and compute it with their Algorithm 1, a LARS-like recursion. The paper
text was not at hand while this module was written: the rules below are derived from the limit
(the derivation is short, and the tests check it against the engine's flows), in the form the
paper's abstract describes (saddles = minimisers of the loss constrained to an active set and
its signs).

Derivation, in this parametrisation:

* ``u_j^2 - v_j^2 = alpha^2`` is conserved; with ``k = alpha^2 / 2``,
  ``(u_j, v_j) = alpha (cosh psi_j, sinh psi_j)``, ``beta_j = k sinh(2 psi_j)`` and
  ``dpsi_j/dt = -g_j(beta)``, ``psi_j(0) = 0`` (:mod:`analysis.implicit_bias`).
* ``|beta_j| = (alpha^2 / 4) e^{2 |psi_j|} (1 - e^{-4 |psi_j|})``: ``beta_j`` is of order 1
  only once ``|psi_j|`` reaches ``log(1/alpha) + O(1)``. With
  ``s_j = psi_j / log(1/alpha)`` and ``t~ = t / log(1/alpha)`` (so that the constants match:
  the threshold ``log(1/k) / 2 = log(1/alpha) + log(2) / 2`` is ``|s_j| = 1`` up to
  ``O(1 / log(1/alpha))``)::

      ds_j / dt~ = -g_j(beta),     |beta_j| = e^{2 log(1/alpha) (|s_j| - 1) + O(1)}.

  In the limit: ``s`` is Lipschitz with values in ``[-1, 1]^d``; ``beta_j = 0`` wherever
  ``|s_j| < 1``, and ``sign(beta_j) = s_j`` wherever ``beta_j != 0`` (``|s_j|`` cannot pass 1:
  ``beta_j`` would blow up like ``alpha^{-2 (|s_j| - 1)}``, and ``g`` pushes it back).
* On a time interval where ``beta`` stays at ``beta^k``, ``s`` moves on a line,
  ``s(t~) = s(t~_k) - (t~ - t~_k) g(beta^k)``. ``beta^k`` is then a point where the loss is
  stationary in the coordinates allowed to move: ``g_j(beta^k) = 0`` on the support
  (``|s_j| = 1`` there must stay), and ``s_j g_j(beta^k) >= 0`` where ``|s_j| = 1`` and
  ``beta^k_j = 0`` (else ``|s_j|`` would pass 1). These are the KKT conditions of the convex
  program (a non-negative least-squares problem after flipping signs)::

      beta^k = argmin L(beta)  s.t.  beta_j = 0 where |s_j| < 1,  s_j beta_j >= 0 where |s_j| = 1.

Algorithm (:func:`saddle_path`): ``t~_0 = 0``, ``s^0 = 0``, ``beta^0 = 0`` (the saddle at the
origin). At the saddle ``beta^k``, with ``g = g(beta^k)``:

1. if ``g = 0``, ``beta^k`` minimises the (convex) loss: a global minimiser, the end of the
   path (status :data:`REACHED_MINIMUM`);
2. every coordinate with ``g_j != 0`` moves toward ``sigma_j = -sign(g_j)`` and reaches it after
   ``delta_j = (1 - sigma_j s_j) / |g_j|`` (a coordinate of the active set with
   ``s_j g_j > 0`` first leaves it; one with ``g_j = 0`` stays where it is). The next jump is at
   ``t~_{k+1} = t~_k + min_j delta_j``, where ``s^{k+1} = s^k - (t~_{k+1} - t~_k) g``;
3. ``beta^{k+1}`` is the constrained minimiser above for ``s = s^{k+1}``. It differs from
   ``beta^k`` (the coordinate that reached ``sigma_j`` has ``sigma_j g_j < 0``: ``beta^k``
   violates the new KKT conditions), and ``L(beta^{k+1}) < L(beta^k)``: no constraint set is
   visited twice and the path ends after finitely many jumps.

Coordinates of the active set may return to 0 (``beta^{k+1}_j = 0``, then ``|s_j|`` decreases):
the support is not monotone. The path ends at the minimum l1-norm interpolator when ``X beta = y``
has solutions (:func:`analysis.implicit_bias.min_l1_interpolator`, the ``alpha -> 0`` limit of
the implicit bias), and at the least-squares solution when ``X`` has full column rank and
``n > d`` (no interpolator). The first jump is at ``t~_1 = 1 / ||X^T y / n||_inf``.

The limit is uniform in ``t~`` away from the jump times; at a finite ``alpha`` the jumps of the
flow are shifted by ``O(1 / log(1/alpha))`` in ``t~`` (the ``O(1)`` in the threshold). Where one
coordinate ``j`` escapes alone from ``beta = 0`` (the first jump, or every jump when the columns
of ``X`` are orthogonal) the shift is explicit: ``beta_j = (alpha^2 / 4) e^{2 |g_j| t}`` until it
matters, then ``d beta_j / dt = 2 |g_j| beta_j (1 - beta_j / beta*_j)`` (logistic), so the loss
passes the midpoint of its two plateaus at
``t~ = 1 / |g_j| + log(4 |beta*_j| / (1 + sqrt 2)) / (2 |g_j| log(1/alpha))``.

Measured against the engine's flows (``tests/test_saddle_to_saddle.py``; its example has n = 3,
d = 5, four jumps and a coordinate that enters and leaves): the largest jump-time error is 1.04,
0.78, 0.82, 0.19, 0.058 at ``alpha`` = 1e-2, 1e-4, 1e-8, 1e-30, 1e-100; times ``log(1/alpha)``
it settles at 13.4 from ``alpha = 1e-16`` on (fitted exponent of ``log(1/alpha)``: -1.04). The
distance to the saddles at plateau midpoints falls from 0.31 (1e-2) to 6.5e-3 (1e-30) and
2.3e-6 (1e-100). On an orthogonal design the offset formula above holds to 2e-7 at 1e-30.

Only ``L = 2`` is covered. At depth ``L >= 3`` from the balanced ``w^(l)(0) = alpha``,
``d w_j / dt = -g_j w_j^{L-1}`` gives ``w_j^{-(L-2)} = alpha^{-(L-2)} + (L - 2) int_0^t g_j``:
the clock is ``t alpha^{L-2}`` instead of ``t / log(1/alpha)``, a coordinate escapes when
``(L - 2) alpha^{L-2} int (-g_j)`` reaches 1 (``w_j`` would blow up in finite time at a
fixed ``g_j``, instead of growing exponentially), and ``beta_j = w_j^L`` keeps the sign of its init, so the saddles become
sign-constrained minimisers with fixed signs; the init ``u = alpha``, ``v = 0`` has no analogue
(two zero layers keep a coordinate at 0, ``docs/theory.md`` §18). Zhao et al. (PMLR 306,
*Gradient flow dynamics and implicit bias of diagonal linear networks under infinitesimal
initialization*) extend the theorem to deep networks; that limit is not implemented here.

Degenerate cases
----------------
The recursion needs the constrained minimiser to be unique (true when the columns of ``X`` on
the active set are independent, e.g. for ``X`` in general position). Where it is not, the limit
is not decided by these rules: the path stops there with status :data:`UNDECIDED` and a message.
Ties in ``min_j delta_j`` (coordinates reaching ``+-1`` together) are decided: all of them join
the active set.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy import linalg
from scipy.optimize import linprog, nnls

from flows.checks import integer, real, real_array
from flows.data import Dataset, regression_only

from .implicit_bias import target_arrays

__all__ = [
    "MAX_STEPS",
    "NNLS_ITERATIONS",
    "REACHED_MINIMUM",
    "STEP_CAP",
    "SaddlePath",
    "TOLERANCE",
    "UNDECIDED",
    "constrained_minimiser",
    "limit_path",
    "limit_s",
    "plateau_at",
    "saddle_path",
    "saddles",
]

#: Status of a path that reached a global minimiser of the loss (``grad L = 0``) and stays.
REACHED_MINIMUM = 0
#: Status of a path cut by ``max_steps``: known up to :attr:`SaddlePath.horizon`.
STEP_CAP = 1
#: Status of a path stopped where the rules do not decide the next saddle (a non-unique or
#: uncertified constrained minimiser); known up to :attr:`SaddlePath.horizon`.
UNDECIDED = -1

#: Default cap on the jumps of :func:`saddle_path`.
MAX_STEPS = 1000
#: Default relative tolerance: zero tests of the gradient and of ``beta``, ties of jump times.
TOLERANCE = 1e-9
#: Cap on the Lawson-Hanson iterations of one constrained minimiser, per active coordinate.
NNLS_ITERATIONS = 50


@dataclass(frozen=True, eq=False)
class SaddlePath:
    """The limit ``alpha -> 0`` of the GD flow from ``u(0) = alpha 1``, ``v(0) = 0``, in the
    accelerated time ``t~ = t / log(1/alpha)`` (module doc).

    Attributes
    ----------
    times : (K,) jump times ``0 < t~_1 < ... < t~_K``; plateau ``k`` is ``[t~_k, t~_{k+1})``
        with ``t~_0 = 0`` and ``t~_{K+1}`` = :attr:`horizon`.
    betas : (K + 1, d) the saddles ``beta^0 = 0, beta^1, ..., beta^K``, one per plateau.
    supports : (K + 1, d) bool, ``beta^k_j != 0``.
    signs : (K + 1, d) int, ``sign(beta^k_j)`` (0 off the support).
    active : (K + 1, d) bool, ``|s_j| = 1`` at the start of plateau ``k`` (the coordinates the
        constrained problem of ``beta^k`` lets move; the support is a subset).
    s : (K + 1, d) ``s`` at the start of each plateau (``s(t~_k)``, ``s(0) = 0``).
    gradients : (K + 1, d) ``grad L(beta^k)``: ``ds/dt~`` on plateau ``k`` is ``-gradients[k]``.
    losses : (K + 1,) ``L(beta^k)``, strictly decreasing where they are floats (inf or 0 where
        beyond the float64 range: targets beyond about 1e154 or below about 1e-154).
    horizon : the accelerated time up to which the path is known: ``inf`` for
        :data:`REACHED_MINIMUM`; the next jump time for :data:`STEP_CAP`; the time of the jump
        whose saddle was not decided for :data:`UNDECIDED`.
    status : :data:`REACHED_MINIMUM` (0), :data:`STEP_CAP` (1) or :data:`UNDECIDED` (-1).
    message : what :attr:`status` means here.
    """

    times: np.ndarray
    betas: np.ndarray
    supports: np.ndarray
    signs: np.ndarray
    active: np.ndarray
    s: np.ndarray
    gradients: np.ndarray
    losses: np.ndarray
    horizon: float
    status: int
    message: str

    @property
    def steps(self) -> int:
        """Number of jumps ``K``."""
        return int(self.times.shape[0])


# --------------------------------------------------------------------------- inputs


def _tolerance(tolerance) -> float:
    """A tolerance in (0, 1e-2]."""
    return real(tolerance, "tolerance", low=0.0, high=1e-2, low_open=True)


# --------------------------------------------------------------------------- one saddle


def _gradient_scale(X: np.ndarray, y: np.ndarray, beta: np.ndarray) -> float:
    """``max_j (|X|^T (|X| |beta| + |y|))_j / n``: the size of the terms of ``g(beta)``."""
    return float(np.max(np.abs(X).T @ (np.abs(X) @ np.abs(beta) + np.abs(y)))) / X.shape[0]


def _unique(XA: np.ndarray, on: np.ndarray, tolerance: float) -> bool:
    """Whether ``z`` (``z >= 0``, support ``on``) is the only minimiser of ``||XA z - y||`` over
    ``z >= 0``: no direction ``h != 0`` with ``XA h = 0`` and ``h >= 0`` off the support.

    The minimisers share ``XA z`` (strict convexity in ``XA z``), so they form the polyhedron
    ``{z >= 0: XA z = XA z*}``; it is a point iff the rank of ``XA`` restricted to the support is
    full and the LP ``max sum_{off} h  s.t.  XA h = 0, 0 <= h_off <= 1, |h_on| <= 1`` has value 0.
    """
    m = XA.shape[1]
    if m == 0:
        return True
    svals = linalg.svdvals(XA)
    if svals.size >= m and svals[m - 1] > tolerance * max(svals[0], np.finfo(float).tiny):
        return True  # independent columns
    svals_on = linalg.svdvals(XA[:, on]) if np.any(on) else np.zeros(0)
    n_on = int(np.sum(on))
    if n_on and (svals_on.size < n_on or svals_on[n_on - 1] <= tolerance * svals_on[0]):
        return False
    cost = np.where(on, 0.0, -1.0)
    bounds = [(-1.0, 1.0) if o else (0.0, 1.0) for o in on]
    top = np.max(np.abs(XA), axis=1, keepdims=True)
    A = XA / np.where(top > 0, top, 1.0)
    res = linprog(cost, A_eq=A, b_eq=np.zeros(A.shape[0]), bounds=bounds, method="highs")
    return bool(res.status == 0 and -res.fun <= 1e3 * tolerance)


def constrained_minimiser(X, y, signs, *, tolerance: float = TOLERANCE):
    """The minimiser of ``L(beta) = ||X beta - y||^2 / (2n)`` with ``signs_j beta_j >= 0`` where
    ``signs_j = +-1`` and ``beta_j = 0`` where ``signs_j = 0``, with its certificate.

    Solved as the non-negative least-squares problem ``min ||X_A diag(sigma) z - y||``, ``z >= 0``
    on the active set ``A = {signs != 0}`` (``scipy.optimize.nnls``, Lawson-Hanson), then
    polished by least squares on the support of ``z`` (kept if it keeps ``z > 0``), on ``X``
    and ``y`` scaled by powers of 2 to largest entries in [1/2, 1) (exact; ``beta`` scales
    back by ``2^(e_y - e_X)``: the minimiser is covariant).

    Parameters
    ----------
    X : (n, d), y : (n,) the data.
    signs : (d,) entries in {-1, 0, +1}.
    tolerance : relative tolerance of the checks (in (0, 1e-2]).

    Returns
    -------
    (beta, ok, message)
        ``beta`` (d,); ``ok`` is True when ``beta`` satisfies the KKT conditions (``g_j = 0`` on
        the support, ``signs_j g_j >= 0`` on the rest of the active set, within ``tolerance``
        times :func:`_gradient_scale`) and is the unique minimiser; else ``message`` says which
        failed.

    Raises
    ------
    ValueError
        Naming X, y, signs or tolerance for bad input.
    """
    X, y = target_arrays(X, y)
    signs = real_array(signs, "signs", ndim=1)
    if signs.shape[0] != X.shape[1] or not np.all(np.isin(signs, (-1.0, 0.0, 1.0))):
        raise ValueError(f"signs must be {X.shape[1]} entries in {{-1, 0, +1}}, got {signs!r}")
    scales = _Scales.of(X, y)
    beta, ok, message = _constrained(*scales.scaled(X, y), signs, _tolerance(tolerance))
    return scales.beta(beta), ok, message


def _constrained(
    X: np.ndarray, y: np.ndarray, signs: np.ndarray, tolerance: float
) -> tuple[np.ndarray, bool, str]:
    """:func:`constrained_minimiser` on checked input."""
    n, d = X.shape
    A = np.flatnonzero(signs != 0)
    beta = np.zeros(d)
    if A.size:
        XA = X[:, A] * signs[A]
        try:
            z, _ = nnls(XA, y, maxiter=NNLS_ITERATIONS * A.size)
        except RuntimeError:  # scipy's iteration cap
            return beta, False, f"nnls reached its cap of {NNLS_ITERATIONS * A.size} iterations"
        top = float(np.max(z)) if z.size else 0.0
        on = z > tolerance * top if top > 0 else np.zeros(A.size, dtype=bool)
        z = np.where(on, z, 0.0)
        if np.any(on):
            polished = linalg.lstsq(XA[:, on], y)[0]
            if np.all(polished > 0):
                z = np.zeros(A.size)
                z[on] = polished
        beta[A] = signs[A] * z
    else:
        on = np.zeros(0, dtype=bool)
    g = X.T @ (X @ beta - y) / n
    scale = _gradient_scale(X, y, beta)
    slack = tolerance * scale
    support = beta != 0
    if np.any(np.abs(g[support]) > slack):
        worst = float(np.max(np.abs(g[support]))) / scale
        return (
            beta,
            False,
            (f"not stationary on its support: |grad L| = {worst:.3g} x its terms > {tolerance:g}"),
        )
    rest = (signs != 0) & ~support
    if np.any(signs[rest] * g[rest] < -slack):
        worst = float(np.min(signs[rest] * g[rest])) / scale
        why = (
            "a KKT multiplier of the sign constraints is negative "
            f"({worst:.3g} x the terms of grad L < {-tolerance:g})"
        )
        return beta, False, why
    if A.size and not _unique(X[:, A] * signs[A], on, tolerance):
        why = (
            f"the constrained minimiser on the active set {A.tolist()} is not unique (dependent "
            "columns of X there): the limit is not decided by these rules"
        )
        return beta, False, why
    return beta, True, "certified"


# --------------------------------------------------------------------------- the path


def saddles(
    data: Dataset, *, max_steps: int = MAX_STEPS, tolerance: float = TOLERANCE
) -> SaddlePath:
    """The saddle-to-saddle limit of the GD flow on ``data`` (module doc).

    Parameters
    ----------
    data : a :class:`flows.Dataset` with ``task='regression'``.
    max_steps : cap on the jumps (a positive int).
    tolerance : relative tolerance (in (0, 1e-2]) of the zero tests (``grad L``, ``beta``) and of
        ties between jump times.

    Returns
    -------
    SaddlePath

    Raises
    ------
    ValueError
        Naming 'data' (not a Dataset, or classification data), 'max_steps' or 'tolerance'.
    """
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flows.Dataset, got {type(data).__name__}")
    regression_only(data, "the saddle-to-saddle limit")
    return saddle_path(data.X, data.y, max_steps=max_steps, tolerance=tolerance)


def saddle_path(X, y, *, max_steps: int = MAX_STEPS, tolerance: float = TOLERANCE) -> SaddlePath:
    """:func:`saddles` on arrays ``X`` (n, d) and ``y`` (n,): the recursion of the module doc.

    The path is covariant: with ``X = 2^a X'`` and ``y = 2^b y'`` the saddles are ``2^(b - a)``
    times those of ``(X', y')``, the gradients ``2^(a + b)`` times, the jump times ``2^-(a + b)``
    times, the losses ``2^(2b)`` times and ``s`` the same. It is computed on ``X`` and ``y``
    scaled so (largest entries in [1/2, 1)) and mapped back, so that no loss or gradient
    overflows on the way (a loss beyond float64 is inf in :attr:`SaddlePath.losses`).

    ``ValueError`` naming X, y, max_steps or tolerance for bad input.
    """
    X, y = target_arrays(X, y)
    max_steps = integer(max_steps, "max_steps", 1)
    tolerance = _tolerance(tolerance)
    scales = _Scales.of(X, y)
    path = _path(*scales.scaled(X, y), max_steps, tolerance, scales)
    with np.errstate(over="ignore", under="ignore"):
        return replace(
            path,
            times=scales.time(path.times),
            betas=scales.beta(path.betas),
            gradients=np.ldexp(path.gradients, scales.x + scales.y),
            losses=np.ldexp(path.losses, 2 * scales.y),
            horizon=float(scales.time(np.array(path.horizon))),
        )


@dataclass(frozen=True)
class _Scales:
    """``X = 2^x X'`` and ``y = 2^y y'`` with the largest entries of ``X'`` and ``y'`` in
    [1/2, 1) (exponent 0 for an array of zeros): the path of ``(X', y')`` maps back by powers
    of 2 (:func:`saddle_path`)."""

    x: int
    y: int

    @classmethod
    def of(cls, X: np.ndarray, y: np.ndarray) -> _Scales:
        return cls(_exponent(X), _exponent(y))

    def scaled(self, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(X', y')``."""
        return np.ldexp(X, -self.x), np.ldexp(y, -self.y)

    def beta(self, beta: np.ndarray) -> np.ndarray:
        """A ``beta`` of ``(X', y')`` in the units of ``(X, y)``."""
        with np.errstate(over="ignore", under="ignore"):
            return np.ldexp(beta, self.y - self.x)

    def time(self, t: np.ndarray) -> np.ndarray:
        """An accelerated time of ``(X', y')`` in the units of ``(X, y)``."""
        with np.errstate(over="ignore", under="ignore"):
            return np.ldexp(t, -(self.x + self.y))


def _exponent(a: np.ndarray) -> int:
    """``e`` with ``max |a| / 2^e`` in [1/2, 1) (0 if ``a`` is 0)."""
    top = float(np.max(np.abs(a))) if a.size else 0.0
    return int(np.frexp(top)[1]) if top > 0 else 0


def _path(
    X: np.ndarray, y: np.ndarray, max_steps: int, tolerance: float, scales: _Scales
) -> SaddlePath:
    """The recursion of the module doc on the scaled ``X`` and ``y``; the times in the messages
    are in the units of the caller's data (``scales``)."""
    n, d = X.shape
    beta, s, t = np.zeros(d), np.zeros(d), 0.0
    times: list[float] = []
    betas, ss, grads, actives = [beta], [s], [], [np.zeros(d, dtype=bool)]
    status, horizon, message = STEP_CAP, np.nan, ""
    for _ in range(max_steps + 1):  # each pass appends a jump or leaves; the last one leaves
        g = X.T @ (X @ beta - y) / n
        grads.append(g)
        scale = _gradient_scale(X, y, beta)
        moving = np.abs(g) > tolerance * scale
        if not np.any(moving):
            status, horizon = REACHED_MINIMUM, np.inf
            message = (
                f"reached a global minimiser of the loss after {len(times)} jumps "
                f"(|grad L| <= {tolerance:g} x its terms)"
            )
            break
        target = -np.sign(g)
        distance = np.where(moving, 1.0 - target * s, np.inf)
        if np.any(distance[moving] <= tolerance):
            j = int(np.flatnonzero(moving & (distance <= tolerance))[0])
            status, horizon = UNDECIDED, t
            message = (
                f"coordinate {j} is at s_j = {s[j]:+g} with grad L pushing it outward at plateau "
                f"{len(times)}: beta^{len(times)} is not a constrained minimiser (rounding?)"
            )
            break
        delta = np.where(moving, distance / np.where(moving, np.abs(g), 1.0), np.inf)
        step = float(np.min(delta))
        if len(times) == max_steps:
            status, horizon = STEP_CAP, t + step
            message = (
                f"cap max_steps = {max_steps} reached; the path is known up to "
                f"t~ = {float(scales.time(np.array(t + step))):.6g}"
            )
            break
        hit = delta <= step * (1.0 + tolerance)
        t = t + step
        s = np.clip(s - step * np.where(moving, g, 0.0), -1.0, 1.0)
        s[hit] = target[hit]
        active = np.abs(s) == 1.0
        new, ok, why = _constrained(X, y, np.where(active, s, 0.0), tolerance)
        loss_old = float(np.sum((X @ beta - y) ** 2)) / (2 * n)
        loss_new = float(np.sum((X @ new - y) ** 2)) / (2 * n)
        if not ok or not loss_new < loss_old:
            status, horizon = UNDECIDED, t
            start = float(np.sum(y**2)) / (2 * n)  # L(0) > 0: grad L(0) != 0 moved beta
            reason = (
                why
                if not ok
                else (
                    f"the loss did not decrease ({loss_new / start:.6g} >= {loss_old / start:.6g}"
                    " times L(0))"
                )
            )
            message = (
                f"stopped at the jump t~ = {float(scales.time(np.array(t))):.6g} "
                f"(jump {len(times) + 1}): {reason}"
            )
            break
        times.append(t)
        betas.append(new)
        ss.append(s.copy())
        actives.append(active)
        beta = new
    B = np.array(betas)
    losses = np.sum((B @ X.T - y) ** 2, axis=1) / (2 * n)
    return SaddlePath(
        times=np.array(times, dtype=float),
        betas=B,
        supports=B != 0,
        signs=np.sign(B).astype(int),
        active=np.array(actives),
        s=np.array(ss),
        gradients=np.array(grads[: len(betas)]),
        losses=losses,
        horizon=float(horizon),
        status=status,
        message=message,
    )


# --------------------------------------------------------------------------- reading the path


def _times(path: SaddlePath, times) -> np.ndarray:
    """Finite accelerated times ``>= 0``."""
    if not isinstance(path, SaddlePath):
        raise ValueError(f"path must be a SaddlePath, got {type(path).__name__}")
    t = real_array(times, "times")
    if np.any(t < 0):
        raise ValueError(f"times must be >= 0 (accelerated times t~), got {np.min(t):g}")
    return t


def _plateaus(path: SaddlePath, t: np.ndarray) -> np.ndarray:
    """The plateau index of each time (right-continuous: a jump time belongs to the plateau it
    starts)."""
    return np.searchsorted(path.times, t, side="right")


def limit_path(path: SaddlePath, times) -> np.ndarray:
    """The limit ``beta(t~)`` at accelerated times ``times`` (any shape): (..., d).

    ``beta^k`` for ``t~_k <= t~ < t~_{k+1}`` (at a jump time itself the limit is not defined:
    the value of the plateau it starts is returned); NaN beyond :attr:`SaddlePath.horizon`.
    ``ValueError`` naming path or times (negative, non-finite) for bad input.
    """
    t = _times(path, times)
    out = path.betas[_plateaus(path, t)]
    return np.where((t >= path.horizon)[..., None], np.nan, out)


def plateau_at(path: SaddlePath, t) -> np.ndarray:
    """The limit ``beta`` (d,) at one accelerated time ``t`` (:func:`limit_path`)."""
    return limit_path(path, real(t, "t", low=0.0))


def limit_s(path: SaddlePath, times) -> np.ndarray:
    """The limit ``s(t~) = lim psi(t) / log(1/alpha)`` at accelerated times ``times``: (..., d),
    ``s(t~_k) - (t~ - t~_k) grad L(beta^k)`` on plateau ``k``, continuous and in ``[-1, 1]``;
    NaN beyond :attr:`SaddlePath.horizon`."""
    t = _times(path, times)
    k = _plateaus(path, t)
    start = np.concatenate([[0.0], path.times])[k]
    out = path.s[k] - (t - start)[..., None] * path.gradients[k]
    return np.where((t > path.horizon)[..., None], np.nan, out)


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
