"""Sequential feature amplification: which coordinate of ``beta`` leads, and when.

Paper: Thm 4.4 / 4.5, Prop 4.7 (docs/theory.md §14). All quantities are computed from ``log|beta|`` so
they stay meaningful far beyond float64.

Coordinates are 0-based in the API (Python indices: :func:`leaders`,
:attr:`LeaderSequence.coordinates`, :func:`analysis.regimes.leader_phase_diagram`) and 1-based
where they are printed for people (``j`` of ``beta_j``, as in the paper:
:meth:`LeaderSequence.describe`), under the label :data:`LEADERS_LABEL`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flows.results import Trajectory

from ._checks import log_abs_beta_array, numeric_array, time_axis, trajectory

#: The label of every printed line or table column of leaders (:meth:`LeaderSequence.describe`).
LEADERS_LABEL = "leaders (1-based)"


def leaders(log_abs_beta: np.ndarray) -> np.ndarray:
    """``argmax_j |beta_j(t)|`` per time (T,); -1 where ``beta = 0`` entirely.

    ``log_abs_beta`` is (T, d), d >= 1; ``-inf`` means ``beta_j = 0`` and ``+inf`` a value beyond
    any float (it leads). ``ValueError`` naming 'log_abs_beta' for NaN (a NaN has no leader) or
    a wrong shape. Ties: the smallest index.
    """
    log_abs_beta = log_abs_beta_array(log_abs_beta)
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
        """E.g. ``'1 (t=0.01) -> 2 (t=3.2) -> 5 (t=9.8)'``: 1-based coordinates (0-based with
        ``one_based=False``), printed under :data:`LEADERS_LABEL`."""
        shift = 1 if one_based else 0
        return " -> ".join(
            f"{'none (beta = 0)' if c < 0 else c + shift} (t={s:.4g})"
            for c, s in zip(self.coordinates, self.switch_times, strict=False)
        )


def leader_sequence(t: np.ndarray, log_abs_beta: np.ndarray) -> LeaderSequence:
    """The sequence of leaders of ``|beta_j|`` over the sampled times ``t``.

    ``t`` (T,) finite and non-decreasing, ``log_abs_beta`` (T, d) as for :func:`leaders`;
    otherwise ``ValueError`` naming the parameter.
    """
    log_abs_beta = log_abs_beta_array(log_abs_beta)
    t = time_axis(t, "t", log_abs_beta.shape[0])
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
    """:func:`leader_sequence` of a trajectory, in its own clock (``ValueError`` naming 'traj'
    if it is not a consistent :class:`flows.Trajectory`)."""
    traj = trajectory(traj)
    return leader_sequence(traj.t, traj.log_abs_beta)


def shares(log_abs_beta: np.ndarray) -> np.ndarray:
    """``|beta_j| / ||beta||_1`` per time (T, d), by log-sum-exp.

    Rows of ``log_abs_beta`` (T, d) are handled as follows:

    * finite or ``-inf`` entries: the shares (a collapsed row, all ``-inf``, gives 0: ``beta``
      is 0 there, and so are its shares);
    * exactly one ``+inf`` (a coordinate beyond any float): share 1 there, 0 elsewhere (the
      limit);
    * a NaN, or two or more ``+inf`` (the ratio is unknown): the whole row is NaN. A NaN is
      propagated, never turned into a valid-looking 0.

    ``ValueError`` naming 'log_abs_beta' if it is not a numeric 2-D array with d >= 1.
    """
    lb = numeric_array(log_abs_beta, "log_abs_beta", ndim=2)
    if lb.shape[1] == 0:
        raise ValueError(f"log_abs_beta must have at least one column, got shape {lb.shape}")
    n_inf = np.sum(np.isposinf(lb), axis=1)
    nan_row = np.any(np.isnan(lb), axis=1) | (n_inf > 1)
    one_inf = (n_inf == 1) & ~nan_row
    finite_rows = np.where((nan_row | one_inf)[:, None], -np.inf, lb)
    top = np.max(finite_rows, axis=1, keepdims=True)
    safe = np.where(np.isfinite(top), top, 0.0)
    scaled = np.exp(finite_rows - safe)
    total = np.sum(scaled, axis=1, keepdims=True)
    out = np.divide(scaled, total, out=np.zeros_like(scaled), where=total > 0)
    out[one_inf] = np.isposinf(lb[one_inf]).astype(float)
    out[nan_row] = np.nan
    return out


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
