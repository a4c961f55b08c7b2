"""LE-SAM and USAM on diagonal networks: the effective radius and loss budget along a flow, the
stall equilibrium of LE-SAM, its regimes and their boundaries, and comparisons at equal loss.

LE-SAM ("fix the loss, not the radius") perturbs by ``eps = rho_t grad L / ||grad L||`` with

    rho_t = min(sigma(t) / (||grad L(theta(t))||_2 + varrho), rho_max),

so that the first-order loss increase ``eps . grad L = rho_t ||grad L||`` equals the budget
``sigma`` until the cap ``rho_max`` binds. USAM perturbs by ``eps = rho grad L`` (radius
``rho ||grad L||``). ``||grad L||`` runs over all ``L*d`` parameters and is computed here in
signed-log arithmetic (:func:`flows.model.loss_gradient_signed`), so ``log ||grad L||`` is finite
at any margin that float64 holds and ``-inf`` beyond (the gradient is then 0 to every float
precision, and ``rho_t = min(sigma / varrho, rho_max)``, as in the engine).

**The stall equilibrium** (single example ``D_mu``, L = 2, constant ``sigma``, logistic loss).
At ``theta* = (a*, 0, ..., 0)`` in both layers the perturbed point has ``a'_1 = 0`` exactly when
``rho_t = sqrt(2) a*``; with ``N = ||grad m|| = sqrt(2) mu_1 a*`` and ``m = mu_1 a*^2`` this is

    sigma = 2 m |l'(m)| + varrho sqrt(2 m / mu_1),

independent of ``mu_2..mu_d``. ``2 m |l'(m)| = 2 m / (1 + e^m)`` peaks at ``m_peak`` solving
``(m - 1) e^m = 1`` (1.2785), with value ``SIGMA_CRITICAL = 2 (m_peak - 1) = 0.5569``. For
``sigma < SIGMA_CRITICAL`` the root ``m* > m_peak`` is linearly stable: along ``e_1`` the rate has
the sign of ``sigma - 2 m |l'(m)|``, which is decreasing there, and the other coordinates have rates
``mu_j (1 - mu_j / mu_1) < 0``. It is an equilibrium of LE-SAM when the cap does not bind,
``sqrt(2) a* < rho_max``. There ``grad L(theta + eps) = 0``: the flow (and the discrete algorithm)
stops at a *finite* margin ``m*`` on the minor feature, with training loss ``l(m*) > 0``.
:func:`stall_point` computes it; :func:`classify_lesam` recognises a run that ends there.

Every public function checks its inputs (``ValueError`` naming the parameter); every search has
an iteration cap that is reported, never a silent number.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

from flows.algorithms import get_algorithm, hyperparameters_at
from flows.clocks import get_clock
from flows.data import Dataset, single_example
from flows.field import Problem, perturbed_point
from flows.integrate import simulate
from flows.model import (
    LOSSES,
    as_theta,
    evaluate,
    loss_gradient,
    loss_gradient_signed,
    margin_gradient,
    margins,
)
from flows.results import Trajectory
from flows.signedlog import SignedLog, log_norm2

from ._checks import integer, numeric_array, real, trajectory
from .amplification import LeaderSequence, leader_sequence, leaders
from .classification import log_gradient_norm
from .regime_inputs import check_mu

__all__ = [
    "LESAM_REGIMES",
    "SIGMA_CRITICAL",
    "VARRHO",
    "LESAMBoundary",
    "LESAMRegime",
    "PerturbationSeries",
    "StallPoint",
    "at_loss_levels",
    "classify_lesam",
    "initial_gradient_norm",
    "initial_lesam_rates",
    "lesam_boundary",
    "lesam_radius",
    "log_gradient_norms",
    "perturbation_along",
    "schedule_values",
    "stall_point",
]

#: LE-SAM's default stabiliser ``varrho``.
VARRHO = 1e-12
#: ``m_peak``: the maximiser of ``2 m / (1 + e^m)``, root of ``(m - 1) e^m = 1``.
M_PEAK = float(brentq(lambda m: (m - 1.0) * np.exp(m) - 1.0, 1.0, 2.0, xtol=1e-15))
#: ``max_m 2 m |l'(m)|`` for the logistic loss: no stall equilibrium for a budget above it.
SIGMA_CRITICAL = 2.0 * (M_PEAK - 1.0)
#: Regimes of :func:`classify_lesam` (None: undecided within the horizon).
LESAM_REGIMES = {
    1: "collapse",
    2: "minor first",
    3: "major from the start",
    4: "major, minor, major",
    5: "stall at a finite margin",
}


# ----------------------------------------------------------------------------- the radius


def _nonnegative(value, name: str) -> np.ndarray:
    arr = numeric_array(value, name)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
    return arr


def lesam_radius(log_grad_norm, sigma, rho_max, varrho: float = VARRHO) -> np.ndarray:
    """``rho_t = min(sigma / (||grad L|| + varrho), rho_max)`` from ``log ||grad L||``.

    ``log_grad_norm`` is an array without NaN (``-inf``: a zero gradient, ``+inf``: beyond
    float64, radius 0); ``sigma`` and ``rho_max`` (finite, >= 0) broadcast against it;
    ``varrho`` finite >= 0. ``sigma = 0`` gives 0 (also where ``||grad L|| + varrho = 0``).
    """
    lg = numeric_array(log_grad_norm, "log_grad_norm")
    if np.any(np.isnan(lg)):
        raise ValueError("log_grad_norm must not contain NaN")
    sigma = _nonnegative(sigma, "sigma")
    rho_max = _nonnegative(rho_max, "rho_max")
    varrho = real(varrho, "varrho", low=0.0)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        denominator = np.exp(lg) + varrho
        ratio = np.where(sigma == 0, 0.0, sigma / denominator)
    return np.minimum(ratio, rho_max)


def schedule_values(value, times, name: str = "value") -> np.ndarray:
    """A hyper-parameter (number or schedule, :mod:`flows.schedules`) at clock ``times``."""
    times = numeric_array(times, "times", ndim=1)
    if callable(value):
        return np.asarray(hyperparameters_at({name: value}, times)[name], dtype=float) * np.ones(
            times.shape
        )
    return np.full(times.shape, real(value, name, low=0.0))


def initial_gradient_norm(data: Dataset, alpha, depth: int, loss: str = "logistic") -> float:
    """``||grad L(theta(0))||_2`` of a balanced init ``w^(l) = alpha`` (scalar or (d,)): the
    scale that matches the methods at the start (``sigma = rho ||grad L0||`` for LE-SAM,
    ``rho / ||grad L0||`` for USAM give l2-SAM's perturbation at ``theta(0)``)."""
    data = _check_data(data)
    depth = integer(depth, "depth", 1)
    a = numeric_array(alpha, "alpha")
    if a.ndim > 1 or not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"alpha must be a positive scalar or (d,) vector, got {alpha!r}")
    theta = as_theta(np.broadcast_to(a, (depth, data.d)).copy(), data)
    return float(np.linalg.norm(loss_gradient(theta, data, _check_loss(loss))))


