"""Tests of analysis.amplification and of sequential feature amplification (Thm 4.4 / 4.5,
Prop 4.7; docs/theory.md §14) for l2-SAM at L = 2 on the single example D_mu.

* The helpers (leaders, leader_sequence, shares) on hand-made log|beta| arrays.
* Thm 4.4 / 4.5 (amplification in tau): the engine's leader sequence starts at a minor
  coordinate and ends at d, while GD leads with d from the start; the switch times agree with
  an independent integration of the reduced ODE of docs/theory.md §8 in log coordinates,
  ``d log a_j / dtau = mu_j (1 - rho mu_j / N)``, ``N = sqrt(2 sum mu_k^2 a_k^2)``
  (:func:`reference_log_beta`, which shares no code with the engine).
* Prop 4.7 (amplification in alpha at fixed tau): the leading coordinate at tau = 0.3 is
  non-decreasing in alpha over regime-2 alphas.

Coordinates are 0-based in code and assertions; messages and reports add 1 where they say so.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.special import logsumexp

from analysis.amplification import (
    LEADERS_LABEL,
    LeaderSequence,
    leader_sequence,
    leaders,
    shares,
    trajectory_leaders,
)
from analysis.regimes.boundaries import regime3_boundary
from analysis.regimes.leaders import leader_phase_diagram
from flows import run as flows_run
from flows import simulate, single_example

MU5 = (1.0, 2.0, 3.0, 4.0, 5.0)
#: collapse boundary alpha/rho of MU5, measured with analysis.regimes.boundaries.collapse_boundary
#: (0.34749 at rtol 3e-3; checked in tests/test_regimes.py). Only used to stay inside regime 2.
MU5_COLLAPSE = 0.3475


@functools.cache
def run(
    mu: tuple,
    algorithm: str,
    alpha: float,
    rho,
    t_max: float,
    n_points: int,
    atol=None,
    chart: str = "auto",
):
    """Cached L = 2 simulate in the rescaled clock (no original-time quadrature)."""
    extra = {"chart": chart} if atol is None else {"atol": atol, "chart": chart}
    return simulate(
        single_example(list(mu)),
        algorithm,
        depth=2,
        alpha=alpha,
        rho=rho,
        t_max=t_max,
        n_points=n_points,
        original_time=False,
        rtol=1e-10,
        **extra,
    )


def reference_log_beta(mu, alpha: float, rho: float, tau: np.ndarray) -> np.ndarray:
    """log|beta_j(tau)| = 2 log a_j(tau) for l2-SAM, L = 2, uniform alpha, from docs/theory.md §8's
    closed expression integrated in u = log a (exact at any magnitude; no collapse handling,
    so only for non-collapsing runs)."""
    mu = np.asarray(mu, dtype=float)
    log_mu = np.log(mu)

    def rhs(_t, u):
        log_n = 0.5 * (np.log(2.0) + logsumexp(2.0 * log_mu + 2.0 * u))
        return mu * (1.0 - rho * mu * np.exp(-log_n))

    sol = solve_ivp(
        rhs,
        (0.0, float(tau[-1])),
        np.full(mu.size, np.log(alpha)),
        method="DOP853",
        rtol=1e-12,
        atol=1e-12,
        t_eval=tau,
    )
    assert sol.success
    return 2.0 * sol.y.T


def initial_leader(mu, alpha: float, rho: float) -> int:
    """argmax_j mu_j (1 - rho mu_j / N0): the coordinate with the largest initial rate (docs/theory.md §14)."""
    mu = np.asarray(mu, dtype=float)
    n0 = alpha * np.sqrt(2.0 * np.sum(mu**2))
    return int(np.argmax(mu * (1.0 - rho * mu / n0)))


# --------------------------------------------------------------------------- helpers on hand-made arrays

NEG = -np.inf


def test_leaders_hand_made():
    """Helper for Thm 4.4/4.5: ``leaders`` is argmax_j log|beta_j| per row and -1 on a
    collapsed row (all -inf); an exact tie goes to the lowest index (numpy argmax)."""
    lb = np.array(
        [[0.0, 0.0, 0.0], [1.0, 2.0, 0.0], [NEG, NEG, NEG], [5.0, NEG, 3.0], [NEG, NEG, -700.0]]
    )
    np.testing.assert_array_equal(leaders(lb), [0, 1, -1, 0, 2])


def test_leader_sequence_hand_made():
    """Helper for Thm 4.4/4.5: the uniform-init tie at t = 0 is not a leader, a tie later is
    skipped, a leader that comes back is listed again, and a collapse (-inf row) ends the
    sequence with -1 at the collapse time."""
    t = np.arange(8.0)
    lb = np.array(
        [
            [-1.0, -1.0, -1.0],  # t=0 tie (uniform init): ignored
            [-0.5, -0.9, -2.0],  # 0 leads
            [-0.4, -0.4, -3.0],  # tie between 0 and 1: skipped
            [-0.6, -0.3, -3.0],  # 1 leads
            [0.0, 0.5, 0.7],  # 2 leads
            [0.0, 0.6, 0.7],  # 2 still
            [1.0, 0.6, 0.7],  # back to 0 (non-monotone)
            [NEG, NEG, NEG],
        ]
    )  # collapse
    seq = leader_sequence(t, lb)
    assert seq.coordinates == (0, 1, 2, 0, -1)
    assert seq.switch_times == (1.0, 3.0, 4.0, 6.0, 7.0)
    assert seq.describe() == ("1 (t=1) -> 2 (t=3) -> 3 (t=4) -> 1 (t=6) -> none (beta = 0) (t=7)")
    assert seq.describe(one_based=False).startswith("0 (t=1) -> 1 (t=3)")
    # all rows tied: no leader at all
    assert leader_sequence(t[:2], np.zeros((2, 3))) == LeaderSequence((), ())


def test_shares_hand_made_and_huge_logs():
    """Helper for Thm 4.4/4.5: ``shares`` = |beta_j| / ||beta||_1 computed by log-sum-exp: rows
    sum to 1, a collapsed row is all 0, and logs of order +-1e4 (far beyond float64) work."""
    lb = np.array(
        [
            [1e4, 1e4 - np.log(3.0), NEG],
            [-1e4, -1e4, -1e4 + np.log(2.0)],
            [NEG, NEG, NEG],
            [0.0, np.log(2.0), np.log(7.0)],
        ]
    )
    s = shares(lb)
    assert np.all(np.isfinite(s))
    np.testing.assert_allclose(s[0], [0.75, 0.25, 0.0], rtol=1e-12)
    np.testing.assert_allclose(s[1], [0.25, 0.25, 0.5], rtol=1e-12)
    np.testing.assert_array_equal(s[2], [0.0, 0.0, 0.0])
    np.testing.assert_allclose(s[3], [0.1, 0.2, 0.7], rtol=1e-12)
    np.testing.assert_allclose(np.sum(s[[0, 1, 3]], axis=1), 1.0, rtol=1e-14)


# --------------------------------------------------------------------------- Thm 4.4 / 4.5


AMPLIFICATION_CASES = [
    # mu, alpha (rho = 1), expected leader sequence (0-based), horizon
    (MU5, 0.4, (1, 2, 3, 4), 8.0),
    (MU5, 0.5, (2, 3, 4), 8.0),
    ((1.0, 2.0, 4.0, 7.0), 0.48, (1, 2, 3), 8.0),
]


@pytest.mark.parametrize("mu, alpha, expected, t_max", AMPLIFICATION_CASES)
def test_sequential_amplification_in_tau(mu, alpha, expected, t_max):
    """Thm 4.4 / 4.5 (sequential feature amplification in tau), l2-SAM, L = 2, rho = 1, alpha in
    regime 2: the leader sequence starts at a minor coordinate (the one with the largest initial
    rate mu_j (1 - rho mu_j / N0)), moves up and ends at d, where e_d then holds > 99 % of
    ||beta||_1. The sequence and its switch times (to one sample) agree with an independent
    log-space integration of docs/theory.md §8's reduced ODE."""
    d = len(mu)
    traj = run(mu, "l2-sam", alpha, 1.0, t_max, 401)
    assert traj.status == 0 and traj.collapse_time is None
    seq = leader_sequence(traj.tau, traj.log_abs_beta)
    by_t = trajectory_leaders(traj)  # rescaled clock: t is tau (up to rounding)
    assert by_t.coordinates == seq.coordinates
    np.testing.assert_allclose(by_t.switch_times, seq.switch_times, rtol=1e-12)
    assert seq.coordinates[0] < d - 1, seq.describe()
    assert seq.coordinates[0] == initial_leader(mu, alpha, 1.0)
    assert seq.coordinates[-1] == d - 1, seq.describe()
    assert seq.coordinates == expected, seq.describe()
    assert shares(traj.log_abs_beta)[-1, -1] > 0.99

    ref = leader_sequence(traj.tau, reference_log_beta(mu, alpha, 1.0, traj.tau))
    assert ref.coordinates == seq.coordinates
    dt = traj.tau[1] - traj.tau[0]
    np.testing.assert_allclose(seq.switch_times, ref.switch_times, atol=1.01 * dt)


