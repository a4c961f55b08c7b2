"""Tests of flows.closed_form.solutions: exact balanced GD / l-inf-SAM solutions (docs/theory.md §8).

Every closed form is checked against things that do not share its code:
(a) numerical integration of the reduced ODE with scipy's DOP853,
(b) a symbolic (sympy) version of the textbook formula, substituted into the ODE,
(c) hitting / blow-up times from quadrature, from solve_ivp events and from solve_ivp's
    failure at a singularity,
(d) the limits of Thm 3.2 (beta -> rho**L for odd L, 0 for even L, divergence above rho),
(e) input validation.
"""

from __future__ import annotations

import warnings
from dataclasses import FrozenInstanceError

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import quad, solve_ivp

from flows.closed_form.solutions import ClosedFormSolution, gd, linf_sam

MU = np.array([0.5, 1.0, 2.0])
RHO = 0.6
REGIMES = {"below": 0.5, "at": 1.0, "above": 1.5}  # alpha = factor * rho
DEPTHS = [1, 2, 3, 4, 5]
IVP = dict(method="DOP853", rtol=1e-12, atol=1e-14)


# --------------------------------------------------------------------------- references


def reduced_rhs(mu, rho, L):
    """Reduced field da/dtau = mu (a - rho sign(mu a^(L-1)))^(L-1) (rho = 0: GD)."""
    mu = np.asarray(mu, dtype=float)

    def f(_t, a):
        ap = a - rho * np.sign(mu * a ** (L - 1))
        return mu * ap ** (L - 1)

    return f


def quad_hit_time(mu, alpha, rho, L):
    """Time for a to go from alpha to 0 under da/dtau = -mu (rho - a)^(L-1) (even L)."""
    val, _ = quad(lambda a: 1.0 / (mu * (rho - a) ** (L - 1)), 0.0, alpha, epsabs=0, epsrel=1e-13)
    return val


def quad_blowup_time(mu, b0, L):
    """Time for b to go from b0 to infinity under db/dtau = mu b^(L-1) (L >= 3)."""
    val, _ = quad(lambda b: 1.0 / (mu * b ** (L - 1)), b0, np.inf, epsabs=0, epsrel=1e-13)
    return val


def independent_event_time(mu, alpha, rho, L):
    """First hit/blow-up time per coordinate, from quadrature only (inf if none)."""
    out = np.full(len(mu), np.inf)
    for j, (m, a0) in enumerate(zip(mu, alpha, strict=True)):
        if L >= 3 and a0 > rho:
            out[j] = quad_blowup_time(m, a0 - rho, L)
        elif L % 2 == 0 and a0 < rho:
            out[j] = quad_hit_time(m, a0, rho, L)
    return out


def solve(method, alpha, L, tau, mu=MU, rho=RHO):
    if method == "gd":
        return gd(mu, alpha, L, tau)
    return linf_sam(mu, alpha, rho, L, tau)


def alpha_for(regime, d=3):
    return np.full(d, REGIMES[regime] * RHO)


# --------------------------------------------------------------------------- (a) vs solve_ivp


@pytest.mark.parametrize("L", DEPTHS)
@pytest.mark.parametrize("regime", list(REGIMES))
@pytest.mark.parametrize("method", ["gd", "linf"])
def test_matches_solve_ivp(method, regime, L):
    alpha = alpha_for(regime)
    rho = 0.0 if method == "gd" else RHO
    t_event = independent_event_time(MU, alpha, rho, L).min()
    t_end = min(3.0, 0.9 * t_event)
    tau = np.linspace(0.0, t_end, 41)
    sol = solve(method, alpha, L, tau)
    ref = solve_ivp(reduced_rhs(MU, rho, L), (0.0, t_end), alpha, t_eval=tau, **IVP)
    assert ref.success
    a_ref = ref.y.T
    assert np.all(np.isfinite(sol.log_abs_a))
    rel = np.abs(sol.a - a_ref) / np.abs(a_ref)
    assert rel.max() <= 1e-8, rel.max()


