"""The depth-2 flows of ``flows.conserved`` (``psi`` and ``log|u_j^2 - v_j^2|``) against
references that share no code with them.

* The identities of its field, derived in sympy from ``u' = u + K g v``, ``v' = v + K g u``.
* Its ``gradient_factor`` entries against the table's perturbations.
* The ``(u, v)`` system integrated in 70-digit mpmath (classical RK4 at two steps, Richardson
  extrapolated) from ``u = 1e-30``, ``v = 0``, for GD, USAM and l2-SAM: beta to 1e-8 relative.
* ``simulate(..., chart='asinh')`` (the ``(u, v)`` engine) where float64 resolves
  ``u_j^2 - v_j^2`` (alpha = 0.3): log|beta| to 1e-8, in regression and classification.
* The saddle-to-saddle limit of ``analysis.saddle_to_saddle`` for GD in ``t / log(1/alpha)``.
* Runs from alpha = 1e-30, 1e-100 and 1e-300 through ``simulate`` with every backend name, and
  the runs that cannot go on: a spent budget, a NaN step, beta beyond float64.
"""

from __future__ import annotations

import functools
import itertools
import warnings

import numpy as np
import pytest
import sympy as sp
from mpmath import mp, mpf
from scipy.integrate import DOP853

import flows.conserved as conserved
from analysis.saddle_to_saddle import saddles
from flows import ALGORITHMS, Cause, Dataset, simulate, single_example
from flows.algorithms import GradientSummary
from flows.backends import BACKENDS
from flows.conserved import conserved_applies, conserved_flow
from flows.mirror import gd_mirror_flow
from flows.schedules import constant

ALPHAS = (1e-30, 1e-100, 1e-300)
#: The algorithms of the issue and their radii in the saddle runs (l2-SAM's rho >> alpha).
SADDLE_RUNS = {"gd": {}, "l2-sam": {"rho": 0.05}, "usam": {"rho": 0.5}}


def staircase(seed: int = 1091) -> Dataset:
    """n = 3, d = 5, standard normal (figure 19's data for seed 1091)."""
    rng = np.random.default_rng(seed)
    return Dataset(rng.standard_normal((3, 5)), rng.standard_normal(3), task="regression")


def u_alpha_v_zero(d: int, alpha: float) -> np.ndarray:
    return np.vstack([np.full(d, alpha), np.zeros(d)])


# --------------------------------------------------------------------------- the mathematics


def test_the_field_identities_in_sympy():
    """With ``u' = u + K g v``, ``v' = v + K g u`` and ``u'' = -gt v'``, ``v'' = -gt u'``:
    ``beta' = beta (1 + K^2 g^2) + K g (u^2 + v^2)``, ``d(u^2 - v^2)/dt = -2 K gt g (u^2 - v^2)``,
    ``psi' = -gt`` on both branches (``tanh psi`` the ratio of the sinh layer to the cosh one),
    ``u^2 + v^2 = |c| cosh 2 psi``, ``u v = (|c|/2) sinh 2 psi``, and for a balanced coordinate
    ``d log|beta|/dt = -2 sign(beta) gt - 2 K g gt``."""
    u, v, K, g, gt, psi = sp.symbols("u v K g gt psi", real=True)
    c, a = sp.symbols("c a", positive=True)
    up, vp = u + K * g * v, v + K * g * u
    du, dv = -gt * vp, -gt * up
    assert sp.expand(up * vp - (u * v * (1 + K**2 * g**2) + K * g * (u**2 + v**2))) == 0
    assert sp.expand(2 * u * du - 2 * v * dv + 2 * K * gt * g * (u**2 - v**2)) == 0
    for big, small in [(u, v), (v, u)]:  # c > 0: u = cosh; c < 0: v = cosh
        on = {big: sp.sqrt(c) * sp.cosh(psi), small: sp.sqrt(c) * sp.sinh(psi)}
        dpsi = (big * {u: du, v: dv}[small] - small * {u: du, v: dv}[big]) / (big**2 - small**2)
        assert sp.simplify(dpsi.subs(on) + gt) == 0
        assert sp.simplify((u**2 + v**2).subs(on) - c * sp.cosh(2 * psi)) == 0
        assert sp.simplify((u * v).subs(on) - c / 2 * sp.sinh(2 * psi)) == 0
    for sign in (1, -1):  # v = +-u: beta = +-a^2
        dbeta = (u * dv + v * du).subs({u: a, v: sign * a})
        assert sp.simplify(dbeta / (sign * a**2) - (-2 * sign * gt - 2 * K * g * gt)) == 0


