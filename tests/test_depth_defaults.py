"""Depth 3 and 4 on everyday data with nothing but the defaults: ``simulate`` ends with the
blow-up (status 1) or says in the result's clock why it cannot go on, and GD's blow-up time
agrees with an independent integration.

Data: Gaussian X (n = 30, d = 8), labels from a Gaussian teacher w, initialisation in the
teacher's orthant (``orthant_init``), as ``benchmarks/bench_depth.py``.

Independent reference (nothing of ``flows`` but the data): the rescaled GD field of the logistic
loss written out in a few lines of numpy (``dw^(l)/dtau = G * prod_{k != l} w^(k)``,
``G = sum_i p_i y_i x_i``, ``p`` the normalised ``|l'|``), integrated in ``z = log|w|`` by scipy's
Radau at rtol 1e-12 up to ``max z = Z``, and the time left read off the growth rate there,
``1 / ((L - 2) r)``; the reference is taken where it no longer moves with ``Z``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from flows import Dataset, orthant_init, simulate
from flows.results import BLOWUP, Cause


def teacher_set(seed: int, n: int = 30, d: int = 8) -> tuple[Dataset, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w = rng.standard_normal(d)
    return Dataset(X, np.sign(X @ w)), np.sign(w)


def gd_log_field(z: np.ndarray, signs: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """``dz/dtau`` of rescaled GD in ``z = log|w|`` (rows: layers), logistic loss."""
    W = signs * np.exp(z)
    beta = np.prod(W, axis=0)
    m = Z @ beta
    log_w = -np.logaddexp(0.0, m)  # log |l'(m)| = log sigmoid(-m)
    p = np.exp(log_w - log_w.max())
    G = Z.T @ (p / p.sum())
    loo = np.array([np.prod(np.delete(W, k, axis=0), axis=0) for k in range(W.shape[0])])
    return G * loo / W


def radau_to(log_rhs, W0: np.ndarray, z_stop: float, rtol: float):
    """``(z, tau)`` where the flow ``dz/dtau = log_rhs(W)`` in ``z = log|w|`` (signs those of
    ``W0``) from ``W0`` first has ``max z = z_stop``: scipy's Radau at ``rtol``."""
    signs = np.sign(W0)

    def rhs(_t, z):
        return log_rhs(signs * np.exp(z.reshape(W0.shape))).ravel()

    def reached(_t, z):
        return np.max(z) - z_stop

    reached.terminal = True
    sol = solve_ivp(rhs, (0.0, 100.0), np.log(np.abs(W0)).ravel(), method="Radau",
                    rtol=rtol, atol=rtol * 1e-2, events=reached)  # fmt: skip
    assert sol.status == 1, sol.message
    return sol.y[:, -1].reshape(W0.shape), float(sol.t[-1])


def orthant_start(signs0: np.ndarray, depth: int) -> np.ndarray:
    """``orthant_init(signs0, depth, 0.5)`` written out: every entry 0.5, the first layer's
    signs ``signs0``."""
    W0 = np.tile(np.full(signs0.size, 0.5), (depth, 1))
    W0[0] *= signs0
    return W0


