"""Events that end an integration segment, and what happens at each.

Each event is a small object: ``event(s, y)`` is its function for the solver (a segment ends
where it changes sign in the watched ``direction``), and ``event.handle(y, mode, s, tau, log)``
applies its consequence (at clock time ``s``, rescaled time ``tau``) to the state and the mode
in place, returning an :class:`Outcome`.

* :class:`ZeroCrossing` — a parameter reaches 0 where the field jumps (l_inf-SAM); the one-sided
  fields decide between crossing and sliding (Filippov).
* :class:`SlidingRelease` — a parameter held at 0 stops sliding (the one-sided fields no
  longer both point at 0).
* :class:`NearZero` — in the log chart, every parameter is below ``radius * NEAR_ZERO``: the run
  continues in the asinh chart, which follows a collapse to 0 in a few steps (the log chart
  would need ever smaller steps as ``log|w| -> -inf``). The log chart is used only where the
  dynamics are multiplicative (``dw_j/dtau`` is ``w_j`` times a factor that is finite unless
  theta -> 0), so there a parameter reaching 0 is the collapse: :class:`CollapseCrossing`.
* :class:`Collapse` — every parameter is below ``radius * COLLAPSE_FRACTION``; from there the
  predictor reaches 0 within a negligible time and stays (``theta = 0`` is an equilibrium).
* :class:`BlowUp` — super-exponential growth (depth >= 3): a growing parameter's log-rate
  ``d log|w| / dtau`` exceeds ``BLOWUP_RATE``, i.e. less than ``1 / BLOWUP_RATE`` of time is left.
* :class:`Stationary` — the flow reaches a point where ``grad L = 0`` with ``theta != 0`` (data
  that the signs the initialization keeps cannot separate). There the SAM perturbation is
  undefined; the convention of practical implementations, ``eps = 0`` at ``grad L = 0``, makes
  the point an equilibrium, and the run stays there.

Threshold events (collapse, near zero, stationary) that already hold where a segment starts
fire at once (:meth:`SegmentEvent.already`), before any step.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import NamedTuple

import numpy as np

from .charts import AsinhChart
from .field import VectorField, one_sided_velocity
from .model import evaluate
from .results import BLOWUP, FlowEvent
from .segments import Mode
from .signedlog import log_norm2

COLLAPSE_FRACTION = 1e-12
NEAR_ZERO = 1e-4
#: After :class:`NearZero`, parameters below ``radius * NEAR_ZERO_ATOL`` are controlled
#: absolutely: on the way into a collapse the minor parameters decay like high powers of the
#: time left, and relative control of them would force ever smaller steps for nothing.
NEAR_ZERO_ATOL = 1e-30
BLOWUP_RATE = 1e12
#: :class:`Stationary` fires where the scale-free gradient size drops below this (SAM arrives
#: at such a point in finite time, where its field jumps: closer than this costs many steps).
STATIONARY_TOL = 1e-8
#: Offset (in chart units) that puts a parameter just past 0 when it crosses transversally.
NUDGE = 1e-300


class Outcome(NamedTuple):
    """What an event did: ``stop`` the run with ``status``; ``message`` replaces the run's
    message when not None."""

    stop: bool = False
    status: int = 0
    message: str | None = None


def collapse(y: np.ndarray, mode: Mode, tau: float, log: list[FlowEvent]) -> Outcome:
    """Theta is 0 from ``tau`` on: every entry held at the chart's zero."""
    y[:-1] = mode.chart.zero
    mode.collapsed = True
    mode.held[:] = True
    log.append(FlowEvent(tau, "collapse"))
    return Outcome(message=f"theta collapsed to 0 at tau={tau:.6g} and stays there")


@dataclass
class SegmentEvent:
    """Base: an event function ``g(s, y)`` on the chart state ``y = (z, tau)`` of ``field``."""

    field: VectorField
    direction = 0.0

    @property
    def problem(self):
        """The flow the field belongs to."""
        return self.field.problem

    def theta(self, y: np.ndarray):
        """The parameters (signed-log) of a chart state."""
        return self.problem.chart.state(y[:-1].reshape(self.problem.shape))

    def __call__(self, s: float, y: np.ndarray) -> float:
        raise NotImplementedError

    def already(self, y: np.ndarray) -> bool:
        """Whether the event's condition holds at ``y`` already (checked where a segment
        starts; only threshold events say yes)."""
        return False

    def handle(
        self, y: np.ndarray, mode: Mode, s: float, tau: float, log: list[FlowEvent]
    ) -> Outcome:
        raise NotImplementedError


