"""Shared pieces of the figures: the :class:`Figure` declaration, its :class:`Setting`, saving.

The style (sizes, fonts, one colour per algorithm and per regime) is :mod:`figures.style`,
applied on import.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from analysis.amplification import shares  # noqa: E402
from flows.sweep.registry import Result, Task  # noqa: E402

from . import style  # noqa: E402

style.apply()

OKABE_ITO = ["#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7"]
MU5 = (1.0, 2.0, 3.0, 4.0, 5.0)

#: A parameter's value: a number, a word, or a tuple of them.
Value = Any


class Setting(Mapping[str, Value]):
    """The parameters a figure is drawn at: its declared defaults, under ``--quick`` its quick
    values, and the caller's ``--set`` changes. Read as a mapping or by attribute
    (``s.mu``); ``s.quick`` says whether it is the smoke-test configuration and ``s.figure``
    names the figure (for messages)."""

    def __init__(self, values: Mapping[str, Value], quick: bool = False, figure: str = ""):
        self._values = dict(values)
        self.quick = bool(quick)
        self.figure = figure

    def __getitem__(self, name: str) -> Value:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __getattr__(self, name: str) -> Value:
        try:
            return self.__dict__["_values"][name]
        except KeyError:
            raise AttributeError(f"the figure has no parameter {name!r}") from None

    def __repr__(self) -> str:
        return f"Setting({self._values!r}, quick={self.quick})"

    def stamp(self) -> str:
        """The values as canonical JSON (part of a drawn figure's stamp)."""
        return json.dumps({"values": self._values, "quick": self.quick}, sort_keys=True)

    def describe(self) -> str:
        """``name = value`` for every parameter, as printed in captions."""
        return ", ".join(f"{k} = {show(v)}" for k, v in self._values.items())


def show(value: Value) -> str:
    """A parameter value as text: numbers by ``%g``, an algorithm by its name (``ℓ2-SAM``), a
    tuple as ``(a, b, c)``."""
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(show(v) for v in value) + ")"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str) and value in style.ALGORITHM_STYLES:
        return style.plain_label(value)
    return str(value)


def parse_value(text: str, default: Value, name: str) -> Value:
    """``text`` (a ``--set`` value) read as the type of ``default``: a comma-separated list for
    a tuple (of the type of its first item), ``true``/``false`` for a bool, else an int, a
    finite float or a word; ``ValueError`` naming ``name`` otherwise."""
    if isinstance(default, tuple):
        item = default[0] if default else 0.0
        parts = [p.strip() for p in text.split(",") if p.strip()]
        if not parts:
            raise ValueError(f"--set {name}: give at least one value, got {text!r}")
        return tuple(parse_value(p, item, name) for p in parts)
    if isinstance(default, bool):
        words = {"true": True, "false": False, "1": True, "0": False}
        if text.lower() not in words:
            raise ValueError(f"--set {name}: expected true or false, got {text!r}")
        return words[text.lower()]
    if isinstance(default, int):
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"--set {name}: expected an integer, got {text!r}") from None
    if isinstance(default, float):
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"--set {name}: expected a number, got {text!r}") from None
        if not math.isfinite(number):
            raise ValueError(f"--set {name}: expected a finite number, got {text!r}")
        return number
    return text


