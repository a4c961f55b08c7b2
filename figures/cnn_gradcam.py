"""``cnn_gradcam``: Grad-CAM of a two-layer CNN trained on 8x8 digits with GD and l2-SAM:
does SAM attend to the background where GD attends to the strokes?

Data: scikit-learn's 8x8 digits (:func:`flows.datasets.digits`, split seed 0), three pairs of
classes (0 vs 1, 3 vs 8, 4 vs 9; about 270 training and 90 test images each). Model
(:func:`analysis.networks.runs.digits_model`): four 3x3 ReLU filters with zero padding and a
linear read-out, from ``alpha`` times LeCun-normal weights (seeds 0, 1, 2). Training: full-batch
steps of 0.5 for 300 steps, GD and l2-SAM with rho = 0.2 (whose runs collapse below
alpha ~ 0.15: the range just above is SAM's intermediate one). Grad-CAM
(:func:`analysis.networks.gradcam_maps`) of each test image's own class every 10 steps.

Top: the maps of four test digits of 3 vs 8 at ``ALPHA_MAPS`` along training, seed 0
(contour: the stroke, intensity >= 0.25). Middle: the share of the maps' mass on background
pixels (intensity < 0.25; :func:`analysis.networks.background_share`), mean over test images,
then mean and range over seeds, at ``ALPHA_MAPS``, against the share of background pixels
(grey, the value of a uniform map). Bottom: SAM's share minus GD's from the same
initialisation, against alpha: at matched training loss (``LOSS_LEVEL``) for two thresholds
of the background, and at the end of training; runs that never reach that loss are counted
under the axis.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.networks.runs import cnn_digits  # noqa: F401 - registers the task kinds
from flows.datasets import digits
from flows.sweep.registry import Result, Task

from .common import OKABE_ITO, Figure, Setting, figure_command, plt, save

PAIRS = ((0, 1), (3, 8), (4, 9))
ALPHAS = (0.15, 0.2, 0.3, 1.0)
ALPHA_MAPS = 0.2
SEEDS = (0, 1, 2)
ALGORITHMS = (("gd", {}, "GD"), ("l2-sam", {"rho": 0.2}, "ℓ2-SAM ρ = 0.2"))
COLORS = {"gd": OKABE_ITO[5], "l2-sam": OKABE_ITO[6]}
THRESHOLDS = (0.25, 0.5)
RUN = {
    "split_seed": 0,
    "kernel": 3,
    "channels": 4,
    "eta": 0.5,
    "steps": 300,
    "record_every": 10,
    "thresholds": list(THRESHOLDS),
    "n_maps": 2,
}
#: the training loss at which SAM and GD are compared
LOSS_LEVEL = 0.1
MAP_STEPS = (10, 30, 100, 300)


def _grid(quick: bool):
    if quick:
        return PAIRS[1:2], (ALPHA_MAPS, 1.0), SEEDS[:1]
    return PAIRS, ALPHAS, SEEDS


def gradcam_tasks(s: Setting) -> list[Task]:
    """Per pair, algorithm, alpha and seed, one run."""
    pairs, alphas, seeds = _grid(s.quick)
    return [
        Task(
            "cnn_digits",
            {"a": a, "b": b, **RUN, "algorithm": alg, **hp, "alpha": alpha, "seed": seed},
        )
        for a, b in pairs
        for alg, hp, _ in ALGORITHMS
        for alpha in alphas
        for seed in seeds
    ]


def _mean_share(res: Result, threshold: int = 0) -> np.ndarray:
    """Background share per record, mean over the test images with a non-zero map."""
    return np.nanmean(res["background"][:, threshold, :], axis=1)


def _draw_maps(fig, grid, runs, pair, test_X) -> None:
    """One row per shown test digit: the image, then GD's and SAM's maps at MAP_STEPS."""
    res = {alg: runs[(pair, alg, ALPHA_MAPS, SEEDS[0])] for alg, _, _ in ALGORITHMS}
    steps = list(res["gd"]["steps"])
    columns = [steps.index(s) for s in MAP_STEPS if s in steps]
    for i, row in enumerate(res["gd"]["map_images"]):
        image = test_X[row].reshape(8, 8)
        ax = fig.add_subplot(grid[i, 0])
        ax.imshow(image, cmap="gray_r", vmin=0, vmax=1)
        ax.set_xticks([])
        ax.set_yticks([])
        if i == 0:
            ax.set_title("test image", fontsize=9)
        for j, (alg, _, label) in enumerate(ALGORITHMS):
            for c, k in enumerate(columns):
                ax = fig.add_subplot(grid[i, 1 + j * len(columns) + c])
                m = res[alg]["maps"][k, i].reshape(8, 8)
                ax.imshow(m / m.max() if m.max() > 0 else m, cmap="magma", vmin=0, vmax=1)
                ax.contour(image >= THRESHOLDS[0], levels=[0.5], colors="c", linewidths=0.8)
                ax.set_xticks([])
                ax.set_yticks([])
                if i == 0:
                    ax.set_title(f"{label}\nstep {res[alg]['steps'][k]}", fontsize=8)


def matched_share(res: Result, threshold: int = 0) -> float:
    """The background share (mean over test images) at the first record whose training loss
    is at most LOSS_LEVEL; NaN if the run never gets there."""
    hit = np.flatnonzero(res["loss"] <= LOSS_LEVEL)
    return float(_mean_share(res, threshold)[hit[0]]) if hit.size else float("nan")


def final_share(res: Result, threshold: int = 0) -> float:
    """The background share (mean over test images) at the end of the run."""
    return float(_mean_share(res, threshold)[-1])


def draw_gradcam(results: list[Result], s: Setting, path: Path) -> None:
    """Maps of one pair, background shares along training, SAM - GD against alpha."""
    pairs, alphas, seeds = _grid(s.quick)
    it = iter(results)
    runs = {
        (pair, alg, alpha, seed): next(it)
        for pair in pairs
        for alg, _, _ in ALGORITHMS
        for alpha in alphas
        for seed in seeds
    }
    tests = {pair: digits(*pair, seed=RUN["split_seed"])[1] for pair in pairs}
    fig = plt.figure(figsize=(15, 15.5), constrained_layout=True)
    outer = fig.add_gridspec(3, 1, height_ratios=[1.1, 1, 1])
    shown = (3, 8) if (3, 8) in pairs else pairs[0]
    n_shown = len(runs[(shown, "gd", ALPHA_MAPS, seeds[0])]["map_images"])
    maps_grid = outer[0].subgridspec(n_shown, 1 + 2 * len(MAP_STEPS))
    _draw_maps(fig, maps_grid, runs, shown, tests[shown].X)
    middle = outer[1].subgridspec(1, len(pairs))
    for col, pair in enumerate(pairs):
        ax = fig.add_subplot(middle[col])
        for alg, _, label in ALGORITHMS:
            curves = np.array([_mean_share(runs[(pair, alg, ALPHA_MAPS, seed)]) for seed in seeds])
            steps = runs[(pair, alg, ALPHA_MAPS, seeds[0])]["steps"]
            ax.plot(steps, curves.mean(axis=0), color=COLORS[alg], lw=2, label=label)
            ax.fill_between(steps, curves.min(axis=0), curves.max(axis=0), color=COLORS[alg],
                            alpha=0.2)  # fmt: skip
        chance = np.mean(tests[pair].X < THRESHOLDS[0])
        ax.axhline(chance, color="0.5", ls="--", lw=1, label="share of background pixels")
        ax.set(ylim=(0, 1), xlabel="training step", ylabel="Grad-CAM mass on background",
               title=f"{pair[0]} vs {pair[1]}, α = {ALPHA_MAPS:g}: mean, range over {len(seeds)} seeds")  # fmt: skip
        ax.legend(fontsize=8, loc="lower right")
    panels = [(matched_share, 0, f"at training loss {LOSS_LEVEL:g}"),
              (matched_share, 1, f"at training loss {LOSS_LEVEL:g}"),
              (final_share, 0, f"at step {RUN['steps']}")]  # fmt: skip
    bottom = outer[2].subgridspec(1, len(panels))
    for col, (measure, threshold, when) in enumerate(panels):
        ax = fig.add_subplot(bottom[col])
        for p, pair in enumerate(pairs):
            diffs = np.array(
                [
                    [
                        measure(runs[(pair, "l2-sam", a, seed)], threshold)
                        - measure(runs[(pair, "gd", a, seed)], threshold)
                        for seed in seeds
                    ]
                    for a in alphas
                ]
            )
            color = OKABE_ITO[1 + p]
            offset = np.array(alphas) * (1 + 0.05 * (p - 1))
            counted = np.sum(~np.isnan(diffs), axis=1)
            mean = np.nansum(diffs, axis=1) / np.maximum(counted, 1)
            mean[counted == 0] = np.nan
            ax.plot(offset, mean, "-", color=color, lw=1.5, label=f"{pair[0]} vs {pair[1]}")
            for j in range(len(seeds)):
                ax.plot(offset, diffs[:, j], "o", color=color, ms=4, alpha=0.7)
            for a, k in zip(offset, len(seeds) - counted, strict=True):
                if k:
                    ax.annotate(f"{k}×", (a, 0), xytext=(0, -12 - 9 * p),
                                textcoords="offset points", fontsize=7, color=color, ha="center")  # fmt: skip
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xscale("log")
        ax.set_xticks(alphas, [f"{a:g}" for a in alphas])
        ax.minorticks_off()
        ax.set(xlim=(alphas[0] / 1.3, alphas[-1] * 1.3), xlabel="initialisation scale α",
               ylabel="SAM − GD: Grad-CAM mass on background",
               title=f"{when}, background: intensity < {THRESHOLDS[threshold]:g}")  # fmt: skip
        ax.legend(fontsize=8)
    fig.suptitle(
        "Grad-CAM of a two-layer CNN on 8×8 digits, GD against ℓ2-SAM"
        + (" (quick)" if s.quick else "")
        + f"\nbottom: dots are seeds (SAM and GD from one init), n× counts runs that never reach"
        f" training loss {LOSS_LEVEL:g}",
        fontsize=12,
    )
    save(fig, path)


CNN_GRADCAM = Figure(
    "cnn_gradcam",
    "Grad-CAM maps of a two-layer CNN on digits along training, and the share of attention on "
    "background pixels, GD against l2-SAM over alpha",
    "Does a SAM-trained CNN attend to background and faint pixels where a GD-trained one attends "
    "to the strokes, and at which initialisation scales?",
    gradcam_tasks,
    draw_gradcam,
)


if __name__ == "__main__":
    figure_command(__spec__.name, CNN_GRADCAM)
