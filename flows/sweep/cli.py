"""Regenerate the paper's figures: ``python -m flows.sweep``.

    python -m flows.sweep                 # every figure into ./figures/, cache in ./.cache/sweep/
    python -m flows.sweep --list          # names, titles and captions
    python -m flows.sweep fig4_amplification --out /tmp/figs --jobs 2
    python -m flows.sweep --fresh         # ignore the cache
    python -m flows.sweep --scheduler tcp://host:8786   # the runs on a dask cluster
    python -m flows.sweep --scheduler local --jobs 4    # ... or on a local one (4 workers)
    python -m flows.sweep --verbose       # also one line per run

The figures come from the figure table :data:`figures.table.FIGURES` (the presentation layer;
this module knows nothing about any figure). Each figure declares its expensive runs as
:class:`~flows.sweep.registry.Task` objects; the runs of all selected figures are computed on ``--jobs``
processes, most expensive first, and cached on disk (``--cache``); a figure is drawn (in the
same pool) as soon as its runs are done. A rerun, or a rerun after an interruption, computes only
what is missing; two sweeps on one cache compute each run once (see :mod:`flows.sweep.store`).

The task runner is :func:`flows.sweep.runner.run_tasks` (it takes any
:class:`concurrent.futures.Executor`); the process pool is :mod:`flows.sweep.pool`. With
``--scheduler`` the runs go to a dask cluster instead (:mod:`flows.sweep.dask_cluster`, the optional
``dask`` extra), with the same cache (kept by this process), progress output and results; the
figures are then drawn here.

The progress goes through :class:`flows.sweep.progress.Progress`: one line per figure (and,
with ``--verbose``, per run) on stdout, errors on stderr, and on a terminal a live line on
stderr.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor, wait
from pathlib import Path

from ..compiled.background import NO_BACKGROUND_COMPILE
from ..run import OneLineParser
from .dask_cluster import SchedulerError, address_problem, connect
from .pool import local_pool, single_blas_thread, stop_pool
from .progress import Progress
from .registry import Result, Task
from .runner import TaskError, run_tasks
from .stamps import Stamps
from .store import Cache

#: Defaults, relative to the current directory (not to where the package is installed).
DEFAULT_OUT = Path("figures")
DEFAULT_CACHE = Path(".cache") / "sweep"


def main(argv: list[str] | None = None) -> int:
    """Entry point; exit status 2 on bad arguments (or an unusable ``--scheduler``), 1 if a run
    or a drawing failed."""
    # An entry module: the one place in flows that reads the presentation layer's table.
    from figures.table import FIGURES

    args = parser().parse_args(argv)
    if args.list:
        return list_figures(args.names, FIGURES)
    problem = argument_problem(args, FIGURES)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    selected = [FIGURES[n] for n in dict.fromkeys(args.names or FIGURES)]
    # The runs compile their kernel groups one at a time (flows.sweep.gate) and use numba from
    # the first on, rather than numpy while a background compile runs (the workers inherit it).
    os.environ.setdefault(NO_BACKGROUND_COMPILE, "1")
    with single_blas_thread():  # as in the pool's workers: the same numbers with any --jobs
        return _sweep(args, selected)


def _sweep(args: argparse.Namespace, selected: list) -> int:
    """Compute the runs of the ``selected`` figures and draw them (``main`` past its checks)."""
    cache = Cache(args.cache)
    dask = None
    if args.scheduler is not None:
        try:
            dask = connect(args.scheduler, args.jobs)
        except SchedulerError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    # with a cluster the figures are drawn here, between results; else in the local pool
    pool = local_pool(args.jobs) if args.jobs > 1 and dask is None else None
    stamps = Stamps(Path(args.out), _code_mtime())
    progress = Progress(len(selected), args.verbose)
    sweep = Sweep(selected, Path(args.out), args.quick, pool, stamps, progress, args.redraw)
    try:
        with progress:
            _, computed = run_tasks(
                sweep.tasks(),
                cache,
                args.jobs,
                args.fresh,
                seconds=sweep.seconds,
                executor=dask or pool,
                on_result=sweep.on_result,
                errors=sweep.errors,
                window=None if dask is not None else args.jobs,
                events=progress,
            )
            wait(sweep.draws)
            if pool is not None:
                pool.shutdown(wait=True)  # and the drawings' callbacks have reported
    except BaseException:
        if pool is not None:
            stop_pool(pool)
        if dask is not None:
            dask.shutdown(wait=False, cancel_futures=True)
        raise
    if dask is not None:
        dask.shutdown(wait=True)
    stamps.write()
    return sweep.summary(computed)


def _code_mtime() -> float:
    """Time of the newest module of the presentation layer (a PNG older than it is redrawn)."""
    import figures

    return max(p.stat().st_mtime for p in Path(figures.__file__).parent.glob("*.py"))


def parser() -> argparse.ArgumentParser:
    """The argument parser."""
    p = OneLineParser(prog="python -m flows.sweep", description="Regenerate the paper's figures.")
    p.add_argument("names", nargs="*", help="figures to make (default: all; see --list)")
    p.add_argument(
        "--list", action="store_true", help="list the figures (or the named ones) and exit"
    )
    p.add_argument(
        "--out",
        default=str(DEFAULT_OUT),
        help="output directory (default: figures/ in the current directory)",
    )
    p.add_argument(
        "--cache",
        default=str(DEFAULT_CACHE),
        help="cache directory (default: .cache/sweep/ in the current directory)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=multiprocessing.cpu_count(),
        help="parallel processes, or workers of --scheduler local (default: all cores)",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run the tasks on a dask cluster: tcp://host:port of its scheduler, or 'local' for "
        "a local cluster of --jobs workers (needs the dask extra: pip install -e '.[dask]')",
    )
    p.add_argument("--fresh", action="store_true", help="ignore cached results")
    p.add_argument(
        "--redraw",
        action="store_true",
        help="draw every figure, also those whose PNG is up to date",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="tiny configuration (smoke test; not the paper's figures)",
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also one line per run (abbreviated to the terminal's width)",
    )
    return p


def list_figures(names: list[str], figures: dict) -> int:
    """Print the name, title and caption of the figures ``names`` (all when empty); status 2
    with one ``error:`` line if a name is not a figure."""
    unknown = [n for n in names if n not in figures]
    if unknown:
        print(f"error: unknown figure(s) {', '.join(unknown)}; see --list", file=sys.stderr)
        return 2
    for name in dict.fromkeys(names or figures):
        fig = figures[name]
        print(f"{name:24s} {fig.title}\n{'':24s} {fig.caption}")
    return 0


#: Most processes (or dask workers) one sweep starts: beyond a few per core they only contend.
MAX_JOBS = max(64, 4 * multiprocessing.cpu_count())


def argument_problem(args: argparse.Namespace, figures: dict) -> str | None:
    """What is wrong with the parsed arguments (checked before any work), or None."""
    unknown = [n for n in args.names if n not in figures]
    if unknown:
        return f"unknown figure(s) {', '.join(unknown)}; see --list"
    if not 1 <= args.jobs <= MAX_JOBS:
        return f"--jobs must be in [1, {MAX_JOBS}] (processes or workers), got {args.jobs}"
    scheduler = None if args.scheduler is None else address_problem(args.scheduler)
    if scheduler:
        return scheduler
    return check_directory(args.out, "--out") or check_directory(args.cache, "--cache")


def check_directory(path: str, option: str) -> str | None:
    """None if ``path`` is (or can be made) a writable directory, else the reason."""
    if not path:  # Path("") is the current directory: an empty value is a mistake
        return f"{option} must not be empty"
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


class Sweep:
    """The selected figures and their runs: draws each figure as soon as its runs are in (in
    ``pool``, or here when it is None), reports each figure to ``progress``, and sums up at
    the end.

    Attributes
    ----------
    seconds : compute seconds of the runs computed here, by task key (filled by the runner).
    errors : failed runs by task key (filled by the runner).
    draws : the drawings submitted to the pool.
    """

    def __init__(
        self,
        figures: list,
        out: Path,
        quick: bool,
        pool: ProcessPoolExecutor | None,
        stamps: Stamps,
        progress: Progress,
        redraw: bool = False,
    ):
        self.figures = {fig.name: fig for fig in figures}
        self.out, self.quick, self.pool = out, quick, pool
        self.stamps, self.progress, self.redraw = stamps, progress, redraw
        self.skipped: list[str] = []
        self.start = time.perf_counter()
        self.plan = {fig.name: fig.tasks(quick) for fig in figures}
        self.keys = {name: {t.key() for t in tasks} for name, tasks in self.plan.items()}
        self.users: dict[str, list[str]] = {}  # figures by task key
        for name, keys in self.keys.items():
            for key in keys:
                self.users.setdefault(key, []).append(name)
        self.got: dict[str, Result] = {}
        self.seconds: dict[str, float] = {}
        self.errors: dict[str, TaskError] = {}
        self.failed_draws: list[str] = []
        self.draws: list[Future] = []

    def tasks(self) -> list[Task]:
        """Every run of every selected figure (the runner drops repeats)."""
        return [t for tasks in self.plan.values() for t in tasks]

    def on_result(self, task: Task, result: Result, how: str) -> None:
        """A run is in: the drawing of the figures it completes."""
        key = task.key()
        self.got[key] = result
        for name in self.users[key]:
            if self.keys[name] <= self.got.keys():
                self.start_drawing(self.figures[name])

    def start_drawing(self, fig) -> None:
        """Draw ``fig`` here, or submit its drawing to the pool and report when it is done."""
        results = [self.got[t.key()] for t in self.plan[fig.name]]
        path = self.out / f"{fig.name}.png"
        keys = self.keys[fig.name]
        computed = any(k in self.seconds for k in keys)
        if not (self.redraw or computed) and self.stamps.up_to_date(
            fig.name, keys, self.quick, path
        ):
            self.skipped.append(fig.name)
            self.progress.figure(
                f"{path}: up to date ({len(keys)} runs cached), not redrawn (--redraw to force)"
            )
            return
        if self.pool is None:
            try:
                took = draw_figure(fig.draw, results, self.quick, path)
            except Exception as exc:  # noqa: BLE001 - reported
                self.report(fig, None, exc)
            else:
                self.report(fig, took, None)
            return
        future = self.pool.submit(draw_figure, fig.draw, results, self.quick, path)

        def drawn(f: Future, fig=fig) -> None:
            if not f.cancelled():
                exc = f.exception()
                self.report(fig, None if exc else f.result(), exc)

        future.add_done_callback(drawn)
        self.draws.append(future)

    def report(self, fig, took: float | None, exc: BaseException | None) -> None:
        """The line saying that ``fig`` was written (with its runs and times), or failed."""
        if exc is not None:
            self.failed_draws.append(fig.name)
            self.progress.figure(
                f"error: drawing {fig.name} failed: {type(exc).__name__}: {exc}", failed=True
            )
            return
        keys = self.keys[fig.name]
        self.stamps.drawn(fig.name, keys, self.quick)
        fresh = [k for k in keys if k in self.seconds]
        self.progress.figure(
            f"wrote {self.out / f'{fig.name}.png'}: {len(keys)} runs ({len(fresh)} computed in "
            f"{sum(self.seconds[k] for k in fresh):.1f}s of compute, "
            f"{len(keys) - len(fresh)} cached or reused), drawn in {took:.1f}s",
            drawn=took,
        )

    def summary(self, computed: int) -> int:
        """The figures not drawn and the closing line; the exit status (1 if anything failed)."""
        for name in self.plan:
            failed = [self.errors[k] for k in self.keys[name] if k in self.errors]
            if failed:
                self.progress.error(
                    f"error: {name} not drawn: {len(failed)} run(s) failed, first: {failed[0]}"
                )
        not_drawn = set(self.failed_draws) | {n for k in self.errors for n in self.users[k]}
        self.progress.line(
            f"done: {len(self.plan) - len(not_drawn)} of {len(self.plan)} figure(s) "
            f"({len(self.skipped)} up to date), "
            f"{computed} runs computed, {len(self.got) - computed} from cache or another "
            f"sweep, {len(self.errors)} failed, {time.perf_counter() - self.start:.1f}s"
        )
        return 1 if self.errors or self.failed_draws else 0


def draw_figure(
    draw: Callable[[list[Result], bool, Path], None], results: list[Result], quick: bool, path: Path
) -> float:
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


if __name__ == "__main__":
    sys.exit(main())