@dataclass(frozen=True)
class Figure:
    """A figure as a declaration: its parameters, what to simulate, how to draw it, which
    question it answers.

    Attributes
    ----------
    name : file stem of the image (``<name>.png``) and the name on the command line.
    title : one line, what is plotted.
    caption : the question the figure answers and how to read it; ``{p}`` stands for the value
        of parameter ``p`` as drawn (:meth:`caption_for`).
    tasks : ``tasks(setting)`` lists the runs (:class:`~flows.sweep.registry.Task`) the figure
        needs at a :class:`Setting`.
    draw : ``draw(results, setting, path)`` writes the figure; ``results`` are in the order of
        ``tasks(setting)``; the image format is ``path``'s suffix.
    params : the parameters and their default values (what the sweep draws).
    quick : values that replace some of ``params`` under ``--quick`` (a smoke test).
    example : a setting other than the defaults (changes over the quick values) that the tests
        draw, to read each changed value back from the figure's text.
    check : ``check(setting)``, what is wrong with a setting (one line), or None.
    """

    name: str
    title: str
    caption: str
    tasks: Callable[[Setting], list[Task]]
    draw: Callable[[list[Result], Setting, Path], None]
    params: Mapping[str, Value] = field(default_factory=dict)
    quick: Mapping[str, Value] = field(default_factory=dict)
    example: Mapping[str, Value] = field(default_factory=dict)
    check: Callable[[Setting], str | None] | None = None

    def setting(self, changes: Mapping[str, Value] | None = None, quick: bool = False) -> Setting:
        """The :class:`Setting` with ``changes`` (values, or ``--set`` text parsed as the
        default's type) over the defaults (and the quick values); ``ValueError`` naming an
        unknown parameter or a bad value."""
        values = {**self.params, **(self.quick if quick else {})}
        for name, value in (changes or {}).items():
            if name not in self.params:
                known = ", ".join(self.params) or "none"
                raise ValueError(
                    f"--set {name}: {self.name} has no parameter {name!r} (its parameters: {known})"
                )
            values[name] = (
                parse_value(value, self.params[name], name) if isinstance(value, str) else value
            )
        setting = Setting(values, quick, self.name)
        problem = self.check(setting) if self.check is not None else None
        if problem:
            raise ValueError(f"{self.name}: {problem}")
        return setting

    def caption_for(self, setting: Setting) -> str:
        """The caption with each ``{p}`` replaced by parameter ``p``'s value in ``setting``."""
        return fill(self.caption, setting)

    def title_for(self, setting: Setting) -> str:
        """The title with each ``{p}`` replaced by parameter ``p``'s value in ``setting``."""
        return fill(self.title, setting)


def fill(template: str, setting: Setting) -> str:
    """``template`` with each ``{p}``, ``p`` a parameter of ``setting``, replaced by its value
    (other braces, as in mathtext's ``$\\ell_{2}$``, are left alone)."""

    def value(match: re.Match) -> str:
        name = match.group(1)
        return show(setting[name]) if name in setting else match.group(0)

    return re.sub(r"\{(\w+)\}", value, template)


def stopped_early(result: Result, what: str, setting: Setting) -> bool:
    """Whether the run ``result`` ended short of its horizon (status < 0); if so, one line on
    stderr naming the figure, the run (``what``) and the run's own message. The caller marks
    the curve (:data:`STOPPED_MARK` at its last point)."""
    status = int(np.asarray(result.get("status", 0)))
    if status >= 0:
        return False
    message = str(np.asarray(result.get("message", "")))
    print(
        f"warning: {setting.figure}: {what} ended early (status {status}): {message}",
        file=sys.stderr,
    )
    return True


#: How the last point of a run that ended early is marked.
STOPPED_MARK: dict[str, Any] = {"marker": "x", "ms": 6.0, "mew": 1.2, "ls": "", "color": "0.2"}


def stopped_handle(label: str = "run ended early") -> Line2D:
    """The legend entry of :data:`STOPPED_MARK`."""
    return Line2D([], [], label=label, **STOPPED_MARK)


coordinate_colors = style.coordinate_colors


def figure_command(module: str, *figures: Figure) -> NoReturn:
    """``python -m <module> [options]``: the sweep (``python -m flows.sweep``'s options,
    ``--set`` and ``--format`` among them) of the ``figures`` that module declares."""
    from flows.sweep.cli import main

    names = tuple(f.name for f in figures)
    raise SystemExit(main(sys.argv[1:], names, prog=f"python -m {module}"))


#: Image formats the figures are written in, with the metadata that keeps the bytes the same
#: from one drawing to the next (no creation dates).
FORMATS: dict[str, dict[str, object]] = {
    "png": {},
    "pdf": {"CreationDate": None, "ModDate": None},
    "svg": {"Date": None},
}


def save(fig: plt.Figure, path: Path) -> None:
    """Write a figure in the format of ``path``'s suffix (:data:`FORMATS`) and close it."""
    kind = Path(path).suffix.lstrip(".").lower()
    if kind not in FORMATS:
        raise ValueError(f"path must end in one of {', '.join(FORMATS)}, got {str(path)!r}")
    fig.savefig(path, format=kind, metadata=FORMATS[kind])
    plt.close(fig)


def shares_of(result: Result) -> np.ndarray:
    """``|beta_j| / ||beta||_1`` of a cached simulate result."""
    return shares(result["log_abs_beta"])


def format_mu(mu) -> str:
    """``(1,…,5)`` for ``1, 2, ..., d``, else the values: ``(0.5, 1.7, 2.9)``."""
    mu = np.asarray(mu, dtype=float)
    if mu.size > 3 and np.array_equal(mu, np.arange(1, mu.size + 1)):
        return f"(1,…,{mu.size})"
    return "(" + ", ".join(f"{v:g}" for v in mu) + ")"


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
