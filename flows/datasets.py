"""Named data sets: the data of every figure, built in one place.

* :func:`single_example_mu2`, :func:`single_example_mu5` — the paper's ``D_mu = {(mu, +1)}``
  with ``mu = (1, 2)`` (figure 1) and ``mu = (1, ..., 5)`` (figures 4, 5, 8, 9, the regimes).
* :func:`gaussian_blobs` — two Gaussian blobs with means ``+-(1, 2)``, n = 40, std 0.6,
  seed 5 (figure 7).
* :func:`teacher_data` — n = 12, d = 3 separable data from a random teacher, seed 90
  (figure 6).
* :func:`sparse_regression` — the sparse regression of the public SAM diagonal-network
  experiment (Andriushchenko & Flammarion 2022): n = 20 training and 1000 test rows of
  ``N(0, I_30)``, noiseless targets of a 3-sparse unit teacher, seed 0.
* :func:`digits` — a pair of classes of scikit-learn's bundled 8x8 handwritten digits
  (the digits study), split into a training and a test set; :func:`digit_indices` gives the
  split itself.

Every builder returns :class:`flows.Dataset` objects (the classification ones checked
separable through the origin).
The synthetic builders reproduce the figures' data bit for bit (the generators and their
seeds are those of the figure modules). This module imports nothing from ``analysis`` or
``figures`` (layers go downward only); scikit-learn is needed for :func:`digits` only, as the
optional extra ``data`` (``pip install -e '.[data]'``).
"""

from __future__ import annotations

import gzip
import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import numpy as np
from scipy.optimize import linprog

from .checks import integer, memory, real, real_array
from .data import Dataset, is_separable, single_example

__all__ = [
    "DIGITS_PIXELS",
    "DIGITS_SIDE",
    "MU2",
    "MU5",
    "DigitSplit",
    "digit_indices",
    "digits",
    "gaussian_blobs",
    "single_example_mu2",
    "single_example_mu5",
    "sparse_regression",
    "teacher_data",
]

#: Caps of the synthetic builders: examples (and features) of one set, and random draws (of a
#: whole set for :func:`gaussian_blobs`, of ``n`` candidate points for :func:`teacher_data`).
#: The arrays a builder draws are capped as well, at :data:`flows.checks.MAX_FLOATS` entries
#: (2 GiB; a ``ValueError`` naming the size parameter and the memory it would need).
MAX_EXAMPLES = 10**6
MAX_DRAWS = 100

#: the paper's running examples of ``D_mu``
MU2 = (1.0, 2.0)
MU5 = (1.0, 2.0, 3.0, 4.0, 5.0)

#: the digits images are ``DIGITS_SIDE x DIGITS_SIDE`` = ``DIGITS_PIXELS`` features (row-major)
DIGITS_SIDE = 8
DIGITS_PIXELS = DIGITS_SIDE * DIGITS_SIDE
#: largest raw intensity of the digits (the 4x4-block counts of the UCI preprocessing)
DIGITS_MAX_INTENSITY = 16.0

_MISSING_EXTRA = (
    "the digits data need scikit-learn, which is the optional extra 'data' of "
    "samflows: pip install -e '.[data]'"
)


# --------------------------------------------------------------------------- synthetic sets


def single_example_mu2() -> Dataset:
    """``D_mu = {((1, 2), +1)}`` (figure 1)."""
    return single_example(list(MU2))


def single_example_mu5() -> Dataset:
    """``D_mu = {((1, 2, 3, 4, 5), +1)}`` (figures 4, 5, 8, 9)."""
    return single_example(list(MU5))


def gaussian_blobs(seed: int = 5, n: int = 40, std: float = 0.6, mean=(1.0, 2.0)) -> Dataset:
    """Two Gaussian blobs: ``x_i = y_i mean + std N(0, I)``, labels alternating +1, -1
    (``y_0 = +1``), drawn from ``numpy.random.default_rng(seed)`` and redrawn (same generator)
    until separable through the origin.

    The defaults are figure 7's data: means ``+-(1, 2)``, n = 40, std 0.6, seed 5 (the first
    draw is separable; l1 max-margin ``e_2``, l2 max-margin 16 deg away from it).
    """
    mean = real_array(mean, "mean", ndim=1)
    n = integer(n, "n", 2, MAX_EXAMPLES)
    std = real(std, "std", low=0.0)
    memory(n * mean.size, "n", f"X ({n} points in d = {mean.size})")
    rng = np.random.default_rng(seed)
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    for _ in range(MAX_DRAWS):
        X = y[:, None] * mean + std * rng.normal(size=(n, mean.size))
        if is_separable(X, y):
            return Dataset(X, y)
    raise ValueError(
        f"std: no separable draw in {MAX_DRAWS} draws of n = {n} points at std = {std:g} around "
        f"+-{mean.tolist()}; lower std or n"
    )


