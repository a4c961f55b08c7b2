"""A figure's parameters from the caller: ``--set name=value`` (parsed as the default's type,
checked before any work), ``--format png|pdf|svg``, the caption file beside the image, the
setting in ``--list``, and each figure module as its own command line."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import figures.table
from figures.common import Figure, Setting, fill, parse_value, save
from flows.sweep.cli import main
from flows.sweep.registry import Task, register

DRAWN: list[Setting] = []


def square(params: dict) -> dict:
    """A cheap task kind."""
    return {"square": np.array(float(params["x"]) ** 2)}


register("test-square", square)


def square_tasks(s: Setting) -> list[Task]:
    return [Task("test-square", {"x": x}) for x in s.xs]


def draw_squares(results, s: Setting, path: Path) -> None:
    """Plots the squares; the title is built from the setting."""
    import matplotlib.pyplot as plt

    DRAWN.append(s)
    fig, ax = plt.subplots(figsize=(3.3, 2.0))
    ax.plot(s.xs, [float(r["square"]) for r in results], label=s.name)
    ax.set_title(f"x = {', '.join(f'{x:g}' for x in s.xs)}, depth {s.depth}")
    save(fig, path)


def no_negative_depth(s: Setting) -> str | None:
    return f"depth must be >= 1, got {s.depth}" if s.depth < 1 else None


SQUARES = Figure(
    "fake_squares",
    "squares of x = {xs}",
    "Are the squares of {xs} at depth {depth} drawn? (A mathtext $\\ell_{2}$ stays.)",
    square_tasks,
    draw_squares,
    params={"xs": (1.0, 2.0, 3.0), "depth": 2, "name": "curve", "log": False},
    quick={"xs": (1.0, 2.0)},
    example={"xs": (1.5, 4.0)},
    check=no_negative_depth,
)


@pytest.fixture
def table(monkeypatch):
    """The figure table holds the fake figure alone."""
    monkeypatch.setattr(figures.table, "FIGURES", {SQUARES.name: SQUARES})
    DRAWN.clear()


def test_values_parse_as_the_defaults_type():
    """Tuples from commas, ints, finite floats, bools, words; bad text names the parameter."""
    assert parse_value("1,2.5, 7", (1.0,), "mu") == (1.0, 2.5, 7.0)
    assert parse_value("3", 2, "depth") == 3 and isinstance(parse_value("3", 2, "depth"), int)
    assert parse_value("false", True, "log") is False
    assert parse_value("gd,l2-sam", ("gd",), "algorithms") == ("gd", "l2-sam")
    for text, default in (("x", 1.0), ("2.5", 2), ("inf", 1.0), ("", (1.0,)), ("yes", True)):
        with pytest.raises(ValueError, match="--set p"):
            parse_value(text, default, "p")


def test_setting_layers_defaults_quick_and_changes():
    """Defaults, then the quick values, then the changes; unknown names and failed checks are
    refused with the figure's parameters named."""
    assert SQUARES.setting().xs == (1.0, 2.0, 3.0)
    assert SQUARES.setting(quick=True).xs == (1.0, 2.0)
    s = SQUARES.setting({"xs": "5,6", "depth": "4"}, quick=True)
    assert (s.xs, s.depth, s.quick, s.figure) == ((5.0, 6.0), 4, True, "fake_squares")
    with pytest.raises(ValueError, match="has no parameter 'mu'.*xs, depth"):
        SQUARES.setting({"mu": "1"})
    with pytest.raises(ValueError, match="depth must be >= 1"):
        SQUARES.setting({"depth": "0"})
    with pytest.raises(AttributeError, match="no parameter 'mu'"):
        _ = s.mu


def test_captions_are_filled_from_the_setting():
    """``{p}`` becomes the value run; mathtext braces stay."""
    s = SQUARES.setting({"xs": "0.5,7"})
    assert SQUARES.caption_for(s).startswith("Are the squares of (0.5, 7) at depth 2 drawn?")
    assert "$\\ell_{2}$" in SQUARES.caption_for(s)
    assert fill("{unknown} {xs}", s) == "{unknown} (0.5, 7)"