@pytest.mark.parametrize(
    "name", [k for k, v in ALGORITHMS.items() if v.gradient_factor is not None]
)
def test_gradient_factor_is_the_perturbation(name):
    """``perturb(grad, hp) = exp(log K + log ||grad L||) * grad.unit`` for random gradients of
    norms from 1e-200 to 1e200 (1e-12 relative)."""
    algo = ALGORITHMS[name]
    hp = {"rho": 0.7, "sigma": 0.3, "rho_max": 2.0, "varrho": 1e-12}
    hp = {spec.name: hp[spec.name] for spec in algo.hyperparameters}
    rng = np.random.default_rng(5)
    for log_norm in (-460.0, -3.0, 0.0, 2.5, 460.0):
        unit = rng.standard_normal((2, 4))
        unit /= np.linalg.norm(unit)
        grad = GradientSummary(unit, np.sign(unit), log_norm, np.ones(2, dtype=int))
        expected = algo.perturb(grad, hp)
        with np.errstate(over="ignore"):
            ours = np.exp(algo.gradient_factor(np.array(log_norm), hp) + log_norm) * unit
        np.testing.assert_allclose(ours, expected, rtol=1e-12, atol=0)


# --------------------------------------------------------------------------- extended precision

REFERENCE_X = np.array([[1.0, 0.5], [-0.3, 1.2]])
REFERENCE_Y = np.array([3.0, -2.4])
#: Radii: USAM's (its coordinate 1 escapes at t ~ 46, GD's at 37); l2-SAM's below alpha
#: (0.3 alpha), where it does not collapse at once.
REFERENCE_HP = {"gd": {}, "usam": {"rho": 0.1}, "l2-sam": {"rho": 3e-31}}


def _extended_precision_beta(algorithm: str, alpha: float, times, step: float) -> np.ndarray:
    """beta at ``times`` of the ``(u, v)`` flow ``dw/dt = -grad L(w + eps)``, ``eps`` from its
    definition (0, ``rho grad L``, ``rho grad L / ||grad L||``), in 70-digit mpmath: classical
    RK4 at ``step`` and ``step / 2``, Richardson extrapolated (error O(step^5))."""
    with mp.workdps(70):
        X = [[mpf(float(x)) for x in row] for row in REFERENCE_X]
        y = [mpf(float(v)) for v in REFERENCE_Y]
        n, d = len(X), len(X[0])
        rho = mpf(REFERENCE_HP[algorithm].get("rho", 0.0))

        def beta_gradient(b):
            r = [sum(X[i][j] * b[j] for j in range(d)) - y[i] for i in range(n)]
            return [sum(X[i][j] * r[i] for i in range(n)) / n for j in range(d)]

        def field(w):
            g = beta_gradient([w[j] * w[d + j] for j in range(d)])
            grad = [g[j] * w[d + j] for j in range(d)] + [g[j] * w[j] for j in range(d)]
            if algorithm == "gd":
                eps = [mpf(0)] * (2 * d)
            elif algorithm == "usam":
                eps = [rho * x for x in grad]
            else:
                norm = mp.sqrt(sum(x * x for x in grad))
                eps = [rho * x / norm for x in grad]
            p = [w[k] + eps[k] for k in range(2 * d)]
            gt = beta_gradient([p[j] * p[d + j] for j in range(d)])
            return [-gt[j] * p[d + j] for j in range(d)] + [-gt[j] * p[j] for j in range(d)]

        def rk4(h):
            w = [mpf(alpha)] * d + [mpf(0)] * d
            h, t, out = mpf(h), 0.0, []
            for end in times:
                for _ in range(round((end - t) / float(h))):
                    k1 = field(w)
                    k2 = field([w[i] + h / 2 * k1[i] for i in range(2 * d)])
                    k3 = field([w[i] + h / 2 * k2[i] for i in range(2 * d)])
                    k4 = field([w[i] + h * k3[i] for i in range(2 * d)])
                    w = [
                        w[i] + h / 6 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]) for i in range(2 * d)
                    ]
                t = end
                out.append([w[j] * w[d + j] for j in range(d)])
            return out

        coarse, fine = rk4(step), rk4(step / 2)
        return np.array(
            [
                [float((16 * f - c) / 15) for f, c in zip(*rows, strict=True)]
                for rows in zip(fine, coarse, strict=True)
            ]
        )


