"""The numba kernels of :mod:`flows.compiled.discrete`: ``iterate``'s steps in one compiled loop.

A step is ``theta_{k+1} = theta_k - eta b_k`` with ``b_k`` the SGD direction of
:class:`flows.discrete.BaseOptimizer` (momentum, weight decay) driven by the perturbed gradient
``g_k = grad L(theta_k + eps(theta_k))``, or for a per-example algorithm
``g_k = (1/n) sum_i grad l_i(theta_k + eps(grad l_i(theta_k)))`` (:mod:`flows.per_example`).
The perturbation is the one of ``algorithm_id`` (the table entry's ``compiled_id``,
:func:`flows.compiled._field_kernels.perturbed_point_into`), and the gradient is
``grad L = -c G * prod_{k != l} theta^(k)`` from :func:`flows.compiled._field_kernels.forward_into`.

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
    recorded = 0
    while k < last and recorded < kept.shape[0]:
        if per_example:
            ok = per_example_gradient_into(theta, problem, work, ones, point, gradient)
        else:
            ok = perturbed_gradient_into(theta, problem, work, ones, point, gradient)
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
        if not representable(candidate, features, offsets, loss_id, loss_limit, beta):
            return HANDED_BACK, k, recorded, started
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
def perturbed_gradient_into(w, problem, work, ones, point, out):
    """``grad L(w + eps(w))`` into ``out`` (the perturbed point into ``point``), False where
    the numpy float path (:meth:`flows.fused.FusedField._float_velocity`) would not hold
    (``ones``: the layers' multiplicities)."""
    (features, offsets, loss_id, algorithm_id, per_example, hp, eta, momentum, weight_decay,
     limit, loss_limit) = problem  # fmt: skip
    depth = w.shape[0]
    if not parameters_in_range(w, depth, limit):
        return False
    if not kernels.perturbed_point_into(
        w, depth, ones, features, offsets, loss_id, algorithm_id, hp, point, False, work, point
    ):
        return False
    if algorithm_id != 0 and not point_in_range(point, depth, limit, True):
        return False
    log_c = kernels.forward_into(point, depth, features, offsets, loss_id, work)
    scale = np.exp(log_c)
    g, loo = work[3], work[1]
    for layer in range(depth):
        for j in range(w.shape[1]):
            out[layer, j] = -(scale * (g[j] * loo[layer, j]))
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


@njit(cache=True, inline="always")
def representable(theta, features, offsets, loss_id, loss_limit, beta):
    """Whether :func:`flows.discrete._not_representable` accepts ``theta`` without looking at
    the loss: finite parameters, ``beta`` and margins, and every loss argument within
    ``loss_limit`` or the mean loss below ``exp(loss_limit)``."""
    layers, d = theta.shape
    for j in range(d):
        b = 1.0
        for layer in range(layers):
            if not np.isfinite(theta[layer, j]):
                return False
            b *= theta[layer, j]
        if not np.isfinite(b):
            return False
        beta[j] = b
    largest = 0.0
    for i in range(features.shape[0]):
        m = 0.0
        for j in range(d):
            m += features[i, j] * beta[j]
        if not np.isfinite(m):
            return False
        largest = max(largest, abs(m - offsets[i]))
    if largest <= loss_limit:
        return True
    log_l = np.empty(features.shape[0])
    top = kernels.margin_terms_into(beta, features, offsets, loss_id, False, log_l)
    total = 0.0
    for v in log_l:
        total += np.exp(v - top)
    return top + np.log(total) - np.log(log_l.size) < loss_limit
