"""Input contracts of the newer entry points, by property-based tests (hypothesis), in the
style of ``tests/test_contracts.py`` (whose helpers this file uses).

The properties, for each entry point:

1. **Extreme sizes are refused before they are allocated.** A size argument drawn over many
   orders of magnitude either builds what it asks for (small sizes) or is a ``ValueError``
   naming that parameter and the memory it would need (above :data:`flows.checks.MAX_FLOATS`),
   never a ``MemoryError``.
2. **Invalid inputs are refused by name.** A wrong object, a wrong type, NaN, an index out of
   range: a ``ValueError`` whose message names the parameter, not another exception and not a
   silent result.
3. **Extreme scales keep the answer.** Where the mathematics is covariant under a rescaling of
   the data (interpolators, the saddle-to-saddle limit), the answer at the scales ``10^k`` is the
   rescaled answer, or an honest status; a floating-point warning from the library stays an
   error (the suite's ``filterwarnings``).

Entry points: :func:`analysis.maxmargin.kkt_points` (its budget), :class:`flows.networks.TwoLayerCNN`, :func:`flows.networks.banded_data`,
:mod:`flows.datasets` (``sparse_regression``, ``gaussian_blobs``, ``teacher_data``),
:mod:`analysis.implicit_bias` (``min_l1_interpolator``, ``min_l2_interpolator``),
:mod:`analysis.networks` (``band_shares``, ``filter_shares``, ``banded_regime``,
``gradcam_maps``), :func:`flows.networks.train`, :func:`flows.schedules.from_spec`,
:func:`analysis.implicit_bias.woodworth_interpolator`,
:func:`analysis.saddle_to_saddle.saddle_path`, :func:`flows.iterate` (at extreme ``alpha``),
:func:`flows.simulate` (its budget over the segments of a schedule's kinks; its first sample
from an initialization that collapses at once).
"""

from __future__ import annotations

import warnings
from functools import partial

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_contracts import (
    BOOLS,
    COMPLEX,
    CONTRACT,
    FLOWS,
    NAN,
    TEXT,
    assert_rejects,
    check_trajectory,
    quiet,
)

from analysis import saddle_to_saddle
from analysis.implicit_bias import (
    FAILED,
    NOT_CERTIFIED,
    OPTIMAL,
    min_l1_interpolator,
    min_l2_interpolator,
    woodworth_interpolator,
)
from analysis.margin_programs import quasi_norm
from analysis.networks import band_shares, banded_regime, filter_shares, gradcam_maps
from flows import (
    ALGORITHMS,
    Cause,
    Dataset,
    datasets,
    iterate,
    schedules,
    simulate,
    single_example,
)
from flows.checks import MAX_FLOATS
from flows.networks import DiagonalNetwork, TwoLayerCNN, banded_data, train

#: Sizes at most this many floats are built by the valid-size properties (fast); sizes between
#: it and :data:`MAX_FLOATS` are skipped (they allocate up to 2 GiB).
SMALL = 10**5


def sizes(most: int = 10**15) -> st.SearchStrategy:
    """Positive integers spread over orders of magnitude: ``m 10^k``, up to ``most``."""
    return (
        st.tuples(st.integers(1, 9), st.integers(0, 15))
        .map(lambda p: p[0] * 10 ** p[1])
        .filter(lambda v: v <= most)
    )


def refused_for_memory(call, name: str) -> None:
    """``call()`` is a ValueError naming ``name`` and the memory it would need."""
    try:
        call()
    except ValueError as exc:
        message = str(exc)
    else:
        pytest.fail(f"an allocation beyond {MAX_FLOATS} floats was accepted")
    assert name in message and ("GiB" in message or "TiB" in message), message


# ------------------------------------------------------------------------------ budgets of work


@st.composite
def wide_separable(draw):
    """Separable ``(X, y)`` with few examples and up to 30 features (many vertices)."""
    n = draw(st.integers(1, 4))
    d = draw(st.integers(1, 30))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    X = rng.normal(size=(n, d))
    margins = X @ rng.normal(size=d)
    assume(np.all(np.abs(margins) > 1e-3 * np.max(np.abs(X))))
    return X, np.sign(margins)


