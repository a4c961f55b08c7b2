"""The compiled backend (``backend="numba"``, extra ``fast``): numba twins of the numpy engine.

=========================================  ==================================================
:mod:`~flows.compiled.field`               the field at one point (:mod:`flows.fused`)
:mod:`~flows.compiled.segment`             the DOP853 segment loop (:mod:`flows.integrator.solver`)
:mod:`~flows.compiled.sliding`             l_inf-SAM's sliding combination (:mod:`flows.integrator.filippov`)
:mod:`~flows.compiled.quadrature`          the original-time interval rule (:mod:`flows.clocks`)
=========================================  ==================================================

The modules ``_*_kernels`` hold the numba functions themselves; importing them compiles (or
loads from numba's on-disk cache). Nothing here imports numba until a compiled object is built.
"""

from __future__ import annotations

import importlib.util

NUMBA_INSTALLED = importlib.util.find_spec("numba") is not None


def available() -> bool:
    """Whether numba is installed."""
    return NUMBA_INSTALLED


def require() -> None:
    """``ImportError`` naming the extra when numba is missing."""
    if not available():
        raise ImportError("backend 'numba' needs numba: pip install -e '.[fast]'")
