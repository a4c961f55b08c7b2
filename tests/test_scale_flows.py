"""``simulate`` at research scale against its general paths.

The compiled field's two matrix-vector products (the loss arguments ``A beta - o`` and the
direction ``A^T p``) are loops that the compiler vectorises (the first with its sums
reassociated). Checked here, each against a computation that shares none of its code:

* the products against exactly rounded sums (``math.fsum``), within the error bound of any
  summation order;
* the field at one point, compiled and numpy float paths, against the point-by-point
  signed-log field (:func:`flows.field.chart_rhs`) and against numpy's own signed-log path, on
  data of 2,560 entries (classification) and 2,048 (regression), in both charts, with a chart
  scale so small that ``cosh z`` is taken as ``|w / delta|``: to 1e-12 of the largest entry
  (an entry whose terms cancel carries the rounding of the larger ones);
* the events the compiled loop reads from the field evaluation it has just made (GD's forward
  pass, the blow-up rate) against the same events computed afresh: to 1e-12;
* runs that leave the float range (depth 2 past 1e308, depth 3 up to its blow-up): the
  compiled loop, the numpy backend and the point-by-point reference end with the same status,
  the same blow-up time (1e-12) and the same path (1e-12 in log|beta|);
* a first step whose stages leave the float path: the compiled loop shortens it (and keeps
  the run) instead of handing the run to the Python loop;
* the first step from an init with exact zeros (u = alpha, v = 0, relative control):
  :func:`flows.integrator.solver.initial_step` equals scipy's ``select_initial_step`` where no
  entry is such a zero, and a regression run from u = alpha, v = 0 starts with a step of the
  scale of the flow (not ~1e-88) and reaches scipy's DOP853 on the hand-written field.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.integrate._ivp.common import select_initial_step

from flows import Dataset, simulate
from flows.algorithms import get_algorithm, resolve_hyperparameters
from flows.charts import AsinhChart, LogChart
from flows.clocks import get_clock
from flows.field import Problem, chart_rhs
from flows.fused import FusedField
from flows.integrator import driver
from flows.integrator.solver import initial_step
from flows.model import LOSSES
from flows.signedlog import SignedLog

numba = pytest.importorskip("numba")

from flows.compiled import _field_kernels as kernels  # noqa: E402
from flows.compiled import _segment_kernels as loop  # noqa: E402
from flows.compiled import segment as fast_segment  # noqa: E402
from flows.compiled.field import CompiledField  # noqa: E402


def blobs(n: int = 40, d: int = 64, seed: int = 0) -> Dataset:
    """Gaussian rows labelled by a positive teacher (separable by ``beta >= 0``)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return Dataset(X, np.sign(X @ np.abs(rng.normal(size=d))))