@pytest.mark.parametrize("L", DEPTHS)
def test_matches_solve_ivp_mixed_alpha(L):
    # one coordinate per regime, plus very different mu's
    mu = np.array([0.3, 1.7, 4.0, 2.5])
    alpha = np.array([0.25, RHO, 0.9, 0.05])
    t_end = min(2.0, 0.9 * independent_event_time(mu, alpha, RHO, L).min())
    tau = np.linspace(0.0, t_end, 31)
    sol = linf_sam(mu, alpha, RHO, L, tau)
    ref = solve_ivp(reduced_rhs(mu, RHO, L), (0.0, t_end), alpha, t_eval=tau, **IVP)
    assert ref.success
    rel = np.abs(sol.a - ref.y.T) / np.abs(ref.y.T)
    assert rel.max() <= 1e-8, rel.max()


@pytest.mark.parametrize("L", DEPTHS)
@pytest.mark.parametrize("regime", list(REGIMES))
def test_event_times_match_quadrature(regime, L):
    alpha = alpha_for(regime)
    sol = linf_sam(MU, alpha, RHO, L, [0.0])
    expected = independent_event_time(MU, alpha, RHO, L)
    is_hit = (L % 2 == 0) & (alpha < RHO)
    is_blow = (L >= 3) & (alpha > RHO)
    assert np.array_equal(np.isfinite(sol.hit_time), is_hit)
    assert np.array_equal(np.isfinite(sol.blowup_time), is_blow)
    assert np.all(np.isnan(sol.hit_time[~is_hit]))
    assert np.all(sol.blowup_time[~is_blow] == np.inf)
    if is_hit.any():
        np.testing.assert_allclose(sol.hit_time[is_hit], expected[is_hit], rtol=1e-10)
    if is_blow.any():
        np.testing.assert_allclose(sol.blowup_time[is_blow], expected[is_blow], rtol=1e-10)
    g = gd(MU, alpha, L, [0.0])
    assert np.all(np.isnan(g.hit_time))
    if L >= 3:
        np.testing.assert_allclose(
            g.blowup_time,
            [quad_blowup_time(m, a, L) for m, a in zip(MU, alpha, strict=True)],
            rtol=1e-10,
        )
    else:
        assert np.all(g.blowup_time == np.inf)


# --------------------------------------------------------------------------- (b) sympy

TAU, MU_S, AL_S, RHO_S = sp.symbols("tau mu alpha rho", positive=True)


def sympy_solution(method, regime, L):
    """Textbook closed form a(tau) (not log space) and its event time, as sympy expressions."""
    k = L - 2
    if method == "gd" or L == 1:
        b0, shift = AL_S, 0
    elif regime == "at":
        return RHO_S + 0 * TAU, None
    elif regime == "above":
        b0, shift = AL_S - RHO_S, RHO_S
    else:  # below rho, L >= 2
        c0 = RHO_S - AL_S
        if L == 2:
            return RHO_S - c0 * sp.exp(MU_S * TAU), sp.log(RHO_S / c0) / MU_S
        if L % 2 == 0:
            expr = RHO_S - (c0 ** (-k) - k * MU_S * TAU) ** sp.Rational(-1, k)
            return expr, (c0 ** (-k) - RHO_S ** (-k)) / (k * MU_S)
        return RHO_S - (c0 ** (-k) + k * MU_S * TAU) ** sp.Rational(-1, k), None
    if L == 1:
        return b0 + MU_S * TAU, None
    if L == 2:
        return shift + b0 * sp.exp(MU_S * TAU), None
    return shift + (b0 ** (-k) - k * MU_S * TAU) ** sp.Rational(-1, k), 1 / (k * MU_S * b0**k)


DELTA = sp.Symbol("delta", positive=True)


def full_field(method, a, mu, rho, L):
    """The reduced field, sign included, evaluated on numbers (sympy Floats)."""
    if method == "gd":
        rho = 0
    p = mu * a ** (L - 1)
    sgn = int(bool(p > 0)) - int(bool(p < 0))
    return mu * (a - rho * sgn) ** (L - 1)


SYMPY_CASES = [("gd", "above", L) for L in DEPTHS] + [
    ("linf", r, L) for r in REGIMES for L in DEPTHS
]


