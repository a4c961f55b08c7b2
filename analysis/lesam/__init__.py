"""LE-SAM and USAM on diagonal networks, one module per concept.

=====================================  ========================================================
:mod:`~analysis.lesam.radius`           the effective radius ``rho_t``, schedule values, the
                                       initial gradient norm that matches the methods at start
:mod:`~analysis.lesam.perturbation`     what the perturbation does along a flow
:mod:`~analysis.lesam.stall`            the stall equilibrium at a finite margin
:mod:`~analysis.lesam.regimes`          the initial rates and the regime classification
:mod:`~analysis.lesam.boundaries`       regime boundaries by bisection, regime scans
=====================================  ========================================================

Comparisons at equal training loss are :mod:`analysis.loss_levels`. Every public function
checks its inputs (``ValueError`` naming the parameter); every search has an iteration cap that
is reported, never a silent number.
"""

from .boundaries import LESAMBoundary, RegimeScan, lesam_boundary, scan_regimes
from .perturbation import PerturbationSeries, log_gradient_norms, perturbation_along
from .radius import (
    check_data,
    check_loss,
    initial_gradient_norm,
    lesam_radius,
    official_lesam_size,
    schedule_values,
)
from .regimes import LESAMRegime, classify_lesam, initial_lesam_rates
from .stall import StallPoint, stall_point

__all__ = [
    "LESAMBoundary",
    "LESAMRegime",
    "PerturbationSeries",
    "RegimeScan",
    "StallPoint",
    "check_data",
    "check_loss",
    "classify_lesam",
    "initial_gradient_norm",
    "initial_lesam_rates",
    "lesam_boundary",
    "lesam_radius",
    "log_gradient_norms",
    "official_lesam_size",
    "perturbation_along",
    "scan_regimes",
    "schedule_values",
    "stall_point",
]
