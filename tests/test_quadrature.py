"""The original-time quadrature (:func:`flows.clocks.log_original_time`) against closed forms
and against an independent quadrature of the same exponent on recorded runs.

* Closed forms of ``log int exp(K)``: linear, Gaussian, steep quadratics (Dawson, error
  function), a pole (the exponential integral), a jump at a step boundary, ``c = 0`` and the
  limit ``LOG_T_LIMIT``, with the numpy interval rule and the compiled one.
* Recorded runs (single example L = 2 l2-SAM and GD, L = 3 up to a blow-up, a collapse, LE-SAM
  and l2-SAM on several examples, l_inf-SAM sliding, RK45 and LSODA steps, both backends):
  ``log_t_original`` against composite Gauss–Legendre quadratures of ``exp(K - max K)`` on
  each piece (cut at the output times and the solver steps), with ``K = -log c`` from the
  numpy field on the run's dense output, on the window where ``K`` is within 60 of its
  maximum (located by bisection); to 1e-9 relative in log t.
"""

from __future__ import annotations

import numpy as np
import pytest

from flows import Dataset, simulate, single_example
from flows.clocks import (
    _NODES,
    _TO_CHEBYSHEV,
    _chebyshev,
    _interpolation_error,
    _interval_rule,
    log_original_time,
)
from flows.datasets import gaussian_blobs

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _rules() -> list:
    """The interval rules: numpy's (None), and the compiled one if numba is installed."""
    try:
        from flows.compiled._quadrature_kernels import interval_rule
    except ImportError:
        return [None]
    return [None, interval_rule]


RULES = pytest.mark.parametrize("rule", _rules(), ids=lambda r: "numpy" if r is None else "numba")


def log_integrals(a, b, K, rule) -> np.ndarray:
    """``log int_{a_i}^{b_i} exp(K)`` for each piece alone: :func:`log_original_time` over the
    grid ``[a_i, b_i]`` of one step (``K(s, ref)``, ``ref`` the middle of the piece)."""
    return np.array([
        log_original_time(np.array([lo, hi]), [np.array([lo, hi])], K, rule=rule)[1]
        for lo, hi in zip(a, b, strict=True)
    ])  # fmt: skip


# --------------------------------------------------------------------------- closed forms


@RULES
def test_closed_forms(rule):
    """Linear exponent: log int_a^b exp(k s) ds = k a + log(expm1(k (b - a)) / k), from gentle
    slopes to a sharp endpoint peak (k (b - a) = 1e6), pieces alone and several pieces in one
    step; quadratic: against the error function; to 1e-9 (relative in log)."""
    from scipy.special import erf

    a = np.array([0.0, 0.0, 1.0, 0.0, 2.0])
    b = np.array([1.0, 1e-3, 3.0, 3.0, 2.5])
    slope = np.array([1e-3, 5.0, -40.0, 1e6, 0.0])
    mids = 0.5 * (a + b)

    def K(s, ref):
        owner = np.argmin(np.abs(ref[:, None] - mids[None, :]), axis=1)
        return slope[owner] * s

    def exact(a, b, k):
        with np.errstate(over="ignore", invalid="ignore"):
            moving = (k != 0) & (k * (b - a) < 700)
            return np.where(
                moving, k * a + np.log(np.expm1(k * (b - a)) / k), k * b + np.log(b - a)
            )

    want = exact(a, b, slope)
    want[3] = 3e6 - np.log(1e6)  # e^{k b} / k dominates
    np.testing.assert_allclose(log_integrals(a, b, K, rule), want, rtol=1e-9, atol=1e-9)

    cuts = np.array([0.0, 0.3, 0.9, 1.0, 1.7, 2.0])  # several pieces in each of two steps
    for k in (0.5, 30.0, 400.0, -25.0):
        got = log_original_time(cuts, [cuts[[0, 3, 5]]], lambda s, ref, k=k: k * s, rule=rule)
        want = np.logaddexp.accumulate(exact(cuts[:-1], cuts[1:], k))  # log t at the cuts
        np.testing.assert_allclose(got[1:], want, rtol=1e-9, atol=1e-9)

    got = log_integrals(np.array([0.0]), np.array([2.0]), lambda s, ref: -(s**2), rule)
    assert got[0] == pytest.approx(np.log(np.sqrt(np.pi) / 2 * erf(2.0)), rel=1e-9, abs=1e-9)


