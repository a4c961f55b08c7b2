"""LE-SAM and USAM on diagonal networks: the public API of the LE-SAM study, re-exported from
one module per concept.

* :mod:`analysis.lesam_radius`: the effective radius ``rho_t`` (:func:`lesam_radius`), schedule
  values, and the initial gradient norm that matches the methods at the start.
* :mod:`analysis.lesam_perturbation`: what the perturbation does along a flow
  (:func:`perturbation_along`, :func:`log_gradient_norms`).
* :mod:`analysis.lesam_stall`: the stall equilibrium of LE-SAM at a finite margin
  (:func:`stall_point`, :data:`SIGMA_CRITICAL`).
* :mod:`analysis.lesam_regimes`: the initial rates and the regime classification
  (:func:`classify_lesam`).
* :mod:`analysis.lesam_boundaries`: regime boundaries by bisection (:func:`lesam_boundary`,
  :func:`scan_regimes`).
* :mod:`analysis.loss_levels`: comparisons at equal training loss (:func:`at_loss_levels`).

Every public function checks its inputs (``ValueError`` naming the parameter); every search has
an iteration cap that is reported, never a silent number.
"""

from __future__ import annotations

from .lesam_boundaries import LESAMBoundary, RegimeScan, lesam_boundary, scan_regimes
from .lesam_perturbation import PerturbationSeries, log_gradient_norms, perturbation_along
from .lesam_radius import VARRHO, initial_gradient_norm, lesam_radius, schedule_values
from .lesam_regimes import LESAM_REGIMES, LESAMRegime, classify_lesam, initial_lesam_rates
from .lesam_stall import M_PEAK, SIGMA_CRITICAL, StallPoint, stall_point
from .loss_levels import at_loss_levels

__all__ = [
    "LESAM_REGIMES",
    "M_PEAK",
    "SIGMA_CRITICAL",
    "VARRHO",
    "LESAMBoundary",
    "LESAMRegime",
    "PerturbationSeries",
    "RegimeScan",
    "StallPoint",
    "at_loss_levels",
    "classify_lesam",
    "initial_gradient_norm",
    "initial_lesam_rates",
    "lesam_boundary",
    "lesam_radius",
    "log_gradient_norms",
    "perturbation_along",
    "scan_regimes",
    "schedule_values",
    "stall_point",
]
