"""The numba kernel of :mod:`flows.compiled.stepping`: l_inf-SAM's own steps in one compiled loop.

:func:`own_steps` is :func:`flows.integrator.own_steps.own_steps` in plain loops: the same steps,
checkpoints and stops (see that module's docstring), with ``F = G ⊙ prod_{k != l} w^(k)``
and ``log c`` from the kernels of ``iterate``'s compiled loop (the leave-one-out products of
:func:`flows.compiled._discrete_kernels.products_into`, the weights in log form of
:func:`flows.compiled._field_kernels.weights_into`). The tests hold it to the numpy loop.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import _field_kernels as kernels
from ._cache import install
from ._discrete_kernels import products_into

install()  # numba's cache keyed on every source of the kernels (flows.compiled._cache)

END, BLOWUP, BUDGET, RANGE = 0, 1, 2, 3


@njit(cache=True, nogil=True)
def workspace(depth, d, n):
    """Scratch of :func:`field_into`: beta, the leave-one-out products, a suffix, the margins,
    the weights' sizes, the weights and ``G``."""
    return (np.empty(d), np.empty((depth, d)), np.empty(d), np.empty(n), np.empty(n),
            np.empty(n), np.empty(d))  # fmt: skip


@njit(cache=True, nogil=True, error_model="numpy")
def field_into(w, features, loss_id, work, out):
    """``F(w)`` into ``out`` (L, d); returns ``log c`` (``work``: :func:`workspace`)."""
    beta, loo, suffix, u, size, p, g = work
    products_into(w, beta, loo, suffix)
    kernels.margins_into(features, beta, u)
    log_c = kernels.weights_into(u, features, loss_id, size, p, g)
    for layer in range(w.shape[0]):
        for j in range(w.shape[1]):
            out[layer, j] = g[j] * loo[layer, j]
    return log_c


@njit(cache=True, nogil=True, error_model="numpy")
def checkpoint(theta, tau, base, spacing, check, count):
    """Keep ``theta`` as checkpoint ``k`` for every ``k >= count`` with ``log ||beta||_1 >=
    base + k spacing`` (up to the capacity); the number kept."""
    log_size, direction, taus, log_norm = check
    depth, d = theta.shape
    total, norm = 0.0, 0.0
    for j in range(d):
        beta = 1.0
        for layer in range(depth):
            beta *= theta[layer, j]
            norm += theta[layer, j] * theta[layer, j]
        total += abs(beta)
    size = np.log(total)
    while count < log_size.size and size >= base + count * spacing:
        for j in range(d):
            beta = 1.0
            for layer in range(depth):
                beta *= theta[layer, j]
            direction[count, j] = beta / total
        log_size[count], taus[count], log_norm[count] = size, tau, 0.5 * np.log(norm)
        count += 1
    return count


@njit(cache=True, nogil=True, error_model="numpy")
def time_left(check, count, depth):
    """``tau* - tau`` at the last checkpoint from the last two (``||theta||^-(L - 2)`` linear
    in ``tau``)."""
    taus, log_norm = check[2], check[3]
    q = np.exp(-(depth - 2) * (log_norm[count - 1] - log_norm[count - 2]))
    if not q < 1.0:
        return np.inf
    return q * (taus[count - 1] - taus[count - 2]) / (1.0 - q)


@njit(cache=True, nogil=True, error_model="numpy")
def own_steps(theta, s, tau, s_end, original, h, max_steps, grid, features, loss_id, rho,
              blowup_tol, spacing, kept_theta, kept_tau, kept_log, check):  # fmt: skip
    """The steps from ``theta`` (L, d; advanced in place) at clock ``s`` and ``tau``; returns
    ``(status, steps, s, tau, log_elapsed, time_left, kept, checkpoints)`` and fills the first
    ``kept`` rows of ``kept_theta``, ``kept_tau`` and ``kept_log`` and the first
    ``checkpoints`` of ``check`` (log size, direction, tau, log norm)."""
    depth, d = theta.shape
    work = workspace(depth, d, features.shape[0])
    f = np.empty((depth, d))
    point = np.empty((depth, d))
    kept, steps, status = 0, 0, BUDGET
    log_elapsed, left = -np.inf, np.inf
    total = 0.0
    for j in range(d):
        beta = 1.0
        for layer in range(depth):
            beta *= theta[layer, j]
        total += abs(beta)
    base = np.log(total)
    checkpoints = checkpoint(theta, tau, base, spacing, check, 0)
    while steps < max_steps:
        field_into(theta, features, loss_id, work, f)
        for layer in range(depth):
            for j in range(d):
                point[layer, j] = theta[layer, j] - rho * np.sign(f[layer, j])
        log_c = field_into(point, features, loss_id, work, f)
        size, norm = 0.0, 0.0
        for layer in range(depth):
            for j in range(d):
                size += f[layer, j] * f[layer, j]
                norm += theta[layer, j] * theta[layer, j]
        dtau = h * np.sqrt(norm / size)
        if not (np.isfinite(dtau) and dtau > 0 and np.isfinite(log_c)):
            status = RANGE
            break
        ds = dtau * np.exp(-log_c) if original else dtau
        last = ds >= s_end - s
        fraction = (s_end - s) / ds if last else 1.0
        while kept < grid.size and grid[kept] <= s + fraction * ds:
            x = (grid[kept] - s) / ds
            for layer in range(depth):
                for j in range(d):
                    kept_theta[kept, layer, j] = theta[layer, j] + x * dtau * f[layer, j]
            kept_tau[kept] = tau + x * dtau
            kept_log[kept] = np.logaddexp(log_elapsed, np.log(x * dtau) - log_c)
            kept += 1
        for layer in range(depth):
            for j in range(d):
                theta[layer, j] = theta[layer, j] + fraction * dtau * f[layer, j]
        tau += fraction * dtau
        s = s_end if last else s + ds
        log_elapsed = np.logaddexp(log_elapsed, np.log(fraction * dtau) - log_c)
        steps += 1
        if last:
            status = END
            break
        before = checkpoints
        checkpoints = checkpoint(theta, tau, base, spacing, check, checkpoints)
        if checkpoints > before >= 1 and depth >= 3:
            left = time_left(check, checkpoints, depth)
            if left < blowup_tol * max(1.0, tau):
                status = BLOWUP
                break
    return status, steps, s, tau, log_elapsed, left, kept, checkpoints
