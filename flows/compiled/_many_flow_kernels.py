"""Many flows in one compiled call (numba): the segment loop of :func:`flows.simulate_many`.

:func:`segments` integrates every run of a batch (one problem, each run its own initial state
and hyper-parameters ``hp[r]``) with the single call's compiled DOP853 segment,
:func:`flows.compiled._segment_kernels.segment` (the same function, so the same steps and
numbers), one run after the other with the GIL released, and samples each run that reached the
end on the output grid with that segment's dense output
(:func:`flows.compiled._segment_kernels._dense_into`, as
:func:`~flows.compiled._segment_kernels.dense_values`). Before its segment a run is checked as
the single call's driver checks it where a segment starts: a run where one of the watched
events holds already, or nearly (its function within ``margin`` of 0, where the driver's own
check in numpy could decide either way), is left to the driver (status :data:`HANDED_BACK`).
:func:`exponents` evaluates ``K = -log c`` on the runs' dense outputs at the times of the
original-time quadrature (:func:`flows.compiled._segment_kernels.exponent_at`, as
:func:`~flows.compiled._segment_kernels.exponents`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import _field_kernels as kernels
from . import _segment_kernels as loop
from ._cache import install

install()  # numba's cache keyed on every source of the kernels (flows.compiled._cache)

#: A run that :func:`segments` leaves to the single call's driver before its first step.
HANDED_BACK = -1


@njit(cache=True, nogil=True)
def with_hyperparameters(problem, hp):
    """The problem tuple of :func:`flows.compiled.segment._problem_tuple` with the
    hyper-parameters ``hp`` in place of its own."""
    (shape, log_chart, chart_sign, delta, depth, mult, features, loss_id, original, held,
     algorithm_id, _, limit, pattern, offsets, per_example, abs_features) = problem  # fmt: skip
    return (shape, log_chart, chart_sign, delta, depth, mult, features, loss_id, original, held,
            algorithm_id, hp, limit, pattern, offsets, per_example, abs_features)  # fmt: skip


@njit(cache=True, nogil=True)
def _grown(buffer, size):
    """``buffer`` with room for ``size`` rows along its first axis (a copy twice as long where it
    has fewer; C-contiguous, copied entry by entry: a slice assignment would compile numba's
    broadcasting checks, seconds each)."""
    if buffer.shape[0] >= size:
        return buffer
    shape = (max(size, 2 * buffer.shape[0]),) + buffer.shape[1:]
    out = np.empty(shape)
    _copy_rows(buffer, 0, buffer.shape[0], out, 0)
    return out


@njit(cache=True, nogil=True, inline="always")
def _copy_rows(source, first, count, target, at):
    """Rows ``first:first + count`` of ``source`` into rows ``at:at + count`` of ``target``
    (C-contiguous arrays of the same row shape), entry by entry."""
    row = source.size // max(1, source.shape[0])
    flat_source = source.reshape(source.size)
    flat_target = target.reshape(target.size)
    for i in range(count * row):
        flat_target[at * row + i] = flat_source[first * row + i]


@njit(cache=True, nogil=True, error_model="numpy")
def _holds_already(y, problem, watch, work, f, g, margin):
    """Whether a watched event holds at ``y`` already or within ``margin`` of it (or the field
    is off the float path there): the events' functions as the segment computes them where it
    starts."""
    if not loop.field_called_into(y, problem, work, f):
        return True
    loop.events_into(y, problem, watch, work, True, g)
    for k in range(g.size):
        if not g[k] > margin:
            return True
    return False


@njit(cache=True, nogil=True, error_model="numpy")
def segments(y0, s_end, rtol, atol, budget, problem, hp, thresholds, parameter_signs,
             direction_signs, direction_offsets, capacity, margin, grid):  # fmt: skip
    """The segment from ``(0, y0[r])`` towards ``s_end`` of every run ``r`` (its
    hyper-parameters ``hp[r]``, its watched events ``(thresholds[r], parameter_signs[r],
    direction_signs[r], direction_offsets[r])`` as :func:`flows.compiled.segment._watch` makes
    them), each one call of :func:`flows.compiled._segment_kernels.segment` with the budget
    ``budget`` and ``capacity`` steps.

    Returns ``(status, steps, nfev, starts, ts, h, F, y_old, states)``: per run the segment's
    status (:data:`HANDED_BACK` for a run not started), its steps and field evaluations; the
    steps of the runs that reached ``s_end``, run ``r``'s at rows ``starts[r]:starts[r + 1]``
    of ``h``, ``F`` and ``y_old`` (step sizes and dense output) and rows
    ``starts[r] + r : starts[r + 1] + r + 1`` of ``ts`` (the step boundaries); and their
    states at the times ``grid`` (``states[r, q]``).
    """
    runs, n = y0.shape
    status = np.full(runs, HANDED_BACK, dtype=np.int64)
    steps = np.zeros(runs, dtype=np.int64)
    nfev = np.zeros(runs, dtype=np.int64)
    starts = np.zeros(runs + 1, dtype=np.int64)
    rows = max(16, 32 * runs)
    ts = np.empty(rows + runs)
    F = np.empty((rows, loop.POWER, n))
    y_old = np.empty((rows, n))
    h = np.empty(rows)
    states = np.full((runs, grid.size, n), np.nan)
    work = kernels.workspace(problem[0], problem[6].shape[0])
    f, g = np.empty(n), np.empty(7)
    for r in range(runs):
        starts[r + 1] = starts[r]
        p = with_hyperparameters(problem, hp[r])
        watch = (thresholds[r], parameter_signs[r], direction_signs[r], direction_offsets[r])
        if _holds_already(y0[r], p, watch, work, f, g, margin):
            continue
        done, k, t_r, F_r, y_old_r, _, used, _ = loop.segment(
            y0[r], 0.0, s_end, rtol, atol, budget, p, watch, capacity, 0.0
        )
        status[r], steps[r], nfev[r] = done, k, used
        if done != loop.REACHED_END:
            continue
        first, last = starts[r], starts[r] + k
        F = _grown(F, last)
        y_old = _grown(y_old, last)
        ts = _grown(ts, last + runs)
        h = _grown(h, last)
        _copy_rows(F_r, 0, k, F, first)
        _copy_rows(y_old_r, 0, k, y_old, first)
        _copy_rows(t_r, 0, k + 1, ts, first + r)
        for i in range(k):
            h[first + i] = t_r[i + 1] - t_r[i]
        starts[r + 1] = last
        for q in range(grid.size):
            loop._dense_into(grid[q], t_r[:k], h[first:last], F_r[:k], y_old_r[:k], states[r, q])
    return status, steps, nfev, starts, ts, h, F, y_old, states


@njit(cache=True, nogil=True, error_model="numpy")
def exponents(s, run, starts, ts, h, F, y_old, problem, hp):
    """``K = -log c`` at the perturbed point of run ``run[q]``'s dense output at time ``s[q]``
    (the steps of :func:`segments`; its hyper-parameters ``hp[run[q]]``), NaN where the float
    path does not hold: :func:`flows.compiled._segment_kernels.exponents` for each run."""
    out = np.empty(s.size)
    y = np.empty(y_old.shape[1])
    work = kernels.workspace(problem[0], problem[6].shape[0])
    for q in range(s.size):
        r = run[q]
        first, last = starts[r], starts[r + 1]
        t_old = ts[first + r : last + r]
        loop._dense_into(s[q], t_old, h[first:last], F[first:last], y_old[first:last], y)
        out[q] = loop.exponent_at(y, with_hyperparameters(problem, hp[r]), work)
    return out