def _against_extended_precision(algorithm: str, times, step: float) -> None:
    alpha = 1e-30
    data = Dataset(REFERENCE_X, REFERENCE_Y, task="regression")
    reference = _extended_precision_beta(algorithm, alpha, times, step)
    run = conserved_flow(data, algorithm, u_alpha_v_zero(2, alpha), t_max=times[-1],
                         n_points=len(times) + 1, rtol=1e-13, atol=1e-100,
                         **REFERENCE_HP[algorithm])  # fmt: skip
    assert run.status == 0 and run.cause == Cause.REACHED_END, run.message
    np.testing.assert_allclose(run.t[1:], times)
    np.testing.assert_allclose(run.beta[1:], reference, rtol=1e-8, atol=0)


@pytest.mark.parametrize("algorithm", list(REFERENCE_HP))
def test_growth_from_1e30_against_70_digits(algorithm):
    """t = 4, 8, 12 from u = 1e-30, v = 0 (beta from 0 up to 1e-42: the exponential phase,
    where log|c| drifts for the SAM flows): beta to 1e-8 relative."""
    _against_extended_precision(algorithm, [4.0, 8.0, 12.0], 0.02)


@pytest.mark.slow  # 5-6 s each (60 000 evaluations of the 70-digit field)
@pytest.mark.parametrize("algorithm", list(REFERENCE_HP))
def test_escape_from_1e30_against_70_digits(algorithm):
    """Through the escape of coordinate 1 (t ~ 37, USAM's ~ 46) onto the first plateau: beta
    at t = 5, 10, ..., 50 to 1e-8 relative."""
    _against_extended_precision(algorithm, [5.0 * k for k in range(1, 11)], 0.01)


# --------------------------------------------------------------------------- the (u, v) engine


@pytest.mark.parametrize(
    "algorithm, hp",
    [
        ("gd", {}),
        ("l2-sam", {"rho": 0.05}),
        ("usam", {"rho": 0.5}),
        ("le-sam", {"sigma": 0.05, "rho_max": 0.5}),
        ("1-usam", {"rho": 0.3}),
    ],
)
def test_regression_follows_the_uv_engine_where_it_resolves_c(algorithm, hp):
    """From u = 0.3, v = 0 (c = 0.09, resolved by float64 layers: ``chart='auto'`` takes the
    (u, v) engine) on the staircase up to t = 6, both at rtol 1e-12: log|beta| within 1e-8,
    signs equal."""
    data = staircase()
    init = u_alpha_v_zero(data.d, 0.3)
    kw = dict(t_max=6.0, n_points=7, rtol=1e-12, **hp)
    ours = simulate(data, algorithm, 2, init, chart="conserved", **kw)
    theirs = simulate(data, algorithm, 2, init, **kw)
    assert ours.backend == "conserved" and theirs.backend != "conserved"
    assert ours.status == theirs.status == 0, (ours.message, theirs.message)
    np.testing.assert_array_equal(ours.sign_beta, theirs.sign_beta)
    finite = np.isfinite(theirs.log_abs_beta)
    np.testing.assert_array_equal(np.isfinite(ours.log_abs_beta), finite)
    np.testing.assert_allclose(ours.log_abs_beta[finite], theirs.log_abs_beta[finite], atol=1e-8)
    np.testing.assert_allclose(ours.tau, theirs.tau, rtol=1e-8)