def _check_data(data) -> Dataset:
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flows.Dataset, got {type(data).__name__}")
    return data


def _check_loss(loss) -> str:
    if not isinstance(loss, str) or loss not in LOSSES:
        raise ValueError(f"loss must be one of {sorted(LOSSES)}, got {loss!r}")
    return loss


# ------------------------------------------------------------------- along a trajectory


def _samples(traj: Trajectory, data: Dataset):
    """Parameters per sample as full-network signed-log points (L, d), after the checks."""
    traj = trajectory(traj)
    data = _check_data(data)
    if traj.log_abs_theta.shape[2] != data.d:
        raise ValueError(
            f"data must have d = {traj.log_abs_theta.shape[2]} features like traj, got d = {data.d}"
        )
    for sign, log_abs in zip(traj.sign_theta, traj.log_abs_theta, strict=True):
        yield SignedLog(np.asarray(sign, dtype=float), np.asarray(log_abs, dtype=float))


def log_gradient_norms(traj: Trajectory, data: Dataset, loss: str = "logistic") -> np.ndarray:
    """``log ||grad L(theta(t))||_2`` over all ``L*d`` parameters at every sample (T,).

    Signed-log arithmetic (as :func:`flows.model.loss_gradient`, which it equals wherever the
    gradient is a float): finite at any margin inside float64, ``-inf`` at ``theta = 0`` and
    once the loss weights vanish to every precision (margins beyond ~1e308)."""
    lo = LOSSES[_check_loss(loss)]
    out = []
    for theta in _samples(traj, data):
        ev = evaluate(theta, np.ones(theta.sign.shape[0], dtype=int), data, lo)
        out.append(log_norm2(loss_gradient_signed(ev).log_abs))
    return np.array(out)


