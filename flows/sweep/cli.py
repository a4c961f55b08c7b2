"""Regenerate the paper's figures: ``python -m flows.sweep``.

    python -m flows.sweep                 # every figure into ./figures/, cache in ./.cache/sweep/
    python -m flows.sweep --list          # names, titles, captions and parameters
    python -m flows.sweep fig4_amplification --out /tmp/figs --jobs 2
    python -m flows.sweep fig4_amplification --set mu=1,2,3,4,7 --set depth=3 --format pdf
    python -m flows.sweep --fresh         # ignore the cache
    python -m flows.sweep --scheduler tcp://host:8786   # the runs on a dask cluster
    python -m flows.sweep --scheduler local --jobs 4    # ... or on a local one (4 workers)
    python -m flows.sweep --verbose       # also one line per run

Each figure is drawn at its parameters' defaults unless ``--set name=value`` changes one (the
cache and the up-to-date check follow the values), as ``<name>.png`` (or ``--format pdf``/``svg``)
with its caption, title and setting in ``<name>.txt`` beside it.

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
from typing import Any

from ..compiled.background import NO_BACKGROUND_COMPILE
from ..run import OneLineParser
from .dask_cluster import SchedulerError, address_problem, connect
from .pool import local_pool, single_blas_thread, stop_pool
from .progress import Progress
from .registry import Result, Task
from .runner import TaskError, run_tasks
from .stamps import Stamps
from .store import Cache

#: The image formats of ``--format`` (the figures' ``save`` writes each by its suffix).
FORMATS = ("png", "pdf", "svg")

#: Defaults, relative to the current directory (not to where the package is installed).
DEFAULT_OUT = Path("figures")
DEFAULT_CACHE = Path(".cache") / "sweep"


def main(
    argv: list[str] | None = None, figures: tuple[str, ...] = (), prog: str | None = None
) -> int:
    """Entry point; exit status 2 on bad arguments (or an unusable ``--scheduler``), 1 if a run
    or a drawing failed. ``figures``: the command of those figures alone (``python -m
    figures.<module>``, named ``prog``), which draws them all unless names are given."""
    # An entry module: the one place in flows that reads the presentation layer's table.
    from figures.table import FIGURES

    args = parser(prog).parse_args(argv)
    if figures:
        unknown = [n for n in args.names if n not in figures]
        if unknown:
            print(f"error: {', '.join(unknown)} not drawn by {prog}", file=sys.stderr)
            return 2
        args.names = args.names or list(figures)
    if args.list:
        return list_figures(args.names, FIGURES)
    problem = argument_problem(args, FIGURES)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    selected = [FIGURES[n] for n in dict.fromkeys(args.names or FIGURES)]
    try:
        settings = figure_settings(selected, args.set, args.quick)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # The runs compile their kernel groups one at a time (flows.sweep.gate) and use numba from
    # the first on, rather than numpy while a background compile runs (the workers inherit it).
    os.environ.setdefault(NO_BACKGROUND_COMPILE, "1")
    with single_blas_thread():  # as in the pool's workers: the same numbers with any --jobs
        return _sweep(args, selected, settings)


def parse_changes(items: list[str]) -> dict[str, str]:
    """``--set name=value`` items as ``{name: value}`` (``ValueError`` for an item without
    ``=`` or a name given twice)."""
    changes: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"--set expects name=value, got {item!r}")
        if name in changes:
            raise ValueError(f"--set {name} is given twice")
        changes[name] = value.strip()
    return changes


def figure_settings(selected: list, items: list[str], quick: bool) -> dict:
    """The setting of each selected figure (by name) with the ``--set`` items; ``ValueError``
    naming a parameter that a selected figure does not have, or a bad value."""
    changes = parse_changes(items)
    return {fig.name: fig.setting(changes, quick) for fig in selected}


def _sweep(args: argparse.Namespace, selected: list, settings: dict) -> int:
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
    sweep = Sweep(
        selected, settings, Path(args.out), args.format, pool, stamps, progress, args.redraw
    )
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


def parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The argument parser (of ``python -m flows.sweep``, or of the command ``prog`` of some
    figures)."""
    p = OneLineParser(
        prog=prog or "python -m flows.sweep", description="Regenerate the paper's figures."
    )
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
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="draw at another value of a figure's parameter (repeatable; lists comma-separated: "
        "--set mu=1,2,3,4,7); --list shows each figure's parameters",
    )
    p.add_argument(
        "--format",
        choices=tuple(FORMATS),
        default="png",
        help="image format (default png; svg keeps its text as text)",
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
    """Print the name, title, caption and parameters (with their defaults) of the figures
    ``names`` (all when empty); status 2 with one ``error:`` line if a name is not a figure."""
    unknown = [n for n in names if n not in figures]
    if unknown:
        print(f"error: unknown figure(s) {', '.join(unknown)}; see --list", file=sys.stderr)
        return 2
    for name in dict.fromkeys(names or figures):
        fig = figures[name]
        setting = fig.setting()
        print(f"{name:24s} {fig.title_for(setting)}\n{'':24s} {fig.caption_for(setting)}")
        if len(setting):
            print(f"{'':24s} parameters: {setting.describe()}")
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
        settings: dict,
        out: Path,
        image_format: str,
        pool: ProcessPoolExecutor | None,
        stamps: Stamps,
        progress: Progress,
        redraw: bool = False,
    ):
        self.figures = {fig.name: fig for fig in figures}
        self.settings = settings
        self.out, self.format, self.pool = out, image_format, pool
        self.stamps, self.progress, self.redraw = stamps, progress, redraw
        self.skipped: list[str] = []
        self.start = time.perf_counter()
        self.plan = {fig.name: fig.tasks(settings[fig.name]) for fig in figures}
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
        path = self.image(fig)
        setting = self.settings[fig.name]
        keys = self.keys[fig.name]
        computed = any(k in self.seconds for k in keys)
        if not (self.redraw or computed) and self.stamps.up_to_date(path, keys, setting.stamp()):
            self.skipped.append(fig.name)
            self.progress.figure(
                f"{path}: up to date ({len(keys)} runs cached), not redrawn (--redraw to force)"
            )
            return
        if self.pool is None:
            try:
                took = draw_figure(fig.draw, results, setting, path, caption_text(fig, setting))
            except Exception as exc:  # noqa: BLE001 - reported
                self.report(fig, None, exc)
            else:
                self.report(fig, took, None)
            return
        future = self.pool.submit(
            draw_figure, fig.draw, results, setting, path, caption_text(fig, setting)
        )

        def drawn(f: Future, fig=fig) -> None:
            if not f.cancelled():
                exc = f.exception()
                self.report(fig, None if exc else f.result(), exc)

        future.add_done_callback(drawn)
        self.draws.append(future)

    def image(self, fig) -> Path:
        """Where ``fig`` is written."""
        return self.out / f"{fig.name}.{self.format}"

    def report(self, fig, took: float | None, exc: BaseException | None) -> None:
        """The line saying that ``fig`` was written (with its runs and times), or failed."""
        if exc is not None:
            self.failed_draws.append(fig.name)
            self.progress.figure(
                f"error: drawing {fig.name} failed: {type(exc).__name__}: {exc}", failed=True
            )
            return
        keys = self.keys[fig.name]
        self.stamps.drawn(self.image(fig), keys, self.settings[fig.name].stamp())
        fresh = [k for k in keys if k in self.seconds]
        self.progress.figure(
            f"wrote {self.image(fig)}: {len(keys)} runs ({len(fresh)} computed in "
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
    draw: Callable[[list[Result], Any, Path], None],
    results: list[Result],
    setting,
    path: Path,
    caption: str,
) -> float:
    """Draw a figure (``draw`` at ``setting``) into a temporary file, then rename it to ``path``,
    and write ``caption`` beside it (``<name>.txt``); returns seconds."""
    start = time.perf_counter()
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        draw(results, setting, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    write_atomically(path.with_suffix(".txt"), caption)
    return time.perf_counter() - start


def caption_text(fig, setting) -> str:
    """The caption file of ``fig`` drawn at ``setting``: title, caption, the setting and the
    command that draws it."""
    defaults = fig.setting(quick=setting.quick)
    changed = [f" --set {k}={_command_value(v)}" for k, v in setting.items() if defaults[k] != v]
    command = f"python -m flows.sweep {fig.name}" + "".join(changed)
    command += " --quick" if setting.quick else ""
    return (
        f"{fig.title_for(setting)}\n\n{fig.caption_for(setting)}\n\n"
        + (f"Setting: {setting.describe()}.\n" if len(setting) else "")
        + f"Drawn by: {command}\n"
    )


def _command_value(value) -> str:
    """A parameter value as ``--set`` takes it."""
    if isinstance(value, (tuple, list)):
        return ",".join(_command_value(v) for v in value)
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
