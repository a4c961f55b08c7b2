"""The figure table of ``python -m flows.sweep``: each figure = its runs + how to draw them.

Palette: Okabe–Ito (colour-blind safe) for categories, viridis for ordered coordinates.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .cache import Result, Task  # noqa: E402

OKABE_ITO = ["#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00",
             "#CC79A7"]
MU5 = [1.0, 2.0, 3.0, 4.0, 5.0]


@dataclass(frozen=True)
class Figure:
    """A figure: ``tasks(quick)`` lists its runs; ``draw(results, quick, path)`` writes it."""

    name: str
    title: str
    tasks: Callable[[bool], list[Task]]
    draw: Callable[[list[Result], bool, Path], None]


def coordinate_colors(d: int) -> np.ndarray:
    """One viridis colour per coordinate (minor = dark, major = light)."""
    return plt.get_cmap("viridis")(np.linspace(0.0, 0.85, d))


def save(fig: plt.Figure, path: Path) -> None:
    """Write a figure and close it."""
    fig.savefig(path, dpi=130)
    plt.close(fig)


def shares_of(result: Result) -> np.ndarray:
    """``|beta_j| / ||beta||_1`` of a cached simulate result."""
    from analysis.amplification import shares

    return shares(result["log_abs_beta"])


# --- Figure 4: sequential feature amplification -------------------------------------------

AMPLIFICATION_ALPHAS = (0.12, 0.2, 0.4, 1.0, 3.0)


def amplification_tasks(quick: bool) -> list[Task]:
    """l2-SAM and GD at L = 2 on mu = (1..5), rho = 1, for several alpha."""
    alphas = AMPLIFICATION_ALPHAS[1:3] if quick else AMPLIFICATION_ALPHAS
    t_max, n = (4.0, 41) if quick else (12.0, 601)
    return [Task("simulate", {"mu": MU5, "algorithm": alg, "depth": 2, "alpha": a, "rho": 1.0,
                              "t_max": t_max, "n_points": n})
            for a in alphas for alg in ("l2-sam", "gd")]


def draw_amplification(results: list[Result], quick: bool, path: Path) -> None:
    """Shares against tau, one panel per alpha; l2-SAM solid, GD dashed."""
    alphas = AMPLIFICATION_ALPHAS[1:3] if quick else AMPLIFICATION_ALPHAS
    fig, axes = plt.subplots(1, len(alphas), figsize=(3.2 * len(alphas), 3.4), sharey=True,
                             constrained_layout=True)
    colors = coordinate_colors(len(MU5))
    for ax, alpha, sam, gd in zip(np.atleast_1d(axes), alphas, results[0::2], results[1::2]):
        for j, color in enumerate(colors):
            ax.plot(sam["t"], shares_of(sam)[:, j], color=color, lw=2,
                    label=f"j={j + 1} (μ={MU5[j]:g})")
            ax.plot(gd["t"], shares_of(gd)[:, j], color=color, lw=1.2, ls="--")
        ax.set(title=f"α = {alpha:g}", xlabel="rescaled time τ", ylim=(-0.02, 1.02))
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel("share |β_j| / ‖β‖₁")
    handles, labels = np.atleast_1d(axes)[0].get_legend_handles_labels()
    handles += [plt.Line2D([], [], color="grey", lw=2), plt.Line2D([], [], color="grey", ls="--")]
    labels += ["ℓ2-SAM", "GD"]
    fig.legend(handles, labels, loc="outside right center", fontsize="small")
    fig.suptitle("Sequential feature amplification: ℓ2-SAM (solid) vs GD (dashed), L = 2, "
                 "μ = (1,…,5), ρ = 1")
    save(fig, path)


FIGURES: dict[str, Figure] = {f.name: f for f in [
    Figure("fig4_amplification", "l2-SAM shares |beta_j|/|beta|_1 vs tau for several alpha, GD beside",
           amplification_tasks, draw_amplification),
]}