@dataclass(frozen=True, eq=False)
class PerturbationSeries:
    """What the perturbation does along a flow, one entry per sample (T,).

    Attributes
    ----------
    t : the run's clock time (schedules are functions of it).
    log_grad_norm : ``log ||grad L(theta)||_2`` (:func:`log_gradient_norms`).
    radius : ``||eps(theta)||_2``: 0 (GD), ``rho`` (l2-SAM), ``rho sqrt(#{g != 0})`` (l_inf-SAM),
        ``rho ||grad L||`` (USAM), ``rho_t`` (LE-SAM, :func:`lesam_radius`).
    budget : LE-SAM's ``sigma(t)`` (NaN for the other algorithms).
    capped : LE-SAM's cap binds (``rho_t = rho_max``); False for the others.
    first_order : ``eps . grad L`` (``rho_t ||grad L||`` for LE-SAM: ``= sigma`` uncapped).
    log_loss, log_loss_perturbed : ``log L(theta)``, ``log L(theta + eps)`` (finite at any
        margin inside float64; ``L(theta + eps) - L(theta) = L expm1(difference)``).
    update_angle : angle (radians) between the algorithm's update ``-grad L(theta + eps)`` and
        the gradient step ``-grad L(theta)``: how much the perturbation (the "curvature signal",
        ``grad L(theta + eps) - grad L(theta) ~ H eps``) turns the step. NaN where either is 0;
        ill-conditioned where the update itself vanishes (at a stall point).
    relative_change : ``||grad L(theta + eps) - grad L(theta)|| / ||grad L(theta)||``: the size
        of that correction against the gradient (0: none; 1 at a stall, where it cancels the
        gradient; ``inf`` where the ratio exceeds float64, NaN where ``grad L(theta) = 0``).
    """

    t: np.ndarray
    log_grad_norm: np.ndarray
    radius: np.ndarray
    budget: np.ndarray
    capped: np.ndarray
    first_order: np.ndarray
    log_loss: np.ndarray
    log_loss_perturbed: np.ndarray
    update_angle: np.ndarray
    relative_change: np.ndarray


def _log_loss(theta: SignedLog, data: Dataset, loss: str) -> float:
    """``log L(theta)``, stable for large margins (``log l(m) ~ -m``)."""
    beta = SignedLog(np.prod(theta.sign, axis=0), np.sum(theta.log_abs, axis=0))
    m = margins(beta, data).to_float()
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        if loss == "logistic":
            big = m > 30.0
            terms = np.where(
                big,
                -m - 0.5 * np.exp(-np.where(big, m, 30.0)),
                np.log(np.logaddexp(0.0, -np.where(big, 30.0, m))),
            )
        else:
            terms = -m
    top = np.max(terms)
    if not np.isfinite(top):
        return float(top)
    return float(top + np.log(np.mean(np.exp(terms - top))))


def _angle(a: SignedLog, b: SignedLog) -> float:
    """Angle between two signed-log vectors (NaN if either is 0)."""
    units = []
    for v in (a, b):
        top = np.max(v.log_abs)
        if not np.isfinite(top):
            return float("nan")
        u = np.where(v.sign == 0, 0.0, v.sign * np.exp(v.log_abs - top))
        units.append(u / np.linalg.norm(u))
    u, w = units
    return float(2.0 * np.arctan2(np.linalg.norm(u - w), np.linalg.norm(u + w)))


