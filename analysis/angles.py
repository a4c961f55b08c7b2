"""Angles between directions: between two vectors (:func:`angle`) and between a vector and a
cone (:func:`angle_to_set`, e.g. the face of l1 max-margin solutions). Both are accurate near 0
and near pi, and scale-invariant at every float64 scale."""

from __future__ import annotations

import numpy as np
from scipy.optimize import nnls

from ._checks import numeric_array

__all__ = ["angle", "angle_to_set"]


def angle(u, v) -> float:
    """Angle in radians (in ``[0, pi]``) between the directions of ``u`` and ``v``.

    ``nan`` when either vector is 0 (or not finite); ``cos`` is clipped to ``[-1, 1]``. Computed
    as ``2 atan2(||a - b||, ||a + b||)`` on the unit vectors, which stays accurate for angles
    near 0 and near pi (``arccos`` loses half the digits there). Scale-invariant at every
    float64 scale (the vectors are scaled by their largest entry before the norms).
    ``ValueError`` naming 'u' or 'v' if they are not numeric, empty, or of different sizes.
    """
    u = numeric_array(u, "u").ravel()
    v = numeric_array(v, "v").ravel()
    if u.size == 0 or v.size == 0:
        raise ValueError(f"u and v must not be empty, got sizes {u.size} and {v.size}")
    if u.shape != v.shape:
        raise ValueError(f"u and v must have the same size, got {u.size} and {v.size}")
    a, b = _unit(u), _unit(v)
    if a is None or b is None:
        return float("nan")
    return float(
        np.clip(2.0 * np.arctan2(np.linalg.norm(a - b), np.linalg.norm(a + b)), 0.0, np.pi)
    )


def angle_to_set(u, vertices) -> float:
    """Smallest angle between ``u`` and the cone spanned by ``vertices`` (rows, nonnegative
    combinations), e.g. the l1 solution face of
    :func:`analysis.maxmargin.l1_solution_set_single_example`.

    Computed by NNLS: the closest point of the cone to ``u / ||u||``. When that point is 0
    (``u`` makes an angle >= pi/2 with every generator), the smallest angle is attained at a
    generator (on the section ``{w in cone : <u, w> = -1}`` the angle grows with ``||w||``,
    a convex function, so its maximum sits at a vertex), and it is the smallest angle
    to a nonzero vertex. ``nan`` if ``u`` is 0 or not finite, or every vertex is 0.

    Raises
    ------
    ValueError
        ``u`` not a numeric vector; ``vertices`` not a finite (k, d) array with ``d = u.size``.
    """
    u = numeric_array(u, "u").ravel()
    if u.size == 0:
        raise ValueError("u must not be empty")
    V = numeric_array(vertices, "vertices")
    if V.ndim == 1:
        V = V[None, :]
    if V.ndim != 2 or V.shape[0] == 0 or V.shape[1] != u.size or not np.all(np.isfinite(V)):
        raise ValueError(
            f"vertices must be a finite (k, {u.size}) array with k >= 1, got shape {V.shape}"
        )
    a = _unit(u)
    scale = np.max(np.abs(V), axis=1)
    V = V[scale > 0] / scale[scale > 0, None]  # positive row scalings keep the cone
    if a is None or V.shape[0] == 0:
        return float("nan")
    coef, _ = nnls(V.T, a)
    w = V.T @ coef
    if np.linalg.norm(w) > 0:
        return angle(a, w)
    return min(angle(a, v) for v in V)


def _unit(u: np.ndarray) -> np.ndarray | None:
    """``u / ||u||_2`` computed without overflow or underflow (scaled by ``max|u_j|`` first);
    None for 0 or non-finite ``u``."""
    if not np.all(np.isfinite(u)):
        return None
    top = np.max(np.abs(u), initial=0.0)
    if top == 0:
        return None
    u = u / top
    return u / np.linalg.norm(u)


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
