"""Tests of flows.discrete.iterate: theta_{k+1} = theta_k - eta grad L(theta_k + eps(theta_k)).

The discrete iterates at t = k eta are an explicit Euler scheme for the original-clock flow, so
they must converge to it with order one in eta (docs/theory.md §2, §5 "discrete SAM closely follows the
SAM flow"). References: ``simulate(..., clock="original")`` at tight tolerance, and for a
sliding mode of l_inf-SAM an independent Filippov reference built from the closed form.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from flows import iterate, simulate, single_example
from flows.results import Cause

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

MU = (1.0, 2.0)
T = 2.0
ETAS = (0.02, 0.01, 0.005)
RECORD_TIMES = np.array([0.5, 1.0, 1.5, 2.0])
CASES = {  # algorithm: (alpha, rho); l_inf-SAM with alpha > rho so that nothing reaches 0
    "gd": (0.5, None),
    "l2-sam": (0.5, 0.3),
    "linf-sam": (0.8, 0.3),
}


@functools.cache
def flow_reference(algorithm: str):
    """The original-clock flow at t = 0, 0.5, ..., 2 (rtol 1e-12)."""
    alpha, rho = CASES[algorithm]
    return simulate(
        single_example(list(MU)),
        algorithm,
        depth=2,
        alpha=alpha,
        rho=rho,
        t_max=T,
        clock="original",
        rtol=1e-12,
        n_points=5,
    )


def discrete_error(algorithm: str, eta: float) -> float:
    """max over t in {0.5, 1, 1.5, 2} and j of |log beta_j(discrete) - log beta_j(flow)|."""
    alpha, rho = CASES[algorithm]
    every = int(round(0.5 / eta))
    run = iterate(
        single_example(list(MU)),
        algorithm,
        depth=2,
        alpha=alpha,
        rho=rho,
        eta=eta,
        steps=int(round(T / eta)),
        record_every=every,
    )
    assert run.status == 0, run.message
    np.testing.assert_allclose(run.t, np.r_[0.0, RECORD_TIMES], rtol=1e-12)
    flow = flow_reference(algorithm)
    assert flow.status == 0
    np.testing.assert_allclose(flow.t[1:], RECORD_TIMES, rtol=1e-15)
    assert np.all(run.beta > 0) and np.all(flow.sign_beta == 1)
    return float(np.max(np.abs(run.log_abs_beta[1:] - flow.log_abs_beta[1:])))


@pytest.mark.parametrize("algorithm", sorted(CASES))
def test_iterate_converges_to_original_clock_flow_with_order_one(algorithm):
    """Claim: discrete GD / l2-SAM / l_inf-SAM is a first-order scheme for the original-clock
    flow (L = 2, mu = (1, 2), T = 2): halving eta halves the error (ratios in [1.8, 2.2]) and
    the error decreases."""
    errors = [discrete_error(algorithm, eta) for eta in ETAS]
    assert errors[0] > errors[1] > errors[2] > 0
    ratios = [errors[0] / errors[1], errors[1] / errors[2]]
    assert all(1.8 <= r <= 2.2 for r in ratios), (errors, ratios)
    assert errors[-1] < 5e-3  # and the flow is followed closely


def test_iterate_initial_state_and_balance():
    """Claim: the run starts at theta = alpha (step 0, t = 0), t = steps * eta, and balanced layers
    stay equal under every algorithm's update (the symmetry of the model)."""
    data = single_example([1.0, 2.0, 3.0])
    for algorithm, kw in [
        ("gd", {}),
        ("l2-sam", dict(rho=0.2)),
        ("linf-sam", dict(rho=0.2)),
        ("usam", dict(rho=0.2)),
        ("le-sam", dict(sigma=0.1, rho_max=0.3)),
    ]:
        run = iterate(
            data,
            algorithm,
            depth=3,
            alpha=[0.3, 0.5, 0.7],
            eta=0.01,
            steps=30,
            record_every=10,
            **kw,
        )
        assert run.status == 0
        np.testing.assert_array_equal(run.steps, [0, 10, 20, 30])
        np.testing.assert_allclose(run.t, run.steps * 0.01, rtol=1e-15)
        np.testing.assert_array_equal(run.theta[0], np.tile([0.3, 0.5, 0.7], (3, 1)))
        for layer in (1, 2):
            np.testing.assert_allclose(run.theta[:, layer], run.theta[:, 0], rtol=1e-14)
        np.testing.assert_allclose(run.beta, np.prod(run.theta, axis=1), rtol=1e-15)


