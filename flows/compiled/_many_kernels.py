"""The numba kernel of :func:`flows.iterate_many`: the steps of many ``iterate`` runs together.

The runs share the data, the algorithm, the loss and the base optimizer; each has its own
initial iterate and hyper-parameters. Step ``k`` of every run is the step of
:func:`flows.compiled._discrete_kernels.run`, with the same formulas and checks, its elementwise
work in the same order; the arrays hold the runs along their last axis (``theta`` is
``(L, d, runs)``), so that each loop over the entries of a step is a loop over the runs that the
compiler vectorises. The products with the data are taken for every run at once, as
matrix-matrix products (BLAS-3): the loss arguments ``U = A B - o`` of the iterates ``B``
(``d x runs``) and the directions ``G = A^T P`` of the example weights ``P`` (``n x runs``).
A column of such a product is the single run's matrix-vector product summed in another order,
so a run's iterates agree with the single kernel's to rounding, not bit for bit.

A run that a check stops (where the single kernel hands a step back to the Python loop) leaves
the batch with status :data:`HANDED_BACK`; the others go on.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import _field_kernels as kernels
from ._cache import install

install()  # numba's cache keyed on every source of the kernels (flows.compiled._cache)

RUNNING, HANDED_BACK = 0, 1


@njit(cache=True, error_model="numpy")
def run_many(theta, last, record_every, problem, hp, kept, kept_beta, kept_loss, status, buffers):
    """Steps ``1, ..., last`` of every run ``r`` with ``status[r] == RUNNING`` from the iterate
    ``theta[r]`` (``theta`` runs x L x d); returns how many iterates each run recorded.

    ``problem`` is the tuple of :class:`flows.compiled.discrete.CompiledSteps` (its
    hyper-parameters unused: run ``r`` takes the row ``hp[r]``). The iterate of every step that
    ``record_every`` divides, and of step ``last``, goes into ``kept[r, i]`` (``i`` = 1, 2,
    ...), its ``beta = prod_l theta^(l)`` (in layer order, as ``numpy.prod``) into
    ``kept_beta[r, i]`` and its mean loss ``(1/n) sum_i l(u_i)`` into ``kept_loss[r, i]``
    (``i`` = 0, 1, ...; from the loss arguments of its representability check). A run whose initial iterate, or a step, the single
    kernel would hand back gets status
    :data:`HANDED_BACK` and leaves the batch there. The momentum buffers after the last step go
    into ``buffers`` (runs x L x d)."""
    (features, offsets, loss_id, algorithm_id, _, _, eta, momentum, weight_decay,
     limit, loss_limit) = problem  # fmt: skip
    runs, layers, d = theta.shape
    n = features.shape[0]
    transposed = np.ascontiguousarray(features.T)
    w = np.empty((layers, d, runs))
    for r in range(runs):
        for layer in range(layers):
            for j in range(d):
                w[layer, j, r] = theta[r, layer, j]
    buffer = np.zeros((layers, d, runs))
    beta = np.empty((d, runs))
    loo = np.empty((layers, d, runs))
    suffix = np.empty((d, runs))
    point = np.empty((layers, d, runs))
    candidate = np.empty((layers, d, runs))
    step = np.empty((layers, d, runs))
    p = np.empty((n, runs))
    log_c = np.empty(runs)
    scale = np.empty(runs)
    radius = np.empty(runs)
    ok = status == RUNNING
    _retire(ok, status, w, buffer)
    _product_into(w, beta)
    _record_beta(beta, 0, kept_beta)
    _check_finite(beta, ok)
    u = _arguments(features, beta, offsets)
    _check_arguments(u, loss_id, np.inf, ok)
    _record_loss(u, loss_id, 0, kept_loss)
    recorded = 0
    for k in range(1, last + 1):
        _parameters_in_range(w, layers, limit, ok)
        _products_into(w, beta, loo, suffix)
        _weights_into(u, loss_id, p, log_c)
        g = np.dot(transposed, p)
        if algorithm_id != 0:
            _perturbed_point_into(w, g, loo, log_c, algorithm_id, hp, radius, point, ok)
            _point_in_range(point, layers, limit, ok)
            _products_into(point, beta, loo, suffix)
            _retire(ok, status, w, buffer)  # keeps the products of the next step finite
            at_point = _arguments(features, beta, offsets)
            _weights_into(at_point, loss_id, p, log_c)
            g = np.dot(transposed, p)
        for r in range(runs):
            scale[r] = np.exp(log_c[r])
        _step_into(w, buffer, g, loo, scale, eta, momentum, weight_decay, k > 1, step, candidate)
        _product_into(candidate, beta)
        _check_finite(beta, ok)
        u = _arguments(features, beta, offsets)
        _check_arguments(u, loss_id, loss_limit, ok)
        _keep_stopped(ok, candidate, step, w, buffer)
        w, candidate = candidate, w
        buffer, step = step, buffer
        _retire(ok, status, w, buffer)
        if k % record_every == 0 or k == last:
            recorded += 1
            _record_beta(beta, recorded, kept_beta)
            _record_loss(u, loss_id, recorded, kept_loss)
            for r in range(runs):
                if ok[r]:
                    for layer in range(layers):
                        for j in range(d):
                            kept[r, recorded, layer, j] = w[layer, j, r]
    for r in range(runs):
        for layer in range(layers):
            for j in range(d):
                buffers[r, layer, j] = buffer[layer, j, r]
    return recorded


@njit(cache=True, inline="always")
def _record_beta(beta, i, kept_beta):
    """``kept_beta[r, i] = beta[:, r]`` for every run."""
    for r in range(beta.shape[1]):
        for j in range(beta.shape[0]):
            kept_beta[r, i, j] = beta[j, r]


@njit(cache=True, error_model="numpy", inline="always")
def _record_loss(u, loss_id, i, kept_loss):
    """``kept_loss[r, i]`` = the mean loss of run ``r``'s loss arguments (column ``r`` of
    ``u``), summed in order."""
    n, runs = u.shape
    total = np.zeros(runs)
    for k in range(n):
        for r in range(runs):
            total[r] += _loss_value(u[k, r], loss_id)
    for r in range(runs):
        kept_loss[r, i] = total[r] / n


@njit(cache=True, error_model="numpy", inline="always")
def _loss_value(u, loss_id):
    """``l(u)``: logistic ``log(1 + e^-u)`` (as ``numpy.logaddexp(0, -u)``), exponential
    ``e^-u``, squared ``u^2 / 2`` (:data:`flows.model.LOSSES`)."""
    if loss_id == kernels.SQUARED:
        return 0.5 * (u * u)
    if loss_id == 0:
        if u == 0.0:
            return np.log(2.0)
        if u > 0.0:
            return np.log1p(np.exp(-u))
        return -u + np.log1p(np.exp(u))
    return np.exp(-u)


@njit(cache=True, inline="always")
def _retire(ok, status, w, buffer):
    """Mark the runs that a check stopped (``ok[r]`` False) as handed back, and give them
    benign numbers (iterate 1, buffer 0) for the steps the batch still takes."""
    for r in range(ok.size):
        if not ok[r] and status[r] == RUNNING:
            status[r] = HANDED_BACK
            w[:, :, r] = 1.0
            buffer[:, :, r] = 0.0


@njit(cache=True, error_model="numpy", inline="always")
def _arguments(features, beta, offsets):
    """The loss arguments ``u = A beta - o`` of every run (n x runs), in one product."""
    u = np.dot(features, beta)
    for i in range(u.shape[0]):
        for r in range(u.shape[1]):
            u[i, r] -= offsets[i]
    return u


@njit(cache=True, error_model="numpy", inline="always")
def _product_into(w, beta):
    """``beta = prod_l w^(l)`` in layer order (as ``representable`` of the single kernel)."""
    layers, d, runs = w.shape
    for j in range(d):
        for r in range(runs):
            beta[j, r] = w[0, j, r]
    for layer in range(1, layers):
        for j in range(d):
            for r in range(runs):
                beta[j, r] = beta[j, r] * w[layer, j, r]


@njit(cache=True, error_model="numpy", inline="always")
def _check_finite(rows, ok):
    """``ok[r]`` False where column ``r`` of ``rows`` is not finite."""
    runs = ok.size
    nan_if_not_finite = np.zeros(runs)
    for i in range(rows.shape[0]):
        for r in range(runs):
            nan_if_not_finite[r] += rows[i, r] - rows[i, r]
    for r in range(runs):
        if nan_if_not_finite[r] != 0.0:
            ok[r] = False


@njit(cache=True, error_model="numpy", inline="always")
def _check_arguments(u, loss_id, loss_limit, ok):
    """The loss-argument test of the single kernel's ``representable``: every ``u_i`` finite,
    and each within ``loss_limit`` or the mean loss below ``exp(loss_limit)``."""
    n, runs = u.shape
    _check_finite(u, ok)
    largest = np.zeros(runs)
    for i in range(n):
        for r in range(runs):
            largest[r] = max(largest[r], abs(u[i, r]))
    for r in range(runs):
        if ok[r] and not largest[r] <= loss_limit:
            top = -np.inf
            for i in range(n):
                top = max(top, kernels.log_value(u[i, r], loss_id))
            total = 0.0
            for i in range(n):
                total += np.exp(kernels.log_value(u[i, r], loss_id) - top)
            ok[r] = top + np.log(total) - np.log(n) < loss_limit


@njit(cache=True, error_model="numpy", inline="always")
def _extreme_sizes_in_range(w, depth, limit, zero_top, zero_bottom, small_matters, ok):
    """The float-range tests of the single kernel (``parameters_in_range``,
    ``point_in_range``) on each run: ``kernels.extreme_sizes`` then
    ``kernels.sizes_in_float_range``."""
    layers, d, runs = w.shape
    largest = np.zeros(runs)
    smallest = np.full(runs, np.inf)
    for layer in range(layers):
        for j in range(d):
            for r in range(runs):
                v = w[layer, j, r]
                size = abs(v)
                largest[r] = max(largest[r], size if v != 0.0 else zero_top)
                smallest[r] = min(smallest[r], size if v != 0.0 else zero_bottom)
    for r in range(runs):
        if not kernels.sizes_in_float_range(largest[r], smallest[r], depth, limit, small_matters):
            ok[r] = False


@njit(cache=True, error_model="numpy", inline="always")
def _parameters_in_range(w, depth, limit, ok):
    """``parameters_in_range`` of the single kernel (exact zeros count as 1)."""
    _extreme_sizes_in_range(w, depth, limit, 1.0, 1.0, True, ok)


@njit(cache=True, error_model="numpy", inline="always")
def _point_in_range(point, depth, limit, ok):
    """``point_in_range(point, depth, limit, True)`` of the single kernel."""
    _extreme_sizes_in_range(point, depth, limit, 0.0, np.inf, True, ok)


@njit(cache=True, error_model="numpy", inline="always")
def _products_into(w, beta, loo, suffix):
    """``products_into`` of the single kernel on each run: ``beta`` and the leave-one-out
    products ``loo[l]`` as prefix times suffix."""
    layers, d, runs = w.shape
    for j in range(d):
        for r in range(runs):
            loo[0, j, r] = 1.0
            suffix[j, r] = 1.0
    for layer in range(1, layers):
        for j in range(d):
            for r in range(runs):
                loo[layer, j, r] = loo[layer - 1, j, r] * w[layer - 1, j, r]
    for j in range(d):
        for r in range(runs):
            beta[j, r] = loo[layers - 1, j, r] * w[layers - 1, j, r]
    for layer in range(layers - 2, -1, -1):
        for j in range(d):
            for r in range(runs):
                suffix[j, r] = suffix[j, r] * w[layer + 1, j, r]
                loo[layer, j, r] = loo[layer, j, r] * suffix[j, r]


@njit(cache=True, error_model="numpy", inline="always")
def _weights_into(u, loss_id, p, log_c):
    """``kernels.weights_into`` on each run without its product ``G = A^T p`` (taken for every
    run at once): the example weights ``p_i = -l'(u_i) / sum_k |l'(u_k)|`` into ``p`` and
    ``log c`` into ``log_c``, with ``|l'(u_i)|`` where the steepest example's lies in
    ``(DIRECT_LOW, DIRECT_HIGH)``, else in log form."""
    n, runs = u.shape
    best = np.empty(runs)
    for r in range(runs):
        best[r] = u[0, r]
    for i in range(1, n):
        for r in range(runs):
            v = u[i, r]
            if loss_id == kernels.SQUARED:
                best[r] = v if abs(v) > abs(best[r]) else best[r]
            else:
                best[r] = v if v < best[r] else best[r]
    top = np.zeros(runs)
    direct = np.empty(runs, dtype=np.bool_)
    every = True
    for r in range(runs):
        steepest = kernels.abs_derivative(best[r], loss_id)
        direct[r] = kernels.DIRECT_LOW < steepest < kernels.DIRECT_HIGH
        every = every and direct[r]
    for i in range(n):
        for r in range(runs):
            p[i, r] = kernels.abs_derivative(u[i, r], loss_id)
    if not every:
        for r in range(runs):
            if not direct[r]:
                top[r] = _log_sizes_into(u[:, r], loss_id, p[:, r])
    total = np.zeros(runs)
    for i in range(n):
        for r in range(runs):
            total[r] += p[i, r]
    for i in range(n):
        for r in range(runs):
            p[i, r] = p[i, r] * kernels.descent_sign(u[i, r], loss_id) / total[r]
    for r in range(runs):
        if top[r] == -np.inf:
            p[:, r] = 0.0
            log_c[r] = -np.inf
        else:
            log_c[r] = top[r] + np.log(total[r]) - np.log(n)


@njit(cache=True, error_model="numpy")
def _log_sizes_into(u, loss_id, size):
    """``size_i = exp(log|l'(u_i)| - top)`` into ``size`` (one run); returns ``top``, the
    largest ``log|l'(u_i)|`` (``-inf``, with ``size`` 1, where every ``l'(u_i) = 0``)."""
    top = -np.inf
    for i in range(u.size):
        size[i] = kernels.log_abs_derivative(u[i], loss_id)
        top = max(top, size[i])
    for i in range(u.size):
        size[i] = np.exp(size[i] - top) if top > -np.inf else 1.0
    return top


@njit(cache=True, error_model="numpy", inline="always")
def _perturbed_point_into(w, g, loo, log_c, algorithm_id, hp, radius, point, ok):
    """``perturbed_point_into`` of the single kernel on each run: ``point = w + radius step``
    from ``grad L`` ``= G prod_{k != l} w^(k)`` up to ``-c``; ``ok[r]`` False where ``grad L = 0``
    or the radius is not finite."""
    layers, d, runs = w.shape
    norm2 = np.zeros(runs)
    for layer in range(layers):
        for j in range(d):
            for r in range(runs):
                norm2[r] += (g[j, r] * loo[layer, j, r]) ** 2
    norm = np.sqrt(norm2)
    for r in range(runs):
        log_norm = np.log(norm[r]) + log_c[r]
        if not norm[r] > 0 or not np.isfinite(log_norm):
            ok[r] = False
            radius[r] = 0.0
            continue
        radius[r] = kernels.perturbation_radius(algorithm_id, hp[r], log_norm)
        if not np.isfinite(radius[r]):
            ok[r] = False
            radius[r] = 0.0
    for layer in range(layers):
        for j in range(d):
            for r in range(runs):
                entry = g[j, r] * loo[layer, j, r]
                sign = -np.sign(entry)
                step = sign if algorithm_id == 4 else sign * (abs(entry) / norm[r])
                point[layer, j, r] = w[layer, j, r] + radius[r] * step


@njit(cache=True, error_model="numpy", inline="always")
def _step_into(w, buffer, g, loo, scale, eta, momentum, weight_decay, started, step, candidate):
    """The gradient ``-(c G_j prod_{k != l} w^(k))``, the SGD direction ``b_k`` into ``step``
    and ``w - eta b_k`` into ``candidate`` (as the single kernel)."""
    layers, d, runs = w.shape
    for layer in range(layers):
        for j in range(d):
            for r in range(runs):
                direction = -(scale[r] * (g[j, r] * loo[layer, j, r]))
                if weight_decay != 0.0:
                    direction = direction + weight_decay * w[layer, j, r]
                if momentum != 0.0 and started:
                    direction = momentum * buffer[layer, j, r] + direction
                step[layer, j, r] = direction
                candidate[layer, j, r] = w[layer, j, r] - eta * direction


@njit(cache=True, inline="always")
def _keep_stopped(ok, candidate, step, w, buffer):
    """The iterate and direction of each run a check stopped in place of its candidates, so
    that the candidates become every run's next iterate and direction (by a swap of the
    arrays, not a copy)."""
    for r in range(ok.size):
        if not ok[r]:
            candidate[:, :, r] = w[:, :, r]
            step[:, :, r] = buffer[:, :, r]
