"""Shared pieces of the figures: the :class:`Figure` record, palette, saving.

Palette: Okabe–Ito (colour-blind safe) for categories, viridis for ordered coordinates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from analysis.amplification import shares  # noqa: E402
from flows.sweep.registry import Result, Task  # noqa: E402

OKABE_ITO = ["#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7"]
MU5 = [1.0, 2.0, 3.0, 4.0, 5.0]


@dataclass(frozen=True)
class Figure:
    """A figure as a declaration: what to simulate, how to draw it, which question it answers.

    Attributes
    ----------
    name : file stem of the PNG (``<name>.png``) and the name on the command line.
    title : one line, what is plotted.
    caption : one sentence, the question the figure answers.
    tasks : ``tasks(quick)`` lists the runs (:class:`~flows.sweep.registry.Task`) the figure needs.
    draw : ``draw(results, quick, path)`` writes the figure; ``results`` are in the order of
        ``tasks(quick)``.
    """

    name: str
    title: str
    caption: str
    tasks: Callable[[bool], list[Task]]
    draw: Callable[[list[Result], bool, Path], None]


def coordinate_colors(d: int) -> np.ndarray:
    """One viridis colour per coordinate (minor = dark, major = light)."""
    return plt.get_cmap("viridis")(np.linspace(0.0, 0.85, d))


def save(fig: plt.Figure, path: Path) -> None:
    """Write a figure and close it."""
    fig.savefig(path, dpi=130)
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
