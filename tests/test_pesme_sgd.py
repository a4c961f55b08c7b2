"""The limit of (S)GD on ``beta = u ⊙ v`` is the hyperbolic-entropy interpolator of an *effective*
initialisation ``alpha_inf < alpha`` that the run itself sets: Pesme, Pillaud-Vivien &
Flammarion (NeurIPS 2021, arXiv:2106.09524) for the stochastic gradient flow, and Even, Pesme,
Gunasekar & Flammarion (NeurIPS 2023, arXiv:2302.08982) exactly for discrete (S)GD.

Sources
-------
* Even et al. 2023, Theorem 1 (parametrisation ``beta = u ⊙ v``, ``u_0 = sqrt(2) alpha``,
  ``v_0 = 0``): for step sizes that converge, ``beta_inf = argmin_{X beta = y}
  D_{psi_{alpha_inf}}(beta, beta~_0)`` with ``alpha_inf = alpha ⊙ exp(-(1/2) sum_k q(gamma
  g_k))``, ``q(x) = -(1/2) ln((1 - x^2)^2)``, ``g_k`` the (minibatch) gradient in ``beta`` at
  step ``k``, ``psi_alpha`` the hyperbolic entropy of Woodworth et al. and ``beta~_0`` a small
  perturbation (``O(gamma^3)``). The same ``q`` and the accumulation of ``q(gamma g_k)`` over
  the steps are in the third-party reproduction alexandremr01/sgd-over-dlns,
  ``sgd_over_dlns/network.py`` lines 3 and 48. The paper's text itself could not be retrieved
  here, so the statement is re-derived below in this toolkit's parametrisation; the derivation
  is exact algebra and is what the tests check.
* Pesme et al. 2021, Theorem 1: the stochastic gradient flow (SGD's noise modelled as a
  covariance ``~ L(beta) X^T X / n``) converges to ``argmin_{X beta = y} psi_{alpha_inf}(beta)``
  with ``alpha_inf = alpha ⊙ exp(-c gamma diag(X^T X) / n  int_0^inf L(beta_s) ds)``. The
  constant ``c`` is re-derived below for this toolkit's loss.

Derivation (this toolkit: ``L_B(beta) = sum_{i in B} (<x_i, beta> - y_i)^2 / (2 |B|)``,
``flows.iterate(data, "gd", 2, [alpha 1, 0], batches=...)``, step ``u <- u - gamma g ⊙ v``,
``v <- v - gamma g ⊙ u``, ``g = grad_beta L_B``):

* ``r = u + v`` and ``s = u - v`` obey ``r <- r (1 - gamma g)``, ``s <- s (1 + gamma g)``, and
  ``beta = (r^2 - s^2) / 4``. From ``r_0 = s_0 = alpha`` (while ``gamma |g_k| < 1``)::

      u_K^2 - v_K^2 = r_K s_K = alpha^2 prod_k (1 - gamma^2 g_k^2) = alpha_K^2,
      alpha_K^2 = alpha^2 exp(-sum_{k<K} q(gamma g_k)),          q(x) = -ln|1 - x^2|,
      beta_K = (alpha_K^2 / 2) sinh(w_K + delta_K),   w_K = -2 gamma sum_{k<K} g_k,
      delta_K = sum_{k<K} [2 gamma g_k - 2 atanh(gamma g_k)]      (= O(gamma^3 sum g^3)).

  Every ``g_k = X_B^T (...) / |B|`` is in the row space of ``X``, so ``w_K`` is; and
  ``asinh(2 beta / alpha_K^2) - delta_K = w_K`` is the gradient of ``D(beta) = sum_j k_j
  [h(beta_j / k_j) - a_j beta_j / k_j]`` (``k = alpha_K^2 / 2``, ``a = delta_K``, ``h(x) = x
  asinh x - sqrt(1 + x^2) + 1``; :mod:`analysis.implicit_bias`): ``beta_K`` is *exactly* the
  minimiser of ``D`` over ``{X beta = X beta_K}``. In Even et al.'s units (``u_0 = sqrt(2)
  alpha_E``) ``k = alpha_E^2`` and ``D = 2 psi_{alpha_E} + linear``: their Theorem 1, with
  ``beta~_0 = (alpha_inf^2 / 2) sinh(delta_inf)``. Here ``k`` is ``alpha_inf^2 / 2`` for the
  toolkit's ``alpha``.
* SGF (batch 1): ``q(gamma g) = gamma^2 g^2 + O(gamma^4)`` and, one step at a time,
  ``E[g_j^2 | beta] = (1/n) sum_i r_i^2 x_ij^2`` (``r = X beta - y``). Pesme et al.'s noise model
  replaces ``r_i^2`` by its mean ``2 L`` (and drops the full gradient's square), which gives
  ``sum_k q(gamma g_k) ~ 2 gamma diag(X^T X) / n  int L dt`` (``t = gamma k``), i.e.
  ``alpha_inf = alpha ⊙ exp(-gamma diag(X^T X) / n int_0^inf L dt)`` here (``c = 1``), with the
  loss integral of the run itself.

Measured (n = 20, d = 60, ``beta* = (1, -1, 1, 0, ...)``, ``alpha = 0.3``, Gaussian X;
``python tests/test_pesme_sgd.py`` prints these numbers):

* the discrete formula holds to rounding at every step (``u^2 - v^2`` to 1e-12 relative,
  ``beta_K`` against the independent dual solve to 1e-11). Trained to interpolation (gamma =
  0.02, 15,000 steps, loss ~1e-26), the limit is the effective-initialisation interpolator to
  1.7e-13 (B = 1), 1.2e-13 (B = 4), 8.6e-14 (GD); dropping ``delta`` (the form ``argmin
  psi_{alpha_inf}``) gives 2.8e-4, 3.3e-5, 1.8e-5 and the gradient-flow interpolator at
  ``alpha`` 7.3e-3, 6.8e-4, 1.4e-3 (sup norms); ``min_j alpha_inf,j / alpha`` = 0.919, 0.982,
  0.990;
* Pesme's SGF formula fed with the run's loss integral removes 56-57 % of the gap between the
  SGD limit (B = 1) and the gradient-flow interpolator at ``alpha``: gap ratios 0.431, 0.433,
  0.434, 0.437 at gamma = 0.02, 0.01, 0.005, 0.0025 (3 sample orders each). The gap shrinks
  like gamma, as the effect does, but not faster. With the exact conditional noise
  (``(1/n) sum_i r_i^2 x_ij^2``, the full gradient's square included) the ratios are 0.221,
  0.143, 0.111, 0.102: most of what the SGF formula misses is its isotropic noise model
  (``r_i^2 -> 2 L``), not the continuous time; a residual ~0.1 remains at these steps;
* benefit of stochasticity (gamma = 0.04, 6000 steps, 8 data sets, B = 1 against GD), GD minus
  SGD: ``||beta||_1`` 0.079 +- 0.015 (standard error), ``||beta - beta*||_2`` 0.032 +- 0.006,
  mean ``log alpha_inf^2`` 0.165 +- 0.010; SGD's ``alpha_inf`` is below GD's in every
  coordinate of every run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from scipy import optimize

from analysis.implicit_bias import woodworth_interpolator
from flows import Dataset, iterate

N, D = 20, 60
ALPHA = 0.3


def sparse_problem(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gaussian ``X`` (N, D), ``beta* = (1, -1, 1, 0, ...)`` and ``y = X beta*``."""
    X = np.random.default_rng(seed).standard_normal((N, D))
    beta_star = np.zeros(D)
    beta_star[:3] = [1.0, -1.0, 1.0]
    return X, X @ beta_star, beta_star