@pytest.mark.parametrize("mu, alpha, expected, t_max", AMPLIFICATION_CASES)
def test_gd_leads_with_major_from_the_start(mu, alpha, expected, t_max):
    """Thm 4.4 / 4.5 contrast (docs/theory.md §14, GD facts): GD at the same alpha has no amplification
    phase: e_d is the strict leader from the first sample on (a_j = alpha e^{mu_j tau})."""
    d = len(mu)
    traj = run(mu, "gd", alpha, None, t_max, 401)
    seq = leader_sequence(traj.tau, traj.log_abs_beta)
    assert seq.coordinates == (d - 1,), seq.describe()
    assert seq.switch_times[0] == traj.tau[1]


NEAR_BOUNDARY = dict(mu=(0.5, 2.0, 2.5, 7.0), alpha=1.02 * 0.4160504164979114)


def _near_boundary_check(atol, chart: str = "auto"):
    mu, alpha = NEAR_BOUNDARY["mu"], NEAR_BOUNDARY["alpha"]
    tau = np.linspace(0.0, 96.0, 9)
    ref = reference_log_beta(mu, alpha, 1.0, tau)
    assert ref[-1, -1] > ref[-1, -2] + 100  # e_d leads by tau = 96 (reference)
    traj = run(mu, "l2-sam", alpha, 1.0, 96.0, 9, atol=atol, chart=chart)
    assert traj.collapse_time is None
    np.testing.assert_allclose(
        traj.log_abs_beta,
        ref,
        rtol=0,
        atol=1e-4,
        err_msg=f"engine log|beta(96)| = {traj.log_abs_beta[-1]}",
    )


