"""Tests of analysis.margin_programs.quasi_norm: KKT points of the depth-L max-margin program
``min sum_j |beta_j|^(2/L)`` s.t. ``y_i <beta, x_i> >= 1`` (docs/theory.md §10).

Every check is against a computation written here: an LP (scipy's linprog) and
analysis.maxmargin at L = 2; a brute-force enumeration of the vertices of the feasible
polyhedron (itertools over supports and active sets, numpy's solve) for the global point and
for the set of KKT vertices; the KKT conditions in beta space with multipliers from NNLS;
central differences of the parameter-space Lagrangian; GD flows of the engine for the limit
direction and for Lyu & Li's smoothed margin.

The data sets have l1 max-margin solutions that are not 1-sparse (so that depth matters):

* ``FLOW``: positive entries, labels +1. A 1-sparse ``beta = t e_k`` needs ``t >= 1 / min_i
  z_ik``, at least 1 / 0.3 = 3.33 for every column (each column has an entry <= 0.3), while
  the dense l1 solution costs 1.64. Its global points are 3-, 2- and 1-sparse at L = 2, 3, 4.
* ``DIAG``: a diagonally dominant positive matrix (each column's smallest entry <= 0.2, so a
  1-sparse point costs >= 5 against ~2.04); the same vertex is global at L = 2 and 3.
* ``MIXED``: d = 4, n = 5, labels of both signs; every column of ``Z`` (rows ``y_i x_i``) has a
  negative entry or a zero, so no 1-sparse point is feasible at all.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
from scipy.optimize import linprog, nnls
from scipy.special import logsumexp

import analysis.maxmargin as maxmargin
from analysis.angles import angle
from analysis.margin_programs import quasi_norm
from analysis.margin_programs.quasi_norm import kkt_check, kkt_points
from analysis.maxmargin import max_margin
from flows import Dataset, simulate

DATA = {
    "FLOW": (np.array([[0.8, 0.5, 0.3], [0.3, 0.9, 1.0], [0.7, 0.3, 0.7]]), np.ones(3)),
    "DIAG": (np.array([[1.0, 0.3, 0.1], [0.2, 1.0, 0.4], [0.3, 0.1, 1.0]]), np.ones(3)),
    "MIXED": (
        np.array(
            [
                [1.9, -1.2, 0.3, -0.3],
                [-1.1, -1.0, 0.0, 0.4],
                [-0.5, 0.1, 0.7, 0.3],
                [0.9, 0.5, 0.5, 1.8],
                [0.6, 0.1, 0.7, -0.9],
            ]
        ),
        np.array([1.0, -1.0, 1.0, -1.0, 1.0]),
    ),
}
NAMES = sorted(DATA)


def dataset(name: str) -> Dataset:
    return Dataset(*DATA[name])


def signed(name: str) -> np.ndarray:
    X, y = DATA[name]
    return y[:, None] * X


@functools.cache
def points(name: str, depth: int, starts: int = 4) -> tuple:
    return kkt_points(dataset(name), depth, starts=starts)


# --------------------------------------------------------------------------- references


@functools.cache
def brute_force(name: str, depth: int) -> tuple[list[np.ndarray], list[float]]:
    return vertices_of(signed(name), depth)


def feasible_vertices(Z: np.ndarray):
    """Every feasible vertex of ``{Z beta >= 1}`` (``|S|`` coordinates free, ``|S|`` active
    constraints, the rest 0), once per vertex system, so possibly repeated (singular systems
    judged with their columns scaled to largest entry 1)."""
    n, d = Z.shape
    for k in range(1, min(n, d) + 1):
        for S in itertools.combinations(range(d), k):
            for T in itertools.combinations(range(n), k):
                M = Z[np.ix_(T, S)]
                columns = np.max(np.abs(M), axis=0)
                if np.any(columns == 0) or np.linalg.cond(M / columns) > 1e10:
                    continue
                beta = np.zeros(d)
                beta[list(S)] = np.linalg.solve(M, np.ones(k))
                if np.min(Z @ beta) >= 1 - 1e-9:
                    yield beta


def vertices_of(Z: np.ndarray, depth: int) -> tuple[list[np.ndarray], list[float]]:
    """Every feasible vertex (:func:`feasible_vertices`), distinct, and its objective, sorted
    by objective."""
    q = 2.0 / depth
    found: list[np.ndarray] = []
    for beta in feasible_vertices(Z):
        if not any(np.allclose(beta, b, rtol=1e-9, atol=0) for b in found):
            found.append(beta)
    values = [float(np.sum(np.abs(b) ** q)) for b in found]
    order = np.argsort(values)
    return [found[i] for i in order], [values[i] for i in order]


def least_vertex(Z: np.ndarray, depth: int) -> tuple[np.ndarray, float]:
    """The feasible vertex of least objective (:func:`vertices_of` without the list)."""
    best, value = np.zeros(Z.shape[1]), np.inf
    for beta in feasible_vertices(Z):
        objective = float(np.sum(np.abs(beta) ** (2.0 / depth)))
        if objective < value:
            best, value = beta, objective
    return best, value


def is_kkt_vertex(Z: np.ndarray, beta: np.ndarray, depth: int) -> bool:
    """The beta-space KKT conditions: ``q sign(beta_j) |beta_j|^(q-1) = (Z_T^T nu)_j`` on the
    support with ``nu >= 0`` on the active constraints (NNLS), and at L = 2 ``|(Z^T nu)_j| <= 1``
    off the support (the l1 subgradient)."""
    q = 2.0 / depth
    S = np.flatnonzero(np.abs(beta) > 1e-12)
    T = np.flatnonzero(Z @ beta - 1 <= 1e-9)
    grad = q * np.sign(beta[S]) * np.abs(beta[S]) ** (q - 1)
    nu, res = nnls(Z[np.ix_(T, S)].T, grad)
    ok = res <= 1e-9 * np.linalg.norm(grad)
    if depth == 2:
        ok = ok and np.max(np.abs(Z[T].T @ nu)) <= 1 + 1e-9
    return bool(ok)


def balanced_theta(beta: np.ndarray, depth: int) -> np.ndarray:
    """(L, d) balanced parameters with product ``beta``: every layer ``|beta|^(1/L)``, the first
    carrying the sign."""
    theta = np.tile(np.abs(beta) ** (1.0 / depth), (depth, 1))
    theta[0] *= np.sign(beta)
    return theta


def lagrangian(theta: np.ndarray, lam: np.ndarray, Z: np.ndarray) -> float:
    """``||theta||^2 - sum_i lambda_i (z_i . prod_l theta_l - 1)``."""
    return float(np.sum(theta**2) - lam @ (Z @ np.prod(theta, axis=0) - 1.0))


def finite_difference_gradient(theta: np.ndarray, lam: np.ndarray, Z: np.ndarray) -> np.ndarray:
    step = 1e-6 * np.max(np.abs(theta))
    grad = np.zeros_like(theta)
    for index in np.ndindex(theta.shape):
        e = np.zeros_like(theta)
        e[index] = step
        grad[index] = (lagrangian(theta + e, lam, Z) - lagrangian(theta - e, lam, Z)) / (2 * step)
    return grad


def l1_linprog(Z: np.ndarray) -> np.ndarray:
    """``min ||beta||_1`` s.t. ``Z beta >= 1`` as an LP in ``(beta+, beta-)``."""
    n, d = Z.shape
    res = linprog(np.ones(2 * d), A_ub=-np.hstack([Z, -Z]), b_ub=-np.ones(n), method="highs")
    assert res.status == 0
    return res.x[:d] - res.x[d:]


# --------------------------------------------------------------------------- the data


@pytest.mark.parametrize("name", NAMES)
def test_data_have_dense_l1_solutions(name):
    """The premise of the data sets (module doc): the l1 solution is not 1-sparse, and every
    1-sparse feasible point (if any) costs more than it."""
    Z = signed(name)
    beta = l1_linprog(Z)
    assert np.sum(np.abs(beta) > 1e-9) >= 2
    for k in range(Z.shape[1]):
        if np.all(Z[:, k] > 0):
            assert 1.0 / np.min(Z[:, k]) > 1.5 * np.sum(np.abs(beta))
    if name == "MIXED":
        assert all(np.any(Z[:, k] <= 0) for k in range(Z.shape[1]))


# --------------------------------------------------------------------------- L = 2


@pytest.mark.parametrize("name", NAMES)
def test_depth_two_is_the_l1_max_margin_lp(name):
    """At L = 2 the program is the l1 max-margin LP: the global point equals a linprog solved
    here and analysis.maxmargin.max_margin(data, p=1), with the same normalised margin (the
    brute force shows the l1 solution is unique, so beta itself is compared)."""
    found = points(name, 2)
    vertices, values = brute_force(name, 2)
    assert values[1] > values[0] * (1 + 1e-9)  # a unique l1 solution
    first = found[0]
    assert first.status == quasi_norm.GLOBAL and first.kkt_residual <= 1e-10
    reference = max_margin(dataset(name), p=1)
    np.testing.assert_allclose(first.beta, l1_linprog(signed(name)), rtol=0, atol=1e-9)
    np.testing.assert_allclose(first.beta, reference.beta, rtol=0, atol=1e-9)
    np.testing.assert_allclose(first.beta, vertices[0], rtol=0, atol=1e-9)
    assert first.objective == pytest.approx(np.sum(np.abs(reference.beta)), rel=1e-12)
    assert first.normalized_margin == pytest.approx(reference.margin, rel=1e-12)
    # the only KKT points at L = 2 are the l1 solutions (the zero-coordinate condition)
    assert len(found) == 1


def test_depth_two_zero_coordinates_second_order():
    """At L = 2 the condition at zero coordinates is second order: along ``(w1_j, w2_j) =
    t (1, +-1)`` from 0 the Lagrangian changes by ``t^2 (2 -+ g_j)``, non-negative for the
    returned point and negative for an l1-suboptimal 1-sparse vertex whose own support is
    l1-stationary (which the first-order conditions alone would accept)."""
    Z = signed("FLOW")
    first = points("FLOW", 2)[0]
    theta = balanced_theta(first.beta, 2)
    for zero in np.flatnonzero(first.beta == 0):
        for sign in (1.0, -1.0):
            e = np.zeros_like(theta)
            e[0, zero], e[1, zero] = 1e-3, sign * 1e-3
            assert lagrangian(theta + e, first.dual, Z) >= lagrangian(theta, first.dual, Z) - 1e-15
    # beta = e_0 / 0.3: stationary on its support, a parameter-space first-order KKT point
    beta = np.array([1 / 0.3, 0.0, 0.0])
    check = kkt_check(dataset("FLOW"), 2, beta)
    assert check.kkt["stationarity"] <= 1e-12 and check.kkt["zero_coordinates"] > 0.1
    lam = check.dual
    theta = balanced_theta(beta, 2)
    assert np.max(np.abs(finite_difference_gradient(theta, lam, Z))) <= 1e-6
    e = np.zeros_like(theta)
    e[0, 2], e[1, 2] = 1e-3, 1e-3
    assert lagrangian(theta + e, lam, Z) < lagrangian(theta, lam, Z)


# --------------------------------------------------------------------------- L >= 3


@pytest.mark.parametrize("depth", [3, 4])
@pytest.mark.parametrize("name", NAMES)
def test_global_point_is_the_best_vertex(name, depth):
    """The certified global points are the best vertices of a brute-force enumeration written
    here (one, except FLOW at L = 4 where the three 1-sparse points e_k / 0.3 tie), with their
    objective and normalised margin."""
    found = points(name, depth)
    vertices, values = brute_force(name, depth)
    best = [b for b, value in zip(vertices, values, strict=True) if value <= values[0] * (1 + 1e-9)]
    assert len(best) == (3 if (name, depth) == ("FLOW", 4) else 1)
    assert values[len(best)] > values[0] * (1 + 1e-9)
    top = [p for p in found if p.status == quasi_norm.GLOBAL]
    assert found[: len(top)] == tuple(top) and len(top) == len(best), found[0].certificate
    for b in best:
        p = next(p for p in top if np.allclose(p.beta, b, rtol=0, atol=1e-9))
        assert p.objective == pytest.approx(values[0], rel=1e-12)
        assert p.normalized_margin == pytest.approx(values[0] ** (-depth / 2), rel=1e-12)


@pytest.mark.parametrize("depth", [3, 4])
@pytest.mark.parametrize("name", NAMES)
def test_kkt_points_are_the_kkt_vertices(name, depth):
    """The returned points are exactly the vertices that satisfy the beta-space KKT conditions
    (checked here by NNLS), all certified, sorted by objective, with non-negative multipliers
    on active constraints; a parameter-space Lagrangian whose central differences vanish at the
    balanced theta (relative 1e-6)."""
    Z = signed(name)
    found = points(name, depth)
    expected = [b for b in brute_force(name, depth)[0] if is_kkt_vertex(Z, b, depth)]
    assert len(found) == len(expected)
    for b in expected:
        assert any(np.allclose(p.beta, b, rtol=0, atol=1e-9) for p in found)
    objectives = [p.objective for p in found]
    assert objectives == sorted(objectives)
    for p in found:
        assert p.status in (quasi_norm.GLOBAL, quasi_norm.LOCAL_MINIMUM)
        assert p.kkt_residual <= 1e-10
        slack = Z @ p.beta - 1
        assert np.min(slack) == pytest.approx(0.0, abs=1e-12)
        assert np.min(p.dual) >= 0
        assert np.max(np.abs(p.dual * slack)) <= 1e-12 * np.sum(p.dual)
        theta = balanced_theta(p.beta, depth)
        assert np.allclose(np.prod(theta, axis=0), p.beta, rtol=1e-12, atol=0)
        gradient = finite_difference_gradient(theta, p.dual, Z)
        assert np.max(np.abs(gradient)) <= 1e-6 * np.max(np.abs(2 * theta))
        assert np.sum(p.dual) == pytest.approx(2 * p.objective, rel=1e-10)


@pytest.mark.parametrize("depth", [3, 4])
@pytest.mark.parametrize("name", NAMES)
def test_perturbed_points_have_large_residuals(name, depth):
    """kkt_check fits its own multipliers (NNLS): tiny at a returned point, at least 1e-4 after
    a relative perturbation of 1e-2 of the support; the direction of the point is what counts
    (a multiple has the same residual)."""
    data = dataset(name)
    rng = np.random.default_rng(0)
    for p in points(name, depth):
        assert kkt_check(data, depth, p.beta).kkt_residual <= 1e-10
        assert kkt_check(data, depth, 7.5 * p.beta).kkt_residual <= 1e-10
        if p.support.size < 2:
            continue  # a 1-sparse direction has no neighbour on its support
        wiggle = np.ones(p.beta.size)
        wiggle[p.support] += 1e-2 * rng.permutation((-1.0) ** np.arange(p.support.size))
        assert kkt_check(data, depth, p.beta * wiggle).kkt_residual >= 1e-4


def test_sparsity_grows_with_depth():
    """The support of the global point does not grow with L (measured: FLOW 3, 2, 1, 1, 1, 1 and
    DIAG 3, 3, 1, 1, 1, 1 for L = 2, 3, 4, 5, 6, 8; MIXED 4, 3, 2, 2, 2, 2)."""
    sizes = {
        name: [points(name, depth, starts=0)[0].support.size for depth in (2, 3, 4, 5, 6, 8)]
        for name in NAMES
    }
    assert sizes == {
        "DIAG": [3, 3, 1, 1, 1, 1],
        "FLOW": [3, 2, 1, 1, 1, 1],
        "MIXED": [4, 3, 2, 2, 2, 2],
    }


def test_non_vertex_kkt_point_by_newton():
    """On z = (1, 1) at L = 3, ``(1/2, 1/2)`` is a KKT point (the maximum of f on the face
    beta_1 + beta_2 = 1, not a local minimum): from a start near it the polish (Newton on the
    fixed support) lands on it; the global points are e_1 and e_2."""
    data = Dataset(np.array([[1.0, 1.0]]), np.ones(1))
    found = kkt_points(data, 3, points=[[0.52, 0.48]], starts=2)
    statuses = {tuple(np.round(p.beta, 12)): p.status for p in found}
    assert statuses == {(1.0, 0.0): "global", (0.0, 1.0): "global", (0.5, 0.5): "kkt"}
    middle = next(p for p in found if p.status == "kkt")
    assert middle.kkt_residual <= 1e-12 and middle.objective == pytest.approx(2 * 0.5 ** (2 / 3))


def test_without_enumeration_the_local_solves_find_the_global_point():
    """max_vertex_systems=0: no certificate ('skipped' in the certificate), the same best point
    from the local solves."""
    for name in NAMES:
        found = kkt_points(dataset(name), 3, max_vertex_systems=0)
        assert found[0].status == quasi_norm.LOCAL_MINIMUM
        assert "skipped" in found[0].certificate
        np.testing.assert_allclose(found[0].beta, points(name, 3)[0].beta, rtol=0, atol=1e-9)


def test_scale_of_the_data():
    """``kkt_points(s X) = kkt_points(X) / s`` (here s = 2^-40 and 1e9)."""
    X, y = DATA["MIXED"]
    base = points("MIXED", 3)
    for s in (2.0**-40, 1e9):
        scaled = kkt_points(Dataset(s * X, y), 3, starts=0)
        assert len(scaled) == len(base)
        for a, b in zip(scaled, base, strict=True):
            np.testing.assert_allclose(a.beta * s, b.beta, rtol=1e-10)
            assert a.status == b.status


@pytest.mark.parametrize("power", [-50, 50])
def test_column_scales(power):
    """A column of MIXED scaled by 10^power changes the program (its weight in f); the global
    point still matches the brute force, certified (relative comparisons: beta_0 ~ 10^-power)."""
    X, y = DATA["MIXED"]
    X = X.copy()
    X[:, 0] *= 10.0**power
    found = kkt_points(Dataset(X, y), 3, starts=2)
    vertices, values = vertices_of(y[:, None] * X, 3)
    assert found[0].status == quasi_norm.GLOBAL and found[0].kkt_residual <= 1e-10
    np.testing.assert_allclose(found[0].beta, vertices[0], rtol=1e-9, atol=0)
    assert found[0].objective == pytest.approx(values[0], rel=1e-12)


def test_public_entry_in_maxmargin():
    """analysis.maxmargin.kkt_points is the same program, listed in __all__."""
    assert "kkt_points" in maxmargin.__all__
    a = maxmargin.kkt_points(dataset("FLOW"), 3, starts=0)
    b = points("FLOW", 3)
    assert [p.status for p in a] == [p.status for p in b]
    np.testing.assert_allclose(a[0].beta, b[0].beta, rtol=0, atol=1e-12)


def test_input_checks():
    data = dataset("FLOW")
    with pytest.raises(ValueError, match="data"):
        kkt_points(Dataset(np.eye(2), np.array([0.5, 2.0]), task="regression"), 3)
    with pytest.raises(ValueError, match="data"):
        kkt_points(np.eye(2), 3)
    for bad in (1, 2.0, True, "3"):
        with pytest.raises(ValueError, match="depth"):
            kkt_points(data, bad)
    with pytest.raises(ValueError, match="starts"):
        kkt_points(data, 3, starts=-1)
    with pytest.raises(ValueError, match="seed"):
        kkt_points(data, 3, seed=1.5)
    with pytest.raises(ValueError, match="max_vertex_systems"):
        kkt_points(data, 3, max_vertex_systems=-1)
    for bad in (-1, 1.5, None, "5"):
        with pytest.raises(ValueError, match="max_kkt_vertices"):
            kkt_points(data, 3, max_kkt_vertices=bad)
    with pytest.raises(ValueError, match="points"):
        kkt_points(data, 3, points=[[1.0, -1.0, 0.0]])
    with pytest.raises(ValueError, match="points"):
        kkt_points(data, 3, points=[[1.0, 1.0]])
    with pytest.raises(ValueError, match="beta"):
        kkt_check(data, 3, [0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="beta"):
        kkt_check(data, 3, [1.0, 1.0])


# --------------------------------------------------------------------------- flows


def nearest(found, beta) -> tuple[int, float]:
    angles = [angle(beta, p.beta) for p in found]
    return int(np.argmin(angles)), float(np.min(angles))


def checkpoints(traj, levels) -> list[int]:
    """The first sample at which ``max_j log|beta_j|`` reaches each level."""
    top = np.max(traj.log_abs_beta, axis=1)
    return [int(np.argmax(top >= level)) for level in levels if np.max(top) >= level]


def gd_run(name: str, depth: int, alpha, t_max: float, clock: str, **options):
    return simulate(
        dataset(name), "gd", depth, alpha, t_max=t_max, clock=clock, loss="exponential", **options
    )


def test_gd_depth_three_converges_to_the_global_kkt_point():
    """GD (exponential loss, L = 3, alpha = 0.3) on FLOW approaches the global KKT point (not
    the l1 direction, 0.41 rad away): at the samples where max log|beta| reaches 2, 4, 6, 8
    (tau = 4.50, 4.90, 5.14, 5.26) the angle to it falls (measured 0.21, 0.070, 0.021, 0.0040;
    1.0e-3 at the last sample, tau = 5.305) and so does the KKT residual of the normalised
    beta(tau) (0.080, 0.043, 0.028, 0.012). The rescaled run ends just before its finite-time
    blow-up (the budget of 20,000 evaluations or the blow-up: the last sample is used); an
    original-clock run is the fallback."""
    found = points("FLOW", 3)
    best = found[0]
    assert angle(best.beta, max_margin(dataset("FLOW"), p=1).beta) > 0.3
    traj = gd_run("FLOW", 3, 0.3, 40.0, "rescaled", n_points=2001, max_nfev=20_000)
    marks = checkpoints(traj, (2.0, 4.0, 6.0, 8.0))
    if len(marks) < 4 or traj.status < -1:
        traj = gd_run("FLOW", 3, 0.3, 1e300, "original", n_points=2001)
        marks = checkpoints(traj, (2.0, 3.0, 4.0, 5.0))
    assert len(marks) >= 4
    angles = [angle(traj.direction[i], best.beta) for i in marks + [len(traj.t) - 1]]
    residuals = [kkt_check(dataset("FLOW"), 3, traj.direction[i]).kkt_residual for i in marks]
    assert all(np.diff(angles) < 0), angles
    assert all(np.diff(residuals) < 0), residuals
    assert nearest(found, traj.direction[-1])[0] == 0
    assert angles[-1] < 1e-2


SLOW_RUNS = {  # (data, init size): the status of the returned point GD approaches (measured)
    3: {("FLOW", 0.1): "global", ("DIAG", 0.3): "global", ("MIXED", 0.3): "global"},
    4: {
        ("FLOW", 0.1): "global",
        ("FLOW", 1.0): "local minimum",
        ("DIAG", 0.3): "local minimum",
        ("MIXED", 0.3): "local minimum",
        ("MIXED", 0.1): "global",
    },
}


@pytest.mark.slow
@pytest.mark.parametrize("depth", [3, 4])
def test_gd_converges_to_a_returned_point_slow(depth):
    """Longer runs (rescaled clock, up to the budget just before the blow-up), several inits
    with the signs of the global point, depths 3 and 4: the final direction is within 1e-2 of a
    returned certified KKT point and its residual is below 5e-2. At L = 4 which point depends on
    the init: from alpha = 0.3 on DIAG GD approaches the l1 vertex, a local minimum that is not
    global (its objective is 10 % above the global one), from alpha = 0.1 on FLOW and MIXED the
    global points (measured angles 3e-27 and 4e-3)."""
    for (name, size), status in SLOW_RUNS[depth].items():
        found = points(name, depth)
        alpha = sign_init(name, depth, size)
        traj = gd_run(name, depth, alpha, 300.0, "rescaled", n_points=2001, max_nfev=200_000)
        index, gap = nearest(found, traj.direction[-1])
        assert found[index].certified and gap < 1e-2, (name, size, gap)
        assert found[index].status == status, (name, size, found[index].status)
        assert kkt_check(dataset(name), depth, traj.direction[-1]).kkt_residual < 5e-2


def smoothed_margins(traj, data: Dataset) -> tuple[np.ndarray, np.ndarray]:
    """Lyu & Li's ``-log(n L(theta)) / ||theta||_2^L`` (L the mean exponential loss) at every
    sample, in logarithms, and whether ``n L < 1`` there (where it is to be monotone)."""
    Z = data.signed_features
    top = np.max(traj.log_abs_beta, axis=1, keepdims=True)
    scaled = np.where(traj.sign_beta == 0, 0.0, traj.sign_beta * np.exp(traj.log_abs_beta - top))
    margins = (scaled @ Z.T) * np.exp(top)  # (T, n); top stays below 700 on these runs
    log_n_loss = logsumexp(-margins, axis=1)
    shown = traj.loss > 1e-300  # the engine's mean loss, where representable, agrees
    np.testing.assert_allclose(
        np.log(data.n * traj.loss[shown]), log_n_loss[shown], rtol=1e-9, atol=1e-9
    )
    log_norm = 0.5 * logsumexp(2.0 * traj.log_abs_theta.reshape(len(traj.t), -1), axis=1)
    return -log_n_loss * np.exp(-traj.depth * log_norm), log_n_loss < 0


def sign_init(name: str, depth: int, size: float) -> np.ndarray:
    """(L, d) balanced init of magnitude ``size`` with the signs of the global point (its zeros
    taken positive), carried by the first layer."""
    signs = np.where(points(name, depth)[0].beta < 0, -1.0, 1.0)
    alpha = np.full((depth, signs.size), size)
    alpha[0] *= signs
    return alpha


@pytest.mark.parametrize("depth", [2, 3])
@pytest.mark.parametrize("name", NAMES)
def test_smoothed_margin_is_non_decreasing(name, depth):
    """Lyu & Li (2020): along gradient flow on a homogeneous model with the exponential loss,
    the smoothed margin ``log(1 / (n L)) / ||theta||^L`` does not decrease once ``n L < 1``.
    Checked on the samples of rescaled runs from alpha = 0.5 (signs of the global point), from
    where ``n L`` falls below 1 up to the run's end (the budget, just before the blow-up at
    L = 3), to rounding (1e-9 relative): it rises from below 0.01 to within 3 % of the Lyu-Li
    margin of the global KKT point, ``L^(-L/2) f^(-L/2)``, never above it."""
    data = dataset(name)
    t_max, n_points = (12.0, 241) if depth == 2 else (40.0, 2001)
    alpha = sign_init(name, depth, 0.5)
    traj = gd_run(name, depth, alpha, t_max, "rescaled", n_points=n_points, max_nfev=20_000)
    assert traj.status in (0, 1, -1)
    gamma, after = smoothed_margins(traj, data)
    assert np.sum(after) >= 20 and not after[0]
    g = gamma[after]
    assert np.all(np.diff(g) >= -1e-9 * np.abs(g[1:])), np.min(np.diff(g))
    ceiling = depth ** (-depth / 2) * points(name, depth)[0].objective ** (-depth / 2)
    assert g[-1] <= ceiling * (1 + 1e-9)
    assert g[0] < 0.1 * ceiling and g[-1] > 0.97 * ceiling


def test_many_kkt_vertices_are_capped_and_flagged():
    """n = 3, d = 40 at L = 3 has 4591 KKT vertices among its 12340 vertex systems (polishing
    and comparing all of them took 45 to 85 s): at most ``max_kkt_vertices`` of them are
    returned, flagged ``truncated``, and the global minimum is the brute-force one."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3, 40))
    y = np.sign(X @ rng.normal(size=40))
    found = kkt_points(Dataset(X, y), 3, starts=2)
    assert isinstance(found, tuple) and found.enumerated and found.truncated
    assert "max_kkt_vertices = 500" in found.message
    assert len(found) <= quasi_norm.MAX_KKT_VERTICES + 2 * (2 + 1) + 1  # local solves, minimum
    assert found[0].status == quasi_norm.GLOBAL
    vertex, value = least_vertex(y[:, None] * X, 3)
    np.testing.assert_allclose(found[0].beta, vertex, rtol=1e-9, atol=0)
    assert found[0].objective == pytest.approx(value, rel=1e-12)
    few = kkt_points(Dataset(X, y), 3, starts=0, max_kkt_vertices=3)
    assert few.truncated and len(few) <= 3 + 2 * (0 + 1) + 1
    np.testing.assert_allclose(few[0].beta, found[0].beta, rtol=1e-12, atol=0)


def test_every_kkt_vertex_below_the_cap():
    """Under the cap the list is complete (not truncated); a cap of exactly the count of KKT
    vertices keeps them all; skipping the enumeration says so."""
    data = dataset("MIXED")
    complete = points("MIXED", 3)
    assert complete.enumerated and not complete.truncated
    assert "every KKT vertex" in complete.message
    exact = kkt_points(data, 3, starts=4, max_kkt_vertices=len(complete))
    assert not exact.truncated and len(exact) == len(complete)
    skipped = kkt_points(data, 3, max_vertex_systems=0)
    assert not skipped.enumerated and not skipped.truncated and "skipped" in skipped.message
