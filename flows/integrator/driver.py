"""``simulate``: integrate a flow segment by segment between events.

The driver reads top-down: validate the arguments, set up the run (problem, chart, initial
state, mode), integrate segments (:func:`flows.integrator.solver.integrate_segment`) and apply the event
that ends each one (:mod:`flows.integrator.events`: every event kind handles itself), and
assemble the :class:`~flows.results.Trajectory` from the dense output
(:mod:`flows.integrator.segments`) with the original time computed by a batched quadrature
(:mod:`flows.clocks`), a batch of segments at a time as the path is recorded
(:mod:`flows.integrator.assemble`).

The state is a chart (:mod:`flows.charts`) of every parameter group plus ``tau``. By default
(``chart='auto'``) a balanced run of a continuous algorithm at depth L >= 2 is integrated in
``z = log|w|`` (no parameter changes sign there; multiplicative decays and growth are exact
at any scale) and moves to the asinh chart if every parameter comes near 0; everything else
uses ``z = asinh(w / delta)``: linear near 0 for crossings, sliding and collapse, logarithmic
for large ``|w|``. At depth 2 from an init whose ``u_j^2 - v_j^2`` the layers cannot resolve
(regression; ``chart='conserved'`` asks for it anywhere it applies) the run goes to the
coordinates of :mod:`flows.conserved`, which carry that quantity exactly.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from typing import Any, NamedTuple

import numpy as np

from ..algorithms import (
    ALGORITHMS,
    effective_algorithm,
    get_algorithm,
    resolve_hyperparameters,
)
from ..backends import BACKENDS, Backend, choose_backend
from ..charts import choose_chart
from ..clocks import clock_for, get_clock
from ..data import Dataset
from ..field import Problem
from ..fused import FusedField
from ..initialization import Initialization, initialization
from ..memo import exact_key, recall, small
from ..model import get_loss, loss_for, loss_weights, margins
from ..results import Cause, Trajectory
from ..schedules import Hyperparameter, kinks_of
from ..signedlog import SignedLog, product_of_layers
from ..user_frame import user_stacklevel
from . import events as ev
from . import stepping, stiffness, ties
from .arguments import (
    check_options,
    default_chart_scale,
    largest_radius,
    sign_warning,
)
from .assemble import Output, assemble, ends, output_grid
from .conservation import MIRROR_ADVICE, split_layers
from .filippov import DIRECTION, FilippovField, TooManySurfaces
from .junctions import resolve_junction
from .segments import Mode, Path, Segment
from .solver import METHODS, integrate_segment
from .state import Run, field_key
from .surface_events import (
    CHATTER_EVENTS,
    SurfaceDrift,
    chattering_surfaces,
    surface_names,
    undecided_surfaces,
)
from .threshold_events import LossFloor
from .watched import segment_events

MAX_EVENTS = 10_000
#: Segments in a row that end at once (no advance) at an event whose handling logs nothing
#: (no crossing, slide or release: the run is where it was, in the same mode) at which the run
#: stops as stalled. Measured: l_inf-SAM on teacher set 7 at L = 4 met 1755 such direction
#: crossings in a row at tau = 13.0803 (no G_j at zero to cross where the event fired),
#: 7000 evaluations and 7 s, before its steps' stall check ended it.
IDLE_SEGMENTS = 20
MAX_POINTS = 100_000


def simulate(
    data: Dataset,
    algorithm: str = "l2-sam",
    depth: int = 2,
    alpha=1.0,
    *,
    t_max: float = 10.0,
    clock: str | None = None,
    n_points: int = 201,
    loss: str | None = None,
    reduced: bool | None = None,
    rtol: float = 1e-10,
    atol: float = 1e-100,
    method: str = "DOP853",
    chart: str = "auto",
    chart_scale: float | None = None,
    original_time: bool = True,
    max_nfev: int = 200_000,
    loss_floor: float | None = None,
    backend: str = "auto",
    continue_by_steps: bool = True,
    **hyperparameters: Hyperparameter | None,
) -> Trajectory:
    """Integrate a GD / SAM flow on an L-layer diagonal linear network.

    ``dtheta/dt = -grad L(theta + eps(theta))`` (original clock) or
    ``dtheta/dtau = -grad L(theta + eps) / c(theta + eps)`` (rescaled clock), from
    ``w^(l)(0) = alpha``, with ``eps`` from :data:`flows.algorithms.ALGORITHMS`
    (``docs/theory.md``).

    Parameters
    ----------
    data : a :class:`~flows.data.Dataset`: separable classification data, or regression data
        (``task='regression'``: the squared loss, the original clock).
    algorithm : a name in :data:`flows.algorithms.ALGORITHMS` ('gd', 'l2-sam', 'linf-sam',
        'usam', 'le-sam', ...).
    depth : number of layers L >= 1.
    alpha : initialization: positive scalar, (d,) vector, or (L, d) array of any signs, zeros
        allowed (:func:`flows.initialization.initialization`).
    t_max : end time in the chosen clock.
    clock : 'rescaled' (tau) or 'original' (t); None: 'rescaled' in classification,
        'original' in regression (where the rescaled clock is not defined, see
        :func:`flows.clocks.clock_for`).
    n_points : number of equally spaced output times in ``[0, t_max]`` (at most 1e5).
    loss : a name in :data:`flows.model.LOSSES` of the data's task ('logistic', 'exponential'
        in classification, 'squared' in regression); None: 'logistic' or 'squared'.
    reduced : use one parameter group for balanced inits (default: whenever balanced).
    rtol, atol : tolerances on the chart coordinates (in the asinh chart relative control
        down to ``|theta| ~ atol / rtol * chart_scale``; in the log chart ``rtol`` is the
        relative error).
    method : 'DOP853' (default), 'RK45', 'RK23', 'Radau', 'BDF' or 'LSODA'.
    chart : 'auto', 'asinh', 'log' (see :func:`flows.charts.choose_chart`) or 'conserved': depth
        2 in the coordinates of :mod:`flows.conserved` (``psi`` and ``log|u_j^2 - v_j^2|``,
        exact at any ``alpha``), for the algorithms whose perturbation is a multiple of the
        gradient (gd, l2-sam, usam, le-sam, 1-sam, 1-usam) with numbers as hyper-parameters, on
        the full system; its events are collapse, stationary point, loss floor and residual
        switch, and ``backend`` is checked but not used (the trajectory's backend is
        'conserved'). 'auto' takes 'conserved' for regression data from an unbalanced init
        where it applies and some ``|u_j^2 - v_j^2|`` is below 1e-10, which float64 layers
        may lose (:func:`flows.conserved.conserved_applies`; ``u = alpha``, ``v = 0`` with
        ``alpha < 1e-5``).
    chart_scale : ``delta`` in ``z = asinh(theta / delta)``; None: 1, or the smallest nonzero
        initial entry where that is below 1e-80
        (:func:`flows.integrator.arguments.default_chart_scale`).
    original_time : compute ``log_t_original`` for a rescaled run (a batched quadrature along
        the path); when False it is NaN ("not computed").
    max_nfev : budget of field evaluations; when it is spent the run ends with status -1 and
        the path integrated so far.
    loss_floor : stop where the training loss falls to this value (> 0; None: never): the run
        ends there with status 0, the path sampled up to that point (event 'loss floor').
    backend : 'auto', 'numba' (compiled; needs the extra ``fast``), 'numpy' (fused field) or
        'reference' (point by point); see :mod:`flows.backends`.
    continue_by_steps : where l_inf-SAM's event-driven integration stops (a junction with no
        consistent way, a stall), continue by its own steps where three step sizes agree
        (:mod:`flows.integrator.stepping`; ``Trajectory.own_steps_from``, ``step_error``);
        False: end there.
    **hyperparameters : the algorithm's hyper-parameters by name, as its table entry declares
        them (``ALGORITHMS[algorithm].hyperparameters``): ``rho`` (l2-sam, linf-sam, usam);
        ``sigma``, ``rho_max``, ``varrho`` (le-sam: loss budget, radius cap, stabiliser with
        default 1e-12). Those declared ``schedulable`` (``rho``, ``sigma``, ``rho_max``) may be
        schedules: callables of the clock time (:mod:`flows.schedules`; segments restart at the
        kinks of named schedules). Values for hyper-parameters this algorithm does not read
        are checked and ignored; a name no algorithm reads is a ``ValueError``.

    Returns
    -------
    Trajectory
        With ``status`` 0 (reached ``t_max``), 1 (finite-time blow-up: the path ends there,
        or, where tied margins or the resolution of ``tau`` stop it first, just before it, the
        event at the blow-up time extrapolated by homogeneity: :mod:`flows.integrator.stiffness`)
        or -1 (solver failure or budget spent: the path ends there; ``message`` says why).
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
        continue_by_steps=continue_by_steps,
    )
    return simulate_options(data, algorithm, depth, alpha, hyperparameters, options)


