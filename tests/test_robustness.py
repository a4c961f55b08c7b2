"""Property-based robustness: every public function of ``analysis/`` and the data /
initialization / discrete entry points of ``flows`` either returns a valid result or raises a
``ValueError`` whose message names the offending parameter, within a few seconds, for random
shapes, NaN / inf, extreme scales (1e-300 .. 1e300) and zero / negative / huge hyperparameters.

How: each test starts from a valid call (the baseline) and replaces one parameter by a drawn
value (a "fuzzed" parameter); a ``ValueError`` must name that parameter, anything else that is
returned must pass the function's validity check (shapes, ranges, no NaN where a number is
promised, honest status). Searches with an iteration cap may also raise a ``RuntimeError`` that
names the cap (``max_iter``).

The pools of *valid* values for functions that run flows (``classify``, ``collapse_boundary``,
``leader_phase_diagram``, ``leader_sequence_at_depth``) hold cheap runs only (regime 3, instant
collapse, short horizons): a collapsing l2-SAM run near the collapse boundary costs seconds to
minutes and is covered by tests/test_regimes.py, not here. Invalid values are drawn freely.
``flows.simulate`` is not fuzzed here (tests/test_validation.py and the engine's tests cover it).
"""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from analysis import amplification, limits, maxmargin
from analysis.regimes import boundaries, classification, inputs, leaders
from flows import Dataset, Trajectory, iterate, single_example
from flows.checks import positive
from flows.data import is_separable, sign_constrained_separable
from flows.initialization import initialization, kept_sign_pattern
from flows.results import Cause

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

#: Examples per property, for cheap functions and for those that run flows (no time limit per
#: example: on a busy machine a test only takes longer; the loops' own caps guard against hangs).
CHEAP = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FLOWS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --------------------------------------------------------------------------- value pools

SPECIAL = [
    0.0,
    -0.0,
    -1.0,
    0.5,
    3,
    np.nan,
    np.inf,
    -np.inf,
    1e-300,
    -1e-300,
    1e300,
    -1e300,
    5e-324,
    1.7e308,
    True,
    None,
    "a",
    "",
    [],
    [[]],
    [0.5, 1.0],
    [[1.0, 2.0]],
    [1.0, np.nan],
    {"a": 1},
]
FLOATS = st.floats(allow_nan=True, allow_infinity=True)
EXTREME = st.builds(lambda m, k: m * 10.0**k, st.floats(-10, 10), st.integers(-300, 300))
SCALARS = st.one_of(st.sampled_from(SPECIAL), FLOATS, EXTREME, st.integers(-5, 50))
ARRAYS = hnp.arrays(
    np.float64,
    hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
    elements=st.one_of(FLOATS, EXTREME),
)
SCALED_VECTORS = st.builds(
    lambda k, v: 10.0**k * np.sort(np.asarray(v)),
    st.integers(-300, 300),
    st.lists(st.floats(0.1, 10), min_size=1, max_size=4, unique=True),
)
ANY = st.one_of(SCALARS, ARRAYS, SCALED_VECTORS)


def invalid_or(*valid):
    """Anything (mostly invalid), or one of the given valid values."""
    return st.one_of(ANY, st.sampled_from(list(valid)))


def scaled(base) -> st.SearchStrategy:
    """``base`` times 10^k, k in [-300, 300] (exactly representable scales of a valid input)."""
    base = np.asarray(base, dtype=float)
    return st.integers(-300, 300).map(lambda k: base * 10.0**k)


def names(params, message: str) -> bool:
    """Whether ``message`` names one of ``params`` as a word (``traj.t`` names ``traj``)."""
    return any(re.search(rf"(?<![\w-]){re.escape(p)}(?![\w-])", message) for p in params)


ERROR = object()


