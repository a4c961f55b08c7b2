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
in signed-log form. The chart name ``'conserved'`` of :func:`flows.simulate` is no chart of the
parameters: at depth 2 it integrates ``psi`` and ``log|u_j^2 - v_j^2|`` instead
(:mod:`flows.conserved`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .signedlog import SignedLog, chart_to_signed_log, chart_velocity, signed_log_to_chart

#: The smallest relative tolerance ``scipy.integrate`` solvers accept without a warning.
SOLVER_RTOL_FLOOR = 100 * np.finfo(float).eps


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

    def tolerances(self, rtol: float, atol: float) -> tuple[float, float]:
        """Solver ``(rtol, atol)`` on ``z``: as given (relative control down to
        ``|w| ~ atol / rtol * delta``)."""
        return rtol, atol


@dataclass(frozen=True, eq=False)
class LogChart:
    """``z = log|w|`` with fixed signs ``sign`` (shape of the parameter groups)."""

    sign: np.ndarray
    zero = -np.inf

    def state(self, z: np.ndarray) -> SignedLog:
        """Parameters from coordinates (``z = -inf`` is ``w = 0``; one comparison, not
        ``numpy.isneginf``'s three passes)."""
        return SignedLog(np.where(z == -np.inf, 0.0, self.sign), z)

    def coordinates(self, w: SignedLog) -> np.ndarray:
        """Coordinates from parameters."""
        return w.log_abs.copy()

    def velocity(self, dw: SignedLog, z: np.ndarray) -> np.ndarray:
        """``dz/ds = (dw/ds) / w``."""
        with np.errstate(over="ignore", invalid="ignore"):
            rate = dw.sign * self.sign * np.exp(dw.log_abs - z)
        return np.where(np.isneginf(z), 0.0, rate)

    def tolerances(self, rtol: float, atol: float) -> tuple[float, float]:
        """Solver ``(rtol, atol)`` on ``z = log|w|``: an absolute error ``rtol`` on ``log|w|``,
        i.e. a relative error ``rtol`` on ``w`` at any size (the solver's own relative term is
        set to its floor ``100 eps``, since ``rtol |log|w||`` would loosen the control on
        large or tiny ``w``)."""
        return SOLVER_RTOL_FLOOR, max(rtol, atol)


CHARTS = ("auto", "asinh", "log", "conserved")


def log_chart_applies(balanced: bool, groups: int, depth: int, sign_discontinuous: bool) -> bool:
    """Whether no parameter can change sign, so that the log chart is valid: a balanced init run
    as one group, depth L >= 2, a continuous algorithm (see the module docstring)."""
    return balanced and groups == 1 and depth >= 2 and not sign_discontinuous


def choose_chart(
    name: str,
    groups: np.ndarray,
    balanced: bool,
    depth: int,
    sign_discontinuous: bool,
    delta: float,
) -> AsinhChart | LogChart:
    """The chart a run starts in.

    ``auto`` is ``log`` wherever :func:`log_chart_applies` (exact multiplicative dynamics at any
    scale, and fewer steps; the integrator moves to the asinh chart if every parameter comes
    near 0, to follow a collapse), else ``asinh``. ``log`` forces the log chart, also near 0
    (a run that collapses then approaches a singularity of the chart and may end with status
    -1); ``asinh`` forces the asinh chart. ``conserved`` is refused: ``simulate`` integrates
    it by :func:`flows.conserved.conserved_flow`, in no chart of the parameters.
    """
    if name not in CHARTS:
        raise ValueError(f"chart must be one of {list(CHARTS)}, got {name!r}")
    if name == "conserved":
        raise ValueError("chart 'conserved' has no chart of theta: flows.conserved integrates it")
    if name == "log" and sign_discontinuous:
        raise ValueError("chart 'log' cannot follow parameters through 0 (l_inf-SAM): use 'asinh'")
    if name == "log" or (
        name == "auto" and log_chart_applies(balanced, groups.shape[0], depth, sign_discontinuous)
    ):
        return LogChart(np.sign(groups))
    return AsinhChart(delta)
