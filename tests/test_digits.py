"""The digits study's analysis (``analysis.saliency``, ``analysis.digits_runs``) against
independent computations: ranks and Spearman against scipy, strengths and shares against
direct numpy, the orthant l1 max-margin against its dual LP, the chunked runner against one
simulate call, and the reflected run against the signed initialization it stands for."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog
from scipy.stats import rankdata, spearmanr

from analysis import digits_runs as R
from analysis import saliency as S
from analysis.angles import angle
from analysis.maxmargin import max_margin, normalized_margin
from flows import Dataset, simulate
from flows.model import loss_value
from flows.results import Cause

RNG = np.random.default_rng(13)


# --------------------------------------------------------------------------- ranks


@pytest.mark.parametrize("trial", range(20))
def test_spearman_matches_scipy_with_and_without_ties(trial):
    n = int(RNG.integers(2, 40))
    x = RNG.normal(size=n)
    y = 0.5 * x + RNG.normal(size=n)
    if trial % 2:  # ties in both
        x, y = np.round(x, 0), np.round(y, 0)
    np.testing.assert_array_equal(S.average_ranks(x), rankdata(x))
    expected = spearmanr(x, y).statistic
    if np.isnan(expected):
        assert np.isnan(S.spearman(x, y))
    else:
        assert S.spearman(x, y) == pytest.approx(expected, abs=1e-12)


def test_average_ranks_of_rows_match_scipy():
    """Row-wise ranks of a (T, n) matrix with ties in some rows (and an all-equal row) are
    scipy's average ranks of each row; non-finite input is refused."""
    x = np.round(RNG.normal(size=(15, 12)), 0)
    x[3] = 2.0
    x[4] = RNG.normal(size=12)
    np.testing.assert_array_equal(S.average_ranks(x), rankdata(x, axis=1))
    x[0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        S.average_ranks(x)


def test_spearman_of_constant_or_tiny_input_is_nan():
    assert np.isnan(S.spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))
    assert np.isnan(S.spearman([1.0], [2.0]))
    assert S.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="same length"):
        S.spearman([1, 2], [1, 2, 3])


# --------------------------------------------------------------------------- data side


def test_strength_and_signs_against_a_loop():
    X = RNG.random((30, 7))
    X[:, 3] = 0.25  # constant pixel: strength 0, sign +1
    y = np.where(RNG.random(30) < 0.4, 1.0, -1.0)
    y[:2] = (1.0, -1.0)
    expected = np.zeros(7)
    for j in range(7):
        pos = [X[i, j] for i in range(30) if y[i] > 0]
        neg = [X[i, j] for i in range(30) if y[i] < 0]
        expected[j] = sum(pos) / len(pos) - sum(neg) / len(neg)
    np.testing.assert_allclose(S.class_mean_difference(X, y), expected, atol=1e-15)
    np.testing.assert_allclose(S.pixel_strength(X, y), np.abs(expected), atol=1e-15)
    np.testing.assert_array_equal(S.orthant_signs(X, y), np.where(expected >= 0, 1.0, -1.0))
    assert S.pixel_strength(X, y)[3] == 0.0
    with pytest.raises(ValueError, match="both"):
        S.pixel_strength(X, np.ones(30))


# --------------------------------------------------------------------------- along a path


def _path(T: int = 12, d: int = 9, shift: float = 0.0):
    """Random signed beta (T, d) and its log form, with beta scaled by e^shift."""
    beta = RNG.normal(size=(T, d)) * np.exp(RNG.normal(size=(T, 1)))
    with np.errstate(divide="ignore"):
        return beta, np.log(np.abs(beta)) + shift, np.sign(beta)


def test_share_strength_correlation_against_scipy():
    beta, lb, _ = _path()
    strength = RNG.random(9)
    strength[4] = 0.0  # left out by the default mask
    keep = strength > 0
    got = S.share_strength_correlation(lb, strength)
    shares = np.abs(beta) / np.sum(np.abs(beta), axis=1, keepdims=True)
    want = [spearmanr(row[keep], strength[keep]).statistic for row in shares]
    np.testing.assert_allclose(got, want, atol=1e-12)
    # far beyond float64 (beta ~ e^5000) the same numbers
    np.testing.assert_allclose(
        S.share_strength_correlation(lb + 5000.0, strength), want, atol=1e-12
    )
    # a uniform row read back with rounding noise has no order: nan, not a random value
    uniform = np.full((1, 9), np.log(0.04)) + 1e-15 * RNG.normal(size=(1, 9))
    assert np.isnan(S.share_strength_correlation(uniform, strength)[0])