def sample_order(seed: int, steps: int, batch: int) -> np.ndarray:
    """``steps`` batches of ``batch`` distinct examples, drawn uniformly and independently."""
    rows = np.tile(np.arange(N), (steps, 1))
    return np.random.default_rng(seed).permuted(rows, axis=1)[:, :batch]


def hyperbolic_interpolator(X: np.ndarray, y: np.ndarray, k: np.ndarray, a: np.ndarray):
    """``argmin sum_j k_j [h(beta_j / k_j) - a_j beta_j / k_j]`` s.t. ``X beta = y`` (module doc),
    written out here: trust-region Newton on the smooth dual ``phi(lam) = sum_j k_j cosh(a_j +
    (X^T lam)_j) - lam . y`` (``grad phi = X beta(lam) - y`` with the mirror map ``beta(lam) = k ⊙
    sinh(a + X^T lam)``), then Newton polishing.

    Returns
    -------
    numpy.ndarray
        ``beta`` (d,), with ``X beta = y`` to 1e-12 and ``asinh(beta / k) - a`` in the row space
        of ``X`` by construction.
    """

    def dual(lam: np.ndarray) -> tuple[float, np.ndarray]:
        z = a + X.T @ lam
        return float(np.sum(k * np.cosh(z)) - lam @ y), X @ (k * np.sinh(z)) - y

    def hessian(lam: np.ndarray) -> np.ndarray:
        return (X * (k * np.cosh(a + X.T @ lam))) @ X.T

    lam = optimize.minimize(
        dual, np.zeros(len(y)), jac=True, hess=hessian, method="trust-exact",
        options={"gtol": 1e-12},
    ).x  # fmt: skip
    for _ in range(3):
        lam = lam - np.linalg.solve(hessian(lam), dual(lam)[1])
    beta = k * np.sinh(a + X.T @ lam)
    assert np.max(np.abs(X @ beta - y)) <= 1e-12 * max(1.0, float(np.max(np.abs(y))))
    return beta


