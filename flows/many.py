"""Many runs in one call: :func:`simulate_many` and :func:`iterate_many`.

A batch is one data set, one algorithm and depth and one set of options, run over *batch axes*:
``alpha`` (one run's initialization per entry) and any of the algorithm's hyper-parameters given
as a sequence (``rho=[0.1, 0.2, ...]``). A number (or a schedule) is shared by every run. The
runs are, with ``product=False`` (the default), the axes zipped: every axis of more than one
entry has the same length ``B`` and an axis of one entry is repeated ``B`` times (a
``ValueError`` names an axis whose length differs from that of the first longer axis, in the
order ``alpha``, then the hyper-parameters as given); with ``product=True``, every combination,
``alpha`` varying slowest, then the hyper-parameters in the order given. The results come back
as a list in that order, each what the single call returns (below: equal): a run that fails
keeps its own ``status`` and ``message`` and the others go on. For :func:`iterate_many` the
options of :data:`RUN_OPTIONS` (``seed=[0, 1, ...]``, ``label_noise``, ``temperature``,
``batch_size``) are batch axes under the same rule, after the hyper-parameters.

Every run's arguments are checked before the first run starts (a ``ValueError`` names the
parameter and the run, ``alpha[3]``), and the batch computes with one BLAS thread (as the sweep
does: on a shared machine a thread pool per small product costs more than the product).
:func:`simulate_many` integrates the runs whose single call would be one segment of the compiled
segment loop from 0 to ``t_max`` (a positive number as ``alpha``, numbers as hyper-parameters,
``method='DOP853'``, the numba backend, no event on the way) together
(:mod:`flows.many_flows`: the single call's compiled segment kernel run by run, the output
assembled for all of them at once); every other run, and every run the batch hands
back (an event, a collapse, a blow-up, a spent budget, an event that holds where it starts), is
the single :func:`flows.simulate` call, from scratch.

:func:`iterate_many` steps the deterministic runs that the single call would run in its
compiled loop (an algorithm that perturbs the full gradient, constant step size and
hyper-parameters, numba ready) together, up to :data:`CHUNK` runs at a time, in
:func:`flows.compiled._many_kernels.run_many`: the same steps and checks as the single call's
compiled loop, with the products of all runs' iterates with the data taken as matrix-matrix
products. A run that a check stops there (the single call would take that step in numpy), or
whose initial loss is not below :data:`LOSS_MARGIN`, is the single :func:`flows.iterate` call.
A run of a per-example algorithm, or of one whose perturbation reads ``|theta|`` (ASAM, the
official LE-SAM: not in :data:`flows.compiled.discrete.BATCHED_IDS`), takes its steps in one
call of the single call's compiled kernel, bit for bit. The runs with minibatches or noise are stepped together in numpy
(:class:`flows.many_steps.ManyFloatSteps`), each with its own draws from its seed (the iid
batches compiled where they match numpy's: :mod:`flows.seeded_draws`). Every other run (a
schedule, ``start`` or ``batches``, numpy's backend for a deterministic run) is the single
call.

Equal means, for :func:`simulate_many`: every run, batched or not, is the single call's result
field by field, arrays bit for bit (a batched run takes the same steps with the same kernels on
the same numbers, and its output is assembled by the same formulas in the same order:
``tests/test_many_flows.py``). For :func:`iterate_many`: a run of the single call is that
call's result, field by field and bit for bit, and so is a run of a per-example algorithm; a run stepped together with others (in the batched
compiled loop or in numpy) has the single call's ``status``, ``message``, recorded ``steps``,
``t``, ``backend`` and options, and its ``theta``, ``beta``, ``loss`` and ``buffer`` agree with
the single call's to rounding (``tests/test_many.py`` holds them to 1e-12 relative on runs
whose single compiled and numpy loops agree that closely; a run whose steps amplify rounding,
as a SAM run oscillating about a minimum can, differs as much as those two loops do).
"""

from __future__ import annotations

import functools
import itertools
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, NamedTuple, TextIO, TypeVar

import numpy as np

