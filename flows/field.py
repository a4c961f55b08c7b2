"""The vector field of a flow, in the asinh chart, for any algorithm, clock and depth.

For parameters ``theta`` (groups of identical layers) the rescaled field is

    F^(l) = G(theta') * prod_{k != l} theta'^(k),   theta' = theta + eps(theta),

with ``G`` the loss-weighted mean of ``y_i x_i`` at ``theta'`` (see :mod:`flows.model`); then
``dtheta/ds = (dtau/ds) F`` in the clock ``s`` and the state is integrated in a chart
(:mod:`flows.charts`), e.g. ``z = asinh(theta / delta)``: ``dz/ds = (dtheta/ds) / (delta cosh z)``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from typing import NamedTuple, Protocol

import numpy as np

from .algorithms import Algorithm, GradientSummary, hyperparameters_at, is_scheduled
from .charts import AsinhChart, LogChart
from .clocks import Clock
from .data import Dataset
from .model import (
    Loss,
    evaluate,
    logsumexp,
    loss_arguments,
    loss_weights,
    margin_gradient,
    margins,
)
from .signedlog import SignedLog, add_float, leave_one_out, log_norm2, product_of_layers, signed_sum


@dataclass(frozen=True, eq=False)
class Problem:
    """A flow to integrate: data, algorithm with hyper-parameters, loss, layer groups, chart."""

    data: Dataset
    algorithm: Algorithm
    hyperparameters: dict
    loss: Loss
    multiplicity: np.ndarray
    clock: Clock
    chart: AsinhChart | LogChart = AsinhChart()
    shape: tuple = dataclass_field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", (len(self.multiplicity), self.data.d))

    @property
    def residual_switches(self) -> bool:
        """Whether the perturbation can jump along the path: an algorithm that normalises each
        example's gradient (``Algorithm.residual_switch``) on a loss whose ``l'(u_i)`` changes
        sign where a residual reaches 0 (the squared loss; a margin loss's ``l'`` never does)."""
        return self.algorithm.residual_switch and self.loss.descent_sign is not None


class SignPattern(NamedTuple):
    """The signs frozen inside ``sign(grad L)`` over a segment of l_inf-SAM.

    ``grad_{w^(l)_j} L = -c G_j prod_{k != l} w^(k)_j`` changes sign where a parameter or a
    direction entry ``G_j`` does (:mod:`flows.integrator.filippov`); with both frozen the field continues
    smoothly across those surfaces and reaching one is an event.

    Attributes
    ----------
    parameters : (..., G, d) frozen ``sign(w)`` (+-1).
    direction : (..., d) frozen ``sign(G_j)`` (0 for a feature that is 0 in every example).
    """

    parameters: np.ndarray
    direction: np.ndarray


def gradient_signs(pattern: SignPattern, multiplicity: np.ndarray) -> np.ndarray:
    """``sign(grad L) = -sign(G_j) prod_{k != l} sign(w^(k)_j)`` of a frozen pattern (..., G, d)."""
    mult = np.asarray(multiplicity)
    params = np.asarray(pattern.parameters, dtype=float)
    if len(mult) == 1:
        others = params ** (int(mult[0]) - 1)
    else:
        others = np.stack(
            [np.prod(np.delete(params, g, axis=-2), axis=-2) for g in range(len(mult))], axis=-2
        )
    return -np.asarray(pattern.direction, dtype=float)[..., None, :] * others


class Velocity(NamedTuple):
    """The rescaled field ``F`` (signed-log) and ``log c`` at the perturbed point (a float, or
    one per point of a batch)."""

    dtheta: SignedLog
    log_c: float | np.ndarray


class VectorField(Protocol):
    """What the integrator needs of a field implementation (:class:`ReferenceField`,
    :class:`flows.fused.FusedField`, :class:`flows.compiled.field.CompiledField`)."""

    problem: Problem

    def pattern_signs(self, pattern: SignPattern | None) -> np.ndarray | None: ...

    def velocity(
        self, theta: SignedLog, pattern_signs: np.ndarray | None = None, time: float = 0.0
    ) -> Velocity: ...

    def log_c(
        self, theta: SignedLog, pattern_signs: np.ndarray | None = None, time=0.0
    ) -> np.ndarray: ...

    def chart_rhs(
        self,
        z: np.ndarray,
        held: np.ndarray,
        pattern_signs: np.ndarray | None = None,
        time: float = 0.0,
    ) -> np.ndarray: ...


def gradient_summary(
    scaled: SignedLog, log_c, multiplicity: np.ndarray, log_abs_theta: np.ndarray
) -> GradientSummary:
    """The :class:`~flows.algorithms.GradientSummary` of ``grad L = exp(log_c) * scaled`` at
    the parameters of magnitudes ``exp(log_abs_theta)``.

    ``scaled`` (signed-log, shape (..., G, d)) is ``-G * prod_{k != l} w^(k)`` with the signs
    of ``grad L``; ``log_c`` a float or an array of shape (..., 1, 1). The norm runs over the
    last two axes, each group counted ``multiplicity`` times, in log-sum-exp form.
    """
    weights = np.asarray(multiplicity, dtype=float)[:, None]
    log_norm = log_norm2(scaled.log_abs, weights, axis=(-2, -1))
    with np.errstate(invalid="ignore"):
        unit = np.where(np.isneginf(log_norm), 0.0, scaled.sign * np.exp(scaled.log_abs - log_norm))
    log_grad_norm = log_norm + log_c
    if np.ndim(scaled.log_abs) == 2:
        log_grad_norm = float(log_grad_norm.reshape(()))
    return GradientSummary(
        unit, scaled.sign, log_grad_norm, np.asarray(multiplicity), np.asarray(log_abs_theta)
    )


def perturbed_point(
    theta: SignedLog, problem: Problem, grad_signs: np.ndarray | None = None
) -> SignedLog:
    """``theta' = theta + eps(theta)`` with ``eps`` from the algorithm table.

    ``grad_signs`` (same shape as ``theta``; :func:`gradient_signs` of a frozen
    :class:`SignPattern`) replaces ``sign(grad L)``: with the signs frozen over an integration
    segment, the l_inf-SAM field continues smoothly across its switching surfaces and reaching
    one is located as an event instead of being stepped over as a jump.
    """
    if not problem.algorithm.perturbs:
        return theta
    ev = evaluate(theta, problem.multiplicity, problem.data, problem.loss)
    mg = margin_gradient(ev)
    sign = -mg.sign if grad_signs is None else grad_signs
    grad = gradient_summary(
        SignedLog(sign, mg.log_abs), ev.log_c, problem.multiplicity, theta.log_abs
    )
    eps = problem.algorithm.perturb(grad, problem.hyperparameters)
    if not np.all(np.isfinite(eps)):
        # a non-finite perturbation makes the field NaN: the solver rejects the step (and
        # reports a failure if it cannot avoid the point); iterate flags it as an overflow
        eps = np.full_like(eps, np.nan)
    return add_float(theta, eps)


def rescaled_velocity(
    theta: SignedLog, problem: Problem, sign_pattern: np.ndarray | None = None
) -> Velocity:
    """``F = G(theta') * prod_{k != l} theta'^(k)`` and ``log c(theta')`` (per-example
    algorithms: :func:`per_example_rescaled_velocity`)."""
    if problem.algorithm.per_example:
        return per_example_rescaled_velocity(theta, problem)
    ev = evaluate(
        perturbed_point(theta, problem, sign_pattern),
        problem.multiplicity,
        problem.data,
        problem.loss,
    )
    return Velocity(margin_gradient(ev), ev.log_c)


def per_example_rescaled_velocity(theta: SignedLog, problem: Problem) -> Velocity:
    """The field of a per-example algorithm (:mod:`flows.per_example`) at one point, example by
    example: ``theta_i = theta + eps(grad l_i(theta))``, ``F = sum_i q_i z_i *
    prod_{k != l} theta_i^(k)``, ``q_i = -l'(u_i(theta_i)) / (n c)``,
    ``c = (1/n) sum_i |l'(u_i(theta_i))|``."""
    data, loss, mult = problem.data, problem.loss, problem.multiplicity
    loo = leave_one_out(theta, mult)
    m = margins(product_of_layers(theta, mult), data).to_float()
    u = loss_arguments(m, data)
    nan = Velocity(
        SignedLog(np.full(problem.shape, np.nan), np.full(problem.shape, np.nan)), np.nan
    )
    if not np.all(np.isfinite(m)):  # the weights come from float margins
        return nan
    signs, logs, weights = [], [], []
    for i, row in enumerate(data.signed_features):
        z = SignedLog.from_float(row)
        s = 1.0 if loss.descent_sign is None else float(loss.descent_sign(u[i]))
        own = SignedLog(-s * z.sign * loo.sign, z.log_abs + loo.log_abs)  # grad l_i / |l'_i|
        log_w = float(loss.log_abs_derivative(u[i]))
        eps = problem.algorithm.perturb(
            gradient_summary(own, log_w, mult, theta.log_abs), problem.hyperparameters
        )
        if not np.all(np.isfinite(eps)):
            eps = np.full_like(eps, np.nan)
        point = add_float(theta, eps)
        m_i = margins(product_of_layers(point, mult), data).to_float()[i]
        if not np.isfinite(m_i):
            return nan
        u_i = m_i if data.offsets is None else m_i - data.offsets[i]
        s_i = 1.0 if loss.descent_sign is None else float(loss.descent_sign(u_i))
        point_loo = leave_one_out(point, mult)
        signs.append(s_i * z.sign * point_loo.sign)
        logs.append(z.log_abs + point_loo.log_abs)
        weights.append(float(loss.log_abs_derivative(u_i)))
    log_w_all = np.array(weights)
    total = logsumexp(log_w_all)
    if total == -np.inf:
        return Velocity(SignedLog(np.zeros(problem.shape), np.full(problem.shape, -np.inf)), total)
    field = signed_sum(np.array(signs), np.array(logs) + (log_w_all - total)[:, None, None], axis=0)
    return Velocity(field, total - float(np.log(data.n)))


def perturbed_log_c(
    theta: SignedLog, problem: Problem, sign_pattern: np.ndarray | None = None
) -> float:
    """``log c(theta')``: the clock factor at the perturbed point (no field needed)."""
    if problem.algorithm.per_example:
        return float(per_example_rescaled_velocity(theta, problem).log_c)
    beta = product_of_layers(perturbed_point(theta, problem, sign_pattern), problem.multiplicity)
    return loss_weights(margins(beta, problem.data), problem.data, problem.loss).log_c


def chart_state(z: np.ndarray, problem: Problem) -> SignedLog:
    """Parameters (signed-log, shape (G, d)) from the flat chart coordinates ``z``."""
    return problem.chart.state(z.reshape(problem.shape))


def chart_rhs(
    z: np.ndarray, problem: Problem, held: np.ndarray, sign_pattern: np.ndarray | None = None
) -> np.ndarray:
    """``d(z, tau)/ds``; entries in ``held`` (boolean, shape (G, d)) stay where they are."""
    theta = chart_state(z, problem)
    vel = rescaled_velocity(theta, problem, sign_pattern)
    log_speed = problem.clock.log_speed(vel.log_c)
    dw = SignedLog(vel.dtheta.sign, vel.dtheta.log_abs + log_speed)
    dz = np.where(held, 0.0, problem.chart.velocity(dw, z.reshape(problem.shape)))
    return np.append(dz.ravel(), np.exp(log_speed))


class ReferenceField:
    """The field of ``problem`` through the functions above, one point at a time.

    The same interface as :class:`flows.fused.FusedField` (which computes the same numbers
    in fused array operations); ``simulate(..., backend="reference")`` integrates with this
    one, and the tests compare the two.
    """

    def __init__(self, problem: Problem):
        self.problem = problem
        self.scheduled = is_scheduled(problem.hyperparameters)

    def at(self, time: float) -> Problem:
        """The problem with its hyper-parameters evaluated at clock time ``time``."""
        if not self.scheduled:
            return self.problem
        return replace(
            self.problem, hyperparameters=hyperparameters_at(self.problem.hyperparameters, time)
        )

    def pattern_signs(self, pattern: SignPattern | None) -> np.ndarray | None:
        """What :meth:`velocity` takes for a frozen sign pattern: ``sign(grad L)``."""
        return None if pattern is None else gradient_signs(pattern, self.problem.multiplicity)

    def velocity(
        self, theta: SignedLog, pattern_signs: np.ndarray | None = None, time: float = 0.0
    ) -> Velocity:
        """``F`` and ``log c`` at one point ``theta`` (shape (G, d)) at clock time ``time``."""
        return rescaled_velocity(theta, self.at(time), pattern_signs)

    def log_c(
        self, theta: SignedLog, pattern_signs: np.ndarray | None = None, time=0.0
    ) -> np.ndarray:
        """``log c(theta')`` for a batch ``theta`` of shape (..., G, d) (``time``: one clock
        time, or one per point)."""
        sign = theta.sign.reshape((-1,) + self.problem.shape)
        log_abs = theta.log_abs.reshape(sign.shape)
        times = np.broadcast_to(np.asarray(time, dtype=float), theta.sign.shape[:-2]).ravel()
        out = [
            perturbed_log_c(SignedLog(s, a), self.at(float(t)), pattern_signs)
            for s, a, t in zip(sign, log_abs, times, strict=True)
        ]
        return np.array(out).reshape(theta.sign.shape[:-2])

    def chart_rhs(
        self,
        z: np.ndarray,
        held: np.ndarray,
        pattern_signs: np.ndarray | None = None,
        time: float = 0.0,
    ) -> np.ndarray:
        """``d(z, tau)/ds`` (see :func:`chart_rhs`)."""
        return chart_rhs(z, self.at(time), held, pattern_signs)


def log_growth_rates(theta: SignedLog, problem: Problem) -> np.ndarray:
    """``d log|w| / dtau = F / w`` per parameter entry (rescaled clock); nan where ``w = 0``."""
    vel = rescaled_velocity(theta, problem)
    with np.errstate(over="ignore", invalid="ignore"):
        rates = vel.dtheta.sign * theta.sign * np.exp(vel.dtheta.log_abs - theta.log_abs)
    return np.where(theta.sign == 0, np.nan, rates)
