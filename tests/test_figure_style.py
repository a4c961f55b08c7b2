"""Every figure of the table as a paper prints it, read back from what was drawn.

Each figure is drawn at its ``example`` setting (:attr:`figures.common.Figure.example`, over the
quick values) as SVG, then rendered again with Agg while every text the renderer draws is
recorded with its bounding box. The checks:

* the setting: each value the example changes appears in the SVG's text (read back from the
  file; tick labels left out, so that a number on an axis does not count);
* the size: at most two columns wide (:data:`figures.style.DOUBLE`), no suptitle (the caption is
  the figure table's), no text smaller than :data:`figures.style.MIN_FONT` points;
* no text overlaps another, and none is cut off at the figure's edge (boxes from the renderer);
* one colour per algorithm: every line labelled with an algorithm's name has that algorithm's
  colour of :data:`figures.style.ALGORITHM_STYLES`, in every figure.

Drawing every figure computes its quick runs (tens of seconds in all): the cheap figures run in
the default suite, the others are slow.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import matplotlib.colors
import numpy as np
import pytest
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.figure import Figure as MplFigure
from matplotlib.lines import Line2D
from matplotlib.text import Text

from figures.style import ALGORITHM_STYLES, DOUBLE, MIN_FONT
from figures.table import FIGURES
from flows.sweep.registry import Result, compute

#: Figures whose quick runs take under a second: drawn in the default suite.
CHEAP = ("fig4_amplification",)

SVG = "{http://www.w3.org/2000/svg}"


@dataclass
class Drawing:
    """A figure drawn at its example setting: the SVG's texts (tick labels apart), the
    matplotlib figures written, and each drawn text with its box (pixels)."""

    setting: object
    texts: list[str]
    figures: list[MplFigure]
    boxes: list[tuple[Text, np.ndarray]]


_RESULTS: dict[str, Result] = {}
_DRAWINGS: dict[str, Drawing] = {}


def results(tasks) -> list[Result]:
    """The results of ``tasks``, each computed once per test process."""
    for task in tasks:
        if task.key() not in _RESULTS:
            _RESULTS[task.key()] = compute(task)
    return [_RESULTS[t.key()] for t in tasks]


def svg_texts(path: Path) -> list[str]:
    """The texts of an SVG written with ``svg.fonttype: none``, tick labels left out: a
    ``<text>`` is its own string, or its glyph ``<tspan>``s in order of x (mathtext)."""
    texts: list[str] = []

    def walk(node: ET.Element, in_tick: bool) -> None:
        in_tick = in_tick or re.match(r"[xy]tick_\d+$", node.get("id", "")) is not None
        if node.tag == SVG + "text":
            spans = [s for s in node.iter(SVG + "tspan") if s.text]
            if spans:
                spans.sort(key=lambda s: float(s.get("x", "0")))
                text = "".join(s.text or "" for s in spans)
            else:
                text = node.text or ""
            if not in_tick:
                texts.append(text.replace("−", "-").replace("\xa0", " "))
            return
        for child in node:
            walk(child, in_tick)

    walk(ET.parse(path).getroot(), False)
    return texts


def rendered_texts(fig: MplFigure) -> list[tuple[Text, np.ndarray]]:
    """Each text Agg draws for ``fig`` with its box ``[[x0, y0], [x1, y1]]`` in pixels."""
    drawn: dict[int, tuple[Text, np.ndarray]] = {}
    original = RendererAgg.draw_text

    def record(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if mtext is not None and s.strip():
            drawn[id(mtext)] = (mtext, mtext.get_window_extent(self).get_points())
        return original(self, gc, x, y, s, prop, angle, ismath, mtext)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RendererAgg, "draw_text", record)
        fig.canvas.draw()
    return list(drawn.values())


def drawing(name: str, tmp_path_factory) -> Drawing:
    """Figure ``name`` drawn at its example setting (once per test process)."""
    if name in _DRAWINGS:
        return _DRAWINGS[name]
    fig = FIGURES[name]
    setting = fig.setting(fig.example, quick=True)
    got = results(fig.tasks(setting))
    path = tmp_path_factory.mktemp("svg") / f"{name}.svg"
    written: list[MplFigure] = []
    original = MplFigure.savefig

    def keep(self, *args, **kwargs):
        written.append(self)
        return original(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(MplFigure, "savefig", keep)
        fig.draw(got, setting, path)
    boxes = [box for f in written for box in rendered_texts(f)]
    _DRAWINGS[name] = Drawing(setting, svg_texts(path), written, boxes)
    return _DRAWINGS[name]


def figure_params():
    """Every figure, slow unless cheap."""
    return [
        pytest.param(name, marks=() if name in CHEAP else pytest.mark.slow, id=name)
        for name in FIGURES
    ]


def plain(label: str) -> str:
    """An algorithm's mathtext label as its glyphs read back from an SVG (``ℓ2-SAM``)."""
    text = label.replace(r"\ell", "ℓ").replace(r"\infty", "∞")
    return re.sub(r"[$_{}\\]", "", text)


def shown(value) -> list[str]:
    """The strings that must appear in a figure's text for a parameter ``value``."""
    if isinstance(value, (tuple, list)):
        return [s for v in value for s in shown(v)]
    if isinstance(value, bool):
        return []
    if isinstance(value, str):
        return [plain(ALGORITHM_STYLES[value].label) if value in ALGORITHM_STYLES else value]
    if isinstance(value, float):
        return [f"{value:g}"]
    return [str(value)]


