"""Junctions of l_inf-SAM's direction surfaces: where several ``G_j = 0`` meet and deciding one
surface at a time (:func:`flows.integrator.surface_events.enter_surface`, the release event)
undoes itself, every way through them is tried at once.

At a junction the candidate surfaces are the directions ``G_j`` that slide or sit at 0. A *way
through* gives each candidate a role: it slides, or the flow leaves it on side ``+1`` or
``-1``. It is *consistent* (a Filippov solution that starts there) when

* the multilinear weights of the sliding ones (:mod:`flows.integrator.multilinear`, with the
  leaving ones fixed on their sides and held parameters sliding as they do) solve their
  equations exactly and lie inside ``(0, 1)`` by :data:`BOX_MARGIN`;
* the sliding is attracting: the Jacobian ``dr/dlambda`` of their normal rates is Hurwitz
  (each eigenvalue has a negative real part), the condition under which the blended field
  ``(1 +- tanh(h / eps)) / 2`` of the canopy rule holds the surfaces for small ``eps``;
* every leaving surface is left: its normal rate under the combined field points into its side
  (by :data:`LEAVING_TOL` of its one-sided rates, counted in the rescaled clock).

**Selection rule.** Among the consistent ways, the one with the most sliding surfaces, then the
fewest roles changed from the mode the junction was reached in, then the first in the order of
enumeration (slide, +1, -1 for each candidate in increasing ``j``). For a single surface this is
the one-surface rule: an attracting surface slides, a transversal one is crossed, and a repelling
one (where sliding is not attracting) is left on the side the mode holds.

**Where no way is consistent**, the product family of the multilinear rule can still miss
Filippov's set although it is not empty (nearly parallel surfaces: on teacher data at depth 3
and 4 the normal rates of the candidates have singular values down to 1e-2 of the largest).
Then the ways are tried again with their sliding surfaces combined by the tilted rule
(:mod:`flows.integrator.tilted`, the weights of greatest entropy in Filippov's set, with a
spread below half its release value in place of the box and Hurwitz conditions), selected
alike; the mode slides that way until those weights reach the set's boundary, and the junction
is then decided again. Where no way is consistent under either rule, the run stops as an
undecided junction.

A junction is decided where a ``G_j`` event fires and two or more directions meet
(:class:`~flows.integrator.surface_events.DirectionCrossing`), where a sliding combination can
no longer be kept (:class:`~flows.integrator.surface_events.Release`), and where one-at-a-time
decisions repeat at one instant (:func:`~flows.integrator.surface_events.undecided_surfaces`).
Where one surface at a time meets the flow, the one-surface rule decides it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ..field import VectorField
from ..fused import FusedField
from ..results import FlowEvent
from .events import DIRECTION_ZERO
from .filippov import DIRECTION, FilippovField, TooManySurfaces
from .multilinear import _residual_and_jacobian, multilinear_weights, solve_multilinear
from .segments import Mode
from .tilted import SPREAD_RELEASE, solve_tilted_in_tau

#: Sliding weights within this of 0 or 1 are releasing (where a release event fires the weight
#: is at the bound to the event's tolerance): not a consistent way to go on.
BOX_MARGIN = 1e-9
#: Eigenvalues of the sliding Jacobian up to this fraction of the largest count as negative:
#: surfaces whose rates are parallel (their functions coincide to first order near the
#: junction) make it singular.
HURWITZ_TOL = 1e-9
#: A leaving surface's normal rate must point into its side by more than this fraction of the
#: largest of its one-sided rates, both counted in the rescaled clock (:func:`_tau_rate`): a
#: rate below it is a tangency, which the flow would cross back at once.
LEAVING_TOL = 1e-10
SLIDE = 0.0
#: The rules that combine the sliding surfaces of a way.
MULTILINEAR, TILTED = "multilinear", "tilted"
#: Ways through one junction tried at one instant, at most.
MAX_WAYS_AT_ONE_INSTANT = 4


def _candidates(
    field: VectorField, mode: Mode, y: np.ndarray, fired: tuple[int, ...] = ()
) -> list[int]:
    """The directions ``j`` that slide in ``mode`` or whose ``G_j`` is at 0 at ``y`` (to
    :data:`~flows.integrator.events.DIRECTION_ZERO`, or just past 0 from the side the mode
    holds, where the crossing event located it), and ``fired``: the direction whose crossing
    event located its root here (at 0 to the clock's resolution, however fast it moves)."""
    problem = field.problem
    fused = field if isinstance(field, FusedField) else FusedField(problem)
    theta = problem.chart.state(y[:-1].reshape(problem.shape))
    direction = fused.evaluate(theta.sign, theta.log_abs)[0]
    scale = float(np.max(np.abs(problem.data.signed_features)))
    with np.errstate(over="ignore", under="ignore"):
        size = np.exp(direction.log_abs)
    assert mode.direction_pattern is not None
    value = np.where(mode.direction_pattern != 0, mode.direction_pattern, 1.0) * direction.sign
    at_zero = (direction.sign != 0) & (np.where(value > 0, size, -size) <= DIRECTION_ZERO * scale)
    at_zero[list(fired)] = True
    return sorted(set(mode.sliding_directions) | {int(j) for j in np.flatnonzero(at_zero)})


def _roles_in(mode: Mode, candidates: list[int]) -> tuple[float, ...]:
    """Each candidate's role in ``mode``: ``SLIDE`` or its side."""
    assert mode.direction_pattern is not None
    return tuple(
        SLIDE if j in mode.sliding_directions else float(mode.direction_pattern[j])
        for j in candidates
    )


class Junction(NamedTuple):
    """The one-sided fields at a junction, with every candidate and held parameter sliding.

    Attributes
    ----------
    rates : (k, V) normal rates of the ``k`` coupled surfaces under each vertex's field (in
        the original clock, scaled by ``1 / max c``).
    signs : (V, k) each vertex's sides (:func:`~flows.integrator.multilinear.vertex_signs`).
    rows : the row of each candidate direction, in the candidates' order.
    held : the rows of the held parameters (they slide in every way).
    speeds : (V,) each vertex's clock factor ``c_v / max c`` (for the tilted rule, counted in
        the rescaled clock).
    """

    rates: np.ndarray
    signs: np.ndarray
    rows: list[int]
    held: list[int]
    speeds: np.ndarray


def is_consistent(
    roles: tuple[float, ...],
    junction: Junction,
    newton: Callable | None = None,
    tilted: Callable | None = None,
    rule: str = MULTILINEAR,
) -> bool:
    """Whether the way ``roles`` (``SLIDE`` or a side per candidate) through ``junction`` is
    consistent (module docstring) with its sliding surfaces combined by ``rule``
    (:data:`MULTILINEAR` or :data:`TILTED`). ``newton``, ``tilted``: the backend's iterations
    for the two rules."""
    rates, signs = junction.rates, junction.signs
    keep = np.ones(len(signs), dtype=bool)
    for row, role in zip(junction.rows, roles, strict=True):
        if role != SLIDE:
            keep &= signs[:, row] == role
    sliding = junction.held + [
        r for r, role in zip(junction.rows, roles, strict=True) if role == SLIDE
    ]
    weights = np.ones(1)
    if sliding and rule == TILTED:
        weights, _, size, held = solve_tilted_in_tau(
            rates[sliding][:, keep], junction.speeds[keep], tilted
        )
        if not held or size > SPREAD_RELEASE / 2:
            return False
    elif sliding:
        sub = signs[keep][:, sliding]
        block = rates[sliding][:, keep]
        lam, exact = solve_multilinear(block, sub, newton)
        if not exact or np.any(lam < BOX_MARGIN) or np.any(lam > 1.0 - BOX_MARGIN):
            return False
        scale = np.max(np.abs(block), axis=-1)
        scaled = block / np.where(scale > 0, scale, 1.0)[:, None]
        eigenvalues = np.linalg.eigvals(_residual_and_jacobian(lam, scaled, sub)[1]).real
        if not np.all(eigenvalues <= HURWITZ_TOL * np.max(np.abs(eigenvalues))):
            return False
        weights = multilinear_weights(lam, sub)
    for row, role in zip(junction.rows, roles, strict=True):
        if role != SLIDE:
            rate = rates[row, keep]
            if not role * _tau_rate(weights, rate, junction.speeds[keep]) > LEAVING_TOL:
                return False
    return True


def _tau_rate(weights: np.ndarray, rate: np.ndarray, speeds: np.ndarray) -> float:
    """The normal rate of the combination ``weights`` (original clock) per unit of rescaled
    time, ``sum_v w_v r_v / sum_v w_v c_v``, over the largest ``|r_v| / c_v`` (a side's rate in
    its own rescaled time). Counted in ``t``, a side whose clock factor is 1e-30 of the others'
    has rates of that size, their signs exact; counted in ``tau`` it moves as fast as they."""
    moving = speeds > 0
    scale = float(np.max(np.abs(rate[moving]) / speeds[moving])) if moving.any() else 0.0
    speed = float(weights @ speeds)
    if not (scale > 0 and speed > 0):
        return 0.0
    return float(weights @ rate) / speed / scale


def consistent_ways(
    junction: Junction,
    newton: Callable | None = None,
    tilted: Callable | None = None,
    rule: str = MULTILINEAR,
) -> list[tuple[float, ...]]:
    """Every way through ``junction`` consistent under ``rule``, in the order of enumeration
    (under :data:`TILTED`, only ways with some surface sliding)."""
    every = itertools.product((SLIDE, 1.0, -1.0), repeat=len(junction.rows))
    return [
        roles
        for roles in every
        if (rule == MULTILINEAR or SLIDE in roles)
        and is_consistent(roles, junction, newton, tilted, rule)
    ]


def select_way(ways: list[tuple[float, ...]], before: tuple[float, ...]) -> tuple[float, ...]:
    """The selection rule (module docstring): the most sliding surfaces, then the fewest roles
    changed from ``before``, then the first."""
    return min(
        ways,
        key=lambda r: (
            -sum(role == SLIDE for role in r),
            sum(a != b for a, b in zip(r, before, strict=True)),
        ),
    )


def _junction_at(
    field: VectorField, mode: Mode, y: np.ndarray, s: float, candidates: list[int], combination
) -> tuple[Junction, FilippovField] | None:
    """The junction of ``candidates`` at ``y``, and the combination in which all of them slide
    (its ``newton`` and ``tilted``: the backend's iterations); None where more than
    :data:`~flows.integrator.multilinear.MAX_COUPLED` surfaces would slide or an inert held
    parameter is among them."""
    every = mode.copy()
    every.sliding_directions = tuple(candidates)
    every.tilted = False
    try:
        combined = FilippovField(field, every, combination=combination)
    except TooManySurfaces:
        return None
    if combined.inert:
        return None
    position = {i: n for n, i in enumerate(combined.coupled)}
    rows = {
        surface.at: position[i]
        for i, surface in enumerate(combined.surfaces)
        if surface.kind == DIRECTION
    }
    held = [position[i] for i, surface in enumerate(combined.surfaces) if surface.kind != DIRECTION]
    ev = combined.evaluate(y[:-1], s)
    rates, speeds = ev.rates[combined.coupled], ev.rhs[: len(combined.signs), -1]
    return Junction(rates, combined.signs, [rows[j] for j in candidates], held, speeds), combined


def resolve_junction(
    field: VectorField,
    mode: Mode,
    y: np.ndarray,
    s: float,
    tau: float,
    log: list[FlowEvent],
    combination: Callable | None = None,
    at_least: int = 1,
    fired: tuple[int, ...] = (),
) -> bool:
    """Put ``mode`` on the selected consistent way through the junction at ``y`` (module
    docstring): under the multilinear rule, or where no way is consistent under it, under the
    tilted rule; log each candidate whose role changes (``'sliding'``, ``'release'``,
    ``'crossing'``). A way already tried at this instant (the flow came back to the junction
    at once) is not tried again, and at most :data:`MAX_WAYS_AT_ONE_INSTANT` are. False
    (``mode`` unchanged) where no way is left,
    where fewer than ``at_least`` directions meet, or where the sliding parameters include
    inert ones. ``fired``: a direction whose crossing event fired here (:func:`_candidates`)."""
    candidates = _candidates(field, mode, y, fired)
    if len(candidates) < at_least:
        return False
    found = _junction_at(field, mode, y, s, candidates, combination) if candidates else None
    if found is None:
        return False
    junction, combined = found
    same = abs(mode.tried[0] - tau) <= 1e-12 * max(1.0, abs(tau)) if mode.tried else False
    tried = mode.tried[1] if same else ()
    if len(tried) >= MAX_WAYS_AT_ONE_INSTANT:
        return False
    before = _roles_in(mode, candidates)
    for rule in (MULTILINEAR, TILTED):
        ways = [
            w
            for w in consistent_ways(junction, combined.newton, combined.tilted, rule)
            if (tuple(candidates), w, rule == TILTED) not in tried
        ]
        if ways:
            way, tilted = select_way(ways, before), rule == TILTED
            break
    else:
        return False
    _apply(mode, candidates, way)
    mode.tilted = tilted
    for j, was, now in zip(candidates, before, way, strict=True):
        if now != was:
            kind = "sliding" if now == SLIDE else "release" if was == SLIDE else "crossing"
            log.append(FlowEvent(tau, kind, (-1, j), DIRECTION))
    mode.tried = (tau, (*tried, (tuple(candidates), way, tilted)), len(log))
    return True


def _apply(mode: Mode, candidates: list[int], roles: tuple[float, ...]) -> None:
    """Set each candidate's role in ``mode`` (sliding ones keep their order)."""
    assert mode.direction_pattern is not None
    slide = [j for j, role in zip(candidates, roles, strict=True) if role == SLIDE]
    kept = [j for j in mode.sliding_directions if j in slide]
    mode.sliding_directions = tuple(kept + [j for j in slide if j not in kept])
    for j, role in zip(candidates, roles, strict=True):
        if role != SLIDE:
            mode.direction_pattern[j] = role
