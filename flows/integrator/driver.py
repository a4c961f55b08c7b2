"""``simulate``: integrate a flow segment by segment between events.

The driver reads top-down: validate the arguments, set up the run (problem, chart, initial
state, mode), integrate segments (:func:`flows.integrator.solver.integrate_segment`) and apply the event
that ends each one (:mod:`flows.integrator.events`: every event kind handles itself), then assemble the
:class:`~flows.results.Trajectory` from the dense output (:mod:`flows.integrator.segments`) with the
original time computed by a batched quadrature (:mod:`flows.clocks`).

The state is a chart (:mod:`flows.charts`) of every parameter group plus ``tau``. By default
(``chart='auto'``) a balanced run of a continuous algorithm at depth L >= 2 is integrated in
``z = log|w|`` (no parameter changes sign there; multiplicative decays and growth are exact
at any scale) and moves to the asinh chart if every parameter comes near 0; everything else
uses ``z = asinh(w / delta)``: linear near 0 for crossings, sliding and collapse, logarithmic
for large ``|w|``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .. import compiled as compiled_backend
from ..algorithms import get_algorithm, resolve_hyperparameters
from ..charts import choose_chart
from ..clocks import get_clock, log_original_time
from ..compiled import field as compiled
from ..compiled import quadrature
from ..compiled import segment as fast_segment
from ..data import Dataset
from ..field import Problem, ReferenceField
from ..fused import FusedField
from ..initialization import initialization
from ..model import LOSSES, loss_weights, margins
from ..results import FAILURE, SUCCESS, FlowEvent, Trajectory
from ..schedules import Hyperparameter, kinks_of
from ..signedlog import SignedLog, product_of_layers
from . import events as ev
from .arguments import check_options, largest_radius, warn_if_signs_cannot_separate
from .filippov import FilippovField, TooManySurfaces
from .segments import Mode, Path, Segment
from .solver import METHODS, integrate_segment

MAX_EVENTS = 10_000
MAX_POINTS = 100_000

#: Field implementations: ``numba`` the fused field with its float path compiled (extra
#: ``fast``), ``numpy`` the fused batched field, ``reference`` the point-by-point one of
#: :mod:`flows.field` (slower; for cross-checks). ``auto`` is ``numba`` where numba is
#: installed and covers the problem, else ``numpy``.
BACKENDS = {"numba": compiled.CompiledField, "numpy": FusedField, "reference": ReferenceField}


@dataclass
class Run:
    """The state of a run between segments."""

    problem: Problem
    backend: type
    mode: Mode
    y: np.ndarray
    s_end: float
    rtol: float
    atol: float
    budget: int
    near_zero_switch: bool
    path: Path
    radius: float
    kinks: np.ndarray
    loss_floor: float | None = None
    s: float = 0.0
    nfev: int = 0
    status: int = SUCCESS
    message: str = "reached t_max"
    log: list[FlowEvent] = field(default_factory=list)
    fields: dict = field(default_factory=dict)

    def next_stop(self) -> float:
        """Where the next segment must end at the latest: the next kink of a schedule, or
        ``s_end``."""
        ahead = self.kinks[self.kinks > self.s]
        return float(min(ahead[0], self.s_end)) if ahead.size else self.s_end

    def field_for(self, mode: Mode):
        """The field of the problem in ``mode``'s chart (built once per chart)."""
        key = id(mode.chart)
        if key not in self.fields:
            self.fields[key] = (mode.chart, self.backend(replace(self.problem, chart=mode.chart)))
        return self.fields[key][1]

    def moving_field(self, mode: Mode):
        """What moves the state in ``mode``: the chart's field, or where switching surfaces
        slide their Filippov combination (:class:`flows.integrator.filippov.FilippovField`; raises
        :class:`~flows.integrator.filippov.TooManySurfaces`)."""
        base = self.field_for(mode)
        return FilippovField(base, mode) if mode.sliding else base

    def tolerances(self, mode: Mode) -> tuple[float, np.ndarray]:
        """Solver ``rtol`` and per-component ``atol`` in ``mode``'s chart; ``tau`` (which starts
        at exactly 0) gets an absolute tolerance of its own to keep the first step sensible."""
        rtol, atol = mode.chart.tolerances(self.rtol, self.atol)
        if mode.near_zero is not None:  # on the way into a collapse: see NEAR_ZERO_ATOL
            atol = max(atol, ev.NEAR_ZERO_ATOL * self.radius)
        tau_atol = max(
            self.atol, 1e-12, self.rtol * max(1.0, self.s_end) if rtol < self.rtol else 0.0
        )
        return rtol, np.append(np.full(self.y.size - 1, atol), tau_atol)

    def stop(self, status: int, message: str) -> None:
        """End the run here."""
        self.status, self.message, self.s_end = status, message, self.s


