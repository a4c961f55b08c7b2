"""One integration segment: steps of a scipy ``OdeSolver`` up to the first terminal event.

This is ``scipy.integrate.solve_ivp`` reduced to what the engine needs, written out so that
the engine keeps control between steps: a budget of field evaluations checked after every
step (a run that exhausts it keeps every step it completed), and the dense output of each
step kept for sampling and for the original-time quadrature. Events are located as
``solve_ivp`` does: a sign change of ``g(s, y)`` over a step (respecting ``direction``),
then ``brentq`` on the step's interpolant.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.integrate import BDF, DOP853, LSODA, RK23, RK45, Radau
from scipy.optimize import brentq

METHODS = {"DOP853": DOP853, "RK45": RK45, "RK23": RK23, "Radau": Radau, "BDF": BDF, "LSODA": LSODA}

EPS = np.finfo(float).eps


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
) -> SegmentResult:
    """Step from ``(s0, y0)`` towards ``s_end`` until a terminal event, the end or the budget.

    Parameters
    ----------
    rhs : ``f(s, y)``.
    events : callables ``g(s, y)`` with a ``direction`` attribute (all terminal).
    method : a key of :data:`METHODS`.
    rtol, atol : tolerances as in ``solve_ivp``.
    budget : field evaluations allowed for this segment.
    first_step : the first step to try (None: the solver's own choice).
    """
    first_step = None if first_step is None else min(first_step, s_end - s0)
    solver = METHODS[method](rhs, s0, y0, s_end, rtol=rtol, atol=atol, first_step=first_step)
    out = SegmentResult(ts=[s0], y=y0.copy())
    direction = np.array([getattr(e, "direction", 0.0) for e in events])
    g_old = np.array([e(s0, y0) for e in events])
    while solver.status == "running":
        message = solver.step()
        out.nfev = solver.nfev
        if solver.status == "failed" or not np.all(np.isfinite(solver.y)):
            out.status, out.message = "failed", message or "the state left the float range"
            return out
        interpolant = solver.dense_output()
        g_new = np.array([e(solver.t, solver.y) for e in events])
        hits = _active(g_old, g_new, direction) if len(events) else np.empty(0, dtype=int)
        if len(hits):
            roots = [_root(events[i], interpolant, solver.t_old, solver.t) for i in hits]
            first = int(np.argmin(roots))
            s_hit = roots[first]
            out.ts.append(s_hit)
            out.interpolants.append(interpolant)
            out.y, out.event, out.status = interpolant(s_hit), int(hits[first]), "event"
            return out
        out.ts.append(solver.t)
        out.interpolants.append(interpolant)
        out.y = solver.y.copy()
        g_old = g_new
        if solver.nfev > budget:  # also at the segment's end: the next segment has none left
            out.status = "budget"
            return out
    return out
