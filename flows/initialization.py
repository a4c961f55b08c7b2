"""Initializations ``w_j^(l)(0) = alpha_j`` (balanced) or ``alpha[l, j]`` (unbalanced), and depth."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .data import finite_array


def check_depth(depth) -> int:
    """``depth`` as an int >= 1; ``ValueError`` naming 'depth' otherwise."""
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
        raise ValueError(f"depth must be an integer >= 1, got {depth!r}")
    return int(depth)


class Initialization(NamedTuple):
    """Initial parameter groups and how many identical layers each group stands for.

    ``balanced`` inits are a single group of multiplicity ``depth`` when ``reduced`` (all
    layers equal a(t) stay equal under every algorithm of the table, for any data set), and
    ``depth`` groups of multiplicity 1 otherwise.
    """

    groups: np.ndarray  # (G, d)
    multiplicity: np.ndarray  # (G,)
    balanced: bool

    @property
    def reduced(self) -> bool:
        """Whether layers are merged into one group."""
        return len(self.multiplicity) == 1 and int(self.multiplicity[0]) > 1


def initialization(alpha, depth: int, d: int, reduced: bool | None = None) -> Initialization:
    """Check ``alpha`` (scalar, (d,) or (depth, d), all > 0) and build the parameter groups.

    Parameters
    ----------
    alpha : initialization scale(s).
    depth : number of layers L >= 1.
    d : number of features.
    reduced : merge balanced layers (None: whenever ``alpha`` is balanced).
    """
    depth = check_depth(depth)
    a = finite_array(alpha, "alpha")
    if np.any(a <= 0):
        raise ValueError("alpha must be > 0 (every initial weight positive)")
    if a.ndim == 0:
        a = np.full(d, float(a))
    if a.ndim == 1:
        if a.shape != (d,):
            raise ValueError(f"alpha must be a scalar, a length-{d} vector or a ({depth}, {d}) "
                             f"array, got shape {a.shape}")
        layers = np.tile(a, (depth, 1))
    elif a.shape == (depth, d):
        layers = a.copy()
    else:
        raise ValueError(f"alpha must be a scalar, a length-{d} vector or a ({depth}, {d}) "
                         f"array, got shape {a.shape}")
    balanced = bool(np.all(layers == layers[0]))
    if reduced and not balanced:
        raise ValueError("reduced=True needs a balanced alpha (all layers equal)")
    if reduced is None:
        reduced = balanced
    if reduced and depth > 1:
        return Initialization(layers[:1].copy(), np.array([depth]), True)
    return Initialization(layers, np.ones(depth, dtype=int), balanced)
