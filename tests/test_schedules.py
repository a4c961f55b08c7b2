"""Schedules: hyper-parameters that change with the clock time (flows.schedules).

Checked against definitions and an independent integration: the named schedules' formulas,
a constant schedule giving exactly the numbers of a float, LE-SAM with a warm-up + cosine
loss budget against the reduced system of the single example integrated by scipy with its own
formulas, a plain lambda integrated as given, and bad schedules rejected by name.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.special import expit

from flows import iterate, simulate, single_example
from flows.results import Cause
from flows.schedules import constant, cosine, lesam_official, parse, warmup_cosine

MU = np.array([1.0, 2.0, 3.0, 4.0, 5.0])


def test_named_schedules_follow_their_definitions():
    """Values at chosen times, the kinks and the maximum, against the formulas written out."""
    s = warmup_cosine(0.35, 2.0, 6.0, 10.0)
    t = np.array([0.0, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0])
    want = [0.0, 0.175, 0.35, 0.35, 0.35, 0.35 * 0.5 * (1 + np.cos(np.pi * 0.5)), 0.0, 0.0]
    np.testing.assert_allclose(s(t), want, atol=1e-15)
    assert s.kinks == (2.0, 6.0, 10.0) and s.maximum == 0.35
    assert float(s(3.3)) == pytest.approx(0.35)
    c = cosine(2.0, 4.0)
    np.testing.assert_allclose(c(np.array([0.0, 2.0, 4.0, 5.0])), [2.0, 1.0, 0.0, 0.0], atol=1e-15)
    assert constant(0.7)(123.0) == 0.7 and constant(0.7).kinks == ()
    assert parse("warmup_cosine:0.35,2,6,10") == s and parse("0.5") == 0.5


@pytest.mark.parametrize(
    "text,name",
    [
        ("warmup_cosine:0.35,6,2,10", "sigma"),
        ("cosine:-1,3", "sigma"),
        ("nope:1", "sigma"),
        ("cosine:1", "sigma"),
        ("abc", "sigma"),
    ],
)
def test_bad_schedules_are_rejected_by_name(text, name):
    with pytest.raises(ValueError, match=name):
        parse(text, name)


def test_constant_schedule_gives_the_numbers_of_a_float():
    """A constant schedule and the float: the same path, bit for bit."""
    data = single_example(MU)
    a = simulate(data, "l2-sam", 2, 0.4, rho=1.0, t_max=5.0, n_points=51)
    b = simulate(data, "l2-sam", 2, 0.4, rho=constant(1.0), t_max=5.0, n_points=51)
    np.testing.assert_array_equal(a.log_abs_beta, b.log_abs_beta)
    np.testing.assert_array_equal(a.log_t_original, b.log_t_original)


def le_sam_reference(
    sigma, rho_max: float, alpha: float, tau: np.ndarray, kinks: tuple[float, ...]
) -> np.ndarray:
    """log|beta| of LE-SAM, L = 2, one example, logistic loss, from its definition:
    a' = a (1 - rho_t mu / N), N = ||grad m|| = (2 sum mu^2 a^2)^(1/2), rho_t = min(sigma(tau) /
    (||grad L|| + 1e-12), rho_max), ||grad L|| = sigmoid(-m) N, m = sum mu a^2; da/dtau = mu a'.
    Integrated piece by piece between the kinks (scipy DOP853, rtol 1e-12)."""

    def rhs(t, u):
        a = np.exp(u)
        norm = np.sqrt(2.0 * np.sum(MU**2 * a**2))
        grad_norm = expit(-np.sum(MU * a * a)) * norm
        rho_t = min(float(sigma(t)) / (grad_norm + 1e-12), rho_max)
        return MU * (1.0 - rho_t * MU / norm)

    edges = [0.0, *[k for k in kinks if 0 < k < tau[-1]], tau[-1]]
    u = np.full(MU.size, np.log(alpha))
    out = np.empty((len(tau), MU.size))
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        inside = (tau >= lo) & (tau <= hi)
        sol = solve_ivp(
            rhs,
            (lo, hi),
            u,
            method="DOP853",
            rtol=1e-12,
            atol=1e-12,
            t_eval=tau[inside],
            dense_output=True,
        )
        out[inside] = 2.0 * sol.y.T
        u = sol.sol(hi)
    return out


def test_le_sam_with_warmup_cosine_budget_matches_independent_integration():
    """LE-SAM, sigma = warmup_cosine(0.5, 1, 3, 5), rho_max = 2: log|beta| to 1e-7 against
    the reduced system integrated from the definition; the segments restart at the kinks."""
    sigma = warmup_cosine(0.5, 1.0, 3.0, 5.0)
    tr = simulate(
        single_example(MU), "le-sam", 2, 0.4, sigma=sigma, rho_max=2.0, t_max=6.0, n_points=61
    )
    assert tr.status == 0
    ref = le_sam_reference(sigma, 2.0, 0.4, tr.tau, sigma.kinks)
    assert np.max(np.abs(tr.log_abs_beta - ref)) <= 1e-7


def test_plain_callable_is_integrated_as_given():
    """A lambda with the same formula as the named schedule (no kinks known to the engine):
    the same path to 1e-6 (the solver steps over the kinks with its error control)."""
    sigma = warmup_cosine(0.5, 1.0, 3.0, 5.0)
    named = simulate(
        single_example(MU),
        "le-sam",
        2,
        0.4,
        sigma=sigma,
        rho_max=2.0,
        t_max=6.0,
        n_points=61,
        original_time=False,
    )
    plain = simulate(
        single_example(MU),
        "le-sam",
        2,
        0.4,
        sigma=lambda t: float(sigma(t)),
        rho_max=2.0,
        t_max=6.0,
        n_points=61,
        original_time=False,
    )
    assert plain.status == 0 and np.max(np.abs(plain.log_abs_beta - named.log_abs_beta)) <= 1e-6


@pytest.mark.parametrize("backend", ["numpy", "auto"])
def test_max_nfev_holds_across_the_segments_of_many_kinks(backend):
    """A staircase of 10,000 epochs restarts the segments at every kink; with max_nfev = 2000
    the run spent 140,447 evaluations (18 s) and ended with status 0. Each short segment
    counts against the same budget: the run stops with status -1 once it is spent, within a
    segment's start and one step of it (DOP853: 2 + 12 evaluations, 12 more per rejected
    attempt; measured 2001)."""
    sigma = lesam_official(0.3, 2, 5, 10_000, 1, 0.001)
    tr = simulate(single_example(MU), "le-sam", 2, 1.0, t_max=10.0, max_nfev=2000, sigma=sigma,
                  rho_max=1.0, backend=backend)  # fmt: skip
    assert tr.status == -1 and tr.cause is Cause.BUDGET_SPENT, tr.message
    assert 2000 < tr.nfev <= 2000 + 100
    assert "max_nfev=2000" in tr.message and tr.t[-1] < 10.0


def test_schedule_for_a_fixed_hyperparameter_or_a_bad_value_is_refused():
    """varrho cannot be a schedule; a schedule that returns a negative value stops the call with
    a ValueError naming the hyper-parameter."""
    with pytest.raises(ValueError, match="varrho"):
        simulate(
            single_example(MU), "le-sam", 2, 0.4, sigma=0.5, rho_max=1.0, varrho=lambda t: 1e-12
        )
    with pytest.raises(ValueError, match="rho"):
        simulate(single_example(MU), "l2-sam", 2, 0.4, rho=lambda t: -1.0, t_max=1.0)


def test_iterate_with_a_schedule_uses_the_value_at_each_step():
    """Discrete l2-SAM with rho = cosine(1, T): step k uses rho(k eta). Checked against the
    iteration written out here (plain numpy, L = 2, one example)."""
    from flows import iterate

    eta, steps = 0.01, 200
    rho = cosine(1.0, 1.5)
    run = iterate(single_example(MU), "l2-sam", 2, 0.4, rho=rho, eta=eta, steps=steps)
    theta = np.full((2, MU.size), 0.4)
    for k in range(steps):
        g = -expit(-np.sum(MU * theta[0] * theta[1])) * MU * theta[::-1]  # grad L
        point = theta + float(rho(k * eta)) * g / np.sqrt(np.sum(g * g))
        theta = theta + eta * expit(-np.sum(MU * point[0] * point[1])) * MU * point[::-1]
    np.testing.assert_allclose(run.theta[-1], theta, rtol=1e-12)


BAD_SCHEDULES = {
    "returns a string": (lambda t: "abc", "must return a real number"),
    "returns None": (lambda t: None, "must return a real number"),
    "returns a list": (lambda t: [1.0, 2.0], "must return a real number"),
    "returns a bool": (lambda t: True, "must return a real number"),
    "returns a complex": (lambda t: 1j, "must return a real number"),
    "takes no argument": (lambda: 1.0, "raised TypeError"),
    "raises": (lambda t: 1 / 0, "raised ZeroDivisionError"),
}


@pytest.mark.parametrize("case", list(BAD_SCHEDULES))
def test_a_bad_schedule_callable_is_a_value_error_naming_it(case):
    """A schedule whose value is not a finite real number, or that raises, is a ValueError
    naming the hyper-parameter and the time, in simulate, in iterate and at a batch of times."""
    from flows.algorithms import hyperparameters_at

    schedule, words = BAD_SCHEDULES[case]
    data = single_example([1.0, 2.0])
    calls = [
        lambda: simulate(data, "l2-sam", 2, 0.5, rho=schedule, t_max=0.5, n_points=3),
        lambda: iterate(data, "l2-sam", 2, 0.5, rho=schedule, eta=0.1, steps=3),
        lambda: hyperparameters_at({"rho": schedule}, np.array([[[0.0]], [[0.5]]])),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=rf"schedule of rho {words}.* at time"):
            call()


@pytest.mark.parametrize(
    "text", ["cosine:1,,2", "constant:1,", "constant:", "warmup_cosine:1,2,,4"]
)
def test_schedule_strings_with_an_empty_argument_are_refused(text):
    """``parse`` (the API and ``--rho``) takes no empty argument (it does not drop one)."""
    with pytest.raises(ValueError, match=r"rho: an empty argument"):
        parse(text, "rho")


def test_multistep_is_pytorchs_step_decay():
    """``value * gamma^m``, m = ``bisect_right(milestones, t)`` (PyTorch's ``MultiStepLR``:
    ``get_lr`` multiplies by gamma when the epoch reaches a milestone)."""
    from bisect import bisect_right

    from flows.schedules import from_spec, multistep

    milestones = [0.5, 2.0, 2.5, 7.0]
    schedule = multistep(0.3, milestones, gamma=0.2)
    times = np.concatenate([milestones, np.nextafter(milestones, -1.0), [0.0, 1.0, 9.0]])
    expected = [0.3 * 0.2 ** bisect_right(milestones, t) for t in times]
    np.testing.assert_allclose([schedule(float(t)) for t in times], expected, rtol=1e-15)
    np.testing.assert_allclose(schedule(times), expected, rtol=1e-15)
    assert schedule.kinks == tuple(milestones)
    assert schedule.maximum == 0.3 and multistep(1.0, [1, 2], gamma=3.0).maximum == 9.0
    assert parse("multistep:0.3,0.2,0.5,2,2.5,7") == schedule == from_spec(schedule.spec())


@pytest.mark.parametrize(
    "text,name",
    [
        ("multistep:0.1,0.5,3,2", "increasing"),
        ("multistep:0.1,0.5,2,2", "increasing"),
        ("multistep:0.1,-0.5,2", "gamma"),
        ("multistep:0.1", "milestones"),
        ("multistep:0.1,0.5,-1", "increasing"),
    ],
)
def test_bad_multistep_is_refused(text, name):
    with pytest.raises(ValueError, match=name):
        parse(text, "eta")


def test_iterate_with_a_multistep_step_size_decays_at_the_milestone_steps():
    """GD on a small regression (loss (1/n) sum r_i^2 / 2) with
    ``eta = multistep(0.05, [k1 eta, k2 eta], 0.1)``: the
    steps ``k >= k1`` take 0.005, from ``k2`` on 0.0005 (the loop written out here)."""
    from flows.data import Dataset
    from flows.schedules import multistep

    rng = np.random.default_rng(2)
    X = rng.standard_normal((6, 4))
    y = X @ np.array([1.0, 0.0, -0.5, 0.0])
    eta0, k1, k2, steps = 0.05, 40, 70, 100
    run = iterate(Dataset(X, y, task="regression"), "gd", 2, [[0.3] * 4, [0.2] * 4], steps=steps,
                  eta=multistep(eta0, [k1 * eta0, k2 * eta0], gamma=0.1))  # fmt: skip
    u, v = np.full(4, 0.3), np.full(4, 0.2)
    for k in range(steps):
        rate = eta0 * 0.1 ** ((k >= k1) + (k >= k2))
        r = X @ (u * v) - y
        g = X.T @ r / len(y)
        u, v = u - rate * g * v, v - rate * g * u
    np.testing.assert_allclose(run.theta[-1], [u, v], rtol=1e-12)