def test_engine_matches_log_space_reference_near_collapse_boundary_log_chart():
    """Thm 4.4 / 4.5 and the three regimes, just above the collapse boundary (alpha/rho =
    1.02 x 0.41605 for mu = (0.5, 2, 2.5, 7)): the major coordinate first decays to
    a_4 ~ e^{-311} and then regrows at rate mu_4 = 7, taking the lead near tau ~ 70
    (independent log-space integration: log|beta_4(96)| = 550.3 > log|beta_3(96)| = 377.3).
    The default asinh chart keeps relative precision only down to ~1e-90, so this run needs
    ``chart='log'`` (exact for multiplicative decays); it must reproduce log|beta| to 1e-4."""
    _near_boundary_check(None, chart="log")


@pytest.mark.slow
def test_engine_matches_log_space_reference_near_collapse_boundary_tight_atol():
    """As the test above (Thm 4.4 / 4.5 near the collapse boundary) with atol = 1e-300: the
    engine then follows the decayed coordinate and agrees with the log-space reference
    (~5 s: the tight tolerance costs ~27k field evaluations)."""
    _near_boundary_check(1e-300)


# --------------------------------------------------------------------------- Prop 4.7


PROP47_CASES = [
    # mu, collapse boundary alpha/rho (measured, see MU5_COLLAPSE), number of alphas
    pytest.param(MU5, MU5_COLLAPSE, 10, id="mu=1..5"),
    pytest.param((1.0, 1.5, 4.0), 0.4406, 10, id="mu=1,1.5,4"),
    pytest.param(MU5, MU5_COLLAPSE, 40, id="mu=1..5-fine", marks=pytest.mark.slow),
    pytest.param((1.0, 2.0, 4.0, 7.0), 0.3994, 40, id="mu=1,2,4,7-fine", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("mu, collapse, n_alpha", PROP47_CASES)
def test_amplification_in_alpha_at_fixed_tau(mu, collapse, n_alpha):
    """Prop 4.7 (sequential amplification in alpha at fixed tau), l2-SAM, L = 2, rho = 1: over
    regime-2 alphas (1.05 x collapse boundary .. 0.97 x regime-3 boundary) the leading
    coordinate at tau = 0.3 is non-decreasing in alpha and takes at least two different values
    (so the check is not vacuous); the phase diagram agrees with the log-space reference at
    tau = 0.3. Non-monotonicity in alpha at other tau (up to 8) is reported as a warning, not
    asserted."""
    r3 = regime3_boundary(mu, 1.0)
    ratios = np.linspace(1.05 * collapse, 0.97 * r3, n_alpha)
    tau, lead = leader_phase_diagram(mu, ratios, tau_max=8.0, n_tau=161)
    k = int(np.argmin(np.abs(tau - 0.3)))
    assert abs(tau[k] - 0.3) < 1e-12
    at = lead[:, k]
    table = dict(zip(np.round(ratios, 4).tolist(), (at + 1).tolist(), strict=True))
    assert np.all(np.diff(at) >= 0), f"leader at tau = 0.3 (1-based) per alpha: {table}"
    assert len(set(at.tolist())) >= 2, table
    for ratio, got in zip(ratios, at, strict=True):
        ref = reference_log_beta(mu, ratio, 1.0, tau[: k + 1])
        assert int(np.argmax(ref[-1])) == got

    bad = [
        (round(float(tau[j]), 3), (lead[:, j] + 1).tolist())
        for j in range(1, len(tau))
        if np.any(np.diff(lead[:, j]) < 0)
    ]
    print(
        f"Prop 4.7, mu = {mu}: leader at tau = 0.3 (1-based) per alpha: {table}; "
        f"non-monotone in alpha at {len(bad)} of {len(tau) - 1} tau values in (0, 8]"
    )
    if bad:
        warnings.warn(
            f"Prop 4.7, mu = {mu}: leader (1-based) not monotone in alpha at some tau "
            f"(alphas {np.round(ratios, 4).tolist()}): first cases {bad[:3]} "
            f"({len(bad)} of {len(tau) - 1} tau values)",
            UserWarning,
            stacklevel=2,
        )


# --------------------------------------------------------------------------- NaN, inf, shapes


def test_shares_propagate_nan_and_resolve_single_inf():
    """Helper contract: a row with a NaN gives NaN shares (never a valid-looking 0); a row with
    exactly one log|beta_j| = +inf gives share 1 there and 0 elsewhere (the limit); two or more
    +inf entries are indeterminate (NaN); a collapsed row stays 0."""
    lb = np.array(
        [
            [np.nan, 0.0, 0.0],
            [np.inf, 0.0, NEG],
            [np.inf, np.inf, 0.0],
            [NEG, NEG, NEG],
            [0.0, 0.0, 0.0],
        ]
    )
    s = shares(lb)
    assert np.all(np.isnan(s[0]))
    np.testing.assert_array_equal(s[1], [1.0, 0.0, 0.0])
    assert np.all(np.isnan(s[2]))
    np.testing.assert_array_equal(s[3], [0.0, 0.0, 0.0])
    np.testing.assert_allclose(s[4], [1 / 3] * 3, rtol=1e-15)


def test_leader_helpers_validate_inputs():
    """Helper contract: leaders / leader_sequence reject NaN (a NaN has no leader), non-2-D
    log_abs_beta and a time axis of the wrong length with a ValueError naming the parameter;
    trajectory_leaders rejects a non-Trajectory."""
    with pytest.raises(ValueError, match="log_abs_beta"):
        leaders(np.array([[np.nan, 0.0]]))
    with pytest.raises(ValueError, match="log_abs_beta"):
        leaders(np.zeros(3))
    with pytest.raises(ValueError, match="log_abs_beta"):
        shares(np.zeros(3))
    with pytest.raises(ValueError, match=r"\bt\b"):
        leader_sequence(np.array([0.0, 1.0]), np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"\bt\b"):
        leader_sequence(np.array([0.0, np.nan, 1.0]), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="traj"):
        trajectory_leaders(np.zeros((3, 2)))


def test_printed_leaders_are_labelled_one_based(capsys):
    """The summary of ``python -m flows.run`` prints the leaders under :data:`LEADERS_LABEL`,
    each the API's 0-based coordinate plus 1."""
    argv = ["--mu", "1,2,3,4,5", "--alpha", "0.4", "--rho", "1", "--t-max", "5", "--n-points", "51"]
    assert flows_run.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    row = [line for line in lines if line.startswith(f"{LEADERS_LABEL} over time: ")]
    assert len(row) == 1, lines
    printed = [int(part.split(" (t=")[0]) for part in row[0].split(": ", 1)[1].split(" -> ")]
    traj = simulate(single_example(MU5), "l2-sam", 2, 0.4, rho=1.0, t_max=5.0, n_points=51)
    assert printed == [c + 1 for c in trajectory_leaders(traj).coordinates] == [2, 3, 4, 5]
