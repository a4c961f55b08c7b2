"""Comparisons of runs at equal training loss: a quantity read off where the loss first falls
to given levels."""

from __future__ import annotations

import numpy as np

from ._checks import numeric_array

__all__ = ["at_loss_levels"]


def at_loss_levels(loss, values, levels) -> np.ndarray:
    """``values`` at the first time the training loss falls to each of ``levels``.

    ``loss`` and ``values`` are (T,) samples of one run. Between the two samples that bracket a
    level, ``log value`` is interpolated linearly in ``log loss`` (a power law: the Hessian of
    these losses scales like a power of the loss), or ``value`` itself where a bracketing value
    is <= 0. NaN for a level the loss never reaches from above (one below the final loss, or
    above the initial loss unless equal to it) and where a bracketing value is NaN.
    ``ValueError`` naming the parameter: ``loss`` not 1-D, NaN or < 0; ``values`` of another
    length; ``levels`` not > 0 and finite.
    """
    loss = numeric_array(loss, "loss", ndim=1)
    if np.any(np.isnan(loss)) or np.any(loss < 0):
        raise ValueError("loss must be >= 0 without NaN")
    values = numeric_array(values, "values", ndim=1)
    if values.shape != loss.shape:
        raise ValueError(
            f"values must have one entry per loss sample ({loss.size}), got {values.size}"
        )
    levels = numeric_array(levels, "levels", ndim=1)
    if not np.all(np.isfinite(levels)) or np.any(levels <= 0):
        raise ValueError("levels must be finite and > 0")
    out = np.full(levels.shape, np.nan)
    with np.errstate(divide="ignore"):
        log_loss = np.log(loss)
    for i, level in enumerate(levels):
        hit = np.flatnonzero(loss <= level)
        if hit.size == 0:
            continue
        k = int(hit[0])
        if k == 0:
            out[i] = values[0] if loss[0] == level else np.nan
            continue
        x0, x1 = log_loss[k - 1], log_loss[k]
        w = 1.0 if x1 == x0 or not np.isfinite(x1) else (x0 - np.log(level)) / (x0 - x1)
        v0, v1 = values[k - 1], values[k]
        if v0 > 0 and v1 > 0:
            out[i] = np.exp(np.log(v0) + w * (np.log(v1) - np.log(v0)))
        else:
            out[i] = v0 + w * (v1 - v0)
    return out


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
