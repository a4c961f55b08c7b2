"""Input checks of :mod:`analysis` beyond :mod:`flows.checks` (arrays of ``log|beta|``, time
axes, trajectories); each raises ``ValueError`` naming the parameter."""

from __future__ import annotations

import numpy as np

from flows.checks import integer, real_array
from flows.networks import TwoLayerCNN
from flows.results import Trajectory


def numeric_array(value, name: str, ndim: int | None = None) -> np.ndarray:
    """``value`` as a float64 array of rank ``ndim``, possibly empty, NaN and inf allowed (the
    caller decides): :func:`flows.checks.real_array`."""
    return real_array(value, name, ndim, finite=False, nonempty=False)


def log_abs_beta_array(value, name: str = "log_abs_beta") -> np.ndarray:
    """A (T, d) array of ``log|beta_j|`` with d >= 1: -inf (beta_j = 0) and +inf (beyond any
    float) allowed, NaN rejected."""
    arr = numeric_array(value, name, ndim=2)
    if arr.shape[1] == 0:
        raise ValueError(f"{name} must have at least one column (d >= 1), got shape {arr.shape}")
    if np.any(np.isnan(arr)):
        raise ValueError(f"{name} must not contain NaN")
    return arr


def time_axis(value, name: str, length: int, rows: str = "log_abs_beta") -> np.ndarray:
    """A finite, non-decreasing (``length``,) time axis (one entry per row of ``rows``)."""
    arr = numeric_array(value, name, ndim=1)
    if arr.shape[0] != length:
        raise ValueError(
            f"{name} must have one entry per row of {rows} ({length} rows), got {arr.shape[0]}"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    if np.any(np.diff(arr) < 0):
        raise ValueError(f"{name} must be non-decreasing")
    return arr


def trajectory(traj, name: str = "traj") -> Trajectory:
    """A :class:`flows.Trajectory` with consistent contents: at least one sample; finite,
    non-decreasing ``t`` and ``tau``; ``log_abs_beta`` (T, d) and ``log_abs_theta`` (T, G, d)
    finite or ``-inf`` (a zero); signs (same shapes) in {-1, 0, 1}; ``depth`` an int >= 1.
    The engine's trajectories always satisfy this (signed-log values never overflow)."""
    if not isinstance(traj, Trajectory):
        raise ValueError(f"{name} must be a flows.Trajectory, got {type(traj).__name__}")
    try:
        lb = log_abs_beta_array(traj.log_abs_beta, f"{name}.log_abs_beta")
        if lb.shape[0] < 1:
            raise ValueError(f"{name} must have at least one sample")
        time_axis(traj.t, f"{name}.t", lb.shape[0])
        time_axis(traj.tau, f"{name}.tau", lb.shape[0])
        lt = numeric_array(traj.log_abs_theta, f"{name}.log_abs_theta", ndim=3)
        if lt.shape[0] != lb.shape[0] or lt.shape[2] != lb.shape[1] or lt.shape[1] < 1:
            raise ValueError(
                f"{name}.log_abs_theta must have shape (T, G, d) = ({lb.shape[0]}, "
                f"G >= 1, {lb.shape[1]}), got {lt.shape}"
            )
        for label, arr in (("log_abs_beta", lb), ("log_abs_theta", lt)):
            if np.any(np.isnan(arr)) or np.any(np.isposinf(arr)):
                raise ValueError(f"{name}.{label} must be finite or -inf (found NaN or +inf)")
        for label, arr, shape in (
            ("sign_beta", traj.sign_beta, lb.shape),
            ("sign_theta", traj.sign_theta, lt.shape),
        ):
            sign = numeric_array(arr, f"{name}.{label}")
            if sign.shape != shape or not np.all(np.isin(sign, (-1.0, 0.0, 1.0))):
                raise ValueError(
                    f"{name}.{label} must have shape {shape} and entries in {{-1, 0, 1}}"
                )
        integer(traj.depth, f"{name}.depth", 1)
    except ValueError as exc:
        if name in str(exc):
            raise
        raise ValueError(f"{name}: {exc}") from exc
    return traj


def cnn_parameters(model, theta) -> np.ndarray:
    """``theta`` of a :class:`~flows.networks.TwoLayerCNN` as a (size,) float array
    (``ValueError`` naming model or theta)."""
    if not isinstance(model, TwoLayerCNN):
        raise ValueError(f"model must be a flows.networks.TwoLayerCNN, got {type(model).__name__}")
    theta = real_array(theta, "theta", ndim=1)
    if theta.shape != (model.size,):
        raise ValueError(f"theta must have shape ({model.size},), got {theta.shape}")
    return theta


def cnn_inputs(model, theta, X) -> tuple[np.ndarray, np.ndarray]:
    """:func:`cnn_parameters` and its inputs ``X`` as a finite (n, H W) float array
    (``ValueError`` naming model, theta or X)."""
    theta = cnn_parameters(model, theta)
    X = real_array(X, "X", ndim=2)
    if X.shape[1] != model.n_inputs:
        raise ValueError(f"X must have shape (n, {model.n_inputs}), got {X.shape}")
    return theta, X


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
