"""The compiled segment loop (extra ``fast``): DOP853 steps in numba, no Python per step.

Where it applies (:func:`applies`: the compiled backend, ``method='DOP853'``, an algorithm with
a compiled perturbation (a per-example one too, unless its perturbation switches at a zero
residual, :attr:`flows.field.Problem.residual_switches`: the loop does not watch that event),
numbers or cosine and warm-up cosine schedules as hyper-parameters
(:func:`flows.compiled.field.compiled_hyperparameters`), no held or sliding entries, and no
parameter at 0 whose frozen sign is not decided yet (l_inf-SAM from an init with zeros: the
Python loop meets its crossing at the first step); any depth; after the
near-zero switch too, its watched entries' crossing of 0 being the collapse, :func:`_watch`),
:func:`advance` integrates the current segment with :func:`flows.compiled._segment_kernels.segment`
(scipy's DOP853 to rounding, on the compiled float field) and records the steps as a
:class:`~flows.integrator.segments.Segment` whose dense output is scipy's. It hands back to the Python
loop of :mod:`flows.integrator.solver` where that loop is needed: outside the float range, one step
before a threshold event (collapse, near zero, stationary, blow-up, loss floor: the Python
loop locates it), or on a failing step. The tests hold both loops to 1e-9 in log|beta|.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..charts import AsinhChart, LogChart
from ..integrator import events as ev
from ..integrator.segments import Mode, Segment, parameters_at
from ..integrator.surface_events import DirectionCrossing
from ..integrator.watched import segment_events
from .discrete import PER_EXAMPLE_IDS
from .field import CompiledField

#: Steps stored per compiled call (a longer segment takes several calls), at most; fewer
#: where their dense output would pass :data:`STACK_BYTES` (at least 16).
CAPACITY = 2048

#: Bytes of dense output one compiled call allocates for its steps (7 coefficients per state
#: entry and step): 2048 steps of a d = 1e6 state would ask for 115 GB. One call's buffer is
#: alive at a time (the path hands full chunks to the output as it records them), so a long
#: run's peak memory stays near this above the data and the output samples.
STACK_BYTES = 2**25

#: From this many entries of the features on, :func:`exponent` declines: numpy's batched
#: ``log c`` (matrix-matrix products over the quadrature's nodes) is then faster than one
#: compiled evaluation per node (n 100, d 100: 1.7 against 2.4 ms a call; n 1000, d 500: 8.6
#: against 38 ms).
EXPONENT_SIZE = 4096


class Advance(NamedTuple):
    """What :func:`advance` did: ``finished`` (reached ``s_end``), ``budget_spent``, the field
    evaluations it used, and the step the Python loop should try first (None: its own choice;
    after an event ahead, the step that met it, so the Python loop retakes the same step)."""

    finished: bool
    budget_spent: bool
    nfev: int
    first_step: float | None


def applies(field, mode: Mode, method: str) -> bool:
    """Whether the compiled loop can integrate this segment (see the module docstring)."""
    if not isinstance(field, CompiledField) or method != "DOP853" or field.hp_table is None:
        return False
    algorithm = field.problem.algorithm
    return (
        algorithm.compiled_id is not None
        and not field.problem.residual_switches
        and (not algorithm.per_example or algorithm.compiled_id in PER_EXAMPLE_IDS)
        and not mode.collapsed
        and not mode.stationary
        and not mode.sliding_directions
        and not mode.held.any()  # with the two above: neither frozen nor sliding
        and (mode.sign_pattern is None or bool(mode.sign_pattern.all()))
    )


def loop_arguments(
    field: CompiledField,
    mode: Mode,
    radius: float,
    near_zero: bool,
    y: np.ndarray,
    loss_floor: float | None = None,
) -> tuple[tuple, tuple]:
    """What the kernel is given of the problem and of the events, for a segment from ``y``
    in ``mode``: :func:`_problem_tuple` and :func:`_watch` (the arguments of
    :func:`advance`)."""
    return _problem_tuple(field, mode), _watch(field, mode, radius, near_zero, y, loss_floor)


def _problem_tuple(field: CompiledField, mode: Mode) -> tuple:
    """:meth:`CompiledField.problem_tuple` in ``mode`` (its held entries and frozen pattern)."""
    signs = None if mode.pattern is None else field.pattern_signs(mode.pattern)
    return field.problem_tuple(mode.held, signs)


def _watch(
    field: CompiledField,
    mode: Mode,
    radius: float,
    near_zero: bool,
    y: np.ndarray,
    loss_floor: float | None = None,
):
    """What the compiled loop watches, as :func:`flows.integrator.events.segment_events` (and
    :class:`flows.integrator.events.LossFloor`) do: thresholds of collapse, near zero, stationary, blow-up
    and loss floor (finite where watched), the parameter signs whose loss is an event (the
    frozen signs of l_inf-SAM's zero crossings; after the near-zero switch, the signs of the
    entries :class:`flows.integrator.threshold_events.CollapseCrossing` watches, one reaching 0
    being the collapse) and the frozen signs and offsets of the ``G_j``
    (:class:`flows.integrator.surface_events.DirectionCrossing`)."""
    thresholds = np.full(5, -np.inf)
    if radius > 0 and field.depth >= 2:
        thresholds[0] = np.log(radius * ev.COLLAPSE_FRACTION)
        if near_zero and isinstance(mode.chart, LogChart):
            thresholds[1] = np.log(radius * ev.NEAR_ZERO)
    data = field.problem.data
    if data.n > 1:
        thresholds[2] = np.log(ev.STATIONARY_TOL)
    if field.depth >= 3:
        thresholds[3] = np.log(ev.BLOWUP_RATE)
    if loss_floor is not None:
        thresholds[4] = np.log(loss_floor)
    parameter_signs = np.zeros(y.size - 1)
    direction_signs = np.zeros(data.d)
    offsets = np.zeros(data.d)
    if mode.sign_pattern is not None:
        parameter_signs = mode.sign_pattern.ravel().astype(float)
    if mode.near_zero is not None:  # CollapseCrossing: z[i] (asinh chart) reaches 0
        parameter_signs[mode.near_zero] = np.sign(y[mode.near_zero])
    if mode.sign_pattern is not None and data.n > 1:  # segment_events: none on one example
        crossing = next(
            (
                e
                for e in segment_events(field, mode, 2, 0.0, y=y)
                if isinstance(e, DirectionCrossing)
            ),
            None,
        )
        if crossing is not None:
            direction_signs[crossing.watched] = crossing.pattern[crossing.watched]
            offsets[crossing.watched] = crossing.offset
    return thresholds, parameter_signs, direction_signs, offsets


def exponent(field, segment: Segment, s: np.ndarray) -> np.ndarray | None:
    """``K = -log c(theta')`` along ``segment`` at times ``s``, compiled
    (:func:`flows.compiled._segment_kernels.exponents`: NaN where the float path does not hold), or None
    where the compiled path does not apply (:func:`applies`; no DOP853 dense output) or the
    data have :data:`EXPONENT_SIZE` entries or more."""
    if not isinstance(field, CompiledField) or field.features_c.size >= EXPONENT_SIZE:
        return None
    stack = segment.dop853_stack()
    if stack is None or not applies(field, segment.mode, "DOP853"):
        return None
    from . import _segment_kernels as loop

    s = np.ascontiguousarray(s, dtype=float)
    t_old, h, F, y_old = stack
    problem = _problem_tuple(field, segment.mode)
    return loop.exponents(s, t_old, h, F, y_old, problem)


def call_capacity(size: int) -> int:
    """Steps one compiled call stores for a state of ``size`` entries: :data:`CAPACITY`, fewer
    where their dense output would pass :data:`STACK_BYTES` (at least 16)."""
    from . import _segment_kernels as loop

    return max(16, min(CAPACITY, STACK_BYTES // (8 * loop.POWER * size)))


#: The dense output of steps: ``(t_old, h, F, y_old)`` (``Dop853DenseOutput``'s layout).
Stack = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def kept_steps(
    ts: np.ndarray, F: np.ndarray, y_old: np.ndarray, steps: int, capacity: int
) -> tuple[np.ndarray, Stack]:
    """The step boundaries ``ts[:steps + 1]`` and the dense-output stack ``(t_old, h, F,
    y_old)`` of a compiled call's first ``steps`` steps (its buffers of ``capacity`` steps:
    views where the steps fill at least half of them, else copies)."""
    t_old = ts[:steps].copy()
    F, y_old = F[:steps], y_old[:steps]
    if 2 * steps < capacity:  # a copy, not a mostly empty buffer of up to STACK_BYTES
        F, y_old = F.copy(), y_old.copy()
    return ts[: steps + 1].copy(), (t_old, ts[1 : steps + 1] - t_old, F, y_old)


#: Values (times x entries) up to which :func:`chart_values` samples the asinh chart compiled:
#: there a call's fixed cost, numpy's ~25 µs, dominates; beyond, numpy's vectorised ``log``
#: and ``exp`` are the faster (4e6 values: 62 ms against 69 ms compiled).
COMPILED_ASINH_VALUES = 2**16
#: The signs :func:`chart_values` passes in the asinh chart (read there from ``z``).
_NO_SIGNS = np.zeros(0)


def chart_values(
    chart: LogChart | AsinhChart, s: np.ndarray, stack: Stack, held: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The parameters ``(sign, log|w|)`` ``(len(s), entries)`` in ``chart`` (the ``held``
    entries at 0) and ``tau`` at times ``s`` of the dense-output ``stack``: what
    :meth:`flows.integrator.segments.Segment.sample` computes for a compiled segment, in one
    compiled call (:func:`flows.compiled._segment_kernels.chart_values`; in the asinh chart up
    to :data:`COMPILED_ASINH_VALUES` values, else the dense output compiled and the chart in
    numpy)."""
    from . import _segment_kernels as loop

    s = np.ascontiguousarray(s, dtype=float)
    if isinstance(chart, LogChart):
        return loop.chart_values(s, *stack, True, chart.sign.ravel(), 0.0, held.ravel())
    if s.size * held.size <= COMPILED_ASINH_VALUES:
        log_delta = float(np.log(chart.delta))
        return loop.chart_values(s, *stack, False, _NO_SIGNS, log_delta, held.ravel())
    states = loop.dense_values(s, *stack)
    theta = parameters_at(chart, states[:, :-1], held.ravel())
    return theta.sign, theta.log_abs, np.ascontiguousarray(states[:, -1])


