"""The fast paths against the general path.

* ``backend="numpy"`` (the fused, batched field of :mod:`flows.fused`, the default) against
  ``backend="reference"`` (the point-by-point field of :mod:`flows.field`): the same solver on
  fields that agree to rounding, so paths agree to ~1e-9 in log|beta| and events coincide.
* ``chart="auto"`` (the log chart for balanced continuous runs) against ``chart="asinh"``:
  different coordinates, each integrated to rtol 1e-10, so paths agree to ~1e-7.
* The fused field itself against the reference at random points (every algorithm, clock,
  depth, single and multi-example data, frozen sign patterns).

The quadrature of the original time is tested in test_quadrature.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from flows import Dataset, iterate, simulate, single_example
from flows.algorithms import ALGORITHMS, get_algorithm, resolve_hyperparameters
from flows.charts import AsinhChart
from flows.clocks import get_clock
from flows.datasets import teacher_data
from flows.field import Problem, ReferenceField, SignPattern, chart_rhs, gradient_signs
from flows.fused import FusedField
from flows.model import LOSSES
from flows.results import Cause
from flows.schedules import cosine, warmup_cosine
from flows.signedlog import SignedLog

HP = dict(rho=0.3, sigma=0.2, rho_max=0.5)


def blobs(n: int = 12, d: int = 3, seed: int = 0) -> Dataset:
    """Random data separated by a positive predictor (labels from ``w > 0``), so that balanced
    positive inits at even depth, which keep beta >= 0, can separate them."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return Dataset(X, np.sign(X @ np.abs(rng.normal(size=d))))


def regression(n: int = 4, d: int = 6, seed: int = 1) -> Dataset:
    """Noiseless targets of the 2-sparse teacher (1, 0.5, 0, ...) on Gaussian rows (n < d:
    the squared loss has interpolators)."""
    X = np.random.default_rng(seed).normal(size=(n, d))
    teacher = np.zeros(d)
    teacher[:2] = (1.0, 0.5)
    return Dataset(X, X @ teacher, task="regression")


#: Integer rows whose targets ``X @ 1`` every ``w = 1`` (any depth) interpolates exactly
#: (every residual is exactly 0 in floats).
EXACT_ROWS = np.array([[1.0, -2.0, 3.0], [2.0, 1.0, -1.0], [0.0, 3.0, 1.0], [-1.0, 1.0, 2.0]])


