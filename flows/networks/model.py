"""The model interface of :func:`flows.networks.train`, and the diagonal network as a model.

A model is a function ``f(theta; x)`` of a flat parameter vector ``theta`` (``size`` floats)
and one input ``x``. It gives its outputs ``f(theta; x_i)`` for the rows of ``X``
(``outputs(theta, X)``, (n,)), and training needs one thing more, ``vjp(theta, X)``: the
outputs and their pullback, the function ``g -> sum_i g_i grad_theta f(theta; x_i)`` (size,)
(a vector-Jacobian product, as ``jax.vjp`` returns it), from which the loss gradient follows
by the chain rule (:func:`flows.networks.train.loss_gradient`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np

from ..checks import integer


@runtime_checkable
class NetworkModel(Protocol):
    """What :func:`flows.networks.train` needs of a model (see the module docstring)."""

    @property
    def size(self) -> int:
        """Number of parameters."""
        ...

    def outputs(self, theta: np.ndarray, X: np.ndarray) -> np.ndarray:
        """``f(theta; x_i)`` (n,)."""
        ...

    def vjp(
        self, theta: np.ndarray, X: np.ndarray
    ) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]:
        """``f(theta; x_i)`` (n,) and ``g -> sum_i g_i grad_theta f(theta; x_i)`` (size,)."""
        ...


class DiagonalNetwork:
    """``f(theta; x) = <w^(1) * ... * w^(L), x>`` (elementwise products), ``theta`` the L layers
    of ``d`` weights in layer order (``theta.reshape(L, d)``).

    The model :func:`flows.iterate` trains, written against :class:`NetworkModel`;
    ``balanced(alpha)`` is its initialisation ``w^(l)_j = alpha``.
    """

    def __init__(self, depth: int, d: int):
        self.depth = integer(depth, "depth", 1)
        self.d = integer(d, "d", 1)

    @property
    def size(self) -> int:
        """``L d``."""
        return self.depth * self.d

    def layers(self, theta: np.ndarray) -> np.ndarray:
        """``theta`` as (L, d)."""
        return np.asarray(theta, dtype=float).reshape(self.depth, self.d)

    def inputs(self, X: np.ndarray) -> np.ndarray:
        """``X`` as (n, d) floats; ``ValueError`` naming X for another width."""
        X = np.asarray(X, dtype=float)
        if X.ndim != 2 or X.shape[1] != self.d:
            raise ValueError(f"X must have shape (n, {self.d}), got {X.shape}")
        return X

    def outputs(self, theta: np.ndarray, X: np.ndarray) -> np.ndarray:
        """``X beta``, ``beta = prod_l w^(l)``."""
        return self.inputs(X) @ np.prod(self.layers(theta), axis=0)

    def vjp(
        self, theta: np.ndarray, X: np.ndarray
    ) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]:
        """``X beta`` and ``g -> [(X^T g)_j prod_{k != l} w^(k)_j]_{l, j}``."""
        X, w = self.inputs(X), self.layers(theta)
        others = np.array([np.prod(np.delete(w, k, axis=0), axis=0) for k in range(self.depth)])
        return X @ np.prod(w, axis=0), lambda g: (others * (X.T @ g)[None, :]).ravel()

    def balanced(self, alpha: float) -> np.ndarray:
        """Every weight equal to ``alpha``."""
        return np.full(self.size, float(alpha))
