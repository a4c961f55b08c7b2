"""Tests of flows.model (loss and gradient) and flows.signedlog (signed-log arithmetic).

References used here never share code with the module under test:
(a) central finite differences of ``loss_value`` (plain float64),
(b) sympy's symbolic gradient of the loss written from the model definition of docs/theory.md §1
    (beta = product of the layers, margins y_i <beta, x_i>, mean of l over examples),
(c) plain numpy float arithmetic for moderate magnitudes and mpmath (60 digits) for extreme
    ones (1e-300, exp(1e4) held in log form).
"""

from __future__ import annotations

import functools

import mpmath as mp
import numpy as np
import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flows.data import Dataset, single_example
from flows.model import loss_gradient, loss_value
from flows.signedlog import (
    SignedLog,
    add_float,
    chart_to_signed_log,
    leave_one_out,
    log_cosh,
    log_norm2,
    log_sinh,
    product_of_layers,
    signed_log_to_chart,
)

mp.mp.dps = 60
LOSS_NAMES = ["logistic", "exponential"]


# --------------------------------------------------------------------------- references


@functools.cache
def symbolic_gradient(L: int, n: int, d: int, loss: str):
    """``grad L(theta)`` from sympy: a function of (theta (L, d), X (n, d), y (n,))."""
    w = sp.Matrix(L, d, lambda layer, j: sp.Symbol(f"w_{layer}_{j}", real=True))
    x = sp.Matrix(n, d, lambda i, j: sp.Symbol(f"x_{i}_{j}", real=True))
    y = sp.Matrix(n, 1, lambda i, _: sp.Symbol(f"y_{i}", real=True))
    beta = [sp.Mul(*[w[layer, j] for layer in range(L)]) for j in range(d)]
    margins = [y[i] * sum(x[i, j] * beta[j] for j in range(d)) for i in range(n)]
    if loss == "logistic":
        ell = [sp.log(1 + sp.exp(-m)) for m in margins]
    else:
        ell = [sp.exp(-m) for m in margins]
    objective = sp.Add(*ell) / n
    grads = [sp.diff(objective, w[layer, j]) for layer in range(L) for j in range(d)]
    fn = sp.lambdify([list(w), list(x), list(y)], grads, modules="mpmath")

    def grad(theta: np.ndarray, X: np.ndarray, yv: np.ndarray) -> np.ndarray:
        out = fn(
            [mp.mpf(float(v)) for v in theta.ravel()],
            [mp.mpf(float(v)) for v in X.ravel()],
            [mp.mpf(float(v)) for v in yv],
        )
        return np.array([float(g) for g in out]).reshape(L, d)

    return grad


def central_differences(theta: np.ndarray, data: Dataset, loss: str, h: float = 1e-6):
    """Central finite differences of ``loss_value`` (step ``h`` per entry)."""
    out = np.empty_like(theta)
    for idx in np.ndindex(*theta.shape):
        up, down = theta.copy(), theta.copy()
        up[idx] += h
        down[idx] -= h
        out[idx] = (loss_value(up, data, loss) - loss_value(down, data, loss)) / (2 * h)
    return out