@pytest.mark.parametrize(
    "algorithm, hp",
    [("gd", {}), ("l2-sam", {"rho": 0.1}), ("usam", {"rho": 0.3}), ("1-sam", {"rho": 0.1})],
)
def test_classification_follows_the_uv_engine_in_the_rescaled_clock(algorithm, hp):
    """Six examples, a signed init with c_j of both signs, the rescaled clock to tau = 2 (rtol
    1e-12): log|beta| within 1e-8 of ``chart='asinh'``, and log t (the quadrature of 1/c
    along the path) within 1e-8 relative."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((6, 4))
    data = Dataset(X, np.sign(X @ np.ones(4)))
    init = np.array([[0.3, -0.2, 0.1, 0.25], [0.05, 0.4, 0.0, -0.1]])
    kw = dict(t_max=2.0, n_points=5, rtol=1e-12, **hp)
    ours = simulate(data, algorithm, 2, init, chart="conserved", **kw)
    theirs = simulate(data, algorithm, 2, init, chart="asinh", **kw)
    assert ours.status == theirs.status == 0 and ours.clock == "rescaled"
    np.testing.assert_allclose(ours.log_abs_beta, theirs.log_abs_beta, atol=1e-8)
    np.testing.assert_allclose(ours.log_t_original[1:], theirs.log_t_original[1:], rtol=1e-8)


def test_l2_sam_collapses_where_the_engine_does():
    """From u = 1e-3, v = 0 with rho = 0.05 (regression): both engines collapse at t = 0.0540,
    at the same time to 1e-8, and theta is 0 from there to t_max (status 0)."""
    data = staircase()
    init = u_alpha_v_zero(data.d, 1e-3)
    kw = dict(t_max=5.0, n_points=11, rho=0.05)
    ours = simulate(data, "l2-sam", 2, init, chart="conserved", **kw)
    theirs = simulate(data, "l2-sam", 2, init, chart="asinh", **kw)
    assert ours.cause == theirs.cause == Cause.COLLAPSE and ours.status == 0
    assert ours.collapse_time == pytest.approx(theirs.collapse_time, abs=1e-8)
    assert ours.t[-1] == 5.0 and np.all(ours.beta[1:] == 0)


def _least_squares_data() -> Dataset:
    """n = 9 > d = 4: no interpolator, GD rests at the least-squares point."""
    rng = np.random.default_rng(7)
    return Dataset(rng.standard_normal((9, 4)), rng.standard_normal(9), task="regression")


EVENT_RUNS = {
    "loss floor": (staircase, "gd", {"t_max": 1e4, "loss_floor": 1e-6}),
    "stationary": (_least_squares_data, "usam", {"t_max": 1e4, "rho": 0.1}),
    "residual switch": (staircase, "1-sam", {"t_max": 50.0, "rho": 0.05}),
}


@pytest.mark.parametrize("kind", list(EVENT_RUNS))
def test_events_as_the_uv_engine(kind):
    """From u = 0.1, v = 0: the loss floor, a stationary point (least squares) and 1-SAM's
    residual switch end the run (or the motion) with the cause, event and status of
    ``chart='asinh'``, at the same time to 1e-6 relative (the stationary point to 1e-2)."""
    make, algorithm, kw = EVENT_RUNS[kind]
    data = make()
    init = u_alpha_v_zero(data.d, 0.1)
    ours = simulate(data, algorithm, 2, init, chart="conserved", n_points=5, **kw)
    theirs = simulate(data, algorithm, 2, init, chart="asinh", n_points=5, **kw)
    assert ours.cause == theirs.cause and ours.status == theirs.status, (
        ours.message,
        theirs.message,
    )
    assert [e.kind for e in ours.events] == [e.kind for e in theirs.events] == [kind]
    # a stationary point is approached exponentially, and the event fires where the gradient
    # falls to 1e-8 of its scale: there the path's own tolerance (1e-10 of beta) moves the
    # gradient by ~1 %, and the time by that over the slow decay rate. Measured: the asinh
    # chart's numba and numpy backends 0.7 % apart (107.90 and 108.68), the conserved chart
    # 107.985 on both; the state there agrees to 1e-6 (below)
    assert ours.events[0].tau == pytest.approx(
        theirs.events[0].tau, rel=1e-6 if kind != "stationary" else 1e-2
    )
    np.testing.assert_allclose(ours.beta[-1], theirs.beta[-1], atol=1e-6)


# --------------------------------------------------------------------------- vanishing alpha


def _horizon(data: Dataset, jumps: int | None = None) -> float:
    """Accelerated time 0.3 past jump ``jumps`` of the limit (None: 1 past the last one)."""
    times = saddles(data).times
    return times[-1] + 1.0 if jumps is None else times[jumps - 1] + 0.3


@pytest.mark.parametrize(
    "backend", ["auto", *(pytest.param(b, marks=pytest.mark.slow) for b in BACKENDS)]
)
@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("algorithm", list(SADDLE_RUNS))
def test_vanishing_alpha_runs_reach_t_max_through_simulate(algorithm, alpha, backend):
    """From u = alpha, v = 0, past the second jump of GD's limit (t / log(1/alpha) = 2.55):
    status 0 with every backend name (the conserved flow is one numpy field); GD and USAM
    reach t_max on GD's second plateau, l2-SAM (rho = 0.05 >> alpha) collapses at t = 0."""
    data = staircase()
    t_max = _horizon(data, 2) * np.log(1 / alpha)
    run = simulate(data, algorithm, 2, u_alpha_v_zero(data.d, alpha), t_max=t_max,
                   n_points=51, backend=backend, **SADDLE_RUNS[algorithm])  # fmt: skip
    assert run.status == 0 and run.backend == "conserved" and run.t[-1] == t_max, run.message
    if algorithm == "l2-sam":
        assert run.cause == Cause.COLLAPSE and run.collapse_time == 0.0
        assert np.all(run.beta[1:] == 0)
    else:
        assert run.cause == Cause.REACHED_END
        np.testing.assert_allclose(run.beta[-1], saddles(data).betas[2], atol=0.05)


