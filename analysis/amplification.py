"""Sequential feature amplification: which coordinate of ``beta`` leads, and when.

Paper: Thm 4.4 / 4.5, Prop 4.7 (SPEC §5). All quantities are computed from ``log|beta|`` so
they stay meaningful far beyond float64.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flows.results import Trajectory


def leaders(log_abs_beta: np.ndarray) -> np.ndarray:
    """``argmax_j |beta_j(t)|`` per time (T,); -1 where ``beta = 0`` entirely."""
    lead = np.argmax(log_abs_beta, axis=1)
    return np.where(np.all(np.isneginf(log_abs_beta), axis=1), -1, lead)


@dataclass(frozen=True)
class LeaderSequence:
    """Leading coordinates in order of appearance and the times at which each takes over.

    ``coordinates[0]`` leads from ``switch_times[0]`` (the first time with a strict leader;
    ties at the start, as at a uniform initialization, are ignored) until ``switch_times[1]``,
    and so on. Coordinates are 0-based; -1 means ``beta = 0``.
    """

    coordinates: tuple[int, ...]
    switch_times: tuple[float, ...]

    def describe(self, one_based: bool = True) -> str:
        """E.g. ``'1 (t=0.01) -> 2 (t=3.2) -> 5 (t=9.8)'``."""
        shift = 1 if one_based else 0
        return " -> ".join(f"{'0 (collapsed)' if c < 0 else c + shift} (t={s:.4g})"
                           for c, s in zip(self.coordinates, self.switch_times))


def leader_sequence(t: np.ndarray, log_abs_beta: np.ndarray) -> LeaderSequence:
    """The sequence of leaders of ``|beta_j|`` over the sampled times ``t``."""
    top = np.max(log_abs_beta, axis=1, keepdims=True)
    strict = np.sum(log_abs_beta == top, axis=1) == 1
    lead = leaders(log_abs_beta)
    coords: list[int] = []
    times: list[float] = []
    for k in range(len(t)):
        if not strict[k] and lead[k] != -1:
            continue
        if not coords or coords[-1] != lead[k]:
            coords.append(int(lead[k]))
            times.append(float(t[k]))
    return LeaderSequence(tuple(coords), tuple(times))


def trajectory_leaders(traj: Trajectory) -> LeaderSequence:
    """:func:`leader_sequence` of a trajectory, in its own clock."""
    return leader_sequence(traj.t, traj.log_abs_beta)


def shares(log_abs_beta: np.ndarray) -> np.ndarray:
    """``|beta_j| / ||beta||_1`` per time (T, d), by log-sum-exp; 0 where ``beta = 0``."""
    top = np.max(log_abs_beta, axis=1, keepdims=True)
    safe = np.where(np.isfinite(top), top, 0.0)
    scaled = np.exp(log_abs_beta - safe)
    total = np.sum(scaled, axis=1, keepdims=True)
    return np.divide(scaled, total, out=np.zeros_like(scaled), where=total > 0)
