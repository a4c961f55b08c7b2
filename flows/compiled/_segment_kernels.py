"""A compiled DOP853 segment (numba): scipy's ``DOP853`` step by step, with the compiled field.

:mod:`flows.compiled.segment` drives it. The stepping is scipy's (``RungeKutta._step_impl``,
``DOP853._estimate_error_norm``, ``DOP853._dense_output_impl``: the same formulas, constants
and order of operations; the first step :func:`flows.integrator.solver.initial_step`), so a
segment integrated here takes the steps the Python loop would take, to rounding. The field is :mod:`flows.compiled._field_kernels`'s float path
with the perturbation of the algorithm selected by ``algorithm_id`` (its table entry's
``compiled_id``, :data:`flows.algorithms.ALGORITHMS`; ``hp`` holds its hyper-parameters in the
entry's declared order, and the problem's last entry a row per hyper-parameter that follows a
cosine or warm-up cosine schedule, evaluated at each stage's clock time ``t + c h`` as scipy's
loop does: :func:`flows.compiled._field_kernels.hyperparameters_into`). The loop hands back to the Python driver
(status codes below) where the float path does not hold (at a stage of the first step:
after :data:`RANGE_SHRINKS` shorter tries), where a threshold event (collapse,
near zero, stationary, blow-up, loss floor) or a sign of l_inf-SAM's frozen pattern changes over a step (the
step is not kept: the driver locates the event), when the budget is spent, or when the step
size underflows. Arithmetic follows numpy
(``error_model="numpy"``: a division by 0 gives inf or NaN, which the checks above catch).
The kernels here and in :mod:`flows.compiled._field_kernels` release the GIL (``nogil``):
independent runs can integrate in threads at once.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from scipy.integrate._ivp import dop853_coefficients as coefficients

from ..signedlog import LOG2
from . import _field_kernels as kernels
from ._cache import install

install()  # numba's cache keyed on every source of the kernels (flows.compiled._cache)

REACHED_END, LEFT_FLOAT_RANGE, EVENT_AHEAD, BUDGET_SPENT, STEP_TOO_SMALL = 0, 1, 2, 3, 4

#: A first step (of :func:`initial_step`'s choosing) whose stages leave the float path is
#: retried this many times, each 5x shorter (scipy's smallest factor), before the loop hands
#: back: that guess can put DOP853's stages far from the path (n 5, d 2e5 regression: a stage
#: at e^-300 from a start at 0.1), where scipy would evaluate them in signed-log arithmetic
#: and reject the step. Later steps, sized by the error control, hand back at once (as near a
#: blow-up, where the Python loop takes the same steps on the signed-log field).
RANGE_SHRINKS = 2

N_STAGES = coefficients.N_STAGES
A = np.ascontiguousarray(coefficients.A)
B = np.ascontiguousarray(coefficients.B)
C = np.ascontiguousarray(coefficients.C)
E3 = np.ascontiguousarray(coefficients.E3)
E5 = np.ascontiguousarray(coefficients.E5)
D = np.ascontiguousarray(coefficients.D)
POWER = coefficients.INTERPOLATOR_POWER
SAFETY, MIN_FACTOR, MAX_FACTOR = 0.9, 0.2, 10.0
EPS = np.finfo(np.float64).eps
ERROR_EXPONENT = -1.0 / 8.0
#: The bounds of the stages :func:`_stages_into` evaluates: ``[1, N_STAGES + 1)`` for a step
#: (stage 0 is the field at its start, known), ``[N_STAGES + 1, len(A))`` for its dense output.
#: Read from an array, so that both calls share one compiled :func:`_stages_into` (a literal
#: bound would compile a second copy of it, with the field inlined: ~2 s).
STAGE_BOUNDS = np.array([1, N_STAGES + 1, A.shape[0]])


@njit(cache=True, nogil=True, error_model="numpy")
def field(y, problem, time):
    """``d(z, tau)/ds`` at the flat state ``y`` and clock time ``time`` (ok flag first)."""
    out = np.empty(y.size)
    work = kernels.workspace(problem[0], problem[6].shape[0])
    ok = field_called_into(y, problem, work, out, time)
    return ok, out


@kernels.uncounted(forceinline=True, error_model="numpy")
def field_into(y, problem, work, out, time):
    """:func:`field` into ``out`` with the buffers ``work`` (:func:`kernels.workspace`)."""
    (shape, log_chart, chart_sign, delta, depth, mult, features, loss_id, original, held,
     algorithm_id, hp, limit, pattern, offsets, per_example, _, schedule) = problem  # fmt: skip
    z = y[:-1].reshape(shape)
    if per_example:
        ok, log_c = per_example_into(z, problem, work, time)
        if not ok:
            out[:] = 0.0
            return False
        return kernels.chart_map_into(work[9], log_c, work[7], held, original, log_chart,
                                      delta, out)  # fmt: skip
    if not perturbed_into(z, problem, work, time):
        out[:] = 0.0
        return False
    return kernels.chart_velocity_into(work[7], work[8], held, depth, features, offsets,
                                       loss_id, original, log_chart, delta, limit, work,
                                       out)  # fmt: skip


@kernels.uncounted(error_model="numpy")
def field_called_into(y, problem, work, out, time):
    """:func:`field_into` called, not inlined: the evaluations outside the steps' loop (each
    inlined copy of the field costs seconds of compile time)."""
    return field_into(y, problem, work, out, time)


@kernels.uncounted(error_model="numpy")
def per_example_into(z, problem, work, time):
    """The float parameters ``w`` (into ``work[7]``) at chart coordinates ``z`` and the
    per-example field ``F`` there (into ``work[9]``,
    :func:`kernels.per_example_field_into`) at clock time ``time``; ``(ok, log c)``, not ok
    outside the float path."""
    (shape, log_chart, chart_sign, delta, depth, mult, features, loss_id, original, held,
     algorithm_id, hp, limit, pattern, offsets, per_example, _, schedule) = problem  # fmt: skip
    w = work[7]
    if not kernels.parameters_into(z, log_chart, chart_sign, delta, depth, limit, w):
        return False, 0.0
    now = kernels.hyperparameters_into(hp, schedule, time, work[13])
    return kernels.per_example_field_into(
        w, depth, mult, features, offsets, loss_id, algorithm_id, now, limit, work, work[8], work[9]
    )


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def perturbed_into(z, problem, work, time):
    """The float parameters ``w`` (into ``work[7]``) at chart coordinates ``z`` (G, d) and the
    perturbed point ``w + eps`` (into ``work[8]``, :func:`kernels.perturbed_point_into`; l_inf-SAM
    with the segment's frozen sign(grad L)) with the hyper-parameters at clock time ``time``;
    False outside the float path."""
    (shape, log_chart, chart_sign, delta, depth, mult, features, loss_id, original, held,
     algorithm_id, hp, limit, pattern, offsets, per_example, _, schedule) = problem  # fmt: skip
    w, point = work[7], work[8]
    if not kernels.parameters_into(z, log_chart, chart_sign, delta, depth, limit, w):
        return False
    now = kernels.hyperparameters_into(hp, schedule, time, work[13])
    return kernels.perturbed_point_into(
        w, depth, mult, features, offsets, loss_id, algorithm_id, now, pattern, True, work, point
    )


@njit(cache=True, nogil=True, error_model="numpy")
def event_values(y, problem, watch, time):
    """:func:`event_values_into` with buffers of its own, the field evaluated at ``y`` (clock
    time ``time``) first."""
    work = kernels.workspace(problem[0], problem[6].shape[0])
    out = np.empty(7)
    evaluated = field_called_into(y, problem, work, np.empty(y.size), time)
    events_into(y, problem, watch, work, evaluated, out)
    return out


@njit(cache=True, nogil=True, error_model="numpy")
def event_values_into(y, problem, watch, work, evaluated, time):
    """:func:`events_into` into an array of its own, after :func:`field_into` at ``y`` (clock
    time ``time``) unless ``evaluated``."""
    out = np.empty(7)
    if not evaluated:
        evaluated = field_called_into(y, problem, work, np.empty(y.size), time)
    events_into(y, problem, watch, work, evaluated, out)
    return out


@kernels.uncounted(error_model="numpy")
def events_into(y, problem, watch, work, evaluated, out):
    """The watched events' functions into ``out`` (7; all watched downwards, ``inf`` where not
    watched), with the buffers ``work``; ``evaluated``: ``work`` holds :func:`field_into` at
    ``y`` (its ``w``, ``F``, and for GD the forward pass at ``w``), which the events then take
    from it (not evaluated: outside the float path, where the blow-up function is ``-inf``):

    0, 1. ``max log|w| - threshold`` (collapse, near zero) where ``watch[0][k]`` is finite;
    2. the scale-free gradient size ``log S - watch[0][2]`` (stationary, see
       :class:`flows.integrator.events.Stationary`; for the squared loss, i.e. in regression,
       ``S = max_j |G_j| / H_j`` over the movable coordinates, :func:`_log_largest_ratio`);
    3. ``min_i sign_i z_i`` over the parameters with ``watch[1][i] = sign_i != 0`` (a parameter
       crosses 0 against its frozen sign: :class:`flows.integrator.surface_events.ZeroCrossing`;
       after the near-zero switch, a watched entry reaches 0:
       :class:`flows.integrator.threshold_events.CollapseCrossing`);
    4. ``min_j (sign_j G_j + offset_j)`` over ``watch[2][j] = sign_j != 0``, exact zeros left
       out (:class:`flows.integrator.surface_events.DirectionCrossing`);
    5. ``watch[0][3] - max log(|F| / |w|)`` over the growing entries (``F w > 0``, ``|w| > 1``)
       of the velocity ``F`` at the perturbed point (blow-up, :class:`flows.integrator.events.BlowUp`);
    6. ``log L - watch[0][4]``, the log of the training loss above the floor
       (:class:`flows.integrator.events.LossFloor`).
    """
    (shape, log_chart, chart_sign, delta, depth, mult, features, loss_id, original, held,
     algorithm_id, hp, limit, pattern, offsets, per_example, _, schedule) = problem  # fmt: skip
    thresholds, parameter_signs, direction_signs, direction_offsets = watch
    z = y[:-1].reshape(shape)
    top = -np.inf  # max log|w|: log|delta sinh z| increases with |z| (one sinh, not one each)
    for layer in range(shape[0]):
        for j in range(shape[1]):
            top = max(top, z[layer, j] if log_chart else abs(z[layer, j]))
    if not log_chart:
        top = np.log(abs(delta * np.sinh(top)))
    out[:] = np.inf
    for k in range(2):
        if np.isfinite(thresholds[k]):
            out[k] = top - thresholds[k]
    flat = y[:-1]
    for i in range(flat.size):
        if parameter_signs[i] != 0:
            out[3] = min(out[3], parameter_signs[i] * flat[i])
    watch_directions = False
    for j in range(shape[1]):
        watch_directions = watch_directions or direction_signs[j] != 0
    if np.isfinite(thresholds[3]):  # first: the forward pass below overwrites work
        out[5] = thresholds[3] - _largest_growth_rate(problem, work, evaluated)
    w = work[7]
    if not evaluated:
        kernels.parameters_into(z, log_chart, chart_sign, delta, depth, limit, w)
    if np.isfinite(thresholds[4]):
        log_loss = kernels.log_mean_loss_into(
            w, depth, features, offsets, loss_id, work[10], work[11], work[2]
        )
        out[6] = log_loss - thresholds[4]
    if np.isfinite(thresholds[2]) or watch_directions:
        if not (evaluated and algorithm_id == 0 and not per_example):
            kernels.forward_into(w, depth, features, offsets, loss_id, work)
        direction, loo = work[3], work[1]
        if np.isfinite(thresholds[2]):
            sizes = _example_sizes_into(work[12], problem[16], work[10])
            if loss_id == kernels.SQUARED:
                out[2] = _log_largest_ratio(direction, loo, sizes) - thresholds[2]
            else:
                top_sum, gradient = 0.0, 0.0
                for layer in range(shape[0]):
                    for j in range(shape[1]):
                        top_sum += mult[layer] * (sizes[j] * loo[layer, j]) ** 2
                        gradient += mult[layer] * (direction[j] * loo[layer, j]) ** 2
                if top_sum > 0:
                    out[2] = 0.5 * np.log(gradient / top_sum) - thresholds[2]
        for j in range(shape[1]):
            if direction_signs[j] != 0 and direction[j] != 0:
                out[4] = min(out[4], direction_signs[j] * direction[j] + direction_offsets[j])


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _example_sizes_into(p, abs_features, sizes):
    """``H_j = sum_i |p_i| |z_ij|`` into ``sizes`` (returned) from the example weights ``p``
    (``work[12]`` of :func:`kernels.forward_into`, made ``|p|`` in place) and the ``|z_ij|``
    (:class:`flows.integrator.threshold_events.Stationary`); 0 where every ``p_i`` is (an exact
    interpolator of the squared loss)."""
    for i in range(p.size):
        p[i] = abs(p[i])
    kernels.weighted_rows_into(p, abs_features, sizes)
    return sizes


@kernels.uncounted(error_model="numpy")
def _log_largest_ratio(direction, loo, sizes):
    """``log max_j |G_j| / H_j`` over the coordinates whose layers can move (some
    ``prod_{k != l} w^(k)_j != 0``) and with ``H_j > 0``; -inf if there is none (the regression
    form of :class:`flows.integrator.threshold_events.Stationary`)."""
    top = 0.0
    for j in range(direction.size):
        movable = False
        for layer in range(loo.shape[0]):
            movable = movable or loo[layer, j] != 0
        if movable and sizes[j] > 0:
            top = max(top, abs(direction[j]) / sizes[j])
    return np.log(top)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _largest_growth_rate(problem, work, evaluated):
    """``max log(|F| / |w|)`` over the entries that grow (``F w > 0``) beyond ``|w| > 1``, with
    ``F = G(w') prod_{k != l} w'`` the velocity at the perturbed point, from the ``w`` and ``F``
    that :func:`field_into` leaves in ``work[7]`` and ``work[9]`` (``evaluated``); ``-inf`` if
    none, or if not evaluated (outside the float path, where the field hands back anyway)."""
    shape = problem[0]
    top = -np.inf
    if not evaluated:
        return top
    w = work[7]
    for layer in range(shape[0]):
        for j in range(shape[1]):
            velocity = work[9][layer, j]
            if velocity * w[layer, j] > 0 and abs(w[layer, j]) > 1:
                top = max(top, np.log(abs(velocity)) - np.log(abs(w[layer, j])))
    return top


@njit(cache=True, nogil=True, error_model="numpy")
def _scaled_rms(x, minus, scale, counted):
    """``rms((x - minus) / scale)`` over the entries where ``counted`` (loops, not array
    expressions: those compile numba's broadcasting error messages, seconds of compile time
    each)."""
    total, count = 0.0, 0
    for i in range(x.size):
        if counted[i]:
            v = (x[i] - minus[i]) / scale[i]
            total += v * v
            count += 1
    return np.sqrt(total / count)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _axpy_into(out, y, h, x):
    """``out = y + h * x`` elementwise."""
    for i in range(y.size):
        out[i] = y[i] + h * x[i]


@njit(cache=True, nogil=True, error_model="numpy")
def initial_step(y0, f0, s0, s_end, rtol, atol, problem):
    """:func:`flows.integrator.solver.initial_step` (order 7); (h, ok)."""
    interval = abs(s_end - s0)
    n = y0.size
    scale = np.empty(n)
    counted = np.empty(n, dtype=np.bool_)
    some = False
    for i in range(n):
        scale[i] = atol[i] + abs(y0[i]) * rtol
        counted[i] = y0[i] != 0 or atol[i] >= rtol * EPS
        some = some or counted[i]
    if not some:
        counted[:] = True
    zero = np.zeros(n)
    d0 = _scaled_rms(y0, zero, scale, counted)
    d1 = _scaled_rms(f0, zero, scale, counted)
    if d0 < 1e-5 or d1 < 1e-5:
        h0 = 1e-6
    else:
        h0 = 0.01 * d0 / d1
    h0 = min(h0, interval)
    trial = np.empty(n)
    _axpy_into(trial, y0, h0, f0)
    ok, f1 = field(trial, problem, s0 + h0)
    if not ok:
        return 0.0, False
    d2 = _scaled_rms(f1, f0, scale, counted) / h0
    if d1 <= 1e-15 and d2 <= 1e-15:
        h1 = max(1e-6, h0 * 1e-3)
    else:
        h1 = (0.01 / max(d1, d2)) ** (1.0 / 8.0)
    return min(100 * h0, h1, interval), True


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _combination_into(K, coefficients, rows, out):
    """``out_i = sum_{r < rows} K[r, i] coefficients[r]``, summed over ``r`` in order from 0
    for every ``i`` (the order of a loop over ``r`` per entry, so the same numbers), one row of
    ``K`` at a time (contiguous, vectorised)."""
    out[:] = 0.0
    for r in range(rows):
        c = coefficients[r]
        row = K[r]
        for i in range(out.size):
            out[i] += row[i] * c


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _stage(y, K, s, h, out):
    """``out = y + (sum_{r < s} K[r] A[s, r]) h``: the state at stage ``s``."""
    _combination_into(K, A[s], s, out)
    for i in range(y.size):
        out[i] = y[i] + out[i] * h


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _solution_into(y, K, h, out):
    """``out = y + h sum_r B[r] K[r]``: the 8th-order solution at the end of the step."""
    _combination_into(K, B, N_STAGES, out)
    for i in range(y.size):
        out[i] = y[i] + h * out[i]


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _error_norm(y, y_new, K, h, rtol, atol, err5, err3):
    """DOP853's error norm of the step (``DOP853._estimate_error_norm``): the 5th- and
    3rd-order estimates ``E5 K``, ``E3 K`` (into ``err5``, ``err3``) scaled by
    ``atol + rtol max(|y|, |y_new|)``, then ``|h| e5 / sqrt((e5 + 0.01 e3) n)``."""
    _combination_into(K, E5, N_STAGES + 1, err5)
    _combination_into(K, E3, N_STAGES + 1, err3)
    e5, e3 = 0.0, 0.0
    for i in range(y.size):
        scale = atol[i] + max(abs(y[i]), abs(y_new[i])) * rtol
        a5 = err5[i] / scale
        a3 = err3[i] / scale
        e5 += a5 * a5
        e3 += a3 * a3
    if e5 == 0 and e3 == 0:
        return 0.0
    return abs(h) * e5 / np.sqrt((e5 + 0.01 * e3) * y.size)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _growth(error_norm, rejected):
    """The factor of the next step after an accepted one (at most 1 after a rejection)."""
    if error_norm == 0:
        factor = MAX_FACTOR
    else:
        factor = min(MAX_FACTOR, SAFETY * error_norm**ERROR_EXPONENT)
    return min(1.0, factor) if rejected else factor


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _dense_output_into(y, y_new, K, f_new, h, F_step, y_old):
    """The dense-output coefficients of one step into ``F_step`` (POWER, n), in
    ``Dop853DenseOutput``'s layout (``DOP853._dense_output_impl``), and its start state into
    ``y_old``."""
    for p in range(POWER - 3):
        row = F_step[3 + p]
        _combination_into(K, D[p], A.shape[0], row)
        for i in range(y.size):
            row[i] = h * row[i]
    for i in range(y.size):
        delta_y = y_new[i] - y[i]
        F_step[0, i] = delta_y
        F_step[1, i] = h * K[0, i] - delta_y
        F_step[2, i] = 2 * delta_y - h * (f_new[i] + K[0, i])
        y_old[i] = y[i]


@kernels.uncounted(error_model="numpy")
def _stages_into(y, t, h, problem, work, K, first, last, stage, y_new):
    """The stages ``first <= s < last`` of the DOP853 step of size ``h`` from ``(t, y)`` (``K[:first]``
    known): the state of stage ``s`` (:func:`_stage`; for ``s = N_STAGES`` the solution
    :func:`_solution_into`, into ``y_new``) and the field there, into ``K[s]``;
    ``(ok, evaluations)``, not ok at the first evaluation off the float path (counted). One call
    site of the (inlined) field for every stage: 1 to ``N_STAGES`` for the step, the rest for
    the dense output."""
    for s in range(first, last):
        point = stage
        time = t + C[s] * h  # scipy's stage times: t + c h, the solution at t + h
        if s == N_STAGES:
            _solution_into(y, K, h, y_new)
            point = y_new
            time = t + h
        else:
            _stage(y, K, s, h, stage)
        if not field_into(point, problem, work, K[s], time):
            return False, s - first + 1
    return True, last - first


@njit(cache=True, nogil=True, error_model="numpy")
def segment(y0, s0, s_end, rtol, atol, budget, problem, watch, capacity, first_step):
    """Integrate from ``(s0, y0)`` towards ``s_end``, the first step ``first_step`` (0: chosen
    by :func:`initial_step`; a call that goes on after a full one takes that one's next step).

    Returns ``(status, n_steps, ts, F, y_old, y, nfev, h_abs)``: the step boundaries
    ``ts[:n+1]``, the dense-output coefficients ``F[:n]`` and start states ``y_old[:n]`` of each
    kept step (``Dop853DenseOutput``'s layout), the state at ``ts[n]``, the field evaluations
    spent, and the size of the next step (the Python loop goes on with it: the same steps).
    """
    n = y0.size
    ts = np.empty(capacity + 1)
    F = np.empty((capacity, POWER, n))
    y_olds = np.empty((capacity, n))
    ts[0] = s0
    y = y0.copy()
    f = np.empty(n)
    work = kernels.workspace(problem[0], problem[6].shape[0])
    ok = field_called_into(y, problem, work, f, s0)
    nfev = 1
    if not ok:
        return LEFT_FLOAT_RANGE, 0, ts, F, y_olds, y, nfev, 0.0
    g_old, g_new = np.empty(7), np.empty(7)  # the events' functions at t and at the step's end
    # evaluated = ok, a variable (True here): a literal True would compile events_into a second
    # time, beside the copy that event_values uses (~4 s)
    events_into(y, problem, watch, work, ok, g_old)
    h_abs = first_step
    if first_step == 0:
        h_abs, ok = initial_step(y, f, s0, s_end, rtol, atol, problem)
        nfev += 1
        if not ok:
            return LEFT_FLOAT_RANGE, 0, ts, F, y_olds, y, nfev, 0.0
    K = np.empty((A.shape[0], n))
    f_new = K[N_STAGES]
    stage = np.empty(n)
    y_new = np.empty(n)
    err5, err3 = np.empty(n), np.empty(n)
    t = s0
    steps = 0
    while t < s_end:
        if steps == capacity:
            return BUDGET_SPENT, steps, ts, F, y_olds, y, nfev, h_abs
        min_step = 10 * abs(np.nextafter(t, np.inf) - t)
        if h_abs < min_step:
            h_abs = min_step
        rejected = False
        shrunk = 0
        while True:
            if h_abs < min_step:
                return STEP_TOO_SMALL, steps, ts, F, y_olds, y, nfev, h_abs
            t_new = t + h_abs
            if t_new - s_end > 0:
                t_new = s_end
            h = t_new - t
            h_abs = abs(h)
            for i in range(n):
                K[0, i] = f[i]
            ok, used = _stages_into(
                y, t, h, problem, work, K, STAGE_BOUNDS[0], STAGE_BOUNDS[1], stage, y_new
            )
            nfev += used
            if not ok:  # a stage outside the float path: a smaller first step, or Python's loop
                if steps > 0 or first_step != 0 or shrunk == RANGE_SHRINKS:
                    return LEFT_FLOAT_RANGE, steps, ts, F, y_olds, y, nfev, h_abs
                shrunk += 1
                h_abs *= MIN_FACTOR
                rejected = True
                continue
            error_norm = _error_norm(y, y_new, K, h, rtol, atol, err5, err3)
            if error_norm < 1:
                h_abs *= _growth(error_norm, rejected)
                break
            h_abs *= max(MIN_FACTOR, SAFETY * error_norm**ERROR_EXPONENT)
            rejected = True
        events_into(y_new, problem, watch, work, ok, g_new)  # ok: the stages evaluated y_new
        for k in range(g_new.size):
            if g_old[k] >= 0 and g_new[k] <= 0 and (g_old[k] != 0 or g_new[k] != 0):
                return EVENT_AHEAD, steps, ts, F, y_olds, y, nfev, abs(h)
        ok, used = _stages_into(
            y, t, h, problem, work, K, STAGE_BOUNDS[1], STAGE_BOUNDS[2], stage, y_new
        )
        nfev += used
        if not ok:
            return LEFT_FLOAT_RANGE, steps, ts, F, y_olds, y, nfev, h_abs
        _dense_output_into(y, y_new, K, f_new, h, F[steps], y_olds[steps])
        for i in range(n):
            f[i] = f_new[i]
        steps += 1
        ts[steps] = t_new
        t, y, y_new, g_old, g_new = t_new, y_new, y, g_new, g_old
        if nfev > budget:
            return BUDGET_SPENT, steps, ts, F, y_olds, y, nfev, h_abs
    return REACHED_END, steps, ts, F, y_olds, y, nfev, h_abs


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _dense_into(s, t_old, h, F, y_old, y):
    """The state at time ``s`` into ``y``: ``Dop853DenseOutput``'s polynomial of the step that
    covers ``s`` (the later one at a shared boundary, the first or last step outside them, as
    :meth:`flows.integrator.segments.Segment.step_of`), in the operations and order of
    :func:`flows.integrator.segments._horner` (the same numbers)."""
    k, last = 0, t_old.size - 1  # the last step starting at or before s (or the first)
    while k < last:
        middle = (k + last + 1) // 2
        if t_old[middle] <= s:
            k = middle
        else:
            last = middle - 1
    x = (s - t_old[k]) / h[k]
    y[:] = 0.0
    for i in range(POWER):
        for c in range(y.size):
            y[c] += F[k, POWER - 1 - i, c]
            y[c] *= x if i % 2 == 0 else 1 - x
    for c in range(y.size):
        y[c] += y_old[k, c]


@njit(cache=True, nogil=True, error_model="numpy")
def dense_values(s, t_old, h, F, y_old):
    """The states ``(len(s), n)`` at times ``s`` of the steps ``(t_old, h, F, y_old)``
    (:func:`_dense_into` each)."""
    out = np.empty((s.size, y_old.shape[1]))
    for q in range(s.size):
        _dense_into(s[q], t_old, h, F, y_old, out[q])
    return out


@njit(cache=True, nogil=True, error_model="numpy")
def chart_values(s, t_old, h, F, y_old, log_chart, sign, log_delta, held):
    """The parameters ``(sign, log|w|)`` ``(len(s), n - 1)`` and ``tau`` ``(len(s),)`` at times
    ``s`` of the steps, the entries ``held`` (flat) at ``(0, -inf)``: :func:`dense_values`, then
    in the log chart (``log_chart``) of signs ``sign`` (flat) :meth:`flows.charts.LogChart.state`
    (``sign`` where ``z > -inf``, else 0; the same numbers), in the asinh chart of scale
    ``delta = exp(log_delta)`` :func:`_asinh_parameter`, as
    :meth:`flows.integrator.segments.Segment.sample` does in numpy, in one pass."""
    n = y_old.shape[1] - 1
    out_sign, out_log, tau = np.empty((s.size, n)), np.empty((s.size, n)), np.empty(s.size)
    y = np.empty(n + 1)
    for q in range(s.size):
        _dense_into(s[q], t_old, h, F, y_old, y)
        for c in range(n):
            if held[c]:
                out_sign[q, c], out_log[q, c] = 0.0, -np.inf
            elif log_chart:
                out_sign[q, c] = 0.0 if y[c] == -np.inf else sign[c]
                out_log[q, c] = y[c]
            else:
                out_sign[q, c], out_log[q, c] = _asinh_parameter(y[c], log_delta)
        tau[q] = y[n]
    return out_sign, out_log, tau


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _asinh_parameter(z, log_delta):
    """``(sign w, log|w|)`` of ``w = delta sinh z``: ``log|w| = log delta + log sinh|z|`` in the
    two forms of :func:`flows.signedlog.log_sinh` (``log(sinh x)`` below ``x = 1``,
    ``x - log 2 + log1p(-e^(-2x))`` from there), ``sign w = sign z`` (numpy's, +0 at -0); libm's
    functions, where numpy's vectorised ``log`` and ``exp`` may round the last bit otherwise."""
    x = abs(z)
    if x < 1.0:
        log_sinh = np.log(np.sinh(x))
    else:
        log_sinh = x - LOG2 + np.log1p(-np.exp(-2.0 * x))
    sign = 1.0 if z > 0 else (-1.0 if z < 0 else (0.0 if z == 0 else z))
    return sign, log_delta + log_sinh


@njit(cache=True, nogil=True, error_model="numpy")
def exponents(s, t_old, h, F, y_old, problem):
    """``K = -log c`` at the perturbed point of the dense output at times ``s`` (each in the
    step that covers it, the later one at a shared boundary, as
    :meth:`flows.integrator.segments.Segment.step_of`): ``Dop853DenseOutput``'s polynomial as
    :func:`flows.integrator.segments._dop853_values`, then the float path of ``log c``
    (:meth:`flows.fused.FusedField.log_c`); NaN where that path does not hold (the caller
    takes the numpy path there; :func:`exponent_at` each)."""
    out = np.empty(s.size)
    y = np.empty(y_old.shape[1])
    work = kernels.workspace(problem[0], problem[6].shape[0])
    for q in range(s.size):
        _dense_into(s[q], t_old, h, F, y_old, y)
        out[q] = exponent_at(y, problem, work, s[q])
    return out


@kernels.uncounted(error_model="numpy")
def exponent_at(y, problem, work, time):
    """``K = -log c`` at the perturbed point of the state ``y`` at clock time ``time`` (the float path of
    :meth:`flows.fused.FusedField.log_c`, with the buffers ``work``); NaN where that path does
    not hold."""
    (shape, log_chart, chart_sign, delta, depth, mult, features, loss_id, original, held,
     algorithm_id, hp, limit, pattern, offsets, per_example, _, schedule) = problem  # fmt: skip
    z = y[:-1].reshape(shape)
    if per_example:
        ok, log_c = per_example_into(z, problem, work, time)
        return -log_c if ok else np.nan
    moved = perturbed_into(z, problem, work, time)
    if moved and kernels.in_float_range(work[8], depth, False, limit):
        return -kernels.forward_into(work[8], depth, features, offsets, loss_id, work)
    return np.nan
