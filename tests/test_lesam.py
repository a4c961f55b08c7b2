"""Tests of analysis.lesam: LE-SAM's radius along a flow, the stall equilibrium, the regime
classification and its boundaries, and comparisons at equal loss.

References that share no code with the module: the radius and loss increase written out by hand
from flows.model.loss_gradient / loss_value (float arithmetic) and the schedule formula typed in
here; the stall equation solved on a grid; the engine's own field at the stall point and at the
initialization; l2-SAM runs (LE-SAM with a huge budget and rho_max = rho *is* l2-SAM) and
analysis.regimes' l2-SAM classification; the analytic regime-3 boundary.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import analysis.lesam.regimes as lesam_regimes
from analysis.lesam.boundaries import lesam_boundary, scan_regimes
from analysis.lesam.perturbation import log_gradient_norms, perturbation_along
from analysis.lesam.radius import initial_gradient_norm, lesam_radius
from analysis.lesam.regimes import classify_lesam, initial_lesam_rates
from analysis.lesam.stall import M_PEAK, SIGMA_CRITICAL, stall_point
from analysis.loss_levels import at_loss_levels
from analysis.regimes.classification import classify as classify_l2
from flows import simulate, single_example
from flows.algorithms import ALGORITHMS
from flows.clocks import CLOCKS
from flows.field import Problem, log_growth_rates
from flows.model import LOSSES, loss_gradient, loss_value
from flows.schedules import warmup_cosine
from flows.signedlog import SignedLog

MU5 = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
DATA5 = single_example(MU5)
G0 = 0.3489290400359852  # ||grad L(theta(0))||, alpha = 0.4, L = 2, mu = (1..5) (test below)


def hand_sigma(t: float, value: float, warm: float, hold: float, end: float) -> float:
    """LE-SAM's official schedule written out: linear warm-up, hold, cosine decay to 0."""
    if t < warm:
        return value * t / warm
    if t < hold:
        return value
    if t < end:
        return 0.5 * value * (1.0 + np.cos(np.pi * (t - hold) / (end - hold)))
    return 0.0


def hand_eps(theta: np.ndarray, algorithm: str, hp: dict) -> np.ndarray:
    """The perturbation from its definition, in floats."""
    g = loss_gradient(theta, DATA5)
    norm = np.linalg.norm(g)
    if algorithm == "l2-sam":
        return hp["rho"] * g / norm
    if algorithm == "usam":
        return hp["rho"] * g
    rho_t = min(hp["sigma"] / (norm + 1e-12), hp["rho_max"])
    return rho_t * g / norm


@functools.cache
def run(algorithm: str, t_max: float = 3.0, n_points: int = 7, **hp):
    return simulate(
        DATA5,
        algorithm,
        depth=2,
        alpha=0.4,
        t_max=t_max,
        n_points=n_points,
        original_time=False,
        **hp,
    )


# ------------------------------------------------------------------------------- radius


def test_initial_gradient_norm_by_hand():
    a = 0.4
    m = a * a * MU5.sum()
    by_hand = np.sqrt(2.0 * np.sum((MU5 * a) ** 2)) / (1.0 + np.exp(m))
    assert initial_gradient_norm(DATA5, a, 2) == pytest.approx(by_hand, rel=1e-13)
    assert by_hand == pytest.approx(G0, rel=1e-13)


@pytest.mark.parametrize("sigma", [0.35, warmup_cosine(0.35, 0.5, 2.0, 3.0)], ids=["const", "wc"])
def test_rho_t_along_a_flow_equals_the_formula_by_hand(sigma):
    """rho_t, the budget and the first-order increase at each sample, against
    min(sigma(t) / (||grad L|| + varrho), rho_max) with ||grad L|| from loss_gradient."""
    traj = run("le-sam", sigma=sigma, rho_max=3.0)
    series = perturbation_along(traj, DATA5)
    for k, (t, theta) in enumerate(zip(traj.t, traj.theta, strict=True)):
        s = hand_sigma(t, 0.35, 0.5, 2.0, 3.0) if callable(sigma) else 0.35
        norm = np.linalg.norm(loss_gradient(theta, DATA5))
        rho_t = min(s / (norm + 1e-12), 3.0)
        assert series.radius[k] == pytest.approx(rho_t, rel=1e-9, abs=1e-15)
        assert series.budget[k] == pytest.approx(s, rel=1e-12, abs=1e-15)
        assert series.first_order[k] == pytest.approx(rho_t * norm, rel=1e-9, abs=1e-15)
        assert series.log_grad_norm[k] == pytest.approx(np.log(norm), rel=1e-10)
        assert series.capped[k] == (rho_t >= 3.0)
    if callable(sigma):
        assert series.radius[0] == 0.0 and series.radius[-1] == 0.0  # sigma(0) = sigma(end) = 0