@settings(CONTRACT, max_examples=3)
@given(wide_separable(), st.integers(3, 5), st.integers(0, 40), st.data())
def test_kkt_points_keep_their_budget(sample, depth, cap, data):
    """``kkt_points`` with ``max_kkt_vertices = cap``: at most ``cap`` enumerated vertices
    besides the local solves (2 starts and the l1 start, each with its vertex descent) and the
    minimum, the first point the
    certified global minimum, and points left out (against the full list) only when it says
    ``truncated``; a bad cap is a ValueError naming it."""
    data_set = Dataset(*sample)
    found = quasi_norm.kkt_points(data_set, depth, starts=2, max_kkt_vertices=cap)
    assert isinstance(found, quasi_norm.KKTPoints) and found.enumerated
    assert len(found) <= cap + 2 * (2 + 1) + 1  # each start and its vertex descent, the minimum
    assert found[0].status == quasi_norm.GLOBAL and found[0].certified
    full = quasi_norm.kkt_points(data_set, depth, starts=2, max_kkt_vertices=10_000)
    assert not full.truncated
    assert found.truncated or len(found) == len(full)  # left out only when it says so
    np.testing.assert_allclose(found[0].beta, full[0].beta, rtol=1e-9, atol=0)
    bad = data.draw(st.sampled_from([-1, 1.5, None, "5", True, np.array([3])]), label="cap")
    assert_rejects(
        partial(quasi_norm.kkt_points, data_set, depth, max_kkt_vertices=bad), "max_kkt_vertices"
    )


# ------------------------------------------------------------------------------ sizes


@CONTRACT
@given(sizes(), sizes(), st.integers(1, 3), st.sampled_from(["circular", "same", "valid"]))
def test_cnn_sizes_are_built_or_refused_by_name(height, width, kernel, padding):
    """``TwoLayerCNN((H, W), k)``: built where its window indices are small, a ValueError naming
    input_shape (with the memory) where they exceed the cap."""
    kernel = min(kernel, height, width)
    positions = (
        (height - kernel + 1) * (width - kernel + 1) if padding == "valid" else height * width
    )
    call = partial(TwoLayerCNN, (height, width), kernel, padding=padding)
    if positions * kernel**2 > MAX_FLOATS:
        refused_for_memory(call, "input_shape")
    elif positions * kernel**2 <= SMALL:
        model = call()
        assert model.indices.shape == (positions, kernel**2)


@CONTRACT
@given(sizes(10**12), st.integers(6, 40))
def test_cnn_channels_are_built_or_refused_by_name(channels, length):
    """``TwoLayerCNN(N, k, channels)``: a ValueError naming channels when the weights exceed
    the cap."""
    call = partial(TwoLayerCNN, length, 3, channels)
    weights = channels * (3 + length)
    if weights > MAX_FLOATS:
        refused_for_memory(call, "channels")
    elif weights <= SMALL:
        assert call().size == weights


@CONTRACT
@given(sizes(), sizes(10**13))
def test_banded_data_sizes_are_built_or_refused_by_name(n, length):
    """``banded_data(n, length)``: X (n, N) built when small, a ValueError naming n or length
    (with the memory) beyond the cap."""
    length = max(length, 20)
    call = partial(banded_data, n=n, length=length)
    if length > MAX_FLOATS:
        refused_for_memory(call, "length")
    elif n * length > MAX_FLOATS:
        refused_for_memory(call, "n")
    elif n * length <= SMALL:
        data = call()
        assert data.X.shape == (n, length) and np.all(np.isfinite(data.X))