@dataclass
class Run:
    """A (S)GD run and what the formulas need of it (module doc), summed over its steps."""

    beta: np.ndarray  # (d,) the last iterate beta_K
    uv: np.ndarray  # (2, d) the last u_K, v_K
    loss: float  # the full data's loss at beta_K
    gain: np.ndarray  # sum_k q(gamma g_k), q(x) = -ln|1 - x^2|
    delta: np.ndarray  # sum_k [2 gamma g_k - 2 atanh(gamma g_k)]
    w: np.ndarray  # -2 gamma sum_k g_k
    loss_integral: float  # gamma sum_k L(beta_k)
    conditional: np.ndarray  # gamma^2 sum_k E[g_k^2 | beta_k], batch 1
    top: float  # max_k gamma ||g_k||_inf (the formulas need < 1)


def run_with_gradients(X, y, eta: float, order: np.ndarray | None, steps: int) -> Run:
    """Run ``flows.iterate`` (GD when ``order`` is None, else the replayed batches) in chunks on
    numpy (no compile for the short fast runs), recording every iterate, and sum the gradients of each step, written out here from the
    recorded ``u_k ⊙ v_k``, the batch and the squared loss."""
    data = Dataset(X, y, task="regression")
    init = np.array([np.full(D, ALPHA), np.zeros(D)])
    gain, delta, w, conditional = (np.zeros(D) for _ in range(4))
    loss_integral, top, run = 0.0, 0.0, None
    for first in range(0, steps, 5000):
        m = min(5000, steps - first)
        batches = None if order is None else order[first : first + m]
        run = iterate(data, "gd", 2, init, eta=eta, steps=m, record_every=1, batches=batches,
                      start=run, backend="numpy")  # fmt: skip
        assert run.status == 0 and run.theta.shape[0] == m + 1
        betas = run.theta[:-1, 0] * run.theta[:-1, 1]  # beta_k before step k
        residuals = betas @ X.T - y  # (m, n)
        if batches is None:
            g = residuals @ X / N
        else:
            g = np.einsum("kb,kbj->kj", np.take_along_axis(residuals, batches, 1), X[batches])
            g /= batches.shape[1]
        x = eta * g
        top = max(top, float(np.max(np.abs(x))))
        gain -= np.log(np.abs(1.0 - x**2)).sum(0)
        delta += (2.0 * x - 2.0 * np.arctanh(x)).sum(0)
        w -= 2.0 * x.sum(0)
        loss_integral += eta * float(np.sum(residuals**2)) / (2 * N)
        conditional += eta**2 * (residuals**2 @ X**2).sum(0) / N
    assert run is not None
    last = run.theta[-1]
    return Run(last[0] * last[1], last, float(run.loss[-1]), gain, delta, w, loss_integral,
               conditional, top)  # fmt: skip


# --------------------------------------------------------------------------- fast: the algebra