@pytest.mark.parametrize(
    "algorithm, hp",
    [("l2-sam", {"rho": 1.0}), ("usam", {"rho": 2.0}), ("le-sam", {"sigma": 0.35, "rho_max": 1.5})],
)
def test_perturbation_series_against_hand_computation(algorithm, hp):
    """Radius, exact loss increase, update angle and relative change from hand-made eps (where
    the float gradient has not underflowed: tau <= 0.4 here)."""
    traj = run(algorithm, t_max=0.4, n_points=6, **hp)
    series = perturbation_along(traj, DATA5)
    for k, theta in enumerate(traj.theta):
        assert np.linalg.norm(loss_gradient(theta, DATA5)) > 1e-200
        eps = hand_eps(theta, algorithm, hp)
        g, g_eps = loss_gradient(theta, DATA5), loss_gradient(theta + eps, DATA5)
        assert series.radius[k] == pytest.approx(np.linalg.norm(eps), rel=1e-9)
        assert series.first_order[k] == pytest.approx(np.sum(eps * g), rel=1e-9)
        assert series.log_loss[k] == pytest.approx(np.log(loss_value(theta, DATA5)), rel=1e-10)
        assert series.log_loss_perturbed[k] == pytest.approx(
            np.log(loss_value(theta + eps, DATA5)), rel=1e-9
        )
        cos = np.sum(g * g_eps) / (np.linalg.norm(g) * np.linalg.norm(g_eps))
        assert series.update_angle[k] == pytest.approx(np.arccos(np.clip(cos, -1, 1)), abs=1e-7)
        assert series.relative_change[k] == pytest.approx(
            np.linalg.norm(g_eps - g) / np.linalg.norm(g), rel=1e-8
        )


def test_gradient_norm_beyond_float_is_finite_in_log():
    """Where loss_gradient underflows to 0 the log norm is still -log(1 + e^m) + log ||grad m||."""
    traj = run("gd", t_max=40.0, n_points=5)
    lg = log_gradient_norms(traj, DATA5)
    theta = traj.theta[-1]
    assert np.linalg.norm(loss_gradient(theta, DATA5)) == 0.0  # underflow in floats
    a = theta[0]
    m = np.sum(MU5 * a * a)
    expected = -np.logaddexp(0.0, m) + 0.5 * np.log(2.0 * np.sum((MU5 * a) ** 2))
    assert np.isfinite(lg[-1]) and lg[-1] == pytest.approx(expected, rel=1e-12)
    assert lesam_radius(lg, 0.35, 3.0)[-1] == 3.0  # rho_t saturates at the cap


def test_lesam_radius_edge_cases_and_errors():
    assert lesam_radius(np.log(0.5), 0.1, 1.0) == pytest.approx(0.1 / (0.5 + 1e-12))
    assert lesam_radius(-np.inf, 0.1, 1.0) == 1.0  # zero gradient: capped
    assert lesam_radius(-np.inf, 0.0, 1.0, varrho=0.0) == 0.0  # no budget, 0 / 0 -> 0
    assert lesam_radius(np.inf, 0.1, 1.0) == 0.0
    np.testing.assert_allclose(
        lesam_radius([0.0, 1.0], [0.1, 0.2], 5.0), [0.1 / (1 + 1e-12), 0.2 / (np.e + 1e-12)]
    )
    for kwargs, word in (
        ({"log_grad_norm": np.nan}, "log_grad_norm"),
        ({"sigma": -1.0}, "sigma"),
        ({"rho_max": np.inf}, "rho_max"),
        ({"varrho": -1e-3}, "varrho"),
        ({"sigma": "x"}, "sigma"),
    ):
        args = {"log_grad_norm": 0.0, "sigma": 0.1, "rho_max": 1.0, **kwargs}
        with pytest.raises(ValueError, match=word):
            lesam_radius(**args)


