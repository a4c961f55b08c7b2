"""The digits study's saliency maps (settings and runs: :mod:`figures.digits`).

* ``digits_saliency_0v1``, ``digits_saliency_3v8``, ``digits_saliency_4v9`` — the shares
  ``|beta_j| / ||beta||_1`` as 8x8 images at matched training losses (one column per level of
  the loss, then the end of the run), one row per depth and algorithm, beside the pair's class
  means, pixel strength and initial signs. By default L = 2 and three levels; the full grid is
  ``--set depths=2,3 --set tau_max=80,120 --set levels=0.95,0.75,0.5,0.1,0.001``.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np

from analysis.amplification import shares
from analysis.saliency import first_below
from flows.sweep.registry import Result

from . import style
from .common import STOPPED_MARK, Figure, Setting, figure_command, plt, save, stopped_early
from .digits import (
    PARAMS,
    PairData,
    by_run,
    check_study,
    image,
    name,
    pair_data,
    study_tasks,
)

#: The reference column: (title, image of a pair's data, colour map, value range).
REFERENCES = (
    (
        "digit {a} (y = +1)",
        lambda d, s: d.train.X[d.train.y > 0].mean(axis=0),
        "gray",
        (0.0, 1.0),
    ),
    (
        "digit {b} (y = −1)",
        lambda d, s: d.train.X[d.train.y < 0].mean(axis=0),
        "gray",
        (0.0, 1.0),
    ),
    (
        "strength\n(contour: ½ of max)",
        lambda d, s: d.strength,
        "viridis",
        (0, None),
    ),
    ("sign of β at init\n(red: +), α = {alpha}", lambda d, s: d.signs, "coolwarm", (-1.0, 1.0)),
)


#: The reference column's width in inches (its titles need it at any number of map columns).
REFERENCE_WIDTH = 1.15


def columns(res: Result, levels: tuple[float, ...]) -> list[int | None]:
    """Sample index of each column: first sample with loss <= level * loss(0) (None: never),
    then the last sample."""
    hits = first_below(res["loss"], np.array(levels) * res["loss"][0])
    return [int(k) if k >= 0 else None for k in hits] + [len(res["tau"]) - 1]


def strong_contour(ax, data: PairData) -> None:
    """The strong pixels' outline (strength at half its largest value), cyan."""
    ax.contour(
        image(data.strength), levels=[0.5 * data.strength.max()], colors="cyan", linewidths=0.7
    )


def draw_references(axes, data: PairData, s: Setting) -> None:
    """The reference column: the class means, the strength and the initial signs."""
    a, b = data.pair
    for ax, (title, values, cmap, (lo, hi)) in zip(axes, REFERENCES, strict=True):
        ax.imshow(image(values(data, s)), cmap=cmap, vmin=lo, vmax=hi)
        ax.set_title(title.format(a=a, b=b, alpha=f"{s.alpha:g}"))
        ax.set_xticks([])
        ax.set_yticks([])
    strong_contour(axes[2], data)


def draw_maps(axes, res: Result, data: PairData, s: Setting, what: str):
    """One run's row: the shares as an 8x8 map at each column's sample, scaled to their
    largest value, the strong pixels contoured; "not reached" where the loss never fell that
    far; a cross beside the end map of a run that stopped early. Returns the last image."""
    sh = shares(res["log_abs_beta"])
    shown = None
    for ax, k in zip(axes, columns(res, s.levels), strict=True):
        ax.set_xticks([])
        ax.set_yticks([])
        if k is None:
            ax.text(0.5, 0.5, "not\nreached", ha="center", va="center", color="0.4",
                    transform=ax.transAxes)  # fmt: skip
            ax.set_facecolor("0.93")
            continue
        shown = ax.imshow(image(sh[k] / np.max(sh[k])), cmap="magma", vmin=0.0, vmax=1.0)
        strong_contour(ax, data)
        ax.set_title(f"τ = {res['tau'][k]:.3g}", pad=2)
    if stopped_early(res, what, s):
        axes[-1].plot(8.3, -0.3, clip_on=False, **STOPPED_MARK)
        axes[-1].set(xlim=(-0.5, 7.5), ylim=(7.5, -0.5))
    return shown