class Call(NamedTuple):
    """One call of the segment kernel: its ``arguments`` (``y, s, s_end, rtol, atol, budget,
    problem, watch, capacity, h_next``), its ``status``, the ``steps`` it took with their
    boundaries and dense-output stack (:func:`kept_steps`), the state where it stopped, its
    field evaluations, and the step it would take next."""

    arguments: tuple
    status: int
    steps: int
    bounds: np.ndarray
    stack: Stack
    y_end: np.ndarray
    nfev: int
    h_next: float

    def made_with(self, arguments: tuple) -> bool:
        """Whether this call was made with ``arguments`` (the same values, array by array)."""
        return _same(self.arguments, arguments)


def call_kernel(*arguments) -> Call:
    """:func:`flows.compiled._segment_kernels.segment` with ``arguments`` (``y, s, s_end, rtol,
    atol, budget, problem, watch, capacity, h_next``), its steps kept (:func:`kept_steps`)."""
    from . import _segment_kernels as loop

    status, steps, ts, F, y_old, y_end, used, h_next = loop.segment(*arguments)
    bounds, stack = kept_steps(ts, F, y_old, steps, arguments[8])
    return Call(arguments, int(status), int(steps), bounds, stack, y_end, int(used), float(h_next))


def _same(a, b) -> bool:
    """Whether ``a`` and ``b`` hold the same bits: tuples entry by entry, arrays by dtype,
    shape and bytes, numbers by type and bytes (so NaN equals NaN and -0.0 differs from 0.0)."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        return (
            isinstance(a, tuple)
            and isinstance(b, tuple)
            and len(a) == len(b)
            and all(_same(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and (a is b or _same_bytes(a, b))
    return type(a) is type(b) and np.asarray(a).tobytes() == np.asarray(b).tobytes()


def _same_bytes(a: np.ndarray, b: np.ndarray, block: int = 2**20) -> bool:
    """Whether two arrays of one dtype and shape hold the same bytes (compared ``block`` bytes at
    a time: no copy of a large array)."""
    if a.nbytes <= block:
        return a.tobytes() == b.tobytes()
    x = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    y = np.ascontiguousarray(b).reshape(-1).view(np.uint8)
    return all(np.array_equal(x[i : i + block], y[i : i + block]) for i in range(0, x.size, block))


def advance(
    field: CompiledField,
    mode: Mode,
    y: np.ndarray,
    s: float,
    s_end: float,
    tolerances: tuple[float, np.ndarray],
    budget: int,
    radius: float,
    near_zero: bool,
    segments: list[Segment],
    loss_floor: float | None = None,
    made: Call | None = None,
    problem_and_watch: tuple[tuple, tuple] | None = None,
) -> tuple[Advance, float, np.ndarray]:
    """Integrate from ``(s, y)`` towards ``s_end`` in compiled steps; append the steps to
    ``segments``; return what happened and the new ``(s, y)``. ``loss_floor``: the run's
    (watched as an event; None: none). ``made``: a kernel call made ahead (by
    :func:`flows.simulate_many`), taken as this segment's first where it was made with the
    arguments this one has (:meth:`Call.made_with`; else ignored). ``problem_and_watch``:
    :func:`loop_arguments` of this segment, made ahead (None: made here)."""
    from . import _segment_kernels as loop

    if mode.near_zero is not None and not np.all(y[mode.near_zero]):
        return Advance(False, False, 0, None), s, y  # a watched entry at 0: the Python loop's
    rtol, atol = tolerances
    if problem_and_watch is None:
        problem_and_watch = loop_arguments(field, mode, radius, near_zero, y, loss_floor)
    problem, watch = problem_and_watch
    nfev = 0
    budget = min(budget, 2**62)
    capacity = call_capacity(y.size)
    h_next = 0.0
    while True:
        arguments = (y, s, s_end, rtol, atol, budget - nfev, problem, watch, capacity, h_next)
        if made is not None and made.made_with(arguments):
            call = made
        else:
            call = call_kernel(*arguments)
        made = None
        nfev += call.nfev
        if call.steps > 0:
            segments.append(
                Segment(
                    mode.copy(),
                    call.bounds,
                    [],
                    call.stack,
                    dense=loop.dense_values,
                    chart_values=chart_values,
                )
            )
            s, y = float(call.bounds[-1]), call.y_end.copy()
        h_next = call.h_next
        if call.status == loop.BUDGET_SPENT and call.steps == capacity and nfev <= budget:
            del call  # this call's buffer goes before the next call allocates its own
            continue
        finished = call.status == loop.REACHED_END
        first_step = h_next if h_next > 0 else None
        return Advance(finished, call.status == loop.BUDGET_SPENT, nfev, first_step), s, y
