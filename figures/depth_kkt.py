"""Figure 20 (``fig20_depth_kkt``): which l_{2/L} KKT point the flows reach at depth 3 and 4.

At depth L GD's limit direction is a KKT point of ``min sum_j |beta_j|^(2/L)`` s.t.
``y_i <beta, x_i> >= 1``, a non-convex program for L >= 3 with several KKT points
(:func:`analysis.maxmargin.kkt_points`). Two data sets of three positive examples in d = 3
whose l1 max-margin is not 1-sparse (FLOW, DIAG) at L = 3 and 4; rescaled GD flows to their
blow-up from balanced alpha between 1e-2 and 10, and l2-SAM and l_inf-SAM (rho = 0.1) from
alpha = 0.2. Each run is placed by the program's objective at its final direction, relative to
the global minimum (1 = the global point), against the certified KKT points (grey lines,
labelled by support at the right edge, spread apart where levels are close); a filled marker
is a direction whose KKT residual (:func:`analysis.margin_programs.quasi_norm.kkt_check`) is
below ``KKT_TOL20``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.lines import Line2D

from analysis.margin_programs.quasi_norm import kkt_check, quasi_norm_objective
from analysis.maxmargin import kkt_points
from flows.data import Dataset
from flows.results import Trajectory
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
from .multi_sample import data_task

DATA20 = {
    "FLOW": np.array([[0.8, 0.5, 0.3], [0.3, 0.9, 1.0], [0.7, 0.3, 0.7]]),
    "DIAG": np.array([[1.0, 0.3, 0.1], [0.2, 1.0, 0.4], [0.3, 0.1, 1.0]]),
}
#: horizon past every blow-up (tau* ~ alpha^(2-L): 1e4 at alpha = 0.01, L = 4) and budget
T_MAX20, MAX_NFEV20 = 1e5, 60_000
KKT_TOL20 = 1e-3
#: Ratio between the abscissae of two SAM runs drawn side by side at one alpha.
DODGE20 = 1.35
#: Smallest distance between two support labels, as a fraction of the axes' height.
LABEL_GAP20 = 0.085


def _panels(s: Setting) -> list[tuple[str, int]]:
    return [(name, depth) for name in s.datasets for depth in s.depths]


def _dataset(name: str) -> Dataset:
    X = DATA20[name]
    return Dataset(X, np.ones(len(X)))


def fig20_tasks(s: Setting) -> list[Task]:
    """Per panel: GD from every alpha, then the SAM runs."""
    tasks = []
    for name, depth in _panels(s):
        X = DATA20[name]
        y = np.ones(len(X))
        common = dict(max_nfev=MAX_NFEV20, rtol=1e-10)
        tasks += [data_task(X, y, "gd", {}, depth, a, T_MAX20, 41, **common) for a in s.alphas]
        tasks += [
            data_task(X, y, alg, {"rho": s.rho}, depth, s.sam_alpha, T_MAX20, 41, **common)
            for alg in s.sam
        ]
    return tasks


def placement(data: Dataset, depth: int, traj: Trajectory, best: float) -> tuple[float, bool]:
    """``(f(beta) / f*, at a KKT point)`` of a run's final direction (NaN if it does not
    separate the data)."""
    beta = traj.direction[-1]
    margins = data.signed_features @ beta
    if not np.all(margins > 0):
        return float("nan"), False
    ratio = quasi_norm_objective(beta / np.min(margins), depth) / best
    return float(ratio), kkt_check(data, depth, beta).kkt_residual < KKT_TOL20


def _support(direction: np.ndarray) -> str:
    return "{" + ",".join(str(j + 1) for j in np.flatnonzero(np.abs(direction) > 1e-9)) + "}"


def _levels(points, best: float) -> list[tuple[float, list[str]]]:
    """The KKT points' objective ratios, points of one objective (to 1e-9) under one label."""
    levels: list[tuple[float, list[str]]] = []
    for p in points:
        ratio = p.objective / best
        if levels and abs(levels[-1][0] - ratio) < 1e-9:
            levels[-1][1].append(_support(p.direction))
        else:
            levels.append((ratio, [_support(p.direction)]))
    return levels


