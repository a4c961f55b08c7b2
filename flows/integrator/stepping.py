"""Where l_inf-SAM's sliding is not resolved, the run goes on by l_inf-SAM's own steps.

The event-driven integration of l_inf-SAM (:mod:`flows.integrator.filippov`,
:mod:`flows.integrator.junctions`, :mod:`flows.integrator.ties`) follows each Filippov
combination it can decide, and stops where it cannot: switching surfaces that meet with no
consistent way on, a tie whose weights are not found, a stiff method that stalls, a solver that
fails (the causes of :data:`CONTINUED`). Such a run goes on from where it stopped by the explicit
Euler steps of its discontinuous field (:mod:`flows.integrator.own_steps`: discrete l_inf-SAM
with a normalised step, each step moving ``theta`` by ``h`` of its norm), to ``t_max`` or to
the blow-up (the time left by homogeneity below ``TIED_BLOWUP_TOL max(1, tau)``, as where the
reduced field of a tie ends; the blow-up time extrapolated from there).

**The selection rule.** As ``h -> 0`` Euler's polygons of a discontinuous field converge to
its Filippov solutions; where these are several, to the one the discrete iteration picks as
its step shrinks. That is the path given here, at first order. The steps run at ``h =``
:data:`STEP`, ``STEP / 2``, ... and compare the paths of successive step sizes as curves: the
largest difference of ``beta / ||beta||_1`` where ``||beta||_1`` first reaches the same sizes
(the checkpoints of :mod:`flows.integrator.own_steps`) and at their ends. Where two successive
differences are both at most :data:`END_TOL` (three step sizes agree), the finest run is the
path and the larger of the two its error estimate (``Trajectory.step_error``). Where no three
do within :data:`HALVINGS` halvings or their budget of steps (:data:`MAX_OWN_WORK`), the three
that agree best along the path are taken if they agree within :data:`PATH_TOL` there and
:data:`END_TOL` at the end: on the teacher data of ``benchmarks/bench_depth.py`` the path
parts with the step for about a tenfold growth of ``||beta||_1`` after the junction where the
event-driven integration stopped (up to 8e-3), and converges at first order beyond it and at
its end. The message gives both differences and the blow-up time at all three step sizes,
whose spread is its uncertainty (``tau`` is a clock of the path, and its Euler error shrinks
more slowly than the path's). Where no three agree along the path within :data:`PATH_TOL`
but three agree at the end within :data:`END_TOL`, those that agree best along the path are
taken, the end settled and the path not: ``step_error`` above :data:`PATH_TOL`, and the message
and a ``RuntimeWarning`` give the sizes of ``beta`` between which the step sizes part (teacher
set 4 at ``L = 4`` in ``benchmarks/bench_depth.py``: they part by 3e-2 while ``||beta||_1``
grows from 1.7e3 to 5.3e3, and their ends converge at first order, to 6e-5). Otherwise, or
where a step leaves the float range, the run ends where the event-driven integration stopped,
with its own cause, and the message says how far the step sizes still differ.

It applies (unless ``simulate(continue_by_steps=False)``) to a margin loss, a constant
``rho``, no ``loss_floor``, and a state within the float range; the steps are compiled on the numba backend (:mod:`flows.compiled.stepping`).
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np

from ..charts import AsinhChart
from ..results import Cause, FlowEvent
from ..schedules import constant_values
from ..signedlog import SignedLog
from ..user_frame import user_stacklevel
from . import own_steps as steps_module
from .own_steps import BLOWUP, END, Steps
from .segments import Mode, Segment
from .state import Run
from .stiffness import TIED_BLOWUP_TOL

#: The causes after which the run goes on by its own steps.
CONTINUED = (
    Cause.UNDECIDED_JUNCTION,
    Cause.TOO_MANY_SURFACES,
    Cause.TOO_MANY_EVENTS,
    Cause.PRECISION_LOST,
    Cause.SOLVER_FAILED,
)
#: The first relative step ``h`` and how often it is halved at most; the agreement of two
#: successive step sizes on ``beta / ||beta||_1`` above which the path is not settled
#: (``PATH_TOL``), and that which ends the halving where both differences of three step sizes
#: are within it, and that a continued run's end needs (``END_TOL``).
STEP = 1e-3
HALVINGS = 5
PATH_TOL = 1e-2
END_TOL = 1e-3
#: Steps of all step sizes together, at most: compiled, ``MAX_OWN_WORK / (n d)`` (a step costs
#: four products with the data; about 1 us a step at n d = 240), and in the numpy loop, whose
#: steps cost about 60 us at that size, a tenth of that and at most ``MAX_NUMPY_STEPS``.
MAX_OWN_WORK = 1_000_000_000
MAX_NUMPY_STEPS = 200_000
#: Largest ``|theta|`` at the start (the steps compute in plain floats).
FLOAT_START = 1e100
#: The chart of the path of the steps.
_CHART = AsinhChart()


def applies(run: Run) -> bool:
    """Whether the stopped ``run`` goes on by its own steps (see the module docstring)."""
    problem = run.problem
    if not (
        run.continue_by_steps
        and problem.algorithm.sign_discontinuous
        and run.cause in CONTINUED
        and problem.data.offsets is None
        and run.loss_floor is None
        and constant_values(problem.hyperparameters, ("rho",)) is not None
        and run.s < run.output.grid[-1]
    ):
        return False
    theta = _layers(run)
    return bool(np.all(np.isfinite(theta)) and np.max(np.abs(theta)) < FLOAT_START)


def _layers(run: Run) -> np.ndarray:
    """The parameters at ``run.y`` as floats, one row per layer (a group repeated)."""
    theta = run.mode.chart.state(run.y[:-1].reshape(run.problem.shape))
    with np.errstate(over="ignore"):
        values = np.where(run.mode.held, 0.0, theta.to_float())
    return np.repeat(values, run.problem.multiplicity, axis=0)


def go_on(run: Run) -> None:
    """Continue the stopped ``run`` by its own steps where :func:`applies`: append their path
    and set its cause and message; else leave it as it is, the message saying what the steps
    reached."""
    if not applies(run):
        return
    problem = run.problem
    values = constant_values(problem.hyperparameters, ("rho",))
    assert values is not None  # applies() checked it
    rho = float(values[0])
    grid = run.output.grid
    grid = grid[grid > run.s]
    loop = run.backend.own_steps
    budget = MAX_OWN_WORK // (problem.data.n * problem.data.d)
    if loop is None or problem.loss.compiled_id is None:
        budget = min(MAX_NUMPY_STEPS, budget // 10)
    start = _layers(run)
    runs: list[Steps] = []
    differences: list[tuple[float, float]] = []
    spent = 0
    for h in STEP * 0.5 ** np.arange(HALVINGS + 1):
        args = (start, run.s, float(run.y[-1]), float(run.output.grid[-1]),
                problem.clock.original, h, budget - spent, grid,
                problem.data.signed_features, problem.loss, rho, TIED_BLOWUP_TOL)  # fmt: skip
        found = None if loop is None else loop(*args)
        steps = steps_module.own_steps(*args) if found is None else found
        spent += steps.steps
        if steps.status not in (END, BLOWUP):
            break
        runs.append(steps)
        if len(runs) >= 2:
            differences.append(_difference(runs[-2], runs[-1]))
        if len(runs) >= 3 and max(_window(differences, len(runs) - 1)) <= END_TOL:
            _append(run, runs[-3:], h, *_window(differences, len(runs) - 1))
            return
    windows = [(*_window(differences, k), k) for k in range(2, len(runs))]
    settled = [(path, k) for path, end, k in windows if end <= END_TOL]
    if settled:  # the three closest along the path, of those whose ends agree
        _, k = min(settled)
        _append(run, runs[k - 2 : k + 1], STEP * 0.5**k, *_window(differences, k))
        return
    run.message += "; " + _not_continued(differences, spent, h)


def _window(differences: list[tuple[float, float]], k: int) -> tuple[float, float]:
    """How far the step sizes ``k - 2``, ``k - 1`` and ``k`` (``h = STEP 2^-k``) differ: the
    larger of their two successive differences along the path, and at the end."""
    path, end = np.max(differences[k - 2 : k], axis=0)
    return float(path), float(end)


def _difference(coarser: Steps, finer: Steps) -> tuple[float, float]:
    """The largest difference of ``beta / ||beta||_1`` between two runs of steps along the
    path (at the checkpoints both reached: the path as a curve, by the size of ``beta``, and at
    the ends), and at the ends."""
    both = min(coarser.checkpoints, finer.checkpoints)
    kept = np.abs(coarser.check_direction[:both] - finer.check_direction[:both])
    end = float(np.max(np.abs(_direction(coarser.theta) - _direction(finer.theta))))
    return max(end, float(np.max(kept, initial=0.0))), end


def _direction(theta: np.ndarray) -> np.ndarray:
    """``beta / ||beta||_1`` of parameters (L, d)."""
    beta = np.prod(theta, axis=0)
    return beta / np.sum(np.abs(beta))


def _append(run: Run, last: list[Steps], h: float, error: float, end: float) -> None:
    """Record the path of the finest of the ``last`` three runs of steps (at ``4h``, ``2h``,
    ``h``; they differ by at most ``error`` along the path and ``end`` at its end) as the run's
    last segment and end the run there."""
    steps = last[-1]
    tau0, why = float(run.y[-1]), run.message
    segment = _segment(run, steps)
    run.log.append(FlowEvent(tau0, "own steps"))
    run.path.segments.append(segment)
    run.s, run.s_end = segment.end, segment.end
    run.mode, run.y = segment.mode.copy(), segment.raw(np.array([segment.end]))[0].copy()
    run.own_steps = (tau0, steps.steps, float(error))
    model = (
        f"from tau={tau0:.10g}, where {why}, the path follows l_inf-SAM's own steps (explicit "
        f"Euler in tau, each moving theta by {h:.3g} of its norm, {steps.steps} steps: the "
        f"limit of discrete l_inf-SAM as its step shrinks); at two and four times that step "
        f"beta/|beta|_1 differs by at most {error:.2g} along the path (step_error) and "
        f"{end:.2g} at its end"
    )
    if error > PATH_TOL:
        low, high = _unsettled(last)
        unsettled = (
            f"the path is not settled between |beta|_1 = {low:.3g} and {high:.3g}, where "
            f"the step sizes part by more than {PATH_TOL:g} (where switching surfaces meet, "
            "Filippov solutions need not be unique); only its end is"
        )
        model = f"{model}; {unsettled}"
        warnings.warn(
            f"l_inf-SAM from tau={tau0:.6g}: {unsettled}",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
    if steps.status == END:
        run.cause, run.message = Cause.REACHED_END, f"reached t_max; {model}"
        return
    ends = [r.tau + r.time_left for r in last]
    blowup = ends[-1]
    run.log.append(FlowEvent(blowup, "blow-up"))
    run.cause = Cause.BLOW_UP
    run.message = (
        f"finite-time blow-up at tau={blowup:.10g}, extrapolated (at two and four times the "
        f"step: {ends[1]:.6g}, {ends[0]:.6g}): the path ends {steps.time_left:.3g} before it at "
        f"tau={steps.tau:.10g}; {model}; tau* from ||theta||^-(L - 2), linear in tau by "
        "homogeneity"
    )


def _unsettled(last: list[Steps]) -> tuple[float, float]:
    """The smallest and largest ``||beta||_1`` at which successive runs of ``last`` differ by
    more than :data:`PATH_TOL` (at their common checkpoints)."""
    sizes = []
    for coarser, finer in itertools.pairwise(last):
        both = min(coarser.checkpoints, finer.checkpoints)
        gap = np.max(np.abs(coarser.check_direction[:both] - finer.check_direction[:both]), 1)
        sizes.extend(finer.check_log_size[:both][gap > PATH_TOL])
    ends = np.exp(sizes) if sizes else np.array([np.nan])
    return float(np.min(ends)), float(np.max(ends))


def _segment(run: Run, steps: Steps) -> Segment:
    """The path of ``steps``: linear between the states at its start, at the output times it
    kept and at its end, in the asinh chart with ``tau`` last; ``log_elapsed`` the log of the
    original time since its start at each."""
    problem = run.problem
    first = np.cumsum(problem.multiplicity) - problem.multiplicity  # a row of each group
    kept = steps.kept_theta[: steps.kept]
    theta = np.concatenate([_layers(run)[None], kept, steps.theta[None]])[:, first]
    tau = np.concatenate([[run.y[-1]], steps.kept_tau[: steps.kept], [steps.tau]])
    log_elapsed = np.concatenate(
        [[-np.inf], steps.kept_log_elapsed[: steps.kept], [steps.log_elapsed]]
    )
    ts = np.concatenate([[run.s], run.output.grid[run.output.grid > run.s][: steps.kept],
                         [steps.s]])  # fmt: skip
    if ts[-1] <= ts[-2]:  # the last step ended on an output time
        ts, theta, tau, log_elapsed = ts[:-1], theta[:-1], tau[:-1], log_elapsed[:-1]
    mode = Mode(_CHART, np.zeros(problem.shape, dtype=bool))
    z = _CHART.coordinates(SignedLog.from_float(theta))
    states = np.concatenate([z.reshape(len(ts), -1), tau[:, None]], axis=1)
    interpolants = [_linear(ts[k], ts[k + 1], states[k], states[k + 1]) for k in range(len(ts) - 1)]
    return Segment(mode, ts, interpolants, log_elapsed=log_elapsed)


def _linear(s0: float, s1: float, y0: np.ndarray, y1: np.ndarray):
    """The state linear in ``s`` from ``y0`` at ``s0`` to ``y1`` at ``s1``, as (n_state, len(s))."""

    def at(s: np.ndarray) -> np.ndarray:
        x = np.clip((np.asarray(s, dtype=float) - s0) / (s1 - s0), 0.0, 1.0)
        return y0[:, None] + (y1 - y0)[:, None] * x[None]

    return at


def _not_continued(differences: list[tuple[float, float]], spent: int, h: float) -> str:
    """What the own steps reached where they do not continue the run."""
    if len(differences) < 2:
        return (
            f"l_inf-SAM's own steps do not continue it (they left the float range or spent "
            f"{spent} steps, at a step of {h:.3g} of theta's norm)"
        )
    return (
        f"l_inf-SAM's own steps do not continue it: down to a step of {h:.3g} of theta's norm "
        f"({spent} steps in all) beta/|beta|_1 differs by {differences[-1][0]:.2g} along the "
        f"path and {differences[-1][1]:.2g} at its end between successive step sizes"
    )
