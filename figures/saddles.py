"""Figure 19 (``fig19_saddles``): saddle-to-saddle at vanishing initialisation.

Regression on ``beta = u * v`` from ``u = alpha``, ``v = 0`` (n = 3, d = 5, ``default_rng(1091)``:
a staircase of four jumps in which coordinate 4 enters and leaves again). As alpha -> 0 the GD
flow in the accelerated time ``t / log(1/alpha)`` tends to the piecewise-constant path of
:func:`analysis.saddle_to_saddle.saddles`. Every flow runs by ``simulate``, which below
alpha = 1e-5 integrates GD and the SAM flows whose perturbation is a multiple of the gradient
in the coordinates that carry ``u_j^2 - v_j^2`` exactly (:mod:`flows.conserved`), so
coordinate 4 can shrink back at any alpha, down to 1e-300. Two figures:
``fig19_saddles``, (a) the loss of GD flows for alpha from 1e-2 to 1e-300 against the limit's,
(b) the coordinates at alpha = 1e-100 on the limit's steps, (c) the jump-time error against
log(1/alpha); ``fig19_saddles_sam``, (a) USAM from alpha = 1e-30, 1e-100, 1e-300 and (b) the
other SAM flows from alpha = 1e-30 against GD's staircase.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.saddle_to_saddle import limit_path, saddles
from flows.data import Dataset
from flows.results import Trajectory
from flows.sweep.registry import Result, Task

from . import style
from .common import STOPPED_MARK, Figure, Setting, coordinate_colors, figure_command, plt, save
from .common import stopped_early as ended_early

SEED19, SHAPE19 = 1091, (3, 5)
#: Lower end of the loss axes (the limit's last plateau is an interpolator, loss ~1e-32).
LOSS_FLOOR19 = 1e-16
#: How the alpha -> 0 limit is drawn.
LIMIT19 = {"color": "0.7", "lw": 3.0, "zorder": 0}


def staircase_data() -> Dataset:
    """The figure's regression problem."""
    rng = np.random.default_rng(SEED19)
    return Dataset(rng.standard_normal(SHAPE19), rng.standard_normal(SHAPE19[0]), task="regression")


def _horizon() -> float:
    """One unit of accelerated time past the last jump."""
    return float(saddles(staircase_data()).times[-1]) + 1.0


def _task(algorithm: str, hp: dict, alpha: float, n_points: int) -> Task:
    """A ``simulate`` run from ``u = alpha``, ``v = 0`` up to one unit of accelerated time past
    the limit's last jump."""
    data = staircase_data()
    d = data.d
    return Task(
        "simulate",
        {
            "X": data.X.tolist(),
            "y": data.y.tolist(),
            "task": "regression",
            "algorithm": algorithm,
            "depth": 2,
            "alpha": [[alpha] * d, [0.0] * d],
            "t_max": _horizon() * np.log(1 / alpha),
            "n_points": n_points,
            **hp,
        },
    )


def _points(s: Setting) -> int:
    return 201 if s.quick else 801


def fig19_tasks(s: Setting) -> list[Task]:
    """GD from every alpha."""
    return [_task("gd", {}, a, _points(s)) for a in s.alphas]


def _sam_runs(s: Setting) -> list[tuple[str, float, float]]:
    """``(algorithm, rho, alpha)`` of the SAM flows: USAM at ``usam_rho`` from every
    ``usam_alphas``, then from ``sam_alpha``: USAM at ``usam_rho_large``, 1-USAM at
    ``one_usam_rho``, l2-SAM at ``l2_rho`` and at ``l2_ratio`` times alpha."""
    a = s.sam_alpha
    return [("usam", s.usam_rho, alpha) for alpha in s.usam_alphas] + [
        ("usam", s.usam_rho_large, a),
        ("1-usam", s.one_usam_rho, a),
        ("l2-sam", s.l2_rho, a),
        ("l2-sam", s.l2_ratio * a, a),
    ]