def finite_gap(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| where both are finite; inf if they are not finite at the same places."""
    if a.shape != b.shape or np.any(np.isfinite(a) != np.isfinite(b)):
        return np.inf
    both = np.isfinite(a)
    return float(np.max(np.abs(a[both] - b[both]), initial=0.0))


#: Algorithms whose fused field is compared with every loss in the default run (the others with
#: the logistic loss, and with the other losses under ``-m slow``): GD, l2-SAM, a per-example one
#: (1-SAM) and a sign-discontinuous one (l_inf-SAM).
ALL_LOSSES_DEFAULT = {"gd", "l2-sam", "1-sam", "linf-sam"}


# Random chart states include huge entries, where USAM's perturbation (rho grad L) overflows
# and a margin is NaN: the loss's logaddexp says so before the field reports the point as
# outside its range, as both implementations do alike (the test compares them).
@pytest.mark.filterwarnings("ignore:invalid value encountered in logaddexp:RuntimeWarning")
@pytest.mark.parametrize(
    "loss, algorithm",
    [
        pytest.param(
            loss,
            algorithm,
            marks=() if loss == "logistic" or algorithm in ALL_LOSSES_DEFAULT else pytest.mark.slow,
        )
        for loss in sorted(LOSSES)
        for algorithm in sorted(ALGORITHMS)
    ],
)
def test_fused_field_equals_reference_at_random_points(loss, algorithm):
    """chart_rhs of both implementations at random chart states (with exact zeros, huge and
    tiny entries): equal to 1e-12 relative, for 1..3 layers, reduced and full, both clocks.
    (Huge parameters only with the logistic loss: with the exponential loss a margin of
    -1e7 already makes the loss weight overflow, where the reference returns NaN.)"""
    rng = np.random.default_rng(7)
    for data in (single_example([1.0, 2.0, 3.0, 4.0, 5.0]), blobs()):
        hp = resolve_hyperparameters(algorithm, HP)
        for mult in ([1], [2], [3], [1, 1], [1, 1, 1]):
            for clock in ("rescaled", "original"):
                problem = Problem(
                    data,
                    get_algorithm(algorithm),
                    hp,
                    LOSSES[loss],
                    np.array(mult),
                    get_clock(clock),
                    AsinhChart(),
                )
                fused = FusedField(problem)
                for k in range(4):
                    scale = (300.0 if k == 3 else 3.0) if loss == "logistic" else 0.3
                    z = rng.normal(size=problem.shape) * scale
                    if k == 1:
                        z[0, 0] = 0.0
                    held = np.zeros(problem.shape, dtype=bool)
                    pattern = (
                        SignPattern(
                            np.sign(rng.normal(size=problem.shape)),
                            np.sign(rng.normal(size=problem.data.d)),
                        )
                        if get_algorithm(algorithm).sign_discontinuous
                        else None
                    )
                    signs = (
                        None if pattern is None else gradient_signs(pattern, problem.multiplicity)
                    )
                    want = chart_rhs(z.ravel(), problem, held, signs)
                    got = fused.chart_rhs(z.ravel(), held, fused.pattern_signs(pattern))
                    # per-example: n perturbed points, each margin summed in another order;
                    # at margins ~1e3 a rounding of the margin moves its weight by ~1e-13 * m
                    rtol = 1e-9 if get_algorithm(algorithm).per_example else 1e-12
                    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-300)


def test_fused_log_c_batch_equals_pointwise():
    """A batch of points gives the numbers of one call per point (reference field)."""
    rng = np.random.default_rng(3)
    data = blobs(8, 4)
    for algorithm in ("l2-sam", "le-sam", "usam"):
        problem = Problem(
            data,
            get_algorithm(algorithm),
            resolve_hyperparameters(algorithm, HP),
            LOSSES["logistic"],
            np.ones(2, dtype=int),
            get_clock("rescaled"),
            AsinhChart(),
        )
        theta = AsinhChart().state(rng.normal(size=(6, 2, 4)) * 4)
        np.testing.assert_allclose(
            FusedField(problem).log_c(theta), ReferenceField(problem).log_c(theta), rtol=1e-13
        )


#: An unbalanced init at depth 3 on :func:`blobs` (three layers of three entries).
UNBALANCED = np.array([[1.2, 0.5, 0.9], [0.6, 1.1, 0.4], [0.8, 0.7, 1.0]])

CASES = {
    "l2-sam L2 one example": (single_example([1, 2, 3, 4, 5]), "l2-sam", 2, 0.4, 6.0),
    "l2-sam L3 blobs": (blobs(), "l2-sam", 3, 0.5, 3.0),
    "gd L2 blobs original": (blobs(), "gd", 2, 0.3, 4.0),
    "le-sam L2 blobs": (blobs(), "le-sam", 2, 0.5, 3.0),
    "usam L1 blobs": (blobs(), "usam", 1, 0.5, 3.0),
    "linf-sam L2 sliding": (
        single_example([1, 2, 3]),
        "linf-sam",
        2,
        np.array([0.2, 0.5, 0.9]),
        3.0,
    ),
    "l2-sam collapse": (single_example([1, 2, 3, 4, 5]), "l2-sam", 2, 0.1, 2.0),
    "l2-sam blobs collapse": (blobs(), "l2-sam", 2, 0.05, 3.0),
    "l2-sam L3 blow-up": (single_example([1, 2, 3, 4, 5]), "l2-sam", 3, 0.4, 6.0),
    "gd L4 blow-up": (single_example([1, 2, 3]), "gd", 4, 0.5, 6.0),
    "linf-sam L2 teacher sliding": (teacher_data(), "linf-sam", 2, 1.0, 4.0),
    "usam L3 unbalanced blobs": (blobs(), "usam", 3, UNBALANCED, 3.0),
    "1-usam L2 blobs": (blobs(), "1-usam", 2, 0.5, 3.0),
    "1-usam L2 blobs original": (blobs(), "1-usam", 2, 0.3, 3.0),
    "1-usam L3 blow-up": (single_example([1, 2, 3]), "1-usam", 3, 0.5, 6.0),
    "1-sam L2 blobs": (blobs(), "1-sam", 2, 0.5, 3.0),
    "asam L2 blobs": (blobs(), "asam", 2, 0.5, 3.0),
    "asam L3 unbalanced blobs": (blobs(), "asam", 3, UNBALANCED, 3.0),
    "le-sam-official L2 blobs": (blobs(), "le-sam-official", 2, 0.5, 3.0),
}
#: Cases that end before ``t_max`` (status 1).
ENDS_EARLY = {"l2-sam L3 blow-up", "gd L4 blow-up", "1-usam L3 blow-up"}


def comparable(name: str, rows: np.ndarray) -> np.ndarray:
    """The output rows two engines must agree on: all but the last of a blow-up. A blow-up ends
    where d log|w|/dtau = BLOWUP_RATE = 1e12: one ulp of tau (1e-16) moves log|beta| (and log t,
    ~ the margin there) by ~1e-4, so that row is held by the event time instead."""
    return rows[:-1] if name in ENDS_EARLY else rows


#: Cases the compiled segment loop integrates (any depth; l_inf-SAM until it slides).
COMPILED_LOOP = {
    "l2-sam L2 one example",
    "l2-sam L3 blobs",
    "l2-sam L3 blow-up",
    "gd L4 blow-up",
    "usam L3 unbalanced blobs",
    "gd L2 blobs original",
    "le-sam L2 blobs",
    "usam L1 blobs",
    "l2-sam collapse",
    "l2-sam blobs collapse",
    "linf-sam L2 sliding",
    "linf-sam L2 teacher sliding",
    "1-usam L2 blobs",
    "1-usam L2 blobs original",
    "1-usam L3 blow-up",
    "1-sam L2 blobs",
    "asam L2 blobs",
    "asam L3 unbalanced blobs",
    "le-sam-official L2 blobs",
}


#: Cases compared across backends only with ``-m slow``: the L = 3 l2-SAM blow-up (1.5 s against
#: the reference backend) and the per-example blow-up (4.7 s over its three comparisons); the
#: blow-up stays in the default run with GD at L = 4, the per-example algorithm with 1-USAM on
#: blobs.
SLOW_CASES = {"l2-sam L3 blow-up", "1-usam L3 blow-up"}
#: Cases compared with the reference backend only with ``-m slow`` (those and the approach to
#: the blobs' collapse: ~3000 evaluations of the reference field).
REFERENCE_SLOW_CASES = SLOW_CASES | {"l2-sam blobs collapse"}


def cases_slow_in(slow: set[str]) -> list:
    """The names of :data:`CASES`, those in ``slow`` marked slow."""
    return [pytest.param(n, marks=pytest.mark.slow if n in slow else ()) for n in sorted(CASES)]


@pytest.mark.parametrize("name", cases_slow_in(SLOW_CASES))
def test_numba_backend_equals_numpy_backend(name):
    """The compiled backend (its field, and where it applies its whole DOP853 loop,
    :mod:`flows.compiled.segment`) gives the numpy numbers to 1e-10 in log|beta|, the same events at
    the same times (1e-9; a collapse or a blow-up is located by the Python loop after the
    compiled one hands back), and log t to 1e-9. Each result names its backend and the segment
    loops that ran."""
    pytest.importorskip("numba")
    data, algorithm, depth, alpha, t_max = CASES[name]
    clock = "original" if "original" in name else "rescaled"
    kw = dict(rho=0.5, sigma=0.3, rho_max=0.5, t_max=t_max, n_points=31, clock=clock)
    fast = simulate(data, algorithm, depth, alpha, backend="numba", **kw)
    ref = simulate(data, algorithm, depth, alpha, backend="numpy", **kw)
    assert (fast.backend, ref.backend) == ("numba", "numpy")
    assert ("compiled DOP853" in fast.segment_loops) == (name in COMPILED_LOOP), fast.segment_loops
    assert ref.segment_loops == ("scipy DOP853",)
    assert fast.status == ref.status == int(name in ENDS_EARLY), (fast.message, ref.message)
    assert [(e.kind, e.entry) for e in fast.events] == [(e.kind, e.entry) for e in ref.events]
    np.testing.assert_allclose(
        [e.tau for e in fast.events], [e.tau for e in ref.events], rtol=1e-9, atol=1e-12
    )
    assert (
        finite_gap(comparable(name, fast.log_abs_beta), comparable(name, ref.log_abs_beta)) <= 1e-10
    )
    np.testing.assert_allclose(
        comparable(name, fast.log_t_original),
        comparable(name, ref.log_t_original),
        rtol=1e-9,
        atol=1e-12,
    )


#: Hyper-parameters of every algorithm of the table, for :func:`test_every_algorithm_runs_compiled`
#: (an algorithm added to the table needs its entry here).
EVERY_ALGORITHM = {
    "gd": {},
    "l2-sam": {"rho": 0.2},
    "linf-sam": {"rho": 0.1},
    "usam": {"rho": 0.2},
    "le-sam": {"sigma": 0.1, "rho_max": 0.3},
    "le-sam-official": {"sigma": 0.1, "rho_max": 0.3},
    "asam": {"rho": 0.2},
    "1-sam": {"rho": 0.2},
    "1-usam": {"rho": 0.2},
}


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_every_algorithm_runs_compiled(algorithm):
    """Every algorithm of the table runs its flow in the compiled segment loop (on blobs to
    tau = 8, margins up to ~100; l_inf-SAM until it slides, which scipy's loop takes) and its
    steps in the compiled step loop (on a regression): an algorithm that the kernels do not
    cover, or a run that leaves them, fails here."""
    pytest.importorskip("numba")
    hp = EVERY_ALGORITHM[algorithm]
    flow = simulate(blobs(), algorithm, 2, 0.5, t_max=8.0, n_points=9, backend="numba", **hp)
    assert flow.status == 0, flow.message
    if get_algorithm(algorithm).sign_discontinuous:
        assert flow.segment_loops[0] == "compiled DOP853"
    else:
        assert flow.segment_loops == ("compiled DOP853",)
    steps = iterate(regression(), algorithm, 2, 0.5, eta=0.05, steps=50, backend="numba", **hp)
    assert steps.backend == "numba" and steps.status == 0


@pytest.mark.parametrize("algorithm", ["1-sam", "1-usam"])
def test_per_example_runs_stay_on_the_compiled_loop_as_the_margins_grow(algorithm):
    """A per-example run on classification data goes on in the compiled loop until its largest
    margin passes 400, where the examples' ``|l'(u_i)|`` squared underflow (1-SAM's residual
    switch cannot happen on a margin loss: the loop takes it too), and equals the numpy
    backend's run: 1e-10 in log|beta|, 1e-9 in log t."""
    pytest.importorskip("numba")
    data = blobs()
    kw = dict(rho=0.5, t_max=14.0, n_points=31)
    fast = simulate(data, algorithm, 2, 0.5, backend="numba", **kw)
    ref = simulate(data, algorithm, 2, 0.5, backend="numpy", **kw)
    assert fast.status == ref.status == 0, (fast.message, ref.message)
    assert fast.segment_loops == ("compiled DOP853",)
    beta = fast.sign_beta[-1] * np.exp(fast.log_abs_beta[-1])
    assert np.max(data.signed_features @ beta) > 400.0
    assert finite_gap(fast.log_abs_beta, ref.log_abs_beta) <= 1e-10
    np.testing.assert_allclose(fast.log_t_original, ref.log_t_original, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", ["l2-sam collapse", "l2-sam blobs collapse"])
def test_compiled_loop_takes_the_approach_to_a_collapse(name, monkeypatch):
    """After the near-zero switch (the asinh chart, the entries near the largest watched for
    reaching 0: :class:`flows.integrator.threshold_events.CollapseCrossing`) the compiled loop
    integrates on, watching those entries' signs, and hands back to the Python loop a step
    before the collapse: all but a few near-zero steps are compiled (the collapse time and path
    are the numpy backend's: :func:`test_numba_backend_equals_numpy_backend`)."""
    pytest.importorskip("numba")
    from flows.compiled import segment as fast_segment
    from flows.integrator import assemble

    runs, exponent = [], assemble.exponent
    monkeypatch.setattr(assemble, "exponent", lambda run: runs.append(run) or exponent(run))
    data, algorithm, depth, alpha, t_max = CASES[name]
    result = simulate(data, algorithm, depth, alpha, rho=0.5, t_max=t_max, n_points=31,
                      backend="numba")  # fmt: skip
    assert [e.kind for e in result.events] == ["collapse"]
    (run,) = runs
    near = [s for s in run.path.segments if s.mode.near_zero is not None and not s.mode.collapsed]
    compiled = sum(len(s.ts) - 1 for s in near if s.dense is not None)
    python = sum(len(s.ts) - 1 for s in near if s.dense is None)
    assert compiled >= 50 and python <= 3, (compiled, python)
    first = next(s for s in near if s.dense is not None)
    y = first.raw(first.ts[:1])[0]
    watch = fast_segment._watch(run.field_for(first.mode), first.mode, run.radius, True, y)
    signs = np.zeros(y.size - 1)
    signs[first.mode.near_zero] = np.sign(y[first.mode.near_zero])
    assert np.all(signs[first.mode.near_zero] != 0)
    np.testing.assert_array_equal(watch[1], signs)


SCHEDULED = {
    "l2-sam cosine": (
        single_example([1, 2, 3, 4, 5]),
        "l2-sam",
        {"rho": cosine(1.0, 10.0)},
        "rescaled",
    ),
    "l2-sam warm-up blobs": (
        blobs(),
        "l2-sam",
        {"rho": warmup_cosine(0.5, 1.0, 2.0, 4.0)},
        "rescaled",
    ),
    "l2-sam cosine original": (blobs(), "l2-sam", {"rho": cosine(0.5, 2.0)}, "original"),
    "le-sam cosine sigma": (
        blobs(),
        "le-sam",
        {"sigma": cosine(0.3, 3.0), "rho_max": 5.0},  # the min never binds: no kink on the way
        "rescaled",
    ),
    "1-usam cosine": (blobs(), "1-usam", {"rho": cosine(0.5, 3.0)}, "rescaled"),
}


@pytest.mark.parametrize("name", sorted(SCHEDULED))
def test_compiled_loop_takes_cosine_schedules(name):
    """A hyper-parameter on a cosine or warm-up cosine schedule runs in the compiled loop, each
    stage at scipy's stage time (``t + c h``); the path is the numpy backend's (its Python loop
    evaluates the schedule at the same times) to 1e-10 in log|beta| and 1e-9 in log t, in both
    clocks, for a full-gradient and a per-example algorithm."""
    pytest.importorskip("numba")
    data, algorithm, hp, clock = SCHEDULED[name]
    kw = dict(t_max=4.0 if clock == "rescaled" else 2.0, n_points=41, clock=clock, **hp)
    fast = simulate(data, algorithm, 2, 0.4, backend="numba", **kw)
    ref = simulate(data, algorithm, 2, 0.4, backend="numpy", **kw)
    assert "compiled DOP853" in fast.segment_loops, fast.segment_loops
    assert fast.status == ref.status == 0, (fast.message, ref.message)
    assert [e.kind for e in fast.events] == [e.kind for e in ref.events]
    assert finite_gap(fast.log_abs_beta, ref.log_abs_beta) <= 1e-10
    np.testing.assert_allclose(fast.log_t_original, ref.log_t_original, rtol=1e-9, atol=1e-12)


def test_compiled_schedules_equal_the_schedules():
    """The kernels' cosine and warm-up cosine (:func:`flows.compiled._field_kernels.hyperparameters_into`)
    are :mod:`flows.schedules`' scalar formulas: the same numbers at times before, inside and
    after each piece, including a length that makes the phase overflow."""
    pytest.importorskip("numba")
    from flows.compiled import _field_kernels as kernels
    from flows.compiled import compiled_hyperparameters

    times = np.concatenate([[-1.0, 0.0, 5e-324], np.linspace(-0.5, 6.0, 131), [1e300]])
    for schedule in (cosine(0.7, 3.0), cosine(0.7, 5e-324), warmup_cosine(0.5, 1.0, 2.0, 4.0),
                     warmup_cosine(0.5, 5e-324, 1.0, 1.0), warmup_cosine(0.5, 0.0, 0.0, 2.0)):  # fmt: skip
        values, table = compiled_hyperparameters({"rho": schedule}, ("rho",))
        got = [kernels.hyperparameters_into(values, table, t, np.empty(8))[0] for t in times]
        assert got == [schedule(float(t)) for t in times], schedule


def test_compiled_loop_keeps_the_budget_and_the_path(monkeypatch):
    """A budget spent inside the compiled loop: cause BUDGET_SPENT (status -1), the max_nfev
    message, the path up to there (as the Python loop does)."""
    pytest.importorskip("numba")
    data = single_example([1, 2, 3, 4, 5])
    tr = simulate(data, "l2-sam", 2, 0.4, rho=1.0, t_max=50.0, max_nfev=300)
    assert tr.cause is Cause.BUDGET_SPENT and tr.status == -1 and "max_nfev=300" in tr.message
    assert 0 < tr.t[-1] < 50.0 and np.all(np.isfinite(tr.log_abs_beta))
    full = simulate(data, "l2-sam", 2, 0.4, rho=1.0, t_max=50.0)
    k = len(tr.t) - 1  # the last grid time reached (the path ends at the budget after it)
    np.testing.assert_array_equal(tr.t[:k], full.t[:k])
    assert finite_gap(tr.log_abs_beta[:k], full.log_abs_beta[:k]) <= 1e-12


def test_numba_backend_without_numba_names_the_extra(monkeypatch):
    """backend='numba' without numba: ImportError naming the extra; 'auto' falls back."""
    from flows import compiled

    monkeypatch.setattr(compiled, "NUMBA_INSTALLED", False)
    with pytest.raises(ImportError, match=r"\.\[fast\]"):
        simulate(single_example([1.0, 2.0]), "gd", 2, 0.5, t_max=1.0, backend="numba")
    assert simulate(single_example([1.0, 2.0]), "gd", 2, 0.5, t_max=1.0).status == 0


@pytest.mark.parametrize("name", cases_slow_in(REFERENCE_SLOW_CASES))
def test_numpy_backend_equals_reference_backend(name):
    """Same path to 1e-9 in log|beta| (where finite), same events at the same times (1e-9),
    same status."""
    data, algorithm, depth, alpha, t_max = CASES[name]
    clock = "original" if "original" in name else "rescaled"
    kw = dict(
        rho=0.5, sigma=0.3, rho_max=0.5, t_max=t_max, n_points=31, clock=clock, original_time=False
    )
    fast = simulate(data, algorithm, depth, alpha, **kw)
    ref = simulate(data, algorithm, depth, alpha, backend="reference", **kw)
    assert fast.status == ref.status == int(name in ENDS_EARLY), (fast.message, ref.message)
    assert [(e.kind, e.entry) for e in fast.events] == [(e.kind, e.entry) for e in ref.events]
    np.testing.assert_allclose(
        [e.tau for e in fast.events], [e.tau for e in ref.events], rtol=1e-9, atol=1e-12
    )
    assert (
        finite_gap(comparable(name, fast.log_abs_beta), comparable(name, ref.log_abs_beta)) <= 1e-9
    )
    np.testing.assert_array_equal(fast.sign_beta, ref.sign_beta)


@pytest.mark.parametrize(
    "algorithm,alpha",
    [("l2-sam", 0.4), ("l2-sam", 0.3), ("gd", 0.2), ("le-sam", 0.4), ("usam", 0.4)],
)
@pytest.mark.parametrize("depth", [2, 3])
def test_log_chart_equals_asinh_chart(algorithm, alpha, depth):
    """The automatic log chart (balanced runs) and the asinh chart give the same path: 1e-6 in
    log|beta| up to 90% of the run or of the time to collapse (next to a blow-up or a collapse
    the path is arbitrarily sensitive), the same events at the same times to 1e-8 (for
    alpha = 0.3 the L = 2 l2-SAM run collapses, at L = 3 the runs blow up)."""
    data = single_example([1.0, 2.0, 3.0, 4.0, 5.0])
    kw = dict(rho=1.0, sigma=0.5, rho_max=1.0, t_max=2.9, n_points=59, original_time=False)
    auto = simulate(data, algorithm, depth, alpha, **kw)
    asinh = simulate(data, algorithm, depth, alpha, chart="asinh", **kw)
    assert auto.status == asinh.status
    assert [e.kind for e in auto.events] == [e.kind for e in asinh.events]
    np.testing.assert_allclose(
        [e.tau for e in auto.events], [e.tau for e in asinh.events], rtol=1e-8
    )
    end = min(auto.tau[-1], asinh.tau[-1], auto.collapse_time or np.inf)
    early = auto.tau[: len(asinh.tau)] <= 0.9 * end
    assert finite_gap(auto.log_abs_beta[early], asinh.log_abs_beta[early]) <= 1e-6


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.slow if n in SLOW_CASES else ())
        for n in sorted(n for n in COMPILED_LOOP if "original" not in n)
    ],
)
def test_compiled_exponent_equals_numpy_log_c(name, monkeypatch):
    """``K = -log c`` of the original-time quadrature, compiled on the DOP853 dense output
    (:func:`flows.compiled.segment.exponent`), equals the numpy field's ``log c`` on the same path
    at 400 random times of every segment it applies to (rtol 1e-12); it defers (NaN) only
    where the float path does not hold."""
    pytest.importorskip("numba")
    from flows.compiled import segment as fast_segment
    from flows.integrator import assemble

    runs, exponent = [], assemble.exponent
    monkeypatch.setattr(assemble, "exponent", lambda run: runs.append(run) or exponent(run))
    data, algorithm, depth, alpha, t_max = CASES[name]
    kw = dict(rho=0.5, sigma=0.3, rho_max=0.5, t_max=t_max, n_points=31)
    simulate(data, algorithm, depth, alpha, backend="numba", **kw)
    (run,) = runs
    rng = np.random.default_rng(0)
    compared = 0
    for seg in run.path.segments:
        fld = run.moving_field(seg.mode)
        s = np.sort(rng.uniform(seg.start, seg.end, 400))
        fast = fast_segment.exponent(fld, seg, s)
        if fast is None:
            continue
        theta, _ = seg.sample(s, run.problem.shape)
        slow = -fld.log_c(theta, fld.pattern_signs(seg.mode.pattern), s)
        ok = ~np.isnan(fast)
        np.testing.assert_allclose(fast[ok], slow[ok], rtol=1e-12, atol=1e-12)
        compared += int(np.sum(ok))
    assert compared >= 400


