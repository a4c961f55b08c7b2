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
takes ``ratio = alpha / rho`` where it sweeps, and runs at ``rho = 1``. It also depends on the
scale of ``mu`` only through the clock (``mu -> s mu`` is ``tau -> tau / s`` in the rescaled
clock: the field ``grad m(theta + eps)`` is linear in ``mu`` and ``eps`` is normalised), so the
flows run on ``mu / s`` with ``s`` a power of 2 (exact) and ``mu_1 / s`` in ``[1, 2)``, and
times are scaled back: results are the same at every scale of ``mu`` that float64 holds.

Every public function validates its inputs before any flow is simulated (``ValueError`` naming
the parameter), and every search has an iteration cap: hitting it is reported
(:class:`BoundarySearch`) or raises a ``RuntimeError`` naming the cap, never a silent number.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from flows.algorithms import ALGORITHMS
from flows.clocks import CLOCKS
from flows.data import finite_array, single_example
from flows.field import Problem, log_growth_rates
from flows.initialization import check_depth, initialization
from flows.integrate import simulate
from flows.model import LOSSES
from flows.results import Trajectory
from flows.signedlog import SignedLog

from ._checks import integer, log_abs_beta_array, numeric_array, real
from .amplification import LeaderSequence, leader_sequence, leaders

REGIME_NAMES = {1: "collapse", 2: "sequential amplification", 3: "major from the start"}

#: Smallest relative tolerance of the bisections (below it the bracket cannot shrink in float64).
MIN_RTOL = 1e-15


def check_mu(mu) -> np.ndarray:
    """``mu`` as an increasing positive vector of length >= 2 (the paper's setting)."""
    mu = finite_array(mu, "mu", ndim=1)
    if mu.size < 2 or np.any(mu <= 0) or np.any(np.diff(mu) <= 0):
        raise ValueError("mu must be positive and strictly increasing, with at least 2 entries")
    return mu


def check_positive(value, name: str) -> float:
    """A finite real number > 0 (``ValueError`` naming ``name`` otherwise, also for text or
    None)."""
    return real(value, name, low=0.0, low_open=True)


def _check_rtol(rtol) -> float:
    return real(rtol, "rtol", low=MIN_RTOL, high=1.0, high_open=True)


def _times_rho(ratio: float, rho: float) -> float:
    """``ratio * rho`` (an alpha); ``ValueError`` naming rho and mu if it is not a normal
    float64 number (0, subnormal or inf would be a wrong-looking boundary)."""
    with np.errstate(over="ignore", under="ignore"):
        alpha = ratio * rho
    if not (np.isfinite(alpha) and alpha >= np.finfo(float).tiny):
        raise ValueError(f"rho = {rho!r}, mu: the boundary alpha = {ratio:.6g} * rho is not a "
                         f"normal float64 number (it under- or overflows)")
    return float(alpha)


def _unit_mu(mu: np.ndarray) -> np.ndarray:
    """``mu / mu_d``: the boundary formulas are homogeneous of degree 0 in ``mu``, and this keeps
    ``sum mu^2`` in range at every scale."""
    return mu / mu[-1]


def _clock_scale(mu: np.ndarray) -> float:
    """The power of 2 ``s`` with ``mu_1 / s`` in ``[1, 2)`` (dividing by it is exact)."""
    return float(np.ldexp(1.0, int(np.frexp(mu[0])[1]) - 1))


def _scaled_mu(mu: np.ndarray) -> tuple[np.ndarray, float]:
    """``(mu / s, s)`` (see :func:`_clock_scale`); ``ValueError`` naming mu if ``mu_d / mu_1``
    is beyond float64 (the flow's time scales 1 / mu_d .. 1 / mu_1 cannot both be held)."""
    s = _clock_scale(mu)
    mu_hat = mu / s
    if not np.all(np.isfinite(mu_hat)):
        raise ValueError(f"mu: mu_d / mu_1 = {mu[-1]:.3g} / {mu[0]:.3g} is beyond float64")
    return mu_hat, s


