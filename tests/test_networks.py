"""Tests of flows.networks: the two-layer CNN, the diagonal network as a model, ``train`` and
the banded data.

References that share no code with the subpackage:

* gradients: central finite differences of the loss value (in ``theta``) and of the outputs (in
  ``x``), and the clock factor ``c = mean_i |l'(u_i)|`` written out per loss;
* the forward pass: the module docstring's formula written as explicit loops over windows
  (``numpy.pad`` for the zero and circular paddings);
* the steps of ``train``: :func:`flows.iterate` (the fused-field implementation of the same
  algorithms on the diagonal network), directly, and through the Fourier connection of
  ``flows/networks/cnn.py`` (a linear full-width circular CNN on even signals is the depth-2
  diagonal network on the scaled cosine coefficients);
* the rescaled clock: the rescaled flow integrated by :func:`flows.simulate` (rtol 1e-12),
  which explicit Euler approaches with order one;
* the banded data: orthonormal cosine and sine coefficients and the modulus of numpy's
  ``rfft`` of a cosine (``N / 2`` at its frequency), derived here.
"""

from __future__ import annotations

import re
import warnings

import mpmath
import numpy as np
import pytest

from flows import ALGORITHMS, Dataset, iterate, simulate
from flows.datasets import gaussian_blobs
from flows.model import get_loss
from flows.networks import DiagonalNetwork, TwoLayerCNN, banded_data, train
from flows.networks.banded import band_spectrum, band_sums
from flows.networks.train import loss_gradient
from flows.results import Cause
from flows.schedules import cosine, warmup_cosine

BLOBS = gaussian_blobs(n=6)
RNG_SEED = 7
IMAGE = (8, 8)
SIGNAL = 10
CNN_CONFIGS = [
    (shape, kernel, padding, readout, activation)
    for shape, kernel in ((IMAGE, 3), (SIGNAL, 3))
    for padding in ("circular", "same", "valid")
    for readout in ("linear", "pooled")
    for activation in ("linear", "relu")
]


def cnn_case(shape, kernel, padding, readout, activation, n=4, channels=2):
    """A CNN, random parameters of scale 1 (seeded), inputs ``(n, H W)`` and labels +-1."""
    model = TwoLayerCNN(
        shape, kernel, channels=channels, activation=activation, padding=padding, readout=readout
    )
    rng = np.random.default_rng(RNG_SEED)
    theta = model.initial_parameters(1.0, seed=3)
    X = rng.standard_normal((n, model.n_inputs))
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    return model, theta, X, y


