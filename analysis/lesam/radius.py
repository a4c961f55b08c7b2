"""LE-SAM's effective radius and the scales that match the methods at the start.

LE-SAM ("fix the loss, not the radius") perturbs by ``eps = rho_t grad L / ||grad L||`` with

    rho_t = min(sigma(t) / (||grad L(theta(t))||_2 + varrho), rho_max),

so that the first-order loss increase ``eps . grad L = rho_t ||grad L||`` equals the budget
``sigma`` until the cap ``rho_max`` binds. USAM perturbs by ``eps = rho grad L`` (radius
``rho ||grad L||``).
"""

from __future__ import annotations

import numpy as np

from flows.algorithms import hyperparameters_at
from flows.checks import integer, real
from flows.data import Dataset
from flows.model import LOSSES, as_theta, loss_for, loss_gradient

from .._checks import numeric_array

__all__ = [
    "OFFICIAL_EPS",
    "VARRHO",
    "initial_gradient_norm",
    "lesam_radius",
    "official_lesam_size",
    "schedule_values",
]

#: LE-SAM's default stabiliser ``varrho``.
VARRHO = 1e-12
#: The official optimizer's ``eps`` (inside and outside its square root).
OFFICIAL_EPS = 1e-12


def _nonnegative(value, name: str) -> np.ndarray:
    arr = numeric_array(value, name)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
    return arr


def _broadcastable(log_grad_norm: np.ndarray, **arrays: np.ndarray) -> None:
    """``ValueError`` naming the first of ``arrays`` whose shape does not broadcast against
    ``log_grad_norm``'s."""
    for name, arr in arrays.items():
        try:
            np.broadcast_shapes(log_grad_norm.shape, arr.shape)
        except ValueError:
            raise ValueError(
                f"{name} must broadcast against log_grad_norm: shapes {arr.shape} and "
                f"{log_grad_norm.shape}"
            ) from None


def lesam_radius(log_grad_norm, sigma, rho_max, varrho: float = VARRHO) -> np.ndarray:
    """``rho_t = min(sigma / (||grad L|| + varrho), rho_max)`` from ``log ||grad L||``.

    ``log_grad_norm`` is an array without NaN (``-inf``: a zero gradient, ``+inf``: beyond
    float64, radius 0); ``sigma`` and ``rho_max`` (finite, >= 0) broadcast against it;
    ``varrho`` finite >= 0. ``sigma = 0`` gives 0 (also where ``||grad L|| + varrho = 0``).
    """
    lg = numeric_array(log_grad_norm, "log_grad_norm")
    if np.any(np.isnan(lg)):
        raise ValueError("log_grad_norm must not contain NaN")
    sigma = _nonnegative(sigma, "sigma")
    rho_max = _nonnegative(rho_max, "rho_max")
    _broadcastable(lg, sigma=sigma, rho_max=rho_max)
    varrho = real(varrho, "varrho", low=0.0)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        denominator = np.exp(lg) + varrho
        ratio = np.where(sigma == 0, 0.0, sigma / denominator)
    return np.minimum(ratio, rho_max)


def official_lesam_size(log_grad_norm, sigma, rho_max, eps: float = OFFICIAL_EPS) -> np.ndarray:
    """``||eps||`` of the official LE-SAM step (non-adaptive, ``flows.algorithms.
    official_lesam_perturbation``) from ``log ||grad L||``:

    ``rho_t ||grad L|| / (N + e)``, ``N = sqrt(||grad L||^2 + e)``, ``rho_t = sigma / (N + e)``
    capped at ``rho_max`` only if ``rho_max > 0``.

    ``rho_max`` as it is while ``||grad L|| >> sqrt(e) = 1e-6`` (when the cap binds), then
    ``~ rho_max ||grad L|| / sqrt(e)``: 0 with the gradient. Inputs as :func:`lesam_radius`
    (``rho_max`` any finite number; ``<= 0`` means no cap); ``eps`` finite > 0.
    """
    lg = numeric_array(log_grad_norm, "log_grad_norm")
    if np.any(np.isnan(lg)):
        raise ValueError("log_grad_norm must not contain NaN")
    sigma = _nonnegative(sigma, "sigma")
    cap = numeric_array(rho_max, "rho_max")
    if not np.all(np.isfinite(cap)):
        raise ValueError(f"rho_max must be finite, got {rho_max!r}")
    _broadcastable(lg, sigma=sigma, rho_max=cap)
    log_e = np.log(real(eps, "eps", low=0.0, low_open=True))
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        log_n = 0.5 * np.logaddexp(2.0 * lg, log_e)
        log_shifted = np.logaddexp(log_n, log_e)
        rho_t = sigma * np.exp(-log_shifted)
        rho_t = np.where(cap > 0, np.minimum(rho_t, cap), rho_t)
        return rho_t * np.exp(lg - log_shifted)


def schedule_values(value, times, name: str = "value") -> np.ndarray:
    """A hyper-parameter (number or schedule, :mod:`flows.schedules`) at clock ``times``."""
    times = numeric_array(times, "times", ndim=1)
    if callable(value):
        return np.asarray(hyperparameters_at({name: value}, times)[name], dtype=float) * np.ones(
            times.shape
        )
    return np.full(times.shape, real(value, name, low=0.0))


def initial_gradient_norm(data: Dataset, alpha, depth: int, loss: str | None = None) -> float:
    """``||grad L(theta(0))||_2`` of a balanced init ``w^(l) = alpha`` (scalar or (d,)): the
    scale that matches the methods at the start (``sigma = rho ||grad L0||`` for LE-SAM,
    ``rho / ||grad L0||`` for USAM give l2-SAM's perturbation at ``theta(0)``)."""
    data = check_data(data)
    depth = integer(depth, "depth", 1)
    a = numeric_array(alpha, "alpha")
    if a.ndim > 1 or not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"alpha must be a positive scalar or (d,) vector, got {alpha!r}")
    theta = as_theta(np.broadcast_to(a, (depth, data.d)).copy(), data)
    return float(np.linalg.norm(loss_gradient(theta, data, check_loss(loss, data))))


def check_data(data) -> Dataset:
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flows.Dataset, got {type(data).__name__}")
    return data


def check_loss(loss, data: Dataset) -> str:
    """``loss`` for ``data``: a name of :data:`flows.model.LOSSES` of the data's task, or None
    for the task's default (:func:`flows.model.loss_for`)."""
    if loss is not None and (not isinstance(loss, str) or loss not in LOSSES):
        raise ValueError(f"loss must be one of {sorted(LOSSES)}, got {loss!r}")
    return loss_for(loss, check_data(data))


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