def test_compiled_chart_samples_equal_numpys():
    """:meth:`Segment.sample` of a compiled segment, by one compiled call
    (:func:`flows.compiled.segment.chart_values`), against the numpy path (its dense output,
    the chart's state, the held entries set to 0): in the log chart bit for bit (a copy and a
    selection), in the asinh chart to 4e-16 in ``log|w|`` (libm's ``log`` and ``exp`` against
    numpy's vectorised ones: the last bit of terms of order 1) with the same signs, and bit for
    bit again past ``COMPILED_ASINH_VALUES`` values (there numpy's); on a run's segment as it
    is, with entries held, and where coordinates are ``-inf`` (log chart) or 0 (asinh chart):
    ``w = 0``."""
    pytest.importorskip("numba")
    import dataclasses

    from flows.charts import LogChart
    from flows.compiled import segment as fast_segment
    from flows.integrator import driver

    options = dict(driver.simulate.__kwdefaults__, t_max=3.0, backend="numba")
    for chart, blank, alpha in (("log", -np.inf, 0.4), ("asinh", 0.0, 0.4), ("asinh", 0.0, 2.5)):
        options["chart"] = chart
        data = single_example([1.0, 2.0, 3.0])
        run = driver._setup(data, "l2-sam", 3, alpha, {"rho": 0.3}, options)
        driver._integrate_segment(run, "DOP853")
        seg = run.path.segments[0]
        assert isinstance(seg.mode.chart, LogChart) == (chart == "log")
        assert seg.chart_values is not None
        t_old, h, F, y_old = seg.stack
        zero, zero_F = y_old.copy(), F.copy()
        zero[:, 1], zero_F[:, :, 1] = blank, 0.0  # w_2 = 0 along the segment
        held = seg.mode.copy()
        held.held = np.zeros_like(held.held)
        held.held[0, 2] = True
        times = np.concatenate([seg.ts, np.linspace(seg.start, seg.end, 101)])
        for case in (
            seg,
            dataclasses.replace(seg, mode=held),
            dataclasses.replace(seg, stack=(t_old, h, zero_F, zero)),
        ):
            (fast, fast_tau) = case.sample(times, run.problem.shape)
            (slow, slow_tau) = dataclasses.replace(case, chart_values=None).sample(
                times, run.problem.shape
            )
            assert fast_tau.tobytes() == slow_tau.tobytes()
            assert fast.sign.tobytes() == slow.sign.tobytes()
            if chart == "log":
                assert fast.log_abs.tobytes() == slow.log_abs.tobytes()
            else:
                np.testing.assert_allclose(fast.log_abs, slow.log_abs, rtol=4e-16, atol=4e-16)
        assert np.isneginf(fast.log_abs[:, 0, 1]).all() and not fast.sign[:, 0, 1].any()
        many = np.linspace(seg.start, seg.end, fast_segment.COMPILED_ASINH_VALUES // 3 + 1)
        (big, big_tau) = seg.sample(many, run.problem.shape)  # past it, numpy's bits
        (slow, slow_tau) = dataclasses.replace(seg, chart_values=None).sample(
            many, run.problem.shape
        )
        for a, b in ((big.sign, slow.sign), (big.log_abs, slow.log_abs), (big_tau, slow_tau)):
            assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("l2-sam L3 blow-up", marks=pytest.mark.slow),
        "gd L4 blow-up",
        "l2-sam L3 blobs",
        pytest.param("1-usam L3 blow-up", marks=pytest.mark.slow),
    ],
)
def test_compiled_blowup_event_equals_python_event(name, monkeypatch):
    """The compiled loop's blow-up function (``event_values``, entry 5) equals
    :class:`flows.integrator.events.BlowUp` on the run's own path (60 times per segment; on the
    blow-up runs growth rates from ~3 up to the event's 1e12; both are positive where no entry
    grows, e.g. on the blobs run), so the compiled loop hands back on the step where the
    Python loop sees the event (compared where the compiled field holds: elsewhere the loop
    hands back)."""
    pytest.importorskip("numba")
    from flows.compiled import _field_kernels
    from flows.compiled import _segment_kernels as _numba_dop853
    from flows.compiled import segment as fast_segment
    from flows.integrator import assemble
    from flows.integrator.events import BLOWUP_RATE
    from flows.integrator.threshold_events import BlowUp

    runs, exponent = [], assemble.exponent
    monkeypatch.setattr(assemble, "exponent", lambda run: runs.append(run) or exponent(run))
    data, algorithm, depth, alpha, t_max = CASES[name]
    simulate(data, algorithm, depth, alpha, rho=0.5, t_max=t_max, n_points=31, backend="numba")
    (run,) = runs
    rng = np.random.default_rng(1)
    growing = 0
    for seg in run.path.segments:
        fld = run.moving_field(seg.mode)
        if not fast_segment.applies(fld, seg.mode, "DOP853"):
            continue
        problem = fast_segment._problem_tuple(fld, seg.mode)
        s = np.sort(rng.uniform(seg.start, seg.end, 60))
        for when, y in zip(s, seg.raw(s), strict=True):
            work = _field_kernels.workspace(problem[0], problem[6].shape[0])
            if not _numba_dop853.field_into(y, problem, work, np.empty(y.size), when):
                continue  # the compiled loop hands back here (1-USAM's perturbed points
                # leave the float range first, ~|w|^(2L-1)); the Python loop watches the event
            watch = fast_segment._watch(fld, seg.mode, run.radius, False, y)
            compiled = _numba_dop853.event_values(y, problem, watch, when)[5]
            python = BlowUp(fld)(when, y)
            if python == np.log(BLOWUP_RATE):
                assert compiled > 0
            else:
                np.testing.assert_allclose(compiled, python, rtol=1e-12, atol=1e-11)
                growing += 1
    assert growing >= (0 if "blobs" in name else 20)


