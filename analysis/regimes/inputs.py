"""Inputs of the regime analysis (:mod:`analysis.regimes`) and its scale symmetries.

Checks raise ``ValueError`` naming the parameter. The path depends on ``alpha / rho`` only, and
on the scale of ``mu`` only through the clock (``mu -> s mu`` is ``tau -> tau / s``): the
flows run at ``rho = 1`` on ``mu / s`` (:func:`scaled_mu`), and answers are scaled back
(:func:`times_rho`, times over ``s``).
"""

from __future__ import annotations

import numpy as np

from flows.checks import positive, real, real_array

#: Smallest relative tolerance of the bisections (below it the bracket cannot shrink in float64).
MIN_RTOL = 1e-15


def check_mu(mu) -> np.ndarray:
    """``mu`` as an increasing positive vector of length >= 2 (the paper's setting)."""
    mu = real_array(mu, "mu", ndim=1)
    if mu.size < 2 or np.any(mu <= 0) or np.any(np.diff(mu) <= 0):
        raise ValueError("mu must be positive and strictly increasing, with at least 2 entries")
    return mu


def check_rtol(rtol) -> float:
    """A relative tolerance of a bisection, in ``[MIN_RTOL, 1)``."""
    return real(rtol, "rtol", low=MIN_RTOL, high=1.0, high_open=True)


def times_rho(ratio: float, rho: float) -> float:
    """``ratio * rho`` (an alpha); ``ValueError`` naming rho and mu if it is not a normal
    float64 number (0, subnormal or inf would be a wrong-looking boundary)."""
    with np.errstate(over="ignore", under="ignore"):
        alpha = ratio * rho
    if not (np.isfinite(alpha) and alpha >= np.finfo(float).tiny):
        raise ValueError(
            f"rho = {rho!r}, mu: the boundary alpha = {ratio:.6g} * rho is not a "
            f"normal float64 number (it under- or overflows)"
        )
    return float(alpha)


def unit_mu(mu: np.ndarray) -> np.ndarray:
    """``mu / mu_d``: the boundary formulas are homogeneous of degree 0 in ``mu``, and this keeps
    ``sum mu^2`` in range at every scale."""
    return mu / mu[-1]


def scaled_mu(mu: np.ndarray) -> tuple[np.ndarray, float]:
    """``(mu / s, s)`` with ``s`` the power of 2 that puts ``mu_1 / s`` in ``[1, 2)`` (dividing
    by it is exact); ``ValueError`` naming mu if ``mu_d / mu_1`` is beyond float64 (the flow's
    time scales 1 / mu_d .. 1 / mu_1 cannot both be held)."""
    s = float(np.ldexp(1.0, int(np.frexp(mu[0])[1]) - 1))
    with np.errstate(over="ignore"):
        mu_hat = mu / s
    if not np.all(np.isfinite(mu_hat)):
        raise ValueError(f"mu: mu_d / mu_1 = {mu[-1]:.3g} / {mu[0]:.3g} is beyond float64")
    return mu_hat, s


def horizon(t_max, mu: np.ndarray, s: float, name: str, doublings: int = 0) -> float:
    """The horizon in the clock of ``mu / s`` (``12 / mu_1`` by default), checked so that it
    and its value after ``doublings`` doublings are positive and finite in both clocks."""
    if t_max is None:
        horizon_hat, name = 12.0 / (mu[0] / s), "mu"
    else:
        horizon_hat = positive(t_max, name) * s
    longest = horizon_hat * 2.0**doublings
    if not (0 < horizon_hat and np.isfinite(longest) and np.isfinite(longest / s)):
        what = "the default horizon 12 / mu_1" if name == "mu" else name
        raise ValueError(
            f"{name}: {what} (x 2^{doublings} extensions) in units of 1 / mu_1 "
            f"is not representable in float64"
        )
    return horizon_hat


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
