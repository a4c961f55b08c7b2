"""The digits study's saliency maps (settings and runs: :mod:`figures.digits`).

* ``digits_saliency_0v1``, ``digits_saliency_3v8``, ``digits_saliency_4v9`` — the shares
  ``|beta_j| / ||beta||_1`` as 8x8 images at matched training losses, GD / l2-SAM / LE-SAM /
  l_inf-SAM at depths 2 and 3.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np

from analysis.amplification import shares
from analysis.saliency import accuracy, first_below
from flows.sweep.registry import Result

from .common import Figure, Setting, figure_command, plt, save
from .digits import (
    ALGORITHMS,
    ALPHA,
    COLORS,
    DEPTHS,
    LOSS_FLOOR,
    NAMES,
    RHO,
    RHO_LINF,
    PairData,
    by_run,
    image,
    pair_data,
    quick_tag,
    study_tasks,
)

#: the columns: training loss at these fractions of its initial value (the same for every
#: algorithm of a pair and depth: they share the init), then the end of the run
LEVELS = (0.95, 0.75, 0.5, 0.1, 1e-3)


def _columns(res: Result) -> list[int | None]:
    """Sample index of each column: first sample with loss <= level * loss(0) (None: never),
    then the last sample."""
    hits = first_below(res["loss"], np.array(LEVELS) * res["loss"][0])
    return [int(k) if k >= 0 else None for k in hits] + [len(res["tau"]) - 1]


def _draw_header(axes, data: PairData) -> None:
    """First row: the class means, the strength and the orthant signs."""
    a, b = data.pair
    X, y = data.train.X, data.train.y
    panels = [
        (image(X[y > 0].mean(axis=0)), "gray", f"mean of digit {a} (y = +1)", (0, 1)),
        (image(X[y < 0].mean(axis=0)), "gray", f"mean of digit {b} (y = −1)", (0, 1)),
        (
            image(data.strength),
            "viridis",
            "strength |mean₊ − mean₋|\n(contour: half its max)",
            (0, None),
        ),
        (image(data.signs), "coolwarm", f"init sign of β (red: votes {a})", (-1, 1)),
    ]
    for ax, (img, cmap, title, (lo, hi)) in zip(axes, panels, strict=False):
        ax.imshow(img, cmap=cmap, vmin=lo, vmax=hi)
        ax.set_title(title, fontsize=8.5)
    axes[2].contour(
        image(data.strength), levels=[0.5 * data.strength.max()], colors="white", linewidths=1.0
    )
    text = (
        f"train n = {data.train.n}, test n = {data.test.n}\n"
        f"α = {ALPHA:g}; ℓ2/LE-SAM ρ = {RHO:g},\nℓ∞-SAM ρ = {RHO_LINF:g}\n\n"
        "maps: |βⱼ| / ‖β‖₁, each scaled\nto its own max (in the title)\n"
        "columns: first time the\ntraining loss ≤ level"
    )
    axes[-1].text(0.0, 0.5, text, fontsize=8.5, va="center", transform=axes[-1].transAxes)
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    for ax in axes[len(panels) :]:
        ax.axis("off")


def draw_saliency(pair: tuple[int, int], results: list[Result], s: Setting, path: Path) -> None:
    """Rows: (depth, algorithm); columns: matched training losses then the end of the run."""
    data = pair_data(pair)
    runs_ = by_run((pair,), results)
    n_cols = len(LEVELS) + 1
    n_rows = 1 + len(DEPTHS) * len(ALGORITHMS)
    fig, axes = plt.subplots(
        n_rows, n_cols, figsize=(1.75 * n_cols + 1.2, 1.55 * n_rows + 0.6), constrained_layout=True
    )
    _draw_header(axes[0], data)
    row = 1
    for depth in DEPTHS:
        for alg, _ in ALGORITHMS:
            _draw_maps(axes[row], runs_[(pair, depth, alg)], data)
            axes[row, 0].set_ylabel(
                f"{NAMES[alg]}\nL = {depth}", fontsize=9.5, color=COLORS[alg], fontweight="bold"
            )
            row += 1
    titles = [f"loss ≤ {level:g} × initial" for level in LEVELS]
    titles.append(f"end (loss ≤ {LOSS_FLOOR:g},\nτ max or budget)")
    for ax, title in zip(axes[1], titles, strict=True):
        ax.annotate(
            title,
            (0.5, 1.38),
            xycoords="axes fraction",
            ha="center",
            fontsize=9.5,
            fontweight="bold",
        )
    fig.suptitle(
        f"Digits {pair[0]} vs {pair[1]}: pixel shares |βⱼ|/‖β‖₁ at matched training "
        "loss (cyan contour: strong pixels)" + quick_tag(s.quick),
        fontsize=11,
    )
    save(fig, path)


def _draw_maps(axes, res: Result, data: PairData) -> None:
    """One run's row: the shares as an 8x8 map at each column's sample (scaled to their max,
    strong pixels contoured), or "not reached"."""
    contour = image(data.strength)
    level = 0.5 * data.strength.max()
    sh = shares(res["log_abs_beta"])
    acc = accuracy(res["log_abs_beta"], res["sign_beta"], data.test.X, data.test.y)
    for ax, k in zip(axes, _columns(res), strict=True):
        ax.set_xticks([])
        ax.set_yticks([])
        if k is None:
            ax.text(
                0.5,
                0.5,
                "not\nreached",
                ha="center",
                va="center",
                fontsize=8,
                color="0.5",
                transform=ax.transAxes,
            )
            ax.set_facecolor("0.95")
            continue
        top = float(np.max(sh[k]))
        ax.imshow(image(sh[k] / top), cmap="magma", vmin=0.0, vmax=1.0)
        ax.contour(contour, levels=[level], colors="cyan", linewidths=0.7)
        ax.set_title(
            f"τ={res['tau'][k]:.3g}, max {top:.2f}\ntest acc {acc[k]:.2f}",
            fontsize=7.5,
            pad=2,
        )


def _saliency_figure(pair: tuple[int, int], kind: str) -> Figure:
    """The saliency figure of one pair (module-level callables: the sweep may draw it in a
    worker process)."""
    a, b = pair
    return Figure(
        f"digits_saliency_{a}v{b}",
        f"digits {a} vs {b} ({kind}): shares |beta_j|/|beta|_1 as 8x8 maps at matched loss, "
        "GD / l2 / LE / linf-SAM, L = 2, 3",
        f"On digits {a} vs {b}, which pixels does each algorithm's predictor rely on as training "
        "proceeds: the strong, stroke pixels (GD) or, first, the weak ones (SAM)?",
        partial(study_tasks, (pair,)),
        partial(draw_saliency, pair),
    )


SALIENCY_0V1 = _saliency_figure((0, 1), "easy pair")
SALIENCY_3V8 = _saliency_figure((3, 8), "hard pair")
SALIENCY_4V9 = _saliency_figure((4, 9), "hard pair")


if __name__ == "__main__":
    figure_command(__spec__.name, SALIENCY_0V1, SALIENCY_3V8, SALIENCY_4V9)
