"""Figure 7 (``fig7_gaussian_blobs``): two Gaussian blobs with means ``+-(1, 2)``, GD / l2-SAM /
l_inf-SAM at each depth (:mod:`figures.multi_sample`), one row per depth: the data with the
final direction of every run (arrows; the points a final direction misclassifies circled in
its colour), the polar angle of beta against tau beside the references' angles, and the
training loss (a run that rests at a loss above :data:`RESTING_LOSS` annotated). Clock: the
rescaled one (docs/theory.md §3).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flows import datasets
from flows.sweep.registry import Result, Task

from . import style
from .common import (
    STOPPED_MARK,
    Figure,
    Setting,
    figure_command,
    plt,
    save,
    show,
    stopped_early,
    stopped_handle,
)
from .compared import ALGORITHMS, check_algorithms, line_style
from .directions import REF_COLORS, directions, draw_reference_rays, references
from .multi_sample import multi_sample_tasks

#: A run whose final loss is above this has stopped at a point that does not separate the data.
RESTING_LOSS = 1e-3
#: Length of the direction arrows in the data panels.
REACH = 3.6
#: Markers of the two classes.
CLASS_MARKS = {1: ("o", style.SKY), -1: ("s", style.PURPLE)}


def gaussian_blobs() -> tuple[np.ndarray, np.ndarray]:
    """Figure 7's data, :func:`flows.datasets.gaussian_blobs` (means +-(1, 2), n = 40, std 0.6,
    seed 5), as arrays."""
    data = datasets.gaussian_blobs()
    return np.array(data.X), np.array(data.y)


def fig7_tasks(s: Setting) -> list[Task]:
    """The algorithms at each depth on :func:`gaussian_blobs` (depth-major)."""
    X, y = gaussian_blobs()
    horizons = {s.quick: dict(zip(s.depths, zip(s.t_max, s.n_points, strict=True), strict=True))}
    return multi_sample_tasks(X, y, s.depths, s.alpha, s.rho, horizons, s.quick, s.algorithms)


def draw_fig7(results: list[Result], s: Setting, path: Path) -> None:
    """One row per depth: data with final directions; polar angle of beta; loss."""
    X, y = gaussian_blobs()
    refs = references(X, y)
    k = len(s.algorithms)
    fig, axes = plt.subplots(
        len(s.depths),
        3,
        figsize=(style.DOUBLE, 2.25 * len(s.depths) + 0.8),
        squeeze=False,
        constrained_layout=True,
        gridspec_kw={"width_ratios": [1.0, 1.15, 1.15]},
    )
    stopped = False
    for row, (depth, t_max) in enumerate(zip(s.depths, s.t_max, strict=True)):
        runs = list(zip(s.algorithms, results[row * k : (row + 1) * k], strict=True))
        for alg, res in runs:
            stopped |= stopped_early(res, f"{style.label(alg)} at L = {depth}", s)
        _draw_data(axes[row, 0], X, y, refs, runs, depth)
        _draw_polar_angles(axes[row, 1], refs, runs, depth, t_max)
        _draw_losses(axes[row, 2], runs, depth)
    for ax in axes[-1, 1:]:
        ax.set_xlabel(r"rescaled time $\tau$")
    _legend(fig, axes, stopped, s)
    style.panel_letters(axes, x=-0.08)
    save(fig, path)


def _legend(fig, axes, stopped: bool, s: Setting) -> None:
    """The algorithms, references, classes and marks, below the panels."""
    handles, labels = [], []
    for ax in (*axes[:, 1], *axes[:, 0]):
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    if stopped:
        handles.append(stopped_handle())
        labels.append("run ended early")
    fig.legend(
        handles,
        labels,
        loc="outside lower center",
        ncol=4,
        title=rf"$\alpha$ = {show(s.alpha)}, $\rho$ = {s.rho:g}; blobs $n$ = 40, std 0.6",
    )


def _draw_data(ax, X: np.ndarray, y: np.ndarray, refs: dict, runs, depth: int) -> None:
    """The two blobs, the max-margin rays, the final direction of every run (arrows) and the
    points it misclassifies (circles in its colour)."""
    for label, (marker, color) in CLASS_MARKS.items():
        on = y == label
        ax.scatter(
            X[on, 0],
            X[on, 1],
            s=7,
            marker=marker,
            color=color,
            edgecolor="k",
            lw=0.3,
            label=f"$y = {label:+d}$",
        )
    names = {p: rf"$\ell_{p}$ max-margin" for p in refs}
    draw_reference_rays(
        ax, refs, REACH, names, with_vector=False, lw=5, alpha=0.4, solid_capstyle="round"
    )
    for alg, res in runs:
        u = directions(res)[-1]
        color = style.ALGORITHM_STYLES[alg].color
        ax.annotate(
            "",
            xy=(REACH * u[0], REACH * u[1]),
            xytext=(0, 0),
            arrowprops={"arrowstyle": "-|>", "color": color, "lw": 1.2, "shrinkA": 0, "shrinkB": 0},
        )
        wrong = y * (X @ u) <= 0
        if np.any(wrong):
            ax.scatter(
                X[wrong, 0],
                X[wrong, 1],
                s=70,
                facecolor="none",
                edgecolor=color,
                lw=1.0,
                label="point the final direction misclassifies",
            )
    ax.axhline(0, color="0.6", lw=0.5)
    ax.axvline(0, color="0.6", lw=0.5)
    ax.set(xlim=(-3.4, 4.0), ylim=(-3.4, 4.0))
    ax.set_box_aspect(1.0)
    ax.set_xlabel(r"$x_1$, $\beta_1$")
    ax.set_ylabel(r"$x_2$, $\beta_2$")
    ax.set_title(rf"$L$ = {depth}: final directions")


def _draw_polar_angles(ax, refs: dict, runs, depth: int, t_max: float) -> None:
    """Polar angle of beta against tau (tau > 0), the references' angles as wide lines, each
    run's end marked."""
    for p, r in refs.items():
        ax.axhline(np.degrees(np.arctan2(r[1], r[0])), color=REF_COLORS[p], lw=5, alpha=0.4)
    for alg, res in runs:
        u = directions(res)
        phi = np.degrees(np.arctan2(u[:, 1], u[:, 0]))
        keep = res["tau"] > 0
        ax.plot(res["tau"][keep], phi[keep], **line_style(alg))
        ax.plot(res["tau"][-1], phi[-1], zorder=5, **_end_mark(alg, res))
    ax.set_xscale("log")
    ax.set(ylabel=r"polar angle of $\beta$ (degrees)", ylim=(-5, 95))
    ax.set_yticks([0, 30, 60, 90])
    ax.grid(alpha=0.3, which="major", lw=0.4)
    ax.set_title(rf"$L$ = {depth}: direction of $\beta(\tau)$, $\tau \leq$ {t_max:g}")


