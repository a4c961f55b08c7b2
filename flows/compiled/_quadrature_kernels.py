"""The compiled interval rule of the original-time quadrature (numba; extra ``fast``).

:func:`interval_rule` is :func:`flows.clocks._interval_rule` written as a loop over the
intervals: the same tests, constants and formulas (the node tables of :mod:`flows.clocks` are
passed in, not copied), one interval at a time instead of one numpy call per quantity over all
of them. Only the summation order differs, so values agree to rounding; the tests run the
quadrature's closed-form cases through both rules. :mod:`flows.clocks` drives the levels
either way (:func:`~flows.clocks.log_exp_integrals` with ``rule=``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import clocks

#: The node tables and thresholds of :mod:`flows.clocks`, in the order :func:`_rule` takes them.
_TABLES = (
    clocks._NODES,
    clocks._BARYCENTRIC,
    clocks._FINE,
    clocks._SUB,
    np.ascontiguousarray(clocks._INTERP_FINE),
    np.ascontiguousarray(clocks._TO_CHEBYSHEV),
    clocks._GL_X,
    clocks._GL_LOGW,
    np.ascontiguousarray(clocks._INTERP_GAUSS),
)
_LIMITS = np.array(
    [
        clocks.GL_SPREAD,
        clocks.PEAK_DROP,
        clocks.TRUSTED,
        clocks.WINDOW_STAGES,
        clocks.ATOMIC_ULPS,
        clocks.EPS,
    ]
)


def interval_rule(
    lo: np.ndarray, hi: np.ndarray, k: np.ndarray, tol: float, last: bool
) -> tuple[np.ndarray, ...]:
    """:func:`flows.clocks._interval_rule`, compiled: ``(value, done, narrow, x_lo, x_hi)``."""
    return _rule(
        np.ascontiguousarray(lo, dtype=float),
        np.ascontiguousarray(hi, dtype=float),
        np.ascontiguousarray(k, dtype=float),
        float(tol),
        bool(last),
        _TABLES,
        _LIMITS,
    )


@njit(cache=True, error_model="numpy")
def _matvec(matrix, v):
    """``matrix @ v`` (rows of ``matrix``)."""
    out = np.zeros(matrix.shape[0])
    for r in range(matrix.shape[0]):
        for c in range(v.size):
            out[r] += matrix[r, c] * v[c]
    return out


@njit(cache=True, error_model="numpy")
def _interpolation_error(k, to_chebyshev):
    """:func:`flows.clocks._interpolation_error` for one row."""
    a = np.abs(_matvec(to_chebyshev, k))
    last = a[7] + a[8]
    r = np.sqrt(last / (a[5] + a[6] + 1e-300))
    if not r < 0.5:
        return 4.0 * last
    return 2.0 * max(a[8], r * a[7]) * r / (1.0 - r)


@njit(cache=True, error_model="numpy")
def _interpolate(k, x, nodes, barycentric):
    """:func:`flows.clocks._interpolate` for one row ``k`` at points ``x``."""
    out = np.empty(x.size)
    for q in range(x.size):
        hit = -1
        num, den = 0.0, 0.0
        for j in range(nodes.size):
            d = x[q] - nodes[j]
            if d == 0.0:
                hit = j
                break
            w = barycentric[j] / d
            num += w * k[j]
            den += w
        out[q] = k[hit] if hit >= 0 else num / den
    return out


@njit(cache=True, error_model="numpy")
def _log_exp_gauss(length, kg, gl_logw):
    """:func:`flows.clocks._log_exp_gauss` for one row."""
    top = np.max(kg)
    return top + np.log(np.sum(np.exp(kg - top + gl_logw))) + np.log(length)


@njit(cache=True, error_model="numpy")
def _log_exp_chords(h, k):
    """:func:`flows.clocks._log_exp_chords` for one row."""
    pieces = np.empty(k.size - 1)
    for q in range(k.size - 1):
        dk = abs(k[q + 1] - k[q])
        if dk < 1e-12:
            pieces[q] = 0.5 * (k[q + 1] + k[q])
        else:
            pieces[q] = max(k[q + 1], k[q]) + np.log(-np.expm1(-dk)) - np.log(dk)
    best = np.max(pieces)
    return best + np.log(np.sum(np.exp(pieces - best))) + np.log(h)


@njit(cache=True, error_model="numpy")
def _first_at_or_above(values, floor):
    """Index of the first value ``>= floor`` (0 if none, as ``np.argmax`` of all-False)."""
    for q in range(values.size):
        if values[q] >= floor:
            return q
    return 0


@njit(cache=True, error_model="numpy")
def _last_at_or_above(values, floor):
    """Index of the last value ``>= floor`` (the last index if none)."""
    for q in range(values.size - 1, -1, -1):
        if values[q] >= floor:
            return q
    return values.size - 1


@njit(cache=True, error_model="numpy")
def _peak_window(k, fine, floor, tables, stages):
    """:func:`flows.clocks._peak_window` for one row: ``(x_lo, x_hi)``."""
    nodes, barycentric, fine_x, sub = tables[0], tables[1], tables[2], tables[3]
    n, m = fine_x.size, sub.size
    first = _first_at_or_above(fine, floor)
    last = _last_at_or_above(fine, floor)
    x_lo, x_hi = fine_x[max(first - 1, 0)], fine_x[min(last + 1, n - 1)]
    low, high = first > 0, last < n - 1
    cell = fine_x[1]
    for _ in range(stages):
        if low:
            points = x_lo + cell * sub
            i = _first_at_or_above(_interpolate(k, points, nodes, barycentric), floor) - 1
            x_lo = points[max(i, 0)]
        if high:
            points = (x_hi - cell) + cell * sub
            i = _last_at_or_above(_interpolate(k, points, nodes, barycentric), floor) + 1
            x_hi = points[min(i, m - 1)]
        cell *= sub[1]
    return x_lo, x_hi


@njit(cache=True, error_model="numpy")
def _rule(lo, hi, k, tol, last, tables, limits):
    """The loop behind :func:`interval_rule` (see :func:`flows.clocks._interval_rule`)."""
    nodes, barycentric, fine_x = tables[0], tables[1], tables[2]
    interp_fine, to_chebyshev, gl_x, gl_logw, interp_gauss = (
        tables[4], tables[5], tables[6], tables[7], tables[8],
    )  # fmt: skip
    gl_spread, peak_drop, trusted, stages, atomic_ulps, eps = (
        limits[0], limits[1], limits[2], int(limits[3]), limits[4], limits[5],
    )  # fmt: skip
    count = lo.size
    value = np.full(count, np.nan)
    done = np.zeros(count, dtype=np.bool_)
    narrow = np.zeros(count, dtype=np.bool_)
    x_lo = np.zeros(count)
    x_hi = np.ones(count)
    for i in range(count):
        row = k[i]
        if not np.all(np.isfinite(row)):  # c = 0 somewhere (K = +inf): t is infinite; else NaN
            value[i] = np.inf if np.any(row == np.inf) else np.nan
            done[i] = True
            continue
        length = hi[i] - lo[i]
        error = _interpolation_error(row, to_chebyshev)
        fine = _matvec(interp_fine, row)
        top = np.max(fine)
        spread = top - np.min(fine)
        scale = max(1.0, abs(top))
        reach = max(abs(lo[i]), abs(hi[i]))
        floor = 100.0 * eps * spread * reach / length
        atomic = length <= atomic_ulps * (np.nextafter(reach, np.inf) - reach)
        gauss = spread <= gl_spread
        flat = not gauss and (10.0 + np.log1p(spread) <= tol * scale or atomic or last)
        if gauss:
            value[i] = _log_exp_gauss(length, _matvec(interp_gauss, row), gl_logw)
        elif flat:
            value[i] = _log_exp_chords(length * fine_x[1], fine)
        steep = not gauss and not flat and error <= max(trusted, tol * scale) + floor
        windowed = False
        if steep:
            a, b = _peak_window(row, fine, top - peak_drop - 2.0 * error, tables, stages)
            kg = _interpolate(row, a + (b - a) * gl_x, nodes, barycentric)
            if max(top, np.max(kg)) - np.min(kg) <= gl_spread:
                windowed = True
                value[i] = _log_exp_gauss(length * (b - a), kg, gl_logw)
            x_lo[i], x_hi[i] = a, b
        accurate = error <= tol * max(1.0, abs(value[i])) + floor
        done[i] = ((gauss or flat or windowed) and accurate) or atomic or last
        narrow[i] = steep and not done[i] and x_hi[i] - x_lo[i] <= 0.5
    return value, done, narrow, x_lo, x_hi