# depths 3 and 4 are slow: the default run keeps L = 1, 2 and 5 for every method and regime
@pytest.mark.parametrize(
    "method,regime,L",
    [
        pytest.param(*case, marks=pytest.mark.slow if case[2] in (3, 4) else ())
        for case in SYMPY_CASES
    ],
)
def test_sympy_ode_residual_and_agreement(method, regime, L):
    expr, t_event = sympy_solution(method, regime, L)
    # 1. exact symbolic residual on the branch a > 0, where sign(mu a^(L-1)) = 1 and the
    #    field is mu (a - rho)^(L-1); alpha = rho +- delta makes the sign of alpha - rho known.
    rho_s = 0 if method == "gd" else RHO_S
    e = expr
    if method == "linf" and regime == "above":
        e = expr.subs(AL_S, RHO_S + DELTA)
    elif method == "linf" and regime == "below":
        e = expr.subs(AL_S, RHO_S - DELTA)
    assert sp.simplify(sp.diff(e, TAU) - MU_S * (e - rho_s) ** (L - 1)) == 0
    # 2. at random rational points: exact initial condition, 50-digit residual of the full
    #    discontinuous field (sign included), and agreement of the numpy implementation
    d_expr = sp.diff(expr, TAU)
    rng = np.random.default_rng(1234 + L)
    factor = REGIMES[regime]
    for _ in range(4):
        mu = sp.Rational(int(rng.integers(1, 40)), 10)
        rho = sp.Rational(int(rng.integers(1, 20)), 10)
        alpha = rho * sp.nsimplify(factor) if method == "linf" else rho
        subs = {MU_S: mu, RHO_S: rho, AL_S: alpha}
        assert sp.simplify(expr.subs({**subs, TAU: 0}) - alpha) == 0
        t_max = 2.0 if t_event is None else 0.95 * float(t_event.subs(subs))
        tau_val = sp.Rational(float(rng.uniform(0.0, min(t_max, 2.0))))  # exact binary value
        subs[TAU] = tau_val
        a_val = sp.N(expr, 50, subs=subs)
        assert a_val > 0
        rhs_val = full_field(method, a_val, sp.Float(mu, 50), sp.Float(rho, 50), L)
        res = sp.N(d_expr, 50, subs=subs) - rhs_val
        assert abs(res) <= sp.Float("1e-40") * (1 + abs(rhs_val)), (res, subs)
        exact = float(a_val)
        if method == "gd":
            got = gd([float(mu)], float(alpha), L, [float(tau_val)]).a[0, 0]
        else:
            got = linf_sam([float(mu)], float(alpha), float(rho), L, [float(tau_val)]).a[0, 0]
        assert got == pytest.approx(exact, rel=1e-12, abs=0)


@pytest.mark.parametrize("L", [2, 4, 6])
def test_sympy_hit_time_is_zero_of_solution(L):
    expr, t_hit = sympy_solution("linf", "below", L)
    assert sp.simplify(expr.subs(TAU, t_hit)) == 0
    subs = {MU_S: sp.Rational(3, 2), RHO_S: sp.Rational(7, 10), AL_S: sp.Rational(1, 5)}
    got = linf_sam([1.5], 0.2, 0.7, L, [0.0]).hit_time[0]
    assert got == pytest.approx(float(sp.N(t_hit.subs(subs), 30)), rel=1e-14, abs=0)


@pytest.mark.parametrize("L", [3, 4, 5])
def test_sympy_blowup_time_is_pole(L):
    expr, t_star = sympy_solution("linf", "above", L)
    base = (AL_S - RHO_S) ** (-(L - 2)) - (L - 2) * MU_S * TAU
    assert sp.simplify(base.subs(TAU, t_star)) == 0
    subs = {MU_S: sp.Rational(3, 2), RHO_S: sp.Rational(7, 10), AL_S: sp.Rational(9, 10)}
    got = linf_sam([1.5], 0.9, 0.7, L, [0.0]).blowup_time[0]
    assert got == pytest.approx(float(sp.N(t_star.subs(subs), 30)), rel=1e-14, abs=0)