def simulate(
    data: Dataset,
    algorithm: str = "l2-sam",
    depth: int = 2,
    alpha=1.0,
    *,
    rho: Hyperparameter | None = None,
    sigma: Hyperparameter | None = None,
    rho_max: Hyperparameter | None = None,
    varrho: float | None = None,
    t_max: float = 10.0,
    clock: str = "rescaled",
    n_points: int = 201,
    loss: str = "logistic",
    reduced: bool | None = None,
    rtol: float = 1e-10,
    atol: float = 1e-100,
    method: str = "DOP853",
    chart: str = "auto",
    chart_scale: float = 1.0,
    original_time: bool = True,
    max_nfev: int = 200_000,
    loss_floor: float | None = None,
    backend: str = "auto",
) -> Trajectory:
    """Integrate a GD / SAM flow on an L-layer diagonal linear network.

    ``dtheta/dt = -grad L(theta + eps(theta))`` (original clock) or
    ``dtheta/dtau = -grad L(theta + eps) / c(theta + eps)`` (rescaled clock), from
    ``w^(l)(0) = alpha``, with ``eps`` from :data:`flows.algorithms.ALGORITHMS`
    (``docs/theory.md``).

    Parameters
    ----------
    data : a separable :class:`~flows.data.Dataset`.
    algorithm : 'gd', 'l2-sam', 'linf-sam', 'usam' or 'le-sam'.
    depth : number of layers L >= 1.
    alpha : initialization: positive scalar, (d,) vector, or (L, d) array (unbalanced).
    rho : perturbation radius (l2-sam, linf-sam, usam).
    sigma, rho_max, varrho : LE-SAM loss budget, radius cap and stabiliser (default 1e-12).
        ``rho``, ``sigma`` and ``rho_max`` may be schedules: callables of the clock time
        (:mod:`flows.schedules`; segments restart at the kinks of named schedules).
    t_max : end time in the chosen clock.
    clock : 'rescaled' (tau) or 'original' (t).
    n_points : number of equally spaced output times in ``[0, t_max]`` (at most 1e5).
    loss : 'logistic' or 'exponential'.
    reduced : use one parameter group for balanced inits (default: whenever balanced).
    rtol, atol : tolerances on the chart coordinates (in the asinh chart relative control
        down to ``|theta| ~ atol / rtol``; in the log chart ``rtol`` is the relative error).
    method : 'DOP853' (default), 'RK45', 'RK23', 'Radau', 'BDF' or 'LSODA'.
    chart : 'auto', 'asinh' or 'log' (see :func:`flows.charts.choose_chart`).
    chart_scale : ``delta`` in ``z = asinh(theta / delta)``.
    original_time : compute ``log_t_original`` for a rescaled run (a batched quadrature along
        the path); when False it is NaN ("not computed").
    max_nfev : budget of field evaluations; when it is spent the run ends with status -1 and
        the path integrated so far.
    loss_floor : stop where the training loss falls to this value (> 0; None: never): the run
        ends there with status 0, the path sampled up to that point (event 'loss floor').
    backend : 'auto', 'numba' (compiled; needs the extra ``fast``), 'numpy' (fused field) or
        'reference' (point by point); see :data:`BACKENDS`.

    Returns
    -------
    Trajectory
        With ``status`` 0 (reached ``t_max``), 1 (finite-time blow-up: the path ends there) or
        -1 (solver failure or budget spent: the path ends there; ``message`` says why).
    """
    options = dict(
        t_max=t_max,
        clock=clock,
        n_points=n_points,
        loss=loss,
        reduced=reduced,
        rtol=rtol,
        atol=atol,
        method=method,
        chart=chart,
        chart_scale=chart_scale,
        original_time=original_time,
        max_nfev=max_nfev,
        loss_floor=loss_floor,
        backend=backend,
    )
    given = dict(rho=rho, sigma=sigma, rho_max=rho_max, varrho=varrho)
    run = _setup(data, algorithm, depth, alpha, given, options)
    while run.s < run.s_end:
        if run.mode.frozen:
            _freeze(run)
            break
        fired = _integrate_segment(run, method)
        if fired is None:
            continue
        if len(run.log) >= MAX_EVENTS:
            run.stop(FAILURE, f"more than {MAX_EVENTS} events (chattering?) by s={run.s:.6g}")
            break
        outcome = fired.handle(run.y, run.mode, run.s, float(run.y[-1]), run.log)
        if outcome.message is not None:
            run.message = outcome.message
        if outcome.stop:
            run.stop(outcome.status, run.message)
        elif undecided := ev.undecided_surfaces(run.log):
            run.stop(FAILURE, _undecided_message(undecided, run.log[-1].tau))
    return _assemble(run, float(t_max), n_points, original_time, algorithm)


