"""The compiled loop of :func:`flows.iterate` (extra ``fast``): many steps per compiled call.

Where it applies (:func:`stepper`: an algorithm with a compiled perturbation, a loss with a
compiled twin, a constant step size and constant hyper-parameters), :class:`CompiledSteps`
runs the steps of :func:`flows.discrete.iterate` in :func:`flows.compiled._discrete_kernels.run`
and records the iterates it is asked to keep. The kernel computes only where the numpy float
path holds and keeps only iterates that are representable without evaluating the loss; at any
other step it hands back, and the Python loop of :mod:`flows.discrete` takes that step. The
tests hold both loops to 1e-11 relative in ``theta``.
"""

from __future__ import annotations

import numpy as np

from ..algorithms import Algorithm
from ..field import Problem
from ..fused import FLOAT_RANGE
from ..schedules import Schedule, constant_values
from . import announce_compiles, require

#: The perturbations (``compiled_id``) the step kernels apply: GD, l2-SAM, USAM, LE-SAM,
#: l_inf-SAM, ASAM and the official LE-SAM.
STEP_IDS = (0, 1, 2, 3, 4, 5, 6)
#: Those the batched kernel of :func:`flows.iterate_many` applies
#: (:mod:`flows.compiled._many_kernels`); the others' runs take the single call's kernel each.
BATCHED_IDS = (0, 1, 2, 3, 4)
#: The perturbations the per-example kernel applies to each example's gradient (l2, unnormalised).
PER_EXAMPLE_IDS = (1, 2)
#: Iterates recorded per compiled call (a run that records more takes several calls).
CAPACITY = 1024


class CompiledSteps:
    """Advances an ``iterate`` run through compiled calls (see the module docstring)."""

    def __init__(self, problem: Problem, eta: float, momentum: float, weight_decay: float,
                 hyperparameters: np.ndarray, loss_limit: float):  # fmt: skip
        require()
        announce_compiles()
        from . import _discrete_kernels

        self.kernels = _discrete_kernels
        loss_id, algorithm_id = problem.loss.compiled_id, problem.algorithm.compiled_id
        if loss_id is None or algorithm_id is None:
            raise ValueError("the compiled loop needs an algorithm and a loss with compiled twins")
        data = problem.data
        offsets = np.zeros(data.n) if data.offsets is None else np.array(data.offsets, float)
        self.problem = (
            np.ascontiguousarray(data.signed_features, dtype=float),
            offsets,
            loss_id,
            algorithm_id,
            bool(problem.algorithm.per_example),
            hyperparameters,
            float(eta),
            float(momentum),
            float(weight_decay),
            FLOAT_RANGE,
            float(loss_limit),
        )

    def advance(
        self,
        theta: np.ndarray,
        buffer: np.ndarray | None,
        k: int,
        last: int,
        record_every: int,
        kept_steps: list[int],
        kept: list[np.ndarray],
    ) -> tuple[int, np.ndarray, np.ndarray | None]:
        """Steps from ``k`` (iterate ``theta``, momentum buffer ``buffer``) towards ``last``,
        appending the recorded steps and iterates; ``(k, theta, buffer)`` after the last step
        taken (``k < last``: step ``k + 1`` needs the Python loop)."""
        theta = np.array(theta, dtype=float)
        started = buffer is not None
        buffer = np.zeros_like(theta) if buffer is None else np.array(buffer, dtype=float)
        to_record = last // record_every - k // record_every + (last % record_every != 0)
        capacity = min(CAPACITY, max(to_record, 1))
        store = np.empty((capacity,) + theta.shape)
        steps = np.empty(capacity, dtype=np.int64)
        while True:
            status, k, recorded, started = self.kernels.run(
                theta, buffer, started, k, last, record_every, self.problem, store, steps
            )
            kept_steps.extend(int(s) for s in steps[:recorded])
            kept.extend(store[i].copy() for i in range(recorded))
            if status == self.kernels.HANDED_BACK or k == last:
                return k, theta, buffer if started else None


def steps_compiled(algorithm: Algorithm) -> bool:
    """Whether the step kernels have ``algorithm``'s perturbation (:data:`STEP_IDS`)."""
    return algorithm.compiled_id in STEP_IDS


def stepper(problem: Problem, eta, momentum: float, weight_decay: float,
            loss_limit: float) -> CompiledSteps | None:  # fmt: skip
    """The compiled loop for this run, or None where it does not apply (see the module
    docstring)."""
    algorithm = problem.algorithm
    if not steps_compiled(algorithm) or problem.loss.compiled_id is None:
        return None
    if algorithm.per_example and algorithm.compiled_id not in PER_EXAMPLE_IDS:
        return None
    if isinstance(eta, Schedule):
        if eta.name != "constant":
            return None
        eta = eta.maximum
    values = constant_values(problem.hyperparameters, problem.algorithm.names)
    if values is None:
        return None
    return CompiledSteps(problem, float(eta), momentum, weight_decay, values, loss_limit)
