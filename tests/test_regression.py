"""Regression on diagonal networks: the squared loss, zero and signed initialisations, the
per-example algorithms, and the public SAM diagonal-network code transcribed.

Every reference here is computed independently of the engine: sympy for the loss table,
finite differences and hand-written float formulas for gradients and steps, ``solve_ivp`` on
the plain parameters for the flows, and the update rules of tml-epfl/understanding-sam
(``diagonal_linear_nets/diag_nets.py`` at commit 306adde0b8461a57e7fc8f46e84df1e38e0395fa)
transcribed line by line.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from scipy.integrate import solve_ivp

from flows import Cause, Dataset, iterate, simulate, single_example
from flows.datasets import sparse_regression
from flows.model import LOSSES, loss_gradient, loss_value

RNG = np.random.default_rng(11)
X5 = RNG.standard_normal((5, 8))
DATA = Dataset(X5, X5[:, :2] @ np.array([1.0, -0.5]), task="regression")
ALPHA = 0.3
U_ALPHA_V_ZERO = np.vstack([np.full(8, ALPHA), np.zeros(8)])


def plain_gradient(theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``grad (1/2n) ||X prod_l theta_l - y||^2`` in floats, written out."""
    r = X @ np.prod(theta, axis=0) - y
    g = X.T @ r / X.shape[0]
    return np.array(
        [g * np.prod(np.delete(theta, k, axis=0), axis=0) for k in range(theta.shape[0])]
    )


# ---------------------------------------------------------------- the loss table


def test_squared_loss_entries_are_the_sympy_derivatives():
    """The squared entry of the loss table is ``u^2/2`` with ``log|l'| = log|u|``, slope
    ``d log|l'|/du = 1/u``, ``log l = log(u^2/2)`` and ``sign(-l') = -sign(u)`` (sympy)."""
    u = sp.symbols("u", real=True)
    ell = u**2 / 2
    entry = LOSSES["squared"]
    assert entry.task == "regression"
    for value in (-3.7, -1e-3, 2e-200, 0.5, 41.0):
        d1 = float(sp.diff(ell, u).subs(u, value))
        assert entry.value(np.array(value)) == pytest.approx(float(ell.subs(u, value)), rel=1e-15)
        assert entry.log_abs_derivative(np.array(value)) == pytest.approx(
            np.log(abs(d1)), rel=1e-14
        )
        slope = sp.diff(sp.log(sp.Abs(sp.diff(ell, u))), u).subs(u, value)
        assert entry.log_derivative_slope(np.array(value)) == pytest.approx(float(slope), rel=1e-14)
        assert entry.log_value(np.array(value)) == pytest.approx(
            float(sp.log(ell.subs(u, sp.Float(value, 30)))), rel=1e-13, abs=1e-13
        )
        assert entry.descent_sign(np.array(value)) == -np.sign(d1)


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_squared_loss_gradient_matches_finite_differences(depth):
    """``loss_gradient`` on regression data (signed-log arithmetic) equals central differences
    of the mean squared loss written out in floats, and the plain chain-rule formula."""
    theta = RNG.standard_normal((depth, DATA.d))
    theta[0, 1] = 0.0  # a zero entry
    got = loss_gradient(theta, DATA)
    np.testing.assert_allclose(got, plain_gradient(theta, DATA.X, DATA.y), rtol=1e-12, atol=1e-14)
    h = 1e-6
    for idx in [(0, 0), (depth - 1, 3), (0, 1)]:
        e = np.zeros_like(theta)
        e[idx] = h

        def f(t):
            return 0.5 * np.mean((DATA.X @ np.prod(t, axis=0) - DATA.y) ** 2)

        assert got[idx] == pytest.approx(
            (f(theta + e) - f(theta - e)) / (2 * h), rel=1e-7, abs=1e-9
        )
        assert loss_value(theta, DATA) == pytest.approx(f(theta), rel=1e-14)


# ---------------------------------------------------------------- bad input