@pytest.mark.parametrize("L", [2, 3, 4, 5])
def test_precision_small_alpha_and_near_hit(L):
    """expm1/log1p paths: relative precision for alpha << rho and close to tau_hit."""
    expr, t_event = sympy_solution("linf", "below", L)
    mu, rho = 1.3, 1.0
    for alpha in (1e-12, 1e-6, 0.999999):
        sol = linf_sam([mu], alpha, rho, L, [0.0])
        assert sol.a[0, 0] == pytest.approx(alpha, rel=1e-14, abs=0)
        # a short time later (a ~ alpha, and fractions of the hitting time / unit time),
        # against the textbook formula evaluated exactly at the same binary inputs
        t_scale = min(1.0, sol.hit_time[0]) if L % 2 == 0 else 1.0
        for tau in (0.5 * alpha * min(1.0, t_scale), 1e-3 * t_scale, 0.5 * t_scale):
            subs = {MU_S: sp.Rational(mu), RHO_S: 1, AL_S: sp.Rational(alpha)}
            subs[TAU] = sp.Rational(tau)
            exact = float(sp.N(expr.subs(subs), 50))
            got = linf_sam([mu], alpha, rho, L, [tau]).a[0, 0]
            assert got == pytest.approx(exact, rel=1e-12, abs=0), (alpha, tau)
    if L % 2 == 0:
        alpha = 0.4
        subs = {MU_S: sp.nsimplify(mu), RHO_S: 1, AL_S: sp.nsimplify(alpha)}
        t_hit = float(sp.N(t_event.subs(subs), 30))
        for frac in (1e-3, 1e-6, 1e-9):
            tau = t_hit * (1 - frac)
            got = linf_sam([mu], alpha, rho, L, [tau]).a[0, 0]
            exact = float(sp.N(expr.subs({**subs, TAU: sp.Float(tau, 30)}), 30))
            # tau is a float: the problem itself has condition number ~ tau_hit / (tau_hit - tau)
            tol = 1e-13 + 8 * np.finfo(float).eps / frac
            assert got > 0
            assert got == pytest.approx(exact, rel=tol, abs=0)


# --------------------------------------------------------------------------- (c) hit / blow-up


@pytest.mark.parametrize("L", [2, 4, 6])
def test_hit_then_slide_at_zero(L):
    mu = np.array([0.7, 1.0, 2.5])
    alpha = np.array([0.1, 0.3, 0.55])
    sol0 = linf_sam(mu, alpha, RHO, L, [0.0])
    t_hit = sol0.hit_time
    assert np.all(np.isfinite(t_hit)) and np.all(t_hit > 0)
    for j in range(3):
        # independent event detection with solve_ivp on the a > 0 branch of the field,
        # mu (a - rho)^(L-1), continued analytically through a = 0 (where it equals
        # -mu rho^(L-1) != 0), so the crossing is located precisely.  (The discontinuous
        # field itself makes DOP853 reject every step across 0.)
        def event(t, a):
            return a[0]

        event.terminal = True
        ref = solve_ivp(
            lambda t, a, j=j: mu[j] * (a - RHO) ** (L - 1),
            (0.0, 10 * t_hit[j]),
            [alpha[j]],
            events=event,
            **IVP,
        )
        assert ref.status == 1
        assert ref.t_events[0][0] == pytest.approx(t_hit[j], rel=1e-9, abs=0)
        speed = mu[j] * RHO ** (L - 1)  # |da/dtau| at a = 0
        delta = 1e-6 * RHO / speed  # time needed to travel 1e-6 rho near 0
        before = linf_sam(mu[j : j + 1], alpha[j], RHO, L, [t_hit[j] - delta])
        a_before = before.a[0, 0]
        assert 0 < a_before == pytest.approx(speed * delta, rel=1e-4, abs=0)
        assert before.sign_a[0, 0] == 1
    # sliding: exactly zero at and after the hitting time, forever
    for j in range(3):
        tau = t_hit[j] + np.array([0.0, 1e-12, 1e-3, 1.0, 1e3, 1e12])
        sol = linf_sam(mu, alpha, RHO, L, tau)
        assert np.all(sol.a[:, j] == 0.0)
        assert np.all(sol.log_abs_a[:, j] == -np.inf)
        assert np.all(sol.sign_a[:, j] == 0)
        assert np.all(sol.beta[:, j] == 0.0)
        assert np.all(sol.log_abs_beta[:, j] == -np.inf)
        assert np.all(sol.sign_beta[:, j] == 0)