def _draw_losses(ax, runs, depth: int) -> None:
    """Training loss against tau (log-log); a run that rests above :data:`RESTING_LOSS` is
    annotated with its loss."""
    for alg, res in runs:
        keep = res["tau"] > 0
        ax.plot(res["tau"][keep], res["loss"][keep], **line_style(alg))
        ax.plot(res["tau"][-1], res["loss"][-1], zorder=5, **_end_mark(alg, res))
        if res["loss"][-1] > RESTING_LOSS and res["tau"][-1] > 1.0:
            ax.annotate(
                f"rests at loss {res['loss'][-1]:.3g}:\nβ does not\nseparate the data",
                (res["tau"][-1], res["loss"][-1]),
                xytext=(0.04, 0.3),
                textcoords="axes fraction",
                ha="left",
                va="top",
                color=style.ALGORITHM_STYLES[alg].color,
                arrowprops={"arrowstyle": "->", "color": style.ALGORITHM_STYLES[alg].color},
            )
    ax.set(xscale="log", yscale="log", ylim=(1e-16, 2.0), ylabel="training loss (logistic)")
    ax.grid(alpha=0.3, which="major", lw=0.4)
    ax.set_title(rf"$L$ = {depth}: loss")


def _end_mark(alg: str, res: Result) -> dict[str, object]:
    """The mark of a run's last point: the algorithm's marker, × if the run ended early."""
    if int(np.asarray(res["status"])) < 0:
        return STOPPED_MARK
    own = style.ALGORITHM_STYLES[alg]
    return {"marker": own.marker, "color": own.color, "mec": "black", "mew": 0.5, "ls": ""}


def check_fig7(s: Setting) -> str | None:
    """A setting's problem: alpha not one per feature, horizons not one per depth, an unknown
    algorithm."""
    if len(s.alpha) != 2:
        return f"alpha must have one value per feature (2), got {show(s.alpha)}"
    if not len(s.depths) == len(s.t_max) == len(s.n_points):
        return "depths, t_max and n_points must have one value per depth"
    return check_algorithms(s.algorithms)


GAUSSIAN_BLOBS = Figure(
    "fig7_gaussian_blobs",
    "Gaussian blobs ±(1, 2), α = {alpha}, ρ = {rho}: final directions, direction and loss "
    "against τ at L = {depths}",
    "One row per depth: the data with the final direction of each run (arrows; circled: a "
    "point that direction misclassifies), the polar angle of β against τ beside the ℓ1 and ℓ2 "
    "max-margin angles (wide lines), and the training loss. On two Gaussian blobs (α = {alpha}, "
    "ρ = {rho}), where does the direction of β go for each algorithm at each depth, and does "
    "ℓ∞-SAM at L = 2 stop at a non-separating stationary point?",
    fig7_tasks,
    draw_fig7,
    params={
        "alpha": (1.5, 0.8),
        "rho": 1.0,
        "depths": (2, 1),
        "algorithms": ALGORITHMS,
        "t_max": (8.0, 1000.0),
        "n_points": (801, 2001),
    },
    quick={"t_max": (0.5, 5.0), "n_points": (21, 21)},
    example={"alpha": (1.4, 0.7), "rho": 0.9, "algorithms": ("gd", "linf-sam")},
    check=check_fig7,
)


if __name__ == "__main__":
    figure_command(__spec__.name, GAUSSIAN_BLOBS)
