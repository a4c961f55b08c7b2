"""``Trajectory.to_arrays`` / ``Trajectory.from_arrays`` and ``Trajectory.cause``.

* Round trip: real runs (l_inf-SAM sliding on a parameter and a direction surface, crossings
  and a release, a parameter crossing in the second layer, a collapse, a blow-up at depth 3,
  a spent budget, LE-SAM with a warm-up+cosine budget) written with ``np.savez`` and read with
  ``np.load(allow_pickle=False)`` come back field for field, the arrays bit for bit.
* The arrays figures read from a ``'simulate'`` task (``event_j`` = ``entry[1]`` or -1, 0-d
  ``status`` and ``message``, ...) keep their meaning and dtype; a task's result goes through
  the sweep cache and back to the trajectory.
* A missing array is a ``ValueError`` naming it; a hyper-parameter that is an arbitrary
  callable is a ``ValueError`` naming it.
* Every cause, on a run that ends with it (``flows.simulate``; ``flows.iterate`` for OVERFLOW).
* ``loss`` is computed on its first read: the mean loss at ``beta``'s samples computed apart
  (``problem.loss`` at the margins), the same array on every read, through ``pickle`` and the
  arrays; a function given as ``loss`` is called once.
* CSV: ``Trajectory.to_csv`` and ``DiscreteRun.to_csv`` write a header of the column names and
  the arrays, which ``np.loadtxt`` reads back bit for bit (``-inf`` and ``inf`` included);
  ``python -m flows.run --out x.csv`` writes the same file.
"""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

from flows import Dataset, iterate, simulate, single_example
from flows import run as flows_run
from flows.datasets import MU5, gaussian_blobs, teacher_data
from flows.integrator import driver, filippov, junctions, stepping
from flows.results import ARRAY_NAMES, Cause, Trajectory, write_csv
from flows.schedules import warmup_cosine
from flows.sweep.kinds import SIMULATE_KEYS, run_simulate
from flows.sweep.registry import Task
from flows.sweep.store import Cache