def simulate_options(
    data: Dataset,
    algorithm: str,
    depth,
    alpha,
    hyperparameters: dict,
    options: dict,
    made: Any = None,
    warn: bool = True,
) -> Trajectory:
    """:func:`simulate` with its keyword ``options`` (every one, ``reduced`` too) and
    ``hyperparameters`` as dicts. ``made``: the first compiled kernel call of the run made
    ahead (:class:`flows.compiled.segment.Call`, by :func:`flows.simulate_many`), taken where
    the run's first segment makes that call with the same arguments; ``warn=False``: the
    warnings of :func:`_setup` were given already."""
    method = options["method"]
    conserved = _conserved_run(data, algorithm, depth, alpha, hyperparameters, options)
    if conserved is not None:
        return conserved
    run = _setup(data, algorithm, depth, alpha, hyperparameters, options, warn)
    idle = 0  # segments in a row that ended at once at an event that changed nothing
    while run.s < run.s_end:
        if run.nfev >= run.budget:  # segments that each end at an event spend it too
            run.stop(Cause.BUDGET_SPENT, _budget_message(run, method))
            break
        if _steps_stall(run):
            break
        if run.mode.frozen:
            _freeze(run)
            break
        start, logged = run.s, len(run.log)
        fired = _integrate_segment(run, method, made)
        made = None
        run.retime()
        if fired is None:
            idle = 0
            continue
        if len(run.log) >= MAX_EVENTS:
            run.stop(
                Cause.TOO_MANY_EVENTS,
                f"more than {MAX_EVENTS} events (chattering?) by {_when(run, run.s)}",
            )
            break
        if isinstance(fired, stiffness.TiesLost):
            why = stiffness.tie_message(fired.field, run.y, fired.radius, run.s)
            _end_short_of_blowup(run, fired.field, why, " (a smaller rtol goes further)")
            break
        if isinstance(fired, SurfaceDrift):
            _end_short_of_blowup(run, fired.field, fired.message(run.y))
            break
        outcome = fired.handle(run.y, run.mode, run.s, float(run.y[-1]), run.log)
        if outcome.message is not None:
            run.message = outcome.message
        if outcome.cause is not None:
            run.cause = outcome.cause
        idle = idle + 1 if run.s == start and len(run.log) == logged else 0
        if outcome.stop:
            run.stop(run.cause, run.message)
        elif idle >= IDLE_SEGMENTS:
            run.stop(Cause.SOLVER_FAILED, _idle_message(run, fired))
        elif (undecided := undecided_surfaces(run.log, _decided(run.mode))) and not resolve_junction(
            run.field_for(run.mode), run.mode, run.y, run.s, float(run.y[-1]), run.log,
            run.backend.sliding,
        ):  # fmt: skip
            run.stop(Cause.UNDECIDED_JUNCTION, _undecided_message(undecided, run.log[-1].tau))
        elif (chattering := chattering_surfaces(run.log)) and not _through_accumulation(
            run, chattering
        ):
            run.stop(Cause.UNDECIDED_JUNCTION, _chattering_message(chattering, run.log))
    stepping.go_on(run)
    return assemble(run, algorithm)


