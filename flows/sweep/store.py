"""The on-disk cache of task results (:mod:`flows.sweep.registry`): ``<dir>/<kind>-<hash>.npz``.

* Writes are atomic (temporary file in the same folder, then :func:`os.replace`): an
  interrupted run leaves either a complete file or none, and a rerun recomputes what is missing.
* A file that cannot be read back whole (truncated, not a zip, missing arrays) is reported on
  stderr as a warning and treated as missing: the task is recomputed, never fatal.
* :meth:`Cache.lock` is a per-task lock (``<kind>-<hash>.lock``, ``fcntl.flock``), so that two
  processes sharing a cache compute a task once: the second waits for the first and reuses its
  file. The kernel drops the lock when its holder dies, so a killed process never leaves a
  task locked (its lock file stays behind, harmless).
* ``costs.json`` keeps the measured compute seconds of every task (by kind and parameters,
  whatever the engine version): the next run schedules the slowest first from them.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from .registry import RESULT_KEYS, Result, Task

fcntl: Any
try:  # POSIX; elsewhere tasks are not locked (two sweeps may then compute a task twice)
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None


#: array names reserved in the cache files (bookkeeping, not part of a result)
KEYS_ENTRY = "__keys__"
SECONDS_ENTRY = "__seconds__"
#: measured compute seconds by cost key, in the cache directory (scheduling hint)
COSTS_FILE = "costs.json"


def warn(message: str) -> None:
    """One warning line on stderr."""
    print(f"warning: {message}", file=sys.stderr, flush=True)


class Cache:
    """Directory of task results; ``None`` directory means no caching (always compute)."""

    def __init__(self, directory: str | Path | None):
        self.directory = None if directory is None else Path(directory)

    def path(self, task: Task) -> Path | None:
        """Where ``task``'s result lives."""
        return None if self.directory is None else self.directory / f"{task.kind}-{task.key()}.npz"

    def load(self, task: Task, newer_than: float | None = None) -> Result | None:
        """The cached result, or None if missing (or older than the time ``newer_than``).

        A file that cannot be read whole is reported with :func:`warn` and gives None.
        """
        path = self.path(task)
        if path is None:
            return None
        try:
            if newer_than is not None and path.stat().st_mtime < newer_than:
                return None
            with np.load(path, allow_pickle=False) as f:
                result = {k: f[k] for k in f.files}  # reads (and CRC-checks) every array
        except FileNotFoundError:
            return None
        except Exception as exc:  # noqa: BLE001 - BadZipFile, OSError, ValueError, EOFError...
            warn(f"unreadable cache file {path} ({type(exc).__name__}: {exc}); recomputing")
            return None
        listed = [str(k) for k in result.pop(KEYS_ENTRY, np.array([], dtype=str)).ravel()]
        result.pop(SECONDS_ENTRY, None)
        missing = sorted((set(listed) | set(RESULT_KEYS.get(task.kind, ()))) - set(result))
        if missing:
            warn(f"cache file {path} lacks {', '.join(missing)}; recomputing")
            return None
        return result

    def measured_costs(self) -> dict[str, float]:
        """Compute seconds of earlier runs by :meth:`Task.cost_key` (``costs.json``; a hint:
        empty if missing or unreadable)."""
        if self.directory is None:
            return {}
        try:
            data = json.loads((self.directory / COSTS_FILE).read_text())
            return {str(k): float(v) for k, v in data.items()}
        except Exception:  # noqa: BLE001 - a hint only
            return {}

    def record_costs(self, seconds: dict[str, float]) -> None:
        """Merge measured seconds (by cost key) into ``costs.json``, atomically (two sweeps
        writing at once may lose each other's entries: it is a hint)."""
        if self.directory is None or not seconds:
            return
        merged = {**self.measured_costs(), **seconds}
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".costs.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(merged, f, sort_keys=True, indent=0)
            os.replace(tmp, self.directory / COSTS_FILE)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def store(self, task: Task, result: Result, seconds: float | None = None) -> None:
        """Write atomically: temporary file in the same directory, then rename."""
        path = self.path(task)
        if path is None:
            return
        if any(k.startswith("__") for k in result):
            raise ValueError(f"result names starting with '__' are reserved: {sorted(result)}")
        extra = {KEYS_ENTRY: np.array(sorted(result), dtype=str)}
        if seconds is not None:
            extra[SECONDS_ENTRY] = np.array(float(seconds))
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp.npz")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **{**result, **extra})  # type: ignore[arg-type]
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @contextmanager
    def lock(self, task: Task, block: bool = True) -> Iterator[bool]:
        """Hold ``task``'s lock for the ``with`` block; yields False (at once) if another
        process holds it and ``block`` is False. Without a directory (or without ``fcntl``)
        there is nothing to lock and it yields True."""
        path = self.path(task)
        if path is None or fcntl is None:
            yield True
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()} {time.time():.0f}\n".encode())
            yield True
        finally:
            os.close(fd)  # releases the flock
