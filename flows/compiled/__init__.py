"""The compiled backend (``backend="numba"``, extra ``fast``): numba twins of the numpy engine.

=========================================  ==================================================
:mod:`~flows.compiled.field`               the field at one point (:mod:`flows.fused`)
:mod:`~flows.compiled.segment`             the DOP853 segment loop (:mod:`flows.integrator.solver`)
:mod:`~flows.compiled.sliding`             l_inf-SAM's sliding combination (:mod:`flows.integrator.filippov`)
:mod:`~flows.compiled.quadrature`          the original-time interval rule (:mod:`flows.clocks`)
:mod:`~flows.compiled.discrete`            the loop of ``iterate``'s steps (:mod:`flows.discrete`)
:mod:`~flows.compiled.stepping`            l_inf-SAM's own steps (:mod:`flows.integrator.own_steps`)
:mod:`~flows.compiled.warm`                compiles the kernels ahead (``python -m flows.compiled.warm``)
:mod:`~flows.compiled.background`          compiles them in the background on the first ``auto`` call
=========================================  ==================================================

The modules ``_*_kernels`` hold the numba functions themselves; numba compiles each on its first
call (or loads it from its on-disk cache, which :mod:`~flows.compiled._cache` keys on every source
of the kernels). Nothing here imports numba until a compiled object is built.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

NUMBA_INSTALLED = importlib.util.find_spec("numba") is not None
#: What the first use of the compiled backend after an install costs on 2 cores (numba compiles
#: the kernels a call needs and caches them on disk; ``python -m flows.compiled.warm`` does it
#: ahead for every kernel).
COMPILE_NOTICE = (
    "samflows: numba is compiling the kernels of the compiled backend (first use after an "
    "install or an update: about 30 s on 2 cores, then cached on disk)"
)
_listener: Any = None


def available() -> bool:
    """Whether numba is installed."""
    return NUMBA_INSTALLED


def require() -> None:
    """``ImportError`` naming the extra when numba is missing."""
    if not available():
        raise ImportError("backend 'numba' needs numba: pip install -e '.[fast]'")


def announce_compiles(stream=None) -> None:
    """Print :data:`COMPILE_NOTICE` on ``stream`` (stderr) when numba starts compiling a kernel of
    this package, once per process, and from then on count and time every compile
    (:func:`kernels_compiled`, :func:`compile_seconds`); kernels loaded from numba's cache say
    nothing and take no compile time."""
    global _listener
    if _listener is not None:
        return
    from numba.core import event

    class Watch(event.Listener):
        """Says :data:`COMPILE_NOTICE` at the first compile of a ``flows.compiled`` kernel,
        counts the compiles and adds up the time of the outermost ones (a kernel's callees
        compile inside it)."""

        said = False
        count = 0
        depth = 0
        since = 0.0
        seconds = 0.0

        def on_start(self, ev: Any) -> None:
            if not ev.data["dispatcher"].py_func.__module__.startswith(__name__):
                return
            if not self.said:
                self.said = True
                print(COMPILE_NOTICE, file=stream or sys.stderr, flush=True)
            if self.depth == 0:
                self.since = time.perf_counter()
            self.depth += 1
            self.count += 1

        def on_end(self, ev: Any) -> None:
            if not ev.data["dispatcher"].py_func.__module__.startswith(__name__):
                return
            self.depth -= 1
            if self.depth == 0:
                self.seconds += time.perf_counter() - self.since

    _listener = Watch()
    event.register("numba:compile", _listener)


def kernels_compiled() -> int:
    """How many of this package's kernels this process has compiled so far (callees included;
    0 before the first compiled object is built, and without numba)."""
    return 0 if _listener is None else int(_listener.count)


def compile_seconds() -> float:
    """Seconds this process has spent compiling this package's kernels so far (0 before the
    first compiled object is built, and without numba): a task's own time is its wall time
    less the compile time it caused."""
    return 0.0 if _listener is None else float(_listener.seconds)


def load() -> None:
    """Import numba and every kernel module (``_*_kernels``) in the calling thread, and start
    :func:`announce_compiles`' count; nothing compiles, and without numba nothing happens.

    Called before threads that may build compiled objects start (:func:`flows.simulate_many`
    with ``threads > 1``): numba's first import in two threads at once can hang. Seen in about
    one process in twelve whose first compiled call was ``simulate_many(..., threads=2)``: in
    one thread, the callback numba registers on llvmlite's lock read the partly imported
    ``numba.core.event`` of the other and raised inside the lock's ``__enter__``, so that the
    lock stayed held by a thread that had ended, and the other thread waited for it forever.
    :func:`announce_compiles` also installs its listener once per process without a lock."""
    if not available():
        return
    announce_compiles()
    for path in sorted(Path(__file__).parent.glob("_*_kernels.py")):
        importlib.import_module(f"{__name__}.{path.stem}")


# The modules below import the functions above (``from . import require``), so they come last;
# none imports numba. The command line :mod:`~flows.compiled.warm` is not re-exported.
from .background import (  # noqa: E402
    BACKGROUND_NOTICE,
    NO_BACKGROUND_COMPILE,
    cache_folder,
    compiled_ready,
    kernels_cached,
    mark_compiled,
    stamp_path,
)
from .discrete import CompiledSteps, stepper, steps_compiled  # noqa: E402
from .field import CompiledField, compiled_hyperparameters  # noqa: E402
from .quadrature import interval_rule  # noqa: E402
from .segment import (  # noqa: E402
    Advance,
    Call,
    advance,
    applies,
    call_capacity,
    call_kernel,
    chart_values,
    exponent,
    kept_steps,
    loop_arguments,
)
from .sliding import CompiledSliding  # noqa: E402
from .stepping import own_steps  # noqa: E402

__all__ = [
    "BACKGROUND_NOTICE",
    "COMPILE_NOTICE",
    "NO_BACKGROUND_COMPILE",
    "NUMBA_INSTALLED",
    "Advance",
    "Call",
    "CompiledField",
    "CompiledSliding",
    "CompiledSteps",
    "advance",
    "announce_compiles",
    "applies",
    "available",
    "cache_folder",
    "call_capacity",
    "call_kernel",
    "chart_values",
    "compiled_hyperparameters",
    "compiled_ready",
    "compile_seconds",
    "exponent",
    "interval_rule",
    "kept_steps",
    "kernels_cached",
    "kernels_compiled",
    "load",
    "loop_arguments",
    "mark_compiled",
    "own_steps",
    "require",
    "stamp_path",
    "stepper",
    "steps_compiled",
]