@functools.cache
def _gd_errors(alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """GD from u = alpha, v = 0 on the staircase against the limit: jump-time errors (the
    loss crossing the midpoint of two plateau losses, in t / log(1/alpha)) and the relative
    loss errors at the plateau midpoints (the last one read one plateau length on)."""
    data = staircase()
    path = saddles(data)
    log_inv = np.log(1 / alpha)
    run = simulate(data, "gd", 2, u_alpha_v_zero(data.d, alpha),
                   t_max=_horizon(data) * log_inv, n_points=2001)  # fmt: skip
    assert run.status == 0 and run.cause == Cause.REACHED_END, run.message
    t = run.t / log_inv
    jumps = []
    for before, after in itertools.pairwise(path.losses):
        level = 0.5 * (before + after)
        k = int(np.flatnonzero(run.loss < level)[0])
        w = (run.loss[k - 1] - level) / (run.loss[k - 1] - run.loss[k])
        jumps.append(t[k - 1] + w * (t[k] - t[k - 1]))
    edges = np.concatenate([[0.0], path.times])
    middles = np.concatenate([(edges[:-1] + edges[1:]) / 2, [path.times[-1] + 0.5]])
    plateau = np.interp(middles, t, run.loss)
    return np.array(jumps) - path.times, np.abs(plateau - path.losses) / path.losses[0]


@pytest.mark.parametrize("alpha", [1e-30, 1e-100, pytest.param(1e-300, marks=pytest.mark.slow)])
def test_gd_follows_the_saddle_to_saddle_limit(alpha):
    """Jump times within 20 / log(1/alpha) of the limit's (measured x log(1/alpha): 13.4 from
    alpha = 1e-30 on) and the plateau losses within 1e-2 of the first plateau's loss."""
    jumps, plateaus = _gd_errors(alpha)
    assert np.max(np.abs(jumps)) * np.log(1 / alpha) < 20.0
    assert np.max(np.abs(jumps)) * np.log(1 / alpha) > 5.0  # the O(1 / log(1/alpha)) offset
    assert np.max(plateaus) < 1e-2


# --------------------------------------------------------------------------- the choice


def test_auto_takes_the_conserved_flow_where_it_applies():
    """Regression from u = 1e-6, v = 0 (c = 1e-12 < 1e-10) at depth 2 with gd, l2-sam, usam,
    le-sam, 1-sam, 1-usam and numbers as hyper-parameters: 'conserved'; u = 1e-4 (c = 1e-8),
    a balanced init, depth 3, l_inf-SAM, ASAM, a schedule, reduced, classification: the
    (u, v) engine."""
    data, init = staircase(), u_alpha_v_zero(5, 1e-6)
    for name in ("gd", "l2-sam", "usam", "le-sam", "1-sam", "1-usam"):
        hp = {"sigma": 0.1, "rho_max": 0.5} if name == "le-sam" else {"rho": 0.1}
        assert conserved_applies(data, name, 2, init, None, hp)
    assert not conserved_applies(data, "gd", 2, u_alpha_v_zero(5, 1e-4), None, {})
    assert not conserved_applies(data, "gd", 2, 1e-6, None, {})
    assert not conserved_applies(data, "gd", 3, np.vstack([init, init[:1]]), None, {})
    assert not conserved_applies(data, "linf-sam", 2, init, None, {"rho": 0.1})
    assert not conserved_applies(data, "asam", 2, init, None, {"rho": 0.1})
    assert not conserved_applies(data, "usam", 2, init, None, {"rho": constant(0.1)})
    assert not conserved_applies(data, "usam", 2, init, True, {"rho": 0.1})
    run = simulate(data, "usam", 2, init, t_max=1.0, n_points=3, rho=constant(0.1))
    assert run.backend != "conserved"
    mu = single_example([1.0, 2.0])
    run = simulate(mu, "gd", 2, [[1e-6, 1e-6], [0.0, 0.0]], t_max=1.0, n_points=3)
    assert run.backend != "conserved"
    assert simulate(data, "gd", 2, init, t_max=1.0, n_points=3).backend == "conserved"


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"depth": 3, "alpha": np.ones((3, 5))}, "depth"),
        ({"algorithm": "linf-sam"}, "algorithm"),
        ({"rho": constant(0.1)}, "rho"),
        ({"reduced": True}, "reduced"),
        ({"n_points": 100_001}, "n_points"),
        ({"backend": "cuda"}, "backend"),
        ({"chart_scale": -1.0}, "chart_scale"),
        ({"method": "Euler"}, "method"),
        ({"rtol": 0.5}, "rtol"),
        ({"max_nfev": 0}, "max_nfev"),
        ({"loss_floor": 0.0}, "loss_floor"),
        ({"clock": "rescaled"}, "clock"),
    ],
)
def test_chart_conserved_refuses_by_name(kwargs, name):
    """``simulate(..., chart='conserved')``: a run it does not integrate, or a bad option,
    is a ValueError naming the parameter."""
    args = {"algorithm": "l2-sam", "depth": 2, "alpha": u_alpha_v_zero(5, 0.3), "rho": 0.1}
    with pytest.raises(ValueError, match=name):
        simulate(staircase(), chart="conserved", **{**args, **kwargs})


