"""Tests of analysis.maxmargin: the l2 / l1 max-margin references (docs/theory.md §10).

Optimality is certified independently of the solver's own bookkeeping: KKT conditions
recomputed here from (beta, lambda) for l2 (a convex QP: KKT <=> optimal), and for l1 strong
duality against a separately solved dual LP plus complementary slackness; closed forms on the
single example; and a brute-force comparison with 1,000 random separating directions.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

from analysis.maxmargin import (
    MaxMargin,
    angle,
    angle_to_set,
    l1_solution_set_single_example,
    max_margin,
    max_margin_of,
    normalized_margin,
)
from flows import Dataset, single_example

KKT_TOL = 1e-8
SEEDS = [0, 1, 2, 3]


def separable_data(seed: int, n: int = 12, d: int = 4, min_margin: float = 0.2):
    """Gaussian points labelled by a random teacher; points closer than ``min_margin`` to the
    teacher's hyperplane are discarded. Returns X (n, d), y (n,), teacher w."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    w /= np.linalg.norm(w)
    X = rng.normal(size=(20 * n, d))
    keep = np.abs(X @ w) >= min_margin
    X = X[keep][:n]
    assert X.shape == (n, d)
    return X, np.sign(X @ w), w


def data_cases():
    return [separable_data(s, n=5 + 4 * s, d=3 + s) for s in SEEDS]


# --------------------------------------------------------------------------- l2


@pytest.mark.parametrize("seed", SEEDS)
def test_l2_kkt(seed):
    """l2 max-margin: stationarity beta = sum_i lambda_i y_i x_i, lambda >= 0, primal
    feasibility y_i <beta, x_i> >= 1 and complementary slackness all hold to 1e-8."""
    X, y, _ = separable_data(seed, n=5 + 4 * seed, d=3 + seed)
    mm = max_margin(X, y, 2)
    Z = y[:, None] * X
    beta, lam = mm.beta, mm.dual
    slack = Z @ beta - 1.0
    assert np.max(np.abs(beta - Z.T @ lam)) <= KKT_TOL * max(1.0, np.max(np.abs(beta)))
    assert np.min(lam) >= -KKT_TOL
    assert np.min(slack) >= -KKT_TOL
    assert np.max(np.abs(lam * slack)) <= KKT_TOL * max(1.0, np.max(lam))
    assert mm.kkt_residual() <= KKT_TOL
    # the active constraints are tight, so the normalized margin is 1 / ||beta||
    assert mm.margin == pytest.approx(1.0 / np.linalg.norm(beta), rel=1e-10)
    np.testing.assert_allclose(mm.direction, beta / np.linalg.norm(beta), rtol=0, atol=1e-15)
    assert mm.unique is True and mm.p == 2
    assert set(mm.support) == set(np.flatnonzero(lam > 0))


# --------------------------------------------------------------------------- l1


@pytest.mark.parametrize("seed", SEEDS)
def test_l1_duality_and_complementary_slackness(seed):
    """l1 max-margin: ||beta||_1 equals the optimum of the dual LP
    max 1^T lambda s.t. ||Z^T lambda||_inf <= 1, lambda >= 0 (solved here separately) to 1e-8;
    beta is feasible; the returned multipliers satisfy Z^T lambda in d||beta||_1 and
    complementary slackness to 1e-8."""
    X, y, _ = separable_data(seed, n=5 + 4 * seed, d=3 + seed)
    mm = max_margin(X, y, 1)
    Z = y[:, None] * X
    n, d = Z.shape
    dual = linprog(
        -np.ones(n),
        A_ub=np.vstack([Z.T, -Z.T]),
        b_ub=np.ones(2 * d),
        bounds=[(0, None)] * n,
        method="highs",
    )
    assert dual.status == 0
    l1 = np.sum(np.abs(mm.beta))
    assert l1 == pytest.approx(-dual.fun, rel=KKT_TOL)
    slack = Z @ mm.beta - 1.0
    assert np.min(slack) >= -KKT_TOL
    lam = mm.dual
    assert np.min(lam) >= -KKT_TOL
    g = Z.T @ lam
    on = np.abs(mm.beta) > 1e-12
    assert np.all(np.abs(g[on] - np.sign(mm.beta[on])) <= KKT_TOL)
    assert np.all(np.abs(g) <= 1 + KKT_TOL)
    assert np.max(np.abs(lam * slack)) <= KKT_TOL * max(1.0, np.max(lam))
    assert mm.margin == pytest.approx(1.0 / l1, rel=1e-10)


# --------------------------------------------------------------------------- single example


