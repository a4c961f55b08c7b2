"""``simulate_many`` and ``iterate_many``: every result equals the single call's, field by field
and bit for bit, except the runs of the batched compiled loop, whose arrays agree with the single
call's to 1e-12 relative (the rest bit for bit); the batch axes (seeds among them) zip or
combine as documented; bad axes are refused by name; a run that fails keeps its own status."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from flows import Dataset, iterate, iterate_many, simulate, simulate_many, single_example
from flows.initialization import initialization
from flows.many import _initialization

#: The fields of a run of the batched compiled loop that agree with the single call's to
#: rounding (the others are equal).
ROUNDED = ("theta", "beta", "loss", "buffer")

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


def assert_agrees(batched, single, rtol: float = 1e-12) -> None:
    """The fields of :data:`ROUNDED` within ``rtol`` of the single call's largest entry (same
    shapes), every other field equal."""
    for field in dataclasses.fields(single):
        a, b = getattr(batched, field.name), getattr(single, field.name)
        if field.name in ROUNDED:
            assert a.shape == b.shape, field.name
            assert np.max(np.abs(a - b)) <= rtol * np.max(np.abs(b)), field.name
        elif isinstance(b, np.ndarray):
            assert np.array_equal(a, b), field.name
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


def test_simulate_many_in_threads_equals_single_calls():
    alphas = [0.5, 1.0, 0.7]
    options = dict(t_max=1.0, n_points=5, backend="numpy")
    batch = simulate_many(MU, "l2-sam", 2, alphas, rho=1.0, threads=2, **options)
    for traj, alpha in zip(batch, alphas, strict=True):
        assert_same(traj, simulate(MU, "l2-sam", 2, alpha, rho=1.0, **options))
    with pytest.raises(ValueError, match="threads"):
        simulate_many(MU, "l2-sam", 2, alphas, rho=1.0, threads=0)


def test_iterate_many_product_agrees_with_single_calls_compiled():
    pytest.importorskip("numba")
    data, alphas, rhos = regression(), [0.05, 0.3], [0.0, 0.1, 0.2]  # rho 0: gd's group
    options = dict(eta=0.05, steps=60, record_every=7, backend="numba")
    batch = iterate_many(data, "l2-sam", 2, alphas, rho=rhos, product=True, **options)
    combos = list(itertools.product(alphas, rhos))
    assert len(batch) == len(combos)
    for run, (alpha, rho) in zip(batch, combos, strict=True):
        single = iterate(data, "l2-sam", 2, alpha, rho=rho, **options)
        assert single.backend == "numba" and single.status == 0
        assert_agrees(run, single)


@pytest.mark.parametrize(
    ("algorithm", "depth", "options"),
    [
        ("usam", 3, dict(rho=0.05, momentum=0.5, weight_decay=1e-3)),
        ("linf-sam", 2, dict(rho=0.01)),
        ("le-sam", 2, dict(sigma=0.1, rho_max=0.05)),
    ],
)
def test_iterate_many_agrees_for_each_compiled_perturbation(algorithm, depth, options):
    pytest.importorskip("numba")
    data, alphas = regression(), [0.1, 0.4, 0.7]
    batch = iterate_many(data, algorithm, depth, alphas, eta=0.02, steps=40, **options)
    for run, alpha in zip(batch, alphas, strict=True):
        single = iterate(data, algorithm, depth, alpha, eta=0.02, steps=40, **options)
        assert single.backend == "numba"
        assert_agrees(run, single)


@pytest.mark.parametrize(
    ("algorithm", "options"),
    [
        ("1-sam", dict(rho=[0.01, 0.02])),
        ("1-usam", dict(rho=[0.01, 0.02])),
        ("asam", dict(rho=[0.01, 0.02])),
        ("le-sam-official", dict(sigma=[0.05, 0.1], rho_max=0.05, adaptive=True)),
    ],
)
def test_runs_outside_the_batched_kernel_are_the_single_calls_bit_for_bit(algorithm, options):
    """Per-example algorithms and those whose perturbation reads |theta| (not in the batched
    kernel) take the single call's compiled kernel, run by run: the same bits."""
    pytest.importorskip("numba")
    data = regression()
    # 1100 steps: the single call's kernel records in chunks
    batch = iterate_many(data, algorithm, 2, [0.2, 0.5], eta=0.02, steps=1100, **options)
    axis = next(key for key, value in options.items() if isinstance(value, list))
    fixed = {key: value for key, value in options.items() if key != axis}
    for run, alpha, value in zip(batch, [0.2, 0.5], options[axis], strict=True):
        single = iterate(data, algorithm, 2, alpha, eta=0.02, steps=1100, **fixed, **{axis: value})
        assert single.backend == "numba"
        assert_same(run, single)


def test_iterate_many_classification_and_vector_inits_agree():
    pytest.importorskip("numba")
    rng = np.random.default_rng(5)
    X = rng.standard_normal((12, 5))
    data = Dataset(X, np.sign(X[:, 0] + 0.1), task="classification")
    alphas = [[0.3, 0.2, 0.1, 0.4, 0.5], 0.2]
    for loss in ("logistic", "exponential"):
        batch = iterate_many(data, "l2-sam", 2, alphas, rho=0.1, eta=0.1, steps=30, loss=loss)
        for run, alpha in zip(batch, alphas, strict=True):
            single = iterate(data, "l2-sam", 2, alpha, rho=0.1, eta=0.1, steps=30, loss=loss)
            assert_agrees(run, single)


