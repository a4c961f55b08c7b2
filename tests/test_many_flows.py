"""``simulate_many``'s batched compiled path (:mod:`flows.many_flows`) against the single call:
every run the batch takes equals the single ``simulate`` call field by field, arrays bit for bit
(the same kernels on the same numbers); the runs it leaves (collapse, blow-up, a held event,
numpy's backend, a schedule, a vector init) are the single call's. Each case asserts which runs
the batch took, so that a batch that took none would fail."""

from __future__ import annotations

import numpy as np
import pytest
from test_many import assert_same

import flows.clocks as clocks
import flows.compiled.segment as compiled_segment
import flows.integrator.driver as driver
import flows.many as many
import flows.many_flows as many_flows
from flows import Dataset, simulate, simulate_many, single_example
from flows.datasets import gaussian_blobs
from flows.schedules import cosine

pytest.importorskip("numba")
kernels = pytest.importorskip("flows.compiled._segment_kernels")

MU = single_example([1.0, 2.0, 3.0])
BLOBS = gaussian_blobs()


def regression() -> Dataset:
    """A small regression: 8 examples, 6 features, a sparse teacher."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((8, 6))
    return Dataset(X, X[:, :2].sum(axis=1), task="regression")


@pytest.fixture
def single_calls(monkeypatch):
    """The ``alpha`` of every run that ``simulate_many`` leaves to the single call: the runs it
    does not take, and those it starts and the single call finishes."""
    calls: list = []
    original, finish = many.simulate, many.go_on

    def counted(data, algorithm, depth, alpha, **options):
        calls.append(alpha)
        return original(data, algorithm, depth, alpha, **options)

    def finished(data, algorithm, depth, run, *rest):
        calls.append(run.alpha)
        return finish(data, algorithm, depth, run, *rest)

    monkeypatch.setattr(many, "simulate", counted)
    monkeypatch.setattr(many, "go_on", finished)
    return calls


@pytest.fixture
def segments_started(monkeypatch):
    """The initial states of the runs whose compiled segment the batch starts."""
    started: list = []
    original = many_flows._Group.segment

    def counted(self, y0, problem, watch):
        started.append(y0)
        return original(self, y0, problem, watch)

    monkeypatch.setattr(many_flows._Group, "segment", counted)
    return started


def check(data, algorithm, depth, alphas, calls, left, **settings) -> list:
    """``simulate_many`` over ``alphas`` (and any list in ``settings``, zipped) equals the single
    calls, and leaves exactly the runs ``left`` (indices) to the single call."""
    batched = simulate_many(data, algorithm, depth, alphas, backend="numba", **settings)
    assert calls == [alphas[i] for i in left]
    singles = []
    for i, alpha in enumerate(alphas):
        own = {k: (v[i] if isinstance(v, list) else v) for k, v in settings.items()}
        own.pop("threads", None)
        singles.append(simulate(data, algorithm, depth, alpha, backend="numba", **own))
    for a, b in zip(batched, singles, strict=True):
        assert_same(a, b)
    return singles


def test_paper_example_batched_and_collapsing_runs_fall_back(single_calls):
    singles = check(MU, "l2-sam", 2, [0.1, 0.5, 1.0, 2.0], single_calls, [0], rho=1.0, t_max=5.0,
                    n_points=21)  # fmt: skip
    assert [s.message for s in singles[1:]] == ["reached t_max"] * 3
    assert singles[0].events[0].kind == "collapse"
    assert all(s.segment_loops == ("compiled DOP853",) for s in singles[1:])
    assert np.all(np.isfinite(singles[1].log_t_original[1:]))


@pytest.fixture
def first_calls(monkeypatch):
    """The initial states of the compiled kernel's calls from ``s = 0`` (a run's first)."""
    started: list = []
    original = kernels.segment

    def counted(y0, s0, *arguments):
        if s0 == 0.0:
            started.append(y0.copy())
        return original(y0, s0, *arguments)

    monkeypatch.setattr(kernels, "segment", counted)
    return started


def test_a_run_the_single_call_finishes_goes_on_from_the_batchs_kernel_call(
    single_calls, first_calls
):
    """The collapsing run's first kernel call ends one step before its collapse; the single call
    takes that call as its own (one call from ``s = 0`` a run, not two) and gives the same
    bits."""
    check(MU, "l2-sam", 2, [0.1, 0.5, 1.0], single_calls, [0], rho=1.0, t_max=5.0, n_points=21)
    assert len(first_calls) == 3 + 3  # the batch's three, then check()'s three single calls


def test_calls_past_the_memory_bound_are_made_again(single_calls, first_calls, monkeypatch):
    monkeypatch.setattr(many_flows, "MADE_BYTES", 0)
    check(MU, "l2-sam", 2, [0.1, 0.5, 1.0], single_calls, [0], rho=1.0, t_max=5.0, n_points=21)
    assert len(first_calls) == 4 + 3  # the collapsing run's call made twice


def _first_call(monkeypatch, alpha: float) -> compiled_segment.Call:
    """The first kernel call of ``simulate(MU, 'l2-sam', 2, alpha, ...)`` (:data:`SETTINGS`)."""
    made: list = []
    original = compiled_segment.call_kernel

    def kept(*arguments):
        made.append(original(*arguments))
        return made[-1]

    with monkeypatch.context() as patch:
        patch.setattr(compiled_segment, "call_kernel", kept)
        simulate(MU, "l2-sam", 2, alpha, **SETTINGS)
    return made[0]


SETTINGS = {"rho": 1.0, "t_max": 5.0, "n_points": 21, "backend": "numba"}


def test_a_call_made_ahead_is_taken_only_with_the_segments_own_arguments(monkeypatch, first_calls):
    options = dict(simulate.__kwdefaults__, **SETTINGS, reduced=None)
    options.pop("rho")
    single = simulate(MU, "l2-sam", 2, 0.1, **SETTINGS)
    own, other = _first_call(monkeypatch, 0.1), _first_call(monkeypatch, 0.5)
    assert own.status != kernels.REACHED_END  # a collapse ahead: the Python loop goes on
    first_calls.clear()
    assert_same(driver.simulate_options(MU, "l2-sam", 2, 0.1, {"rho": 1.0}, options, own), single)
    assert first_calls == []  # taken: not made again
    assert_same(driver.simulate_options(MU, "l2-sam", 2, 0.1, {"rho": 1.0}, options, other), single)
    assert len(first_calls) == 1  # another run's call: ignored, the segment makes its own
    shifted = own._replace(arguments=own.arguments[:9] + (1e-3,))  # another first step
    assert not shifted.made_with(own.arguments) and own.made_with(own.arguments)


@pytest.mark.parametrize(
    "algorithm, settings",
    [
        ("gd", {}),
        ("usam", {"rho": [0.1, 0.5]}),
        ("le-sam", {"sigma": 0.1, "rho_max": 1.0}),
        ("linf-sam", {"rho": 0.3}),
        ("l2-sam", {"rho": [0.3, 0.0]}),  # rho = 0 runs as gd
    ],
)
def test_algorithms_on_several_examples(single_calls, algorithm, settings):
    check(BLOBS, algorithm, 2, [0.5, 1.0], single_calls, [], t_max=2.0, n_points=11, **settings)


def test_original_clock_in_classification(single_calls):
    singles = check(BLOBS, "l2-sam", 2, [0.5, 1.0], single_calls, [], rho=0.3, t_max=2.0,
                    n_points=11, clock="original")  # fmt: skip
    assert singles[0].clock == "original"


@pytest.mark.parametrize("algorithm, depth", [("gd", 2), ("l2-sam", 3)])
def test_regression_with_tau_by_quadrature(single_calls, algorithm, depth):
    singles = check(regression(), algorithm, depth, [0.1, 1.0], single_calls, [], rho=0.1,
                    t_max=2.0, n_points=11)  # fmt: skip
    assert singles[0].clock == "original" and np.all(np.diff(singles[0].tau) > 0)


def test_full_system_gd_checks_its_conservation_law(single_calls):
    check(BLOBS, "gd", 2, [0.5, 1.0], single_calls, [], t_max=2.0, n_points=11, reduced=False)


def test_blow_ups_at_depth_3_fall_back_and_the_others_are_batched(single_calls):
    singles = check(single_example([1.0, 2.0]), "l2-sam", 3, [0.05, 0.3, 2.0], single_calls, [2],
                    rho=0.5, t_max=1.0, n_points=11)  # fmt: skip
    assert singles[2].status == 1 and [s.status for s in singles[:2]] == [0, 0]


def test_budget_spent_falls_back(single_calls):
    singles = check(MU, "l2-sam", 2, [1.0, 2.0], single_calls, [0, 1], rho=1.0, max_nfev=30)
    assert all(s.status == -1 for s in singles)


def test_an_event_at_the_start_falls_back(single_calls, segments_started):
    # a loss floor between the initial losses: it holds where the second run starts, and the
    # first does not reach it by t_max
    loss_at = [simulate(MU, "l2-sam", 2, a, rho=1.0, t_max=0.01, n_points=2).loss
               for a in (0.5, 1.0)]  # fmt: skip
    floor = 0.5 * (loss_at[0][0] + loss_at[1][0])
    assert loss_at[0][-1] > floor
    singles = check(MU, "l2-sam", 2, [0.5, 1.0], single_calls, [1], rho=1.0, t_max=0.01,
                    n_points=11, loss_floor=floor)  # fmt: skip
    assert singles[1].events[0].kind == "loss floor" and singles[0].message == "reached t_max"
    assert len(segments_started) == 1


def test_the_start_check_takes_each_runs_radius(single_calls, segments_started):
    # alpha = 1e-14 is below the collapse threshold radius * 1e-12 of rho = 1 (radius 1), not
    # that of rho = 1e-3: one group, two radii (no near-zero switch in the asinh chart)
    singles = check(MU, "l2-sam", 2, [1e-14, 1e-14], single_calls, [0, 1], rho=[1.0, 1e-3],
                    chart="asinh", chart_scale=1.0, t_max=1.0, n_points=11)  # fmt: skip
    assert singles[0].events[0].tau == 0.0 and singles[1].events[0].tau > 0.0
    assert len(segments_started) == 1


@pytest.mark.parametrize(
    "alpha, settings, collapsed",
    [
        (1e-20, {}, True),  # below radius * COLLAPSE_FRACTION (radius 1), log chart
        (1e-20, {"chart": "asinh", "chart_scale": 1.0}, True),  # the same from theta
        (1e-11, {}, False),  # below radius * NEAR_ZERO: the asinh chart from the start
    ],
)
def test_runs_that_start_small_fall_back(single_calls, segments_started, alpha, settings,
                                        collapsed):  # fmt: skip
    singles = check(MU, "l2-sam", 2, [alpha, 1.0], single_calls, [0], rho=1.0, t_max=1.0,
                    n_points=11, **settings)  # fmt: skip
    assert len(segments_started) == 1  # the driver's check, not the segment, hands it back
    first = singles[0].events[0]
    assert first.kind == "collapse" and (first.tau == 0.0) == collapsed
    assert singles[1].message == "reached t_max"


def test_a_run_that_starts_at_a_stationary_point_falls_back(single_calls, segments_started):
    # regression targets interpolated by beta = 0.5^2 (depth 2, balanced): the run from 0.5
    # starts at grad L = 0 (to rounding), the one from 1 does not
    rng = np.random.default_rng(1)
    X = rng.standard_normal((8, 6))
    data = Dataset(X, X @ np.full(6, 0.25), task="regression")
    singles = check(data, "gd", 2, [0.5, 1.0], single_calls, [0], t_max=1.0, n_points=11)
    assert len(segments_started) == 1
    assert singles[0].events[0].kind == "stationary" and singles[0].events[0].tau == 0.0
    assert singles[1].message == "reached t_max"


def test_runs_the_batch_does_not_take_are_single_calls(single_calls):
    vector = [1.0, 0.5, 2.0]
    schedule = cosine(1.0, 2.0)
    check(MU, "l2-sam", 2, [vector, 1.0], single_calls, [0], rho=1.0, t_max=2.0, n_points=11)
    single_calls.clear()
    check(MU, "l2-sam", 2, [0.5, 1.0], single_calls, [0, 1], rho=schedule, t_max=2.0, n_points=11)
    single_calls.clear()
    check(MU, "l2-sam", 2, [0.5, 1.0], single_calls, [0, 1], rho=1.0, t_max=2.0, n_points=11,
          method="RK45")  # fmt: skip


def test_numpys_backend_is_the_single_call():
    batched = simulate_many(MU, "l2-sam", 2, [0.5, 1.0], rho=1.0, t_max=1.0, n_points=5,
                            backend="numpy")  # fmt: skip
    for alpha, run in zip([0.5, 1.0], batched, strict=True):
        assert_same(run, simulate(MU, "l2-sam", 2, alpha, rho=1.0, t_max=1.0, n_points=5,
                                  backend="numpy"))  # fmt: skip


def test_a_bad_option_is_refused_as_the_single_call_refuses_it():
    with pytest.raises(ValueError, match="t_max"):
        simulate_many(MU, "l2-sam", 2, [0.5, 1.0], rho=1.0, t_max=-1.0, backend="numba")


def test_runs_integrated_in_parts_in_threads_equal_single_calls(single_calls):
    check(MU, "l2-sam", 2, [0.1, 0.6, 0.8, 1.0, 1.5], single_calls, [0], rho=1.0, t_max=3.0,
          n_points=21, threads=2)  # fmt: skip


def test_a_batch_larger_than_its_memory_bound_runs_in_chunks(single_calls, monkeypatch):
    monkeypatch.setattr(many_flows, "STATE_ENTRIES", 14)  # two runs (7 entries at most) a time
    check(MU, "l2-sam", 2, [0.6, 0.8, 1.0, 1.5, 2.0], single_calls, [], rho=1.0, t_max=2.0,
          n_points=11)  # fmt: skip


def test_a_segment_past_the_compiled_calls_capacity_falls_back(single_calls, monkeypatch):
    monkeypatch.setattr(compiled_segment, "CAPACITY", 16)  # the single call's too
    singles = check(MU, "l2-sam", 2, [0.6, 0.8], single_calls, [0, 1], rho=1.0, t_max=10.0,
                    n_points=11)  # fmt: skip
    assert all(s.message == "reached t_max" for s in singles)


@pytest.mark.parametrize("settings", [{"original_time": False}, {"n_points": 2}, {"rtol": 1e-6}])
def test_output_options(single_calls, settings):
    check(MU, "l2-sam", 2, [0.8, 1.0], single_calls, [], rho=1.0, t_max=2.0, **settings)


def test_batched_runs_own_their_arrays(single_calls):
    runs = simulate_many(BLOBS, "l2-sam", 2, [0.5, 1.0], rho=0.3, t_max=1.0, n_points=5,
                         clock="original", backend="numba")  # fmt: skip
    assert single_calls == []
    for name in ("t", "tau", "log_t_original", "loss", "log_abs_beta"):
        getattr(runs[0], name)[...] = -7.0
        assert not np.any(getattr(runs[1], name) == -7.0), name


@pytest.mark.parametrize(
    "depth, settings",
    [
        (1, {}),
        (2, {"chart": "asinh"}),
        (2, {"chart": "asinh", "chart_scale": 0.5}),
        (3, {"loss": "exponential", "t_max": 0.5}),
        (2, {"reduced": False, "rho": [0.2, 0.4]}),
    ],
)
def test_charts_losses_and_depths(single_calls, depth, settings):
    settings = {"rho": 0.3, "t_max": 1.0, **settings}
    check(BLOBS, "l2-sam", depth, [0.5, 1.0], single_calls, [], n_points=11, **settings)


def exponent_of_run(s: np.ndarray, ref: np.ndarray, run: np.ndarray) -> np.ndarray:
    """A test exponent: run 0 linear with a jump of 1.5 between its stretches at t = 0.6, run 1
    a kink at t = 0.77 (refined level after level); +, * and abs only, so a sample's value
    does not depend on the batch it is taken in."""
    first = 2.0 * s + np.where(ref > 0.6, 1.5, 0.0)
    second = 5.0 - 40.0 * np.abs(s - 0.77)
    return np.where(run == 0, first, second)


@pytest.mark.parametrize("capped", [False, True])
def test_batched_quadrature_is_each_runs_own_call(monkeypatch, capped):
    if capped:  # refinements may take as many samples as the first level: run 1 meets it
        monkeypatch.setattr(clocks, "MAX_SAMPLES", 0)
        monkeypatch.setattr(clocks, "REFINE_FACTOR", 1)
    grid = np.linspace(0.0, 2.0, 9)
    steps = [
        [np.linspace(0.0, 0.6, 4), np.array([0.6, 0.6]), np.linspace(0.6, 2.0, 6)],
        [np.array([0.0, 0.1, 0.3, 0.7, 1.2, 2.0])],
    ]
    initial = np.array([-1.0, -np.inf])
    log_t, samples, caps = clocks.log_original_times(
        grid, steps, exponent_of_run, rule=clocks._interval_rule, initial=initial
    )
    for r in range(2):
        report = clocks.QuadratureReport()
        own = clocks.log_original_time(
            grid, steps[r], lambda s, ref, r=r: exponent_of_run(s, ref, np.full(s.size, r)),
            1e-9, clocks._interval_rule, report, initial[r],
        )  # fmt: skip
        assert np.array_equal(log_t[r], own)
        assert (samples[r], caps[r]) == (report.samples, report.capped)
    assert list(caps) == [False, capped]
    assert log_t[0, 0] == -1.0 and np.all(np.diff(log_t[0]) > 0)


def test_a_call_is_made_with_arguments_of_the_same_bits():
    """:meth:`Call.made_with` compares bits: NaN matches NaN, -0.0 differs from 0.0, a float from
    an int, and arrays past the block size are compared block by block."""
    same = compiled_segment._same
    large = np.random.default_rng(0).standard_normal(300_000)  # 2.4 MB: three blocks
    moved = large.copy()
    moved[-1] = np.nextafter(moved[-1], np.inf)
    assert same(
        (np.array([1.0, np.nan]), 2.0, (True, 3)), (np.array([1.0, np.nan]), 2.0, (True, 3))
    )
    assert same(large, large.copy()) and not same(large, moved)
    assert not same(np.array([0.0]), np.array([-0.0])) and not same(1.0, 1)
    assert not same((1.0,), (1.0, 2.0)) and not same(np.zeros(2), np.zeros((2, 1)))
