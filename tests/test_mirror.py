"""GD at depth 2 in its conserved coordinates (``flows.mirror``, the GD case of
``flows.conserved``) against the engine, closed forms and the saddle-to-saddle limit.

* ``simulate(..., chart='asinh')`` integrates the same flow in ``(u, v)`` with its own field and
  charts: the two agree wherever it keeps ``u_j^2 - v_j^2`` (alpha >= 1e-8 on these data).
* One coordinate, ``x = 1``, squared loss, target ``y``: ``beta' = -2 sqrt(beta^2 + c^2/4)
  (beta - y)`` has the solution of ``psi' = -(beta - y)``, ``beta = (c/2) sinh 2 psi``, read
  off by a scalar ODE solved here with scipy at tight tolerance; and the conserved
  ``u^2 - v^2 = c`` holds on the returned layers.
* From alpha = 1e-300 the flow ends at the last saddle of ``analysis.saddle_to_saddle``, the
  minimum-l1 interpolator (Pesme & Flammarion 2023).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from analysis.implicit_bias import min_l1_interpolator
from analysis.saddle_to_saddle import saddles
from flows import Cause, Dataset, simulate, single_example
from flows.conserved import log_abs_sinh, log_cosh
from flows.mirror import gd_mirror_flow


def staircase(seed: int) -> Dataset:
    rng = np.random.default_rng(seed)
    return Dataset(rng.standard_normal((3, 5)), rng.standard_normal(3), task="regression")


def test_log_sinh_and_log_cosh_are_stable():
    """Against numpy where it does not overflow (1e-13 relative, 1e-15 absolute near 0, where
    ``log cosh x = x^2/2 - x^4/12 + ...`` is checked to 1e-13 relative), and the asymptote
    ``|x| - log 2`` at 1e4."""
    x = np.array([-30.0, -1.0, -1e-8, 1e-3, 0.5, 20.0])
    np.testing.assert_allclose(log_abs_sinh(x), np.log(np.abs(np.sinh(x))), rtol=1e-13)
    np.testing.assert_allclose(log_cosh(x), np.log(np.cosh(x)), rtol=1e-13, atol=1e-15)
    small = np.array([1e-3, -2e-4, 1e-6])
    np.testing.assert_allclose(log_cosh(small), small**2 / 2 - small**4 / 12, rtol=1e-13)
    assert log_abs_sinh(1e4) == pytest.approx(1e4 - np.log(2), rel=1e-15)
    assert log_cosh(-1e4) == pytest.approx(1e4 - np.log(2), rel=1e-15)
    assert log_abs_sinh(0.0) == -np.inf


INITS = {
    "u = alpha, v = 0": lambda d, a: np.vstack([np.full(d, a), np.zeros(d)]),
    "v above u, signed": lambda d, a: np.vstack([np.full(d, 0.5 * a), -np.full(d, a)]),
    "mixed": lambda d, a: np.array([[a, -a, 0.0, 2 * a, a], [0.0, -a, 0.0, a, -3 * a]]),
}


@pytest.mark.parametrize("name", list(INITS))
# alpha = 1e-2 is slow: every init stays in the default run at 1e-8, where the saddles amplify
# errors most
@pytest.mark.parametrize("alpha", [pytest.param(1e-2, marks=pytest.mark.slow), 1e-8])
def test_mirror_flow_follows_simulate(name, alpha):
    """Same path as ``simulate(..., 'gd', 2, init, chart='asinh')``, both at rtol 1e-12
    (regression, original clock): log|beta|, log|theta| (finite entries) to 1e-7 (the runs at
    rtol 1e-10 differ from them by up to 1e-6: the saddles amplify errors), signs equal, tau
    to 1e-8 relative.
    Inits with c_j > 0, c_j < 0, a balanced coordinate (c = 0) and a zero one."""
    data = staircase(1091)
    init = INITS[name](data.d, alpha)
    t_max = 4.0 * np.log(1 / alpha)
    mirror = gd_mirror_flow(data, init, t_max=t_max, n_points=40, rtol=1e-12, atol=1e-14)
    ref = simulate(data, "gd", 2, init, t_max=t_max, n_points=40, rtol=1e-12, chart="asinh")
    assert mirror.status == ref.status == 0, (mirror.message, ref.message)
    for ours, theirs in [(mirror.log_abs_beta, ref.log_abs_beta),
                         (mirror.log_abs_theta, ref.log_abs_theta)]:  # fmt: skip
        finite = np.isfinite(theirs)
        np.testing.assert_array_equal(np.isfinite(ours), finite)
        np.testing.assert_allclose(ours[finite], theirs[finite], atol=1e-7)
    np.testing.assert_array_equal(mirror.sign_theta, ref.sign_theta)
    np.testing.assert_allclose(mirror.tau, ref.tau, rtol=1e-8)


def test_one_coordinate_against_its_scalar_ode_and_the_conservation_law():
    """x = 1, target 2, u(0) = 0.3, v(0) = -0.1 (c = 0.08): beta(t) against the scalar ODE
    ``beta' = -2 sqrt(beta^2 + c^2/4) (beta - 2)`` (Radau, rtol 1e-12) to 1e-8, and
    ``u^2 - v^2 = 0.08`` on every returned sample to 1e-12."""
    data = Dataset(np.array([[1.0]]), np.array([2.0]), task="regression")
    c = 0.3**2 - 0.1**2
    run = gd_mirror_flow(data, np.array([[0.3], [-0.1]]), t_max=5.0, n_points=30)

    def rhs(_t, b):
        return -2.0 * np.sqrt(b**2 + c**2 / 4) * (b - 2.0)

    ref = solve_ivp(rhs, (0, 5), [-0.03], t_eval=run.t, method="Radau", rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(run.beta[:, 0], ref.y[0], atol=1e-8)
    u, v = np.moveaxis(run.sign_theta * np.exp(run.log_abs_theta), 1, 0)
    np.testing.assert_allclose(u**2 - v**2, c, rtol=1e-12)


@pytest.mark.parametrize(
    "seed",
    [pytest.param(1085, marks=pytest.mark.slow), pytest.param(1087, marks=pytest.mark.slow), 1091],
)
def test_from_alpha_1e300_the_flow_ends_on_the_saddle_to_saddle_limit(seed):
    """u = 1e-300, v = 0 (c = 1e-600, below float64 but exact as log c): the run passes every
    saddle and ends at the last one, the minimum-l1 interpolator (1e-6: the flow's error there
    is O(alpha^0.05)). Seed 1091's coordinate 4 enters and leaves the support; the (u, v)
    engine cannot follow such paths from this alpha on every platform."""
    data = staircase(seed)
    path = saddles(data)
    alpha = 1e-300
    init = np.vstack([np.full(data.d, alpha), np.zeros(data.d)])
    run = gd_mirror_flow(data, init, t_max=(path.times[-1] + 1.0) * np.log(1 / alpha))
    assert run.status == 0 and run.cause == Cause.REACHED_END, run.message
    np.testing.assert_allclose(run.beta[-1], path.betas[-1], atol=1e-6)
    np.testing.assert_allclose(run.beta[-1], min_l1_interpolator(data).beta, atol=1e-6)


def test_classification_follows_simulate_in_the_original_clock():
    """One example, logistic loss, unbalanced init: the same path as ``simulate`` in the
    original clock (log|beta| to 1e-7)."""
    data = single_example([1.0, 2.0, 3.0])
    init = np.array([[0.5, 0.2, 0.1], [0.1, 0.3, -0.05]])
    mirror = gd_mirror_flow(data, init, t_max=50.0, n_points=30)
    ref = simulate(data, "gd", 2, init, t_max=50.0, n_points=30, clock="original", rtol=1e-12)
    assert mirror.status == ref.status == 0
    np.testing.assert_allclose(mirror.log_abs_beta, ref.log_abs_beta, atol=1e-7)
    np.testing.assert_array_equal(mirror.sign_beta, ref.sign_beta)


def test_budget_spent_returns_the_path_so_far():
    """``max_nfev`` too small: status -1, cause budget spent, the samples up to there kept."""
    data = staircase(1091)
    init = np.vstack([np.full(data.d, 1e-30), np.zeros(data.d)])
    run = gd_mirror_flow(data, init, t_max=400.0, n_points=50, max_nfev=500)
    assert run.status == -1 and run.cause == Cause.BUDGET_SPENT and "max_nfev" in run.message
    assert 1 <= len(run.t) < 50 and np.all(np.isfinite(run.log_abs_beta[0]) | (run.beta[0] == 0))


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"t_max": 0.0}, "t_max"),
        ({"n_points": 1}, "n_points"),
        ({"alpha": -1.0}, "alpha"),
        ({"max_nfev": 0}, "max_nfev"),
        ({"rtol": 0.0}, "rtol"),
    ],  # fmt: skip
)
def test_bad_arguments_name_the_parameter(kwargs, name):
    """Each bad argument: ``ValueError`` naming it."""
    with pytest.raises(ValueError, match=name):
        gd_mirror_flow(single_example([1.0, 2.0]), **{"alpha": 1.0, **kwargs})
    with pytest.raises(ValueError, match="data"):
        gd_mirror_flow(np.ones((2, 2)))


def test_the_first_sample_is_the_initialisation_at_any_scale():
    """Layers of 1e-300 and 1e-301 (their product underflows): the first sample's log|theta|,
    signs and log|beta| are those of the init (1e-12)."""
    data = single_example([1.0, 2.0])
    init = np.array([[1e-300, -3e-301], [-1e-301, 1e-300]])
    run = gd_mirror_flow(data, init, t_max=1.0, n_points=3)
    np.testing.assert_allclose(run.log_abs_theta[0], np.log(np.abs(init)), rtol=1e-12)
    np.testing.assert_array_equal(run.sign_theta[0], np.sign(init))
    expected = np.log(np.abs(init[0])) + np.log(np.abs(init[1]))
    np.testing.assert_allclose(run.log_abs_beta[0], expected, rtol=1e-12)
    np.testing.assert_array_equal(run.sign_beta[0], np.sign(init[0]) * np.sign(init[1]))