def sam_tasks(s: Setting) -> list[Task]:
    """GD from ``sam_alpha``, then the SAM flows."""
    return [_task("gd", {}, s.sam_alpha, _points(s))] + [
        _task(alg, {"rho": rho}, alpha, _points(s)) for alg, rho, alpha in _sam_runs(s)
    ]


def jump_times(traj: Trajectory, alpha: float, losses: np.ndarray) -> np.ndarray:
    """Accelerated times where the flow's loss first falls below the midpoint of two
    consecutive plateau losses of the limit, interpolated between samples (NaN where it does
    not fall so low)."""
    t = traj.t / np.log(1 / alpha)
    out = []
    for before, after in zip(losses[:-1], losses[1:], strict=True):
        level = 0.5 * (before + after)
        below = np.flatnonzero(traj.loss < level)
        if not below.size or below[0] == 0:
            out.append(np.nan if not below.size else t[0])
            continue
        k = below[0]
        a, b = traj.loss[k - 1], traj.loss[k]
        out.append(t[k - 1] + (t[k] - t[k - 1]) * (a - level) / (a - b))
    return np.array(out)


def _limit(fine: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The alpha -> 0 limit's path and loss on ``fine`` (accelerated time)."""
    data = staircase_data()
    path = limit_path(saddles(data), fine)
    return path, 0.5 * np.mean((path @ data.X.T - data.y) ** 2, axis=1)


def _trajectories(
    results: list[Result], what: list[str], s: Setting
) -> list[tuple[Trajectory, bool]]:
    """Each run with whether it ended early (warned on stderr)."""
    return [
        (Trajectory.from_arrays(r), ended_early(r, w, s))
        for r, w in zip(results, what, strict=True)
    ]


def _mark_end(ax, x: np.ndarray, y: np.ndarray) -> None:
    """× at the last point of a curve that ended early."""
    ax.plot(x[-1], y[-1], **STOPPED_MARK)


def _loss_axes(ax, title: str) -> None:
    ax.set(yscale="log", xlabel="accelerated time t / log(1/α)", ylabel="training loss",
           ylim=(LOSS_FLOOR19, 2.0), title=title)  # fmt: skip


def draw_fig19(results: list[Result], s: Setting, path: Path) -> None:
    """(a) GD's loss staircases from every alpha over the limit's; (b) the coordinates from
    ``shown_alpha`` over the limit's steps; (c) the largest jump-time error against log(1/alpha)."""
    data = staircase_data()
    limit = saddles(data)
    alphas = s.alphas
    runs = _trajectories(results, [f"GD from alpha = {a:g}" for a in alphas], s)
    fine = np.linspace(0.0, _horizon(), 2001)
    steps, limit_loss = _limit(fine)
    fig = plt.figure(figsize=(style.DOUBLE, 4.8), constrained_layout=True)
    grid = fig.add_gridspec(2, 2)
    ax, bx, cx = (
        fig.add_subplot(grid[0, :]),
        fig.add_subplot(grid[1, 0]),
        fig.add_subplot(grid[1, 1]),
    )
    shades = plt.get_cmap("plasma")(np.linspace(0.0, 0.85, len(alphas)))
    ax.plot(fine, limit_loss, label="α → 0 limit", **LIMIT19)
    stopped = False
    for (traj, early), alpha, shade in zip(runs, alphas, shades, strict=True):
        ax.plot(traj.t / np.log(1 / alpha), traj.loss, color=shade, lw=1.0, label=f"α = {alpha:g}")
        if early:
            _mark_end(ax, traj.t / np.log(1 / alpha), traj.loss)
            stopped = True
    if stopped:
        ax.plot([], [], **{**STOPPED_MARK, "label": "× ended early"})
    _loss_axes(ax, "GD flows: the loss drops saddle to saddle")
    ax.legend(loc="lower left", ncol=2)

    k = alphas.index(s.shown_alpha) if s.shown_alpha in alphas else len(alphas) - 1
    traj, alpha = runs[k][0], alphas[k]
    for j, color in enumerate(coordinate_colors(data.d)):
        bx.plot(fine, steps[:, j], color=color, lw=3.0, alpha=0.35)
        bx.plot(traj.t / np.log(1 / alpha), traj.beta[:, j], color=color, lw=1.0,
                label=f"$\\beta_{{{j + 1}}}$")  # fmt: skip
    bx.set(xlabel="accelerated time t / log(1/α)", ylabel=r"$\beta_j$",
           title=f"α = {alpha:g} (thin) on the limit's steps (wide)")  # fmt: skip
    bx.legend(loc="lower right", ncol=2)

    logs = np.log(1 / np.array(alphas))
    errors = [np.nanmax(np.abs(jump_times(t, a, limit.losses) - limit.times)) for (t, _), a in
              zip(runs, alphas, strict=True)]  # fmt: skip
    cx.plot(logs, errors, **{**style.algorithm_style("gd"), "label": "GD: largest jump-time error"})
    cx.plot(logs, errors[-1] * logs[-1] / logs, color=style.GREY, ls=":", label="∝ 1 / log(1/α)")
    cx.set(xscale="log", yscale="log", xlabel="log(1/α)", ylabel="jump-time error",
           title="the flows approach the limit")  # fmt: skip
    cx.legend(loc="lower left")
    for a in (ax, bx, cx):
        a.grid(alpha=0.3, which="major")
    style.panel_letters((ax, bx, cx))
    save(fig, path)


def draw_sam(results: list[Result], s: Setting, path: Path) -> None:
    """(a) USAM at ``usam_rho`` from every ``usam_alphas`` (lighter for smaller alpha) and (b)
    the other SAM flows from ``sam_alpha``, with GD from ``sam_alpha``, over GD's limit (grey)."""
    fine = np.linspace(0.0, _horizon(), 2001)
    _, limit_loss = _limit(fine)
    sam = _sam_runs(s)
    what = [f"GD from alpha = {s.sam_alpha:g}"] + [
        f"{a} rho = {r:g} from alpha = {al:g}" for a, r, al in sam
    ]
    runs = _trajectories(results, what, s)
    fig, (ax, bx) = plt.subplots(
        1, 2, figsize=(style.DOUBLE, 2.9), constrained_layout=True, sharey=True
    )
    for x in (ax, bx):
        x.plot(fine, limit_loss, label="GD's α → 0 limit", **LIMIT19)
    n = len(s.usam_alphas)
    stopped = False
    usam = style.algorithm_style("usam")
    for k, ((traj, early), (_, _, alpha)) in enumerate(zip(runs[1 : 1 + n], sam[:n], strict=True)):
        x = traj.t / np.log(1 / alpha)
        ax.plot(
            x,
            traj.loss,
            color=style.shade(str(usam["color"]), k, n),
            lw=1.0,
            label=f"α = {alpha:g}",
        )
        if early:
            _mark_end(ax, x, traj.loss)
            stopped = True
    _loss_axes(ax, f"{style.label('usam')}, ρ = {s.usam_rho:g}")
    ax.legend(loc="lower left")
    scale = np.log(1 / s.sam_alpha)
    gd, gd_early = runs[0]
    bx.plot(gd.t / scale, gd.loss, **{**style.algorithm_style("gd"), "marker": "", "lw": 1.0})
    rhos = [f"ρ = {s.usam_rho_large:g}", f"ρ = {s.one_usam_rho:g}", f"ρ = {s.l2_rho:g}",
            f"ρ = {s.l2_ratio:g}α"]  # fmt: skip
    for (traj, early), (alg, _, _), rho, width in zip(
        runs[1 + n :], sam[n:], rhos, (4.0, 1.0, 1.8, 1.0), strict=True
    ):
        kwargs = {
            **style.algorithm_style(alg),
            "marker": "",
            "lw": width,
            "label": f"{style.label(alg)}, {rho}",
        }
        bx.plot(traj.t / scale, traj.loss, **kwargs)
        stopped |= early
        if early:
            _mark_end(bx, traj.t / scale, traj.loss)
    if gd_early:
        _mark_end(bx, gd.t / scale, gd.loss)
    _annotate_stuck(bx, runs[1 + n][0].loss[0], s)
    if stopped or gd_early:
        bx.plot([], [], **{**STOPPED_MARK, "label": "× ended early"})
    _loss_axes(bx, f"from α = {s.sam_alpha:g}")
    bx.set_ylabel("")
    bx.legend(loc="lower left")
    for x in (ax, bx):
        x.grid(alpha=0.3, which="major")
    style.panel_letters((ax, bx))
    save(fig, path)


def _annotate_stuck(ax, loss: float, s: Setting) -> None:
    """Name the two flows whose beta stays at 0 (their lines lie on each other at ``loss``)."""
    ax.annotate(
        f"β stays 0: {style.label('usam')}, ρ = {s.usam_rho_large:g}\n"
        f"and {style.label('l2-sam')}, ρ = {s.l2_rho:g}",
        xy=(2.8, loss),
        xytext=(2.8, 1e-5),
        ha="center",
        va="center",
        arrowprops={"arrowstyle": "->", "color": "0.3", "lw": 0.7},
    )


SADDLES = Figure(
    "fig19_saddles",
    "Loss and coordinates of GD flows from alpha = {alphas} in accelerated time against "
    "the saddle-to-saddle limit, and the jump-time error",
    "β = u ⊙ v on regression data (n = 3, d = 5), GD flows from u = α, v = 0 for α = {alphas}, "
    "in the accelerated time t / log(1/α), against the piecewise-constant α → 0 limit of "
    "Pesme & Flammarion (grey): (a) the training loss; (b) the coordinates from "
    "α = {shown_alpha} over the limit's steps; (c) the largest distance between the flow's and "
    "the limit's jump times (loss at the plateau midpoints), dotted ∝ 1/log(1/α). Below "
    "α = 1e-5 the flows are integrated in the conserved chart (ψ and log|u² − v²|); the "
    "last plateau's loss is then set by the tolerance on ψ ≈ log(1/α). Do GD flows at "
    "vanishing initialisation follow the saddle-to-saddle limit, and how fast do they approach "
    "it?",
    fig19_tasks,
    draw_fig19,
    params={"alphas": (1e-2, 1e-4, 1e-8, 1e-30, 1e-100, 1e-300), "shown_alpha": 1e-100},
    quick={"alphas": (1e-2, 1e-8, 1e-100, 1e-300)},
    example={"alphas": (1e-3, 1e-6, 1e-20), "shown_alpha": 1e-20},
)

SADDLES_SAM = Figure(
    "fig19_saddles_sam",
    "SAM flows at vanishing initialisation against GD's saddle-to-saddle limit",
    "The data of figure 19, SAM flows from u = α, v = 0 in accelerated time, over GD's α → 0 "
    "limit (grey): (a) USAM at ρ = {usam_rho} from α = {usam_alphas}; (b) from "
    "α = {sam_alpha}: GD, USAM at ρ = {usam_rho_large}, 1-USAM at ρ = {one_usam_rho}, "
    "ℓ2-SAM at ρ = {l2_rho} and at ρ = {l2_ratio}α (β stays at 0 for USAM where every "
    "ρ|g_j| > 1 and for ℓ2-SAM where ρ > 1.668α: the arrow). Do SAM flows at vanishing "
    "initialisation follow GD's saddles?",
    sam_tasks,
    draw_sam,
    params={
        "usam_rho": 0.5,
        "usam_alphas": (1e-30, 1e-100, 1e-300),
        "sam_alpha": 1e-30,
        "usam_rho_large": 2.0,
        "one_usam_rho": 0.5,
        "l2_rho": 0.05,
        "l2_ratio": 0.5,
    },
    example={"usam_rho": 0.4, "usam_alphas": (1e-20, 1e-40), "sam_alpha": 1e-20, "l2_ratio": 0.4},
)


if __name__ == "__main__":
    figure_command(__spec__.name, SADDLES, SADDLES_SAM)
