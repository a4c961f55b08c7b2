"""The compiled interval rule of the original-time quadrature (numba; extra ``fast``).

:func:`interval_rule` is :func:`flows.clocks._interval_rule` written as loops over the intervals
and their pieces: the same tests, constants and formulas (the tables of :mod:`flows.clocks` are
passed in, not copied), one piece at a time instead of one numpy call per quantity over all of
them. Only the summation order differs, so values agree to rounding; the tests run the
quadrature's closed-form cases through both rules. :mod:`flows.clocks` drives the levels either
way (:func:`~flows.clocks.log_original_times` with ``rule=``). The kernels release the GIL
(``nogil``): the runs of :func:`flows.simulate_many` in threads apply the rule at once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from .. import clocks
from ._cache import install

install()  # numba's cache keyed on every source of the kernels (flows.compiled._cache)

#: The tables and thresholds of :mod:`flows.clocks`, in the order :func:`_rule` takes them.
_TABLES = (np.ascontiguousarray(clocks._TO_CHEBYSHEV), clocks._GL_X, clocks._GL_LOGW)
_LIMITS = np.array(
    [
        clocks.GL_SPREAD,
        clocks.PEAK_DROP,
        clocks.TRUSTED,
        clocks.ROOT_STEPS,
        clocks.ATOMIC_ULPS,
        clocks.EPS,
        clocks.DEGREE,
    ]
)


def interval_rule(*level: Any) -> tuple[np.ndarray, ...]:
    """:func:`flows.clocks._interval_rule`, compiled: the same arguments
    ``(lo, hi, k, tol, last, which, a, b)`` and results ``(value, done, narrow, w_lo, w_hi)``."""
    lo, hi, k, tol, last, which, a, b = level
    return _rule(
        np.ascontiguousarray(lo, dtype=float),
        np.ascontiguousarray(hi, dtype=float),
        np.ascontiguousarray(k, dtype=float),
        float(tol),
        bool(last),
        np.ascontiguousarray(which, dtype=np.int64),
        np.ascontiguousarray(a, dtype=float),
        np.ascontiguousarray(b, dtype=float),
        _TABLES,
        _LIMITS,
    )


@njit(cache=True, nogil=True, error_model="numpy")
def _chebyshev(coef, x, out, t, b1, b2):
    """:func:`flows.clocks._chebyshev` for one row at the points ``x``, into ``out`` (the
    recurrence runs over all points at once, in the separate buffers ``t``, ``b1``, ``b2`` at
    least as long as ``x``: independent chains, vectorized)."""
    n = x.size
    for q in range(n):
        t[q], b1[q], b2[q] = 2.0 * (2.0 * x[q] - 1.0), 0.0, 0.0
    for j in range(coef.size - 1, 0, -1):
        c = coef[j]
        for q in range(n):
            v = c + t[q] * b1[q] - b2[q]
            b2[q] = b1[q]
            b1[q] = v
    for q in range(n):
        out[q] = coef[0] + 0.5 * t[q] * b1[q] - b2[q]


@njit(cache=True, nogil=True, error_model="numpy")
def _at(coef, x):
    """The interpolant with coefficients ``coef`` at one point ``x`` (Clenshaw)."""
    t, b1, b2 = 2.0 * x - 1.0, 0.0, 0.0
    for j in range(coef.size - 1, 0, -1):
        b1, b2 = coef[j] + 2.0 * t * b1 - b2, b1
    return coef[0] + t * b1 - b2


@njit(cache=True, nogil=True, error_model="numpy")
def _bounds(x):
    """``(min(x), max(x))`` (a loop: numba's ``np.min`` and ``np.max`` cost compile time)."""
    low, high = x[0], x[0]
    for v in x:
        low, high = min(low, v), max(high, v)
    return low, high


@njit(cache=True, nogil=True, error_model="numpy")
def _interpolation_error(a):
    """:func:`flows.clocks._interpolation_error` for one row of coefficients."""
    n = a.size - 1
    last = abs(a[n - 1]) + abs(a[n])
    r = min(1.0, np.sqrt(last / (abs(a[n - 3]) + abs(a[n - 2]) + 1e-300)))
    if not r < 0.5:
        return 4.0 * last
    return 2.0 * max(abs(a[n]), r * abs(a[n - 1])) * r / (1.0 - r)


@njit(cache=True, nogil=True, error_model="numpy")
def _log_exp_gauss(length, samples, kg, gl_logw):
    """:func:`flows.clocks._log_exp_gauss` for one row, from ``asinh K`` at the nodes
    (``samples``; ``K`` into ``kg``)."""
    for q in range(kg.size):
        kg[q] = np.sinh(samples[q])
    top = _bounds(kg)[1]
    total = 0.0
    for q in range(kg.size):
        total += np.exp(kg[q] - top + gl_logw[q])
    return top + np.log(total) + np.log(length)


@njit(cache=True, nogil=True, error_model="numpy")
def _window_end(coef, out, inside, floor, steps):
    """:func:`flows.clocks._window_end` for one row."""
    target = np.arcsinh(floor)
    close = 1.0 / (1.0 + abs(floor))
    f_out = _at(coef, out) - target
    f_in = _at(coef, inside) - target
    miss = f_out
    for _ in range(steps):
        if not miss < -close:
            break
        gap = f_in - f_out
        x = out - f_out * (inside - out) / gap if gap > 0 else out
        f = _at(coef, x) - target
        if f <= 0:
            f_in, f_out, miss, out = 0.5 * f_in, f, f, x
        else:
            f_in, f_out, inside = f, 0.5 * f_out, x
    return out


@njit(cache=True, nogil=True, error_model="numpy")
def _peak_window(coef, x, samples, floor, steps):
    """:func:`flows.clocks._peak_window` for one row: ``(x_lo, x_hi)``."""
    target = np.arcsinh(floor)
    n = x.size
    first, last = 0, n - 1
    while first < n - 1 and samples[first] < target:
        first += 1
    while last > 0 and samples[last] < target:
        last -= 1
    x_lo, x_hi = x[0], x[n - 1]
    if first > 0:
        x_lo = _window_end(coef, x[first - 1], x[first], floor, steps)
    if last < n - 1:
        x_hi = _window_end(coef, x[last + 1], x[last], floor, steps)
    return x_lo, x_hi


@njit(cache=True, nogil=True, error_model="numpy")
def _intervals(lo, hi, k, to_chebyshev, eps):
    """Per interval: Chebyshev coefficients of ``asinh K``, ``expm1`` of their error estimate,
    the float resolution of ``asinh K`` (``floor``), the float spacing of its times, and
    whether ``K`` is not finite at a node (1: somewhere ``+inf``, 2: NaN only)."""
    count, n = k.shape
    coef = np.zeros((count, n))
    error, floor, spacing = np.empty(count), np.empty(count), np.empty(count)
    broken = np.zeros(count, dtype=np.int64)
    values = np.empty(n)
    for i in range(count):
        for j in range(n):
            values[j] = np.arcsinh(k[i, j])
            if not np.isfinite(k[i, j]):
                broken[i] = 1 if k[i, j] == np.inf or broken[i] == 1 else 2
        for r in range(n):
            for j in range(n):
                coef[i, r] += to_chebyshev[r, j] * values[j]
        error[i] = np.expm1(_interpolation_error(coef[i]))
        reach = max(abs(lo[i]), abs(hi[i]))
        spacing[i] = np.nextafter(reach, np.inf) - reach
        low, high = _bounds(values)
        floor[i] = 100.0 * eps * (high - low) * reach / (hi[i] - lo[i])
    return coef, error, floor, spacing, broken


@njit(cache=True, nogil=True, error_model="numpy")
def _rule(lo, hi, k, tol, last, which, a, b, tables, limits):
    """The loop behind :func:`interval_rule` (see :func:`flows.clocks._interval_rule`)."""
    to_chebyshev, gl_x, gl_logw = tables
    gl_spread, peak_drop, trusted, steps, atomic_ulps, eps, degree = (
        limits[0], limits[1], limits[2], int(limits[3]), limits[4], limits[5], limits[6],
    )  # fmt: skip
    coef, error, floor, spacing, broken = _intervals(lo, hi, k, to_chebyshev, eps)
    count, m = a.size, gl_x.size
    value = np.full(count, np.nan)
    done = np.zeros(count, dtype=np.bool_)
    narrow = np.zeros(count, dtype=np.bool_)
    w_lo, w_hi = a.copy(), b.copy()
    x, samples, kg = np.empty(m + 2), np.empty(m + 2), np.empty(m)
    t, b1, b2 = np.empty(m + 2), np.empty(m + 2), np.empty(m + 2)
    for p in range(count):
        i = which[p]
        c, length = coef[i], hi[i] - lo[i]
        atomic = last or length <= atomic_ulps * spacing[i]
        whole = a[p] == lo[i] and b[p] == hi[i]
        if broken[i] > 0:  # c = 0 somewhere (K = +inf): t is infinite; else NaN
            value[p] = np.inf if broken[i] == 1 else np.nan
            done[p] = whole or atomic
            continue
        x_a, x_b = (a[p] - lo[i]) / length, (b[p] - hi[i]) / length + 1.0
        x[0], x[m + 1] = x_a, x_b
        for q in range(m):
            x[q + 1] = x_a + (x_b - x_a) * gl_x[q]
        _chebyshev(c, x, samples, t, b1, b2)
        low, high = _bounds(samples)
        top = np.sinh(high)
        spread = top - np.sinh(low)
        scale = max(1.0, abs(top))
        grow = (1.0 + abs(top)) * error[i]
        resolution = floor[i] * (1.0 + abs(top))
        span = b[p] - a[p]
        gauss = spread <= gl_spread
        flat = False
        if gauss:
            value[p] = _log_exp_gauss(span, samples[1 : m + 1], kg, gl_logw)
        else:
            bracket = max(0.0, 1.0 + np.log(degree**2 * (high - low) * (1.0 + abs(top))))
            flat = bracket <= tol * scale or atomic
            if flat:
                value[p] = top + np.log(span) - min(bracket, np.log1p(spread))
        steep = not gauss and not flat and grow <= max(trusted, tol * scale) + resolution
        windowed = False
        lo_x, hi_x = x_a, x_b
        if steep:
            lo_x, hi_x = _peak_window(c, x, samples, top - peak_drop - 2.0 * grow, steps)
            for q in range(m):
                kg[q] = lo_x + (hi_x - lo_x) * gl_x[q]
            _chebyshev(c, kg, kg, t, b1, b2)
            inside_low, inside_high = _bounds(kg)
            if max(top, np.sinh(inside_high)) - np.sinh(inside_low) <= gl_spread:
                windowed = True
                value[p] = _log_exp_gauss((hi_x - lo_x) * length, kg, kg, gl_logw)
        accurate = grow <= tol * max(1.0, abs(value[p])) + resolution
        done[p] = ((gauss or flat or windowed) and accurate) or atomic
        narrow[p] = steep and not done[p] and hi_x - lo_x <= 0.5 * (x_b - x_a)
        if narrow[p]:
            least = atomic_ulps * spacing[i]  # a window at least this long
            w_lo[p] = max(a[p], min(lo[i] + lo_x * length, lo[i] + hi_x * length - least))
            w_hi[p] = min(b[p], max(lo[i] + hi_x * length, w_lo[p] + least))
    return value, done, narrow, w_lo, w_hi