def test_single_example_closed_forms():
    """Single example D_mu, 0 < mu_1 < ... < mu_d: the l1 max-margin is e_d / mu_d (unique),
    the l2 max-margin is mu / ||mu||^2 (direction mu / ||mu||)."""
    mu = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    data = single_example(mu)
    l1 = max_margin(data, p=1)
    np.testing.assert_allclose(l1.beta, np.eye(5)[4] / 5.0, rtol=0, atol=1e-14)
    np.testing.assert_allclose(l1.direction, np.eye(5)[4], rtol=0, atol=1e-14)
    assert l1.unique is True and l1.margin == pytest.approx(5.0, rel=1e-12)
    l2 = max_margin(data, p=2)
    np.testing.assert_allclose(l2.beta, mu / (mu @ mu), rtol=1e-12)
    np.testing.assert_allclose(l2.direction, mu / np.linalg.norm(mu), rtol=1e-12)
    assert l2.margin == pytest.approx(np.linalg.norm(mu), rel=1e-12)


def test_single_example_l1_ties_documented():
    """With ties in the largest mu_j the l1 solution set is the face conv{e_j / mu_max};
    max_margin returns one vertex of it and flags unique=False; the strict case is unique."""
    mu = np.array([1.0, 3.0, 2.0, 3.0])
    verts = l1_solution_set_single_example(mu)
    np.testing.assert_array_equal(verts, np.array([[0, 1 / 3, 0, 0], [0, 0, 0, 1 / 3]]))
    mm = max_margin(single_example(mu), 1)
    assert mm.unique is False
    assert any(np.allclose(mm.beta, v, rtol=0, atol=1e-14) for v in verts)
    assert angle_to_set(mm.beta, verts) == pytest.approx(0.0, abs=1e-12)
    # any convex combination of the vertices is optimal too: same l1 norm, feasible
    mid = 0.5 * (verts[0] + verts[1])
    assert mu @ mid == pytest.approx(1.0) and np.sum(np.abs(mid)) == pytest.approx(mm.norm)
    assert angle_to_set(mid, verts) == pytest.approx(0.0, abs=1e-12)
    assert angle_to_set(np.eye(4)[0], verts) == pytest.approx(np.pi / 2)
    assert l1_solution_set_single_example([1.0, 2.0, 3.0]).shape == (1, 3)


def test_l1_solution_set_of_a_tiny_mu():
    """The vertex 1/|mu_j| of a subnormal mu overflows: a ValueError naming mu (found by the
    fuzz test), not an infinite vertex; mu = 1e-300 still gives the finite vertex 1e300."""
    with pytest.raises(ValueError, match="mu"):
        l1_solution_set_single_example([2.2e-311])
    np.testing.assert_allclose(l1_solution_set_single_example([1e-300, -5e-301]), [[1e300, 0.0]])


# --------------------------------------------------------------------------- brute force


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("seed", [10, 11])
def test_beats_random_feasible_directions(p, seed):
    """The max-margin's normalized margin min_i y_i<beta,x_i>/||beta||_p is >= that of 1,000
    random separating directions (teacher + noise), and the best of them comes within 50 %."""
    X, y, w = separable_data(seed, n=8, d=5)
    mm = max_margin(X, y, p)
    rng = np.random.default_rng(seed + 100)
    found = []
    while len(found) < 1000:
        V = w + 0.4 * rng.normal(size=(4000, w.size))
        ok = np.min((y[:, None] * X) @ V.T, axis=0) > 0
        found.extend(V[ok])
    V = np.array(found[:1000])
    margins = np.min((y[:, None] * X) @ V.T, axis=0) / np.linalg.norm(V, ord=p, axis=1)
    assert np.all(margins > 0)
    assert np.max(margins) <= mm.margin * (1 + 1e-12)
    assert np.max(margins) >= 0.5 * mm.margin  # the comparison is not vacuous
    assert normalized_margin(mm.beta, X, y, p) == pytest.approx(mm.margin)


# --------------------------------------------------------------------------- errors & API


def test_non_separable_raises():
    """Non-separable data -> ValueError naming the data, for both p."""
    X = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0]])
    y = np.array([1.0, -1.0, 1.0])
    for p in (1, 2):
        with pytest.raises(ValueError, match="not linearly separable"):
            max_margin(X, y, p)


def test_bad_p_and_inputs_raise():
    """p not in {1, 2} -> ValueError naming 'p'; bad labels / shapes -> ValueError."""
    X, y, _ = separable_data(0, n=5, d=3)
    for p in (0, 3, np.inf, 1.5, True, "2"):
        with pytest.raises(ValueError, match="p must be"):
            max_margin(X, y, p)
    with pytest.raises(ValueError, match="p must be"):
        max_margin(X, y)
    with pytest.raises(ValueError, match="y must"):
        max_margin(X, 2 * y, 2)
    with pytest.raises(ValueError, match="y must"):
        max_margin(X, y[:-1], 2)
    with pytest.raises(ValueError, match="X must"):
        max_margin(X[0], y, 2)