def test_set_draws_the_values_and_writes_the_caption(table, tmp_path, capsys):
    """``--set`` reaches the tasks and the drawing; the caption file records the setting and
    the command that draws it again."""
    out = tmp_path / "o"
    code = main(["--set", "xs=2,5", "--set", "depth=3", "--out", str(out), "--jobs", "1"]
                + ["--cache", str(tmp_path / "c")])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert DRAWN[-1].xs == (2.0, 5.0) and DRAWN[-1].depth == 3
    text = (out / "fake_squares.txt").read_text()
    assert "Are the squares of (2, 5) at depth 3 drawn?" in text
    assert "Setting: xs = (2, 5), depth = 3, name = curve, log = False." in text
    assert "Drawn by: python -m flows.sweep fake_squares --set xs=2,5 --set depth=3" in text


@pytest.mark.parametrize(
    "kind, magic", [("png", b"\x89PNG"), ("pdf", b"%PDF"), ("svg", b"<?xml")], ids=str
)
def test_format_writes_that_format_with_the_same_bytes_twice(table, tmp_path, kind, magic):
    """``--format``: the image in that format; drawn twice, the same bytes (no dates)."""
    images = []
    for k in range(2):
        out = tmp_path / f"o{k}"
        args = ["--format", kind, "--out", str(out), "--cache", str(tmp_path / "c"), "--jobs", "1"]
        assert main(args) == 0
        images.append((out / f"fake_squares.{kind}").read_bytes())
    assert images[0].startswith(magic) and images[0] == images[1]
    if kind == "svg":
        assert b">x = 1, 2, 3, depth 2</text>" in images[0], "SVG text kept as text"


@pytest.mark.parametrize(
    "args, word",
    [
        (["--set", "mu=1,2"], "no parameter 'mu'"),
        (["--set", "xs=1,a"], "--set xs: expected a number"),
        (["--set", "depth"], "--set expects name=value"),
        (["--set", "depth=1", "--set", "depth=2"], "--set depth is given twice"),
        (["--set", "depth=0"], "depth must be >= 1"),
        (["--format", "jpg"], "--format"),
    ],
)
def test_bad_settings_are_one_line_before_any_work(table, tmp_path, capsys, args, word):
    """A bad ``--set`` or ``--format``: exit status 2, one line naming it, nothing drawn."""
    with pytest.raises(SystemExit) if args[0] == "--format" else _no_exit() as ended:
        code = main([*args, "--out", str(tmp_path / "o"), "--cache", str(tmp_path / "c")])
    code = ended.value.code if isinstance(ended, pytest.ExceptionInfo) else code
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and word in err, err
    assert not DRAWN and not (tmp_path / "o" / "fake_squares.png").exists()


class _no_exit:
    """A context that expects no exception (the counterpart of ``pytest.raises``)."""

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def test_list_shows_parameters(table, capsys):
    """``--list`` prints each figure's parameters with their defaults."""
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "parameters: xs = (1, 2, 3), depth = 2, name = curve, log = False" in out


def test_figure_module_is_its_own_command(tmp_path, monkeypatch, capsys):
    """``python -m figures.amplification --list`` names its figure alone (``--help`` is checked
    for every module by tests/test_commands.py); another figure's name is refused in one line."""
    from figures.amplification import AMPLIFICATION
    from figures.common import figure_command

    def run(*args: str) -> int:
        monkeypatch.setattr(sys, "argv", ["amplification.py", *args])
        with pytest.raises(SystemExit) as ended:
            figure_command("figures.amplification", AMPLIFICATION)
        return ended.value.code

    assert run("--list") == 0
    listed = capsys.readouterr().out
    assert [line.split()[0] for line in listed.splitlines() if not line.startswith(" ")] == [
        "fig4_amplification"
    ]
    assert run("fig5_regimes", "--out", str(tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.strip() == "error: fig5_regimes not drawn by python -m figures.amplification"