@pytest.mark.parametrize("batch", [1, 4, None])
def test_the_effective_initialisation_is_exact_at_every_step(batch):
    """Even et al. Theorem 1, finite-time form (module doc): after K steps of SGD (B = 1, 4) or
    GD, ``u_K^2 - v_K^2 = alpha^2 exp(-sum q(gamma g_k))``, ``beta_K = (alpha_K^2 / 2)
    sinh(w_K + delta_K)`` and ``beta_K`` is the hyperbolic-entropy interpolator of
    ``(alpha_K, delta_K)`` over ``{X beta = X beta_K}`` (an independent dual solve)."""
    X, y, _ = sparse_problem(0)
    steps, eta = 300, 0.03
    order = None if batch is None else sample_order(1, steps, batch)
    run = run_with_gradients(X, y, eta, order, steps)
    assert run.top < 0.5
    alpha_k2 = ALPHA**2 * np.exp(-run.gain)
    u, v = run.uv
    np.testing.assert_allclose((u - v) * (u + v), alpha_k2, rtol=1e-12)
    assert np.all(alpha_k2 < ALPHA**2)  # q(x) > 0 for 0 < |x| < 1: every coordinate moved
    np.testing.assert_allclose(run.beta, alpha_k2 / 2 * np.sinh(run.w + run.delta), rtol=1e-10,
                               atol=1e-14)  # fmt: skip
    minimiser = hyperbolic_interpolator(X, X @ run.beta, alpha_k2 / 2, run.delta)
    np.testing.assert_allclose(run.beta, minimiser, rtol=0, atol=1e-11)


def test_the_dual_solver_agrees_with_the_library_on_a_signed_vector_init():
    """The test's solver and :func:`analysis.implicit_bias.woodworth_interpolator` (damped Newton
    on its own dual) on a per-coordinate ``k`` with offsets ``a``: the init ``u_0 = a_k
    cosh(a / 2)``, ``v_0 = a_k sinh(a / 2)`` has ``(u_0^2 - v_0^2) / 2 = k`` and
    ``asinh(u_0 v_0 / k) = a``."""
    X, y, _ = sparse_problem(3)
    rng = np.random.default_rng(4)
    scale = ALPHA * np.exp(-rng.uniform(0.0, 1.0, D))
    a = rng.normal(0.0, 0.3, D)
    mine = hyperbolic_interpolator(X, y, scale**2 / 2, a)
    init = np.array([scale * np.cosh(a / 2), scale * np.sinh(a / 2)])
    library = woodworth_interpolator(X, y, init)
    assert library.status == 0
    np.testing.assert_allclose(library.beta, mine, rtol=0, atol=1e-10)


# --------------------------------------------------------------------------- slow: the limits


def limit_gaps(batch: int | None, eta: float = 0.02, steps: int = 15_000) -> dict[str, float]:
    """One run on ``sparse_problem(0)`` trained to interpolation; the sup-distances of its last
    iterate to the interpolators of Even et al. (``alpha_inf``, ``delta_inf``), of ``alpha_inf``
    alone (``delta = 0``) and of the gradient flow (``alpha``), with the run's loss, the largest
    ``gamma |g_k|`` and ``min_j alpha_inf,j / alpha``."""
    X, y, _ = sparse_problem(0)
    order = None if batch is None else sample_order(2, steps, batch)
    run = run_with_gradients(X, y, eta, order, steps)
    k_inf = ALPHA**2 * np.exp(-run.gain) / 2
    predictions = {
        "even": hyperbolic_interpolator(X, y, k_inf, run.delta),
        "without_delta": hyperbolic_interpolator(X, y, k_inf, np.zeros(D)),
        "flow": hyperbolic_interpolator(X, y, np.full(D, ALPHA**2 / 2), np.zeros(D)),
    }
    gaps = {name: float(np.max(np.abs(run.beta - b))) for name, b in predictions.items()}
    return gaps | {
        "loss": run.loss,
        "top": run.top,
        "alpha_ratio": float(np.exp(-run.gain.max() / 2)),
    }


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 4, None])
def test_the_limit_is_the_interpolator_of_the_effective_initialisation(batch):
    """Trained to interpolation (loss <= 1e-20; gamma = 0.02, 15,000 steps), the (S)GD limit is
    ``argmin D_{alpha_inf, delta_inf}`` over ``X beta = y`` (Even et al. Theorem 1) to 1e-6:
    a loss of 1e-20 (residual <= 6e-10) allows ~1e-7 through the solve's condition ~1e2
    (measured in other runs: 1.3e-8 at loss 2e-22); here ~1e-13 at loss ~1e-26. Without the
    perturbation ``delta`` the prediction is off by more than 100x that (~1e-4 at B = 1), and
    the plain-``alpha`` gradient-flow interpolator further still."""
    gaps = limit_gaps(batch)
    assert gaps["loss"] <= 1e-20 and gaps["top"] < 0.5 and gaps["alpha_ratio"] < 1.0
    assert gaps["even"] <= 1e-6
    assert gaps["even"] < 1e-2 * gaps["without_delta"] and gaps["without_delta"] < gaps["flow"]