from . import compiled
from .algorithms import Algorithm, effective_algorithm, get_algorithm, resolve_hyperparameters
from .batch_steps import FloatBatchSteps, float_batch_steps
from .checks import integer
from .clocks import CLOCKS
from .compiled.discrete import BATCHED_IDS
from .compiled.segment import Call
from .data import Dataset
from .discrete import (
    LOSS_CHECK_ARGUMENT,
    MAX_RECORDED_FLOATS,
    BaseOptimizer,
    DiscreteRun,
    _losses,
    _not_representable,
    _root_of,
    base_optimizer,
    check_budget,
    discrete_steps,
    iterate,
)
from .field import Problem
from .initialization import Initialization, check_depth, initialization
from .integrator.driver import simulate
from .many_flows import batched_flows, go_on
from .many_steps import ManyFloatSteps
from .minibatch import Minibatches, StepNoise, minibatches, step_noise
from .model import get_loss, loss_for
from .results import Cause, Trajectory
from .schedules import constant_values

__all__ = ["batch_runs", "iterate_many", "simulate_many"]

#: Seconds between two progress lines.
PROGRESS_INTERVAL = 1.0

Result = TypeVar("Result")


def _axis(value: Any) -> list | None:
    """The entries of a batch axis (a list, a tuple or an array's first axis), or None for a
    value every run shares."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, np.ndarray) and value.ndim >= 1:
        return list(value)
    return None


def batch_runs(
    alpha: Any, hyperparameters: dict[str, Any], product: bool = False
) -> list[tuple[Any, dict[str, Any]]]:
    """The runs of a batch: ``(alpha, hyper-parameters)`` per run, in order.

    Parameters
    ----------
    alpha : one initialization per run (a list, a tuple, or an array whose first axis indexes
        the runs: ``[0.1, 0.2]``, or ``[[0.1] * d, [0.2] * d]`` for two vector inits); a
        number is shared by every run.
    hyperparameters : by name, a value every run shares (a number, a schedule, None) or a
        batch axis (a list, a tuple or a 1-D array, one value per run).
    product : False: the axes zipped (equal lengths; an axis of one entry is repeated); True:
        every combination, ``alpha`` varying slowest.

    Raises
    ------
    ValueError
        Naming the axis: an empty axis, or (``product=False``) an axis whose length differs
        from the others'.
    """
    axes: dict[str, list] = {}
    shared: dict[str, Any] = {}
    for name, value in [("alpha", alpha), *hyperparameters.items()]:
        entries = _axis(value)
        if entries is None:
            shared[name] = value
        elif not entries:
            raise ValueError(f"{name} is an empty batch axis: give at least one value")
        else:
            axes[name] = entries
    combos: Iterable[tuple]
    if product:
        combos = itertools.product(*axes.values())
    else:
        first = next((k for k, v in axes.items() if len(v) > 1), None)
        length = 1 if first is None else len(axes[first])
        for name, entries in axes.items():
            if len(entries) not in (1, length):
                raise ValueError(
                    f"{name} has {len(entries)} values but {first} has {length}: batch axes "
                    "must have equal lengths (or one value), or use product=True"
                )
        repeated = [v * length if len(v) == 1 else v for v in axes.values()]
        combos = zip(*repeated, strict=True) if axes else [()]
    runs = []
    for combo in combos:
        values = dict(shared, **dict(zip(axes, combo, strict=True)))
        runs.append((values.pop("alpha"), values))
    return runs


class _Run(NamedTuple):
    """One run of a batch: its arguments as given and as checked."""

    alpha: Any
    given: dict[str, Any]
    init: Initialization
    hyperparameters: dict[str, Any]
    options: dict[str, Any]


def _checked_runs(
    data: Dataset,
    algorithm: str,
    depth: int,
    alpha: Any,
    hyperparameters: dict[str, Any],
    product: bool,
    reduced: bool | None,
) -> list[_Run]:
    """:func:`batch_runs` with every run's ``alpha`` and hyper-parameters checked
    (``ValueError`` naming the parameter and the run's index)."""
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flows.Dataset, got {type(data).__name__}")
    get_algorithm(algorithm)
    check_depth(depth)
    runs = []
    resolved: dict[Any, dict[str, Any]] = {}
    for i, (run_alpha, given) in enumerate(batch_runs(alpha, hyperparameters, product)):
        try:
            init = _initialization(run_alpha, depth, data.d, reduced)
        except ValueError as error:
            raise ValueError(f"alpha[{i}]: {error}") from None
        options = {k: v for k, v in given.items() if k in RUN_OPTIONS}
        hp_given = {k: v for k, v in given.items() if k not in RUN_OPTIONS}
        key = _key(hp_given)
        try:
            hp = resolved[key] if key in resolved else resolve_hyperparameters(algorithm, hp_given)
        except ValueError as error:
            raise ValueError(f"run {i}: {error}") from None
        if key is not None:
            resolved[key] = hp
        runs.append(_Run(run_alpha, given, init, hp, options))
    return runs


def _key(given: dict[str, Any]) -> Any:
    """A key under which runs with the same hyper-parameters share their resolution (None
    where a value is not a plain number or None)."""
    if all(v is None or type(v) in (int, float, np.float64) for v in given.values()):
        return tuple(given.items())
    return None


def _initialization(alpha: Any, depth: int, d: int, reduced: bool | None) -> Initialization:
    """:func:`flows.initialization.initialization`, with its result for a finite positive
    float ``alpha`` built directly: every layer ``alpha`` (one group of multiplicity ``depth``
    where ``reduced`` is not False and ``depth > 1``)."""
    if type(alpha) not in (float, np.float64) or not 0.0 < alpha < np.inf:
        return initialization(alpha, depth, d, reduced)
    if reduced is not False and depth > 1:
        return Initialization(np.full((1, d), float(alpha)), np.array([depth]), True)
    return Initialization(np.full((depth, d), float(alpha)), np.ones(depth, dtype=int), True)


@functools.cache
def _controller() -> Any:
    """The thread pools loaded in this process (found once: ~1 ms a search). ``threadpoolctl``
    is imported here, at the first batch, so that ``import flows`` does not need it."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _one_blas_thread() -> Any:
    """A context in which the BLAS libraries use one thread."""
    return _controller().limit(limits=1, user_api="blas")


class _Progress:
    """One line on ``stream`` at most every :data:`PROGRESS_INTERVAL` seconds and at the end:
    runs done, elapsed and estimated remaining time."""

    def __init__(self, name: str, total: int, stream: TextIO | None):
        self.name, self.total, self.stream = name, total, stream
        self.start = self.last = time.perf_counter()
        self.count = 0

    def more(self, runs: int) -> None:
        """``runs`` more runs finished."""
        self.count += runs
        self.done(self.count)

    def done(self, k: int) -> None:
        """Run ``k`` (1-based) finished."""
        if self.stream is None:
            return
        now = time.perf_counter()
        if k < self.total and now - self.last < PROGRESS_INTERVAL:
            return
        self.last = now
        elapsed = now - self.start
        left = elapsed / k * (self.total - k)
        self.stream.write(
            f"{self.name}: {k}/{self.total} runs, {elapsed:.1f} s"
            + (f", ~{left:.0f} s left\n" if k < self.total else "\n")
        )
        self.stream.flush()


def _run_batch(
    name: str,
    runs: list[_Run],
    one: Callable[[_Run], Result],
    progress: bool,
    threads: int = 1,
    together: Callable[[Executor | None], dict[int, Result]] | None = None,
) -> list[Result]:
    """The runs' results in order, with one BLAS thread: those ``together(pool)`` computes (by
    index; ``pool`` the pool of ``threads`` threads, None for one), then ``one(run)`` for each
    other run, in that pool (one thread: in this thread)."""
    tell = _Progress(name, len(runs), sys.stderr if progress else None)
    with _one_blas_thread(), ThreadPoolExecutor(threads) as pool:
        done = {} if together is None else together(pool if threads > 1 else None)
        if done:
            tell.more(len(done))
        rest = [run for i, run in enumerate(runs) if i not in done]
        results = iter(map(one, rest) if threads == 1 else pool.map(one, rest))
        out = []
        for i in range(len(runs)):
            if i in done:
                out.append(done[i])
                continue
            out.append(next(results))
            tell.more(1)
    return out


def simulate_many(
    data: Dataset,
    algorithm: str = "l2-sam",
    depth: int = 2,
    alpha: Any = 1.0,
    *,
    product: bool = False,
    progress: bool = False,
    reduced: bool | None = None,
    threads: int = 1,
    **settings: Any,
) -> list[Trajectory]:
    """:func:`flows.simulate` over batch axes of ``alpha`` and the hyper-parameters.

    Parameters
    ----------
    data, algorithm, depth, reduced : as for :func:`flows.simulate`, shared by every run.
    alpha : one initialization per run (a list, a tuple, or an array whose first axis indexes
        the runs), or one shared by every run.
    product : how the batch axes combine (:func:`batch_runs`): False zips them (equal
        lengths, an axis of one value repeated), True takes every combination, ``alpha``
        slowest.
    progress : a line on stderr every second or so: runs done, elapsed and remaining time.
    threads : the runs in a pool of this many threads (1: one after the other): the runs
        integrated together in that many parts at once, the single calls in the pool. The
        compiled kernels release the GIL, the Python driver holds it: a batch gains where the
        kernels take most of a run's time and cores are free (``benchmarks/results.md``,
        section "Many runs in one call", measures both).
    **settings : the keyword options of :func:`flows.simulate` (``t_max``, ``clock``,
        ``n_points``, ``rtol``, ``backend``, ...), shared by every run, and the algorithm's
        hyper-parameters, each a shared value or a batch axis (``rho=[0.5, 1.0]``).

    Returns
    -------
    list of Trajectory
        One per run, in the order of :func:`batch_runs`, each equal field by field and bit for
        bit to the single :func:`flows.simulate` call with that run's arguments: its own
        ``status``, ``message`` and events. The runs that one compiled segment takes to
        ``t_max`` are integrated together (module docstring), the others each by the single
        call (in ``threads`` threads).

    Raises
    ------
    ValueError
        Before any run: naming a batch axis whose length differs, an empty axis, or a run's
        ``alpha`` or hyper-parameter that :func:`flows.simulate` would refuse (with the run's
        index), or ``threads`` (not an int >= 1); an option that :func:`flows.simulate`
        refuses, naming it, at the first run.
    """
    threads = integer(threads, "threads", 1)
    options, hyperparameters = _split_settings(settings, _SIMULATE_OPTIONS)
    runs = _checked_runs(data, algorithm, depth, alpha, hyperparameters, product, reduced)

    made: dict[int, Call] = {}  # by the id of a run: the batch's first kernel call of it

    def one(run: _Run) -> Trajectory:
        call = made.pop(id(run), None)
        if call is not None:
            return go_on(data, algorithm, depth, run, options, reduced, call)
        return simulate(data, algorithm, depth, run.alpha, reduced=reduced, **options, **run.given)

    def together(pool: Executor | None) -> dict[int, Trajectory]:
        batched = batched_flows(data, algorithm, depth, runs, options, reduced, pool, threads)
        made.update({id(runs[i]): call for i, call in batched.made.items()})
        return batched.done

    if threads > 1 and options.get("backend", "auto") in ("auto", "numba"):
        compiled.load()  # numba's first import here, not in two of the threads at once
    return _run_batch("simulate_many", runs, one, progress, threads, together)


#: The keyword options of :func:`flows.simulate` other than ``reduced`` (the rest of a
#: :func:`simulate_many` call's keywords are hyper-parameters).
_SIMULATE_OPTIONS = frozenset(simulate.__kwdefaults__ or {}) - {"reduced"}
#: The keyword options of :func:`flows.iterate` (the rest of an :func:`iterate_many` call's
#: keywords are hyper-parameters).
_ITERATE_OPTIONS = frozenset(iterate.__kwdefaults__ or {})


def _split_settings(
    settings: dict[str, Any], options: frozenset[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``settings`` split into the call's options and the hyper-parameters."""
    chosen = {k: v for k, v in settings.items() if k in options}
    return chosen, {k: v for k, v in settings.items() if k not in options}


