"""Rescaled flows at depth L >= 3 on several examples reach their finite-time blow-up, where the
smallest margins tie between support vectors and the loss weights are stiff
(:mod:`flows.integrator.stiffness`), and end there in the direction of an l_{2/L} KKT point.

Independent references: the blow-up time of a data set whose symmetry makes the flow one
coordinate (``dw/dtau = mu w^(L-1)``, closed form); the KKT points of the depth-L program
(:func:`analysis.maxmargin.kkt_points`, local solves and vertex enumeration, no flow)."""

import numpy as np
import pytest

from analysis.maxmargin import kkt_points
from flows import Dataset, simulate
from flows.datasets import gaussian_blobs, teacher_data
from flows.integrator.driver import _setup
from flows.integrator.stiffness import TIED_BLOWUP_TOL, time_to_blowup, weights_stiffness
from flows.results import BLOWUP, Cause

#: Two examples swapped by exchanging the coordinates: from alpha (1, 1) both margins stay equal
#: and the flow is one coordinate with mu = (1 + 0.5) / 2 (mean of the tied weights).
SYMMETRIC = Dataset(np.array([[1.0, 0.5], [0.5, 1.0]]), np.array([1.0, 1.0]))


def _angle(a: np.ndarray, b: np.ndarray) -> float:
    cos = np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b))
    return float(np.arccos(np.clip(cos, -1.0, 1.0)))


@pytest.mark.parametrize("depth", [3, 4])
def test_time_to_blowup_is_exact_on_one_coordinate(depth):
    """``1 / ((L - 2) r)`` is the closed-form ``tau* = alpha^(2-L) / ((L - 2) mu)`` at the
    start (``w' = mu w^(L-1)``, here mu = 0.75, alpha = 1.2), and the flow blows up there."""
    alpha, mu = 1.2, 0.75
    exact = alpha ** (2 - depth) / ((depth - 2) * mu)
    options = dict(
        simulate.__kwdefaults__, t_max=10.0, n_points=11, loss="exponential",
        original_time=False, backend="numpy",
    )  # fmt: skip
    run = _setup(SYMMETRIC, "gd", depth, alpha, {}, options)
    field = run.field_for(run.mode)
    assert time_to_blowup(field, run.y, 0.0) == pytest.approx(exact, rel=1e-12)
    tr = simulate(SYMMETRIC, "gd", depth, alpha, t_max=10.0, loss="exponential")
    assert tr.status == BLOWUP
    assert tr.blowup_time == pytest.approx(exact, rel=1e-9)


def test_one_example_carrying_the_weight_is_not_stiff():
    """``S = u_min (1 - p_max)`` vanishes when one margin is far below the others."""
    data = Dataset(np.array([[1.0, 0.0], [30.0, 30.0]]), np.array([1.0, 1.0]))
    options = dict(
        simulate.__kwdefaults__, t_max=1.0, n_points=2, loss="exponential",
        original_time=False, max_nfev=1000, backend="numpy",
    )  # fmt: skip
    run = _setup(data, "gd", 3, 3.0, {}, options)  # margins 27 and 1620: p_max = 1 - e^-1593
    assert weights_stiffness(run.field_for(run.mode), run.y) == pytest.approx(0.0, abs=1e-12)


CASES = [
    ("teacher", teacher_data(), 3, 1.0),
    # slow: the same data and depth as the case above from a smaller init (0.5 s)
    pytest.param("teacher", teacher_data(), 3, 0.1, marks=pytest.mark.slow),
    # slow: L = 4 (0.5 s); the tied blow-up stays in the default run at L = 3 on two data sets, and
    # the blow-up at L = 4 in test_time_to_blowup_is_exact_on_one_coordinate
    pytest.param("teacher", teacher_data(), 4, 1.0, marks=pytest.mark.slow),
    ("blobs seed 3", gaussian_blobs(seed=3), 3, 1.0),
]


