"""Data ``{(x_i, y_i)}`` for a linear predictor through the origin: linearly separable binary
classification (``y_i`` in {-1, +1}, the default) or regression (``y_i`` any real target)."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog, minimize
from scipy.special import expit

from .checks import choice, real_array
from .memo import TABLE as MEMO_TABLE


def _equilibrated(Z: np.ndarray) -> np.ndarray | None:
    """``Z`` with every row, then every column, divided by its largest ``|entry|``; None if a
    row is exactly 0.

    Separability (some ``beta`` with ``Z beta > 0`` entrywise) is invariant under positive row
    scalings (a margin is rescaled) and positive column scalings (``beta_j -> beta_j / c_j``), so
    this changes nothing but the conditioning: the LP sees entries in ``[-1, 1]`` whatever the
    scale of the data (1e-300 .. 1e300). An example with ``y_i x_i = 0`` has margin 0 for
    every ``beta``: the data are then not separable.
    """
    rows = np.maximum(np.max(Z, axis=1), -np.min(Z, axis=1))[:, None]
    if np.any(rows == 0):
        return None
    Z = Z / rows
    cols = np.maximum(np.max(Z, axis=0), -np.min(Z, axis=0))
    Z /= np.where(cols > 0, cols, 1.0)
    return Z


def _separating_lp(Z: np.ndarray, bounds: list[tuple[float | None, float | None]]) -> bool:
    """Whether some ``beta`` within ``bounds`` has ``Z beta >= 1``, on the equilibrated ``Z``
    (:func:`_equilibrated`; the bounds are sign constraints, which positive column scalings
    keep): yes if :func:`separating_direction` finds such a ``beta`` (a certificate, in a few
    matrix products), else as the LP decides (HiGHS). ``ValueError`` if HiGHS cannot decide."""
    if Z.shape[0] == 1:
        return _one_row_separable(Z[0], bounds)
    scaled = _equilibrated(Z)
    if scaled is None:
        return False
    Z = scaled
    n, d = Z.shape
    if separating_direction(Z, bounds) is not None:
        return True
    res = linprog(np.zeros(d), A_ub=-Z, b_ub=-np.ones(n), bounds=bounds, method="highs")
    if res.status not in (0, 2):
        raise ValueError(f"X, y: the separability LP could not be decided ({res.message})")
    return res.status == 0


#: Iterations of the search for a certificate of separability before the LP decides.
CERTIFICATE_ITERATIONS = 100


def separating_direction(
    Z: np.ndarray, bounds: list[tuple[float | None, float | None]]
) -> np.ndarray | None:
    """A ``beta`` within ``bounds`` with ``Z beta > 0`` in every row, proven despite rounding,
    or None if none is found in :data:`CERTIFICATE_ITERATIONS` iterations.

    The search minimises the logistic loss ``sum_i log(1 + exp(-<z_i, beta>))`` by L-BFGS-B
    within the bounds from ``beta = 0``, and stops at the first iterate that separates: on
    separable data the loss goes to 0 only along separating directions, and a teacher's data
    at n d = 1e7 are separated after ~12 iterations (0.2 s, where HiGHS takes minutes). An
    iterate is a certificate when every computed margin exceeds the rounding bound of its dot
    product, ``m_i > 2 d u sum_j |z_ij beta_j|`` (``u`` the unit roundoff), which is at most
    ``2 d u ||beta||_1`` for the equilibrated rows (``|z_ij| <= 1``, :func:`_equilibrated`):
    the exact margins are then positive too.
    """
    d = Z.shape[1]
    rounding = 2.0 * d * np.finfo(float).eps

    def loss_and_gradient(beta: np.ndarray) -> tuple[float, np.ndarray]:
        m = Z @ beta
        return float(np.sum(np.logaddexp(0.0, -m))), -(Z.T @ expit(-m))

    def proven(beta: np.ndarray) -> bool:
        return bool(np.min(Z @ beta) > rounding * np.sum(np.abs(beta)))

    found: list[np.ndarray] = []

    def stop_if_separating(beta: np.ndarray) -> None:
        if proven(beta):
            found.append(beta.copy())
            raise StopIteration

    minimize(  # a callback's StopIteration ends the search (scipy >= 1.11)
        loss_and_gradient,
        np.zeros(d),
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        callback=stop_if_separating,
        options={"maxiter": CERTIFICATE_ITERATIONS},
    )
    return found[0] if found else None


def _one_row_separable(z: np.ndarray, bounds: list[tuple[float | None, float | None]]) -> bool:
    """:func:`_separating_lp` for one example, without the LP: every ``beta_j`` may be 0 and
    is unbounded in the direction its bound leaves free, so ``<z, beta>`` reaches 1 exactly
    when some ``z_j > 0`` may grow upwards or some ``z_j < 0`` downwards."""
    return any(
        (value > 0 and high is None) or (value < 0 and low is None)
        for value, (low, high) in zip(z.tolist(), bounds, strict=True)
    )


def is_separable(X: np.ndarray, y: np.ndarray) -> bool:
    """Whether some ``beta`` has ``y_i <x_i, beta> >= 1`` for all i (an LP feasibility problem,
    HiGHS), decided scale-invariantly: the rows ``sign(y_i) x_i`` (positive multiples of
    ``y_i x_i``) and then the columns are normalised by their largest entry before the LP, and a
    row ``y_i x_i = 0`` makes the data non-separable.

    Parameters
    ----------
    X : (n, d) finite features.
    y : (n,) labels (finite; any sign pattern: only ``y_i x_i`` matters here).

    ``ValueError`` naming X or y for non-finite values or mismatched shapes.
    """
    X = real_array(X, "X", ndim=2)
    y = real_array(y, "y", ndim=1)
    if y.shape[0] != X.shape[0]:
        raise ValueError(
            f"y must have one label per row of X: got {y.shape[0]} labels for {X.shape[0]} rows"
        )
    # a positive factor per row changes no feasibility: sign(y_i) x_i, whose product cannot overflow
    return _separating_lp(np.sign(y)[:, None] * X, [(None, None)] * X.shape[1])


#: The tasks a :class:`Dataset` describes; the first is the default.
TASKS = ("classification", "regression")


@dataclass(frozen=True, eq=False)
class Dataset:
    """Data for a linear predictor through the origin, ``f(x) = <beta, x>``.

    Parameters
    ----------
    X : (n, d) features.
    y : (n,) labels in {-1, +1} (classification) or real targets (regression).
    task : 'classification' (a margin loss acts on ``m_i = y_i <beta, x_i>``) or 'regression'
        (the squared loss acts on the residual ``<beta, x_i> - y_i``).

    Every loss is evaluated at ``u_i = <beta, z_i> - o_i`` with the rows
    :attr:`signed_features` ``z_i`` (``y_i x_i``, or ``x_i`` in regression) and the offsets
    :attr:`offsets` ``o_i`` (None, i.e. 0, in classification; ``y_i`` in regression).

    Raises
    ------
    ValueError
        On wrong shapes, non-finite values, an unknown task; in classification labels other
        than +-1 or data that no linear predictor separates (checked by an LP,
        scale-invariantly: see :func:`is_separable`).
    """

    X: np.ndarray
    y: np.ndarray
    task: str = TASKS[0]

    def __post_init__(self) -> None:
        task = choice(self.task, "task", TASKS)
        X = real_array(self.X, "X", ndim=2)
        y = real_array(self.y, "y", ndim=1)
        if y.shape[0] != X.shape[0]:
            raise ValueError(
                f"y must have one label per row of X: got {y.shape[0]} labels for {X.shape[0]} rows"
            )
        if task == "classification":
            if not np.all(np.abs(y) == 1.0):
                raise ValueError(
                    "y must contain only labels -1 and +1 (real targets: task='regression')"
                )
            signed, offsets = y[:, None] * X, None
            if not _separating_lp(signed, [(None, None)] * X.shape[1]):
                raise ValueError("data (X, y) are not linearly separable through the origin")
        else:
            signed, offsets = X, y
        for arr in (X, y, signed):
            arr.setflags(write=False)
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "task", task)
        object.__setattr__(self, "_signed", signed)
        object.__setattr__(self, "_offsets", offsets)

    def rows(self, index: np.ndarray) -> Dataset:
        """The data set of the examples ``index`` (an integer array), in that order. Not checked
        again: rows of a valid data set are valid (a subset of separable data is separable)."""
        X = self.X[index]
        signed = X if self.regression else self.signed_features[index]
        return self._unchecked(X, self.y[index], signed)

    def relabeled(self, y: np.ndarray) -> Dataset:
        """The same inputs with the targets (labels) ``y``, not checked again: for a step's
        label noise (:mod:`flows.minibatch`), where flipped labels need not be separable."""
        return self._unchecked(self.X, y, self.X if self.regression else self.X * y[:, None])

    def _unchecked(self, X: np.ndarray, y: np.ndarray, signed: np.ndarray) -> Dataset:
        """A data set of this task from its parts, without the checks of ``__post_init__``."""
        out = object.__new__(Dataset)
        offsets = y if self.regression else None
        for name, value in (("X", X), ("y", y), ("task", self.task), ("_signed", signed),
                            ("_offsets", offsets)):  # fmt: skip
            object.__setattr__(out, name, value)
        return out

    def __getstate__(self) -> dict:
        """The state that pickles and copies carry: every attribute but what
        :func:`flows.memo.recall` keeps on the data set."""
        return {key: value for key, value in self.__dict__.items() if key != MEMO_TABLE}

    def __setstate__(self, state: dict) -> None:
        """Restore ``state``, its arrays read-only as ``__post_init__`` leaves them (unpickled
        and deep-copied arrays are writable: the compiled kernels would take them as another
        type, and compile for it)."""
        for value in state.values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
        self.__dict__.update(state)

    @property
    def n(self) -> int:
        """Number of examples."""
        return self.X.shape[0]

    @property
    def d(self) -> int:
        """Number of features."""
        return self.X.shape[1]

    @property
    def regression(self) -> bool:
        """Whether the targets are real numbers (``task == 'regression'``)."""
        return self.task == "regression"

    @property
    def signed_features(self) -> np.ndarray:
        """Rows ``z_i``: ``y_i x_i`` (the margin of example i is ``<beta, y_i x_i>``), or
        ``x_i`` in regression."""
        return self._signed  # type: ignore[attr-defined]  # set in __post_init__

    @property
    def offsets(self) -> np.ndarray | None:
        """``o_i`` in the loss argument ``u_i = <beta, z_i> - o_i``: None (0) in
        classification, the targets ``y_i`` in regression."""
        return self._offsets  # type: ignore[attr-defined]  # set in __post_init__

    def key(self) -> tuple:
        """A hashable description (for caches)."""
        return (self.X.tobytes(), self.y.tobytes(), self.X.shape, self.task)


def classification_only(data: Dataset, what: str) -> None:
    """``ValueError`` naming 'data' when ``data`` is a regression data set and ``what`` (an
    analysis of margins, separability or max-margin directions) needs labels +-1."""
    if data.regression:
        raise ValueError(
            f"data: {what} needs classification data (labels +-1); this Dataset has "
            "task='regression'"
        )


def regression_only(data: Dataset, what: str) -> None:
    """``ValueError`` naming 'data' unless ``data`` has real targets (``task='regression'``)."""
    if not data.regression:
        raise ValueError(
            f"data: {what} needs regression data (Dataset(X, y, task='regression')); this "
            "Dataset has task='classification'"
        )


def single_example(mu) -> Dataset:
    """The paper's one-example data set ``D_mu = {(mu, +1)}``.

    Any finite non-zero ``mu`` is accepted; the paper's setting is ``0 < mu_1 < ... < mu_d``.
    """
    mu = real_array(mu, "mu", ndim=1)
    if not np.any(mu != 0):
        raise ValueError("mu must have a non-zero entry (otherwise D_mu is not separable)")
    return Dataset(mu[None, :], np.ones(1))


def sign_constrained_separable(data: Dataset, signs) -> bool:
    """Whether some ``beta`` with ``signs_j beta_j >= 0`` for all j separates ``data``.

    The LP ``y_i <x_i, beta> >= 1`` with bounds ``beta_j >= 0`` where ``signs_j = 1``,
    ``beta_j <= 0`` where ``signs_j = -1`` and ``beta_j`` free where ``signs_j = 0``, decided
    scale-invariantly as :func:`is_separable`. With the signs of
    :func:`flows.initialization.kept_sign_pattern` it tells whether a flow can separate the
    data at all: e.g. ``X = [[2, -1], [-1, -2]]``, ``y = (1, 1)`` is separable (``beta = (1,
    -1)``) but by no ``beta >= 0``, so from a balanced init at even depth the loss stays above
    ``log(2) / 2``.

    Parameters
    ----------
    data : a :class:`Dataset`.
    signs : (d,) (or a scalar, for every coordinate) in {-1, 0, +1}.

    Raises
    ------
    ValueError
        ``data`` not a Dataset; ``signs`` not finite, of the wrong length or not in {-1, 0, 1}.
    """
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flows.Dataset, got {type(data).__name__}")
    classification_only(data, "sign_constrained_separable")
    s = real_array(signs, "signs")
    if s.ndim == 0:
        s = np.full(data.d, float(s))
    if s.shape != (data.d,):
        raise ValueError(f"signs must be a scalar or have length d = {data.d}, got shape {s.shape}")
    if not np.all(np.isin(s, (-1.0, 0.0, 1.0))):
        raise ValueError(f"signs must contain only -1, 0 and +1, got {s}")
    bounds: list[tuple[float | None, float | None]] = [
        (0.0, None) if v > 0 else (None, 0.0) if v < 0 else (None, None) for v in s
    ]
    return _separating_lp(data.signed_features, bounds)


#: ``|z_ij|`` of each data set it was asked for, weakly keyed (freed with the data set, whose
#: arrays are read-only): the runs on one data set make it once (n 10,000, d 1000: 27 ms, and
#: 80 MB each time otherwise).
_ABS_SIGNED_FEATURES: weakref.WeakKeyDictionary[Dataset, np.ndarray] = weakref.WeakKeyDictionary()


def abs_signed_features(data: Dataset) -> np.ndarray:
    """``|z_ij|`` (n, d) of ``data``'s :attr:`Dataset.signed_features`, C-contiguous, made once
    per data set (the scale-free sizes of the stationary-point test, at every segment's start,
    and the compiled loop's). Not to be written to."""
    if data not in _ABS_SIGNED_FEATURES:
        _ABS_SIGNED_FEATURES[data] = np.ascontiguousarray(np.abs(data.signed_features))
    return _ABS_SIGNED_FEATURES[data]