def iterate_many(
    data: Dataset,
    algorithm: str = "l2-sam",
    depth: int = 2,
    alpha: Any = 1.0,
    *,
    product: bool = False,
    progress: bool = False,
    **settings: Any,
) -> list[DiscreteRun]:
    """:func:`flows.iterate` over batch axes of ``alpha``, the hyper-parameters and the
    stochastic options.

    Parameters
    ----------
    data, algorithm, depth : as for :func:`flows.iterate`, shared by every run.
    alpha : one initialization per run (a list, a tuple, or an array whose first axis indexes
        the runs), or one shared by every run.
    product : how the batch axes combine (:func:`batch_runs`).
    progress : a line on stderr every second or so.
    **settings : the keyword options of :func:`flows.iterate` (``eta``, ``steps``,
        ``record_every``, ``loss``, ``momentum``, ``weight_decay``, ``backend``, ...), shared by
        every run; the algorithm's hyper-parameters and the options of :data:`RUN_OPTIONS`
        (``seed=[0, 1, 2]``, ``label_noise``, ``temperature``, ``batch_size``), each a shared
        value or a batch axis.

    Returns
    -------
    list of DiscreteRun
        One per run, in the order of :func:`batch_runs`, each the single :func:`flows.iterate`
        call's: with its ``status``, ``message``, recorded steps, ``backend`` and seed, and
        its arrays bit for bit, except for the runs stepped together with others (the
        deterministic runs of :mod:`flows.compiled._many_kernels`, the minibatch and noisy
        runs of :mod:`flows.many_steps`), whose iterates, ``beta``, losses and momentum buffer
        agree with the single call's to rounding (module docstring); a stochastic run keeps
        its seed and draws (a ``seed`` generator shared by the runs gives them the roots a
        loop of single calls would draw, in order).

    Raises
    ------
    ValueError
        Before any run, as :func:`simulate_many` (naming the parameter, and the run's index
        for a run's ``alpha`` or hyper-parameter).
    """
    options, axes = _split_settings(settings, _ITERATE_OPTIONS - RUN_OPTIONS)
    runs = _checked_runs(data, algorithm, depth, alpha, axes, product, False)
    given = dict(iterate.__kwdefaults__ or {}, **options)
    the_loss = get_loss(loss_for(given["loss"], data))
    base = base_optimizer(given["eta"], given["momentum"], given["weight_decay"])
    steps = integer(given["steps"], "steps", 1)
    record_every = integer(given["record_every"], "record_every", 1)
    check_budget(steps, record_every, depth * data.d)
    tell = _Progress("iterate_many", len(runs), sys.stderr if progress else None)
    results: list[DiscreteRun | None] = [None] * len(runs)
    with _one_blas_thread():
        if given["start"] is None and given["batches"] is None:
            stochastic = _Stochastic(data, algorithm, the_loss, base, steps, record_every,
                                     given["sampling"], runs)  # fmt: skip
            batched = _Batched(data, algorithm, the_loss, base, given["backend"], steps,
                               record_every)  # fmt: skip
            for taken in (batched.run(runs, tell), stochastic.run(runs, tell)):
                for i, result in taken.items():
                    results[i] = result
        for i, run in enumerate(runs):
            if results[i] is None:
                results[i] = iterate(data, algorithm, depth, run.alpha, **options,
                                     **run.given)  # fmt: skip
                tell.more(1)
    return [r for r in results if r is not None]