@pytest.mark.parametrize("L", [2, 4])
def test_sliding_agrees_with_euler_chattering(L):
    """Filippov: a crude fixed-step Euler on the discontinuous field chatters around 0."""
    mu, alpha = 1.0, 0.3
    t_hit = linf_sam([mu], alpha, RHO, L, [0.0]).hit_time[0]
    h = 1e-3
    a = alpha
    n = int(np.ceil(3 * t_hit / h))
    traj = np.empty(n)
    for i in range(n):  # scalar field mu (a - rho sign(a^(L-1)))^(L-1), plain floats
        sgn = (a ** (L - 1) > 0) - (a ** (L - 1) < 0)
        a = a + h * mu * (a - RHO * sgn) ** (L - 1)
        traj[i] = a
    late = traj[int(1.5 * t_hit / h) :]
    assert np.max(np.abs(late)) <= 2 * h * mu * (RHO + 1e-2) ** (L - 1)
    sol = linf_sam([mu], alpha, RHO, L, h * (np.arange(n) + 1))
    assert np.all(sol.a[int(1.5 * t_hit / h) :, 0] == 0.0)


@pytest.mark.parametrize("L", [3, 4, 5])
@pytest.mark.parametrize("method", ["gd", "linf"])
def test_blowup_matches_solve_ivp_failure(method, L):
    mu, alpha = 3.0, 0.8
    rho = 0.0 if method == "gd" else RHO
    sol = solve(method, alpha, L, [0.0], mu=[mu], rho=rho)
    t_star = sol.blowup_time[0]
    assert np.isfinite(t_star)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = solve_ivp(reduced_rhs([mu], rho, L), (0.0, 1.5 * t_star), [alpha], **IVP)
    assert ref.status == -1  # DOP853 cannot step through the singularity
    assert ref.t[-1] == pytest.approx(t_star, rel=1e-8, abs=0)
    # before: finite and huge; at: +inf; after: nan
    tau = t_star * np.array([1 - 1e-12, 1.0, 1 + 1e-12, 2.0])
    s = solve(method, alpha, L, tau, mu=[mu], rho=rho)
    la = s.log_abs_a[:, 0]
    assert np.isfinite(la[0]) and la[0] > np.log(1e3)
    assert la[1] == np.inf
    assert np.all(np.isnan(la[2:]))
    assert np.all(np.isnan(s.log_abs_beta[2:, 0]))
    assert np.all(np.isnan(s.beta[2:, 0]))
    # growth rate near the pole: a ~ (k mu (t* - tau))^(-1/k)
    k = L - 2
    expected = -np.log(k * mu * t_star * 1e-12) / k
    assert la[0] == pytest.approx(expected, rel=1e-3, abs=0)


# --------------------------------------------------------------------------- (d) limits


@pytest.mark.parametrize("L", [3, 5, 7])
def test_odd_depth_below_rho_converges_to_rho_power_L(L):
    mu = np.array([0.5, 1.0, 4.0])
    alpha = np.array([1e-3, 0.2, 0.59])
    tau = np.concatenate([[0.0], np.logspace(-3, 300, 200)])
    sol = linf_sam(mu, alpha, RHO, L, tau)
    beta = sol.beta
    assert np.all(sol.sign_a == 1)
    assert np.all(np.diff(beta, axis=0) >= 0)  # monotone increase
    assert np.all(beta <= RHO**L * (1 + 1e-14))
    assert np.all(sol.a[tau <= 1e3] < RHO)
    np.testing.assert_allclose(beta[-1], RHO**L, rtol=1e-8)
    # exact invariant of dc/dtau = -mu c^(L-1), c = rho - a: c^-k - c0^-k = k mu tau
    k = L - 2
    c0 = RHO - alpha
    t_mid = np.linspace(0.0, 10.0, 21)
    c = RHO - linf_sam(mu, alpha, RHO, L, t_mid).a
    np.testing.assert_allclose(c ** (-k), c0 ** (-k) + k * mu * t_mid[:, None], rtol=1e-10)
    # algebraic rate once k mu tau >> c0^-k: rho - a ~ (k mu tau)^(-1/k)
    t_late = 1e4 * c0 ** (-k) / (k * mu)
    gap = np.array([RHO - linf_sam(mu, alpha, RHO, L, [t]).a[0, j] for j, t in enumerate(t_late)])
    np.testing.assert_allclose(gap, (k * mu * t_late) ** (-1.0 / k), rtol=1e-3)
    assert np.all(np.isnan(sol.hit_time)) and np.all(sol.blowup_time == np.inf)