def random_problem(seed: int, L: int, n: int, d: int):
    """Separable data (labels from a random linear rule) and theta with some exact zeros."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    w_star = rng.normal(size=d)
    y = np.sign(X @ w_star)
    y[y == 0] = 1.0
    theta = rng.normal(scale=0.8, size=(L, d))
    zero_mask = rng.random(size=(L, d)) < 0.3
    theta[zero_mask] = 0.0
    if L >= 2 and d >= 2:
        theta[:, 0] = 0.0  # a whole column at 0 ...
        theta[1:, 0] = rng.normal(size=L - 1)  # ... except below layer 0: exactly one zero
    return Dataset(X, y), theta


# --------------------------------------------------------------------------- model


#: The random problems of the gradient check (each new shape and loss costs a sympy derivation).
GRADIENT_PROBLEMS = dict(
    seed=st.integers(0, 2**32 - 1),
    L=st.sampled_from([1, 2, 3]),
    n=st.integers(1, 3),
    d=st.integers(1, 3),
    loss=st.sampled_from(LOSS_NAMES),
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**GRADIENT_PROBLEMS)
def test_loss_gradient_matches_finite_differences_and_sympy(seed, L, n, d, loss):
    """Claim: loss_gradient(theta) is grad of the mean loss of docs/theory.md §1 (finite differences of
    loss_value, and sympy's exact derivative of the model written from its definition), also at
    exact zeros of theta (leave-one-out products without division). 15 random problems here,
    40 more with ``-m slow`` (the test below)."""
    check_loss_gradient(seed, L, n, d, loss)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**GRADIENT_PROBLEMS)
def test_loss_gradient_matches_finite_differences_and_sympy_longer(seed, L, n, d, loss):
    """The same claim on 40 random problems."""
    check_loss_gradient(seed, L, n, d, loss)


def check_loss_gradient(seed: int, L: int, n: int, d: int, loss: str) -> None:
    """``loss_gradient`` on a random problem against sympy and central differences."""
    data, theta = random_problem(seed, L, n, d)
    got = loss_gradient(theta, data, loss)
    assert got.shape == theta.shape
    exact = symbolic_gradient(L, n, d, loss)(theta, data.X, data.y)
    np.testing.assert_allclose(got, exact, rtol=1e-12, atol=1e-14)
    fd = central_differences(theta, data, loss)
    scale = max(1.0, float(np.max(np.abs(exact))))
    np.testing.assert_allclose(got, fd, rtol=0, atol=1e-7 * scale)


def test_loss_gradient_exact_zeros_give_exact_leave_one_out_products():
    """Claim: a zero in layer l of column j zeroes the gradient of every *other* layer in that
    column exactly, and leaves layer l's entry equal to g_j * prod_{k != l} w_j^(k) (no 0/0)."""
    data = single_example([1.0, 2.0, 3.0])
    theta = np.array([[0.0, 0.5, 0.0], [0.7, 0.0, 0.0], [1.1, 0.9, 2.0]])
    grad = loss_gradient(theta, data)
    g = -0.5 * np.array([1.0, 2.0, 3.0])  # l'(0) = -1/2: beta = 0, so every margin is 0
    expected = np.array(
        [[g[0] * 0.7 * 1.1, 0.0, 0.0], [0.0, g[1] * 0.5 * 0.9, 0.0], [0.0, 0.0, 0.0]]
    )
    np.testing.assert_allclose(grad, expected, rtol=1e-15, atol=0)
    assert np.all(grad[expected == 0] == 0.0)


@pytest.mark.parametrize("loss", LOSS_NAMES)
def test_loss_gradient_at_large_margins_keeps_relative_precision(loss):
    """Claim: the gradient is evaluated stably when margins are large (m ~ 700, |l'| ~ 1e-304):
    relative agreement with a 60-digit mpmath evaluation of l'(m) * mu_j * prod_{k!=l} w."""
    mu = np.array([1.0, 3.0])
    data = single_example(mu)
    theta = np.array([[10.0, 11.0], [np.sqrt(2.0), 20.0]])
    beta = [mp.mpf(10.0) * mp.mpf(np.sqrt(2.0)), mp.mpf(11.0) * mp.mpf(20.0)]
    m = mp.mpf(1.0) * beta[0] + mp.mpf(3.0) * beta[1]
    lprime = -1 / (1 + mp.exp(m)) if loss == "logistic" else -mp.exp(-m)
    others = [[mp.mpf(float(theta[1 - layer, j])) for j in range(2)] for layer in range(2)]
    expected = np.array(
        [[float(lprime * mp.mpf(mu[j]) * others[layer][j]) for j in range(2)] for layer in range(2)]
    )
    assert np.all(expected != 0) and np.all(np.abs(expected) < 1e-280)
    got = loss_gradient(theta, data, loss)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert 0.0 <= loss_value(theta, data, loss) < 1e-280


def test_loss_value_matches_definition():
    """Claim: loss_value is (1/n) sum_i l(y_i <prod_l w^(l), x_i>) (mpmath reference)."""
    data, theta = random_problem(7, 3, 4, 3)
    beta = np.prod(theta, axis=0)
    for loss in LOSS_NAMES:
        ms = [
            mp.mpf(float(data.y[i]))
            * mp.fsum(mp.mpf(float(data.X[i, j])) * mp.mpf(float(beta[j])) for j in range(3))
            for i in range(4)
        ]
        ells = [mp.log(1 + mp.exp(-m)) if loss == "logistic" else mp.exp(-m) for m in ms]
        assert loss_value(theta, data, loss) == pytest.approx(float(mp.fsum(ells) / 4), rel=1e-13)


# --------------------------------------------------------------------------- signedlog


def sl(values) -> SignedLog:
    return SignedLog.from_float(np.asarray(values, dtype=float))


def assert_signed_log_equal(got: SignedLog, sign, log_abs, atol=1e-13, rtol=1e-13):
    """Same signs, same -inf pattern, log magnitudes equal to ``atol + rtol |log|``."""
    sign = np.asarray(sign, dtype=float)
    log_abs = np.asarray(log_abs, dtype=float)
    np.testing.assert_array_equal(got.sign, sign)
    np.testing.assert_array_equal(np.isneginf(got.log_abs), np.isneginf(log_abs))
    np.testing.assert_array_equal(np.isneginf(got.log_abs), got.sign == 0)
    finite = np.isfinite(log_abs)
    np.testing.assert_allclose(got.log_abs[finite], log_abs[finite], rtol=rtol, atol=atol)


def test_add_float_matches_plain_float_addition():
    """Claim: add_float(x, eps) is x + eps in signed-log form (random values, zeros, exact
    cancellation), with an error bounded by the conditioning of the sum."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=400) * 10.0 ** rng.integers(-8, 8, size=400)
    eps = rng.normal(size=400) * 10.0 ** rng.integers(-8, 8, size=400)
    x[:20] = 0.0
    eps[10:30] = 0.0
    eps[40:60] = -x[40:60]  # exact cancellation: 0, sign 0
    eps[60:80] = -x[60:80] * (1 + 1e-6)  # strong cancellation
    got = add_float(sl(x), eps)
    exact = x + eps
    np.testing.assert_array_equal(got.sign, np.sign(exact))
    np.testing.assert_array_equal(np.isneginf(got.log_abs), exact == 0)
    nz = exact != 0
    cond = (np.abs(x) + np.abs(eps))[nz] / np.abs(exact[nz])
    # log|x + eps| to rounding: the float sum itself is off by <= 1.2e-16 * cond (relative)
    err = np.abs(got.log_abs[nz] - np.log(np.abs(exact[nz])))
    assert np.all(err <= 4e-16 * cond + 1e-15 * np.maximum(1.0, np.abs(got.log_abs[nz])))


@pytest.mark.parametrize(
    "sign, log_x, eps",
    [
        (1.0, 1e4, 1.0),
        (-1.0, 1e4, 3.5),
        (1.0, 1e4, -1e300),
        (1.0, -1e4, 1e-300),
        (-1.0, -1e4, -2.0),
        (1.0, np.log(1e-300), 1.0),
        (-1.0, np.log(1e-300), 1.0),
        (1.0, 700.0, -1.0),
        (-1.0, 3.0, 1e300),
        (1.0, -745.0, 1e-310),
    ],
)
def test_add_float_extreme_magnitudes(sign, log_x, eps):
    """Claim: add_float is exact to rounding for |x| far beyond float64 (exp(1e4)) and for |x|
    far below |eps| (mpmath reference for sign and log|x + eps|)."""
    exact = mp.mpf(sign) * mp.exp(mp.mpf(log_x)) + mp.mpf(eps)
    got = add_float(SignedLog(np.array([sign]), np.array([log_x])), np.array([eps]))
    assert got.sign[0] == float(mp.sign(exact))
    want = float(mp.log(abs(exact)))
    assert got.log_abs[0] == pytest.approx(want, rel=1e-14, abs=1e-12)


def brute_leave_one_out(layers: np.ndarray) -> np.ndarray:
    """prod_{k != l} w^(k) by deleting a row: (L, d) -> (L, d)."""
    return np.array(
        [np.prod(np.delete(layers, layer, axis=0), axis=0) for layer in range(len(layers))]
    )


@pytest.mark.parametrize("mult", [(1,), (3,), (1, 1), (1, 1, 1, 1), (2, 1), (1, 3, 2), (2, 2)])
def test_leave_one_out_and_product_match_brute_force(mult):
    """Claim: for grouped layers (multiplicities), leave_one_out gives the product over every layer
    but one copy of the group and product_of_layers the full product, exact zeros included."""
    rng = np.random.default_rng(sum(mult) * 10 + len(mult))
    mult = np.array(mult)
    d = 6
    for _ in range(20):
        groups = rng.normal(scale=1.5, size=(len(mult), d))
        groups[rng.random(size=groups.shape) < 0.25] = 0.0
        full = np.repeat(groups, mult, axis=0)
        # row of the full network standing for the first copy of each group
        first = np.concatenate([[0], np.cumsum(mult)[:-1]])
        want = brute_leave_one_out(full)[first] if full.shape[0] > 1 else np.ones((1, d))
        got = leave_one_out(sl(groups), mult)
        with np.errstate(divide="ignore"):
            assert_signed_log_equal(got, np.sign(want), np.log(np.abs(want)))
        prod = np.prod(full, axis=0)
        with np.errstate(divide="ignore"):
            assert_signed_log_equal(
                product_of_layers(sl(groups), mult), np.sign(prod), np.log(np.abs(prod))
            )


def test_leave_one_out_and_product_beyond_float_range():
    """Claim: products of magnitudes far outside float64 (log|w| = +-1e4) are exact sums of logs
    with the product of signs (plain float arithmetic on the logs as reference)."""
    log_abs = np.array([[1e4, -1e4, 3.0], [2e4, 5e3, -np.inf], [-3e4, 7.0, 1.0]])
    sign = np.array([[1.0, -1.0, 1.0], [-1.0, -1.0, 0.0], [1.0, 1.0, -1.0]])
    got = leave_one_out(SignedLog(sign, log_abs), np.ones(3, dtype=int))
    for layer in range(3):
        others = [k for k in range(3) if k != layer]
        want_sign = np.prod(sign[others], axis=0)
        want_log = np.where(want_sign == 0, -np.inf, np.sum(log_abs[others], axis=0))
        assert_signed_log_equal(SignedLog(got.sign[layer], got.log_abs[layer]), want_sign, want_log)
    prod = product_of_layers(SignedLog(sign, log_abs), np.array([1, 1, 1]))
    assert_signed_log_equal(prod, [-1.0, 1.0, 0.0], [0.0, -4993.0, -np.inf])
    # balanced group of multiplicity 5: w^4 and w^5
    one = SignedLog(np.array([[-1.0, 1.0]]), np.array([[2e4, -1e4]]))
    assert_signed_log_equal(leave_one_out(one, np.array([5])), [[1.0, 1.0]], [[8e4, -4e4]])
    assert_signed_log_equal(product_of_layers(one, np.array([5])), [-1.0, 1.0], [1e5, -5e4])


def test_log_norm2_matches_numpy_and_mpmath():
    """Claim: log_norm2(log|x|, w) = log sqrt(sum w_i x_i^2): numpy for moderate values, mpmath
    for exp(1e4) and 1e-300 scales; -inf for the zero vector."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        x = rng.normal(size=7) * 10.0 ** rng.integers(-5, 5, size=7)
        x[rng.random(size=7) < 0.2] = 0.0
        w = rng.integers(1, 4, size=7).astype(float)
        with np.errstate(divide="ignore"):
            la = np.log(np.abs(x))
        assert log_norm2(la, w) == pytest.approx(np.log(np.sqrt(np.sum(w * x * x))), rel=1e-14)
        assert log_norm2(la) == pytest.approx(np.log(np.linalg.norm(x)), rel=1e-14)
    assert log_norm2(np.array([-np.inf, -np.inf])) == -np.inf
    for la, w in [
        ([1e4, 1e4 - 1.0, 3.0], [1.0, 2.0, 3.0]),
        ([np.log(1e-300), np.log(3e-300)], [2.0, 2.0]),
        ([-1e4, -1e4 + 0.5, -np.inf], [1.0, 1.0, 1.0]),
    ]:
        want = mp.log(
            mp.sqrt(
                mp.fsum(
                    mp.mpf(wi) * mp.exp(2 * mp.mpf(li))
                    for li, wi in zip(la, w, strict=True)
                    if li != -np.inf
                )
            )
        )
        assert log_norm2(np.array(la), np.array(w)) == pytest.approx(float(want), rel=1e-14)


def test_log_sinh_log_cosh():
    """Claim: log_sinh / log_cosh equal log(sinh x) / log(cosh x): numpy where it is exact,
    mpmath for x = 1e-300 and x = 1e4 (sinh overflows), log_sinh(0) = -inf, log_cosh even."""
    x = np.concatenate([np.linspace(1e-3, 30.0, 301), [0.5, 0.999999, 1.0, 1.000001]])
    np.testing.assert_allclose(log_sinh(x), np.log(np.sinh(x)), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(log_cosh(x), np.log(np.cosh(x)), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(log_cosh(-x), log_cosh(x), rtol=0, atol=0)
    with np.errstate(divide="ignore"):
        assert log_sinh(np.array([0.0]))[0] == -np.inf
    assert log_cosh(np.array([0.0]))[0] == 0.0
    for v in [1e-300, 1e-20, 1e-8, 0.3, 2.5, 40.0, 700.0, 1e4, 1e6]:
        assert log_sinh(np.array([v]))[0] == pytest.approx(
            float(mp.log(mp.sinh(mp.mpf(v)))), rel=1e-14, abs=1e-15
        )
        for s in (1.0, -1.0):
            assert log_cosh(np.array([s * v]))[0] == pytest.approx(
                float(mp.log(mp.cosh(mp.mpf(v)))), rel=1e-14, abs=1e-15
            )


def log_rounding(v: np.ndarray) -> np.ndarray:
    """Rounding allowance for a value that passed through its logarithm: exp(log v) is exact
    only to ~|log v| ulps, so the error bound is 4e-16 |v| (2 + |log|v||)."""
    with np.errstate(divide="ignore"):
        return 4e-16 * np.abs(v) * (2.0 + np.abs(np.nan_to_num(np.log(np.abs(v)), neginf=0.0)))


@pytest.mark.parametrize("delta", [1.0, 1e-3, 37.0])
def test_chart_round_trip_and_asinh_reference(delta):
    """Claim: z -> (sign, log|w|) -> z is the identity for z from 1e-300 to 1e4 (both signs, 0),
    w = delta sinh(z), and signed_log_to_chart is asinh(w / delta) (numpy / mpmath reference)."""
    z = np.array(
        [
            0.0,
            1e-300,
            -1e-300,
            1e-8,
            -0.3,
            0.999,
            1.0,
            -2.0,
            29.9,
            30.0,
            -31.0,
            35.0,
            700.0,
            -710.0,
            1e3,
            1e4,
            -1e4,
        ]
    )
    w = chart_to_signed_log(z, delta)
    back = signed_log_to_chart(w, delta)
    assert np.all(np.abs(back - z) <= log_rounding(z))
    np.testing.assert_array_equal(w.sign, np.sign(z))
    for zi, si, li in zip(z, w.sign, w.log_abs, strict=True):
        if zi == 0:
            assert si == 0 and li == -np.inf
            continue
        want = mp.log(mp.mpf(delta) * mp.sinh(abs(mp.mpf(zi))))
        assert li == pytest.approx(float(want), rel=1e-14, abs=1e-13)
    # the other direction, from ordinary floats and from huge log magnitudes
    wf = np.array([-5.0, -1e-200, 0.0, 3e-7, 0.4, 12.0, 1e100, -1e300])
    with np.errstate(divide="ignore"):
        got = signed_log_to_chart(SignedLog.from_float(wf), delta)
    want = np.arcsinh(wf / delta)
    assert np.all(np.abs(got - want) <= log_rounding(want))
    for log_w in [50.0, 1e3, 1e4]:
        want = mp.asinh(mp.exp(mp.mpf(log_w)) / mp.mpf(delta))
        got = signed_log_to_chart(SignedLog(np.array([-1.0]), np.array([log_w])), delta)[0]
        assert got == pytest.approx(-float(want), rel=1e-15)
