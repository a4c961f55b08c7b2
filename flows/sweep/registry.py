"""The task registry: a :class:`Task` is a kind from :data:`TASK_KINDS` plus JSON-able
parameters; its result is a dict of numpy arrays (:data:`Result`).

A kind is registered with :func:`register` (the engine's ``simulate`` and ``iterate`` in
:mod:`flows.sweep.kinds`; figures and analyses add their own). A task's key hashes the kind, the
parameters and :data:`ENGINE_VERSION` (not the optional ``cost`` estimate), so that a change of
the engine's numbers makes every cached result stale (:mod:`flows.sweep.store`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..schedules import Schedule

#: Bump when a change to the engine changes numbers: every cached result is then stale.
ENGINE_VERSION = "11"

Result = dict[str, np.ndarray]


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


#: Task kinds by name (:func:`register` adds one).
TASK_KINDS: dict[str, Callable[[dict], Result]] = {}
#: Cost heuristics by kind (``params -> float``); kinds without one cost 1.
COST_ESTIMATES: dict[str, Callable[[dict], float]] = {}
#: Arrays every result of a kind must hold (checked when a cached file is read).
RESULT_KEYS: dict[str, tuple[str, ...]] = {}


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


def compute(task: Task) -> Result:
    """Run one task (no cache)."""
    return TASK_KINDS[task.kind](task.params)
