"""The :class:`~flows.results.Trajectory` of a run (:mod:`flows.integrator.driver`), taken from
the path as it is recorded: the segments the path holds are sampled on the output grid, the
original time is integrated over them by a batched quadrature (:mod:`flows.clocks`) and they are
released (:func:`flush`) whenever they hold more dense output than the path keeps
(:data:`flows.integrator.segments.HELD_BYTES`), and at the end of the run (:func:`assemble`), so
that a run keeps ``O(n d + samples L d)`` floats whatever its number of steps.

Each output time is sampled from the segment that covers it (the earlier one at a shared
boundary), with the other times of that segment, as one sampling of the whole path would; the
quadrature's pieces, their first samples and their sum in log space are the same in batches as
over the whole path (what a batch changes is where :data:`flows.clocks.MAX_SAMPLES` and
:data:`flows.clocks.MAX_PIECES` apply: per batch).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..clocks import QuadratureReport, log_original_time
from ..fused import FusedField
from ..model import Loss
from ..results import Cause, Trajectory
from ..signedlog import SignedLog
from .conservation import conservation_cut
from .segments import Segment

if TYPE_CHECKING:
    from .state import Run


@dataclass
class Part:
    """The output of one :func:`flush`: its ``times`` (the grid times its segments cover, then
    their end where that is no grid time), the parameters and ``tau`` there, how many of the
    times are grid times (``rows``), where the path flushed before it ends (``after``, None for
    the first) and ``log t`` there (``log_t_after``), and ``log t`` at its times (None before
    the quadrature)."""

    times: np.ndarray
    theta: SignedLog
    tau: np.ndarray
    rows: int
    after: float | None
    log_t_after: float
    log_t: np.ndarray | None = None


@functools.lru_cache(maxsize=64)
def output_grid(t_max: float, n_points: int) -> np.ndarray:
    """The output times ``linspace(0, t_max, n_points)``, made once per value (read-only: the
    runs take copies of their rows)."""
    grid = np.linspace(0.0, t_max, n_points)
    grid.setflags(write=False)
    return grid


@dataclass
class Output:
    """What a run has taken from its path so far (:func:`flush`).

    Attributes
    ----------
    grid : the output times ``linspace(0, t_max, n_points)`` (those up to the path's end).
    quadrature : ``log t`` is integrated (a rescaled run with ``original_time``).
    parts : one :class:`Part` per flush.
    taken_to : where the flushed path ends (None before the first flush).
    end : parameters, ``tau`` and ``log t`` at ``taken_to`` (from the first segment that ends
        there; ``log t`` is ``-inf`` until integrated).
    first : the parameters at ``s = 0``.
    sliding_time, sliding_surfaces : :func:`sliding_summary` of the flushed segments.
    report : the quadrature's samples (:class:`flows.clocks.QuadratureReport`).
    """

    grid: np.ndarray
    quadrature: bool
    parts: list[Part] = field(default_factory=list)
    taken_to: float | None = None
    end: tuple[SignedLog, float, float] | None = None
    first: SignedLog | None = None
    sliding_time: float = 0.0
    sliding_surfaces: int = 0
    report: QuadratureReport = field(default_factory=QuadratureReport)


def flush(run: Run) -> None:
    """Sample the segments the path holds on the output grid, integrate the original time
    over them (where it is computed) and release them."""
    part = _take(run)
    if run.output.quadrature:
        _integrate(run, part, part.times.size)
    run.path.release()


def _take(run: Run) -> Part:
    """The :class:`Part` of the segments the path holds: the grid times after the flushed path
    up to their end, and their end where that is no grid time, sampled in one call
    (:meth:`flows.integrator.segments.Path.sample`); ``taken_to``, ``end``, ``first`` and the
    sliding summary brought up to date."""
    out, path = run.output, run.path
    segments = path.segments
    if out.taken_to is None and path.count and segments[0].mode.collapsed:
        segments.insert(0, run.start)  # collapsed at s = 0: t = 0 is still the start
    after = -np.inf if out.taken_to is None else out.taken_to
    end = path.end
    if after == -np.inf and end >= out.grid[-1]:
        times = out.grid.copy()  # the whole grid (read-only, shared): the run's own copy
    else:
        times = out.grid[(out.grid > after) & (out.grid <= end)]
    rows = times.size
    if end > after and (rows == 0 or times[-1] < end):
        times = np.append(times, end)
    if times.size:
        theta, tau, _ = path.sample(times)
    else:  # segments of length 0 where the flushed path ends: its samples are taken
        empty = np.empty((0,) + path.shape)
        theta, tau = SignedLog(empty, empty), times
    part = Part(times, theta, tau, rows, out.taken_to, -np.inf if out.end is None else out.end[2])
    out.parts.append(part)
    if out.first is None:
        out.first = _row(theta, 0)
    if end > after:
        out.end = (_row(theta, -1), float(tau[-1]), -np.inf)
        out.taken_to = end
    total, most = sliding_summary(segments)
    out.sliding_time += total
    out.sliding_surfaces = max(out.sliding_surfaces, most)
    return part


def _row(theta: SignedLog, i: int) -> SignedLog:
    """Row ``i`` of ``theta`` as arrays of their own."""
    return SignedLog(theta.sign[i].copy(), theta.log_abs[i].copy())


def _integrate(run: Run, part: Part, upto: int) -> None:
    """``log t`` at the first ``upto`` times of ``part``: :func:`flows.clocks.log_original_time`
    over the held segments from where the flushed path before it ends (``log t`` there its
    initial value); and at ``end`` where they reach it."""
    if upto == 0:
        part.log_t = np.empty(0)
        return
    out = run.output
    start = [] if part.after is None else [part.after]
    grid = np.concatenate([start, part.times[:upto]])
    log_t = _log_original_time(run, grid, part.log_t_after)
    part.log_t = log_t[len(start) :]
    if upto == part.times.size and out.end is not None and part.times[-1] == out.taken_to:
        out.end = (out.end[0], out.end[1], float(log_t[-1]))


def _log_original_time(run: Run, grid: np.ndarray, initial: float) -> np.ndarray:
    """``log t`` at the increasing times ``grid`` of the held segments (``initial`` at the
    first): the quadrature of :func:`flows.clocks.log_original_time`, and on a last segment of
    l_inf-SAM's own steps the log-time the steps summed
    (:attr:`~flows.integrator.segments.Segment.log_elapsed`) after the quadrature's value at
    its start."""
    segments = run.path.segments
    rule = None if run.backend.interval_rule is None else run.backend.interval_rule()
    own = segments[-1] if segments else None
    log_elapsed = None if own is None else own.log_elapsed
    if own is None or log_elapsed is None:
        steps = [seg.ts for seg in segments]
        return log_original_time(
            grid, steps, exponent(run), rule=rule, report=run.output.report, initial=initial
        )
    inside = grid > own.start
    head = np.append(grid[~inside], own.start)
    if len(segments) > 1:
        log_head = log_original_time(
            head, [seg.ts for seg in segments[:-1]], exponent(run), rule=rule,
            report=run.output.report, initial=initial,
        )  # fmt: skip
    else:  # the steps start where the flushed path ends
        log_head = np.full(head.shape, initial)
    elapsed = np.interp(grid[inside], own.ts, log_elapsed)
    return np.concatenate([log_head[:-1], np.logaddexp(log_head[-1], elapsed)])


def assemble(run: Run, algorithm: str) -> Trajectory:
    """Take the output from the rest of the path (:func:`flush`, the segments kept) and build
    the :class:`Trajectory`: the samples of every flush, the path's end where it is no grid
    time, cut where a GD run's layers lost their conservation law
    (:func:`flows.integrator.conservation.conservation_cut`)."""
    path, out, problem = run.path, run.output, run.problem
    if not path.count:  # stopped before the first step: the path is the initial point
        path.segments.insert(0, Segment.frozen(run.mode.copy(), 0.0, 0.0, run.y, 0.0))
    last = _take(run)
    grid, theta, tau = _rows(out)
    keep = grid.size
    if not problem.algorithm.perturbs and len(problem.multiplicity) > 1:
        cut = conservation_cut(theta, run.rtol)
        if cut is not None:
            keep, run.message = cut[0] + 1, cut[1]
            run.cause = Cause.PRECISION_LOST
            grid, tau = grid[:keep], tau[:keep]
            theta = SignedLog(theta.sign[:keep], theta.log_abs[:keep])
    log_t = _log_time(run, last, keep, grid)
    fused = run.field_for(run.mode)  # the products and margins do not depend on the chart
    if not isinstance(fused, FusedField):  # the reference backend's point-by-point field
        fused = FusedField(problem)
    beta = fused.product_of_layers(theta.sign, theta.log_abs)
    mult = problem.multiplicity
    return Trajectory(
        t=grid,
        tau=tau,
        log_t_original=log_t,
        log_abs_theta=layers(theta.log_abs, mult),
        sign_theta=layers(theta.sign, mult),
        log_abs_beta=beta.log_abs,
        sign_beta=beta.sign,
        loss=Losses(fused, problem.loss, beta),
        status=run.cause.status,
        message=run.message,
        cause=run.cause,
        backend=run.backend.name,
        segment_loops=tuple(run.loops),
        algorithm=algorithm,
        depth=fused.depth,
        clock="original" if problem.clock.original else "rescaled",
        hyperparameters=dict(problem.hyperparameters),
        events=tuple(run.log),
        nfev=run.nfev,
        reduced=len(mult) == 1 and int(mult[0]) > 1,
        sliding_time=out.sliding_time,
        sliding_surfaces=out.sliding_surfaces,
        own_steps_from=np.inf if run.own_steps is None else run.own_steps[0],
        own_steps=0 if run.own_steps is None else run.own_steps[1],
        step_error=0.0 if run.own_steps is None else run.own_steps[2],
    )


def _rows(out: Output) -> tuple[np.ndarray, SignedLog, np.ndarray]:
    """The output times (the grid up to the path's end, then the end where that is no grid
    time), the parameters and ``tau`` there: the one part's samples as they are, or the grid
    rows of every part and ``end``."""
    if len(out.parts) == 1:
        part = out.parts[0]
        return part.times, part.theta, part.tau
    assert out.end is not None
    theta_end, tau_end, _ = out.end
    extra = _end_extra(out)
    sign = [p.theta.sign[: p.rows] for p in out.parts] + [theta_end.sign[None]] * extra
    log_abs = [p.theta.log_abs[: p.rows] for p in out.parts] + [theta_end.log_abs[None]] * extra
    grid = np.concatenate([p.times[: p.rows] for p in out.parts] + [[out.taken_to]] * extra)
    tau = np.concatenate([p.tau[: p.rows] for p in out.parts] + [[tau_end]] * extra)
    return grid, SignedLog(np.concatenate(sign), np.concatenate(log_abs)), tau


def _end_extra(out: Output) -> int:
    """1 where the path ends after its last grid time (its end is an output time), else 0."""
    last = max((p.times[p.rows - 1] for p in out.parts if p.rows), default=-np.inf)
    return int(out.taken_to is not None and last < out.taken_to)


def _log_time(run: Run, last: Part, keep: int, grid: np.ndarray) -> np.ndarray:
    """``log t`` at the first ``keep`` output times ``grid``: ``log`` of the times in the
    original clock, NaN where not computed, else the quadrature's (the last part's integrated
    here, up to the ``keep``-th output time)."""
    if run.problem.clock.original:
        with np.errstate(divide="ignore"):
            return np.log(grid)
    out = run.output
    if not out.quadrature:
        return np.full(grid.shape, np.nan)
    before = sum(p.rows for p in out.parts[:-1])
    _integrate(run, last, max(0, min(last.times.size, keep - before)))
    if len(out.parts) == 1:
        log_t = _integrated(last)
    else:
        assert out.end is not None
        extra = [[out.end[2]]] * _end_extra(out)
        log_t = np.concatenate([_integrated(p)[: p.rows] for p in out.parts] + extra)
    log_t = log_t[:keep]
    report = out.report
    if report.capped:
        run.message += (
            f"; log_t_original is approximate: its quadrature stopped refining at "
            f"{report.samples} samples of the clock factor (flows.clocks.MAX_SAMPLES), short of its "
            "1e-9 tolerance"
        )
    return log_t


def _integrated(part: Part) -> np.ndarray:
    """``log t`` at the times of ``part`` (integrated)."""
    assert part.log_t is not None
    return part.log_t


class Losses:
    """The training loss ``L = (1/n) sum_i l(u_i)`` (0 where it underflows) at the samples of
    ``beta``, computed when called (:class:`flows.results.OnFirstRead`: on the trajectory's
    first read of ``loss``)."""

    def __init__(self, fused: FusedField, loss: Loss, beta: SignedLog) -> None:
        self.fused, self.loss, self.beta = fused, loss, beta

    def __call__(self) -> np.ndarray:
        fused = self.fused
        with np.errstate(over="ignore"):
            u = fused.loss_arguments(fused.margins(self.beta))
            return np.mean(self.loss.value(u), axis=-1)


def ends(run: Run) -> SignedLog:
    """The parameters (2, G, d) where the path starts and where it ends so far (each from the
    first segment that covers it), from the held segments or the flushed output."""
    path, out = run.path, run.output
    if out.first is None:
        theta, _, _ = path.sample(np.array([0.0, path.end]))
        return theta
    if out.taken_to == path.end or not path.segments:
        assert out.end is not None
        last = out.end[0]
    else:
        last = _row(path.sample(np.array([path.end]))[0], 0)
    return SignedLog(
        np.stack([out.first.sign, last.sign]), np.stack([out.first.log_abs, last.log_abs])
    )


def layers(groups: np.ndarray, multiplicity: np.ndarray) -> np.ndarray:
    """The layers ``(T, L, d)`` from the parameter groups ``(T, G, d)``, group ``g`` standing for
    ``multiplicity[g]`` equal layers: one group of all ``L`` as a read-only view of it
    (``T d`` floats, not ``T L d``), groups of one layer each as they are."""
    if len(multiplicity) == 1:
        return _repeated(groups, int(multiplicity[0]))
    return groups if np.all(multiplicity == 1) else np.repeat(groups, multiplicity, axis=1)


def _repeated(groups: np.ndarray, depth: int) -> np.ndarray:
    """``numpy.broadcast_to(groups, (T, depth, d))`` of one group ``(T, 1, d)``: a read-only
    view, its layer axis of stride 0; made directly where ``groups`` is C-contiguous (a tenth
    of ``broadcast_to``'s cost, which is paid twice per call)."""
    shape = (groups.shape[0], depth, groups.shape[2])
    if not groups.flags.c_contiguous:
        return np.broadcast_to(groups, shape)
    strides = (groups.strides[0], 0, groups.strides[2])
    view = np.ndarray(shape, groups.dtype, groups, 0, strides)
    view.flags.writeable = False
    return view


def sliding_summary(segments: list[Segment]) -> tuple[float, int]:
    """``sliding_time`` (rescaled time with some surface sliding) and ``sliding_surfaces`` (the
    most at once) over ``segments``."""
    total, most = 0.0, 0
    for seg in segments:
        if not seg.mode.sliding:  # else some parameter is held or some direction slides
            continue
        tau = seg.tau(np.array([seg.start, seg.end]))
        total += float(tau[1] - tau[0])
        most = max(most, int(np.sum(seg.mode.held)) + len(seg.mode.sliding_directions))
    return total, most


def exponent(run: Run):
    """``K(s, ref) = -log c(theta'(s))``, ``s`` sampled on the held segment that covers ``ref``
    (compiled where :func:`flows.compiled.segment.exponent` applies, the numpy field elsewhere)."""

    def K(s: np.ndarray, ref: np.ndarray) -> np.ndarray:
        if len(run.path.segments) == 1:
            return segment_exponent(run, run.path.segments[0], s)
        which = run.path.segment_of(ref)
        out = np.empty(len(s))
        for i in np.unique(which):
            rows = np.flatnonzero(which == i)
            out[rows] = segment_exponent(run, run.path.segments[i], s[rows])
        return out

    return K


#: Floats of the states of one batch of times at which :func:`segment_exponent` evaluates
#: ``K`` (8 MB; the numpy field makes several arrays of that size): the quadrature's samples of
#: a long path in batches of bounded memory.
EXPONENT_BLOCK = 2**20


def segment_exponent(run: Run, seg: Segment, s: np.ndarray) -> np.ndarray:
    """``K = -log c(theta')`` at times ``s`` of one segment, in batches of at most
    :data:`EXPONENT_BLOCK` floats of states (:func:`_segment_exponent` each)."""
    shape = run.problem.shape
    block = max(1, EXPONENT_BLOCK // (shape[0] * shape[1] + 1))
    if len(s) <= block:
        return _segment_exponent(run, seg, s)
    return np.concatenate(
        [_segment_exponent(run, seg, s[i : i + block]) for i in range(0, len(s), block)]
    )


def _segment_exponent(run: Run, seg: Segment, s: np.ndarray) -> np.ndarray:
    """``K = -log c(theta')`` at times ``s`` of one segment (compiled where
    :func:`flows.compiled.segment.exponent` applies, the numpy field elsewhere)."""
    fld = run.moving_field(seg.mode)
    loop = run.backend.segment_loop
    out = None if loop is None else loop.exponent(fld, seg, s)
    if out is None:
        out = np.full(len(s), np.nan)
    rest = np.flatnonzero(np.isnan(out))
    if rest.size:
        theta, _ = seg.sample(s[rest], run.problem.shape)
        out[rest] = -fld.log_c(theta, fld.pattern_signs(seg.mode.pattern), s[rest])
    return out