def _horizon(t_max, mu: np.ndarray, s: float, name: str, doublings: int = 0) -> float:
    """The horizon in the clock of ``mu / s`` (``12 / mu_1`` by default), checked so that it
    and its value after ``doublings`` doublings are positive and finite in both clocks."""
    if t_max is None:
        horizon_hat, name = 12.0 / (mu[0] / s), "mu"
    else:
        horizon_hat = check_positive(t_max, name) * s
    longest = horizon_hat * 2.0 ** doublings
    if not (0 < horizon_hat and np.isfinite(longest) and np.isfinite(longest / s)):
        what = "the default horizon 12 / mu_1" if name == "mu" else name
        raise ValueError(f"{name}: {what} (x 2^{doublings} extensions) in units of 1 / mu_1 "
                         f"is not representable in float64")
    return horizon_hat


def initial_norm(mu, alpha: float) -> float:
    """``N0 = alpha sqrt(2 sum_k mu_k^2)``: ``||grad m||`` at the uniform init, L = 2
    (computed without intermediate overflow; ``inf`` only if ``N0`` itself exceeds float64)."""
    mu = check_mu(mu)
    alpha = check_positive(alpha, "alpha")
    with np.errstate(over="ignore"):
        return float(alpha * mu[-1] * np.sqrt(2.0 * np.sum(_unit_mu(mu) ** 2)))


def regime3_boundary(mu, rho: float = 1.0) -> float:
    """Analytic ``alpha_3 = rho (mu_d + mu_{d-1}) / sqrt(2 sum mu^2)``: regime 3 iff alpha >= alpha_3."""
    mu = check_mu(mu)
    rho = check_positive(rho, "rho")
    m = _unit_mu(mu)
    return _times_rho(float((m[-1] + m[-2]) / np.sqrt(2.0 * np.sum(m**2))), rho)


def collapse_certificate_boundary(mu, rho: float = 1.0) -> float:
    """``alpha_c = rho mu_1 / sqrt(2 sum mu^2)``: below it collapse is certain (N0 <= rho mu_1)."""
    mu = check_mu(mu)
    rho = check_positive(rho, "rho")
    m = _unit_mu(mu)
    return _times_rho(float(m[0] / np.sqrt(2.0 * np.sum(m**2))), rho)


def initial_rates_from_field(mu, alpha: float, rho: float = 1.0) -> np.ndarray:
    """``d log a_j / dtau`` at ``tau = 0`` from the engine's l2-SAM field (L = 2, uniform alpha).

    ``alpha > 0`` and ``rho >= 0`` finite (``ValueError`` naming them); entries are ``-inf``
    only where the true rate is below ``-1.8e308``.
    """
    mu = check_mu(mu)
    alpha = check_positive(alpha, "alpha")
    rho = real(rho, "rho", low=0.0)
    problem = Problem(single_example(mu), ALGORITHMS["l2-sam"], {"rho": rho},
                      LOSSES["logistic"], np.array([2]), CLOCKS["rescaled"])
    theta = SignedLog.from_float(np.full((1, mu.size), alpha))
    return log_growth_rates(theta, problem)[0]