# --------------------------------------------------------------------------- runs that stop


def test_a_spent_budget_returns_the_state_it_reached():
    """``max_nfev = 500`` from alpha = 1e-30: status -1 (budget spent), the grid samples up to
    there and the last integrated state after them (not on the grid)."""
    data = staircase()
    run = simulate(data, "usam", 2, u_alpha_v_zero(data.d, 1e-30), t_max=400.0, n_points=51,
                   max_nfev=500, rho=0.5)  # fmt: skip
    assert run.status == -1 and run.cause == Cause.BUDGET_SPENT and "max_nfev" in run.message
    grid = np.linspace(0.0, 400.0, 51)
    k = len(run.t) - 1
    np.testing.assert_array_equal(run.t[:k], grid[:k])
    assert grid[k - 1] < run.t[-1] < grid[k] and run.nfev == 500
    assert np.all(np.isfinite(run.log_abs_theta[-1]) | (run.sign_theta[-1] == 0))


def test_alpha_1e154_ends_within_its_budget():
    """u = 1e154, v = 0 (c = 1e308: the flow moves on a time scale of 1e-308): the run ends
    with status -1 once its 3000 evaluations are spent, the path so far returned."""
    data = staircase()
    run = gd_mirror_flow(data, u_alpha_v_zero(data.d, 1e154), t_max=10.0, max_nfev=3000)
    assert run.status == -1 and run.cause == Cause.BUDGET_SPENT and run.nfev == 3000