def teacher_data(seed: int = 90, n: int = 12, d: int = 3, margin: float = 0.2) -> Dataset:
    """Separable data from a random unit teacher ``w``: ``x ~ N(0, I)`` kept when
    ``|<w, x>| >= margin``, ``y = sign <w, x>`` (figure 6's data with the defaults).

    Columns are then sign-flipped so that the l1 max-margin solution is ``>= 0``: a balanced
    positive initialization keeps ``beta = a^2 >= 0`` at L = 2, so only then can GD reach the
    l1 max-margin direction (flipping a column is a symmetry of the whole problem). Seed 90
    gives a large angle, 30 deg, between the l1 and l2 max-margin directions.
    """
    n, d = integer(n, "n", 1, MAX_EXAMPLES), integer(d, "d", 1, MAX_EXAMPLES)
    margin = real(margin, "margin", low=0.0)
    memory(n * d, "n", f"a batch of {n} candidate points in d = {d}")
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    w /= np.linalg.norm(w)
    rows: list[np.ndarray] = []
    for _ in range(MAX_DRAWS):
        x = rng.normal(size=(n, d))
        rows.extend(x[np.abs(x @ w) >= margin])
        if len(rows) >= n:
            break
    else:
        raise ValueError(
            f"margin: {MAX_DRAWS} batches of {n} Gaussian points gave {len(rows)} of the {n} "
            f"points with |<w, x>| >= {margin:g}; lower margin"
        )
    X = np.array(rows[:n])
    y = np.sign(X @ w)
    beta = _l1_max_margin(y[:, None] * X)
    flips = np.where(beta < -1e-9 * np.max(np.abs(beta)), -1.0, 1.0)
    return Dataset(X * flips, y)


class RegressionSplit(NamedTuple):
    """A regression problem with its held-out set and the teacher that generated both."""

    train: Dataset
    test: Dataset
    teacher: np.ndarray


def sparse_regression(
    n: int = 20, n_test: int = 1000, d: int = 30, sparsity: int = 3, seed: int = 0
) -> RegressionSplit:
    """Noiseless sparse regression as the diagonal-network notebook of tml-epfl/understanding-sam
    draws it (``diagonal_linear_nets/diag_nets_sam.ipynb``, cell 0, at 306adde): from the
    legacy ``RandomState(seed)``, the rows of ``X`` (n, d), then of ``X_test`` (n_test, d), all
    ``N(0, I_d)``, then ``theta* = |g| / ||g||`` with ``g`` standard normal on the first
    ``sparsity`` coordinates and 0 elsewhere; ``y = X theta*``, ``y_test = X_test theta*``.

    The notebook draws the rows with ``multivariate_normal(0, I_d)``, which for the identity
    consumes the stream as ``standard_normal`` does and returns the same numbers.
    """
    n, n_test = integer(n, "n", 1, MAX_EXAMPLES), integer(n_test, "n_test", 1, MAX_EXAMPLES)
    d = integer(d, "d", 1, MAX_EXAMPLES)
    sparsity = integer(sparsity, "sparsity", 1, d)
    memory(n * d, "n", f"X ({n} rows of d = {d})")
    memory((n + n_test) * d, "n_test", f"X and X_test ({n} + {n_test} rows of d = {d})")
    rng = np.random.RandomState(integer(seed, "seed", 0, 2**32 - 1))
    X = rng.standard_normal((n, d))
    X_test = rng.standard_normal((n_test, d))
    teacher = rng.standard_normal(d)
    teacher[sparsity:] = 0.0
    teacher = np.abs(teacher) / np.linalg.norm(teacher)
    return RegressionSplit(
        Dataset(X, X @ teacher, task="regression"),
        Dataset(X_test, X_test @ teacher, task="regression"),
        teacher,
    )


def _l1_max_margin(Z: np.ndarray) -> np.ndarray:
    """One l1 max-margin solution ``argmin ||beta||_1`` s.t. ``Z beta >= 1`` (HiGHS, with
    ``beta = p - q``). Used only for the signs of :func:`teacher_data`'s columns (the full
    solver with its polish and KKT residuals is :func:`analysis.maxmargin.max_margin`)."""
    n, d = Z.shape
    res = linprog(
        np.ones(2 * d),
        A_ub=-np.hstack([Z, -Z]),
        b_ub=-np.ones(n),
        bounds=[(0.0, None)] * (2 * d),
        method="highs",
    )
    if res.status != 0:
        raise ValueError(f"the l1 max-margin LP failed: {res.message}")
    return res.x[:d] - res.x[d:]


# --------------------------------------------------------------------------- digits


class DigitSplit(NamedTuple):
    """Row indices (into scikit-learn's ``load_digits()`` arrays, increasing) of a split."""

    train: np.ndarray
    test: np.ndarray


def _load_digits_function():
    """scikit-learn's ``load_digits``; ``ImportError`` naming the extra when it is missing."""
    try:
        from sklearn.datasets import load_digits  # noqa: PLC0415 - optional dependency
    except ImportError as exc:
        raise ImportError(_MISSING_EXTRA) from exc
    return load_digits


