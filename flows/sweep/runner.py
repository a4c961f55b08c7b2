"""The task runner: :func:`run_tasks` computes the missing :class:`~flows.sweep.registry.Task` results,
most expensive first, on any :class:`concurrent.futures.Executor` (or in this process).

Each task is computed under its cache lock (:func:`work`): a task that another process is
computing is put back in the queue and waited for, then its stored result is reused.

Where the workers may not see the cache directory (a dask cluster on other machines,
:mod:`flows.sweep.dask_cluster`), this process holds the locks and stores the results instead
(``cache_here``): the workers only compute, and a task that finished is on disk here whatever
happens to the workers afterwards.

What happens is told to a :class:`~flows.sweep.progress.RunEvents` (by default as one line per
task, :class:`~flows.sweep.progress.TaskLines`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import NamedTuple

from ..backends import BACKENDS
from ..compiled import compile_seconds
from .gate import CompileGate
from .pool import local_pool, stop_pool
from .progress import RunEvents, TaskLines
from .registry import TASK_KINDS, Result, Task, estimated_cost
from .store import Cache


class Outcome(NamedTuple):
    """What one :func:`work` call did: ``how`` is ``"computed"``, ``"reused"`` or ``"busy"``
    (see :func:`work`); ``seconds`` the task's own compute time, without ``compiling``, the
    seconds numba spent compiling kernels for it (a first use after an install)."""

    how: str
    result: Result | None
    seconds: float = 0.0
    compiling: float = 0.0


#: how often (seconds) a ``cache_here`` run retries the lock of a task another process computes
LOCK_POLL = 0.2


class TaskError(RuntimeError):
    """A task raised: carries the task and the original exception (as ``__cause__``)."""

    def __init__(self, task: Task, exc: BaseException):
        super().__init__(f"{task.describe()}: {type(exc).__name__}: {exc}")
        self.task = task


def run_tasks(
    tasks: list[Task],
    cache: Cache,
    jobs: int = 1,
    fresh: bool = False,
    log: Callable[[str], None] = print,
    seconds: dict[str, float] | None = None,
    executor: Executor | None = None,
    on_result: Callable[[Task, Result, str], None] | None = None,
    errors: dict[str, TaskError] | None = None,
    window: int | None = None,
    cache_here: bool | None = None,
    events: RunEvents | None = None,
) -> tuple[dict[str, Result], int]:
    """Results of ``tasks`` by key, computing the missing ones, most expensive first.

    Parameters
    ----------
    executor : where to compute; ``None`` means a local process pool of ``jobs`` workers (or
        this process when ``jobs <= 1``). Any :class:`concurrent.futures.Executor` works; its
        workers get the task kind's function by reference.
    window : at most this many tasks submitted at a time (default: ``jobs`` for the local pool,
        the executor's ``window`` or ``_max_workers`` if it has one, else all), so that the
        order holds and other work submitted to the same executor (drawing) is not queued
        behind every task.
    cache_here : this process, not the workers, takes each task's lock (while the task is out)
        and stores its result; the workers compute only (they need not see the cache). Default:
        the executor's ``cache_here`` attribute if it has one (:class:`flows.sweep.dask_cluster.DaskExecutor`
        does), else False.
    on_result : called in this process as ``on_result(task, result, how)`` for every result,
        ``how`` in ``"cached"``, ``"computed"``, ``"reused"`` (computed meanwhile by another
        process sharing the cache).
    errors : when given, a failing task is recorded there (by key) and the others go on;
        otherwise the first failure raises :class:`TaskError`.
    seconds : the compute time of each computed task is added to it (by key).
    events : told what happens (the runs planned, each run started, finished, failed or waited
        for); default: one line each through ``log`` (:class:`~flows.sweep.progress.TaskLines`).

    Returns the results and how many tasks were computed here.
    """
    since = time.time()
    events = TaskLines(log) if events is None else events
    unique = {t.key(): t for t in tasks}
    results, missing = _load_cached(unique, cache, fresh, on_result)
    costs = _most_expensive_first(missing, cache)
    where = (
        f"on {jobs} process(es)"
        if executor is None
        else f"on {getattr(executor, 'label', type(executor).__name__)}"
    )
    events.planned(missing, len(unique) - len(missing), where, costs)
    if not missing:
        return results, 0
    tally = _Tally(results, events, seconds, on_result, errors)
    queue = deque((task, False) for task in missing)
    if cache_here is None:
        cache_here = bool(getattr(executor, "cache_here", False))
    try:
        if executor is not None and cache_here:
            limit = window or getattr(executor, "window", None) or len(queue)
            _drain_here(executor, limit, queue, cache, since, tally)
        else:
            _drain(queue, cache, jobs, since, executor, window, tally)
    finally:
        cache.record_costs(tally.timings)
    return results, tally.computed


def work(
    fn: Callable[[dict], Result], task: Task, directory: Path | None, since: float, block: bool
) -> Outcome:
    """Compute one task under its lock; runs in a worker (or in the sweep itself).

    Returns its :class:`Outcome`: ``how`` is ``"computed"``, ``"reused"`` (another process
    stored it after ``since`` while we waited for the lock) or ``"busy"`` (``block`` is False and
    another process holds the lock; nothing done). The seconds stored with the result, and
    returned, are the task's own: the time numba spent compiling kernels meanwhile is returned
    apart. ``fn`` is the task kind's function, sent by reference so that any executor's
    workers can find it.
    """
    cache = Cache(directory)
    with cache.lock(task, block) as held:
        if not held:
            return Outcome("busy", None)
        done = cache.load(task, newer_than=since)
        if done is not None:
            return Outcome("reused", done)
        compiled = compile_seconds()
        start = time.perf_counter()
        result = fn(task.params)
        took = time.perf_counter() - start
        compiling = compile_seconds() - compiled
        cache.store(task, result, took - compiling)
        return Outcome("computed", result, took - compiling, compiling)


def _load_cached(
    unique: dict[str, Task],
    cache: Cache,
    fresh: bool,
    on_result: Callable[[Task, Result, str], None] | None,
) -> tuple[dict[str, Result], list[Task]]:
    """The cached results by key (none when ``fresh``) and the tasks still to compute."""
    results: dict[str, Result] = {}
    missing = []
    for key, task in unique.items():
        cached = None if fresh else cache.load(task)
        if cached is None:
            missing.append(task)
        else:
            results[key] = cached
            if on_result is not None:
                on_result(task, cached, "cached")
    return results, missing


def _most_expensive_first(missing: list[Task], cache: Cache) -> dict[str, float]:
    """Sort ``missing`` in place by estimated cost (measured where known), largest first;
    returns the estimates by task key."""
    measured = cache.measured_costs() if missing else {}
    costs = {t.key(): estimated_cost(t, measured) for t in missing}
    missing.sort(key=lambda t: -costs[t.key()])
    return costs


class _Tally:
    """What :func:`run_tasks` reports and records as the outcomes of its tasks come in."""

    def __init__(
        self,
        results: dict[str, Result],
        events: RunEvents,
        seconds: dict[str, float] | None,
        on_result: Callable[[Task, Result, str], None] | None,
        errors: dict[str, TaskError] | None,
    ):
        self.results, self.events = results, events
        self.seconds, self.on_result, self.errors = seconds, on_result, errors
        self.timings: dict[str, float] = {}  # new measurements, by cost key
        self.computed = 0

    def settle(self, queue: deque, task: Task, outcome: Callable[[], Outcome]) -> None:
        """Record the outcome of ``task``: its result, its failure, or (``"busy"``) a wait for
        the process that holds its lock (the task goes back to ``queue``, blocking)."""
        try:
            how, result, took, compiling = outcome()
        except Exception as exc:  # noqa: BLE001 - reported by fail
            self.fail(task, exc)
            return
        if how == "busy":
            self.events.waiting(task)
            queue.append((task, True))
        else:
            assert result is not None  # only "busy" comes without a result
            self.finish(task, how, result, took, compiling)

    def finish(
        self, task: Task, how: str, result: Result, took: float, compiling: float = 0.0
    ) -> None:
        """A result, computed here (in ``took`` seconds, and ``compiling`` more) or by another
        process (``how == "reused"``)."""
        key = task.key()
        self.results[key] = result
        if how == "computed":
            self.computed += 1
            self.timings[task.cost_key()] = took
            if self.seconds is not None:
                self.seconds[key] = took
        self.events.finished(task, how, took, compiling)
        if self.on_result is not None:
            self.on_result(task, result, how)

    def fail(self, task: Task, exc: BaseException) -> None:
        """A task raised: recorded in ``errors``, or raised as :class:`TaskError`."""
        error = TaskError(task, exc)
        if self.errors is None:
            raise error from exc
        self.errors[task.key()] = error
        self.events.failed(task, exc)


def _drain(
    queue: deque,
    cache: Cache,
    jobs: int,
    since: float,
    executor: Executor | None,
    window: int | None,
    tally: _Tally,
) -> None:
    """Run the queued ``(task, block)`` pairs (see :func:`run_tasks`)."""
    if executor is None and jobs <= 1:
        while queue:
            task, block = queue.popleft()
            tally.events.started(task)
            tally.settle(
                queue,
                task,
                partial(work, TASK_KINDS[task.kind], task, cache.directory, since, block),
            )
        return
    limit = window or (jobs if executor is None else _executor_window(executor))
    limit = limit or len(queue)
    if executor is not None:
        _drain_on(executor, limit, queue, cache, since, tally)
        return
    pool = local_pool(jobs)
    try:
        _drain_on(pool, limit, queue, cache, since, tally)
    except BaseException:
        stop_pool(pool)
        raise
    pool.shutdown(wait=True)


def _drain_on(
    executor: Executor, limit: int, queue: deque, cache: Cache, since: float, tally: _Tally
) -> None:
    """Run the queue on ``executor``, at most ``limit`` tasks submitted at a time, one first
    compile of each numba kernel group at a time (:class:`flows.sweep.gate.CompileGate`); on an
    error or an interruption the submitted tasks that have not started are cancelled."""
    pending: dict[Future, Task] = {}
    gate = CompileGate(active=BACKENDS["numba"].available())
    try:
        while queue or pending:
            while queue and len(pending) < limit:
                entry = gate.take(queue, force=not pending)
                if entry is None:
                    break
                task, block = entry
                tally.events.started(task)
                pending[
                    executor.submit(
                        work, TASK_KINDS[task.kind], task, cache.directory, since, block
                    )
                ] = task
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                task = pending.pop(future)
                gate.done(task)
                tally.settle(queue, task, future.result)
    except BaseException:
        for future in pending:
            future.cancel()
        raise


def _executor_window(executor: Executor) -> int | None:
    """How many tasks to keep submitted to ``executor`` by default (None: all)."""
    return getattr(executor, "window", None) or getattr(executor, "_max_workers", None)


def _drain_here(
    executor: Executor, limit: int, queue: deque, cache: Cache, since: float, tally: _Tally
) -> None:
    """Run the queue on ``executor`` with the cache handled in this process (``cache_here``).

    For each task this process takes the lock (never blocking: a task another process holds
    waits in ``held_elsewhere`` and its lock is tried again every :data:`LOCK_POLL` seconds),
    reuses a result stored meanwhile, or submits :func:`work` without a cache directory and
    keeps the lock until the result is stored here. On an error or an interruption the tasks
    out are cancelled and every lock is released.
    """
    pending: dict[Future, tuple[Task, ExitStack]] = {}
    held_elsewhere: list[Task] = []
    try:
        while queue or pending or held_elsewhere:
            while queue and len(pending) < limit:
                task, block = queue.popleft()
                lock = ExitStack()
                if not lock.enter_context(cache.lock(task, block=False)):
                    lock.close()
                    if block:  # already reported: wait quietly
                        held_elsewhere.append(task)
                    else:
                        tally.settle(queue, task, lambda: Outcome("busy", None))
                    continue
                done = cache.load(task, newer_than=since)
                if done is not None:
                    lock.close()
                    tally.finish(task, "reused", done, 0.0)
                    continue
                tally.events.started(task)
                future = executor.submit(work, TASK_KINDS[task.kind], task, None, since, False)
                pending[future] = (task, lock)
            if not pending and not queue:
                time.sleep(LOCK_POLL)
            elif pending:
                timeout = LOCK_POLL if held_elsewhere else None
                done_now, _ = wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
                for future in done_now:
                    task, lock = pending.pop(future)
                    with lock:  # released once the result is stored (or the task failed)
                        tally.settle(queue, task, partial(_store_here, future, task, cache))
            queue.extend((task, True) for task in held_elsewhere)
            held_elsewhere.clear()
    except BaseException:
        for future, (_, lock) in pending.items():
            future.cancel()
            lock.close()
        raise


def _store_here(future: Future, task: Task, cache: Cache) -> Outcome:
    """The outcome of a task computed elsewhere (without a cache), stored here."""
    outcome = future.result()
    if outcome.how == "computed" and outcome.result is not None:
        cache.store(task, outcome.result, outcome.seconds)
    return outcome
