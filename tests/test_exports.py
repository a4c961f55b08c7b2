"""The public names: every package of ``flows`` and ``analysis`` re-exports the public functions
and classes of its modules, with ``__all__``; every name the docs cite exists.

A package's modules are its files not starting with ``_``; a module's public names are the
functions and classes it defines whose names do not start with ``_``. The deliberate exceptions
are :data:`NOT_REEXPORTED`; the packages that do not re-export their modules' names yet are
``xfail(strict=True)`` (:data:`INCOMPLETE`), so the test says when they do.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: The documents whose backticked dotted names (``flows.x.y``, ``analysis.x``, ``figures.x``) must
#: import.
DOCS = ("README.md", "CONTRIBUTING.md", "docs/theory.md")
CITED = re.compile(r"`((?:flows|analysis|figures)(?:\.[A-Za-z_]\w*)+)")
#: Modules whose package does not import them, and why.
NOT_REEXPORTED = {
    "flows.compiled.warm": "a command line (python -m flows.compiled.warm)",
    "flows.sweep.cli": "the command line of python -m flows.sweep",
    "analysis.networks.runs": "task kinds, registered when the module is imported",
}
#: Packages whose ``__all__`` misses public names of their modules.
INCOMPLETE = {
    "flows.integrator": "no __all__: its entry point is flows.simulate",
}


def packages() -> list[str]:
    """Every package below ``flows`` and ``analysis`` (a folder with an ``__init__.py``)."""
    found = []
    for top in ("flows", "analysis"):
        for init in sorted((ROOT / top).rglob("__init__.py")):
            if init.parent != ROOT / top:
                found.append(".".join(init.parent.relative_to(ROOT).parts))
    return found


def modules(package: str) -> list[str]:
    """The package's public modules: its files not starting with ``_``."""
    folder = ROOT.joinpath(*package.split("."))
    return [
        f"{package}.{f.stem}" for f in sorted(folder.glob("*.py")) if not f.stem.startswith("_")
    ]


def public_names(module: str) -> set[str]:
    """Functions and classes defined in ``module`` whose names do not start with ``_``."""
    mod = importlib.import_module(module)
    return {
        name
        for name, obj in vars(mod).items()
        if not name.startswith("_")
        and (inspect.isfunction(obj) or inspect.isclass(obj))
        and obj.__module__ == module
    }


def marked(package: str):
    reason = INCOMPLETE.get(package)
    return pytest.param(
        package, marks=[pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    )


def test_packages_are_found():
    """The discovery sees the packages (it can fail)."""
    assert {"analysis.regimes", "flows.sweep", "flows.compiled"} <= set(packages())
    assert "flows.sweep.registry" in modules("flows.sweep")
    assert "flows.compiled._cache" not in modules("flows.compiled")
    assert set(INCOMPLETE) <= set(packages())


@pytest.mark.parametrize("package", packages())
def test_all_names_import(package):
    """Every name of ``__all__`` is an attribute of the package (``from package import name``)."""
    mod = importlib.import_module(package)
    missing = [name for name in getattr(mod, "__all__", ()) if not hasattr(mod, name)]
    assert not missing, f"{package}.__all__ names what it does not define: {missing}"


@pytest.mark.parametrize("package", [marked(p) for p in packages()])
def test_public_names_are_reexported(package):
    """The public functions and classes of the package and of its modules are in ``__all__``."""
    exported = set(getattr(importlib.import_module(package), "__all__", ()))
    wanted = public_names(package)
    for module in modules(package):
        if module not in NOT_REEXPORTED:
            wanted |= public_names(module)
    assert not wanted - exported, f"{package}.__all__ misses {sorted(wanted - exported)}"


def cited_names(text: str) -> list[str]:
    """The dotted names in backticks of ``text``, up to the first character of another kind
    (```flows.sweep.register(kind, fn)``` cites ``flows.sweep.register``)."""
    return sorted(set(CITED.findall(text)))


def resolve(dotted: str) -> object:
    """The object named by ``dotted``: its longest importable prefix, then attributes."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        try:
            obj = importlib.import_module(prefix)
        except ModuleNotFoundError as exc:
            if exc.name != prefix:  # the module exists; something it imports does not
                raise
            continue
        for part in parts[end:]:
            obj = getattr(obj, part)
        return obj
    raise ModuleNotFoundError(dotted)


def test_cited_names_are_found():
    """The scan reads names out of backticks and stops at a call or a flag (it can fail)."""
    text = "`flows.sweep.register(kind, fn)`, `python -m flows.run --rho 1` no, `flows.run --rho`"
    assert cited_names(text) == ["flows.run", "flows.sweep.register"]
    with pytest.raises(AttributeError):
        resolve("analysis.maxmargin.no_such_name")


@pytest.mark.parametrize("doc", DOCS)
def test_cited_names_import(doc):
    """Every backticked ``flows.*``, ``analysis.*`` and ``figures.*`` name of the document
    is a module or an attribute of one."""
    names = cited_names((ROOT / doc).read_text(encoding="utf-8"))
    assert names, f"{doc} cites no dotted name: the scan is broken"
    missing = []
    for name in names:
        try:
            resolve(name)
        except (ImportError, AttributeError) as exc:
            missing.append(f"{name} ({exc})")
    assert not missing, f"{doc} cites names that do not exist: {missing}"
