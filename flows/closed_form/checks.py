"""Input checks of :mod:`flows.closed_form.solutions` (:mod:`flows.checks` with the domain of
each closed form): each returns the checked value or raises ``ValueError`` naming the
parameter."""

from __future__ import annotations

import numpy as np

from ..checks import integer, real, real_array


def check_mu(mu) -> np.ndarray:
    """``mu`` as a non-empty 1-D array of finite positive numbers (a copy)."""
    arr = real_array(mu, "mu", ndim=1)
    if np.any(arr <= 0):
        raise ValueError(f"mu must be positive (the closed forms are for 0 < mu_j), got {arr!r}")
    return arr.copy()


def check_alpha(alpha, d: int) -> np.ndarray:
    """``alpha`` as a length-``d`` array of finite positive numbers (a scalar is broadcast)."""
    arr = real_array(alpha, "alpha")
    if arr.ndim == 0:
        arr = np.full(d, float(arr))
    elif arr.ndim != 1 or arr.shape[0] != d:
        raise ValueError(f"alpha must be a scalar or a 1-D array of length d={d}, got {arr.shape}")
    if np.any(arr <= 0):
        raise ValueError(f"alpha must be positive, got {arr!r}")
    return arr.copy()


def check_rho(rho) -> float:
    """``rho`` as a finite float ``>= 0``."""
    return real(rho, "rho", low=0.0)


def check_depth(depth) -> int:
    """``depth`` as an int ``>= 1``."""
    return integer(depth, "depth", 1)


def check_tau(tau) -> np.ndarray:
    """``tau`` as a 1-D array of finite times ``>= 0`` (a scalar becomes one time; a copy)."""
    arr = real_array(tau, "tau")
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"tau must be a scalar or a 1-D array of times, got shape {arr.shape}")
    if np.any(arr < 0):
        raise ValueError(f"tau must be >= 0, got {arr!r}")
    return arr.copy()
