"""The numba kernels of :mod:`flows.compiled.discrete`: ``iterate``'s steps in one compiled loop.

A step is ``theta_{k+1} = theta_k - eta b_k`` with ``b_k`` the SGD direction of
:class:`flows.discrete.BaseOptimizer` (momentum, weight decay) driven by the perturbed gradient
``g_k = grad L(theta_k + eps(theta_k))``, or for a per-example algorithm
``g_k = (1/n) sum_i grad l_i(theta_k + eps(grad l_i(theta_k)))`` (:mod:`flows.per_example`).
The perturbation is the one of ``algorithm_id`` (the table entry's ``compiled_id``, as in
:func:`flows.compiled._field_kernels.perturbed_point_into`), and the gradient is
``grad L = -c G * prod_{k != l} theta^(k)`` with ``G = sum_i p_i z_i``,
``p_i = -l'(u_i) / sum_k |l'(u_k)|`` and ``c = (1/n) sum_i |l'(u_i)|`` (as
:meth:`flows.fused.FusedField._point_evaluate`).

A step takes two matrix-vector products per gradient, as a hand-written loop does: the loss
arguments ``u = A beta - o`` of the next iterate, computed once for the representability check
and kept for its gradient, and the direction ``G = A^T p``, both in the vectorised loops of
:mod:`flows.compiled._field_kernels` (as fast as a single-threaded BLAS, without a thread pool).

The loop computes only where the numpy float path of :class:`flows.fused.FusedField` (and of
:func:`flows.per_example._float_velocity`) holds, and only keeps a step whose iterate
:func:`flows.discrete._not_representable` would accept without evaluating the loss. Anywhere
else it stops before the step, and the Python loop takes that step (status
:data:`HANDED_BACK`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import _field_kernels as kernels
from ._cache import install

install()  # numba's cache keyed on every source of the kernels (flows.compiled._cache)

FINISHED, HANDED_BACK = 0, 1


@njit(cache=True, error_model="numpy")
def run(theta, buffer, started, k, last, record_every, problem, kept, kept_steps):
    """Steps ``k + 1, ..., last`` from ``theta`` (the iterate at step ``k``), in place.

    ``buffer`` is the momentum buffer ``b_{k-1}`` (unused until ``started``). Every iterate of
    a step that ``record_every`` divides, and the one of step ``last``, goes into ``kept`` and
    its step into ``kept_steps``, until ``kept`` is full. Returns ``(status, k, recorded,
    started)``, ``k`` the last step taken: :data:`FINISHED` at ``last`` or with ``kept`` full,
    :data:`HANDED_BACK` where step ``k + 1`` needs the Python loop (``theta`` and ``buffer`` are
    then those after step ``k``)."""
    (features, offsets, loss_id, algorithm_id, per_example, hp, eta, momentum, weight_decay,
     limit, loss_limit) = problem  # fmt: skip
    layers, d = theta.shape
    work = kernels.workspace(theta.shape, features.shape[0])
    gradient = np.empty((layers, d))
    point = np.empty((layers, d))
    step = np.empty((layers, d))
    candidate = np.empty((layers, d))
    beta = np.empty(d)
    ones = np.ones(layers)
    u = np.empty(features.shape[0])  # the loss arguments at theta
    u_next = np.empty(features.shape[0])
    if not representable(theta, features, offsets, loss_id, np.inf, beta, u):
        return HANDED_BACK, k, 0, started
    recorded = 0
    while k < last and recorded < kept.shape[0]:
        if per_example:
            ok = per_example_gradient_into(theta, problem, work, ones, point, gradient)
        else:
            ok = perturbed_gradient_into(theta, u, u_next, problem, work, point, gradient)
        if not ok:
            return HANDED_BACK, k, recorded, started
        for layer in range(layers):
            for j in range(d):
                direction = gradient[layer, j]
                if weight_decay != 0.0:
                    direction = direction + weight_decay * theta[layer, j]
                if momentum != 0.0 and started:
                    direction = momentum * buffer[layer, j] + direction
                step[layer, j] = direction
                candidate[layer, j] = theta[layer, j] - eta * direction
        if not representable(candidate, features, offsets, loss_id, loss_limit, beta, u_next):
            return HANDED_BACK, k, recorded, started
        u, u_next = u_next, u
        for layer in range(layers):
            for j in range(d):
                theta[layer, j] = candidate[layer, j]
                buffer[layer, j] = step[layer, j]
        started = True
        k += 1
        if k % record_every == 0 or k == last:
            for layer in range(layers):  # loops: an array assignment compiles its error messages
                for j in range(d):
                    kept[recorded, layer, j] = theta[layer, j]
            kept_steps[recorded] = k
            recorded += 1
    return FINISHED, k, recorded, started


@njit(cache=True, error_model="numpy")
def perturbed_gradient_into(w, u, scratch, problem, work, point, out):
    """``grad L(w + eps(w))`` into ``out`` (the perturbed point into ``point``) from the loss
    arguments ``u`` at ``w`` (``scratch``: room for those at the perturbed point; ``work[10]``,
    the per-example kernel's, is scratch here); False where the numpy float path
    (:meth:`flows.fused.FusedField._float_velocity`) would not hold."""
    (features, offsets, loss_id, algorithm_id, per_example, hp, eta, momentum, weight_decay,
     limit, loss_limit) = problem  # fmt: skip
    depth, d = w.shape
    if not parameters_in_range(w, depth, limit):
        return False
    suffix = work[10]
    products_into(w, work[0], work[1], suffix)
    log_c = kernels.weights_into(u, features, loss_id, work[2], work[2], work[3])
    if algorithm_id != 0:
        if not perturbed_point_into(w, algorithm_id, hp, log_c, work, point):
            return False
        if not point_in_range(point, depth, limit, True):
            return False
        products_into(point, work[0], work[1], suffix)
        loss_arguments_into(features, offsets, work[0], scratch)
        log_c = kernels.weights_into(scratch, features, loss_id, work[2], work[2], work[3])
    scale = np.exp(log_c)
    g, loo = work[3], work[1]
    for layer in range(depth):
        for j in range(d):
            out[layer, j] = -(scale * (g[j] * loo[layer, j]))
    return True


@njit(cache=True, error_model="numpy", inline="always")
def products_into(w, beta, loo, suffix):
    """``beta = prod_l w^(l)`` (in layer order, as ``numpy.prod``) and the leave-one-out
    products ``loo[l] = (prod_{k < l} w^(k)) (prod_{k > l} w^(k))`` (prefix times suffix, as
    :func:`flows.fused._exclusive`), by loops along the rows; ``suffix`` (d,) is scratch."""
    layers, d = w.shape
    for j in range(d):
        loo[0, j] = 1.0
        suffix[j] = 1.0
    for layer in range(1, layers):
        for j in range(d):
            loo[layer, j] = loo[layer - 1, j] * w[layer - 1, j]
    for j in range(d):
        beta[j] = loo[layers - 1, j] * w[layers - 1, j]
    for layer in range(layers - 2, -1, -1):
        for j in range(d):
            suffix[j] = suffix[j] * w[layer + 1, j]
            loo[layer, j] = loo[layer, j] * suffix[j]


@njit(cache=True, error_model="numpy", inline="always")
def perturbed_point_into(w, algorithm_id, hp, log_c, work, point):
    """``point = w + eps(w)`` from ``G`` (``work[3]``) and the leave-one-out products
    (``work[1]``) at ``w``: the perturbation ``algorithm_id`` of
    :func:`flows.compiled._field_kernels.perturbed_point_into` (1 l2-SAM ``rho u``, 2 USAM
    ``rho ||grad L|| u``, 3 LE-SAM ``min(sigma / (||grad L|| + varrho), rho_max) u``,
    4 l_inf-SAM ``rho sign(grad L)``, 5 ASAM, 6 the official LE-SAM; ``u = grad L /
    ||grad L||``). False where ``grad L = 0`` or the radius is not finite."""
    direction, loo, g, sign, unit = work[3], work[1], work[4], work[5], work[6]
    groups, d = w.shape
    norm2 = 0.0
    for layer in range(groups):
        for j in range(d):
            g[layer, j] = direction[j] * loo[layer, j]
            norm2 += g[layer, j] ** 2
    norm = np.sqrt(norm2)
    log_norm = np.log(norm) + log_c
    if not norm > 0 or not np.isfinite(log_norm):
        return False
    for layer in range(groups):
        for j in range(d):
            sign[layer, j] = -np.sign(g[layer, j])
            unit[layer, j] = sign[layer, j] * (abs(g[layer, j]) / norm)
    if algorithm_id == 5 or algorithm_id == 6:  # every layer a row of its own
        kernels.theta_scaled_point_into(w, np.ones(groups), algorithm_id, hp, log_norm, unit,
                                        point)  # fmt: skip
        return True
    step = sign if algorithm_id == 4 else unit
    radius = kernels.perturbation_radius(algorithm_id, hp, log_norm)
    if not np.isfinite(radius):
        return False
    for layer in range(groups):
        for j in range(d):
            point[layer, j] = w[layer, j] + radius * step[layer, j]
    return True


@njit(cache=True, error_model="numpy")
def per_example_gradient_into(w, problem, work, ones, point, out):
    """``(1/n) sum_i grad l_i(w + eps_i)``, ``eps_i = eps(grad l_i(w))``, into ``out``:
    ``-c F`` of :func:`flows.compiled._field_kernels.per_example_field_into`; False where the
    numpy float path would not hold there."""
    (features, offsets, loss_id, algorithm_id, per_example, hp, eta, momentum, weight_decay,
     limit, loss_limit) = problem  # fmt: skip
    depth = w.shape[0]
    if not parameters_in_range(w, depth, limit):
        return False
    ok, log_c = kernels.per_example_field_into(
        w, depth, ones, features, offsets, loss_id, algorithm_id, hp, limit, work, point, out
    )
    if not ok:
        return False
    scale = np.exp(log_c)
    for layer in range(depth):
        for j in range(w.shape[1]):
            out[layer, j] = -(scale * out[layer, j])
    return True


@njit(cache=True, inline="always")
def parameters_in_range(w, depth, limit):
    """:meth:`flows.fused.FusedField._float_rows` at ``w`` (exact zeros count as 1): the
    largest ``|w|^L`` within ``exp(+-limit)``, the smallest above ``exp(-4 limit)``."""
    largest, smallest = kernels.extreme_sizes(w, 1.0, 1.0)
    return kernels.sizes_in_float_range(largest, smallest, depth, limit, True)


@njit(cache=True, inline="always")
def point_in_range(point, depth, limit, smallest_matters):
    """The perturbed point's range test of the numpy float path: the largest ``|w|^L`` within
    ``exp(+-limit)`` and, if ``smallest_matters``, the smallest nonzero one above
    ``exp(-4 limit)``."""
    largest, smallest = kernels.extreme_sizes(point, 0.0, np.inf)
    return kernels.sizes_in_float_range(largest, smallest, depth, limit, smallest_matters)


@njit(cache=True, error_model="numpy", inline="always")
def representable(theta, features, offsets, loss_id, loss_limit, beta, u):
    """Whether :func:`flows.discrete._not_representable` accepts ``theta`` without looking at
    the loss: finite parameters, ``beta`` and margins, and every loss argument within
    ``loss_limit`` or the mean loss below ``exp(loss_limit)``. ``beta`` and the loss arguments
    ``u = A beta - o`` go into ``beta`` and ``u``."""
    layers, d = theta.shape
    for j in range(d):
        beta[j] = theta[0, j]
    for layer in range(1, layers):
        for j in range(d):
            beta[j] = beta[j] * theta[layer, j]
    nan_if_not_finite = 0.0  # a non-finite theta makes beta non-finite (inf * 0 = nan)
    for j in range(d):
        nan_if_not_finite += beta[j] - beta[j]
    if nan_if_not_finite != 0.0:
        return False
    loss_arguments_into(features, offsets, beta, u)
    largest, nan_if_not_finite = 0.0, 0.0
    for v in u:
        largest = max(largest, abs(v))
        nan_if_not_finite += v - v
    if nan_if_not_finite != 0.0:
        return False
    if largest <= loss_limit:
        return True
    log_l = np.empty(u.size)
    top = -np.inf
    for i in range(u.size):
        log_l[i] = kernels.log_value(u[i], loss_id)
        top = max(top, log_l[i])
    total = 0.0
    for v in log_l:
        total += np.exp(v - top)
    return top + np.log(total) - np.log(log_l.size) < loss_limit


@njit(cache=True, error_model="numpy", inline="always")
def loss_arguments_into(features, offsets, beta, out):
    """``out = A beta - o`` (``A`` the rows ``z_i``, ``o`` the offsets), by the vectorised loop
    :func:`flows.compiled._field_kernels.margins_into`."""
    kernels.margins_into(features, beta, out)
    for i in range(out.size):
        out[i] -= offsets[i]