def _relative_change(g: SignedLog, g_shifted: SignedLog) -> float:
    """``||g' - g|| / ||g||`` from signed-log vectors, relative to ``||g||`` (no overflow on
    the way; ``inf`` if the ratio does)."""
    log_norm = log_norm2(g.log_abs)
    if not np.isfinite(log_norm):
        return float("nan")
    with np.errstate(over="ignore", invalid="ignore"):
        u = np.where(g.sign == 0, 0.0, g.sign * np.exp(g.log_abs - log_norm))
        v = np.where(
            g_shifted.sign == 0, 0.0, g_shifted.sign * np.exp(g_shifted.log_abs - log_norm)
        )
        out = float(np.linalg.norm(v - u))
    return out if not np.isnan(out) else float("inf")


def perturbation_along(
    traj: Trajectory, data: Dataset, loss: str = "logistic"
) -> PerturbationSeries:
    """Radius, budget, first-order and exact loss increase and update angle of the flow's own
    algorithm (``traj.algorithm``, ``traj.hyperparameters`` at ``traj.t``) at every sample.

    ``data`` and ``loss`` must be those of the run (a Trajectory does not record them). The
    perturbed point is the engine's (:func:`flows.field.perturbed_point`); the radius and the
    first-order term follow the formulas of :class:`PerturbationSeries`.
    """
    loss = _check_loss(loss)
    points = list(_samples(traj, data))
    algo = get_algorithm(traj.algorithm)
    T, L = len(points), traj.log_abs_theta.shape[1]
    lg = log_gradient_norms(traj, data, loss)
    hp = {k: schedule_values(v, traj.t, k) for k, v in traj.hyperparameters.items()}
    nonzero = np.zeros(T)
    log_l1 = np.full(T, -np.inf)
    lo = LOSSES[loss]
    mult = np.ones(L, dtype=int)
    angle = np.full(T, np.nan)
    change = np.full(T, np.nan)
    log_loss = np.empty(T)
    log_loss_p = np.empty(T)
    clock = get_clock(traj.clock)
    for k, theta in enumerate(points):
        ev = evaluate(theta, mult, data, lo)
        g = loss_gradient_signed(ev)
        nonzero[k] = np.count_nonzero(g.sign)
        top = np.max(g.log_abs)
        if np.isfinite(top):
            log_l1[k] = top + np.log(np.sum(np.exp(g.log_abs - top)))
        problem = Problem(
            data, algo, hyperparameters_at(traj.hyperparameters, traj.t[k]), lo, mult, clock
        )
        shifted = perturbed_point(theta, problem)
        ev_shifted = evaluate(shifted, mult, data, lo)
        angle[k] = _angle(margin_gradient(ev), margin_gradient(ev_shifted))
        change[k] = _relative_change(g, loss_gradient_signed(ev_shifted))
        log_loss[k] = _log_loss(theta, data, loss)
        log_loss_p[k] = _log_loss(shifted, data, loss)
    with np.errstate(over="ignore", under="ignore"):
        norm = np.exp(lg)
    budget = np.full(T, np.nan)
    capped = np.zeros(T, dtype=bool)
    name = traj.algorithm
    if name == "gd":
        radius = np.zeros(T)
    elif name == "l2-sam":
        radius = np.where(np.isneginf(lg), 0.0, hp["rho"])
    elif name == "linf-sam":
        radius = hp["rho"] * np.sqrt(nonzero)
    elif name == "usam":
        radius = hp["rho"] * norm
    elif name == "le-sam":
        radius = lesam_radius(lg, hp["sigma"], hp["rho_max"], float(hp["varrho"][0]))
        budget = hp["sigma"]
        capped = radius >= hp["rho_max"]
    else:  # pragma: no cover - a new algorithm needs its radius here
        raise ValueError(f"traj.algorithm {name!r} has no radius formula here")
    with np.errstate(over="ignore", under="ignore"):
        first = hp["rho"] * np.exp(log_l1) if name == "linf-sam" else radius * norm
    return PerturbationSeries(
        np.asarray(traj.t, dtype=float),
        lg,
        radius,
        budget,
        capped,
        first,
        log_loss,
        log_loss_p,
        angle,
        change,
    )


# --------------------------------------------------------------------- stall equilibrium


