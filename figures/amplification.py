"""Figure 4 (``fig4_amplification``): sequential feature amplification, the shares
``|beta_j| / ||beta||_1`` of l2-SAM against tau for several alpha, GD beside.

The regime phase diagram (figure 5) is in :mod:`figures.regimes`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flows.sweep.registry import Result, Task

from .common import MU5, Figure, Setting, coordinate_colors, figure_command, plt, save, shares_of

#: collapse (0.3), amplification (0.4, 0.5, 0.7) and major-from-the-start (1.5) at rho = 1
AMPLIFICATION_ALPHAS = (0.3, 0.4, 0.5, 0.7, 1.5)


def amplification_tasks(s: Setting) -> list[Task]:
    """l2-SAM and GD at L = 2 on mu = (1..5), rho = 1, for several alpha."""
    alphas = AMPLIFICATION_ALPHAS[1:3] if s.quick else AMPLIFICATION_ALPHAS
    t_max, n = (4.0, 41) if s.quick else (6.0, 601)
    return [
        Task(
            "simulate",
            {
                "mu": MU5,
                "algorithm": alg,
                "depth": 2,
                "alpha": a,
                "rho": 1.0,
                "t_max": t_max,
                "n_points": n,
            },
        )
        for a in alphas
        for alg in ("l2-sam", "gd")
    ]


def draw_amplification(results: list[Result], s: Setting, path: Path) -> None:
    """Shares against tau, one panel per alpha; l2-SAM solid, GD dashed."""
    alphas = AMPLIFICATION_ALPHAS[1:3] if s.quick else AMPLIFICATION_ALPHAS
    fig, axes = plt.subplots(
        1, len(alphas), figsize=(3.2 * len(alphas), 3.4), sharey=True, constrained_layout=True
    )
    colors = coordinate_colors(len(MU5))
    for ax, alpha, sam, gd in zip(
        np.atleast_1d(axes), alphas, results[0::2], results[1::2], strict=False
    ):
        for j, color in enumerate(colors):
            ax.plot(
                sam["t"],
                shares_of(sam)[:, j],
                color=color,
                lw=2.2,
                label=f"j={j + 1} (μ={MU5[j]:g})",
            )
            ax.plot(gd["t"], shares_of(gd)[:, j], color=color, lw=1.2, ls="--")
        collapse = sam["event_tau"][sam["event_kind"] == "collapse"]
        if collapse.size:
            ax.axvline(collapse[0], color="#D55E00", ls=":", lw=1.5)
            ax.text(
                collapse[0] + 0.1,
                0.5,
                f"collapse:\nβ = 0 from\nτ = {collapse[0]:.3g}",
                color="#D55E00",
                fontsize=9,
                va="center",
                ha="left",
            )
        ax.set(title=f"α = {alpha:g}", xlabel="rescaled time τ", ylim=(-0.02, 1.02))
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("share |β_j| / ‖β‖₁")
    handles, labels = np.atleast_1d(axes)[0].get_legend_handles_labels()
    handles += [plt.Line2D([], [], color="grey", lw=2), plt.Line2D([], [], color="grey", ls="--")]
    labels += ["ℓ2-SAM", "GD"]
    fig.legend(handles, labels, loc="outside right center", fontsize="small")
    fig.suptitle(
        "Sequential feature amplification: ℓ2-SAM (solid) vs GD (dashed), L = 2, μ = (1,…,5), ρ = 1"
    )
    save(fig, path)


AMPLIFICATION = Figure(
    "fig4_amplification",
    "l2-SAM shares |beta_j|/|beta|_1 vs tau for several alpha, GD beside",
    "Does ℓ2-SAM at L = 2 amplify the features one after the other, minor first and major "
    "last, between collapse (small α) and major-from-the-start (large α), where GD does not?",
    amplification_tasks,
    draw_amplification,
)


if __name__ == "__main__":
    figure_command(__spec__.name, AMPLIFICATION)
