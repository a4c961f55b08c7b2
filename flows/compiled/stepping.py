"""l_inf-SAM's own steps on the compiled backend (extra ``fast``): the loop of
:func:`flows.integrator.own_steps.own_steps` in one compiled call
(:mod:`flows.compiled._stepping_kernels`), for a loss with a compiled twin."""

from __future__ import annotations

import numpy as np

from ..integrator import own_steps as numpy_steps
from ..model import Loss
from . import announce_compiles


def own_steps(
    theta: np.ndarray,
    s: float,
    tau: float,
    s_end: float,
    original: bool,
    h: float,
    max_steps: int,
    grid: np.ndarray,
    features: np.ndarray,
    loss: Loss,
    rho: float,
    blowup_tol: float,
) -> numpy_steps.Steps | None:
    """:func:`flows.integrator.own_steps.own_steps` compiled; None where the loss has no
    compiled twin (the numpy loop then runs)."""
    if loss.compiled_id is None:
        return None
    announce_compiles()
    from . import _stepping_kernels

    theta = np.array(theta, dtype=float)
    grid = np.ascontiguousarray(grid, dtype=float)
    kept_theta = np.empty((grid.size,) + theta.shape)
    kept_tau, kept_log = np.empty(grid.size), np.empty(grid.size)
    size = numpy_steps.CHECKPOINTS
    check = (np.empty(size), np.empty((size, theta.shape[1])), np.empty(size), np.empty(size))
    status, steps, s, tau, log_elapsed, left, kept, checkpoints = _stepping_kernels.own_steps(
        theta, float(s), float(tau), float(s_end), bool(original), float(h), int(max_steps),
        grid, np.ascontiguousarray(features, dtype=float), int(loss.compiled_id), float(rho),
        float(blowup_tol), numpy_steps.CHECKPOINT_SPACING, kept_theta, kept_tau, kept_log, check,
    )  # fmt: skip
    return numpy_steps.Steps(int(status), int(steps), theta, float(s), float(tau),
                             float(log_elapsed), float(left), int(kept), kept_theta, kept_tau,
                             kept_log, int(checkpoints), *check)  # fmt: skip
