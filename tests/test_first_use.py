"""First use without a wait (:mod:`flows.compiled.background`): while numba's cache of the kernels
is empty, ``backend="auto"`` runs numpy, starts one background compile per cache folder and says
so once on stderr; once every kernel group has left its stamp it runs numba. The in-process
tests stub ``subprocess.Popen``; the end-to-end test (marked slow) compiles for real."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("numba")

from flows import simulate, single_example  # noqa: E402
from flows.backends import choose_backend  # noqa: E402
from flows.compiled import background  # noqa: E402
from flows.compiled.warm import GROUPS  # noqa: E402
from flows.model import DEFAULT_LOSS, LOSSES  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class FakePopen:
    """Records its calls; the "process" is this one (alive) until ``returncode`` is set."""

    calls: list[tuple[list[str], dict]] = []

    def __init__(self, args, **kwargs):
        FakePopen.calls.append((list(args), kwargs))
        self.pid = os.getpid()
        self.returncode = None

    def poll(self):
        return self.returncode


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """An empty cache folder, this process's state reset, the variable unset, Popen stubbed."""
    monkeypatch.delenv(background.NO_BACKGROUND_COMPILE, raising=False)
    monkeypatch.setattr(background, "cache_folder", lambda: tmp_path)
    monkeypatch.setattr(background, "_state", {"ready": False, "started": None, "said": False})
    monkeypatch.setattr(subprocess, "Popen", FakePopen)
    FakePopen.calls = []
    return tmp_path


def problem() -> Any:
    """What :func:`choose_backend` reads of a problem: its loss (one with a compiled twin)."""
    return SimpleNamespace(loss=LOSSES[DEFAULT_LOSS])


def test_first_auto_call_runs_numpy_and_starts_one_background_compile(fresh, capsys):
    first = simulate(single_example([1.0, 2.0]), "l2-sam", 2, 0.4, rho=1.0, t_max=1.0)
    second = simulate(single_example([1.0, 2.0]), "l2-sam", 2, 0.4, rho=1.0, t_max=1.0)
    assert first.backend == second.backend == "numpy"
    assert capsys.readouterr().err.count(background.BACKGROUND_NOTICE) == 1
    assert len(FakePopen.calls) == 1
    args, kwargs = FakePopen.calls[0]
    assert args == [sys.executable, "-m", "flows.compiled.warm"]
    assert kwargs["env"][background.NO_BACKGROUND_COMPILE]
    assert kwargs["stdin"] == subprocess.DEVNULL
    if os.name != "nt":
        assert kwargs["start_new_session"]
    assert (fresh / background.LOCK_NAME).read_text().strip() == str(os.getpid())
    assert (fresh / background.LOG_NAME).exists()

    for group in GROUPS:  # what warm.py's compile_group leaves when a group is done
        assert choose_backend("auto", problem()).name == "numpy"
        background.mark_compiled(group)
    assert choose_backend("auto", problem()).name == "numba"
    assert len(FakePopen.calls) == 1


def test_the_variable_turns_it_off(fresh, monkeypatch, capsys):
    monkeypatch.setenv(background.NO_BACKGROUND_COMPILE, "1")
    assert choose_backend("auto", problem()).name == "numba"
    assert FakePopen.calls == [] and capsys.readouterr().err == ""
    assert not (fresh / background.LOCK_NAME).exists()


def test_an_explicit_numba_compiles_in_the_foreground(fresh, capsys):
    assert choose_backend("numba", problem()).name == "numba"
    assert FakePopen.calls == [] and capsys.readouterr().err == ""


def test_one_compile_per_cache_folder(fresh, monkeypatch):
    lock = fresh / background.LOCK_NAME
    lock.write_text(f"{os.getpid()}\n")  # another process compiles (a live one)
    assert choose_backend("auto", problem()).name == "numpy"
    assert FakePopen.calls == []
    old = time.time() - background.LOCK_MAX_AGE - 1
    os.utime(lock, (old, old))  # stale: taken over
    assert choose_backend("auto", problem()).name == "numpy"
    assert choose_backend("auto", problem()).name == "numpy"
    assert len(FakePopen.calls) == 1


def test_a_background_compile_that_fails_leaves_the_foreground_one(fresh):
    assert choose_backend("auto", problem()).name == "numpy"
    background._state["started"].returncode = 1  # ended without its stamps
    assert choose_backend("auto", problem()).name == "numba"
    assert len(FakePopen.calls) == 1


def test_stamps_are_keyed_on_the_kernel_sources(fresh, monkeypatch):
    from flows.compiled import _cache

    for group in GROUPS:
        background.mark_compiled(group)
    assert background.kernels_cached(fresh)
    monkeypatch.setattr(_cache, "source_stamp", lambda: "an edited kernel")
    assert not background.kernels_cached(fresh)