@pytest.mark.parametrize("eta", [0.0, -0.1, np.nan, np.inf])
def test_iterate_rejects_bad_eta(eta):
    """Claim: iterate validates eta > 0 (finite), with a ValueError naming 'eta'."""
    with pytest.raises(ValueError, match="eta"):
        iterate(single_example([1.0, 2.0]), "gd", eta=eta, steps=10)


@pytest.mark.parametrize("steps", [0, -3, 2.5, True, "10"])
def test_iterate_rejects_bad_steps(steps):
    """Claim: iterate validates steps >= 1 (an integer), with a ValueError naming 'steps'."""
    with pytest.raises(ValueError, match="steps"):
        iterate(single_example([1.0, 2.0]), "gd", eta=0.01, steps=steps)


# --------------------------------------------------------------------------- sliding mode

SLIDE = dict(mu=np.array([2.0, 3.0]), alpha=np.array([0.1, 0.6]), rho=0.5, T=0.8)


def filippov_reference() -> float:
    """log beta_2(T) of the Filippov l_inf-SAM flow, original clock, L = 2, from the closed form.

    Rescaled clock: a_j = rho + (alpha_j - rho) e^{mu_j tau} until a_1 hits 0 at
    tau_hit = log(rho / (rho - alpha_1)) / mu_1, then a_1 = 0. Original clock:
    dtau/dt = c = sigmoid(-m') with m' the margin at the perturbed point: before the hit
    m' = sum_j mu_j (a_j - rho)^2; on the sliding mode both one-sided perturbed points have
    a'_1 = -+rho, so m' = mu_1 rho^2 + mu_2 (a_2 - rho)^2.
    """
    mu, alpha, rho, T = SLIDE.values()
    hit = np.log(rho / (rho - alpha[0])) / mu[0]

    def m_perturbed(tau):
        b = (alpha - rho) * np.exp(mu * tau)
        if tau < hit:
            return float(np.sum(mu * b**2))
        return float(mu[0] * rho**2 + mu[1] * b[1] ** 2)

    sol = solve_ivp(
        lambda t, y: [1.0 / (1.0 + np.exp(m_perturbed(y[0])))],
        (0.0, T),
        [0.0],
        method="DOP853",
        rtol=1e-12,
        atol=1e-14,
    )
    tau = sol.y[0, -1]
    return 2.0 * float(np.log(rho + (alpha[1] - rho) * np.exp(mu[1] * tau)))


def sliding_errors(reference: float) -> list[float]:
    mu, alpha, rho, T = SLIDE.values()
    errors = []
    for eta in (0.004, 0.002, 0.001):
        run = iterate(
            single_example(mu),
            "linf-sam",
            depth=2,
            alpha=alpha,
            rho=rho,
            eta=eta,
            steps=int(round(T / eta)),
            record_every=int(round(T / eta)),
        )
        assert run.status == 0
        assert abs(run.beta[-1, 0]) < 1e-5  # coordinate 1 chatters at 0 (amplitude O(eta))
        errors.append(abs(run.log_abs_beta[-1, 1] - reference))
    return errors


def test_discrete_linf_sam_through_sliding_converges_to_filippov_flow():
    """Claim: once a coordinate of l_inf-SAM slides at 0 (L = 2, alpha_1 < rho), the discrete
    iterates still converge with order one to the Filippov flow in original time (independent
    reference from the closed form; see filippov_reference)."""
    errors = sliding_errors(filippov_reference())
    assert errors[0] > errors[1] > errors[2]
    assert all(1.7 <= a / b <= 2.3 for a, b in zip(errors[:-1], errors[1:], strict=True)), errors
    assert errors[-1] < 5e-4


