"""How a sweep reports its progress: the task runner's events (:class:`RunEvents`), told as one
line each (:class:`TaskLines`, the default of :func:`flows.sweep.runner.run_tasks`) or shown by
the sweep's display (:class:`Progress`).

:class:`Progress` writes the lines that stay (a figure written, the summary; with ``verbose``
also one line per run) to ``out`` and errors to ``err``. When ``err`` is a terminal it also
keeps one live line at the bottom of ``err`` (figures and runs done, elapsed time, time left),
rewritten in place at most a few times per second, with every other line printed above it.
"""

from __future__ import annotations

import math
import shutil
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TextIO

from .registry import Task

#: seconds between two drawings of the live line
INTERVAL = 0.25
#: the time left is shown once this many runs are computed or figures drawn, and ...
MIN_DONE = 3
#: ... this many seconds have passed since the runs started
MIN_SECONDS = 2.0


class RunEvents(Protocol):
    """What :func:`flows.sweep.runner.run_tasks` tells as it goes."""

    def planned(
        self, missing: list[Task], cached: int, where: str, costs: dict[str, float]
    ) -> None:
        """The runs to compute (most expensive first), how many are cached, where the runs
        go, and the estimated cost of each run to compute (by task key)."""

    def started(self, task: Task) -> None:
        """``task`` was handed to a worker (or starts in this process)."""

    def finished(self, task: Task, how: str, took: float, compiling: float = 0.0) -> None:
        """``task`` is done: ``how`` is ``"computed"`` (in ``took`` seconds, while numba
        compiled kernels for it ``compiling`` seconds more) or ``"reused"``."""

    def failed(self, task: Task, exc: BaseException) -> None:
        """``task`` raised ``exc``."""

    def waiting(self, task: Task) -> None:
        """Another process is computing ``task``: its result is waited for."""


class TaskLines:
    """The runner's events as one line each through ``log``: a header, then
    ``[done/total] <task> <seconds> (elapsed …)`` per run, the task's label abbreviated
    to fit ``width()`` characters when ``width`` is given."""

    def __init__(
        self,
        log: Callable[[str], None],
        width: Callable[[], int] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ):
        self.log, self.width, self.clock = log, width, clock
        self.total = self.done = 0
        self.start = clock()

    def planned(
        self, missing: list[Task], cached: int, where: str, costs: dict[str, float]
    ) -> None:
        """The header line (none when nothing is to compute)."""
        self.total, self.start = len(missing), self.clock()
        if missing:
            self.log(
                f"computing {len(missing)} runs ({cached} cached) {where}, most expensive first"
            )

    def started(self, task: Task) -> None:
        """Nothing to say."""

    def finished(self, task: Task, how: str, took: float, compiling: float = 0.0) -> None:
        """``[done/total] <task> 1.6s (elapsed 2s)``, ``1.6s + 25s compiling`` when numba
        compiled kernels for it."""
        self.done += 1
        said = f"{took:.1f}s" if how == "computed" else "reused (computed by another process)"
        if how == "computed" and compiling >= 0.5:
            said += f" + {compiling:.0f}s compiling"
        self._line(f"  [{self.done}/{self.total}] ", f" {said} (elapsed {self._elapsed()}s)", task)

    def failed(self, task: Task, exc: BaseException) -> None:
        """``[done/total] <task> FAILED: <exception>``."""
        self.done += 1
        self._line(f"  [{self.done}/{self.total}] ", f" FAILED: {exc}", task)

    def waiting(self, task: Task) -> None:
        """``<task>: another process is computing it; …``."""
        self._line("  ", ": another process is computing it; waiting for its result", task)

    def _elapsed(self) -> str:
        return f"{self.clock() - self.start:.0f}"

    def _line(self, before: str, after: str, task: Task) -> None:
        """``before + label + after``, the label cut so that the line fits the width."""
        room = None if self.width is None else max(self.width() - len(before) - len(after), 1)
        self.log(before + task.describe(room) + after)


