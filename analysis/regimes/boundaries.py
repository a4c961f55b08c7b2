"""The boundaries between the regimes of ``alpha`` (l2-SAM, L = 2, single example, uniform
``alpha``; see :mod:`analysis.regimes`).

* Analytic (docs/theory.md §14): with ``N0 = alpha sqrt(2 sum mu_k^2)`` (:func:`initial_norm`) the initial
  growth rate of ``a_j`` is ``mu_j (1 - rho mu_j / N0)``, so regime 3 holds iff
  ``N0 >= rho (mu_d + mu_{d-1})`` (:func:`regime3_boundary`), and ``N0 <= rho mu_1`` certifies
  collapse (:func:`collapse_certificate_boundary`).
* From the engine's field: the initial rates (:func:`initial_rates_from_field`) and the
  regime-3 boundary by bisection on them (:func:`regime3_boundary_from_field`), an independent
  check of the formula.
* From the flow (numerical only): the collapse boundary, by bisection on :func:`classify`
  between the two analytic bounds (:func:`collapse_boundary_search`, :func:`collapse_boundary`).

Every search has an iteration cap: hitting it is reported (:class:`BoundarySearch`) or raises a
``RuntimeError`` naming the cap, never a silent number.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from flows.algorithms import ALGORITHMS
from flows.checks import integer, positive, real
from flows.clocks import CLOCKS
from flows.data import single_example
from flows.field import Problem, log_growth_rates
from flows.model import LOSSES
from flows.signedlog import SignedLog

from .classification import classify
from .inputs import check_mu, check_rtol, scaled_mu, times_rho, unit_mu


def initial_norm(mu, alpha: float) -> float:
    """``N0 = alpha sqrt(2 sum_k mu_k^2)``: ``||grad m||`` at the uniform init, L = 2
    (computed without intermediate overflow; ``inf`` only if ``N0`` itself exceeds float64)."""
    mu = check_mu(mu)
    alpha = positive(alpha, "alpha")
    with np.errstate(over="ignore"):
        return float(alpha * mu[-1] * np.sqrt(2.0 * np.sum(unit_mu(mu) ** 2)))


def regime3_boundary(mu, rho: float = 1.0) -> float:
    """Analytic ``alpha_3 = rho (mu_d + mu_{d-1}) / sqrt(2 sum mu^2)``: regime 3 iff alpha >= alpha_3."""
    mu = check_mu(mu)
    rho = positive(rho, "rho")
    m = unit_mu(mu)
    return times_rho(float((m[-1] + m[-2]) / np.sqrt(2.0 * np.sum(m**2))), rho)


def collapse_certificate_boundary(mu, rho: float = 1.0) -> float:
    """``alpha_c = rho mu_1 / sqrt(2 sum mu^2)``: below it collapse is certain (N0 <= rho mu_1)."""
    mu = check_mu(mu)
    rho = positive(rho, "rho")
    m = unit_mu(mu)
    return times_rho(float(m[0] / np.sqrt(2.0 * np.sum(m**2))), rho)


def initial_rates_from_field(mu, alpha: float, rho: float = 1.0) -> np.ndarray:
    """``d log a_j / dtau`` at ``tau = 0`` from the engine's l2-SAM field (L = 2, uniform alpha).

    ``alpha > 0`` and ``rho >= 0`` finite (``ValueError`` naming them); entries are ``-inf``
    only where the true rate is below ``-1.8e308``.
    """
    mu = check_mu(mu)
    alpha = positive(alpha, "alpha")
    rho = real(rho, "rho", low=0.0)
    problem = Problem(
        single_example(mu),
        ALGORITHMS["l2-sam"],
        {"rho": rho},
        LOSSES["logistic"],
        np.array([2]),
        CLOCKS["rescaled"],
    )
    theta = SignedLog.from_float(np.full((1, mu.size), alpha))
    return log_growth_rates(theta, problem)[0]


def regime3_boundary_from_field(
    mu, rho: float = 1.0, rtol: float = 1e-12, max_iter: int = 200
) -> float:
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
    rho = positive(rho, "rho")
    rtol = check_rtol(rtol)
    max_iter = integer(max_iter, "max_iter", 1)
    regime3_boundary(mu, rho)  # the answer is representable at this rho, before any work
    m = unit_mu(mu)

    def major_fastest(ratio: float) -> bool:
        rates = initial_rates_from_field(m, ratio, 1.0)
        if np.any(np.isnan(rates)):
            raise RuntimeError(f"the engine's field gave NaN rates at alpha / rho = {ratio:g}")
        return bool(rates[-1] >= np.max(rates[:-1]))

    lo, hi = _widened_bracket(major_fastest, 1e-6, 1.0)
    lo, hi, done = _bisect(major_fastest, lo, hi, rtol, max_iter)
    if done:
        return times_rho(hi, rho)
    raise RuntimeError(
        f"regime3_boundary_from_field: max_iter = {max_iter} bisection steps did "
        f"not reach rtol = {rtol:g}; bracket [{lo * rho:.17g}, {hi * rho:.17g}]"
    )


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


def collapse_boundary_search(
    mu, rho: float = 1.0, rtol: float = 1e-4, max_iter: int = 64
) -> BoundarySearch:
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
    rho = positive(rho, "rho")
    rtol = check_rtol(rtol)
    max_iter = integer(max_iter, "max_iter", 1)
    scaled_mu(mu)  # mu_d / mu_1 representable, before any run
    collapse_certificate_boundary(mu, rho)  # both ends of the bracket representable at rho
    regime3_boundary(mu, rho)
    undecided: list[float] = []
    iterations = 0

    def no_collapse(ratio: float) -> bool:
        nonlocal iterations
        regime = classify(mu, ratio).regime
        iterations += 1
        if regime is None:
            undecided.append(ratio * rho)
        return regime != 1

    lo, hi, _ = _bisect(
        no_collapse,
        collapse_certificate_boundary(mu, 1.0),
        regime3_boundary(mu, 1.0),
        rtol,
        max_iter,
    )
    return BoundarySearch(
        alpha=0.5 * (lo + hi) * rho,
        lo=lo * rho,
        hi=hi * rho,
        iterations=iterations,
        converged=bool(hi - lo <= rtol * hi),
        undecided=tuple(undecided),
    )


def collapse_boundary(mu, rho: float = 1.0, rtol: float = 1e-4, max_iter: int = 64) -> float:
    """The alpha separating collapse from amplification (:func:`collapse_boundary_search`).

    Warns (``RuntimeWarning``) when some classification was undecided, and raises
    ``RuntimeError`` naming max_iter when the bisection did not converge to ``rtol`` (the
    partial bracket is in :func:`collapse_boundary_search`); ``ValueError`` for bad input.
    """
    res = collapse_boundary_search(mu, rho, rtol, max_iter)
    if not res.converged:
        raise RuntimeError(
            f"collapse_boundary: max_iter = {max_iter} bisection steps did not "
            f"reach rtol = {rtol:g}; bracket [{res.lo:.6g}, {res.hi:.6g}] "
            f"(collapse_boundary_search returns it)"
        )
    if res.undecided:
        warnings.warn(
            f"collapse_boundary: classify was undecided at alpha = "
            f"{', '.join(f'{a:.6g}' for a in res.undecided)} (counted as no collapse)",
            RuntimeWarning,
            stacklevel=2,
        )
    return res.alpha


def _widened_bracket(
    major_fastest: Callable[[float], bool], lo: float, hi: float
) -> tuple[float, float]:
    """``[lo, hi]`` with ``major_fastest`` False at ``lo`` and True at ``hi``: ``hi`` doubled,
    then ``lo`` halved, at most 64 times each (``RuntimeError`` if that does not do)."""
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
    return lo, hi


def _bisect(
    high_side: Callable[[float], bool], lo: float, hi: float, rtol: float, max_iter: int
) -> tuple[float, float, bool]:
    """Bisect ``[lo, hi]`` (``high_side(mid)`` True moves ``hi`` to ``mid``) at most
    ``max_iter`` times. Returns ``(lo, hi, done)``: ``done`` when ``hi - lo <= rtol * hi`` or the
    bracket cannot shrink in float64; False when ``max_iter`` ran out first."""
    for _ in range(max_iter):
        mid = 0.5 * (lo + hi)
        if hi - lo <= rtol * hi or not lo < mid < hi:
            return lo, hi, True
        lo, hi = (lo, mid) if high_side(mid) else (mid, hi)
    return lo, hi, hi - lo <= rtol * hi


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
