"""Events that end an integration segment, and what happens at each: the base
(:class:`SegmentEvent`, :class:`Outcome`) and the thresholds they share.

The events themselves are in :mod:`flows.integrator.surface_events` (the switching surfaces of
l_inf-SAM) and :mod:`flows.integrator.threshold_events` (collapse, near zero, blow-up,
stationary point, loss floor); :func:`flows.integrator.watched.segment_events` lists those a
segment watches.

Each event is a small object: ``event(s, y)`` is its function for the solver (a segment ends
where it changes sign in the watched ``direction``), and ``event.handle(y, mode, s, tau, log)``
applies its consequence (at clock time ``s``, rescaled time ``tau``) to the state and the mode
in place, returning an :class:`Outcome`.

* :class:`~flows.integrator.surface_events.ZeroCrossing` — a parameter reaches 0 where the field jumps (l_inf-SAM), and
  :class:`~flows.integrator.surface_events.DirectionCrossing` — some ``G_j(theta)`` reaches 0 (l_inf-SAM on several examples);
  the one-sided fields decide between crossing and sliding (Filippov, :mod:`flows.integrator.filippov`).
* :class:`~flows.integrator.surface_events.Release` — a sliding surface stops sliding (the field of one side turns tangent).
* :class:`~flows.integrator.threshold_events.NearZero` — in the log chart, every parameter is below ``radius * NEAR_ZERO``: the run
  continues in the asinh chart, which follows a collapse to 0 in a few steps (the log chart
  would need ever smaller steps as ``log|w| -> -inf``). The log chart is used only where the
  dynamics are multiplicative (``dw_j/dtau`` is ``w_j`` times a factor that is finite unless
  theta -> 0), so there a parameter reaching 0 is the collapse: :class:`~flows.integrator.threshold_events.CollapseCrossing`.
* :class:`~flows.integrator.threshold_events.Collapse` — every parameter is below ``radius * COLLAPSE_FRACTION``; from there the
  predictor reaches 0 within a negligible time and stays (``theta = 0`` is an equilibrium).
* :class:`~flows.integrator.threshold_events.LossFloor` — the training loss falls to ``simulate``'s ``loss_floor`` (when given):
  the run ends there.
* :class:`~flows.integrator.threshold_events.BlowUp` — super-exponential growth (depth >= 3): a growing parameter's log-rate
  ``d log|w| / dtau`` exceeds ``BLOWUP_RATE``, i.e. less than ``1 / BLOWUP_RATE`` of time is left.
* :class:`~flows.integrator.threshold_events.Stationary` — the flow reaches a point where ``grad L = 0`` with ``theta != 0`` (data
  that the signs the initialization keeps cannot separate). There the SAM perturbation is
  undefined; the convention of practical implementations, ``eps = 0`` at ``grad L = 0``, makes
  the point an equilibrium, and the run stays there.

Threshold events (collapse, near zero, stationary) that already hold where a segment starts
fire at once (:meth:`SegmentEvent.already`), before any step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..field import VectorField
from ..fused import FusedField
from ..results import Cause, FlowEvent
from .segments import Mode

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
#: Where a ``G_j`` event fires, other ``|G_j|`` below this (times the largest ``|x_ij|``) are at
#: 0 in the same instant.
DIRECTION_ZERO = 1e-12


class Outcome(NamedTuple):
    """What an event did: ``stop`` the run; ``cause`` and ``message`` replace the run's when
    not None."""

    stop: bool = False
    cause: Cause | None = None
    message: str | None = None


@dataclass
class SegmentEvent:
    """Base: an event function ``g(s, y)`` on the chart state ``y = (z, tau)`` of ``field``
    (``combination``: the backend's compiled sliding combination, for the events that enter a
    switching surface; None: numpy's)."""

    field: VectorField
    combination: Callable | None = None
    direction = 0.0

    @property
    def problem(self):
        """The flow the field belongs to."""
        return self.field.problem

    def theta(self, y: np.ndarray):
        """The parameters (signed-log) of a chart state."""
        return self.problem.chart.state(y[:-1].reshape(self.problem.shape))

    @property
    def fused(self) -> FusedField:
        """The field as a :class:`~flows.fused.FusedField` (for its batched model pieces)."""
        if isinstance(self.field, FusedField):
            return self.field
        return FusedField(self.problem)

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
class EntryEvent(SegmentEvent):
    """``g = z[index]``: the chart coordinate at ``index`` (flat) passes through 0."""

    index: int = 0

    def __call__(self, s: float, y: np.ndarray) -> float:
        return float(y[self.index])
