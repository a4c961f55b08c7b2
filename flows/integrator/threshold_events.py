"""The threshold events (:mod:`flows.integrator.events`): collapse, near zero, blow-up,
stationary point, loss floor and residual switch."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..charts import AsinhChart, LogChart
from ..data import abs_signed_features
from ..results import Cause, FlowEvent
from ..signedlog import log_norm2
from .events import (
    BLOWUP_RATE,
    COLLAPSE_FRACTION,
    NEAR_ZERO,
    STATIONARY_TOL,
    EntryEvent,
    Outcome,
    SegmentEvent,
)
from .segments import Mode


def collapse(y: np.ndarray, mode: Mode, tau: float, log: list[FlowEvent]) -> Outcome:
    """Theta is 0 from ``tau`` on: every entry held at the chart's zero."""
    y[:-1] = mode.chart.zero
    mode.collapsed = True
    mode.held[:] = True
    log.append(FlowEvent(tau, "collapse"))
    return Outcome(
        cause=Cause.COLLAPSE, message=f"theta collapsed to 0 at tau={tau:.6g} and stays there"
    )


@dataclass
class Smallness(SegmentEvent):
    """``g = log max|w| - log(radius * fraction)``, crossing downwards."""

    radius: float = 1.0
    fraction: float = COLLAPSE_FRACTION
    direction = -1.0

    def __call__(self, s: float, y: np.ndarray) -> float:
        return float(self.log_largest(y) - log_size(self.radius, self.fraction))

    def log_largest(self, y: np.ndarray) -> float:
        """``log max|w|`` at the chart state ``y``: in the log chart the largest coordinate
        (``z = log|w|``), in the others from the parameters."""
        if isinstance(self.problem.chart, LogChart):
            return float(y[:-1].max())
        return float(np.max(self.theta(y).log_abs))

    def already(self, y: np.ndarray) -> bool:
        """Below the threshold from the start (e.g. ``alpha = 1e-300``)."""
        return self(0.0, y) < 0


@dataclass
class NearZero(Smallness):
    """Every parameter below ``radius * NEAR_ZERO`` in the log chart: go on in the asinh chart."""

    fraction: float = NEAR_ZERO

    def handle(
        self, y: np.ndarray, mode: Mode, s: float, tau: float, log: list[FlowEvent]
    ) -> Outcome:
        """Convert the state to the asinh chart (not a user-visible event)."""
        theta = self.theta(y)
        mode.chart = AsinhChart()
        mode.near_zero = np.flatnonzero(theta.log_abs.ravel() > np.max(theta.log_abs) - 30.0)
        y[:-1] = mode.chart.coordinates(theta).ravel()
        return Outcome()


class _Collapsing:
    """The handling of the collapse events: theta is 0 for the rest of the run."""

    def handle(
        self, y: np.ndarray, mode: Mode, s: float, tau: float, log: list[FlowEvent]
    ) -> Outcome:
        """Set theta to 0 for the rest of the run."""
        return collapse(y, mode, tau, log)


@dataclass
class Collapse(_Collapsing, Smallness):
    """Every parameter below ``radius * COLLAPSE_FRACTION``: theta is 0 from here on."""


@dataclass
class CollapseCrossing(_Collapsing, EntryEvent):
    """``g = z[index]`` after :class:`NearZero`: a parameter reaching 0 is the collapse (an
    event inside a step, which a threshold on ``max|w|`` would miss when a step passes 0)."""


@dataclass
class BlowUp(SegmentEvent):
    """``g = log BLOWUP_RATE - max_j d log|w_j| / dtau`` over growing entries with ``|w_j| > 1``."""

    direction = -1.0

    def __call__(self, s: float, y: np.ndarray) -> float:
        log_rate = self.log_growth_rate(s, y)
        return float(np.log(BLOWUP_RATE) - (0.0 if log_rate is None else log_rate))

    def log_growth_rate(self, s: float, y: np.ndarray) -> float | None:
        """``log max_j d log|w_j| / dtau`` over growing entries with ``|w_j| > 1`` (None if
        there are none): in the log chart from the field's float path at one point where it
        holds (``dz/ds / (dtau/ds)``, ``z = log|w|``), else from its signed-log velocity."""
        theta = self.theta(y)
        rates = self._log_chart_rates(s, y)
        if rates is not None:
            growing = (rates > 0) & (theta.log_abs.ravel() > 0)
            return float(np.log(np.max(rates[growing]))) if np.any(growing) else None
        vel = self.field.velocity(theta, None, s)
        growing = (vel.dtheta.sign * theta.sign > 0) & (theta.log_abs > 0)
        if not np.any(growing):
            return None
        with np.errstate(invalid="ignore"):
            log_rate = vel.dtheta.log_abs - theta.log_abs
        return float(np.max(log_rate[growing]))

    def _log_chart_rates(self, s: float, y: np.ndarray) -> np.ndarray | None:
        """``d log|w_j| / dtau`` (flat) in the log chart from the field's float path at one point
        (``_float_rhs``: compiled or numpy), or None (another chart, a field without it, a point
        outside its range, or a clock that does not move)."""
        fast = getattr(self.field, "_float_rhs", None)
        problem = self.problem
        if fast is None or not isinstance(problem.chart, LogChart):
            return None
        out = fast(y[:-1].reshape(problem.shape), np.zeros(problem.shape, dtype=bool), None, s)
        if out is None or not 0.0 < out[-1] < np.inf:
            return None
        return out[:-1] / out[-1]

    def handle(
        self, y: np.ndarray, mode: Mode, s: float, tau: float, log: list[FlowEvent]
    ) -> Outcome:
        """End the run: the path ends at the blow-up."""
        log.append(FlowEvent(tau, "blow-up"))
        return Outcome(
            stop=True, cause=Cause.BLOW_UP, message=f"finite-time blow-up at tau={tau:.10g}"
        )


