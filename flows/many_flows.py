"""The runs of :func:`flows.simulate_many` that are integrated and assembled together.

A run goes through the batch where its single :func:`flows.simulate` call would be one
segment of the compiled segment loop from the start to ``t_max``: a positive number as
``alpha``, numbers as hyper-parameters, ``method='DOP853'``, the numba backend, and a
segment that no event, check or hand-back ends early. Per group of runs that share the
problem but for ``alpha`` and the hyper-parameters' values (one group per run for a
sign-discontinuous algorithm, whose frozen patterns depend on the run), the driver's own
:func:`~flows.integrator.driver._setup` builds one run's state; every run of the group takes
its problem tuple, tolerances, budget, chart and mode, with its own initial state,
hyper-parameters and watched thresholds (:func:`flows.compiled.segment._watch` at its radius).
A run where one of the driver's watched events holds already is the single call's (the
driver's own check, :meth:`_Group.holding_at_start`). Every other run is one call of the single
call's compiled segment kernel, :func:`flows.compiled._segment_kernels.segment`, with the
arguments the single call gives it (the same steps and numbers; the batch compiles no kernel
of its own), and the output is assembled for all of them at once: the states on the grid from
the same dense output in the same chart (:func:`flows.compiled.segment.chart_values`),
``log_t_original`` by the single call's quadrature with the pieces of every run refined
together (:func:`flows.clocks.log_original_times`: the same pieces, samples, rule and sums per
run, so the same numbers; ``K`` by :func:`~flows.compiled._segment_kernels.exponents` on each run's
steps), ``beta`` by the single call's formulas over the batch, the loss on its first read as
the single call's (:class:`flows.integrator.assemble.Losses`). A run that the batch does not
take, or that it cannot finish as the single call would (a handed-back segment, an event, a
budget or a cap of the quadrature met, a NaN), is left to the single call; where the batch made
its first kernel call, :func:`batched_flows` returns that call with the trajectories, and the
single call takes it as its first segment's (:func:`go_on`: the same call, not made twice; kept
while their dense output stays within :data:`MADE_BYTES`). The runs go in chunks of at most :data:`STATE_ENTRIES` state entries (their
dense output is held until assembled), and with ``threads > 1`` in that many chunks at once:
the kernels of one release the GIL while another runs its Python.
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
from concurrent.futures import Executor
from typing import Any, NamedTuple

import numpy as np

from . import clocks
from .algorithms import effective_algorithm, get_algorithm
from .charts import LogChart
from .compiled.segment import Call, call_kernel, chart_values
from .data import Dataset
from .integrator import driver
from .integrator.arguments import SMALL_INIT, largest_radius, warn_if_signs_cannot_separate
from .integrator.assemble import Losses, layers
from .integrator.conservation import conservation_cut
from .integrator.events import SegmentEvent
from .integrator.retime import applies as retime_applies
from .integrator.retime import retime
from .integrator.segments import Segment
from .integrator.state import Run
from .integrator.threshold_events import LossFloor, Smallness, log_size
from .integrator.watched import segment_events
from .results import Cause, Trajectory
from .schedules import constant_values
from .signedlog import SignedLog

#: Runs integrated together hold their dense output until the batch is assembled: at most this
#: many state entries' worth of runs at a time, ``depth * d + 1`` a run (a run of ``n``
#: entries keeps ``64 n`` bytes a step: 16 runs of d = 1000 at depth 1, 100 steps each,
#: 100 MB).
STATE_ENTRIES = 2**14

#: The kernel calls the batch made for runs it leaves to the single call are kept for it up to
#: this many bytes of dense output in all (each chunk of runs its share); past that, the single
#: call makes its own.
MADE_BYTES = 2**26


class Batched(NamedTuple):
    """What :func:`batched_flows` did: the trajectories of the runs it finished, and the first
    kernel calls it made for runs it leaves to the single call (:func:`go_on`), by index."""

    done: dict[int, Trajectory]
    made: dict[int, Call]


def batched_flows(
    data: Dataset,
    algorithm: str,
    depth: int,
    runs: list[Any],
    options: dict[str, Any],
    reduced: bool | None,
    pool: Executor | None = None,
    parts: int = 1,
) -> Batched:
    """The trajectories of the runs the batch finishes, and its kernel calls for the runs it
    started and leaves to the single call, by index (see the module docstring).

    ``runs`` have ``alpha``, ``given`` (the hyper-parameters as given), ``hyperparameters``
    (resolved; runs of equal values may share one dict) and ``init`` (the initialization); ``options`` are the keyword options of :func:`flows.simulate` given to the batch.
    With a ``pool`` of threads, the runs go in ``parts`` chunks at once (the compiled kernels of
    one overlap the Python of another; each run's numbers the same).
    """
    settings = _settings(options, reduced)
    if settings["method"] != "DOP853" or settings["chart"] == "conserved":
        return Batched({}, {})
    groups: dict[tuple, list[int]] = {}
    kinds: dict[int, tuple[str, bool] | None] = {}  # by the id of a run's resolved dict
    for i, run in enumerate(runs):
        if not _positive_number(run.alpha):
            continue
        key = id(run.hyperparameters)  # runs of equal hyper-parameters share one dict
        if key not in kinds:
            kinds[key] = _kind(algorithm, run.hyperparameters)
        kind = kinds[key]
        if kind is None:
            continue
        name, own = kind
        delta = (
            _chart_scale(run.alpha) if settings["chart_scale"] is None else settings["chart_scale"]
        )
        groups.setdefault((name, delta, i if own else None), []).append(i)
    size = max(1, STATE_ENTRIES // (depth * data.d + 1))
    parts = parts if pool is not None else 1
    chunks = []
    for members in groups.values():
        size_here = min(size, -(-len(members) // parts))
        chunks += [
            members[start : start + size_here] for start in range(0, len(members), size_here)
        ]

    share = MADE_BYTES // max(1, len(chunks))

    def integrate(chunk: list[int]) -> Batched:
        group = _Group(data, algorithm, depth, [runs[i] for i in chunk], settings)
        return group.run(chunk, share)

    out = Batched({}, {})
    for part in map(integrate, chunks) if pool is None else pool.map(integrate, chunks):
        out.done.update(part.done)
        out.made.update(part.made)
    return out


def go_on(
    data: Dataset,
    algorithm: str,
    depth: int,
    run: Any,
    options: dict[str, Any],
    reduced: bool | None,
    made: Call,
) -> Trajectory:
    """The single call of ``run`` (:func:`flows.simulate` with ``options``, ``reduced`` and the
    run's hyper-parameters), taking the kernel call ``made`` (:func:`batched_flows`) as its
    first segment's; its warnings were given by the batch."""
    settings = _settings(options, reduced)
    return driver.simulate_options(
        data, algorithm, depth, run.alpha, run.given, settings, made, warn=False
    )


def _settings(options: dict[str, Any], reduced: bool | None) -> dict[str, Any]:
    """Every keyword option of the single call: :func:`flows.simulate`'s defaults, ``options``
    and ``reduced``."""
    return dict(driver.simulate.__kwdefaults__ or {}, **options, reduced=reduced)


def _positive_number(alpha: Any) -> bool:
    """Whether ``alpha`` is one positive finite real number."""
    return (
        isinstance(alpha, numbers.Real)
        and not isinstance(alpha, (bool, np.bool_))
        and 0.0 < float(alpha) < np.inf
    )


def _kind(algorithm: str, hp: dict) -> tuple[str, bool] | None:
    """The algorithm a run of hyper-parameters ``hp`` runs as, and whether its runs need a group
    each (a sign-discontinuous algorithm: frozen patterns of the run's own); None where the
    batch does not take it (a hyper-parameter that follows a schedule)."""
    name = effective_algorithm(algorithm, hp)
    runs_as = get_algorithm(name)
    if constant_values(hp, runs_as.names) is None:
        return None
    return name, runs_as.sign_discontinuous


def _chart_scale(alpha: Any) -> float:
    """:func:`flows.integrator.arguments.default_chart_scale` of an init of every entry
    ``alpha`` (positive): ``alpha`` below :data:`~flows.integrator.arguments.SMALL_INIT`, else
    1."""
    return float(alpha) if float(alpha) < SMALL_INIT else 1.0


def _held_bytes(call: Call) -> int:
    """The bytes of dense output ``call`` holds (the buffers its stack views)."""
    return sum((a if a.base is None else a.base).nbytes for a in call.stack)


class _Group:
    """Runs that share their problem but for ``alpha`` and the hyper-parameters' values."""

    def __init__(self, data: Dataset, algorithm: str, depth: int, runs: list[Any], settings):
        self.data, self.algorithm, self.depth, self.runs = data, algorithm, depth, runs
        self.settings = settings
        first = runs[0]
        self.model: Run = driver._setup(
            data, algorithm, depth, first.alpha, first.given, settings, warn=False
        )
        self.problem = self.model.problem
        self.mode = self.model.mode
        self.field = self.model.field_for(self.mode)
        self.watched: dict[float, tuple] = {}
        self.radii: dict[int, float] = {}

    def compiled(self) -> bool:
        """Whether the single call's compiled segment loop takes the group's first segment,
        and (rescaled, with ``original_time``) its compiled exponent the quadrature's samples."""
        model, mode = self.model, self.mode
        loop = model.backend.segment_loop
        if loop is None or model.kinks.size or mode.frozen:
            return False
        if not loop.applies(self.field, mode, "DOP853"):
            return False
        if not self.problem.clock.original and self.settings["original_time"]:
            from .compiled.segment import EXPONENT_SIZE

            too_large = self.field.features_c.size >= EXPONENT_SIZE
            return model.backend.interval_rule is not None and not too_large
        return True

    def run(self, indices: list[int], share: int) -> Batched:
        """The trajectories of the runs that one kernel call takes to ``t_max``, assembled
        together, and the first kernel calls of the others, up to ``share`` bytes of their
        dense output, by index (none where the single call's compiled loop does not take the
        group's first segment)."""
        if not self.compiled():
            return Batched({}, {})
        from .compiled import _segment_kernels as kernels
        from .compiled import segment as loop

        problem, runs = self.problem, self.runs
        algo = problem.algorithm
        for run in runs:
            warn_if_signs_cannot_separate(self.data, run.alpha, self.depth, self.algorithm)
        groups = np.array([r.init.groups for r in runs])
        z0 = self.mode.chart.coordinates(SignedLog.from_float(groups))
        y0 = np.concatenate([z0.reshape(len(runs), -1), np.zeros((len(runs), 1))], axis=1)
        values: dict[int, np.ndarray | None] = {}
        for r in runs:
            if id(r.hyperparameters) not in values:
                values[id(r.hyperparameters)] = constant_values(r.hyperparameters, algo.names)
        hp = np.array([values[id(r.hyperparameters)] for r in runs])
        hp = hp.reshape(len(runs), len(algo.names))
        watches = [self.watch(r, y) for r, y in zip(runs, y0, strict=True)]
        starting = self.holding_at_start(y0)
        problem_tuple = loop._problem_tuple(self.field, self.mode)
        problems = [problem_tuple[:11] + (hp[r],) + problem_tuple[12:] for r in range(len(runs))]
        calls = {
            int(r): self.segment(y0[r], problems[r], watches[r]) for r in np.flatnonzero(~starting)
        }
        finished = {r: c for r, c in calls.items() if c.status == kernels.REACHED_END}
        done = self.assembled(finished, problems, indices) if finished else {}
        made = {}
        for r, call in calls.items():
            size = _held_bytes(call)
            if indices[r] not in done and size <= share:
                made[indices[r]] = call
                share -= size
        return Batched(done, made)

    def assembled(
        self, finished: dict[int, Call], problems: list[tuple], indices: list[int]
    ) -> dict[int, Trajectory]:
        """The trajectories of the runs that one kernel call each (``finished[r]``) took to
        ``t_max``, assembled together, by index; a run it cannot finish as the single call
        would is left out."""
        model, problem, runs = self.model, self.problem, self.runs
        algo = problem.algorithm
        done = np.array(list(finished))
        stacks = list(finished.values())
        grid = self.grid()
        chart, held = self.mode.chart, self.mode.held
        samples = [chart_values(chart, grid, steps.stack, held) for steps in stacks]
        shape = (done.size, grid.size) + problem.shape
        sign = np.stack([sample[0] for sample in samples]).reshape(shape)
        log_abs = np.stack([sample[1] for sample in samples]).reshape(shape)
        tau = [sample[2] for sample in samples]
        log_t, notes = self.log_t(grid, stacks, [problems[r] for r in done])
        if retime_applies(problem):
            tau = self.retimed(done, stacks, grid)
        beta = self.field.product_of_layers(sign, log_abs)
        mult = problem.multiplicity
        rows = (done.size * grid.size,) + problem.shape
        layered = (done.size, grid.size, int(mult.sum()), problem.shape[1])
        sign_layers = layers(sign.reshape(rows), mult).reshape(layered)  # views, as layers'
        log_layers = layers(log_abs.reshape(rows), mult).reshape(layered)
        out = {}
        for k, r in enumerate(done):
            if notes[k] is None:
                continue
            if not algo.perturbs and len(mult) > 1:
                if conservation_cut(SignedLog(sign[k], log_abs[k]), model.rtol) is not None:
                    continue
            out[indices[r]] = self.trajectory(
                runs[r], grid, tau[k], log_t[k], SignedLog(sign_layers[k], log_layers[k]),
                SignedLog(beta.sign[k], beta.log_abs[k]), stacks[k].nfev, notes[k],
            )  # fmt: skip
        return out

    def segment(self, y0: np.ndarray, problem: tuple, watch: tuple) -> Call:
        """The single call's first compiled kernel call from ``(0, y0)``
        (:func:`flows.compiled.segment.advance`'s, with the same arguments)."""
        rtol, atol, budget, capacity = self.limits
        return call_kernel(
            y0, 0.0, self.model.s_end, rtol, atol, budget, problem, watch, capacity, 0.0
        )

    @functools.cached_property
    def limits(self) -> tuple[float, np.ndarray, int, int]:
        """The tolerances, field-evaluation budget and step capacity of the single call's
        first compiled segment (the group's runs share them)."""
        from .compiled import segment as loop

        rtol, atol = self.model.tolerances(self.mode)
        budget = min(driver._allowance(self.model, "DOP853"), 2**62)
        return rtol, atol, budget, loop.call_capacity(self.model.y.size)

    def holding_at_start(self, y0: np.ndarray) -> np.ndarray:
        """Per run (state ``y0[r]``), whether an event the single call's driver watches holds
        where the run starts (:func:`flows.integrator.driver._integrate_segment`: its watched
        events' ``already``; such a run is the single call's). The events are the driver's own
        (:func:`flows.integrator.watched.segment_events` at the run's radius, the loss floor);
        the smallness events (collapse, near zero: ``log max|w| - log(radius * fraction) < 0``)
        are checked for all runs at once against the larger of a run's thresholds (the same
        answer: a difference of floats is below 0 exactly where the first is below the second),
        any other that can hold (stationary point, loss floor, a direction at 0) run by run.
        The events are made once per radius, on the group's field (their values read ``theta``,
        the gradient and the loss there, not the hyper-parameters) at the first run's state
        (only the crossing of a sign-discontinuous algorithm reads it, and such a run is a group
        of its own)."""
        model = self.model
        held = np.zeros(len(self.runs), dtype=bool)
        by_radius: dict[float, list[int]] = {}
        for r, run in enumerate(self.runs):
            by_radius.setdefault(self.radii[id(run.hyperparameters)], []).append(r)
        threshold = np.full(len(self.runs), -np.inf)  # -inf: no smallness event watched
        for radius, members in by_radius.items():
            events = segment_events(self.field, self.mode, int(self.problem.multiplicity.sum()),
                                    radius, near_zero=model.near_zero_switch, y=y0[members[0]],
                                    combination=model.backend.sliding)  # fmt: skip
            if model.loss_floor is not None:
                events.append(LossFloor(self.field, floor=model.loss_floor))
            sizes = [log_size(radius, e.fraction) for e in events if isinstance(e, Smallness)]
            threshold[members] = max(sizes, default=-np.inf)
            for event in events:
                if (
                    not isinstance(event, Smallness)
                    and type(event).already is not SegmentEvent.already
                ):
                    for r in members:
                        held[r] = held[r] or event.already(y0[r])
        if np.any(threshold > -np.inf):
            held |= self.log_largest(y0) - threshold < 0
        return held

    def log_largest(self, y0: np.ndarray) -> np.ndarray:
        """``log max|w|`` of each run's state ``y0[r]``, as
        :meth:`flows.integrator.threshold_events.Smallness.log_largest`: the largest coordinate
        in the log chart, else from the parameters."""
        chart = self.problem.chart
        if isinstance(chart, LogChart):
            return y0[:, :-1].max(axis=1)
        theta = chart.state(y0[:, :-1].reshape((len(y0),) + self.problem.shape))
        return theta.log_abs.reshape(len(y0), -1).max(axis=1)

    def watch(self, run: Any, y: np.ndarray) -> tuple:
        """What the compiled loop watches in ``run`` from ``y`` (:func:`flows.compiled.segment._watch`
        at the run's radius; one per radius where no frozen pattern makes it depend on ``y``)."""
        from .compiled import segment

        model = self.model
        key = id(run.hyperparameters)
        if key not in self.radii:
            self.radii[key] = largest_radius(self.problem.algorithm, run.hyperparameters,
                                             model.s_end)  # fmt: skip
        radius = self.radii[key]
        if self.mode.sign_pattern is None and radius in self.watched:
            return self.watched[radius]
        watch = segment._watch(self.field, self.mode, radius, model.near_zero_switch, y,
                               model.loss_floor)  # fmt: skip
        self.watched[radius] = watch
        return watch

    def grid(self) -> np.ndarray:
        """The output grid of a run that reached ``t_max`` (:func:`flows.integrator.assemble.assemble`)."""
        t_max = float(self.settings["t_max"])
        return np.linspace(0.0, t_max, int(self.settings["n_points"]))

    def log_t(
        self, grid: np.ndarray, stacks: list[Call], problems: list[tuple]
    ) -> tuple[np.ndarray, list]:
        """``log_t_original`` on ``grid`` of the runs of steps ``stacks`` (problem tuples
        ``problems``), as :func:`assemble`, and per run the note its message takes ('' or the
        quadrature's cap; None: a NaN exponent, the run is the single call's)."""
        count = len(stacks)
        if self.problem.clock.original:
            with np.errstate(divide="ignore"):
                return np.repeat(np.log(grid)[None], count, axis=0), [""] * count
        if not self.settings["original_time"]:
            return np.full((count, grid.size), np.nan), [""] * count
        nan = np.zeros(count, dtype=bool)

        def K(s: np.ndarray, ref: np.ndarray, which: np.ndarray) -> np.ndarray:
            values = exponents(s, which, stacks, problems)  # one stretch a run: ref unused
            nan[np.unique(which[np.isnan(values)])] = True
            return values

        make_rule = self.model.backend.interval_rule
        assert make_rule is not None  # checked by compiled()
        log_t, samples, capped = clocks.log_original_times(
            grid, [[st.bounds] for st in stacks], K, rule=make_rule()
        )
        notes: list[str | None] = []
        for k in range(count):
            if nan[k]:
                notes.append(None)
            elif capped[k]:
                notes.append(
                    f"; log_t_original is approximate: its quadrature stopped refining at "
                    f"{samples[k]} samples of the clock factor (flows.clocks.MAX_SAMPLES), short "
                    "of its 1e-9 tolerance"
                )
            else:
                notes.append("")
        return log_t, notes

    def retimed(self, done: np.ndarray, stacks: list[Call], grid: np.ndarray) -> list:
        """``tau`` on ``grid`` of the runs ``done`` (steps ``stacks``) whose ``tau`` the single
        call computes by quadrature along the steps (:func:`flows.integrator.retime.retime`)."""
        from .compiled import _segment_kernels as kernels

        out = []
        for r, steps in zip(done, stacks, strict=True):
            seg = Segment(
                self.mode.copy(), steps.bounds, [], steps.stack, dense=kernels.dense_values
            )
            problem = dataclasses.replace(
                self.problem, hyperparameters=self.runs[r].hyperparameters
            )
            start = float(seg.tau(seg.ts[:1])[0])
            seg.clock = retime(problem, seg, start)
            out.append(np.ascontiguousarray(seg.clock.at(grid)))
        return out

    def trajectory(self, run, grid, tau, log_t, theta, beta, nfev, note) -> Trajectory:
        """The single call's :class:`Trajectory` of a run that reached ``t_max`` in one compiled
        segment (:func:`flows.integrator.assemble.assemble`; ``theta`` its layers)."""
        problem = self.problem
        mult = problem.multiplicity
        return Trajectory(
            t=grid.copy(),
            tau=tau,
            log_t_original=log_t,
            log_abs_theta=theta.log_abs,
            sign_theta=theta.sign,
            log_abs_beta=beta.log_abs,
            sign_beta=beta.sign,
            loss=Losses(self.field, problem.loss, beta),  # computed on first read, as assemble's
            status=Cause.REACHED_END.status,
            message="reached t_max" + note,
            cause=Cause.REACHED_END,
            backend=self.model.backend.name,
            segment_loops=("compiled DOP853",),
            algorithm=self.algorithm,
            depth=int(mult.sum()),
            clock="original" if problem.clock.original else "rescaled",
            hyperparameters=dict(run.hyperparameters),
            events=(),
            nfev=nfev,
            reduced=len(mult) == 1 and int(mult[0]) > 1,
            sliding_time=0.0,
            sliding_surfaces=0,
        )


def exponents(
    s: np.ndarray, which: np.ndarray, stacks: list[Call], problems: list[tuple]
) -> np.ndarray:
    """``K = -log c`` of run ``which[q]`` at time ``s[q]`` (NaN where the float path does not
    hold): the single call's :func:`flows.compiled._segment_kernels.exponents` on each run's
    own dense output and problem tuple, one call per run for all its times (a point's value
    does not depend on the others)."""
    from .compiled import _segment_kernels as kernels

    out = np.empty(s.size)
    order = np.argsort(which, kind="stable")
    bounds = np.searchsorted(which[order], np.arange(len(stacks) + 1))
    for k, (steps, problem) in enumerate(zip(stacks, problems, strict=True)):
        rows = order[bounds[k] : bounds[k + 1]]
        if rows.size:
            out[rows] = kernels.exponents(s[rows], *steps.stack, problem)
    return out