def _setup(data, algorithm: str, depth, alpha, given: dict, options: dict) -> Run:
    """Validate every argument (``ValueError`` naming it, :mod:`flows.integrator.arguments`) and build the
    initial run state."""
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flows.Dataset, got {type(data).__name__}")
    algo = get_algorithm(algorithm)
    hp = resolve_hyperparameters(algorithm, given)
    init = initialization(alpha, depth, data.d, options["reduced"])
    check_options(options, MAX_POINTS, METHODS, ("auto", *BACKENDS))
    depth_total = int(init.multiplicity.sum())
    warn_if_signs_cannot_separate(data, alpha, depth_total, algorithm)
    the_chart = choose_chart(
        options["chart"],
        init.groups,
        init.balanced,
        depth_total,
        algo.sign_discontinuous,
        options["chart_scale"],
    )
    problem = Problem(
        data,
        algo,
        hp,
        LOSSES[options["loss"]],
        init.multiplicity,
        get_clock(options["clock"]),
        the_chart,
    )
    mode = Mode(
        the_chart,
        held=np.zeros(problem.shape, dtype=bool),
        sign_pattern=np.sign(init.groups) if algo.sign_discontinuous else None,
        direction_pattern=_direction_signs(problem, init.groups)
        if algo.sign_discontinuous
        else None,
    )
    z0 = the_chart.coordinates(SignedLog.from_float(init.groups))
    t_max = float(options["t_max"])
    return Run(
        problem=problem,
        backend=BACKENDS[_backend_name(options["backend"], problem)],
        mode=mode,
        y=np.append(z0.ravel(), 0.0),
        s_end=t_max,
        rtol=float(options["rtol"]),
        atol=float(options["atol"]),
        budget=int(options["max_nfev"]),
        near_zero_switch=options["chart"] == "auto",
        path=Path(problem.shape),
        radius=largest_radius(algo, hp, t_max),
        kinks=kinks_of(hp.values()),
        loss_floor=None if options["loss_floor"] is None else float(options["loss_floor"]),
    )


def _direction_signs(problem: Problem, groups: np.ndarray) -> np.ndarray:
    """``sign G_j`` at the initialization (0 where ``G_j = 0``: decided by the first event)."""
    theta = SignedLog.from_float(groups)
    return FusedField(problem).evaluate(theta.sign, theta.log_abs)[0].sign.astype(float)


def _backend_name(backend: str, problem: Problem) -> str:
    """``auto`` resolved: ``numba`` where installed and covering the problem, else ``numpy``."""
    if backend == "numba":
        compiled_backend.require()
    if backend == "auto":
        return "numba" if compiled_backend.available() and compiled.supports(problem) else "numpy"
    return backend


