"""The three regimes of the initialization scale for l2-SAM (L = 2, single example, uniform alpha).

Paper (SPEC §5, "Three regimes"): as ``alpha`` grows, (1) the predictor collapses to 0,
(2) sequential feature amplification: the leading coordinate ``argmax_j |beta_j(tau)|`` starts
at a minor coordinate and moves up to ``d``, (3) ``e_d`` leads from the start.

What is proved and what is numerical here:

* Proved (paper, as summarised): the existence of the regimes and minor-first / major-last
  amplification (Thm 4.4/4.5, Prop 4.7) for ``L = 2``.
* Derived in SPEC §5 and checked here against the engine's own field: with
  ``N0 = alpha sqrt(2 sum mu_k^2)`` the initial growth rate of ``a_j`` is
  ``mu_j (1 - rho mu_j / N0)``, so regime 3 holds iff ``N0 >= rho (mu_d + mu_{d-1})``
  (:func:`regime3_boundary`, verified by :func:`regime3_boundary_from_field`).
  ``N <= rho mu_1`` makes every rate negative, so ``N`` shrinks further: it is absorbing and
  certifies collapse.
* Numerical only: the exact collapse boundary (:func:`collapse_boundary`, bisection on the
  flow), whether the leader sequence is monotone, and everything at depth ``L >= 3``
  (:func:`leader_sequence_at_depth`; there ``l2``-SAM blows up in finite time and the "regimes"
  are read off the leader sequence before the blow-up, not from a theorem).

The path depends on ``alpha / rho`` only (scale symmetry, SPEC §4, L = 2), so every function
takes ``ratio = alpha / rho`` where it sweeps, and runs at ``rho = 1``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flows.algorithms import ALGORITHMS
from flows.clocks import CLOCKS
from flows.data import finite_array, single_example
from flows.field import Problem, log_growth_rates
from flows.integrate import simulate
from flows.model import LOSSES
from flows.results import Trajectory
from flows.signedlog import SignedLog

from .amplification import LeaderSequence, leader_sequence, leaders

REGIME_NAMES = {1: "collapse", 2: "sequential amplification", 3: "major from the start"}


def check_mu(mu) -> np.ndarray:
    """``mu`` as an increasing positive vector of length >= 2 (the paper's setting)."""
    mu = finite_array(mu, "mu", ndim=1)
    if mu.size < 2 or np.any(mu <= 0) or np.any(np.diff(mu) <= 0):
        raise ValueError("mu must be positive and strictly increasing, with at least 2 entries")
    return mu


def check_positive(value, name: str) -> float:
    """A finite number > 0."""
    value = float(value)
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be finite and > 0, got {value}")
    return value


def initial_norm(mu: np.ndarray, alpha: float) -> float:
    """``N0 = alpha sqrt(2 sum_k mu_k^2)``: ``||grad m||`` at the uniform init, L = 2."""
    return float(alpha * np.sqrt(2.0 * np.sum(mu**2)))


def regime3_boundary(mu, rho: float = 1.0) -> float:
    """Analytic ``alpha_3 = rho (mu_d + mu_{d-1}) / sqrt(2 sum mu^2)``: regime 3 iff alpha >= alpha_3."""
    mu = check_mu(mu)
    return float(check_positive(rho, "rho") * (mu[-1] + mu[-2]) / np.sqrt(2.0 * np.sum(mu**2)))


def collapse_certificate_boundary(mu, rho: float = 1.0) -> float:
    """``alpha_c = rho mu_1 / sqrt(2 sum mu^2)``: below it collapse is certain (N0 <= rho mu_1)."""
    mu = check_mu(mu)
    return float(check_positive(rho, "rho") * mu[0] / np.sqrt(2.0 * np.sum(mu**2)))


def initial_rates_from_field(mu, alpha: float, rho: float = 1.0) -> np.ndarray:
    """``d log a_j / dtau`` at ``tau = 0`` from the engine's l2-SAM field (L = 2, uniform alpha)."""
    mu = check_mu(mu)
    problem = Problem(single_example(mu), ALGORITHMS["l2-sam"], {"rho": float(rho)},
                      LOSSES["logistic"], np.array([2]), CLOCKS["rescaled"])
    theta = SignedLog.from_float(np.full((1, mu.size), float(alpha)))
    return log_growth_rates(theta, problem)[0]


def regime3_boundary_from_field(mu, rho: float = 1.0, rtol: float = 1e-12) -> float:
    """The smallest alpha at which ``e_d`` has the largest initial rate, by bisection on the
    engine's field (an independent check of :func:`regime3_boundary`)."""
    mu = check_mu(mu)

    def major_fastest(alpha: float) -> bool:
        rates = initial_rates_from_field(mu, alpha, rho)
        return bool(rates[-1] >= np.max(rates[:-1]))

    lo, hi = 1e-6 * rho, 1.0 * rho
    while not major_fastest(hi):
        hi *= 2.0
    while hi - lo > rtol * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if major_fastest(mid) else (mid, hi)
    return hi


def log_gradient_norm(log_abs_beta: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """``log N`` along a balanced L = 2 path: ``N^2 = 2 sum mu_k^2 a_k^2`` with ``a_k^2 = |beta_k|``."""
    terms = 2.0 * np.log(mu)[None, :] + log_abs_beta
    top = np.max(terms, axis=1)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return 0.5 * (np.log(2.0) + safe + np.log(np.sum(np.exp(terms - safe[:, None]), axis=1)))


@dataclass(frozen=True)
class RegimeResult:
    """A classification with its evidence.

    Attributes
    ----------
    regime : 1, 2 or 3 (None if the horizon did not decide it).
    ratio : alpha / rho.
    leaders : the leader sequence of ``|beta_j|`` over rescaled time (0-based coordinates).
    certificate : the argument that decides the regime, in words.
    collapse_time : rescaled time of the collapse (regime 1), else None.
    monotone : whether the leader sequence only moves up (reported, not forced).
    """

    regime: int | None
    ratio: float
    leaders: LeaderSequence
    certificate: str
    collapse_time: float | None
    monotone: bool


def _decide(traj: Trajectory, mu: np.ndarray, ratio: float) -> tuple[int | None, str]:
    """Regime and certificate from one trajectory at rho = 1."""
    n0 = initial_norm(mu, ratio)
    log_n = log_gradient_norm(traj.log_abs_beta, mu)
    below = np.flatnonzero(log_n <= np.log(mu[0]))
    if n0 >= mu[-1] + mu[-2]:
        return 3, f"N0 = {n0:.6g} >= rho (mu_d + mu_(d-1)) = {mu[-1] + mu[-2]:.6g}: e_d grows fastest from tau = 0"
    if traj.collapse_time is not None or below.size:
        when = traj.tau[below[0]] if below.size else traj.collapse_time
        return 1, (f"N(tau) <= rho mu_1 at tau = {when:.6g} (N0 = {n0:.6g}); every coordinate "
                   f"shrinks from there on (absorbing), collapse at tau = {traj.collapse_time}")
    last = leaders(traj.log_abs_beta)[-1]
    if last == mu.size - 1 and log_n[-1] >= np.log(mu[-1] + mu[-2]):
        return 2, (f"first leader is not d (N0 = {n0:.6g} < rho (mu_d + mu_(d-1))); at tau = "
                   f"{traj.tau[-1]:.6g} e_d leads and N >= rho (mu_d + mu_(d-1)), so it grows fastest for good")
    return None, "undecided within the horizon"


def classify(mu, alpha: float, rho: float = 1.0, t_max: float | None = None,
             n_points: int = 400, max_extensions: int = 4) -> RegimeResult:
    """Regime of l2-SAM at L = 2 on ``D_mu`` with uniform ``alpha``, from the flow plus a certificate.

    Runs the flow at ``rho = 1`` and ``alpha / rho`` (scale symmetry) for ``t_max`` (default
    ``12 / mu_1``), doubling the horizon up to ``max_extensions`` times until decided.
    """
    mu = check_mu(mu)
    ratio = check_positive(alpha, "alpha") / check_positive(rho, "rho")
    horizon = 12.0 / mu[0] if t_max is None else check_positive(t_max, "t_max")
    data = single_example(mu)
    for _ in range(max_extensions + 1):
        traj = simulate(data, "l2-sam", depth=2, alpha=ratio, rho=1.0, t_max=horizon,
                        n_points=n_points, original_time=False, rtol=1e-9)
        regime, certificate = _decide(traj, mu, ratio)
        if regime is not None:
            break
        horizon *= 2.0
    seq = leader_sequence(traj.tau, traj.log_abs_beta)
    coords = [c for c in seq.coordinates if c >= 0]
    return RegimeResult(regime, ratio, seq, certificate, traj.collapse_time,
                        bool(np.all(np.diff(coords) > 0)))


def collapse_boundary(mu, rho: float = 1.0, rtol: float = 1e-4) -> float:
    """The alpha separating collapse from amplification, by bisection on the flow.

    Bracketed by the collapse certificate (below it collapse is certain) and the regime-3
    boundary (above it no collapse); assumes one crossing in between, which the regime tests
    check on fine grids.
    """
    mu = check_mu(mu)
    lo = collapse_certificate_boundary(mu, 1.0)
    hi = regime3_boundary(mu, 1.0)
    while hi - lo > rtol * hi:
        mid = 0.5 * (lo + hi)
        if classify(mu, mid).regime == 1:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi) * float(rho)


def leader_phase_diagram(mu, ratios, tau_max: float, n_tau: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """Leading coordinate (0-based; -1 once collapsed) over an ``(alpha / rho, tau)`` grid.

    Returns ``(tau, lead)`` with ``lead`` of shape ``(len(ratios), n_tau)``.
    """
    mu = check_mu(mu)
    data = single_example(mu)
    tau = np.linspace(0.0, tau_max, n_tau)
    lead = np.empty((len(ratios), n_tau), dtype=int)
    for i, ratio in enumerate(ratios):
        traj = simulate(data, "l2-sam", depth=2, alpha=check_positive(ratio, "ratio"), rho=1.0,
                        t_max=tau_max, n_points=n_tau, original_time=False, rtol=1e-9)
        lead[i] = leaders(traj.log_abs_beta)
        lead[i, 0] = lead[i, 1]  # ties at tau = 0 (uniform init) are not a leader
    return tau, lead


def leader_sequence_at_depth(mu, alpha: float, rho: float, depth: int, t_max: float,
                             n_points: int = 400) -> tuple[LeaderSequence, Trajectory]:
    """l2-SAM leader sequence at any depth (numerical only; L >= 3 runs end at a blow-up)."""
    traj = simulate(single_example(check_mu(mu)), "l2-sam", depth=depth, alpha=alpha, rho=rho,
                    t_max=t_max, n_points=n_points, original_time=False)
    return leader_sequence(traj.tau, traj.log_abs_beta), traj

