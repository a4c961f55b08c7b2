"""Tests of what ``flows.simulate`` keeps between calls (flows/memo.py,
flows/integrator/driver.py, flows/integrator/arguments.py).

* the initialization and the signs it keeps are built once per scalar ``alpha`` and reused; an
  array ``alpha`` of the same values takes the general path, with the same trajectory bit for
  bit, on a second call too; the cached arrays are read-only, so no run can change another's
  start; bad scalars are refused on every call; the sign warning fires on every call;
* the output grid is made once per ``(t_max, n_points)``, and a run's times are its own;
* the set-up, the field and the first segment's set-up are kept per data set
  (:mod:`flows.memo`): a recalled run is the bits of a built one (the memo forgotten), among
  them runs whose events change the mode (a collapse, l_inf-SAM sliding); keys tell apart
  values that differ in bits or type; nothing is kept from a call that raised, nor for a large
  data set; what is kept neither keeps the data set alive nor travels with it when it is
  pickled or copied.

Fast (< 10 s): short single-example runs, two small blobs runs.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
import warnings
import weakref

import numpy as np
import pytest

from flows import Dataset, compiled, memo, simulate, single_example
from flows.datasets import gaussian_blobs
from flows.integrator.driver import _initialization
from flows.schedules import cosine

MU = np.arange(1.0, 6.0)

FIELDS = ("t", "tau", "log_t_original", "log_abs_theta", "sign_theta", "log_abs_beta", "loss")


@pytest.mark.parametrize(
    "algorithm, depth, alpha, hp",
    [("l2-sam", 2, 0.4, {"rho": 1.0}), ("gd", 3, 0.05, {}), ("linf-sam", 2, 0.4, {"rho": 0.1})],
)
def test_cached_initialization_gives_the_general_paths_trajectory(algorithm, depth, alpha, hp):
    """Claim: a scalar alpha (cached) and the same alpha as a 0-d array (not cached) give the
    same trajectory bit for bit, and so does a second call on the cached path."""
    data = single_example(MU)
    kw = dict(t_max=3.0, n_points=31, **hp)
    general = simulate(data, algorithm, depth, np.array(alpha), **kw)
    for _ in range(2):
        cached = simulate(data, algorithm, depth, alpha, **kw)
        for name in FIELDS:
            np.testing.assert_array_equal(getattr(cached, name), getattr(general, name), name)
        assert (cached.status, cached.message, cached.nfev) == (
            general.status,
            general.message,
            general.nfev,
        )


def test_cached_initialization_is_read_only():
    """Claim: the cached groups and multiplicities cannot be written, and equal a fresh
    initialization's."""
    from flows.initialization import initialization

    init = _initialization(0.3, 4, 5, None)
    fresh = initialization(np.array(0.3), 4, 5, None)
    np.testing.assert_array_equal(init.groups, fresh.groups)
    np.testing.assert_array_equal(init.multiplicity, fresh.multiplicity)
    with pytest.raises(ValueError):
        init.groups[0, 0] = 1.0
    with pytest.raises(ValueError):
        init.multiplicity[0] = 1


@pytest.mark.parametrize("alpha", [-0.4, 0.0, float("nan"), float("inf"), True])
def test_bad_scalar_alpha_refused_on_every_call(alpha):
    """Claim: a bad scalar alpha raises a ValueError naming alpha, on a repeated call too (the
    cache keeps no failure)."""
    data = single_example(MU)
    for _ in range(2):
        with pytest.raises(ValueError, match="alpha"):
            simulate(data, "l2-sam", 2, alpha, rho=1.0, t_max=1.0, n_points=3)


def test_sign_warning_on_every_call():
    """Claim: data separable only by a negative beta warn on every call from a positive
    scalar alpha at even depth (the kept signs come from the cache the second time)."""
    data = single_example([-1.0, -2.0])
    for _ in range(2):
        with pytest.warns(RuntimeWarning, match="keeps sign"):
            simulate(data, "gd", 2, 0.5, t_max=0.5, n_points=3)


@pytest.mark.parametrize("t_max, n_points", [(3.0, 31), (2.5, 2), (1e-3, 7)])
def test_a_runs_times_are_its_own_and_the_grid_is_linspace(t_max, n_points):
    """Claim: the times of a run equal ``linspace(0, t_max, n_points)`` bit for bit; writing
    into one run's ``t`` changes neither another run's nor the next call's."""
    data = single_example(MU)
    first = simulate(data, "l2-sam", 2, 0.4, rho=1.0, t_max=t_max, n_points=n_points)
    second = simulate(data, "l2-sam", 2, 0.4, rho=1.0, t_max=t_max, n_points=n_points)
    expected = np.linspace(0.0, t_max, n_points)
    np.testing.assert_array_equal(first.t, expected)
    first.t[...] = -1.0
    np.testing.assert_array_equal(second.t, expected)
    third = simulate(data, "l2-sam", 2, 0.4, rho=1.0, t_max=t_max, n_points=n_points)
    np.testing.assert_array_equal(third.t, expected)


