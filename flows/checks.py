"""Checks of user input shared by every entry point: ``simulate``, ``iterate``, ``Dataset``,
the closed forms, the analysis functions and the command lines.

Each returns the value in its working type or raises a ``ValueError`` whose message names the
parameter. Numbers are real numbers: Python and numpy integers and floats and 0-d arrays of them
are accepted; bools, strings, bytes, ``None``, complex numbers and masked arrays are refused,
not converted (``float(True)`` is 1.0, ``float('1')`` is 1.0, ``float(1 + 0j)`` drops nothing
only by luck, and a masked entry is silently used with its fill value).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection, Mapping

import numpy as np

__all__ = ["MAX_FLOATS", "choice", "integer", "memory", "positive", "real", "real_array"]

#: Largest array an entry point builds from its size arguments (examples, signal length,
#: input shape, ...): 2**28 float64 or int64 entries, 2 GiB. Larger sizes are refused by
#: :func:`memory` before anything is allocated.
MAX_FLOATS = 2**28


def real(
    value,
    name: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    finite: bool = True,
) -> float:
    """``value`` as a float: a real number (module doc), not NaN, finite unless
    ``finite=False``, and within ``[low, high]`` (open ends as asked)."""
    if isinstance(value, np.ma.MaskedArray):
        raise ValueError(f"{name} must be a real number, not a masked array, got {value!r}")
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    try:
        v = float(value)
    except OverflowError:
        raise ValueError(f"{name} must be within the float64 range, got {value!r}") from None
    if math.isnan(v) or (finite and not math.isfinite(v)):
        raise ValueError(
            f"{name} must be {'finite' if finite else 'a number (not NaN)'}, got {value!r}"
        )
    if low is not None and (v < low or (low_open and v == low)):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low:g}, got {value!r}")
    if high is not None and (v > high or (high_open and v == high)):
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high:g}, got {value!r}")
    return v


def positive(value, name: str) -> float:
    """``value`` as a finite float ``> 0`` (:func:`real`)."""
    return real(value, name, low=0.0, low_open=True)


def integer(value, name: str, low: int, high: int | None = None) -> int:
    """``value`` as an int in ``[low, high]``: a Python or numpy integer or a 0-d integer
    array (not a bool, not a float even if integral, not a masked array)."""
    if isinstance(value, np.ma.MaskedArray):
        raise ValueError(f"{name} must be an integer, not a masked array, got {value!r}")
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu":
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be an integer {bound}, got {value!r}")
    return int(value)


def real_array(
    value, name: str, ndim: int | None = None, finite: bool = True, nonempty: bool = True
) -> np.ndarray:
    """``value`` as a float64 array: real numbers only (a bool, string, complex or object dtype
    and masked arrays are refused), of rank ``ndim`` if given, not empty unless
    ``nonempty=False``, and finite unless ``finite=False`` (then NaN and inf pass: the caller
    decides)."""
    if isinstance(value, np.ma.MaskedArray):
        raise ValueError(f"{name} must not be a masked array (fill or drop the masked entries)")
    if isinstance(value, (str, bytes)) or value is None:
        raise ValueError(f"{name} must be an array of real numbers, got {value!r}")
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an array of real numbers, got {value!r}") from exc
    if raw.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be real numbers, got {raw.dtype} values: {value!r}"[:300])
    arr = raw.astype(float)
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if nonempty and arr.size == 0:
        raise ValueError(f"{name} must not be empty")
    if finite and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (found NaN or inf)")
    return arr


def choice(value, name: str, choices: Collection[str]) -> str:
    """A string among ``choices`` (a list or an array is refused before it is looked up: it is
    unhashable or compares elementwise)."""
    if not isinstance(value, str) or value not in choices:
        shown = sorted(choices) if isinstance(choices, Mapping) else list(choices)  # keep order
        raise ValueError(f"{name} must be one of {shown}, got {value!r}")
    return value


def memory(count: int, name: str, what: str) -> None:
    """``ValueError`` naming ``name`` when ``what`` (an array the sizes given by ``name`` call
    for) needs more than :data:`MAX_FLOATS` entries of 8 bytes; the message gives the memory
    it would need."""
    if count > MAX_FLOATS:
        raise ValueError(
            f"{name}: {what} would need {_gib(count)} ({count:.3g} entries of 8 bytes), more "
            f"than the cap of {_gib(MAX_FLOATS)}; lower {name}"
        )


def _gib(count: int) -> str:
    """``count`` entries of 8 bytes in GiB, or TiB from 1024 GiB on."""
    size = count * 8 / 2**30
    return f"{size:.3g} GiB" if size < 1024 else f"{size / 1024:.3g} TiB"
