"""The numba kernels of :mod:`flows.compiled.field` (imported only when that backend is used).

Loops over the entries of one parameter point, with the formulas of
:meth:`flows.fused.FusedField._float_rhs`. Every loss acts on the loss arguments
``u_i = <beta, z_i> - o_i`` (:func:`flows.model.loss_arguments`): ``features`` holds the rows
``z_i`` and ``offsets`` the ``o_i`` (zeros in classification, where ``u_i`` is the margin; the
targets in regression, where it is the residual).

The kernels that allocate nothing and are not inlined are compiled without numba's reference
counting (:func:`uncounted`), and so are those of :mod:`flows.compiled._segment_kernels` that
evaluate the field: with it, every array they take, unpack from a tuple or view has its count
raised and lowered by an atomic call, about 200 per evaluation of the l2-SAM field, four times
its arithmetic at n = 1, d = 5. Their loops index 2-D arrays (no ``ravel``, which needs the
counting).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from ..algorithms import ASAM_STABILISER
from ..fused import FLOAT_RANGE
from ..signedlog import LOG2
from ._cache import install

install()  # numba's cache keyed on every source of the kernels (flows.compiled._cache)


def uncounted(**options: Any) -> Any:
    """numba's ``njit`` (cached, the GIL released) without reference counting, with ``options``:
    for the kernels that allocate nothing (see the module docstring)."""
    return njit(cache=True, nogil=True, _nrt=False, **options)  # type: ignore[call-overload]


#: The ``compiled_id`` of the squared loss (:data:`flows.model.LOSSES`): the loss whose example
#: weights are signed (``sign(-l'(u)) = -sign(u)``) and vanish at an exact interpolator.
SQUARED = 2


#: Below :data:`EXP_UNDERFLOW` ``e^x`` rounds to 0, above :data:`EXP_OVERFLOW` to inf: libm's
#: ``exp`` (the version numba calls) answers those through its error path (errno, the SVID
#: handler: 7 ns a call against 4 ns), :func:`quiet_exp` without a call (in the log form of the
#: example weights, most examples' ``e^(log|l'| - top)`` underflow once the margins spread).
EXP_UNDERFLOW, EXP_OVERFLOW = -745.2, 709.8


@njit(cache=True, nogil=True, inline="always")
def quiet_exp(x: float) -> float:
    """``e^x``, the same number as ``np.exp``: 0 below :data:`EXP_UNDERFLOW` and inf above
    :data:`EXP_OVERFLOW` without calling libm (NaN stays NaN)."""
    if x < EXP_UNDERFLOW:
        return 0.0
    if x > EXP_OVERFLOW:
        return np.inf
    return np.exp(x)


#: From here on the logistic's ``log|l'(u)|`` is ``-u`` in floats (:func:`log_abs_derivative`).
LOGISTIC_LINEAR = 37.0


@njit(cache=True, nogil=True, inline="always")
def log_abs_derivative(u: float, loss_id: int) -> float:
    """``log|l'(u)|``: logistic ``-log(1 + e^u)``, exponential ``-u``, squared ``log|u|``.

    The logistic's ``-(max(u, 0) + log1p(e^-|u|))`` is ``-u`` from :data:`LOGISTIC_LINEAR` on:
    there ``log1p(e^-u) < e^-37`` is below half an ulp of ``u`` (the same number, no ``exp``)."""
    if loss_id == 0:
        if u > LOGISTIC_LINEAR:
            return -u
        return -(max(u, 0.0) + np.log1p(quiet_exp(-abs(u))))
    if loss_id == SQUARED:
        return np.log(abs(u))
    return -u


@njit(cache=True, nogil=True, inline="always")
def descent_sign(u: float, loss_id: int) -> float:
    """``sign(-l'(u))``: 1 for the margin losses, ``-sign(u)`` for the squared loss."""
    if loss_id == SQUARED:
        return -np.sign(u)
    return 1.0


#: Where the largest ``|l'(u_i)|`` lies in ``(DIRECT_LOW, DIRECT_HIGH)``, :func:`weights_into`
#: weighs the examples by ``|l'(u_i)|`` itself: their sum is a float, and an example whose
#: ``|l'(u_i)|`` underflows weighs less than ``e^-100`` of the largest.
DIRECT_LOW, DIRECT_HIGH = np.exp(-600.0), np.exp(600.0)


@njit(cache=True, nogil=True, inline="always")
def abs_derivative(u: float, loss_id: int) -> float:
    """``|l'(u)|``: logistic ``1 / (1 + e^u)``, exponential ``e^-u``, squared ``|u|`` (the
    exponentials of :func:`log_abs_derivative`)."""
    if loss_id == 0:
        return 1.0 / (1.0 + quiet_exp(u))
    if loss_id == SQUARED:
        return abs(u)
    return quiet_exp(-u)


@njit(cache=True, nogil=True, inline="always")
def log_derivative_slope(u: float, loss_id: int) -> float:
    """``d log|l'(u)| / du``: logistic ``-sigmoid(u)``, exponential ``-1``, squared ``1 / u``
    (``+-inf`` at ``+-0``, as :func:`flows.model._reciprocal`)."""
    if loss_id == 0:
        return -quiet_exp(-(max(-u, 0.0) + np.log1p(quiet_exp(-abs(u)))))
    if loss_id == SQUARED:
        return 1.0 / u if u != 0 else np.copysign(np.inf, u)
    return -1.0


@njit(cache=True, nogil=True, inline="always")
def log_value(u: float, loss_id: int) -> float:
    """``log l(u)``: logistic ``log log(1 + e^-u)`` (``-u`` beyond ``u = 35``, as
    :func:`flows.model._log_logistic`), exponential ``-u``, squared ``2 log|u| - log 2``."""
    if loss_id == 0:
        if u > 35.0:
            return -u
        return np.log(max(-u, 0.0) + np.log1p(quiet_exp(-abs(u))))
    if loss_id == SQUARED:
        return 2.0 * np.log(abs(u)) - LOG2
    return -u


@njit(cache=True, nogil=True)
def log_mean_loss(w, depth, features, offsets, loss_id):
    """``log L = log((1/n) sum_i l(u_i))`` at float parameters ``w`` (log-sum-exp of the
    ``log l(u_i)``, as :class:`flows.integrator.events.LossFloor`; -inf at an exact
    interpolator of the squared loss)."""
    work = workspace(w.shape, features.shape[0])
    return log_mean_loss_into(w, depth, features, offsets, loss_id, work[0], work[1], work[2])


@njit(cache=True, nogil=True, inline="always")
def log_mean_loss_into(w, depth, features, offsets, loss_id, beta, loo, log_l):
    """:func:`log_mean_loss` with the buffers ``beta`` (d), ``loo`` (G, d) and ``log_l`` (n)."""
    products_into(w, depth, beta, loo)
    top = margin_terms_into(beta, features, offsets, loss_id, False, log_l)
    if not np.isfinite(top):
        return top
    total = 0.0
    for i in range(log_l.size):
        total += quiet_exp(log_l[i] - top)
    return top + np.log(total) - np.log(log_l.size)


@njit(cache=True, nogil=True, inline="always")
def margin_terms_into(beta, features, offsets, loss_id, derivative, out):
    """``out[i] = log|l'(u_i)|`` (``derivative``) or ``log l(u_i)`` at the loss arguments
    ``u = A beta - o`` (rows of ``features``, ``offsets``); returns the largest."""
    margins_into(features, beta, out)
    top = -np.inf
    for i in range(out.size):
        u = out[i] - offsets[i]
        out[i] = log_abs_derivative(u, loss_id) if derivative else log_value(u, loss_id)
        top = max(top, out[i])
    return top


@uncounted(fastmath={"reassoc", "contract"})
def margins_into(features, beta, out):
    """``out_i = sum_j A_ij beta_j`` (``A`` = ``features``), two rows per pass over ``beta``.

    The sums may be reassociated (``fastmath``): the compiler then sums each row in vector
    registers, as BLAS does (n 200, d 1000: 22 us, as numpy's single-threaded ``A @ beta``,
    against 40 us summed in order). The kernels call no BLAS: a threaded BLAS on a loaded
    machine can take ten times longer than one thread (its threads wait for cores)."""
    n, d = features.shape
    i = 0
    while i + 2 <= n:
        m0, m1 = 0.0, 0.0
        for j in range(d):
            m0 += features[i, j] * beta[j]
            m1 += features[i + 1, j] * beta[j]
        out[i], out[i + 1] = m0, m1
        i += 2
    if i < n:
        m = 0.0
        for j in range(d):
            m += features[i, j] * beta[j]
        out[i] = m


@uncounted()
def weighted_rows_into(p, features, out):
    """``out_j = sum_i p_i A_ij`` (``A`` = ``features``), summed over ``i`` in order from 0 for
    every ``j`` (as a loop over the rows, vectorised over ``j``), four rows per pass over
    ``out``."""
    n, d = features.shape
    out[:] = 0.0
    i = 0
    while i + 4 <= n:
        p0, p1, p2, p3 = p[i], p[i + 1], p[i + 2], p[i + 3]
        for j in range(d):
            acc = out[j] + p0 * features[i, j]
            acc += p1 * features[i + 1, j]
            acc += p2 * features[i + 2, j]
            out[j] = acc + p3 * features[i + 3, j]
        i += 4
    for k in range(i, n):
        for j in range(d):
            out[j] += p[k] * features[k, j]


@njit(cache=True, nogil=True)
def forward(w, depth, features, offsets, loss_id):
    """Direction ``G`` (d,), ``log c`` and leave-one-out products (G, d) at floats ``w``."""
    work = workspace(w.shape, features.shape[0])
    log_c = forward_into(w, depth, features, offsets, loss_id, work)
    return work[3], log_c, work[1]


@njit(cache=True, nogil=True, inline="always")
def products_into(w, depth, beta, loo):
    """``beta = prod_l w^(l)`` (d,) and the leave-one-out products ``prod_{k != l} w^(k)``
    (G, d) into ``beta`` and ``loo``."""
    groups, d = w.shape
    for j in range(d):
        if groups == 1:
            beta[j] = w[0, j] ** depth
            loo[0, j] = w[0, j] ** (depth - 1)
        else:
            b = 1.0
            for layer in range(groups):
                b *= w[layer, j]
                p = 1.0
                for k in range(groups):
                    if k != layer:
                        p *= w[k, j]
                loo[layer, j] = p
            beta[j] = b


@njit(cache=True, nogil=True, inline="always")
def forward_into(w, depth, features, offsets, loss_id, work):
    """:func:`forward` into the buffers ``work = (beta, loo, size, direction, ...)`` (see
    :func:`workspace`; ``size`` ends as ``|l'(u_i)|`` up to one factor, ``work[12]`` as the
    example weights ``p``, :func:`weights_into`); returns ``log c``."""
    top, total = forward_scaled_into(w, depth, features, offsets, loss_id, work)
    return log_c_from(top, total, features.shape[0])


@njit(cache=True, nogil=True, inline="always")
def forward_scaled_into(w, depth, features, offsets, loss_id, work):
    """:func:`forward_into` up to ``log c``: returns its parts ``(top, total)``
    (:func:`weights_scaled_into`)."""
    p = work[12]
    products_into(w, depth, work[0], work[1])
    margins_into(features, work[0], p)
    for i in range(features.shape[0]):
        p[i] -= offsets[i]  # the loss argument u_i
    return weights_scaled_into(p, features, loss_id, work[2], p, work[3])


@njit(cache=True, nogil=True, inline="always")
def steepest(u, loss_id: int) -> float:
    """The loss argument of largest ``|l'|``: the largest ``|u_i|`` for the squared loss, the
    smallest ``u_i`` for the margin losses (their ``|l'|`` decreases)."""
    best = u[0]
    for i in range(1, u.size):
        if (abs(u[i]) > abs(best)) if loss_id == SQUARED else (u[i] < best):
            best = u[i]
    return best


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def weights_into(u, features, loss_id, size, p, direction):
    """:func:`weights_scaled_into`, returning ``log c`` (:func:`log_c_from`)."""
    top, total = weights_scaled_into(u, features, loss_id, size, p, direction)
    return log_c_from(top, total, u.size)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def log_c_from(top: float, total: float, n: int) -> float:
    """``log c = top + log total - log n`` from the parts :func:`weights_scaled_into` returns
    (``-inf`` where ``top`` is: every ``l'(u_i) = 0``)."""
    if top == -np.inf:
        return -np.inf
    return top + np.log(total) - np.log(n)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def weights_scaled_into(u, features, loss_id, size, p, direction):
    """The example weights ``p_i = -l'(u_i) / sum_k |l'(u_k)|`` into ``p`` (which may be ``u``
    or ``size``), ``size_i = |l'(u_i)|`` up to one factor, and ``G = sum_i p_i z_i`` into
    ``direction``, from the loss arguments ``u``; returns ``(top, total)``, the parts of
    ``log c = log((1/n) sum_i |l'(u_i)|) = top + log total - log n`` (:func:`log_c_from`: two
    ``log`` calls, which a caller that needs no ``c`` skips).

    With ``|l'(u_i)|`` (:func:`abs_derivative`) where its largest lies in
    ``(DIRECT_LOW, DIRECT_HIGH)``, else in log form, as
    :meth:`flows.fused.FusedField._point_evaluate`: ``size_i = exp(log|l'(u_i)| - top)``,
    ``p_i = sign(-l'(u_i)) size_i / sum size``, ``log c = top + log sum size - log n`` (``p = 0``,
    ``G = 0`` and ``-inf`` where every ``l'(u_i) = 0``, an exact interpolator of the squared
    loss)."""
    n = u.size
    top = 0.0
    if DIRECT_LOW < abs_derivative(steepest(u, loss_id), loss_id) < DIRECT_HIGH:
        for i in range(n):
            size[i] = abs_derivative(u[i], loss_id)
    else:
        top = -np.inf
        for i in range(n):
            size[i] = log_abs_derivative(u[i], loss_id)
            top = max(top, size[i])
        if top == -np.inf:
            size[:] = 0.0
            p[:] = 0.0
            direction[:] = 0.0
            return top, 0.0
        for i in range(n):
            size[i] = quiet_exp(size[i] - top)
    total = 0.0
    for i in range(n):
        total += size[i]
    for i in range(n):
        p[i] = size[i] * descent_sign(u[i], loss_id) / total
    weighted_rows_into(p, features, direction)
    return top, total


@njit(cache=True, nogil=True)
def workspace(shape, n):
    """Buffers for the ``*_into`` kernels at parameters of ``shape`` (G, d) and ``n`` examples:
    ``(beta, loo, log_w, direction)`` of :func:`forward_into`, then ``g``, ``sign``, ``unit``
    (:func:`summary_into`), ``w``, the perturbed point, the velocity ``F`` (G, d), an
    example's ``beta`` (d) and leave-one-out products (G, d)
    (:func:`per_example_field_into`), the example weights ``p`` (n) of
    :func:`forward_into`, and the hyper-parameters at an evaluation's time
    (:func:`hyperparameters_into`, :data:`MOST_HYPERPARAMETERS`)."""
    groups, d = shape
    return (np.empty(d), np.empty((groups, d)), np.empty(n), np.empty(d),
            np.empty((groups, d)), np.empty((groups, d)), np.empty((groups, d)),
            np.empty((groups, d)), np.empty((groups, d)), np.empty((groups, d)),
            np.empty(d), np.empty((groups, d)), np.empty(n),
            np.empty(MOST_HYPERPARAMETERS))  # fmt: skip


#: Hyper-parameters of an algorithm of the table, at most (:func:`workspace`'s buffer).
MOST_HYPERPARAMETERS = 8
#: The schedules (:mod:`flows.schedules`) the compiled field evaluates, by their code in a row of
#: the schedule table (:func:`hyperparameters_into`; 0: the hyper-parameter is a number).
SCHEDULE_CODES = {"cosine": 1, "warmup_cosine": 2}


@njit(cache=True, nogil=True, inline="always")
def cosine_at(t: float, value: float, t_end: float) -> float:
    """:func:`flows.schedules.cosine` at one time: ``value (1 + cos(pi t / t_end)) / 2`` on
    ``[0, t_end]`` (a phase that overflows, ``t_end`` subnormal, clipped as there)."""
    if t_end <= 0:
        return value if t < 0 else 0.0
    phase = min(max(t / t_end, 0.0), 1.0)
    return 0.5 * value * (1.0 + np.cos(np.pi * phase))


@njit(cache=True, nogil=True, inline="always")
def warmup_cosine_at(t: float, value: float, t_warmup: float, t_hold: float, t_end: float) -> float:
    """:func:`flows.schedules.warmup_cosine` at one time."""
    if t >= t_hold:
        return cosine_at(t - t_hold, value, t_end - t_hold)
    if t_warmup <= 0:
        return value
    return value * min(max(t / t_warmup, 0.0), 1.0)


@njit(cache=True, nogil=True, inline="always")
def hyperparameters_into(hp, schedule, time, out):
    """The hyper-parameters at clock time ``time`` into ``out`` (returned): ``hp[k]`` where row
    ``k`` of ``schedule`` starts with 0, else its schedule (:data:`SCHEDULE_CODES`) with the
    arguments that follow."""
    for k in range(hp.size):
        code = schedule[k, 0]
        if code == 1.0:
            out[k] = cosine_at(time, schedule[k, 1], schedule[k, 2])
        elif code == 2.0:
            out[k] = warmup_cosine_at(
                time, schedule[k, 1], schedule[k, 2], schedule[k, 3], schedule[k, 4]
            )
        else:
            out[k] = hp[k]
    return out


@njit(cache=True, nogil=True)
def parameters(z, log_chart, chart_sign, delta, depth, limit):
    """Float parameters from chart coordinates, and whether they are in the float range
    (see :meth:`FusedField._float_rows`)."""
    w = np.empty(z.shape)
    ok = parameters_into(z, log_chart, chart_sign, delta, depth, limit, w)
    return w, ok


@njit(cache=True, nogil=True, inline="always")
def parameters_into(z, log_chart, chart_sign, delta, depth, limit, w):
    """:func:`parameters` into ``w``; returns the range flag."""
    groups, d = z.shape
    for layer in range(groups):
        for j in range(d):
            if log_chart:
                w[layer, j] = chart_sign[layer, j] * quiet_exp(z[layer, j])
            else:
                w[layer, j] = delta * sinh(z[layer, j])
    return in_float_range(w, depth, log_chart, limit)


#: ``1 / (2k + 1)!``, k = 0..9: the Taylor coefficients of ``sinh z / z`` in ``z^2`` (:func:`sinh`).
SINH_TAYLOR = np.array([1.0 / math.factorial(2 * k + 1) for k in range(10)])


@njit(cache=True, nogil=True, inline="always")
def sinh(z: float) -> float:
    """``sinh z`` with at most one exponential (libm's ``sinh`` takes an ``expm1``, 2.3x the time):
    ``z sum_{k <= 9} z^2k / (2k + 1)!`` for ``|z| < 1`` (the rest below ``1e-19`` of the sum),
    ``sign(z) (e - 1 / e) / 2`` with ``e = e^|z|`` beyond (within 3e-16 of libm's: the
    difference loses at most ``coth 1 = 1.3`` ulp; inf from ``|z| = 709.8``, where ``w`` is far
    outside the float range, libm's from 710.5)."""
    size = abs(z)
    if size < 1.0:
        square = z * z
        total = SINH_TAYLOR[9]
        for k in range(8, -1, -1):
            total = total * square + SINH_TAYLOR[k]
        return z * total
    e = quiet_exp(size)
    return np.copysign(0.5 * (e - 1.0 / e), z)


@njit(cache=True, nogil=True)
def summary(w, depth, multiplicity, features, offsets, loss_id, pattern, use_pattern):
    """``GradientSummary`` of ``grad L`` at ``w``: unit, sign, log norm (ok flag first)."""
    work = workspace(w.shape, features.shape[0])
    ok, log_norm = summary_into(
        w, depth, multiplicity, features, offsets, loss_id, pattern, use_pattern, work
    )
    return ok, work[6].copy(), work[5].copy(), log_norm


@uncounted(forceinline=True)
def summary_into(w, depth, multiplicity, features, offsets, loss_id, pattern, use_pattern, work):
    """:func:`summary` into ``work`` (sign ``work[5]``, unit ``work[6]``); returns
    ``(ok, log norm)`` (not ok where ``grad L = 0``, e.g. at an exact interpolator)."""
    norm, top, total = summary_scaled_into(
        w, depth, multiplicity, features, offsets, loss_id, pattern, use_pattern, work
    )
    return norm > 0, log_norm_from(norm, top, total, features.shape[0])


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def log_norm_from(norm: float, top: float, total: float, n: int) -> float:
    """``log ||grad L|| = log norm + log c`` from the parts :func:`summary_scaled_into`
    returns."""
    return np.log(norm) + log_c_from(top, total, n)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def log_norm_finite(norm: float, top: float, total: float) -> bool:
    """Whether :func:`log_norm_from` is finite at ``norm > 0``, without its three ``log`` calls:
    ``log norm`` is finite for a finite positive ``norm``, and ``log c`` for finite ``top``
    and ``total`` (then ``total >= 1``, or above ``DIRECT_LOW``; the sum of such terms does
    not overflow: ``log norm`` and ``log total`` are below 800)."""
    return np.isfinite(norm) and np.isfinite(top) and np.isfinite(total)


@uncounted(forceinline=True)
def summary_scaled_into(
    w, depth, multiplicity, features, offsets, loss_id, pattern, use_pattern, work
):  # fmt: skip
    """:func:`summary_into` up to its logarithms: returns ``(norm, top, total)``, ``norm``
    the length of ``grad L / c`` (its unit direction into ``work[6]``) and ``(top, total)``
    the parts of ``log c`` (:func:`weights_scaled_into`)."""
    top, total = forward_scaled_into(w, depth, features, offsets, loss_id, work)
    direction, loo, g, sign, unit = work[3], work[1], work[4], work[5], work[6]
    groups, d = w.shape
    norm2 = 0.0
    for layer in range(groups):
        for j in range(d):
            g[layer, j] = direction[j] * loo[layer, j]
            norm2 += multiplicity[layer] * g[layer, j] ** 2
    norm = np.sqrt(norm2)
    for layer in range(groups):
        for j in range(d):
            if use_pattern:
                sign[layer, j] = pattern[layer, j]
            else:
                sign[layer, j] = -np.sign(g[layer, j])
            unit[layer, j] = sign[layer, j] * (abs(g[layer, j]) / norm) if norm > 0 else 0.0
    return norm, top, total


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def perturbed_point_into(w, depth, multiplicity, features, offsets, loss_id, algorithm_id, hp,
                         pattern, frozen, work, point):  # fmt: skip
    """``point = w + eps(w)`` for the perturbation ``algorithm_id`` (an entry's
    ``compiled_id`` in :data:`flows.algorithms.ALGORITHMS`, ``hp`` its hyper-parameters in the
    entry's order): 0 GD, 1 l2-SAM ``rho u``, 2 USAM ``rho ||grad L|| u``, 3 LE-SAM
    ``min(sigma / (||grad L|| + varrho), rho_max) u``, 4 l_inf-SAM ``rho sign(grad L)`` (the signs
    ``pattern`` where ``frozen``), 5 ASAM and 6 the official LE-SAM
    (:func:`theta_scaled_point_into`), with
    ``u = grad L / ||grad L||``. False where ``grad L = 0`` or the radius is not finite (the
    numpy path decides there)."""
    for layer in range(w.shape[0]):
        for j in range(w.shape[1]):
            point[layer, j] = w[layer, j]
    if algorithm_id == 0:
        return True
    if algorithm_id == 4 and frozen:
        _add_scaled(point, w, hp[0], pattern)
        return True
    norm, top, total = summary_scaled_into(
        w, depth, multiplicity, features, offsets, loss_id, pattern, False, work
    )
    if not norm > 0:
        return False
    if algorithm_id == 1 or algorithm_id == 4:  # the radius rho: log ||grad L|| only tested
        log_norm, finite = 0.0, log_norm_finite(norm, top, total)
    else:
        log_norm = log_norm_from(norm, top, total, features.shape[0])
        finite = np.isfinite(log_norm)
    if not finite:
        return False
    if algorithm_id == 5 or algorithm_id == 6:
        theta_scaled_point_into(w, multiplicity, algorithm_id, hp, log_norm, work[6], point)
        return True
    radius = perturbation_radius(algorithm_id, hp, log_norm)
    if not np.isfinite(radius):
        return False
    _add_scaled(point, w, radius, work[5] if algorithm_id == 4 else work[6])
    return True


@uncounted(error_model="numpy")
def theta_scaled_point_into(w, multiplicity, algorithm_id, hp, log_norm, unit, point):
    """The perturbed point of 5 ASAM (:func:`asam_point_into`) or 6 the official LE-SAM
    (:func:`official_lesam_point_into`), whose perturbations read ``|w|``: called, not inlined
    (one compiled copy serves every kernel that calls it)."""
    if algorithm_id == 5:
        asam_point_into(w, multiplicity, hp, log_norm, unit, point)
    else:
        official_lesam_point_into(w, multiplicity, hp, log_norm, unit, point)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def asam_point_into(w, multiplicity, hp, log_norm, unit, point):
    """ASAM's perturbed point (:func:`flows.algorithms.asam_perturbation`, ``hp`` its
    ``(rho, eta_asam)``): ``point = w + rho T^2 u / (||T u|| + 1e-16 / ||grad L||)`` with
    ``T = |w| + eta_asam`` and ``u`` the unit gradient (``||grad L|| = e^log_norm``; the norm
    counts each row ``multiplicity`` times); in floats, ``|w|`` being in the float range."""
    groups, d = w.shape
    total = 0.0
    for layer in range(groups):
        for j in range(d):
            scaled = (abs(w[layer, j]) + hp[1]) * unit[layer, j]
            total += multiplicity[layer] * scaled * scaled
    denominator = np.sqrt(total) + ASAM_STABILISER * quiet_exp(-log_norm)
    factor = hp[0] / denominator if denominator > 0 else 0.0
    for layer in range(groups):
        for j in range(d):
            size = abs(w[layer, j]) + hp[1]
            point[layer, j] = w[layer, j] + factor * size * size * unit[layer, j]


@njit(cache=True, nogil=True, inline="always")
def log_add_exp(a: float, b: float) -> float:
    """``log(e^a + e^b)`` (-inf where both are)."""
    top = max(a, b)
    if top == -np.inf:
        return top
    return top + np.log1p(np.exp(-abs(a - b)))


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def official_lesam_point_into(w, multiplicity, hp, log_norm, unit, point):
    """The official LE-SAM's perturbed point (:func:`flows.algorithms.official_lesam_perturbation`,
    ``hp`` its ``(sigma, rho_max, eps, adaptive)``): ``point = w + rho_t s grad L / (N + e)``,
    ``N = sqrt(||s grad L||^2 + e)``, ``rho_t = sigma / (N + e)`` capped at ``rho_max`` where
    that is positive, ``s = |w|`` if ``adaptive`` else 1, ``e = eps``; from ``log ||grad L||``
    (``log_norm``) and the unit gradient ``unit``, in log form as there (the norm counts each
    row ``multiplicity`` times)."""
    groups, d = w.shape
    sigma, rho_max, e, adaptive = hp[0], hp[1], hp[2], hp[3] != 0.0
    total = 0.0
    for layer in range(groups):
        for j in range(d):
            scaled = (abs(w[layer, j]) if adaptive else 1.0) * unit[layer, j]
            total += multiplicity[layer] * scaled * scaled
    log_e = np.log(e)
    log_n = 0.5 * log_add_exp(2.0 * (log_norm + 0.5 * np.log(total)), log_e)
    log_shifted = log_add_exp(log_n, log_e)  # log(N + e)
    rate = sigma * np.exp(-log_shifted)
    if rho_max > 0:
        rate = min(rate, rho_max)
    factor = rate * np.exp(log_norm - log_shifted)
    for layer in range(groups):
        for j in range(d):
            size = abs(w[layer, j]) if adaptive else 1.0
            point[layer, j] = w[layer, j] + factor * size * unit[layer, j]


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def perturbation_radius(algorithm_id, hp, log_norm):
    """The size of the step ``eps = radius * direction`` of perturbation ``algorithm_id`` (the
    direction ``sign(grad L)`` for 4, ``grad L / ||grad L||`` otherwise) from
    ``log ||grad L||``: 1 l2-SAM and 4 l_inf-SAM ``rho``, 2 USAM ``rho ||grad L||``, 3 LE-SAM
    ``min(sigma / (||grad L|| + varrho), rho_max)``."""
    if algorithm_id == 1 or algorithm_id == 4:
        return hp[0]
    if algorithm_id == 2:
        return hp[0] * np.exp(log_norm)
    return min(hp[0] / (np.exp(log_norm) + hp[2]), hp[1])


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _add_scaled(out, a, scale, b):
    """``out = a + scale * b`` (elementwise, shape (G, d))."""
    for layer in range(a.shape[0]):
        for j in range(a.shape[1]):
            out[layer, j] = a[layer, j] + scale * b[layer, j]


@njit(cache=True, nogil=True)
def chart_velocity(
    w, point, held, depth, features, offsets, loss_id, original_clock, log_chart, delta, limit
):
    """``d(z, tau)/ds`` from the perturbed point (ok flag first)."""
    out = np.zeros(w.size + 1)
    work = workspace(w.shape, features.shape[0])
    ok = chart_velocity_into(w, point, held, depth, features, offsets, loss_id,
                             original_clock, log_chart, delta, limit, work, out)  # fmt: skip
    return ok, out


@njit(cache=True, nogil=True, inline="always")
def extreme_sizes(point, zero_top, zero_bottom):
    """``(largest, smallest)`` of ``|w_ij|`` over ``point``, an exact zero counting as
    ``zero_top`` for the largest and as ``zero_bottom`` for the smallest."""
    largest, smallest = 0.0, np.inf
    for layer in range(point.shape[0]):
        for j in range(point.shape[1]):
            v = point[layer, j]
            size = abs(v)
            largest = max(largest, size if v != 0.0 else zero_top)
            smallest = min(smallest, size if v != 0.0 else zero_bottom)
    return largest, smallest


#: ``exp(+-FLOAT_RANGE)`` and ``exp(-4 FLOAT_RANGE)``, each moved inward by ``1e-9`` of its
#: logarithm: bounds that a power ``|w|^L`` multiplied out in floats (relative error below
#: ``L eps``) can pass only where ``L log|w|`` passes the exact ones too
#: (:func:`sizes_in_float_range`).
SURELY_BELOW_TOP = math.exp(FLOAT_RANGE * (1.0 - 1e-9))
SURELY_ABOVE_BOTTOM = math.exp(-FLOAT_RANGE * (1.0 - 1e-9))
SURELY_ABOVE_SMALLEST = math.exp(-4.0 * FLOAT_RANGE * (1.0 - 1e-9))


@njit(cache=True, nogil=True, inline="always")
def power(x: float, depth: int) -> float:
    """``x^depth`` multiplied out (``depth >= 1``; relative error below ``depth eps``)."""
    out = x
    for _ in range(depth - 1):
        out *= x
    return out


@njit(cache=True, nogil=True, inline="always")
def sizes_in_float_range(largest, smallest, depth, limit, small_matters):
    """The test of :meth:`FusedField._float_rows` on the extreme sizes of a point: ``largest^L``
    within ``exp(+-limit)`` and, if ``small_matters``, ``smallest^L`` above ``exp(-4 limit)``
    (one ``log`` each: it is increasing).

    At ``limit = FLOAT_RANGE`` the powers multiplied out are compared first with bounds moved
    inward (:data:`SURELY_BELOW_TOP`, ...), where the logarithms' test holds as well: the two
    ``log`` calls it saves are ~35 ns of the ~440 ns of a one-example field evaluation, which
    takes the test twice. Elsewhere (near a bound, an overflow, a NaN) the logarithms decide."""
    if limit == FLOAT_RANGE:
        big = power(largest, depth)
        if SURELY_ABOVE_BOTTOM < big < SURELY_BELOW_TOP and (
            not small_matters or power(smallest, depth) > SURELY_ABOVE_SMALLEST
        ):
            return True
    top = depth * np.log(largest)
    return -limit < top < limit and (not small_matters or depth * np.log(smallest) > -4.0 * limit)


@njit(cache=True, nogil=True, inline="always")
def in_float_range(point, depth, log_chart, limit):
    """Whether float parameters ``point`` are in the float range (see
    :meth:`FusedField._float_rows`, where an exact zero is ``log|w| = -inf``: small entries
    matter in the log chart only)."""
    largest, smallest = extreme_sizes(point, 0.0, 0.0)
    return sizes_in_float_range(largest, smallest, depth, limit, log_chart)


@uncounted(forceinline=True)
def chart_velocity_into(
    w, point, held, depth, features, offsets, loss_id, original_clock, log_chart, delta, limit,
    work, out,
):  # fmt: skip
    """:func:`chart_velocity` into ``out`` (zeros where the flag is False); the velocity
    ``F = G(w') prod_{k != l} w'`` stays in ``work[9]``."""
    groups, d = w.shape
    out[:] = 0.0
    if not in_float_range(point, depth, log_chart, limit):
        return False
    top, total = forward_scaled_into(point, depth, features, offsets, loss_id, work)
    # chart_map_into reads log c in the original clock only
    log_c = log_c_from(top, total, features.shape[0]) if original_clock else 0.0
    direction, loo, velocity = work[3], work[1], work[9]
    for layer in range(groups):
        for j in range(d):
            velocity[layer, j] = direction[j] * loo[layer, j]
    return chart_map_into(velocity, log_c, w, held, original_clock, log_chart, delta, out)


@njit(cache=True, nogil=True, inline="always")
def chart_map_into(velocity, log_c, w, held, original_clock, log_chart, delta, out):
    """``d(z, tau)/ds`` from the rescaled velocity ``F`` (G, d) and ``log c``: ``(dtau/ds) F / w``
    in the log chart, ``(dtau/ds) F / (delta cosh z)`` in the asinh chart (``w`` being
    ``delta sinh z``, ``cosh z = sqrt(1 + (w / delta)^2)``: a square root, not a second
    transcendental function, and ``|w / delta|`` beyond 1e150, where the square overflows),
    ``dtau/ds = c`` in the original clock and 1 in the rescaled one, held entries 0; the last
    entry ``dtau/ds``. One branch-free loop per chart over the flat entries (selections, so that
    the compiler vectorises the divisions and square roots)."""
    groups, d = w.shape
    speed = np.exp(log_c) if original_clock else 1.0
    for layer in range(groups):
        row = layer * d
        if log_chart:
            for j in range(d):
                rate = speed * velocity[layer, j] / w[layer, j]
                out[row + j] = 0.0 if held[layer, j] else rate
        else:
            for j in range(d):
                ratio = abs(w[layer, j] / delta)
                cosh = np.sqrt(1.0 + ratio * ratio) if ratio < 1e150 else ratio
                rate = speed * velocity[layer, j] / (delta * cosh)
                out[row + j] = 0.0 if held[layer, j] else rate
    out[groups * d] = speed
    return True


@uncounted(error_model="numpy")
def per_example_field_into(w, depth, multiplicity, features, offsets, loss_id, algorithm_id, hp,
                           limit, work, point, velocity):  # fmt: skip
    """The per-example field (:mod:`flows.per_example`) at float parameters ``w`` (G, d):
    ``F = sum_i q_i z_i prod_{k != l} w_i^(k)`` into ``velocity``, ``w_i = w + eps(grad l_i(w))``
    (``algorithm_id`` 1: ``rho`` times the unit gradient; 2: ``rho grad l_i``; norms over the
    layers counted with ``multiplicity``), ``q_i = s_i |l'(u_i(w_i))| / sum_k |l'(u_k(w_k))|``;
    returns ``(ok, log c)``, ``c = (1/n) sum_i |l'(u_i(w_i))|``. The sizes ``|l'|`` stay in log
    form, as in :func:`flows.per_example._float_velocity`: an example's unit gradient is
    ``-s_i h_i / ||h_i||`` (``h_i = z_i prod_{k != l} w^(k)``, its norm ``|l'(u_i)| ||h_i||``),
    and the weights are summed relative to the largest ``log|l'(u_i(w_i))|`` seen so far (the
    sums rescaled where a larger one comes). Not ok where that float path would not hold: a
    ``log|l'(u_i)|`` not finite or an ``h_i`` of norm 0 or not finite, a perturbed point
    outside the float range (``point`` is the scratch for it), or every ``l'(u_i(w_i)) = 0``."""
    groups, d = w.shape
    n = features.shape[0]
    beta, loo, h = work[0], work[1], work[4]
    example_beta, example_loo = work[10], work[11]
    products_into(w, depth, beta, loo)
    for layer in range(groups):
        for j in range(d):
            velocity[layer, j] = 0.0
    top, total = -np.inf, 0.0
    for i in range(n):
        u = -offsets[i]
        for j in range(d):
            u += features[i, j] * beta[j]
        log_size = log_abs_derivative(u, loss_id)
        s = descent_sign(u, loss_id)
        norm2 = 0.0
        for layer in range(groups):
            for j in range(d):
                h[layer, j] = s * features[i, j] * loo[layer, j]  # -grad l_i / |l'(u_i)|
                norm2 += multiplicity[layer] * h[layer, j] ** 2
        norm = np.sqrt(norm2)
        if not (norm > 0.0 and np.isfinite(norm) and np.isfinite(log_size)):
            return False, 0.0
        radius = hp[0] if algorithm_id == 1 else hp[0] * np.exp(np.log(norm) + log_size)
        for layer in range(groups):
            for j in range(d):
                point[layer, j] = w[layer, j] + radius * (-h[layer, j] / norm)
        if not in_float_range(point, depth, False, limit):
            return False, 0.0
        products_into(point, depth, example_beta, example_loo)
        u = -offsets[i]
        for j in range(d):
            u += features[i, j] * example_beta[j]
        log_size = log_abs_derivative(u, loss_id)
        if log_size == -np.inf:  # l'(u_i) = 0: no weight
            continue
        if not log_size < np.inf:
            return False, 0.0
        if log_size > top:  # the sums so far, relative to the new largest
            shrink = quiet_exp(top - log_size)
            total *= shrink
            for layer in range(groups):
                for j in range(d):
                    velocity[layer, j] *= shrink
            top = log_size
        size = quiet_exp(log_size - top)
        total += size
        weight = descent_sign(u, loss_id) * size
        for layer in range(groups):
            for j in range(d):
                velocity[layer, j] += weight * features[i, j] * example_loo[layer, j]
    if top == -np.inf:
        return False, 0.0
    for layer in range(groups):
        for j in range(d):
            velocity[layer, j] = velocity[layer, j] / total
    return True, top + np.log(total) - np.log(n)