@CONTRACT
@given(sizes(10**6), sizes(10**6), sizes(10**6))
def test_sparse_regression_sizes_are_built_or_refused_by_name(n, n_test, d):
    """``sparse_regression(n, n_test, d)``: refused naming n or n_test beyond the cap."""
    call = partial(datasets.sparse_regression, n=n, n_test=n_test, d=d, sparsity=1)
    if n * d > MAX_FLOATS:
        refused_for_memory(call, "n")
    elif (n + n_test) * d > MAX_FLOATS:
        refused_for_memory(call, "n_test")
    elif (n + n_test) * d <= SMALL:
        split = call()
        assert split.train.X.shape == (n, d) and split.test.X.shape == (n_test, d)


@CONTRACT
@given(sizes(10**6), sizes(10**6))
def test_synthetic_classification_sizes_are_refused_by_name(n, d):
    """``gaussian_blobs`` and ``teacher_data``: a ValueError naming n beyond the cap (the small
    sizes have their own tests, tests/test_datasets.py)."""
    if n * d > MAX_FLOATS:
        refused_for_memory(partial(datasets.gaussian_blobs, n=max(n, 2), mean=np.ones(d)), "n")
        refused_for_memory(partial(datasets.teacher_data, n=n, d=d), "n")


def test_size_arguments_of_wrong_type_are_refused_by_name():
    """Sizes that are not integers are ValueErrors naming them."""
    for bad in (None, 2.5, "4", True, [4]):
        assert_rejects(partial(banded_data, n=bad), "n")
        assert_rejects(partial(banded_data, length=bad), "length")
        assert_rejects(partial(datasets.sparse_regression, n=bad), "n")


# ------------------------------------------------------------------------------ scales


@st.composite
def interpolation_problems(draw):
    """``(X, y)`` with ``n < d`` Gaussian-like entries (full row rank), y generic."""
    n = draw(st.integers(1, 4))
    d = draw(st.integers(n + 1, 7))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return rng.normal(size=(n, d)), rng.normal(size=n)


@CONTRACT
@given(interpolation_problems(), st.integers(-300, 300), st.integers(-300, 300))
def test_interpolators_are_scale_covariant(problem, kx, ky):
    """``beta(10^kx X, 10^ky y) = beta(X, y) 10^(ky - kx)`` for basis pursuit and the minimum
    l2 norm, certified, wherever the scaled solution and its dual are normal floats. Beyond
    that the status is honest: FAILED with NaN (a value outside float64) or, for subnormal
    values, whatever their residual says; never a certified inf or NaN."""
    X, y = problem
    sx, sy = 10.0**kx, 10.0**ky
    for solve, dual_power in ((min_l1_interpolator, 0), (min_l2_interpolator, 1)):
        base = solve(X, y)
        assert base.status == OPTIMAL
        result = solve(X * sx, y * sy)
        sizes = np.log10(np.abs(base.beta[base.beta != 0])) + ky - kx
        dual = np.log10(np.abs(base.lam[base.lam != 0])) + dual_power * ky - (1 + dual_power) * kx
        if np.all(np.abs(np.concatenate([sizes, dual])) < 290):
            assert result.status == OPTIMAL, result.message
            top = np.max(np.abs(base.beta))
            np.testing.assert_allclose(result.beta / sy * sx, base.beta, rtol=0, atol=1e-8 * top)
        if result.status == FAILED:
            assert np.all(np.isnan(result.beta)) and np.all(np.isnan(result.lam))
            assert "outside float64" in result.message or "HiGHS" in result.message
        else:
            assert np.all(np.isfinite(result.beta)) and np.all(np.isfinite(result.lam))


# ------------------------------------------------------------------------------ bands


def bad_bands(N: int) -> st.SearchStrategy:
    """Bands that are not disjoint, non-empty sets of integer frequencies in ``0 .. N/2``."""
    top = N // 2
    return st.one_of(
        st.sampled_from(
            [None, 3, 1.5, "1,2", b"1", (), ((),), ((1, 1),), ((1, 2), (2, 3)), ({1: 2},)]
        ),
        st.sampled_from([((None,),), ((1.5,),), (("1",),), ((True,),), ((1 + 0j,),)]),
        st.integers(-(10**6), -1).map(lambda f: ((f,), (1,))),
        st.integers(top + 1, 10**12).map(lambda f: ((1,), (f,))),
        st.just(np.array(2)),
    )


