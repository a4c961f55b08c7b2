"""numba's on-disk cache of the kernels, invalidated as one.

numba keys a cached function on the hash of its own source file only, and bakes into its machine
code the functions it calls or inlines from other files and the globals it reads (numba's
documentation, "Cache invalidation fails to recognize changes in functions defined in a
different file"). A kernel of ``_segment_kernels.py`` would then keep the old code of an edited
``_field_kernels.py`` function: old numbers, or a crash where the two copies meet in one
process. :func:`install` puts, ahead of numba's own cache locators, the same locators with one
change for the kernel modules of this package: their source stamp is the hash of every file the
kernels are compiled from (:data:`SOURCES`), so that a change to any of them recompiles them all.
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

from numba.core import caching

_HERE = Path(__file__).resolve().parent


def _scipy_dop853_coefficients() -> Path:
    """The scipy file of the DOP853 tableau that the segment kernels read as globals."""
    from scipy.integrate._ivp import dop853_coefficients

    return Path(dop853_coefficients.__file__).resolve()


#: The files the kernels are compiled from: the kernel modules, and the modules whose globals
#: they read (``LOG2``, the quadrature's constants, the DOP853 tableau).
SOURCES: tuple[Path, ...] = (
    *sorted(_HERE.glob("_*_kernels.py")),
    _HERE.parent / "signedlog.py",
    _HERE.parent / "clocks.py",
    _scipy_dop853_coefficients(),
)
#: The kernel modules whose functions the locators of :func:`install` serve.
KERNEL_FILES = frozenset(str(path) for path in SOURCES if path.parent == _HERE)


def source_stamp(sources: tuple[Path, ...] = SOURCES) -> str:
    """The sha256 of the contents of ``sources``, in order (recomputed when one changes)."""
    stats = tuple((str(path), *_stat(path)) for path in sources)
    return _hash(stats)


def _stat(path: Path) -> tuple[int, int]:
    """``(mtime in ns, size)`` of ``path``: the key under which its hash is memoised."""
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size


@lru_cache(maxsize=8)
def _hash(stats: tuple[tuple[str, int, int], ...]) -> str:
    """sha256 of the contents of the files named in ``stats``, in order (each preceded by its
    length, so that no two lists of contents hash alike by moving a boundary)."""
    digest = hashlib.sha256()
    for name, _mtime, _size in stats:
        data = Path(name).read_bytes()
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def _kernel_locator(base: type) -> type:
    """``base`` (a numba locator backed by a source file) restricted to the kernel modules,
    stamped with :func:`source_stamp`."""

    class KernelLocator(base):
        """numba's ``base`` locator, for this package's kernel modules, stamped by every source
        of the kernels."""

        samflows_kernels = True

        def get_source_stamp(self) -> str:
            return source_stamp()

        @classmethod
        def from_function(cls, py_func, py_file):
            if str(Path(py_file).resolve()) not in KERNEL_FILES:
                return None
            return super().from_function(py_func, py_file)

    KernelLocator.__name__ = KernelLocator.__qualname__ = f"Kernel{base.__name__}"
    return KernelLocator


def _probe() -> None:
    """A function that stands for a kernel when a locator is asked where the kernels' cache is."""


def cache_folder() -> Path | None:
    """The folder where numba keeps the kernels' cache (``__pycache__`` beside the kernel
    modules, or under ``NUMBA_CACHE_DIR``, or numba's user-wide folder), as numba's locators
    choose it; None when no locator can cache them. Compiles nothing."""
    install()
    kernel_file = min(KERNEL_FILES)
    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl  # type: ignore[attr-defined]
    for cls in impl._locator_classes:
        locator = cls.from_function(_probe, kernel_file)
        if locator is not None:
            return Path(locator.get_cache_path())
    return None


def install() -> None:
    """Put the kernel locators ahead of numba's (once per process); call before the kernels are
    decorated (numba picks a function's locator when ``cache=True`` is applied)."""
    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl  # type: ignore[attr-defined]
    classes: list[type] = impl._locator_classes
    if any(getattr(cls, "samflows_kernels", False) for cls in classes):
        return
    mixin = caching._SourceFileBackedLocatorMixin
    classes[:0] = [_kernel_locator(cls) for cls in classes if issubclass(cls, mixin)]