FIRST_CALL = """
import subprocess, sys, time
start = time.perf_counter()
calls = []
class Fake:
    def __init__(self, args, **kwargs):
        calls.append(args)
        self.pid = 999999999
    def poll(self):
        return None
subprocess.Popen = Fake  # STUB
from flows import simulate, single_example
from flows.compiled import background
r = simulate(single_example([1.0, 2.0, 3.0]), "l2-sam", 2, 0.4, rho=1.0, t_max=2.0)
print(r.backend, time.perf_counter() - start, len(calls), background.cache_folder())
"""


def first_call(cache: Path, stub: bool) -> tuple[subprocess.CompletedProcess, float]:
    """A first auto call in a new process with ``NUMBA_CACHE_DIR=cache``; its wall time."""
    env = {k: v for k, v in os.environ.items() if k != background.NO_BACKGROUND_COMPILE}
    env["NUMBA_CACHE_DIR"] = str(cache)
    code = FIRST_CALL if stub else FIRST_CALL.replace("subprocess.Popen = Fake", "pass")
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, time.perf_counter() - start


def test_a_first_call_in_a_fresh_cache_answers_at_once(tmp_path):
    done, seconds = first_call(tmp_path, stub=True)
    assert done.returncode == 0, done.stderr
    backend, _, calls, folder = done.stdout.split()
    assert backend == "numpy" and calls == "1"
    assert seconds < 10.0
    assert done.stderr.count(background.BACKGROUND_NOTICE) == 1
    assert Path(folder).parent == tmp_path  # numba's folder under NUMBA_CACHE_DIR
    assert (Path(folder) / background.LOCK_NAME).exists()


@pytest.mark.slow
def test_end_to_end_the_background_compile_makes_auto_numba(tmp_path):
    done, seconds = first_call(tmp_path, stub=False)
    assert done.returncode == 0, done.stderr
    backend, _, calls, folder = done.stdout.split()
    assert backend == "numpy" and seconds < 10.0
    assert done.stderr.count(background.BACKGROUND_NOTICE) == 1
    pid = int((Path(folder) / background.LOCK_NAME).read_text())
    deadline = time.monotonic() + 900.0
    try:
        while time.monotonic() < deadline:
            if len(list(Path(folder).glob("samflows-warm-*.done"))) == len(GROUPS):
                break
            time.sleep(0.5)
        else:
            pytest.fail("the background compile left no stamps")
    finally:
        while time.monotonic() < deadline:  # its processes exit once the stamps are written
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
    env = {k: v for k, v in os.environ.items() if k != background.NO_BACKGROUND_COMPILE}
    env["NUMBA_CACHE_DIR"] = str(tmp_path)
    code = (
        "from flows import simulate, single_example, compiled\n"
        "r = simulate(single_example([1.0, 2.0, 3.0]), 'l2-sam', 2, 0.4, rho=1.0, t_max=2.0)\n"
        "print(r.backend, compiled.kernels_compiled())\n"
    )
    again = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert again.stdout.split() == ["numba", "0"], again.stderr
    assert again.stderr == ""


THREADED_FIRST_CALL = """
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from flows import compiled, simulate_many, single_example

assert "numba" not in sys.modules
seen = []
submit = ThreadPoolExecutor.submit


def recording(self, fn, *args, **kwargs):
    seen.append(("numba" in sys.modules, compiled.kernels_compiled(), compiled._listener))
    return submit(self, fn, *args, **kwargs)


ThreadPoolExecutor.submit = recording
runs = simulate_many(single_example([1.0, 2.0]), "l2-sam", 2, [0.5, 1.0], rho=0.5, t_max=1.0,
                     n_points=3, threads=2, backend="{backend}")
print(len(runs), all(numba and listener is not None for numba, _, listener in seen), len(seen),
      "numba" in sys.modules)
"""


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_threads_start_with_numba_imported_by_the_caller(backend):
    """``simulate_many(threads=2)`` as a process's first compiled call: numba and the kernel
    modules are imported, and the compile count installed, in the calling thread before the
    first task goes to the pool (two threads importing numba at once can hang); with the numpy
    backend numba is not imported at all."""
    code = THREADED_FIRST_CALL.replace("{backend}", backend)
    env = {**os.environ, background.NO_BACKGROUND_COMPILE: "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=120, check=True)  # fmt: skip
    runs, imported, tasks, numba = out.stdout.split()
    assert runs == "2" and int(tasks) >= 1
    if backend == "numba":
        assert imported == "True" and numba == "True"
    else:
        assert numba == "False"