@dataclass
class ZeroCrossing(SegmentEvent):
    """``g = z[index]``: the parameter at ``index`` (flat) passes through 0."""

    index: int = 0

    def __call__(self, s: float, y: np.ndarray) -> float:
        return float(y[self.index])

    def handle(
        self, y: np.ndarray, mode: Mode, s: float, tau: float, log: list[FlowEvent]
    ) -> Outcome:
        """Cross or slide; also every entry that reached 0 in the same instant."""
        self._cross_or_slide(y, self.index, mode, s, tau, log)
        for flat in self._also_crossed(y, mode):
            self._cross_or_slide(y, flat, mode, s, tau, log)
        return Outcome()

    def _cross_or_slide(
        self, y: np.ndarray, flat: int, mode: Mode, s: float, tau: float, log: list[FlowEvent]
    ) -> None:
        """Hold the entry at 0 if it slides (``F(+0) < 0 < F(-0)``), else push it across."""
        group, j = np.unravel_index(flat, self.problem.shape)
        entry = (int(group), int(j))
        assert mode.sign_pattern is not None  # zero crossings are watched for l_inf-SAM only
        came_from = mode.sign_pattern[entry]
        y[flat] = 0.0
        theta = self.theta(y)
        f_plus = one_sided_velocity(theta, self.field, mode.sign_pattern, entry, 1.0, s)
        f_minus = one_sided_velocity(theta, self.field, mode.sign_pattern, entry, -1.0, s)
        if f_plus < 0 < f_minus:
            # held at 0; its pattern keeps the side it came from: on a sliding mode of l_inf-SAM
            # both one-sided perturbations give the same theta'^L (even L), the Filippov value
            mode.held[entry] = True
            log.append(FlowEvent(tau, "sliding", entry))
            return
        if f_plus > 0 and f_minus >= 0:
            side = 1.0
        elif f_minus < 0 and f_plus <= 0:
            side = -1.0
        else:
            side = -came_from
        y[flat] = side * NUDGE
        mode.sign_pattern[entry] = side
        log.append(FlowEvent(tau, "zero-crossing", entry))

    @staticmethod
    def _also_crossed(y: np.ndarray, mode: Mode) -> list[int]:
        """Entries that reached 0 together with the one whose event fired (e.g. both layers of a
        balanced coordinate in the full system): past 0 against their pattern, or at 0 to
        rounding."""
        assert mode.sign_pattern is not None
        z = y[:-1]
        crossed = (~mode.held.ravel()) & (
            (np.sign(z) == -mode.sign_pattern.ravel()) | (np.abs(z) < 1e-14)
        )
        return [int(i) for i in np.flatnonzero(crossed)]


@dataclass
class SlidingRelease(SegmentEvent):
    """``g = min(-F(+0), F(-0))``, positive while the held entry slides at 0."""

    index: tuple[int, int] = (0, 0)
    sign_pattern: np.ndarray = dataclass_field(default_factory=lambda: np.zeros((1, 1)))
    direction = -1.0

    def __call__(self, s: float, y: np.ndarray) -> float:
        theta = self.theta(y)
        return min(
            -one_sided_velocity(theta, self.field, self.sign_pattern, self.index, 1.0, s),
            one_sided_velocity(theta, self.field, self.sign_pattern, self.index, -1.0, s),
        )

    def handle(
        self, y: np.ndarray, mode: Mode, s: float, tau: float, log: list[FlowEvent]
    ) -> Outcome:
        """The held parameter leaves 0 on the side its field points to."""
        assert mode.sign_pattern is not None  # releases are watched for l_inf-SAM only
        theta = self.theta(y)
        side = (
            1.0
            if one_sided_velocity(theta, self.field, mode.sign_pattern, self.index, 1.0, s) >= 0
            else -1.0
        )
        mode.held[self.index] = False
        mode.sign_pattern[self.index] = side
        y[np.ravel_multi_index(self.index, self.problem.shape)] = side * NUDGE
        log.append(FlowEvent(tau, "release", self.index))
        return Outcome()


@dataclass
class _Smallness(SegmentEvent):
    """``g = log max|w| - log(radius * fraction)``, crossing downwards."""

    radius: float = 1.0
    fraction: float = COLLAPSE_FRACTION
    direction = -1.0

    def __call__(self, s: float, y: np.ndarray) -> float:
        return float(np.max(self.theta(y).log_abs) - np.log(self.radius * self.fraction))

    def already(self, y: np.ndarray) -> bool:
        """Below the threshold from the start (e.g. ``alpha = 1e-300``)."""
        return self(0.0, y) < 0


@dataclass
class NearZero(_Smallness):
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


@dataclass
class Collapse(_Smallness):
    """Every parameter below ``radius * COLLAPSE_FRACTION``: theta is 0 from here on."""

    def handle(
        self, y: np.ndarray, mode: Mode, s: float, tau: float, log: list[FlowEvent]
    ) -> Outcome:
        """Set theta to 0 for the rest of the run."""
        return collapse(y, mode, tau, log)