def outcome(call, params, caps: tuple[str, ...] = ()):
    """Run ``call``: a ValueError must name one of ``params`` (a RuntimeError one of ``caps``);
    returns the result, or ERROR if a correct error was raised."""
    params = {params} if isinstance(params, str) else set(params)
    try:
        return call()
    except ValueError as exc:
        assert names(params, str(exc)), f"ValueError does not name {params}: {exc}"
    except RuntimeError as exc:
        if not caps:
            raise
        assert names(caps, str(exc)), f"RuntimeError does not name {caps}: {exc}"
    return ERROR


def fuzz(func, baseline: dict, param: str, value, also: tuple[str, ...] = (), caps=()):
    """``func(**baseline)`` with ``param`` replaced by ``value``; see :func:`outcome`."""
    kw = dict(baseline)
    kw[param] = value
    return outcome(lambda: func(**kw), (param, *also), caps), kw


def is_angle(x) -> bool:
    return isinstance(x, float) and (np.isnan(x) or 0.0 <= x <= np.pi)


# --------------------------------------------------------------------------- synthetic trajectories


@st.composite
def trajectories(draw, bad: bool = True):
    """Trajectories with random sizes and contents; with ``bad``, sometimes NaN / +inf entries,
    non-monotone times or mismatched shapes (which must be rejected, naming traj)."""
    T, d, G = draw(st.integers(1, 6)), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    logs = st.one_of(st.floats(-800, 800), st.just(-np.inf))
    lb = draw(hnp.arrays(np.float64, (T, d), elements=logs))
    lt = draw(hnp.arrays(np.float64, (T, G, d), elements=logs))
    t = np.cumsum(draw(hnp.arrays(np.float64, T, elements=st.floats(0, 10))))
    if bad and draw(st.booleans()):
        kind = draw(st.sampled_from(["nan", "inf", "t", "shape", "sign"]))
        if kind == "nan":
            lb[draw(st.integers(0, T - 1)), 0] = np.nan
        elif kind == "inf":
            lb[draw(st.integers(0, T - 1)), 0] = np.inf
        elif kind == "t":
            t = t[::-1] - 1.0 if T > 1 else np.array([np.nan])
        elif kind == "shape":
            lt = lt[:, :, :0]
        else:
            lb = lb.copy()
    sign_b = np.where(np.isneginf(lb), 0.0, draw(st.sampled_from([1.0, -1.0])))
    if bad and draw(st.integers(0, 9)) == 0:
        sign_b = sign_b * 2.0
    sign_t = np.where(np.isneginf(lt), 0.0, 1.0)
    rho = draw(st.sampled_from([None, 0.0, 0.5, 1e300]))
    return Trajectory(
        t=t,
        tau=t.copy(),
        log_t_original=t.copy(),
        log_abs_theta=lt,
        sign_theta=sign_t,
        log_abs_beta=lb,
        sign_beta=sign_b,
        loss=np.zeros(T),
        status=draw(st.sampled_from([-1, 0, 1])),
        message="",
        algorithm="l2-sam",
        depth=G,
        clock="rescaled",
        hyperparameters={"rho": rho},
    )


TRAJ_OR_ANY = st.one_of(trajectories(), ANY)

# --------------------------------------------------------------------------- analysis.amplification


@CHEAP
@given(
    lb=st.one_of(
        ANY,
        hnp.arrays(
            np.float64,
            hnp.array_shapes(min_dims=2, max_dims=2, max_side=5),
            elements=st.one_of(FLOATS, EXTREME),
        ),
    )
)
def test_leaders_and_shares(lb):
    res = outcome(lambda: amplification.leaders(lb), "log_abs_beta")
    if res is not ERROR:
        arr = np.asarray(lb, dtype=float)
        assert res.shape == (arr.shape[0],) and np.all((res >= -1) & (res < arr.shape[1]))
    sh = outcome(lambda: amplification.shares(lb), "log_abs_beta")
    if sh is not ERROR:
        arr = np.asarray(lb, dtype=float)
        assert sh.shape == arr.shape
        nan_rows = np.any(np.isnan(arr), axis=1) | (np.sum(np.isposinf(arr), axis=1) > 1)
        assert np.all(np.isnan(sh[nan_rows]))  # NaN propagates, never a valid-looking 0
        ok = sh[~nan_rows]
        assert np.all((ok >= 0) & (ok <= 1))
        sums = ok.sum(axis=1)
        assert np.all((np.abs(sums - 1) < 1e-12) | (sums == 0))