@pytest.mark.parametrize("backend", ["numba", "numpy"])
@pytest.mark.parametrize(
    "name, clock",
    [
        ("gd L4 blow-up", "rescaled"),
        ("l2-sam L3 blobs", "rescaled"),
        ("l2-sam L3 blow-up", "rescaled"),
        ("l2-sam L3 blow-up", "original"),
    ],
)
def test_blowup_rate_from_the_float_path_equals_the_signed_log_velocity(
    name, clock, backend, monkeypatch
):
    """:class:`flows.integrator.threshold_events.BlowUp` in the log chart takes the growth rates
    from the field's one-point float path (``dz/ds / (dtau/ds)``); on the run's own path (40
    times per segment) they equal those of its signed-log velocity to 1e-12, and the event
    values to 1e-12 where some entry grows. The cases reach rates from ~1 to the event's."""
    if backend == "numba":
        pytest.importorskip("numba")
    from flows.charts import LogChart
    from flows.integrator import driver
    from flows.integrator.threshold_events import BlowUp

    runs, assemble = [], driver.assemble
    monkeypatch.setattr(
        driver, "assemble", lambda run, algo: runs.append(run) or assemble(run, algo)
    )
    data, algorithm, depth, alpha, t_max = CASES[name]
    horizon = t_max if clock == "rescaled" else 1e3  # the original clock's t is longer
    simulate(data, algorithm, depth, alpha, rho=0.5, t_max=horizon, n_points=31, clock=clock,
             backend=backend)  # fmt: skip
    (run,) = runs
    rng = np.random.default_rng(2)
    compared = 0
    for seg in run.path.segments:
        fld = run.field_for(seg.mode)
        if not isinstance(fld.problem.chart, LogChart) or seg.end <= seg.start:
            continue
        s = np.sort(rng.uniform(seg.start, seg.end, 40))
        for when, y in zip(s, seg.raw(s), strict=True):
            event = BlowUp(fld)
            rates = event._log_chart_rates(when, y)
            if rates is None:
                continue  # outside the float path: the signed-log velocity is the event's
            fast = event(when, y)
            with monkeypatch.context() as patch:
                patch.setattr(BlowUp, "_log_chart_rates", lambda self, s, y: None)
                slow = event(when, y)
                theta = event.theta(y)
                vel = fld.velocity(theta, None, when)
            exact = np.exp(vel.dtheta.log_abs - theta.log_abs) * vel.dtheta.sign * theta.sign
            np.testing.assert_allclose(rates, exact.ravel(), rtol=1e-12, atol=1e-300)
            np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=1e-12)
            compared += 1
    assert compared >= 40