def test_regression_inputs_are_checked():
    """Targets must be finite; the task must be known; labels +-1 stay the classification
    default; a loss of the other task and the rescaled clock on regression are refused."""
    with pytest.raises(ValueError, match="y"):
        Dataset(X5, np.array([1.0, np.nan, 0, 0, 0]), task="regression")
    with pytest.raises(ValueError, match="task"):
        Dataset(X5, np.zeros(5), task="ranking")
    with pytest.raises(ValueError, match="task='regression'"):
        Dataset(X5, np.arange(5.0))
    with pytest.raises(ValueError, match="loss"):
        simulate(DATA, "gd", 2, 0.1, loss="logistic")
    with pytest.raises(ValueError, match="loss"):
        simulate(single_example([1.0, 2.0]), "gd", 2, 0.1, loss="squared")
    with pytest.raises(ValueError, match="clock"):
        simulate(DATA, "gd", 2, 0.1, clock="rescaled")
    with pytest.raises(ValueError, match="loss"):
        iterate(DATA, "gd", 2, 0.1, loss="exponential", steps=2)


# ---------------------------------------------------------------- flows


def plain_flow(theta0: np.ndarray, t_max: float, times: np.ndarray) -> np.ndarray:
    """The GD flow ``dtheta/dt = -grad L`` on the plain (L, d) parameters by ``solve_ivp``."""
    shape = theta0.shape

    def rhs(t, w):
        return -plain_gradient(w.reshape(shape), DATA.X, DATA.y).ravel()

    sol = solve_ivp(rhs, (0, t_max), theta0.ravel(), t_eval=times, rtol=1e-12, atol=1e-14)
    assert sol.success
    return sol.y.T.reshape((len(times),) + shape)


# the reference backend is slow (0.7 s): its field equals the numpy backend's with the squared
# loss at random points in the default run (tests/test_backends.py)
@pytest.mark.parametrize("backend", ["numpy", pytest.param("reference", marks=pytest.mark.slow)])
def test_gd_flow_from_a_zero_layer_matches_the_plain_ode(backend):
    """From ``u(0) = alpha``, ``v(0) = 0`` (depth 2) the GD flow equals ``solve_ivp`` on the
    plain parameters, and conserves ``u_j^2 - v_j^2 = alpha^2`` for every coordinate."""
    tr = simulate(DATA, "gd", 2, U_ALPHA_V_ZERO, t_max=30.0, n_points=7, backend=backend)
    assert tr.status == 0 and tr.clock == "original"
    ref = plain_flow(U_ALPHA_V_ZERO, 30.0, tr.t)
    np.testing.assert_allclose(tr.theta, ref, rtol=1e-7, atol=1e-9)
    conserved = tr.theta[:, 0] ** 2 - tr.theta[:, 1] ** 2
    np.testing.assert_allclose(conserved, ALPHA**2, rtol=0, atol=1e-10)
    assert tr.loss[-1] < 1e-3 * tr.loss[0]


def test_zero_layers_at_depth_three():
    """At depth 3 a coordinate with two zero layers stays at 0 (every layer's gradient holds
    one of them), one with a single zero layer leaves 0, and GD conserves every
    ``w_j^(l)^2 - w_j^(k)^2``."""
    theta0 = np.abs(RNG.standard_normal((3, DATA.d))) * 0.5 + 0.2
    theta0[1:, 0] = 0.0  # two zeros in coordinate 0
    theta0[2, 1] = 0.0  # one zero in coordinate 1
    tr = simulate(DATA, "gd", 3, theta0, t_max=5.0, n_points=5)
    assert tr.status == 0
    np.testing.assert_array_equal(tr.theta[:, 1:, 0], 0.0)
    assert abs(tr.theta[-1, 2, 1]) > 1e-6
    ref = plain_flow(theta0, 5.0, tr.t)
    np.testing.assert_allclose(tr.theta, ref, rtol=1e-7, atol=1e-9)
    for layer, other in [(0, 1), (0, 2), (1, 2)]:
        conserved = tr.theta[:, layer] ** 2 - tr.theta[:, other] ** 2
        np.testing.assert_allclose(conserved - conserved[0], 0.0, atol=1e-9)


