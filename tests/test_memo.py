"""What a run builds before it integrates, kept per data set (flows.memo).

A call that recalls its set-up and field must give the bits of a call that builds them (the
memo forgotten), keys must tell apart values that differ in bits or type, nothing may be kept
from a call that raised, and what is kept must neither keep the data set alive nor travel with
it when it is pickled or copied.
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

from flows import Dataset, memo, simulate, single_example
from flows.datasets import gaussian_blobs
from flows.schedules import cosine


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


def test_pickles_and_copies_leave_the_memo_behind():
    data = single_example([1.0, 2.0])
    first = simulate(data, "gd", 2, 0.5, t_max=2.0)
    for other in (pickle.loads(pickle.dumps(data)), copy.copy(data), copy.deepcopy(data)):
        assert memo.kept(other) == 0
        np.testing.assert_array_equal(other.signed_features, data.signed_features)
        assert_same_bits(simulate(other, "gd", 2, 0.5, t_max=2.0), first)


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
    """The sign warning on every call, not only the one that builds; an argument that fails
    its check raises whatever was kept for the others."""
    data = Dataset(np.array([[-1.0, -1.0], [-2.0, -0.5]]), np.array([1.0, 1.0]))
    for _ in range(2):  # alpha > 0 keeps beta > 0, where no predictor separates the data
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            simulate(data, "gd", 2, 0.5, t_max=1.0)
        assert sum("no predictor with these signs" in str(w.message) for w in caught) == 1
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