def central_difference(fun, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """``d fun / d x_j`` by central differences (``fun`` scalar or vector valued)."""
    columns = []
    for j in range(x.size):
        step = np.zeros_like(x)
        step.flat[j] = h
        columns.append((np.asarray(fun(x + step)) - np.asarray(fun(x - step))) / (2 * h))
    return np.stack(columns, axis=-1)


def relative_error(a: np.ndarray, b: np.ndarray) -> float:
    """``max|a - b| / max|b|``."""
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def reference_outputs(model: TwoLayerCNN, theta: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``f(x_i)`` of the ``flows.networks.cnn`` docstring by explicit loops over the windows
    (row-major in the window's top-left corner; correlation, not convolution)."""
    H, W = model.input_shape
    kh, kw = model.kernel
    C, K = model.channels, kh * kw
    filters = theta[: C * K].reshape(C, kh, kw)
    head = theta[C * K :]
    sigma = (lambda z: z) if model.activation == "linear" else (lambda z: max(z, 0.0))
    out = []
    for x in X:
        image = x.reshape(H, W)
        if model.padding == "circular":
            padded = np.pad(image, ((0, kh - 1), (0, kw - 1)), mode="wrap")
            corners = [(i, j) for i in range(H) for j in range(W)]
        elif model.padding == "same":
            pads = (((kh - 1) // 2, kh // 2), ((kw - 1) // 2, kw // 2))
            padded = np.pad(image, pads, mode="constant")
            corners = [(i, j) for i in range(H) for j in range(W)]
        else:
            padded = image
            corners = [(i, j) for i in range(H - kh + 1) for j in range(W - kw + 1)]
        A = np.array(
            [
                [
                    sigma(float(np.sum(filters[c] * padded[i : i + kh, j : j + kw])))
                    for c in range(C)
                ]
                for i, j in corners
            ]
        )  # (Q, C)
        if model.readout == "linear":
            out.append(float(np.sum(head.reshape(len(corners), C) * A)))
        else:
            out.append(float(head @ A.mean(axis=0)))
    return np.array(out)


def cosine_basis(N: int) -> np.ndarray:
    """The orthonormal even cosine basis ``E`` (N, N/2 + 1), N even: ``1/sqrt(N)``,
    ``sqrt(2/N) cos(2 pi k t / N)`` for k = 1..N/2-1, ``(-1)^t / sqrt(N)``."""
    t = np.arange(N)
    cols = [np.ones(N) / np.sqrt(N)]
    cols += [np.sqrt(2.0 / N) * np.cos(2 * np.pi * k * t / N) for k in range(1, N // 2)]
    cols.append((-1.0) ** t / np.sqrt(N))
    return np.array(cols).T


# --------------------------------------------------------------------------- the CNN itself


@pytest.mark.parametrize("shape,kernel,padding,readout,activation", CNN_CONFIGS)
def test_cnn_outputs_match_the_window_loops(shape, kernel, padding, readout, activation):
    """``outputs`` is the docstring's formula, written here as loops over the windows with
    ``numpy.pad`` for the paddings; both sum the same few products, so 1e-12 relative."""
    model, theta, X, _ = cnn_case(shape, kernel, padding, readout, activation)
    ref = reference_outputs(model, theta, X)
    np.testing.assert_allclose(model.outputs(theta, X), ref, rtol=1e-12, atol=1e-14)


LOSS_CASES = [(config, "logistic") for config in CNN_CONFIGS] + [
    (config, name)
    for name in ("exponential", "squared")
    for config in (
        (IMAGE, 3, "same", "linear", "relu"),
        (IMAGE, 3, "circular", "pooled", "linear"),
        (SIGNAL, 3, "valid", "linear", "relu"),
        (SIGNAL, 3, "same", "pooled", "relu"),
    )
]


@pytest.mark.parametrize("config,loss_name", LOSS_CASES)
def test_loss_gradient_matches_central_differences(config, loss_name):
    """``loss_gradient`` against central differences of the loss value (step 1e-6: truncation
    ~1e-12, rounding ~1e-16 / 1e-6 = 1e-10), so 1e-7 relative to the largest entry; the
    squared loss on real targets. Every architecture with the logistic loss, a few with the
    others (the loss enters only through the weights ``l'(u_i)``). The ReLU kinks are away
    from the random pre-activations."""
    model, theta, X, y = cnn_case(*config)
    if loss_name == "squared":
        y = np.random.default_rng(11).standard_normal(len(y))
    loss = get_loss(loss_name)
    value, grad = loss_gradient(model, theta, X, y, loss)
    f = reference_outputs(model, theta, X)
    by_hand = {
        "logistic": lambda: np.mean(np.log1p(np.exp(-y * f))),
        "exponential": lambda: np.mean(np.exp(-y * f)),
        "squared": lambda: np.mean(0.5 * (f - y) ** 2),
    }[loss_name]()
    assert value == pytest.approx(by_hand, rel=1e-12)
    fd = central_difference(lambda th: loss_gradient(model, th, X, y, loss)[0], theta)
    assert grad.shape == (model.size,)
    assert relative_error(grad, fd) < 1e-7


@pytest.mark.parametrize("shape,kernel,padding,readout,activation", CNN_CONFIGS)
def test_input_gradients_match_central_differences(shape, kernel, padding, readout, activation):
    """``input_gradients`` against central differences of ``outputs`` in each input entry
    (step 1e-6: 1e-7 relative, as for the parameter gradient)."""
    model, theta, X, _ = cnn_case(shape, kernel, padding, readout, activation)
    got = model.input_gradients(theta, X)
    for i in range(len(X)):
        fd = central_difference(lambda x, i=i: model.outputs(theta, x[None, :])[0], X[i])
        assert relative_error(got[i], fd) < 1e-7


@pytest.mark.parametrize(
    "loss_name,slope",
    [
        ("logistic", lambda u: 1.0 / (1.0 + np.exp(u))),
        ("exponential", lambda u: np.exp(-u)),
        ("squared", np.abs),
    ],
)
def test_rescaled_gradient_is_the_gradient_over_the_clock_factor(loss_name, slope):
    """``loss_gradient(..., rescaled=True)`` is ``grad L / c`` with ``c = mean_i |l'(u_i)|``
    written out here per loss (``u_i = y_i f_i`` or ``f_i - y_i``); the two differ only by
    the log-sum-exp route, so 1e-12 relative."""
    model, theta, X, y = cnn_case(IMAGE, 3, "same", "linear", "relu", n=5)
    if loss_name == "squared":
        y = np.random.default_rng(11).standard_normal(len(y))
    loss = get_loss(loss_name)
    f = reference_outputs(model, theta, X)
    u = f - y if loss_name == "squared" else y * f
    c = np.mean(slope(u))
    _, grad = loss_gradient(model, theta, X, y, loss)
    _, scaled = loss_gradient(model, theta, X, y, loss, rescaled=True)
    np.testing.assert_allclose(scaled, grad / c, rtol=1e-12, atol=1e-14 * np.max(np.abs(grad / c)))


@pytest.mark.parametrize("padding", ["circular", "same", "valid"])
@pytest.mark.parametrize("readout", ["linear", "pooled"])
@pytest.mark.parametrize("activation", ["linear", "relu"])
def test_cnn_is_two_homogeneous(padding, readout, activation):
    """``f(c theta) = c^2 f(theta)`` for c > 0 (both activations are positively
    1-homogeneous and the read-out is linear), and ``grad_x f`` scales the same way: exact in
    exact arithmetic, so 1e-13 relative."""
    model, theta, X, _ = cnn_case(IMAGE, 3, padding, readout, activation)
    f = model.outputs(theta, X)
    g = model.input_gradients(theta, X)
    for c in (0.3, 2.5, 40.0):
        np.testing.assert_allclose(model.outputs(c * theta, X), c**2 * f, rtol=1e-13, atol=0)
        np.testing.assert_allclose(
            model.input_gradients(c * theta, X), c**2 * g, rtol=1e-13, atol=1e-13 * c**2
        )


def test_initial_parameters_are_seeded_scaled_and_lecun():
    """Same seed, same draw; another seed, another draw; ``alpha`` scales the draw linearly
    (1e-15 relative: one multiplication); the filter and read-out entries have the LeCun
    variances ``alpha^2 / K`` and ``alpha^2 / (Q C)`` (or ``alpha^2 / C`` pooled): with
    thousands of entries the sample variance is within 10% (3 to 10 standard errors)."""
    model = TwoLayerCNN(IMAGE, 3, channels=300, readout="linear")
    a = model.initial_parameters(0.7, seed=4)
    np.testing.assert_array_equal(a, model.initial_parameters(0.7, seed=4))
    assert not np.allclose(a, model.initial_parameters(0.7, seed=5))
    np.testing.assert_allclose(model.initial_parameters(2.1, seed=4), 3.0 * a, rtol=1e-15)
    n_filter = model.channels * model.kernel_size
    assert np.var(a[:n_filter]) * model.kernel_size / 0.7**2 == pytest.approx(1.0, rel=0.1)
    fan_in = model.positions * model.channels
    assert np.var(a[n_filter:]) * fan_in / 0.7**2 == pytest.approx(1.0, rel=0.1)
    pooled = TwoLayerCNN(IMAGE, 3, channels=2000, readout="pooled")
    b = pooled.initial_parameters(1.0, seed=4)
    assert np.var(b[-pooled.channels :]) * pooled.channels == pytest.approx(1.0, rel=0.1)


# --------------------------------------------------------------------------- train vs iterate


def fourier_setup(N: int, alpha: float):
    """The banded data (no noise), the linear full-width circular CNN, its init
    ``w = v = E (alpha 1)`` and the diagonal network's data ``Z = (X E) s``."""
    data = banded_data(n=4, length=N)
    E = cosine_basis(N)
    s = np.full(N // 2 + 1, np.sqrt(N / 2))
    s[0] = s[-1] = np.sqrt(N)
    model = TwoLayerCNN(N, N, channels=1, activation="linear", padding="circular")
    ones = np.full(N // 2 + 1, alpha)
    theta0 = np.concatenate([E @ ones, E @ ones])
    return data, E, model, theta0, Dataset((data.X @ E) * s, data.y)


@pytest.mark.parametrize(
    "algorithm,hp",
    [
        ("gd", {}),
        ("l2-sam", {"rho": 0.15}),
        ("usam", {"rho": 0.5}),
        ("le-sam", {"sigma": 0.002, "rho_max": 0.1}),  # sigma / ||grad L||: 0.016 -> 0.2
        ("le-sam-official", {"sigma": 0.002, "rho_max": 0.1}),
        ("1-sam", {"rho": 0.15}),  # every x_i is even: each example's gradient is in span E
        ("1-usam", {"rho": 0.5}),
    ],
)
def test_linear_circular_cnn_is_the_diagonal_network_in_the_cosine_basis(algorithm, hp):
    """The Fourier connection of the ``flows.networks.cnn`` docstring: ``W = theta_w E`` and
    ``V = theta_v E`` follow ``flows.iterate`` on ``Z = (X E) s`` from ``alpha``, and the
    losses agree; the parameters stay in the span of ``E``. Two implementations of the same
    steps in float64: 1e-12 (they agree to ~1e-15)."""
    N, alpha = 20, 0.3
    data, E, model, theta0, features = fourier_setup(N, alpha)
    kwargs = dict(eta=0.2, steps=60, record_every=10, **hp)
    run = train(model, data.X, data.y, theta0, algorithm, **kwargs)
    ref = iterate(features, algorithm, 2, alpha, **kwargs)
    assert run.status == 0 and ref.status == 0
    np.testing.assert_array_equal(run.steps, ref.steps)
    W, V = run.theta[:, :N] @ E, run.theta[:, N:] @ E
    scale = np.max(np.abs(ref.theta))
    assert np.max(np.abs(W - ref.theta[:, 0])) < 1e-12 * scale
    assert np.max(np.abs(V - ref.theta[:, 1])) < 1e-12 * scale
    assert np.max(np.abs(run.theta[:, :N] - W @ E.T)) < 1e-12 * scale  # no odd / sine part
    np.testing.assert_allclose(run.loss, ref.loss, rtol=1e-12)
    assert run.loss[-1] < 0.5 * run.loss[0]  # the run did move


@pytest.mark.parametrize("algorithm", ["linf-sam", "asam"])
def test_the_fourier_connection_needs_a_rotation_invariant_perturbation(algorithm):
    """Negative control for the test above: l_inf-SAM (coordinate signs) and ASAM (scaled by
    ``|theta|`` coordinatewise) are not invariant under the cosine basis, so the CNN departs
    from the diagonal network (by far more than 1e-6): the comparison above has the power to
    see a difference."""
    N, alpha = 20, 0.3
    data, E, model, theta0, features = fourier_setup(N, alpha)
    kwargs = dict(eta=0.2, steps=20, record_every=20, rho=0.15)
    run = train(model, data.X, data.y, theta0, algorithm, **kwargs)
    ref = iterate(features, algorithm, 2, alpha, **kwargs)
    assert np.max(np.abs(run.theta[-1, :N] @ E - ref.theta[-1, 0])) > 1e-6


HP = dict(rho=0.2, sigma=0.05, rho_max=0.3)
DIAGONAL_CASES = [(name, {}) for name in ALGORITHMS] + [
    ("le-sam-official", {"adaptive": True}),
    ("le-sam-official", {"rho_max": -1.0, "sigma": 0.01}),  # uncapped (a small budget: the
    # radius ~ sigma / sqrt(eps) of a vanishing gradient would blow theta up)
    ("asam", {"eta_asam": 0.1}),
]


#: (depth, balanced init, momentum, weight decay): each depth with and without momentum and
#: weight decay, each from the balanced init and from an unbalanced one.
DIAGONAL_SETTINGS = [
    (2, True, 0.0, 0.0),
    (3, False, 0.0, 0.0),
    (2, False, 0.7, 0.01),
    (3, True, 0.7, 0.01),
]


def _diagonal_cases() -> list:
    """Every (setting, algorithm) pair (ids ``depth-balanced-momentum-weight_decay-algorithm-
    extra``); in the default run every algorithm from both unbalanced settings (both depths, with
    and without momentum and weight decay) and GD from all four, the other pairs ``slow``."""
    return [
        pytest.param(
            *setting,
            algorithm,
            extra,
            id="-".join(map(str, setting)) + f"-{algorithm}-extra{k}",
            marks=() if not setting[1] or (algorithm, extra) == ("gd", {}) else pytest.mark.slow,
        )
        for setting in DIAGONAL_SETTINGS
        for k, (algorithm, extra) in enumerate(DIAGONAL_CASES)
    ]


@pytest.mark.parametrize("depth,balanced,momentum,weight_decay,algorithm,extra", _diagonal_cases())
def test_diagonal_network_through_train_is_iterate(
    algorithm, extra, depth, balanced, momentum, weight_decay
):
    """``train(DiagonalNetwork(L, d), ...)`` from the balanced init (or from an unbalanced
    one of mixed signs, where the layers differ and their order matters) takes the steps of
    ``flows.iterate``: theta as (L, d) and the losses, at every recorded step, for every
    algorithm of the table (per-example ones too), with and without momentum and weight
    decay. Two float64 implementations of the same steps: 1e-12 relative (they agree to
    ~1e-14)."""
    hp = {**HP, **extra}
    model = DiagonalNetwork(depth, BLOBS.d)
    if balanced:
        alpha, theta0 = 0.5, model.balanced(0.5)
    else:
        rng = np.random.default_rng(depth)
        alpha = rng.uniform(0.3, 0.8, (depth, BLOBS.d)) * rng.choice([-1.0, 1.0], (depth, BLOBS.d))
        theta0 = alpha.ravel()
    kwargs = dict(
        eta=0.1, steps=20, record_every=5, momentum=momentum, weight_decay=weight_decay, **hp
    )
    run = train(model, BLOBS.X, BLOBS.y, theta0, algorithm, **kwargs)
    ref = iterate(BLOBS, algorithm, depth, alpha, **kwargs)
    assert run.status == 0 and ref.status == 0
    np.testing.assert_array_equal(run.steps, ref.steps)
    np.testing.assert_allclose(run.t, ref.t, rtol=1e-15)
    layers = run.theta.reshape(-1, depth, BLOBS.d)
    assert relative_error(layers, ref.theta) < 1e-12
    np.testing.assert_allclose(run.loss, ref.loss, rtol=1e-12)
    assert run.loss[-1] < run.loss[0]


def test_diagonal_network_with_schedules_is_iterate():
    """A scheduled step size (cosine) and radius (warm-up cosine), evaluated at ``t_k = k
    eta_peak`` by both: the same iterates as ``flows.iterate`` (1e-12 relative)."""
    model = DiagonalNetwork(2, BLOBS.d)
    kwargs = dict(eta=cosine(0.2, 4.0), steps=20, record_every=4, rho=warmup_cosine(0.3, 1, 2, 4))
    run = train(model, BLOBS.X, BLOBS.y, model.balanced(0.5), "l2-sam", **kwargs)
    ref = iterate(BLOBS, "l2-sam", 2, 0.5, **kwargs)
    np.testing.assert_allclose(run.t, ref.t, rtol=1e-15)
    assert relative_error(run.theta.reshape(-1, 2, BLOBS.d), ref.theta) < 1e-12
    np.testing.assert_allclose(run.loss, ref.loss, rtol=1e-12)


def test_diagonal_network_gradient_matches_central_differences():
    """``DiagonalNetwork.vjp`` through ``loss_gradient`` against central differences of the
    loss at an unbalanced depth-3 point (step 1e-6: 1e-7 relative)."""
    model = DiagonalNetwork(3, BLOBS.d)
    theta = np.random.default_rng(2).uniform(-1.0, 1.0, model.size)
    loss = get_loss("logistic")
    _, grad = loss_gradient(model, theta, BLOBS.X, BLOBS.y, loss)
    fd = central_difference(lambda th: loss_gradient(model, th, BLOBS.X, BLOBS.y, loss)[0], theta)
    assert relative_error(grad, fd) < 1e-7


# --------------------------------------------------------------------------- rescaled clock


@pytest.mark.parametrize("algorithm,hp", [("gd", {}), ("l2-sam", {"rho": 0.2})])
def test_rescaled_clock_is_explicit_euler_of_the_rescaled_flow(algorithm, hp):
    """``train(..., clock="rescaled")`` at ``tau = k eta = T`` against the rescaled flow of
    ``flows.simulate`` (rtol 1e-12) at ``tau = T``: the error in ``log|beta|`` is below 0.1
    and, halving eta twice, falls by a factor in [1.6, 2.5] each time (order one)."""
    T, alpha = 1.0, 0.5
    flow = simulate(
        BLOBS,
        algorithm,
        depth=2,
        alpha=alpha,
        t_max=T,
        clock="rescaled",
        n_points=3,
        rtol=1e-12,
        original_time=False,
        backend="numpy",
        **hp,
    )
    assert flow.status == 0 and flow.t[-1] == pytest.approx(T)
    model = DiagonalNetwork(2, BLOBS.d)
    errors = []
    for eta in (0.04, 0.02, 0.01):
        steps = int(round(T / eta))
        run = train(
            model,
            BLOBS.X,
            BLOBS.y,
            model.balanced(alpha),
            algorithm,
            eta=eta,
            steps=steps,
            record_every=steps,
            clock="rescaled",
            **hp,
        )
        assert run.clock == "rescaled" and run.t[-1] == pytest.approx(T)
        beta = np.prod(run.theta[-1].reshape(2, BLOBS.d), axis=0)
        errors.append(np.max(np.abs(np.log(np.abs(beta)) - flow.log_abs_beta[-1])))
    assert errors[0] < 0.1
    for coarse, fine in zip(errors, errors[1:], strict=False):
        assert 1.6 <= coarse / fine <= 2.5


def test_rescaled_step_divides_by_the_clock_factor():
    """One rescaled GD step is ``theta - eta grad L / c`` with ``c = mean_i 1/(1 + e^{u_i})``
    and ``grad L`` by central differences (1e-7 relative to the step)."""
    model = DiagonalNetwork(2, BLOBS.d)
    theta0 = np.random.default_rng(9).uniform(0.2, 1.0, model.size)
    eta = 0.3
    run = train(model, BLOBS.X, BLOBS.y, theta0, "gd", eta=eta, steps=1, clock="rescaled")
    loss = get_loss("logistic")
    fd = central_difference(lambda th: loss_gradient(model, th, BLOBS.X, BLOBS.y, loss)[0], theta0)
    u = BLOBS.y * model.outputs(theta0, BLOBS.X)
    c = np.mean(1.0 / (1.0 + np.exp(u)))
    assert relative_error(theta0 - run.theta[-1], eta * fd / c) < 1e-7


@pytest.mark.parametrize("loss_name", ["logistic", "exponential"])
@pytest.mark.parametrize("eta", [0.5, 300.0])
def test_log_loss_is_the_log_of_the_mean_loss_past_underflow(loss_name, eta):
    """``NetworkRun.log_loss`` is ``log (1/n) sum_i l(u_i)`` at every kept iterate, against a
    50-digit mpmath evaluation from the margins ``y_i <beta, x_i>`` (computed here); with
    ``eta = 300`` one step takes the margins into the thousands, where ``loss`` underflows to
    0 and ``log_loss`` must stay exact (1e-13 relative: float64 margins, then mpmath)."""
    model = DiagonalNetwork(2, BLOBS.d)
    run = train(
        model, BLOBS.X, BLOBS.y, model.balanced(0.5), "gd", eta=eta, steps=4, loss=loss_name
    )
    assert run.status == 0
    with mpmath.workdps(50):
        for theta, log_loss in zip(run.theta, run.log_loss, strict=True):
            u = BLOBS.y * (BLOBS.X @ np.prod(theta.reshape(2, BLOBS.d), axis=0))
            if loss_name == "logistic":
                terms = [mpmath.log1p(mpmath.exp(-mpmath.mpf(v))) for v in u]
            else:
                terms = [mpmath.exp(-mpmath.mpf(v)) for v in u]
            ref = float(mpmath.log(mpmath.fsum(terms) / len(terms)))
            assert log_loss == pytest.approx(ref, rel=1e-13, abs=1e-13)
    if eta > 1:
        assert run.loss[-1] == 0.0 and run.log_loss[-1] < -1000  # the case the field is for
    finite = run.loss > 0
    np.testing.assert_allclose(run.log_loss[finite], np.log(run.loss[finite]), rtol=1e-13)


# --------------------------------------------------------------------------- overflow


def diverging_regression():
    """Squared loss on real targets with a step size far past stability: ``|theta|`` grows
    doubly exponentially and leaves float64 within a few steps."""
    model = DiagonalNetwork(2, BLOBS.d)
    y = BLOBS.X @ np.array([1.0, -0.5])
    return model, y, Dataset(BLOBS.X, y, task="regression")


def test_divergence_ends_with_overflow_at_the_right_step():
    """A diverging run ends with status -1 and ``Cause.OVERFLOW``; every kept theta and loss
    is finite; the message names the first step whose loss is not finite, the step at which
    ``flows.iterate`` (which checks the parameters, margins and loss of every iterate) stops
    too; the kept iterates are iterate's (1e-12 relative)."""
    model, y, data = diverging_regression()
    run = train(model, BLOBS.X, y, model.balanced(0.5), "gd", eta=10.0, steps=100, loss="squared")
    ref = iterate(data, "gd", 2, 0.5, eta=10.0, steps=100)
    assert run.status == -1 and run.cause is Cause.OVERFLOW
    assert ref.status == -1 and "loss overflows" in ref.message
    assert np.all(np.isfinite(run.theta)) and np.all(np.isfinite(run.loss))
    assert np.all(np.isfinite(ref.loss))
    bad = int(re.search(r"at step (\d+)", ref.message).group(1))
    assert bad >= 2 and ref.steps[-1] == bad - 1
    with np.errstate(over="ignore"):  # the next GD step, written out: its loss overflows
        u, v = ref.theta[-1]
        r = BLOBS.X @ (u * v) - y
        g = BLOBS.X.T @ r / len(y)
        beta = (u - 10.0 * v * g) * (v - 10.0 * u * g)
        assert not np.isfinite(np.mean(0.5 * (BLOBS.X @ beta - y) ** 2))
    assert re.search(rf"\bat step {bad}\b", run.message), run.message
    assert re.search(rf"\bup to step {bad - 1}\b", run.message), run.message
    np.testing.assert_array_equal(run.steps, np.arange(bad))
    assert relative_error(run.theta.reshape(-1, 2, BLOBS.d), ref.theta[:bad]) < 1e-12


@pytest.mark.parametrize("algorithm", ["gd", "l2-sam", "1-usam"])
def test_cnn_divergence_ends_with_overflow(algorithm):
    """A CNN step of ``eta = 1e200`` takes the outputs past float64 at step 1: status -1,
    ``Cause.OVERFLOW``, the message names step 1, and only the finite initial iterate (with
    its finite loss) is kept."""
    model, theta, X, y = cnn_case(IMAGE, 3, "same", "linear", "relu")
    run = train(model, X, y, theta, algorithm, eta=1e200, steps=10, rho=0.1)
    assert run.status == -1 and run.cause is Cause.OVERFLOW
    assert re.search(r"\bat step 1\b", run.message), run.message
    np.testing.assert_array_equal(run.steps, [0])
    np.testing.assert_array_equal(run.theta[0], theta)
    assert np.all(np.isfinite(run.theta)) and np.all(np.isfinite(run.loss))


def test_momentum_divergence_is_reported_without_warnings():
    """Momentum 5 on the linear CNN drives the outputs to +inf while the logistic loss of
    +inf margins is 0 (it raised an overflow RuntimeWarning in the final losses): the run
    stops with status -1 where an output leaves float64, every kept value finite and no
    warning."""
    data = banded_data()
    model = TwoLayerCNN(20, 20, 1, "linear")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run = train(model, data.X, data.y, model.initial_parameters(1.0), "l2-sam",
                    rho=0.1, eta=1.0, momentum=5, steps=300)  # fmt: skip
        assert np.all(np.isfinite(model.outputs(run.theta[-1], data.X)))
    assert run.status == -1 and run.cause is Cause.OVERFLOW
    assert "an output or the loss left float64" in run.message
    assert np.all(np.isfinite(run.theta)) and np.all(np.isfinite(run.log_loss))


def test_divergence_keeps_the_last_finite_iterate_between_records():
    """With ``record_every = 3`` the last finite iterate (the step before the one named in the
    message) is still kept, as ``NetworkRun`` and ``flows.iterate`` describe."""
    model, y, data = diverging_regression()
    run = train(
        model,
        BLOBS.X,
        y,
        model.balanced(0.5),
        "gd",
        eta=10.0,
        steps=100,
        loss="squared",
        record_every=3,
    )
    ref = iterate(data, "gd", 2, 0.5, eta=10.0, steps=100, record_every=3)
    assert run.status == ref.status == -1
    np.testing.assert_array_equal(run.steps, ref.steps)  # 0, 3, then the last finite step
    assert run.steps[-1] % 3 != 0
    assert relative_error(run.theta.reshape(-1, 2, BLOBS.d), ref.theta) < 1e-12


# --------------------------------------------------------------------------- errors


def _cnn_theta():
    return TwoLayerCNN(8, 3).initial_parameters(1.0)


M2 = DiagonalNetwork(2, BLOBS.d)
X, Y = BLOBS.X, BLOBS.y
ERROR_CASES = {
    "theta0 size": (lambda: train(M2, X, Y, np.ones(3), "gd", steps=1), "theta0"),
    "theta0 rank": (lambda: train(M2, X, Y, np.ones((2, 2)), "gd", steps=1), "theta0"),
    "labels": (lambda: train(M2, X, 2 * Y, M2.balanced(1.0), "gd", steps=1), "y"),
    "algorithm": (lambda: train(M2, X, Y, M2.balanced(1.0), "sgd", steps=1), "algorithm"),
    "loss": (lambda: train(M2, X, Y, M2.balanced(1.0), "gd", steps=1, loss="hinge"), "loss"),
    "clock": (lambda: train(M2, X, Y, M2.balanced(1.0), "gd", steps=1, clock="wall"), "clock"),
    "1-sam rescaled": (
        lambda: train(M2, X, Y, M2.balanced(1.0), "1-sam", steps=1, clock="rescaled", rho=0.1),
        "clock",
    ),
    "1-usam rescaled": (
        lambda: train(M2, X, Y, M2.balanced(1.0), "1-usam", steps=1, clock="rescaled", rho=0.1),
        "clock",
    ),
    "activation": (lambda: TwoLayerCNN(8, 3, activation="tanh"), "activation"),
    "padding": (lambda: TwoLayerCNN(8, 3, padding="reflect"), "padding"),
    "readout": (lambda: TwoLayerCNN(8, 3, readout="max"), "readout"),
    "kernel image": (lambda: TwoLayerCNN((4, 4), 5), "kernel"),
    "kernel signal": (lambda: TwoLayerCNN(4, 5), "kernel"),
    "kernel width": (lambda: TwoLayerCNN((4, 4), (2, 5)), "kernel"),
    "split": (lambda: TwoLayerCNN(8, 3).split(np.ones(5)), "theta"),
    "X width": (lambda: TwoLayerCNN(8, 3).outputs(_cnn_theta(), np.ones((2, 7))), "X"),
    "X width train": (
        lambda: train(
            TwoLayerCNN(8, 3), np.ones((2, 7)), np.array([1.0, -1.0]), _cnn_theta(), "gd"
        ),
        "X",
    ),
    "bands overlap": (
        lambda: banded_data(length=20, bands=((1, 2), (2, 3)), strengths=(1, 2)),
        "bands",
    ),
    "frequency 0": (
        lambda: banded_data(length=20, bands=((0, 2), (3, 4)), strengths=(1, 2)),
        "bands",
    ),
    "frequency N/2": (
        lambda: banded_data(length=20, bands=((1, 10), (3, 4)), strengths=(1, 2)),
        "bands",
    ),
    "strengths decreasing": (
        lambda: banded_data(length=20, bands=((1, 2), (3, 4)), strengths=(2, 1)),
        "strengths",
    ),
    "strengths equal": (
        lambda: banded_data(length=20, bands=((1, 2), (3, 4)), strengths=(1, 1)),
        "strengths",
    ),
    "strengths count": (
        lambda: banded_data(length=20, bands=((1, 2), (3, 4)), strengths=(1, 2, 3)),
        "strengths",
    ),
    "noise": (lambda: banded_data(noise=-0.1), "noise"),
}


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_bad_arguments_raise_value_errors_naming_them(case):
    """Each bad argument raises ``ValueError`` whose message names the parameter."""
    call, name = ERROR_CASES[case]
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        call()


def test_diagonal_network_refuses_x_of_the_wrong_width_naming_it():
    """``X`` (n, d + 1) for a ``DiagonalNetwork(2, d)``: a ``ValueError`` naming ``X``."""
    with pytest.raises(ValueError, match=r"\bX\b"):
        train(M2, np.ones((6, BLOBS.d + 1)), Y, M2.balanced(1.0), "gd", steps=1)


def test_rescaled_clock_with_the_squared_loss_is_refused_naming_clock():
    """As ``flows.simulate`` on regression data: ``ValueError`` naming ``clock``."""
    y = BLOBS.X @ np.ones(BLOBS.d)
    with pytest.raises(ValueError, match=r"\bclock\b"):
        train(M2, X, y, M2.balanced(1.0), "gd", steps=1, loss="squared", clock="rescaled")


# --------------------------------------------------------------------------- banded data


BANDS = ((1, 2), (3,), (5, 6, 7))
STRENGTHS = (0.5, 1.5, 2.0)


def test_banded_rows_are_the_label_times_one_cosine_signal():
    """Without noise each row is ``y_i`` times one signal whose orthonormal cosine coefficients
    are ``mu_k / sqrt(|F_k|)`` on band k, 0 on every other frequency 0..N/2, and whose sine
    coefficients are 0; labels alternate +1, -1. Orthonormal projections: 1e-13."""
    N = 16
    data = banded_data(n=5, length=N, bands=BANDS, strengths=STRENGTHS)
    np.testing.assert_array_equal(data.y, [1.0, -1.0, 1.0, -1.0, 1.0])
    assert data.length == N and data.bands == BANDS and data.strengths == STRENGTHS
    signal = data.X[0]
    np.testing.assert_allclose(data.X, data.y[:, None] * signal[None, :], rtol=0, atol=0)
    expected = np.zeros(N // 2 + 1)
    for band, mu in zip(BANDS, STRENGTHS, strict=True):
        expected[list(band)] = mu / np.sqrt(len(band))
    t = np.arange(N)
    cos_coef = cosine_basis(N).T @ signal
    sin_coef = [np.sqrt(2.0 / N) * np.sin(2 * np.pi * f * t / N) @ signal for f in range(1, N // 2)]
    np.testing.assert_allclose(cos_coef, expected, rtol=0, atol=1e-13)
    np.testing.assert_allclose(sin_coef, 0.0, rtol=0, atol=1e-13)
    assert np.linalg.norm(signal) == pytest.approx(np.linalg.norm(STRENGTHS), rel=1e-13)


def test_band_spectrum_of_the_clean_signal_is_the_closed_form():
    """``rfft`` of ``sqrt(2/N) cos(2 pi f t / N)`` has modulus ``sqrt(2/N) N / 2`` at f (numpy's
    unnormalised convention) and 0 elsewhere, so ``|rfft x|(f) = mu_k sqrt(N / (2 |F_k|))`` on
    band k and the band sums are ``mu_k sqrt(N |F_k| / 2)``, with 0 outside the bands
    (1e-12 relative: an FFT of 16 points)."""
    N = 16
    data = banded_data(n=2, length=N, bands=BANDS, strengths=STRENGTHS)
    t = np.arange(N)
    for f in (1, 3, 7):  # numpy's convention, checked here rather than assumed
        modulus = np.abs(np.fft.rfft(np.cos(2 * np.pi * f * t / N)))
        assert modulus[f] == pytest.approx(N / 2, rel=1e-13) and np.delete(modulus, f).max() < 1e-12
    spectrum = np.abs(np.fft.rfft(data.X[0]))
    for band, mu in zip(BANDS, STRENGTHS, strict=True):
        np.testing.assert_allclose(
            spectrum[list(band)], mu * np.sqrt(N / (2 * len(band))), rtol=1e-12
        )
    expected = [mu * np.sqrt(N * len(band) / 2) for band, mu in zip(BANDS, STRENGTHS, strict=True)]
    got = band_spectrum(data.X, BANDS)
    assert got.shape == (2, len(BANDS) + 1)
    np.testing.assert_allclose(got[:, :-1], np.array([expected, expected]), rtol=1e-12)
    assert np.all(np.abs(got[:, -1]) < 1e-11)


def test_band_sums_add_the_right_entries():
    """``band_sums`` over the last axis of a batch: band k's entries, then every other
    frequency, summed here by explicit loops (1e-14 relative)."""
    values = np.random.default_rng(3).standard_normal((2, 3, 9))
    got = band_sums(values, BANDS)
    assert got.shape == (2, 3, len(BANDS) + 1)
    inside = {f for band in BANDS for f in band}
    for a in range(2):
        for b in range(3):
            row = values[a, b]
            expected = [sum(row[f] for f in band) for band in BANDS]
            expected.append(sum(row[f] for f in range(9) if f not in inside))
            np.testing.assert_allclose(got[a, b], expected, rtol=1e-14, atol=1e-14)


def test_banded_noise_has_the_stated_size_and_seed():
    """The noise ``X - y signal`` has mean squared row norm ``noise^2`` (2000 rows of 20 entries:
    standard error ~0.7% of noise^2, checked to 5%), every entry the variance ``noise^2 / N``
    (standard error ~3%, checked to 20%) and mean ~0 (5 standard errors), and it is a function
    of the seed (same seed, same noise; another seed, other noise)."""
    noise, N = 0.3, 20
    clean = banded_data(n=2000, length=N)
    noisy = banded_data(n=2000, length=N, noise=noise, seed=1)
    xi = noisy.X - clean.X
    assert np.mean(np.sum(xi**2, axis=1)) == pytest.approx(noise**2, rel=0.05)
    assert abs(np.mean(xi)) < 5 * noise / np.sqrt(N) / np.sqrt(xi.size)
    np.testing.assert_allclose(np.var(xi, axis=0), noise**2 / N, rtol=0.2)
    np.testing.assert_array_equal(noisy.X, banded_data(n=2000, length=N, noise=noise, seed=1).X)
    other = banded_data(n=2000, length=N, noise=noise, seed=2).X - clean.X
    assert not np.allclose(other, xi)
    assert noisy.noise == noise and noisy.seed == 1
