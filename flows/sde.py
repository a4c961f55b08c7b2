"""``simulate_sde``: the stochastic modified equation of minibatch SGD and SAM, many paths at once.

Minibatch SGD (or SAM) with step ``eta`` and batches of ``B`` distinct examples drawn uniformly
(``iterate(..., batch_size=B)``, ``sampling='iid'``) is modelled, to first order in ``eta``
(Li, Tai & E 2017), by

    ``d theta = -grad L(theta + eps(theta)) dt + sqrt(eta c_B) Sigma(theta)^(1/2) dW``,

in the original clock ``t = k eta``, with

* the drift the full-batch field of the algorithm (:mod:`flows.fused`): SAM's perturbation
  ``eps`` of the full-batch gradient, without the ``O(eta rho)`` correction terms of Compagnoni
  et al. 2023 (this is the first-order model);
* ``Sigma = (1 / n) sum_i (g_i - g)(g_i - g)^T`` the covariance over examples of the
  per-example gradients ``g_i = grad l_i(theta + eps(theta))`` at the (full-batch) perturbed
  point (``g`` their mean), and ``c_B = (n - B) / (B (n - 1))``: the covariance of the mean of
  ``B`` distinct examples drawn uniformly is ``c_B Sigma`` (0 at ``B = n``: the flow).

The scheme is Euler–Maruyama with step ``dt`` (weak order 1, strong order 1/2): the noise of a
step is ``sqrt(eta c_B dt / n) sum_i (g_i - g) zeta_i`` with ``zeta ~ N(0, I_n)``, whose
covariance is ``eta c_B Sigma dt`` exactly (no matrix square root). All paths are advanced
together (arrays (paths, L, d)); the draws of step ``k`` come from
``numpy.random.default_rng([root, k])`` (``seed`` as :mod:`flows.minibatch` reads it), so the
same seed gives the same bits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .algorithms import effective_algorithm, get_algorithm, resolve_hyperparameters
from .checks import integer, memory, positive
from .clocks import CLOCKS
from .data import Dataset
from .field import Problem
from .fused import FusedField
from .initialization import initialization
from .minibatch import root_seed
from .model import get_loss, loss_arguments, loss_for
from .signedlog import SignedLog

#: Most Euler–Maruyama steps of one call.
MAX_SDE_STEPS = 10**7


@dataclass(frozen=True, eq=False)
class SDEPaths:
    """Paths of :func:`simulate_sde`.

    Attributes
    ----------
    t : (K,) output times (original clock).
    theta : (paths, K, L, d) parameters; ``beta`` (paths, K, d); ``loss`` (paths, K), the
        full-data mean loss.
    dt : the Euler–Maruyama step; ``seed`` the root seed drawn from.
    status : 0, or -1 where a path left the float range (``message`` says at which time; the
        outputs from there are NaN for that path).
    """

    t: np.ndarray
    theta: np.ndarray
    beta: np.ndarray
    loss: np.ndarray
    dt: float
    seed: int
    status: int = 0
    message: str = "reached t_max"


def noise_scale(n: int, batch_size: int) -> float:
    """``c_B = (n - B) / (B (n - 1))``: the mean gradient of ``B`` distinct examples drawn
    uniformly from ``n`` has covariance ``c_B Sigma`` (``Sigma`` the covariance over the
    examples, with ``1 / n``)."""
    return 0.0 if n == 1 else (n - batch_size) / (batch_size * (n - 1))


def per_example_gradients(problem: Problem, theta: np.ndarray, time: float = 0.0) -> np.ndarray:
    """``g_i = grad l_i(theta + eps(theta))`` (paths, n, L, d) at float parameters ``theta``
    (paths, L, d), ``eps`` the full-batch perturbation: ``l'(u_i) z_i * prod_{l' != l}``."""
    fused = FusedField(problem)
    signed = SignedLog.from_float(theta)
    point = fused.perturbed_point(signed.sign, signed.log_abs, None, time).to_float()
    depth = point.shape[-2]
    loo = np.stack(
        [np.prod(np.delete(point, layer, axis=-2), axis=-2) for layer in range(depth)], axis=-2
    )
    data, loss = problem.data, problem.loss
    u = loss_arguments(np.prod(point, axis=-2) @ data.signed_features.T, data)
    sign = 1.0 if loss.descent_sign is None else loss.descent_sign(u)
    derivative = -sign * np.exp(loss.log_abs_derivative(u))  # l'(u_i), (paths, n)
    return (
        derivative[..., :, None, None]
        * data.signed_features[None, :, None, :]
        * loo[..., None, :, :]
    )


def drift(problem: Problem, theta: np.ndarray, time: float = 0.0) -> np.ndarray:
    """``-grad L(theta + eps(theta))`` (paths, L, d): the full-batch field in the original
    clock."""
    vel = FusedField(problem).velocity(SignedLog.from_float(theta), None, time)
    log_c = np.reshape(vel.log_c, np.shape(vel.log_c) + (1,) * (theta.ndim - np.ndim(vel.log_c)))
    return SignedLog(vel.dtheta.sign, vel.dtheta.log_abs + log_c).to_float()


def simulate_sde(
    data: Dataset,
    algorithm: str = "gd",
    depth: int = 2,
    alpha=1.0,
    *,
    eta: float,
    batch_size: int,
    t_max: float,
    paths: int = 100,
    seed=None,
    dt: float | None = None,
    n_points: int = 101,
    loss: str | None = None,
    **hyperparameters,
) -> SDEPaths:
    """Integrate the SDE of minibatch ``algorithm`` (module docstring) for ``paths`` paths
    from ``alpha`` (as :func:`flows.iterate`) to ``t_max`` with Euler–Maruyama steps ``dt``
    (default ``eta / 4``), sampled at ``n_points`` equally spaced times. ``ValueError`` naming
    the parameter on bad input (a per-example algorithm has no SDE here)."""
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flows.Dataset, got {type(data).__name__}")
    hp = resolve_hyperparameters(algorithm, hyperparameters)
    algo = get_algorithm(effective_algorithm(algorithm, hp))
    if algo.per_example:
        raise ValueError(
            f"algorithm: {algorithm!r} perturbs per example; simulate_sde has no SDE for it"
        )
    eta = positive(eta, "eta")
    size = integer(batch_size, "batch_size", 1)
    if size > data.n:
        raise ValueError(f"batch_size must be at most n = {data.n}, got {size}")
    t_max = positive(t_max, "t_max")
    paths = integer(paths, "paths", 1)
    n_points = integer(n_points, "n_points", 2)
    step = eta / 4 if dt is None else positive(dt, "dt")
    count = int(np.ceil(t_max / step))
    if count > MAX_SDE_STEPS:
        raise ValueError(f"dt: {count} steps to t_max exceed {MAX_SDE_STEPS}; raise dt")
    init = initialization(alpha, depth, data.d, reduced=False)
    memory(paths * data.n * init.groups.size, "paths", "the per-example gradients")
    memory(paths * n_points * init.groups.size, "paths", "the sampled parameters")
    problem = Problem(data, algo, hp, get_loss(loss_for(loss, data)), init.multiplicity,
                      CLOCKS["original"])  # fmt: skip
    root = root_seed(seed)
    scale = np.sqrt(eta * noise_scale(data.n, size) * step / data.n)
    times = np.linspace(0.0, t_max, n_points)
    out = np.full((paths, n_points) + init.groups.shape, np.nan)
    theta = np.broadcast_to(init.groups, (paths,) + init.groups.shape).copy()
    out[:, 0] = theta
    status, message, t, k, next_out = 0, "reached t_max", 0.0, 0, 1
    while next_out < n_points:
        h = min(step, times[next_out] - t)
        with np.errstate(all="ignore"):
            move = drift(problem, theta, t) * h
            if scale:
                g = per_example_gradients(problem, theta, t)
                centred = g - g.mean(axis=-3, keepdims=True)
                zeta = np.random.default_rng([root, k]).standard_normal((paths, data.n))
                move += scale * np.sqrt(h / step) * np.einsum("pn,pnld->pld", zeta, centred)
            theta = theta + move
        t, k = t + h, k + 1
        if not np.all(np.isfinite(theta)):
            status, message = -1, f"a path left the float range at t={t:.6g}"
            break
        if t >= times[next_out] - 1e-12 * max(1.0, t_max):
            out[:, next_out] = theta
            next_out += 1
    with np.errstate(all="ignore"):
        beta = np.prod(out, axis=-2)
        u = loss_arguments(beta @ data.signed_features.T, data)
        mean_loss = np.mean(problem.loss.value(u), axis=-1)
    return SDEPaths(times, out, beta, mean_loss, step, root, status, message)
