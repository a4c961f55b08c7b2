"""l_inf-SAM's own steps (flows.integrator.own_steps, flows.compiled.stepping) against
independent computations: finite differences of the loss, the closed form of gradient flow on
one example, a tight quadrature of the original time, and the compiled loop against numpy's."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import brentq

from flows.integrator import own_steps as numpy_steps
from flows.model import LOSSES

LOGISTIC = LOSSES["logistic"]


def _teacher(seed: int, n: int = 12, d: int = 5) -> np.ndarray:
    """Rows ``z_i = y_i x_i`` of Gaussian points labelled by a positive teacher."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return np.sign(X @ np.abs(rng.normal(size=d)))[:, None] * X


def _loss(theta: np.ndarray, z: np.ndarray) -> float:
    """The mean logistic loss, written out."""
    return float(np.mean(np.log1p(np.exp(-(z @ np.prod(theta, axis=0))))))


def _gradient(theta: np.ndarray, z: np.ndarray, step: float = 1e-6) -> np.ndarray:
    """``grad L`` by central differences."""
    out = np.empty_like(theta)
    for index in np.ndindex(theta.shape):
        e = np.zeros_like(theta)
        e[index] = step
        out[index] = (_loss(theta + e, z) - _loss(theta - e, z)) / (2 * step)
    return out


def _steps(loop, theta, s_end, h, max_steps, z, rho, *, original=False, grid=()):
    """``loop`` from ``theta`` at ``s = tau = 0``."""
    return loop(
        np.asarray(theta, dtype=float), 0.0, 0.0, s_end, original, h, max_steps,
        np.asarray(grid, dtype=float), z, LOGISTIC, rho, 1e-3,
    )  # fmt: skip


def _loops() -> list:
    """The numpy loop, and the compiled one where numba is installed."""
    loops = [pytest.param(numpy_steps.own_steps, id="numpy")]
    try:
        from flows.compiled.stepping import own_steps
    except ImportError:  # pragma: no cover - numba missing
        return loops
    return loops + [pytest.param(own_steps, id="numba")]


@pytest.mark.parametrize("loop", _loops())
def test_a_step_is_discrete_linf_sam_with_a_normalised_step(loop):
    """One step from theta0 (L = 3) against the update written from finite differences of the
    mean logistic loss: theta1 = theta0 - eta grad L(theta'), theta' = theta0 + rho sign(grad
    L(theta0)), eta = h ||theta0|| / ||grad L(theta')||; tau advances by eta c(theta') and
    log t by log(eta) (dt = dtau / c), c the mean |l'| at theta' (to the differences' 1e-7)."""
    z = _teacher(0)
    theta0 = np.random.default_rng(1).normal(size=(3, 5))
    h, rho = 1e-2, 0.1
    point = theta0 + rho * np.sign(_gradient(theta0, z))
    g = _gradient(point, z)
    eta = h * np.linalg.norm(theta0) / np.linalg.norm(g)
    c = np.mean(1.0 / (1.0 + np.exp(z @ np.prod(point, axis=0))))
    steps = _steps(loop, theta0, 10.0, h, 1, z, rho)
    assert steps.steps == 1 and steps.status == numpy_steps.BUDGET
    np.testing.assert_allclose(steps.theta, theta0 - eta * g, rtol=1e-7, atol=1e-9)
    assert steps.tau == pytest.approx(eta * c, rel=1e-7)
    assert steps.log_elapsed == pytest.approx(np.log(eta), abs=1e-7)


@pytest.mark.parametrize("loop", _loops())
def test_gradient_flow_on_one_example_blows_up_at_its_closed_form_time(loop):
    """With rho = 0 the steps are Euler's on gradient flow. On one example with one feature z
    at L = 3 from balanced layers a0, da/dtau = z a^2: a = a0 / (1 - z a0 tau), blow-up at
    tau* = 1 / (z a0) = 1. The extrapolated tau* (``||theta||^-1`` linear in tau) is within
    1.5 h of it at h = 1e-3 and 5e-4 (measured h: first order); and the path keeps the closed
    form to 12 h relative at the output times (tau = 0.5, 0.9: Euler's first-order error,
    grown with a tenfold a to 9e-3 at h = 1e-3)."""
    z = np.array([[2.0]])
    for h in (1e-3, 5e-4):
        steps = _steps(loop, np.full((3, 1), 0.5), 10.0, h, 10**6, z, 0.0, grid=[0.5, 0.9])
        assert steps.status == numpy_steps.BLOWUP
        assert steps.tau + steps.time_left == pytest.approx(1.0, abs=1.5 * h)
        a = 0.5 / (1.0 - np.array([0.5, 0.9]))
        np.testing.assert_allclose(steps.kept_theta[:2, 0, 0], a, rtol=12 * h)
        np.testing.assert_allclose(steps.kept_tau[:2], [0.5, 0.9], atol=1e-12)


