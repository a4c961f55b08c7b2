"""Figure 11 (``fig11_lesam_amplification``): does LE-SAM keep "minor first, major last"?
(settings: :mod:`figures.lesam`).

Shares ``|beta_j| / ||beta||_1`` of GD, l2-SAM, USAM and LE-SAM on the single example
``mu = (1, ..., 5)``, L = 2, at the matched settings, and the leader sequence of LE-SAM over a
grid of ``(sigma, rho_max)``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

from analysis.amplification import leader_sequence, leaders
from analysis.lesam.regimes import initial_lesam_rates
from flows.sweep.registry import Result, Task

from .common import MU5, Figure, Setting, coordinate_colors, figure_command, plt, save, shares_of
from .lesam import ALPHA, SIGMA0, compared, describe_leaders, run_task

FIG11_T = 8.0
#: (sigma, rho_max) rows of the leader strips
FIG11_GRID = tuple((s, r) for s in (0.03, 0.1, SIGMA0, 1.0) for r in (0.3, 1.0, 1.5, 3.0))
FIG11_STRIP_T = 24.0


def fig11_tasks(s: Setting) -> list[Task]:
    """The matched runs (shares), then LE-SAM over FIG11_GRID (leader strips)."""
    t_end, n = (2.0, 41) if s.quick else (FIG11_T, 401)
    runs = [run_task(alg, hp, t_end, n, kind="simulate") for _, alg, hp, _ in compared(t_end)]
    grid = FIG11_GRID[::5] if s.quick else FIG11_GRID
    t_strip, n_strip = (4.0, 41) if s.quick else (FIG11_STRIP_T, 481)
    return runs + [
        run_task(
            "le-sam", {"sigma": sigma, "rho_max": r}, t_strip, n_strip, kind="simulate", rtol=1e-8
        )
        for sigma, r in grid
    ]


def draw_fig11(results: list[Result], s: Setting, path: Path) -> None:
    """Shares of the matched runs (7 panels) and leader strips over (sigma, rho_max)."""
    t_end = 2.0 if s.quick else FIG11_T
    runs = compared(t_end)
    fig = plt.figure(figsize=(17, 9.0), constrained_layout=True)
    grid = fig.add_gridspec(2, 5, width_ratios=[1, 1, 1, 1, 1.35])
    for k, ((key, _, _, label), res) in enumerate(zip(runs, results, strict=False)):
        _draw_shares(fig.add_subplot(grid[k // 4, k % 4]), key, label, res, first=k % 4 == 0)
    handles, labels = fig.axes[0].get_legend_handles_labels()
    legend_ax = fig.add_subplot(grid[1, 3])
    legend_ax.axis("off")
    legend_ax.legend(handles, labels, loc="center", title="coordinate (minor → major)", fontsize=9)
    cells = FIG11_GRID[::5] if s.quick else FIG11_GRID
    _draw_leader_strips(fig, fig.add_subplot(grid[:, 4]), results[len(runs) :], cells)
    fig.suptitle(
        f"Does LE-SAM keep 'minor first, major last'? Shares |β_j|/‖β‖₁, μ = (1,…,5), "
        f"L = 2, α = {ALPHA:g}, settings matched at θ(0); leaders over τ ≤ {t_end:g}"
        + ("  [QUICK]" if s.quick else ""),
        fontsize=11,
    )
    save(fig, path)


def _draw_shares(ax, key: str, label: str, res: Result, first: bool) -> None:
    """One matched run: the shares against tau, its leader sequence in the title (the y label on
    the ``first`` panel of a row; the stall noted on LE-SAM with rho_max = 3)."""
    sh = shares_of(res)
    for j, color in enumerate(coordinate_colors(len(MU5))):
        ax.plot(res["tau"], sh[:, j], color=color, lw=2, label=f"j = {j + 1} (μ = {j + 1})")
    seq = leader_sequence(res["tau"], res["log_abs_beta"])
    ax.set_title(
        label.split(": ", 1)[1].replace(", ", ",\n", 1).replace(": ", ":\n", 1)
        + f"\nleaders: {describe_leaders(seq)}",
        fontsize=8.5,
    )
    ax.set(xlabel="rescaled time τ", ylim=(-0.02, 1.02))
    if first:
        ax.set_ylabel("share |β_j| / ‖β‖₁")
    ax.grid(alpha=0.3)
    if key == "le3":
        ax.text(
            0.97,
            0.3,
            "stall: β → (2.654, 0, …, 0)\nloss stays 0.068",
            ha="right",
            fontsize=8,
            transform=ax.transAxes,
            bbox=dict(fc="white", alpha=0.85, ec="none"),
        )


def _draw_leader_strips(fig, ax, strips: list[Result], cells) -> None:
    """The leading coordinate over tau of LE-SAM at each (sigma, rho_max) of ``cells`` (one row
    each; at tau = 0 the coordinate with the largest initial rate), with its colour bar."""
    d = len(MU5)
    cmap = matplotlib.colors.ListedColormap(
        np.vstack([[0.85, 0.85, 0.85, 1.0], coordinate_colors(d)])
    )
    tau = strips[0]["tau"]
    lead = np.full((len(strips), tau.size), -1)
    for row, (res, (s, r)) in zip(lead, zip(strips, cells, strict=True), strict=True):
        got = leaders(res["log_abs_beta"])
        row[: got.size] = got
        row[0] = int(np.argmax(initial_lesam_rates(MU5, ALPHA, s, r)))
    edges = np.concatenate([[tau[0]], 0.5 * (tau[1:] + tau[:-1]), [tau[-1]]])
    mesh = ax.pcolormesh(
        edges, np.arange(len(strips) + 1), lead + 1, cmap=cmap, vmin=-0.5, vmax=d + 0.5
    )
    ax.set_yticks(
        np.arange(len(strips)) + 0.5, [f"σ = {s:.3g}, ρ_max = {r:g}" for s, r in cells], fontsize=8
    )
    ax.invert_yaxis()
    for i in range(1, len(strips)):
        if cells[i][0] != cells[i - 1][0]:
            ax.axhline(i, color="white", lw=2)
    cbar = fig.colorbar(mesh, ax=ax, ticks=range(0, d + 1), location="bottom", shrink=0.9)
    cbar.ax.set_xticklabels(["β = 0"] + [f"{j + 1}" for j in range(d)])
    cbar.set_label("leading coordinate argmax_j |β_j(τ)|")
    ax.set(xlabel="rescaled time τ", title=f"LE-SAM, constant σ: leader over τ\n(α = {ALPHA:g})")


AMPLIFICATION = Figure(
    "fig11_lesam_amplification",
    "Shares |beta_j|/|beta|_1 over tau: GD, l2-SAM, USAM, LE-SAM; LE-SAM leaders over (sigma, rho_max)",
    "Does LE-SAM (or USAM) keep ℓ2-SAM's 'minor first, major last' at matched settings, and how "
    "does its leader sequence depend on the budget σ and the cap ρ_max?",
    fig11_tasks,
    draw_fig11,
)


if __name__ == "__main__":
    figure_command(__spec__.name, AMPLIFICATION)
