"""One style for every figure: sizes at a paper's column width, fonts, and one colour, line
style and marker per algorithm and per regime.

* Sizes: :data:`SINGLE` (one column, 3.3 in) and :data:`DOUBLE` (two columns, 6.8 in) wide; the
  fonts (:data:`RC`) are 7–8 pt at that size, so a figure printed at its width keeps them.
* Algorithms (:data:`ALGORITHM_STYLES`): the colour and marker name the algorithm in every
  figure; the line style names the dynamics (:data:`DYNAMICS_LINES`: the flow solid, full-batch
  steps dashed, minibatch steps dash-dotted, the SDE dotted). Okabe–Ito colours (colour-blind
  safe).
* Regimes of ℓ2-SAM and LE-SAM (:data:`REGIME_COLORS`): one palette, keyed by the regime's name.
* Coordinates: viridis from minor (dark) to major (light), :func:`coordinate_colors`.

:func:`apply` sets the matplotlib parameters (mathtext, SVG text kept as text, embedded
TrueType in PDF); :mod:`figures.common` applies them on import.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib
import matplotlib.colors
import numpy as np

#: Figure widths in inches: one column and two columns of a paper.
SINGLE = 3.3
DOUBLE = 6.8

#: matplotlib parameters of every figure.
RC: dict[str, object] = {
    "font.size": 8.0,
    "axes.titlesize": 8.0,
    "axes.labelsize": 8.0,
    "xtick.labelsize": 7.0,
    "ytick.labelsize": 7.0,
    "legend.fontsize": 7.0,
    "legend.title_fontsize": 7.0,
    "figure.titlesize": 8.0,
    "axes.linewidth": 0.6,
    "lines.linewidth": 1.2,
    "lines.markersize": 3.5,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "legend.frameon": False,
    "legend.handlelength": 1.8,
    "mathtext.fontset": "dejavusans",
    "svg.fonttype": "none",
    "svg.hashsalt": "samflows",
    "pdf.fonttype": 42,
    "savefig.dpi": 200,
    "figure.dpi": 100,
}

#: The smallest font size any text of a figure may have, in points, at its printed width.
MIN_FONT = 7.0

#: Okabe & Ito's colour-blind-safe palette.
BLACK, ORANGE, SKY, GREEN, YELLOW, BLUE, VERMILLION, PURPLE = (
    "#000000",
    "#E69F00",
    "#56B4E9",
    "#009E73",
    "#F0E442",
    "#0072B2",
    "#D55E00",
    "#CC79A7",
)
GREY = "#7F7F7F"


@dataclass(frozen=True)
class Style:
    """How one algorithm is drawn: ``color``, ``marker`` and its ``label`` (mathtext)."""

    color: str
    marker: str
    label: str


#: One style per algorithm of :data:`flows.algorithms.ALGORITHMS` (and the official LE-SAM code).
ALGORITHM_STYLES: dict[str, Style] = {
    "gd": Style(BLACK, "o", "GD"),
    "l2-sam": Style(BLUE, "s", r"$\ell_2$-SAM"),
    "linf-sam": Style(VERMILLION, "^", r"$\ell_\infty$-SAM"),
    "usam": Style(GREEN, "D", "USAM"),
    "le-sam": Style(PURPLE, "v", "LE-SAM"),
    "le-sam-official": Style(PURPLE, "<", "LE-SAM (official code)"),
    "asam": Style(ORANGE, "P", "ASAM"),
    "1-sam": Style(SKY, "X", "1-SAM"),
    "1-usam": Style(GREY, "h", "1-USAM"),
}

#: Line style of each kind of dynamics: the flow, full-batch steps, minibatch steps, the SDE.
DYNAMICS_LINES: dict[str, object] = {
    "flow": "-",
    "steps": "--",
    "minibatch": "-.",
    "sde": ":",
}

#: Words for each kind of dynamics, after the algorithm's label (the flow adds none).
DYNAMICS_WORDS = {"flow": "", "steps": " steps", "minibatch": " minibatch", "sde": " SDE"}

#: One colour per regime, by name, for ℓ2-SAM (fig. 5) and LE-SAM (fig. 12) alike.
#: (Apart from viridis, which the same figures use for the coordinates.)
REGIME_COLORS: dict[str, str] = {
    "undecided": "white",
    "collapse": "#BBBBBB",
    "minor first": SKY,
    "sequential amplification": SKY,
    "major from the start": VERMILLION,
    "major, minor, major": ORANGE,
    "stall at a finite margin": PURPLE,
}


def algorithm_style(algorithm: str, dynamics: str = "flow") -> dict[str, object]:
    """Keyword arguments of ``Axes.plot`` for ``algorithm`` under ``dynamics``: its colour,
    marker and label, and the dynamics' line style (``ValueError`` naming an unknown one)."""
    if algorithm not in ALGORITHM_STYLES:
        raise ValueError(f"algorithm has no style: {algorithm!r}; known: {list(ALGORITHM_STYLES)}")
    if dynamics not in DYNAMICS_LINES:
        raise ValueError(f"dynamics must be one of {list(DYNAMICS_LINES)}, got {dynamics!r}")
    style = ALGORITHM_STYLES[algorithm]
    return {
        "color": style.color,
        "marker": style.marker,
        "ls": DYNAMICS_LINES[dynamics],
        "label": style.label + DYNAMICS_WORDS[dynamics],
    }


def label(algorithm: str) -> str:
    """The printed name of ``algorithm`` (mathtext)."""
    return ALGORITHM_STYLES[algorithm].label


def plain_label(algorithm: str) -> str:
    """The name of ``algorithm`` in plain text, for captions and messages: ``ℓ2-SAM``."""
    text = label(algorithm).replace(r"\ell", "ℓ").replace(r"\infty", "∞")
    return text.replace("$", "").replace("_", "")


def shade(color: str, k: int, n: int) -> tuple[float, ...]:
    """``color`` mixed with white, the more the larger ``k`` (of ``n`` values of a parameter;
    at most 60 % white): one algorithm's colour family for several runs of it."""
    mix = 0.6 * k / max(n - 1, 1)
    return tuple((1 - mix) * np.array(matplotlib.colors.to_rgb(color)) + mix)


def coordinate_colors(d: int) -> np.ndarray:
    """One viridis colour per coordinate (minor = dark, major = light)."""
    return matplotlib.colormaps["viridis"](np.linspace(0.0, 0.85, d))


def panel_letters(axes, x: float = -0.02, y: float = 1.02) -> None:
    """Bold ``(a)``, ``(b)``, ... at the top left of each of ``axes`` (in order)."""
    for k, ax in enumerate(np.ravel(axes)):
        ax.text(
            x,
            y,
            f"({chr(ord('a') + k)})",
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontweight="bold",
        )


def apply() -> None:
    """Set :data:`RC` in matplotlib's parameters."""
    matplotlib.rcParams.update(RC)


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