@dataclass(frozen=True)
class StallPoint:
    """LE-SAM's finite-margin equilibrium on ``D_mu`` at L = 2 (module docstring).

    ``margin`` m*, ``weight`` a* (both layers, coordinate 1), ``beta1`` = a*^2 = m*/mu_1,
    ``radius`` = sqrt(2) a* (rho_t there), ``loss`` = l(m*), ``admissible``: radius < rho_max
    (the cap does not bind, so it is an equilibrium of the flow)."""

    margin: float
    weight: float
    beta1: float
    radius: float
    loss: float
    admissible: bool


def stall_point(mu, sigma, rho_max=np.inf, varrho: float = VARRHO) -> StallPoint | None:
    """The stable stall equilibrium of LE-SAM (logistic loss, L = 2, ``D_mu``, constant
    ``sigma``), or None when there is none (``sigma >= SIGMA_CRITICAL`` or ``sigma = 0``).

    ``mu`` positive, strictly increasing, d >= 2; ``sigma``, ``varrho`` finite >= 0;
    ``rho_max`` > 0 (``inf`` allowed). The margin solves
    ``2 m expit(-m) + varrho sqrt(2 m / mu_1) = sigma`` on ``m > M_PEAK`` (brentq).
    """
    mu = check_mu(mu)
    sigma = real(sigma, "sigma", low=0.0)
    rho_max = real(rho_max, "rho_max", low=0.0, low_open=True, finite=False)
    varrho = real(varrho, "varrho", low=0.0)

    def excess(m: float) -> float:
        return 2.0 * m / (1.0 + np.exp(m)) + varrho * np.sqrt(2.0 * m / mu[0]) - sigma

    if sigma == 0 or excess(M_PEAK) <= 0:
        return None
    hi = 2.0 * M_PEAK
    for _ in range(60):  # doubling cap: m up to ~1e18
        if excess(hi) < 0:
            break
        hi *= 2.0
    else:
        return None
    m = float(brentq(excess, M_PEAK, hi, xtol=1e-14, rtol=1e-14))
    a = float(np.sqrt(m / mu[0]))
    radius = float(np.sqrt(2.0) * a)
    return StallPoint(m, a, m / mu[0], radius, float(np.logaddexp(0.0, -m)), radius < rho_max)


# ------------------------------------------------------------------------------- regimes


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
       (:func:`stall_point`), with the other coordinates' margin share below 1e-6;
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
    if callable(sigma):
        raise ValueError(
            "sigma must be a number here (the certificates assume a constant "
            "budget); classify scheduled runs by their leader sequence"
        )
    sigma = real(sigma, "sigma", low=0.0)
    rho_max = real(rho_max, "rho_max", low=0.0, low_open=True)
    varrho = real(varrho, "varrho", low=0.0)
    t = 12.0 / mu[0] if t_max is None else real(t_max, "t_max", low=0.0, low_open=True)
    n_points = integer(n_points, "n_points", 3)
    max_extensions = integer(max_extensions, "max_extensions", 0, 10)
    rtol = real(rtol, "rtol", low=1e-13, high=1e-3)
    stall = stall_point(mu, sigma, rho_max, varrho)
    data = single_example(mu)
    for _ in range(max_extensions + 1):
        traj = simulate(
            data,
            "le-sam",
            depth=2,
            alpha=alpha,
            sigma=sigma,
            rho_max=rho_max,
            varrho=varrho,
            t_max=t,
            n_points=n_points,
            original_time=False,
            rtol=rtol,
        )
        regime, certificate = _decide(traj, mu, sigma, rho_max, varrho, stall)
        if regime is not None or traj.status < 0:
            break
        t *= 2.0
    if regime is None and traj.status < 0:
        certificate = f"run failed: {traj.message}"
    seq = _leaders_from_start(traj, initial_lesam_rates(mu, alpha, sigma, rho_max, varrho))
    if regime in (2, 3, 4):
        regime = 2 if seq.coordinates[0] != mu.size - 1 else (3 if len(seq.coordinates) == 1 else 4)
    return LESAMRegime(
        regime,
        seq,
        certificate,
        traj.collapse_time,
        stall,
        float(traj.tau[-1]),
        float(traj.loss[-1]),
    )


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


