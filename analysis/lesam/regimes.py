"""The regimes of LE-SAM (constant budget) at L = 2 on ``D_mu``: the initial rates and a
classification of a run by certificates (collapse, stall at a finite margin, or the major
feature leading for ever, reached minor first, from the start, or major-minor-major)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flows.checks import integer, real
from flows.data import single_example
from flows.integrator.driver import simulate
from flows.results import Trajectory

from ..amplification import LeaderSequence, leader_sequence, leaders
from ..regimes.classification import log_gradient_norm
from ..regimes.inputs import check_mu
from .radius import VARRHO, lesam_radius
from .stall import StallPoint, stall_point

__all__ = ["LESAM_REGIMES", "LESAMRegime", "classify_lesam", "initial_lesam_rates"]

#: Regimes of :func:`classify_lesam` (None: undecided within the horizon).
LESAM_REGIMES = {
    1: "collapse",
    2: "minor first",
    3: "major from the start",
    4: "major, minor, major",
    5: "stall at a finite margin",
}


def initial_lesam_rates(mu, alpha, sigma, rho_max, varrho: float = VARRHO) -> np.ndarray:
    """``d log a_j / dtau`` at ``tau = 0`` for LE-SAM at L = 2 on ``D_mu`` from uniform ``alpha``
    (logistic): ``mu_j (1 - rho_0 mu_j / N0)`` with ``N0 = alpha sqrt(2 sum mu^2)``,
    ``m0 = alpha^2 sum mu`` and ``rho_0 = min(sigma / (|l'(m0)| N0 + varrho), rho_max)``."""
    mu = check_mu(mu)
    alpha = real(alpha, "alpha", low=0.0, low_open=True)
    n0 = alpha * np.sqrt(2.0 * np.sum(mu**2))
    m0 = alpha**2 * np.sum(mu)
    rho0 = lesam_radius(np.log(n0) - np.logaddexp(0.0, m0), sigma, rho_max, varrho)
    return mu * (1.0 - rho0 * mu / n0)


@dataclass(frozen=True)
class LESAMRegime:
    """A classification (:func:`classify_lesam`) with its evidence.

    ``regime`` in :data:`LESAM_REGIMES` or None; ``leaders``: the leader sequence of
    ``|beta_j|`` over tau (0-based), starting with the leader of the initial rates;
    ``certificate`` in words; ``collapse_time``; ``stall`` the stall point (if any, admissible
    or not); ``tau_end`` the horizon of the deciding run; ``final_loss``.
    """

    regime: int | None
    leaders: LeaderSequence
    certificate: str
    collapse_time: float | None
    stall: StallPoint | None
    tau_end: float
    final_loss: float

    @property
    def name(self) -> str:
        return "undecided" if self.regime is None else LESAM_REGIMES[self.regime]


def classify_lesam(
    mu,
    alpha,
    sigma,
    rho_max,
    *,
    varrho: float = VARRHO,
    t_max=None,
    n_points: int = 241,
    max_extensions: int = 3,
    rtol: float = 1e-8,
) -> LESAMRegime:
    """Regime of LE-SAM (constant budget) at L = 2 on ``D_mu`` from uniform ``alpha``.

    Runs :func:`flows.simulate` (rescaled clock, logistic) to ``t_max`` (default ``12 / mu_1``),
    doubling the horizon up to ``max_extensions`` times until a certificate decides:

    1. collapse: a collapse event, or ``N(tau) <= min(rho_max mu_1, 2 (sigma / rho_max -
       varrho))`` at a sample (then ``|l'| <= 1/2`` makes the cap bind, every rate is <= 0 and
       ``N`` cannot grow: absorbing);
    5. stall: the run ends within 1e-3 (relative, in beta_1) of the admissible stall point
       (:func:`analysis.lesam.stall.stall_point`), with the other coordinates' margin share
       below 1e-6;
    2, 3, 4: ``e_d`` leads at the end with ``sqrt(2) mu_d a_d >= rho_max (mu_d + mu_{d-1})``:
       since ``rho_t <= rho_max``, ``e_d`` then has the largest rate for ever. The leader
       sequence says which: it starts below ``d`` (2, minor first), is ``d`` throughout (3), or
       starts at ``d``, leaves and returns (4).

    Undecided (``regime = None``) when no certificate holds by the last horizon, e.g. with
    ``rho_max`` within ~1e-4 of the stall radius, where the approach to (or escape from) the
    stall point is arbitrarily slow; or when the run fails (``certificate`` says so).

    ``ValueError`` (naming the parameter) before any run: ``mu`` (positive, increasing, d >= 2),
    ``alpha`` > 0, ``sigma`` a number >= 0 (a schedule is refused: the certificates assume a
    constant budget), ``rho_max`` > 0, ``varrho`` >= 0, ``t_max`` > 0 or None, ``n_points``
    int >= 3, ``max_extensions`` int in [0, 10], ``rtol`` in [1e-13, 1e-3].
    """
    mu = check_mu(mu)
    alpha = real(alpha, "alpha", low=0.0, low_open=True)
    sigma, rho_max, varrho = _checked_budget(sigma, rho_max, varrho)
    t = 12.0 / mu[0] if t_max is None else real(t_max, "t_max", low=0.0, low_open=True)
    n_points = integer(n_points, "n_points", 3)
    max_extensions = integer(max_extensions, "max_extensions", 0, 10)
    rtol = real(rtol, "rtol", low=1e-13, high=1e-3)
    stall = stall_point(mu, sigma, rho_max, varrho)
    settings = _LESAMRun(mu, alpha, sigma, rho_max, varrho, n_points, rtol)
    traj, regime, certificate = _run_until_decided(settings, stall, t, max_extensions)
    seq = _leaders_from_start(traj, initial_lesam_rates(mu, alpha, sigma, rho_max, varrho))
    return LESAMRegime(
        _major_regime(regime, seq, mu.size),
        seq,
        certificate,
        traj.collapse_time,
        stall,
        float(traj.tau[-1]),
        float(traj.loss[-1]),
    )


def _checked_budget(sigma, rho_max, varrho) -> tuple[float, float, float]:
    """``sigma`` (a number >= 0, not a schedule), ``rho_max`` > 0 and ``varrho`` >= 0."""
    if callable(sigma):
        raise ValueError(
            "sigma must be a number here (the certificates assume a constant "
            "budget); classify scheduled runs by their leader sequence"
        )
    sigma = real(sigma, "sigma", low=0.0)
    rho_max = real(rho_max, "rho_max", low=0.0, low_open=True)
    return sigma, rho_max, real(varrho, "varrho", low=0.0)


@dataclass(frozen=True)
class _LESAMRun:
    """The checked settings of the runs of :func:`classify_lesam` (all but the horizon)."""

    mu: np.ndarray
    alpha: float
    sigma: float
    rho_max: float
    varrho: float
    n_points: int
    rtol: float

    def simulate(self, t_max: float) -> Trajectory:
        """The LE-SAM flow at L = 2 on ``D_mu`` to ``t_max`` (rescaled clock)."""
        return simulate(
            single_example(self.mu),
            "le-sam",
            depth=2,
            alpha=self.alpha,
            sigma=self.sigma,
            rho_max=self.rho_max,
            varrho=self.varrho,
            t_max=t_max,
            n_points=self.n_points,
            original_time=False,
            rtol=self.rtol,
        )


def _run_until_decided(
    settings: _LESAMRun, stall: StallPoint | None, t: float, max_extensions: int
) -> tuple[Trajectory, int | None, str]:
    """Run to ``t``, doubling the horizon up to ``max_extensions`` times, until a certificate
    decides (:func:`_decide`) or a run fails; the last run with its regime and certificate."""
    s = settings
    for _ in range(max_extensions + 1):
        traj = s.simulate(t)
        regime, certificate = _decide(traj, s.mu, s.sigma, s.rho_max, s.varrho, stall)
        if regime is not None or traj.status < 0:
            break
        t *= 2.0
    if regime is None and traj.status < 0:
        certificate = f"run failed: {traj.message}"
    return traj, regime, certificate


def _major_regime(regime: int | None, seq: LeaderSequence, d: int) -> int | None:
    """Regimes 2, 3, 4 (``e_d`` leads for ever) told apart by the leader sequence: minor first
    (2), ``e_d`` throughout (3), or ``e_d``, others, ``e_d`` (4); other regimes unchanged."""
    if regime not in (2, 3, 4):
        return regime
    if seq.coordinates[0] != d - 1:
        return 2
    return 3 if len(seq.coordinates) == 1 else 4


def _leaders_from_start(traj: Trajectory, rates: np.ndarray) -> LeaderSequence:
    """The sampled leader sequence, preceded by the leader of the initial rates (if strict)."""
    seq = leader_sequence(traj.tau, traj.log_abs_beta)
    first = int(np.argmax(rates))
    if np.sum(rates == rates[first]) > 1 or (seq.coordinates and seq.coordinates[0] == first):
        return seq
    return LeaderSequence((first,) + seq.coordinates, (0.0,) + seq.switch_times)


def _decide(
    traj: Trajectory,
    mu: np.ndarray,
    sigma: float,
    rho_max: float,
    varrho: float,
    stall: StallPoint | None,
) -> tuple[int | None, str]:
    """The regime certified by the run ``traj`` (collapse 1, stall 5, or 2 for "``e_d`` leads
    for ever", told apart by :func:`_major_regime`) with the certificate in words, or
    ``(None, "undecided ...")``."""
    log_n = log_gradient_norm(traj.log_abs_beta, mu)
    bound = min(rho_max * mu[0], 2.0 * (sigma / rho_max - varrho))
    below = np.flatnonzero(log_n <= np.log(bound)) if bound > 0 else np.array([], dtype=int)
    if traj.collapse_time is not None or below.size:
        when = traj.collapse_time if traj.collapse_time is not None else traj.tau[below[0]]
        how = (
            "collapse event"
            if traj.collapse_time is not None
            else f"N <= min(rho_max mu_1, 2 (sigma / rho_max - varrho)) = {bound:.4g} (absorbing)"
        )
        return 1, f"{how} at tau = {when:.6g}"
    last = traj.log_abs_beta[-1]
    lead = leaders(traj.log_abs_beta)[-1]
    if stall is not None and stall.admissible and lead == 0:
        rest = np.sum(mu[1:] * np.exp(last[1:])) / stall.margin
        if abs(last[0] - np.log(stall.beta1)) <= 1e-3 and rest <= 1e-6:
            return 5, (
                f"at tau = {traj.tau[-1]:.4g} beta_1 = {np.exp(last[0]):.6g} is within 1e-3 "
                f"of the stall point m*/mu_1 = {stall.beta1:.6g} (margin {stall.margin:.4g}, "
                f"loss {stall.loss:.3g}, rho_t = {stall.radius:.4g} < rho_max), others "
                f"{rest:.1e} of the margin"
            )
    d = mu.size
    if lead == d - 1 and (
        np.log(np.sqrt(2.0) * mu[-1]) + 0.5 * last[-1] >= np.log(rho_max * (mu[-1] + mu[-2]))
    ):
        return 2, (
            f"at tau = {traj.tau[-1]:.4g} e_d leads with sqrt(2) mu_d a_d >= rho_max "
            "(mu_d + mu_(d-1)): largest rate for ever"
        )
    return None, f"undecided by tau = {traj.tau[-1]:.4g}"


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
