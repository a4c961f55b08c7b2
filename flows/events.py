"""Events that end an integration segment: each is a small callable for ``solve_ivp``.

* :class:`ZeroCrossing` — a parameter reaches 0 where the field jumps (l_inf-SAM); the
  integrator then decides between crossing and sliding (Filippov).
* :class:`SlidingRelease` — a parameter held at 0 stops sliding (the one-sided fields no
  longer both point at 0).
* :class:`Collapse` — every parameter is below ``radius * COLLAPSE_FRACTION``; from there the
  predictor reaches 0 within a negligible time and stays (``theta = 0`` is an equilibrium).
* :class:`BlowUp` — super-exponential growth (depth >= 3): a growing parameter's log-rate
  ``d log|w| / ds`` exceeds ``BLOWUP_RATE``, i.e. less than ``1 / BLOWUP_RATE`` of time is left.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .field import Problem, chart_state, one_sided_velocity, rescaled_velocity

COLLAPSE_FRACTION = 1e-12
BLOWUP_RATE = 1e12


@dataclass
class SegmentEvent:
    """Base: an event function ``g(s, y)`` with solve_ivp's ``terminal``/``direction`` flags."""

    problem: Problem
    terminal = True
    direction = 0.0

    def __call__(self, s: float, y: np.ndarray) -> float:
        raise NotImplementedError


@dataclass
class ZeroCrossing(SegmentEvent):
    """``g = z[index]``: the parameter at ``index`` (flat) passes through 0."""

    index: int = 0

    def __call__(self, s: float, y: np.ndarray) -> float:
        return float(y[self.index])


@dataclass
class SlidingRelease(SegmentEvent):
    """``g = min(-F(+0), F(-0))``, positive while the held entry slides at 0."""

    index: tuple = (0, 0)
    sign_pattern: np.ndarray | None = None
    direction = -1.0

    def __call__(self, s: float, y: np.ndarray) -> float:
        theta = chart_state(y[:-1], self.problem)
        return min(-one_sided_velocity(theta, self.problem, self.sign_pattern, self.index, 1.0),
                   one_sided_velocity(theta, self.problem, self.sign_pattern, self.index, -1.0))


@dataclass
class Collapse(SegmentEvent):
    """``g = log max|w| - log(radius * COLLAPSE_FRACTION)``, crossing downwards."""

    radius: float = 1.0
    direction = -1.0

    def __call__(self, s: float, y: np.ndarray) -> float:
        theta = chart_state(y[:-1], self.problem)
        return float(np.max(theta.log_abs) - np.log(self.radius * COLLAPSE_FRACTION))


@dataclass
class BlowUp(SegmentEvent):
    """``g = log BLOWUP_RATE - max_j d log|w_j| / dtau`` over growing entries with ``|w_j| > 1``."""

    direction = -1.0

    def __call__(self, s: float, y: np.ndarray) -> float:
        theta = chart_state(y[:-1], self.problem)
        vel = rescaled_velocity(theta, self.problem)
        growing = (vel.dtheta.sign * theta.sign > 0) & (theta.log_abs > 0)
        if not np.any(growing):
            return float(np.log(BLOWUP_RATE))
        with np.errstate(invalid="ignore"):
            log_rate = vel.dtheta.log_abs - theta.log_abs
        return float(np.log(BLOWUP_RATE) - np.max(log_rate[growing]))
