"""Session set-up: the numba kernels are compiled ahead, in two processes of their own, while the
tests start; a test process that needs a kernel before they are done waits for them instead of
compiling the same kernel itself.

The suite runs on every core (pytest-xdist, ``-n auto --dist loadfile`` in ``pyproject.toml``).
At the start of the session the main process runs ``python -m flows.compiled.warm --group
segment`` and ``... --group sliding --group discrete --group many`` (numba installed): the two
take about the same time from an empty cache, and a second or two each when numba's cache is
warm. Every process that runs tests (the xdist workers, or the main process with ``-p
no:xdist``) holds the load of a ``flows`` kernel until numba's cache has it or both have
exited, then loads it from the cache (or compiles it, a specialisation the warm calls do not
make): a test whose kernels are compiled goes on while the rest compile. The waiting changes no
result, only who compiles: the same machine code, compiled in another process.
The session sets ``SAMFLOWS_NO_BACKGROUND_COMPILE``, so that ``backend="auto"`` takes numba from
the first test on (:mod:`flows.compiled.background`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import settings

from flows import compiled
from flows.compiled.background import NO_BACKGROUND_COMPILE

# The suite compiles the kernels ahead (below): backend="auto" takes numba and waits for them,
# rather than running numpy while a background compile runs (flows.compiled.background).
os.environ[NO_BACKGROUND_COMPILE] = "1"

# No hypothesis example has a time limit: on a busy machine a test only takes longer (the
# properties' own settings may lower the number of examples, never add a deadline).
settings.register_profile("samflows", deadline=None)
settings.load_profile("samflows")

#: The groups of :mod:`flows.compiled.warm`, split into two processes of similar compile time
#: (measured alone, each from an empty cache: 46 s and 46 s; segment 38 s, sliding 29 s, many
#: 18 s, discrete 10 s, the field kernels they share compiled in both).
WARM_PROCESSES = (("segment", "discrete"), ("sliding", "many"))
#: Environment variable naming the directory where each compiling process leaves a file when it
#: has exited (the xdist workers inherit it).
WARM_DONE = "SAMFLOWS_TEST_WARM_DONE"
#: Longest wait for the compiling processes, in seconds (then the test process compiles itself).
WAIT_CAP = 1800.0

_warming: list[subprocess.Popen] = []


def _is_worker(config: pytest.Config) -> bool:
    """Whether this process is an xdist worker (the main process starts the compiles)."""
    return hasattr(config, "workerinput")


def _start_warming() -> None:
    """Start the compiling processes; a thread per process leaves ``done-<i>`` in the directory
    named by :data:`WARM_DONE` when it has exited."""
    done = Path(tempfile.mkdtemp(prefix="samflows-warm-"))
    for i, groups in enumerate(WARM_PROCESSES):
        args = [arg for group in groups for arg in ("--group", group)]
        proc = subprocess.Popen(
            [sys.executable, "-m", "flows.compiled.warm", *args, "--jobs", "1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _warming.append(proc)
        marker = done / f"done-{i}"
        threading.Thread(target=_mark_when_done, args=(proc, marker), daemon=True).start()
    os.environ[WARM_DONE] = f"{done}{os.pathsep}{len(WARM_PROCESSES)}"


def _mark_when_done(proc: subprocess.Popen, marker: Path) -> None:
    """Leave ``marker`` once ``proc`` has exited (not if the session has already removed its
    directory: a short run that stopped the compiles at its end)."""
    proc.wait()
    with contextlib.suppress(FileNotFoundError):
        marker.touch()


def _in_cache(dispatcher, sig) -> bool:
    """Whether numba's on-disk cache holds ``dispatcher``'s compiled ``sig`` (loaded to tell)."""
    try:
        return dispatcher._cache.load_overload(sig, dispatcher.targetctx) is not None
    except Exception:  # numba's cache internals: when they cannot tell, wait for the compiles
        return False


def _hold_kernel_loads_until_warm() -> None:
    """Make the load of a ``flows`` kernel in this process wait until numba's cache holds it or
    the compiling processes have exited (at most :data:`WAIT_CAP` seconds)."""
    if WARM_DONE not in os.environ:
        return
    folder, count = os.environ[WARM_DONE].rsplit(os.pathsep, 1)
    markers = [Path(folder) / f"done-{i}" for i in range(int(count))]
    from numba.core import sigutils
    from numba.core.dispatcher import Dispatcher

    load = Dispatcher.compile
    state = {"warm": False}

    def warm() -> bool:
        state["warm"] = state["warm"] or all(m.exists() for m in markers)
        return state["warm"]

    def compile_after_warm(self, sig):
        args, _ = sigutils.normalize_signature(sig)
        loaded = tuple(args) in self.overloads
        if not loaded and not warm() and self.py_func.__module__.startswith("flows."):
            deadline = time.monotonic() + WAIT_CAP
            while not warm() and not _in_cache(self, sig) and time.monotonic() < deadline:
                time.sleep(0.1)
        return load(self, sig)

    Dispatcher.compile = compile_after_warm


def pytest_configure(config: pytest.Config) -> None:
    """Main process: start compiling; every test process: wait for it at the first kernel."""
    if not compiled.available():
        return
    if not _is_worker(config):
        _start_warming()
    _hold_kernel_loads_until_warm()


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop the compiling processes if they are still running (an interrupted or short run)."""
    if _is_worker(config):
        return
    for proc in _warming:
        if proc.poll() is None:
            proc.terminate()
        proc.wait()
    if WARM_DONE in os.environ:
        shutil.rmtree(os.environ[WARM_DONE].rsplit(os.pathsep, 1)[0], ignore_errors=True)