@CONTRACT
@given(st.integers(6, 24), st.data())
def test_band_shares_refuse_bad_bands_and_inputs_by_name(N, data):
    """``band_shares``/``filter_shares``: bad bands, a wrong model, theta or X (NaN, wrong
    width) are ValueErrors naming them; valid disjoint bands give shares summing to 1 and a
    total that does not depend on the bands."""
    model = TwoLayerCNN(N, N, 1, "linear")
    theta = model.initial_parameters(1.0)
    X = banded_data(n=2, length=N, bands=((1,),), strengths=(1.0,)).X
    bands = data.draw(bad_bands(N), label="bands")
    assert_rejects(partial(band_shares, model, theta, X, bands), "bands")
    assert_rejects(partial(filter_shares, model, theta, bands), "bands")
    X_bad = data.draw(
        st.sampled_from([np.where(X == X[0, 0], np.nan, X), X[:, :-1], X[0], "X", None])
    )
    assert_rejects(partial(band_shares, model, theta, X_bad, ((1,),)), "X")
    for name, call in (
        ("model", partial(band_shares, object(), theta, X, ((1,),))),
        ("model", partial(filter_shares, None, theta, ((1,),))),
        ("theta", partial(band_shares, model, theta[:-1], X, ((1,),))),
        ("theta", partial(filter_shares, model, "theta", ((1,),))),
    ):
        assert_rejects(call, name)
    frequencies = data.draw(st.permutations(range(N // 2 + 1)), label="frequencies")
    cut = data.draw(st.integers(1, len(frequencies)), label="cut")
    valid = (
        (tuple(frequencies[:cut]),)
        if cut == len(frequencies)
        else (
            tuple(frequencies[:cut]),
            tuple(frequencies[cut:]),
        )
    )
    shares, total = band_shares(model, theta, X, valid)
    assert shares.sum() == pytest.approx(1.0, rel=1e-12)
    assert total == pytest.approx(band_shares(model, theta, X, ((1,),))[1], rel=1e-12)


@CONTRACT
@given(st.integers(1, 6), st.integers(1, 4), st.data())
def test_banded_regime_refuses_bad_records_by_name(T, K, data):
    """``banded_regime``: each argument replaced by a wrong shape, NaN, a negative value or a
    wrong type is a ValueError naming it; valid records are classified."""
    t = np.linspace(0.0, 1.0, T)
    shares = np.full((T, K + 1), 1.0 / (K + 1))
    totals, loss = np.geomspace(1.0, 100.0, T), np.full(T, 0.1)
    valid = {"t": t, "shares": shares, "totals": totals, "loss": loss}
    bad = {
        "t": [t[::-1] if T > 1 else np.array([np.nan]), np.append(t, 2.0), "t", None],
        "shares": [shares[:, :1], np.full((T, K + 1), np.nan), -shares, shares[0], None],
        "totals": [np.zeros(T), -totals, np.append(totals, 1.0), np.full(T, np.inf), "x"],
        "loss": [np.full(T, np.nan), -loss, loss[:-1], None],
    }
    for name, values in bad.items():
        value = data.draw(st.sampled_from(values), label=name)
        assert_rejects(partial(banded_regime, **{**valid, name: value}), name)
    assert banded_regime(**valid).regime in ("major first", "sequential", "minor at the end")


# ------------------------------------------------------------------------------ wrong objects

#: Objects that are not what an argument asks for (a model, a data array, a mapping, ...).
WRONG_OBJECTS = (None, object(), "model", 3, 2.5, [1, 2], {"a": 1}, np.ones(3), *BOOLS, *COMPLEX)


@CONTRACT
@given(
    st.sampled_from([None, 2.5, "4", True, [4, 4, 4], (), (4, None), (4.0, 4), np.ones((2, 2))]),
    st.sampled_from([None, 2.5, "2", False, [2, 2, 2], (2,), (2, "2"), {"k": 2}, np.array(2.0)]),
)
def test_cnn_wrong_types_are_refused_by_name(input_shape, kernel):
    """``TwoLayerCNN``: a wrong input_shape or kernel (None, a float, text, a bool, a wrong
    length) is a ValueError naming it, never a TypeError; valid pairs and numpy integers
    build."""
    assert_rejects(partial(TwoLayerCNN, input_shape, 2), "input_shape")
    assert_rejects(partial(TwoLayerCNN, 8, kernel), "kernel")
    assert TwoLayerCNN(np.int64(8), np.array([1, 3])).kernel == (1, 3)
    assert TwoLayerCNN(np.array([4, 4]), np.int32(2)).kernel == (2, 2)


@CONTRACT
@given(st.sampled_from(WRONG_OBJECTS), st.data())
def test_network_entry_points_refuse_wrong_models_by_name(wrong, data):
    """``train``, ``gradcam_maps``, ``band_shares``: an object that is not a model is a
    ValueError naming model (not an AttributeError)."""
    model = TwoLayerCNN(6, 3, 1, "linear")
    theta = model.initial_parameters(1.0)
    X = banded_data(n=2, length=6, bands=((1,),), strengths=(1.0,)).X
    y = np.array([1.0, -1.0])
    algorithm = data.draw(st.sampled_from(["gd", "l2-sam"]), label="algorithm")
    assert_rejects(partial(train, wrong, X, y, theta, algorithm, rho=0.1, steps=2), "model")
    assert_rejects(partial(gradcam_maps, wrong, theta, X, y), "model")
    assert_rejects(partial(band_shares, wrong, theta, X, ((1,),)), "model")


@CONTRACT
@given(st.integers(1, 5), st.data())
def test_gradcam_refuses_bad_labels_and_inputs_by_name(n, data):
    """``gradcam_maps``: labels that are not n values +-1 (NaN, 0, 3, a wrong length, text),
    a wrong theta or X are ValueErrors naming y, theta or X; valid labels give maps >= 0."""
    model = TwoLayerCNN((4, 4), 3, 2, "relu", "same")
    theta = model.initial_parameters(1.0)
    X = np.random.default_rng(n).random((n, 16))
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    bad_y = data.draw(
        st.sampled_from(
            [
                np.where(np.arange(n) == 0, NAN, y),
                np.where(np.arange(n) == 0, 0.0, y),
                3 * y,
                np.append(y, 1.0),
                y[:, None],
                y.astype(str),
                y > 0,
                None,
            ]
        ),
        label="y",
    )
    assert_rejects(partial(gradcam_maps, model, theta, X, bad_y), "y")
    bad_theta = data.draw(st.sampled_from([theta[:-1], np.full_like(theta, NAN), "theta", None]))
    assert_rejects(partial(gradcam_maps, model, bad_theta, X, y), "theta")
    bad_X = data.draw(st.sampled_from([X[:, :-1], np.full_like(X, NAN), X[0], "X", None]))
    assert_rejects(partial(gradcam_maps, model, theta, bad_X, y), "X")
    maps = gradcam_maps(model, theta, X, y)
    assert maps.shape == (n, 16) and np.all(maps >= 0)


@CONTRACT
@given(
    st.one_of(
        st.sampled_from([*WRONG_OBJECTS, *TEXT]),
        st.sampled_from(
            [
                {},
                {"schedule": "cosine"},
                {"schedule": "cosine", "args": None},
                {"schedule": "cosine", "args": "0.5,1"},
                {"schedule": "cosine", "args": 0.5},
                {"schedule": "cosine", "args": [0.5]},
                {"schedule": "cosine", "args": [0.5, "1"]},
                {"schedule": "cosine", "args": [0.5, NAN]},
                {"schedule": "cosine", "args": [-0.5, 1.0]},
                {"schedule": ["cosine"], "args": [0.5, 1.0]},
                {"schedule": None, "args": [0.5]},
                {"schedule": "no-such", "args": [0.5]},
                {"args": [0.5]},
            ]
        ),
    )
)
def test_from_spec_refuses_bad_specs_by_name(spec):
    """``from_spec``: anything but ``{'schedule': name, 'args': [valid numbers]}`` is a
    ValueError naming spec (not an AttributeError or a TypeError); a spec round-trips."""
    assert_rejects(partial(schedules.from_spec, spec), "spec")
    for sched in (schedules.cosine(0.5, 2.0), schedules.warmup_cosine(0.3, 0.5, 1.0, 2.0)):
        assert schedules.from_spec(sched.spec()) == sched


def test_train_runs_the_diagonal_network_model():
    """A valid model other than the CNN (the protocol, not the class) is accepted by train."""
    model = DiagonalNetwork(2, 2)
    run = train(model, np.array([[1.0, 2.0]]), np.array([1.0]), model.balanced(0.5), "gd", steps=3)
    assert run.status == 0 and run.theta.shape == (4, 4)


# ------------------------------------------------------------------------------ no warnings


def silent(call):
    """``call()`` with every warning an error: what a caller sees is the result or a
    ValueError, never a RuntimeWarning on the way."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return call()


@CONTRACT
@given(interpolation_problems(), st.integers(-30, 30), st.integers(-300, 300), st.integers(-60, 60))
def test_woodworth_at_extreme_scales_is_quiet_and_honest(problem, kx, ky, ka):
    """``woodworth_interpolator(10^kx X, 10^ky y, 10^ka)``: no warning; status 0 with a
    certified, finite solution, 1 with a finite last iterate, or -1 with NaN."""
    X, y = problem
    result = silent(lambda: woodworth_interpolator(X * 10.0**kx, y * 10.0**ky, 10.0**ka))
    assert result.status in (OPTIMAL, NOT_CERTIFIED, FAILED)
    if result.status == FAILED:
        assert np.all(np.isnan(result.beta)) and np.all(np.isnan(result.lam))
        assert result.message.startswith("no finite solution")
    else:
        assert np.all(np.isfinite(result.beta)) and np.all(np.isfinite(result.lam))
    if result.status == OPTIMAL:
        assert result.residual <= 1e-10


@CONTRACT
@given(interpolation_problems(), st.integers(-150, 150), st.integers(-150, 150))
def test_saddle_path_is_covariant_at_extreme_scales(problem, kx, ky):
    """``saddle_path(10^kx X, 10^ky y)``: no warning, the status and signs of the unscaled
    path, its saddles times ``10^(ky - kx)`` and its jump times over ``10^(kx + ky)``."""
    X, y = problem
    sx, sy = 10.0**kx, 10.0**ky
    base = saddle_to_saddle.saddle_path(X, y)
    path = silent(lambda: saddle_to_saddle.saddle_path(X * sx, y * sy))
    assert path.status == base.status, path.message
    np.testing.assert_array_equal(path.signs, base.signs)
    np.testing.assert_allclose(path.times * sx * sy, base.times, rtol=1e-9)
    top = np.max(np.abs(base.betas))
    np.testing.assert_allclose(path.betas * sx / sy, base.betas, rtol=0, atol=1e-9 * top)


@CONTRACT
@given(
    st.floats(0.0, 10.0),
    st.sampled_from([1e-3, 0.1, 1.0, 10.0]),
    st.sampled_from(["gd", "l2-sam", "usam"]),
    st.sampled_from(["logistic", "exponential"]),
)
def test_train_with_any_momentum_is_quiet_and_finite(momentum, eta, algorithm, loss):
    """``train`` with momentum up to 10: no warning; every kept iterate, loss and log-loss is
    finite, and a run that stops early says so (status -1)."""
    model = TwoLayerCNN(8, 8, 1, "linear")
    data = banded_data(n=2, length=8, bands=((1,), (2,)), strengths=(1.0, 2.0))
    theta = model.initial_parameters(1.0)
    run = silent(
        lambda: train(
            model,
            data.X,
            data.y,
            theta,
            algorithm,
            rho=0.1,
            eta=eta,
            momentum=momentum,
            steps=60,
            loss=loss,
        )  # fmt: skip
    )
    assert run.status in (0, -1)
    assert np.all(np.isfinite(run.theta)) and np.all(np.isfinite(run.loss))
    assert np.all(np.isfinite(run.log_loss))
    if run.status == -1:
        assert "left float64" in run.message


@CONTRACT
@given(
    st.integers(-300, 300),
    st.sampled_from(sorted(ALGORITHMS)),
    st.integers(1, 3),
    st.sampled_from(["numpy", "auto"]),
)
def test_iterate_from_extreme_alpha_is_quiet_and_honest(k, algorithm, depth, backend):
    """``iterate`` from ``alpha = 10^k``: no warning; finite iterates, or status -1 with the
    reason (at step 0 only the initial iterate)."""
    hp = {
        spec.name: False if getattr(spec, "flag", False) else 0.1
        for spec in ALGORITHMS[algorithm].hyperparameters
        if spec.default is None
    }
    run = silent(
        lambda: iterate(
            single_example([1.0, 2.0]),
            algorithm,
            depth,
            10.0**k,
            eta=0.01,
            steps=5,
            backend=backend,
            **hp,
        )  # fmt: skip
    )
    assert run.status in (0, -1)
    assert np.all(np.isfinite(run.theta))
    if run.status == -1:
        assert "not representable" in run.message


# ------------------------------------------------------------------------------ budgets


@CONTRACT
@given(
    st.integers(10, 20_000),
    st.sampled_from(["le-sam", "l2-sam"]),
    st.integers(50, 3000),
    st.sampled_from(["numpy", "auto"]),
)
def test_simulate_budget_holds_across_schedule_kinks(epochs, algorithm, max_nfev, backend):
    """A staircase schedule of ``epochs`` kinks over ``[0, 10]`` (a segment each): the run
    spends at most ``max_nfev`` plus a segment's start and one DOP853 step with its rejected
    attempts (2 + 12 each; 100 here), and one that stops short of ``t_max`` says the budget
    is spent (status -1). It spent up to 70 times max_nfev, with status 0."""
    sched = schedules.lesam_official(0.3, 2, 5, epochs, 1, 10.0 / epochs)
    name = "sigma" if algorithm == "le-sam" else "rho"
    extra = {"rho_max": 1.0} if algorithm == "le-sam" else {}
    tr = simulate(single_example([1.0, 2.0]), algorithm, 2, 1.0, t_max=10.0, n_points=5,
                  max_nfev=max_nfev, backend=backend, original_time=False,
                  **{name: sched}, **extra)  # fmt: skip
    assert tr.nfev <= max_nfev + 100, (tr.nfev, tr.message)
    if tr.t[-1] < 10.0:
        assert tr.status == -1 and tr.cause is Cause.BUDGET_SPENT, tr.message


@FLOWS
@given(
    st.sampled_from(sorted(ALGORITHMS)),
    st.integers(1, 3),
    st.integers(-300, -60),
    st.sampled_from(["numpy", "auto"]),
)
def test_simulate_from_a_vanishing_init_starts_at_it(algorithm, depth, k, backend):
    """``alpha = 10^k`` far below every perturbation radius: whatever happens at tau = 0 (a
    collapse detected before any step), the first sample is the initialization and the
    trajectory keeps its contract."""
    hp = {
        spec.name: False if getattr(spec, "flag", False) else 0.5
        for spec in ALGORITHMS[algorithm].hyperparameters
        if spec.default is None
    }
    alpha = 10.0**k
    traj = quiet(
        lambda: simulate(
            single_example([1.0, 2.0]),
            algorithm,
            depth,
            alpha,
            t_max=0.5,
            n_points=3,
            max_nfev=20_000,
            backend=backend,
            **hp,
        )  # fmt: skip
    )
    check_trajectory(traj, algorithm, depth, 2, 0.5, alpha)
