"""The plot of ``python -m flows.run --plot``: one trajectory's shares and ``log|beta_j|``, in
the style of the paper's figures (:mod:`figures.style`, two columns wide)."""

from __future__ import annotations

import sys
from pathlib import Path

from analysis.amplification import shares
from flows.results import Trajectory

from . import style
from .common import STOPPED_MARK, coordinate_colors, plt, save

#: Printed names of hyper-parameters (mathtext); others are printed as they are called.
SYMBOLS = {
    "rho": "ρ",
    "sigma": "σ",
    "rho_max": r"$\rho_{\max}$",
    "varrho": "ϱ",
    "eps": "ε",
    "eta": "η",
    "alpha": "α",
}
#: Most coordinates named in the legend (more are told apart by colour only).
LEGEND_COORDINATES = 10


def _value(value: object) -> str:
    """A hyper-parameter's value: a number by ``%g``, a schedule by its own format."""
    if not callable(value) or hasattr(value, "spec"):
        return f"{value:g}"
    return repr(value)


def describe(traj: Trajectory) -> str:
    """``ℓ2-SAM, L = 2, ρ = 0.1``: the algorithm's label, the depth and the hyper-parameters."""
    name = (
        style.label(traj.algorithm) if traj.algorithm in style.ALGORITHM_STYLES else traj.algorithm
    )
    params = [f"{SYMBOLS.get(k, k)} = {_value(v)}" for k, v in traj.hyperparameters.items()]
    return ", ".join([name, f"L = {traj.depth}", *params])


def plot_trajectory(traj: Trajectory, path: str | Path) -> None:
    """(a) Shares ``|beta_j| / ||beta||_1`` and (b) ``log|beta_j|`` against time, one colour
    per coordinate (minor dark, major light), the run described under them; × at the end of a run that failed (also said on
    stderr). The format is ``path``'s suffix (png, pdf, svg)."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(style.DOUBLE, 3.0), constrained_layout=True)
    colors = coordinate_colors(traj.log_abs_beta.shape[1])
    share = shares(traj.log_abs_beta)
    for j, color in enumerate(colors):
        ax1.plot(traj.t, share[:, j], color=color, label=f"j = {j + 1}")
        ax2.plot(traj.t, traj.log_abs_beta[:, j], color=color)
    if not traj.success:
        print(f"warning: the run ended early: {traj.message}", file=sys.stderr)
        for ax, y in ((ax1, share[-1]), (ax2, traj.log_abs_beta[-1])):
            ax.plot([traj.t[-1]] * len(y), y, **STOPPED_MARK)
        ax1.plot([], [], **{**STOPPED_MARK, "label": "× ended early"})
    clock = "rescaled time τ" if traj.clock == "rescaled" else "original time t"
    ax1.set(xlabel=clock, ylabel=r"share $|\beta_j| / \|\beta\|_1$", ylim=(-0.02, 1.02))
    ax2.set(xlabel=clock, ylabel=r"$\log|\beta_j|$")
    handles, labels = ax1.get_legend_handles_labels()
    if len(colors) > LEGEND_COORDINATES:
        handles, labels = handles[len(colors) :], labels[len(colors) :]
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 6) or 1,
               title=describe(traj))  # fmt: skip
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
    style.panel_letters((ax1, ax2))
    save(fig, path)


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
