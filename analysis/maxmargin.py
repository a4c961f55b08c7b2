"""Max-margin reference classifiers (docs/theory.md §10): the l2 and l1 max-margin directions.

* ``p = 2``: ``min ||beta||_2`` s.t. ``y_i <beta, x_i> >= 1`` (a QP). GD on a linear model
  (``L = 1``) and l2/l_inf-SAM with ``L = 1`` (Thm 3.1) converge in direction to it.
* ``p = 1``: ``min ||beta||_1`` s.t. the same constraints (an LP). GD with ``L = 2`` converges in
  direction to it; on the single example ``D_mu`` it is ``e_d`` (Thm 4.2 claims the same for
  l2-SAM when it does not collapse).

How they are solved: :mod:`analysis.margin_programs` (exactly equilibrated data; a lexicographic
HiGHS LP for l1, exact KKT solves on an active set for l2; the relative KKT residuals are
reported in :attr:`MaxMargin.kkt`, the certificate in :attr:`MaxMargin.status`). Angles between directions: :mod:`analysis.angles`.

Non-uniqueness (l1)
-------------------
The l1 problem can have a whole face of solutions. On the single example ``{(mu, +1)}`` the
solution set is the convex hull of ``{sign(mu_j) e_j / |mu_j| : |mu_j| = max_k |mu_k|}``
(:func:`l1_solution_set_single_example`): unique (``e_d / mu_d``) when ``|mu_d|`` is strictly
largest, otherwise :func:`max_margin` returns *one vertex* of that face, the one HiGHS lands on
(which one is solver-dependent and not guaranteed). :attr:`MaxMargin.unique` says ``True``
when uniqueness is known, ``False`` when non-uniqueness is known (single example with ties) and
``None`` when it was not determined (l1, ``n > 1``). Angles to a non-unique l1 solution should be
measured to the solution *set*, e.g. with :func:`angle_to_set`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from flows.checks import real, real_array
from flows.data import Dataset, classification_only, is_separable

from .angles import angle, angle_to_set  # re-exported: public names of this module
from .margin_programs import quasi_norm
from .margin_programs.l1 import solve_l1
from .margin_programs.l2 import solve_l2
from .margin_programs.quasi_norm import KKTCheck, kkt_check  # re-exported: the depth-L check
from .margin_programs.scaling import CERTIFIED_TOLERANCE

#: Largest KKT residual of a solution reported as optimal (:attr:`MaxMargin.status` 0).
KKT_TOLERANCE = CERTIFIED_TOLERANCE

__all__ = [
    "KKTCheck",
    "KKT_TOLERANCE",
    "MaxMargin",
    "angle",
    "angle_to_set",
    "kkt_check",
    "kkt_points",
    "l1_solution_set_single_example",
    "max_margin",
    "max_margin_of",
    "normalized_margin",
]


@dataclass(frozen=True, eq=False)
class MaxMargin:
    """A max-margin solution.

    Attributes
    ----------
    beta : (d,) the raw solution (the minimum-norm ``beta`` with ``min_i y_i <beta, x_i> = 1``).
    direction : (d,) ``beta / ||beta||_2`` (always the l2-unit vector, for angle comparisons,
        whatever ``p``).
    margin : the normalized margin ``min_i y_i <beta, x_i> / ||beta||_p`` (``= 1 / ||beta||_p``
        at the optimum).
    p : 1 or 2.
    dual : (n,) dual variables ``lambda >= 0`` (``beta = Z^T lambda`` for p = 2;
        ``Z^T lambda`` is a subgradient of ``||.||_1`` at ``beta`` for p = 1); NaN where an
        uncertified solution's (``status`` 1) are not representable.
    support : indices i with ``lambda_i > 0`` (the support vectors).
    unique : True / False if (non-)uniqueness is known, None if not determined (see module doc).
    kkt : KKT residuals: 'stationarity', 'dual_feasibility', 'primal_feasibility',
        'complementary_slackness', 'duality_gap', relative (independent of every row and
        column scale of the data; :mod:`analysis.margin_programs`).
    status : 0 if the largest KKT residual is at most :data:`KKT_TOLERANCE` (the solution is
        certified optimal), 1 if not (an approximate solution; :attr:`message` says why).
    message : what :attr:`status` means for this solution.
    """

    beta: np.ndarray
    direction: np.ndarray
    margin: float
    p: int
    dual: np.ndarray
    support: np.ndarray
    unique: bool | None
    kkt: dict = field(default_factory=dict)
    status: int = 0
    message: str = ""

    @property
    def norm(self) -> float:
        """``||beta||_p``."""
        return float(np.linalg.norm(self.beta, ord=self.p))

    def kkt_residual(self) -> float:
        """The largest KKT residual."""
        return float(max(self.kkt.values()))


def max_margin(X, y=None, p=None) -> MaxMargin:
    """The l_p max-margin classifier (p in {1, 2}) of separable data.

    Call as ``max_margin(X, y, p)`` with arrays, or ``max_margin(data, p=p)`` (also
    ``max_margin(data, p)``) with a :class:`flows.Dataset`.

    Raises
    ------
    ValueError
        ``p`` not 1 or 2 (the message names 'p'); bad shapes/labels; data that no linear
        predictor through the origin separates (the message says "not linearly separable");
        data at a scale where ``beta`` (~ ``1 / |x|``) or the dual (~ ``1 / |x|^p``) is
        not representable in float64 (the message names X).

    The program is solved with every row and column of ``Z`` (the rows ``y_i x_i``) brought to
    scale 1 by powers of 2, and mapped back exactly (:mod:`analysis.margin_programs`): the
    verdict does not depend on the scale of ``X`` or of any of its columns, and
    ``max_margin(s X) = max_margin(X) / s``.
    """
    X, y, p = _arguments(X, y, p)
    if not is_separable(X, y):
        raise ValueError(
            "data (X, y) are not linearly separable through the origin: no beta "
            "has y_i <beta, x_i> >= 1 for all i"
        )
    Z = y[:, None] * X
    solution = solve_l2(Z) if p == 2 else solve_l1(Z)
    worst = float(max(solution.kkt.values()))
    return MaxMargin(
        beta=solution.beta,
        direction=solution.direction,
        margin=normalized_margin(solution.beta, X, y, p),
        p=p,
        dual=solution.dual,
        support=solution.support,
        unique=_known_uniqueness(Z, p),
        kkt=solution.kkt,
        status=0 if worst <= KKT_TOLERANCE else 1,
        message=_status_message(worst, X, p),
    )


def _status_message(worst: float, X: np.ndarray, p: int) -> str:
    """The message of a solution whose largest KKT residual is ``worst``."""
    if worst <= KKT_TOLERANCE:
        return f"optimal: largest KKT residual {worst:.2g}"
    nonzero = np.abs(X[:, np.any(X != 0, axis=0)])
    columns = np.log10(np.max(nonzero, axis=0))
    return (
        f"not certified: largest KKT residual {worst:.2g} > {KKT_TOLERANCE:g}; the columns of X "
        f"span {np.ptp(columns):.0f} decades of scale (the l{p} program's residuals lose the "
        "smallest weights where their squares leave float64): rescale the columns (the "
        "direction is accurate in the large coordinates)"
    )


def max_margin_of(data: Dataset, p) -> MaxMargin:
    """:func:`max_margin` of a :class:`flows.Dataset`."""
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flows.Dataset, got {type(data).__name__}")
    return max_margin(data, p=p)


def normalized_margin(beta, X, y, p: int) -> float:
    """``min_i y_i <beta, x_i> / ||beta||_p`` (``nan`` for ``beta = 0``).

    Scale-invariant in ``beta`` (``beta`` is divided by its largest entry first), so valid for
    ``|beta|`` anywhere in float64. ``ValueError`` naming the parameter for a non-finite
    ``beta`` or ``X``, labels other than +-1, or mismatched shapes.
    """
    p = _check_p(p)
    X, y = _check_data(X, y)
    beta = real_array(beta, "beta", ndim=1)
    if beta.shape[0] != X.shape[1]:
        raise ValueError(f"beta must have length d = {X.shape[1]}, got {beta.shape[0]}")
    top = np.max(np.abs(beta))
    if top == 0:
        return float("nan")
    b = beta / top
    scale_x = np.max(np.abs(X))
    if scale_x == 0:
        return 0.0
    with np.errstate(over="ignore"):
        return float(scale_x * (np.min(y * ((X / scale_x) @ b)) / np.linalg.norm(b, ord=p)))


def l1_solution_set_single_example(mu) -> np.ndarray:
    """Vertices (rows) of the l1 max-margin solution set of ``{(mu, +1)}``.

    The set is the convex hull of ``sign(mu_j) e_j / |mu_j|`` over the ``j`` with
    ``|mu_j| = max_k |mu_k|`` (exact ties). One row (``e_d / mu_d`` in the paper's setting
    ``0 < mu_1 < ... < mu_d``) means the solution is unique.
    """
    mu = real_array(mu, "mu", ndim=1)
    top = np.max(np.abs(mu))
    if top == 0:
        raise ValueError("mu must have a non-zero entry (otherwise D_mu is not separable)")
    with np.errstate(over="ignore"):
        reciprocal = 1.0 / top
    if not np.isfinite(reciprocal):
        raise ValueError(f"mu's largest |entry| {top:.3g} is too small: 1/|mu_j| overflows float64")
    ties = np.flatnonzero(np.abs(mu) == top)
    out = np.zeros((ties.size, mu.size))
    out[np.arange(ties.size), ties] = np.sign(mu[ties]) / top
    return out


def _arguments(X, y, p) -> tuple[np.ndarray, np.ndarray, int]:
    """``(X, y, p)`` of :func:`max_margin`'s call (arrays, or a Dataset with ``p`` given by
    keyword or in the place of ``y``), checked."""
    if isinstance(X, Dataset):
        if y is not None and np.ndim(y) == 0:
            if p is not None:
                raise ValueError("p given twice: call max_margin(data, p=...)")
            p = y
        elif y is not None:
            raise ValueError("y must not be given with a Dataset: call max_margin(data, p=...)")
        classification_only(X, "the max-margin direction")
        X, y = X.X, X.y
    if p is None:
        raise ValueError("p must be given: 1 or 2")
    p = _check_p(p)
    if y is None:
        raise ValueError("y must be given with an array X")
    X, y = _check_data(X, y)
    return X, y, p


def _check_p(p) -> int:
    """``p`` as the int 1 or 2 (a real number, a 0-d array of one, not a bool)."""
    try:
        value = real(p, "p")
    except ValueError:
        raise ValueError(f"p must be 1 or 2, got {p!r}") from None
    if value not in (1.0, 2.0):
        raise ValueError(f"p must be 1 or 2, got {p!r}")
    return int(value)


def _check_data(X, y) -> tuple[np.ndarray, np.ndarray]:
    """Finite ``X`` (n, d) and labels ``y`` (n,) in {-1, +1}."""
    X = real_array(X, "X", ndim=2)
    y = real_array(y, "y", ndim=1)
    if y.shape[0] != X.shape[0]:
        raise ValueError(
            f"y must have one label per row of X: got {y.shape[0]} labels for {X.shape[0]} rows"
        )
    if not np.all(np.abs(y) == 1.0):
        raise ValueError("y must contain only labels -1 and +1")
    return X, y


def _known_uniqueness(Z: np.ndarray, p: int) -> bool | None:
    """:attr:`MaxMargin.unique`: True for l2, known for l1 on one example, else None."""
    if p == 2:
        return True
    if Z.shape[0] == 1:
        return l1_solution_set_single_example(Z[0]).shape[0] == 1
    return None


def kkt_points(data: Dataset, depth, **options):
    """KKT points of the depth-L max-margin program ``min sum_j |beta_j|^(2/L)`` s.t.
    ``y_i <beta, x_i> >= 1`` (GD's limit directions at depth L), certified, with a global
    certificate by vertex enumeration on small data (docs/theory.md §10):
    :func:`analysis.margin_programs.quasi_norm.kkt_points`, with its options ``starts``,
    ``seed``, ``points``, ``max_vertex_systems``, ``max_iterations`` and ``max_kkt_vertices``
    (a :class:`~analysis.margin_programs.quasi_norm.KKTPoints` tuple says whether KKT vertices
    were left out). At L = 2 it is the l1
    program of :func:`max_margin` with ``p = 1``. :func:`kkt_check` gives the residuals of any
    direction."""
    return quasi_norm.kkt_points(data, depth, **options)


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
