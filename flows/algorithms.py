"""The algorithm table: each algorithm is gradient descent at a perturbed point ``theta + eps(theta)``.

``docs/theory.md`` (algorithms). Adding a SAM variant means adding one :class:`Algorithm` to
:data:`ALGORITHMS`. Every perturbation receives ``grad L(theta)`` summarised as a
:class:`GradientSummary` (its unit direction, its signs and the log of its norm, so that
neither rounding nor overflow touches the direction: the norm may be ``exp(-1e18)``); the
field implementations (:mod:`flows.field`, :mod:`flows.fused`) build the summary.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np


class GradientSummary(NamedTuple):
    """``grad L(theta)`` as the perturbations need it.

    Attributes
    ----------
    unit : ``grad L / ||grad L||_2`` (shape (..., G, d); the norm over all L*d parameters,
        each group counted with its multiplicity; 0 where ``grad L = 0``).
    sign : ``sign(grad L)`` (with a frozen sign pattern for l_inf-SAM, see
        :func:`flows.field.perturbed_point`).
    log_norm : ``log ||grad L||_2`` (shape (..., 1, 1) or a float; -inf where ``grad L = 0``).
    multiplicity : (G,) how many identical layers each row stands for (rows of the balanced
        reduced system stand for L layers).
    """

    unit: np.ndarray
    sign: np.ndarray
    log_norm: np.ndarray | float
    multiplicity: np.ndarray


Perturbation = Callable[[GradientSummary, Mapping[str, float]], np.ndarray]


def no_perturbation(grad: GradientSummary, hp: Mapping[str, float]) -> np.ndarray:
    """``eps = 0`` (gradient descent)."""
    return np.zeros_like(grad.unit)


def l2_perturbation(grad: GradientSummary, hp: Mapping[str, float]) -> np.ndarray:
    """``eps = rho grad L / ||grad L||_2`` (0 where ``grad L = 0``)."""
    return hp["rho"] * grad.unit


def linf_perturbation(grad: GradientSummary, hp: Mapping[str, float]) -> np.ndarray:
    """``eps = rho sign(grad L)`` elementwise (``sign 0 = 0``)."""
    return hp["rho"] * grad.sign


def unnormalized_perturbation(grad: GradientSummary, hp: Mapping[str, float]) -> np.ndarray:
    """``eps = rho grad L`` (USAM); may overflow, which the integrator reports."""
    with np.errstate(over="ignore", invalid="ignore"):
        return hp["rho"] * np.exp(grad.log_norm) * grad.unit


def loss_equilibrated_perturbation(grad: GradientSummary, hp: Mapping[str, float]) -> np.ndarray:
    """LE-SAM: ``eps = rho_t grad L / ||grad L||``, ``rho_t = min(sigma / (||grad L|| + varrho), rho_max)``."""
    with np.errstate(over="ignore"):
        grad_norm = np.exp(grad.log_norm)
    return np.minimum(hp["sigma"] / (grad_norm + hp["varrho"]), hp["rho_max"]) * grad.unit


@dataclass(frozen=True)
class Algorithm:
    """One entry of the table.

    Attributes
    ----------
    perturb : ``eps(theta)`` from ``grad L(theta)``.
    hyperparameters : names (and defaults, None = required) of what ``perturb`` reads.
    radius : the size of the perturbation, for the collapse threshold (0: never collapses).
    sign_discontinuous : the field jumps where a gradient entry changes sign (l_inf-SAM);
        the integrator then locates zero crossings and sliding.
    """

    perturb: Perturbation
    hyperparameters: Mapping[str, float | None]
    radius: Callable[[Mapping[str, float]], float]
    sign_discontinuous: bool = False

    @property
    def perturbs(self) -> bool:
        """False for plain gradient descent (``eps = 0``): no perturbation to evaluate."""
        return self.perturb is not no_perturbation


ALGORITHMS: dict[str, Algorithm] = {
    "gd": Algorithm(no_perturbation, {}, lambda hp: 0.0),
    "l2-sam": Algorithm(l2_perturbation, {"rho": None}, lambda hp: hp["rho"]),
    "linf-sam": Algorithm(
        linf_perturbation, {"rho": None}, lambda hp: hp["rho"], sign_discontinuous=True
    ),
    "usam": Algorithm(unnormalized_perturbation, {"rho": None}, lambda hp: hp["rho"]),
    "le-sam": Algorithm(
        loss_equilibrated_perturbation,
        {"sigma": None, "rho_max": None, "varrho": 1e-12},
        lambda hp: hp["rho_max"],
    ),
}


def get_algorithm(name: str) -> Algorithm:
    """Look ``name`` up in :data:`ALGORITHMS`; ``ValueError`` naming 'algorithm' if unknown."""
    try:
        return ALGORITHMS[name]
    except (KeyError, TypeError):
        raise ValueError(f"algorithm must be one of {sorted(ALGORITHMS)}, got {name!r}") from None


#: Hyper-parameters that may be schedules (callables of the clock time, :mod:`flows.schedules`).
SCHEDULABLE = ("rho", "sigma", "rho_max")


def _checked(key: str, value):
    """A finite number >= 0, or (for :data:`SCHEDULABLE` keys) a callable."""
    if callable(value):
        if key not in SCHEDULABLE:
            raise ValueError(
                f"{key} must be a number (only {', '.join(SCHEDULABLE)} may be schedules)"
            )
        return value
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{key} must be a number, got {value!r}") from None
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"{key} must be finite and >= 0, got {value}")
    return value


def resolve_hyperparameters(name: str, given: Mapping[str, object]) -> dict:
    """The hyper-parameters algorithm ``name`` reads, with defaults filled in.

    Every value given (used or not) must be finite and >= 0 (or a schedule, for ``rho``,
    ``sigma``, ``rho_max``), so ``rho=-1`` is an error even for ``gd``; values the algorithm
    does not read are ignored, so one set of keyword arguments can drive a loop over
    algorithms.
    """
    algo = get_algorithm(name)
    checked = {k: _checked(k, v) for k, v in given.items() if v is not None}
    out: dict = {}
    for key, default in algo.hyperparameters.items():
        value = checked.get(key, default)
        if value is None:
            raise ValueError(f"{key} is required for algorithm {name!r}")
        out[key] = value if callable(value) else float(value)
    return out


def is_scheduled(hp: Mapping[str, object]) -> bool:
    """Whether any hyper-parameter is a schedule."""
    return any(callable(v) for v in hp.values())


def _scheduled_value(key: str, schedule: Callable, time: float) -> float:
    """``schedule(time)`` as a float, checked finite and >= 0."""
    value = float(schedule(time))
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(
            f"the schedule of {key} must return finite numbers >= 0, got {value} at time {time}"
        )
    return value


def hyperparameters_at(hp: Mapping[str, object], time) -> dict:
    """The values at clock time ``time`` (a float, or an array for a batch of points, shaped
    to broadcast against the parameters, e.g. (B, 1, 1)). A schedule must return finite
    numbers >= 0 (``ValueError`` naming the hyper-parameter otherwise)."""
    if isinstance(time, (int, float)):
        return {
            key: _scheduled_value(key, value, float(time)) if callable(value) else value
            for key, value in hp.items()
        }
    out = {}
    for key, value in hp.items():
        if not callable(value):
            out[key] = value
            continue
        t = np.asarray(time, dtype=float)
        try:
            v = np.asarray(value(t), dtype=float)
            if v.shape != t.shape:
                raise ValueError
        except (TypeError, ValueError):  # a scalar-only callable: one call per time
            v = np.array([float(value(x)) for x in t.ravel()]).reshape(t.shape)
        if not (np.all(np.isfinite(v)) and np.all(v >= 0)):
            raise ValueError(
                f"the schedule of {key} must return finite numbers >= 0, got {v} at time {t}"
            )
        out[key] = float(v) if v.ndim == 0 else v
    return out