def assert_same_bits(a, b) -> None:
    """Every field of two trajectories equal, arrays bit for bit."""
    for field in dataclasses.fields(b):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(y, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape, field.name
            assert x.tobytes() == y.tobytes(), field.name
        else:
            assert x == y, field.name


def kinds(data: Dataset) -> list[str]:
    """What is kept for ``data``, by kind (the first item of each key), sorted."""
    return sorted(key[0] for key in data.__dict__.get(memo.TABLE, {}))


def test_exact_keys_tell_apart_bits_and_types():
    key = memo.exact_key
    assert key(0.0) != key(-0.0)
    assert key(1) != key(1.0) != key(True)
    assert key(np.float64(0.5)) == key(0.5)
    assert key(0.1) != key(np.nextafter(0.1, 1.0))
    assert key(float("nan")) != key(float("nan"))  # nothing is recalled for a NaN
    assert key(np.arange(3.0)) != key(np.arange(3))
    assert key(np.zeros((2, 3))) != key(np.zeros((3, 2)))
    assert key({"rho": 0.1}) != key({"sigma": 0.1})
    assert key((1.0, None, "a")) == key((1.0, None, "a"))
    for unkeyed in (
        np.zeros(memo.LARGEST_KEY_ARRAY + 1),
        lambda t: t,
        [1.0],
        {"rho": cosine(0.1, 3.0)},
    ):
        assert key(unkeyed) is None


def test_recall_builds_once_keeps_the_latest_and_nothing_from_a_failure():
    data = single_example([1.0, 2.0])
    built = []

    def build(value):
        built.append(value)
        return value

    assert memo.recall(data, "a", lambda: build(1)) == 1
    assert memo.recall(data, "a", lambda: build(2)) == 1
    assert built == [1]
    with pytest.raises(ValueError):
        memo.recall(data, "b", lambda: (_ for _ in ()).throw(ValueError("bad")))
    assert memo.kept(data) == 1
    assert memo.recall(data, None, lambda: build(3)) == 3  # no key: built, not kept
    assert memo.kept(data) == 1
    for k in range(memo.KEPT + 5):
        memo.recall(data, ("k", k), lambda k=k: k)
    assert memo.kept(data) == memo.KEPT
    assert memo.recall(data, ("k", 0), lambda: "again") == "again"  # the oldest went first
    memo.forget(data)
    assert memo.kept(data) == 0


def test_the_data_set_and_what_is_kept_go_together():
    data = single_example([1.0, 2.0, 3.0])
    simulate(data, "l2-sam", 2, 0.5, rho=0.2, t_max=2.0)
    assert {"field", "setup"} <= set(kinds(data))
    gone = weakref.ref(data)
    del data
    gc.collect()
    assert gone() is None


def test_pickles_and_copies_leave_the_memo_behind_and_stay_read_only():
    """A pickled or copied data set keeps nothing, and its arrays are read-only as the
    original's: the compiled kernels take it as the same type (no new specialisation)."""
    data = single_example([1.0, 2.0])
    first = simulate(data, "gd", 2, 0.5, t_max=2.0)
    for other in (pickle.loads(pickle.dumps(data)), copy.copy(data), copy.deepcopy(data)):
        assert memo.kept(other) == 0
        np.testing.assert_array_equal(other.signed_features, data.signed_features)
        for array in (other.X, other.y, other.signed_features):
            assert not array.flags.writeable
        assert_same_bits(simulate(other, "gd", 2, 0.5, t_max=2.0), first)
    if compiled.available():
        from flows.compiled import _segment_kernels

        signatures = set(_segment_kernels.segment.signatures)
        simulate(copy.deepcopy(data), "gd", 2, 0.5, t_max=2.0)
        assert set(_segment_kernels.segment.signatures) == signatures


@pytest.mark.parametrize(
    ("data", "algorithm", "depth", "alpha", "options"),
    [
        (single_example([1.0, 2.0, 3.0, 4.0, 5.0]), "l2-sam", 2, 0.4, {"rho": 0.1}),
        (single_example([1.0, 2.0, 3.0, 4.0, 5.0]), "linf-sam", 2, 0.4, {"rho": 0.1}),
        (single_example([1.0, 2.0, 3.0, 4.0, 5.0]), "l2-sam", 2, 0.05, {"rho": 1.0}),  # collapses
        (single_example([1.0, 2.0, 3.0]), "linf-sam", 2, 0.1, {"rho": 0.5}),  # slides
        (single_example([1.0, 2.0, 3.0]), "gd", 3, 0.01, {"original_time": True}),
        (single_example([1.0, 2.0, 3.0]), "l2-sam", 2, 0.3, {"rho": cosine(0.5, 3.0)}),
        (single_example([1.0, 2.0, 3.0]), "usam", 2, np.array([0.3, 0.2, 0.1]), {"rho": 0.2}),
        (gaussian_blobs(seed=0, n=10, mean=np.linspace(0.5, 2, 4)), "l2-sam", 3, 0.5, {"rho": 0.1}),
        (
            gaussian_blobs(seed=1, n=20, mean=np.linspace(0.5, 2, 5)),
            "gd",
            2,
            1.0,
            {"backend": "numpy", "t_max": 1.0},
        ),
    ],
)
def test_a_recalled_run_is_the_built_runs_bits(data, algorithm, depth, alpha, options):
    """Each of two inits run once with the memo forgotten (built) and once after both were
    kept (recalled): the same bits; the two share the field only."""
    kwargs = dict(t_max=3.0, original_time=False) | options
    built = []
    for init in (alpha, 0.7):
        memo.forget(data)
        built.append(simulate(data, algorithm, depth, init, **kwargs))
    memo.forget(data)
    for init in (alpha, 0.7):
        simulate(data, algorithm, depth, init, **kwargs)
    for init, first in zip((alpha, 0.7), built, strict=True):
        assert_same_bits(simulate(data, algorithm, depth, init, **kwargs), first)


def test_a_schedule_is_not_kept_and_arrays_given_back_are_the_callers():
    data = single_example([1.0, 2.0, 3.0])
    simulate(data, "l2-sam", 2, 0.3, rho=cosine(0.5, 3.0), t_max=2.0)
    assert "setup" not in kinds(data) and "field" not in kinds(data)
    first = simulate(data, "l2-sam", 2, 0.3, rho=0.5, t_max=2.0)
    reference = copy.deepcopy(first)
    for name in ("t", "tau", "log_t_original", "log_abs_beta", "sign_beta"):
        array = getattr(first, name)
        if array.flags.writeable:
            array[...] = 7.0
    first.hyperparameters["rho"] = 9.0
    assert_same_bits(simulate(data, "l2-sam", 2, 0.3, rho=0.5, t_max=2.0), reference)


def test_a_recalled_set_up_still_warns_and_a_bad_argument_still_raises():
    """The sign warning on every call, not only the one that builds, pointing at the caller's
    line (not a line of flows: Python's default filter shows a warning once per line); an
    argument that fails its check raises whatever was kept for the others."""
    data = Dataset(np.array([[-1.0, -1.0], [-2.0, -0.5]]), np.array([1.0, 1.0]))
    for _ in range(2):  # alpha > 0 keeps beta > 0, where no predictor separates the data
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            simulate(data, "gd", 2, 0.5, t_max=1.0)
        signs = [w for w in caught if "no predictor with these signs" in str(w.message)]
        assert len(signs) == 1 and signs[0].filename == __file__
        assert kinds(data) == ["field", "separable with signs", "setup"]
    for bad in ({"rtol": -1.0}, {"n_points": 1}, {"rho": -0.1}, {"t_max": 0.0}, {"rtol": 1}):
        with pytest.raises(ValueError):
            simulate(data, "gd", 2, 0.5, **({"t_max": 1.0} | bad))


def test_a_large_data_set_keeps_nothing(monkeypatch):
    """Past ``LARGEST_KEPT`` entries ``n d`` a run builds its set-up and field as it goes: the
    same bits, nothing kept on the data set."""
    data = single_example([1.0, 2.0, 3.0])
    kept_run = simulate(data, "l2-sam", 2, 0.5, rho=0.3, t_max=2.0)
    memo.forget(data)
    monkeypatch.setattr(memo, "LARGEST_KEPT", data.n * data.d - 1)
    assert_same_bits(simulate(data, "l2-sam", 2, 0.5, rho=0.3, t_max=2.0), kept_run)
    assert kinds(data) == ["separable with signs"]