def _conserved_run(
    data, algorithm: str, depth, alpha, given: dict, options: dict
) -> Trajectory | None:
    """The run in the conserved coordinates of :mod:`flows.conserved` where ``chart`` asks for
    them ('conserved'), or where ``chart='auto'`` and they apply (regression at depth 2 from an
    unbalanced init whose ``u_j^2 - v_j^2`` the layers cannot resolve,
    :func:`flows.conserved.conserved_applies`); None otherwise. A zero perturbation size runs
    GD's flow (:func:`flows.algorithms.effective_algorithm`), reported under ``algorithm``."""
    chart = options["chart"]
    if not isinstance(chart, str) or chart not in ("conserved", "auto"):
        return None
    if chart == "auto" and not (isinstance(data, Dataset) and data.regression):
        return None
    # flows.conserved imports this module (MAX_POINTS): imported here, once both are loaded
    from ..conserved import check_conserved, conserved_applies, conserved_flow

    hp = resolve_hyperparameters(algorithm, given)
    runs = effective_algorithm(algorithm, hp)
    own = given if runs == algorithm else {}
    if chart == "auto" and not conserved_applies(data, runs, depth, alpha, options["reduced"], own):
        return None
    check_conserved(data, runs, depth, alpha, options["reduced"], own)
    resolved = dict(
        options, clock=clock_for(options["clock"], data), loss=loss_for(options["loss"], data)
    )
    checked = check_options(resolved, MAX_POINTS, METHODS, ("auto", *BACKENDS))
    unused = ("reduced", "chart", "chart_scale", "backend", "continue_by_steps")
    arguments = {key: value for key, value in checked.items() if key not in unused}
    traj = conserved_flow(data, runs, alpha, **arguments, **own)
    if runs == algorithm:
        return traj
    return dataclasses.replace(traj, algorithm=algorithm, hyperparameters=dict(hp))


def _setup(
    data, algorithm: str, depth, alpha, given: dict, options: dict, warn: bool = True
) -> Run:
    """Validate every argument (``ValueError`` naming it, :mod:`flows.integrator.arguments`) and build the
    initial run state (``warn``: with the warning of
    :func:`~flows.integrator.arguments.sign_warning`). What the arguments
    determine is built once per data set and arguments (:class:`Prepared`, kept by
    :func:`flows.memo.recall`); the backend is chosen per call (numba's compiled kernels may
    become ready between two calls)."""
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flows.Dataset, got {type(data).__name__}")
    prepared = recall(
        data,
        _setup_key(algorithm, depth, alpha, given, options) if small(data) else None,
        lambda: _prepare(data, algorithm, depth, alpha, given, options),
    )
    if warn and prepared.sign_warning is not None:
        warnings.warn(prepared.sign_warning, RuntimeWarning, stacklevel=user_stacklevel())
    options = prepared.options
    problem = prepared.problem
    backend = choose_backend(options["backend"], problem)
    chart = prepared.mode.chart
    run = Run(
        problem=problem,
        backend=backend,
        fields={id(chart): (chart, prepared.field(backend))},
        mode=prepared.mode.copy(),
        y=prepared.y0.copy(),
        initial=(prepared.mode, prepared.y0),
        s_end=options["t_max"],
        rtol=options["rtol"],
        atol=options["atol"],
        budget=options["max_nfev"],
        near_zero_switch=options["chart"] == "auto",
        path=Path(problem.shape),
        output=Output(grid=prepared.grid, quadrature=prepared.quadrature),
        radius=prepared.radius,
        kinks=prepared.kinks,
        loss_floor=options["loss_floor"],
        continue_by_steps=options["continue_by_steps"],
    )
    run.first = prepared.first_segment(run, options["method"])
    return run


