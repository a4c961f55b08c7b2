"""``simulate``: integrate a flow with ``scipy.integrate.solve_ivp``, segment by segment.

The state is a chart (:mod:`flows.charts`) of every parameter group plus ``tau`` (the
bookkeeping variable of the clock, :mod:`flows.clocks`); by default ``z = asinh(theta / delta)``:
linear near 0 for crossings, sliding and collapse, with relative error control down to
``|theta| ~ 1e-90`` (``atol = 1e-100``), and logarithmic for large ``|theta|``, so that
coordinates far beyond ``1e308`` are followed through ``log|theta|``. ``chart='log'`` keeps
decays far below ``1e-90`` exact for runs that do not collapse.

Integration stops at events (:mod:`flows.events`) and restarts in a new *mode*:
l_inf-SAM parameters that reach 0 and slide are held there exactly (Filippov); a parameter
whose sliding condition fails is released; a collapse sets ``theta = 0`` for the rest of the
run; a blow-up ends it with status 1.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.integrate import solve_ivp

from . import events as ev
from .algorithms import get_algorithm, resolve_hyperparameters
from .clocks import get_clock, log_original_time
from .data import Dataset
from .field import Problem, chart_rhs, chart_state, one_sided_velocity, perturbed_log_c
from .initialization import initialization
from .model import LOSSES, margins
from .results import BLOWUP, FAILURE, SUCCESS, FlowEvent, Trajectory
from .charts import choose_chart
from .signedlog import SignedLog, product_of_layers

#: Offset (in chart units) that puts a parameter just past 0 when it crosses transversally.
NUDGE = 1e-300
MAX_EVENTS = 10_000


class BudgetExceeded(Exception):
    """Raised inside the field when ``max_nfev`` evaluations have been spent."""


@dataclass
class Mode:
    """What changes at events: entries held at 0, the parameter signs frozen in ``sign(grad L)``
    (sign-discontinuous algorithms only) and whether theta has collapsed to 0."""

    held: np.ndarray
    sign_pattern: np.ndarray | None = None
    collapsed: bool = False


@dataclass
class Segments:
    """Dense outputs of the integration segments, for sampling afterwards."""

    starts: list = field(default_factory=list)
    ends: list = field(default_factory=list)
    solutions: list = field(default_factory=list)
    zero: float = 0.0
    held: list = field(default_factory=list)
    patterns: list = field(default_factory=list)

    def add(self, start: float, end: float, sol, mode: Mode) -> None:
        self.starts.append(start)
        self.ends.append(end)
        self.solutions.append(sol)
        self.held.append(mode.held.copy())
        self.patterns.append(None if mode.sign_pattern is None else mode.sign_pattern.copy())

    def pattern_at(self, s: float) -> np.ndarray | None:
        """The sign pattern in force at time ``s``."""
        return self.patterns[min(np.searchsorted(self.ends, s, side="left"), len(self.ends) - 1)]

    def add_frozen(self, start: float, end: float, y: np.ndarray, mode: Mode,
                   tau_rate: float) -> None:
        """A final segment where ``z`` no longer moves and only ``tau`` advances."""
        def frozen(s: np.ndarray, y=y.copy(), start=start) -> np.ndarray:
            s = np.atleast_1d(s)
            out = np.repeat(y[:, None], len(s), axis=1)
            out[-1] = y[-1] + tau_rate * (s - start)
            return out
        self.add(start, end, frozen, mode)

    def sample(self, s: np.ndarray, n_state: int) -> np.ndarray:
        """States at times ``s`` (each within the covered range), shape (len(s), n_state)."""
        s = np.asarray(s, dtype=float)
        out = np.empty((len(s), n_state))
        which = np.minimum(np.searchsorted(self.ends, s, side="left"), len(self.ends) - 1)
        for i in np.unique(which):
            rows = which == i
            sol = self.solutions[i]
            out[rows] = sol(s[rows]).T
            out[rows, :-1] = np.where(self.held[i].ravel(), self.zero, out[rows, :-1])
        return out


def _segment_events(problem: Problem, mode: Mode, depth: int,
                    radius: float) -> list[ev.SegmentEvent]:
    """The events to watch in the current mode."""
    found: list[ev.SegmentEvent] = []
    if problem.algorithm.sign_discontinuous:
        for flat in np.flatnonzero(~mode.held.ravel()):
            found.append(ev.ZeroCrossing(problem, index=int(flat)))
        for entry in zip(*np.nonzero(mode.held)):
            found.append(ev.SlidingRelease(problem, index=tuple(int(i) for i in entry),
                                           sign_pattern=mode.sign_pattern))
    if radius > 0 and depth >= 2:
        found.append(ev.Collapse(problem, radius=radius))
    if depth >= 3:
        found.append(ev.BlowUp(problem))
    return found


def _handle_zero_crossing(y: np.ndarray, flat: int, problem: Problem, mode: Mode,
                          tau: float, log: list[FlowEvent]) -> None:
    """A parameter reached 0: hold it if it slides (``F(+0) < 0 < F(-0)``), else push it across."""
    entry = tuple(int(i) for i in np.unravel_index(flat, problem.shape))
    came_from = mode.sign_pattern[entry]
    y[flat] = 0.0
    theta = chart_state(y[:-1], problem)
    f_plus = one_sided_velocity(theta, problem, mode.sign_pattern, entry, 1.0)
    f_minus = one_sided_velocity(theta, problem, mode.sign_pattern, entry, -1.0)
    if f_plus < 0 < f_minus:
        # held at 0; its pattern keeps the side it came from: on a sliding mode of l_inf-SAM
        # both one-sided perturbations give the same theta'^L (even L), the Filippov value
        mode.held[entry] = True
        log.append(FlowEvent(tau, "sliding", entry))
        return
    if f_plus > 0 and f_minus >= 0:
        side = 1.0
    elif f_minus < 0 and f_plus <= 0:
        side = -1.0
    else:
        side = -came_from
    y[flat] = side * NUDGE
    mode.sign_pattern[entry] = side
    log.append(FlowEvent(tau, "zero-crossing", entry))


def _also_crossed(y: np.ndarray, mode: Mode) -> list[int]:
    """Entries that reached 0 together with the one whose event fired (e.g. both layers of a
    balanced coordinate in the full system): past 0 against their pattern, or at 0 to rounding."""
    z = y[:-1]
    crossed = (~mode.held.ravel()) & ((np.sign(z) == -mode.sign_pattern.ravel())
                                      | (np.abs(z) < 1e-14))
    return [int(i) for i in np.flatnonzero(crossed)]


def _handle_release(y: np.ndarray, entry: tuple, problem: Problem, mode: Mode, tau: float,
                    log: list[FlowEvent]) -> None:
    """A held parameter stops sliding: it leaves 0 on the side its field points to."""
    theta = chart_state(y[:-1], problem)
    side = 1.0 if one_sided_velocity(theta, problem, mode.sign_pattern, entry, 1.0) >= 0 else -1.0
    mode.held[entry] = False
    mode.sign_pattern[entry] = side
    y[np.ravel_multi_index(entry, problem.shape)] = side * NUDGE
    log.append(FlowEvent(tau, "release", entry))


def simulate(data: Dataset, algorithm: str = "l2-sam", depth: int = 2, alpha=1.0, *,
             rho: float | None = None, sigma: float | None = None,
             rho_max: float | None = None, varrho: float | None = None,
             t_max: float = 10.0, clock: str = "rescaled", n_points: int = 201,
             loss: str = "logistic", reduced: bool | None = None,
             rtol: float = 1e-10, atol: float = 1e-100, method: str = "DOP853",
             chart: str = "auto", chart_scale: float = 1.0, original_time: bool = True,
             max_nfev: int = 200_000) -> Trajectory:
    """Integrate a GD / SAM flow on an L-layer diagonal linear network.

    ``dtheta/dt = -grad L(theta + eps(theta))`` (original clock) or
    ``dtheta/dtau = -grad L(theta + eps) / c(theta + eps)`` (rescaled clock, SPEC §3), from
    ``w^(l)(0) = alpha``, with ``eps`` from :data:`flows.algorithms.ALGORITHMS`.

    Parameters
    ----------
    data : a separable :class:`~flows.data.Dataset`.
    algorithm : 'gd', 'l2-sam', 'linf-sam', 'usam' or 'le-sam'.
    depth : number of layers L >= 1.
    alpha : initialization: positive scalar, (d,) vector, or (L, d) array (unbalanced).
    rho : perturbation radius (l2-sam, linf-sam, usam).
    sigma, rho_max, varrho : LE-SAM loss budget, radius cap and stabiliser (default 1e-12).
    t_max : end time in the chosen clock.
    clock : 'rescaled' (tau) or 'original' (t).
    n_points : number of equally spaced output times in ``[0, t_max]``.
    loss : 'logistic' or 'exponential'.
    reduced : use one parameter group for balanced inits (default: whenever balanced).
    rtol, atol : solve_ivp tolerances on the chart coordinates (relative control down to
        ``|theta| ~ atol / rtol``; smaller ``atol`` costs steps mainly on the way into a collapse).
    method : solve_ivp method.
    chart : 'auto' (= 'asinh'), 'asinh' or 'log' (see :mod:`flows.charts`: 'log' keeps
        decays far below 1e-90 exact but cannot follow a collapse).
    chart_scale : ``delta`` in ``z = asinh(theta / delta)``.
    original_time : compute ``log_t_original`` for a rescaled run (a quadrature along the
        path, a sizeable part of the cost); when False it is NaN ("not computed").
    max_nfev : budget of field evaluations; when exceeded the run ends with status -1 instead
        of grinding on (the known case: l_inf-SAM on n > 1 examples sliding along a surface
        where ``dL/dw_j`` changes sign with ``w_j != 0``, which the engine does not resolve).

    Returns
    -------
    Trajectory
        With ``status`` 0 (reached ``t_max``), 1 (finite-time blow-up: the path ends there) or
        -1 (solver failure, the path ends at the failure; ``message`` says why).
    """
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flows.Dataset, got {type(data).__name__}")
    algo = get_algorithm(algorithm)
    hp = resolve_hyperparameters(algorithm, {"rho": rho, "sigma": sigma, "rho_max": rho_max,
                                             "varrho": varrho})
    the_clock = get_clock(clock)
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {sorted(LOSSES)}, got {loss!r}")
    init = initialization(alpha, depth, data.d, reduced)
    if not (isinstance(t_max, (int, float, np.number)) and np.isfinite(t_max) and t_max > 0):
        raise ValueError(f"t_max must be a finite number > 0, got {t_max!r}")
    if isinstance(n_points, bool) or not isinstance(n_points, (int, np.integer)) or n_points < 2:
        raise ValueError(f"n_points must be an integer >= 2, got {n_points!r}")
    if isinstance(max_nfev, bool) or not isinstance(max_nfev, (int, np.integer)) or max_nfev < 1:
        raise ValueError(f"max_nfev must be an integer >= 1, got {max_nfev!r}")
    if not (np.isfinite(chart_scale) and chart_scale > 0):
        raise ValueError(f"chart_scale must be finite and > 0, got {chart_scale}")

    for name, value in (("rtol", rtol), ("atol", atol)):
        if not (isinstance(value, (int, float)) and np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    the_chart = choose_chart(chart, init.groups, init.balanced, int(init.multiplicity.sum()),
                             algo.sign_discontinuous, chart_scale)
    problem = Problem(data, algo, hp, LOSSES[loss], init.multiplicity, the_clock, the_chart)
    # tau starts at exactly 0: an absolute tolerance of its own keeps the first step sensible
    atol_vector = np.append(np.full(init.groups.size, the_chart.absolute_tolerance(rtol, atol)),
                            max(atol, 1e-12))
    z0 = the_chart.coordinates(SignedLog.from_float(init.groups))
    y = np.append(z0.ravel(), 0.0)
    mode = Mode(held=np.zeros(problem.shape, dtype=bool),
                sign_pattern=np.sign(init.groups) if algo.sign_discontinuous else None)
    segments = Segments(zero=the_chart.zero)
    budget = [int(max_nfev)]
    log: list[FlowEvent] = []
    status, message, nfev = SUCCESS, "reached t_max", 0
    s, s_end = 0.0, float(t_max)

    while s < s_end:
        if mode.collapsed or np.all(mode.held):
            log_c = perturbed_log_c(chart_state(y[:-1], problem), problem, mode.sign_pattern)
            segments.add_frozen(s, s_end, y, mode, float(np.exp(the_clock.log_speed(log_c))))
            s = s_end
            break
        watched = _segment_events(problem, mode, init.multiplicity.sum(), algo.radius(hp))
        held = mode.held.copy()
        pattern = None if mode.sign_pattern is None else mode.sign_pattern.copy()

        def rhs(_s, state, held=held, pattern=pattern):
            budget[0] -= 1
            if budget[0] < 0:
                raise BudgetExceeded
            return chart_rhs(state[:-1], problem, held, pattern)

        try:
            with np.errstate(over="ignore", under="ignore"):
                sol = solve_ivp(rhs, (s, s_end), y, method=method, rtol=rtol, atol=atol_vector,
                                events=watched or None, dense_output=True)
        except BudgetExceeded:
            status, s_end = FAILURE, s
            message = (f"more than max_nfev={max_nfev} field evaluations by s={s:.6g} (last "
                       "event); the step size collapsed: a discontinuity of the field that the "
                       "engine does not resolve (e.g. l_inf-SAM, n > 1, sliding where dL/dw_j "
                       "changes sign with w_j != 0)")
            nfev = max_nfev
            break
        nfev += sol.nfev
        if sol.status == -1 or not np.all(np.isfinite(sol.y[:-1, -1])):
            if sol.t[-1] > s and sol.sol is not None:
                segments.add(s, sol.t[-1], sol.sol, mode)
            status = FAILURE
            message = f"solver failed at s={sol.t[-1]:.6g}: {sol.message}"
            s_end = sol.t[-1]
            break
        s_new, y_new = sol.t[-1], sol.y[:, -1].copy()
        segments.add(s, s_new, sol.sol, mode)
        s, y = s_new, y_new
        if sol.status == 0:
            break
        if len(log) >= MAX_EVENTS:
            status, message = FAILURE, f"more than {MAX_EVENTS} events (chattering?) by s={s:.6g}"
            s_end = s
            break
        fired = next(e for e, t_ev in zip(watched, sol.t_events) if len(t_ev))
        tau_now = float(y[-1])
        if isinstance(fired, ev.ZeroCrossing):
            _handle_zero_crossing(y, fired.index, problem, mode, tau_now, log)
            for flat in _also_crossed(y, mode):
                _handle_zero_crossing(y, flat, problem, mode, tau_now, log)
        elif isinstance(fired, ev.SlidingRelease):
            _handle_release(y, fired.index, problem, mode, tau_now, log)
        elif isinstance(fired, ev.Collapse):
            y[:-1] = the_chart.zero
            mode.collapsed = True
            mode.held[:] = True
            log.append(FlowEvent(tau_now, "collapse"))
            message = f"theta collapsed to 0 at tau={tau_now:.6g} and stays there"
        elif isinstance(fired, ev.BlowUp):
            log.append(FlowEvent(tau_now, "blow-up"))
            status, s_end = BLOWUP, s
            message = f"finite-time blow-up at tau={tau_now:.10g}"
            break

    if not segments.ends:  # failed before the first step: the path is the initial point
        segments.add_frozen(0.0, 0.0, y, mode, 0.0)
    grid = np.linspace(0.0, float(t_max), n_points)
    grid = grid[grid <= s_end]
    if grid[-1] < s_end:
        grid = np.append(grid, s_end)
    states = segments.sample(grid, y.size)
    tau = states[:, -1]
    if the_clock.original:
        with np.errstate(divide="ignore"):
            log_t = np.log(grid)
    elif not original_time:
        log_t = np.full(grid.shape, np.nan)
    else:
        def log_c(s: float) -> float:
            state = segments.sample(np.array([s]), y.size)[0]
            return perturbed_log_c(chart_state(state[:-1], problem), problem,
                                   segments.pattern_at(s))
        log_t = log_original_time(tau, log_c, breakpoints=segments.starts[1:])
    return _trajectory(grid, states, tau, log_t, problem, init.multiplicity, status, message,
                       algorithm, hp, clock, tuple(log), nfev, init.reduced)


def _trajectory(grid, states, tau, log_t, problem, multiplicity, status, message,
                algorithm, hp, clock, log, nfev, reduced) -> Trajectory:
    """Assemble the :class:`Trajectory` from chart states sampled on ``grid``."""
    depth = int(np.sum(multiplicity))
    log_theta = np.empty((len(grid), depth, problem.data.d))
    sign_theta = np.empty_like(log_theta)
    log_beta = np.empty((len(grid), problem.data.d))
    sign_beta = np.empty_like(log_beta)
    loss = np.empty(len(grid))
    for k, state in enumerate(states):
        theta = chart_state(state[:-1], problem)
        beta = product_of_layers(theta, multiplicity)
        sign_theta[k] = np.repeat(theta.sign, multiplicity, axis=0)
        log_theta[k] = np.repeat(theta.log_abs, multiplicity, axis=0)
        sign_beta[k], log_beta[k] = beta
        with np.errstate(over="ignore"):
            loss[k] = np.mean(problem.loss.value(margins(beta, problem.data).to_float()))
    return Trajectory(t=grid, tau=tau, log_t_original=log_t, log_abs_theta=log_theta,
                      sign_theta=sign_theta, log_abs_beta=log_beta, sign_beta=sign_beta,
                      loss=loss, status=status, message=message, algorithm=algorithm,
                      depth=depth, clock=clock, hyperparameters=dict(hp), events=log,
                      nfev=nfev, reduced=reduced)
