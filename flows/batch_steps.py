"""Minibatch steps of :func:`flows.iterate` in plain float64, on the batch's rows.

Step ``k`` (:mod:`flows.minibatch`) takes, on the rows ``z_i``, ``i`` in the batch, with loss
arguments ``u_i = <beta, z_i> - o_i``,

    grad L_B(theta)^(l) = (1/B) sum_i l'(u_i) z_i * prod_{k != l} theta^(k),

the perturbed point ``theta' = theta + eps(grad L_B(theta))`` of the algorithm table (each
example's own ``eps(grad l_i)`` for a per-example algorithm, whose step averages
``grad l_i(theta_i')``), then the base optimizer's step (:class:`flows.discrete.BaseOptimizer`)
with the step's label noise and SGLD term (:class:`flows.minibatch.StepNoise`, the same draws).
The products are BLAS ones on ``Z[batch]`` (``B x d``); no data set, field or signed-log number
is built. The numbers are those of the general step (:func:`flows.discrete.perturbed_gradient`
on the batch's data set) up to rounding: the general step forms ``-c G prod theta`` from
``log c`` and ``G``, this one the sum itself.

A step runs here only where the general step too computes in plain floats and where its result
is an iterate the general step keeps:

* ``theta`` and the perturbed point are in the float range of
  :meth:`flows.fused.FusedField._float_rows`: ``|theta|_max^L`` within ``exp(+-FLOAT_RANGE)``,
  the smallest non-zero ``|theta|^L`` above ``exp(-4 FLOAT_RANGE)``;
* the next iterate is in that range too and its loss arguments on the batch are at most the
  loss-check argument in size (bounded by ``max_i ||z_i|| ||beta|| + max_i |o_i|``, or computed
  where the bound is larger), so it is representable without evaluating the loss.

Any other step (and one where a gradient is 0 or not finite) is handed back:
:func:`flows.discrete.iterate` takes it with the general step. Whether step ``k`` runs here
depends on ``theta_k``, the momentum buffer and ``k`` alone, so a continued run (``start=``)
takes the same steps, bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from scipy.special import expit

from .algorithms import GradientSummary, hyperparameters_at, is_scheduled
from .field import Problem
from .fused import FLOAT_RANGE, _exclusive, log_magnitudes
from .minibatch import Minibatches, StepNoise
from .model import LOSSES

if TYPE_CHECKING:
    from .discrete import BaseOptimizer

#: A loss's ``l'(u)`` as ``(weight, sign)``: ``l'(u) = sign * weight(u)``.
Slope = tuple[Callable[[np.ndarray], np.ndarray], float]

#: ``l'(u) = sign * weight(u)`` in plain floats, by loss name (:data:`flows.model.LOSSES`):
#: logistic ``-1 / (1 + e^u)``, exponential ``-e^-u``, squared ``u``.
SLOPES: dict[str, Slope] = {
    "logistic": (lambda u: expit(-u), -1.0),
    "exponential": (lambda u: np.exp(-u), -1.0),
    "squared": (lambda u: u, 1.0),
}


def _product(theta: np.ndarray) -> np.ndarray:
    """``beta = prod_l theta^(l)`` of float layers (..., L, d) -> (..., d)."""
    return np.prod(theta, axis=-2)


def _exclusive_product(theta: np.ndarray) -> np.ndarray:
    """``prod_{k != l} theta^(k)`` of float layers (..., L, d), without division."""
    return _exclusive(theta, np.multiply, 1.0)


#: :func:`_product` and :func:`_exclusive_product` at the depths where fewer operations give the
#: same numbers.
PRODUCTS: dict[int, Callable[[np.ndarray], np.ndarray]] = {
    1: lambda theta: theta[..., 0, :],
    2: lambda theta: theta[..., 0, :] * theta[..., 1, :],
}
LEAVE_ONE_OUT: dict[int, Callable[[np.ndarray], np.ndarray]] = {
    1: np.ones_like,
    2: lambda theta: theta[..., ::-1, :],
}


class FloatBatchSteps:
    """Advances a minibatch ``iterate`` run through float steps (module docstring).

    Parameters
    ----------
    problem : the run's problem (full data, algorithm, hyper-parameters, loss; one group of
        multiplicity 1 per layer, as :func:`flows.iterate` builds it).
    base : the base optimizer (:class:`flows.discrete.BaseOptimizer`).
    batches : the run's batches (None: every example each step).
    noise : its label noise and SGLD term (None: none).
    slope : ``(weight, sign)`` of the loss (:data:`SLOPES`).
    loss_limit : the loss-check argument (:data:`flows.discrete.LOSS_CHECK_ARGUMENT`).
    """

    def __init__(self, problem: Problem, base: BaseOptimizer, batches: Minibatches | None,
                 noise: StepNoise | None, slope: Slope, loss_limit: float):  # fmt: skip
        data = problem.data
        self.base, self.batches, self.noise = base, batches, noise
        self.noisy_labels = noise is not None and bool(noise.label_noise)
        self.weight, self.sign = slope
        self.algorithm, self.hp = problem.algorithm, problem.hyperparameters
        self.scheduled = is_scheduled(self.hp)
        self.multiplicity = np.asarray(problem.multiplicity)
        self.X, self.y, self.regression = data.X, data.y, data.regression
        self.Z = np.ascontiguousarray(data.signed_features)
        self.offsets = data.offsets
        self.row_norm = float(np.max(np.sqrt(np.einsum("ij,ij->i", self.Z, self.Z))))
        largest_offset = 0.0 if data.offsets is None else float(np.max(np.abs(data.y)))
        self.loss_limit = loss_limit
        self.room = self.room_for(largest_offset)
        self.depth = depth = int(self.multiplicity.sum())
        self.root_d = math.sqrt(data.d)
        self.top_range = (math.exp(-FLOAT_RANGE / depth), math.exp(FLOAT_RANGE / depth))
        self.floor = math.exp(-4.0 * FLOAT_RANGE / depth)
        self.product = PRODUCTS.get(depth, _product)
        self.leave_one_out = LEAVE_ONE_OUT.get(depth, _exclusive_product)
        self.gradient = (
            self.per_example_gradient
            if self.algorithm.per_example
            else self.perturbed_gradient
            if self.algorithm.perturbs
            else self.plain_gradient
        )

    def advance(
        self,
        theta: np.ndarray,
        buffer: np.ndarray | None,
        k: int,
        last: int,
        record_every: int,
        kept_steps: list[int],
        kept: list[np.ndarray],
    ) -> tuple[int, np.ndarray, np.ndarray | None]:
        """Steps from ``k`` (iterate ``theta``, momentum buffer ``buffer``) towards ``last``,
        appending the recorded steps and iterates (arrays this loop never modifies);
        ``(k, theta, buffer)`` after the last step taken (``k < last``: step ``k + 1`` is
        handed back)."""
        if self.largest(theta) is None:
            return k, theta, buffer
        beta = self.product(theta)
        with np.errstate(over="ignore", invalid="ignore"):
            while k < last:
                taken = self.step(theta, beta, buffer, k)
                if taken is None:
                    break
                theta, beta, buffer = taken
                k += 1
                if k % record_every == 0 or k == last:
                    kept_steps.append(k)
                    kept.append(theta)
        return k, theta, buffer

    def step(
        self, theta: np.ndarray, beta: np.ndarray, buffer: np.ndarray | None, k: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
        """Step ``k`` from ``theta`` (in the float range, ``beta`` its product) and the buffer:
        ``(theta_{k+1}, beta_{k+1}, b_k)``, or None where it is handed back."""
        Z, offsets = self.rows(k)
        g = self.gradient(theta, beta, Z, offsets, k)
        if g is None:
            return None
        buffer = self.base.direction(g, theta, buffer)
        rate = self.base.rate(k)
        theta = theta - rate * buffer
        if self.noise is not None:
            theta = theta + self.noise.kick(k, theta.shape, rate)
        kept = self.kept(theta, Z, offsets)
        return None if kept is None else (theta, kept, buffer)

    def rows(self, k: int) -> tuple[np.ndarray, np.ndarray | None]:
        """The rows ``z_i`` and offsets ``o_i`` step ``k`` sees, with its label noise."""
        index = None if self.batches is None else self.batches.batch(k)
        if self.noisy_labels:
            X, y = (self.X, self.y) if index is None else (self.X[index], self.y[index])
            y = self.noise.noisy_targets(y, self.regression, k)  # type: ignore[union-attr]
            return (X, y) if self.regression else (X * y[:, None], None)
        if index is None:
            return self.Z, self.offsets
        return self.Z.take(index, axis=0), None if self.offsets is None else self.offsets[index]

    def largest(self, theta: np.ndarray) -> float | None:
        """The largest ``|theta|`` (exact zeros counted as 1) where ``theta`` (..., L, d) is in
        the float range (module docstring), else None (also for NaN)."""
        size = np.abs(theta).ravel()
        top, bottom = np.maximum.reduce(size), np.minimum.reduce(size)
        if bottom == 0:
            size = np.where(size == 0, 1.0, size)
            top, bottom = np.maximum.reduce(size), np.minimum.reduce(size)
        if self.top_range[0] < top < self.top_range[1] and bottom > self.floor:
            return float(top)
        return None

    def kept(
        self, theta: np.ndarray, Z: np.ndarray, offsets: np.ndarray | None
    ) -> np.ndarray | None:
        """``beta`` of the iterate ``theta`` where it is in the float range and every
        ``|u_i| = |<beta, z_i> - o_i|`` of the rows ``Z`` is at most the loss-check argument,
        else None. The ``u_i`` are bounded by ``max_i ||z_i|| ||beta|| + max_i |o_i|``, with
        ``||beta|| <= sqrt(d) max|theta|^L`` and then ``||beta||`` itself, and computed only
        where both bounds exceed it."""
        top = self.largest(theta)
        if top is None:
            return None
        beta = self.product(theta)
        room = self.room
        if offsets is not None and self.noisy_labels:
            room = self.room_for(float(np.max(np.abs(offsets))))
        if self.root_d * top**self.depth <= room or math.sqrt(np.dot(beta, beta)) <= room:
            return beta
        u = Z @ beta if offsets is None else Z @ beta - offsets
        return beta if np.max(np.abs(u)) <= self.loss_limit else None

    def room_for(self, largest_offset: float) -> float:
        """The largest ``||beta||`` whose loss arguments ``|u_i| <= max_i ||z_i|| ||beta|| +
        largest_offset`` stay within the loss-check argument (inf for rows that are all 0)."""
        if self.row_norm == 0:
            return math.inf
        return (self.loss_limit - largest_offset) / self.row_norm

    def hyperparameters(self, k: int) -> dict:
        """The hyper-parameters of step ``k``, at the time ``t_k = k * unit`` (the run's own
        unless some are schedules)."""
        return hyperparameters_at(self.hp, k * self.base.unit) if self.scheduled else self.hp

    def plain_gradient(
        self, theta: np.ndarray, beta: np.ndarray, Z: np.ndarray, offsets: np.ndarray | None,
        k: int = 0,
    ) -> np.ndarray:  # fmt: skip
        """``grad L_B(theta) = ((1/B) sum_i l'(u_i) z_i) * prod_{k != l} theta^(k)`` (the
        same at every step ``k``)."""
        u = np.dot(Z, beta)
        if offsets is not None:
            u -= offsets
        g = np.dot(self.weight(u), Z)
        g *= self.sign / Z.shape[0]
        return g * self.leave_one_out(theta)

    def perturbed_gradient(
        self, theta: np.ndarray, beta: np.ndarray, Z: np.ndarray, offsets, k: int
    ) -> np.ndarray | None:
        """``grad L_B(theta + eps(grad L_B(theta)))`` at step ``k``, or None where the
        perturbed point leaves the float range or the gradient is 0."""
        g = self.plain_gradient(theta, beta, Z, offsets)
        norm = math.sqrt(float(np.vdot(g, g)))  # every layer of the network counted once
        if not 0.0 < norm < math.inf:
            return None
        point = theta + self.algorithm.perturb(
            self.summary(g / norm, math.log(norm), theta), self.hyperparameters(k)
        )
        if self.largest(point) is None:
            return None
        return self.plain_gradient(point, self.product(point), Z, offsets)

    def summary(self, unit: np.ndarray, log_norm, theta: np.ndarray) -> GradientSummary:
        """The :class:`~flows.algorithms.GradientSummary` of a gradient of unit direction
        ``unit`` and norm ``exp(log_norm)`` at ``theta``."""
        log_abs = None
        if self.algorithm.reads_theta:
            log_abs = log_magnitudes(np.broadcast_to(theta, unit.shape))
        return GradientSummary(unit, np.sign(unit), log_norm, self.multiplicity, log_abs)

    def per_example_gradient(
        self, theta: np.ndarray, beta: np.ndarray, Z: np.ndarray, offsets, k: int
    ) -> np.ndarray | None:
        """``(1/B) sum_i grad l_i(theta + eps(grad l_i(theta)))`` (:mod:`flows.per_example`),
        or None where a perturbed point leaves the float range or an example's gradient is
        0."""
        u = Z @ beta if offsets is None else Z @ beta - offsets
        own = (self.sign * self.weight(u))[:, None, None] * Z[:, None, :]
        g = own * self.leave_one_out(theta)  # (B, L, d): grad l_i
        norm = np.sqrt(np.sum(g * g, axis=(-2, -1), keepdims=True))
        if not (np.all(norm > 0) and np.all(np.isfinite(norm))):
            return None
        points = theta + self.algorithm.perturb(
            self.summary(g / norm, np.log(norm), theta), self.hyperparameters(k)
        )
        if self.largest(points) is None:
            return None
        u = np.einsum("ij,ij->i", self.product(points), Z)
        slopes = self.weight(u if offsets is None else u - offsets)
        own = (slopes * (self.sign / Z.shape[0]))[:, None, None] * Z[:, None, :]
        return np.sum(own * self.leave_one_out(points), axis=0)


def float_batch_steps(
    problem: Problem, base: BaseOptimizer, batches: Minibatches | None, noise: StepNoise | None,
    loss_limit: float,
) -> FloatBatchSteps | None:  # fmt: skip
    """The float steps of a minibatch (or noisy) run, or None where its loss has no plain
    slope in :data:`SLOPES` (then every step is the general one)."""
    name = next((key for key, loss in LOSSES.items() if loss is problem.loss), None)
    if name not in SLOPES:
        return None
    return FloatBatchSteps(problem, base, batches, noise, SLOPES[name], loss_limit)