@RULES
@pytest.mark.parametrize("a", [30.0, 1e4, 1e8])
def test_steep_quadratics(a, rule):
    """Curved steep exponents (the peak window, narrowing and bisection): K = a s^2 on [0, 1]
    against Dawson's integral, int = e^a F(sqrt a) / sqrt a; an interior peak
    K = -a (s - 0.3)^2 against the error function; to 1e-9 relative in log."""
    from scipy.special import dawsn, erf

    got = log_integrals(np.array([0.0]), np.array([1.0]), lambda s, ref: a * s**2, rule)
    want = a + np.log(dawsn(np.sqrt(a))) - 0.5 * np.log(a)
    assert got[0] == pytest.approx(want, rel=1e-9, abs=1e-9)
    got = log_integrals(np.array([0.0]), np.array([1.0]), lambda s, ref: -a * (s - 0.3) ** 2, rule)
    r = np.sqrt(a)
    want = np.log(np.sqrt(np.pi) / (2 * r) * (erf(0.7 * r) + erf(0.3 * r)))
    assert got[0] == pytest.approx(want, rel=1e-9, abs=1e-9)


@RULES
@pytest.mark.parametrize("gap", [1e-3, 1e-6, 1e-9, 1e-12, 1e-15])
def test_towards_a_pole(gap, rule):
    """A blow-up: K = 1/(1 - s) on [0, 1 - gap], against the exponential integral,
    int = [Ei(u) - e^u / u] from u = 1 to 1/gap (mpmath). To 1e-9, or to the resolution of K in
    floats where that is coarser (K changes by K' ulp(s) between representable s), with a
    bounded number of evaluations."""
    import mpmath as mp

    calls = []

    def K(s, ref):
        calls.append(s.size)
        return 1.0 / (1.0 - s)

    b = 1.0 - gap
    got = log_integrals(np.array([0.0]), np.array([b]), K, rule)[0]
    with mp.workdps(40):
        u = 1 / (1 - mp.mpf(b))
        want = float(mp.log(mp.ei(u) - mp.e**u / u - mp.ei(1) + mp.e))
    resolution = np.spacing(b) / (1.0 - b) ** 2
    assert abs(got - want) <= max(1e-9, 10 * resolution / abs(want)) * max(1.0, abs(want))
    assert sum(calls) <= 2000


@RULES
def test_cumulative_jump_limit_and_infinite(rule):
    """Cumulative over the grid, cut at the steps (a jump of K between two segments at 1.3);
    +inf past log t = 1e100 (LOG_T_LIMIT) and from where c = 0 (K = +inf) inside a piece; NaN
    from where K is NaN; a zero-length segment is ignored."""
    grid = np.linspace(0.0, 2.0, 5)
    steps = [np.array([0.0, 0.7, 1.3]), np.array([1.3, 1.3]), np.array([1.3, 2.0])]

    def K(s, ref):  # K = 0 before 1.3, 2 after
        return np.where(ref < 1.3, 0.0, 2.0) + 0.0 * s

    got = log_original_time(grid, steps, K, rule=rule)
    t = np.array([0.0, 0.5, 1.0, 1.3 + np.exp(2.0) * 0.2, 1.3 + np.exp(2.0) * 0.7])
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(got[1:], np.log(t[1:]), rtol=1e-10, atol=1e-14)
    assert got[0] == -np.inf
    whole = [grid[[0, -1]]]
    huge = log_original_time(grid, whole, lambda s, ref: np.where(s > 1.2, 1e200, 0.0), rule=rule)
    assert np.all(np.isinf(huge[-2:])) and np.all(np.isfinite(huge[1:3]))
    for bad, want in ((np.inf, np.inf), (np.nan, np.nan)):  # inside the piece [1, 1.5]
        got = log_original_time(
            grid,
            [np.array([0.0, 1.0, 1.3, 2.0])],
            lambda s, ref, bad=bad: np.where(abs(s - 1.15) < 0.05, bad, 0.0),
            rule=rule,
        )
        assert np.all(np.isfinite(got[1:3]))
        np.testing.assert_array_equal(got[-2:], [want, want])


