"""``simulate_sde``: the SDE of minibatch SGD / SAM by Euler–Maruyama, many paths at once.

References: at ``B = n`` the noise vanishes and the scheme is Euler's method for the flow, which
``simulate`` (original clock, tight tolerance) integrates independently: the error halves with
``dt`` (order one); one step's increment over 20,000 paths has the mean ``drift dt`` and the
covariance ``eta c_B Sigma dt`` with ``Sigma`` the covariance over examples of the per-example
gradients written out here (regression, GD), within five standard errors.
"""

from __future__ import annotations

import numpy as np
import pytest

from flows import Dataset, simulate, simulate_sde
from flows.sde import noise_scale

N, D = 10, 4


def regression() -> Dataset:
    rng = np.random.default_rng(21)
    X = rng.standard_normal((N, D))
    return Dataset(X, X @ np.array([1.0, 0.0, -0.5, 0.0]), task="regression")


def test_noise_scale_is_the_covariance_of_a_batch_mean_without_replacement():
    """Var(mean of B of n distinct values) = (n - B) / (B (n - 1)) * their variance (1/n)."""
    values = np.random.default_rng(0).standard_normal(7)
    B = 3
    from itertools import combinations

    means = [np.mean(values[list(c)]) for c in combinations(range(7), B)]
    assert np.var(means) == pytest.approx(noise_scale(7, B) * np.var(values), rel=1e-12)


def test_full_batches_are_eulers_method_for_the_flow_at_order_one():
    data = regression()
    exact = simulate(data, "l2-sam", 2, 0.3, rho=0.05, clock="original", t_max=2.0, rtol=1e-12,
                     n_points=2).beta[-1]  # fmt: skip
    errors = []
    for dt in (0.02, 0.01, 0.005):
        run = simulate_sde(data, "l2-sam", 2, 0.3, rho=0.05, eta=0.1, batch_size=N, t_max=2.0,
                           paths=1, dt=dt, n_points=2, seed=0)  # fmt: skip
        errors.append(np.max(np.abs(run.beta[0, -1] - exact)))
    assert errors[-1] < 1e-2
    ratios = np.array(errors[:-1]) / np.array(errors[1:])
    assert np.all((ratios > 1.7) & (ratios < 2.3)), ratios


def test_one_step_has_the_drift_and_the_minibatch_covariance():
    data = regression()
    eta, B, dt, paths = 0.1, 3, 0.01, 20_000
    run = simulate_sde(data, "gd", 2, 0.3, eta=eta, batch_size=B, t_max=dt, dt=dt, paths=paths,
                       n_points=2, seed=1)  # fmt: skip
    u = v = np.full(D, 0.3)
    r = data.X @ (u * v) - data.y
    per_example = np.concatenate([r[:, None] * data.X * v, r[:, None] * data.X * u], axis=1)
    mean_gradient = per_example.mean(axis=0)
    sigma = np.cov(per_example, rowvar=False, ddof=0)
    step = (run.theta[:, 1] - run.theta[:, 0]).reshape(paths, 2 * D)
    np.testing.assert_allclose(step.mean(axis=0), -dt * mean_gradient,
                               atol=5 * np.sqrt(np.max(np.diag(sigma)) * eta * dt / paths))  # fmt: skip
    expected = eta * noise_scale(N, B) * dt * sigma
    for a in np.random.default_rng(3).standard_normal((4, 2 * D)):
        variance = a @ expected @ a
        assert np.var(step @ a, ddof=1) == pytest.approx(variance, rel=5 * np.sqrt(2 / paths))


def test_same_seed_same_bits_and_bad_input_is_named():
    data = regression()
    kw = dict(eta=0.1, batch_size=2, t_max=0.5, paths=4, n_points=3)
    a = simulate_sde(data, "l2-sam", 2, 0.3, rho=0.05, seed=9, **kw)
    b = simulate_sde(data, "l2-sam", 2, 0.3, rho=0.05, seed=9, **kw)
    c = simulate_sde(data, "l2-sam", 2, 0.3, rho=0.05, seed=10, **kw)
    assert np.array_equal(a.theta, b.theta) and not np.array_equal(a.theta, c.theta)
    assert a.theta.shape == (4, 3, 2, D) and a.status == 0
    for bad, name in ((dict(batch_size=N + 1), "batch_size"), (dict(paths=0), "paths"),
                      (dict(eta=-1.0), "eta"), (dict(seed="x"), "seed")):  # fmt: skip
        with pytest.raises(ValueError, match=name):
            simulate_sde(data, "gd", 2, 0.3, **{**kw, **bad})
    with pytest.raises(ValueError, match="algorithm"):
        simulate_sde(data, "1-sam", 2, 0.3, rho=0.05, **kw)


@pytest.mark.slow
def test_sgd_means_approach_the_sde_means_as_eta_falls():
    """E[beta_T] of minibatch GD (B = 2 of 10, 1500 seeds) against the SDE's (4000 paths, dt =
    eta / 8): the gap is O(eta) (measured 0.021, 0.013, 0.004 at eta = 0.2, 0.1, 0.05, standard
    errors 0.008, 0.005, 0.003); it must fall at least twofold from eta = 0.2 to 0.05."""
    from flows import iterate

    data = regression()
    gaps = []
    for eta in (0.2, 0.05):
        steps = int(round(2.0 / eta))
        sgd = np.array([iterate(data, "gd", 2, 0.3, eta=eta, steps=steps, batch_size=2, seed=s,
                                record_every=steps).beta[-1] for s in range(1500)])  # fmt: skip
        sde = simulate_sde(data, "gd", 2, 0.3, eta=eta, batch_size=2, t_max=2.0, paths=4000,
                           seed=1, n_points=2, dt=eta / 8).beta[:, -1]  # fmt: skip
        gaps.append(np.max(np.abs(sgd.mean(axis=0) - sde.mean(axis=0))))
    assert gaps[1] < gaps[0] / 2, gaps
