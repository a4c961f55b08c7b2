"""Many runs in one call: :func:`simulate_many` and :func:`iterate_many`.

A batch is one data set, one algorithm and depth and one set of options, run over *batch axes*:
``alpha`` (one run's initialization per entry) and any of the algorithm's hyper-parameters given
as a sequence (``rho=[0.1, 0.2, ...]``). A number (or a schedule) is shared by every run. The
runs are, with ``product=False`` (the default), the axes zipped: every axis of more than one
entry has the same length ``B`` and an axis of one entry is repeated ``B`` times (a
``ValueError`` names an axis whose length differs from that of the first longer axis, in the
order ``alpha``, then the hyper-parameters as given); with ``product=True``, every combination,
``alpha`` varying slowest, then the hyper-parameters in the order given. The results come back
as a list in that order, each exactly what the single call returns: a run that fails keeps its
own ``status`` and ``message`` and the others go on. A stochastic option (a ``seed``) would be
one more batch axis under the same rule.

Every run's arguments are checked before the first run starts (a ``ValueError`` names the
parameter and the run, ``alpha[3]``), and the batch computes with one BLAS thread (as the sweep
does: on a shared machine a thread pool per small product costs more than the product).
:func:`iterate_many` sets the problem and the compiled loop up once per distinct
hyper-parameters, runs each run's steps in one call of the compiled kernel, its iterates written
straight into one array, and computes the losses of a group of runs' iterates in one call of
:func:`flows.discrete.iterate`'s own loss function; a run that the compiled loop hands back, or
any run without numba, is the single :func:`flows.iterate` call. :func:`simulate_many` runs
each flow through :func:`flows.simulate`.

Equal means bit for bit (``tests/test_many.py``): the compiled loop takes the same steps in the
same order whether it records its iterates in chunks (the single call) or in one array, and a
row of a matrix product (the loss arguments of one iterate) is computed in the same order
whatever the other rows are.
"""

from __future__ import annotations

import functools
import itertools
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple, TextIO, TypeVar

import numpy as np

