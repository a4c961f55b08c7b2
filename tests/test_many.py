"""``simulate_many`` and ``iterate_many``: every result equals the single call's, field by field
and bit for bit; the batch axes zip or combine as documented; bad axes are refused by name; a
run that fails keeps its own status."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from flows import Dataset, iterate, iterate_many, simulate, simulate_many, single_example

MU = single_example([1.0, 2.0, 3.0])


def regression() -> Dataset:
    """A small regression: 8 examples, 6 features, a sparse teacher."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((8, 6))
    return Dataset(X, X[:, :2].sum(axis=1), task="regression")


def assert_same(batched, single) -> None:
    """Every field of two results equal, arrays bit for bit (NaN where NaN)."""
    assert type(batched) is type(single)
    for field in dataclasses.fields(single):
        a, b = getattr(batched, field.name), getattr(single, field.name)
        if isinstance(b, np.ndarray):
            assert a.dtype == b.dtype and a.shape == b.shape, field.name
            assert np.array_equal(a, b, equal_nan=b.dtype.kind == "f"), field.name
        else:
            assert a == b, field.name


def test_simulate_many_zips_axes_and_equals_single_calls():
    alphas, rhos = [0.1, 0.5, 1.0], [1.0, 1.0, 0.5]
    options = dict(t_max=2.0, n_points=21, backend="numpy")
    batch = simulate_many(MU, "l2-sam", 2, alphas, rho=rhos, **options)
    assert len(batch) == 3
    for traj, alpha, rho in zip(batch, alphas, rhos, strict=True):
        assert_same(traj, simulate(MU, "l2-sam", 2, alpha, rho=rho, **options))
    assert batch[0].cause != batch[1].cause  # alpha 0.1 collapses, 0.5 reaches t_max


def test_iterate_many_product_equals_single_calls_compiled():
    pytest.importorskip("numba")
    data, alphas, rhos = regression(), [0.05, 0.3], [0.0, 0.1, 0.2]
    options = dict(eta=0.05, steps=60, record_every=7, backend="numba")
    batch = iterate_many(data, "l2-sam", 2, alphas, rho=rhos, product=True, **options)
    combos = list(itertools.product(alphas, rhos))
    assert len(batch) == len(combos)
    for run, (alpha, rho) in zip(batch, combos, strict=True):
        single = iterate(data, "l2-sam", 2, alpha, rho=rho, **options)
        assert single.backend == "numba"
        assert_same(run, single)


def test_iterate_many_numpy_and_vector_inits():
    data = regression()
    alphas = np.array([[0.1] * 6, [0.2] * 6])  # the first axis indexes the runs
    options = dict(eta=0.05, steps=20, backend="numpy", momentum=0.5)
    batch = iterate_many(data, "usam", 2, alphas, rho=0.1, **options)
    for run, alpha in zip(batch, alphas, strict=True):
        assert_same(run, iterate(data, "usam", 2, alpha, rho=0.1, **options))


def test_a_failing_run_keeps_its_status_and_the_others_go_on():
    data = regression()
    alphas = [0.1, 1e120, 0.2, 1e51]  # beta overflows at 1e120; the loss at 1e51 (1e306)
    runs = iterate_many(data, "gd", 3, alphas, eta=0.01, steps=30)
    assert [r.status for r in runs] == [0, -1, 0, -1]
    assert "not representable" in runs[1].message
    for run, alpha in zip(runs, alphas, strict=True):
        assert_same(run, iterate(data, "gd", 3, alpha, eta=0.01, steps=30))
    flows = simulate_many(MU, "gd", 3, [0.05, 1.0], t_max=3.0, n_points=11, backend="numpy")
    assert [t.status for t in flows] == [0, 1]  # blow-up at tau = 1 / (3 alpha) for alpha = 1


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        (dict(alpha=[0.1, 0.2], rho=[1.0, 2.0, 3.0]), "rho has 3 values but alpha has 2"),
        (dict(alpha=[0.1, 0.2, 0.3], rho=[1.0, 2.0]), "rho has 2 values but alpha has 3"),
        (dict(alpha=[], rho=1.0), "alpha is an empty batch axis"),
        (dict(alpha=[0.1, -0.2], rho=1.0), r"alpha\[1\]"),
        (dict(alpha=[0.1, 0.2], rho=[1.0, -1.0]), "run 1: rho"),
    ],
)
def test_bad_axes_are_refused_by_name(kwargs, name):
    with pytest.raises(ValueError, match=name):
        simulate_many(MU, "l2-sam", 2, **kwargs)
    with pytest.raises(ValueError, match=name):
        iterate_many(MU, "l2-sam", 2, **kwargs)


def test_an_axis_of_one_value_is_repeated():
    batch = iterate_many(MU, "l2-sam", 2, [0.3], rho=[0.1, 0.2], steps=5, backend="numpy")
    assert len(batch) == 2
    assert_same(batch[1], iterate(MU, "l2-sam", 2, 0.3, rho=0.2, steps=5, backend="numpy"))


def test_progress_lines_on_stderr(capsys):
    iterate_many(MU, "gd", 2, [0.2, 0.3], steps=3, progress=True, backend="numpy")
    assert capsys.readouterr().err.splitlines()[-1].startswith("iterate_many: 2/2 runs")


def test_no_batch_axis_is_one_run():
    for product in (False, True):
        (run,) = iterate_many(MU, "gd", 2, 0.3, steps=3, backend="numpy", product=product)
        assert_same(run, iterate(MU, "gd", 2, 0.3, steps=3, backend="numpy"))
