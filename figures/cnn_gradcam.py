"""Grad-CAM of a two-layer CNN trained on 8x8 digits with GD and l2-SAM: does SAM attend to
the background where GD attends to the strokes?

Data: scikit-learn's 8x8 digits (:func:`flows.datasets.digits`, split seed 0), three pairs of
classes (0 vs 1, 3 vs 8, 4 vs 9, written ``3v8``; about 270 training and 90 test images
each). Model (:func:`analysis.networks.runs.digits_model`): four 3x3 ReLU filters with zero
padding and a linear read-out, from ``alpha`` times LeCun-normal weights (seeds 0, 1, 2).
Training: full-batch steps of 0.5 for 300 steps, GD and l2-SAM with rho = 0.2 (whose runs
collapse below alpha ~ 0.15: the range just above is SAM's intermediate one). Grad-CAM
(:func:`analysis.networks.gradcam_maps`) of each test image's own class every 10 steps; the
background: pixels of intensity below 0.25 (or 0.5; :func:`analysis.networks.background_share`).

* ``cnn_gradcam`` — the maps of four test digits of one pair along training, one seed
  (contour: the stroke, intensity >= 0.25).
* ``cnn_gradcam_background`` — the share of the maps' mass on the background, mean over test
  images, then mean and range over seeds, per pair, at one alpha, against the share of
  background pixels (the value of a uniform map).
* ``cnn_gradcam_alpha`` — SAM's share minus GD's from the same initialisation, against alpha:
  at matched training loss (two thresholds of the background) and at the end of training.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.networks.runs import cnn_digits  # noqa: F401 - registers the task kinds
from flows.datasets import digits
from flows.sweep.registry import Result, Task

from . import style
from .common import (
    STOPPED_MARK,
    Figure,
    Setting,
    figure_command,
    plt,
    save,
    stopped_early,
    stopped_handle,
)
from .digits import pair_of

ALGORITHMS = ("gd", "l2-sam")
THRESHOLDS = (0.25, 0.5)
RUN = {
    "split_seed": 0,
    "kernel": 3,
    "channels": 4,
    "eta": 0.5,
    "record_every": 10,
    "thresholds": list(THRESHOLDS),
    "n_maps": 2,
}
#: Parameters shared by the three figures.
COMMON: dict[str, object] = {"rho": 0.2, "steps": 300}


def task(pair: str, alg: str, alpha: float, seed: int, s: Setting) -> Task:
    """One ``'cnn_digits'`` run."""
    a, b = pair_of(pair)
    hp = {"rho": s.rho} if alg == "l2-sam" else {}
    return Task(
        "cnn_digits",
        {"a": a, "b": b, **RUN, "steps": s.steps, "algorithm": alg, **hp, "alpha": alpha,
         "seed": seed},
    )  # fmt: skip


def grid(s: Setting) -> list[tuple[str, str, float, int]]:
    """``(pair, algorithm, alpha, seed)`` of a setting with ``pairs``, ``alphas``, ``seeds``."""
    return [
        (pair, alg, alpha, seed)
        for pair in s.pairs
        for alg in ALGORITHMS
        for alpha in s.alphas
        for seed in s.seeds
    ]


def grid_tasks(s: Setting) -> list[Task]:
    """Per pair, algorithm, alpha and seed, one run."""
    return [task(*run, s) for run in grid(s)]


def by_run(s: Setting, results: list[Result]) -> dict[tuple, Result]:
    """Results keyed by ``(pair, algorithm, alpha, seed)``."""
    return dict(zip(grid(s), results, strict=True))


def check(s: Setting) -> str | None:
    """Pairs as ``3v8``, positive scales, map steps among the recorded ones."""
    try:
        for pair in s.get("pairs", (s.get("pair", "3v8"),)):
            pair_of(pair)
    except ValueError as error:
        return str(error)
    alphas = s.get("alphas", (s.get("alpha", 1.0),))
    if min(*alphas, s.rho) <= 0 or s.steps < RUN["record_every"]:
        return f"alphas and rho must be positive, steps at least {RUN['record_every']}"
    off = [k for k in s.get("map_steps", ()) if k % RUN["record_every"] or k > s.steps]
    if off:
        return f"map_steps must be multiples of {RUN['record_every']} up to steps, got {off}"
    return None


def sam_name(s: Setting) -> str:
    """``ℓ2-SAM, ρ = 0.2``."""
    return f"{style.label('l2-sam')}, ρ = {s.rho:g}"


def warn_stopped(runs: dict[tuple, Result], s: Setting) -> bool:
    """Whether a run stopped early (each one warned on stderr)."""
    stopped = False
    for (pair, alg, alpha, seed), res in runs.items():
        what = f"{alg} on digits {pair} at alpha = {alpha:g}, seed {seed}"
        stopped |= stopped_early(res, what, s)
    return stopped


# --------------------------------------------------------------------------- the maps


def maps_tasks(s: Setting) -> list[Task]:
    """GD and SAM on the pair at ``alpha``, ``seed``."""
    return [task(s.pair, alg, s.alpha, s.seed, s) for alg in ALGORITHMS]


def draw_maps(results: list[Result], s: Setting, path: Path) -> None:
    """One row per shown test digit: the image, then GD's and SAM's maps at ``map_steps``."""
    res = dict(zip(ALGORITHMS, results, strict=True))
    test_X = digits(*pair_of(s.pair), seed=RUN["split_seed"])[1].X
    shown = res["gd"]["map_images"]
    cols = 1 + len(ALGORITHMS) * len(s.map_steps)
    side = (style.DOUBLE - 0.3) / cols
    fig, axes = plt.subplots(len(shown), cols, figsize=(style.DOUBLE, 0.55 + (side + 0.05) * len(shown)),
                             layout="constrained", squeeze=False)  # fmt: skip
    for i, row in enumerate(shown):
        image = test_X[row].reshape(8, 8)
        axes[i, 0].imshow(image, cmap="gray_r", vmin=0, vmax=1)
        for j, alg in enumerate(ALGORITHMS):
            steps = list(res[alg]["steps"])
            for c, step in enumerate(s.map_steps):
                ax = axes[i, 1 + j * len(s.map_steps) + c]
                if step in steps:
                    m = res[alg]["maps"][steps.index(step), i].reshape(8, 8)
                    ax.imshow(m / m.max() if m.max() > 0 else m, cmap="magma", vmin=0, vmax=1)
                    ax.contour(image >= THRESHOLDS[0], levels=[0.5], colors="c", linewidths=0.6)
                if i == 0:
                    ax.set_title(f"{style.label(alg)}\nstep {step}",
                                 color=style.ALGORITHM_STYLES[alg].color)  # fmt: skip
    for j, alg in enumerate(ALGORITHMS):
        if stopped_early(res[alg], f"{alg} on digits {s.pair} at alpha = {s.alpha:g}", s):
            last = axes[0, (j + 1) * len(s.map_steps)]
            last.plot(8.3, -0.3, clip_on=False, **STOPPED_MARK)
            last.set(xlim=(-0.5, 7.5), ylim=(7.5, -0.5))
    axes[0, 0].set_title(f"digits {s.pair}\ntest image")
    fig.supxlabel(f"α = {s.alpha:g}, seed {s.seed}; {sam_name(s)}; cyan: the stroke", fontsize=7)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    save(fig, path)


# --------------------------------------------------------------------------- along training


def background_tasks(s: Setting) -> list[Task]:
    """Per pair, algorithm and seed, one run at ``alpha``."""
    return grid_tasks(Setting({**s, "alphas": (s.alpha,)}, s.quick, s.figure))


def mean_share(res: Result, threshold: int = 0) -> np.ndarray:
    """Background share per record, mean over the test images with a non-zero map."""
    return np.nanmean(res["background"][:, threshold, :], axis=1)


def draw_background(results: list[Result], s: Setting, path: Path) -> None:
    """Per pair, the background share of GD's and SAM's maps along training at ``alpha``: mean
    and range over seeds; the share of background pixels dashed."""
    setting = Setting({**s, "alphas": (s.alpha,)}, s.quick, s.figure)
    runs = by_run(setting, results)
    stopped = warn_stopped(runs, s)
    fig, axes = plt.subplots(1, len(s.pairs), figsize=(style.DOUBLE, 2.5), layout="constrained",
                             sharey=True, squeeze=False)  # fmt: skip
    for ax, pair in zip(axes[0], s.pairs, strict=True):
        for alg in ALGORITHMS:
            look = style.algorithm_style(alg, "steps")
            got = [runs[(pair, alg, s.alpha, seed)] for seed in s.seeds]
            curves = np.array([mean_share(r) for r in got])
            steps = got[0]["steps"]
            label = look["label"] + (f", ρ = {s.rho:g}" if alg == "l2-sam" else "")
            ax.plot(steps, curves.mean(axis=0), color=look["color"], ls=look["ls"], label=label)
            ax.fill_between(steps, curves.min(axis=0), curves.max(axis=0), color=look["color"],
                            alpha=0.2, lw=0)  # fmt: skip
            for r in got:
                if int(r["status"]) < 0:
                    ax.plot(r["steps"][-1], mean_share(r)[-1], **STOPPED_MARK)
        test = digits(*pair_of(pair), seed=RUN["split_seed"])[1]
        ax.axhline(np.mean(test.X < THRESHOLDS[0]), color="0.5", ls=":", lw=1)
        ax.set(ylim=(0, 1), xlabel="training step", title=f"digits {pair}, α = {s.alpha:g}")
    axes[0, 0].set_ylabel("Grad-CAM mass on\nthe background")
    handles, _ = axes[0, 0].get_legend_handles_labels()
    handles.append(plt.Line2D([], [], color="0.5", ls=":", label="share of background pixels"))
    handles.append(plt.Rectangle((0, 0), 1, 1, color="0.8",
                                 label=f"range over seeds {', '.join(map(str, s.seeds))}"))  # fmt: skip
    if stopped:
        handles.append(stopped_handle("run stopped short of its horizon"))
    fig.legend(handles=handles, loc="outside lower center", ncol=2)
    save(fig, path)


# --------------------------------------------------------------------------- against alpha


def matched_share(res: Result, level: float, threshold: int = 0) -> float:
    """The background share (mean over test images) at the first record whose training loss
    is at most ``level``; NaN if the run never gets there."""
    hit = np.flatnonzero(res["loss"] <= level)
    return float(mean_share(res, threshold)[hit[0]]) if hit.size else float("nan")


def final_share(res: Result, level: float, threshold: int = 0) -> float:
    """The background share (mean over test images) at the end of the run."""
    return float(mean_share(res, threshold)[-1])


def draw_alpha(results: list[Result], s: Setting, path: Path) -> None:
    """SAM's background share minus GD's from the same init against alpha: at training loss
    ``loss_level`` (two thresholds of the background) and at the end; a line through the
    mean over seeds, a dot per seed, a triangle at the bottom where a seed never reaches that
    loss."""
    runs = by_run(s, results)
    stopped = warn_stopped(runs, s)
    panels = [
        (matched_share, 0, f"at training loss {s.loss_level:g}"),
        (matched_share, 1, f"at training loss {s.loss_level:g}"),
        (final_share, 0, f"at step {s.steps}"),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(style.DOUBLE, 2.7), layout="constrained",
                             sharey=True)  # fmt: skip
    colors = style.coordinate_colors(len(s.pairs))
    for ax, (measure, threshold, when) in zip(axes, panels, strict=True):
        for p, (pair, color) in enumerate(zip(s.pairs, colors, strict=True)):
            diffs = np.array([
                [measure(runs[(pair, "l2-sam", a, seed)], s.loss_level, threshold)
                 - measure(runs[(pair, "gd", a, seed)], s.loss_level, threshold)
                 for seed in s.seeds]
                for a in s.alphas
            ])  # fmt: skip
            x = np.array(s.alphas) * (1 + 0.05 * (p - (len(s.pairs) - 1) / 2))
            counted = np.sum(~np.isnan(diffs), axis=1)
            mean = np.where(counted > 0, np.nansum(diffs, axis=1) / np.maximum(counted, 1), np.nan)
            ax.plot(x, mean, "-", color=color, lw=1.2, label=f"digits {pair}")
            for j in range(len(s.seeds)):
                ax.plot(x, diffs[:, j], "o", color=color, ms=3, alpha=0.7)
            missing = counted < len(s.seeds)
            if missing.any():
                ax.plot(x[missing], np.full(missing.sum(), 0.03), ls="", marker="v", mfc="white",
                        color=color, transform=ax.get_xaxis_transform())  # fmt: skip
        ax.axhline(0, color="k", lw=0.6)
        ax.set_xscale("log")
        ax.set_xticks(s.alphas, [f"{a:g}" for a in s.alphas])
        ax.minorticks_off()
        ax.set(xlim=(min(s.alphas) / 1.3, max(s.alphas) * 1.3), xlabel="initialisation scale α",
               title=f"{when}\nbackground: intensity < {THRESHOLDS[threshold]:g}")  # fmt: skip
    axes[0].set_ylabel(f"SAM − GD: Grad-CAM mass\non the background (ρ = {s.rho:g})")
    handles, _ = axes[0].get_legend_handles_labels()
    seeds = ", ".join(map(str, s.seeds))
    handles += [
        plt.Line2D([], [], ls="", marker="o", color="0.4", ms=3, label=f"seeds {seeds}"),
        plt.Line2D([], [], ls="", marker="v", mfc="white", color="0.4",
                   label=f"a seed never reaches loss {s.loss_level:g}"),
    ]  # fmt: skip
    if stopped:
        handles.append(stopped_handle("run stopped short of its horizon"))
    fig.legend(handles=handles, loc="outside lower center", ncol=3)
    save(fig, path)


PAIRS = ("0v1", "3v8", "4v9")
SEEDS = (0, 1, 2)

CNN_GRADCAM = Figure(
    "cnn_gradcam",
    "Grad-CAM maps of a two-layer CNN on digits {pair} along training, GD and l2-SAM",
    "Maps scaled to their largest value; cyan: the stroke (intensity ≥ 0.25); steps of 0.5, "
    "α = {alpha}, seed {seed}, ρ = {rho}. Does a SAM-trained CNN attend to the background "
    "and faint pixels where a GD-trained one attends to the strokes?",
    maps_tasks,
    draw_maps,
    params={"pair": "3v8", "alpha": 0.2, "seed": 0, "map_steps": (10, 30, 100, 300), **COMMON},
    example={"pair": "4v9", "alpha": 0.3, "map_steps": (20, 200)},
    check=check,
)

CNN_GRADCAM_BACKGROUND = Figure(
    "cnn_gradcam_background",
    "Share of a two-layer CNN's Grad-CAM mass on background pixels along training, GD and "
    "l2-SAM, digits {pairs}",
    "Mean over the test images (background: intensity < 0.25), then mean and range over the "
    "seeds {seeds}; α = {alpha}, ρ = {rho}; dotted: the share of background pixels, a uniform "
    "map's value. Does SAM's CNN put more of its attention on the background than GD's along "
    "training?",
    background_tasks,
    draw_background,
    params={"pairs": PAIRS, "alpha": 0.2, "seeds": SEEDS, **COMMON},
    quick={"pairs": ("3v8",), "seeds": (0,)},
    example={"pairs": ("4v9",), "alpha": 0.3, "seeds": (1,)},
    check=check,
)

CNN_GRADCAM_ALPHA = Figure(
    "cnn_gradcam_alpha",
    "SAM minus GD: share of a two-layer CNN's Grad-CAM mass on the background against alpha, "
    "digits {pairs}",
    "Paired by initialisation (seeds {seeds}), ρ = {rho}: a line through the mean over the "
    "seeds, a dot per seed, a triangle where a seed never reaches training loss {loss_level} "
    "(left out of the mean). In which range of α does SAM attend more to the background "
    "than GD, at matched training loss and at the end of training?",
    grid_tasks,
    draw_alpha,
    params={
        "pairs": PAIRS,
        "alphas": (0.15, 0.2, 0.3, 1.0),
        "seeds": SEEDS,
        "loss_level": 0.1,
        **COMMON,
    },  # fmt: skip
    quick={"pairs": ("3v8",), "alphas": (0.2, 1.0), "seeds": (0,)},
    example={"pairs": ("0v1",), "seeds": (2,), "loss_level": 0.05},
    check=check,
)


if __name__ == "__main__":
    figure_command(__spec__.name, CNN_GRADCAM, CNN_GRADCAM_BACKGROUND, CNN_GRADCAM_ALPHA)
