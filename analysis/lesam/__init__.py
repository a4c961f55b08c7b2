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
