"""The state of a run between segments (:mod:`flows.integrator.driver`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from ..backends import Backend
from ..charts import AsinhChart, LogChart
from ..field import Problem
from ..memo import exact_key, recall, small
from ..results import Cause, FlowEvent
from . import events as ev
from .assemble import Output, flush
from .filippov import FilippovField
from .retime import applies, retime, retimed
from .segments import Mode, Path, Segment
from .stiffness import STIFFNESS_CHECK_NFEV


def field_key(backend: str, problem: Problem, chart: AsinhChart | LogChart) -> tuple | None:
    """The memo key (:func:`flows.memo.recall`) of ``backend``'s field of ``problem`` in
    ``chart``: the problem by value (the algorithm, loss and clock by identity: table entries
    that the field keeps alive), so that runs that differ only in their initialization share
    it; None where a value has no exact key (a schedule), or the data set keeps nothing
    (:func:`flows.memo.small`)."""
    if not small(problem.data):
        return None
    chart_key = (
        ("log", exact_key(chart.sign))
        if isinstance(chart, LogChart)
        else ("asinh", exact_key(chart.delta))
    )
    parts = (exact_key(problem.hyperparameters), exact_key(problem.multiplicity), chart_key[1])
    if any(part is None for part in parts):
        return None
    ids = (id(problem.algorithm), id(problem.loss), id(problem.clock))
    return ("field", backend, ids, parts, chart_key[0])


@dataclass
class Run:
    """The state of a run between segments."""

    problem: Problem
    backend: Backend
    mode: Mode
    y: np.ndarray
    s_end: float
    rtol: float
    atol: float
    budget: int
    near_zero_switch: bool
    path: Path
    output: Output
    radius: float
    kinks: np.ndarray
    loss_floor: float | None = None
    continue_by_steps: bool = True  # see stepping.py
    s: float = 0.0
    nfev: int = 0
    cause: Cause = Cause.REACHED_END
    message: str = "reached t_max"
    log: list[FlowEvent] = field(default_factory=list)
    fields: dict = field(default_factory=dict)
    loops: list[str] = field(default_factory=list)
    next_stiffness_check: int = STIFFNESS_CHECK_NFEV
    stiff: bool = False
    checked_at: float = 0.0
    clocked: int = 0  # segments recorded when retime() last ran
    tau_end: float | None = None  # tau where the last segment recorded ends (see recorded())
    progress: tuple[int, float] = (0, 0.0)  # (nfev, s) at the last check of the steps' advance
    own_steps: tuple[float, int, float] | None = None  # (tau, steps, error): see stepping.py
    first: Any = None  # the first segment's set-up made ahead (driver.FirstSegment), taken by it
    #: The mode and state at ``s = 0``, written by no one (None: copies of ``mode`` and ``y``).
    initial: tuple[Mode, np.ndarray] | None = None

    def __post_init__(self) -> None:
        """Keep the initial point (:attr:`start`) and listen to the path."""
        if self.initial is None:
            self.initial = (self.mode.copy(), self.y.copy())
        self.path.listener = self.recorded

    @cached_property
    def start(self) -> Segment:
        """The initial point, as a segment of length 0 (an event at ``s = 0`` may change ``y``
        before any step: :func:`~flows.integrator.assemble.assemble` samples it there)."""
        assert self.initial is not None  # set in __post_init__
        mode, y = self.initial
        return Segment.frozen(mode.copy(), 0.0, 0.0, y, 0.0)

    def next_stop(self) -> float:
        """Where the next segment must end at the latest: the next kink of a schedule, or
        ``s_end``."""
        if not self.kinks.size:
            return self.s_end
        ahead = self.kinks[self.kinks > self.s]
        return float(min(ahead[0], self.s_end)) if ahead.size else self.s_end

    def field_for(self, mode: Mode):
        """The field of the problem in ``mode``'s chart (built once per chart, and kept for
        the next run of the same problem, :func:`field_key`)."""
        key = id(mode.chart)
        if key not in self.fields:
            self.fields[key] = (
                mode.chart,
                recall(
                    self.problem.data,
                    field_key(self.backend.name, self.problem, mode.chart),
                    lambda: self.backend.field(replace(self.problem, chart=mode.chart)),
                ),
            )
        return self.fields[key][1]

    def moving_field(self, mode: Mode):
        """What moves the state in ``mode``: the chart's field, or where switching surfaces
        slide their Filippov combination (:class:`flows.integrator.filippov.FilippovField`; raises
        :class:`~flows.integrator.filippov.TooManySurfaces`)."""
        base = self.field_for(mode)
        return FilippovField(base, mode, combination=self.backend.sliding) if mode.sliding else base

    def tolerances(self, mode: Mode) -> tuple[float, np.ndarray]:
        """Solver ``rtol`` and per-component ``atol`` in ``mode``'s chart; ``tau`` (which starts
        at exactly 0) gets an absolute tolerance of its own to keep the first step sensible, or
        ``inf`` (no error control) where it is computed by quadrature
        (:func:`flows.integrator.retime.retimed`)."""
        rtol, atol = mode.chart.tolerances(self.rtol, self.atol)
        if mode.near_zero is not None:  # on the way into a collapse: see NEAR_ZERO_ATOL
            atol = max(atol, ev.NEAR_ZERO_ATOL * self.radius)
        tau_atol = max(
            self.atol, 1e-12, self.rtol * max(1.0, self.s_end) if rtol < self.rtol else 0.0
        )
        if retimed(self.problem, mode):
            tau_atol = np.inf
        atols = np.full(self.y.size, atol, dtype=float)
        atols[-1] = tau_atol
        return rtol, atols

    def recorded(self, segment: Segment) -> None:
        """A segment was appended to the path: give it its
        :class:`~flows.integrator.retime.StepClock` where its ``tau`` is computed by
        quadrature, from the ``tau`` where the segment before it ends; then, where the path
        holds more dense output than it keeps, take the output from it and release it
        (:func:`flows.integrator.assemble.flush`)."""
        if applies(self.problem):
            if segment.end > segment.start and retimed(self.problem, segment.mode):
                start = segment.tau(segment.ts[:1]) if self.tau_end is None else [self.tau_end]
                segment.clock = retime(self.problem, segment, float(start[0]))
            self.tau_end = float(segment.tau(segment.ts[-1:])[0])
        if self.path.full:
            flush(self)

    def retime(self) -> None:
        """After segments were recorded whose ``tau`` is computed by quadrature
        (:meth:`recorded`), the state's ``tau`` is where the last one ends."""
        if not applies(self.problem) or self.clocked == self.path.count:
            return
        self.clocked = self.path.count
        if self.s == self.path.end:
            assert self.tau_end is not None
            self.y[-1] = self.tau_end

    def used(self, loop: str) -> None:
        """Record that the segment loop ``loop`` integrated part of the path."""
        if loop not in self.loops:
            self.loops.append(loop)

    def stop(self, cause: Cause, message: str) -> None:
        """End the run here."""
        self.cause, self.message, self.s_end = cause, message, self.s