def _gd_time(tau: float, z: float, a0: float) -> float:
    """Original time of gradient flow at L = 2 on one example, one feature: ``a = a0
    e^(z tau)``, ``dt/dtau = 1 / c = 1 + e^m``, ``m = z a^2`` (a tight quadrature)."""
    return quad(lambda s: 1.0 + np.exp(z * (a0 * np.exp(z * s)) ** 2), 0.0, tau, epsabs=0,
                epsrel=1e-13, limit=200)[0]  # fmt: skip


@pytest.mark.parametrize("loop", _loops())
def test_the_steps_add_up_the_original_time(loop):
    """Gradient flow (rho = 0) at L = 2 on one example: in the rescaled clock, ``log t`` the
    steps add up matches the quadrature of dt/dtau = 1 + e^m at the output times to 6 h relative
    (Euler's relative error h in theta moves the margin m ~ log t by about h m: measured 4.2e-3
    at log t = 91, h = 1e-3); in the original clock the run ends at t_max exactly, where tau is the root of
    t(tau) = t_max (to 2e-3)."""
    z, a0, h = 1.5, 0.4, 1e-3
    rows = np.array([[z]])
    steps = _steps(loop, np.full((2, 1), a0), 2.0, h, 10**6, rows, 0.0, grid=[0.5, 1.0, 2.0])
    assert steps.status == numpy_steps.END and steps.s == 2.0 and steps.kept == 3
    expected = np.log([_gd_time(t, z, a0) for t in (0.5, 1.0, 2.0)])
    np.testing.assert_allclose(steps.kept_log_elapsed, expected, rtol=6 * h)
    assert steps.tau == 2.0 and steps.log_elapsed == pytest.approx(expected[-1], rel=6 * h)
    t_max = _gd_time(1.2, z, a0)
    steps = _steps(loop, np.full((2, 1), a0), t_max, h, 10**6, rows, 0.0, original=True,
                   grid=[t_max])  # fmt: skip
    assert steps.status == numpy_steps.END and steps.s == t_max and steps.kept == 1
    root = brentq(lambda tau: _gd_time(tau, z, a0) - t_max, 1.0, 1.4, xtol=1e-14)
    assert steps.tau == pytest.approx(root, abs=2e-3)
    np.testing.assert_allclose(steps.kept_theta[0], steps.theta, rtol=1e-12)


@pytest.mark.parametrize("original", [False, True])
def test_the_compiled_steps_equal_the_numpy_loop(original):
    """2000 steps of l_inf-SAM at L = 3 on 12 examples (both clocks): the compiled loop gives
    the numpy loop's state, clock, kept output and checkpoints to 1e-12 (its products and sums
    run in another order; a sign decided within rounding of 0 would part them, which these
    steps do not meet)."""
    pytest.importorskip("numba")
    from flows.compiled.stepping import own_steps

    z = _teacher(2)
    theta0 = np.abs(np.random.default_rng(3).normal(size=(3, 5))) + 0.5
    grid = np.linspace(0.0, 1e-3 if not original else 1e-2, 7)[1:]
    a, b = (
        _steps(loop, theta0, 100.0, 2e-3, 2000, z, 0.2, original=original, grid=grid)
        for loop in (numpy_steps.own_steps, own_steps)
    )
    assert (a.status, a.steps, a.kept, a.checkpoints) == (b.status, b.steps, b.kept, b.checkpoints)
    assert a.kept > 0 and a.checkpoints > 1
    np.testing.assert_allclose(b.theta, a.theta, rtol=1e-12)
    for x, y in ((a.s, b.s), (a.tau, b.tau), (a.log_elapsed, b.log_elapsed)):
        assert y == pytest.approx(x, rel=1e-12)
    np.testing.assert_allclose(b.kept_theta[: a.kept], a.kept_theta[: a.kept], rtol=1e-12)
    np.testing.assert_allclose(b.kept_log_elapsed[: a.kept], a.kept_log_elapsed[: a.kept],
                               rtol=1e-12)  # fmt: skip
    c = a.checkpoints
    np.testing.assert_allclose(b.check_direction[:c], a.check_direction[:c], rtol=1e-12,
                               atol=1e-15)  # fmt: skip
    np.testing.assert_allclose(b.check_tau[:c], a.check_tau[:c], rtol=1e-12)