@pytest.mark.parametrize("algorithm, depth", [("l2-sam", 2), ("gd", 3)])
def test_compiled_loop_stops_at_the_loss_floor(algorithm, depth):
    """With ``loss_floor`` the compiled loop runs too (it watches the training loss) and the
    run ends where the numpy backend's does: the loss-floor event at the same tau (1e-9), the
    same path (1e-10 in log|beta|) and log t (1e-9)."""
    pytest.importorskip("numba")
    kw = dict(rho=0.5, t_max=100.0, n_points=31, loss_floor=1e-8)
    fast = simulate(blobs(), algorithm, depth, 0.4, backend="numba", **kw)
    ref = simulate(blobs(), algorithm, depth, 0.4, backend="numpy", **kw)
    assert "compiled DOP853" in fast.segment_loops
    assert fast.status == ref.status == 0 and fast.events[-1].kind == "loss floor", fast.message
    np.testing.assert_allclose(fast.events[-1].tau, ref.events[-1].tau, rtol=1e-9)
    assert finite_gap(fast.log_abs_beta, ref.log_abs_beta) <= 1e-10
    np.testing.assert_allclose(fast.log_t_original, ref.log_t_original, rtol=1e-9, atol=1e-12)


@pytest.mark.filterwarnings("ignore:divide by zero encountered:RuntimeWarning")
def test_compiled_log_loss_equals_the_loss_table():
    """Every loss of the table has a compiled twin whose pieces
    (:mod:`flows.compiled._field_kernels`: ``log l``, ``log|l'|``, the slope of ``log|l'|``,
    ``sign(-l')``) equal the table's from u = -1e3 to 1e300 (both sides of the logistic switch
    at u = 35, and u = +-0, where the squared loss's slope is +-inf) to rounding, and the
    compiled mean loss at the loss arguments ``u = <beta, z> - o`` equals a log-sum-exp over
    the table, on data of the loss's task."""
    pytest.importorskip("numba")
    from flows.compiled import _field_kernels as kernels

    assert all(loss.compiled_id is not None for loss in LOSSES.values())
    compiled = [(loss.compiled_id, name) for name, loss in LOSSES.items()]
    assert len({loss_id for loss_id, _ in compiled}) == len(LOSSES)
    u = np.concatenate([[-1e3, -40.0, -1.0, -0.0, 0.0, 1e-300, 35.0, 35.000001, 700.0, 1e300],
                        np.linspace(-50.0, 50.0, 201)])  # fmt: skip
    for loss_id, name in compiled:
        loss = LOSSES[name]
        for kernel, want in (
            (kernels.log_value, loss.log_value(u)),
            (kernels.log_abs_derivative, loss.log_abs_derivative(u)),
            (kernels.log_derivative_slope, loss.log_derivative_slope(u)),
            (kernels.descent_sign, np.ones_like(u) if loss.descent_sign is None
             else loss.descent_sign(u)),
        ):  # fmt: skip
            got = np.array([kernel(v, loss_id) for v in u])
            np.testing.assert_allclose(got, want, rtol=1e-15, atol=0, err_msg=kernel.__name__)
    for loss_id, name in compiled:
        data = regression() if LOSSES[name].task == "regression" else blobs()
        w = np.random.default_rng(2).uniform(0.5, 3.0, (1, data.d))
        u = data.signed_features @ w[0] ** 3 - (0.0 if data.offsets is None else data.offsets)
        log_l = LOSSES[name].log_value(u)
        want = np.log(np.mean(np.exp(log_l - log_l.max()))) + log_l.max()
        offsets = np.zeros(data.n) if data.offsets is None else np.array(data.offsets)
        features = np.ascontiguousarray(data.signed_features)
        got = kernels.log_mean_loss(w, 3, features, offsets, loss_id)
        np.testing.assert_allclose(got, want, rtol=1e-13)


