"""l_inf-SAM's sliding combination compiled (numba, extra ``fast``; driven by
:class:`flows.compiled.sliding.CompiledSliding`).

:func:`evaluate` is :meth:`flows.integrator.filippov.FilippovField.evaluate_batch` in plain floats: for each
vertex ``v`` (a frozen ``sign(grad L) = s_v``) the perturbed point ``w' = w + rho s_v``, its
field ``F_v = G(w') prod_{k != l} w'``, clock factor ``c_v`` and chart velocity, and the normal
rates of the sliding surfaces: ``F_v`` at the entry for a parameter surface ``w = 0``, and
``dG_j/dtau`` along ``F_v`` for a direction surface ``G_j = 0``, with

    d|p_i| = |p_i| (a_i dm_i - sum_k |p_k| a_k dm_k),  a = d log|l'| / du,  dm_i = <z_i, dbeta>,
    dbeta_j = sum_l F^(l)_j prod_{k != l} w^(k)_j,

at the loss arguments ``u_i = <beta, z_i> - o_i`` (``offsets`` ``o``: zeros in
classification); ``dp_i = sign(p_i) d|p_i|`` (the squared loss's weights are signed, and an
example with ``p_i = 0``, a residual at 0, contributes nothing).

A point is left to the numpy code (``ok`` False) where ``w`` or a perturbed point is outside
the float range (:func:`flows.compiled._field_kernels.in_float_range`; for the perturbed points its
small-entry test too, as :meth:`flows.fused.FusedField._float_velocity` has). :func:`newton` is :func:`flows.integrator.multilinear._newton_one`. The tests hold both to the
numpy code (1e-12).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import _field_kernels as kernels
from ._cache import install

install()  # numba's cache keyed on every source of the kernels (flows.compiled._cache)

PARAMETER, DIRECTION = 0, 1


@njit(cache=True, error_model="numpy")
def evaluate(zz, chart, depth, mult, features, offsets, loss_id, rho, limit, patterns, kinds,
             ats):  # fmt: skip
    """``(ok (N,), rhs (N, V, G d + 1), rates (N, k, V), log c_max (N,))`` at the chart states
    ``zz`` (N, G, d) for the vertices ``patterns`` (V, G, d) and the surfaces ``kinds``,
    ``ats`` (k,) (:data:`PARAMETER` with a flat entry, :data:`DIRECTION` with a coordinate).
    ``chart = (log_chart, chart_sign, delta)``."""
    log_chart, chart_sign, delta = chart
    count, groups, d = zz.shape
    vertices, n, k = patterns.shape[0], features.shape[0], kinds.size
    ok = np.zeros(count, dtype=np.bool_)
    rhs = np.zeros((count, vertices, groups * d + 1))
    rates = np.zeros((count, k, vertices))
    log_c_max = np.full(count, np.nan)
    work = kernels.workspace((groups, d), n)
    w, point = np.empty((groups, d)), np.empty((groups, d))
    fields = np.empty((vertices, groups, d))
    log_c, weight = np.empty(vertices), np.empty(vertices)
    for q in range(count):
        z = zz[q]
        if not kernels.parameters_into(z, log_chart, chart_sign, delta, depth, limit, w):
            continue
        if not _vertex_fields(w, rho, patterns, depth, features, offsets, loss_id, limit, work,
                              point, fields, log_c):  # fmt: skip
            continue
        top = np.max(log_c)
        for v in range(vertices):
            weight[v] = np.exp(log_c[v] - top)
            for layer in range(groups):
                for j in range(d):
                    if log_chart:
                        dz = fields[v, layer, j] / w[layer, j] if w[layer, j] != 0 else 0.0
                    else:
                        dz = fields[v, layer, j] / (delta * np.cosh(z[layer, j]))
                    rhs[q, v, layer * d + j] = weight[v] * dz
            rhs[q, v, groups * d] = weight[v]
        _rates_into(w, fields, weight, depth, mult, features, offsets, loss_id, kinds, ats, work,
                    rates[q])  # fmt: skip
        log_c_max[q] = top
        ok[q] = True
    return ok, rhs, rates, log_c_max


@njit(cache=True, error_model="numpy")
def _vertex_fields(
    w, rho, patterns, depth, features, offsets, loss_id, limit, work, point, fields, log_c
):
    """``F_v`` into ``fields`` (V, G, d) and ``log c_v`` into ``log_c`` at ``w + rho s_v``;
    False where a perturbed point leaves the float range."""
    groups, d = w.shape
    for v in range(patterns.shape[0]):
        for layer in range(groups):
            for j in range(d):
                point[layer, j] = w[layer, j] + rho * patterns[v, layer, j]
        if not kernels.in_float_range(point, depth, True, limit):  # small entries matter too
            return False
        log_c[v] = kernels.forward_into(point, depth, features, offsets, loss_id, work)
        direction, loo = work[3], work[1]
        for layer in range(groups):
            for j in range(d):
                fields[v, layer, j] = direction[j] * loo[layer, j]
    return True


@njit(cache=True, error_model="numpy")
def _rates_into(w, fields, weight, depth, mult, features, offsets, loss_id, kinds, ats, work, out):
    """The normal rates (k, V) into ``out``: each row scaled by its largest entry (parameter
    surfaces) or by one factor for all direction surfaces, then times the vertex weights."""
    vertices, groups, d = fields.shape
    n = features.shape[0]
    for i in range(kinds.size):
        if kinds[i] == PARAMETER:
            layer, j = ats[i] // d, ats[i] % d
            top = 0.0
            for v in range(vertices):
                top = max(top, abs(fields[v, layer, j]))
            for v in range(vertices):
                out[i, v] = fields[v, layer, j] / top * weight[v] if top > 0 else 0.0
    if not np.any(kinds == DIRECTION):
        return
    kernels.forward_into(w, depth, features, offsets, loss_id, work)  # |p| (up to one factor)
    beta, loo, e = work[0], work[1], work[2]  # and the products at w
    total = np.sum(e)
    if total == 0:  # every p_i = 0 (an exact interpolator): G = 0 stays
        for s in range(kinds.size):
            if kinds[s] == DIRECTION:
                out[s, :] = 0.0
        return
    slope, sign = np.empty(n), np.empty(n)
    for i in range(n):
        m = 0.0
        for j in range(d):
            m += features[i, j] * beta[j]
        slope[i] = kernels.log_derivative_slope(m - offsets[i], loss_id)
        sign[i] = kernels.descent_sign(m - offsets[i], loss_id)
    scale = 0.0
    for v in range(vertices):
        for layer in range(groups):
            for j in range(d):
                scale = max(scale, abs(fields[v, layer, j] * loo[layer, j]))
    if scale == 0:
        return
    d_beta, weighted, d_direction = np.empty(d), np.empty(n), np.empty(d)
    for v in range(vertices):
        for j in range(d):
            acc = 0.0
            for layer in range(groups):
                acc += mult[layer] * (fields[v, layer, j] * loo[layer, j] / scale)
            d_beta[j] = acc
        mean = 0.0
        for i in range(n):
            dm = 0.0
            for j in range(d):
                dm += features[i, j] * d_beta[j]
            weighted[i] = slope[i] * dm if e[i] > 0 else 0.0
            mean += e[i] / total * weighted[i]
        d_direction[:] = 0.0
        for i in range(n):
            dp = e[i] / total * (weighted[i] - mean) * sign[i]
            for j in range(d):
                d_direction[j] += dp * features[i, j]
        for s in range(kinds.size):
            if kinds[s] == DIRECTION:
                out[s, v] = d_direction[ats[s]] * weight[v]


@njit(cache=True, error_model="numpy")
def newton(rows, signs, iterations, tol, step_floor):
    """``(lambda, exact)`` of :func:`flows.integrator.multilinear._newton_one` (rows scaled to 1); where it
    is not exact the caller takes the least-squares combination."""
    k, m = rows.shape
    lam = np.full(k, 0.5)
    factors = np.empty((m, k))
    residual, jacobian = np.empty(k), np.empty((k, k))
    sizes, floor = np.empty(k), np.empty(k)
    eps = np.finfo(np.float64).eps
    for _ in range(iterations):
        for c in range(m):
            for i in range(k):
                factors[c, i] = lam[i] if signs[c, i] > 0 else 1.0 - lam[i]
        residual[:] = 0.0
        jacobian[:] = 0.0
        sizes[:] = 0.0
        floor[:] = 0.0
        for c in range(m):
            weight = 1.0
            for i in range(k):
                weight *= factors[c, i]
            rounding = 0.0
            for j in range(k):
                others = signs[c, j]
                for i in range(k):
                    if i != j:
                        others *= factors[c, i]
                rounding += abs(others) * eps * (abs(lam[j]) + abs(factors[c, j]))
                for a in range(k):
                    jacobian[a, j] += rows[a, c] * others
            for a in range(k):
                residual[a] += rows[a, c] * weight
                sizes[a] += abs(rows[a, c] * weight)
                floor[a] += abs(rows[a, c]) * rounding
        if np.all(np.abs(residual) <= np.maximum(tol * sizes, 4.0 * floor)):
            return lam, True
        step, solved = _solve(jacobian, residual)
        if not solved:
            return lam, False
        for i in range(k):
            lam[i] -= step[i]
        if not np.all(np.isfinite(lam)):
            return lam, False
        if np.max(np.abs(step)) <= step_floor:
            return lam, True
    return lam, False


@njit(cache=True, error_model="numpy")
def _solve(matrix, rhs):
    """``matrix^-1 rhs`` by Gaussian elimination with partial pivoting (k <= 7); False where a
    pivot is 0 or not finite (singular)."""
    k = rhs.size
    a, b = matrix.copy(), rhs.copy()
    for col in range(k):
        pivot = col + np.argmax(np.abs(a[col:, col]))
        if not (np.isfinite(a[pivot, col]) and a[pivot, col] != 0):
            return b, False
        if pivot != col:
            for c in range(k):
                a[col, c], a[pivot, c] = a[pivot, c], a[col, c]
            b[col], b[pivot] = b[pivot], b[col]
        for r in range(col + 1, k):
            factor = a[r, col] / a[col, col]
            for c in range(col, k):
                a[r, c] -= factor * a[col, c]
            b[r] -= factor * b[col]
    for r in range(k - 1, -1, -1):
        acc = b[r]
        for c in range(r + 1, k):
            acc -= a[r, c] * b[c]
        b[r] = acc / a[r, r]
    return b, True


@njit(cache=True, error_model="numpy")
def _tilted_point(mu, rows, exponent, w, gradient):
    """Exponents ``mu . r_v``, weights, gradient ``sum_v w_v r_v`` into the arrays given; the
    log-sum-exp value."""
    k, m = rows.shape
    top = -np.inf
    for c in range(m):
        acc = 0.0
        for i in range(k):
            acc += mu[i] * rows[i, c]
        exponent[c] = acc
        top = max(top, acc)
    total = 0.0
    for c in range(m):
        w[c] = np.exp(exponent[c] - top)
        total += w[c]
    for c in range(m):
        w[c] /= total
    for i in range(k):
        acc = 0.0
        for c in range(m):
            acc += rows[i, c] * w[c]
        gradient[i] = acc
    return top + np.log(total)


@njit(cache=True, error_model="numpy")
def tilted(rows, iterations, tol, rounding_tol, spread_release):
    """``(w, spread, exact)`` of :func:`flows.integrator.tilted.solve_tilted` (rows scaled to 1):
    damped Newton on ``log sum_v exp(mu . r_v)`` from ``mu = 0``, a step kept where the value
    decreases (Armijo) or the gradient halves."""
    k, m = rows.shape
    mu, trial = np.zeros(k), np.zeros(k)
    exponent, w, gradient = np.empty(m), np.empty(m), np.empty(k)
    t_exponent, t_w, t_gradient = np.empty(m), np.empty(m), np.empty(k)
    hessian = np.empty((k, k))
    value = _tilted_point(mu, rows, exponent, w, gradient)
    for _ in range(iterations):
        size_g = np.max(np.abs(gradient))
        spread = np.max(exponent) - np.min(exponent)
        if size_g <= tol:
            return w, spread, spread < spread_release
        for a in range(k):
            for b in range(k):
                acc = 0.0
                for c in range(m):
                    acc += rows[a, c] * w[c] * rows[b, c]
                hessian[a, b] = acc - gradient[a] * gradient[b] + (1e-14 if a == b else 0.0)
        step, solved = _solve(hessian, gradient)
        if not solved:
            break
        slope = 0.0
        for i in range(k):
            slope += gradient[i] * step[i]
        size = 1.0
        accepted = False
        while size > 1e-12:
            for i in range(k):
                trial[i] = mu[i] - size * step[i]
            t_value = _tilted_point(trial, rows, t_exponent, t_w, t_gradient)
            if t_value <= value - 1e-4 * size * slope or np.max(np.abs(t_gradient)) < 0.5 * size_g:
                accepted = True
                break
            size /= 2.0
        if not accepted:
            return w, spread, size_g <= rounding_tol and spread < spread_release
        mu[:] = trial
        exponent[:] = t_exponent
        w[:] = t_w
        gradient[:] = t_gradient
        value = t_value
        if np.max(exponent) - np.min(exponent) > 2.0 * spread_release:
            break
    return w, np.max(exponent) - np.min(exponent), False


@njit(cache=True, error_model="numpy")
def tilted_in_tau(rates, speeds, iterations, tol, rounding_tol, spread_release):
    """``(w, spread, exact)`` of :func:`tilted` for the rates in the rescaled clock of the
    vertices that move: ``rates / speeds`` over the columns with ``speeds > 0``, each row
    divided by its largest entry (:func:`flows.integrator.tilted.solve_tilted_in_tau`'s call
    of :func:`flows.integrator.tilted.solve_tilted`, the same divisions)."""
    k = rates.shape[0]
    moving = np.flatnonzero(speeds > 0)
    rows = np.empty((k, moving.size))
    for i in range(k):
        for c in range(moving.size):
            rows[i, c] = rates[i, moving[c]] / speeds[moving[c]]
        scale = np.max(np.abs(rows[i]))
        if scale > 0:
            for c in range(moving.size):
                rows[i, c] = rows[i, c] / scale
    return tilted(rows, iterations, tol, rounding_tol, spread_release)
