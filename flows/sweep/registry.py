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
ENGINE_VERSION = "55"

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

    def describe(self, width: int | None = None) -> str:
        """Short label for progress output: ``kind(name=value, ...)``.

        Numbers show 4 significant digits, arrays and nested lists their shape (``X=<40x10>``),
        lists of more than 5 items their ends and length (``ratios=[0.08, …, 1.6] (18)``). With
        ``width``, a longer label is cut to ``width`` characters, ending in ``…``.
        """

        def brief(value) -> str:
            if isinstance(value, Schedule):
                value = value.spec()
            if isinstance(value, np.ndarray) and value.ndim == 0:
                value = value.item()
            if isinstance(value, (bool, np.bool_, str)) or value is None:
                return str(value)
            if isinstance(value, (float, np.floating)):
                return f"{value:.4g}"
            if isinstance(value, dict):
                return "{" + ", ".join(f"{k}: {brief(v)}" for k, v in value.items()) + "}"
            if not isinstance(value, (list, tuple, np.ndarray)):
                return str(value)
            nested = any(isinstance(v, (list, tuple, dict, np.ndarray)) for v in value)
            if nested or (isinstance(value, np.ndarray) and value.ndim > 1):
                try:
                    shape = np.shape(value)
                except ValueError:  # ragged
                    shape = (len(value),)
                return "<" + "x".join(map(str, shape)) + ">"
            if len(value) > 5:
                return f"[{brief(value[0])}, …, {brief(value[-1])}] ({len(value)})"
            return "[" + ", ".join(brief(v) for v in value) + "]"

        label = f"{self.kind}(" + ", ".join(f"{k}={brief(v)}" for k, v in self.params.items())
        label += ")"
        if width is not None and len(label) > width:
            return label[: max(width - 1, 0)] + "…"
        return label


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
#: The numba kernel groups a task of a kind may compile (``params -> names``; kinds without
#: one compile nothing): the groups of :data:`flows.compiled.warm.GROUPS`, ``'field'`` (the
#: compiled field at one point, which scipy's solvers call), ``'segment'`` (the compiled DOP853
#: loop and the quadrature), ``'sliding'``, ``'discrete'``.
KERNEL_GROUPS: dict[str, Callable[[dict], frozenset[str]]] = {}


def register(
    kind: str,
    fn: Callable[[dict], Result],
    cost: Callable[[dict], float] | None = None,
    keys: tuple[str, ...] = (),
    kernels: Callable[[dict], frozenset[str]] | None = None,
) -> None:
    """Add a task kind, with an optional cost heuristic, the arrays its results hold and the
    numba kernel groups its tasks may compile (:data:`KERNEL_GROUPS`; the runner starts one
    first compile of a group at a time, :mod:`flows.sweep.gate`).

    ``fn`` should be a module-level function: it is sent to worker processes by reference.
    """
    TASK_KINDS[kind] = fn
    if cost is not None:
        COST_ESTIMATES[kind] = cost
    if keys:
        RESULT_KEYS[kind] = tuple(keys)
    if kernels is not None:
        KERNEL_GROUPS[kind] = kernels


def kernel_groups(task: Task) -> frozenset[str]:
    """The kernel groups ``task`` may compile (:data:`KERNEL_GROUPS`; none if its kind names
    none or its heuristic fails)."""
    groups = KERNEL_GROUPS.get(task.kind)
    if groups is None:
        return frozenset()
    try:
        return frozenset(groups(task.params))
    except Exception:  # a heuristic must never stop a run
        return frozenset()


def flow_kernels(params: dict) -> frozenset[str]:
    """The kernel groups of a :func:`flows.simulate` run with these keywords: the field, the
    DOP853 loop unless another ``method`` is asked for, and the sliding kernels for
    l_inf-SAM."""
    groups = {"field"}
    if params.get("method", "DOP853") == "DOP853":
        groups.add("segment")
    if params.get("algorithm") == "linf-sam":
        groups.add("sliding")
    return frozenset(groups)


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