def test_leader_strength_quantile_and_changes():
    strength = np.array([0.0, 0.1, 0.5, 0.3, 0.9])
    lb = np.log(
        np.array(
            [
                [1.0, 1.0, 1.0, 1.0, 1.0],  # tie: no leader yet
                [1.0, 2.0, 1.0, 1.0, 1.0],  # pixel 1 (weakest informative)
                [1.0, 2.0, 3.0, 1.0, 1.0],  # pixel 2
                [1.0, 2.0, 3.0, 1.0, 4.0],  # pixel 4 (strongest)
            ]
        )
    )
    q = S.leader_strength_quantile(lb, strength)
    np.testing.assert_allclose(q[1:], [1 / 4, 3 / 4, 1.0])  # among the 4 with strength > 0
    seq = S.leader_changes(np.arange(4.0), lb)
    assert seq.coordinates == (1, 2, 4) and seq.switch_times == (1.0, 2.0, 3.0)


def test_stronger_half():
    strength = np.array([0.0, 0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    np.testing.assert_array_equal(S.stronger_half(strength), strength > 0.3)  # median of > 0
    with pytest.raises(ValueError, match="positive"):
        S.stronger_half(np.zeros(3))


def test_lowest_before_and_first_below():
    loss = np.array([0.6, 0.5, 0.31, 0.29, 0.1])
    values = np.array([np.nan, 0.2, 0.1, -0.5, -0.9])
    np.testing.assert_array_equal(S.first_below(loss, [0.5, 0.3, 0.01]), [1, 3, -1])
    assert S.lowest_before(values, loss, 0.5) == -0.5  # up to the first loss <= 0.3
    assert S.lowest_before(values, loss, 1e-3) == -0.9  # never reached: the whole run


def test_accuracy_margins_and_angles_against_direct_formulas():
    X = RNG.normal(size=(25, 6))
    y = np.where(RNG.random(25) < 0.5, 1.0, -1.0)
    y[:2] = (1.0, -1.0)
    beta, lb, sb = _path(T=8, d=6)
    acc = np.mean(y[None, :] * (beta @ X.T) > 0, axis=1)
    np.testing.assert_allclose(S.accuracy(lb + 800.0, sb, X, y), acc)  # beta ~ e^800
    for p in (1, 2):
        want = np.min(y[None, :] * (beta @ X.T), axis=1) / np.linalg.norm(beta, ord=p, axis=1)
        np.testing.assert_allclose(S.normalized_margins(lb + 800.0, sb, X, y, p), want, rtol=1e-12)
    ref = RNG.normal(size=6)
    cos = beta @ ref / np.linalg.norm(beta, axis=1) / np.linalg.norm(ref)
    np.testing.assert_allclose(S.angles_to(lb, sb, ref), np.degrees(np.arccos(cos)), atol=1e-9)
    # and the project's own one-vector functions agree, row by row
    for k in range(len(beta)):
        assert S.angles_to(lb[k : k + 1], sb[k : k + 1], ref)[0] == pytest.approx(
            np.degrees(angle(beta[k], ref)), abs=1e-10
        )
        assert S.normalized_margins(lb[k : k + 1], sb[k : k + 1], X, y, 1)[0] == pytest.approx(
            normalized_margin(beta[k], X, y, 1), rel=1e-12
        )
    # beta = 0 has no direction and no margin
    zero_lb, zero_sb = np.full((1, 6), -np.inf), np.zeros((1, 6))
    assert np.isnan(S.angles_to(zero_lb, zero_sb, ref)[0])
    assert np.isnan(S.normalized_margins(zero_lb, zero_sb, X, y, 2)[0])


# --------------------------------------------------------------------------- orthant max-margin


def _separable(n: int = 30, d: int = 5):
    w = RNG.normal(size=d)
    X = RNG.normal(size=(n, d))
    return X, np.where(X @ w > 0, 1.0, -1.0)


def test_orthant_l1_max_margin_against_its_dual():
    """The LP min 1'b s.t. Z b >= 1, b >= 0 (Z = y x s) has the dual max 1'l s.t. Z'l <= 1,
    l >= 0: solved separately, the two optimal values agree, and the returned direction has
    the orthant's signs and margin 1 / optimum in l1."""
    X, y = _separable()
    signs = np.where(max_margin(X, y, 2).beta < 0, -1.0, 1.0)  # an orthant that separates
    Z = y[:, None] * X * signs
    dual = linprog(
        -np.ones(len(y)), A_ub=Z.T, b_ub=np.ones(5), bounds=[(0, None)] * len(y), method="highs"
    )
    assert dual.status == 0
    u = S.orthant_l1_max_margin(X, y, signs)
    assert np.all(signs * u >= -1e-12)
    margin = np.min(y * (X @ u)) / np.sum(np.abs(u))
    assert margin == pytest.approx(1.0 / -dual.fun, rel=1e-7)
    # an orthant that cannot separate is refused: with X >= 0, no beta >= 0 gives the
    # examples labelled -1 a positive margin
    with pytest.raises(ValueError, match="signs"):
        S.orthant_l1_max_margin(np.abs(X), y, np.ones(5))


def test_orthant_l1_max_margin_is_the_l1_max_margin_in_its_own_orthant():
    X, y = _separable()
    best = max_margin(X, y, 1)
    signs = np.where(best.beta < 0, -1.0, 1.0)
    u = S.orthant_l1_max_margin(X, y, signs)
    np.testing.assert_allclose(u, best.direction, atol=1e-7)


# --------------------------------------------------------------------------- runs


@pytest.fixture(scope="module")
def small():
    """A small separable data set with an orthant that separates it."""
    X, y = _separable(n=12, d=4)
    s = np.where(max_margin(X, y, 1).beta < 0, -1.0, 1.0)
    return Dataset(X * s, y)


def test_digits_runs_stop_at_the_loss_floor_and_at_the_budget(small):
    """A floor stops the run where the loss reaches it (the path before is the run without a
    floor); a budget ends it with status -1; a floor of 0 means none."""
    base = dict(algorithm="gd", depth=2, alpha=0.3, tau_max=100.0, rtol=1e-10)
    free = simulate(small, "gd", 2, 0.3, t_max=100.0, n_points=501, original_time=False,
                    method="LSODA", rtol=1e-10)  # fmt: skip
    run = R._run_options(base | {"loss_floor": 1e-3})
    stopped = simulate(small, "gd", 2, 0.3, original_time=False, **run)
    assert stopped.cause is Cause.LOSS_FLOOR and stopped.status == 0
    assert stopped.loss[-1] == pytest.approx(1e-3, rel=1e-6)
    k = len(stopped.tau) - 1
    assert np.all(free.loss[:k] > 1e-3) and free.loss[k] <= 1e-3
    np.testing.assert_allclose(stopped.log_abs_beta[:k], free.log_abs_beta[:k], atol=1e-12)
    assert R._run_options(base | {"loss_floor": 0.0})["loss_floor"] is None
    capped = simulate(
        small,
        "gd",
        2,
        0.3,
        original_time=False,
        **R._run_options(base | {"loss_floor": 0.0, "max_nfev": 50}),
    )
    assert capped.cause is Cause.BUDGET_SPENT and capped.status == -1 and capped.tau[-1] < 100.0
    with pytest.raises(ValueError, match="loss_floor"):
        R._run_options(base | {"loss_floor": -1.0})


def test_le_sam_budget_starts_at_the_fraction_of_rho_max(small):
    """sigma / ||grad L(theta_0)|| = fraction * rho_max, with the gradient by central finite
    differences of the loss (independent of the engine's gradient)."""
    theta = np.full((3, small.d), 0.3)
    grad = np.zeros_like(theta)
    h = 1e-6
    for idx in np.ndindex(theta.shape):
        e = np.zeros_like(theta)
        e[idx] = h
        grad[idx] = (loss_value(theta + e, small) - loss_value(theta - e, small)) / (2 * h)
    sigma = R.le_sam_budget(small, 0.3, 3, rho_max=2.0, start_fraction=0.25)
    assert sigma / np.linalg.norm(grad) == pytest.approx(0.5, rel=1e-6)


def test_reflected_digits_run_is_the_signed_initialization():
    """digits_flow runs the positive balanced flow on column-flipped data and flips beta and the
    first layer back; that is the flow from the signed init w^(1) = s alpha, w^(2) = alpha on
    the real data (checked on a short horizon, l2-SAM, digits 0 vs 1)."""
    pytest.importorskip("sklearn")
    from flows.datasets import digits

    res = R.digits_flow(
        {
            "a": 0,
            "b": 1,
            "algorithm": "l2-sam",
            "depth": 2,
            "alpha": 0.2,
            "rho": 1.0,
            "tau_max": 1.0,
            "loss_floor": 0.0,
            "n_points": 5,
            "rtol": 1e-10,
        }
    )
    train, _ = digits(0, 1)
    s = S.orthant_signs(train.X, train.y)
    alpha = np.vstack([0.2 * s, np.full(64, 0.2)])
    signed = simulate(
        train, "l2-sam", 2, alpha, rho=1.0, t_max=1.0, n_points=5, original_time=False, rtol=1e-10
    )
    np.testing.assert_allclose(res["log_abs_beta"], signed.log_abs_beta, atol=1e-6)
    np.testing.assert_array_equal(res["sign_beta"], signed.sign_beta)
    np.testing.assert_array_equal(res["sign_theta"], signed.sign_theta)
    np.testing.assert_array_equal(res["signs"], s)
