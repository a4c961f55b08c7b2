"""Figure 6 (``fig6_maxmargin_angles``): how fast the direction of beta approaches the
max-margin directions on generic separable data.

Seeded separable data (n = 12, d = 3, random teacher with a margin): the angle between
``beta(tau)/|beta|`` and the l2 (top row) and l1 (bottom row) max-margin directions against
the rescaled time, one column per depth, GD / l2-SAM / l_inf-SAM (:mod:`figures.multi_sample`);
a dotted line gives the angle between the two references, the end of each run its marker.

Clock: the rescaled one (docs/theory.md §3); for n > 1 the engine divides by
``c = (1/n) sum_i |l'(m_i(theta + eps))|``.
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
    stopped_early,
    stopped_handle,
)
from .compared import ALGORITHMS, check_algorithms, line_style
from .directions import angles_deg, references
from .multi_sample import multi_sample_tasks

#: The rows: the reference each angle is measured to, by p, with its name.
ROWS = ((2, r"$\ell_2$"), (1, r"$\ell_1$"))


def teacher_data() -> tuple[np.ndarray, np.ndarray]:
    """Figure 6's data, :func:`flows.datasets.teacher_data` (n = 12, d = 3, seed 90: a 30 deg
    angle between the l1 and l2 max-margin directions), as arrays."""
    data = datasets.teacher_data()
    return np.array(data.X), np.array(data.y)


def fig6_tasks(s: Setting) -> list[Task]:
    """The algorithms at each depth on :func:`teacher_data` (depth-major)."""
    X, y = teacher_data()
    horizons = {s.quick: dict(zip(s.depths, zip(s.t_max, s.n_points, strict=True), strict=True))}
    return multi_sample_tasks(X, y, s.depths, s.alpha, s.rho, horizons, s.quick, s.algorithms)


def end_mark(algorithm: str) -> dict[str, object]:
    """How the last point of an algorithm's run is marked: its marker, edged in black."""
    own = style.ALGORITHM_STYLES[algorithm]
    return {"marker": own.marker, "color": own.color, "mec": "black", "mew": 0.5, "ls": ""}


def draw_fig6(results: list[Result], s: Setting, path: Path) -> None:
    """Angle to the l2 (top) and l1 (bottom) max-margin directions against tau, log-log, one
    column per depth."""
    X, y = teacher_data()
    refs = references(X, y)
    between = float(np.degrees(np.arccos(np.clip(refs[1] @ refs[2], -1, 1))))
    n, k = len(s.depths), len(s.algorithms)
    fig, axes = plt.subplots(
        2,
        n,
        figsize=(style.DOUBLE, 4.4),
        sharex="col",
        sharey=True,
        squeeze=False,
        constrained_layout=True,
    )
    stopped = False
    for col, depth in enumerate(s.depths):
        runs = results[col * k : (col + 1) * k]
        for row, (p, name) in enumerate(ROWS):
            ax = axes[row, col]
            for alg, res in zip(s.algorithms, runs, strict=True):
                stopped |= _draw_angle(ax, alg, res, refs[p], depth, s, row == 0)
            ax.axhline(between, color="0.4", ls=":", lw=0.9)
            if depth == 1 and p == 2:
                _draw_slope(ax, runs[0], refs[p])
            ax.set(xscale="log", yscale="log")
            ax.grid(alpha=0.3, which="major", lw=0.4)
            ax.set_title(rf"$L$ = {depth}: angle to the {name} max-margin direction")
            if col == 0:
                ax.set_ylabel("angle (degrees)")
        axes[-1, col].set_xlabel(r"rescaled time $\tau$")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    handles.append(plt.Line2D([], [], color="0.4", ls=":", lw=0.9))
    labels.append(f"angle between the two references, {between:.1f}°")
    if stopped:
        handles.append(stopped_handle())
        labels.append("run ended early")
    fig.legend(
        handles,
        labels,
        loc="outside lower center",
        ncol=min(len(labels), 3),
        title=rf"data: $n$ = {len(y)}, $d$ = {X.shape[1]};  $\alpha$ = {s.alpha:g}, "
        rf"$\rho$ = {s.rho:g}",
    )
    style.panel_letters(axes)
    save(fig, path)


def _draw_slope(ax, res: Result, ref: np.ndarray) -> None:
    """A guide ``∝ 1/tau`` over the last two decades of ``res``, a factor 2 above its angle to
    ``ref`` at its end."""
    tau_end = float(res["tau"][-1])
    angle_end = float(angles_deg(res, ref)[-1])
    tau = np.geomspace(tau_end / 100.0, tau_end, 10)
    ax.plot(tau, 2.0 * angle_end * tau_end / tau, color="0.4", ls="--", lw=0.7)
    ax.annotate(
        r"$\propto 1/\tau$",
        (tau[4], 2.0 * angle_end * tau_end / tau[4]),
        xytext=(4, 4),
        textcoords="offset points",
        color="0.3",
    )


def _draw_angle(ax, alg: str, res: Result, ref: np.ndarray, depth: int, s: Setting, warn: bool):
    """One run's angle to ``ref`` against tau (tau > 0), its last point marked (× if the run
    ended early; ``warn``: say so on stderr); whether it ended early."""
    tau = res["tau"]
    keep = tau > 0
    angle = angles_deg(res, ref)
    ax.plot(tau[keep], angle[keep], **line_style(alg))
    early = bool(np.asarray(res["status"]) < 0)
    if early and warn:
        stopped_early(res, f"{style.label(alg)} at L = {depth}", s)
    ax.plot(tau[-1], angle[-1], zorder=5, **(STOPPED_MARK if early else end_mark(alg)))
    return early


def check_fig6(s: Setting) -> str | None:
    """A setting's problem: horizons not one per depth, an unknown algorithm."""
    if not len(s.depths) == len(s.t_max) == len(s.n_points):
        return "depths, t_max and n_points must have one value per depth"
    return check_algorithms(s.algorithms)


MAXMARGIN_ANGLES = Figure(
    "fig6_maxmargin_angles",
    "n = 12, d = 3 data: angle to the ℓ2 / ℓ1 max-margin directions against τ at L = {depths}, "
    "α = {alpha}, ρ = {rho}",
    "Log-log: the angle between β(τ) and each max-margin direction, one column per depth "
    "(τ ≤ {t_max}); the dotted line is the angle between the two references, the dashed guide "
    "a slope 1/τ, the marker the end of each run. On generic separable data (n = 12, d = 3, α = {alpha}, ρ = {rho}), does β(τ) "
    "approach the ℓ2 max-margin direction at L = 1 and the ℓ1 max-margin direction at L = 2, "
    "for GD and for both SAMs, and how fast?",
    fig6_tasks,
    draw_fig6,
    params={
        "alpha": 1.0,
        "rho": 0.1,
        "depths": (1, 2),
        "algorithms": ALGORITHMS,
        "t_max": (3000.0, 8.0),
        "n_points": (6001, 801),
    },
    quick={"t_max": (5.0, 1.0), "n_points": (21, 21)},
    example={"alpha": 0.9, "rho": 0.15, "algorithms": ("gd", "l2-sam")},
    check=check_fig6,
)


if __name__ == "__main__":
    figure_command(__spec__.name, MAXMARGIN_ANGLES)
