"""The two max-margin programs of :mod:`analysis.maxmargin`, solved on equilibrated data.

Both take ``Z`` (n, d), the rows ``y_i x_i``, and return a :class:`Solution` of
``min ||beta||_p`` s.t. ``Z beta >= 1``: ``beta``, its direction, the dual variables and the KKT
residuals.

Equilibration (why a column of ``X`` scaled by 1e-150 or 1e150 changes no verdict)
---------------------------------------------------------------------------------
A solver with absolute tolerances sees entries of ``Z`` that are small next to the largest one
as zeros (HiGHS drops matrix entries below 1e-9) and costs below 1e-10 as equal. Both programs
are therefore rewritten, exactly, in variables where every scale is 1: ``Z = diag(r) A diag(c)``
with ``c_j`` and then ``r_i`` the powers of 2 of the largest ``|entry|`` of each column and row
(``ldexp``: no rounding, no under- or overflow on the way). With ``v = c * beta`` (divided by
the largest ``1 / r_i``) the constraints are ``A v >= h``, ``h = 1 / r`` in (0, 1], and the
objective is ``sum_j w_j |v_j|`` (l1) or ``sum_j w_j^2 v_j^2 / 2`` (l2) with ``w = 1 / c`` in
(0, 1]. All the scale of the data is now in ``w``:

* l1 (:func:`solve_l1`): columns whose costs ``w_j`` span more than 2^20 are split into
  groups at the widest gaps between their costs, each group spanning at most 2^20 (columns of
  close costs stay together), and taken *lexicographically* (the most expensive group first,
  with the cheaper columns free; its optimum then bounds that group while the next one is
  minimised; HiGHS on each stage). That is the weighted LP wherever the cost ratio between
  groups is beyond what an optimum trades; where the staged solution is not certified, the
  one-stage LP is solved too and the candidate with the smaller residuals kept. The vertex is
  *polished*: the square system of its active constraints on its support, and the
  multipliers from the transposed system, solved exactly.
* l2 (:func:`solve_l2`): candidates from the *least-distance program* (Lawson & Hanson,
  *Solving Least Squares Problems*, ch. 23) on the rows of ``Z`` normalised by their largest
  entry, ``u = argmin_{u >= 0} ||[G^T; t h^T] u - e_{d+1}||`` (scipy's NNLS; the scale
  ``t ~ 1 / ||beta||`` keeps ``1 - t h^T u`` near 1/2, at ``t = 1`` it cancels to nothing at
  small geometric margins): its own solution, and the exact solution of the KKT system
  ``[[W^2, A_S^T], [A_S, 0]]`` on its active set (LU with iterative refinement); where none is
  certified or the column scales span more than 2^20, also a primal active-set method
  (Nocedal & Wright, Alg. 16.3) from the l1 solution, a feasible point of the same variables.
  The certified candidate with the smallest residual is returned, else the feasible one of
  smallest norm. Where the weights' squares underflow (column scales ~1e150 apart and more)
  the residuals cannot certify a solution and the result is reported uncertified.

KKT residuals (:attr:`Solution.kkt`) are relative and so independent of every scale: the
constraint slacks are those of the original margins (``y_i <beta, x_i> - 1``), stationarity is
measured coordinate by coordinate against the size of its terms (``w_j + (|A|^T |mu|)_j``, so
rounding in a sum of large terms is not taken for a violation), dual feasibility, complementary
slackness and the duality gap against the dual objective.
"""

from .l1 import l1_residuals, solve_l1, solve_scaled_l1
from .l2 import l2_residuals, solve_l2
from .quasi_norm import (
    KKTCheck,
    KKTPoint,
    KKTPoints,
    kkt_check,
    kkt_points,
    kkt_residuals,
    quasi_norm_objective,
)
from .scaling import (
    Scaled,
    Solution,
    constraint_residuals,
    equilibrated,
    in_data_units,
    refined_solve,
    square_or_least_squares,
    worst,
)

__all__ = [
    "KKTCheck",
    "KKTPoint",
    "KKTPoints",
    "Scaled",
    "Solution",
    "constraint_residuals",
    "equilibrated",
    "in_data_units",
    "kkt_check",
    "kkt_points",
    "kkt_residuals",
    "l1_residuals",
    "l2_residuals",
    "quasi_norm_objective",
    "refined_solve",
    "solve_l1",
    "solve_l2",
    "solve_scaled_l1",
    "square_or_least_squares",
    "worst",
]
