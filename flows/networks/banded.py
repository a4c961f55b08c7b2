"""Banded data: the label lives in frequency bands of increasing strength, from minor to major.

A signal of length ``N`` carries, in band ``k`` (a set of frequencies ``F_k``), the cosines

    x_i = y_i sum_k mu_k |F_k|^(-1/2) sum_{f in F_k} c_f + sigma xi_i,
    c_f(t) = sqrt(2 / N) cos(2 pi f t / N)  (unit norm),

with ``mu_1 < ... < mu_K`` (band 1 the most minor, band K the major one), labels
``y_i = +-1`` (alternating) and white noise ``xi_i ~ N(0, I / N)`` (``E||xi||^2 = 1``). Every
band carries the same label signal at a different strength, as the coordinates ``mu_j`` of
the single-example data of the diagonal network do: without noise every example is ``y_i``
times one signal of norm ``||mu||`` whose orthonormal cosine coefficients are
``mu_k / sqrt(|F_k|)`` on ``F_k``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from ..checks import integer, memory, real, real_array


@dataclass(frozen=True)
class BandedData:
    """A banded data set: ``X`` (n, N) signals, ``y`` (n,) labels, and how they were made."""

    X: np.ndarray
    y: np.ndarray
    bands: tuple[tuple[int, ...], ...]
    strengths: tuple[float, ...]
    noise: float
    seed: int

    @property
    def length(self) -> int:
        """``N``."""
        return self.X.shape[1]


def band_signal(length: int, bands, strengths) -> np.ndarray:
    """``sum_k mu_k |F_k|^(-1/2) sum_{f in F_k} c_f(t)``, t = 0..N-1."""
    t = np.arange(length)
    signal = np.zeros(length)
    for band, mu in zip(bands, strengths, strict=True):
        for f in band:
            signal += mu * np.sqrt(2.0 / (len(band) * length)) * np.cos(2 * np.pi * f * t / length)
    return signal


def banded_data(
    n: int = 16,
    length: int = 20,
    bands=((1, 2), (3, 4), (5, 6), (7, 8)),
    strengths=(1.0, 2.0, 3.0, 4.0),
    noise: float = 0.0,
    seed: int = 0,
) -> BandedData:
    """The data of the module docstring.

    Parameters
    ----------
    n : examples (labels ``+1, -1, +1, ...``).
    length : ``N``, the signal length (``n N`` at most :data:`flows.checks.MAX_FLOATS`).
    bands : the frequency sets ``F_k``, disjoint, each frequency in ``1 .. N/2 - 1`` (so that
        cosine and sine at ``f`` are distinct and the coefficient is that of one orthonormal
        pair).
    strengths : ``mu_k > 0``, one per band, increasing (minor to major).
    noise : ``sigma >= 0``; ``seed`` seeds ``numpy.random.default_rng`` for the noise.
    """
    n = integer(n, "n", 1)
    length = integer(length, "length", 4)
    memory(length, "length", f"a signal of length {length}")
    memory(n * length, "n", f"X ({n} signals of length {length})")
    bands = check_bands(bands, 1, (length - 1) // 2)
    mu = real_array(strengths, "strengths", ndim=1)
    if mu.size != len(bands) or not np.all(mu > 0) or not np.all(np.diff(mu) > 0):
        raise ValueError(
            f"strengths must be {len(bands)} positive, increasing values (one per band), got {mu}"
        )
    noise = real(noise, "noise", low=0.0)
    seed = integer(seed, "seed", 0)
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    X = y[:, None] * band_signal(length, bands, mu)[None, :]
    if noise > 0:
        X = X + noise / np.sqrt(length) * np.random.default_rng(seed).standard_normal((n, length))
    return BandedData(X, y, bands, tuple(float(m) for m in mu), noise, seed)


def check_bands(
    bands, lowest: int, highest: int, name: str = "bands"
) -> tuple[tuple[int, ...], ...]:
    """``bands`` as a tuple of tuples of frequencies: at least one band, each a non-empty
    sequence of integers in ``[lowest, highest]``, no frequency in two bands (or twice in one);
    ``ValueError`` naming ``name`` otherwise."""
    shown = repr(bands)[:200]
    checked = []
    for band in _sequence(bands, name, "a sequence of bands of frequencies"):
        frequencies = _sequence(band, name, "a sequence of bands, each of frequencies")
        checked.append(
            tuple(integer(f, f"{name} (a frequency)", lowest, highest) for f in frequencies)
        )
    flat = [f for band in checked for f in band]
    if not checked or any(not band for band in checked) or len(set(flat)) != len(flat):
        raise ValueError(
            f"{name} must be non-empty, disjoint sets of frequencies in [{lowest}, {highest}], "
            f"got {shown}"
        )
    return tuple(checked)


def _sequence(value, name: str, what: str) -> list:
    """The entries of a list, tuple, 1-d array or other iterable (not a string, a mapping or
    a 0-d array); ``ValueError`` naming ``name`` otherwise."""
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            raise ValueError(f"{name} must be {what}, got {value!r}")
        return value.tolist()
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise ValueError(f"{name} must be {what}, got {repr(value)[:200]}")
    return list(value)


def band_sums(values: np.ndarray, bands) -> np.ndarray:
    """``sum_{f in F_k} values[..., f]`` per band, and last the same over every other
    frequency: (..., K + 1), ``values`` per frequency ``0 .. N/2`` along the last axis;
    ``bands`` as :func:`check_bands` takes them, each frequency in ``0 .. N/2`` (``ValueError``
    naming bands)."""
    values = np.asarray(values, dtype=float)
    bands = check_bands(bands, 0, values.shape[-1] - 1)
    inside = np.zeros(values.shape[-1], dtype=bool)
    parts = []
    for band in bands:
        parts.append(values[..., list(band)].sum(axis=-1))
        inside[list(band)] = True
    parts.append(values[..., ~inside].sum(axis=-1))
    return np.stack(parts, axis=-1)


def band_spectrum(z: np.ndarray, bands) -> np.ndarray:
    """:func:`band_sums` of ``|z_hat(f)|``, ``z_hat`` the real DFT of ``z`` along its last
    axis (length N)."""
    return band_sums(np.abs(np.fft.rfft(np.asarray(z, dtype=float), axis=-1)), bands)
