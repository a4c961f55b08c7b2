"""numba's cache of the kernels is invalidated as one (:mod:`flows.compiled._cache`): every kernel
is stamped by the hash of all the files the kernels are compiled from, so that an edit of one
kernel module (or of a module whose globals they read) recompiles the kernels of the others that
call or inline it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("numba")

from numba.core.registry import CPUDispatcher  # noqa: E402

from flows.compiled import (  # noqa: E402
    _cache,
    _discrete_kernels,
    _field_kernels,
    _many_kernels,
    _quadrature_kernels,
    _segment_kernels,
    _sliding_kernels,
    _stepping_kernels,
)

MODULES = (_discrete_kernels, _field_kernels, _many_kernels, _quadrature_kernels,
           _segment_kernels, _sliding_kernels, _stepping_kernels)  # fmt: skip


def kernels() -> list[CPUDispatcher]:
    """Every numba function defined in the kernel modules."""
    return [
        value
        for module in MODULES
        for value in vars(module).values()
        if isinstance(value, CPUDispatcher) and value.py_func.__module__ == module.__name__
    ]


def test_every_kernel_module_is_a_source_of_the_stamp():
    files = {str(Path(module.__file__).resolve()) for module in MODULES}
    assert files == set(_cache.KERNEL_FILES)
    assert len(kernels()) > 40


def test_every_kernel_is_stamped_by_all_the_sources():
    stamp = _cache.source_stamp()
    for kernel in kernels():
        locator = kernel._cache._impl._locator
        assert type(locator).__name__.startswith("Kernel"), kernel.py_func.__qualname__
        assert locator.get_source_stamp() == stamp


def test_the_stamp_changes_with_any_one_source_and_only_with_its_contents(tmp_path):
    copies = []
    for i, path in enumerate(_cache.SOURCES):
        copy = tmp_path / f"{i}_{path.name}"
        shutil.copyfile(path, copy)
        copies.append(copy)
    sources = tuple(copies)
    stamp = _cache.source_stamp(sources)
    assert stamp == _cache.source_stamp(tuple(_cache.SOURCES))  # contents, not where they are
    seen = {stamp}
    for copy in copies:
        text = copy.read_bytes()
        copy.write_bytes(text + b"\n# edited\n")
        seen.add(_cache.source_stamp(sources))
        copy.write_bytes(text)
        assert _cache.source_stamp(sources) == stamp
    assert len(seen) == len(copies) + 1


def test_functions_outside_the_kernel_modules_keep_numba_s_own_locators(tmp_path):
    module = tmp_path / "elsewhere.py"
    module.write_text("def f(x):\n    return x\n")
    namespace: dict = {}
    exec(compile(module.read_text(), str(module), "exec"), namespace)
    for cls in _cache.caching.CacheImpl._locator_classes:
        if getattr(cls, "samflows_kernels", False):
            assert cls.from_function(namespace["f"], str(module)) is None


def test_compile_seconds_count_this_packages_compiles_once_each():
    """:func:`flows.compiled.compile_seconds` grows by the compile of a kernel of this package,
    not by another module's, nor by a second call of a compiled kernel."""
    import io

    import numba

    from flows import compiled

    compiled.announce_compiles(io.StringIO())  # the timing listener (once per process)

    def ours(x):
        return x + 1.0

    def theirs(x):
        return x + 2.0

    ours.__module__, theirs.__module__ = "flows.compiled._probe", "elsewhere"
    before = compiled.compile_seconds()
    numba.njit(theirs)(1.0)
    assert compiled.compile_seconds() == before
    kernel = numba.njit(ours)
    kernel(1.0)
    after = compiled.compile_seconds()
    assert after > before
    kernel(2.0)
    assert compiled.compile_seconds() == after
