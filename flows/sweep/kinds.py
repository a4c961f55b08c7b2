"""The engine's task kinds: ``'simulate'`` (:func:`flows.simulate`) and ``'iterate'``
(:func:`flows.iterate`), their parameters read from JSON and their results as arrays."""

from __future__ import annotations

import numpy as np

from ..algorithms import ALGORITHMS
from ..compiled import steps_compiled
from ..data import Dataset, single_example
from ..discrete import iterate
from ..integrator.driver import simulate
from ..results import ARRAY_NAMES
from ..schedules import from_spec
from .registry import Result, flow_kernels, register


def dataset_from(params: dict) -> tuple[Dataset, dict]:
    """Split ``mu`` or ``X``/``y`` (and ``task``: classification unless given) from the other
    parameters."""
    rest = dict(params)
    if "mu" in rest:
        return single_example(rest.pop("mu")), rest
    task = rest.pop("task", "classification")
    return Dataset(np.array(rest.pop("X")), np.array(rest.pop("y")), task=task), rest


#: The arrays of a ``'simulate'`` result: every field of the trajectory
#: (:meth:`flows.results.Trajectory.to_arrays`).
SIMULATE_KEYS = ARRAY_NAMES


def _schedules_from_specs(rest: dict) -> dict:
    """Task parameters with schedule specs (dicts) turned back into schedules."""
    return {
        k: from_spec(v) if isinstance(v, dict) and "schedule" in v else v for k, v in rest.items()
    }


def simulate_arguments(params: dict) -> tuple[Dataset, dict]:
    """The data and the keyword arguments of :func:`flows.simulate` from a task's JSON
    parameters (schedules from their specs, a list ``alpha`` as an array)."""
    data, rest = dataset_from(params)
    rest = _schedules_from_specs(rest)
    if isinstance(rest.get("alpha"), list):
        rest["alpha"] = np.array(rest["alpha"])
    return data, rest


def run_simulate(params: dict) -> Result:
    """A :func:`flows.simulate` run as arrays (:meth:`flows.results.Trajectory.to_arrays`;
    :meth:`~flows.results.Trajectory.from_arrays` gives the trajectory back)."""
    data, rest = simulate_arguments(params)
    return simulate(data, **rest).to_arrays()


def run_iterate(params: dict) -> Result:
    """A :func:`flows.iterate` run as arrays."""
    data, rest = dataset_from(params)
    run = iterate(data, **_schedules_from_specs(rest))
    return {
        "t": run.t,
        "beta": run.beta,
        "loss": run.loss,
        "status": np.array(run.status),
        "message": np.array(run.message),
    }


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
    """Rough seconds of an ``iterate`` task: per step on one example, 10 us in the compiled
    loop (an algorithm with a compiled twin, no schedule), 0.2 ms in numpy's."""
    algorithm = ALGORITHMS.get(params.get("algorithm", "l2-sam"))
    scheduled = any(isinstance(v, dict) for v in params.values())
    per_step = 2.2e-4 if algorithm is None or not steps_compiled(algorithm) or scheduled else 1e-5
    return per_step * float(params.get("steps", 1000)) * (1.0 + _samples(params) / 20.0)


def iterate_kernels(params: dict) -> frozenset[str]:
    """``'discrete'`` where the run may take the compiled loop of ``iterate``."""
    algorithm = ALGORITHMS.get(params.get("algorithm", "l2-sam"))
    compiled = algorithm is not None and steps_compiled(algorithm)
    return frozenset({"discrete"} if compiled else ())


register("simulate", run_simulate, simulate_cost, SIMULATE_KEYS, kernels=flow_kernels)
register(
    "iterate",
    run_iterate,
    iterate_cost,
    ("t", "beta", "loss", "status", "message"),
    iterate_kernels,
)