def reference_blowup(data: Dataset, signs0: np.ndarray, depth: int, z_stop: float) -> float:
    """``tau*``: Radau (rtol 1e-12) to ``max log|w| = z_stop``, plus ``1 / ((L - 2) r)``."""
    W0 = orthant_start(signs0, depth)
    signs, Zm = np.sign(W0), data.y[:, None] * data.X
    z, tau = radau_to(lambda W: gd_log_field(np.log(np.abs(W)), signs, Zm), W0, z_stop, 1e-12)
    rate = gd_log_field(z, signs, Zm).ravel()
    growing = (rate > 0) & (z.ravel() > 0)
    return float(tau + 1.0 / ((depth - 2) * np.max(rate[growing])))


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gd_blowup_time_at_depth_3_against_an_independent_integration(seed):
    data, signs = teacher_set(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        tr = simulate(data, "gd", 3, orthant_init(signs, 3, 0.5), t_max=100.0,
                      original_time=False)  # fmt: skip
    assert tr.status == BLOWUP, tr.message
    ref, ref_further = (reference_blowup(data, signs, 3, z) for z in (5.0, 6.0))
    assert abs(ref - ref_further) < 1e-6 * ref  # the reference has converged in z_stop
    assert tr.blowup_time == pytest.approx(ref_further, rel=1e-5)


@pytest.mark.parametrize(
    ("seed", "depth", "algorithm", "hp"),
    [
        (2, 3, "gd", {}),  # stiff only late: the periodic check switches to BDF
        pytest.param(1, 4, "gd", {}, marks=pytest.mark.slow),
        pytest.param(2, 3, "usam", {"rho": 0.1}, marks=pytest.mark.slow),
        (0, 3, "l2-sam", {"rho": 0.1}),
        pytest.param(0, 3, "le-sam", {"sigma": 0.1, "rho_max": 0.5}, marks=pytest.mark.slow),
    ],
)
def test_defaults_end_with_the_blowup_or_say_why(seed, depth, algorithm, hp):
    """No budget spent: the blow-up (status 1), or the perturbed point's ties no longer
    resolved, with the time left and the clock named as the result names it."""
    data, signs = teacher_set(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        tr = simulate(data, algorithm, depth, orthant_init(signs, depth, 0.5), t_max=100.0,
                      original_time=False, **hp)  # fmt: skip
    assert tr.cause in (Cause.BLOW_UP, Cause.PRECISION_LOST), tr.message
    assert tr.nfev < 100_000
    if tr.cause is Cause.PRECISION_LOST:
        assert f"at tau={tr.tau[-1]:.6g} " in tr.message  # the clock named as the result names it
        assert "left by homogeneity" in tr.message
        assert "perturbed point" in tr.message  # only a perturbation stops short of the ties


@pytest.mark.slow
def test_linf_sam_at_depth_keeps_its_original_time_through_sliding_junctions():
    """l_inf-SAM at L = 3 slides on several direction surfaces at once; the quadrature of
    ``log t`` evaluates the combination's clock factor also at nodes just past a release,
    where a weight has left [0, 1]: ``log t`` stays finite and increasing (no RuntimeWarning,
    which the suite turns into an error), whatever status the run ends with."""
    data, signs = teacher_set(0)
    tr = simulate(data, "linf-sam", 3, orthant_init(signs, 3, 0.5), rho=0.1, t_max=100.0)
    assert tr.sliding_surfaces >= 2
    log_t = tr.log_t_original[1:]
    assert np.all(np.isfinite(log_t))
    assert np.all(np.diff(log_t) > 0)


@pytest.mark.slow
def test_linf_sam_spends_at_most_its_budget_across_segments_that_end_at_events():
    """l_inf-SAM at depth 3 on teacher set 8 with a budget of 2,000 evaluations spends it across
    segments that end at events (the last steps overshoot it by tens) and says so."""
    data, signs = teacher_set(8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        capped = simulate(data, "linf-sam", 3, orthant_init(signs, 3, 0.5), rho=0.1,
                          t_max=100.0, max_nfev=2_000, original_time=False)  # fmt: skip
    assert capped.cause == Cause.BUDGET_SPENT and capped.nfev <= 2_000 + 50
    assert len(capped.events) >= 3 and "max_nfev=2000" in capped.message


def test_events_whose_handling_changes_nothing_end_the_run_as_stalled(monkeypatch):
    """A crossing that fires where a segment starts and whose handling changes nothing would
    start the same segment again forever: 20 such segments in a row end the run (status -1,
    the event named), within a few evaluations a segment (not continued by its own steps)."""
    from flows.datasets import gaussian_blobs
    from flows.integrator import driver, stepping
    from flows.integrator.events import Outcome
    from flows.integrator.surface_events import DirectionCrossing

    monkeypatch.setattr(DirectionCrossing, "handle", lambda self, *args: Outcome())
    monkeypatch.setattr(stepping, "CONTINUED", ())
    tr = simulate(gaussian_blobs(), "linf-sam", 2, [1.5, 0.8], rho=1.0, t_max=8.0)
    assert tr.status == -1 and tr.cause == Cause.SOLVER_FAILED
    assert f"{driver.IDLE_SEGMENTS} segments in a row ended where they started" in tr.message
    assert "DirectionCrossing" in tr.message and tr.nfev < 2_000


def test_chattering_surfaces_are_those_of_50_events_within_1e_6_of_tau():
    from flows.integrator.surface_events import CHATTER_EVENTS, chattering_surfaces, surface_names
    from flows.results import FlowEvent

    def log(span: float) -> list:
        taus = 6.2 + np.linspace(0.0, span, CHATTER_EVENTS)
        return [FlowEvent(float(t), ("sliding", "release")[k % 2], (-1, 1 + 4 * (k % 2)),
                          "direction") for k, t in enumerate(taus)]  # fmt: skip

    assert surface_names(chattering_surfaces(log(1e-6))) == ["G_1", "G_5"]
    assert chattering_surfaces(log(1e-4)) == []
    assert chattering_surfaces(log(1e-6)[1:]) == []  # fewer than CHATTER_EVENTS events