#: The options of :func:`flows.iterate` that :func:`iterate_many` takes as batch axes too.
RUN_OPTIONS = frozenset({"seed", "label_noise", "temperature", "batch_size"})
#: Runs the batched compiled loop steps together (a progress line at most once a chunk).
CHUNK = 128


class _Batched:
    """The runs of an :func:`iterate_many` call that the compiled loops take: the deterministic
    runs (no minibatch, no noise) whose single call would run the compiled loop of
    :mod:`flows.compiled.discrete`. Those of an algorithm that perturbs the full gradient are
    stepped together (:func:`flows.compiled._many_kernels.run_many`); those of a per-example
    algorithm each in one call of the single call's kernel, bit for bit the single call's."""

    def __init__(self, data: Dataset, algorithm: str, loss: Any, base: BaseOptimizer,
                 backend: str, steps: int, record_every: int):  # fmt: skip
        self.data, self.algorithm, self.loss, self.base = data, algorithm, loss, base
        self.backend, self.steps, self.record_every = backend, steps, record_every
        self.to_record = steps // record_every + (steps % record_every != 0)
        self.kept_steps = _kept_steps(steps, record_every)

    def run(self, runs: list[_Run], tell: _Progress) -> dict[int, DiscreteRun]:
        """The results of the runs it takes, by index, in groups of one algorithm."""
        groups: dict[str, list[int]] = {}
        for i, run in enumerate(runs):
            if not _stochastic(run):
                groups.setdefault(effective_algorithm(self.algorithm, run.hyperparameters),
                                  []).append(i)  # fmt: skip
        out: dict[int, DiscreteRun] = {}
        for runs_as, members in groups.items():
            algo = get_algorithm(runs_as)
            compiled = self.compiled(algo, runs[members[0]])
            if compiled is None:
                continue
            rows = [constant_values(runs[i].hyperparameters, algo.names) for i in members]
            taken = [i for i, row in zip(members, rows, strict=True) if row is not None]
            table = {i: row for i, row in zip(members, rows, strict=True) if row is not None}
            if algo.per_example or algo.compiled_id not in BATCHED_IDS:
                for i in taken:
                    done = self.one(compiled, runs[i], table[i])
                    if done is not None:
                        out[i] = done
                        tell.more(1)
                continue
            per_chunk = max(1, min(CHUNK, MAX_RECORDED_FLOATS // self.floats(runs[0])))
            for start in range(0, len(taken), per_chunk):
                chunk = taken[start : start + per_chunk]
                results = self.chunk(compiled, [runs[i] for i in chunk], chunk, table)
                out.update(results)
                tell.more(len(results))
        return out

    def floats(self, run: _Run) -> int:
        """The floats a run's recorded iterates take."""
        return (self.to_record + 1) * run.init.groups.size

    def compiled(self, algo: Algorithm, run: _Run) -> Any:
        """The single call's compiled loop for a group of runs of ``algo`` (its problem tuple
        and kernels; None where it has none)."""
        problem = Problem(self.data, algo, run.hyperparameters, self.loss,
                          run.init.multiplicity, CLOCKS["original"])  # fmt: skip
        return discrete_steps(self.backend, problem, self.base)

    def one(self, compiled: Any, run: _Run, hp: np.ndarray) -> DiscreteRun | None:
        """The run (hyper-parameters ``hp``) in one call of the single call's kernel, its
        iterates written into one array: the single call's result where the kernel takes it
        to the last step (the same steps in the same order), else None."""
        problem = (*compiled.problem[:5], hp, *compiled.problem[6:])
        store = np.empty((self.to_record + 1,) + run.init.groups.shape)
        store[0] = run.init.groups
        kept_steps = np.zeros(self.to_record + 1, dtype=np.int64)
        work = np.array(run.init.groups, dtype=float)
        buffer = np.zeros_like(work)
        status, k, recorded, started = compiled.kernels.run(
            work, buffer, False, 0, self.steps, self.record_every, problem, store[1:],
            kept_steps[1:],
        )  # fmt: skip
        if status != compiled.kernels.FINISHED or k != self.steps:
            return None
        theta = store[: recorded + 1]
        with np.errstate(over="ignore"):
            beta = np.prod(theta, axis=1)
        return _discrete_run(kept_steps[: recorded + 1], theta, beta,
                             _losses(beta, self.data, self.loss), self.base, self.algorithm,
                             buffer if started else None)  # fmt: skip

    def chunk(self, compiled: Any, runs: list[_Run], indices: list[int],
              table: dict[int, np.ndarray]) -> dict[int, DiscreteRun]:  # fmt: skip
        """One call of the batched kernel on ``runs``: the results of those it took to the
        last step, by index."""
        from .compiled import _many_kernels as kernels

        theta = np.array([run.init.groups for run in runs], dtype=float)
        kept = np.empty((len(runs), self.to_record + 1) + theta.shape[1:])
        kept[:, 0] = theta
        beta = np.empty((len(runs), self.to_record + 1, theta.shape[2]))
        losses = np.empty((len(runs), self.to_record + 1))
        status = np.zeros(len(runs), dtype=np.int64)
        hp = np.array([table[i] for i in indices], dtype=float).reshape(len(runs), -1)
        buffers = np.empty_like(theta)
        kernels.run_many(theta, self.steps, self.record_every, compiled.problem, hp, kept,
                         beta, losses, status, buffers)  # fmt: skip
        out = {}
        for r, i in enumerate(indices):
            if status[r] == kernels.RUNNING:
                done = _discrete_run(self.kept_steps, kept[r], beta[r], losses[r], self.base,
                                     self.algorithm, buffers[r])  # fmt: skip
                if done is not None:
                    out[i] = done
        return out


def _stochastic(run: _Run) -> bool:
    """Whether the run draws minibatches or noise."""
    return any(run.options.get(name) for name in ("batch_size", "label_noise", "temperature"))


class _Stochastic:
    """The runs of an :func:`iterate_many` call with minibatches or noise, stepped together in
    groups of one algorithm and batch size (:class:`flows.many_steps.ManyFloatSteps`).

    Every run's batches and noise are drawn from its seed first, in the order of the runs, as
    the single call draws them (so a ``seed`` generator shared by the runs gives them the
    roots a loop of single calls would draw; a ``ValueError`` names a bad option and the run);
    each stochastic run's root becomes its ``seed``: a run that a check stops, or that the float
    steps do not take (a per-example algorithm, a scheduled hyper-parameter), is the single
    call with that root."""

    def __init__(self, data: Dataset, algorithm: str, loss: Any, base: BaseOptimizer,
                 steps: int, record_every: int, sampling: str, runs: list[_Run]):  # fmt: skip
        self.data, self.algorithm, self.loss, self.base = data, algorithm, loss, base
        self.steps, self.record_every, self.sampling = steps, record_every, sampling
        self.kept_steps = _kept_steps(steps, record_every)
        self.groups: dict[tuple, list[tuple[int, FloatBatchSteps]]] = {}
        for i, run in enumerate(runs):
            try:
                chosen, noise, float_steps = self.float_steps(run)
            except ValueError as error:
                raise ValueError(f"run {i}: {error}") from None
            if not _stochastic(run):
                continue
            run.given["seed"] = _root_of(chosen, noise)
            runs_as = effective_algorithm(self.algorithm, run.hyperparameters)
            algo = get_algorithm(runs_as)
            if float_steps is None or algo.per_example:
                continue
            if constant_values(run.hyperparameters, algo.names) is None:
                continue
            if _not_representable(run.init.groups, self.data, self.loss):
                continue
            size = None if chosen is None else chosen.size
            self.groups.setdefault((runs_as, size), []).append((i, float_steps))

    def run(self, runs: list[_Run], tell: _Progress) -> dict[int, DiscreteRun]:
        """The results of the runs it takes (those that took every step), by index."""
        out: dict[int, DiscreteRun] = {}
        for (runs_as, _), members in self.groups.items():
            names = get_algorithm(runs_as).names
            for start in range(0, len(members), CHUNK):
                chunk = members[start : start + CHUNK]
                results = self.chunk([runs[i] for i, _ in chunk], chunk, names)
                out.update(results)
                tell.more(len(results))
        return out

    def float_steps(
        self, run: _Run
    ) -> tuple[Minibatches | None, StepNoise | None, FloatBatchSteps | None]:
        """The run's batches and noise, drawn from its seed as the single call draws them (None
        and None for a run without), and its float steps (None where it has neither or its
        loss has none)."""
        o = run.options
        chosen = minibatches(self.data.n, o.get("batch_size"), o.get("seed"), self.sampling,
                             None, self.steps, 0)  # fmt: skip
        noise = step_noise(o.get("label_noise", 0.0), o.get("temperature", 0.0), o.get("seed"),
                           chosen, self.data)  # fmt: skip
        if chosen is None and noise is None:
            return None, None, None
        runs_as = get_algorithm(effective_algorithm(self.algorithm, run.hyperparameters))
        problem = Problem(self.data, runs_as, run.hyperparameters, self.loss,
                          run.init.multiplicity, CLOCKS["original"])  # fmt: skip
        return chosen, noise, float_batch_steps(problem, self.base, chosen, noise,
                                                LOSS_CHECK_ARGUMENT)  # fmt: skip

    def chunk(self, runs: list[_Run], members: list[tuple[int, FloatBatchSteps]],
              names: tuple[str, ...]) -> dict[int, DiscreteRun]:  # fmt: skip
        """The results of the runs of ``members`` that took every step in the float steps."""
        columns = {n: np.array([float(run.hyperparameters[n]) for run in runs]) for n in names}
        many = ManyFloatSteps([steps for _, steps in members], columns)
        theta = np.array([run.init.groups for run in runs], dtype=float)
        kept = np.empty((len(runs), len(self.kept_steps)) + theta.shape[1:])
        kept[:, 0] = theta
        done, buffers = many.advance(theta, self.steps, self.record_every, kept)
        with np.errstate(over="ignore"):
            betas = np.prod(kept, axis=2)
        losses = _losses(betas.reshape(-1, betas.shape[2]), self.data, self.loss)
        losses = losses.reshape(betas.shape[:2])
        out = {}
        for r, (i, steps) in enumerate(members):
            if done[r]:
                chosen = steps.batches
                out[i] = DiscreteRun(
                    steps=self.kept_steps, t=self.kept_steps * self.base.unit, theta=kept[r],
                    beta=betas[r], loss=losses[r], status=Cause.REACHED_END.status,
                    message=f"ran {self.steps} steps", algorithm=self.algorithm,
                    eta=self.base.unit, cause=Cause.REACHED_END, momentum=self.base.momentum,
                    weight_decay=self.base.weight_decay, backend="numpy", buffer=buffers[r],
                    batch_size=None if chosen is None else chosen.size,
                    sampling="" if chosen is None else chosen.sampling,
                    seed=_root_of(chosen, steps.noise),
                )  # fmt: skip
        return out


def _kept_steps(steps: int, record_every: int) -> np.ndarray:
    """The steps a run of ``steps`` steps records: 0, every ``record_every``-th and the last."""
    return np.array(
        [0, *range(record_every, steps + 1, record_every)]
        + ([steps] if steps % record_every else []),
        dtype=np.int64,
    )


#: A run whose initial mean loss (as recorded) is not below this is the single call's: the
#: single call's own check of that loss (finite, in float64) could only decide otherwise within
#: rounding of the largest float.
LOSS_MARGIN = 1e300


def _discrete_run(
    kept_steps: np.ndarray,
    theta: np.ndarray,
    beta: np.ndarray,
    loss: np.ndarray,
    base: BaseOptimizer,
    algorithm: str,
    buffer: np.ndarray | None = None,
) -> DiscreteRun | None:
    """The :class:`~flows.discrete.DiscreteRun` of a run that the compiled loop took to its
    last step (``buffer``: its momentum buffer), or None where its initial loss is not below
    :data:`LOSS_MARGIN`."""
    if not loss[0] < LOSS_MARGIN:
        return None
    return DiscreteRun(
        steps=kept_steps,
        t=kept_steps * base.unit,
        theta=theta,
        beta=beta,
        loss=loss,
        status=Cause.REACHED_END.status,
        message=f"ran {kept_steps[-1]} steps",
        algorithm=algorithm,
        eta=base.unit,
        cause=Cause.REACHED_END,
        momentum=base.momentum,
        weight_decay=base.weight_decay,
        backend="numba",
        buffer=buffer,
    )
