"""Tests of analysis.limits: Cor 3.5's prediction for l_inf-SAM and limit estimates from runs.

The prediction is checked on hand cases (including a *minor* coordinate j*), against the
exact blow-up times of flows.closed_form.solutions (L >= 3: j* blows up first), and against
numerical flows from flows.simulate read by observed_linf_limit. Simulated runs are short
(n_points = 20) and cached per module.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from analysis.limits import (
    LimitEstimate,
    angle_series,
    final_direction,
    linf_limit_scores,
    observed_linf_limit,
    predict_linf_limit,
    predict_linf_limits,
)
from analysis.maxmargin import max_margin
from flows import simulate, single_example
from flows.closed_form.solutions import linf_sam

FAST = dict(n_points=20, rtol=1e-8)


@cache
def run(mu: tuple, algorithm: str, depth: int, alpha, rho, t_max: float):
    """Cached simulate (alpha as a tuple or float)."""
    a = np.array(alpha) if isinstance(alpha, tuple) else alpha
    return simulate(single_example(list(mu)), algorithm, depth, a, rho=rho, t_max=t_max, **FAST)


# --------------------------------------------------------------------------- prediction


def test_predict_hand_cases_minor_coordinate():
    """Cor 3.5 hand cases: mu=(1,2,3), alpha=(1.5,1.1,0.5), rho=1, L=2 -> j*=1 (alpha_3 < rho
    excludes the major coordinate); L=3, mu=(1,2), alpha=(3,1.2), rho=1 -> j*=0 since
    1*2 > 2*0.2 (the minor coordinate wins); L=3, 4 on the first case -> 0 (0.5 > 0.2,
    0.25 > 0.02); rho=0 (GD): L=2 -> d-1."""
    assert predict_linf_limit([1, 2, 3], [1.5, 1.1, 0.5], 1.0, 2) == 1
    assert predict_linf_limit([1, 2], [3.0, 1.2], 1.0, 3) == 0
    assert predict_linf_limit([1, 2, 3], [1.5, 1.1, 0.5], 1.0, 3) == 0
    assert predict_linf_limit([1, 2, 3], [1.5, 1.1, 0.5], 1.0, 4) == 0
    assert predict_linf_limit([1, 2, 3], [1.5, 1.1, 0.5], 0.0, 2) == 2
    assert predict_linf_limit([1, 2, 3], 1.5, 1.0, 2) == 2  # scalar alpha
    scores = linf_limit_scores([1, 2, 3], [1.5, 1.1, 0.5], 1.0, 3)
    np.testing.assert_allclose(scores[:2], np.log([0.5, 2 * 0.1]))
    assert scores[2] == -np.inf


def test_predict_none_when_no_alpha_above_rho():
    """No alpha_j > rho -> None (no divergence), including alpha_j == rho (beta_j = rho^L)."""
    assert predict_linf_limit([1, 2, 3], [0.5, 0.9, 1.0], 1.0, 2) is None
    assert predict_linf_limit([1, 2, 3], 1.0, 1.0, 3) is None
    assert predict_linf_limit([1, 2], 0.3, 0.5, 4) is None


def test_predict_ties_largest_index():
    """Ties in mu_j (alpha_j - rho)^(L-2) -> the largest index among them (documented)."""
    assert predict_linf_limit([2, 2, 1], 1.5, 1.0, 2) == 1
    assert predict_linf_limit([1.0, 2.0], [1.4, 1.2], 1.0, 3) == 1  # 1*0.4 == 2*0.2
    assert predict_linf_limit([1.0, 2.0, 0.5], [1.4, 1.2, 3.0], 1.0, 3) == 2  # 0.5*2 wins


@pytest.mark.parametrize("depth", [3, 4, 5])
def test_predict_is_first_blowup(depth):
    """For L >= 3, j* is the coordinate with the smallest exact blow-up time of
    flows.closed_form.solutions.linf_sam (20 seeded random cases per depth)."""
    rng = np.random.default_rng(depth)
    for _ in range(20):
        d = int(rng.integers(2, 6))
        mu = np.sort(rng.uniform(0.2, 3.0, d))
        alpha = rng.uniform(0.3, 2.5, d)
        rho = float(rng.uniform(0.2, 1.5))
        blow = linf_sam(mu, alpha, rho, depth, [0.0]).blowup_time
        expected = None if np.all(np.isinf(blow)) else int(np.argmin(blow))
        assert predict_linf_limit(mu, alpha, rho, depth) == expected


def test_predict_validation():
    """L = 1 -> ValueError pointing to Thm 3.1; invalid mu, alpha, rho, depth -> ValueError
    naming the parameter."""
    with pytest.raises(ValueError, match="Thm 3.1"):
        predict_linf_limit([1, 2], 1.0, 0.5, 1)
    bad = [
        (dict(mu=[1, -2]), "mu"),
        (dict(mu=[[1, 2]]), "mu"),
        (dict(mu=[1, np.nan]), "mu"),
        (dict(alpha=[1, 2, 3]), "alpha"),
        (dict(alpha=0.0), "alpha"),
        (dict(rho=-1.0), "rho"),
        (dict(rho=np.inf), "rho"),
        (dict(rho=[1.0]), "rho"),
        (dict(depth=2.0), "depth"),
        (dict(depth=0), "depth"),
        (dict(depth=True), "depth"),
    ]
    for change, name in bad:
        kw = dict(mu=[1.0, 2.0], alpha=1.5, rho=1.0, depth=2) | change
        with pytest.raises(ValueError, match=name):
            predict_linf_limit(**kw)


def _rule_by_products(mu, alpha, rho, depth) -> int:
    """Cor 3.5 read directly, in plain floats: the largest index maximizing
    ``mu_j (alpha_j - rho)^(L-2)`` over ``alpha_j > rho``; -1 if none."""
    best, arg = -1.0, -1
    for j, (m, a) in enumerate(zip(mu, alpha, strict=True)):
        if a > rho and m * (a - rho) ** (depth - 2) >= best * (1 - 1e-12):
            best, arg = max(best, m * (a - rho) ** (depth - 2)), j
    return arg


@pytest.mark.parametrize("depth", [2, 3, 4])
def test_predict_limits_on_a_stack(depth):
    """The batched prediction (a (6, 50, d) stack, with ties and alpha_j <= rho rows) agrees
    with Cor 3.5 read in plain floats, and with the scalar call on every row; the stack keeps
    its shape; a stack for the scalar call is refused."""
    rng = np.random.default_rng(10 + depth)
    mu = np.array([1.0, 2.0, 2.0, 0.5])
    alpha = rng.choice([0.5, 1.0, 1.2, 1.4, 2.0, 3.0], size=(6, 50, 4))
    got = predict_linf_limits(mu, alpha, 1.0, depth)
    assert got.shape == (6, 50) and got.dtype.kind == "i"
    for idx in np.ndindex(6, 50):
        assert got[idx] == _rule_by_products(mu, alpha[idx], 1.0, depth)
        single = predict_linf_limit(mu, alpha[idx], 1.0, depth)
        assert (-1 if single is None else single) == got[idx]
    assert set(got.ravel().tolist()) == {-1, 0, 1, 2, 3}  # every outcome occurs
    with pytest.raises(ValueError, match="alpha"):
        predict_linf_limit(mu, alpha, 1.0, depth)
    with pytest.raises(ValueError, match="alpha"):
        predict_linf_limits(mu, alpha[..., :3], 1.0, depth)


# --------------------------------------------------------------------------- vs simulate


def test_observed_matches_hand_cases():
    """Simulated l_inf-SAM flows end dominated by the predicted j*: L=2 (1, not the major
    coordinate 2, which slides at 0) and L=3 (0, blow-up with status 1 at tau = 1/(1*2) = 0.5)."""
    t2 = run((1, 2, 3), "linf-sam", 2, (1.5, 1.1, 0.5), 1.0, 6.0)
    assert t2.status == 0
    assert observed_linf_limit(t2) == 1 == predict_linf_limit([1, 2, 3], [1.5, 1.1, 0.5], 1.0, 2)
    assert t2.sign_beta[-1, 2] == 0  # the major coordinate slid to 0 (Thm 3.2)
    t3 = run((1, 2), "linf-sam", 3, (3.0, 1.2), 1.0, 1.0)
    assert t3.status == 1 and t3.blowup_time == pytest.approx(0.5, rel=1e-6)
    assert observed_linf_limit(t3) == 0 == predict_linf_limit([1, 2], [3.0, 1.2], 1.0, 3)


def random_case(seed: int, depth: int):
    """A random l_inf-SAM case whose outcome is decidable on a short horizon: mu gaps >= 0.3,
    |alpha_j - rho| >= 0.2 rho, and (L=3) blow-up times separated by a factor >= 1.3."""
    rng = np.random.default_rng(seed)
    while True:
        mu = np.round(np.sort(rng.uniform(0.5, 3.0, 3)), 3)
        rho = float(np.round(rng.uniform(0.5, 1.5), 3))
        alpha = np.round(rho * rng.uniform(0.5, 2.0, 3), 3)
        if np.min(np.diff(mu)) < 0.3 or np.min(np.abs(alpha - rho)) < 0.2 * rho:
            continue
        if depth == 2:
            return mu, alpha, rho, 8.0
        blow = np.sort(linf_sam(mu, alpha, rho, depth, [0.0]).blowup_time)
        if np.isinf(blow[0]):
            return mu, alpha, rho, 3.0
        if blow[1] >= 1.3 * blow[0] and blow[0] < 3.0:
            return mu, alpha, rho, 1.2 * blow[0]


@pytest.mark.parametrize("depth,seed", [(2, 1), (2, 5), (3, 2)])
def test_observed_matches_prediction_random(depth, seed):
    """Seeded random cases: observed_linf_limit(simulate(linf-sam)) == predict_linf_limit.
    (L=2: the predicted coordinate must also lead the exact solution by a factor e at the
    horizon, so the comparison is decidable.)"""
    mu, alpha, rho, t_max = random_case(seed, depth)
    predicted = predict_linf_limit(mu, alpha, rho, depth)
    if depth == 2 and predicted is not None:
        exact = linf_sam(mu, alpha, rho, depth, [t_max]).log_abs_beta[0]
        runner_up = np.max(np.delete(exact, predicted))
        assert exact[predicted] > runner_up + 1 and exact[predicted] > np.log(10 * 2**2 * rho**2)
    traj = run(tuple(mu), "linf-sam", depth, tuple(alpha), rho, t_max)
    assert traj.success
    assert observed_linf_limit(traj) == predicted
    if depth == 3 and predicted is not None:
        assert traj.status == 1
        assert traj.blowup_time == pytest.approx(
            linf_sam(mu, alpha, rho, depth, [0.0]).blowup_time[predicted], rel=1e-4
        )


def test_observed_none_when_bounded():
    """No alpha_j > rho: L=2 every coordinate slides at 0 (beta = 0); L=3 beta -> rho^3 stays
    bounded; observed_linf_limit is None for both, like the prediction."""
    mu, alpha = (1.0, 2.0, 3.0), (0.5, 0.7, 0.9)
    t2 = run(mu, "linf-sam", 2, alpha, 1.0, 3.0)
    assert np.all(t2.sign_beta[-1] == 0)
    assert observed_linf_limit(t2) is None
    t3 = run(mu, "linf-sam", 3, alpha, 1.0, 5.0)
    assert np.max(t3.log_abs_beta[-1]) < 0  # beta_j < rho^3 = 1
    assert observed_linf_limit(t3) is None
    assert (
        predict_linf_limit(mu, alpha, 1.0, 2) is None
        and predict_linf_limit(mu, alpha, 1.0, 3) is None
    )
    est = final_direction(t3)  # algebraic approach to rho^3: rise < growth_tol over the window
    assert 0 < est.growth < 0.05 and not est.diverged and not est.collapsed
    # with a bound below rho^3 the same run counts as "dominated": the bound is what decides
    assert observed_linf_limit(t3, log_bound=-10.0) == 2


# --------------------------------------------------------------------------- final direction


def test_final_direction_gd_l2_is_e_d():
    """GD, L=2, single example mu=(1,2,3): the final direction is the l1 max-margin e_d
    (angle < 1e-4 at tau=6, where beta_2/beta_3 = e^-12), it barely moves over the last 20 %
    (< 1e-3 rad), diverges and does not collapse; angle_series to e_d decreases from
    arccos(1/sqrt 3)."""
    traj = run((1, 2, 3), "gd", 2, 1.0, None, 6.0)
    est = final_direction(traj)
    assert isinstance(est, LimitEstimate)
    e_d = np.eye(3)[2]
    ref = max_margin(single_example([1, 2, 3]), p=1).direction
    np.testing.assert_allclose(ref, e_d, atol=1e-14)
    assert est.angle_to(ref) < 1e-4
    assert 0 <= est.movement < 1e-3
    assert est.diverged and not est.collapsed and est.leader == 2
    assert est.growth == pytest.approx(
        2 * 3 * (traj.t[-1] - traj.t[traj.t >= 0.8 * 6][0]), rel=1e-4
    )
    series = angle_series(traj, e_d)
    assert series[0] == pytest.approx(np.arccos(1 / np.sqrt(3)), rel=1e-12)
    assert np.all(np.diff(series) < 0) and series[-1] == pytest.approx(est.angle_to(e_d))


def test_final_direction_linf_minor_limit():
    """l_inf-SAM L=2 hand case: the final direction is e_1 (a minor coordinate), far from the
    l1 max-margin e_2 (Cor 3.5 vs GD); its movement diagnostic equals the largest angle between
    the exact (closed-form) directions over the last 20 % of the run (~1e-3 rad)."""
    mu, alpha = [1.0, 2.0, 3.0], [1.5, 1.1, 0.5]
    traj = run(tuple(mu), "linf-sam", 2, tuple(alpha), 1.0, 6.0)
    est = final_direction(traj)
    assert est.angle_to(np.eye(3)[1]) < 1e-3
    assert est.angle_to(np.eye(3)[2]) == pytest.approx(np.pi / 2, abs=1e-3)
    window = traj.t[traj.t >= 0.8 * traj.t[-1]]
    exact = linf_sam(mu, alpha, 1.0, 2, window)
    dirs = exact.beta / np.linalg.norm(exact.beta, axis=1, keepdims=True)
    expected = max(np.arccos(np.clip(dirs[-1] @ u, -1, 1)) for u in dirs)
    assert est.movement == pytest.approx(expected, rel=1e-3)
    assert est.diverged and not est.collapsed


def test_collapsed_flag_l2_sam():
    """l2-SAM, L=2, alpha=0.05, mu=(1..5), rho=1 collapses to beta = 0 (regime 1): the
    collapsed flag is set, the direction is 0 (angles nan), it is not 'diverged' and
    observed_linf_limit is None."""
    traj = run((1, 2, 3, 4, 5), "l2-sam", 2, 0.05, 1.0, 0.2)
    est = final_direction(traj)
    assert est.collapsed and not est.diverged
    assert traj.collapse_time is not None
    assert not np.any(est.direction) and est.leader is None
    assert np.isnan(est.movement) and np.isnan(est.angle_to(np.ones(5)))
    assert np.isnan(angle_series(traj, np.ones(5))[-1])
    assert observed_linf_limit(traj) is None


def test_final_direction_validation():
    """window outside (0, 1] and a reference of the wrong length -> ValueError."""
    traj = run((1, 2, 3), "gd", 2, 1.0, None, 6.0)
    for w in (0.0, -0.1, 1.5, np.nan, True):
        with pytest.raises(ValueError, match="window"):
            final_direction(traj, window=w)
    with pytest.raises(ValueError, match="reference"):
        angle_series(traj, [1.0, 0.0])
    assert final_direction(traj, window=1.0).movement == pytest.approx(
        np.arccos(1 / np.sqrt(3)), rel=1e-3
    )


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("rtol", [np.nan, -1e-3, np.inf, 1.0, "a", None, True])
def test_predict_rejects_bad_rtol(rtol):
    """rtol must be a finite number in [0, 1), NaN included (ValueError naming rtol)."""
    with pytest.raises(ValueError, match="rtol"):
        predict_linf_limit([1.0, 2.0], [1.0, 1.0], 0.5, 2, rtol=rtol)


def test_limits_validation_names_the_parameter():
    """Every public function of analysis.limits rejects bad input with a ValueError naming the
    parameter (also for non-numbers and non-trajectories)."""
    traj = run((1, 2, 3), "gd", 2, 1.0, None, 6.0)
    cases = [
        (lambda: linf_limit_scores([1, 2], 1.0, "a", 2), "rho"),
        (lambda: linf_limit_scores([1, 2], 1.0, None, 2), "rho"),
        (lambda: linf_limit_scores([1, 2], "x", 0.5, 2), "alpha"),
        (lambda: linf_limit_scores([1, 2], 1.0, 0.5, 10**400), "depth"),
        (lambda: final_direction(traj, growth_tol="a"), "growth_tol"),
        (lambda: final_direction(traj, growth_tol=np.nan), "growth_tol"),
        (lambda: final_direction(traj, window="0.5"), "window"),
        (lambda: final_direction(None), "traj"),
        (lambda: angle_series("x", [1.0, 0.0, 0.0]), "traj"),
        (lambda: angle_series(traj, [1.0, np.nan, 0.0]), "reference"),
        (lambda: observed_linf_limit(traj, log_bound=np.nan), "log_bound"),
        (lambda: observed_linf_limit(traj, log_bound="big"), "log_bound"),
        (lambda: observed_linf_limit(object()), "traj"),
    ]
    for call, name in cases:
        with pytest.raises(ValueError, match=name):
            call()