# 1-usam is slow (0.5-0.7 s: per-example steps); the per-example flow on regression stays in the
# default run against usam on one example (test_one_usam_on_one_example_is_usam)
@pytest.mark.parametrize(
    "algorithm", ["l2-sam", "usam", pytest.param("1-usam", marks=pytest.mark.slow)]
)
def test_sam_flows_on_regression_are_the_limit_of_small_steps(algorithm):
    """The regression flows of the SAM family are approached by their discrete iterations
    as the step shrinks: the distance at t = 4 falls about linearly with eta."""
    tr = simulate(DATA, algorithm, 2, U_ALPHA_V_ZERO, t_max=4.0, n_points=2, rho=0.05)
    assert tr.status == 0
    errors = []
    for eta in (4e-2, 1e-2):
        run = iterate(DATA, algorithm, 2, U_ALPHA_V_ZERO, eta=eta, steps=round(4.0 / eta), rho=0.05)
        errors.append(np.max(np.abs(run.beta[-1] - tr.beta[-1])))
    assert errors[1] < errors[0] / 3
    assert errors[1] < 2e-3


def test_one_usam_on_one_example_is_usam():
    """With one example, ``l_1 = L``: 1-usam and usam are the same flow (classification and
    regression)."""
    mu = single_example([1.0, 2.0, 3.0])
    one = Dataset(np.array([[1.0, -2.0, 0.5]]), np.array([0.7]), task="regression")
    for data, kw in [(mu, dict(alpha=0.3, t_max=3.0)), (one, dict(alpha=0.2, t_max=5.0))]:
        a = simulate(data, "1-usam", 2, n_points=5, rho=0.2, backend="numpy", **kw)
        b = simulate(data, "usam", 2, n_points=5, rho=0.2, backend="numpy", **kw)
        assert a.status == b.status == 0
        np.testing.assert_allclose(a.log_abs_beta, b.log_abs_beta, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("algorithm", ["1-sam", "1-usam"])
def test_per_example_field_batched_equals_example_by_example(algorithm):
    """The batched per-example field (numpy backend) equals the example-by-example reference
    on a classification problem at depth 3 (both perturbations)."""
    X = RNG.standard_normal((6, 4))
    data = Dataset(X, np.sign(X @ np.ones(4)))
    a = simulate(data, algorithm, 3, 0.2, t_max=4.0, rho=0.1, n_points=5, backend="numpy")
    b = simulate(data, algorithm, 3, 0.2, t_max=4.0, rho=0.1, n_points=5, backend="reference")
    assert a.status == b.status == 0
    np.testing.assert_allclose(a.log_abs_beta, b.log_abs_beta, rtol=1e-9, atol=1e-9)


def test_one_sam_stops_where_a_residual_reaches_zero():
    """1-sam's per-example normalised perturbation flips with ``sign r_i``: the regression run
    ends (status -1, cause 'residual switch') where the first residual is 0."""
    tr = simulate(DATA, "1-sam", 2, U_ALPHA_V_ZERO, t_max=50.0, n_points=3, rho=0.05)
    assert tr.status == -1 and tr.cause == Cause.RESIDUAL_SWITCH
    r = DATA.X @ tr.beta[-1] - DATA.y
    assert np.min(np.abs(r)) < 1e-8 * np.max(np.abs(DATA.y))
    assert tr.t[-1] < 50.0


def test_linf_sam_leaves_zero_layers_transversally():
    """From ``v(0) = 0`` l_inf-SAM's v_j leave 0 at once (crossings, not sliding), and the
    flow agrees with small discrete steps over t in [0, 2]."""
    tr = simulate(DATA, "linf-sam", 2, U_ALPHA_V_ZERO, t_max=2.0, n_points=2, rho=0.05)
    assert tr.status == 0
    first = [e for e in tr.events if e.tau == 0.0]
    assert {e.kind for e in first} == {"crossing"} and len(first) == DATA.d
    run = iterate(DATA, "linf-sam", 2, U_ALPHA_V_ZERO, eta=1e-3, steps=2000, rho=0.05)
    np.testing.assert_allclose(run.beta[-1], tr.beta[-1], atol=5e-3)


# ---------------------------------------------------------------- the public experiment

# tml-epfl/understanding-sam, diagonal_linear_nets/diag_nets.py at 306adde0, transcribed:
# n_SAM_GD lines 54-62 and one_SAM_GD lines 75-89 (u, v updated from the old iterate).


def tml_n_sam_step(u, v, X, y, gamma, rho):
    """``n_SAM_GD``, diag_nets.py lines 54-62."""
    n = X.shape[0]
    Xerr = X.T @ (X @ (u * v) - y)  # l. 54-55
    u_sam, v_sam = u + rho * (Xerr * v) / n, v + rho * (Xerr * u) / n  # l. 56
    Xerr_sam = X.T @ (X @ (u_sam * v_sam) - y)  # l. 58
    return u - gamma * (Xerr_sam * v_sam) / n, v - gamma * (Xerr_sam * u_sam) / n  # l. 59-62


def tml_one_sam_step(u, v, X, y, gamma, rho):
    """``one_SAM_GD``, diag_nets.py lines 75-89."""
    n = X.shape[0]
    r = X @ (u * v) - y  # l. 75-76
    grad_u, grad_v = np.zeros_like(u), np.zeros_like(v)  # l. 77
    for k in range(n):  # l. 78
        u_k = u + 2 * rho * r[k] * X[k] * v  # l. 79
        v_k = v + 2 * rho * r[k] * X[k] * u  # l. 80
        res = (X[k] * u_k * v_k).sum() - y[k]
        grad_u += res * v_k * X[k] / n  # l. 82
        grad_v += res * u_k * X[k] / n  # l. 83
    return u - gamma * grad_u, v - gamma * grad_v  # l. 88-89


@pytest.mark.parametrize(
    "ours, rho, step",
    [("gd", 0.0, tml_n_sam_step), ("usam", 0.3, tml_n_sam_step), ("1-usam", 0.6, tml_one_sam_step)],
)
def test_iterate_reproduces_the_public_diagonal_network_code(ours, rho, step):
    """On the notebook's data (cell 0) from ``u = 0.1``, ``v = 0``: its n-SAM is ``usam`` at
    the same rho (GD at rho = 0), its 1-SAM ``w + 2 rho grad l_k`` is ``1-usam`` at ``2 rho``;
    ``iterate`` reproduces the transcribed iterates to rounding over 300 steps of gamma = 10/d."""
    split = sparse_regression()
    X, y = split.train.X, split.train.y
    d = X.shape[1]
    gamma, tml_rho = 10 / d, rho if ours != "1-usam" else rho / 2
    u, v = np.full(d, 0.1), np.zeros(d)
    betas = []
    for _ in range(300):
        u, v = step(u, v, X, y, gamma, tml_rho)
        betas.append(u * v)
    kw = {} if ours == "gd" else dict(rho=rho)
    run = iterate(split.train, ours, 2, np.vstack([u * 0 + 0.1, np.zeros(d)]), eta=gamma,
                  steps=300, **kw)  # fmt: skip
    np.testing.assert_allclose(run.beta[1:], np.array(betas), rtol=1e-11, atol=1e-13)


def test_sparse_regression_is_the_notebook_data():
    """The generator draws the notebook's numbers (cell 0: ``multivariate_normal`` with the
    identity from the legacy seed 0 consumes the stream as ``standard_normal`` does)."""
    rs = np.random.RandomState(0)
    X = rs.multivariate_normal(np.zeros(30), np.eye(30), 20)
    X_test = rs.multivariate_normal(np.zeros(30), np.eye(30), 1000)
    g = rs.randn(30)
    g[3:] = 0
    g = np.abs(g) / np.linalg.norm(g)
    split = sparse_regression()
    np.testing.assert_array_equal(split.train.X, X)
    np.testing.assert_array_equal(split.test.X, X_test)
    np.testing.assert_array_equal(split.teacher, g)
    np.testing.assert_array_equal(split.train.y, X @ g)


# ---------------------------------------------------------------- the implicit-bias limit


# alpha = 0.3 and 0.6 (1.4 s, 1 s) are slow: the engine's flow to the limit stays in the default
# run at alpha = 2.0 (both inits), and the limit itself at alpha = 0.1 .. 3 in
# tests/test_implicit_bias.py (test_flow_converges_to_the_woodworth_interpolator)
@pytest.mark.parametrize(
    "alpha",
    [pytest.param(0.3, marks=pytest.mark.slow), pytest.param(0.6, marks=pytest.mark.slow), 2.0],
)
def test_gd_flows_end_at_the_woodworth_interpolator(alpha):
    """GD flows from ``u = alpha``, ``v = 0`` (and a signed init) converge to the minimiser of
    the potential of :mod:`analysis.implicit_bias`, solved by its dual Newton method: at a
    training loss of 1e-20 the distance is below 1e-7 relative, and the flow's end point
    satisfies the potential's optimality conditions."""
    from analysis.implicit_bias import optimality_residual, woodworth_interpolator

    inits = [np.vstack([np.full(DATA.d, alpha), np.zeros(DATA.d)])]
    inits.append(inits[0] * np.where(np.arange(DATA.d) % 2 == 0, 1.0, -1.0) + [[0.0], [0.1]])
    for init in inits:
        tr = simulate(DATA, "gd", 2, init, t_max=1e6, n_points=2, loss_floor=1e-20,
                      rtol=1e-12, backend="numpy")  # fmt: skip
        assert tr.cause == Cause.LOSS_FLOOR, tr.message
        limit = woodworth_interpolator(DATA, init=init)
        assert limit.status == 0
        beta = tr.beta[-1]
        assert np.linalg.norm(beta - limit.beta) < 1e-7 * np.linalg.norm(limit.beta)
        primal, stationarity = optimality_residual(DATA.X, DATA.y, beta, init)
        assert primal < 1e-9 and stationarity < 1e-6


# ---------------------------------------------------------------- vanishing initialisations


def _staircase_data(seed: int, shape: tuple[int, int]) -> Dataset:
    rng = np.random.default_rng(seed)
    return Dataset(rng.standard_normal(shape), rng.standard_normal(shape[0]), task="regression")


@pytest.mark.slow  # 2.5-3.5 s; in the default run: simulate follows gd_mirror_flow down to alpha =
# 1e-8 (tests/test_mirror.py), the mirror flow from 1e-300 ends at the minimum-l1 interpolator
# (ibid.), runs from 1e-30 pass every saddle (tests/test_saddle_to_saddle.py) and a lost
# conserved quantity ends a run with 'precision lost' (tests/test_results.py)
def test_gd_from_alpha_1e300_follows_the_conserved_flow_or_says_where_it_stops():
    """From ``u = 1e-300``, ``v = 0`` the asinh chart takes the init's scale
    (``chart_scale=None``) and the run is not stopped on a saddle. Coordinate 5 enters the
    support and leaves it again; whether float64 ``(u, v)`` can follow it back down hangs on
    the platform's rounding of its two equal layers (``flows.mirror``). Either way the run is
    never silently wrong: it reaches the end at the minimum-l1 interpolator (to 1e-3), or it
    ends with status -1 and cause 'precision lost' naming the coordinate whose layers split;
    every sample it returns on the output grid is on the path of
    ``flows.mirror.gd_mirror_flow`` (GD in the coordinates that keep ``u_j^2 - v_j^2``, at
    rtol 1e-12) to 1e-5 (the saddles amplify the default rtol's 1e-10 to ~3e-6 here)."""
    from analysis.implicit_bias import min_l1_interpolator
    from analysis.saddle_to_saddle import saddles
    from flows.mirror import gd_mirror_flow

    data = _staircase_data(1091, (3, 5))
    path = saddles(data)
    alpha = 1e-300
    t_max = (path.times[-1] + 1.0) * np.log(1 / alpha)
    init = np.vstack([np.full(data.d, alpha), np.zeros(data.d)])
    tr = simulate(data, "gd", 2, init, t_max=t_max, n_points=50, backend="numpy")
    reference = gd_mirror_flow(data, init, t_max=t_max, n_points=50, rtol=1e-12, atol=1e-14)
    assert reference.status == 0
    on_grid = np.isin(tr.t, reference.t)  # a stopped run also returns its last point
    k = int(on_grid.sum())
    np.testing.assert_array_equal(tr.t[on_grid], reference.t[:k])
    np.testing.assert_allclose(tr.beta[on_grid], reference.beta[:k], atol=1e-5)
    if tr.status == 0:
        np.testing.assert_allclose(tr.beta[-1], min_l1_interpolator(data).beta, atol=1e-3)
    else:
        assert tr.cause == Cause.PRECISION_LOST and "w^(1)_5^2 - w^(2)_5^2" in tr.message
        assert "gd_mirror_flow" in tr.message and k < 50


@pytest.mark.slow  # 1.5-2 s (200 outputs of two long runs on the numpy backend); in the default
# run the same run ends with cause 'precision lost' (tests/test_results.py) and the broken law is
# found by split_layers (test_split_layers_finds_a_broken_conservation_law)
def test_a_lost_conserved_quantity_cuts_the_gd_path():
    """When a coordinate grows until its two layers agree to rounding and must later shrink
    back (a sign reversal of s_j at alpha = 1e-12), float64 cannot follow: the run ends with
    status -1 ("precision lost") where the path last kept ``u_j^2 - v_j^2 = alpha^2``, and the
    kept samples keep it; at alpha = 1e-6 the same run is fine (at 1e-8, c = 1e-16 is at the
    edge of what the layers, grown to ~0.1, resolve: the outcome there hangs on rounding)."""
    data = _staircase_data(152, (4, 6))
    for alpha, lost in [(1e-12, True), (1e-6, False)]:
        init = np.vstack([np.full(data.d, alpha), np.zeros(data.d)])
        tr = simulate(data, "gd", 2, init, t_max=20.0 * np.log(1 / alpha), n_points=200,
                      backend="numpy", chart="asinh")  # fmt: skip  # the (u, v) engine
        assert (tr.cause == Cause.PRECISION_LOST) is lost, tr.message
        u, v = tr.theta[:, 0], tr.theta[:, 1]
        small = np.maximum(u * u, v * v) < 1e3 * alpha**2
        np.testing.assert_allclose((u * u - v * v)[small], alpha**2, rtol=1e-3)


def test_gd_without_an_interpolator_rests_at_least_squares():
    """n > d: the GD flow stops at the least-squares solution (cause 'stationary', where every
    coordinate's own gradient is below 1e-8 of its size), within 1e-6 of ``lstsq``."""
    data = _staircase_data(7, (9, 4))
    init = np.vstack([np.full(data.d, 0.1), np.zeros(data.d)])
    tr = simulate(data, "gd", 2, init, t_max=1e4, n_points=3, backend="numpy")
    assert tr.cause == Cause.STATIONARY and tr.status == 0
    least_squares = np.linalg.lstsq(data.X, data.y, rcond=None)[0]
    np.testing.assert_allclose(tr.beta[-1], least_squares, atol=1e-6)


def test_split_layers_finds_a_broken_conservation_law():
    """``w_1^2 - w_2^2 = c`` from the first sample: layers equal to rounding keep it (c = 1e-200
    is below their resolution); layers apart by e^30 at e^-115 break it by 1e85 times c; a
    difference at the solver's tolerance (rtol 1e-10, layers ~1) does not count."""
    from flows.integrator.conservation import split_layers
    from flows.signedlog import SignedLog

    alpha = 1e-100
    start = [[np.log(alpha)] * 2, [-np.inf] * 2]
    kept = [[-115.0, -0.3], [-115.0, -0.3 - 1e-12]]
    broken = [[-145.0, -0.3], [-115.0, -0.3]]
    signs = np.array([[[1.0, 1.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 1.0]]])
    for last, expected in [(kept, None), (broken, (0, 0))]:
        theta = SignedLog(signs, np.array([start, last]))
        assert split_layers(theta, 1e-10) == expected