def _integrate_segment(run: Run, method: str) -> ev.SegmentEvent | None:
    """Integrate in the current mode up to the next event; record the segment.

    Returns the event that ended the segment, or None (end reached, or the run stopped).
    """
    mode = run.mode.copy()
    base = run.field_for(mode)
    try:
        fld = run.moving_field(mode)
    except TooManySurfaces as error:
        run.stop(FAILURE, f"{error} at s={run.s:.6g}; the path up to there is returned")
        return None
    pattern = fld.pattern_signs(mode.pattern)
    watched = ev.segment_events(
        base,
        mode,
        int(run.problem.multiplicity.sum()),
        run.radius,
        near_zero=run.near_zero_switch,
        sliding=fld if isinstance(fld, FilippovField) else None,
        y=run.y,
    )
    if run.loss_floor is not None:
        watched.append(ev.LossFloor(base, floor=run.loss_floor))
    holding = next((e for e in watched if e.already(run.y)), None)
    if holding is not None:
        return holding

    rtol, atol = run.tolerances(mode)
    first_step = None
    if fast_segment.applies(fld, mode, method):
        done, run.s, run.y = fast_segment.advance(
            fld, mode, run.y, run.s, run.next_stop(), (rtol, atol), run.budget - run.nfev,
            run.radius, run.near_zero_switch, run.path.segments, run.loss_floor,
        )  # fmt: skip
        run.nfev += done.nfev
        if done.budget_spent:
            run.stop(FAILURE, _budget_message(run))
        if done.finished or done.budget_spent:
            return None
        first_step = done.first_step

    def rhs(s: float, state: np.ndarray) -> np.ndarray:
        return fld.chart_rhs(state[:-1], mode.held, pattern, s)

    with np.errstate(over="ignore", under="ignore"):
        result = integrate_segment(
            rhs,
            run.s,
            run.y,
            run.next_stop(),
            watched,
            method,
            rtol,
            atol,
            run.budget - run.nfev,
            first_step,
        )
    run.nfev += result.nfev
    if len(result.ts) > 1:
        run.path.segments.append(Segment(mode, np.array(result.ts), result.interpolants))
        run.s, run.y = result.ts[-1], result.y.copy()
    if result.status == "failed":
        run.stop(FAILURE, f"solver failed at s={result.ts[-1]:.6g}: {result.message}")
    elif result.status == "budget":
        run.stop(FAILURE, _budget_message(run))
    elif result.status == "event":
        assert result.event is not None
        return watched[result.event]
    return None


def _undecided_message(surfaces: list[str], tau: float) -> str:
    """The message of a run stopped where switching surfaces meet undecided."""
    return (
        f"the switching surfaces {', '.join(surfaces)} meet at tau={tau:.6g} with no consistent "
        "way to slide on or cross them (each resolution at that instant undoes the previous "
        "one); the path up to there is returned"
    )


def _budget_message(run: Run) -> str:
    """The message of a run whose ``max_nfev`` is spent."""
    return (
        f"max_nfev={run.budget} field evaluations spent by s={run.s:.6g} "
        f"(t_max={run.s_end:g}); the path up to there is returned"
    )


def _freeze(run: Run) -> None:
    """Nothing moves any more (collapse, stationary point, or every entry held): only ``tau``
    advances, at the rate of ``c`` there (at a stationary point ``eps = 0``)."""
    fld = run.moving_field(run.mode)
    problem = run.problem
    theta = run.mode.chart.state(run.y[:-1].reshape(problem.shape))
    theta = SignedLog(
        np.where(run.mode.held, 0.0, theta.sign), np.where(run.mode.held, -np.inf, theta.log_abs)
    )
    if run.mode.stationary:
        beta = product_of_layers(theta, problem.multiplicity)
        log_c = loss_weights(margins(beta, problem.data), problem.loss).log_c
    else:
        log_c = float(fld.log_c(theta, fld.pattern_signs(run.mode.pattern), run.s))
    rate = float(np.exp(run.problem.clock.log_speed(log_c)))
    run.path.segments.append(Segment.frozen(run.mode.copy(), run.s, run.s_end, run.y, rate))
    run.s = run.s_end