def test_discrete_linf_sam_through_sliding_converges_to_simulate():
    """Claim (docs/theory.md §14): discrete l_inf-SAM follows simulate(..., clock='original') also after a
    coordinate starts sliding: the error decreases like eta."""
    mu, alpha, rho, T = SLIDE.values()
    flow = simulate(
        single_example(mu),
        "linf-sam",
        depth=2,
        alpha=alpha,
        rho=rho,
        t_max=T,
        clock="original",
        rtol=1e-12,
        n_points=2,
    )
    assert flow.times_of("sliding")
    errors = sliding_errors(float(flow.log_abs_beta[-1, 1]))
    assert errors[0] > errors[1] > errors[2]
    assert all(1.7 <= a / b <= 2.3 for a, b in zip(errors[:-1], errors[1:], strict=True)), errors
    assert errors[-1] < 5e-4


# --------------------------------------------------------------------------- overflow


def test_iterate_overflow_of_beta_at_step_0_is_a_failure():
    """Claim: when beta = prod_l theta^(l) is not representable (alpha = 1e200, L = 3:
    beta = 1e600) the run fails (status -1) at step 0, says where and why, and keeps the
    (finite) initial iterate instead of reporting success with beta = inf."""
    with warnings.catch_warnings():  # no overflow warning on the way (there was one)
        warnings.simplefilter("error")
        run = iterate(single_example([1.0, 2.0, 3.0]), "gd", 3, 1e200, eta=1e-3, steps=10)
    assert run.cause is Cause.OVERFLOW and run.status == -1
    assert "step 0" in run.message and "beta" in run.message
    np.testing.assert_array_equal(run.steps, [0])
    np.testing.assert_array_equal(run.theta[0], np.full((3, 3), 1e200))
    assert np.isnan(run.loss[0])  # not the valid-looking 0 of an infinite margin


def test_iterate_overflow_mid_run_keeps_the_last_finite_iterate():
    """Claim: an overflow at step k > 0 gives status -1 with 'step k' in the message; the
    iterates recorded so far are kept, plus the last finite one (step k - 1) even when
    record_every skips it, and nothing non-finite is returned. (GD, exponential loss, a signed
    init with margin -1 and eta = 1 overshoots: beta = -1, -(e - 1)^2 = -2.95, -973, where the
    loss e^973 overflows, then theta = +-inf.)"""
    run = iterate(
        single_example([1.0]),
        "gd",
        depth=2,
        alpha=np.array([[1.0], [-1.0]]),
        eta=1.0,
        steps=10,
        record_every=5,
        loss="exponential",
    )
    assert run.cause is Cause.OVERFLOW and run.status == -1
    assert "step 2" in run.message and "loss" in run.message
    np.testing.assert_array_equal(run.steps, [0, 1])
    assert np.all(np.isfinite(run.theta)) and np.all(np.isfinite(run.beta))
    assert np.all(np.isfinite(run.loss))
    np.testing.assert_allclose(run.beta[-1], [-((np.e - 1) ** 2)], rtol=1e-12)


def test_iterate_caps_the_steps_and_the_recorded_memory():
    """A run beyond the step cap, or whose recorded iterates would not fit the memory cap, is a
    ValueError naming the parameter before any step; within the caps it runs."""
    from flows.discrete import MAX_RECORDED_FLOATS, MAX_STEPS

    data = single_example([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"steps must be at most"):
        iterate(data, "gd", 2, 0.5, eta=0.1, steps=10**12)
    steps = MAX_STEPS  # allowed as a count, but recording every step: 3 * 2 * 2 * 1e8 floats
    assert (steps + 2) * 2 * 6 > MAX_RECORDED_FLOATS
    with pytest.raises(ValueError, match=r"record_every"):
        iterate(data, "gd", 2, 0.5, eta=0.1, steps=steps)
    run = iterate(data, "gd", 2, 0.5, eta=0.1, steps=50, record_every=10)
    assert run.steps.tolist() == [0, 10, 20, 30, 40, 50]