@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_one_point_float_evaluation_equals_batch_and_signed_log(loss):
    """The numpy field's one-point float evaluation (what the solver calls, ``theta`` of shape
    (G, d)) equals the batched float formulas bit for bit (a batch of one, shape (1, G, d): the
    same operations in the same order) and the signed-log evaluation to rtol 1e-12: direction G,
    log c and the leave-one-out products, for 1..3 layers as one group or as separate ones, one
    example and several, at random points with an exact zero; at an exact interpolator of the
    squared loss all three give G = 0 and log c = -inf."""
    rng = np.random.default_rng(5)
    if LOSSES[loss].task == "regression":
        one = Dataset(np.array([[1.0, 2.0, 3.0]]), np.array([0.7]), task="regression")
        several, clock = (
            (one, Dataset(EXACT_ROWS, EXACT_ROWS @ np.ones(3), task="regression")),
            "original",
        )
    else:
        several, clock = (single_example([1.0, 2.0, 3.0]), blobs()), "rescaled"
    checked = 0
    for data in several:
        for mult in ([1], [2], [3], [1, 1], [1, 1, 1]):
            problem = Problem(data, get_algorithm("gd"), {}, LOSSES[loss], np.array(mult),
                              get_clock(clock), AsinhChart())  # fmt: skip
            field = FusedField(problem)
            points = [rng.uniform(0.2, 2.0, problem.shape) * np.sign(rng.normal(size=problem.shape))
                      for _ in range(4)]  # fmt: skip
            points[1][0, 0] = 0.0
            if data.n > 1 and data.regression:
                points.append(np.ones(problem.shape))  # an exact interpolator
            for w in points:
                one = field._float_evaluate(w)
                # a batch of one; the constant direction of one example comes unbatched
                batch = [np.broadcast_to(b, (1, *np.shape(a)))[0]
                         for a, b in zip(one, field._float_evaluate(w[None]), strict=True)]  # fmt: skip
                direction, log_c, loo = field.evaluate(*SignedLog.from_float(w))
                for a, b in zip(one, batch, strict=True):
                    np.testing.assert_array_equal(a, b)
                np.testing.assert_allclose(one[0], direction.to_float(), rtol=1e-12, atol=1e-300)
                assert one[1] == pytest.approx(float(log_c), rel=1e-12)
                np.testing.assert_allclose(one[2], loo.to_float(), rtol=1e-12, atol=1e-300)
                if np.all(w == 1) and data.regression:
                    assert np.all(one[0] == 0) and one[1] == -np.inf
                checked += 1
    assert checked == (45 if LOSSES[loss].task == "regression" else 40)


