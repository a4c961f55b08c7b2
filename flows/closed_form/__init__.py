"""Closed forms of the balanced single-example flows (GD and l_inf-SAM at any depth).

==================================  ============================================================
:mod:`~flows.closed_form.solutions`  ``gd`` and ``linf_sam``: the solutions in log space
:mod:`~flows.closed_form.branches`   the branches they are made of (growth, decay, blow-up, hit)
:mod:`~flows.closed_form.checks`     input checks (``ValueError`` naming the parameter)
==================================  ============================================================
"""

from .branches import even_hit, growth_above_rho, linear_growth, odd_saturate, power_growth
from .checks import check_alpha, check_depth, check_mu, check_rho, check_tau
from .solutions import ClosedFormSolution, gd, linf_sam

__all__ = [
    "ClosedFormSolution",
    "check_alpha",
    "check_depth",
    "check_mu",
    "check_rho",
    "check_tau",
    "even_hit",
    "gd",
    "growth_above_rho",
    "linear_growth",
    "linf_sam",
    "odd_saturate",
    "power_growth",
]
