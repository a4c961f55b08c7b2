"""The three regimes of the initialization scale for l2-SAM (L = 2, single example, uniform alpha).

=====================================  =================================================
:mod:`~analysis.regimes.inputs`        checks, scale symmetries, horizons
:mod:`~analysis.regimes.boundaries`    regime-3 and collapse boundaries (formulas, bisection)
:mod:`~analysis.regimes.classification`  the regime of one ``alpha`` with its certificate
:mod:`~analysis.regimes.leaders`       leader phase diagrams; leader sequences at depth
=====================================  =================================================

Paper (docs/theory.md §14, "Three regimes"): as ``alpha`` grows, (1) the predictor collapses to 0,
(2) sequential feature amplification: the leading coordinate ``argmax_j |beta_j(tau)|`` starts
at a minor coordinate and moves up to ``d``, (3) ``e_d`` leads from the start.

What is proved and what is numerical here:

* Proved (paper, as summarised): the existence of the regimes and minor-first / major-last
  amplification (Thm 4.4/4.5, Prop 4.7) for ``L = 2``.
* Derived in docs/theory.md §13 and checked here against the engine's own field: with
  ``N0 = alpha sqrt(2 sum mu_k^2)`` the initial growth rate of ``a_j`` is
  ``mu_j (1 - rho mu_j / N0)``, so regime 3 holds iff ``N0 >= rho (mu_d + mu_{d-1})``
  (:func:`regime3_boundary`, verified by :func:`regime3_boundary_from_field`; both in
  :mod:`analysis.regimes.boundaries`).
  ``N <= rho mu_1`` makes every rate negative, so ``N`` shrinks further: it is absorbing and
  certifies collapse.
* Numerical only: the regime of one alpha (:func:`classify`, from the flow plus a certificate;
  :mod:`analysis.regimes.classification`), the exact collapse boundary (:func:`collapse_boundary`,
  bisection on the flow), whether the leader sequence is monotone, and everything at depth
  ``L >= 3`` (:func:`leader_sequence_at_depth`; there ``l2``-SAM blows up in finite time and
  the "regimes" are read off the leader sequence before the blow-up, not from a theorem).

The path depends on ``alpha / rho`` only (scale symmetry, docs/theory.md §8, L = 2), so every function
takes ``ratio = alpha / rho`` where it sweeps, and runs at ``rho = 1``. It also depends on the
scale of ``mu`` only through the clock (``mu -> s mu`` is ``tau -> tau / s`` in the rescaled
clock: the field ``grad m(theta + eps)`` is linear in ``mu`` and ``eps`` is normalised), so the
flows run on ``mu / s`` with ``s`` a power of 2 (exact) and ``mu_1 / s`` in ``[1, 2)``, and
times are scaled back: results are the same at every scale of ``mu`` that float64 holds
(:mod:`analysis.regimes.inputs`).

Every public function validates its inputs before any flow is simulated (``ValueError`` naming
the parameter), and every search has an iteration cap: hitting it is reported
(:class:`BoundarySearch`) or raises a ``RuntimeError`` naming the cap, never a silent number.
"""

from .boundaries import (
    BoundarySearch,
    collapse_boundary,
    collapse_boundary_search,
    collapse_certificate_boundary,
    initial_norm,
    initial_rates_from_field,
    regime3_boundary,
    regime3_boundary_from_field,
)
from .classification import RegimeResult, classify, log_gradient_norm
from .inputs import check_mu, check_rtol, horizon, scaled_mu, times_rho, unit_mu
from .leaders import leader_phase_diagram, leader_sequence_at_depth

__all__ = [
    "BoundarySearch",
    "RegimeResult",
    "check_mu",
    "check_rtol",
    "classify",
    "collapse_boundary",
    "collapse_boundary_search",
    "collapse_certificate_boundary",
    "horizon",
    "initial_norm",
    "initial_rates_from_field",
    "leader_phase_diagram",
    "leader_sequence_at_depth",
    "log_gradient_norm",
    "regime3_boundary",
    "regime3_boundary_from_field",
    "scaled_mu",
    "times_rho",
    "unit_mu",
]