@CHEAP
@given(param=st.sampled_from(["t", "log_abs_beta"]), value=ANY)
def test_leader_sequence(param, value):
    base = dict(t=np.arange(3.0), log_abs_beta=np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]]))
    res, kw = fuzz(amplification.leader_sequence, base, param, value)
    if res is not ERROR:
        d = np.asarray(kw["log_abs_beta"]).shape[1]
        assert all(-1 <= c < d for c in res.coordinates)
        assert len(res.coordinates) == len(res.switch_times)
        assert np.all(np.isfinite(res.switch_times)) and np.all(np.diff(res.switch_times) >= 0)


@CHEAP
@given(traj=TRAJ_OR_ANY)
def test_trajectory_leaders(traj):
    res = outcome(lambda: amplification.trajectory_leaders(traj), "traj")
    if res is not ERROR:
        assert all(-1 <= c < traj.log_abs_beta.shape[1] for c in res.coordinates)


# --------------------------------------------------------------------------- analysis.limits

LINF = dict(mu=[1.0, 2.0, 3.0], alpha=[1.5, 1.1, 0.5], rho=1.0, depth=2)


@CHEAP
@given(
    param=st.sampled_from(["mu", "alpha", "rho", "depth", "rtol"]),
    value=st.one_of(ANY, scaled([1.0, 2.0, 3.0]), st.integers(1, 10**30)),
)
def test_linf_prediction(param, value):
    scores, kw = (
        fuzz(limits.linf_limit_scores, LINF, param, value) if param != "rtol" else (ERROR, None)
    )
    if scores is not ERROR:
        assert not np.any(np.isnan(scores)) and not np.any(np.isposinf(scores))
    res, kw = fuzz(limits.predict_linf_limit, {**LINF, "rtol": 1e-12}, param, value)
    if res is not ERROR:
        assert res is None or 0 <= res < np.size(kw["mu"])
        mu = np.asarray(kw["mu"], dtype=float)
        if param == "mu" and np.allclose(mu / mu[0], LINF["mu"], rtol=1e-14):
            assert res == limits.predict_linf_limit(**LINF)  # the scale of mu changes no argmax


@CHEAP
@given(
    traj=TRAJ_OR_ANY,
    window=invalid_or(0.2, 1.0),
    growth_tol=invalid_or(0.05, 0.0),
    reference=invalid_or([1.0, 0.0], [1.0, 1.0, 1.0]),
    log_bound=invalid_or(None, -np.inf),
)
def test_limit_estimates(traj, window, growth_tol, reference, log_bound):
    est = outcome(
        lambda: limits.final_direction(traj, window, growth_tol), ("traj", "window", "growth_tol")
    )
    if est is not ERROR:
        norm = np.linalg.norm(est.direction)
        assert np.all(np.isfinite(est.direction)) and (norm == 0 or abs(norm - 1) < 1e-12)
        assert np.isnan(est.movement) or 0 <= est.movement <= np.pi
        assert isinstance(est.collapsed, bool) and isinstance(est.diverged, bool)
        assert est.leader is None or 0 <= est.leader < est.direction.size
    series = outcome(lambda: limits.angle_series(traj, reference), ("traj", "reference"))
    if series is not ERROR:
        assert series.shape == traj.t.shape and all(is_angle(float(a)) for a in series)
    obs = outcome(lambda: limits.observed_linf_limit(traj, log_bound), ("traj", "log_bound"))
    if obs is not ERROR:
        assert obs is None or 0 <= obs < traj.log_abs_beta.shape[1]


# --------------------------------------------------------------------------- analysis.maxmargin