def regime3_boundary_from_field(mu, rho: float = 1.0, rtol: float = 1e-12,
                                max_iter: int = 200) -> float:
    """The smallest alpha at which ``e_d`` has the largest initial rate, by bisection on the
    engine's field (an independent check of :func:`regime3_boundary`).

    The initial rates depend on ``alpha / rho`` only and scale linearly with ``mu``, so the
    field is evaluated at ``rho = 1`` on ``mu / mu_d`` and the ratio is multiplied by ``rho``.
    The bracket ``[1e-6, 1]`` (the analytic boundary is below 1) is checked and widened at most
    64 times; the bisection stops at relative width ``rtol`` (in ``[1e-15, 1)``) or after
    ``max_iter`` steps.

    Raises
    ------
    ValueError
        ``mu``, ``rho`` (> 0), ``rtol`` or ``max_iter`` (int >= 1) invalid.
    RuntimeError
        If the field never favours ``e_d`` in the widened bracket, or ``max_iter`` steps do not
        reach ``rtol`` (the message names max_iter and gives the bracket).
    """
    mu = check_mu(mu)
    rho = check_positive(rho, "rho")
    rtol = _check_rtol(rtol)
    max_iter = integer(max_iter, "max_iter", 1)
    regime3_boundary(mu, rho)  # the answer is representable at this rho, before any work
    m = _unit_mu(mu)

    def major_fastest(ratio: float) -> bool:
        rates = initial_rates_from_field(m, ratio, 1.0)
        if np.any(np.isnan(rates)):
            raise RuntimeError(f"the engine's field gave NaN rates at alpha / rho = {ratio:g}")
        return bool(rates[-1] >= np.max(rates[:-1]))

    lo, hi = 1e-6, 1.0
    for _ in range(64):
        if major_fastest(hi):
            break
        hi *= 2.0
    else:
        raise RuntimeError(f"the field does not favour e_d for any alpha / rho <= {hi:g}")
    for _ in range(64):
        if not major_fastest(lo):
            break
        lo *= 0.5
    else:
        raise RuntimeError(f"the field favours e_d for every alpha / rho >= {lo:g}")
    for _ in range(max_iter):
        mid = 0.5 * (lo + hi)
        if hi - lo <= rtol * hi or not lo < mid < hi:
            return _times_rho(hi, rho)
        lo, hi = (lo, mid) if major_fastest(mid) else (mid, hi)
    if hi - lo <= rtol * hi:
        return _times_rho(hi, rho)
    raise RuntimeError(f"regime3_boundary_from_field: max_iter = {max_iter} bisection steps did "
                       f"not reach rtol = {rtol:g}; bracket [{lo * rho:.17g}, {hi * rho:.17g}]")