def test_perturbation_along_checks_its_inputs():
    traj = run("l2-sam", rho=1.0)
    with pytest.raises(ValueError, match="traj"):
        perturbation_along("not a trajectory", DATA5)
    with pytest.raises(ValueError, match="data"):
        perturbation_along(traj, single_example([1.0, 2.0]))
    with pytest.raises(ValueError, match="loss"):
        perturbation_along(traj, DATA5, loss="hinge")


# ------------------------------------------------------------------------- stall point


def test_stall_point_solves_its_equation_and_is_an_equilibrium():
    grid = np.linspace(0.01, 20, 200_001)
    assert SIGMA_CRITICAL == pytest.approx(np.max(2 * grid / (1 + np.exp(grid))), rel=1e-9)
    assert M_PEAK == pytest.approx(grid[np.argmax(2 * grid / (1 + np.exp(grid)))], abs=1e-4)
    s = stall_point(MU5, 0.35, 3.0)
    assert s.margin > M_PEAK and s.admissible
    assert 2 * s.margin / (1 + np.exp(s.margin)) + 1e-12 * np.sqrt(2 * s.margin) == pytest.approx(
        0.35, rel=1e-12
    )
    assert s.radius == pytest.approx(np.sqrt(2 * s.margin / MU5[0]), rel=1e-13)
    # grad L(theta* + eps*) = 0: the flow and the discrete algorithm both stop there
    theta = np.zeros((2, 5))
    theta[:, 0] = s.weight
    eps = hand_eps(theta, "le-sam", {"sigma": 0.35, "rho_max": 3.0})
    assert np.max(np.abs(loss_gradient(theta + eps, DATA5))) < 1e-12
    assert not stall_point(MU5, 0.35, 2.0).admissible  # the cap binds: no equilibrium
    assert stall_point(MU5, SIGMA_CRITICAL * 1.001) is None
    assert stall_point(MU5, 0.0) is None
    for args, word in (
        ((MU5, -0.1), "sigma"),
        (([2.0, 1.0], 0.1), "mu"),
        ((MU5, 0.1, 0.0), "rho_max"),
        ((MU5, 0.1, 1.0, -1.0), "varrho"),
    ):
        with pytest.raises(ValueError, match=word):
            stall_point(*args)


def test_flow_converges_to_the_stall_point():
    traj = run("le-sam", t_max=20.0, n_points=3, sigma=0.35, rho_max=3.0)
    s = stall_point(MU5, 0.35, 3.0)
    assert traj.beta[-1, 0] == pytest.approx(s.beta1, rel=1e-7)
    assert np.all(traj.beta[-1, 1:] < 1e-10)
    assert traj.loss[-1] == pytest.approx(s.loss, rel=1e-7)


def test_initial_rates_match_the_engine_field():
    for sigma, rho_max in ((0.35, 3.0), (0.05, 3.0), (0.35, 0.3)):
        hp = {"sigma": sigma, "rho_max": rho_max, "varrho": 1e-12}
        problem = Problem(
            DATA5, ALGORITHMS["le-sam"], hp, LOSSES["logistic"], np.array([2]), CLOCKS["rescaled"]
        )
        field = log_growth_rates(SignedLog.from_float(np.full((1, 5), 0.4)), problem)[0]
        np.testing.assert_allclose(
            initial_lesam_rates(MU5, 0.4, sigma, rho_max), field, rtol=1e-10, atol=1e-13
        )


# ------------------------------------------------------------------------------ regimes


