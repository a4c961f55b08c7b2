"""Events that end an integration segment, and what happens at each.

Each event is a small object: ``event(s, y)`` is its function for the solver (a segment ends
where it changes sign in the watched ``direction``), and ``event.handle(y, mode, s, tau, log)``
applies its consequence (at clock time ``s``, rescaled time ``tau``) to the state and the mode
in place, returning an :class:`Outcome`.

* :class:`ZeroCrossing` — a parameter reaches 0 where the field jumps (l_inf-SAM), and
  :class:`DirectionCrossing` — some ``G_j(theta)`` reaches 0 (l_inf-SAM on several examples);
  the one-sided fields decide between crossing and sliding (Filippov, :mod:`flows.integrator.filippov`).
* :class:`Release` — a sliding surface stops sliding (the field of one side turns tangent).
* :class:`NearZero` — in the log chart, every parameter is below ``radius * NEAR_ZERO``: the run
  continues in the asinh chart, which follows a collapse to 0 in a few steps (the log chart
  would need ever smaller steps as ``log|w| -> -inf``). The log chart is used only where the
  dynamics are multiplicative (``dw_j/dtau`` is ``w_j`` times a factor that is finite unless
  theta -> 0), so there a parameter reaching 0 is the collapse: :class:`CollapseCrossing`.
* :class:`Collapse` — every parameter is below ``radius * COLLAPSE_FRACTION``; from there the
  predictor reaches 0 within a negligible time and stays (``theta = 0`` is an equilibrium).
* :class:`LossFloor` — the training loss falls to ``simulate``'s ``loss_floor`` (when given):
  the run ends there.
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
from functools import cached_property
from typing import NamedTuple

import numpy as np

from ..charts import AsinhChart
from ..field import VectorField
from ..fused import FusedField
from ..results import BLOWUP, FAILURE, SUCCESS, FlowEvent
from ..signedlog import log_norm2
from .filippov import (
    DIRECTION,
    PARAMETER,
    FilippovField,
    Surface,
    TooManySurfaces,
    parameter_surface,
)
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


def enter_surface(
    field: VectorField,
    surface: Surface,
    y: np.ndarray,
    mode: Mode,
    s: float,
    tau: float,
    log: list[FlowEvent],
) -> Outcome:
    """The flow reached ``surface``: cross it or slide on it (Filippov, :mod:`flows.integrator.filippov`).

    With the normal rates ``N+`` and ``N-`` of the surface under its two one-sided fields (the
    surfaces already sliding go on sliding): slide if ``N+ < 0 < N-``; cross to the side both
    point to otherwise; on a repelling surface (``N+ > 0 > N-``) keep the way it came. A surface
    reached again in the instant it was crossed slides: several surfaces reached together can
    each look crossable alone while jointly they push the flow back (it would cross back and
    forth without advancing); the sliding combination then keeps them, or releases them where
    that is consistent.
    """
    assert mode.sign_pattern is not None and mode.direction_pattern is not None
    entry = surface.entry(field.problem.shape)
    if surface.kind == PARAMETER:
        came_from = float(mode.sign_pattern[entry])
        for member, _ in surface.flat_sides(1.0):
            y[member] = 0.0
    else:
        came_from = float(mode.direction_pattern[surface.at])
    try:
        n_plus, n_minus = FilippovField(field, mode, extra=surface).one_sided_rates(y[:-1], s)
    except TooManySurfaces as error:
        return Outcome(stop=True, status=FAILURE, message=f"{error} at tau={tau:.6g}")
    if (n_plus < 0 < n_minus) or _crossed_in_this_instant(log, tau, surface, field.problem.shape):
        if surface.kind == PARAMETER:
            for member, _ in surface.flat_sides(1.0):
                mode.held.ravel()[member] = True
            if len(surface.members) > 1:
                mode.linked = (*mode.linked, surface.members)
        else:
            mode.sliding_directions = (*mode.sliding_directions, surface.at)
        _log(log, tau, "sliding", surface, field.problem.shape)
        return Outcome()
    if n_plus > 0 and n_minus >= 0:
        side = 1.0
    elif n_minus < 0 and n_plus <= 0:
        side = -1.0
    elif came_from != 0:
        side = -came_from
    else:  # repelling, at the start of the run: the side that pushes harder
        side = 1.0 if n_plus >= -n_minus else -1.0
    _leave(surface, side, y, mode)
    _log(log, tau, "crossing", surface, field.problem.shape)
    return Outcome()


def _log(
    log: list[FlowEvent], tau: float, kind: str, surface: Surface, shape: tuple[int, int]
) -> None:
    """One event per parameter of the surface (one for a direction)."""
    if surface.kind == DIRECTION:
        log.append(FlowEvent(tau, kind, surface.entry(shape), DIRECTION))
        return
    for member, _ in surface.flat_sides(1.0):
        group, j = np.unravel_index(member, shape)
        log.append(FlowEvent(tau, kind, (int(group), int(j)), PARAMETER))


def _this_instant(log: list[FlowEvent], tau: float) -> list[FlowEvent]:
    """The events logged at this same ``tau`` (to rounding), latest first."""
    found = []
    for event in reversed(log):
        if abs(event.tau - tau) > 1e-12 * max(1.0, abs(tau)):
            break
        found.append(event)
    return found


def _crossed_in_this_instant(
    log: list[FlowEvent], tau: float, surface: Surface, shape: tuple[int, int]
) -> bool:
    """Whether ``surface`` was crossed at this same ``tau`` (to rounding) already."""
    entry = surface.entry(shape)
    return any(
        e.kind == "crossing" and e.entry == entry and e.surface == surface.kind
        for e in _this_instant(log, tau)
    )


#: How often one surface may slide, cross or release at a single instant before the run stops
#: (:func:`undecided_surfaces`).
MAX_REPEATS_AT_ONE_INSTANT = 3


def undecided_surfaces(log: list[FlowEvent]) -> list[str]:
    """The surfaces (``'G_j'``, ``'w^(l)_j'``) whose events at the latest instant repeat more than
    :data:`MAX_REPEATS_AT_ONE_INSTANT` times: surfaces meeting there with no consistent way to
    slide or cross (each resolution undoes the previous one); empty otherwise."""
    if not log:
        return []
    events = _this_instant(log, log[-1].tau)
    counts: dict[tuple, int] = {}
    for e in events:
        key = (e.kind, e.entry, e.surface)
        counts[key] = counts.get(key, 0) + 1
    if max(counts.values()) <= MAX_REPEATS_AT_ONE_INSTANT:
        return []
    entries = sorted({(e.surface, e.entry) for e in events if e.entry is not None})
    return [
        f"G_{j}" if kind == DIRECTION else f"w^({group + 1})_{j}" for kind, (group, j) in entries
    ]


def _leave(surface: Surface, side: float, y: np.ndarray, mode: Mode) -> None:
    """Put the state on ``side`` of ``surface`` (just past 0 for a parameter)."""
    assert mode.sign_pattern is not None and mode.direction_pattern is not None
    if surface.kind == PARAMETER:
        for member, sign in surface.flat_sides(side):
            mode.held.ravel()[member] = False
            mode.sign_pattern.ravel()[member] = sign
            y[member] = sign * NUDGE
        mode.linked = tuple(g for g in mode.linked if g != surface.members)
    else:
        mode.sliding_directions = tuple(j for j in mode.sliding_directions if j != surface.at)
        mode.direction_pattern[surface.at] = side


@dataclass
class ZeroCrossing(SegmentEvent):
    """``g = z[index]``: the parameter at ``index`` (flat) passes through 0."""

    index: int = 0

    def __call__(self, s: float, y: np.ndarray) -> float:
        return float(y[self.index])

    def handle(
        self, y: np.ndarray, mode: Mode, s: float, tau: float, log: list[FlowEvent]
    ) -> Outcome:
        """Cross or slide; also every entry that reached 0 in the same instant (those of the
        same coordinate as one surface, :class:`flows.integrator.filippov.Surface`)."""
        assert mode.sign_pattern is not None
        shape = self.problem.shape
        reached = [self.index, *self._also_crossed(y, mode)]
        for j in dict.fromkeys(int(np.unravel_index(f, shape)[1]) for f in reached):
            flats = [f for f in reached if np.unravel_index(f, shape)[1] == j]
            surface = parameter_surface(flats, mode.sign_pattern)
            outcome = enter_surface(self.field, surface, y, mode, s, tau, log)
            if outcome.stop:
                return outcome
        return Outcome()

    def _also_crossed(self, y: np.ndarray, mode: Mode) -> list[int]:
        """Entries that reached 0 together with the one whose event fired (e.g. both layers of a
        balanced coordinate in the full system): past 0 against their pattern, or at 0 to
        rounding."""
        assert mode.sign_pattern is not None
        z = y[:-1]
        crossed = (~mode.held.ravel()) & (
            (np.sign(z) == -mode.sign_pattern.ravel()) | (np.abs(z) < 1e-14)
        )
        return [int(i) for i in np.flatnonzero(crossed) if i != self.index]


@dataclass
class DirectionCrossing(SegmentEvent):
    """``g = min_j (sign_j G_j(theta) + offset_j)`` over the watched coordinates (frozen sign
    ``sign_j`` of ``G_j``): some ``G_j`` reaches 0, a switching surface of l_inf-SAM on several
    examples.

    ``offset_j`` (:meth:`starting_at`) lifts a ``G_j`` that starts the segment at 0 on the
    wrong side by rounding (just after its crossing) to just above 0: otherwise the minimum
    would start below 0 and hide the next crossing of any other coordinate.
    """

    pattern: np.ndarray = dataclass_field(default_factory=lambda: np.zeros(1))
    watched: np.ndarray = dataclass_field(default_factory=lambda: np.zeros(0, dtype=int))
    offset: np.ndarray | float = 0.0
    direction = -1.0

    def starting_at(self, y: np.ndarray) -> DirectionCrossing:
        """Set the offsets for a segment that starts at ``y``."""
        values = np.nan_to_num(self.values(y), nan=0.0)
        self.offset = 2.0 * np.maximum(-values, 0.0)
        return self

    def values(self, y: np.ndarray) -> np.ndarray:
        """``sign_j G_j(theta)`` of the watched coordinates (NaN where ``G_j`` is exactly 0: its
        example weights underflowed to where it has no sign; it is not watched there)."""
        theta = self.theta(y)
        direction = self.fused.evaluate(theta.sign, theta.log_abs)[0]
        g = np.where(direction.sign == 0, np.nan, direction.sign * np.exp(direction.log_abs))
        return (self.pattern * g)[self.watched]

    def __call__(self, s: float, y: np.ndarray) -> float:
        values = self.values(y) + self.offset
        values = values[(self.pattern[self.watched] != 0) & ~np.isnan(values)]
        return float(np.min(values)) if values.size else 1.0

    def already(self, y: np.ndarray) -> bool:
        """A watched ``G_j`` is exactly 0 where the run starts (its side is then decided)."""
        return bool(np.any(self.pattern[self.watched] == 0))

    def handle(
        self, y: np.ndarray, mode: Mode, s: float, tau: float, log: list[FlowEvent]
    ) -> Outcome:
        """Cross or slide, for every watched ``G_j`` at 0 (to rounding) here."""
        values = self.values(y)
        scale = float(np.max(np.abs(self.problem.data.signed_features)))
        at_zero = (values <= DIRECTION_ZERO * scale) | (self.pattern[self.watched] == 0)
        for j in self.watched[at_zero]:
            outcome = enter_surface(self.field, Surface(DIRECTION, int(j)), y, mode, s, tau, log)
            if outcome.stop:
                return outcome
        return Outcome()


#: How far outside ``[0, 1]`` a sliding weight may start a segment (rounding) before it
#: releases at once (:meth:`Release.already`).
RELEASE_SLACK = 1e-9


@dataclass
class Release(SegmentEvent):
    """``g = min_i min(lambda_i, 1 - lambda_i)`` over the sliding surfaces (the weights of the
    sliding combination, :class:`flows.integrator.filippov.FilippovField`): positive while every one
    slides."""

    sliding: FilippovField | None = None
    direction = -1.0

    def __call__(self, s: float, y: np.ndarray) -> float:
        assert self.sliding is not None
        lam = self.sliding.lambdas(y[:-1], s)
        return float(np.min(np.minimum(lam, 1.0 - lam)))

    def already(self, y: np.ndarray) -> bool:
        """A weight outside ``[0, 1]`` where the segment starts (the surfaces that slide after
        an event are not jointly consistent, e.g. one that joined pushes another off): that
        surface releases before the flow moves (the crossing watched while integrating only
        catches weights that leave the box, not ones that start outside)."""
        return self(0.0, y) < -RELEASE_SLACK

    def handle(
        self, y: np.ndarray, mode: Mode, s: float, tau: float, log: list[FlowEvent]
    ) -> Outcome:
        """The surface whose weight reached 0 or 1 stops sliding: the flow leaves on the side
        whose field no longer points at it (``lambda = 1``: the + side)."""
        assert self.sliding is not None
        lam = self.sliding.lambdas(y[:-1], s)
        i = int(np.argmin(np.minimum(lam, 1.0 - lam)))
        surface = self.sliding.surfaces[i]
        _leave(surface, 1.0 if lam[i] >= 0.5 else -1.0, y, mode)
        _log(log, tau, "release", surface, self.problem.shape)
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
        fused = self.fused
        theta = self.theta(y)
        weights = np.asarray(problem.multiplicity, dtype=float)[:, None]
        log_tol = float(np.log(STATIONARY_TOL)) + self.log_scale
        if fused._float_rows(theta.log_abs):
            direction, _, loo = fused._float_evaluate(theta.sign * np.exp(theta.log_abs))
            top = float(np.sum(weights * loo * loo))
            if top == 0:
                return -log_tol
            gradient = float(np.sum(weights * (direction * loo) ** 2))
            return 0.5 * float(np.log(gradient / top)) - log_tol
        direction_, _, loo_ = fused.evaluate(theta.sign, theta.log_abs)
        top = log_norm2(loo_.log_abs, weights)
        if top == -np.inf:
            return -log_tol
        return float(log_norm2(direction_.log_abs[None, :] + loo_.log_abs, weights) - top - log_tol)

    @cached_property
    def log_scale(self) -> float:
        """``log max_i ||x_i||``."""
        return float(np.log(np.max(np.linalg.norm(self.problem.data.X, axis=1))))

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
            status=SUCCESS,
            message=f"training loss reached loss_floor={self.floor:g} at tau={tau:.10g}",
        )


def segment_events(
    vector_field: VectorField,
    mode: Mode,
    depth: int,
    radius: float,
    near_zero: bool = True,
    sliding: FilippovField | None = None,
    y: np.ndarray | None = None,
) -> list[SegmentEvent]:
    """The events to watch in the current mode (``vector_field`` is the field of ``mode.chart``,
    ``sliding`` the sliding combination when some surface slides, ``y`` the state where the
    segment starts); ``near_zero``: leave the log chart when every parameter comes near 0. No :class:`Stationary` while surfaces slide: there
    ``grad L = 0`` is a point of the sliding manifold, and the Filippov combination (the limit
    of the chattering iteration, whose gradient is never exactly 0) decides whether it rests."""
    problem = vector_field.problem
    found: list[SegmentEvent] = []
    if problem.algorithm.sign_discontinuous:
        assert mode.direction_pattern is not None
        for flat in np.flatnonzero(~mode.held.ravel()):
            found.append(ZeroCrossing(vector_field, index=int(flat)))
        columns = np.any(problem.data.X != 0, axis=0)
        columns[list(mode.sliding_directions)] = False
        if problem.data.n > 1 and np.any(columns):
            crossing = DirectionCrossing(
                vector_field, pattern=mode.direction_pattern.copy(), watched=np.flatnonzero(columns)
            )
            found.append(crossing if y is None else crossing.starting_at(y))
        if sliding is not None:
            found.append(Release(vector_field, sliding=sliding))
    if radius > 0 and depth >= 2:
        found.append(Collapse(vector_field, radius=radius))
        if near_zero and not isinstance(mode.chart, AsinhChart):
            found.append(NearZero(vector_field, radius=radius))
        if mode.near_zero is not None:
            found.extend(CollapseCrossing(vector_field, index=int(i)) for i in mode.near_zero)
    if depth >= 3:
        found.append(BlowUp(vector_field))
    if problem.data.n > 1 and sliding is None:
        found.append(Stationary(vector_field))
    return found
