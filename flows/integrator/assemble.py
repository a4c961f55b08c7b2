"""The :class:`~flows.results.Trajectory` of a run (:mod:`flows.integrator.driver`): the path
sampled on the output grid, the original time by a batched quadrature (:mod:`flows.clocks`)
and the sliding summary."""

from __future__ import annotations

import numpy as np

from ..clocks import QuadratureReport, log_original_time
from ..fused import FusedField
from ..results import Cause, Trajectory
from ..signedlog import SignedLog
from .conservation import conservation_cut
from .segments import Segment
from .state import Run


def assemble(
    run: Run, t_max: float, n_points: int, original_time: bool, algorithm: str
) -> Trajectory:
    """Sample the path on the output grid and build the :class:`Trajectory`."""
    if not run.path.segments:  # stopped before the first step: the path is the initial point
        run.path.segments.append(Segment.frozen(run.mode.copy(), 0.0, 0.0, run.y, 0.0))
    elif run.path.segments[0].mode.collapsed:  # collapsed at s = 0: t = 0 is still the start
        run.path.segments.insert(0, run.start)
    s_end = run.path.end
    grid = np.linspace(0.0, t_max, n_points)
    grid = grid[grid <= s_end]
    if grid[-1] < s_end:
        grid = np.append(grid, s_end)
    theta, tau, _ = run.path.sample(grid)
    problem = run.problem
    if not problem.algorithm.perturbs and len(problem.multiplicity) > 1:
        cut = conservation_cut(theta, run.rtol)
        if cut is not None:
            keep, run.message = cut[0] + 1, cut[1]
            run.cause = Cause.PRECISION_LOST
            grid, tau = grid[:keep], tau[:keep]
            theta = SignedLog(theta.sign[:keep], theta.log_abs[:keep])
    if problem.clock.original:
        with np.errstate(divide="ignore"):
            log_t = np.log(grid)
    elif not original_time:
        log_t = np.full(grid.shape, np.nan)
    else:
        rule = None if run.backend.interval_rule is None else run.backend.interval_rule()
        steps = [seg.ts for seg in run.path.segments]
        report = QuadratureReport()
        log_t = log_original_time(grid, steps, exponent(run), rule=rule, report=report)
        if report.capped:
            run.message += (
                f"; log_t_original is approximate: its quadrature stopped refining at "
                f"{report.samples} samples of the clock factor (flows.clocks.MAX_SAMPLES), short of its "
                "1e-9 tolerance"
            )
    fused = run.field_for(run.mode)  # the products and margins do not depend on the chart
    if not isinstance(fused, FusedField):  # the reference backend's point-by-point field
        fused = FusedField(problem)
    beta = fused.product_of_layers(theta.sign, theta.log_abs)
    with np.errstate(over="ignore"):
        loss = np.mean(problem.loss.value(fused.loss_arguments(fused.margins(beta))), axis=-1)
    mult = problem.multiplicity
    return Trajectory(
        t=grid,
        tau=tau,
        log_t_original=log_t,
        log_abs_theta=layers(theta.log_abs, mult),
        sign_theta=layers(theta.sign, mult),
        log_abs_beta=beta.log_abs,
        sign_beta=beta.sign,
        loss=loss,
        status=run.cause.status,
        message=run.message,
        cause=run.cause,
        backend=run.backend.name,
        segment_loops=tuple(run.loops),
        algorithm=algorithm,
        depth=int(mult.sum()),
        clock="original" if problem.clock.original else "rescaled",
        hyperparameters=dict(problem.hyperparameters),
        events=tuple(run.log),
        nfev=run.nfev,
        reduced=len(mult) == 1 and int(mult[0]) > 1,
        **sliding_summary(run),
    )


def layers(groups: np.ndarray, multiplicity: np.ndarray) -> np.ndarray:
    """The layers ``(T, L, d)`` from the parameter groups ``(T, G, d)``, group ``g`` standing for
    ``multiplicity[g]`` equal layers: one group of all ``L`` as a read-only view of it
    (``T d`` floats, not ``T L d``), groups of one layer each as they are."""
    if len(multiplicity) == 1:
        return np.broadcast_to(groups, (groups.shape[0], int(multiplicity[0]), groups.shape[2]))
    return groups if np.all(multiplicity == 1) else np.repeat(groups, multiplicity, axis=1)


def sliding_summary(run: Run) -> dict:
    """``sliding_time`` (rescaled time with some surface sliding) and ``sliding_surfaces`` (the
    most at once) over the path."""
    total, most = 0.0, 0
    for seg in run.path.segments:
        if not seg.mode.sliding:  # else some parameter is held or some direction slides
            continue
        tau = seg.tau(np.array([seg.start, seg.end]))
        total += float(tau[1] - tau[0])
        most = max(most, int(np.sum(seg.mode.held)) + len(seg.mode.sliding_directions))
    return {"sliding_time": total, "sliding_surfaces": most}


def exponent(run: Run):
    """``K(s, ref) = -log c(theta'(s))``, ``s`` sampled on the segment that covers ``ref``
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


def segment_exponent(run: Run, seg: Segment, s: np.ndarray) -> np.ndarray:
    """``K = -log c(theta')`` at times ``s`` of one segment."""
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