def test_dataset_overloads_agree():
    """max_margin(data, p=p), max_margin(data, p) and max_margin_of(data, p) equal
    max_margin(X, y, p)."""
    X, y, _ = separable_data(1, n=9, d=4)
    data = Dataset(X, y)
    for p in (1, 2):
        ref = max_margin(X, y, p)
        for mm in (max_margin(data, p=p), max_margin(data, p), max_margin_of(data, p)):
            assert isinstance(mm, MaxMargin)
            np.testing.assert_allclose(mm.beta, ref.beta, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError):
        max_margin_of(X, 2)
    with pytest.raises(ValueError):
        max_margin(data, y, p=2)


def test_angle_robust():
    """angle: 0 for parallel, pi for opposite, pi/2 orthogonal, accurate for tiny angles
    (where arccos would return 0), nan for zero or non-finite vectors."""
    u = np.array([1.0, 2.0, 3.0])
    assert angle(u, 7 * u) == pytest.approx(0.0, abs=1e-15)
    assert angle(u, -u) == pytest.approx(np.pi, abs=1e-15)
    assert angle([1, 0], [0, 5]) == pytest.approx(np.pi / 2)
    assert angle([1, 0], [1, 1e-10]) == pytest.approx(1e-10, rel=1e-6)
    assert np.isnan(angle(u, np.zeros(3)))
    assert np.isnan(angle(u, [np.inf, 0, 0]))
    with pytest.raises(ValueError):
        angle(u, [1.0, 2.0])


# --------------------------------------------------------------------------- scales, cones


def test_angle_to_set_in_the_polar_cone():
    """angle_to_set: when u makes an obtuse angle with the whole cone (its projection is 0)
    the smallest angle is attained at a generator: pi for u = -e_1 and the ray e_1 (it used to
    say pi/2), 3 pi / 4 for (-1, -1) and the quadrant; nan for the zero cone."""
    assert angle_to_set([-1.0, 0.0], [[1.0, 0.0]]) == pytest.approx(np.pi)
    assert angle_to_set([-1.0, -1.0], [[1.0, 0.0], [0.0, 2.0]]) == pytest.approx(0.75 * np.pi)
    assert angle_to_set([0.0, 1.0], [[1.0, 0.0]]) == pytest.approx(np.pi / 2)
    assert angle_to_set([1.0, 1.0], [[1.0, 0.0], [0.0, 1.0]]) == pytest.approx(0.0, abs=1e-15)
    assert np.isnan(angle_to_set([1.0, 1.0], np.zeros((2, 2))))
    with pytest.raises(ValueError, match="vertices"):
        angle_to_set([1.0, 1.0], [[1.0, 0.0, 0.0]])


@pytest.mark.parametrize("scale", [1e-300, 1e-150, 1e150, 1e300])
def test_angle_and_margin_scale_invariant(scale):
    """angle and normalized_margin are scale-invariant in beta (no overflow of ||beta|| at
    1e300, no underflow at 1e-300)."""
    assert angle([scale, scale], [scale, 0.0]) == pytest.approx(np.pi / 4, rel=1e-14)
    assert angle_to_set([scale, scale], [[scale, 0.0]]) == pytest.approx(np.pi / 4, rel=1e-12)
    X, y, _ = separable_data(0, n=5, d=3)
    beta = max_margin(X, y, 2).beta
    for p in (1, 2):
        assert normalized_margin(scale * beta, X, y, p) == pytest.approx(
            normalized_margin(beta, X, y, p), rel=1e-12
        )


@pytest.mark.parametrize("scale", [1e-300, 1e-150, 1e-20, 1e20, 1e150, 1e300])
@pytest.mark.parametrize("p", [1, 2])
def test_max_margin_scale_equivariant(scale, p):
    """max_margin(s X, y) = max_margin(X, y) with beta / s (dual / s^2 for p = 2, / s for
    p = 1) at every scale where these are representable; otherwise a ValueError naming X, never
    a wrong answer (from 1e15 on an unscaled LP would call the data 'not separable')."""
    X, y, _ = separable_data(2, n=13, d=5)
    ref = max_margin(X, y, p)
    try:
        mm = max_margin(scale * X, y, p)
    except ValueError as exc:  # only the l2 duals (~ 1 / s^2) can leave float64
        assert p == 2 and abs(np.log10(scale)) > 200, exc
        assert "X" in str(exc) and "float64" in str(exc) and "separable" not in str(exc), exc
        return
    np.testing.assert_allclose(mm.direction, ref.direction, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(mm.beta * scale, ref.beta, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(mm.dual * scale**p, ref.dual, rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(mm.support, ref.support)
    assert mm.margin == pytest.approx(ref.margin * scale, rel=1e-9)
    assert mm.kkt_residual() < KKT_TOL


def test_angle_rejects_non_numeric():
    """angle names the offending argument."""
    with pytest.raises(ValueError, match=r"\bu\b"):
        angle("abc", [1.0])
    with pytest.raises(ValueError, match=r"\bv\b"):
        angle([1.0], ["x"])
