"""Tests of analysis.implicit_bias: the potential of the GD flow on beta = u ⊙ v in regression,
its minimiser over the interpolators, and the alpha -> inf / alpha -> 0 limits.

Every check is against a computation that shares no code with the module: the derivation in
sympy, a direct integration of the GD flow ODE on (u, v), the normal equations, a separately
formulated basis-pursuit LP, quadrature and high-precision evaluations of the potential, and
the optimality conditions recomputed here from (beta, null space of X).
"""

from __future__ import annotations

import warnings
from functools import cache
from types import SimpleNamespace

import mpmath
import numpy as np
import pytest
import sympy as sp
from scipy.integrate import quad, solve_ivp
from scipy.linalg import null_space
from scipy.optimize import linprog

from analysis.implicit_bias import (
    FAILED,
    NOT_CERTIFIED,
    OPTIMAL,
    min_l1_interpolator,
    min_l2_interpolator,
    optimality_residual,
    potential,
    potential_parameters,
    woodworth_interpolator,
)

N, D = 5, 12


@cache
def problem(seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian X (5, 12) and generic targets y (the system is consistent, X of full row rank)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    y = rng.normal(size=N)
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


def signed_init(seed: int = 7) -> np.ndarray:
    """A (2, d) init [u(0); v(0)] of mixed signs, some coordinates with |v| > |u|."""
    rng = np.random.default_rng(seed)
    init = rng.normal(size=(2, D))
    assert np.min(np.abs(init[0] ** 2 - init[1] ** 2)) > 1e-2
    assert np.any(np.abs(init[1]) > np.abs(init[0])) and np.any(init < 0)
    return init


def initial_uv(init, d: int = D) -> tuple[np.ndarray, np.ndarray]:
    """(u(0), v(0)) of an init as the module documents it (alpha, a (d,) vector or [u; v])."""
    if np.ndim(init) == 0:
        return np.full(d, float(init)), np.zeros(d)
    init = np.asarray(init, dtype=float)
    if init.ndim == 1:
        return init.copy(), np.zeros_like(init)
    return init[0].copy(), init[1].copy()


def l2_by_normal_equations(X, y) -> np.ndarray:
    """beta = X^T (X X^T)^{-1} y."""
    return X.T @ np.linalg.solve(X @ X.T, y)


def l1_by_lp(X, y) -> tuple[float, np.ndarray]:
    """Basis pursuit as min sum t s.t. -t <= beta <= t, X beta = y (free beta): (optimum, beta)."""
    n, d = X.shape
    eye = np.eye(d)
    res = linprog(
        np.r_[np.zeros(d), np.ones(d)],
        A_ub=np.block([[eye, -eye], [-eye, -eye]]),
        b_ub=np.zeros(2 * d),
        A_eq=np.hstack([X, np.zeros((n, d))]),
        b_eq=y,
        bounds=[(None, None)] * d + [(0.0, None)] * d,
        method="highs",
    )
    assert res.status == 0
    return float(res.fun), res.x[:d]


def naive_potential(beta, k, a) -> float:
    """D(beta) straight from its definition (float64; fine at moderate k)."""
    x = beta / k
    return float(np.sum(k * (x * np.arcsinh(x) - np.sqrt(1 + x**2) + 1 - x * a)))


def own_residuals(X, y, beta, k, a) -> tuple[float, float]:
    """||X beta - y||_inf / ||y||_inf and the distance of asinh(beta/k) - a from range(X^T)
    (least squares), relative to ||asinh(beta/k) - a||_inf (computed here)."""
    w = np.arcsinh(beta / k) - a
    fit = X.T @ np.linalg.lstsq(X.T, w, rcond=None)[0]
    return (
        float(np.max(np.abs(X @ beta - y)) / np.max(np.abs(y))),
        float(np.max(np.abs(w - fit)) / np.max(np.abs(w))),
    )


# --------------------------------------------------------------------------- the derivation


def test_sympy_conserved_quantity():
    """d/dt (u^2 - v^2) = 0 along du/dt = -g v, dv/dt = -g u."""
    u, v, g = sp.symbols("u v g", real=True)
    assert sp.simplify(2 * u * (-g * v) - 2 * v * (-g * u)) == 0


@pytest.mark.parametrize("branch", ["u2 > v2", "v2 > u2"])
@pytest.mark.parametrize("sign", [1, -1])
def test_sympy_hyperbolic_parametrisation(branch, sign):
    """(u, v) = s sqrt(2k) (cosh psi, sinh psi) (or sinh, cosh) with psi' = -g reproduces
    du/dt = -g v, dv/dt = -g u, and beta = u v = k sinh(2 psi), u^2 - v^2 = +-2k."""
    t = sp.symbols("t", real=True)
    k = sp.symbols("k", positive=True)
    psi, g = sp.Function("psi")(t), sp.Function("g")(t)
    c = sp.sqrt(2 * k)
    first, second = (sp.cosh, sp.sinh) if branch == "u2 > v2" else (sp.sinh, sp.cosh)
    u, v = sign * c * first(psi), sign * c * second(psi)
    flow = {sp.Derivative(psi, t): -g}
    assert sp.simplify(sp.diff(u, t).subs(flow) + g * v) == 0
    assert sp.simplify(sp.diff(v, t).subs(flow) + g * u) == 0
    assert sp.simplify((u * v - k * sp.sinh(2 * psi)).rewrite(sp.exp)) == 0
    expected = 2 * k if branch == "u2 > v2" else -2 * k
    assert sp.simplify((u**2 - v**2 - expected).rewrite(sp.exp)) == 0


def test_sympy_h_is_convex_with_derivative_asinh():
    """h(x) = x asinh x - sqrt(1 + x^2) + 1: h(0) = 0, h' = asinh, h'' = 1/sqrt(1 + x^2) > 0,
    and its conjugate sup_x (z x - h(x)), attained at h'(x) = z, i.e. x = sinh z, is
    cosh z - 1 (the dual the solver minimises; checked at 40 digits on a grid of z)."""
    x = sp.symbols("x", real=True)
    h = x * sp.asinh(x) - sp.sqrt(1 + x**2) + 1
    assert h.subs(x, 0) == 0
    assert sp.simplify(sp.diff(h, x) - sp.asinh(x)) == 0
    second = sp.diff(h, x, 2)
    assert sp.simplify(second - 1 / sp.sqrt(1 + x**2)) == 0
    assert second.is_positive
    for z in (-7.5, -1.0, -0.01, 0.0, 0.3, 2.0, 12.0):
        zz = sp.Float(z, 40)
        value = (zz * x - h).subs(x, sp.sinh(zz)).evalf(40)
        assert abs(value - (sp.cosh(zz) - 1)) <= 1e-30 * sp.cosh(zz)


def test_parameters_match_the_hyperbolic_coordinates():
    """k = |u^2 - v^2| / 2 and a = asinh(u v / k) = 2 psi(0), psi(0) recovered from the
    parametrisation of each coordinate's branch (any signs)."""
    init = signed_init()
    u, v = init
    k, a = potential_parameters(init)
    np.testing.assert_allclose(k, np.abs(u**2 - v**2) / 2, rtol=1e-14)
    np.testing.assert_allclose(a, np.arcsinh(u * v / (np.abs(u**2 - v**2) / 2)), rtol=1e-12)
    for j in range(D):
        big, small = (u[j], v[j]) if abs(u[j]) > abs(v[j]) else (v[j], u[j])
        psi0 = float(mpmath.atanh(mpmath.mpf(small) / mpmath.mpf(big)))
        assert a[j] == pytest.approx(2 * psi0, rel=1e-13, abs=1e-15)
        c = np.sqrt(2 * k[j]) * np.sign(big)
        assert big == pytest.approx(c * np.cosh(psi0), rel=1e-13)
        assert small == pytest.approx(c * np.sinh(psi0), rel=1e-12, abs=1e-14)
    k_alpha, a_alpha = potential_parameters(0.3, D)
    np.testing.assert_array_equal(a_alpha, 0.0)
    np.testing.assert_allclose(k_alpha, 0.045, rtol=1e-15)


# --------------------------------------------------------------------------- the potential


@pytest.mark.parametrize("init", [0.5, 2.0, "signed"])
def test_potential_is_the_integral_of_its_gradient(init):
    """D(beta) = D(beta0) + sum_j int_{beta0_j}^{beta_j} (asinh(s / k_j) - a_j) ds, with
    D(beta0) = sum_j k_j (1 - cosh a_j) (quadrature, formulas computed here)."""
    init = signed_init() if init == "signed" else init
    u, v = initial_uv(init)
    k, a = np.abs(u**2 - v**2) / 2, np.arcsinh(u * v / (np.abs(u**2 - v**2) / 2))
    beta0 = u * v
    beta = np.random.default_rng(3).normal(size=D) * 2
    integral = sum(
        quad(lambda s, j=j: np.arcsinh(s / k[j]) - a[j], beta0[j], beta[j], epsabs=1e-13)[0]
        for j in range(D)
    )
    expected = float(np.sum(k * (1 - np.cosh(a)))) + integral
    assert potential(beta, init) == pytest.approx(expected, rel=1e-11, abs=1e-12)
    assert potential(beta0, init) == pytest.approx(float(np.sum(k * (1 - np.cosh(a)))), rel=1e-12)


@pytest.mark.parametrize("alpha", [1e-3, 1e3, 1e6])
def test_potential_accurate_at_extreme_k(alpha):
    """D at small and large k against 50-digit mpmath (at large k, x asinh x and
    sqrt(1 + x^2) - 1 cancel in float64)."""
    beta = np.random.default_rng(4).normal(size=D)
    mpmath.mp.dps = 50
    k = mpmath.mpf(alpha) ** 2 / 2
    exact = mpmath.fsum(
        k * (x * mpmath.asinh(x) - mpmath.sqrt(1 + x**2) + 1)
        for x in (mpmath.mpf(float(b)) / k for b in beta)
    )
    assert potential(beta, alpha) == pytest.approx(float(exact), rel=1e-13)


# --------------------------------------------------------------------------- against the flow


def integrate_flow(X, y, init, t_max: float = 20000.0):
    """GD flow du/dt = -g v, dv/dt = -g u, g = X^T (X u v - y) / n (LSODA, rtol 1e-12: the
    small-alpha flow is stiff), stopped once the loss is below 1e-24 (the event must fire)."""
    n, d = X.shape
    u0, v0 = initial_uv(init)

    def field(_, z):
        u, v = z[:d], z[d:]
        g = X.T @ (X @ (u * v) - y) / n
        return np.concatenate([-g * v, -g * u])

    def small_loss(_, z):
        r = X @ (z[:d] * z[d:]) - y
        return np.log10(max(float(r @ r) / (2 * n), 1e-300)) + 24

    small_loss.terminal = True  # type: ignore[attr-defined]
    sol = solve_ivp(
        field,
        (0.0, t_max),
        np.concatenate([u0, v0]),
        method="LSODA",
        rtol=1e-12,
        atol=1e-14,
        events=small_loss,
    )
    assert sol.status == 1  # stopped by the loss event, not by t_max
    u, v = sol.y[:d, -1], sol.y[d:, -1]
    return u, v, u0, v0


@cache
def flow_distance(case) -> tuple[float, float, float]:
    """(relative distance flow limit vs woodworth_interpolator, final loss, drift of u^2 - v^2)."""
    X, y = problem()
    init = signed_init() if case == "signed" else case
    u, v, u0, v0 = integrate_flow(X, y, init)
    beta = u * v
    result = woodworth_interpolator(X, y, init)
    assert result.status == OPTIMAL
    r = X @ beta - y
    drift = float(np.max(np.abs((u**2 - v**2) - (u0**2 - v0**2))))
    distance = float(np.linalg.norm(beta - result.beta) / np.linalg.norm(result.beta))
    return distance, float(r @ r) / (2 * N), drift


@pytest.mark.parametrize("case", [0.1, 0.5, 1.0, 3.0, "signed"])
def test_flow_converges_to_the_woodworth_interpolator(case):
    """The integrated GD flow ends at woodworth_interpolator's beta (relative distance < 1e-6)
    with the loss ~0 and u^2 - v^2 conserved."""
    distance, loss, drift = flow_distance(case)
    assert loss < 1e-23
    assert drift < 1e-9
    assert distance < 1e-6


def test_flow_limit_is_not_the_l2_or_l1_interpolator():
    """At alpha = 0.5 the flow's limit is far from both limits (the test above is not passing
    because every interpolator looks alike)."""
    X, y = problem()
    beta = woodworth_interpolator(X, y, 0.5).beta
    assert np.linalg.norm(beta - l2_by_normal_equations(X, y)) > 1e-2
    assert np.linalg.norm(beta - l1_by_lp(X, y)[1]) > 1e-2


# --------------------------------------------------------------------------- the limits


def test_min_l2_interpolator_matches_the_normal_equations():
    X, y = problem()
    result = min_l2_interpolator(X, y)
    assert result.status == OPTIMAL and result.criterion == "l2"
    np.testing.assert_allclose(result.beta, l2_by_normal_equations(X, y), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(X.T @ result.lam, result.beta, rtol=1e-12, atol=1e-14)


def test_large_alpha_tends_to_the_min_l2_interpolator():
    """||beta(alpha) - X^+ y|| decreases like alpha^-4 (k h(x / k) = x^2 / (2k) + O(k^-3))."""
    X, y = problem()
    reference = l2_by_normal_equations(X, y)
    errors = []
    for alpha in (10.0, 1e2, 1e3):
        result = woodworth_interpolator(X, y, alpha)
        assert result.status == OPTIMAL
        errors.append(np.linalg.norm(result.beta - reference) / np.linalg.norm(reference))
    assert errors[2] < 1e-12
    for coarse, fine in zip(errors, errors[1:], strict=False):
        assert fine < coarse / 1e3  # alpha^-4: a factor 1e4 per decade


def test_min_l1_interpolator_matches_an_independent_lp():
    X, y = problem()
    optimum, reference = l1_by_lp(X, y)
    result = min_l1_interpolator(X, y)
    assert result.status == OPTIMAL and result.criterion == "l1"
    assert np.sum(np.abs(result.beta)) == pytest.approx(optimum, rel=1e-10)
    np.testing.assert_allclose(result.beta, reference, atol=1e-8)
    assert np.max(np.abs(X.T @ result.lam)) <= 1 + 1e-10


#: Scales of X and of y: beta(s X, t y) = beta(X, y) t / s for both limits.
SCALES = (1e-150, 1e-60, 2.0**-40, 1e-9, 1.0, 1e9, 2.0**40, 1e60, 1e150)


def test_min_l1_interpolator_is_scale_covariant():
    """Basis pursuit is covariant, beta(s X, t y) = beta(X, y) t / s and lam(s X, t y) =
    lam / s: at every pair of scales (y 1e-9 was 19% off with status 1, y 1e50 a HiGHS model
    error, X 1e12 a residual of 1) the solution is the unscaled one to 1e-9, certified."""
    X, y = problem()
    base = min_l1_interpolator(X, y)
    optimum, _ = l1_by_lp(X, y)
    for sx in SCALES:
        for sy in SCALES:
            result = min_l1_interpolator(X * sx, y * sy)
            assert result.status == OPTIMAL, (sx, sy, result.message)
            np.testing.assert_allclose(result.beta / sy * sx, base.beta, rtol=0, atol=1e-9)
            np.testing.assert_allclose(result.lam * sx, base.lam, rtol=1e-9, atol=1e-12)
            assert np.sum(np.abs(result.beta)) / sy * sx == pytest.approx(optimum, rel=1e-9)


def test_min_l2_interpolator_is_scale_covariant():
    """beta(s X, t y) = beta t / s and lam(s X, t y) = lam t / s^2 wherever both are floats."""
    X, y = problem()
    base = min_l2_interpolator(X, y)
    for sx in SCALES:
        for sy in SCALES:
            if not 1e-290 < sy / sx**2 < 1e290:
                continue  # lam beyond float64: test_interpolators_beyond_float64_fail
            result = min_l2_interpolator(X * sx, y * sy)
            assert result.status == OPTIMAL, (sx, sy, result.message)
            np.testing.assert_allclose(result.beta / sy * sx, base.beta, rtol=1e-11)
            np.testing.assert_allclose(result.lam / sy * sx**2, base.lam, rtol=1e-11)


def test_interpolators_beyond_float64_fail():
    """At X 1e-160 the l2 dual is ~1e320 (it was returned as inf and NaN with status 0): the
    status is FAILED and beta, lam are NaN; so for a beta beyond float64 in both limits."""
    X, y = problem()
    for solve, scale_x, scale_y, name in (
        (min_l2_interpolator, 1e-160, 1.0, "lam"),
        (min_l2_interpolator, 1e-200, 1e200, "beta"),
        (min_l1_interpolator, 1e-200, 1e200, "beta"),
        (min_l1_interpolator, 1e200, 1e-200, "beta"),
    ):
        result = solve(X * scale_x, y * scale_y)
        assert result.status == FAILED, (solve.__name__, scale_x, scale_y)
        assert f"{name} is outside float64" in result.message
        assert np.all(np.isnan(result.beta)) and np.all(np.isnan(result.lam))


def test_woodworth_at_extreme_target_scales_keeps_quiet_and_honest():
    """Targets 1e300 (the line search's merit overflowed, with a RuntimeWarning per step) are
    certified without a warning; 1e307, where the dual objective itself leaves float64, is
    reported not certified; targets whose row-space coefficients overflow (X 1e-20, y 1e300)
    have no finite interpolator: FAILED."""
    X, y = problem()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for alpha in (1e-3, 1.0, 1e3):
            result = woodworth_interpolator(X, y * 1e300, alpha)
            assert result.status == OPTIMAL, result.message
            assert np.max(np.abs(X @ result.beta - y * 1e300)) <= 1e-9 * 1e300 * np.max(abs(y))
        assert woodworth_interpolator(X, y * 1e307, 1.0).status == NOT_CERTIFIED
        failed = woodworth_interpolator(X * 1e-20, y * 1e300, 1.0)
    assert failed.status == FAILED and "outside float64" in failed.message
    assert np.all(np.isnan(failed.beta)) and np.all(np.isnan(failed.lam))


def unique_l1_certificate(X, beta) -> float:
    """The largest |X^T lam| off the support of beta, lam solving X_J^T lam = sign(beta_J) on a
    support of n columns: < 1 (with X_J invertible) certifies the unique basis-pursuit solution."""
    J = np.flatnonzero(np.abs(beta) > 1e-9)
    assert J.size == X.shape[0]
    assert np.linalg.cond(X[:, J]) < 1e6
    lam = np.linalg.solve(X[:, J].T, np.sign(beta[J]))
    off = np.setdiff1d(np.arange(X.shape[1]), J)
    return float(np.max(np.abs(X[:, off].T @ lam)))


def test_small_alpha_tends_to_the_min_l1_interpolator():
    """As alpha shrinks the l1 norm of beta(alpha) decreases monotonically to the LP optimum
    (never below it: every beta(alpha) interpolates), and beta(alpha) -> the LP solution, which
    is unique here (certified independently)."""
    X, y = problem()
    optimum, reference = l1_by_lp(X, y)
    assert unique_l1_certificate(X, reference) < 0.99
    gaps, distances = [], []
    for alpha in (1e-1, 1e-2, 1e-3):
        result = woodworth_interpolator(X, y, alpha)
        assert result.status == OPTIMAL
        gaps.append(np.sum(np.abs(result.beta)) - optimum)
        distances.append(np.linalg.norm(result.beta - reference) / np.linalg.norm(reference))
    assert min(gaps) > 0
    assert gaps[0] > gaps[1] > gaps[2]
    assert distances[0] > distances[1] > distances[2]
    assert gaps[2] < 5e-3 * optimum
    assert distances[2] < 0.05


# --------------------------------------------------------------------------- certification


@pytest.mark.parametrize("init", [1e-3, 0.1, 1.0, 1e3, "signed"])
def test_residuals_of_the_solution_are_tiny(init):
    """Both residuals, recomputed here by least squares, are at rounding level."""
    X, y = problem()
    init = signed_init() if init == "signed" else init
    result = woodworth_interpolator(X, y, init)
    assert result.status == OPTIMAL and result.residual <= 1e-12
    u, v = initial_uv(init)
    k, a = np.abs(u**2 - v**2) / 2, np.arcsinh(u * v / (np.abs(u**2 - v**2) / 2))
    primal, stationarity = own_residuals(X, y, result.beta, k, a)
    assert primal < 1e-12 and stationarity < 1e-10
    assert max(optimality_residual(X, y, result.beta, init)) < 1e-12
    np.testing.assert_allclose(X.T @ result.lam, np.arcsinh(result.beta / k) - a, atol=1e-9)


def test_residual_detects_a_perturbed_interpolator():
    """beta + t N (N in the null space of X) still interpolates but is not stationary."""
    X, y = problem()
    beta = woodworth_interpolator(X, y, 1.0).beta
    direction = null_space(X)[:, 0]
    for t in (1e-6, 1e-3, 1e-1):
        primal, stationarity = optimality_residual(X, y, beta + t * direction, 1.0)
        assert primal < 1e-12
        assert stationarity > t / 100


@pytest.mark.parametrize("init", [0.1, 1.0, 3.0, "signed"])
def test_minimiser_certified_along_null_space_directions(init):
    """D(beta + t N) >= D(beta) for random null-space directions N and t of either sign (the
    potential computed here from its definition), with the first-order term ~0."""
    X, y = problem()
    init = signed_init() if init == "signed" else init
    u, v = initial_uv(init)
    k, a = np.abs(u**2 - v**2) / 2, np.arcsinh(u * v / (np.abs(u**2 - v**2) / 2))
    beta = woodworth_interpolator(X, y, init).beta
    basis = null_space(X)
    rng = np.random.default_rng(5)
    base = naive_potential(beta, k, a)
    for _ in range(10):
        direction = basis @ rng.normal(size=basis.shape[1])
        direction /= np.linalg.norm(direction)
        assert abs((np.arcsinh(beta / k) - a) @ direction) < 1e-10
        for t in (-1e-1, -1e-2, -1e-3, 1e-3, 1e-2, 1e-1):
            assert naive_potential(beta + t * direction, k, a) > base
            assert potential(beta + t * direction, init) > potential(beta, init)


@pytest.mark.parametrize("alpha", np.logspace(-3, 3, 13))
def test_certified_over_six_decades_of_alpha(alpha):
    X, y = problem(2)
    result = woodworth_interpolator(X, y, alpha)
    assert result.status == OPTIMAL, result.message
    assert result.iterations <= 30
    k = alpha**2 / 2
    primal, stationarity = own_residuals(X, y, result.beta, k, 0.0)
    assert primal < 1e-12 and stationarity < 1e-10


def test_random_problems_of_every_scale():
    """40 random consistent systems (n up to 30, d up to 80, some with a dependent row, X scaled
    by 10^[-3, 3]), each with a scalar, a vector and a signed init of scale 10^[-3, 3]: every
    solve is certified, and the residuals recomputed here agree (the primal one against the
    size of its terms, max(|y|, |X| |beta|): a signed init of large scale makes X beta0 far
    larger than y)."""
    for seed in range(40):
        rng = np.random.default_rng(100 + seed)
        n = int(rng.integers(1, 30))
        d = int(rng.integers(n, 80))
        X = rng.normal(size=(n, d)) * 10.0 ** rng.uniform(-3, 3)
        if seed % 5 == 0 and n > 2:
            X[-1] = X[0] + X[1]
        y = X @ rng.normal(size=d)
        scale = 10.0 ** rng.uniform(-3, 3, size=3)
        inits = [
            scale[0],
            (np.abs(rng.normal(size=d)) + 0.1) * scale[1],
            rng.normal(size=(2, d)) * scale[2],
        ]
        for init in inits:
            result = woodworth_interpolator(X, y, init)
            assert result.status == OPTIMAL, (seed, result.message)
            u, v = initial_uv(init, d)
            k, a = np.abs(u**2 - v**2) / 2, np.arcsinh(u * v / (np.abs(u**2 - v**2) / 2))
            beta = result.beta
            terms = max(np.max(np.abs(y)), np.max(np.abs(X) @ np.abs(beta)))
            assert np.max(np.abs(X @ beta - y)) / terms < 1e-12
            w = np.arcsinh(beta / k) - a
            fit = X.T @ np.linalg.lstsq(X.T, w, rcond=None)[0]
            size = max(np.max(np.abs(np.arcsinh(beta / k))), np.max(np.abs(a)))
            assert np.max(np.abs(w - fit)) / size < 1e-11


def test_dependent_rows_and_tall_systems():
    """A repeated equation changes nothing; with d < n and full column rank the interpolator is
    the unique solution of X beta = y."""
    X, y = problem()
    doubled = woodworth_interpolator(np.vstack([X, X[:2]]), np.r_[y, y[:2]], 0.3)
    assert doubled.status == OPTIMAL
    np.testing.assert_allclose(doubled.beta, woodworth_interpolator(X, y, 0.3).beta, atol=1e-12)
    rng = np.random.default_rng(6)
    tall = rng.normal(size=(8, 3))
    truth = rng.normal(size=3)
    for solve in (woodworth_interpolator, min_l1_interpolator, min_l2_interpolator):
        args = (
            (tall, tall @ truth, 0.2) if solve is woodworth_interpolator else (tall, tall @ truth)
        )
        result = solve(*args)
        assert result.status == OPTIMAL
        np.testing.assert_allclose(result.beta, truth, rtol=1e-9, atol=1e-12)


def test_data_object_and_positional_init():
    """An object with .X and .y is read as the data; init then comes second or by keyword."""
    X, y = problem()
    data = SimpleNamespace(X=X, y=y)
    expected = woodworth_interpolator(X, y, 0.7).beta
    np.testing.assert_array_equal(woodworth_interpolator(data, 0.7).beta, expected)
    np.testing.assert_array_equal(woodworth_interpolator(data, init=0.7).beta, expected)
    np.testing.assert_array_equal(min_l2_interpolator(data).beta, min_l2_interpolator(X, y).beta)
    np.testing.assert_array_equal(min_l1_interpolator(data).beta, min_l1_interpolator(X, y).beta)


def test_iteration_cap_is_reported():
    """Stopped after one Newton step at alpha = 1e-3, the result says it is not certified."""
    X, y = problem()
    result = woodworth_interpolator(X, y, 1e-3, max_iterations=1)
    assert result.status == NOT_CERTIFIED
    assert result.iterations == 1
    assert result.residual > 1e-10
    assert "max_iterations" in result.message


# --------------------------------------------------------------------------- bad input


def test_degenerate_init_is_refused():
    """u_j(0)^2 = v_j(0)^2 (the engine's balanced init u = v, or u = -v) at one coordinate."""
    X, y = problem()
    for flip in (1.0, -1.0):
        init = signed_init().copy()
        init[1, 3] = flip * init[0, 3]
        with pytest.raises(ValueError, match="init.*orthant"):
            woodworth_interpolator(X, y, init)
        with pytest.raises(ValueError, match="init"):
            potential_parameters(init)


@pytest.mark.parametrize(
    "X, y, init, name",
    [
        (np.full((N, D), np.nan), np.ones(N), 1.0, "X"),
        (np.ones(D), np.ones(N), 1.0, "X"),
        ("X", np.ones(N), 1.0, "X"),
        (None, np.ones(N + 1), 1.0, "y"),
        (None, np.r_[np.ones(N - 1), np.inf], 1.0, "y"),
        (None, None, 0.0, "init"),
        (None, None, -1.0, "init"),
        (None, None, np.inf, "init"),
        (None, None, True, "init"),
        (None, None, np.ones(D + 1), "init"),
        (None, None, -np.ones(D), "init"),
        (None, None, np.ones((3, D)), "init"),
        (None, None, np.full((2, D), np.nan), "init"),
        (None, None, None, "init"),
    ],
)
def test_bad_input_names_the_parameter(X, y, init, name):
    X0, y0 = problem()
    X = X0 if X is None else X
    y = y0 if y is None else y
    with pytest.raises(ValueError, match=name):
        woodworth_interpolator(X, y, init)


def test_inconsistent_system_is_refused():
    """More equations than unknowns and random targets: no interpolator exists."""
    rng = np.random.default_rng(8)
    X, y = rng.normal(size=(8, 3)), rng.normal(size=8)
    for call in (
        lambda: woodworth_interpolator(X, y, 1.0),
        lambda: min_l2_interpolator(X, y),
        lambda: min_l1_interpolator(X, y),
    ):
        with pytest.raises(ValueError, match="X, y.*cannot be interpolated"):
            call()


def test_other_bad_arguments():
    X, y = problem()
    with pytest.raises(ValueError, match="tolerance"):
        woodworth_interpolator(X, y, 1.0, tolerance=0.0)
    with pytest.raises(ValueError, match="max_iterations"):
        woodworth_interpolator(X, y, 1.0, max_iterations=-1)
    with pytest.raises(ValueError, match="y must not be given"):
        woodworth_interpolator(SimpleNamespace(X=X, y=y), y, 1.0)
    with pytest.raises(ValueError, match="beta"):
        potential(np.ones(D + 1), signed_init())
    with pytest.raises(ValueError, match="beta"):
        optimality_residual(X, y, np.full(D, np.nan), 1.0)
    with pytest.raises(ValueError, match="d must be given"):
        potential_parameters(1.0)