def spread(positions: np.ndarray, gap: float) -> np.ndarray:
    """``positions`` (increasing) moved as little as needed to lie ``gap`` apart: pushed up
    from the lowest, then the whole set shifted down by half its excess over the originals'
    mean so that the labels stay centred on their levels."""
    out = np.array(positions, dtype=float)
    for k in range(1, out.size):
        out[k] = max(out[k], out[k - 1] + gap)
    return out - 0.5 * (out.mean() - np.mean(positions))


def _draw_levels(ax, levels: list[tuple[float, list[str]]], low: float, high: float) -> None:
    """Grey lines at the KKT points' ratios; their supports at the right edge, outside the axes,
    spread apart, each joined to its line by a thin leader."""
    ratios = np.array([r for r, _ in levels])
    order = np.argsort(ratios)
    where = (ratios[order] - low) / (high - low)
    placed = spread(where, LABEL_GAP20)
    for k, y in zip(order, placed, strict=True):
        ratio, supports = levels[k]
        ax.axhline(ratio, color="0.8", lw=0.8, zorder=0)
        level = (ratio - low) / (high - low)
        ax.plot([1.0, 1.03], [level, y], color="0.6", lw=0.5, transform=ax.transAxes, clip_on=False)
        ax.text(1.035, y, " ".join(supports), transform=ax.transAxes, va="center", color="0.35")


def _sam_x(s: Setting) -> list[float]:
    """Where the SAM runs are drawn: side by side around their alpha (factors of
    :data:`DODGE20`), so that runs ending at one point stay visible."""
    middle = (len(s.sam) - 1) / 2
    return [s.sam_alpha * DODGE20 ** (k - middle) for k in range(len(s.sam))]


def _draw_panel(ax, runs: list[Result], name: str, depth: int, s: Setting) -> bool:
    """One data set at one depth: GD's ratio against alpha, the SAM runs at their alpha, the
    KKT levels; whether a run ended early (marked)."""
    data = _dataset(name)
    points = kkt_points(data, depth)
    best = points[0].objective
    levels = _levels(points, best)
    trajs = [Trajectory.from_arrays(r) for r in runs]
    gd = [placement(data, depth, t, best) for t in trajs[: len(s.alphas)]]
    gd_style = style.algorithm_style("gd")
    ax.plot(s.alphas, [g[0] for g in gd], color=gd_style["color"], lw=0.8, zorder=1)
    for a, (ratio, kkt) in zip(s.alphas, gd, strict=True):
        ax.plot(a, ratio, ls="", marker="o", ms=5, color=gd_style["color"],
                mfc=gd_style["color"] if kkt else "white", zorder=2)  # fmt: skip
    for alg, traj, x in zip(s.sam, trajs[len(s.alphas) :], _sam_x(s), strict=True):
        ratio, kkt = placement(data, depth, traj, best)
        kwargs = style.algorithm_style(alg)
        ax.plot(x, ratio, ls="", marker=kwargs["marker"], ms=6, color=kwargs["color"],
                mfc=kwargs["color"] if kkt else "white", zorder=3)  # fmt: skip
    stopped = False
    what = [f"GD from alpha = {a:g}" for a in s.alphas] + [
        f"{a} from alpha = {s.sam_alpha:g}" for a in s.sam
    ]
    xs = list(s.alphas) + _sam_x(s)
    ys = [g[0] for g in gd] + [placement(data, depth, t, best)[0] for t in trajs[len(s.alphas) :]]
    for run, label, x, y in zip(runs, what, xs, ys, strict=True):
        if stopped_early(run, f"{name}, L = {depth}: {label}", s):
            ax.plot(x, y, **STOPPED_MARK)
            stopped = True
    top = max(r for r, _ in levels)
    finite = [y for y in ys if np.isfinite(y)]
    top = max([top, *finite])
    low, high = 1.0 - 0.06 * (top - 1.0), 1.0 + 1.06 * (top - 1.0)
    ax.set_ylim(low, high)
    _draw_levels(ax, levels, low, high)
    ax.set(xscale="log", xlim=(min(xs) / 1.5, max(xs) * 1.5),
           title=f"{name}, L = {depth}: {len(points)} KKT points")  # fmt: skip
    return stopped