def benefit_statistics(
    eta: float = 0.04, steps: int = 6000, seeds: int = 8
) -> dict[str, np.ndarray]:
    """SGD (B = 1) and GD at the same ``alpha`` and step on ``seeds`` data sets and sample
    orders. Per seed, GD minus SGD: ``||beta||_1``, ``||beta - beta*||_2`` and the mean and the
    minimum over coordinates of ``log(alpha_inf^2)`` (``alpha_inf^2 = u^2 - v^2`` of the last
    iterate); also the SGD values of the first two and the larger final loss."""
    rows = []
    for seed in range(seeds):
        X, y, beta_star = sparse_problem(10 + seed)
        data = Dataset(X, y, task="regression")
        init = np.array([np.full(D, ALPHA), np.zeros(D)])
        sgd = iterate(data, "gd", 2, init, eta=eta, steps=steps, record_every=steps,
                      batches=sample_order(20 + seed, steps, 1))  # fmt: skip
        gd = iterate(data, "gd", 2, init, eta=eta, steps=steps, record_every=steps)
        values = []
        for run in (sgd, gd):
            assert run.status == 0
            u, v = run.theta[-1]
            beta = run.beta[-1]
            scale = (u - v) * (u + v)
            assert np.all(scale < ALPHA**2)
            values.append((np.abs(beta).sum(), np.linalg.norm(beta - beta_star), scale,
                           run.loss[-1]))  # fmt: skip
        (l1_s, dist_s, scale_s, loss_s), (l1_g, dist_g, scale_g, loss_g) = values
        log_ratio = np.log(scale_g / scale_s)
        rows.append([l1_g - l1_s, dist_g - dist_s, np.mean(log_ratio), l1_s, dist_s,
                     max(loss_s, loss_g), np.min(log_ratio)])  # fmt: skip
    names = ["l1", "distance", "log_scale", "sgd_l1", "sgd_distance", "loss", "min_log_scale"]
    return dict(zip(names, np.array(rows).T, strict=True))


@pytest.mark.slow
def test_sgd_has_a_smaller_effective_init_and_a_sparser_limit_than_gd():
    """Same data, ``alpha`` and step (gamma = 0.04): SGD (B = 1) against GD over 8 data sets and
    sample orders. The effective scale ``alpha_inf^2 = u^2 - v^2`` of the last iterate (module
    doc) is smaller for SGD; its limit has the smaller l1 norm and is closer to the sparse
    ``beta*`` (Pesme et al. / Even et al.: a smaller ``alpha_inf``, a limit nearer the
    minimum-l1 interpolator). Paired differences GD - SGD: mean > 3 standard errors (measured
    5.2, 5.3 and 17 standard errors), and SGD's ``alpha_inf`` below GD's in every coordinate."""
    stats = benefit_statistics()
    assert np.all(stats["loss"] <= 1e-10) and np.all(stats["min_log_scale"] > 0)
    for name in ("l1", "distance", "log_scale"):
        diffs = stats[name]
        assert np.mean(diffs) > 3 * np.std(diffs, ddof=1) / np.sqrt(len(diffs)), name


