"""The conserved quantities of the GD flow, checked on an assembled path.

Along the GD flow every ``w^(l)_j^2 - w^(k)_j^2`` is constant (``d/dt w_l^2 = -2 g_j prod_m
w_m`` for every layer). The state stores each layer on its own, so once a coordinate has grown
to ``|w| >> sqrt(|c|) / eps`` its layers agree to rounding and the difference ``c`` is lost;
if the coordinate later has to shrink back (a residual sign reversal in regression at a
vanishing initialisation), the stored layers cannot follow the exact flow, which keeps
``w_l^2 - w_k^2 = c``. Where a sample is again small enough for ``c`` to be resolved, a
violation is certain: :func:`conservation_cut` finds it and where to cut the path.
"""

from __future__ import annotations

import math

import numpy as np

from ..signedlog import SignedLog

#: A sample resolves ``c`` where ``max(w_l^2, w_k^2) * RESOLVED * max(rtol, eps) < |c|``.
RESOLVED = 1e6
#: Relative violation of ``c`` that counts as lost.
VIOLATION = 1e-3


def conservation_cut(theta: SignedLog, rtol: float) -> tuple[int, str] | None:
    """``(i, message)``: the path ``theta`` (T, L, d) of a GD flow (full system, one row per layer)
    violates ``w^(l)_j^2 - w^(l+1)_j^2 = c`` at a sample where ``c`` is resolved, and ``i`` is the
    last sample before it at which that coordinate still kept it (the path is right up to
    there); None if every resolved sample keeps every ``c``."""
    T, L, _ = theta.log_abs.shape
    floor = math.log(RESOLVED * max(rtol, float(np.finfo(float).eps)))
    first_bad: tuple[int, int, int] | None = None
    for layer in range(L - 1):
        two = 2.0 * theta.log_abs[:, layer : layer + 2, :]  # (T, 2, d) log w^2
        with np.errstate(over="ignore", invalid="ignore"):
            squares = np.exp(two)
        c0 = squares[0, 0] - squares[0, 1]  # (d,)
        with np.errstate(divide="ignore"):
            log_c0 = np.log(np.abs(c0))
        resolved = (np.max(two, axis=1) + floor < log_c0) & (c0 != 0)
        with np.errstate(over="ignore", invalid="ignore"):
            drift = np.abs(squares[:, 0] - squares[:, 1] - c0)
            bad = resolved & (drift > VIOLATION * np.abs(c0))
        if np.any(bad):
            k, j = np.argwhere(bad)[np.argmin(np.argwhere(bad)[:, 0])]
            if first_bad is None or k < first_bad[0]:
                first_bad = (int(k), int(j), layer)
    if first_bad is None:
        return None
    k, j, layer = first_bad
    two = 2.0 * theta.log_abs[: k + 1, layer : layer + 2, j]
    with np.errstate(over="ignore", invalid="ignore"):
        squares = np.exp(two)
    c0 = squares[0, 0] - squares[0, 1]
    kept = (np.max(two, axis=1) + floor < math.log(abs(c0))) & (
        np.abs(squares[:, 0] - squares[:, 1] - c0) <= VIOLATION * abs(c0)
    )
    i = int(np.flatnonzero(kept[:k]).max(initial=0))
    return i, (
        f"the GD flow conserves w^({layer + 1})_{j + 1}^2 - w^({layer + 2})_{j + 1}^2 = {c0:.3g}, "
        f"which the path violates at sample {k}: the coordinate grew until its layers agreed to "
        "rounding, and float64 could not follow it back; the path is cut where it last kept it "
        f"(sample {i}); {MIRROR_ADVICE}"
    )


#: What a GD run that loses its conservation law can do instead.
MIRROR_ADVICE = (
    "at depth 2, simulate(..., chart='conserved') integrates GD and the gradient-proportional "
    "SAM flows in coordinates that keep u_j^2 - v_j^2 exactly; a larger initialisation keeps "
    "it too"
)


def split_layers(theta: SignedLog, rtol: float) -> tuple[int, int] | None:
    """``(layer, j)`` where the last sample of ``theta`` (T, L, d) breaks the GD conservation law
    ``w^(l)_j^2 - w^(l+1)_j^2 = c`` (from the first sample) by far more than rounding: the
    layers have split apart where the exact flow keeps them equal up to ``c``, e.g. a tiny ``c``
    below the layers' resolution whose rounding the unstable mode of a shrinking coordinate
    amplified. None if the last sample keeps every ``c`` to ``1e3 |c|`` plus ``1e3
    max(rtol, eps) max(w_l^2, w_k^2)`` (the solver controls each layer to ``rtol``)."""
    _, L, _ = theta.log_abs.shape
    for layer in range(L - 1):
        with np.errstate(over="ignore", invalid="ignore"):
            first = np.exp(2.0 * theta.log_abs[0, layer : layer + 2, :])
            last = np.exp(2.0 * theta.log_abs[-1, layer : layer + 2, :])
            c0 = np.abs(first[0] - first[1])
            now = np.abs(last[0] - last[1])
            noise = 1e3 * max(rtol, float(np.finfo(float).eps)) * np.max(last, axis=0)
            split = np.flatnonzero(now > 1e3 * c0 + noise)
        if split.size:
            return layer, int(split[0])
    return None
