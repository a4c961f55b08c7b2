"""The stall equilibrium of LE-SAM (single example ``D_mu``, L = 2, constant ``sigma``,
logistic loss).

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
:func:`stall_point` computes it; :func:`analysis.lesam.regimes.classify_lesam` recognises a run
that ends there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit

from flows.checks import real

from ..regimes.inputs import check_mu
from .radius import VARRHO

__all__ = ["M_PEAK", "SIGMA_CRITICAL", "StallPoint", "stall_point"]

#: ``m_peak``: the maximiser of ``2 m / (1 + e^m)``, root of ``(m - 1) e^m = 1``.
M_PEAK = float(brentq(lambda m: (m - 1.0) * np.exp(m) - 1.0, 1.0, 2.0, xtol=1e-15))
#: ``max_m 2 m |l'(m)|`` for the logistic loss: no stall equilibrium for a budget above it.
SIGMA_CRITICAL = 2.0 * (M_PEAK - 1.0)


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
        return 2.0 * m * expit(-m) + varrho * np.sqrt(2.0 * m / mu[0]) - sigma

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


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