def log_gradient_norm(log_abs_beta: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """``log N`` along a balanced L = 2 path: ``N^2 = 2 sum mu_k^2 a_k^2`` with ``a_k^2 = |beta_k|``.

    ``log_abs_beta`` (T, d) without NaN (``-inf`` for 0, ``+inf`` allowed), ``mu`` (d,) finite
    and > 0; ``ValueError`` naming the parameter otherwise.
    """
    log_abs_beta = log_abs_beta_array(log_abs_beta)
    mu = finite_array(mu, "mu", ndim=1)
    if np.any(mu <= 0):
        raise ValueError("mu must be > 0")
    if log_abs_beta.shape[1] != mu.size:
        raise ValueError(f"log_abs_beta must have d = {mu.size} columns (one per mu_k), got "
                         f"shape {log_abs_beta.shape}")
    terms = 2.0 * np.log(mu)[None, :] + log_abs_beta
    top = np.max(terms, axis=1)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
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


def _decide(traj: Trajectory, mu: np.ndarray, ratio: float, s: float = 1.0) -> tuple[int | None, str]:
    """Regime and certificate from one trajectory at rho = 1 on ``mu`` (= the user's mu / s;
    numbers in the certificate are given for the user's mu: N and mu times s, tau over s)."""
    n0 = ratio * mu[-1] * np.sqrt(2.0 * np.sum(_unit_mu(mu) ** 2))
    log_n = log_gradient_norm(traj.log_abs_beta, mu)
    below = np.flatnonzero(log_n <= np.log(mu[0]))
    top2 = mu[-1] + mu[-2]
    with np.errstate(over="ignore"):
        n0_s, top2_s = n0 * s, top2 * s
    if n0 >= top2:
        return 3, f"N0 = {n0_s:.6g} >= rho (mu_d + mu_(d-1)) = {top2_s:.6g}: e_d grows fastest from tau = 0"
    if traj.collapse_time is not None or below.size:
        when = traj.tau[below[0]] if below.size else traj.collapse_time
        collapse = None if traj.collapse_time is None else traj.collapse_time / s
        return 1, (f"N(tau) <= rho mu_1 at tau = {when / s:.6g} (N0 = {n0_s:.6g}); every coordinate "
                   f"shrinks from there on (absorbing), collapse at tau = {collapse}")
    last = leaders(traj.log_abs_beta)[-1]
    if last == mu.size - 1 and log_n[-1] >= np.log(top2):
        return 2, (f"first leader is not d (N0 = {n0_s:.6g} < rho (mu_d + mu_(d-1))); at tau = "
                   f"{traj.tau[-1] / s:.6g} e_d leads and N >= rho (mu_d + mu_(d-1)), so it grows fastest for good")
    return None, "undecided within the horizon"


def classify(mu, alpha: float, rho: float = 1.0, t_max: float | None = None,
             n_points: int = 400, max_extensions: int = 4) -> RegimeResult:
    """Regime of l2-SAM at L = 2 on ``D_mu`` with uniform ``alpha``, from the flow plus a certificate.

    Runs the flow at ``rho = 1`` and ``alpha / rho`` (scale symmetry) for ``t_max`` (default
    ``12 / mu_1``), doubling the horizon up to ``max_extensions`` times until decided (at most
    ``max_extensions + 1`` runs; still undecided: ``regime = None``). The flow runs on
    ``mu / s`` (module doc) and its times are scaled back, so any float64 scale of ``mu`` works.

    Raises
    ------
    ValueError
        Before any run, naming the parameter: ``mu`` (positive, increasing, d >= 2),
        ``alpha``, ``rho`` (finite, > 0, with ``alpha / rho`` a positive float64 number),
        ``t_max`` (finite > 0, or None), ``n_points`` (int >= 2), ``max_extensions`` (int in
        [0, 60]); or a horizon that is not representable.
    """
    mu = check_mu(mu)
    alpha = check_positive(alpha, "alpha")
    rho = check_positive(rho, "rho")
    with np.errstate(over="ignore", under="ignore"):
        ratio = alpha / rho
    if not (np.isfinite(ratio) and ratio > 0):
        raise ValueError(f"alpha / rho = {alpha:g} / {rho:g} is not a positive float64 number")
    n_points = integer(n_points, "n_points", 2)
    max_extensions = integer(max_extensions, "max_extensions", 0, 60)
    mu_hat, s = _scaled_mu(mu)
    horizon = _horizon(t_max, mu, s, "t_max", max_extensions)
    data = single_example(mu_hat)
    for _ in range(max_extensions + 1):
        traj = simulate(data, "l2-sam", depth=2, alpha=ratio, rho=1.0, t_max=horizon,
                        n_points=n_points, original_time=False, rtol=1e-9)
        regime, certificate = _decide(traj, mu_hat, ratio, s)
        if regime is not None:
            break
        horizon *= 2.0
    seq = leader_sequence(traj.tau, traj.log_abs_beta)
    seq = LeaderSequence(seq.coordinates, tuple(t / s for t in seq.switch_times))
    coords = [c for c in seq.coordinates if c >= 0]
    collapse = None if traj.collapse_time is None else traj.collapse_time / s
    return RegimeResult(regime, ratio, seq, certificate, collapse,
                        bool(np.all(np.diff(coords) > 0)))


@dataclass(frozen=True)
class BoundarySearch:
    """Result of the bisection for the collapse boundary (:func:`collapse_boundary_search`).

    Attributes
    ----------
    alpha : the estimate ``(lo + hi) / 2`` (times rho).
    lo, hi : the bracket: classify gives regime 1 at ``lo`` and not 1 at ``hi`` (times rho; the
        initial bracket is the collapse certificate and the regime-3 boundary, certified
        analytically).
    iterations : bisection steps taken (flows run).
    converged : ``hi - lo <= rtol * hi``; False when ``max_iter`` was hit first.
    undecided : the alphas (times rho) where classify was undecided (regime None) within its
        horizon; they were counted as "no collapse" (the flow had not collapsed), so the
        boundary is only as good as that guess there.
    """

    alpha: float
    lo: float
    hi: float
    iterations: int
    converged: bool
    undecided: tuple[float, ...] = ()


def collapse_boundary_search(mu, rho: float = 1.0, rtol: float = 1e-4,
                             max_iter: int = 64) -> BoundarySearch:
    """The alpha separating collapse from amplification, by bisection on the flow, with its
    bracket and how the search ended.

    Bracketed by the collapse certificate (below it collapse is certain) and the regime-3
    boundary (above it no collapse); assumes one crossing in between, which the regime tests
    check on fine grids. Stops when ``hi - lo <= rtol * hi`` or after ``max_iter`` flows.

    Raises
    ------
    ValueError
        Before any run: ``mu``, ``rho`` (finite > 0), ``rtol`` (in ``[1e-15, 1)``), ``max_iter``
        (int >= 1).
    """
    mu = check_mu(mu)
    rho = check_positive(rho, "rho")
    rtol = _check_rtol(rtol)
    max_iter = integer(max_iter, "max_iter", 1)
    _scaled_mu(mu)  # mu_d / mu_1 representable, before any run
    collapse_certificate_boundary(mu, rho)  # both ends of the bracket representable at rho
    regime3_boundary(mu, rho)
    lo = collapse_certificate_boundary(mu, 1.0)
    hi = regime3_boundary(mu, 1.0)
    undecided: list[float] = []
    iterations = 0
    while hi - lo > rtol * hi and iterations < max_iter:
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        regime = classify(mu, mid).regime
        iterations += 1
        if regime is None:
            undecided.append(mid * rho)
        if regime == 1:
            lo = mid
        else:
            hi = mid
    return BoundarySearch(alpha=0.5 * (lo + hi) * rho, lo=lo * rho, hi=hi * rho,
                          iterations=iterations, converged=bool(hi - lo <= rtol * hi),
                          undecided=tuple(undecided))


def collapse_boundary(mu, rho: float = 1.0, rtol: float = 1e-4, max_iter: int = 64) -> float:
    """The alpha separating collapse from amplification (:func:`collapse_boundary_search`).

    Warns (``RuntimeWarning``) when some classification was undecided, and raises
    ``RuntimeError`` naming max_iter when the bisection did not converge to ``rtol`` (the
    partial bracket is in :func:`collapse_boundary_search`); ``ValueError`` for bad input.
    """
    res = collapse_boundary_search(mu, rho, rtol, max_iter)
    if not res.converged:
        raise RuntimeError(f"collapse_boundary: max_iter = {max_iter} bisection steps did not "
                           f"reach rtol = {rtol:g}; bracket [{res.lo:.6g}, {res.hi:.6g}] "
                           f"(collapse_boundary_search returns it)")
    if res.undecided:
        warnings.warn(f"collapse_boundary: classify was undecided at alpha = "
                      f"{', '.join(f'{a:.6g}' for a in res.undecided)} (counted as no collapse)",
                      RuntimeWarning, stacklevel=2)
    return res.alpha


def leader_phase_diagram(mu, ratios, tau_max: float, n_tau: int = 200) -> tuple[np.ndarray, np.ndarray]:
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
        raise ValueError(f"ratios must be a non-empty 1-D array of finite numbers > 0, got {ratios!r}")
    n_tau = integer(n_tau, "n_tau", 2)
    mu_hat, s = _scaled_mu(mu)
    tau_max_hat = _horizon(tau_max, mu, s, "tau_max")
    data = single_example(mu_hat)
    tau = np.linspace(0.0, check_positive(tau_max, "tau_max"), n_tau)
    lead = np.empty((r.size, n_tau), dtype=int)
    for i, ratio in enumerate(r):
        traj = simulate(data, "l2-sam", depth=2, alpha=float(ratio), rho=1.0,
                        t_max=tau_max_hat, n_points=n_tau, original_time=False, rtol=1e-9)
        row = leaders(traj.log_abs_beta)[:n_tau]
        lead[i] = -2
        lead[i, :row.size] = row
        if row.size > 1:
            lead[i, 0] = lead[i, 1]  # ties at tau = 0 (uniform init) are not a leader
    return tau, lead


def leader_sequence_at_depth(mu, alpha: float, rho: float, depth: int, t_max: float,
                             n_points: int = 400) -> tuple[LeaderSequence, Trajectory]:
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
    traj = simulate(single_example(mu), "l2-sam", depth=depth, alpha=alpha, rho=rho,
                    t_max=t_max, n_points=n_points, original_time=False)
    return leader_sequence(traj.tau, traj.log_abs_beta), traj