@dataclass
class Stationary(SegmentEvent):
    """``g = log S - log STATIONARY_TOL`` with the scale-free gradient size

    ``S = ||G * prod_{k != l} w^(k)|| / ||H * prod_{k != l} w^(k)||``,
    ``G = sum_i p_i z_i``, ``H_j = sum_i |p_i| |z_ij|``

    (norms over all parameters, ``p`` the example weights; ``grad L = -c G * prod_{k != l} w``).
    ``S <= 1``; it is 0 exactly where ``grad L = 0`` at a point with some ``prod_{k != l} w != 0``
    (the examples' terms cancel), is not small along a collapse or a diverging path of separable
    data, and is the same for data whose features (columns) or examples (rows) are scaled by any
    factors: each coordinate's terms are measured against their own sizes.

    In regression ``S = max_j |G_j| / H_j`` over the coordinates whose layers can move (some
    ``prod_{k != l} w^(k)_j != 0``): every coordinate counts at its own scale, so a saddle of the
    squared loss, where the coordinates still near 0 (tiny products, ``G_j`` of order 1) are
    about to escape, is not taken for a stationary point (at a vanishing initialisation the
    flow rests near such saddles for times ~ log(1/alpha)).
    """

    direction = -1.0

    def __call__(self, s: float, y: np.ndarray) -> float:
        problem = self.problem
        fused = self.fused
        theta = self.theta(y)
        weights = np.asarray(problem.multiplicity, dtype=float)[:, None]
        log_tol = float(np.log(STATIONARY_TOL))
        features = np.asarray(problem.data.signed_features, dtype=float)
        if problem.data.regression:
            return self._per_coordinate(theta, features) - log_tol
        if fused._float_rows(theta.log_abs):
            w = theta.sign * np.exp(theta.log_abs)
            direction, _, loo = fused._float_evaluate(w)
            with np.errstate(over="ignore", invalid="ignore"):
                log_p = problem.loss.log_abs_derivative(
                    fused.loss_arguments(features @ (w[0] * loo[0]))
                )
                p = np.exp(log_p - np.max(log_p))
                sizes = (p / np.sum(p)) @ abs_signed_features(problem.data)
                top = float(np.sum(weights * (sizes * loo) ** 2))
                gradient = float(np.sum(weights * (direction * loo) ** 2))
            if np.isfinite(top) and np.isfinite(gradient):  # else the margins left the floats
                if top == 0:
                    return -log_tol
                return 0.5 * float(np.log(gradient / top)) - log_tol
        direction_, _, loo_ = fused.evaluate(theta.sign, theta.log_abs)
        p_, _ = fused.weights(fused.product_of_layers(theta.sign, theta.log_abs))
        with np.errstate(divide="ignore"):
            log_sizes = np.log(np.abs(np.asarray(p_)) @ abs_signed_features(problem.data))
        top = log_norm2(log_sizes[None, :] + loo_.log_abs, weights)
        if top == -np.inf:
            return -log_tol
        return float(log_norm2(direction_.log_abs[None, :] + loo_.log_abs, weights) - top - log_tol)

    def _per_coordinate(self, theta, features: np.ndarray) -> float:
        """``log max_j |G_j| / H_j`` over the movable coordinates (regression; -inf if none can
        move)."""
        fused = self.fused
        direction, _, loo = fused.evaluate(theta.sign, theta.log_abs)
        p, _ = fused.weights(fused.product_of_layers(theta.sign, theta.log_abs))
        weights = np.ones(features.shape[0]) if p is None else np.abs(np.asarray(p))
        movable = np.any(loo.sign != 0, axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_sizes = np.log(weights @ abs_signed_features(self.problem.data))
            ratios = np.where(
                movable & (log_sizes > -np.inf), direction.log_abs - log_sizes, -np.inf
            )
        return float(np.max(ratios, initial=-np.inf))

    def already(self, y: np.ndarray) -> bool:
        """Stationary from the start."""
        return self(0.0, y) < 0

    def handle(
        self, y: np.ndarray, mode: Mode, s: float, tau: float, log: list[FlowEvent]
    ) -> Outcome:
        """Stay at the point for the rest of the run (``eps = 0`` at ``grad L = 0``)."""
        mode.stationary = True
        log.append(FlowEvent(tau, "stationary"))
        why = (
            "a critical point of the squared loss (an interpolator where the loss is 0, a "
            "least-squares point or a saddle otherwise)"
            if self.problem.data.regression
            else "the data are not separable by the signs this initialization keeps"
        )
        return Outcome(
            cause=Cause.STATIONARY,
            message=(
                f"reached a stationary point (grad L = 0, theta != 0) at tau={tau:.6g} and stays "
                f"there (eps = 0 at grad L = 0); {why}"
            ),
        )


@dataclass
class LossFloor(SegmentEvent):
    """``g = log L(theta) - log floor`` with ``L = (1/n) sum_i l(m_i)`` (log-sum-exp of
    ``log l(m_i)``, finite far below the float range of ``L``): the training loss falls to
    ``floor``; the run ends there with status 0 (``simulate(loss_floor=...)``)."""

    floor: float = 1e-30
    direction = -1.0

    def __call__(self, s: float, y: np.ndarray) -> float:
        return float(self.fused.log_loss(self.theta(y)) - np.log(self.floor))

    def already(self, y: np.ndarray) -> bool:
        """At or below the floor from the start."""
        return self(0.0, y) <= 0

    def handle(
        self, y: np.ndarray, mode: Mode, s: float, tau: float, log: list[FlowEvent]
    ) -> Outcome:
        """End the run (status 0): the path ends where the loss reaches the floor."""
        log.append(FlowEvent(tau, "loss floor"))
        return Outcome(
            stop=True,
            cause=Cause.LOSS_FLOOR,
            message=f"training loss reached loss_floor={self.floor:g} at tau={tau:.10g}",
        )


@dataclass
class ResidualSwitch(SegmentEvent):
    """``g = min_i s_i r_i`` with ``s_i`` the sign of the residual ``r_i = <beta, x_i> - y_i``
    where the segment starts: a residual reaches 0. For a per-example algorithm with a
    normalised perturbation (``residual_switch``: ``1-sam``) the field jumps there (example
    ``i``'s perturbation ``rho grad l_i / ||grad l_i||`` flips with ``sign r_i``) and the flow
    slides on ``r_i = 0``, which the engine does not follow: the run ends (status -1)."""

    signs: np.ndarray | None = None
    direction = -1.0

    def residuals(self, y: np.ndarray) -> np.ndarray:
        """``r_i`` at the chart state ``y``."""
        theta = self.theta(y)
        fused = self.fused
        return fused.loss_arguments(fused.margins(fused.product_of_layers(*theta)))

    def starting_at(self, y: np.ndarray) -> ResidualSwitch:
        """Record the signs of the residuals where the segment starts."""
        self.signs = np.sign(self.residuals(y))
        return self

    def __call__(self, s: float, y: np.ndarray) -> float:
        assert self.signs is not None
        return float(np.min(self.signs * self.residuals(y)))

    def already(self, y: np.ndarray) -> bool:
        """A residual is exactly 0 where the segment starts."""
        return bool(np.any(self.signs == 0))

    def handle(
        self, y: np.ndarray, mode: Mode, s: float, tau: float, log: list[FlowEvent]
    ) -> Outcome:
        """End the run (status -1): the path ends where the first residual reaches 0."""
        assert self.signs is not None
        i = int(np.argmin(np.abs(self.residuals(y))))
        log.append(FlowEvent(tau, "residual switch"))
        return Outcome(
            stop=True,
            cause=Cause.RESIDUAL_SWITCH,
            message=(
                f"the residual of example {i} reached 0 at t={s:.10g}: there the "
                "per-example normalised perturbation (1-sam) flips sign and the flow slides on "
                "r_i = 0, which this engine does not follow; the "
                "path up to there is returned (1-usam, whose perturbation vanishes with r_i, "
                "goes on)"
            ),
        )


def log_size(radius: float, fraction: float) -> float:
    """``log(radius * fraction)`` without underflow (``-inf`` for radius 0: never reached; plain
    floats, as it is evaluated at every step)."""
    return math.log(radius) + math.log(fraction) if radius > 0 else -math.inf