RNG = np.random.default_rng(0)
_W = np.array([1.0, -2.0, 0.5])
_X = RNG.normal(size=(40, 3))
X_BASE = _X[np.abs(_X @ _W) > 0.5][:8]
Y_BASE = np.sign(X_BASE @ _W)
REFERENCE = {p: maxmargin.max_margin(X_BASE, Y_BASE, p) for p in (1, 2)}


@CHEAP
@given(
    u=st.one_of(ANY, scaled([1.0, -2.0])),
    v=st.one_of(ANY, scaled([3.0, 1.0])),
    vertices=st.one_of(ANY, scaled([[1.0, 0.0], [0.0, 1.0]])),
)
def test_angles(u, v, vertices):
    a = outcome(lambda: maxmargin.angle(u, v), ("u", "v"))
    if a is not ERROR:
        assert is_angle(a)
    b = outcome(lambda: maxmargin.angle_to_set(u, vertices), ("u", "vertices"))
    if b is not ERROR:
        assert is_angle(b)


@CHEAP
@given(
    param=st.sampled_from(["X", "y", "p"]),
    value=st.one_of(
        ANY,
        st.integers(-300, 300).map(lambda k: X_BASE * 10.0**k),
        st.just(-Y_BASE),
        st.sampled_from([1, 2]),
    ),
    p=st.sampled_from([1, 2]),
)
def test_max_margin(param, value, p):
    res, kw = fuzz(maxmargin.max_margin, dict(X=X_BASE, y=Y_BASE, p=p), param, value)
    if res is not ERROR:
        assert np.all(np.isfinite(res.beta)) and abs(np.linalg.norm(res.direction) - 1) < 1e-12
        assert res.margin > 0 and res.kkt_residual() < 1e-6
        if param == "X" and np.allclose(value / value[0, 0] * X_BASE[0, 0], X_BASE, rtol=1e-14):
            np.testing.assert_allclose(res.direction, REFERENCE[kw["p"]].direction, atol=1e-8)
    m = outcome(
        lambda: maxmargin.normalized_margin(
            kw.get("beta", REFERENCE[p].beta), kw["X"], kw["y"], kw["p"]
        ),
        (param, "beta"),
    )
    if m is not ERROR:
        assert not np.isnan(m)


@CHEAP
@given(beta=st.one_of(ANY, scaled([1.0, -1.0, 0.5])), mu=st.one_of(ANY, scaled([1.0, -3.0, 3.0])))
def test_normalized_margin_and_l1_set(beta, mu):
    m = outcome(lambda: maxmargin.normalized_margin(beta, X_BASE, Y_BASE, 2), "beta")
    if m is not ERROR:
        assert np.isnan(m) == (not np.any(np.asarray(beta, dtype=float)))
    s = outcome(lambda: maxmargin.l1_solution_set_single_example(mu), "mu")
    if s is not ERROR:
        assert s.shape[1] == np.size(mu) and np.all(np.isfinite(s)) and s.shape[0] >= 1
    data = outcome(lambda: maxmargin.max_margin_of(beta, 2), "data")
    assert data is ERROR


# --------------------------------------------------------------------------- analysis.regimes

MU = [1.0, 2.0, 3.0]
MU_POOL = st.one_of(ANY, scaled(MU))


