"""Figure 20 (``fig20_depth_kkt``): which l_{2/L} KKT point the flows reach at depth 3 and 4.

At depth L GD's limit direction is a KKT point of ``min sum_j |beta_j|^(2/L)`` s.t.
``y_i <beta, x_i> >= 1``, a non-convex program for L >= 3 with several KKT points
(:func:`analysis.maxmargin.kkt_points`). Two data sets of three positive examples in d = 3
whose l1 max-margin is not 1-sparse (FLOW, DIAG) at L = 3 and 4; rescaled GD flows to their
blow-up from balanced alpha between 1e-2 and 10, and l2-SAM and l_inf-SAM (rho = 0.1) from
alpha = 0.2. Each run is placed by the program's objective at its final direction, relative to
the global minimum (1 = the global point), against the certified KKT points (grey lines,
labelled by support); a filled marker is a direction whose KKT residual
(:func:`analysis.margin_programs.quasi_norm.kkt_check`) is below ``KKT_TOL20``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.margin_programs.quasi_norm import kkt_check, quasi_norm_objective
from analysis.maxmargin import kkt_points
from flows.data import Dataset
from flows.results import Trajectory
from flows.sweep.registry import Result, Task

from .common import OKABE_ITO, Figure, Setting, figure_command, plt, save
from .multi_sample import data_task

DATA20 = {
    "FLOW": np.array([[0.8, 0.5, 0.3], [0.3, 0.9, 1.0], [0.7, 0.3, 0.7]]),
    "DIAG": np.array([[1.0, 0.3, 0.1], [0.2, 1.0, 0.4], [0.3, 0.1, 1.0]]),
}
DEPTHS20 = (3, 4)
ALPHAS20 = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
SAM_ALPHA20, RHO20 = 0.2, 0.1
#: (algorithm, hyper-parameters, label, marker) of the SAM runs
SAM20 = (("l2-sam", {"rho": RHO20}, "ℓ2-SAM", "s"), ("linf-sam", {"rho": RHO20}, "ℓ∞-SAM", "^"))
#: horizon past every blow-up (tau* ~ alpha^(2-L): 1e4 at alpha = 0.01, L = 4) and budget
T_MAX20, MAX_NFEV20 = 1e5, 60_000
KKT_TOL20 = 1e-3


def _panels() -> list[tuple[str, int]]:
    return [(name, depth) for name in DATA20 for depth in DEPTHS20]


def _dataset(name: str) -> Dataset:
    X = DATA20[name]
    return Dataset(X, np.ones(len(X)))


def _alphas(quick: bool) -> tuple[float, ...]:
    return ALPHAS20[1::2] if quick else ALPHAS20


def fig20_tasks(s: Setting) -> list[Task]:
    """Per panel: GD from every alpha, then the SAM runs."""
    tasks = []
    for name, depth in _panels():
        X = DATA20[name]
        y = np.ones(len(X))
        common = dict(max_nfev=MAX_NFEV20, rtol=1e-10)
        tasks += [
            data_task(X, y, "gd", {}, depth, a, T_MAX20, 41, **common) for a in _alphas(s.quick)
        ]
        tasks += [
            data_task(X, y, alg, hp, depth, SAM_ALPHA20, T_MAX20, 41, **common)
            for alg, hp, _, _ in SAM20
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


def draw_fig20(results: list[Result], s: Setting, path: Path) -> None:
    """One panel per data set and depth: objective ratio against alpha."""
    alphas = _alphas(s.quick)
    per_panel = len(alphas) + len(SAM20)
    fig, axes = plt.subplots(2, 2, figsize=(12.5, 9), constrained_layout=True)
    for k, (ax, (name, depth)) in enumerate(zip(axes.ravel(), _panels(), strict=True)):
        data = _dataset(name)
        points = kkt_points(data, depth)
        best = points[0].objective
        for ratio, supports in _levels(points, best):
            ax.axhline(ratio, color="0.75", lw=1, zorder=0)
            ax.text(11.5, ratio, " " + " ".join(supports), va="center", fontsize=7, color="0.4")
        runs = [Trajectory.from_arrays(r) for r in results[k * per_panel : (k + 1) * per_panel]]
        gd = [placement(data, depth, t, best) for t in runs[: len(alphas)]]
        ax.plot(alphas, [g[0] for g in gd], color=OKABE_ITO[5], lw=1, zorder=1)
        for a, (ratio, kkt), traj in zip(alphas, gd, runs[: len(alphas)], strict=True):
            ax.plot(a, ratio, "o", ms=8, color=OKABE_ITO[5], mfc=OKABE_ITO[5] if kkt else "white",
                    zorder=2)  # fmt: skip
            if traj.status != 1:
                ax.annotate(f"status {traj.status}", (a, ratio), xytext=(3, 6),
                            textcoords="offset points", fontsize=7)  # fmt: skip
        for (_, _, label, marker), traj, color in zip(
            SAM20, runs[len(alphas) :], (OKABE_ITO[1], OKABE_ITO[2]), strict=True
        ):
            ratio, kkt = placement(data, depth, traj, best)
            ax.plot(SAM_ALPHA20, ratio, marker, ms=9, color=color, mfc=color if kkt else "white",
                    zorder=3, label=f"{label} ρ = {RHO20:g} (status {traj.status})")  # fmt: skip
        ax.plot([], [], "o", color=OKABE_ITO[5], label="GD (hollow: not at a KKT point)")
        ax.set(xscale="log", xlim=(alphas[0] / 1.5, 40), xlabel="initialisation α",
               ylabel="Σ|β_j|^(2/L) at margin 1, relative to the global minimum",
               title=f"{name}, L = {depth}: {len(points)} KKT points (grey, by support)")  # fmt: skip
        top = max(ratio for ratio, _ in _levels(points, best))
        ax.set_ylim(1.0 - 0.04 * (top - 1.0), 1.0 + 1.45 * (top - 1.0))  # room for the legend
        ax.legend(fontsize=7.5, loc="upper right", framealpha=0.9)
    fig.suptitle(
        "Depth-L limits against the ℓ_{2/L} max-margin program: which KKT point each flow reaches"
        + (" (quick)" if s.quick else ""),
        fontsize=11,
    )
    save(fig, path)


DEPTH_KKT = Figure(
    "fig20_depth_kkt",
    "The l_{2/L} objective at the final direction of GD (over alpha), l2-SAM and l_inf-SAM "
    "flows at L = 3, 4, against the program's KKT points",
    "Which KKT point of the depth-L max-margin program does GD reach as alpha varies, and where "
    "do the SAM flows end against it?",
    fig20_tasks,
    draw_fig20,
)


if __name__ == "__main__":
    figure_command(__spec__.name, DEPTH_KKT)
