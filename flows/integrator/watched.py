"""The events a segment watches (:mod:`flows.integrator.events`), by mode."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..charts import AsinhChart
from ..field import VectorField
from .events import SegmentEvent
from .filippov import (
    FilippovField,
)
from .segments import Mode
from .surface_events import DirectionCrossing, Release, SurfaceDrift, ZeroCrossing
from .threshold_events import (
    BlowUp,
    Collapse,
    CollapseCrossing,
    NearZero,
    ResidualSwitch,
    Stationary,
)


def segment_events(
    vector_field: VectorField,
    mode: Mode,
    depth: int,
    radius: float,
    near_zero: bool = True,
    sliding: FilippovField | None = None,
    y: np.ndarray | None = None,
    combination: Callable | None = None,
) -> list[SegmentEvent]:
    """The events to watch in the current mode (``vector_field`` is the field of ``mode.chart``,
    ``sliding`` the sliding combination when some surface slides, ``y`` the state where the
    segment starts, ``combination`` the backend's compiled sliding combination, passed to the
    surfaces' crossing events); ``near_zero``: leave the log chart when every parameter comes
    near 0. No :class:`Stationary` while surfaces slide: there
    ``grad L = 0`` is a point of the sliding manifold, and the Filippov combination (the limit
    of the chattering iteration, whose gradient is never exactly 0) decides whether it rests."""
    problem = vector_field.problem
    found: list[SegmentEvent] = []
    if problem.algorithm.sign_discontinuous:
        assert mode.direction_pattern is not None
        for flat in np.flatnonzero(~mode.held.ravel()):
            found.append(ZeroCrossing(vector_field, combination, index=int(flat)))
        columns = np.any(problem.data.X != 0, axis=0)
        columns[list(mode.sliding_directions)] = False
        if problem.data.n > 1 and np.any(columns):
            crossing = DirectionCrossing(
                vector_field,
                combination,
                pattern=mode.direction_pattern.copy(),
                watched=np.flatnonzero(columns),
            )
            found.append(crossing if y is None else crossing.starting_at(y))
        if sliding is not None:
            found.append(Release(vector_field, sliding=sliding))
        if mode.sliding_directions:
            found.append(SurfaceDrift(vector_field, directions=tuple(mode.sliding_directions)))
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
    if problem.residual_switches:
        switch = ResidualSwitch(vector_field)
        found.append(switch if y is None else switch.starting_at(y))
    return found