@pytest.mark.parametrize(
    ("name", "data", "depth", "alpha"),
    CASES,
    ids=[getattr(c, "values", c)[0] for c in CASES],
)
def test_tied_runs_end_in_the_blowup_at_an_l2_over_L_kkt_point(name, data, depth, alpha):
    """The run switches to the stiff method, ends with status 1 (the extrapolated blow-up, at
    most TIED_BLOWUP_TOL of time left) and its last direction is within 1e-6 rad of a KKT point
    of the depth-L program whose support vectors are tied (two or more)."""
    tr = simulate(data, "gd", depth, alpha, t_max=100.0, n_points=101)
    assert tr.status == BLOWUP and tr.cause == Cause.BLOW_UP, tr.message
    assert "scipy BDF" in tr.segment_loops
    assert tr.nfev < 60_000
    left = tr.blowup_time - tr.tau[-1]
    assert 0 < left <= TIED_BLOWUP_TOL * max(1.0, tr.tau[-1])
    points = kkt_points(data, depth)
    nearest = min(points, key=lambda p: _angle(p.direction, tr.direction[-1]))
    assert _angle(nearest.direction, tr.direction[-1]) < 1e-6
    assert len(nearest.support_vectors) >= 2


@pytest.mark.slow  # 1.1-1.5 s (two runs to the blow-up); the extrapolation's bound on the time
# left stays in the default run (test_tied_runs_end_in_the_blowup_at_an_l2_over_L_kkt_point)
def test_the_extrapolated_blowup_time_does_not_hang_on_the_tolerance():
    """The path ends at different times for rtol 1e-10 and 1e-12 (where the tied margins are
    lost to rounding); the extrapolated blow-up times agree to within the time each leaves."""
    data = teacher_data()
    runs = [simulate(data, "gd", 3, 1.0, t_max=100.0, n_points=11, rtol=r) for r in (1e-10, 1e-12)]
    left = max(tr.blowup_time - tr.tau[-1] for tr in runs)
    assert abs(runs[0].blowup_time - runs[1].blowup_time) < left


def test_a_late_blowup_beyond_the_resolution_of_tau_is_detected():
    """One example, L = 4, alpha = 0.003: the closed form ``tau* = alpha^-2 / (2 max_j mu_j)``
    = 27777.8 is so late that 1 / BLOWUP_RATE of time is below tau's rounding; the run still
    ends in the blow-up (status 1), at tau* to 1e-9."""
    mu, alpha = np.array([1.0, 2.0]), 0.003
    tr = simulate(Dataset(mu[None, :], np.ones(1)), "gd", 4, alpha, t_max=1e5, n_points=11)
    assert tr.status == BLOWUP, tr.message
    assert tr.blowup_time == pytest.approx(alpha**-2 / (2 * mu.max()), rel=1e-9)


# Radau is slow (0.4 s): a user-chosen implicit method is watched from the start with BDF
@pytest.mark.parametrize("method", ["BDF", pytest.param("Radau", marks=pytest.mark.slow)])
def test_an_implicit_method_is_watched_for_lost_ties(method):
    """Chosen by the user, an implicit method is watched for lost ties from the start: on FLOW
    data (L = 3, alpha = 0.3, rtol 1e-8, where a tie broken by rounding once sent BDF to a
    vertex 54 degrees away) the run ends in the blow-up at the global l_{2/3} KKT point."""
    X = np.array([[0.8, 0.5, 0.3], [0.3, 0.9, 1.0], [0.7, 0.3, 0.7]])
    data = Dataset(X, np.ones(3))
    tr = simulate(data, "gd", 3, 0.3, t_max=6.0, n_points=11, rtol=1e-8, method=method)
    assert tr.status == BLOWUP, tr.message
    best = kkt_points(data, 3)[0]
    assert best.status == "global"
    assert _angle(best.direction, tr.direction[-1]) < 1e-5