def test_checkpoints_are_at_fixed_sizes_from_the_start():
    """Checkpoint k is the first step where log ||beta||_1 reaches k * CHECKPOINT_SPACING above
    its start: so two runs at different steps have theirs at the same sizes (to one step)."""
    z = _teacher(4)
    theta0 = np.abs(np.random.default_rng(5).normal(size=(3, 5))) + 0.5
    base = np.log(np.sum(np.abs(np.prod(theta0, axis=0))))
    for h in (2e-3, 1e-3):
        steps = _steps(numpy_steps.own_steps, theta0, 100.0, h, 3000, z, 0.1)
        sizes = steps.check_log_size[: steps.checkpoints] - base
        k = np.arange(steps.checkpoints) * numpy_steps.CHECKPOINT_SPACING
        assert steps.checkpoints > 5
        assert np.all(sizes >= k - 1e-12) and np.all(sizes - k < 3 * 3 * h)
        direction = steps.check_direction[: steps.checkpoints]
        np.testing.assert_allclose(np.sum(np.abs(direction), axis=1), 1.0, rtol=1e-12)


#: Teacher sets of ``benchmarks/bench_depth.py`` at L = 3 continued by their own steps: where
#: the event-driven run stops, and the step_error reported.
CONTINUED_SETS = {
    # tau = 17.4915, |beta|_1 = 1.8e5: an example leaves the tie while it carries a side;
    # three step sizes agree to 8.4e-4; measured 1.7e-5 to 2.1e-4 from the steps from the start
    2: 1e-3,
    # tau = 12.2082, |beta|_1 = 455: the sliding surfaces are no longer resolved; the step sizes
    # differ by up to 7.7e-3 along the path (the first tenfold growth), 1.9e-4 at the end;
    # measured up to 7.6e-3 from the steps from the start (at |beta|_1 = 9.4e3)
    1: 1e-2,
}


@pytest.mark.slow
@pytest.mark.parametrize("seed", list(CONTINUED_SETS))
def test_a_continued_teacher_run_follows_the_steps_from_the_start(seed):
    """Teacher sets of ``benchmarks/bench_depth.py`` at L = 3 (defaults, rho 0.1) whose
    event-driven run stops and goes on by its own steps to the blow-up (status 1, step_error
    within :data:`CONTINUED_SETS`). From 1.3 times the size where the steps take over to the
    end (|beta|_1 ~ 1e9) beta / |beta|_1 is within that tolerance of l_inf-SAM's own steps run
    from the initialisation at h = 2.5e-5, which never meet the event-driven integration, and
    at the end within 1e-3; the blow-up time within 0.02 of theirs (set 2: 17.9489 and
    17.9491)."""
    pytest.importorskip("numba")
    import sys
    from pathlib import Path

    from flows import Dataset, orthant_init, simulate
    from flows.compiled.stepping import own_steps

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from bench_depth import teacher_set

    X, y, signs = teacher_set(seed)
    alpha = orthant_init(signs, 3, 0.5)
    run = simulate(Dataset(X, y), "linf-sam", 3, alpha, rho=0.1, t_max=100.0,
                   original_time=False, n_points=20001)  # fmt: skip
    assert run.status == 1 and np.isfinite(run.own_steps_from), run.message
    tolerance = CONTINUED_SETS[seed]
    assert run.step_error <= tolerance
    beta = run.sign_beta * np.exp(run.log_abs_beta)
    size = np.sum(np.abs(beta), axis=1)
    start = size[np.searchsorted(run.tau, run.own_steps_from)]
    grid = np.linspace(0.0, run.tau[-1] + 1.0, 400001)[1:]
    steps = own_steps(np.asarray(alpha, dtype=float), 0.0, 0.0, 100.0, False, 2.5e-5, 10**8,
                      grid, y[:, None] * X, LOGISTIC, 0.1, 1e-3)  # fmt: skip
    reference = np.prod(steps.kept_theta[: steps.kept], axis=1)
    reference_size = np.sum(np.abs(reference), axis=1)
    for b in np.geomspace(1.3 * start, size[-1] / 2, 6):
        i, k = np.searchsorted(size, b), np.searchsorted(reference_size, b)
        np.testing.assert_allclose(beta[i] / size[i], reference[k] / reference_size[k],
                                   atol=tolerance, err_msg=f"|beta|_1 = {b:.3g}")  # fmt: skip
    np.testing.assert_allclose(beta[-1] / size[-1], reference[-1] / reference_size[-1], atol=1e-3)
    blowup = [e.tau for e in run.events if e.kind == "blow-up"]
    assert blowup[-1] == pytest.approx(steps.tau + steps.time_left, abs=0.02)