@pytest.mark.parametrize("L", [2, 3, 4, 5])
def test_theorem_3_2_regimes(L):
    mu = np.array([1.0, 2.0, 3.0])
    alpha = np.array([0.3, RHO, 0.9])
    horizon = (1 - 1e-9) * linf_sam(mu, alpha, RHO, L, [0.0]).blowup_time[2] if L >= 3 else 50.0
    tau = np.linspace(0, horizon, 101)
    sol = linf_sam(mu, alpha, RHO, L, tau)
    # alpha == rho: beta == rho^L identically
    np.testing.assert_allclose(sol.beta[:, 1], RHO**L, rtol=1e-14)
    np.testing.assert_allclose(sol.a[:, 1], RHO, rtol=1e-15)
    # alpha > rho: diverges (L = 2: exponentially at rate 2 mu, i.e. log beta ~ 2 mu tau)
    assert sol.log_abs_beta[-1, 2] > np.log(1e3)
    if L == 2:
        slope = np.diff(sol.log_abs_beta[-20:, 2]) / np.diff(tau[-20:])
        np.testing.assert_allclose(slope, 2 * mu[2], rtol=1e-10)
    # alpha < rho: 0 (even L) or towards rho^L (odd L)
    late = linf_sam(mu, alpha, RHO, L, [1e40])
    if L % 2 == 0:
        assert late.beta[0, 0] == 0.0
    else:
        assert late.beta[0, 0] == pytest.approx(RHO**L, rel=1e-9, abs=0)


def test_long_horizons_do_not_overflow():
    mu = np.array([1.0, 2.0])
    tau = np.array([0.0, 1e3, 1e6])
    g = gd(mu, 0.5, 2, tau)
    np.testing.assert_array_equal(g.log_abs_a, np.log(0.5) + mu * tau[:, None])
    s = linf_sam(mu, 0.9, 0.5, 2, tau)
    assert np.all(np.isfinite(s.log_abs_a))
    np.testing.assert_allclose(s.log_abs_a[1:], np.log(0.4) + mu * tau[1:, None], rtol=1e-15)
    assert np.all(s.beta[2] == np.inf)  # linear space overflows, log space does not
    assert np.all(np.isfinite(s.log_abs_beta))


# --------------------------------------------------------------------------- consistency


@pytest.mark.parametrize("L", DEPTHS + [8])
def test_rho_zero_equals_gd(L):
    mu = np.array([0.3, 1.0, 2.2])
    alpha = np.array([0.2, 0.7, 1.3])
    g = gd(mu, alpha, L, [0.0])
    t_end = 3.0 if L < 3 else 1.2 * g.blowup_time.max()
    tau = np.linspace(0.0, t_end, 57)
    g = gd(mu, alpha, L, tau)
    s = linf_sam(mu, alpha, 0.0, L, tau)
    for name in ("tau", "log_abs_a", "sign_a", "hit_time", "blowup_time"):
        np.testing.assert_array_equal(getattr(s, name), getattr(g, name))
    assert s.depth == g.depth == L


def test_depth_one_ignores_rho():
    tau = np.linspace(0, 5, 11)
    s = linf_sam([1.0, 2.0], [0.1, 3.0], 0.5, 1, tau)
    np.testing.assert_allclose(s.a, np.array([0.1, 3.0]) + np.array([1.0, 2.0]) * tau[:, None])