@dataclass
class CollapseCrossing(SegmentEvent):
    """``g = z[index]`` after :class:`NearZero`: a parameter reaching 0 is the collapse (an
    event inside a step, which a threshold on ``max|w|`` would miss when a step passes 0)."""

    index: int = 0

    def __call__(self, s: float, y: np.ndarray) -> float:
        return float(y[self.index])

    def handle(
        self, y: np.ndarray, mode: Mode, s: float, tau: float, log: list[FlowEvent]
    ) -> Outcome:
        """Set theta to 0 for the rest of the run."""
        return collapse(y, mode, tau, log)


@dataclass
class BlowUp(SegmentEvent):
    """``g = log BLOWUP_RATE - max_j d log|w_j| / dtau`` over growing entries with ``|w_j| > 1``."""

    direction = -1.0

    def __call__(self, s: float, y: np.ndarray) -> float:
        theta = self.theta(y)
        vel = self.field.velocity(theta, None, s)
        growing = (vel.dtheta.sign * theta.sign > 0) & (theta.log_abs > 0)
        if not np.any(growing):
            return float(np.log(BLOWUP_RATE))
        with np.errstate(invalid="ignore"):
            log_rate = vel.dtheta.log_abs - theta.log_abs
        return float(np.log(BLOWUP_RATE) - np.max(log_rate[growing]))

    def handle(
        self, y: np.ndarray, mode: Mode, s: float, tau: float, log: list[FlowEvent]
    ) -> Outcome:
        """End the run: the path ends at the blow-up."""
        log.append(FlowEvent(tau, "blow-up"))
        return Outcome(stop=True, status=BLOWUP, message=f"finite-time blow-up at tau={tau:.10g}")


@dataclass
class Stationary(SegmentEvent):
    """``g = log S - log STATIONARY_TOL`` with the scale-free gradient size

    ``S = ||G * prod_{k != l} w^(k)|| / (max_i ||x_i|| ||prod_{k != l} w^(k)||)``

    (norms over all parameters; ``grad L = -c G * prod_{k != l} w``), which is 0 exactly where
    ``grad L = 0`` at a point with some ``prod_{k != l} w != 0``, and is not small along a
    collapse or a diverging path of separable data.
    """

    direction = -1.0

    def __call__(self, s: float, y: np.ndarray) -> float:
        problem = self.problem
        ev = evaluate(self.theta(y), problem.multiplicity, problem.data, problem.loss)
        weights = np.asarray(problem.multiplicity, dtype=float)[:, None]
        loo = ev.partial_products.log_abs
        top = log_norm2(loo, weights)
        if top == -np.inf:
            return float(-np.log(STATIONARY_TOL))
        gradient = log_norm2(ev.direction.log_abs[None, :] + loo, weights)
        scale = float(np.log(np.max(np.linalg.norm(problem.data.X, axis=1))))
        return float(gradient - top - scale - np.log(STATIONARY_TOL))

    def already(self, y: np.ndarray) -> bool:
        """Stationary from the start."""
        return self(0.0, y) < 0

    def handle(
        self, y: np.ndarray, mode: Mode, s: float, tau: float, log: list[FlowEvent]
    ) -> Outcome:
        """Stay at the point for the rest of the run (``eps = 0`` at ``grad L = 0``)."""
        mode.stationary = True
        log.append(FlowEvent(tau, "stationary"))
        return Outcome(
            message=(
                f"reached a stationary point (grad L = 0, theta != 0) at tau={tau:.6g} and stays "
                "there (eps = 0 at grad L = 0); the data are not separable by the signs this "
                "initialization keeps"
            )
        )


def segment_events(
    vector_field: VectorField, mode: Mode, depth: int, radius: float, near_zero: bool = True
) -> list[SegmentEvent]:
    """The events to watch in the current mode (``vector_field`` is the field of ``mode.chart``);
    ``near_zero``: leave the log chart when every parameter comes near 0."""
    problem = vector_field.problem
    found: list[SegmentEvent] = []
    if problem.algorithm.sign_discontinuous:
        assert mode.sign_pattern is not None
        for flat in np.flatnonzero(~mode.held.ravel()):
            found.append(ZeroCrossing(vector_field, index=int(flat)))
        for entry in zip(*np.nonzero(mode.held), strict=True):
            found.append(
                SlidingRelease(
                    vector_field,
                    index=(int(entry[0]), int(entry[1])),
                    sign_pattern=mode.sign_pattern,
                )
            )
    if radius > 0 and depth >= 2:
        found.append(Collapse(vector_field, radius=radius))
        if near_zero and not isinstance(mode.chart, AsinhChart):
            found.append(NearZero(vector_field, radius=radius))
        if mode.near_zero is not None:
            found.extend(CollapseCrossing(vector_field, index=int(i)) for i in mode.near_zero)
    if depth >= 3:
        found.append(BlowUp(vector_field))
    if problem.data.n > 1:
        found.append(Stationary(vector_field))
    return found