def header(level: float | None) -> str:
    """A column's heading: the loss level, or the end of the run."""
    if level is None:
        return "end of\nthe run"
    return f"loss ≤ {level:g}\n× initial"


def draw_saliency(pair: str, results: list[Result], s: Setting, path: Path) -> None:
    """A reference column, then rows (depth, algorithm) of maps at matched training losses."""
    data = pair_data(pair)
    runs_ = by_run(of_pair(pair, s), results)
    rows = [(depth, alg) for depth in s.depths for alg in s.algorithms]
    n_cols = len(s.levels) + 1
    side = (style.DOUBLE - REFERENCE_WIDTH - 1.0) / n_cols
    fig = plt.figure(
        figsize=(style.DOUBLE, 0.45 + (side + 0.22) * max(len(rows), len(REFERENCES))),
        layout="constrained",
    )
    left, right = fig.subfigures(
        1, 2, width_ratios=[REFERENCE_WIDTH, style.DOUBLE - REFERENCE_WIDTH]
    )
    draw_references(left.subplots(len(REFERENCES), 1), data, s)
    axes = np.atleast_2d(right.subplots(len(rows), n_cols, squeeze=False))
    shown = None
    for row, (depth, alg) in enumerate(rows):
        what = f"{style.plain_label(alg)} at L = {depth}, digits {pair}"
        shown = draw_maps(axes[row], runs_[(pair, depth, alg)], data, s, what) or shown
        axes[row, 0].set_ylabel(
            f"{name(alg, s)}\nL = {depth}", color=style.ALGORITHM_STYLES[alg].color
        )
    for ax, level in zip(axes[0], (*s.levels, None), strict=True):
        ax.set_title(header(level) + "\n" + ax.get_title(), pad=2)
    if shown is not None:
        right.colorbar(shown, ax=axes[:, -1], shrink=0.5, label="share / its largest value")
    save(fig, path)


def of_pair(pair: str, s: Setting) -> Setting:
    """The setting ``s`` of a saliency figure as a setting of the study on ``pair``."""
    return Setting({**s, "pairs": (pair,)}, s.quick, s.figure)


def pair_tasks(pair: str, s: Setting):
    """The runs of ``pair`` at ``s``."""
    return study_tasks(of_pair(pair, s))


def pair_check(pair: str, s: Setting) -> str | None:
    """What is wrong with ``s`` (:func:`figures.digits.check_study`)."""
    return check_study(of_pair(pair, s))


def saliency_figure(pair: str) -> Figure:
    """The saliency figure of one pair (module-level callables: the sweep may draw it in a
    worker process)."""
    params = {k: v for k, v in PARAMS.items() if k != "pairs"}
    return Figure(
        f"digits_saliency_{pair}",
        f"digits {pair}: shares |beta_j|/|beta|_1 as 8x8 maps at matched training loss, "
        "GD and SAM flows at L = {depths}",
        "Columns: the first time the training loss falls to {levels} times its initial value, "
        "then the end of the run (loss 1e-30 or τ_max = {tau_max}); each map scaled to its "
        "largest share; strength: |m₊ − m₋|, the difference of the class means; cyan: the "
        "strong pixels (strength above half its largest value); × "
        f"beside a map: the run stopped short of its horizon. On digits {pair}, which pixels "
        "does each algorithm's predictor rely on as training proceeds: the strong pixels where "
        "the class means differ (GD) or, first, weaker ones (SAM)?",
        partial(pair_tasks, pair),
        partial(draw_saliency, pair),
        params={**params, "depths": (2,), "tau_max": (80.0,), "levels": (0.95, 0.5, 0.001)},
        quick={"tau_max": (6.0,)},
        example={"alpha": 0.25, "rho": 0.8, "algorithms": ("gd", "l2-sam"), "levels": (0.9, 0.6)},
        check=partial(pair_check, pair),
    )


SALIENCY_0V1 = saliency_figure("0v1")
SALIENCY_3V8 = saliency_figure("3v8")
SALIENCY_4V9 = saliency_figure("4v9")


if __name__ == "__main__":
    figure_command(__spec__.name, SALIENCY_0V1, SALIENCY_3V8, SALIENCY_4V9)