@CHEAP
@given(mu=MU_POOL, value=ANY, rho=st.one_of(ANY, st.sampled_from([0.5, 1e-300, 1e300])))
# found by the fuzzer: the regime-3 boundary is a normal number (2.8e-209), the certificate
# boundary 4.77e-255 * rho = 1.9e-463 is not (a ValueError naming rho and mu)
@example(mu=np.array([6.74199465e-255, 1.0]), value=0.0, rho=3.9283932810596054e-209)
def test_regime_formulas(mu, value, rho):
    m = outcome(lambda: inputs.check_mu(mu), "mu")
    if m is not ERROR:
        assert np.all(m > 0) and np.all(np.diff(m) > 0)
    c = outcome(lambda: positive(value, "the_value"), "the_value")
    if c is not ERROR:
        assert np.isfinite(c) and c > 0
    n0 = outcome(lambda: boundaries.initial_norm(mu, value), ("mu", "alpha"))
    if n0 is not ERROR:
        assert n0 >= 0 and not np.isnan(n0)  # 0 / inf only where N0 leaves float64
    a3 = outcome(lambda: boundaries.regime3_boundary(mu, rho), ("mu", "rho"))
    ac = outcome(lambda: boundaries.collapse_certificate_boundary(mu, rho), ("mu", "rho"))
    if a3 is not ERROR:
        assert np.isfinite(a3) and 0 < a3 <= rho
        if ac is not ERROR:  # it may leave the float range where a3 does not
            assert 0 <= ac < a3
        m = np.asarray(mu, dtype=float)
        if m.shape == (3,) and np.allclose(m / m[0], MU, rtol=1e-14):  # scale-invariant
            assert a3 == pytest.approx(boundaries.regime3_boundary(MU, rho), rel=1e-13)


@CHEAP
@given(
    param=st.sampled_from(["mu", "alpha", "rho"]),
    value=st.one_of(ANY, scaled(MU), st.sampled_from([1e-300, 1e300, 0.0])),
)
def test_initial_rates(param, value):
    res, kw = fuzz(
        boundaries.initial_rates_from_field, dict(mu=MU, alpha=0.5, rho=1.0), param, value
    )
    if res is not ERROR:
        assert res.shape == (np.size(kw["mu"]),) and not np.any(np.isnan(res))


@CHEAP
@given(
    param=st.sampled_from(["mu", "rho", "rtol", "max_iter"]),
    value=st.one_of(ANY, scaled(MU), st.sampled_from([1e-3, 0.5, 1e-15, 10**6])),
)
def test_regime3_boundary_from_field(param, value):
    res, kw = fuzz(
        boundaries.regime3_boundary_from_field,
        dict(mu=MU, rho=1.0, rtol=1e-9, max_iter=200),
        param,
        value,
        caps=("max_iter",),
    )
    if res is not ERROR:
        exact = boundaries.regime3_boundary(kw["mu"], kw["rho"])
        assert res == pytest.approx(exact, rel=max(2 * kw["rtol"], 1e-9), abs=1e-320)


@CHEAP
@given(
    lb=st.one_of(ANY, hnp.arrays(np.float64, (4, 3), elements=st.one_of(FLOATS, EXTREME))),
    mu=MU_POOL,
)
def test_log_gradient_norm(lb, mu):
    res = outcome(lambda: classification.log_gradient_norm(lb, mu), ("log_abs_beta", "mu"))
    if res is not ERROR:
        assert res.shape == (np.shape(lb)[0],) and not np.any(np.isnan(res))


def cheap(value):
    """Drawn values for the flow-running tests: a positive number or an array / list of
    positive numbers becomes its negative (invalid), so that only the listed cheap valid values
    (:data:`POOLS`) run flows."""
    if isinstance(value, (bool, np.bool_, str)) or value is None:
        return value
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return value
    if arr.size and np.all(np.isfinite(arr)) and np.all(arr > 0):
        return -arr if arr.ndim else -float(arr)
    return value


