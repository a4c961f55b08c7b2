"""Figure 19 (``fig19_saddles``): saddle-to-saddle at vanishing initialisation.

Regression on ``beta = u * v`` from ``u = alpha``, ``v = 0`` (n = 3, d = 5, ``default_rng(1091)``:
a staircase of four jumps in which coordinate 4 enters and leaves again). As alpha -> 0 the GD
flow in the accelerated time ``t / log(1/alpha)`` tends to the piecewise-constant path of
:func:`analysis.saddle_to_saddle.saddles`. Every flow runs by ``simulate``, which below
alpha = 1e-5 integrates GD and the SAM flows whose perturbation is a multiple of the gradient
in the coordinates that carry ``u_j^2 - v_j^2`` exactly (:mod:`flows.conserved`), so
coordinate 4 can shrink back at any alpha, down to 1e-300. Panels: the loss of GD flows for
alpha from 1e-2 to 1e-300 against the limit's; the coordinates at alpha = 1e-100 on the limit's
steps; the jump-time error against log(1/alpha); SAM flows from alpha = 1e-30 (USAM also from
1e-100 and 1e-300) against GD's staircase.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.saddle_to_saddle import limit_path, saddles
from flows.data import Dataset
from flows.results import Trajectory
from flows.sweep.registry import Result, Task

from .common import OKABE_ITO, Figure, Setting, coordinate_colors, figure_command, plt, save

SEED19, SHAPE19 = 1091, (3, 5)
ALPHAS19 = (1e-2, 1e-4, 1e-8, 1e-30, 1e-100, 1e-300)
COORDINATES_AT19 = 1e-100
#: Lower end of the loss axes (the limit's last plateau is an interpolator, loss ~1e-32).
LOSS_FLOOR19 = 1e-16
SAM_ALPHA19 = 1e-30
#: SAM flows: algorithm, hyper-parameters, alpha, label. l2-SAM collapses at once where
#: rho > 1.668 alpha on these data (at every alpha), and follows GD's saddles below.
SAM19 = (
    ("usam", {"rho": 0.5}, 1e-30, "USAM ρ = 0.5"),
    ("usam", {"rho": 0.5}, 1e-100, "USAM ρ = 0.5, α = 1e-100"),
    ("usam", {"rho": 0.5}, 1e-300, "USAM ρ = 0.5, α = 1e-300"),
    ("usam", {"rho": 2.0}, 1e-30, "USAM ρ = 2"),
    ("1-usam", {"rho": 0.5}, 1e-30, "1-USAM ρ = 0.5"),
    ("l2-sam", {"rho": 0.05}, 1e-30, "ℓ2-SAM ρ = 0.05"),
    ("l2-sam", {"rho": 0.5e-30}, 1e-30, "ℓ2-SAM ρ = α/2"),
)


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


def _alphas(quick: bool) -> tuple[float, ...]:
    return ALPHAS19[::2] + (ALPHAS19[-1],) if quick else ALPHAS19


def fig19_tasks(s: Setting) -> list[Task]:
    """GD from every alpha, then the SAM flows."""
    points = 201 if s.quick else 801
    return [_task("gd", {}, a, points) for a in _alphas(s.quick)] + [
        _task(name, hp, alpha, points) for name, hp, alpha, _ in SAM19
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


def draw_fig19(results: list[Result], s: Setting, path: Path) -> None:
    """Loss staircases, coordinates, jump-time error and SAM."""
    data = staircase_data()
    limit = saddles(data)
    alphas = _alphas(s.quick)
    runs = [Trajectory.from_arrays(r) for r in results]
    gd, sam = runs[: len(alphas)], runs[len(alphas) :]
    fine = np.linspace(0.0, _horizon(), 2001)
    limit_loss = 0.5 * np.mean((limit_path(limit, fine) @ data.X.T - data.y) ** 2, axis=1)
    fig, axes = plt.subplots(2, 2, figsize=(13, 9.5), constrained_layout=True)
    shades = plt.get_cmap("plasma")(np.linspace(0.0, 0.85, len(alphas)))

    ax = axes[0, 0]
    for traj, alpha, shade in zip(gd, alphas, shades, strict=True):
        ax.plot(
            traj.t / np.log(1 / alpha), traj.loss, color=shade, lw=1.4, label=f"α = {alpha:.0e}"
        )
    ax.plot(fine, limit_loss, color="k", lw=2.5, ls="--", label="α → 0 limit (saddles)")
    ax.set(yscale="log", xlabel="accelerated time t / log(1/α)", ylabel="training loss",
           title="(a) GD flows: the loss drops saddle to saddle", ylim=(LOSS_FLOOR19, 2.0))  # fmt: skip
    ax.text(0.02, 0.03, "α ≤ 1e-8: ψ and log|u² − v²| (flows.conserved); the last plateau's loss "
            "is the rtol 1e-10 on ψ ≈ log(1/α)", transform=ax.transAxes, fontsize=7)  # fmt: skip
    ax.legend(fontsize=8)

    ax = axes[0, 1]
    traj = gd[alphas.index(COORDINATES_AT19)] if COORDINATES_AT19 in alphas else gd[-1]
    alpha = COORDINATES_AT19 if COORDINATES_AT19 in alphas else alphas[-1]
    colors = coordinate_colors(data.d)
    steps = limit_path(limit, fine)
    for j in range(data.d):
        ax.plot(traj.t / np.log(1 / alpha), traj.beta[:, j], color=colors[j], lw=1.5,
                label=f"β_{j + 1}")  # fmt: skip
        ax.plot(fine, steps[:, j], color=colors[j], lw=3, alpha=0.35)
    ax.set(xlabel="accelerated time t / log(1/α)", ylabel="β_j",
           title=f"(b) α = {alpha:.0e}: coordinates (thin) on the limit's steps (thick)")  # fmt: skip
    ax.legend(fontsize=8, ncol=2)

    ax = axes[1, 0]
    logs = np.log(1 / np.array(alphas))
    errors = [np.nanmax(np.abs(jump_times(t, a, limit.losses) - limit.times)) for t, a in
              zip(gd, alphas, strict=True)]  # fmt: skip
    ax.plot(logs, errors, "o-", color=OKABE_ITO[5], label="largest jump-time error")
    ax.plot(logs, errors[-1] * logs[-1] / logs, color="0.6", ls="--", label="∝ 1 / log(1/α)")
    ax.set(xscale="log", yscale="log", xlabel="log(1/α)", ylabel="|t̃_jump(flow) − t̃_jump(limit)|",
           title="(c) the flows approach the limit like 1 / log(1/α)")  # fmt: skip
    ax.legend(fontsize=8)

    ax = axes[1, 1]
    gd_here = gd[alphas.index(SAM_ALPHA19)] if SAM_ALPHA19 in alphas else gd[0]
    scale = np.log(1 / SAM_ALPHA19)
    ax.plot(fine, limit_loss, color="k", lw=2.5, ls="--", label="GD's limit (saddles)")
    ax.plot(gd_here.t / scale, gd_here.loss, color="k", lw=1, label=f"GD, α = {SAM_ALPHA19:.0e}")
    styles = {1e-30: "-", 1e-100: "--", 1e-300: ":"}
    colors = {"USAM ρ = 0.5": OKABE_ITO[1]}
    others = iter(OKABE_ITO[2:])
    for (_, _, alpha, label), traj in zip(SAM19, sam, strict=True):
        key = label.split(",")[0]
        if key not in colors:
            colors[key] = next(others)
        color = colors[key]
        ax.plot(traj.t / np.log(1 / alpha), traj.loss, color=color, lw=1.4, ls=styles[alpha],
                label=f"{label} ({traj.cause.value})")  # fmt: skip
    ax.set(yscale="log", xlabel="accelerated time t / log(1/α)", ylabel="training loss",
           title=f"(d) SAM flows from α = {SAM_ALPHA19:.0e} (USAM also 1e-100, 1e-300)",
           ylim=(LOSS_FLOOR19, 2.0))  # fmt: skip
    ax.legend(fontsize=8)
    for a in axes.ravel():
        a.grid(alpha=0.3, which="both")
    fig.suptitle(
        "Saddle-to-saddle dynamics at vanishing initialisation (β = u ⊙ v, u = α, v = 0; "
        "n = 3, d = 5)" + ("  [QUICK]" if s.quick else ""),
        fontsize=11,
    )
    save(fig, path)


SADDLES = Figure(
    "fig19_saddles",
    "Loss and coordinates of GD flows from alpha = 1e-2 to 1e-300 in accelerated time against "
    "the saddle-to-saddle limit, the jump-time error, and SAM flows",
    "Do GD flows at vanishing initialisation follow the saddle-to-saddle limit, how fast do they "
    "approach it, and do SAM flows follow the same saddles?",
    fig19_tasks,
    draw_fig19,
)


if __name__ == "__main__":
    figure_command(__spec__.name, SADDLES)