class _NanStepSolver(DOP853):
    """DOP853 whose step size becomes NaN at its second step (as scipy's did on fields that
    overflow): without a cap inside the step it would evaluate the field forever."""

    def _step_impl(self):
        if self.t > 0:
            self.h_abs = np.nan
        return super()._step_impl()


def test_a_nan_step_is_a_failure_with_a_message(monkeypatch):
    monkeypatch.setitem(conserved.METHODS, "DOP853", _NanStepSolver)
    data = staircase()
    run = conserved_flow(data, "gd", u_alpha_v_zero(data.d, 0.3), t_max=10.0, n_points=5)
    assert run.status == -1 and run.cause == Cause.SOLVER_FAILED
    assert "NaN" in run.message and run.t[-1] > 0


def test_extreme_inputs_end_with_a_status_and_no_warning():
    """u(0) = 1e300, alpha = 1e100 balanced, u(0) = 1e200, targets of 1e300, atol 1e-300,
    rtol 1e-30, beta beyond float64 in classification: a status (beta leaving float64 is
    'left float64'), never a floating-point warning or a hang."""
    data = staircase()
    huge = Dataset(data.X, data.y * 1e300, task="regression")
    init = u_alpha_v_zero(5, 1e-3)
    runs = {
        "u = 1e300": (data, np.vstack([np.full(5, 1e300), np.ones(5)]), {}),
        "alpha = 1e100": (data, 1e100, {}),
        "u = 1e200": (data, u_alpha_v_zero(5, 1e200), {}),
        "targets 1e300": (huge, init, {}),
        "atol 1e-300": (data, init, {"atol": 1e-300}),
        "rtol 1e-30": (data, init, {"rtol": 1e-30}),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        outcome = {
            name: conserved_flow(d, "gd", a, t_max=10.0, n_points=5, max_nfev=20_000, **kw)
            for name, (d, a, kw) in runs.items()
        }
        far = conserved_flow(single_example([1.0, 2.0]), "gd", [[0.3, 1.0], [0.0, 2.0]],
                             t_max=1e3, loss="exponential")  # fmt: skip
    for name in ("u = 1e300", "u = 1e200"):
        assert outcome[name].cause == Cause.OVERFLOW and "float64" in outcome[name].message
    assert (
        outcome["targets 1e300"].status == -1 and "time scale" in outcome["targets 1e300"].message
    )
    assert outcome["alpha = 1e100"].status == -1
    for name in ("atol 1e-300", "rtol 1e-30"):
        assert outcome[name].status == 0, outcome[name].message
    assert far.cause == Cause.OVERFLOW and far.log_abs_beta[-1].max() > 300


def test_the_first_sample_is_the_initialisation_at_any_scale():
    """A signed init of 1e-300 and 1e-301 (c_j of both signs, beta underflows): the first
    sample's log|theta|, signs and log|beta| are the init's (1e-12)."""
    init = np.array([[1e-300, -3e-301], [-1e-301, 1e-300]])
    run = conserved_flow(single_example([1.0, 2.0]), "usam", init, t_max=1.0, n_points=3, rho=0.1)
    np.testing.assert_allclose(run.log_abs_theta[0], np.log(np.abs(init)), rtol=1e-12)
    np.testing.assert_array_equal(run.sign_theta[0], np.sign(init))
    expected = np.log(np.abs(init[0])) + np.log(np.abs(init[1]))
    np.testing.assert_allclose(run.log_abs_beta[0], expected, rtol=1e-12)