# Points beyond the float range: the numpy field's float path meets inf - inf there before it
# hands the point to the signed-log path (whose result the test checks).
@pytest.mark.filterwarnings("ignore:invalid value encountered in subtract:RuntimeWarning")
@pytest.mark.parametrize("loss", sorted(k for k, v in LOSSES.items() if v.compiled_id is not None))
def test_compiled_one_point_pieces_equal_numpy(loss):
    """The one-point pieces the events use, compiled (``CompiledField._float_evaluate``,
    ``velocity`` of one point, ``log_loss``), equal the numpy field's at random points (exact
    zeros, entries from 1e-3 to 1e3, and points beyond the float range, where both take the
    signed-log path, and with the exponential loss may both give NaN): rtol 1e-12, for 1..3
    layers, one example and several, on data of the loss's task (the squared loss: signed
    example weights). At an exact interpolator of the squared loss both give G = 0,
    log c = -inf, log L = -inf and a zero GD field."""
    pytest.importorskip("numba")
    from flows.compiled.field import CompiledField

    rng = np.random.default_rng(11)
    checked = 0
    if LOSSES[loss].task == "regression":
        one = Dataset(np.array([[1.0, 2.0, 3.0]]), np.array([0.7]), task="regression")
        several = (one, Dataset(EXACT_ROWS, EXACT_ROWS @ np.ones(3), task="regression"))
        clock = "original"
    else:
        several, clock = (single_example([1.0, 2.0, 3.0]), blobs()), "rescaled"
    for data in several:
        for mult in ([2], [3], [1, 1, 1]):
            problem = Problem(
                data,
                get_algorithm("l2-sam"),
                resolve_hyperparameters("l2-sam", HP),
                LOSSES[loss],
                np.array(mult),
                get_clock(clock),
                AsinhChart(),
            )
            numpy_field, compiled_field = FusedField(problem), CompiledField(problem)
            for k in range(6):
                spread = 400.0 if k == 5 else 2.0  # the last: far beyond the float range
                log_abs = rng.uniform(-spread, spread, problem.shape)
                sign = np.sign(rng.normal(size=problem.shape))
                if k == 1:
                    sign[0, 0], log_abs[0, 0] = 0.0, -np.inf
                theta = SignedLog(sign, log_abs)
                want = numpy_field.velocity(theta)
                got = compiled_field.velocity(theta)
                np.testing.assert_array_equal(got.dtheta.sign, want.dtheta.sign)
                np.testing.assert_allclose(got.dtheta.log_abs, want.dtheta.log_abs, rtol=1e-12)
                assert got.log_c == pytest.approx(want.log_c, rel=1e-12, nan_ok=True)
                assert compiled_field.log_loss(theta) == pytest.approx(
                    numpy_field.log_loss(theta), rel=1e-12
                )
                if k < 5:  # the weights in floats against the numpy field's log form: G to
                    # 1e-12 of its terms' scale max|z_ij| (a sum that cancels), log c to 1e-12
                    # absolute (c to 1e-12 relative, log c near 0 included)
                    w = np.where(sign == 0, 0.0, sign * np.exp(log_abs))
                    scale = np.abs(data.signed_features).max()
                    for a, b, atol in zip(
                        compiled_field._float_evaluate(w),
                        numpy_field._float_evaluate(w),
                        (1e-12 * scale, 1e-12, 1e-300),
                        strict=True,
                    ):
                        np.testing.assert_allclose(a, b, rtol=1e-12, atol=atol)
                checked += 1
            if data.n > 1 and data.regression:  # an exact interpolator: every residual is 0
                ones = np.ones(problem.shape)
                for a, b in zip(
                    compiled_field._float_evaluate(ones),
                    numpy_field._float_evaluate(ones),
                    strict=True,
                ):
                    np.testing.assert_array_equal(a, b)
                direction, log_c, _ = compiled_field._float_evaluate(ones)
                assert np.all(direction == 0) and log_c == -np.inf
                assert compiled_field.log_loss(SignedLog.from_float(ones)) == -np.inf
                gd = Problem(data, get_algorithm("gd"), {}, LOSSES[loss], np.array(mult),
                             get_clock(clock), AsinhChart())  # fmt: skip
                z = np.arcsinh(ones).ravel()
                held = np.zeros(problem.shape, dtype=bool)
                got = CompiledField(gd).chart_rhs(z, held)
                np.testing.assert_array_equal(got, FusedField(gd).chart_rhs(z, held))
                assert np.all(got == 0)
    assert checked == 36


#: The regression runs compared across backends: depth and init (``u = 0.1``, ``v = 0`` at
#: L = 2; a positive (3, d) init at L = 3).
REGRESSION_INITS = {
    "L2 u=0.1 v=0": (2, np.vstack([np.full(6, 0.1), np.zeros(6)])),
    "L3 positive": (3, np.linspace(0.3, 0.8, 18).reshape(3, 6)),
}


#: Regression runs compared only with ``-m slow``: from ``v = 0`` the default run keeps GD and
#: l_inf-SAM (its crossings at tau 0); every algorithm stays in it from the L = 3 init.
SLOW_REGRESSION = {("l2-sam", "L2 u=0.1 v=0"), ("usam", "L2 u=0.1 v=0"), ("le-sam", "L2 u=0.1 v=0")}