def test_interpolation_error_estimate():
    """The estimate of max |A - P| for the degree-10 interpolant is an upper bound of the true
    error (measured on 2001 points, up to rounding) for smooth functions from well resolved to
    under-resolved, and at most ~1e3 times too pessimistic where the interpolant is
    accurate."""
    x = np.linspace(0.0, 1.0, 2001)
    cases = [lambda t, a=a: np.exp(a * t) for a in (0.5, 3.0, 10.0, 40.0)]
    cases += [lambda t, w=w: np.sin(w * t + 0.3) for w in (1.0, 5.0, 20.0)]
    cases += [lambda t: 1.0 / (1.0 + 25.0 * (2 * t - 1) ** 2), lambda t: np.log(1.01 - t)]
    for f in cases:
        coef = f(_NODES)[None, :] @ _TO_CHEBYSHEV.T
        true = float(np.max(np.abs(_chebyshev(coef, x[None, :])[0] - f(x))))
        estimate = float(_interpolation_error(coef)[0])
        size = np.max(np.abs(f(x)))
        assert estimate >= true - 1e-14 * size  # up to rounding
        if true > 1e-13 * size:
            assert estimate <= 1e3 * true


def test_compiled_rule_equals_numpy_rule():
    """The compiled interval rule takes the numpy rule's decisions (accept, narrow, refine) and
    gives its values (and the windows it narrows to) to rounding, on 2,000 intervals of one to
    three pieces, exponents from flat to steep (spreads 1e-3 .. 1e12 over an interval, curved
    and straight, peaks inside and at the ends), at every level flag, and with NaN / +inf
    values (c = 0)."""
    pytest.importorskip("numba")
    from flows.compiled._quadrature_kernels import interval_rule

    rng = np.random.default_rng(3)
    m = 2000
    lo = rng.uniform(-5.0, 50.0, m)
    hi = lo + 10.0 ** rng.uniform(-14.0, 1.0, m)
    t = np.broadcast_to(_NODES, (m, _NODES.size))
    slope = 10.0 ** rng.uniform(-3.0, 12.0, (m, 1)) * rng.choice([-1.0, 1.0], (m, 1))
    curve = rng.uniform(-2.0, 2.0, (m, 1)) * slope
    peak = rng.uniform(-0.2, 1.2, (m, 1))
    k = 10.0 ** rng.uniform(-1.0, 30.0, (m, 1)) * rng.choice([0.0, 1.0], (m, 1))
    k = k + slope * t + curve * (t - peak) ** 2
    k[::97, 3] = np.inf
    k[::89, 5] = np.nan
    cuts = rng.uniform(0.0, 1.0, (m, 2)) * rng.choice([0.0, 1.0], (m, 2))
    which, a, b = [], [], []
    for i in range(m):  # one to three pieces, the first from lo, the last to hi exactly
        inner = lo[i] + np.unique(cuts[i][cuts[i] > 0]) * (hi[i] - lo[i])
        inner = inner[(inner > lo[i]) & (inner < hi[i])]
        which += [i] * (inner.size + 1)
        a += [lo[i], *inner]
        b += [*inner, hi[i]]
    which, a, b = np.array(which), np.array(a), np.array(b)
    for last in (False, True):
        with np.errstate(all="ignore"):
            want = _interval_rule(lo, hi, k, 1e-9, last, which, a, b)
        got = interval_rule(lo, hi, k, 1e-9, last, which, a, b)
        for name, g, w in zip(("value", "done", "narrow"), got, want, strict=False):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=0, err_msg=name)
        narrow = want[2]
        for g, w in zip(got[3:], want[3:], strict=True):
            np.testing.assert_allclose(g[narrow], w[narrow], rtol=1e-12, atol=0)
        if not last:  # every outcome is exercised: accepted, narrowed, refined
            assert np.any(want[1]) and np.any(narrow) and np.any(~want[1] & ~narrow)


# --------------------------------------------------------------------------- recorded runs


