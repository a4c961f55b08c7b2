"""Initializations ``w_j^(l)(0) = alpha_j`` (balanced) or ``alpha[l, j]`` (unbalanced), and depth;
the signed init of an orthant (:func:`orthant_init`) and the signs an init keeps
(:func:`kept_sign_pattern`)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .algorithms import ALGORITHMS
from .checks import integer, real_array

#: The deepest network accepted (the full system holds a (depth, d) array).
MAX_DEPTH = 100_000


def check_depth(depth) -> int:
    """``depth`` as an int in ``[1, MAX_DEPTH]``; ``ValueError`` naming 'depth' otherwise."""
    return integer(depth, "depth", 1, MAX_DEPTH)


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
    """Check ``alpha`` and build the parameter groups.

    Parameters
    ----------
    alpha : initialization scale(s): a scalar or a (d,) vector, all > 0 (every layer starts at
        ``alpha_j``), or a (depth, d) array of entries of any sign, zeros included
        (``w_j^(l)(0) = alpha[l, j]``; a *signed* init when some entries are negative; e.g.
        ``[alpha * ones, zeros]`` is ``u(0) = alpha``, ``v(0) = 0`` at depth 2).
    depth : number of layers L >= 1.
    d : number of features.
    reduced : merge balanced layers (None: whenever ``alpha`` is balanced, i.e. all rows equal).

    Raises
    ------
    ValueError
        Naming 'alpha': NaN / inf, a non-positive scalar or (d,) entry, or a shape other than
        (), (d,), (depth, d); naming 'depth', 'd' or 'reduced' for a depth or d that
        is not an int >= 1, or a reduced that is not None / bool.
    """
    depth = check_depth(depth)
    if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"d must be an integer >= 1, got {d!r}")
    if reduced is not None and not isinstance(reduced, (bool, np.bool_)):
        raise ValueError(f"reduced must be None, True or False, got {reduced!r}")
    a = real_array(alpha, "alpha")
    shapes = (
        f"alpha must be a scalar, a length-{d} vector or a ({depth}, {d}) array, "
        f"got shape {a.shape}"
    )
    if a.ndim <= 1:
        if np.any(a <= 0):
            raise ValueError(
                "alpha must be > 0 as a scalar or a vector (every initial weight "
                "positive; signed inits need a (depth, d) array)"
            )
        if a.ndim == 1 and a.shape != (d,):
            raise ValueError(shapes)
        layers = np.tile(np.broadcast_to(a, (d,)), (depth, 1))
    elif a.shape == (depth, d):
        layers = a.copy()
    else:
        raise ValueError(shapes)
    balanced = bool(np.all(layers == layers[0]))
    if reduced and not balanced:
        raise ValueError("reduced=True needs a balanced alpha (all layers equal)")
    if reduced is None:
        reduced = balanced
    if reduced and depth > 1:
        return Initialization(layers[:1].copy(), np.array([depth]), True)
    return Initialization(layers, np.ones(depth, dtype=int), balanced)


def orthant_init(signs, depth: int, scale) -> np.ndarray:
    """A signed (depth, d) ``alpha`` that starts ``beta`` in the orthant of ``signs`` and keeps
    it there (:func:`kept_sign_pattern` gives ``signs`` back at even depth, and at odd depth
    for the algorithms whose entry is ``zero_invariant``).

    Layer 0 is ``signs * scale`` (it carries the sign), the other layers ``scale`` (positive):
    balanced magnitudes, so ``beta_j(0) = signs_j scale_j^depth``. Give it to ``simulate`` or
    ``iterate`` as ``alpha`` when the data are separable only by a predictor with these signs
    (e.g. ``signs = np.sign(teacher)``).

    Parameters
    ----------
    signs : (d,) entries in {-1, +1}.
    depth : number of layers L >= 1.
    scale : initialization scale > 0: a scalar or a (d,) vector.

    Returns
    -------
    (depth, d) float array.

    Raises
    ------
    ValueError
        Naming 'signs' (not a non-empty (d,) array of -1 and +1), 'depth' (not an int in
        [1, MAX_DEPTH]) or 'scale' (not finite and > 0, or a vector of another length).
    """
    s = real_array(signs, "signs", ndim=1)
    if not np.all(np.abs(s) == 1):
        raise ValueError(f"signs must be -1 or +1, got {np.asarray(signs).tolist()}"[:300])
    depth = check_depth(depth)
    a = real_array(scale, "scale")
    if a.ndim > 1 or (a.ndim == 1 and a.shape != s.shape):
        raise ValueError(f"scale must be a scalar or a length-{s.size} vector, got shape {a.shape}")
    if np.any(a <= 0):
        raise ValueError(f"scale must be > 0, got {np.asarray(scale).tolist()}"[:300])
    layers = np.tile(np.broadcast_to(a, s.shape), (depth, 1))
    layers[0] *= s
    return layers


def kept_sign_pattern(
    alpha, depth: int, d: int | None = None, *, algorithm: str | None = None
) -> np.ndarray | None:
    """The signs ``s_j`` in {-1, +1} with ``s_j beta_j(t) >= 0`` for all t, or None if ``beta``
    is not confined to an orthant.

    Balanced magnitudes (``|alpha[l, j]| = a_j`` for every layer, the signs of the entries
    arbitrary) are, up to the reflection ``w_j^(l) -> sign(alpha[l, j]) w_j^(l)`` (which every
    algorithm of the table commutes with), a positive balanced init on data whose column j is
    multiplied by ``s_j = prod_l sign(alpha[l, j])``; its layers stay equal to one ``a_j(t)``,
    so ``beta_j = s_j a_j(t)^L``:

    * even L >= 2: ``s_j beta_j = a_j^L >= 0`` for every algorithm (flows and discrete runs);
    * odd L >= 3: ``a_j`` cannot cross 0 under the flows whose table entry is
      ``zero_invariant`` (gd, l2-sam, usam, le-sam: the field of a_j is a multiple of
      ``a_j^(L-1)``), so ``s_j beta_j >= 0`` for those flows when ``algorithm`` names one (a
      discrete step may still jump over 0); l_inf-SAM can cross 0 (sign(grad) jumps at 0), and
      ``algorithm=None`` (every algorithm) gives None;
    * L = 1, magnitudes that differ between layers (a smaller layer can cross 0), or a zero
      entry: None.

    Use it with :func:`flows.data.sign_constrained_separable`: if the data are not separable
    by a ``beta`` with these signs, the loss cannot tend to 0.

    Parameters
    ----------
    alpha : as for :func:`initialization` (scalar, (d,), or (depth, d) with either sign).
    depth : number of layers L >= 1.
    d : number of features; needed for a scalar ``alpha``, otherwise read from ``alpha``.
    algorithm : name in :data:`flows.algorithms.ALGORITHMS`, or None for "any algorithm".

    Returns
    -------
    (d,) array of -1.0 / +1.0, or None.
    """
    depth = check_depth(depth)
    a = real_array(alpha, "alpha")
    if d is None:
        if a.ndim == 0:
            raise ValueError("d must be given for a scalar alpha (the number of features)")
        d = a.shape[-1]
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"d must be an integer >= 1, got {d!r}")
    if algorithm is not None:
        if not isinstance(algorithm, str) or algorithm not in ALGORITHMS:
            raise ValueError(
                f"algorithm must be None or one of {sorted(ALGORITHMS)}, got {algorithm!r}"
            )
    layers = initialization(a, depth, int(d), reduced=False).groups
    if depth == 1 or not np.all(np.abs(layers) == np.abs(layers[0])) or np.any(layers == 0):
        return None
    if depth % 2 == 1 and (algorithm is None or not ALGORITHMS[algorithm].zero_invariant):
        return None
    return np.prod(np.sign(layers), axis=0)