def appears(word: str, texts: list[str]) -> bool:
    """Whether ``word`` is in ``texts``, a number not as part of a longer number."""
    if re.fullmatch(r"[-+.\de]+", word):
        pattern = r"(?<![\d.])" + re.escape(word) + r"(?!\d|\.\d)"
        return any(re.search(pattern, t) for t in texts)
    return any(word in t for t in texts)


@pytest.mark.parametrize("name", figure_params())
def test_example_setting_is_in_the_text(name, tmp_path_factory):
    """Every value the example setting changes is written in the figure (labels and titles
    are built from the values run); a figure with parameters declares an example."""
    fig = FIGURES[name]
    if fig.params:
        assert fig.example, f"{name} declares parameters but no example setting"
    drawn = drawing(name, tmp_path_factory)
    missing = [
        f"{key} = {word}"
        for key, value in fig.example.items()
        for word in shown(value)
        if not appears(word, drawn.texts)
    ]
    assert not missing, f"{name}: not in the figure's text: {missing}"


@pytest.mark.parametrize("name", figure_params())
def test_size_and_fonts(name, tmp_path_factory):
    """At most two columns wide, no suptitle, every text at least MIN_FONT points."""
    drawn = drawing(name, tmp_path_factory)
    for fig in drawn.figures:
        assert fig.get_figwidth() <= DOUBLE + 1e-9, (name, fig.get_figwidth())
        assert not fig.get_suptitle(), (name, fig.get_suptitle())
    small = [
        (t.get_text(), t.get_fontsize()) for t, _ in drawn.boxes if t.get_fontsize() < MIN_FONT
    ]
    assert not small, f"{name}: text below {MIN_FONT} pt: {small[:5]}"


def overlap(a: np.ndarray, b: np.ndarray) -> float:
    """Width times height of the intersection of two boxes (0 if they do not meet)."""
    w = min(a[1, 0], b[1, 0]) - max(a[0, 0], b[0, 0])
    h = min(a[1, 1], b[1, 1]) - max(a[0, 1], b[0, 1])
    return max(w, 0.0) * max(h, 0.0)


@pytest.mark.parametrize("name", figure_params())
def test_no_text_overlaps_or_is_cut(name, tmp_path_factory):
    """No two drawn texts share more than a pixel square; every text lies inside its figure."""
    drawn = drawing(name, tmp_path_factory)
    boxes = drawn.boxes
    clashes = [
        (a.get_text(), b.get_text())
        for i, (a, ba) in enumerate(boxes)
        for b, bb in boxes[i + 1 :]
        if a.get_figure() is b.get_figure() and overlap(ba, bb) > 1.0
    ]
    assert not clashes, f"{name}: overlapping texts: {clashes[:5]}"
    for text, box in boxes:
        width, height = text.get_figure().canvas.get_width_height()
        inside = box[0, 0] >= -1 and box[0, 1] >= -1 and box[1, 0] <= width + 1
        assert inside and box[1, 1] <= height + 1, f"{name}: cut off: {text.get_text()!r}"


def algorithm_of(label: str) -> str | None:
    """The algorithm a line's label names (its label, then a space, comma or nothing)."""
    for key in sorted(ALGORITHM_STYLES, key=lambda k: -len(ALGORITHM_STYLES[k].label)):
        own = ALGORITHM_STYLES[key].label
        if label == own or label.startswith((own + " ", own + ",", own + ":")):
            return key
    return None


@pytest.mark.parametrize("name", figure_params())
def test_one_colour_per_algorithm(name, tmp_path_factory):
    """A line labelled with an algorithm has that algorithm's colour, in every figure."""
    drawn = drawing(name, tmp_path_factory)
    wrong = []
    for fig in drawn.figures:
        for line in fig.findobj(Line2D):
            key = algorithm_of(line.get_label())
            if key is None:
                continue
            colour = matplotlib.colors.to_hex(line.get_color())
            if colour.lower() != ALGORITHM_STYLES[key].color.lower():
                wrong.append((line.get_label(), colour))
    assert not wrong, f"{name}: lines not in their algorithm's colour: {wrong[:5]}"


def test_checks_can_fail(tmp_path):
    """The readers see what they must: mathtext glyphs in order, tick labels left out,
    overlapping boxes, an algorithm's line in another colour."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3.0, 2.0))
    ax.plot([0, 1], [0, 1], color="#000000", label=ALGORITHM_STYLES["l2-sam"].label + ", α = 0.3")
    ax.set_xticks([0.25, 0.5])
    ax.set_title(r"$\mu = (1, 2.5)$")
    ax.text(0.5, 0.5, "one")
    ax.text(0.5, 0.5, "two")
    ax.legend()
    fig.savefig(tmp_path / "t.svg", format="svg")
    texts = svg_texts(tmp_path / "t.svg")
    assert appears("2.5", texts) and not appears("0.25", texts)
    assert not appears("2", ["2.5", "12", "0.2"]) and appears("0.3", texts)
    assert any("ℓ2-SAM" in t for t in texts)
    boxes = rendered_texts(fig)
    named = {t.get_text(): b for t, b in boxes}
    assert overlap(named["one"], named["two"]) > 1.0
    assert algorithm_of(ax.lines[0].get_label()) == "l2-sam"
    assert algorithm_of("LE-SAM (official code)") == "le-sam-official"
    plt.close(fig)
