"""The regime of one ``alpha`` (:func:`classify`): l2-SAM at L = 2 on ``D_mu`` with uniform
``alpha``, from the flow plus a certificate that decides it.

The certificates use the gradient norm ``N(tau)`` along the path (:func:`log_gradient_norm`):
``N0 >= rho (mu_d + mu_{d-1})`` makes ``e_d`` grow fastest from the start (regime 3);
``N <= rho mu_1`` is absorbing and certifies collapse (regime 1); ``e_d`` leading with
``N >= rho (mu_d + mu_{d-1})`` certifies that it leads for good (regime 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flows.checks import integer, positive, real_array
from flows.data import single_example
from flows.integrator.driver import simulate
from flows.results import Trajectory

from .._checks import log_abs_beta_array
from ..amplification import LeaderSequence, leader_sequence, leaders
from .inputs import check_mu, horizon, scaled_mu, unit_mu

REGIME_NAMES = {1: "collapse", 2: "sequential amplification", 3: "major from the start"}


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


def classify(
    mu,
    alpha: float,
    rho: float = 1.0,
    t_max: float | None = None,
    n_points: int = 400,
    max_extensions: int = 4,
) -> RegimeResult:
    """Regime of l2-SAM at L = 2 on ``D_mu`` with uniform ``alpha``, from the flow plus a certificate.

    Runs the flow at ``rho = 1`` and ``alpha / rho`` (scale symmetry) for ``t_max`` (default
    ``12 / mu_1``), doubling the horizon up to ``max_extensions`` times until decided (at most
    ``max_extensions + 1`` runs; still undecided: ``regime = None``). The flow runs on
    ``mu / s`` (:func:`analysis.regimes.inputs.scaled_mu`) and its times are scaled back, so
    any float64 scale of ``mu`` works.

    Raises
    ------
    ValueError
        Before any run, naming the parameter: ``mu`` (positive, increasing, d >= 2),
        ``alpha``, ``rho`` (finite, > 0, with ``alpha / rho`` a positive float64 number),
        ``t_max`` (finite > 0, or None), ``n_points`` (int >= 2), ``max_extensions`` (int in
        [0, 60]); or a horizon that is not representable.
    """
    mu = check_mu(mu)
    alpha = positive(alpha, "alpha")
    rho = positive(rho, "rho")
    with np.errstate(over="ignore", under="ignore"):
        ratio = alpha / rho
    if not (np.isfinite(ratio) and ratio > 0):
        raise ValueError(f"alpha / rho = {alpha:g} / {rho:g} is not a positive float64 number")
    n_points = integer(n_points, "n_points", 2)
    max_extensions = integer(max_extensions, "max_extensions", 0, 60)
    mu_hat, s = scaled_mu(mu)
    t_max_hat = horizon(t_max, mu, s, "t_max", max_extensions)
    data = single_example(mu_hat)
    for _ in range(max_extensions + 1):
        traj = simulate(
            data,
            "l2-sam",
            depth=2,
            alpha=ratio,
            rho=1.0,
            t_max=t_max_hat,
            n_points=n_points,
            original_time=False,
            rtol=1e-9,
        )
        regime, certificate = _decide(traj, mu_hat, ratio, s)
        if regime is not None:
            break
        t_max_hat *= 2.0
    seq = leader_sequence(traj.tau, traj.log_abs_beta)
    seq = LeaderSequence(seq.coordinates, tuple(t / s for t in seq.switch_times))
    coords = [c for c in seq.coordinates if c >= 0]
    collapse = None if traj.collapse_time is None else traj.collapse_time / s
    return RegimeResult(
        regime, ratio, seq, certificate, collapse, bool(np.all(np.diff(coords) > 0))
    )


def log_gradient_norm(log_abs_beta: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """``log N`` along a balanced L = 2 path: ``N^2 = 2 sum mu_k^2 a_k^2`` with ``a_k^2 = |beta_k|``.

    ``log_abs_beta`` (T, d) without NaN (``-inf`` for 0, ``+inf`` allowed), ``mu`` (d,) finite
    and > 0; ``ValueError`` naming the parameter otherwise.
    """
    log_abs_beta = log_abs_beta_array(log_abs_beta)
    mu = real_array(mu, "mu", ndim=1)
    if np.any(mu <= 0):
        raise ValueError("mu must be > 0")
    if log_abs_beta.shape[1] != mu.size:
        raise ValueError(
            f"log_abs_beta must have d = {mu.size} columns (one per mu_k), got "
            f"shape {log_abs_beta.shape}"
        )
    terms = 2.0 * np.log(mu)[None, :] + log_abs_beta
    top = np.max(terms, axis=1)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return 0.5 * (np.log(2.0) + safe + np.log(np.sum(np.exp(terms - safe[:, None]), axis=1)))


def _decide(
    traj: Trajectory, mu: np.ndarray, ratio: float, s: float = 1.0
) -> tuple[int | None, str]:
    """Regime and certificate from one trajectory at rho = 1 on ``mu`` (= the user's mu / s;
    numbers in the certificate are given for the user's mu: N and mu times s, tau over s)."""
    n0 = ratio * mu[-1] * np.sqrt(2.0 * np.sum(unit_mu(mu) ** 2))
    log_n = log_gradient_norm(traj.log_abs_beta, mu)
    below = np.flatnonzero(log_n <= np.log(mu[0]))
    top2 = mu[-1] + mu[-2]
    with np.errstate(over="ignore"):
        n0_s, top2_s = n0 * s, top2 * s
    if n0 >= top2:
        return (
            3,
            f"N0 = {n0_s:.6g} >= rho (mu_d + mu_(d-1)) = {top2_s:.6g}: e_d grows fastest from tau = 0",
        )
    when = traj.tau[below[0]] if below.size else traj.collapse_time  # N <= rho mu_1, or collapse
    if when is not None:
        collapse = None if traj.collapse_time is None else traj.collapse_time / s
        return 1, (
            f"N(tau) <= rho mu_1 at tau = {when / s:.6g} (N0 = {n0_s:.6g}); every coordinate "
            f"shrinks from there on (absorbing), collapse at tau = {collapse}"
        )
    last = leaders(traj.log_abs_beta)[-1]
    if last == mu.size - 1 and log_n[-1] >= np.log(top2):
        return 2, (
            f"first leader is not d (N0 = {n0_s:.6g} < rho (mu_d + mu_(d-1))); at tau = "
            f"{traj.tau[-1] / s:.6g} e_d leads and N >= rho (mu_d + mu_(d-1)), so it grows fastest for good"
        )
    return None, "undecided within the horizon"


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
