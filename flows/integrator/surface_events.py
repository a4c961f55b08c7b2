"""The switching-surface events of l_inf-SAM (:mod:`flows.integrator.events`): a parameter or a
``G_j`` reaches 0 (cross or slide, :func:`enter_surface`), a sliding surface releases, and the
junctions where surfaces meet undecided."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as dataclass_field

import numpy as np

from ..field import VectorField
from ..results import Cause, FlowEvent
from .events import DIRECTION_ZERO, NUDGE, EntryEvent, Outcome, SegmentEvent
from .filippov import (
    DIRECTION,
    PARAMETER,
    FilippovField,
    Surface,
    TooManySurfaces,
    parameter_surface,
)
from .junctions import resolve_junction
from .segments import Mode


def enter_surface(
    field: VectorField,
    surface: Surface,
    y: np.ndarray,
    mode: Mode,
    s: float,
    tau: float,
    log: list[FlowEvent],
    combination: Callable | None = None,
) -> Outcome:
    """The flow reached ``surface``: cross it or slide on it (Filippov, :mod:`flows.integrator.filippov`;
    ``combination``: the backend's compiled sliding combination, :mod:`flows.backends`).

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
        sides = FilippovField(field, mode, extra=surface, combination=combination)
        n_plus, n_minus = sides.one_sided_rates(y[:-1], s)
    except TooManySurfaces as error:
        return Outcome(
            stop=True, cause=Cause.TOO_MANY_SURFACES, message=f"{error} at tau={tau:.6g}"
        )
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


def undecided_surfaces(log: list[FlowEvent], since: int = 0) -> list[str]:
    """The surfaces (``'G_j'``, ``'w^(l)_j'``) whose events at the latest instant repeat more than
    :data:`MAX_REPEATS_AT_ONE_INSTANT` times among the events from index ``since`` on (those
    after a junction decided there, :mod:`flows.integrator.junctions`): surfaces
    meeting there with no consistent way to slide or cross one at a time (each resolution undoes
    the previous one); empty otherwise."""
    if not log:
        return []
    events = _this_instant(log, log[-1].tau)[: max(len(log) - since, 0)]
    if not events:
        return []
    counts: dict[tuple, int] = {}
    for e in events:
        key = (e.kind, e.entry, e.surface)
        counts[key] = counts.get(key, 0) + 1
    if max(counts.values()) <= MAX_REPEATS_AT_ONE_INSTANT:
        return []
    return surface_names(_surfaces_of(events))


def _surfaces_of(events: list[FlowEvent]) -> list[tuple]:
    """The surfaces ``(kind, (group, j))`` of ``events``, each once, in order."""
    return sorted({(e.surface, e.entry) for e in events if e.entry is not None})


def surface_names(surfaces: list[tuple]) -> list[str]:
    """``'G_j'`` or ``'w^(l)_j'`` of each surface ``(kind, (group, j))``."""
    return [
        f"G_{j}" if kind == DIRECTION else f"w^({group + 1})_{j}" for kind, (group, j) in surfaces
    ]


#: Events of switching surfaces within :data:`CHATTER_SPAN` ``* max(1, tau)`` of rescaled time
#: at which the run stops as an undecided junction (:func:`chattering_surfaces`).
CHATTER_EVENTS = 50
CHATTER_SPAN = 1e-6


def chattering_surfaces(log: list[FlowEvent]) -> list[tuple]:
    """The surfaces ``(kind, (group, j))`` of the last :data:`CHATTER_EVENTS` events if they
    all fell within :data:`CHATTER_SPAN` ``* max(1, tau)`` of rescaled time: surfaces that
    meet where the flow switches between sliding on them and leaving them at ever shorter
    intervals (a junction that each resolution undoes a little later, measured on teacher data
    at depth 3: 640 events over 1e-4 of tau, 2e5 evaluations; or a cycle of switches whose
    period shrinks geometrically to an accumulation point, teacher set 7 at depth 4: by 0.65
    per cycle); empty otherwise."""
    if len(log) < CHATTER_EVENTS:
        return []
    last = log[-CHATTER_EVENTS:]
    if last[-1].tau - last[0].tau > CHATTER_SPAN * max(1.0, abs(last[-1].tau)):
        return []
    return _surfaces_of(last)


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
class ZeroCrossing(EntryEvent):
    """``g = z[index]``: the parameter at ``index`` (flat) passes through 0."""

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
            outcome = enter_surface(self.field, surface, y, mode, s, tau, log, self.combination)
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

    def shown(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The watched coordinates the event function reads at ``y`` (those with a frozen sign
        and a ``G_j`` that has one) and their ``sign_j G_j + offset_j``."""
        values = self.values(y) + self.offset
        keep = (self.pattern[self.watched] != 0) & ~np.isnan(values)
        return self.watched[keep], values[keep]

    def __call__(self, s: float, y: np.ndarray) -> float:
        values = self.shown(y)[1]
        return float(np.min(values)) if values.size else 1.0

    def already(self, y: np.ndarray) -> bool:
        """A watched ``G_j`` is exactly 0 where the run starts (its side is then decided)."""
        return bool(np.any(self.pattern[self.watched] == 0))

    def handle(
        self, y: np.ndarray, mode: Mode, s: float, tau: float, log: list[FlowEvent]
    ) -> Outcome:
        """Cross or slide, for every watched ``G_j`` at 0 (to rounding) here and the one whose
        root the event located (at 0 to the clock's resolution: a ``G_j`` that moves fast
        can be 1e-11 from 0 where the next representable time would take it past 0): where
        two or more directions meet (at 0 or sliding), all together
        (:func:`flows.integrator.junctions.resolve_junction`), else one at a time."""
        watched, shifted = self.shown(y)
        fired = (int(watched[np.argmin(shifted)]),) if watched.size else ()
        if resolve_junction(
            self.field, mode, y, s, tau, log, self.combination, at_least=2, fired=fired
        ):
            return Outcome()
        values = self.values(y)
        scale = float(np.max(np.abs(self.problem.data.signed_features)))
        at_zero = (values <= DIRECTION_ZERO * scale) | (self.pattern[self.watched] == 0)
        at_zero |= np.isin(self.watched, fired)
        for j in self.watched[at_zero]:
            outcome = enter_surface(
                self.field, Surface(DIRECTION, int(j)), y, mode, s, tau, log, self.combination
            )
            if outcome.stop:
                return outcome
        return Outcome()


#: Largest ``|G_j| / sum_i |p_i z_ij|`` of a sliding direction at which the full field still
#: resolves its surface (:class:`SurfaceDrift`). The combination holds ``dG_j/dtau = 0``, so
#: ``G_j`` moves off 0 by the integration error only: 1e-10 to 1e-8 along the paths of the
#: depth benchmark. Where the margins tie, ``G_j`` answers a relative change of ``theta`` with
#: the gain ``u`` and that error grows tenfold every 0.05 of tau (l_inf-SAM, teacher set 8 at
#: depth 3: from 1e-9 at tau = 5.95 to 0.4 at 6.2, the combination then blending the sides of
#: a ``G_j`` of definite sign).
SURFACE_DRIFT = 1e-3


@dataclass
class SurfaceDrift(SegmentEvent):
    """``g = SURFACE_DRIFT - max_j |G_j| / sum_i |p_i z_ij|`` over the sliding ``directions``:
    the full field no longer resolves its sliding surfaces. The run cannot go on in it there
    (:func:`flows.integrator.driver._end_short_of_blowup`: the extrapolated blow-up, the slow
    manifold of its ties, which keeps ``Z_J^T p = 0`` exactly, else 'precision lost')."""

    directions: tuple[int, ...] = ()
    direction = -1.0

    def drift(self, y: np.ndarray) -> float:
        """``max_j |G_j| / sum_i |p_i z_ij|`` over the sliding directions at ``y``."""
        fused = self.fused
        theta = self.theta(y)
        _, p = fused.margins_and_weights(fused.product_of_layers(theta.sign, theta.log_abs))[:2]
        assert p is not None  # direction surfaces exist only for several examples
        features = np.asarray(self.problem.data.signed_features, dtype=float)[:, self.directions]
        with np.errstate(invalid="ignore", divide="ignore"):
            off = np.abs(p @ features) / (np.abs(p) @ np.abs(features))
        return float(np.max(np.nan_to_num(off), initial=0.0))

    def __call__(self, s: float, y: np.ndarray) -> float:
        return SURFACE_DRIFT - self.drift(y)

    def already(self, y: np.ndarray) -> bool:
        """The surfaces are not resolved where the segment starts."""
        return self(0.0, y) < 0

    def message(self, y: np.ndarray) -> str:
        """Why the run cannot go on in the full field (for its message)."""
        names = ", ".join(f"G_{j}" for j in self.directions)
        return (
            f"the sliding surfaces {names} are no longer resolved (|G_j| reached "
            f"{self.drift(y):.2g} of sum_i |p_i z_ij|: the integration error off them, "
            "amplified where the margins tie)"
        )


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
        return self.sliding.release_margin(y[:-1], s)

    def already(self, y: np.ndarray) -> bool:
        """A weight outside ``[0, 1]`` where the segment starts, or a combination that has no
        solution there (:meth:`~flows.integrator.filippov.FilippovField.release_margin`; the
        surfaces that slide after an event are not jointly consistent, e.g. one that joined
        pushes another off): that surface releases before the flow moves (the crossing
        watched while integrating only catches weights that leave the box, not ones that start
        outside)."""
        return self(0.0, y) < -RELEASE_SLACK

    def handle(
        self, y: np.ndarray, mode: Mode, s: float, tau: float, log: list[FlowEvent]
    ) -> Outcome:
        """The surface whose weight reached 0 or 1 stops sliding: the flow leaves on the side
        whose field no longer points at it (``lambda = 1``: the + side). Under the tilted rule,
        or where the multilinear one has no exact solution, the junction is decided again
        (:func:`flows.integrator.junctions.resolve_junction`)."""
        assert self.sliding is not None
        lam, exact = self.sliding.lambdas_exact(y[:-1], s)
        if mode.tilted or not exact:  # the junction decides again which of them slide
            if resolve_junction(self.field, mode, y, s, tau, log, self.combination):
                return Outcome()
            return _no_way_on(mode, tau)
        i = int(np.argmin(np.minimum(lam, 1.0 - lam)))
        surface = self.sliding.surfaces[i]
        _leave(surface, 1.0 if lam[i] >= 0.5 else -1.0, y, mode)
        _log(log, tau, "release", surface, self.problem.shape)
        return Outcome()


def _no_way_on(mode: Mode, tau: float) -> Outcome:
    """The run stops: the sliding surfaces can no longer be kept together (the tilted
    combination reached the boundary of Filippov's set, or the multilinear one has no exact
    solution), and no way through their junction is consistent
    (:func:`flows.integrator.junctions.resolve_junction`)."""
    surfaces = [f"G_{j}" for j in mode.sliding_directions]
    return Outcome(
        stop=True,
        cause=Cause.UNDECIDED_JUNCTION,
        message=f"the switching surfaces {', '.join(surfaces)} stop sliding together at "
        f"tau={tau:.6g} with no consistent way to go on; the path up to there is returned",
    )