def test_huge_budget_with_rho_max_rho_is_l2_sam():
    """sigma so large that rho_t = rho_max always: LE-SAM is l2-SAM with rho = rho_max, path and
    classification (against analysis.regimes, which shares no code with classify_lesam)."""
    le = run("le-sam", t_max=6.0, n_points=13, sigma=1e6, rho_max=1.0)
    l2 = run("l2-sam", t_max=6.0, n_points=13, rho=1.0)
    np.testing.assert_allclose(le.log_abs_beta, l2.log_abs_beta, rtol=1e-8, atol=1e-8)
    for alpha, regime in ((0.25, 1), (0.4, 2), (1.0, 3)):
        ours = classify_lesam(MU5, alpha, 1e6, 1.0)
        theirs = classify_l2(MU5, alpha, 1.0)
        assert ours.regime == theirs.regime == regime
        if regime != 1:
            assert ours.leaders.coordinates == theirs.leaders.coordinates


def test_tiny_rho_max_behaves_like_gd():
    """rho_max -> 0: the perturbation vanishes and LE-SAM is GD: e_d from the start."""
    gd = run("gd", t_max=2.0, n_points=9)
    le = run("le-sam", t_max=2.0, n_points=9, sigma=0.35, rho_max=1e-9)
    np.testing.assert_allclose(le.log_abs_beta, gd.log_abs_beta, rtol=1e-7, atol=1e-7)
    c = classify_lesam(MU5, 0.4, 0.35, 1e-9)
    assert c.regime == 3 and c.leaders.coordinates == (4,)


@pytest.mark.parametrize(
    "alpha, sigma, rho_max, regime",
    [
        (0.4, 0.35, 3.0, 5),  # stall on e_1
        (0.4, 1.0, 3.0, 1),  # no stall point (sigma > sigma_c): collapse
        (0.4, 0.1, 1.0, 4),  # major, minor, major
        (0.4, 0.35, 1.0, 2),  # = l2-SAM rho = 1 (rho_t capped throughout): minor first
    ],
)
def test_classify_known_cases(alpha, sigma, rho_max, regime):
    c = classify_lesam(MU5, alpha, sigma, rho_max)
    assert c.regime == regime, c.certificate
    if regime == 5:
        assert c.leaders.coordinates[-1] == 0 and c.final_loss == pytest.approx(
            c.stall.loss, rel=1e-6
        )


def test_boundary_major_first_matches_the_initial_leader_rule():
    """Along rho_max at sigma = ||grad L0|| (rho_0 = rho_max there), the regime-3 boundary is
    N0 / (mu_d + mu_(d-1)) as for l2-SAM; and the stall boundary is the stall radius."""
    n0 = 0.4 * np.sqrt(2 * np.sum(MU5**2))
    b = lesam_boundary(MU5, "rho_max", 0.3, 0.7, alpha=0.4, sigma=G0, rtol=1e-3)
    assert b.converged and (b.regime_lower, b.regime_upper) == (3, 2)
    assert b.lower <= n0 / 9.0 <= b.upper
    s = lesam_boundary(MU5, "rho_max", 1.5, 3.0, alpha=0.4, sigma=G0, rtol=5e-3)
    assert s.converged and (s.regime_lower, s.regime_upper) == (2, 5)
    assert s.lower <= stall_point(MU5, G0).radius <= s.upper


def test_boundary_reports_what_it_cannot_do():
    same = lesam_boundary(MU5, "rho_max", 0.1, 0.2, alpha=0.4, sigma=G0)
    assert not same.converged and "no boundary" in same.note
    capped = lesam_boundary(MU5, "rho_max", 0.3, 0.7, alpha=0.4, sigma=G0, rtol=1e-6, max_iter=4)
    assert not capped.converged and "max_iter" in capped.note and capped.iterations == 4


@pytest.fixture
def no_flow(monkeypatch):
    def boom(*_, **__):
        raise AssertionError("simulated before checking the input")

    monkeypatch.setattr(lesam_regimes, "simulate", boom)