def _scikit_learn_folder() -> Path:
    """Where scikit-learn is installed, found without importing it (its import takes ~1 s);
    ``ImportError`` naming the extra when it is missing."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(_MISSING_EXTRA)
    return Path(next(iter(spec.submodule_search_locations)))


@lru_cache(maxsize=1)
def _digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """Raw pixels (1797, 64) in 0..16 and the targets (1797,) of the bundled digits (the file
    shipped with scikit-learn: no download). Read as ``load_digits`` reads it (pixels, then the
    class, one image per CSV row); through ``load_digits`` itself if the file is not where
    scikit-learn keeps it."""
    path = _scikit_learn_folder() / "datasets" / "data" / "digits.csv.gz"
    if path.is_file():
        with gzip.open(path, "rt") as f:
            table = np.loadtxt(f, delimiter=",")
        data, target = table[:, :-1], table[:, -1]
    else:
        bunch = _load_digits_function()()
        data, target = bunch.data, bunch.target
    X = np.asarray(data, dtype=float)
    X.setflags(write=False)
    target = np.asarray(target, dtype=int)
    target.setflags(write=False)
    return X, target


def _check_classes(a, b) -> tuple[int, int]:
    """Two different digit classes in 0..9."""
    a, b = integer(a, "a", 0, 9), integer(b, "b", 0, 9)
    if a == b:
        raise ValueError(f"a and b must be different classes, got a = b = {a}")
    return a, b


def _check_fraction(test_fraction) -> float:
    """A fraction in (0, 1)."""
    return real(test_fraction, "test_fraction", low=0.0, high=1.0, low_open=True, high_open=True)


def digit_indices(a: int, b: int, test_fraction: float = 0.25, seed: int = 0) -> DigitSplit:
    """The stratified split behind :func:`digits`: row indices of the training and test sets.

    For each class (first ``a``, then ``b``) the rows of that class are permuted by one
    ``numpy.random.default_rng(seed)`` and the first ``round(test_fraction * n_class)`` (at
    least 1, at most ``n_class - 1``) go to the test set; both index arrays are then sorted.
    The same arguments always give the same split (it does not depend on scikit-learn's
    splitting code or version, only on the order of the bundled file).
    """
    a, b = _check_classes(a, b)
    test_fraction = _check_fraction(test_fraction)
    _, target = _digits_arrays()
    rng = np.random.default_rng(seed)
    train, test = [], []
    for c in (a, b):
        rows = rng.permutation(np.flatnonzero(target == c))
        k = min(max(int(round(test_fraction * rows.size)), 1), rows.size - 1)
        test.append(rows[:k])
        train.append(rows[k:])
    return DigitSplit(np.sort(np.concatenate(train)), np.sort(np.concatenate(test)))


def digits(
    a: int, b: int, test_fraction: float = 0.25, seed: int = 0, *, scaled: bool = True
) -> tuple[Dataset, Dataset]:
    """Two classes of the 8x8 handwritten digits as ``(train, test)`` :class:`flows.Dataset`\\ s.

    Data: scikit-learn's bundled copy of the UCI optical-recognition digits (1797 images, about
    180 per class, read by ``sklearn.datasets.load_digits`` from a file shipped with
    scikit-learn: no download). Class ``a`` gets label +1, class ``b`` label -1.

    Preprocessing: the 64 features are the pixels in row-major order (feature ``8 r + c`` is
    row r, column c). The raw intensities are integers 0..16 (counts of "on" bits in 4x4
    blocks of the original 32x32 bitmaps); ``scaled=True`` (default) divides them by 16, so
    every feature is in [0, 1]; ``scaled=False`` keeps the raw intensities. Nothing else (no
    centring: the predictor has no bias, and a pixel that is 0 in every image stays a zero
    column: pixels 0, 32 and 39 are 0 in every image of the file).

    Split: :func:`digit_indices` (stratified, deterministic in ``seed``; with the defaults
    about 270 training and 90 test images).

    Separability: checked on both sets by :class:`flows.Dataset`'s LP. Every one of the 45
    pairs is separable through the origin on the whole file (hence on every split, raw or
    scaled): a ``ValueError`` saying which pair is not separable can only come from a
    different file. Every pair is also separable by a ``beta`` with the signs of the class-mean
    difference ``mean_a - mean_b`` of the whole file (the orthant the digits study starts in;
    :func:`flows.data.sign_constrained_separable` checks a given split).

    Raises
    ------
    ImportError
        scikit-learn is missing (message: ``pip install -e '.[data]'``).
    ValueError
        ``a``, ``b`` not two different integers in 0..9; ``test_fraction`` not in (0, 1); a
        set not linearly separable through the origin (the message names the pair).
    """
    _scikit_learn_folder()  # the ImportError first, whatever is cached
    split = digit_indices(a, b, test_fraction, seed)
    X_all, target = _digits_arrays()
    scale = DIGITS_MAX_INTENSITY if scaled else 1.0
    out = []
    for name, rows in (("training", split.train), ("test", split.test)):
        X = X_all[rows] / scale
        y = np.where(target[rows] == a, 1.0, -1.0)
        try:
            out.append(Dataset(X, y))
        except ValueError as exc:
            raise ValueError(
                f"digits {a} vs {b}: the {name} set (seed {seed}) is not linearly "
                f"separable through the origin ({exc})"
            ) from exc
    return out[0], out[1]