def blobs(n: int = 12, d: int = 3, seed: int = 0) -> Dataset:
    """Random data separated by a positive predictor (as in test_backends.py)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return Dataset(X, np.sign(X @ np.abs(rng.normal(size=d))))


MU5 = [1.0, 2.0, 3.0, 4.0, 5.0]
#: name -> (data, algorithm, depth, alpha, keyword arguments of simulate)
RUNS = {
    "l2-sam L2 default": (single_example(MU5), "l2-sam", 2, 0.4, dict(rho=1.0, t_max=10.0)),
    "gd L2": (single_example(MU5), "gd", 2, 0.4, dict(t_max=10.0)),
    "l2-sam L3 blow-up": (single_example(MU5), "l2-sam", 3, 0.4, dict(rho=1.0, t_max=10.0)),
    "l2-sam collapse": (single_example(MU5), "l2-sam", 2, 0.3, dict(rho=1.0, t_max=6.0)),
    "le-sam blobs": (blobs(), "le-sam", 2, 0.5, dict(rho=0.5, sigma=0.3, rho_max=0.5, t_max=6.0)),
    "l2-sam blobs": (blobs(), "l2-sam", 2, 0.5, dict(rho=0.1, t_max=8.0)),
    "linf-sam sliding": (gaussian_blobs(), "linf-sam", 2, [1.5, 0.8], dict(rho=1.0, t_max=8.0)),
    "l2-sam RK45": (single_example(MU5), "l2-sam", 2, 0.4, dict(rho=1.0, t_max=8.0, method="RK45")),
    "l2-sam LSODA": (
        single_example(MU5),
        "l2-sam",
        2,
        0.4,
        dict(rho=1.0, t_max=8.0, method="LSODA"),
    ),
}
#: Output times of each recorded run (the pieces are cut there and at the solver's steps).
N_POINTS = 31
BACKENDS = ["numpy"] + (["numba"] if _rules()[-1] is not None else [])


def recorded(name: str, backend: str, monkeypatch):
    """The trajectory of run ``name`` and its :class:`~flows.integrator.state.Run`."""
    from flows.integrator import assemble

    runs, exponent = [], assemble.exponent
    monkeypatch.setattr(assemble, "exponent", lambda run: runs.append(run) or exponent(run))
    data, algorithm, depth, alpha, kw = RUNS[name]
    traj = simulate(data, algorithm, depth, alpha, n_points=N_POINTS, backend=backend, **kw)
    (run,) = runs
    return traj, run


def numpy_exponent(run, which: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``K = -log c`` from the numpy field at times ``s`` of the segments ``which``."""
    out = np.empty(s.shape)
    for i in np.unique(which):
        seg, rows = run.path.segments[i], which == i
        fld = run.moving_field(seg.mode)
        theta, _ = seg.sample(s[rows], run.problem.shape)
        out[rows] = -fld.log_c(theta, fld.pattern_signs(seg.mode.pattern), s[rows])
    return out


def reference_log_t(run, grid: np.ndarray, panels: tuple[int, ...]) -> list[np.ndarray]:
    """``log t`` at ``grid`` by composite 16-point Gauss–Legendre (``panels`` panels, one
    result per entry of ``panels``) of ``exp(K - m)`` on each piece, ``m`` the largest of 257
    samples; on the window where ``K >= m - 60`` (its ends by 60 bisections between the
    outermost samples above and their neighbours; the same window for every panel count), the
    rest being below ``e^-60``. Where ``m > 1e12`` (a tolerance of 1e-9 in log t is then above
    1e3) a piece contributes ``m``."""
    ts = np.concatenate([seg.ts for seg in run.path.segments])
    edges = np.unique(np.concatenate([grid, ts[(ts > grid[0]) & (ts < grid[-1])]]))
    a, b = edges[:-1], edges[1:]
    which = run.path.segment_of(0.5 * (a + b))
    u = np.linspace(0.0, 1.0, 257)
    xs = a[:, None] + (b - a)[:, None] * u
    k = numpy_exponent(run, np.repeat(which, u.size), xs.ravel()).reshape(xs.shape)
    m = np.max(k, axis=1)
    above = k >= (m - 60.0)[:, None]
    first, last = np.argmax(above, axis=1), u.size - 1 - np.argmax(above[:, ::-1], axis=1)
    rows = np.arange(a.size)

    def crossing(out, inside):
        for _ in range(60):
            mid = 0.5 * (out + inside)
            high = numpy_exponent(run, which, mid) >= m - 60.0
            out, inside = np.where(high, out, mid), np.where(high, mid, inside)
        return out

    lo = np.where(first > 0, crossing(xs[rows, np.maximum(first - 1, 0)], xs[rows, first]), a)
    hi = np.where(
        last < u.size - 1,
        crossing(xs[rows, np.minimum(last + 1, u.size - 1)], xs[rows, last]),
        b,
    )
    gx, gw = np.polynomial.legendre.leggauss(16)
    out = []
    for count in panels:
        cells = (np.arange(count)[:, None] + 0.5 * (gx + 1.0)).ravel() / count
        weights = np.tile(0.5 * gw, count) / count
        s = lo[:, None] + (hi - lo)[:, None] * cells
        ks = numpy_exponent(run, np.repeat(which, cells.size), s.ravel()).reshape(s.shape)
        logs = m + np.log(np.sum(weights * np.exp(ks - m[:, None]), axis=1) * (hi - lo))
        logs = np.where(m > 1e12, m, logs)
        at_edges = np.logaddexp.accumulate(np.concatenate([[-np.inf], logs]))
        out.append(at_edges[np.searchsorted(edges, grid)])
    return out


