"""One integration segment: steps of a scipy ``OdeSolver`` up to the first terminal event.

This is ``scipy.integrate.solve_ivp`` reduced to what the engine needs, written out so that
the engine keeps control between steps: a budget of field evaluations checked after every
step (a run that exhausts it keeps every step it completed), and the dense output of each
step kept for sampling and for the original-time quadrature (handed on in pieces of at most
:data:`RECORD_BYTES` as the segment goes, where the caller takes them: a long segment's steps
need not all be held at once). Events are located as
``solve_ivp`` does: a sign change of ``g(s, y)`` over a step (respecting ``direction``),
then ``brentq`` on the step's interpolant.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.integrate import BDF, DOP853, LSODA, RK23, RK45, Radau
from scipy.integrate._ivp.rk import RungeKutta
from scipy.optimize import brentq

METHODS = {"DOP853": DOP853, "RK45": RK45, "RK23": RK23, "Radau": Radau, "BDF": BDF, "LSODA": LSODA}

EPS = np.finfo(float).eps

#: Dense output a segment holds before it hands its steps to ``record`` (8 floats per state
#: entry and step, as DOP853's interpolant; at least 16 steps a piece).
RECORD_BYTES = 2**25


@dataclass
class SegmentResult:
    """What one segment produced.

    Attributes
    ----------
    ts : step boundaries (``ts[0]`` the start, ``ts[-1]`` where the segment ended).
    interpolants : one dense output per step.
    y : the state at ``ts[-1]``.
    event : index of the terminal event that ended the segment, or None.
    status : 'end' (reached ``s_end``), 'event', 'failed' (solver failure or non-finite
        state) or 'budget' (``budget`` spent, also by the step that reached ``s_end``, as the
        compiled loop does: a run of many short segments, between the kinks of a schedule,
        must not restart with nothing left).
    message : the solver's message on failure.
    nfev : field evaluations spent.
    """

    ts: list[float]
    interpolants: list = field(default_factory=list)
    y: np.ndarray = field(default_factory=lambda: np.empty(0))
    event: int | None = None
    status: str = "end"
    message: str = ""
    nfev: int = 0


def _active(g_old: np.ndarray, g_new: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """Indices of events whose function changed sign over a step in the watched direction (a
    function that stays exactly 0, e.g. a ``G_j`` whose weights underflowed, does not)."""
    moved = (g_old != 0) | (g_new != 0)
    up = (g_old <= 0) & (g_new >= 0) & moved
    down = (g_old >= 0) & (g_new <= 0) & moved
    hit = (up & (direction > 0)) | (down & (direction < 0)) | ((up | down) & (direction == 0))
    return np.flatnonzero(hit)


def _root(event, interpolant, a: float, b: float) -> float:
    """Where ``event`` changes sign on the step's interpolant over ``[a, b]`` (``brentq``); if
    the interpolant's end values do not bracket a sign change (the step's end state and its
    interpolant differ at rounding level), the end where ``|g|`` is smaller."""
    g_a, g_b = event(a, interpolant(a)), event(b, interpolant(b))
    if g_a == 0 or g_b == 0 or np.sign(g_a) == np.sign(g_b) or not np.isfinite(g_a * g_b):
        return a if abs(g_a) <= abs(g_b) else b
    return brentq(lambda s: event(s, interpolant(s)), a, b, xtol=4 * EPS, rtol=4 * EPS)


def initial_step(
    rhs: Callable[[float, np.ndarray], np.ndarray],
    s0: float,
    y0: np.ndarray,
    f0: np.ndarray,
    s_end: float,
    rtol: float,
    atol: np.ndarray,
    order: int,
) -> float:
    """The first step of an explicit Runge-Kutta method: scipy's ``select_initial_step``
    (Hairer, Norsett & Wanner, Sec. II.4) with its norms over the entries of ``y0`` except those
    at exactly 0 under relative control only (``atol_i < rtol * eps``; all entries where that
    leaves none).

    With ``e = atol + rtol |y0|``, ``d0 = rms(y0 / e)``, ``d1 = rms(f0 / e)``,
    ``h0 = 0.01 d0 / d1`` (``1e-6`` if either is below ``1e-5``), ``d2 = rms((f(y0 + h0 f0) -
    f0) / e) / h0`` and ``h1 = (0.01 / max(d1, d2))^(1 / (order + 1))``; the step is
    ``min(100 h0, h1, s_end - s0)``. An entry at exactly 0 under relative control has no size
    for a step to change by 1%: with the engine's ``atol`` of 1e-100 it would set
    ``h0 ~ 1e-90``, and since its error estimate is then made of rounding against its own
    size ``~ h |f|``, the steps could grow only ~5x per step from there (a hundred steps where
    a few suffice). Elsewhere the step is scipy's.
    """
    interval = abs(s_end - s0)
    scale = atol + np.abs(y0) * rtol
    counted = (y0 != 0) | (atol >= rtol * EPS)
    if not np.any(counted):
        counted[:] = True

    def rms(x: np.ndarray) -> float:
        return float(np.sqrt(np.mean(np.square(x[counted] / scale[counted]))))

    d0, d1 = rms(y0), rms(f0)
    h0 = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
    h0 = min(h0, interval)
    d2 = rms(rhs(s0 + h0, y0 + h0 * f0) - f0) / h0
    if d1 <= 1e-15 and d2 <= 1e-15:
        h1 = max(1e-6, h0 * 1e-3)
    else:
        h1 = (0.01 / max(d1, d2)) ** (1 / (order + 1))
    return min(100 * h0, h1, interval)


def integrate_segment(
    rhs: Callable[[float, np.ndarray], np.ndarray],
    s0: float,
    y0: np.ndarray,
    s_end: float,
    events: Sequence,
    method: str,
    rtol: float,
    atol: np.ndarray,
    budget: int,
    first_step: float | None = None,
    record: Callable[[list[float], list], None] | None = None,
) -> SegmentResult:
    """Step from ``(s0, y0)`` towards ``s_end`` until a terminal event, the end or the budget.

    Parameters
    ----------
    rhs : ``f(s, y)``.
    events : callables ``g(s, y)`` with a ``direction`` attribute (all terminal).
    method : a key of :data:`METHODS`.
    rtol, atol : tolerances as in ``solve_ivp``.
    budget : field evaluations allowed for this segment.
    first_step : the first step to try (None: the solver's own choice, or
        :func:`initial_step` for an explicit Runge-Kutta method where the two differ).
    record : takes the steps ``(ts, interpolants)`` of each full piece of
        :data:`RECORD_BYTES` as the segment goes (the result then holds the steps after the
        last piece, ``ts[0]`` where it ends); None: the result holds every step.
    """
    cls = METHODS[method]
    spent = 0
    relative_zero = np.any((y0 == 0) & (atol < rtol * EPS))
    if first_step is None and issubclass(cls, RungeKutta) and s_end > s0 and relative_zero:
        f0 = rhs(s0, y0)
        first_step = initial_step(rhs, s0, y0, f0, s_end, rtol, atol, cls.error_estimator_order)
        spent = 2
        if not (np.isfinite(first_step) and first_step > 0):
            first_step = None  # a non-finite field: scipy's own choice, and its failure
    first_step = None if first_step is None else min(first_step, s_end - s0)
    solver = cls(rhs, s0, y0, s_end, rtol=rtol, atol=atol, first_step=first_step)
    out = SegmentResult(ts=[s0], y=y0.copy())
    piece = max(16, RECORD_BYTES // (64 * y0.size))
    direction = np.array([getattr(e, "direction", 0.0) for e in events])
    g_old = np.array([e(s0, y0) for e in events])
    while solver.status == "running":
        message = solver.step()
        out.nfev = solver.nfev + spent
        if solver.status == "failed" or not np.all(np.isfinite(solver.y)):
            out.status, out.message = "failed", message or "the state left the float range"
            return out
        interpolant = solver.dense_output()
        if not np.all(np.isfinite(interpolant(0.5 * (solver.t_old + solver.t)))):
            # the extra stages of the dense output met a non-finite field (a reduced field
            # returns NaN where its weights are not found): the step's inside is unknown
            out.status, out.message = "failed", "the dense output is not finite within a step"
            return out
        g_new = np.array([e(solver.t, solver.y) for e in events])
        hits = _active(g_old, g_new, direction) if len(events) else np.empty(0, dtype=int)
        if len(hits):
            roots = [_root(events[i], interpolant, solver.t_old, solver.t) for i in hits]
            first = int(np.argmin(roots))
            s_hit = roots[first]
            y_hit = interpolant(s_hit)
            if not np.all(np.isfinite(y_hit)):  # the step's extra stages met a non-finite field
                out.status, out.message = "failed", "the dense output is not finite at an event"
                return out
            out.ts.append(s_hit)
            out.interpolants.append(interpolant)
            out.y, out.event, out.status = y_hit, int(hits[first]), "event"
            return out
        out.ts.append(solver.t)
        out.interpolants.append(interpolant)
        out.y = solver.y.copy()
        g_old = g_new
        if record is not None and len(out.interpolants) >= piece:
            record(out.ts, out.interpolants)
            out.ts, out.interpolants = [solver.t], []
        if out.nfev > budget:  # also at the segment's end: the next segment has none left
            out.status = "budget"
            return out
    return out
