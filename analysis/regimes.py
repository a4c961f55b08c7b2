"""The three regimes of the initialization scale for l2-SAM (L = 2, single example, uniform alpha).

Paper (docs/theory.md §14, "Three regimes"): as ``alpha`` grows, (1) the predictor collapses to 0,
(2) sequential feature amplification: the leading coordinate ``argmax_j |beta_j(tau)|`` starts
at a minor coordinate and moves up to ``d``, (3) ``e_d`` leads from the start.

What is proved and what is numerical here:

* Proved (paper, as summarised): the existence of the regimes and minor-first / major-last
  amplification (Thm 4.4/4.5, Prop 4.7) for ``L = 2``.
* Derived in docs/theory.md §13 and checked here against the engine's own field: with
  ``N0 = alpha sqrt(2 sum mu_k^2)`` the initial growth rate of ``a_j`` is
  ``mu_j (1 - rho mu_j / N0)``, so regime 3 holds iff ``N0 >= rho (mu_d + mu_{d-1})``
  (:func:`regime3_boundary`, verified by :func:`regime3_boundary_from_field`; both in
  :mod:`analysis.boundaries`).
  ``N <= rho mu_1`` makes every rate negative, so ``N`` shrinks further: it is absorbing and
  certifies collapse.
* Numerical only: the regime of one alpha (:func:`classify`, from the flow plus a certificate;
  :mod:`analysis.classification`), the exact collapse boundary (:func:`collapse_boundary`,
  bisection on the flow), whether the leader sequence is monotone, and everything at depth
  ``L >= 3`` (:func:`leader_sequence_at_depth`; there ``l2``-SAM blows up in finite time and
  the "regimes" are read off the leader sequence before the blow-up, not from a theorem).

The path depends on ``alpha / rho`` only (scale symmetry, docs/theory.md §8, L = 2), so every function
takes ``ratio = alpha / rho`` where it sweeps, and runs at ``rho = 1``. It also depends on the
scale of ``mu`` only through the clock (``mu -> s mu`` is ``tau -> tau / s`` in the rescaled
clock: the field ``grad m(theta + eps)`` is linear in ``mu`` and ``eps`` is normalised), so the
flows run on ``mu / s`` with ``s`` a power of 2 (exact) and ``mu_1 / s`` in ``[1, 2)``, and
times are scaled back: results are the same at every scale of ``mu`` that float64 holds
(:mod:`analysis.regime_inputs`).

Every public function validates its inputs before any flow is simulated (``ValueError`` naming
the parameter), and every search has an iteration cap: hitting it is reported
(:class:`BoundarySearch`) or raises a ``RuntimeError`` naming the cap, never a silent number.
"""

from __future__ import annotations

import numpy as np

from flows.data import single_example
from flows.initialization import check_depth, initialization
from flows.integrate import simulate
from flows.results import Trajectory

from ._checks import integer, numeric_array, real
from .amplification import LeaderSequence, leader_sequence, leaders

# The public names of the regime analysis, defined by concept in these modules:
from .boundaries import (
    BoundarySearch,
    collapse_boundary,
    collapse_boundary_search,
    collapse_certificate_boundary,
    initial_norm,
    initial_rates_from_field,
    regime3_boundary,
    regime3_boundary_from_field,
)
from .classification import REGIME_NAMES, RegimeResult, classify, log_gradient_norm
from .regime_inputs import MIN_RTOL, check_mu, check_positive, horizon, scaled_mu

__all__ = [
    "MIN_RTOL",
    "REGIME_NAMES",
    "BoundarySearch",
    "RegimeResult",
    "check_mu",
    "check_positive",
    "classify",
    "collapse_boundary",
    "collapse_boundary_search",
    "collapse_certificate_boundary",
    "initial_norm",
    "initial_rates_from_field",
    "leader_phase_diagram",
    "leader_sequence_at_depth",
    "log_gradient_norm",
    "regime3_boundary",
    "regime3_boundary_from_field",
]


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
    if r.size == 0 or not np.all(np.isfinite(r)) or np.any(r <= 0):
        raise ValueError(
            f"ratios must be a non-empty 1-D array of finite numbers > 0, got {ratios!r}"
        )
    n_tau = integer(n_tau, "n_tau", 2)
    mu_hat, s = scaled_mu(mu)
    tau_max_hat = horizon(tau_max, mu, s, "tau_max")
    data = single_example(mu_hat)
    tau = np.linspace(0.0, check_positive(tau_max, "tau_max"), n_tau)
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
    t_max = check_positive(t_max, "t_max")
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
