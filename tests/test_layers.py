"""Layering: flows -> analysis -> figures. Nothing in ``flows`` or ``analysis`` imports
``figures`` or matplotlib (not even inside a function), except the command-line entry modules
``flows/sweep/cli.py`` and ``flows/run.py``, which nothing imports."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENTRY_MODULES = {
    ROOT / "flows" / "sweep" / "cli.py",
    ROOT / "flows" / "sweep" / "__main__.py",
    ROOT / "flows" / "run.py",
}
FORBIDDEN = {"figures", "matplotlib"}


def imported_roots(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, top-level module) of every import in ``tree``, at any depth, including
    ``importlib.import_module("...")`` and ``__import__("...")`` with a literal name."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (
                    isinstance(node.func, ast.Name)
                    and node.func.id in ("__import__", "import_module")
                )
            )
        ):
            found.append((node.lineno, node.args[0].value.split(".")[0]))
    return found


def library_modules() -> list[Path]:
    files = sorted((ROOT / "flows").rglob("*.py")) + sorted((ROOT / "analysis").rglob("*.py"))
    return [f for f in files if f not in ENTRY_MODULES]


@pytest.mark.parametrize("path", library_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_upward_imports(path):
    """No module of flows or analysis imports figures or matplotlib, anywhere in its body."""
    tree = ast.parse(path.read_text(), filename=str(path))
    bad = [(line, name) for line, name in imported_roots(tree) if name in FORBIDDEN]
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_checker_sees_lazy_imports():
    """The AST check finds imports hidden in functions and importlib calls (it can fail)."""
    source = (
        "def f():\n    import matplotlib.pyplot as plt\n"
        "def g():\n    from figures.table import FIGURES\n"
        "import importlib\nimportlib.import_module('figures.common')\n"
    )
    assert sorted(name for _, name in imported_roots(ast.parse(source))) == [
        "figures",
        "figures",
        "importlib",
        "matplotlib",
    ]


@pytest.mark.slow  # every module of analysis is checked for figures by test_no_upward_imports
def test_analysis_imports_only_flows_and_itself():
    """analysis depends on flows (and numpy / scipy), never on figures."""
    for path in sorted((ROOT / "analysis").rglob("*.py")):
        names = {name for _, name in imported_roots(ast.parse(path.read_text()))}
        assert "figures" not in names, path


def test_importing_flows_and_analysis_loads_no_matplotlib():
    """``import flows, analysis`` and every module in them (entry modules included: they import
    figures only when they draw) leave matplotlib and figures unloaded."""
    code = (
        "import importlib, pkgutil, sys\n"
        "import flows, analysis\n"
        "for pkg in (flows, analysis):\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        importlib.import_module(m.name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'figures')))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert run.stdout.strip() == "[]", run.stdout


def test_every_package_is_shipped():
    """Every folder of flows, analysis and figures with an ``__init__.py`` is listed in
    pyproject.toml's ``[tool.setuptools] packages`` (a missing one breaks the installed wheel,
    not the editable install the tests run on)."""
    import tomllib

    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("flows", "analysis", "figures")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert found == listed, (sorted(found - listed), sorted(listed - found))