def _legend(fig, s: Setting, stopped: bool) -> None:
    """One legend below the panels: the algorithms' markers, filled and hollow, ×."""
    gd = style.algorithm_style("gd")
    handles = [
        Line2D([], [], ls="", marker="o", ms=5, color=gd["color"]),
        Line2D([], [], ls="", marker="o", ms=5, color=gd["color"], mfc="white"),
    ]
    labels = [style.label("gd"), "hollow: not at a KKT point"]
    for alg in s.sam:
        kwargs = style.algorithm_style(alg)
        handles.append(Line2D([], [], ls="", marker=kwargs["marker"], ms=6, color=kwargs["color"]))
        labels.append(f"{style.label(alg)}, ρ = {s.rho:g}, α = {s.sam_alpha:g}")
    if stopped:
        handles.append(stopped_handle())
        labels.append("× run ended early")
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels))


def draw_fig20(results: list[Result], s: Setting, path: Path) -> None:
    """One panel per data set (rows) and depth (columns): the objective ratio of each run's
    final direction against alpha, over the KKT points' ratios (grey, labelled by support)."""
    rows, cols = len(s.datasets), len(s.depths)
    fig, axes = plt.subplots(
        rows, cols, figsize=(style.DOUBLE, 0.6 + 2.0 * rows), constrained_layout=True, squeeze=False
    )
    per_panel = len(s.alphas) + len(s.sam)
    stopped = False
    for k, (ax, (name, depth)) in enumerate(zip(axes.ravel(), _panels(s), strict=True)):
        runs = results[k * per_panel : (k + 1) * per_panel]
        stopped |= _draw_panel(ax, runs, name, depth, s)
    for ax in axes[-1]:
        ax.set_xlabel("initialisation α")
    for ax in axes[:, 0]:
        ax.set_ylabel(r"$\sum_j |\beta_j|^{2/L}$ / global min.")
    _legend(fig, s, stopped)
    style.panel_letters(axes)
    save(fig, path)


def check(s: Setting) -> str | None:
    """Known data sets, depths of at least 3."""
    unknown = [n for n in s.datasets if n not in DATA20]
    if unknown:
        return f"unknown data sets {unknown}; known: {list(DATA20)}"
    if min(s.depths) < 3:
        return f"depths must be at least 3 (the program is l1 at L = 2), got {s.depths}"
    return None


DEPTH_KKT = Figure(
    "fig20_depth_kkt",
    "The l_{2/L} objective at the final direction of GD (over alpha), l2-SAM and l_inf-SAM "
    "flows at L = {depths}, against the program's KKT points",
    "Three positive examples in d = 3 (data sets {datasets}), depths L = {depths}: the objective "
    "Σ|β_j|^(2/L) of the ℓ_(2/L) max-margin program at the final direction of each run, scaled "
    "to margin 1 and relative to the global minimum (1 = the global KKT point), for GD flows "
    "(to their blow-up, rescaled clock) from α = {alphas} and SAM flows (ρ = {rho}) from "
    "α = {sam_alpha} (drawn side by side around it); grey lines: the certified KKT points, labelled by their support; hollow "
    "markers: a final direction whose KKT residual is above 1e-3. Which KKT point of the "
    "depth-L max-margin program does GD reach as α varies, and where do the SAM flows end "
    "against it?",
    fig20_tasks,
    draw_fig20,
    params={
        "datasets": ("FLOW", "DIAG"),
        "depths": (3, 4),
        "alphas": (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0),
        "sam": ("l2-sam", "linf-sam"),
        "rho": 0.1,
        "sam_alpha": 0.2,
    },
    quick={"alphas": (0.03, 0.3, 3.0)},
    example={"depths": (3,), "rho": 0.15, "sam_alpha": 0.25},
    check=check,
)


if __name__ == "__main__":
    figure_command(__spec__.name, DEPTH_KKT)
