"""Tasks (one expensive computation each) and their on-disk cache.

A :class:`Task` is a kind from :data:`TASK_KINDS` plus JSON-able parameters; its result is a
dict of numpy arrays, stored as ``<dir>/<kind>-<hash>.npz`` where the hash covers the kind,
the parameters and :data:`ENGINE_VERSION`. Files are written to a temporary name and renamed,
so an interrupted run leaves either a complete file or none, and a rerun recomputes only what
is missing.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .data import Dataset, single_example
from .discrete import iterate
from .integrate import simulate

#: Bump when a change to the engine changes numbers: every cached result is then stale.
ENGINE_VERSION = "2"

Result = dict[str, np.ndarray]


@dataclass(frozen=True)
class Task:
    """One cached computation: ``TASK_KINDS[kind](**params)``."""

    kind: str
    params: dict = field(hash=False)

    def key(self) -> str:
        """Stable hash of kind, parameters and engine version."""
        text = json.dumps({"kind": self.kind, "params": self.params, "engine": ENGINE_VERSION},
                          sort_keys=True, default=float)
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


def run_simulate(params: dict) -> Result:
    """A :func:`flows.simulate` run as arrays (events as parallel arrays)."""
    data, rest = dataset_from(params)
    if isinstance(rest.get("alpha"), list):
        rest["alpha"] = np.array(rest["alpha"])
    traj = simulate(data, **rest)
    return {"t": traj.t, "tau": traj.tau, "log_t_original": traj.log_t_original,
            "loss": traj.loss, "log_abs_beta": traj.log_abs_beta, "sign_beta": traj.sign_beta,
            "status": np.array(traj.status), "message": np.array(traj.message),
            "event_tau": np.array([e.tau for e in traj.events]),
            "event_kind": np.array([e.kind for e in traj.events], dtype=str),
            "event_j": np.array([-1 if e.entry is None else e.entry[1] for e in traj.events])}


def run_iterate(params: dict) -> Result:
    """A :func:`flows.iterate` run as arrays."""
    data, rest = dataset_from(params)
    run = iterate(data, **rest)
    return {"t": run.t, "beta": run.beta, "loss": run.loss, "status": np.array(run.status)}


#: Task kinds; other modules register more (e.g. analysis computations) with :func:`register`.
TASK_KINDS: dict[str, Callable[[dict], Result]] = {"simulate": run_simulate,
                                                   "iterate": run_iterate}


def register(kind: str, fn: Callable[[dict], Result]) -> None:
    """Add a task kind."""
    TASK_KINDS[kind] = fn


class Cache:
    """Directory of task results; ``None`` directory means no caching (always compute)."""

    def __init__(self, directory: str | Path | None):
        self.directory = None if directory is None else Path(directory)

    def path(self, task: Task) -> Path | None:
        """Where ``task``'s result lives."""
        return None if self.directory is None else self.directory / f"{task.kind}-{task.key()}.npz"

    def load(self, task: Task) -> Result | None:
        """The cached result, or None (missing or unreadable)."""
        path = self.path(task)
        if path is None or not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as f:
                return {k: f[k] for k in f.files}
        except (OSError, ValueError, EOFError):
            return None

    def store(self, task: Task, result: Result) -> None:
        """Write atomically: temporary file in the same directory, then rename."""
        path = self.path(task)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp.npz")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **result)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def compute(task: Task) -> Result:
    """Run one task (no cache)."""
    return TASK_KINDS[task.kind](task.params)