@pytest.mark.parametrize(
    "kwargs, word",
    [
        ({"mu": [1.0]}, "mu"),
        ({"mu": [2.0, 1.0]}, "mu"),
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": np.nan}, "alpha"),
        ({"sigma": -0.1}, "sigma"),
        ({"sigma": warmup_cosine(0.3, 1, 2, 3)}, "sigma"),
        ({"rho_max": 0.0}, "rho_max"),
        ({"varrho": -1.0}, "varrho"),
        ({"t_max": -1.0}, "t_max"),
        ({"n_points": 2}, "n_points"),
        ({"max_extensions": 11}, "max_extensions"),
        ({"rtol": 1e-2}, "rtol"),
    ],
)
def test_classify_checks_inputs_before_any_run(no_flow, kwargs, word):
    args = {"mu": MU5, "alpha": 0.4, "sigma": 0.35, "rho_max": 1.0, **kwargs}
    with pytest.raises(ValueError, match=word):
        classify_lesam(
            args.pop("mu"), args.pop("alpha"), args.pop("sigma"), args.pop("rho_max"), **args
        )


@pytest.mark.parametrize(
    "kwargs, word",
    [
        ({"parameter": "rho"}, "parameter"),
        ({"lower": 0.0}, "lower"),
        ({"upper": 0.1}, "lower"),
        ({"rtol": 0.0}, "rtol"),
        ({"max_iter": 0}, "max_iter"),
        ({"sigma": None}, "sigma"),
    ],
)
def test_boundary_checks_inputs_before_any_run(no_flow, kwargs, word):
    args = {
        "parameter": "rho_max",
        "lower": 0.3,
        "upper": 0.7,
        "alpha": 0.4,
        "sigma": 0.35,
        **kwargs,
    }
    with pytest.raises(ValueError, match=word):
        lesam_boundary(MU5, args.pop("parameter"), args.pop("lower"), args.pop("upper"), **args)


# --------------------------------------------------------------------------- equal loss


def test_at_loss_levels_hand_cases():
    loss = np.array([1.0, 0.1, 0.01, 0.02, 0.001])
    values = 1.0 / loss  # a power law: exact under log-log
    out = at_loss_levels(loss, values, [1.0, 0.1, 0.03, 0.015, 0.0005, 2.0])
    np.testing.assert_allclose(out[:4], [1.0, 10.0, 1 / 0.03, 1 / 0.015], rtol=1e-12)
    assert np.isnan(out[4]) and np.isnan(out[5])  # never reached / above the start
    signed = at_loss_levels([1.0, 0.1], [-1.0, 1.0], [np.sqrt(0.1)])
    assert signed[0] == pytest.approx(0.0, abs=1e-12)  # linear where a value is <= 0
    assert np.isnan(at_loss_levels([1.0, 0.1], [np.nan, 1.0], [0.5])[0])
    for args, word in (
        (([1.0, np.nan], [1, 2], [0.5]), "loss"),
        (([1.0, 0.5], [1], [0.5]), "values"),
        (([1.0, 0.5], [1, 2], [0.0]), "levels"),
        (([[1.0]], [1], [0.5]), "loss"),
    ):
        with pytest.raises(ValueError, match=word):
            at_loss_levels(*args)


def test_scan_regimes_finds_both_boundaries_along_rho_max():
    scan = scan_regimes(MU5, "rho_max", [0.3, 0.7, 1.5, 3.0], alpha=0.4, sigma=G0, rtol=5e-2)
    assert [c.regime for c in scan.regimes] == [3, 2, 2, 5]
    first, second = scan.boundaries
    n0 = 0.4 * np.sqrt(2 * np.sum(MU5**2))
    assert first.converged and first.lower <= n0 / 9.0 <= first.upper
    assert second.converged and second.lower <= stall_point(MU5, G0).radius <= second.upper


@pytest.mark.parametrize(
    "kwargs, word",
    [
        ({"grid": [0.7, 0.3]}, "grid"),
        ({"grid": []}, "grid"),
        ({"grid": [0.0, 1.0]}, "grid"),
        ({"parameter": "rho"}, "parameter"),
        ({"sigma": None}, "sigma"),
    ],
)
def test_scan_regimes_checks_inputs_before_any_run(no_flow, kwargs, word):
    args = {"parameter": "rho_max", "grid": [0.3, 0.7], "alpha": 0.4, "sigma": 0.35, **kwargs}
    with pytest.raises(ValueError, match=word):
        scan_regimes(MU5, args.pop("parameter"), args.pop("grid"), **args)