@dataclasses.dataclass(frozen=True)
class Prepared:
    """What a run's arguments determine before it integrates (:func:`_prepare`): shared by the
    calls with the same arguments, and written by none (a run copies ``mode`` and ``y0``).

    Attributes
    ----------
    problem : the flow (the effective algorithm: gd's where the perturbation vanishes).
    mode : the initial mode.
    y0 : the initial state, chart coordinates then ``tau = 0`` (read-only).
    options : the keyword settings checked and in their working types
        (:func:`~flows.integrator.arguments.check_options`; ``chart_scale`` filled in).
    grid : the output times (read-only, :func:`~flows.integrator.assemble.output_grid`).
    quadrature : ``log t`` is integrated (a rescaled run with ``original_time``).
    radius : the perturbation size of the collapse threshold
        (:func:`~flows.integrator.arguments.largest_radius`).
    kinks : the schedules' kinks (read-only).
    depth_total : the number of layers L.
    sign_warning : the message of the warning that the initialization's signs cannot
        separate the data (:func:`~flows.integrator.arguments.sign_warning`), or None.
    fields : the fields built for it, by backend name (:meth:`field`).
    first_segments : the set-up of its runs' first segment, by backend name
        (:meth:`first_segment`).
    """

    problem: Problem
    mode: Mode
    y0: np.ndarray
    options: dict
    grid: np.ndarray
    quadrature: bool
    radius: float
    kinks: np.ndarray
    depth_total: int
    sign_warning: str | None
    fields: dict = dataclasses.field(default_factory=dict, compare=False)
    first_segments: dict = dataclasses.field(default_factory=dict, compare=False)

    def field(self, backend: Backend):
        """``backend``'s field of :attr:`problem` (built once per backend, and kept for the
        problem's other runs, :func:`~flows.integrator.state.field_key`)."""
        if backend.name not in self.fields:
            self.fields[backend.name] = recall(
                self.problem.data,
                field_key(backend.name, self.problem, self.problem.chart),
                lambda: backend.field(self.problem),
            )
        return self.fields[backend.name]

    def first_segment(self, run: Run, method: str) -> FirstSegment | None:
        """The set-up of the first segment of ``run``, a run of this :class:`Prepared` at its
        start (:func:`_first_segment`), made once per backend."""
        name = run.backend.name
        if name not in self.first_segments:
            self.first_segments[name] = _first_segment(run, method)
        return self.first_segments[name]


def _setup_key(algorithm, depth, alpha, given: dict, options: dict) -> tuple | None:
    """The memo key of :func:`_prepare`'s arguments (:func:`flows.memo.exact_key`; None where
    one has no exact key, e.g. a schedule or a large array: then nothing is kept). The table
    entry of ``algorithm`` is part of it, by identity."""
    if type(algorithm) is not str:
        return None
    parts = (exact_key(depth), exact_key(alpha), exact_key(given), exact_key(options))
    if any(part is None for part in parts):
        return None
    return ("setup", algorithm, id(ALGORITHMS.get(algorithm)), *parts)


