"""The plot of ``python -m flows.run --plot``: one trajectory's shares and ``log|beta_j|``."""

from __future__ import annotations

from pathlib import Path

from analysis.amplification import shares
from flows.results import Trajectory

from .common import coordinate_colors, plt


def plot_trajectory(traj: Trajectory, path: str | Path) -> None:
    """Shares ``|beta_j| / ||beta||_1`` and ``log|beta_j|`` against time, side by side."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    colors = coordinate_colors(traj.log_abs_beta.shape[1])
    share = shares(traj.log_abs_beta)
    for j, color in enumerate(colors):
        ax1.plot(traj.t, share[:, j], color=color, label=f"j = {j + 1}")
        ax2.plot(traj.t, traj.log_abs_beta[:, j], color=color)
    clock = "rescaled time τ" if traj.clock == "rescaled" else "original time t"
    ax1.set(xlabel=clock, ylabel="share |β_j| / ‖β‖₁", ylim=(-0.02, 1.02))
    ax2.set(xlabel=clock, ylabel="log |β_j|")
    ax1.legend(fontsize="small")
    fig.suptitle(
        f"{traj.algorithm}, L = {traj.depth}, "
        + ", ".join(
            f"{k} = {v:g}" if not callable(v) or hasattr(v, "spec") else f"{k} = {v!r}"
            for k, v in traj.hyperparameters.items()
        )
    )
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