from .algorithms import effective_algorithm, get_algorithm, resolve_hyperparameters
from .checks import integer
from .clocks import CLOCKS
from .data import Dataset
from .discrete import (
    LOSS_BLOCK,
    BaseOptimizer,
    DiscreteRun,
    _losses,
    base_optimizer,
    check_budget,
    discrete_steps,
    iterate,
)
from .field import Problem
from .initialization import Initialization, check_depth, initialization
from .integrator.driver import simulate
from .model import get_loss, loss_for
from .results import Cause, Trajectory

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
    for i, (run_alpha, given) in enumerate(batch_runs(alpha, hyperparameters, product)):
        try:
            init = initialization(run_alpha, depth, data.d, reduced)
        except ValueError as error:
            raise ValueError(f"alpha[{i}]: {error}") from None
        try:
            hp = resolve_hyperparameters(algorithm, given)
        except ValueError as error:
            raise ValueError(f"run {i}: {error}") from None
        runs.append(_Run(run_alpha, given, init, hp))
    return runs


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
    name: str, runs: list[_Run], one: Callable[[_Run], Result], progress: bool
) -> list[Result]:
    """``one(run)`` for every run, in order, with one BLAS thread."""
    tell = _Progress(name, len(runs), sys.stderr if progress else None)
    out = []
    with _one_blas_thread():
        for k, run in enumerate(runs, start=1):
            out.append(one(run))
            tell.done(k)
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
    **settings : the keyword options of :func:`flows.simulate` (``t_max``, ``clock``,
        ``n_points``, ``rtol``, ``backend``, ...), shared by every run, and the algorithm's
        hyper-parameters, each a shared value or a batch axis (``rho=[0.5, 1.0]``).

    Returns
    -------
    list of Trajectory
        One per run, in the order of :func:`batch_runs`, each equal field by field and bit for
        bit to the single :func:`flows.simulate` call with that run's arguments: its own
        ``status``, ``message`` and events.

    Raises
    ------
    ValueError
        Before any run: naming a batch axis whose length differs, an empty axis, or a run's
        ``alpha`` or hyper-parameter that :func:`flows.simulate` would refuse (with the run's
        index); an option that :func:`flows.simulate` refuses, naming it, at the first run.
    """
    options, hyperparameters = _split_settings(settings, _SIMULATE_OPTIONS)
    runs = _checked_runs(data, algorithm, depth, alpha, hyperparameters, product, reduced)

    def one(run: _Run) -> Trajectory:
        return simulate(data, algorithm, depth, run.alpha, reduced=reduced, **options, **run.given)

    return _run_batch("simulate_many", runs, one, progress)


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
    """:func:`flows.iterate` over batch axes of ``alpha`` and the hyper-parameters.

    Parameters
    ----------
    data, algorithm, depth : as for :func:`flows.iterate`, shared by every run.
    alpha : one initialization per run (a list, a tuple, or an array whose first axis indexes
        the runs), or one shared by every run.
    product : how the batch axes combine (:func:`batch_runs`).
    progress : a line on stderr every second or so.
    **settings : the keyword options of :func:`flows.iterate` (``eta``, ``steps``,
        ``record_every``, ``loss``, ``momentum``, ``weight_decay``, ``backend``), shared by
        every run, and the algorithm's hyper-parameters, each a shared value or a batch axis.

    Returns
    -------
    list of DiscreteRun
        One per run, in the order of :func:`batch_runs`, each equal field by field and bit for
        bit to the single :func:`flows.iterate` call (module docstring).

    Raises
    ------
    ValueError
        Before any run, as :func:`simulate_many` (naming the parameter, and the run's index
        for a run's ``alpha`` or hyper-parameter).
    """
    options, hyperparameters = _split_settings(settings, _ITERATE_OPTIONS)
    runs = _checked_runs(data, algorithm, depth, alpha, hyperparameters, product, False)
    given = dict(iterate.__kwdefaults__ or {}, **options)
    the_loss = get_loss(loss_for(given["loss"], data))
    base = base_optimizer(given["eta"], given["momentum"], given["weight_decay"])
    steps = integer(given["steps"], "steps", 1)
    record_every = integer(given["record_every"], "record_every", 1)
    check_budget(steps, record_every, depth * data.d)
    backend = given["backend"]
    stepper_cache: dict[tuple, Any] = {}

    def compiled_steps(run: _Run) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | DiscreteRun:
        """The run's recorded steps and iterates from the compiled loop, or its single call."""
        runs_as = effective_algorithm(algorithm, run.hyperparameters)
        key = (runs_as, tuple(run.hyperparameters.items()))
        if key not in stepper_cache:
            problem = Problem(
                data,
                get_algorithm(runs_as),
                run.hyperparameters,
                the_loss,
                run.init.multiplicity,
                CLOCKS["original"],
            )
            stepper_cache[key] = discrete_steps(backend, problem, base)
        compiled = stepper_cache[key]
        done = (
            None
            if compiled is None
            else _compiled_run(run.init.groups, compiled, steps, record_every)
        )
        if done is None:
            return iterate(data, algorithm, depth, run.alpha, **options, **run.given)
        return done

    with _one_blas_thread():
        stepped = _run_batch("iterate_many", runs, compiled_steps, progress)
        results = [r if isinstance(r, DiscreteRun) else None for r in stepped]
        recorded = {i: r for i, r in enumerate(stepped) if not isinstance(r, DiscreteRun)}
        sizes = [len(kept_steps) for kept_steps, _, _ in recorded.values()]
        for group in _loss_groups(list(recorded), sizes, data.n):
            thetas = [recorded[i][1] for i in group]
            with np.errstate(over="ignore"):
                betas = np.prod(np.concatenate(thetas), axis=1)
            losses = _losses(betas, data, the_loss)
            start = 0
            for i, theta in zip(group, thetas, strict=True):
                end = start + len(theta)
                results[i] = _discrete_run(
                    recorded[i][0], theta, betas[start:end], losses[start:end], base, algorithm,
                    recorded[i][2],
                )  # fmt: skip
                start = end
        return [
            run_result
            if run_result is not None
            else iterate(data, algorithm, depth, run.alpha, **options, **run.given)
            for run, run_result in zip(runs, results, strict=True)
        ]


def _compiled_run(
    theta: np.ndarray, compiled: Any, steps: int, record_every: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
    """The recorded steps and iterates, and the momentum buffer after the last step (None
    before any), of a run whose every step the compiled loop
    (:class:`flows.compiled.discrete.CompiledSteps`) takes, in one call of its kernel; None
    where a step needs the numpy loop (the run is then the single call's). The kernel checks
    the initial iterate as :func:`flows.discrete.iterate` does, except for its loss (the
    recorded losses do: :func:`_discrete_run`)."""
    to_record = steps // record_every + (steps % record_every != 0)
    store = np.empty((to_record + 1,) + theta.shape)
    store[0] = theta
    kept_steps = np.zeros(to_record + 1, dtype=np.int64)
    work = np.array(theta, dtype=float)
    buffer = np.zeros_like(work)
    status, k, recorded, started = compiled.kernels.run(
        work,
        buffer,
        False,
        0,
        steps,
        record_every,
        compiled.problem,
        store[1:],
        kept_steps[1:],
    )
    if status != compiled.kernels.FINISHED or k != steps:
        return None
    return kept_steps[: recorded + 1], store[: recorded + 1], buffer if started else None


#: A run whose initial mean loss (as recorded) is not below this is the single call's: the
#: single call's own check of that loss (finite, in float64) could only decide otherwise within
#: rounding of the largest float.
LOSS_MARGIN = 1e300


def _loss_groups(runs: list[int], sizes: list[int], n: int) -> Iterator[list[int]]:
    """``runs`` in consecutive groups of at most :data:`flows.discrete.LOSS_BLOCK` recorded
    loss arguments (``sizes`` recorded iterates per run, ``n`` examples; a larger run alone)."""
    group: list[int] = []
    total = 0
    for run, size in zip(runs, sizes, strict=True):
        if group and (total + size) * n > LOSS_BLOCK:
            yield group
            group, total = [], 0
        group.append(run)
        total += size
    if group:
        yield group


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