def positive_teacher(seed: int, n: int, d: int) -> Dataset:
    """n Gaussian points in d dimensions labelled by a positive teacher, ``y = sign(X |w*|)``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return Dataset(X, np.sign(X @ np.abs(rng.normal(size=d))))


#: Separable by beta = (1, -1) but by no beta >= 0: GD from a balanced positive init at L = 2
#: ends at a stationary point.
CRITICAL = Dataset(np.array([[2.0, -1.0], [-1.0, -2.0]]), np.array([1.0, 1.0]))

#: Runs whose round trip is checked, and the events they hold.
RUNS = {
    # sliding: w^(0)_1 = 0 (parameter, entry (0, 1)) and G_0 = 0 (direction, entry (-1, 0))
    "linf-sam sliding": lambda: simulate(
        gaussian_blobs(), "linf-sam", depth=2, alpha=[1.5, 0.8], rho=1.0, t_max=8.0
    ),
    # crossings of G_3 and G_0, sliding on G_2 and its release
    "linf-sam crossings": lambda: simulate(
        positive_teacher(2, 10, 4), "linf-sam", 2, 1.0, rho=0.1, t_max=4.0, n_points=17
    ),
    # a parameter crossing in the second layer (entry (1, 2))
    "linf-sam layer crossing": lambda: simulate(
        teacher_data(),
        "linf-sam",
        2,
        np.array([[1.2, 0.7, 0.9], [0.8, 1.1, 0.6]]),
        rho=0.1,
        t_max=7.0,
        n_points=15,
    ),
    "collapse": lambda: simulate(single_example(MU5), "l2-sam", 2, 0.05, rho=1.0, t_max=0.3),
    "blow-up L3": lambda: simulate(single_example([1.0, 2.0]), "gd", 3, 0.5, t_max=10.0),
    "budget spent": lambda: simulate(
        single_example(MU5), "l2-sam", 2, 0.4, rho=1.0, t_max=50.0, max_nfev=300
    ),
    "le-sam schedule": lambda: simulate(
        single_example(MU5),
        "le-sam",
        2,
        0.4,
        sigma=warmup_cosine(0.35, 1.0, 6.0, 8.0),
        rho_max=1.5,
        t_max=10.0,
    ),
}


@pytest.fixture(scope="module")
def runs() -> dict[str, Trajectory]:
    return {name: run() for name, run in RUNS.items()}


def assert_same(traj: Trajectory, back: Trajectory) -> None:
    """Every field of ``back`` is that of ``traj``: arrays of the same dtype and shape, bit for
    bit; everything else equal and of the same type."""
    for field in dataclasses.fields(Trajectory):
        a, b = getattr(traj, field.name), getattr(back, field.name)
        if isinstance(a, np.ndarray):
            assert (b.dtype, b.shape) == (a.dtype, a.shape), field.name
            assert b.tobytes() == a.tobytes(), field.name
        else:
            assert type(b) is type(a) and b == a, field.name


def saved_and_loaded(arrays: dict[str, np.ndarray], path) -> Trajectory:
    """The trajectory read back from an ``np.savez`` file of ``arrays``."""
    np.savez(path, **arrays)
    with np.load(path, allow_pickle=False) as f:
        return Trajectory.from_arrays(f)


def test_the_runs_hold_every_kind_of_event(runs):
    """The round-trip runs cover crossings, sliding, releases on both kinds of surface, entries
    in both layers and in neither, a collapse and a blow-up, a spent budget and a schedule."""
    events = [e for traj in runs.values() for e in traj.events]
    assert {e.kind for e in events} >= {"crossing", "sliding", "release", "collapse", "blow-up"}
    assert {e.surface for e in events} == {"parameter", "direction", None}
    assert {e.entry[0] for e in events if e.entry is not None} == {-1, 0, 1}
    assert runs["budget spent"].cause is Cause.BUDGET_SPENT
    assert runs["le-sam schedule"].hyperparameters["sigma"] == warmup_cosine(0.35, 1.0, 6.0, 8.0)


@pytest.mark.parametrize("name", list(RUNS))
def test_round_trip_through_an_npz_file(runs, name, tmp_path):
    """to_arrays -> np.savez -> np.load(allow_pickle=False) -> from_arrays gives every field
    back, the arrays bit for bit; the arrays written are ARRAY_NAMES."""
    traj = runs[name]
    arrays = traj.to_arrays()
    assert tuple(arrays) == ARRAY_NAMES
    assert_same(traj, saved_and_loaded(arrays, tmp_path / "traj.npz"))
    assert_same(traj, Trajectory.from_arrays(arrays))


def test_simulate_names_keep_their_meaning_and_dtype(runs):
    """The arrays figures read from 'simulate' tasks: the path arrays themselves, 0-d int64
    ``status`` and 0-d str ``message``, the events as float64 taus, str kinds and int64
    ``event_j`` (``entry[1]``, -1 for a global event)."""
    for traj in runs.values():
        arrays = traj.to_arrays()
        for name in ("t", "tau", "log_t_original", "loss", "log_abs_beta", "sign_beta"):
            assert arrays[name] is getattr(traj, name)
        assert arrays["status"].dtype == np.int64 and arrays["status"].shape == ()
        assert int(arrays["status"]) == traj.status == traj.cause.status
        assert arrays["message"].dtype.kind == "U" and str(arrays["message"]) == traj.message
        assert arrays["event_tau"].dtype == np.float64
        assert arrays["event_tau"].tolist() == [e.tau for e in traj.events]
        assert arrays["event_kind"].dtype.kind == "U"
        assert arrays["event_kind"].tolist() == [e.kind for e in traj.events]
        assert arrays["event_j"].dtype == np.int64
        j = [-1 if e.entry is None else e.entry[1] for e in traj.events]
        assert arrays["event_j"].tolist() == j


def test_simulate_task_is_to_arrays_and_goes_through_the_cache(tmp_path):
    """A 'simulate' task returns the trajectory's arrays (SIMULATE_KEYS), and its cache file
    (read with allow_pickle=False) gives the trajectory back."""
    params = {
        "mu": [1.0, 2.0, 3.0],
        "algorithm": "l2-sam",
        "depth": 2,
        "alpha": 0.4,
        "rho": warmup_cosine(0.5, 0.5, 2.0, 3.0).spec(),
        "t_max": 3.0,
        "n_points": 13,
    }
    result = run_simulate(params)
    assert tuple(result) == SIMULATE_KEYS == ARRAY_NAMES
    task, cache = Task("simulate", params), Cache(tmp_path)
    cache.store(task, result)
    loaded = cache.load(task)
    assert loaded is not None
    assert_same(Trajectory.from_arrays(result), Trajectory.from_arrays(loaded))
    direct = simulate(
        single_example([1.0, 2.0, 3.0]),
        "l2-sam",
        2,
        0.4,
        rho=warmup_cosine(0.5, 0.5, 2.0, 3.0),
        t_max=3.0,
        n_points=13,
    )
    assert_same(direct, Trajectory.from_arrays(loaded))


def read_csv(path) -> tuple[list[str], np.ndarray]:
    """The header names and the values of a CSV file of :func:`flows.results.write_csv`."""
    with open(path) as f:
        names = f.readline().strip().split(",")
    return names, np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)


@pytest.mark.parametrize("name", list(RUNS))
def test_trajectory_to_csv_reads_back(runs, name, tmp_path):
    """The columns of Trajectory.to_csv are t, tau, log t, loss, log|beta_j|, sign beta_j
    (j 1-based), equal to the arrays bit for bit."""
    traj = runs[name]
    traj.to_csv(tmp_path / "traj.csv")
    names, table = read_csv(tmp_path / "traj.csv")
    d = traj.log_abs_beta.shape[1]
    assert names[:4] == ["t", "tau", "log_t_original", "loss"]
    assert names[4:] == [f"log_abs_beta_{j}" for j in range(1, d + 1)] + [
        f"sign_beta_{j}" for j in range(1, d + 1)
    ]
    assert table.shape == (traj.t.size, 4 + 2 * d)
    for column, array in zip(
        table[:, :4].T, (traj.t, traj.tau, traj.log_t_original, traj.loss), strict=True
    ):
        np.testing.assert_array_equal(column, array)
    np.testing.assert_array_equal(table[:, 4 : 4 + d], traj.log_abs_beta)
    np.testing.assert_array_equal(table[:, 4 + d :], traj.sign_beta)


def test_trajectory_csv_holds_infinities(runs, tmp_path):
    """A collapse (log|beta| = -inf, sign 0) and an unbounded original time come back as such."""
    traj = runs["collapse"]
    assert np.isneginf(traj.log_abs_beta[-1]).all()
    big = dataclasses.replace(traj, log_t_original=np.full_like(traj.t, np.inf))
    big.to_csv(tmp_path / "traj.csv")
    _, table = read_csv(tmp_path / "traj.csv")
    np.testing.assert_array_equal(table, big.table()[1])
    assert np.isposinf(table[:, 2]).all() and np.isneginf(table[-1, 4:9]).all()


def test_discrete_run_to_csv_reads_back(tmp_path):
    """The columns of DiscreteRun.to_csv are step, t, loss, beta_j, theta_l_j (1-based), equal
    to the arrays bit for bit."""
    run = iterate(single_example(MU5), "l2-sam", depth=3, alpha=0.4, rho=0.5, eta=0.05, steps=40)
    run.to_csv(tmp_path / "run.csv")
    names, table = read_csv(tmp_path / "run.csv")
    k, depth, d = run.theta.shape
    assert names == ["step", "t", "loss"] + [f"beta_{j}" for j in range(1, d + 1)] + [
        f"theta_{layer}_{j}" for layer in range(1, depth + 1) for j in range(1, d + 1)
    ]
    np.testing.assert_array_equal(table[:, 0], run.steps)
    np.testing.assert_array_equal(table[:, 1], run.t)
    np.testing.assert_array_equal(table[:, 2], run.loss)
    np.testing.assert_array_equal(table[:, 3 : 3 + d], run.beta)
    np.testing.assert_array_equal(table[:, 3 + d :].reshape(k, depth, d), run.theta)


def test_command_line_csv_is_to_csv(tmp_path):
    """python -m flows.run --out x.csv writes the file Trajectory.to_csv writes."""
    out = tmp_path / "cli.csv"
    argv = ["--mu", "1,2,3", "--alpha", "0.4", "--rho", "1", "--t-max", "2", "--n-points", "11"]
    assert flows_run.main([*argv, "--out", str(out)]) == 0
    simulate(
        single_example([1.0, 2.0, 3.0]), "l2-sam", 2, 0.4, rho=1.0, t_max=2.0, n_points=11
    ).to_csv(tmp_path / "api.csv")
    assert out.read_text() == (tmp_path / "api.csv").read_text()


def test_write_csv_checks_the_columns(tmp_path):
    """A table whose width is not the number of names -> ValueError naming columns."""
    with pytest.raises(ValueError, match="columns"):
        write_csv(tmp_path / "x.csv", ["a", "b"], np.zeros((3, 3)))
    with pytest.raises(ValueError, match="columns"):
        write_csv(tmp_path / "x.csv", ["a"], np.zeros(3))


@pytest.mark.parametrize("name", ARRAY_NAMES)
def test_a_missing_array_is_named(runs, name):
    arrays = runs["collapse"].to_arrays()
    del arrays[name]
    with pytest.raises(ValueError, match=rf"missing {name}$"):
        Trajectory.from_arrays(arrays)


def test_an_unknown_cause_is_an_error(runs):
    arrays = runs["collapse"].to_arrays() | {"cause": np.array("GAVE_UP")}
    with pytest.raises(ValueError, match="cause 'GAVE_UP'"):
        Trajectory.from_arrays(arrays)


def test_loss_is_computed_on_first_read():
    data = single_example([1.0, 2.0])
    traj = simulate(data, "gd", 2, 0.5, t_max=2.0, n_points=9)
    assert callable(traj.__dict__["_loss"])  # not computed yet
    first = traj.loss
    m = data.y[0] * (traj.beta @ data.X[0])  # the margin of the one example (up to ~600)
    # l ~ exp(-m) in the tail: a rounding of m (1e-16 relative) moves it by ~ m 1e-16 relative
    np.testing.assert_allclose(first, np.log1p(np.exp(-m)), rtol=1e-12 * max(1.0, m.max()), atol=0)
    assert traj.loss is first and traj.__dict__["_loss"] is first
    fresh = simulate(data, "gd", 2, 0.5, t_max=2.0, n_points=9)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(fresh)).loss, first)
    fresh = simulate(data, "gd", 2, 0.5, t_max=2.0, n_points=9)
    np.testing.assert_array_equal(fresh.to_arrays()["loss"], first)
    calls = []
    given = dataclasses.replace(traj, loss=lambda: calls.append(1) or np.zeros(3))
    assert not calls
    assert given.loss.tolist() == [0.0, 0.0, 0.0] and given.loss is given.loss and calls == [1]


def test_an_arbitrary_callable_cannot_be_stored():
    """A plain callable hyper-parameter has no stored form: ValueError naming it."""
    traj = simulate(single_example([1.0, 2.0]), "l2-sam", 2, 0.5, rho=lambda t: 0.5, t_max=1.0)
    with pytest.raises(ValueError, match=r"hyper-parameter rho=.*named schedules"):
        traj.to_arrays()


# ------------------------------------------------------------------------------ causes


def _too_many_events(monkeypatch) -> Trajectory:
    """The crossings run (4 events) allowed 2, not continued by its own steps."""
    monkeypatch.setattr(driver, "MAX_EVENTS", 2)
    monkeypatch.setattr(stepping, "CONTINUED", ())
    return RUNS["linf-sam crossings"]()


def _seed3_linf_sam(t_max: float, **kw) -> Trajectory:
    """l_inf-SAM on 12 examples, 6 features (seed 3; tests/test_junctions.py), where direction
    surfaces meet while others slide."""
    data = positive_teacher(3, 12, 6)
    return simulate(data, "linf-sam", 2, 1.0, rho=0.3, t_max=t_max, original_time=False, **kw)


def _too_many_surfaces(monkeypatch) -> Trajectory:
    """G_2 reaches 0 while G_3 slides (tau = 0.64): whether both slide is a question on two
    coupled surfaces, with at most one allowed (not continued by its own steps)."""
    monkeypatch.setattr(filippov, "MAX_COUPLED", 1)
    monkeypatch.setattr(stepping, "CONTINUED", ())
    return _seed3_linf_sam(4.8, n_points=9)


def _no_way_left(monkeypatch) -> Trajectory:
    """The junction of :func:`_seed3_linf_sam` at tau = 4.85249 with no way through it tried
    (not continued by its own steps)."""
    monkeypatch.setattr(junctions, "MAX_WAYS_AT_ONE_INSTANT", 0)
    monkeypatch.setattr(stepping, "CONTINUED", ())
    return _seed3_linf_sam(8.0, n_points=33, backend="numpy")


def _rng_rows(seed: int, n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` standard normal from ``default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)), rng.standard_normal(n)


#: A run ending with each cause (``monkeypatch`` -> trajectory or discrete run).
CAUSES = {
    Cause.REACHED_END: lambda mp: simulate(single_example([1.0, 2.0]), "gd", 2, 0.5, t_max=1.0),
    Cause.COLLAPSE: lambda mp: RUNS["collapse"](),
    Cause.STATIONARY: lambda mp: simulate(CRITICAL, "gd", 2, 1.0, t_max=60.0, clock="original"),
    Cause.LOSS_FLOOR: lambda mp: simulate(
        single_example([1.0, 2.0]), "l2-sam", 2, 1.0, rho=0.1, loss_floor=0.9
    ),
    Cause.BLOW_UP: lambda mp: RUNS["blow-up L3"](),
    Cause.BUDGET_SPENT: lambda mp: RUNS["budget spent"](),
    # a feature of 1e150: the field (2.5e149) moves the flow faster than the clock resolves
    Cause.SOLVER_FAILED: lambda mp: simulate(
        single_example([1e150, 2.0]), "gd", 2, 1.0, t_max=10.0, n_points=5
    ),
    Cause.TOO_MANY_SURFACES: _too_many_surfaces,
    # tests/test_junctions.py::test_a_junction_with_no_way_left_stops_the_run
    Cause.UNDECIDED_JUNCTION: lambda mp: _no_way_left(mp),
    Cause.TOO_MANY_EVENTS: _too_many_events,
    # flows.iterate: beta = 1e600 at step 0 (tests/test_discrete.py)
    Cause.OVERFLOW: lambda mp: iterate(
        single_example([1.0, 2.0, 3.0]), "gd", depth=3, alpha=1e200, eta=1e-3, steps=10
    ),
    # tests/test_regression.py::test_a_lost_conserved_quantity_cuts_the_gd_path
    Cause.PRECISION_LOST: lambda mp: simulate(
        Dataset(*_rng_rows(152, 4, 6), task="regression"),
        "gd",
        2,
        np.vstack([np.full(6, 1e-12), np.zeros(6)]),
        t_max=20.0 * np.log(1e12),
        n_points=200,
        chart="asinh",  # the (u, v) engine: chart 'auto' keeps the conserved quantity exactly
    ),
    # tests/test_regression.py::test_one_sam_stops_where_a_residual_reaches_zero
    Cause.RESIDUAL_SWITCH: lambda mp: simulate(
        Dataset(np.array([[1.0, 2.0]]), np.array([1.0]), task="regression"),
        "1-sam",
        2,
        np.array([[0.5, 0.5], [0.0, 0.0]]),
        t_max=50.0,
        rho=0.05,
    ),
}


def test_every_cause_has_a_run():
    assert set(CAUSES) == set(Cause)


#: Causes whose run (0.6-2 s) is checked here only with ``-m slow``: the same cause and status
#: are asserted in the default run by tests/test_reliability.py
#: (``test_a_field_beyond_the_clock_is_named_and_warns_nothing``: solver failed),
#: tests/test_junctions.py (``test_a_junction_with_no_way_left_stops_the_run``) and
#: tests/test_regression.py (``test_one_sam_stops_where_a_residual_reaches_zero``); the round
#: trip of a cause through the arrays stays with the other causes.
SLOW_CAUSES = {Cause.SOLVER_FAILED, Cause.UNDECIDED_JUNCTION, Cause.RESIDUAL_SWITCH}


@pytest.mark.parametrize(
    "cause",
    [pytest.param(c, marks=pytest.mark.slow if c in SLOW_CAUSES else ()) for c in CAUSES],
    ids=lambda c: c.name,
)
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # a stationary point, an overflow
def test_a_run_ends_with_its_cause(cause, monkeypatch):
    """The run ends with ``cause`` and the status that goes with it (0, 1 for a blow-up, -1
    where the run could not go on); a trajectory keeps its cause through the arrays."""
    run = CAUSES[cause](monkeypatch)
    assert run.cause is cause, run.message
    assert run.status == cause.status
    if isinstance(run, Trajectory):
        assert Trajectory.from_arrays(run.to_arrays()).cause is cause