@pytest.mark.parametrize(
    "algorithm, init",
    [
        pytest.param(
            algorithm, init, marks=pytest.mark.slow if (algorithm, init) in SLOW_REGRESSION else ()
        )
        for algorithm in ["gd", "l2-sam", "usam", "linf-sam", "le-sam", "1-usam"]
        for init in sorted(REGRESSION_INITS)
    ],
)
def test_numba_regression_equals_numpy(algorithm, init):
    """Regression (the squared loss, signed example weights) on the compiled backend, its field
    and its DOP853 loop, gives the numpy backend's path: log|beta| within 1e-9, the same status,
    events (l_inf-SAM's crossings, at tau 0 for the entries that start at 0) and signs.

    rtol 1e-12: from ``v = 0`` (atol 1e-100) the first steps are ~1e-89 and DOP853's error
    estimate there is rounding noise, so the two loops' steps differ from the first ones and
    their paths by about rtol (~1e-9 in log|beta| at the default 1e-10, as numpy's and the
    reference backend's do)."""
    pytest.importorskip("numba")
    depth, alpha = REGRESSION_INITS[init]
    kw = dict(rho=0.05, sigma=0.05, rho_max=0.1, t_max=3.0, n_points=7, rtol=1e-12)
    fast = simulate(regression(), algorithm, depth, alpha, backend="numba", **kw)
    ref = simulate(regression(), algorithm, depth, alpha, backend="numpy", **kw)
    assert (fast.backend, ref.backend) == ("numba", "numpy")
    assert "compiled DOP853" in fast.segment_loops, fast.segment_loops
    assert fast.status == ref.status == 0, (fast.message, ref.message)
    assert [(e.kind, e.entry) for e in fast.events] == [(e.kind, e.entry) for e in ref.events]
    np.testing.assert_allclose(
        [e.tau for e in fast.events], [e.tau for e in ref.events], rtol=1e-9, atol=1e-12
    )
    assert finite_gap(fast.log_abs_beta, ref.log_abs_beta) <= 1e-9
    np.testing.assert_array_equal(fast.sign_beta, ref.sign_beta)


def test_compiled_regression_events_equal_python_events(monkeypatch):
    """The compiled loop's watches on regression: the stationary function (``event_values``
    entry 2: a critical point of the squared loss that does not interpolate, n > d with noisy
    targets) and the loss-floor function (entry 6) equal :class:`Stationary` and
    :class:`LossFloor` on the run's own path (rtol 1e-10; where ``S`` is small, to ``1e-13 / S``
    in ``log S``), and the run ends stationary on both
    backends; a loss floor ends a GD run where the numpy backend's does (tau to 1e-9, rtol
    1e-12). 1-SAM on the squared loss (its perturbation switches at a zero residual) has no
    compiled loop: on both backends it takes scipy's, with the compiled per-example field on
    numba's, and ends at the same residual switch (1e-9; the path before it within 1e-10)."""
    pytest.importorskip("numba")
    from flows.compiled import _segment_kernels as loop
    from flows.compiled import segment as fast_segment
    from flows.integrator import driver
    from flows.integrator.events import STATIONARY_TOL
    from flows.integrator.threshold_events import LossFloor, Stationary

    runs, assemble = [], driver.assemble
    monkeypatch.setattr(driver, "assemble", lambda run, *a: runs.append(run) or assemble(run, *a))
    rng = np.random.default_rng(3)
    X = rng.normal(size=(8, 2))
    noisy = Dataset(X, X @ np.array([1.0, -0.5]) + 0.3 * rng.normal(size=8), task="regression")
    alpha = np.array([[0.5, 0.5], [0.3, -0.2]])
    kw = dict(t_max=100.0, n_points=11, loss_floor=1e-6)
    fast = simulate(noisy, "gd", 2, alpha, backend="numba", **kw)
    ref = simulate(noisy, "gd", 2, alpha, backend="numpy", **kw)
    assert fast.cause is ref.cause is Cause.STATIONARY, (fast.message, ref.message)
    assert "compiled DOP853" in fast.segment_loops
    run = runs[0]
    checked = 0
    for seg in run.path.segments:
        fld = run.moving_field(seg.mode)
        if not fast_segment.applies(fld, seg.mode, "DOP853"):
            continue
        problem = fast_segment._problem_tuple(fld, seg.mode)
        s = np.sort(rng.uniform(seg.start, seg.end, 40))
        for when, y in zip(s, seg.raw(s), strict=True):
            watch = fast_segment._watch(fld, seg.mode, run.radius, False, y, 1e-6)
            compiled = loop.event_values(y, problem, watch, when)
            python = Stationary(fld)(when, y)
            # near the critical point G is a cancelling sum: a rounding of w (the two read it
            # from the chart differently) moves log S by ~1e-16 / S
            size = np.exp(python) * STATIONARY_TOL
            np.testing.assert_allclose(compiled[2], python, rtol=1e-10, atol=1e-13 / size)
            python = LossFloor(fld, floor=1e-6)(when, y)
            np.testing.assert_allclose(compiled[6], python, rtol=1e-10)
            checked += 1
    assert checked >= 40
    data, (depth, alpha) = regression(), REGRESSION_INITS["L2 u=0.1 v=0"]
    kw = dict(t_max=100.0, n_points=11, loss_floor=1e-8, rtol=1e-12)
    fast = simulate(data, "gd", depth, alpha, backend="numba", **kw)
    ref = simulate(data, "gd", depth, alpha, backend="numpy", **kw)
    assert "compiled DOP853" in fast.segment_loops
    assert fast.cause is ref.cause is Cause.LOSS_FLOOR, (fast.message, ref.message)
    np.testing.assert_allclose(fast.events[-1].tau, ref.events[-1].tau, rtol=1e-9)
    alpha, kw = np.linspace(0.3, 0.8, 12).reshape(2, 6), dict(rho=0.05, t_max=3.0, n_points=7)
    fast = simulate(data, "1-sam", 2, alpha, backend="numba", **kw)
    ref = simulate(data, "1-sam", 2, alpha, backend="numpy", **kw)
    assert fast.segment_loops == ref.segment_loops == ("scipy DOP853",)
    assert fast.cause is ref.cause is Cause.RESIDUAL_SWITCH, (fast.message, ref.message)
    np.testing.assert_allclose(fast.events[-1].tau, ref.events[-1].tau, rtol=1e-9)
    assert finite_gap(fast.log_abs_beta[:-1], ref.log_abs_beta[:-1]) <= 1e-10


def test_warm_compiles_each_kernel_once_and_says_so(capsys):
    """``flows.compiled.warm``: a group's calls compile what is not compiled yet, and nothing the
    second time (the kernels are then in memory or in numba's cache); a bad group or job count
    is an error naming it; the compile notice is one line, said at most once a process."""
    pytest.importorskip("numba")
    from flows import compiled
    from flows.compiled import warm

    first, _ = warm.warm(("sliding",), jobs=1)
    again, _ = warm.warm(("sliding",), jobs=1)
    assert first >= 0 and again == 0
    with pytest.raises(ValueError, match="group"):
        warm.warm(("nope",))
    assert warm.main(["--jobs", "0"]) == 2
    assert "--jobs" in capsys.readouterr().err
    assert warm.main(["--group", "sliding", "--jobs", "1"]) == 0
    assert "compiled already" in capsys.readouterr().out
    assert compiled.COMPILE_NOTICE.count("\n") == 0
