"""Leader sequences over ``alpha`` (the phase diagram of l2-SAM at L = 2) and at depth
``L >= 3`` (:mod:`analysis.regimes`)."""

from __future__ import annotations

import numpy as np

from flows.checks import integer, positive, real
from flows.data import single_example
from flows.initialization import check_depth, initialization
from flows.integrator.driver import simulate
from flows.results import Trajectory

from .._checks import numeric_array
from ..amplification import LeaderSequence, leader_sequence, leaders
from .inputs import check_mu, horizon, scaled_mu

#: Most rows (flows) of one :func:`leader_phase_diagram`.
MAX_RATIOS = 10_000


def leader_phase_diagram(
    mu, ratios, tau_max: float, n_tau: int = 200
) -> tuple[np.ndarray, np.ndarray]:
    """Leading coordinate (0-based; -1 once collapsed) over an ``(alpha / rho, tau)`` grid.

    Returns ``(tau, lead)`` with ``lead`` of shape ``(len(ratios), n_tau)``; ``lead`` is -2 at
    the times a run did not reach (it failed, ``status == -1``, e.g. when ``tau_max mu_d`` is so
    large that ``log|beta|`` leaves float64), never a made-up leader. Every input is checked
    before the first run: ``ratios`` a non-empty 1-D array of finite numbers > 0, ``tau_max``
    finite > 0, ``n_tau`` an int >= 2 (``ValueError`` naming the parameter).
    """
    mu = check_mu(mu)
    r = numeric_array(ratios, "ratios", ndim=1)
    if r.size == 0 or r.size > MAX_RATIOS or not np.all(np.isfinite(r)) or np.any(r <= 0):
        raise ValueError(
            f"ratios must be a 1-D array of 1 to {MAX_RATIOS} finite numbers > 0 (one flow "
            f"each), got {ratios!r}"[:300]
        )
    n_tau = integer(n_tau, "n_tau", 2)
    mu_hat, s = scaled_mu(mu)
    tau_max_hat = horizon(tau_max, mu, s, "tau_max")
    data = single_example(mu_hat)
    tau = np.linspace(0.0, positive(tau_max, "tau_max"), n_tau)
    lead = np.empty((r.size, n_tau), dtype=int)
    for i, ratio in enumerate(r):
        traj = simulate(
            data,
            "l2-sam",
            depth=2,
            alpha=float(ratio),
            rho=1.0,
            t_max=tau_max_hat,
            n_points=n_tau,
            original_time=False,
            rtol=1e-9,
        )
        row = leaders(traj.log_abs_beta)[:n_tau]
        lead[i] = -2
        lead[i, : row.size] = row
        if row.size > 1:
            lead[i, 0] = lead[i, 1]  # ties at tau = 0 (uniform init) are not a leader
    return tau, lead


def leader_sequence_at_depth(
    mu, alpha: float, rho: float, depth: int, t_max: float, n_points: int = 400
) -> tuple[LeaderSequence, Trajectory]:
    """l2-SAM leader sequence at any depth (numerical only; L >= 3 runs end at a blow-up).

    Inputs are checked before the run (``ValueError`` naming ``mu``, ``alpha`` (as for
    :func:`flows.simulate`), ``rho`` (finite >= 0), ``depth``, ``t_max``, ``n_points``).
    """
    mu = check_mu(mu)
    depth = check_depth(depth)
    initialization(alpha, depth, mu.size)
    rho = real(rho, "rho", low=0.0)
    t_max = positive(t_max, "t_max")
    n_points = integer(n_points, "n_points", 2)
    traj = simulate(
        single_example(mu),
        "l2-sam",
        depth=depth,
        alpha=alpha,
        rho=rho,
        t_max=t_max,
        n_points=n_points,
        original_time=False,
    )
    return leader_sequence(traj.tau, traj.log_abs_beta), traj


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
