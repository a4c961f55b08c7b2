"""Session set-up: the numba kernels of l_inf-SAM's sliding combination and of ``iterate``'s
compiled loop are compiled on the second core while the tests start on the first (``python -m
flows.compiled.warm --group sliding --group discrete``; the first test that needs them then
loads them from numba's cache). With the cache
warm this costs the second core about a second; it changes no result (the same machine code,
compiled in another process)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from flows import compiled

_warming: list[subprocess.Popen] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    """Start compiling the sliding and discrete kernels in a process of their own (numba
    installed)."""
    if compiled.available():
        _warming.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "flows.compiled.warm",
                    "--group",
                    "sliding",
                    "--group",
                    "discrete",
                    "--jobs",
                    "1",
                ],  # fmt: skip
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the compiling process if it is still running (an interrupted or very short run)."""
    for proc in _warming:
        if proc.poll() is None:
            proc.terminate()
        proc.wait()