@dataclass(frozen=True)
class LESAMBoundary:
    """A bisection of :func:`lesam_boundary`: the boundary lies in ``[lower, upper]`` of
    ``parameter`` when ``converged`` (regimes ``regime_lower`` below, ``regime_upper`` above);
    ``note`` says why not otherwise."""

    parameter: str
    lower: float
    upper: float
    regime_lower: int | None
    regime_upper: int | None
    iterations: int
    converged: bool
    note: str

    @property
    def value(self) -> float:
        """Geometric midpoint of the final bracket."""
        return float(np.sqrt(self.lower * self.upper))


def lesam_boundary(
    mu,
    parameter: str,
    lower: float,
    upper: float,
    *,
    alpha=None,
    sigma=None,
    rho_max=None,
    rtol: float = 1e-3,
    max_iter: int = 40,
    **classify_options,
) -> LESAMBoundary:
    """Geometric bisection in ``parameter`` (``'alpha'``, ``'sigma'`` or ``'rho_max'``) between
    ``lower`` and ``upper`` for the change of :func:`classify_lesam`'s regime, the other two
    parameters fixed (the swept one's keyword is ignored).

    Stops when ``upper / lower - 1 <= rtol`` (converged), or, not converged, after ``max_iter``
    classifications, when both ends share a regime (no boundary in the bracket), or when a
    midpoint is undecided or in a third regime (``note`` names it). ``ValueError`` for an
    unknown ``parameter``, ``0 < lower < upper`` finite violated, ``rtol`` not in
    [1e-12, 1), ``max_iter`` not an int in [1, 200], or a missing fixed parameter.
    """
    if parameter not in ("alpha", "sigma", "rho_max"):
        raise ValueError(f"parameter must be 'alpha', 'sigma' or 'rho_max', got {parameter!r}")
    lower = real(lower, "lower", low=0.0, low_open=True)
    upper = real(upper, "upper", low=0.0, low_open=True)
    if not lower < upper:
        raise ValueError(f"lower must be < upper, got {lower!r}, {upper!r}")
    rtol = real(rtol, "rtol", low=1e-12, high=1.0, high_open=True)
    max_iter = integer(max_iter, "max_iter", 1, 200)
    fixed = {"alpha": alpha, "sigma": sigma, "rho_max": rho_max}
    for key, value in fixed.items():
        if key != parameter and value is None:
            raise ValueError(f"{key} must be given (it is fixed while {parameter} is swept)")

    def regime(x: float) -> int | None:
        args = {**fixed, parameter: x}
        return classify_lesam(
            mu, args["alpha"], args["sigma"], args["rho_max"], **classify_options
        ).regime

    lo_r, hi_r = regime(lower), regime(upper)
    count = 2
    if lo_r == hi_r or lo_r is None or hi_r is None:
        return LESAMBoundary(
            parameter,
            lower,
            upper,
            lo_r,
            hi_r,
            count,
            False,
            f"regimes at the ends: {lo_r}, {hi_r}: no boundary to bisect",
        )
    while upper / lower - 1.0 > rtol:
        if count >= max_iter:
            return LESAMBoundary(
                parameter,
                lower,
                upper,
                lo_r,
                hi_r,
                count,
                False,
                f"max_iter = {max_iter} classifications reached",
            )
        mid = float(np.sqrt(lower * upper))
        r = regime(mid)
        count += 1
        if r == lo_r:
            lower = mid
        elif r == hi_r:
            upper = mid
        else:
            return LESAMBoundary(
                parameter,
                lower,
                upper,
                lo_r,
                hi_r,
                count,
                False,
                f"regime {r} at {parameter} = {mid:.6g} (neither end's)",
            )
    return LESAMBoundary(parameter, lower, upper, lo_r, hi_r, count, True, "converged")


@dataclass(frozen=True)
class RegimeScan:
    """:func:`scan_regimes`: the classification at every grid value and each boundary bisected
    between neighbours of different (decided) regimes."""

    parameter: str
    grid: tuple[float, ...]
    regimes: tuple[LESAMRegime, ...]
    boundaries: tuple[LESAMBoundary, ...]