def _prepare(data, algorithm: str, depth, alpha, given: dict, options: dict) -> Prepared:
    """:class:`Prepared` of the arguments, every one validated (``ValueError`` naming it)."""
    get_algorithm(algorithm)
    options = dict(options, loss=loss_for(options["loss"], data))
    options["clock"] = clock_for(options["clock"], data)
    hp = resolve_hyperparameters(algorithm, given)
    algo = get_algorithm(effective_algorithm(algorithm, hp))  # eps = 0: gd's run
    init = _initialization(alpha, depth, data.d, options["reduced"])
    options = check_options(options, MAX_POINTS, METHODS, ("auto", *BACKENDS))
    if options["chart_scale"] is None:
        options["chart_scale"] = default_chart_scale(init.groups)
    the_chart = choose_chart(
        options["chart"],
        init.groups,
        init.balanced,
        int(init.multiplicity.sum()),
        algo.sign_discontinuous,
        options["chart_scale"],
    )
    problem = Problem(
        data,
        algo,
        hp,
        get_loss(options["loss"]),
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
    y0 = np.append(the_chart.coordinates(SignedLog.from_float(init.groups)).ravel(), 0.0)
    t_max = float(options["t_max"])
    kinks = kinks_of(hp.values())
    for array in (y0, kinks):
        array.setflags(write=False)
    options.update(
        t_max=t_max,
        rtol=float(options["rtol"]),
        atol=float(options["atol"]),
        max_nfev=int(options["max_nfev"]),
        loss_floor=None if options["loss_floor"] is None else float(options["loss_floor"]),
        continue_by_steps=bool(options["continue_by_steps"]),
    )
    return Prepared(
        problem=problem,
        mode=mode,
        y0=y0,
        options=options,
        grid=output_grid(t_max, options["n_points"]),
        quadrature=bool(options["original_time"]) and not problem.clock.original,
        radius=largest_radius(algo, hp, t_max),
        kinks=kinks,
        depth_total=int(init.multiplicity.sum()),
        sign_warning=sign_warning(data, alpha, int(init.multiplicity.sum()), algorithm),
    )


def _initialization(alpha, depth, d: int, reduced) -> Initialization:
    """:func:`flows.initialization.initialization`, built once per value (its arrays
    read-only) for a scalar ``alpha`` with an int ``depth`` and ``reduced`` None or a bool;
    checked by it as any other input."""
    scalar = isinstance(alpha, (float, int, np.floating, np.integer)) and not isinstance(
        alpha, (bool, np.bool_)
    )
    if scalar and type(depth) is int and (reduced is None or type(reduced) is bool):
        return _scalar_initialization(float(alpha), depth, d, reduced)
    return initialization(alpha, depth, d, reduced)


@functools.lru_cache(maxsize=256)
def _scalar_initialization(
    alpha: float, depth: int, d: int, reduced: bool | None
) -> Initialization:
    """:func:`_initialization` of a scalar ``alpha``, cached."""
    init = initialization(alpha, depth, d, reduced)
    init.groups.setflags(write=False)
    init.multiplicity.setflags(write=False)
    return init


def _direction_signs(problem: Problem, groups: np.ndarray) -> np.ndarray:
    """``sign G_j`` at the initialization (0 where ``G_j = 0``: decided by the first event)."""
    theta = SignedLog.from_float(groups)
    return FusedField(problem).evaluate(theta.sign, theta.log_abs)[0].sign.astype(float)


def _integrate_segment(run: Run, method: str, made: Any = None) -> ev.SegmentEvent | None:
    """Integrate in the current mode up to the next event; record the segment (``made``: a
    compiled kernel call made ahead, :func:`simulate_options`; the run's first segment takes
    the set-up made ahead, :attr:`~flows.integrator.state.Run.first`).

    Returns the event that ended the segment, or None (end reached, or the run stopped).
    """
    first, run.first = run.first, None
    mode = run.mode.copy()
    if method in stiffness.IMPLICIT and stiffness.tie_prone(run.problem):
        run.stiff = True  # the user's implicit method: watched for lost ties from the start
    method = stiffness.STIFF_METHOD if run.stiff and method not in stiffness.IMPLICIT else method
    base = run.field_for(mode)
    try:
        fld = run.moving_field(mode)
    except TooManySurfaces as error:
        run.stop(
            Cause.TOO_MANY_SURFACES,
            f"{error} at {_when(run, run.s)}; the path up to there is returned",
        )
        return None
    pattern = fld.pattern_signs(mode.pattern)
    watched = None
    if first is None:
        watched = _watched(run, base, fld, mode)
        holding = next((e for e in watched if e.already(run.y)), None)
        if holding is not None:
            return holding
    rtol, atol = run.tolerances(mode) if first is None else first.tolerances
    first_step = None
    allowance = _allowance(run, method)
    loop = run.backend.segment_loop
    if loop is not None and (first is not None or loop.applies(fld, mode, method)):
        recorded = run.path.count
        done, run.s, run.y = loop.advance(
            fld, mode, run.y, run.s, run.next_stop(), (rtol, atol), allowance, run.radius,
            run.near_zero_switch, run.path.segments, run.loss_floor, made,
            None if first is None else first.arguments,
        )  # fmt: skip
        if run.path.count > recorded:
            run.used(loop.name)
        run.nfev += done.nfev
        if done.budget_spent:
            _allowance_spent(run, base, method)
        if done.finished or done.budget_spent:
            return None
        first_step = done.first_step
    if watched is None:
        watched = _watched(run, base, fld, mode)

    def rhs(s: float, state: np.ndarray) -> np.ndarray:
        return fld.chart_rhs(state[:-1], mode.held, pattern, s)

    def record(ts: list[float], interpolants: list) -> None:
        run.path.segments.append(Segment(mode, np.array(ts), interpolants))

    recorded = run.path.count
    with np.errstate(all="ignore"):  # a non-finite step is rejected; a failure is reported below
        result = integrate_segment(
            rhs,
            run.s,
            run.y,
            run.next_stop(),
            watched,
            method,
            rtol,
            atol,
            allowance,
            first_step,
            record,
        )
    run.nfev += result.nfev
    if len(result.ts) > 1:
        record(result.ts, result.interpolants)
    if run.path.count > recorded:
        run.used(f"scipy {method}")
        run.s, run.y = result.ts[-1], result.y.copy()
    if result.status in ("failed", "budget") and _extrapolated_blowup(run, base):
        return None
    if result.status == "failed" and run.stiff and ties.finish(run, "the stiff method failed"):
        return None
    if result.status == "failed":
        split = _split_layers(run)
        run.stop(
            Cause.SOLVER_FAILED if split is None else Cause.PRECISION_LOST,
            _failure_message(run, rhs, result.ts[-1], result.message, split),
        )
    elif result.status == "budget":
        _allowance_spent(run, base, method)
    elif result.status == "event":
        assert result.event is not None
        return watched[result.event]
    return None


def _watched(run: Run, base, fld, mode: Mode) -> list[ev.SegmentEvent]:
    """The events a segment in ``mode`` watches (:func:`flows.integrator.watched.segment_events`,
    the loss floor, lost ties on a stiff run)."""
    watched = segment_events(
        base,
        mode,
        int(run.problem.multiplicity.sum()),
        run.radius,
        near_zero=run.near_zero_switch,
        sliding=fld if isinstance(fld, FilippovField) else None,
        y=run.y,
        combination=run.backend.sliding,
    )
    if run.loss_floor is not None:
        watched.append(LossFloor(base, floor=run.loss_floor))
    if run.stiff:
        watched.append(stiffness.TiesLost(base, rtol=run.rtol, radius=run.radius))
    return watched


class FirstSegment(NamedTuple):
    """The set-up of a run's first segment on a backend's segment loop, the same for every run
    of a :class:`Prepared` (:meth:`Prepared.first_segment`): its tolerances
    (:meth:`~flows.integrator.state.Run.tolerances`) and the loop's arguments (``arguments``
    of :class:`flows.backends.SegmentLoop`)."""

    tolerances: tuple[float, np.ndarray]
    arguments: Any


def _first_segment(run: Run, method: str) -> FirstSegment | None:
    """:class:`FirstSegment` of ``run`` at its start, where the backend's segment loop takes
    the segment and no watched event holds there; else None (the segment is set up as any
    other). Made from a copy of the run's mode: the loop's arguments hold its arrays, which
    the run's events change."""
    mode, loop = run.mode.copy(), run.backend.segment_loop
    if loop is None or mode.frozen or mode.sliding or run.stiff:
        return None
    base = run.field_for(mode)
    if not loop.applies(base, mode, method) or any(
        e.already(run.y) for e in _watched(run, base, base, mode)
    ):
        return None
    arguments = loop.arguments(base, mode, run.radius, run.near_zero_switch, run.y, run.loss_floor)
    return FirstSegment(run.tolerances(mode), arguments)


def _allowance(run: Run, method: str) -> int:
    """Field evaluations the next segment may spend: the rest of the budget, or, for a run
    that may meet stiff loss weights, those left until its next check
    (:mod:`flows.integrator.stiffness`): of stiffness every
    :data:`~flows.integrator.stiffness.STIFFNESS_CHECK_NFEV` evaluations of an explicit method,
    of progress every :data:`~flows.integrator.stiffness.STALL_CHECK_NFEV` of the stiff one."""
    left = run.budget - run.nfev
    if not stiffness.tie_prone(run.problem):
        return left
    if not run.stiff and method in stiffness.IMPLICIT:
        return left
    return max(1, min(left, run.next_stiffness_check - run.nfev))


def _allowance_spent(run: Run, base, method: str) -> None:
    """A segment of ``method`` spent its allowance: the run's budget (the run ends), or the
    evaluations up to a check. An explicit run goes on, with the stiff method from there if
    the field is stiff (:func:`flows.integrator.stiffness.jacobian_stiffness`); a stiff run
    goes on if it advanced enough (:func:`flows.integrator.stiffness.stalled`), and ends
    otherwise: in the blow-up if it is near, else with 'precision lost'."""
    if run.nfev >= run.budget:
        run.stop(Cause.BUDGET_SPENT, _budget_message(run, method))
        return
    if run.stiff:
        if stiffness.stalled(base, run.y, run.s, run.s - run.checked_at, run.s_end):
            _stop_stalled(run, base)
            return
        run.checked_at = run.s
        run.next_stiffness_check = run.nfev + stiffness.STALL_CHECK_NFEV
        return
    run.stiff = _stiffness_ratio(run) > stiffness.STIFF_RATIO
    run.checked_at = run.s
    run.next_stiffness_check = run.nfev + (
        stiffness.STALL_CHECK_NFEV if run.stiff else stiffness.STIFFNESS_CHECK_NFEV
    )


def _stiffness_ratio(run: Run) -> float:
    """The chart field's stiffness ratio at the run's state
    (:func:`flows.integrator.stiffness.jacobian_stiffness`), its evaluations counted."""
    mode = run.mode
    fld = run.moving_field(mode)
    pattern = fld.pattern_signs(mode.pattern)
    ratio = stiffness.jacobian_stiffness(
        lambda s, y: fld.chart_rhs(y[:-1], mode.held, pattern, s), run.y, run.s
    )
    run.nfev += stiffness.POWER_ITERATIONS + 1
    return ratio


def _stop_stalled(run: Run, base) -> None:
    """End a stiff run that stopped advancing (:func:`_end_short_of_blowup`), saying how far
    it got and what held it back."""
    why = (
        f"the stiff method advanced tau by {run.s - run.checked_at:.3g} over its last "
        f"{stiffness.STALL_CHECK_NFEV} evaluations ({stiffness.stall_reason(base, run.y, run.radius, run.s)})"
    )
    _end_short_of_blowup(run, base, why)


def _end_short_of_blowup(run: Run, base, why: str, advice: str = "") -> None:
    """End a stiff run that cannot go on (``why``): in the blow-up extrapolated by homogeneity
    if it is near; else on the slow manifold of its tied margins up to the blow-up
    (:func:`flows.integrator.ties.finish`) where that applies; else with 'precision lost'."""
    message = stiffness.extrapolated_blowup(base, run.y, run.s, why, run.log)
    if message is not None:
        run.stop(Cause.BLOW_UP, message)
        return
    if ties.finish(run, why):
        return
    outcome = stiffness.end_short_of_blowup(
        base, run.y, run.s, _when(run, run.s), why, run.log, advice
    )
    assert outcome.cause is not None and outcome.message is not None
    run.stop(outcome.cause, outcome.message)


def _extrapolated_blowup(run: Run, base) -> bool:
    """End a rescaled run at depth >= 3 that cannot go on in the blow-up, if by homogeneity at
    most :data:`~flows.integrator.stiffness.TIED_BLOWUP_TOL` ``* max(1, tau)`` of time is left
    (:func:`flows.integrator.stiffness.time_to_blowup`); whether it did. Two causes stop such a
    run short of ``BLOWUP_RATE``: tied margins resolved only to rounding (after the switch to
    the stiff method), or steps below the resolution of ``tau`` (a blow-up at large ``tau``)."""
    if run.problem.clock.original or int(run.problem.multiplicity.sum()) < 3:
        return False
    why = (
        stiffness.tie_message(base, run.y, run.radius, run.s)
        if run.stiff
        else "the steps fall below what float64 resolves of tau"
    )
    message = stiffness.extrapolated_blowup(base, run.y, run.s, why, run.log)
    if message is None:
        return False
    run.stop(Cause.BLOW_UP, message)
    return True


def _failure_message(
    run: Run, rhs, s: float, message: str, split: tuple[int, int] | None = None
) -> str:
    """The message of a solver failure at ``s``, naming what stopped the steps: layers of a GD
    run split apart against its conservation law (``split``, from :func:`_split_layers`; the
    run's cause is then 'precision lost'), the field's overflow, or its size (time scale
    ``1 / |F|`` below the resolution of ``s``)."""
    text = f"solver failed at {_when(run, s)}: {message}"
    if split is not None:
        layer, j = split
        return (
            f"{text}; the GD flow keeps w^({layer + 1})_{j + 1}^2 - w^({layer + 2})_{j + 1}^2 "
            "constant, and the path's layers of that coordinate have split apart where the "
            "exact ones stay equal to rounding (a difference below their resolution, amplified "
            f"as the coordinate shrank): float64 cannot follow this path in (u, v); {MIRROR_ADVICE}"
        )
    with np.errstate(all="ignore"):
        field = np.asarray(rhs(s, run.y), dtype=float)
    largest = float(np.max(np.abs(field))) if field.size else 0.0
    scale = float(np.max(np.abs(run.problem.data.X)))
    if not np.isfinite(largest):
        return (
            f"{text}; the vector field overflows float64 there (max |x_ij| = {scale:.3g}): "
            "rescale X"
        )
    if largest * max(abs(s), 1.0) * np.finfo(float).eps > 1e-3:
        return (
            f"{text}; the vector field is {largest:.3g} there, so the flow moves on a time "
            f"scale ~{1 / largest:.3g} that the clock cannot resolve (max |x_ij| = {scale:.3g}): "
            "rescale X"
        )
    return text


def _split_layers(run: Run) -> tuple[int, int] | None:
    """:func:`flows.integrator.conservation.split_layers` between the start and the end of the
    path of a GD run on the full system (None for other runs)."""
    problem = run.problem
    if problem.algorithm.perturbs or len(problem.multiplicity) < 2 or not run.path.count:
        return None
    return split_layers(ends(run), run.rtol)


def _decided(mode: Mode) -> int:
    """The length of the event log when the latest junction was decided (0: none was)."""
    return mode.tried[2] if mode.tried else 0


def _undecided_message(surfaces: list[str], tau: float) -> str:
    """The message of a run stopped where switching surfaces meet undecided."""
    return (
        f"the switching surfaces {', '.join(surfaces)} meet at tau={tau:.6g} with no consistent "
        "way to slide on or cross them (each resolution at that instant undoes the previous "
        "one); the path up to there is returned (the discrete algorithm, flows.iterate, "
        "steps past such junctions)"
    )


def _through_accumulation(run: Run, surfaces: list[tuple]) -> bool:
    """Where switching surfaces chatter (:func:`~flows.integrator.surface_events.chattering_surfaces`),
    decide the junction of every direction among them at once, as if each were at 0 (they
    are within the amplitude of the last switches: the accumulation point of a cycle whose
    period shrinks geometrically, where the Filippov solution goes on sliding on all of them);
    whether a consistent way was found (:func:`~flows.integrator.junctions.resolve_junction`)."""
    directions = tuple(j for kind, (_, j) in surfaces if kind == DIRECTION)
    return bool(directions) and resolve_junction(
        run.field_for(run.mode), run.mode, run.y, run.s, float(run.y[-1]), run.log,
        run.backend.sliding, fired=directions,
    )  # fmt: skip


def _chattering_message(surfaces: list[tuple], log: list) -> str:
    """The message of a run stopped where switching surfaces chatter."""
    first, last = log[-CHATTER_EVENTS].tau, log[-1].tau
    return (
        f"the switching surfaces {', '.join(surface_names(surfaces))} meet near tau={last:.10g}, where the "
        f"flow slid on and left them {CHATTER_EVENTS} times within {last - first:.3g} of tau "
        "(no consistent way through them); the path up to there is returned (the discrete "
        "algorithm, flows.iterate, steps past such junctions)"
    )


def _steps_stall(run: Run) -> bool:
    """Every :data:`~flows.integrator.stiffness.STIFFNESS_CHECK_NFEV` evaluations (every
    :data:`~flows.integrator.stiffness.STALL_CHECK_NFEV` with the stiff method, whose
    evaluations cost a Jacobian's share each), end a run that advanced less than
    :data:`~flows.integrator.stiffness.EXPLICIT_STALL` ``* max(1, s)`` since the last such
    check: segments that each end at an event (a run sliding on switching surfaces) never spend
    an allowance, so the stiff method's own check (:func:`_allowance_spent`) does not see them;
    whether it ended. A run whose margins may tie goes on on their slow manifold where that
    applies (:func:`flows.integrator.ties.finish`): margins tied to within their rounding give
    weights that switch between the tied examples from one evaluation to the next."""
    window = stiffness.STALL_CHECK_NFEV if run.stiff else stiffness.STIFFNESS_CHECK_NFEV
    if run.nfev - run.progress[0] < window:
        return False
    advanced = run.s - run.progress[1]
    run.progress = (run.nfev, run.s)
    if advanced >= stiffness.EXPLICIT_STALL * max(1.0, abs(run.s)):
        return False
    why = f"the solver advanced by {advanced:.3g} over its last {window} evaluations"
    if stiffness.tie_prone(run.problem) and ties.finish(run, f"the steps stall: {why}"):
        return True  # margins tied to rounding: their weights switch at every step
    run.stop(
        Cause.SOLVER_FAILED,
        f"the steps stall at {_when(run, run.s)}: {why}, "
        f"{'with the stiff method' if run.stiff else 'the field not stiff'}"
        f"{_sliding_note(run.mode)}; the path up to there is returned",
    )
    return True


def _idle_message(run: Run, fired: ev.SegmentEvent) -> str:
    """Why a run stopped after :data:`IDLE_SEGMENTS` segments that ended at once at ``fired``
    (a kind of event whose handling changed nothing)."""
    return (
        f"the steps stall at {_when(run, run.s)}: {IDLE_SEGMENTS} segments in a row ended where "
        f"they started at a {type(fired).__name__} event whose handling changed nothing"
        f"{_sliding_note(run.mode)}; the path up to there is returned"
    )


def _sliding_note(mode: Mode) -> str:
    """Where a run slides on switching surfaces, which (for a message)."""
    names = [f"G_{j}" for j in mode.sliding_directions]
    if np.any(mode.held):
        names.append(f"{int(np.sum(mode.held))} parameter(s) held at 0")
    return f", sliding on {', '.join(names)}" if names else ""


def _when(run: Run, s: float) -> str:
    """The run's clock time ``s`` in the result's own words: ``tau=...`` in the rescaled clock,
    ``t=...`` (and the ``tau`` reached) in the original one."""
    if run.problem.clock.original:
        return f"t={s:.6g} (tau={float(run.y[-1]):.6g})"
    return f"tau={s:.6g}"


def _budget_message(run: Run, method: str) -> str:
    """The message of a run whose ``max_nfev`` is spent by ``method`` (with what held it
    back where that was stiff tied margins, :func:`_stiff_margins`)."""
    return (
        f"max_nfev={run.budget} field evaluations spent by {_when(run, run.s)} "
        f"(t_max={run.s_end:g}){_stiff_margins(run, method)}; the path up to there is returned"
    )


def _stiff_margins(run: Run, method: str) -> str:
    """Where an explicit ``method`` spent the budget of a classification run on several
    examples whose field is stiff there (:func:`flows.integrator.stiffness.jacobian_stiffness`
    above :data:`~flows.integrator.stiffness.STIFF_RATIO`, its evaluations counted): the
    clause that says so, naming the smallest margin (the margins tie between examples: at
    depth 2 the runs that do not switch to the stiff method meet this as the margins grow);
    else ''."""
    problem = run.problem
    if method in stiffness.IMPLICIT or run.stiff or run.mode.sliding:
        return ""
    if problem.data.regression or problem.data.n < 2:
        return ""
    ratio = _stiffness_ratio(run)
    if not ratio > stiffness.STIFF_RATIO:
        return ""
    u_min, _ = stiffness.tied_margins(run.field_for(run.mode), run.y)
    return (
        f", where the margins (smallest {u_min:.3g}) tie between examples and the flow is "
        f"stiff (its fastest relaxation {ratio:.3g} times its largest rate): an implicit "
        "method (method='BDF') takes longer steps"
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
        log_c = loss_weights(margins(beta, problem.data), problem.data, problem.loss).log_c
    else:
        log_c = float(fld.log_c(theta, fld.pattern_signs(run.mode.pattern), run.s))
    rate = float(np.exp(run.problem.clock.log_speed(log_c)))
    run.path.segments.append(Segment.frozen(run.mode.copy(), run.s, run.s_end, run.y, rate))
    run.s = run.s_end
