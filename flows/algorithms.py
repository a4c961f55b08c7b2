"""The algorithm table: each algorithm is gradient descent at a perturbed point ``theta + eps(theta)``.

SPEC §2. Adding a SAM variant means adding one :class:`Algorithm` to :data:`ALGORITHMS`.
Every perturbation receives ``grad L(theta)`` as a :class:`LossGradient` (a bounded direction
part and the log of the positive loss factor, so that neither rounding nor overflow touches
the direction) and the multiplicity of each parameter row (norms run over all parameters).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, NamedTuple

import numpy as np

from .signedlog import SignedLog, log_norm2


class LossGradient(NamedTuple):
    """``grad L = exp(log_c) * scaled`` with ``scaled = -G * prod_{k != l} w^(k)`` (signed-log).

    ``c`` (the mean ``|l'|``) is a positive scalar: it does not change the direction, and it is
    kept apart because ``log c`` is about ``-margin``, which may be ``-1e18`` or beyond.
    For a batch of points (arrays of shape ``(B, G, d)``), ``log_c`` has shape ``(B, 1, 1)``.
    """

    scaled: SignedLog
    log_c: float | np.ndarray


Perturbation = Callable[[LossGradient, np.ndarray, Mapping[str, float]], np.ndarray]


def _unit_direction(grad: LossGradient,
                    multiplicity: np.ndarray) -> tuple[np.ndarray, np.ndarray | float]:
    """``grad L / ||grad L||_2`` (0 where ``grad L = 0``) and ``log ||grad L||_2``.

    The norm runs over the last two axes (layer groups, weighted by their multiplicity, and
    coordinates); leading axes, if any, are a batch of parameter points.
    """
    log_abs = grad.scaled.log_abs
    weights = np.asarray(multiplicity, dtype=float)[:, None]
    log_norm = log_norm2(log_abs, weights, axis=(-2, -1))
    with np.errstate(invalid="ignore"):
        unit = np.where(np.isneginf(log_norm), 0.0,
                        grad.scaled.sign * np.exp(log_abs - log_norm))
    log_grad_norm = log_norm + grad.log_c
    if np.ndim(log_abs) == 2:
        return unit, float(log_grad_norm.reshape(()))
    return unit, log_grad_norm


def no_perturbation(grad: LossGradient, multiplicity: np.ndarray, hp: Mapping[str, float]) -> np.ndarray:
    """``eps = 0`` (gradient descent)."""
    return np.zeros_like(grad.scaled.log_abs)


def l2_perturbation(grad: LossGradient, multiplicity: np.ndarray, hp: Mapping[str, float]) -> np.ndarray:
    """``eps = rho grad L / ||grad L||_2`` (0 where ``grad L = 0``)."""
    unit, _ = _unit_direction(grad, multiplicity)
    return hp["rho"] * unit


def linf_perturbation(grad: LossGradient, multiplicity: np.ndarray, hp: Mapping[str, float]) -> np.ndarray:
    """``eps = rho sign(grad L)`` elementwise (``sign 0 = 0``)."""
    return hp["rho"] * grad.scaled.sign


def unnormalized_perturbation(grad: LossGradient, multiplicity: np.ndarray,
                              hp: Mapping[str, float]) -> np.ndarray:
    """``eps = rho grad L`` (USAM); may overflow, which the integrator reports."""
    with np.errstate(over="ignore"):
        return hp["rho"] * grad.scaled.sign * np.exp(grad.scaled.log_abs + grad.log_c)


def loss_equilibrated_perturbation(grad: LossGradient, multiplicity: np.ndarray,
                                   hp: Mapping[str, float]) -> np.ndarray:
    """LE-SAM: ``eps = rho_t grad L / ||grad L||``, ``rho_t = min(sigma / (||grad L|| + varrho), rho_max)``."""
    unit, log_norm = _unit_direction(grad, multiplicity)
    with np.errstate(over="ignore"):
        grad_norm = np.exp(log_norm)
    radius = np.minimum(hp["sigma"] / (grad_norm + hp["varrho"]), hp["rho_max"])
    return radius * unit


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
    "linf-sam": Algorithm(linf_perturbation, {"rho": None}, lambda hp: hp["rho"],
                          sign_discontinuous=True),
    "usam": Algorithm(unnormalized_perturbation, {"rho": None}, lambda hp: hp["rho"]),
    "le-sam": Algorithm(loss_equilibrated_perturbation,
                        {"sigma": None, "rho_max": None, "varrho": 1e-12},
                        lambda hp: hp["rho_max"]),
}


def get_algorithm(name: str) -> Algorithm:
    """Look ``name`` up in :data:`ALGORITHMS`; ``ValueError`` naming 'algorithm' if unknown."""
    try:
        return ALGORITHMS[name]
    except (KeyError, TypeError):
        raise ValueError(f"algorithm must be one of {sorted(ALGORITHMS)}, got {name!r}") from None


def _checked(key: str, value) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{key} must be a number, got {value!r}") from None
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"{key} must be finite and >= 0, got {value}")
    return value


def resolve_hyperparameters(name: str, given: Mapping[str, float | None]) -> dict[str, float]:
    """The hyper-parameters algorithm ``name`` reads, with defaults filled in.

    Every value given (used or not) must be finite and >= 0, so ``rho=-1`` is an error even
    for ``gd``; values the algorithm does not read are ignored, so one set of keyword
    arguments can drive a loop over algorithms.
    """
    algo = get_algorithm(name)
    checked = {k: _checked(k, v) for k, v in given.items() if v is not None}
    out: dict[str, float] = {}
    for key, default in algo.hyperparameters.items():
        value = checked.get(key, default)
        if value is None:
            raise ValueError(f"{key} is required for algorithm {name!r}")
        out[key] = float(value)
    return out