def sparse_targets(n: int = 32, d: int = 64, seed: int = 1) -> Dataset:
    """Gaussian rows, targets of a 3-sparse positive teacher (n < d: interpolators exist)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    teacher = np.zeros(d)
    teacher[:3] = (1.0, 0.6, 0.3)
    return Dataset(X, X @ teacher, task="regression")


def problem_of(data: Dataset, algorithm: str, mult, chart) -> Problem:
    """The flow of ``algorithm`` on ``data`` with layer groups ``mult``, in ``chart``."""
    loss = "squared" if data.regression else "logistic"
    return Problem(
        data,
        get_algorithm(algorithm),
        resolve_hyperparameters(algorithm, dict(rho=0.2)),
        LOSSES[loss],
        np.array(mult),
        get_clock("original" if data.regression else "rescaled"),
        chart,
    )


def run_of(data: Dataset, algorithm: str, depth: int, alpha, **kw):
    """``simulate(...)`` (numba unless ``backend`` is given) and the driver's run state behind
    it (its path, segments and radius)."""
    runs = []
    assemble = driver.assemble
    with pytest.MonkeyPatch.context() as m:
        m.setattr(driver, "assemble", lambda run, *a: runs.append(run) or assemble(run, *a))
        traj = simulate(data, algorithm, depth, alpha, **{"backend": "numba", **kw})
    return traj, runs[0]


def test_products_equal_exact_sums():
    """``A beta`` and ``A^T p`` equal the exactly rounded sums within ``d eps`` (``n eps``) of
    the sums of absolute terms, the bound of any order of summation."""
    rng = np.random.default_rng(5)
    eps = np.finfo(float).eps
    for n, d in ((1, 5), (15, 16), (63, 32), (41, 97), (200, 1000)):
        A = rng.normal(size=(n, d))
        beta, p = rng.normal(size=d), rng.normal(size=n)
        margins, direction = np.empty(n), np.empty(d)
        kernels.margins_into(A, beta, margins)
        kernels.weighted_rows_into(p, A, direction)
        exact_m = np.array([math.fsum(A[i] * beta) for i in range(n)])
        exact_g = np.array([math.fsum(A[:, j] * p) for j in range(d)])
        assert np.all(np.abs(margins - exact_m) <= d * eps * (np.abs(A) @ np.abs(beta)))
        assert np.all(np.abs(direction - exact_g) <= n * eps * (np.abs(p) @ np.abs(A)))


def _chart_states(problem: Problem, rng) -> list[np.ndarray]:
    """Chart states ``z`` (flat) of ``problem`` at random parameters from 1e-2 to 1e1 (an exact
    zero in one of them, in the asinh chart)."""
    out = []
    for k in range(3):
        log_abs = rng.uniform(-4.0, 2.0, problem.shape)
        if isinstance(problem.chart, LogChart):
            out.append(log_abs.ravel())
            continue
        sign = np.sign(rng.normal(size=problem.shape))
        if k == 1:
            sign[0, 0], log_abs[0, 0] = 0.0, -np.inf
        out.append(problem.chart.coordinates(SignedLog(sign, log_abs)).ravel())
    return out


CHARTS = {
    "asinh": lambda shape: AsinhChart(),
    "asinh, delta 1e-200": lambda shape: AsinhChart(1e-200),  # |w / delta| beyond 1e150
    "log": lambda shape: LogChart(np.ones(shape)),
}


@pytest.mark.parametrize("chart", list(CHARTS))
@pytest.mark.parametrize("task", ["classification", "regression"])
@pytest.mark.parametrize("algorithm", ["gd", "l2-sam", "usam"])
def test_float_paths_at_scale_equal_the_signed_log_field(chart, task, algorithm, monkeypatch):
    """The compiled float path and numpy's float path equal the point-by-point
    signed-log field and numpy's own signed-log path at random points, at depth 2 (one group
    of multiplicity 2 and two layers) and 3: to 1e-12 of the largest entry."""
    data = blobs() if task == "classification" else sparse_targets()
    assert data.n * data.d >= 2048
    rng = np.random.default_rng(17)
    for mult in ([2], [1, 1], [3]):
        shape = (len(mult), data.d)
        problem = problem_of(data, algorithm, mult, CHARTS[chart](shape))
        compiled, fused = CompiledField(problem), FusedField(problem)
        held = np.zeros(shape, dtype=bool)
        for z in _chart_states(problem, rng):
            want = chart_rhs(z, problem, held)
            scale = np.max(np.abs(want))
            fast_numba = compiled._float_rhs(z.reshape(shape), held, None)
            fast_numpy = fused._float_rhs(z.reshape(shape), held, None)
            assert fast_numba is not None and fast_numpy is not None
            with monkeypatch.context() as m:
                m.setattr(FusedField, "_float_rhs", lambda *a, **k: None)
                m.setattr(FusedField, "_float_velocity", lambda *a, **k: None)
                general = fused.chart_rhs(z, held)
            for got in (fast_numba, fast_numpy, general):
                np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * scale)


#: The perturbations that read ``|theta|``, with the hyper-parameters of their runs below.
READS_THETA = {
    "asam": {"rho": 0.2},
    "le-sam-official": {"sigma": 0.1, "rho_max": 0.3},
    "le-sam-official adaptive": {"sigma": 0.1, "rho_max": 0.0, "adaptive": True},
}


@pytest.mark.parametrize("chart", list(CHARTS))
@pytest.mark.parametrize("task", ["classification", "regression"])
@pytest.mark.parametrize("case", list(READS_THETA))
def test_compiled_field_of_theta_scaled_perturbations_equals_the_signed_log_field(
    case, task, chart
):
    """ASAM's and the official LE-SAM's compiled fields (their perturbations in floats:
    ``rho T^2 u / (||T u|| + 1e-16 / ||grad L||)``, ``T = |w| + eta_asam``; ``rho_t s grad L /
    (N + e)``, ``s = |w|`` or 1) equal the point-by-point signed-log field (which scales
    ``|theta|`` by its largest entry) at random points, at depth 2 (one group of multiplicity 2
    and two layers) and 3: to 1e-12 of the largest entry."""
    from flows.integrator.segments import Mode

    algorithm = case.split()[0]
    data = blobs() if task == "classification" else sparse_targets()
    rng = np.random.default_rng(31)
    for mult in ([2], [1, 1], [3]):
        shape = (len(mult), data.d)
        problem = dataclasses.replace(
            problem_of(data, algorithm, mult, CHARTS[chart](shape)),
            hyperparameters=resolve_hyperparameters(algorithm, READS_THETA[case]),
        )
        held = np.zeros(shape, dtype=bool)
        problem_tuple = fast_segment._problem_tuple(
            CompiledField(problem), Mode(problem.chart, held=held)
        )
        for z in _chart_states(problem, rng):
            want = chart_rhs(z, problem, held)
            ok, got = loop.field(np.append(z, 0.0), problem_tuple, 0.0)
            assert ok
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.max(np.abs(want)))


@pytest.mark.parametrize("chart", ["asinh", "log"])
@pytest.mark.parametrize("loss", ["logistic", "exponential"])
@pytest.mark.parametrize("algorithm", ["1-sam", "1-usam"])
def test_per_example_float_paths_hold_where_example_sizes_underflow(chart, loss, algorithm):
    """Where the margins spread over hundreds (classification well into training), the
    per-example float paths (the compiled loop's, the compiled one-point field of scipy's loops,
    numpy's) hold and equal the point-by-point signed-log field: the examples'
    ``|l'(u_i)|`` there reach ``e^-400`` and below, whose squares underflow, and the paths keep
    them in log form (an example's unit gradient from ``z_i * prod_{k != l} w^(k)`` alone, the
    weights relative to the largest). At depth 2 (one group of multiplicity 2 and two layers)
    and 3, to 1e-12 of the largest entry, or to the rounding the margins carry into the
    weights' exponents where that is larger (``64 eps max|u_i|`` relative)."""
    from flows.integrator.segments import Mode
    from flows.per_example import _float_velocity

    data = blobs()
    teacher_draws = np.random.default_rng(0)  # blobs()' own teacher: every margin positive
    teacher_draws.normal(size=(data.n, data.d))
    teacher = np.abs(teacher_draws.normal(size=data.d))
    base = data.signed_features @ teacher
    for mult, split in (([2], [0.0]), ([1, 1], [0.3, -0.3]), ([3], [0.0])):
        shape, depth = (len(mult), data.d), int(np.sum(mult))
        problem = dataclasses.replace(
            problem_of(data, algorithm, mult, CHARTS[chart](shape)), loss=LOSSES[loss]
        )
        compiled, fused = CompiledField(problem), FusedField(problem)
        held = np.zeros(shape, dtype=bool)
        tuple_ = fast_segment._problem_tuple(compiled, Mode(problem.chart, held=held))
        for median in (300.0, 900.0):
            # layers apart by exp(+-0.3), their product median / median(base) times the teacher
            beta = median / np.median(base) * teacher
            log_abs = np.log(beta) / depth + np.array(split)[:, None]
            theta = SignedLog(np.ones(shape), log_abs)
            margins = data.signed_features @ beta
            sizes = problem.loss.log_abs_derivative(margins)  # log|l'(u_i)|
            assert np.min(margins) > 0 and np.min(sizes) < -400.0  # squares below 1e-347
            z = problem.chart.coordinates(theta).ravel()
            want = chart_rhs(z, problem, held)
            tol = max(1e-12, 64 * np.finfo(float).eps * np.max(margins)) * np.max(np.abs(want))
            assert _float_velocity(fused, theta, 0.0) is not None
            ok, fast_numba = loop.field(np.append(z, 0.0), tuple_, 0.0)
            assert ok
            one_point = compiled._float_rhs(z.reshape(shape), held, None)  # scipy's loops'
            assert one_point is not None
            for got in (fast_numba, one_point, fused.chart_rhs(z, held)):
                np.testing.assert_allclose(got, want, rtol=0, atol=tol)


@pytest.mark.parametrize("algorithm, depth", [("gd", 2), ("gd", 3), ("l2-sam", 3)])
def test_events_read_from_the_field_equal_events_afresh(algorithm, depth):
    """After the field at ``y`` (the step's last evaluation), the compiled loop takes GD's
    forward pass (stationary event) and the velocity (blow-up rate) from it: the event values
    equal those computed from ``y`` alone, to 1e-12."""
    rng = np.random.default_rng(23)
    for data in (blobs(), sparse_targets()):
        alpha = rng.uniform(0.2, 1.5, size=(depth, data.d))
        _, run = run_of(data, algorithm, depth, alpha, t_max=0.5, n_points=3, rho=0.2)
        segment = run.path.segments[0]
        fld = run.moving_field(segment.mode)
        problem = fast_segment._problem_tuple(fld, segment.mode)
        watch = fast_segment._watch(fld, segment.mode, run.radius, False, run.y)
        watch[0][3] = np.log(1e-3)  # the blow-up rate watched at every depth
        times = np.linspace(segment.start, segment.end, 4)
        for when, y in zip(times, segment.raw(times), strict=True):
            work = kernels.workspace(problem[0], data.n)
            assert loop.field_into(y, problem, work, np.empty(y.size), when)
            reused = loop.event_values_into(y, problem, watch, work, True, when)
            afresh = loop.event_values(y, problem, watch, when)
            np.testing.assert_allclose(reused, afresh, rtol=1e-12, atol=1e-12)


def one_wide_example(d: int = 2048) -> Dataset:
    """One example with ``d`` positive features: its flows leave the
    float range in a few hundred steps (depth 2: ``log beta`` grows linearly in tau; depth 3:
    the blow-up)."""
    rng = np.random.default_rng(0)
    return Dataset(np.abs(rng.normal(size=(1, d))) / 40.0, np.array([1.0]))


def test_run_beyond_the_float_range_agrees_on_every_backend():
    """l2-SAM at depth 2 to tau = 4000, where beta passes 1e308 (log beta ~ 778): the compiled
    loop hands the run to the Python loop on the signed-log field where the float path ends.
    numba, numpy and the point-by-point reference: status 0 and the path to 1e-12 (relative,
    and absolute near log|beta| = 0), log t (numba, numpy) to 1e-10. Depth 3 to its blow-up (numba and
    numpy): status 1, the blow-up time to 1e-12 and the path before it to 1e-12."""
    data = one_wide_example()
    kw = dict(rho=0.1, t_max=4000.0, n_points=41)
    runs = {
        b: simulate(data, "l2-sam", 2, 0.5, backend=b, original_time=b != "reference", **kw)
        for b in BACKENDS
    }
    fast = runs["numba"]
    assert fast.segment_loops == ("compiled DOP853", "scipy DOP853"), fast.segment_loops
    assert np.max(fast.log_abs_beta) > np.log(np.finfo(float).max)
    for name, traj in runs.items():
        assert traj.status == 0, (name, traj.message)
        np.testing.assert_allclose(
            traj.log_abs_beta, fast.log_abs_beta, rtol=1e-12, atol=1e-12, err_msg=name
        )
    slow = runs["numpy"]
    finite = np.isfinite(fast.log_t_original)
    assert np.array_equal(finite, np.isfinite(slow.log_t_original)) and np.sum(finite) > 10
    np.testing.assert_allclose(slow.log_t_original[finite], fast.log_t_original[finite], rtol=1e-10)
    kw = dict(rho=0.1, t_max=40.0, n_points=41, original_time=False)
    fast, slow = (simulate(data, "l2-sam", 3, 0.5, backend=b, **kw) for b in ("numba", "numpy"))
    assert fast.segment_loops == ("compiled DOP853", "scipy DOP853"), fast.segment_loops
    assert fast.status == slow.status == 1, (fast.message, slow.message)
    assert fast.blowup_time == pytest.approx(slow.blowup_time, rel=1e-12)
    before = fast.tau < fast.blowup_time
    np.testing.assert_allclose(
        fast.log_abs_beta[before], slow.log_abs_beta[before], rtol=1e-12, atol=1e-12
    )


BACKENDS = ("numba", "numpy", "reference")


def test_a_first_step_off_the_float_path_is_shortened():
    """A regression with large entries (n 2, d 2048, |x| ~ 10) whose first DOP853 step, as
    :func:`initial_step` guesses it, puts a stage outside the float path: given that step, the
    compiled segment hands back at once; guessing it itself, it shortens the step and goes on.
    ``simulate`` stays on the compiled loop and equals the numpy backend (scipy's loop, which
    evaluates that stage in signed-log arithmetic and rejects the step) to 5e-9 in log|beta|
    (either is within 1.2e-8 of the path at rtol 1e-13)."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((2, 2048)) * 10.0
    data = Dataset(X, X[:, :5].sum(axis=1) / 10.0, task="regression")
    _, run = run_of(data, "gd", 2, 0.1, t_max=1e-4, n_points=2)
    seg = run.path.segments[0]
    fld = run.moving_field(seg.mode)
    problem = fast_segment._problem_tuple(fld, seg.mode)
    watch = fast_segment._watch(fld, seg.mode, run.radius, False, run.y)
    y0 = seg.raw(np.array([0.0]))[0]
    rtol, atol = run.tolerances(seg.mode)
    ok, f0 = loop.field(y0, problem, 0.0)
    guess, ok = loop.initial_step(y0, f0, 0.0, 1.0, rtol, atol, problem)
    given = loop.segment(y0, 0.0, 1.0, rtol, atol, 10**6, problem, watch, 4, guess)
    chosen = loop.segment(y0, 0.0, 1.0, rtol, atol, 10**6, problem, watch, 4, 0.0)
    assert (given[0], given[1]) == (loop.LEFT_FLOAT_RANGE, 0)
    assert (chosen[0], chosen[1]) == (loop.BUDGET_SPENT, 4)
    kw = dict(t_max=0.05, n_points=11)
    fast = simulate(data, "gd", 2, 0.1, **kw)
    slow = simulate(data, "gd", 2, 0.1, backend="numpy", **kw)
    assert fast.segment_loops == ("compiled DOP853",) and fast.status == slow.status == 0
    np.testing.assert_allclose(fast.log_abs_beta, slow.log_abs_beta, rtol=0, atol=5e-9)


def test_initial_step_is_scipys_without_zeros_under_relative_control():
    """Without an entry at exactly 0 under relative control (``atol_i < rtol * eps``) the first
    step is scipy's ``select_initial_step`` (an entry at 0 with its own ``atol``, as ``tau``,
    counts); with one, it is set by the other entries and far above scipy's."""
    rng = np.random.default_rng(2)
    M = rng.normal(size=(6, 6))

    def rhs(_s, y):
        return M @ np.sinh(y) + 0.5

    y0 = np.append(rng.normal(size=5), 0.0)
    atol = np.append(np.full(5, 1e-100), 1e-12)
    f0 = rhs(0.0, y0)
    want = select_initial_step(rhs, 0.0, y0, 10.0, np.inf, f0, 1.0, 7, 1e-10, atol)
    assert initial_step(rhs, 0.0, y0, f0, 10.0, 1e-10, atol, 7) == pytest.approx(want, rel=1e-12)
    y0[0] = 0.0
    f0 = rhs(0.0, y0)
    scipys = select_initial_step(rhs, 0.0, y0, 10.0, np.inf, f0, 1.0, 7, 1e-10, atol)
    ours = initial_step(rhs, 0.0, y0, f0, 10.0, 1e-10, atol, 7)
    assert scipys < 1e-80 and ours > 1e-6


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_regression_from_exact_zeros_starts_at_the_flows_scale(backend):
    """GD from u = alpha, v = 0 (v under relative control, at exactly 0): the first step is of
    the scale of the flow (scipy's rule gives ~1e-88 and a hundred steps of growth), and the
    path equals scipy's DOP853 on the hand-written field (rtol 1e-12) to 1e-8 of max|beta|."""
    data = sparse_targets()
    X, y = data.X, data.y
    n, d = X.shape
    alpha = np.zeros((2, d))
    alpha[0] = 0.3
    traj, run = run_of(data, "gd", 2, alpha, t_max=30.0, n_points=31, backend=backend)
    first = run.path.segments[0].ts
    assert first[1] - first[0] > 1e-6
    assert traj.status == 0

    def field(_t, w):
        u, v = w[:d], w[d:]
        g = X.T @ (X @ (u * v) - y) / n
        return np.concatenate([-v * g, -u * g])

    sol = solve_ivp(
        field, (0, 30.0), alpha.ravel(), "DOP853", rtol=1e-12, atol=1e-16, t_eval=traj.t
    )
    beta = sol.y[:d].T * sol.y[d:].T
    assert np.max(np.abs(traj.beta - beta)) <= 1e-8 * np.max(np.abs(beta))