#: Cheap valid values per function and parameter (regime 3 from the start, an immediate
#: collapse, short horizons, few samples); classify and collapse_boundary also get mu = (1, 2, 3)
#: at any scale (their horizons are 12 / mu_1), the others a fixed horizon, so only O(1) mu.
POOLS = {
    "classify": dict(
        mu=[[1.0, 2.0, 5.0]],
        alpha=[2.0, 5.0, 1e300, 1e-300],
        rho=[1.0, 0.5, 1e-300, 1e300],
        t_max=[None, 1e-3, 12.0],
        n_points=[2, 20, 50],
        max_extensions=[0, 1, 2, 60],
    ),
    "collapse_boundary": dict(
        mu=[[1.0, 2.0, 3.0]],
        rho=[1.0, 1e-300, 1e300, 5e-324, 3],
        rtol=[0.7, 0.8, 0.99],
        max_iter=[1, 2, 10**9],
    ),
    "leader_phase_diagram": dict(
        mu=[[1.0, 2.0, 5.0]],
        ratios=[[2.0], [2.0, 5.0], [1e300]],
        tau_max=[0.1, 1.0, 2],
        n_tau=[2, 3, 5],
    ),
    "leader_sequence_at_depth": dict(
        mu=[[1.0, 2.0, 5.0]],
        alpha=[1.0, 1e300, 1e-300, np.array([[1.0, -1.0, 2.0]] * 2)],
        rho=[0.5, 0.0, 1e300],
        depth=[1, 2],
        t_max=[1e-3, 1.0],
        n_points=[2, 5],
    ),
}


def pooled(data, function: str, param: str):
    """A value for ``param`` of ``function``: anything (made invalid if it is a positive number
    outside the pool), a cheap valid value, or (for mu) mu = (1, 2, 3) times 10^k."""
    options = [ANY.map(cheap)]
    if POOLS[function][param]:
        options.append(st.sampled_from(POOLS[function][param]))
    if param == "mu" and function in ("classify", "collapse_boundary"):
        options.append(scaled(MU))  # their horizons scale with 1 / mu_1: as cheap at any scale
    return data.draw(st.one_of(*options), label=param)


@FLOWS
@given(
    param=st.sampled_from(["mu", "alpha", "rho", "t_max", "n_points", "max_extensions"]),
    data=st.data(),
)
def test_classify(param, data):
    value = pooled(data, "classify", param)
    res, kw = fuzz(
        classification.classify,
        dict(mu=MU, alpha=2.0, rho=1.0, t_max=None, n_points=20, max_extensions=0),
        param,
        value,
        also=("alpha", "rho") if param in ("alpha", "rho") else (),
    )
    if res is not ERROR:
        assert res.regime in (1, 2, 3, None)
        assert np.all(np.isfinite(res.leaders.switch_times))
        assert np.all(np.diff(res.leaders.switch_times) >= 0)
        assert res.ratio == pytest.approx(kw["alpha"] / kw["rho"])


@FLOWS
@given(param=st.sampled_from(["mu", "rho", "rtol", "max_iter"]), data=st.data())
def test_collapse_boundary(param, data):
    value = pooled(data, "collapse_boundary", param)
    base = dict(mu=MU, rho=1.0, rtol=0.7, max_iter=1)
    res, kw = fuzz(boundaries.collapse_boundary_search, base, param, value)
    if res is not ERROR:
        assert res.lo <= res.alpha <= res.hi and res.iterations <= kw["max_iter"]
        assert isinstance(res.converged, bool) and res.undecided == ()
    val, kw = fuzz(boundaries.collapse_boundary, base, param, value, caps=("max_iter",))
    if val is not ERROR:
        assert np.isfinite(val) and val > 0


@FLOWS
@given(param=st.sampled_from(["mu", "ratios", "tau_max", "n_tau"]), data=st.data())
def test_leader_phase_diagram(param, data):
    value = pooled(data, "leader_phase_diagram", param)
    res, kw = fuzz(
        leaders.leader_phase_diagram, dict(mu=MU, ratios=[2.0], tau_max=1.0, n_tau=5), param, value
    )
    if res is not ERROR:
        tau, lead = res
        assert lead.shape == (np.size(kw["ratios"]), kw["n_tau"]) and tau.shape == (kw["n_tau"],)
        assert np.all((lead >= -2) & (lead < np.size(kw["mu"])))  # -2: not reached