def sgf_gaps(etas=(0.02, 0.005), seeds: int = 3) -> dict[float, np.ndarray]:
    """B = 1 on ``sparse_problem(1)``, ``200 / eta`` steps per run: per step size, rows (one a
    sample order) of the l2 gaps of the SGD limit to the gradient-flow interpolator at ``alpha``,
    to Pesme et al.'s prediction (module doc, with the run's loss integral) and to the same with
    the exact conditional noise; then the run's loss."""
    X, y, _ = sparse_problem(1)
    flow = hyperbolic_interpolator(X, y, np.full(D, ALPHA**2 / 2), np.zeros(D))
    column = np.sum(X**2, axis=0) / N
    out = {}
    for eta in etas:
        rows = []
        for seed in range(seeds):
            steps = int(200 / eta)
            run = run_with_gradients(X, y, eta, sample_order(30 + seed, steps, 1), steps)
            pesme_k = ALPHA**2 * np.exp(-2.0 * eta * column * run.loss_integral) / 2
            conditional_k = ALPHA**2 * np.exp(-run.conditional) / 2
            predictions = (
                flow,
                hyperbolic_interpolator(X, y, pesme_k, np.zeros(D)),
                hyperbolic_interpolator(X, y, conditional_k, np.zeros(D)),
            )
            rows.append([np.linalg.norm(run.beta - b) for b in predictions] + [run.loss])
        out[eta] = np.array(rows)
    return out


@pytest.mark.slow
def test_pesme_sgf_formula_gap_shrinks_with_the_step():
    """B = 1, gamma = 0.02 and 0.005, 3 sample orders each, trained to loss <= 1e-14 (the gaps
    are >= 1e-4). Asserted: Pesme et al.'s prediction beats the gradient flow's in every run,
    and its gap shrinks about linearly with gamma (a 4x smaller step: a 3x to 6x smaller gap);
    relative to the flow's gap it does *not* shrink (0.43 at both, within 0.1); the relative gap
    of the conditional-noise prediction does (by more than a quarter; measured 0.22 -> 0.11)."""
    gaps = sgf_gaps()
    for g in gaps.values():
        assert np.all(g[:, 3] <= 1e-14) and np.all(g[:, 1] < g[:, 0])
    coarse, fine = gaps[0.02], gaps[0.005]
    assert 3.0 < coarse[:, 1].mean() / fine[:, 1].mean() < 6.0
    relative = [np.mean(g[:, 1] / g[:, 0]) for g in (coarse, fine)]
    assert relative[1] > 0.3 and abs(relative[1] - relative[0]) < 0.1
    conditional = [np.mean(g[:, 2] / g[:, 0]) for g in (coarse, fine)]
    assert conditional[1] < 0.75 * conditional[0]


def report() -> None:
    """Print the numbers quoted in the module docstring and docs (``python
    tests/test_pesme_sgd.py``; about a minute)."""
    for batch in (1, 4, None):
        limit = limit_gaps(batch)
        print(f"B={batch}: loss {limit['loss']:.1e}, min alpha_inf/alpha "
              f"{limit['alpha_ratio']:.3f}, gap Even {limit['even']:.1e}, without delta "
              f"{limit['without_delta']:.1e}, flow {limit['flow']:.1e}")  # fmt: skip
    stats = benefit_statistics()
    for name in ("l1", "distance", "log_scale"):
        diffs = stats[name]
        print(f"GD - SGD {name}: mean {np.mean(diffs):.4f} +- "
              f"{np.std(diffs, ddof=1) / np.sqrt(len(diffs)):.4f} (se, 8 seeds)")  # fmt: skip
    print(f"SGD l1 {np.mean(stats['sgd_l1']):.3f}, ||beta - beta*|| "
          f"{np.mean(stats['sgd_distance']):.3f}; max loss {np.max(stats['loss']):.1e}")  # fmt: skip
    for eta, g in sgf_gaps((0.02, 0.01, 0.005, 0.0025)).items():
        print(f"eta {eta}: gap flow {g[:, 0].mean():.2e}, Pesme {g[:, 1].mean():.2e} "
              f"(ratio {np.mean(g[:, 1] / g[:, 0]):.3f}), conditional {g[:, 2].mean():.2e} "
              f"(ratio {np.mean(g[:, 2] / g[:, 0]):.3f})")  # fmt: skip


if __name__ == "__main__":
    report()