#: runs whose numpy twin is checked only with ``-m slow`` (0.3-2 s each; the numba run of the
#: same name, which also compares its log t with the numpy backend's, stays in the default
#: suite, and so does the numpy twin of "l2-sam L2 default", against the reference)
SLOW_ON_NUMPY = {
    "linf-sam sliding",
    "l2-sam LSODA",
    "l2-sam RK45",
    "l2-sam collapse",
    "l2-sam L3 blow-up",
    "gd L2",
    "le-sam blobs",
}
#: runs checked only with ``-m slow`` on both backends (LSODA: the pieces cut at the steps of a
#: solver other than DOP853 stay in the default suite with RK45; l2-SAM on several examples:
#: several examples stay with LE-SAM, l2-SAM with the single-example runs)
SLOW_ON_BOTH = {"l2-sam LSODA", "l2-sam blobs"}


def _slow(name: str, backend: str) -> bool:
    if name in SLOW_ON_BOTH:
        return True
    return backend == "numpy" and name in SLOW_ON_NUMPY and len(BACKENDS) > 1


@pytest.mark.parametrize(
    "name,backend",
    [
        pytest.param(n, b, marks=pytest.mark.slow if _slow(n, b) else ())
        for n in sorted(RUNS)
        for b in BACKENDS
    ],
)
def test_recorded_runs_against_reference(name, backend, monkeypatch):
    """``log_t_original`` of the run equals the reference quadrature of its own exponent to
    1e-9 relative (self-checked: 32 and 64 panels agree to 1e-12); the numba backend's log t
    equals the numpy backend's to 1e-9."""
    traj, run = recorded(name, backend, monkeypatch)
    assert traj.status == int("blow-up" in name), traj.message
    # a blow-up ends where one ulp of tau moves K by more than the tolerance: not compared
    rows = slice(1, -1 if traj.status else None)
    ref, coarse = (r[rows] for r in reference_log_t(run, traj.t, (64, 32)))
    scale = np.maximum(1.0, np.abs(ref))
    assert np.max(np.abs(coarse - ref) / scale) <= 1e-12
    assert traj.log_t_original[0] == -np.inf
    assert np.max(np.abs(traj.log_t_original[rows] - ref) / scale) <= 1e-9
    if backend == "numba":
        other = simulate(*RUNS[name][:4], n_points=N_POINTS, backend="numpy", **RUNS[name][4])
        np.testing.assert_allclose(traj.log_t_original[rows], other.log_t_original[rows], rtol=1e-9)


def test_default_call_samples_each_step_once(monkeypatch):
    """The default call (single example, l2-SAM, L = 2, tau in [0, 10], 101 outputs) samples
    K once, at the 10 n + 1 Chebyshev–Lobatto nodes of its n steps (adjacent steps share a
    node): every piece is accepted at the first level."""
    from flows.integrator import assemble

    sizes, runs, exponent = [], [], assemble.exponent

    def counted(run):
        runs.append(run)
        K = exponent(run)
        return lambda s, ref: sizes.append(s.size) or K(s, ref)

    monkeypatch.setattr(assemble, "exponent", counted)
    simulate(single_example(MU5), "l2-sam", 2, 0.4, rho=1.0, t_max=10.0, n_points=101)
    steps = sum(len(seg.ts) - 1 for seg in runs[0].path.segments)
    assert sizes == [10 * steps + 1]


def test_original_clock_is_log_s():
    """An original-clock run reports log t = log s exactly (no quadrature)."""
    traj = simulate(single_example([1.0, 2.0]), "l2-sam", 2, 0.4, rho=0.5, t_max=2.0,
                    clock="original", n_points=11)  # fmt: skip
    assert traj.log_t_original[0] == -np.inf
    np.testing.assert_array_equal(traj.log_t_original[1:], np.log(traj.t[1:]))
