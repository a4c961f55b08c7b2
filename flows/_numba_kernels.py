"""The numba kernels of :mod:`flows.compiled` (imported only when that backend is used).

Loops over the entries of one parameter point, with the formulas of
:meth:`flows.kernel.FusedField._float_rhs`.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def log_abs_derivative(u: float, loss_id: int) -> float:
    """``log|l'(u)|``: logistic ``-log(1 + e^u)``, exponential ``-u``."""
    if loss_id == 0:
        return -(max(u, 0.0) + np.log1p(np.exp(-abs(u))))
    return -u


@njit(cache=True)
def forward(w, depth, features, loss_id):
    """Direction ``G`` (d,), ``log c`` and leave-one-out products (G, d) at floats ``w``."""
    groups, d = w.shape
    n = features.shape[0]
    beta = np.empty(d)
    loo = np.empty((groups, d))
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
    log_w = np.empty(n)
    top = -np.inf
    for i in range(n):
        m = 0.0
        for j in range(d):
            m += features[i, j] * beta[j]
        log_w[i] = log_abs_derivative(m, loss_id)
        top = max(top, log_w[i])
    total = 0.0
    for i in range(n):
        log_w[i] = np.exp(log_w[i] - top)
        total += log_w[i]
    direction = np.zeros(d)
    for i in range(n):
        p = log_w[i] / total
        for j in range(d):
            direction[j] += p * features[i, j]
    return direction, top + np.log(total) - np.log(n), loo


@njit(cache=True)
def parameters(z, log_chart, chart_sign, delta, depth, limit):
    """Float parameters from chart coordinates, and whether they are in the float range
    (see :meth:`FusedField._float_rows`)."""
    groups, d = z.shape
    w = np.empty((groups, d))
    top, bottom = -np.inf, np.inf
    for layer in range(groups):
        for j in range(d):
            if log_chart:
                log_abs = z[layer, j]
                w[layer, j] = chart_sign[layer, j] * np.exp(log_abs)
            else:
                w[layer, j] = delta * np.sinh(z[layer, j])
                log_abs = np.log(abs(w[layer, j]))
            top = max(top, log_abs)
            bottom = min(bottom, log_abs)
    ok = -limit < depth * top < limit and (not log_chart or depth * bottom > -4.0 * limit)
    return w, ok


@njit(cache=True)
def summary(w, depth, multiplicity, features, loss_id, pattern, use_pattern):
    """``GradientSummary`` of ``grad L`` at ``w``: unit, sign, log norm (ok flag first)."""
    direction, log_c, loo = forward(w, depth, features, loss_id)
    groups, d = w.shape
    g = np.empty((groups, d))
    norm2 = 0.0
    for layer in range(groups):
        for j in range(d):
            g[layer, j] = direction[j] * loo[layer, j]
            norm2 += multiplicity[layer] * g[layer, j] ** 2
    norm = np.sqrt(norm2)
    sign = np.empty((groups, d))
    unit = np.empty((groups, d))
    for layer in range(groups):
        for j in range(d):
            if use_pattern:
                sign[layer, j] = pattern[layer, j]
            else:
                sign[layer, j] = -np.sign(g[layer, j])
            unit[layer, j] = sign[layer, j] * (abs(g[layer, j]) / norm) if norm > 0 else 0.0
    return norm > 0, unit, sign, np.log(norm) + log_c


@njit(cache=True)
def chart_velocity(
    w, point, z, held, depth, features, loss_id, original_clock, log_chart, delta, limit
):
    """``d(z, tau)/ds`` from the perturbed point (ok flag first)."""
    groups, d = w.shape
    top, bottom = -np.inf, np.inf
    for layer in range(groups):
        for j in range(d):
            a = np.log(abs(point[layer, j]))
            top = max(top, a)
            bottom = min(bottom, a)
    out = np.zeros(groups * d + 1)
    if not (-limit < depth * top < limit and (not log_chart or depth * bottom > -4.0 * limit)):
        return False, out
    direction, log_c, loo = forward(point, depth, features, loss_id)
    speed = np.exp(log_c) if original_clock else 1.0
    for layer in range(groups):
        for j in range(d):
            if held[layer, j]:
                continue
            field = speed * direction[j] * loo[layer, j]
            if log_chart:
                out[layer * d + j] = field / w[layer, j]
            else:
                out[layer * d + j] = field / (delta * np.cosh(z[layer, j]))
    out[groups * d] = speed
    return True, out
