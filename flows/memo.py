"""What a run builds from its arguments before it integrates, kept per data set for the next
call with the same arguments.

A call of :func:`flows.simulate` checks its arguments and builds the problem, the chart, the
initial state and the vector field before its first step: about 100 µs of Python on a small
problem, as long as the compiled integration itself. A loop of calls on one data set (a
phase diagram, a sweep over ``rho``) builds the same objects again and again; here they are
built once. :func:`recall` keeps them in a table per :class:`~flows.data.Dataset` (a data set
is immutable), on the data set itself (what is kept refers to the data set, so a table beside
it would keep it alive; on it, the two are collected together; a pickled data set leaves it
behind, :meth:`flows.data.Dataset.__getstate__`), the most recent
:data:`KEPT` per data set, under exact keys (:func:`exact_key`: floats by their value and a
zero's sign, types included, so ``1`` and ``1.0`` or ``0.0`` and ``-0.0`` are different keys). A value kept here
is shared by every call that recalls it, and none of them writes to it.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:
    from .data import Dataset

#: Values kept per data set (the most recently used).
KEPT = 64
#: Data sets of more entries ``n d`` than this keep nothing (:func:`small`): there the set-up
#: is a small part of a run, and :data:`KEPT` set-ups and fields of ``O(d)`` and ``O(n)``
#: floats each (a field's contiguous copy of Fortran-ordered features, ``O(n d)``) would hold
#: memory a large run needs.
LARGEST_KEPT = 2**17
#: Arrays larger than this are not keys (:func:`exact_key` returns None): comparing their bytes
#: would cost as much as what the memo saves, where the problem is large enough for its set-up
#: not to matter.
LARGEST_KEY_ARRAY = 4096

#: The attribute of a :class:`~flows.data.Dataset` that holds its table.
TABLE = "_memo"
_LOCK = threading.Lock()

T = TypeVar("T")
_SCALARS = (bool, int, str, type(None))


def exact_key(value: Any) -> Any:
    """A hashable key equal for two values exactly when they are the same value of the same
    type: a float by its value, a zero with its sign (``0.0`` and ``-0.0`` apart; a NaN equals
    no key, so nothing is recalled for it), a bool, int, str or None as itself with its type,
    a small numpy array by dtype, shape and bytes, a tuple or dict item by item; None for
    anything else (then nothing is recalled)."""
    kind = type(value)
    if kind is float or kind is np.float64:
        return float(value) if value else ("zero", math.copysign(1.0, value))
    if kind in _SCALARS:
        return (kind, value)
    if kind is tuple or kind is dict:
        keys = []
        for k, v in value.items() if kind is dict else enumerate(value):
            part = exact_key(v)
            if part is None:
                return None
            keys.append((k, part))
        return (kind, tuple(keys))
    if isinstance(value, np.generic) and value.dtype.kind in "biu":
        return (kind, value.item())
    if isinstance(value, np.ndarray):
        if value.size > LARGEST_KEY_ARRAY or value.dtype.kind not in "biuf":
            return None
        return ("a", value.dtype.str, value.shape, value.tobytes())
    return None


def small(data: Dataset) -> bool:
    """Whether ``data`` keeps what its runs build (``n d`` at most :data:`LARGEST_KEPT`)."""
    return data.n * data.d <= LARGEST_KEPT


def recall(data: Dataset, key: Any, build: Callable[[], T]) -> T:
    """The value kept for ``data`` under ``key``, or ``build()`` kept under it (``key`` None:
    ``build()``, not kept). ``build`` raises as it would without the memo: nothing is kept
    then."""
    if key is None:
        return build()
    with _LOCK:
        table = data.__dict__.get(TABLE)
        if table is not None and key in table:
            table.move_to_end(key)
            return table[key]
    value = build()
    with _LOCK:
        table = data.__dict__.setdefault(TABLE, OrderedDict())
        table[key] = value
        if len(table) > KEPT:
            table.popitem(last=False)
    return value


def kept(data: Dataset) -> int:
    """How many values are kept for ``data``."""
    return len(data.__dict__.get(TABLE, ()))


def forget(data: Dataset) -> None:
    """Drop what is kept for ``data``."""
    with _LOCK:
        data.__dict__.pop(TABLE, None)
