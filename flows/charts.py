"""Integration charts: the coordinates ``z`` in which each parameter is integrated.

* :class:`AsinhChart` ``z = asinh(w / delta)``: linear near 0, so a parameter reaches or crosses
  0 transversally (needed by l_inf-SAM, whose parameters reach 0 and slide, and by unbalanced
  inits, whose layers may change sign), logarithmic for ``|w| >> delta``.
* :class:`LogChart` ``z = log|w|`` with the sign fixed: exact multiplicative dynamics, so a
  coordinate that decays to ``1e-300`` and regrows (l2-SAM near the collapse boundary) keeps
  its digits. Valid when no parameter changes sign: balanced inits, depth L >= 2, continuous
  algorithms (every coordinate then evolves multiplicatively, ``da_j/dtau`` is ``a_j`` times a
  bounded factor; ``theta = 0`` is only reached by a collapse, which is an event). At L = 1 the
  field does not vanish with ``w`` and a weight may cross 0.

Both give ``(sign w, log|w|)`` without overflow, and the chart velocity ``dz/ds`` from ``dw/ds``
in signed-log form.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .signedlog import SignedLog, chart_to_signed_log, chart_velocity, signed_log_to_chart


@dataclass(frozen=True)
class AsinhChart:
    """``z = asinh(w / delta)``; ``zero`` is the coordinate of ``w = 0``."""

    delta: float = 1.0
    zero = 0.0

    def state(self, z: np.ndarray) -> SignedLog:
        """Parameters from coordinates."""
        return chart_to_signed_log(z, self.delta)

    def coordinates(self, w: SignedLog) -> np.ndarray:
        """Coordinates from parameters."""
        return signed_log_to_chart(w, self.delta)

    def velocity(self, dw: SignedLog, z: np.ndarray) -> np.ndarray:
        """``dz/ds = (dw/ds) / (delta cosh z)``."""
        return chart_velocity(dw, z, self.delta)

    def absolute_tolerance(self, rtol: float, atol: float) -> float:
        """``atol`` as given: relative control down to ``|w| ~ atol / rtol * delta``."""
        return atol


@dataclass(frozen=True, eq=False)
class LogChart:
    """``z = log|w|`` with fixed signs ``sign`` (shape of the parameter groups)."""

    sign: np.ndarray
    zero = -np.inf

    def state(self, z: np.ndarray) -> SignedLog:
        """Parameters from coordinates (``z = -inf`` is ``w = 0``)."""
        return SignedLog(np.where(np.isneginf(z), 0.0, self.sign), z)

    def coordinates(self, w: SignedLog) -> np.ndarray:
        """Coordinates from parameters."""
        return w.log_abs.copy()

    def velocity(self, dw: SignedLog, z: np.ndarray) -> np.ndarray:
        """``dz/ds = (dw/ds) / w``."""
        with np.errstate(over="ignore", invalid="ignore"):
            rate = dw.sign * self.sign * np.exp(dw.log_abs - z)
        return np.where(np.isneginf(z), 0.0, rate)

    def absolute_tolerance(self, rtol: float, atol: float) -> float:
        """``rtol`` on ``log|w|`` itself, i.e. a relative error ``rtol`` on ``w`` at any size."""
        return max(rtol, atol)


CHARTS = ("auto", "asinh", "log")


def choose_chart(name: str, groups: np.ndarray, balanced: bool, depth: int,
                 sign_discontinuous: bool, delta: float) -> AsinhChart | LogChart:
    """The chart for a run: ``auto`` is ``asinh``.

    ``log`` is opt-in: it is exact for multiplicative decays far below ``1e-90`` (l2-SAM just
    above the collapse boundary), but a run that collapses to 0 approaches a singularity of
    the chart and ends with status -1 (budget exhausted); use it for runs that do not collapse.
    """
    if name not in CHARTS:
        raise ValueError(f"chart must be one of {list(CHARTS)}, got {name!r}")
    if name == "log" and sign_discontinuous:
        raise ValueError("chart 'log' cannot follow parameters through 0 (l_inf-SAM): use 'asinh'")
    if name == "log":
        return LogChart(np.sign(groups))
    return AsinhChart(delta)
