"""First use without a wait: the kernels compile in a background process while numpy computes.

numba compiles the kernels on their first use after an install or an update (~30-45 s on 2
cores, :data:`flows.compiled.COMPILE_NOTICE`). When ``backend="auto"`` would pick numba and the
kernels are not known to be in numba's on-disk cache, :func:`compiled_ready` starts ``python -m
flows.compiled.warm`` once, detached, and answers False: that call, and the next ones until the
kernels are cached, run on the numpy backend, and :data:`BACKGROUND_NOTICE` says so once per
process on stderr.

The kernels are known to be cached when every group of :mod:`flows.compiled.warm` has left its
stamp file in numba's cache folder of the kernels (:func:`flows.compiled._cache.cache_folder`).
:func:`mark_compiled` writes it when a group's calls are done. Its name carries a key of the
kernel sources (:func:`flows.compiled._cache.source_stamp`, the key of numba's cache of the
kernels), numba's version and Python's, so that an edit of a kernel source or an update of
numba needs new stamps. Deleting the cache folder deletes the stamps with it.

Only one background compile runs per cache folder: the process that starts it creates
:data:`LOCK_NAME` there (atomically) and writes the compiling process's id into it; the lock
is held while that process lives (at most :data:`LOCK_MAX_AGE` seconds). Its output goes to
:data:`LOG_NAME` in the same folder. A process starts at most one background compile; if it
ends without its stamps, the next calls compile in the foreground, as ``backend="numba"`` does.

With the environment variable :data:`NO_BACKGROUND_COMPILE` set (to anything but ``""``),
nothing of this happens: ``backend="auto"`` picks numba and compiles in the foreground. The test
suite sets it (``tests/conftest.py`` compiles ahead and holds the tests until it is done), and
so does the sweep (its runs compile their kernel groups one at a time,
:mod:`flows.sweep.gate`, and use numba from the first run on).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: Environment variable: when set, ``backend="auto"`` compiles the kernels in the foreground.
NO_BACKGROUND_COMPILE = "SAMFLOWS_NO_BACKGROUND_COMPILE"
#: The line on stderr when ``backend="auto"`` runs numpy while the kernels compile.
BACKGROUND_NOTICE = (
    "samflows: numba kernels are compiling in the background (about 30 s); this call and the "
    "next ones use the numpy backend until they are ready"
)
#: The lock file (in the cache folder) naming the process that compiles in the background.
LOCK_NAME = "samflows-warm.lock"
#: Where the background compile's output goes (in the cache folder).
LOG_NAME = "samflows-warm.log"
#: A lock older than this (seconds) is stale, whatever its process.
LOCK_MAX_AGE = 900.0

#: This process's state: ``ready`` (the stamps were found: numba from now on), ``started``
#: (the background process this one started, or None), ``said`` (the notice was printed).
_state: dict[str, Any] = {"ready": False, "started": None, "said": False}


def _disabled() -> bool:
    """Whether :data:`NO_BACKGROUND_COMPILE` is set."""
    return bool(os.environ.get(NO_BACKGROUND_COMPILE))


def cache_folder() -> Path | None:
    """numba's cache folder of the kernels (None: they cannot be cached)."""
    from . import _cache

    return _cache.cache_folder()


def _groups() -> tuple[str, ...]:
    from .warm import GROUPS

    return tuple(GROUPS)


def _key() -> str:
    """The kernel sources' hash, numba's version and Python's, hashed (16 hex digits)."""
    import numba

    from . import _cache

    text = f"{_cache.source_stamp()} {numba.__version__} {sys.version_info[:2]}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def stamp_path(group: str, folder: Path) -> Path:
    """The stamp file of kernel group ``group`` in cache folder ``folder``."""
    return folder / f"samflows-warm-{group}-{_key()}.done"


def mark_compiled(group: str) -> None:
    """Leave the stamp of ``group`` (its kernels are in numba's cache); nothing if the cache
    folder is unknown or not writable."""
    folder = cache_folder()
    if folder is None:
        return
    try:
        stamp_path(group, folder).write_text(f"{time.time():.0f}\n")
    except OSError:
        pass


def kernels_cached(folder: Path) -> bool:
    """Whether every kernel group has left its stamp in ``folder``."""
    return all(stamp_path(group, folder).exists() for group in _groups())


def compiled_ready(stream: Any = None) -> bool:
    """Whether ``backend="auto"`` should take numba now: True when :data:`NO_BACKGROUND_COMPILE`
    is set, when the kernels cannot be cached, when they are cached (:func:`kernels_cached`;
    remembered for the rest of the process) and when no background compile runs or can be
    started (numba then compiles in the foreground). Otherwise starts the background compile if
    none runs yet, says :data:`BACKGROUND_NOTICE` on ``stream`` (stderr) once per process, and
    returns False."""
    if _state["ready"] or _disabled():
        return True
    folder = cache_folder()
    if folder is None or kernels_cached(folder):
        _state["ready"] = True
        return True
    if not _compiling(folder):
        return True
    if not _state["said"]:
        _state["said"] = True
        print(BACKGROUND_NOTICE, file=stream or sys.stderr, flush=True)
    return False


def _compiling(folder: Path) -> bool:
    """Whether a background compile runs for ``folder``, starting one if none does and this
    process has not started one before."""
    lock = folder / LOCK_NAME
    if _held(lock):
        return True
    if _state["started"] is not None:  # ours ended without its stamps: compile in the foreground
        return False
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:  # stale (checked above): take it over, once
        try:
            lock.unlink()
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:  # another process took it meanwhile
            return True
        except OSError:
            return False
    except OSError:
        return False
    try:
        proc = _start(folder)
    except OSError:
        os.close(fd)
        lock.unlink(missing_ok=True)
        return False
    os.write(fd, f"{proc.pid}\n".encode())
    os.close(fd)
    _state["started"] = proc
    return True


def _start(folder: Path) -> Any:
    """Start ``python -m flows.compiled.warm``, detached, its output to :data:`LOG_NAME`."""
    env = dict(os.environ)
    env[NO_BACKGROUND_COMPILE] = "1"
    root = str(Path(__file__).resolve().parents[2])  # the folder holding the package flows
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    if os.name == "nt":
        flags = getattr(subprocess, "DETACHED_PROCESS", 0)
        flags |= getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
        detach: dict[str, Any] = {"creationflags": flags}
    else:
        detach = {"start_new_session": True}
    with open(folder / LOG_NAME, "w") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "flows.compiled.warm"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            **detach,
        )


def _held(lock: Path) -> bool:
    """Whether ``lock`` names a background compile still running."""
    try:
        age = time.time() - lock.stat().st_mtime
        text = lock.read_text().strip()
    except OSError:
        return False
    if age > LOCK_MAX_AGE:
        return False
    if not text:  # being written by the process that just created it
        return age < 60.0
    try:
        pid = int(text)
    except ValueError:
        return False
    ours = _state["started"]
    if ours is not None and ours.pid == pid:
        return ours.poll() is None
    if os.name == "nt":  # no cheap liveness test without killing: trust the age
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    except OSError:
        return False
    return True
