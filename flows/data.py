"""Linearly separable binary classification data ``{(x_i, y_i)}``, ``y_i`` in {-1, +1}."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog


def finite_array(value, name: str, ndim: int | None = None) -> np.ndarray:
    """``value`` as a float64 array; ``ValueError`` naming ``name`` if it is not finite or of the wrong rank."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric, got {value!r}") from exc
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (found NaN or inf)")
    return arr


def is_separable(X: np.ndarray, y: np.ndarray) -> bool:
    """Whether some ``beta`` has ``y_i <x_i, beta> >= 1`` for all i (an LP feasibility problem, HiGHS)."""
    n, d = X.shape
    res = linprog(np.zeros(d), A_ub=-(y[:, None] * X), b_ub=-np.ones(n),
                  bounds=[(None, None)] * d, method="highs")
    return res.status == 0


@dataclass(frozen=True, eq=False)
class Dataset:
    """Separable data for a linear predictor through the origin.

    Parameters
    ----------
    X : (n, d) features.
    y : (n,) labels in {-1, +1}.

    Raises
    ------
    ValueError
        On wrong shapes, non-finite values, labels other than +-1, or data that no linear
        predictor separates (checked by an LP).
    """

    X: np.ndarray
    y: np.ndarray

    def __post_init__(self) -> None:
        X = finite_array(self.X, "X", ndim=2)
        y = finite_array(self.y, "y", ndim=1)
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"y must have one label per row of X: got {y.shape[0]} labels "
                             f"for {X.shape[0]} rows")
        if not np.all(np.abs(y) == 1.0):
            raise ValueError("y must contain only labels -1 and +1")
        if not is_separable(X, y):
            raise ValueError("data (X, y) are not linearly separable through the origin")
        signed = y[:, None] * X
        for arr in (X, y, signed):
            arr.setflags(write=False)
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "_signed", signed)

    @property
    def n(self) -> int:
        """Number of examples."""
        return self.X.shape[0]

    @property
    def d(self) -> int:
        """Number of features."""
        return self.X.shape[1]

    @property
    def signed_features(self) -> np.ndarray:
        """Rows ``y_i x_i``: the margin of example i is ``<beta, y_i x_i>``."""
        return self._signed

    def key(self) -> tuple:
        """A hashable description (for caches)."""
        return (self.X.tobytes(), self.y.tobytes(), self.X.shape)


def single_example(mu) -> Dataset:
    """The paper's one-example data set ``D_mu = {(mu, +1)}``.

    Any finite non-zero ``mu`` is accepted; the paper's setting is ``0 < mu_1 < ... < mu_d``.
    """
    mu = finite_array(mu, "mu", ndim=1)
    if not np.any(mu != 0):
        raise ValueError("mu must have a non-zero entry (otherwise D_mu is not separable)")
    return Dataset(mu[None, :], np.ones(1))
