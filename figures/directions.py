"""The direction of beta against the l1 / l2 max-margin references: the pieces shared by figures
1, 6 and 7 (:mod:`figures.depth_contrast`, :mod:`figures.maxmargin_angles`,
:mod:`figures.blobs`), with the references' colours.

Directions are taken from the cached results in log space (``log|beta_j|`` and signs), so they
are exact at any scale of beta; angles are in degrees.
"""

from __future__ import annotations

import numpy as np

from analysis.maxmargin import max_margin
from flows.sweep.registry import Result

from . import style

#: Colours of the l1 (green) and l2 (orange) max-margin references, drawn wide and light.
REF_COLORS = {1: style.GREEN, 2: style.ORANGE}


def directions(result: Result) -> np.ndarray:
    """``beta / |beta|_2`` per sample (T, d), in log space (0 where beta = 0)."""
    lb, sb = result["log_abs_beta"], result["sign_beta"]
    top = np.max(lb, axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    scaled = np.where(sb == 0, 0.0, sb * np.exp(lb - top))
    norm = np.linalg.norm(scaled, axis=1, keepdims=True)
    return np.divide(scaled, norm, out=np.zeros_like(scaled), where=norm > 0)


def log_norm(result: Result) -> np.ndarray:
    """``log |beta|_2`` per sample (-inf where beta = 0)."""
    lb = np.where(result["sign_beta"] == 0, -np.inf, result["log_abs_beta"])
    top = np.max(lb, axis=1)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return safe + 0.5 * np.log(np.sum(np.exp(2 * (lb - safe[:, None])), axis=1))


def row_angles_deg(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Angle (degrees) between unit rows ``u`` (T, d) and unit ``v`` (d,) or (T, d), as
    ``2 atan2(||u - v||, ||u + v||)`` (accurate near 0 and 180 degrees)."""
    return np.degrees(2 * np.arctan2(np.linalg.norm(u - v, axis=1), np.linalg.norm(u + v, axis=1)))


def angles_deg(result: Result, reference) -> np.ndarray:
    """Angle (degrees) between ``beta(tau)`` and ``reference`` at every sample."""
    ref = np.asarray(reference, dtype=float)
    u = directions(result)
    a = row_angles_deg(u, ref / np.linalg.norm(ref))
    return np.where(np.linalg.norm(u, axis=1) > 0, a, np.nan)


def references(X, y) -> dict[int, np.ndarray]:
    """l1 and l2 max-margin directions (unit l2 vectors) by p."""
    return {p: max_margin(np.asarray(X), np.asarray(y), p).direction for p in (1, 2)}


def format_vector(v) -> str:
    """``(0.123, 0.456)``: a vector with three decimals, for legends and titles."""
    return "(" + ", ".join(f"{x:.3f}" for x in np.asarray(v)) + ")"


def draw_reference_rays(
    ax,
    refs: dict[int, np.ndarray],
    reach: float,
    names: dict,
    with_vector: bool = True,
    **line,
) -> None:
    """The l1 and l2 max-margin directions ``refs`` as rays of length ``reach`` from 0, in the
    references' colours, labelled ``<names[p]> <direction>`` (``<names[p]>`` without
    ``with_vector``); ``line``: line properties."""
    for p, ref in refs.items():
        ax.plot(
            [0, reach * ref[0]],
            [0, reach * ref[1]],
            color=REF_COLORS[p],
            label=f"{names[p]} {format_vector(ref)}" if with_vector else names[p],
            **line,
        )


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