def _assemble(
    run: Run, t_max: float, n_points: int, original_time: bool, algorithm: str
) -> Trajectory:
    """Sample the path on the output grid and build the :class:`Trajectory`."""
    if not run.path.segments:  # stopped before the first step: the path is the initial point
        run.path.segments.append(Segment.frozen(run.mode.copy(), 0.0, 0.0, run.y, 0.0))
    s_end = run.path.end
    grid = np.linspace(0.0, t_max, n_points)
    grid = grid[grid <= s_end]
    if grid[-1] < s_end:
        grid = np.append(grid, s_end)
    theta, tau, _ = run.path.sample(grid)
    problem = run.problem
    if problem.clock.original:
        with np.errstate(divide="ignore"):
            log_t = np.log(grid)
    elif not original_time:
        log_t = np.full(grid.shape, np.nan)
    else:
        rule = quadrature.interval_rule() if run.backend is compiled.CompiledField else None
        log_t = log_original_time(grid, run.path.breakpoints(), _exponent(run), rule=rule)
    fused = FusedField(problem)
    beta = fused.product_of_layers(theta.sign, theta.log_abs)
    with np.errstate(over="ignore"):
        loss = np.mean(problem.loss.value(fused.margins(beta)), axis=-1)
    mult = problem.multiplicity
    return Trajectory(
        t=grid,
        tau=tau,
        log_t_original=log_t,
        log_abs_theta=np.repeat(theta.log_abs, mult, axis=1),
        sign_theta=np.repeat(theta.sign, mult, axis=1),
        log_abs_beta=beta.log_abs,
        sign_beta=beta.sign,
        loss=loss,
        status=run.status,
        message=run.message,
        algorithm=algorithm,
        depth=int(mult.sum()),
        clock="original" if problem.clock.original else "rescaled",
        hyperparameters=dict(problem.hyperparameters),
        events=tuple(run.log),
        nfev=run.nfev,
        reduced=len(mult) == 1 and int(mult[0]) > 1,
        **_sliding_summary(run),
    )


def _sliding_summary(run: Run) -> dict:
    """``sliding_time`` (rescaled time with some surface sliding) and ``sliding_surfaces`` (the
    most at once) over the path."""
    total, most = 0.0, 0
    for seg in run.path.segments:
        count = int(np.sum(seg.mode.held)) + len(seg.mode.sliding_directions)
        if seg.mode.sliding and count:
            _, tau = seg.sample(np.array([seg.start, seg.end]), run.problem.shape)
            total += float(tau[1] - tau[0])
            most = max(most, count)
    return {"sliding_time": total, "sliding_surfaces": most}


def _exponent(run: Run):
    """``K(s, ref) = -log c(theta'(s))``, ``s`` sampled on the segment that covers ``ref``
    (compiled where :func:`flows.compiled.segment.exponent` applies, the numpy field elsewhere)."""

    def K(s: np.ndarray, ref: np.ndarray) -> np.ndarray:
        which = run.path.segment_of(ref)
        out = np.empty(len(s))
        for i in np.unique(which):
            rows = np.flatnonzero(which == i)
            out[rows] = _segment_exponent(run, run.path.segments[i], s[rows])
        return out

    return K


def _segment_exponent(run: Run, seg: Segment, s: np.ndarray) -> np.ndarray:
    """``K = -log c(theta')`` at times ``s`` of one segment."""
    fld = run.moving_field(seg.mode)
    out = fast_segment.exponent(fld, seg, s)
    if out is None:
        out = np.full(len(s), np.nan)
    rest = np.flatnonzero(np.isnan(out))
    if rest.size:
        theta, _ = seg.sample(s[rest], run.problem.shape)
        out[rest] = -fld.log_c(theta, fld.pattern_signs(seg.mode.pattern), s[rest])
    return out
