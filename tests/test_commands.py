"""``python -m <module> --help`` for every module of ``figures`` and ``analysis``: a command line
(a module whose ``if __name__ == "__main__"`` block does more than call
:func:`flows.run.not_a_command`) prints its argparse help (usage and a description) and exits
with status 0; any other module prints one ``error: ...`` line naming itself and exits with
status 2; a package (no ``__main__``) is refused by Python with one line and status 1. No
module exits 0 without a word.

Each module is run in this process (``runpy.run_module`` with ``run_name="__main__"`` and
``sys.argv`` patched, as ``python -m`` runs it), which executes its body again: the task kinds
it registers are restored afterwards. runpy's warning that the module is imported already is
ignored here; in a fresh ``python -m`` it appears for the modules their package imports (the
modules of ``analysis.regimes``, for example), before the module's own line.
"""

from __future__ import annotations

import ast
import runpy
import sys
import warnings
from pathlib import Path

import pytest

from flows.sweep import registry

ROOT = Path(__file__).resolve().parent.parent
REGISTRIES = (
    registry.TASK_KINDS,
    registry.COST_ESTIMATES,
    registry.RESULT_KEYS,
    registry.KERNEL_GROUPS,
)


def module_names() -> list[str]:
    """Every module and package under ``figures/`` and ``analysis/``, by dotted name."""
    names = []
    for top in ("analysis", "figures"):
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def source(name: str) -> Path:
    """The file of module or package ``name``."""
    path = ROOT.joinpath(*name.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def is_command(name: str) -> bool:
    """Whether the module has an ``if __name__ == "__main__"`` block that does more than call
    ``not_a_command``."""
    for node in ast.parse(source(name).read_text()).body:
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name)
            and node.test.left.id == "__name__"
        ):
            calls = {
                n.func.id
                for n in ast.walk(node)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            }
            return "not_a_command" not in calls
    return False


def run_as_main(name: str, monkeypatch, capsys) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of ``python -m name --help``, in this process."""
    saved = [dict(r) for r in REGISTRIES]
    monkeypatch.setattr(sys, "argv", [str(source(name)), "--help"])
    status = 0
    try:
        with warnings.catch_warnings():  # the module is in sys.modules already: runpy says so
            warnings.filterwarnings("ignore", "'.*' found in sys.modules", RuntimeWarning)
            runpy.run_module(name, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    except ImportError as exc:  # a package: what python -m prints, with status 1
        print(f"{sys.executable}: {exc}", file=sys.stderr)
        status = 1
    finally:
        for reg, before in zip(REGISTRIES, saved, strict=True):
            reg.clear()
            reg.update(before)
    out = capsys.readouterr()
    return status, out.out, out.err


def test_modules_are_found():
    """The discovery sees modules, packages and the command line (it can fail)."""
    names = module_names()
    assert {"figures", "analysis.regimes", "analysis.maxmargin", "figures.blobs"} <= set(names)
    assert is_command("figures.regimes") and is_command("figures.blobs")
    assert not is_command("figures.common")


@pytest.mark.parametrize(
    "name",
    module_names(),
)
def test_python_m_help(name, monkeypatch, capsys):
    """A command line answers --help with status 0; anything else says in one line that it is
    not one and exits with a nonzero status (2 for a module)."""
    status, out, err = run_as_main(name, monkeypatch, capsys)
    if is_command(name):
        assert status == 0, err
        usage, _, rest = out.partition("\n\n")
        description = rest.split("\n\n")[0]
        assert usage.startswith(f"usage: python -m {name}"), out
        assert description and not description.startswith("options:"), out
        return
    assert status != 0 and not out, (status, out)
    assert len(err.splitlines()) == 1 and name in err, err
    if source(name).name != "__init__.py":
        assert status == 2 and err.startswith(f"error: {name} is not a command line"), err