@settings(max_examples=40, deadline=None)
@given(
    L=st.integers(2, 6),
    c=st.floats(0.1, 10.0),
    alpha=st.floats(0.05, 2.0),
    rho=st.floats(0.05, 2.0),
    mu=st.floats(0.1, 5.0),
    t=st.floats(0.0, 1.0),
)
def test_scale_symmetry(L, c, alpha, rho, mu, t):
    """a(tau; c alpha, c rho) = c a(c^(L-2) tau; alpha, rho) (docs/theory.md §8)."""
    base = linf_sam([mu], alpha, rho, L, [0.0])
    t_end = np.nanmin([base.blowup_time[0], base.hit_time[0], 5.0])
    tau = t * 0.9 * t_end / c ** (L - 2)
    lhs = linf_sam([mu], c * alpha, c * rho, L, [tau])
    rhs = linf_sam([mu], alpha, rho, L, [c ** (L - 2) * tau])
    np.testing.assert_allclose(lhs.log_abs_a, np.log(c) + rhs.log_abs_a, rtol=1e-9, atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    L=st.integers(1, 6),
    mu=st.floats(0.1, 5.0),
    alpha=st.floats(0.01, 3.0),
    rho=st.sampled_from([0.0, 0.3, 1.0]),
    u=st.floats(0.01, 0.95),
)
def test_random_points_satisfy_ode(L, mu, alpha, rho, u):
    """Centred finite difference of log a against the field mu (a - rho)^(L-1) / a."""
    base = linf_sam([mu], alpha, rho, L, [0.0])
    t_end = np.nanmin([base.blowup_time[0], base.hit_time[0], 5.0])
    tau = u * t_end
    h = 1e-4 * min(tau, t_end - tau)
    sol = linf_sam([mu], alpha, rho, L, [tau - h, tau, tau + h])
    la = sol.log_abs_a[:, 0]
    assert np.all(np.isfinite(la)) and np.all(sol.sign_a == 1)
    a = np.exp(la[1])
    rate = mu * (a - rho) ** (L - 1) / a  # d log a / dtau on the branch a > 0
    fd = (la[2] - la[0]) / (2 * h)
    assert fd == pytest.approx(rate, rel=1e-5, abs=1e-7 * (1 + abs(rate)))


def test_solution_object():
    tau = np.array([0.0, 0.5])
    sol = linf_sam([1.0, 2.0], [0.2, 0.9], 0.5, 3, tau)
    assert isinstance(sol, ClosedFormSolution)
    assert sol.tau.shape == (2,)
    assert sol.log_abs_a.shape == sol.sign_a.shape == sol.beta.shape == (2, 2)
    assert sol.hit_time.shape == sol.blowup_time.shape == (2,)
    assert set(np.unique(sol.sign_a)) <= {-1, 0, 1}
    np.testing.assert_allclose(sol.beta, sol.a**3)
    np.testing.assert_allclose(sol.log_abs_beta, 3 * sol.log_abs_a)
    with pytest.raises(FrozenInstanceError):
        sol.depth = 4  # frozen
    with pytest.raises(ValueError):
        sol.log_abs_a[0, 0] = 1.0  # read-only arrays
    assert linf_sam([1.0], 0.2, 0.5, 2, 0.3).tau.shape == (1,)  # scalar tau accepted


# --------------------------------------------------------------------------- (e) validation

GOOD = dict(mu=[1.0, 2.0], alpha=0.5, rho=0.3, depth=2, tau=[0.0, 1.0])
BAD = [
    ("mu", [1.0, -2.0]),
    ("mu", [0.0, 1.0]),
    ("mu", [1.0, np.nan]),
    ("mu", [1.0, np.inf]),
    ("mu", [[1.0, 2.0]]),
    ("mu", []),
    ("mu", "abc"),
    ("alpha", 0.0),
    ("alpha", -1.0),
    ("alpha", np.inf),
    ("alpha", [0.5, 0.5, 0.5]),
    ("alpha", [[0.5, 0.5]]),
    ("alpha", [0.5, np.nan]),
    ("rho", -0.1),
    ("rho", np.nan),
    ("rho", np.inf),
    ("rho", [0.1, 0.2]),
    ("depth", 0),
    ("depth", -3),
    ("depth", 2.0),
    ("depth", 2.5),
    ("depth", "2"),
    ("depth", True),
    ("tau", [-1.0, 0.0]),
    ("tau", [0.0, np.nan]),
    ("tau", [0.0, np.inf]),
    ("tau", [[0.0, 1.0]]),
]


@pytest.mark.parametrize("name,value", BAD)
def test_invalid_input_linf(name, value):
    kwargs = {**GOOD, name: value}
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        linf_sam(**kwargs)


@pytest.mark.parametrize("name,value", [(n, v) for n, v in BAD if n != "rho"])
def test_invalid_input_gd(name, value):
    kwargs = {k: v for k, v in {**GOOD, name: value}.items() if k != "rho"}
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        gd(**kwargs)
