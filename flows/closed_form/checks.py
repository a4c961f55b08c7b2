"""Input checks of :mod:`flows.closed_form.solutions`: each returns the checked value or raises
``ValueError`` whose message names the parameter in quotes (``'mu'``, ``'rho'``, ...)."""

from __future__ import annotations

import operator

import numpy as np


def check_mu(mu) -> np.ndarray:
    """``mu`` as a non-empty 1-D array of finite positive numbers (a copy)."""
    msg = "'mu' must be a non-empty 1-D array of finite positive numbers"
    arr = _floats(mu, msg)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{msg}, got shape {arr.shape}")
    _require_finite_positive(arr, msg)
    return arr.copy()


def check_alpha(alpha, d: int) -> np.ndarray:
    """``alpha`` as a length-``d`` array of finite positive numbers (a scalar is broadcast)."""
    msg = f"'alpha' must be a finite positive scalar or a 1-D array of length d={d}"
    arr = _floats(alpha, msg)
    if arr.ndim == 0:
        arr = np.full(d, float(arr))
    elif arr.ndim != 1 or arr.shape[0] != d:
        raise ValueError(f"{msg}, got shape {arr.shape}")
    _require_finite_positive(arr, msg)
    return arr.copy()


def check_rho(rho) -> float:
    """``rho`` as a finite float ``>= 0`` (not a bool)."""
    msg = "'rho' must be a finite scalar >= 0"
    if isinstance(rho, (bool, np.bool_)):
        raise ValueError(f"{msg}, got {rho!r}")
    arr = _floats(rho, msg)
    if arr.ndim != 0 or not np.isfinite(arr) or arr < 0:
        raise ValueError(f"{msg}, got {rho!r}")
    return float(arr)


def check_depth(depth) -> int:
    """``depth`` as an int ``>= 1`` (any integer type, not a bool)."""
    msg = "'depth' must be an integer >= 1"
    if isinstance(depth, (bool, np.bool_)):
        raise ValueError(f"{msg}, got {depth!r}")
    try:
        L = operator.index(depth)
    except TypeError as exc:
        raise ValueError(f"{msg}, got {depth!r}") from exc
    if L < 1:
        raise ValueError(f"{msg}, got {depth!r}")
    return int(L)


def check_tau(tau) -> np.ndarray:
    """``tau`` as a 1-D array of finite times ``>= 0`` (a scalar becomes one time; a copy)."""
    msg = "'tau' must be a scalar or 1-D array of finite times >= 0"
    arr = _floats(tau, msg)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{msg}, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{msg}, got {arr!r}")
    return arr.copy()


def _floats(value, msg: str) -> np.ndarray:
    """``value`` as a float64 array; ``ValueError(msg, got value)`` if it is not numeric."""
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{msg}, got {value!r}") from exc


def _require_finite_positive(arr: np.ndarray, msg: str) -> None:
    """``ValueError(msg, got arr)`` unless every entry of ``arr`` is finite and ``> 0``."""
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{msg}, got {arr!r}")