@pytest.mark.slow
def test_issue_scale_regression_equals_the_floor():
    """The regression of the research-scale benchmark (n 200, d 1000, GD from u = 0.1, v = 0,
    t <= 100): the default call equals scipy's DOP853 on the hand-written field at rtol 1e-13
    to 1e-7 of max|beta|, on the compiled loop."""
    rng = np.random.RandomState(0)
    X = rng.standard_normal((200, 1000))
    teacher = np.zeros(1000)
    teacher[:5] = np.abs(rng.standard_normal(5))
    data = Dataset(X, X @ teacher, task="regression")
    alpha = np.zeros((2, 1000))
    alpha[0] = 0.1
    traj = simulate(data, "gd", 2, alpha, t_max=100.0, n_points=51)
    assert traj.status == 0
    n, d = X.shape

    def field(_t, w):
        u, v = w[:d], w[d:]
        g = X.T @ (X @ (u * v) - data.y) / n
        return np.concatenate([-v * g, -u * g])

    sol = solve_ivp(
        field, (0, 100.0), alpha.ravel(), "DOP853", rtol=1e-13, atol=1e-18, t_eval=traj.t
    )
    beta = sol.y[:d].T * sol.y[d:].T
    assert np.max(np.abs(traj.beta - beta)) <= 1e-7 * np.max(np.abs(beta))