def scan_regimes(
    mu,
    parameter: str,
    grid,
    *,
    alpha=None,
    sigma=None,
    rho_max=None,
    rtol: float = 1e-2,
    max_iter: int = 30,
    **classify_options,
) -> RegimeScan:
    """:func:`classify_lesam` along ``grid`` (increasing, > 0) of ``parameter``, the other two
    fixed, then :func:`lesam_boundary` between every pair of neighbours whose regimes differ
    (neighbours with an undecided regime are not bisected). Checks as :func:`lesam_boundary`;
    ``grid`` a 1-D increasing array of finite numbers > 0 with at most 200 entries."""
    values = numeric_array(grid, "grid", ndim=1)
    if not (
        0 < values.size <= 200
        and np.all(np.isfinite(values))
        and np.all(values > 0)
        and np.all(np.diff(values) > 0)
    ):
        raise ValueError("grid must be 1 to 200 increasing finite numbers > 0")
    if parameter not in ("alpha", "sigma", "rho_max"):
        raise ValueError(f"parameter must be 'alpha', 'sigma' or 'rho_max', got {parameter!r}")
    fixed = {"alpha": alpha, "sigma": sigma, "rho_max": rho_max}
    for key, value in fixed.items():
        if key != parameter and value is None:
            raise ValueError(f"{key} must be given (it is fixed while {parameter} is swept)")
    found = []
    for x in values:
        args = {**fixed, parameter: float(x)}
        found.append(
            classify_lesam(mu, args["alpha"], args["sigma"], args["rho_max"], **classify_options)
        )
    bounds = []
    for k in range(values.size - 1):
        a, b = found[k].regime, found[k + 1].regime
        if a != b and a is not None and b is not None:
            bounds.append(
                lesam_boundary(
                    mu,
                    parameter,
                    float(values[k]),
                    float(values[k + 1]),
                    **fixed,
                    rtol=rtol,
                    max_iter=max_iter,
                    **classify_options,
                )
            )
    return RegimeScan(parameter, tuple(float(v) for v in values), tuple(found), tuple(bounds))


# -------------------------------------------------------------------------- equal loss


def at_loss_levels(loss, values, levels) -> np.ndarray:
    """``values`` at the first time the training loss falls to each of ``levels``.

    ``loss`` and ``values`` are (T,) samples of one run. Between the two samples that bracket a
    level, ``log value`` is interpolated linearly in ``log loss`` (a power law: the Hessian of
    these losses scales like a power of the loss), or ``value`` itself where a bracketing value
    is <= 0. NaN for a level the loss never reaches from above (one below the final loss, or
    above the initial loss unless equal to it) and where a bracketing value is NaN.
    ``ValueError`` naming the parameter: ``loss`` not 1-D, NaN or < 0; ``values`` of another
    length; ``levels`` not > 0 and finite.
    """
    loss = numeric_array(loss, "loss", ndim=1)
    if np.any(np.isnan(loss)) or np.any(loss < 0):
        raise ValueError("loss must be >= 0 without NaN")
    values = numeric_array(values, "values", ndim=1)
    if values.shape != loss.shape:
        raise ValueError(
            f"values must have one entry per loss sample ({loss.size}), got {values.size}"
        )
    levels = numeric_array(levels, "levels", ndim=1)
    if not np.all(np.isfinite(levels)) or np.any(levels <= 0):
        raise ValueError("levels must be finite and > 0")
    out = np.full(levels.shape, np.nan)
    with np.errstate(divide="ignore"):
        log_loss = np.log(loss)
    for i, level in enumerate(levels):
        hit = np.flatnonzero(loss <= level)
        if hit.size == 0:
            continue
        k = int(hit[0])
        if k == 0:
            out[i] = values[0] if loss[0] == level else np.nan
            continue
        x0, x1 = log_loss[k - 1], log_loss[k]
        w = 1.0 if x1 == x0 or not np.isfinite(x1) else (x0 - np.log(level)) / (x0 - x1)
        v0, v1 = values[k - 1], values[k]
        if v0 > 0 and v1 > 0:
            out[i] = np.exp(np.log(v0) + w * (np.log(v1) - np.log(v0)))
        else:
            out[i] = v0 + w * (v1 - v0)
    return out