class Progress:
    """The progress display of a sweep of ``figures`` figures, fed by the runner's events
    (:class:`RunEvents`) and by the sweep (:meth:`figure`, :meth:`error`, :meth:`line`).

    On a terminal (``tty``, default ``err.isatty()``) it keeps a live line at the bottom of
    ``err`` while it is entered (``with progress:``): then ``sys.stdout`` and ``sys.stderr``
    go through it, so that any line printed in this process (a cache warning, say) lands above
    the live line, and a thread redraws the line every :data:`INTERVAL` seconds (``ticker``).
    ``clock`` (seconds) and ``columns`` (the width; default: the terminal's, read at each
    drawing) are injectable.
    """

    def __init__(
        self,
        figures: int,
        verbose: bool = False,
        out: TextIO | None = None,
        err: TextIO | None = None,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        columns: int | None = None,
        ticker: bool = True,
    ):
        self.out = sys.stdout if out is None else out
        self.err = sys.stderr if err is None else err
        self.tty = self.err.isatty() if tty is None else tty
        self.clock, self.columns, self.ticker = clock, columns, ticker
        self.lines = TaskLines(self.line, self.width, clock) if verbose else None
        self.figures, self.figures_done = figures, 0
        self.runs: int | None = None  # known once the cache is read
        self.runs_done = 0
        self.running: dict[str, float] = {}  # the runs started and not done: when they started
        self.costs: dict[str, float] = {}
        self.cost_total = self.cost_done = 0.0  # estimated costs: all runs, the runs done
        self.timed = 0  # runs computed and figures drawn here
        self.cost_timed = self.run_seconds = 0.0  # estimated cost, seconds of the computed runs
        self.compile_seconds = 0.0  # what numba spent compiling kernels for them (a first use)
        self.drawn, self.draw_seconds = 0, 0.0
        self.start = clock()
        self.computing_since: float | None = None
        self.lock = threading.RLock()
        self.live = False  # the live line is on the screen
        self.last = -INTERVAL  # when it was drawn
        self.saved: tuple[TextIO, TextIO] | None = None
        self.stop = threading.Event()

    # ------------------------------------------------------------------ the runner's events

    def planned(
        self, missing: list[Task], cached: int, where: str, costs: dict[str, float]
    ) -> None:
        """The number of runs and their estimated costs."""
        with self.lock:
            self.runs, self.runs_done = len(missing) + cached, cached
            self.costs, self.cost_total = costs, sum(costs.values())
            self.computing_since = self.clock()
            if self.lines is not None:
                self.lines.planned(missing, cached, where, costs)
            self.refresh()

    def started(self, task: Task) -> None:
        """One more run out."""
        with self.lock:
            self.running[task.key()] = self.clock()
            self.refresh()

    def finished(self, task: Task, how: str, took: float, compiling: float = 0.0) -> None:
        """One more run done."""
        with self.lock:
            self._done(task, took if how == "computed" else None, compiling)
            if self.lines is not None:
                self.lines.finished(task, how, took, compiling)
            self.refresh()

    def failed(self, task: Task, exc: BaseException) -> None:
        """One more run done, and its error line."""
        with self.lock:
            self._done(task, None)
            if self.lines is not None:
                self.lines.failed(task, exc)
            self.error(f"error: {task.describe()} failed: {type(exc).__name__}: {exc}")

    def waiting(self, task: Task) -> None:
        """A run that another process computes is no longer out (it is waited for)."""
        with self.lock:
            self.running.pop(task.key(), None)
            if self.lines is not None:
                self.lines.waiting(task)
            self.refresh()

    def _done(self, task: Task, took: float | None, compiling: float = 0.0) -> None:
        """A run is done, computed here in ``took`` seconds (and ``compiling`` more) unless
        None."""
        cost = self.costs.get(task.key(), 0.0)
        self.running.pop(task.key(), None)
        self.runs_done += 1
        self.cost_done += cost
        if took is not None:
            self.timed += 1
            self.cost_timed += cost
            self.run_seconds += took
            self.compile_seconds += compiling

    # ------------------------------------------------------------------ the sweep's lines

    def figure(self, text: str, drawn: float | None = None, failed: bool = False) -> None:
        """A figure is done (``drawn`` in so many seconds): its line (on ``err`` if it
        ``failed``)."""
        with self.lock:
            self.figures_done += 1
            if drawn is not None:
                self.timed, self.drawn = self.timed + 1, self.drawn + 1
                self.draw_seconds += drawn
            self.line(text, self.err if failed else self.out)

    def error(self, text: str) -> None:
        """A line on ``err``."""
        self.line(text, self.err)

    def line(self, text: str, stream: TextIO | None = None) -> None:
        """``text`` as one line on ``stream`` (default ``out``), above the live line."""
        stream = self.out if stream is None else stream
        with self.lock:
            live = self.live
            if live:
                self._clear()
            stream.write(text + "\n")
            stream.flush()
            if live:
                self.refresh(force=True)

    # ------------------------------------------------------------------ the live line

    def status(self) -> str:
        """The live line's text (not cut to the width)."""
        now = self.clock()
        parts = [f"figures {self.figures_done}/{self.figures}"]
        if self.runs is not None:
            running = f" ({len(self.running)} started)" if self.running else ""
            parts.append(f"runs {self.runs_done}/{self.runs}{running}")
        parts.append(f"{clock_time(now - self.start)} elapsed")
        left = self.time_left(now)
        if left is not None:
            parts.append(f"about {clock_time(math.ceil(left))} left")
        return ", ".join(parts)

    def time_left(self, now: float) -> float | None:
        """Seconds until the sweep is done: the time spent times the work left over the work
        done, in seconds of one worker. A run left is its estimated cost, scaled by the
        seconds over the estimated cost of the runs computed so far (their compile time
        counts as work done, not in that rate: the kernels compile once); a figure left, the
        mean time of the drawings so far. A run still out counts the time since it started
        as work done and as that much less of its own work left (a worker compiling the
        kernels for minutes is busy, not idle). None while too little is known (fewer than
        :data:`MIN_DONE` runs computed and figures drawn, less than :data:`MIN_SECONDS` spent,
        or no run computed while runs are left) and when no work is left."""
        if self.computing_since is None or self.timed < MIN_DONE:
            return None
        spent = now - self.computing_since
        runs_left = self.cost_total - self.cost_done
        if spent < MIN_SECONDS or (runs_left > 0 and self.cost_timed <= 0):
            return None
        scale = self.run_seconds / self.cost_timed if runs_left > 0 else 0.0
        mean_draw = self.draw_seconds / self.drawn if self.drawn else 0.0
        out = {key: now - since for key, since in self.running.items()}
        ahead = sum(
            min(spent_on, scale * self.costs.get(key, 0.0)) for key, spent_on in out.items()
        )
        left = scale * runs_left - ahead + mean_draw * (self.figures - self.figures_done)
        done = self.run_seconds + self.compile_seconds + self.draw_seconds + sum(out.values())
        if left <= 0 or done <= 0:
            return None
        return spent * left / done

    def width(self) -> int:
        """The width of the terminal (or ``columns``)."""
        return self.columns or shutil.get_terminal_size().columns

    def refresh(self, force: bool = False) -> None:
        """Draw the live line (if entered on a terminal), unless drawn less than
        :data:`INTERVAL` seconds ago and not ``force``."""
        with self.lock:
            now = self.clock()
            if self.saved is None or not (force or now - self.last >= INTERVAL):
                return
            room = self.width() - 1  # the last column would wrap on some terminals
            # the cursor waits at the start: a line that a worker process writes to the same
            # terminal (which this process cannot put above) then covers the live line
            self.err.write("\r" + self.status()[:room].ljust(room) + "\r")
            self.err.flush()
            self.live, self.last = True, now

    def _clear(self) -> None:
        self.err.write("\r" + " " * (self.width() - 1) + "\r")
        self.live = False

    def __enter__(self) -> Progress:
        """On a terminal: take over ``sys.stdout`` and ``sys.stderr``, draw the live line and
        start the thread that redraws it."""
        if self.tty:
            with self.lock:
                self.saved = (sys.stdout, sys.stderr)
                sys.stdout = Above(self, self.out)
                sys.stderr = Above(self, self.err)
                self.refresh(force=True)
            if self.ticker:
                threading.Thread(target=self._tick, name="progress", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop the thread, give ``sys.stdout`` and ``sys.stderr`` back and clear the line."""
        self.stop.set()
        with self.lock:
            if self.saved is None:
                return
            for stream in (sys.stdout, sys.stderr):
                if isinstance(stream, Above):
                    stream.end_line()
            sys.stdout, sys.stderr = self.saved
            self.saved = None
            if self.live:
                self._clear()
                self.err.flush()

    def _tick(self) -> None:
        while not self.stop.wait(INTERVAL):
            self.refresh()


class Above:
    """A text stream whose complete lines go to ``stream`` through ``progress`` (above the
    live line); anything else is ``stream``'s."""

    def __init__(self, progress: Progress, stream: TextIO):
        self.progress, self.stream = progress, stream
        self.pending = ""

    def write(self, text: str) -> int:
        """Buffer ``text``; print each line it completes."""
        with self.progress.lock:
            *lines, self.pending = (self.pending + text).split("\n")
            for line in lines:
                self.progress.line(line, self.stream)
        return len(text)

    def flush(self) -> None:
        """The lines are written whole: nothing waits but a partial line."""
        self.stream.flush()

    def end_line(self) -> None:
        """Print what is left of a partial line."""
        if self.pending:
            self.write("\n")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def clock_time(seconds: float) -> str:
    """``seconds`` as ``m:ss`` (or ``h:mm:ss``)."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
