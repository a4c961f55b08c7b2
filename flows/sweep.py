"""Regenerate the paper's figures: ``python -m flows.sweep``.

    python -m flows.sweep                 # every figure into ./figures/, cache in ./.cache/sweep/
    python -m flows.sweep --list          # names, titles and captions
    python -m flows.sweep fig4_amplification --out /tmp/figs --jobs 2
    python -m flows.sweep --fresh         # ignore the cache

The figures come from the figure table :data:`figures.table.FIGURES` (the presentation layer;
this module knows nothing about any figure). Each figure declares its expensive runs as
:class:`~flows.cache.Task` objects; the runs of all selected figures are computed on ``--jobs``
processes, most expensive first, and cached on disk (``--cache``); a figure is drawn (in the
same pool) as soon as its runs are done. A rerun, or a rerun after an interruption, computes only
what is missing; two sweeps on one cache compute each run once (see :mod:`flows.cache`).

:func:`run_tasks` is the task runner: it takes any :class:`concurrent.futures.Executor`.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Callable

from .cache import TASK_KINDS, Cache, Result, Task, estimated_cost
from .run import OneLineParser

#: Defaults, relative to the current directory (not to where the package is installed).
DEFAULT_OUT = Path("figures")
DEFAULT_CACHE = Path(".cache") / "sweep"

#: how often a worker checks that the sweep that started it is still alive (seconds)
PARENT_POLL = 0.2


class TaskError(RuntimeError):
    """A task raised: carries the task and the original exception (as ``__cause__``)."""

    def __init__(self, task: Task, exc: BaseException):
        super().__init__(f"{task.describe()}: {type(exc).__name__}: {exc}")
        self.task = task


# --------------------------------------------------------------------------- worker side


def _watch_parent(parent: int) -> None:
    """Exit this process (``os._exit``) as soon as ``parent`` is no longer its parent.

    When the sweep dies, even by SIGKILL, its workers are re-parented: ``os.getppid()`` changes.
    """
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL)
        os._exit(70)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def worker_init(parent: int) -> None:
    """Pool initializer: the worker exits when its parent (the sweep) dies."""
    _watch_parent(parent)


def local_pool(jobs: int) -> ProcessPoolExecutor:
    """A process pool of ``jobs`` workers that die with this process (fork where available,
    so that task kinds registered at run time are known to the workers)."""
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    return ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=worker_init,
                               initargs=(os.getpid(),))


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel what is queued and end the workers now (on an error or an interruption)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()


def work(fn: Callable[[dict], Result], task: Task, directory: Path | None, since: float,
         block: bool) -> tuple[str, Result | None, float]:
    """Compute one task under its lock; runs in a worker (or in the sweep itself).

    Returns ``(how, result, seconds)``: ``how`` is ``"computed"``, ``"reused"`` (another process
    stored it after ``since`` while we waited for the lock) or ``"busy"`` (``block`` is False and
    another process holds the lock; nothing done). ``fn`` is the task kind's function, sent by
    reference so that any executor's workers can find it.
    """
    cache = Cache(directory)
    with cache.lock(task, block) as held:
        if not held:
            return "busy", None, 0.0
        done = cache.load(task, newer_than=since)
        if done is not None:
            return "reused", done, 0.0
        start = time.perf_counter()
        result = fn(task.params)
        took = time.perf_counter() - start
        cache.store(task, result, took)
        return "computed", result, took


def draw_figure(draw: Callable[[list[Result], bool, Path], None], results: list[Result],
                quick: bool, path: Path) -> float:
    """Draw one figure into a temporary file, then rename it to ``path``; returns seconds."""
    start = time.perf_counter()
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        draw(results, quick, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return time.perf_counter() - start


# --------------------------------------------------------------------------- task runner


def run_tasks(tasks: list[Task], cache: Cache, jobs: int = 1, fresh: bool = False,
              log: Callable[[str], None] = print, seconds: dict[str, float] | None = None,
              executor: Executor | None = None,
              on_result: Callable[[Task, Result, str], None] | None = None,
              errors: dict[str, TaskError] | None = None,
              window: int | None = None) -> tuple[dict[str, Result], int]:
    """Results of ``tasks`` by key, computing the missing ones, most expensive first.

    Parameters
    ----------
    executor : where to compute; ``None`` means a local process pool of ``jobs`` workers (or
        this process when ``jobs <= 1``). Any :class:`concurrent.futures.Executor` works; its
        workers get the task kind's function by reference.
    window : at most this many tasks submitted at a time (default: ``jobs`` for the local pool,
        the executor's ``_max_workers`` if it has one, else all), so that the order holds and
        other work submitted to the same executor (drawing) is not queued behind every task.
    on_result : called in this process as ``on_result(task, result, how)`` for every result,
        ``how`` in ``"cached"``, ``"computed"``, ``"reused"`` (computed meanwhile by another
        process sharing the cache).
    errors : when given, a failing task is recorded there (by key) and the others go on;
        otherwise the first failure raises :class:`TaskError`.
    seconds : the compute time of each computed task is added to it (by key).

    Returns the results and how many tasks were computed here.
    """
    since = time.time()
    unique = {t.key(): t for t in tasks}
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
    if not missing:
        return results, 0
    measured = cache.measured_costs()
    costs = {t.key(): estimated_cost(t, measured) for t in missing}
    missing.sort(key=lambda t: -costs[t.key()])
    timings: dict[str, float] = {}  # new measurements, by cost key
    where = (f"on {jobs} process(es)" if executor is None
             else f"on {type(executor).__name__}")
    log(f"computing {len(missing)} runs ({len(unique) - len(missing)} cached) {where}, "
        "most expensive first")
    start = time.perf_counter()
    counts = {"computed": 0, "done": 0}

    def finish(task: Task, outcome: tuple[str, Result | None, float]) -> None:
        how, result, took = outcome
        key = task.key()
        results[key] = result
        counts["done"] += 1
        if how == "computed":
            counts["computed"] += 1
            timings[task.cost_key()] = took
            if seconds is not None:
                seconds[key] = took
        label = f"{took:.1f}s" if how == "computed" else "reused (computed by another process)"
        log(f"  [{counts['done']}/{len(missing)}] {task.describe()} {label} "
            f"(elapsed {time.perf_counter() - start:.0f}s)")
        if on_result is not None:
            on_result(task, result, how)

    def fail(task: Task, exc: BaseException) -> None:
        error = TaskError(task, exc)
        if errors is None:
            raise error from exc
        errors[task.key()] = error
        counts["done"] += 1
        log(f"  [{counts['done']}/{len(missing)}] {task.describe()} FAILED: {exc}")

    def busy(task: Task) -> None:
        log(f"  {task.describe()}: another process is computing it; waiting for its result")

    queue = deque((task, False) for task in missing)
    try:
        _drain(queue, cache, jobs, since, executor, window, finish, fail, busy)
    finally:
        cache.record_costs(timings)
    return results, counts["computed"]


def _drain(queue: deque, cache: Cache, jobs: int, since: float, executor: Executor | None,
           window: int | None, finish, fail, busy) -> None:
    """Run the queued ``(task, block)`` pairs (see :func:`run_tasks`)."""
    if executor is None and jobs <= 1:
        while queue:
            task, block = queue.popleft()
            try:
                outcome = work(TASK_KINDS[task.kind], task, cache.directory, since, block)
            except Exception as exc:  # noqa: BLE001 - reported by fail
                fail(task, exc)
                continue
            if outcome[0] == "busy":
                busy(task)
                queue.append((task, True))
            else:
                finish(task, outcome)
        return

    own = executor is None
    pool = local_pool(jobs) if own else executor
    limit = window or (jobs if own else getattr(executor, "_max_workers", None)) or len(queue)
    pending: dict[Future, Task] = {}
    try:
        while queue or pending:
            while queue and len(pending) < limit:
                task, block = queue.popleft()
                pending[pool.submit(work, TASK_KINDS[task.kind], task, cache.directory, since,
                                    block)] = task
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                task = pending.pop(future)
                try:
                    outcome = future.result()
                except Exception as exc:  # noqa: BLE001 - reported by fail
                    fail(task, exc)
                    continue
                if outcome[0] == "busy":
                    busy(task)
                    queue.append((task, True))
                else:
                    finish(task, outcome)
    except BaseException:
        if own:
            stop_pool(pool)
        else:
            for future in pending:
                future.cancel()
        raise
    if own:
        pool.shutdown(wait=True)


# --------------------------------------------------------------------------- command line


def check_directory(path: str, option: str) -> str | None:
    """None if ``path`` is (or can be made) a writable directory, else the reason."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"{option} {path!r} cannot be created: {exc.strerror or exc}"
    try:
        with tempfile.TemporaryFile(dir=p):
            pass
    except OSError as exc:
        return f"{option} {path!r} is not writable: {exc.strerror or exc}"
    return None


def parser() -> argparse.ArgumentParser:
    """The argument parser."""
    p = OneLineParser(prog="python -m flows.sweep", description="Regenerate the paper's figures.")
    p.add_argument("names", nargs="*", help="figures to make (default: all; see --list)")
    p.add_argument("--list", action="store_true", help="list the figures and exit")
    p.add_argument("--out", default=str(DEFAULT_OUT),
                   help="output directory (default: figures/ in the current directory)")
    p.add_argument("--cache", default=str(DEFAULT_CACHE),
                   help="cache directory (default: .cache/sweep/ in the current directory)")
    p.add_argument("--jobs", type=int, default=multiprocessing.cpu_count(),
                   help="parallel processes (default: all cores)")
    p.add_argument("--fresh", action="store_true", help="ignore cached results")
    p.add_argument("--quick", action="store_true",
                   help="tiny configuration (smoke test; not the paper's figures)")
    return p


def say(line: str, stream=None) -> None:
    """One line in one write (lines from the drawing callbacks do not interleave)."""
    stream = sys.stdout if stream is None else stream
    stream.write(line + "\n")
    stream.flush()


def main(argv: list[str] | None = None) -> int:
    """Entry point; exit status 2 on bad arguments, 1 if a run or a drawing failed."""
    # An entry module: the one place in flows that reads the presentation layer's table.
    from figures.table import FIGURES

    args = parser().parse_args(argv)
    if args.list:
        for name, fig in FIGURES.items():
            print(f"{name:24s} {fig.title}\n{'':24s} {fig.caption}")
        return 0
    unknown = [n for n in args.names if n not in FIGURES]
    problem = (f"unknown figure(s) {', '.join(unknown)}; see --list" if unknown
               else "--jobs must be >= 1" if args.jobs < 1
               else check_directory(args.out, "--out") or check_directory(args.cache, "--cache"))
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    selected = [FIGURES[n] for n in dict.fromkeys(args.names or FIGURES)]
    out = Path(args.out)
    cache = Cache(args.cache)
    start = time.perf_counter()
    plan = {fig.name: fig.tasks(args.quick) for fig in selected}
    keys = {name: {t.key() for t in tasks} for name, tasks in plan.items()}
    users: dict[str, list[str]] = {}
    for name, ks in keys.items():
        for k in ks:
            users.setdefault(k, []).append(name)
    got: dict[str, Result] = {}
    seconds: dict[str, float] = {}
    errors: dict[str, TaskError] = {}
    failed_draws: list[str] = []
    pool = local_pool(args.jobs) if args.jobs > 1 else None
    draws: list[Future] = []

    def report(fig, took: float | None, exc: BaseException | None) -> None:
        path = out / f"{fig.name}.png"
        if exc is not None:
            failed_draws.append(fig.name)
            say(f"error: drawing {fig.name} failed: {type(exc).__name__}: {exc}", sys.stderr)
            return
        fresh = [k for k in keys[fig.name] if k in seconds]
        say(f"wrote {path}: {len(keys[fig.name])} runs ({len(fresh)} computed in "
            f"{sum(seconds[k] for k in fresh):.1f}s of compute, "
            f"{len(keys[fig.name]) - len(fresh)} cached or reused), drawn in {took:.1f}s")

    def progress(name: str, note: str = "") -> None:
        done = sum(k in got for k in keys[name])
        say(f"[{name}] {done}/{len(keys[name])} tasks, {time.perf_counter() - start:.1f}s"
            + note, sys.stderr)

    def start_drawing(fig) -> None:
        results = [got[t.key()] for t in plan[fig.name]]
        path = out / f"{fig.name}.png"
        if pool is None:
            try:
                took = draw_figure(fig.draw, results, args.quick, path)
            except Exception as exc:  # noqa: BLE001 - reported
                report(fig, None, exc)
            else:
                report(fig, took, None)
            return
        future = pool.submit(draw_figure, fig.draw, results, args.quick, path)

        def drawn(f: Future, fig=fig) -> None:
            if not f.cancelled():
                exc = f.exception()
                report(fig, None if exc else f.result(), exc)

        future.add_done_callback(drawn)
        draws.append(future)

    def on_result(task: Task, result: Result, how: str) -> None:
        key = task.key()
        got[key] = result
        for name in users[key]:
            complete = keys[name] <= got.keys()
            if how != "cached" or complete:
                progress(name, ": drawing" if complete else "")
            if complete:
                start_drawing(FIGURES[name])

    try:
        _, computed = run_tasks([t for ts in plan.values() for t in ts], cache, args.jobs,
                                args.fresh, seconds=seconds, executor=pool, on_result=on_result,
                                errors=errors, window=args.jobs)
        wait(draws)
    except BaseException:
        if pool is not None:
            stop_pool(pool)
        raise
    if pool is not None:
        pool.shutdown(wait=True)
    for name in plan:
        failed = [errors[k] for k in keys[name] if k in errors]
        if failed:
            say(f"error: {name} not drawn: {len(failed)} run(s) failed, first: {failed[0]}",
                sys.stderr)
    not_drawn = set(failed_draws) | {n for k in errors for n in users[k]}
    print(f"done: {len(selected) - len(not_drawn)} of {len(selected)} figure(s), {computed} runs "
          f"computed, {len(got) - computed} from cache or another sweep, {len(errors)} failed, "
          f"{time.perf_counter() - start:.1f}s")
    return 1 if errors or failed_draws else 0


if __name__ == "__main__":
    sys.exit(main())