@FLOWS
@given(param=st.sampled_from(["mu", "alpha", "rho", "depth", "t_max", "n_points"]), data=st.data())
def test_leader_sequence_at_depth(param, data):
    value = pooled(data, "leader_sequence_at_depth", param)
    res, kw = fuzz(
        leaders.leader_sequence_at_depth,
        dict(mu=MU, alpha=1.0, rho=0.5, depth=2, t_max=1.0, n_points=5),
        param,
        value,
    )
    if res is not ERROR:
        seq, traj = res
        assert traj.status in (-1, 0, 1)
        assert all(-1 <= c < np.size(kw["mu"]) for c in seq.coordinates)


# --------------------------------------------------------------------------- flows entry points


@CHEAP
@given(
    X=st.one_of(ANY, st.integers(-300, 300).map(lambda k: X_BASE * 10.0**k)),
    y=st.one_of(ANY, st.just(Y_BASE), st.just(-Y_BASE)),
)
def test_dataset(X, y):
    sep = outcome(lambda: is_separable(X, y), ("X", "y"))
    assert sep is ERROR or isinstance(sep, bool)
    data = outcome(lambda: Dataset(X, y), ("X", "y"))
    if data is not ERROR:
        assert data.X.shape == (data.n, data.d) and np.all(np.isfinite(data.X))
        assert is_separable(data.X, data.y)
        assert sign_constrained_separable(data, np.zeros(data.d))


@CHEAP
@given(mu=st.one_of(ANY, SCALED_VECTORS, scaled([-1.0, 0.0, 2.0])))
def test_single_example(mu):
    data = outcome(lambda: single_example(mu), "mu")
    if data is not ERROR:
        assert data.X.shape == (1, np.size(mu))


@CHEAP
@given(
    param=st.sampled_from(["alpha", "depth", "d", "reduced"]),
    value=st.one_of(ANY, st.sampled_from([False, np.array([[0.5, -1e-300, 1e300]] * 2)])),
)
def test_initialization(param, value):
    init, kw = fuzz(initialization, dict(alpha=0.5, depth=2, d=3, reduced=None), param, value)
    if init is not ERROR:
        assert init.groups.shape[1] == kw["d"] and np.all(np.isfinite(init.groups))
        assert int(np.sum(init.multiplicity)) == kw["depth"]
        if np.ndim(kw["alpha"]) < 2:  # a scalar or vector alpha is positive; an (L, d) one
            assert np.all(init.groups != 0)  # may hold zeros (e.g. v(0) = 0 in regression)
    pattern, kw = (
        fuzz(kept_sign_pattern, dict(alpha=0.5, depth=2, d=3), param, value)
        if param != "reduced"
        else (ERROR, None)
    )
    if pattern is not ERROR and pattern is not None:
        assert pattern.shape == (kw["d"],) and np.all(np.abs(pattern) == 1)


ALGORITHMS = ["gd", "l2-sam", "linf-sam", "usam", "le-sam"]


@FLOWS
@given(
    param=st.sampled_from(
        ["algorithm", "depth", "alpha", "rho", "eta", "steps", "record_every", "loss"]
    ),
    value=st.one_of(ANY, st.sampled_from(ALGORITHMS + ["exponential", 1e300, 5.0])),
)
def test_iterate(param, value):
    base = dict(
        data=single_example([1.0, 2.0, 3.0]),
        algorithm="l2-sam",
        depth=2,
        alpha=0.5,
        rho=0.3,
        eta=0.01,
        steps=5,
        record_every=2,
    )
    also = ("sigma", "rho_max", "rho") if param == "algorithm" else ()
    start = time.process_time()  # CPU time: a busy machine does not change it
    run, kw = fuzz(iterate, base, param, value, also=also)
    assert time.process_time() - start < 5
    if run is not ERROR:
        assert run.status in (0, -1)
        assert run.theta.shape[0] == run.steps.shape[0] >= 1
        assert np.all(np.isfinite(run.theta))
        if run.status == 0:
            assert np.all(np.isfinite(run.beta)) and not np.any(np.isnan(run.loss))
            assert run.steps[-1] == kw["steps"]
        else:
            assert run.cause is Cause.OVERFLOW and "step" in run.message