def test_a_run_the_batched_loop_stops_is_the_single_call():
    pytest.importorskip("numba")
    data = regression()
    alphas = [0.1, 3.0]  # at eta = 0.5 the second run blows up: its loss overflows at step 5
    batch = iterate_many(data, "gd", 2, alphas, eta=0.5, steps=20)
    single = iterate(data, "gd", 2, 3.0, eta=0.5, steps=20)
    assert single.status == -1 and single.backend == "numba"
    assert_same(batch[1], single)
    assert_agrees(batch[0], iterate(data, "gd", 2, 0.1, eta=0.5, steps=20))


@pytest.mark.parametrize(
    "options",
    [
        dict(batch_size=3),
        dict(batch_size=3, sampling="epoch", momentum=0.9),
        dict(label_noise=0.1),
        dict(temperature=1e-3),
    ],
)
def test_seeds_are_a_batch_axis(options):
    data, seeds = regression(), [0, 1, 7]
    batch = iterate_many(data, "l2-sam", 2, 0.3, rho=0.05, eta=0.05, steps=15, seed=seeds,
                         **options)  # fmt: skip
    assert len({run.theta[-1].tobytes() for run in batch}) == len(seeds)
    for run, seed in zip(batch, seeds, strict=True):
        single = iterate(data, "l2-sam", 2, 0.3, rho=0.05, eta=0.05, steps=15, seed=seed,
                         **options)  # fmt: skip
        assert run.seed == seed
        assert_agrees(run, single)


def test_compiled_draws_are_numpys():
    pytest.importorskip("numba")
    from flows.seeded_draws import iid_batches

    rng = np.random.default_rng(2)
    roots = np.concatenate([[0, 1, 2**32 - 1, 2**32, 2**63 - 1], rng.integers(0, 2**63, 40)])
    for n, size in [(1, 1), (20, 5), (20, 20), (37, 1), (300, 17), (10_000, 3)]:
        for k in (0, 3, 2**32 + 1):
            ours = iid_batches(roots, k, n, size)
            for r, root in enumerate(roots):
                theirs = np.random.default_rng([int(root), k]).choice(n, size, replace=False)
                assert np.array_equal(ours[r], theirs), (n, size, k, root)


def test_seeds_beyond_the_compiled_draws_draw_in_numpy():
    data, seeds = regression(), [2**70, 3]
    batch = iterate_many(data, "gd", 2, 0.3, eta=0.05, steps=6, batch_size=2, seed=seeds)
    for run, seed in zip(batch, seeds, strict=True):
        assert run.seed == seed
        assert_agrees(run, iterate(data, "gd", 2, 0.3, eta=0.05, steps=6, batch_size=2, seed=seed))


def test_a_generator_seed_draws_the_roots_of_a_loop():
    data = regression()
    batch = iterate_many(data, "gd", 2, [0.2, 0.3], eta=0.05, steps=5, batch_size=2,
                         seed=np.random.default_rng(4))  # fmt: skip
    rng = np.random.default_rng(4)
    for run, alpha in zip(batch, [0.2, 0.3], strict=True):
        assert_agrees(run, iterate(data, "gd", 2, alpha, eta=0.05, steps=5, batch_size=2, seed=rng))


def test_stochastic_axes_mix_with_deterministic_runs_and_stopped_runs():
    data = regression()
    temperatures, alphas = [0.0, 1e-3, 1e-3], [0.2, 0.2, 3.0]  # the last blows up at eta 0.5
    batch = iterate_many(data, "usam", 2, alphas, rho=0.01, eta=0.5, steps=20, seed=5,
                         temperature=temperatures, momentum=0.2)  # fmt: skip
    for run, alpha, temperature in zip(batch, alphas, temperatures, strict=True):
        single = iterate(data, "usam", 2, alpha, rho=0.01, eta=0.5, steps=20, seed=5,
                         temperature=temperature, momentum=0.2)  # fmt: skip
        assert run.status == single.status
        (assert_agrees if single.status == 0 else assert_same)(run, single)
    assert [r.status for r in batch] == [0, 0, -1]
    assert batch[0].seed is None and batch[1].seed == 5


def test_float_alphas_build_the_initialization_of_the_general_check():
    for alpha, depth, reduced in [(0.3, 2, False), (np.float64(2.0), 3, None), (0.5, 1, None)]:
        fast, general = (
            _initialization(alpha, depth, 4, reduced),
            initialization(alpha, depth, 4, reduced),
        )
        assert fast.balanced == general.balanced
        for a, b in zip(fast[:2], general[:2], strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b)


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
        single = iterate(data, "gd", 3, alpha, eta=0.01, steps=30)
        (assert_agrees if single.status == 0 else assert_same)(run, single)
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


def test_a_bad_stochastic_option_is_refused_before_any_run_by_name():
    with pytest.raises(ValueError, match="run 1: batch_size must be at most"):
        iterate_many(regression(), "gd", 2, [0.1, 0.2], batch_size=[2, 9], steps=3)
    with pytest.raises(ValueError, match="sampling"):
        iterate_many(regression(), "gd", 2, [0.1, 0.2], sampling="bogus", steps=3)


def test_progress_counts_every_path(capsys):
    data = regression()
    iterate_many(data, "gd", 2, [0.2, 0.3, 0.4], batch_size=[None, 2, None], eta=0.05,
                 steps=3, seed=1, progress=True)  # fmt: skip
    assert capsys.readouterr().err.splitlines()[-1].startswith("iterate_many: 3/3 runs")


def test_progress_lines_on_stderr(capsys):
    iterate_many(MU, "gd", 2, [0.2, 0.3], steps=3, progress=True, backend="numpy")
    assert capsys.readouterr().err.splitlines()[-1].startswith("iterate_many: 2/2 runs")


def test_no_batch_axis_is_one_run():
    for product in (False, True):
        (run,) = iterate_many(MU, "gd", 2, 0.3, steps=3, backend="numpy", product=product)
        assert_same(run, iterate(MU, "gd", 2, 0.3, steps=3, backend="numpy"))
