"""Tasks (one expensive computation each) and their on-disk cache.

A :class:`Task` is a kind from :data:`TASK_KINDS` plus JSON-able parameters; its result is a
dict of numpy arrays, stored as ``<dir>/<kind>-<hash>.npz`` where the hash covers the kind,
the parameters and :data:`ENGINE_VERSION` (not the optional ``cost`` estimate).

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

import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .data import Dataset, single_example
from .discrete import iterate
from .integrate import simulate
from .schedules import Schedule, from_spec

fcntl: Any
try:  # POSIX; elsewhere tasks are not locked (two sweeps may then compute a task twice)
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

#: Bump when a change to the engine changes numbers: every cached result is then stale.
ENGINE_VERSION = "11"

Result = dict[str, np.ndarray]

#: array names reserved in the cache files (bookkeeping, not part of a result)
KEYS_ENTRY = "__keys__"
SECONDS_ENTRY = "__seconds__"
#: measured compute seconds by cost key, in the cache directory (scheduling hint)
COSTS_FILE = "costs.json"


@dataclass(frozen=True)
class Task:
    """One cached computation: ``TASK_KINDS[kind](**params)``.

    ``cost`` is an optional estimate of the compute time (any unit, larger = slower) used only
    to schedule the most expensive tasks first; it is not part of the key or of equality.
    """

    kind: str
    params: dict = field(hash=False)
    cost: float | None = field(default=None, compare=False)

    def key(self) -> str:
        """Stable hash of kind, parameters and engine version."""
        text = json.dumps(
            {"kind": self.kind, "params": self.params, "engine": ENGINE_VERSION},
            sort_keys=True,
            default=_json_value,
        )
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    def cost_key(self) -> str:
        """Hash of kind and parameters only: a measured compute time stays a good estimate
        across engine versions."""
        text = json.dumps(
            {"kind": self.kind, "params": self.params}, sort_keys=True, default=_json_value
        )
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    def describe(self) -> str:
        """Short human-readable label for progress output."""
        shown = {k: v for k, v in self.params.items() if k not in ("X", "y")}
        return f"{self.kind}(" + ", ".join(f"{k}={v}" for k, v in shown.items()) + ")"


def dataset_from(params: dict) -> tuple[Dataset, dict]:
    """Split ``mu`` or ``X``/``y`` from the other parameters."""
    rest = dict(params)
    if "mu" in rest:
        return single_example(rest.pop("mu")), rest
    return Dataset(np.array(rest.pop("X")), np.array(rest.pop("y"))), rest


SIMULATE_KEYS = (
    "t",
    "tau",
    "log_t_original",
    "loss",
    "log_abs_beta",
    "sign_beta",
    "status",
    "message",
    "event_tau",
    "event_kind",
    "event_j",
)


def _json_value(value):
    """JSON form of a task parameter that ``json`` does not know: a named schedule by its spec,
    numbers as floats; an arbitrary callable cannot be part of a cache key."""
    if isinstance(value, Schedule):
        return value.spec()
    if callable(value):
        raise ValueError(
            f"a task parameter cannot be an arbitrary callable ({value!r}): only "
            "named schedules (flows.schedules) are cached"
        )
    return float(value)


def _schedules_from_specs(rest: dict) -> dict:
    """Task parameters with schedule specs (dicts) turned back into schedules."""
    return {
        k: from_spec(v) if isinstance(v, dict) and "schedule" in v else v for k, v in rest.items()
    }


def run_simulate(params: dict) -> Result:
    """A :func:`flows.simulate` run as arrays (events as parallel arrays)."""
    data, rest = dataset_from(params)
    rest = _schedules_from_specs(rest)
    if isinstance(rest.get("alpha"), list):
        rest["alpha"] = np.array(rest["alpha"])
    traj = simulate(data, **rest)
    return {
        "t": traj.t,
        "tau": traj.tau,
        "log_t_original": traj.log_t_original,
        "loss": traj.loss,
        "log_abs_beta": traj.log_abs_beta,
        "sign_beta": traj.sign_beta,
        "status": np.array(traj.status),
        "message": np.array(traj.message),
        "event_tau": np.array([e.tau for e in traj.events]),
        "event_kind": np.array([e.kind for e in traj.events], dtype=str),
        "event_j": np.array([-1 if e.entry is None else e.entry[1] for e in traj.events]),
    }


def run_iterate(params: dict) -> Result:
    """A :func:`flows.iterate` run as arrays."""
    data, rest = dataset_from(params)
    run = iterate(data, **_schedules_from_specs(rest))
    return {"t": run.t, "beta": run.beta, "loss": run.loss, "status": np.array(run.status)}


def _samples(params: dict) -> float:
    """Number of examples of a task's data (1 for ``mu``)."""
    return 1.0 if "mu" in params else float(len(params.get("y", ())) or 1)


def simulate_cost(params: dict) -> float:
    """Rough seconds of a ``simulate`` task (measured: 0.1 to 3 s, hardly a function of the
    horizon; more output samples, more examples and the original-time quadrature cost more)."""
    quadrature = 1.5 if params.get("original_time", True) else 1.0
    return (
        0.5
        * (1.0 + params.get("n_points", 201) / 1000.0)
        * quadrature
        * (1.0 + _samples(params) / 20.0)
    )


def iterate_cost(params: dict) -> float:
    """Rough seconds of an ``iterate`` task: 0.2 ms a step on one example."""
    return 2.2e-4 * float(params.get("steps", 1000)) * (1.0 + _samples(params) / 20.0)


#: Task kinds; other modules register more (e.g. figure computations) with :func:`register`.
TASK_KINDS: dict[str, Callable[[dict], Result]] = {"simulate": run_simulate, "iterate": run_iterate}
#: Cost heuristics by kind (``params -> float``); kinds without one cost 1.
COST_ESTIMATES: dict[str, Callable[[dict], float]] = {
    "simulate": simulate_cost,
    "iterate": iterate_cost,
}
#: Arrays every result of a kind must hold (checked when a cached file is read).
RESULT_KEYS: dict[str, tuple[str, ...]] = {
    "simulate": SIMULATE_KEYS,
    "iterate": ("t", "beta", "loss", "status"),
}


def register(
    kind: str,
    fn: Callable[[dict], Result],
    cost: Callable[[dict], float] | None = None,
    keys: tuple[str, ...] = (),
) -> None:
    """Add a task kind, with an optional cost heuristic and the arrays its results hold.

    ``fn`` should be a module-level function: it is sent to worker processes by reference.
    """
    TASK_KINDS[kind] = fn
    if cost is not None:
        COST_ESTIMATES[kind] = cost
    if keys:
        RESULT_KEYS[kind] = tuple(keys)


def estimated_cost(task: Task, measured: dict[str, float] | None = None) -> float:
    """Seconds measured on an earlier run (``measured``, by cost key), else ``task.cost`` if
    given, else the kind's heuristic, else 1 (rough seconds)."""
    if measured and task.cost_key() in measured:
        return measured[task.cost_key()]
    if task.cost is not None:
        return float(task.cost)
    estimate = COST_ESTIMATES.get(task.kind)
    if estimate is None:
        return 1.0
    try:
        return float(estimate(task.params))
    except Exception:  # a heuristic must never stop a run
        return 1.0


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


def compute(task: Task) -> Result:
    """Run one task (no cache)."""
    return TASK_KINDS[task.kind](task.params)
