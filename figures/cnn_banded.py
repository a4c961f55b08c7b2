"""``cnn_banded``: a two-layer CNN on banded data, GD against l2-SAM over the initialisation
scale: does SAM amplify the minor bands first and the major one last, as on diagonal networks?

Data (:func:`flows.networks.banded_data`): signals of length 20 whose label lives in four
frequency bands of strengths 1, 2, 3, 4 (two frequencies each), plus white noise of norm
about 0.5, 8 examples. Models (:func:`analysis.networks.runs.banded_model`): one full-width
circular filter with a linear activation (a diagonal network in the Fourier basis) and two
filters with ReLU, each with a linear read-out. Training: the Euler scheme of the rescaled
flow (``clock="rescaled"``, step 0.01 in tau, tau <= 8), from ``alpha`` times LeCun-normal
weights (seeds 0, 1, 2), alpha from 0.1 to 1.6 by factors sqrt(2) (GD at every other one);
l2-SAM with rho = 0.2.

Top rows: the band shares of the output (the input-gradient spectrum, solid) and of the
filters (their spectral energy, dashed) along training, seed 0, at a collapsing, the most
sequential and the largest alpha, beside GD. Bottom: how long a minor band leads
(:func:`analysis.networks.banded_regime`) against alpha for every seed; a cross marks a
collapse.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.networks import banded_regime
from analysis.networks.runs import cnn_banded  # noqa: F401 - registers the task kinds
from flows.sweep.registry import Result, Task

from .common import OKABE_ITO, Figure, Setting, coordinate_colors, figure_command, plt, save

BANDS = ((1, 2), (3, 4), (5, 6), (7, 8))
STRENGTHS = (1.0, 2.0, 3.0, 4.0)
DATA = {"n": 8, "length": 20, "noise": 0.5, "data_seed": 0}
#: (activation, channels, label)
MODELS = (("relu", 2, "ReLU, 2 filters"), ("linear", 1, "linear, 1 filter"))
ALGORITHMS = (("gd", {}, "GD"), ("l2-sam", {"rho": 0.2}, "ℓ2-SAM ρ = 0.2"))
ALPHAS = tuple(0.1 * np.sqrt(2.0) ** np.arange(9))  # 0.1 .. 1.6
SEEDS = (0, 1, 2)
RUN = {"eta": 0.01, "steps": 800, "clock": "rescaled", "records": 100}


def _grid(quick: bool) -> tuple[tuple[float, ...], tuple[int, ...]]:
    return (ALPHAS[::2], SEEDS[:1]) if quick else (ALPHAS, SEEDS)


def _alphas(algorithm: str, alphas: tuple[float, ...]) -> tuple[float, ...]:
    """GD runs at every other alpha: below alpha ~ 1 its rescaled dynamics hardly depends on
    alpha (a 2-homogeneous model at small margins), and it never lets a minor band lead."""
    return alphas[::2] if algorithm == "gd" else alphas


def banded_tasks(s: Setting) -> list[Task]:
    """Per model, algorithm, alpha and seed, one run."""
    alphas, seeds = _grid(s.quick)
    steps = {"steps": 400, "records": 50} if s.quick else {}
    return [
        Task(
            "cnn_banded",
            {
                **DATA,
                "bands": [list(b) for b in BANDS],
                "strengths": list(STRENGTHS),
                "activation": activation,
                "channels": channels,
                "algorithm": algorithm,
                **hp,
                "alpha": float(alpha),
                "seed": seed,
                **RUN,
                **steps,
            },
        )
        for activation, channels, _ in MODELS
        for algorithm, hp, _ in ALGORITHMS
        for alpha in _alphas(algorithm, alphas)
        for seed in seeds
    ]


def _regime(res: Result):
    return banded_regime(res["t"], res["shares"], res["totals"], res["loss"])


def _shares_panel(ax, res: Result, title: str) -> None:
    """Band shares of the output (solid) and filters (dashed) against tau, with the log of the
    input-gradient spectrum's total (grey, right axis)."""
    colors = coordinate_colors(len(BANDS))
    for k, color in enumerate(colors):
        label = f"band {k + 1} (μ = {STRENGTHS[k]:g})"
        ax.plot(res["t"], res["shares"][:, k], color=color, lw=1.8, label=label)
        ax.plot(res["t"], res["filter_shares"][:, k], color=color, lw=1, ls="--")
    ax.plot(res["t"], res["shares"][:, -1], color="0.6", lw=1.2, label="other frequencies")
    regime = _regime(res)
    ax.set(ylim=(0, 1), xlabel="τ (rescaled clock)", title=f"{title}\n{regime.regime}")
    twin = ax.twinx()
    twin.plot(res["t"], np.log10(res["totals"]), color="0.35", lw=0.8, ls=":")
    twin.tick_params(labelsize=7, colors="0.35")
    twin.set_ylabel("log10 Σᵢ‖∇ₓf̂‖₁ (dotted)", fontsize=7, color="0.35")


def _pick(by_alpha: dict[float, Result]) -> list[float]:
    """The panels' alphas: the largest collapsing one, the one whose minor band leads the
    longest, the largest one."""
    regimes = {a: _regime(r) for a, r in by_alpha.items()}
    collapsed = [a for a, g in regimes.items() if g.regime == "collapse"]
    alive = [a for a, g in regimes.items() if g.regime != "collapse"]
    longest = max(alive, key=lambda a: regimes[a].minor_lead) if alive else max(by_alpha)
    return ([max(collapsed)] if collapsed else []) + [longest, max(by_alpha)]


def draw_banded(results: list[Result], s: Setting, path: Path) -> None:
    """Two rows of share panels (one per model) and a row of minor-lead times."""
    alphas, seeds = _grid(s.quick)
    runs: dict[tuple, Result] = {}
    it = iter(results)
    for activation, _, _ in MODELS:
        for algorithm, _, _ in ALGORITHMS:
            for alpha in _alphas(algorithm, alphas):
                for seed in seeds:
                    runs[(activation, algorithm, alpha, seed)] = next(it)
    fig = plt.figure(figsize=(17, 12.5), constrained_layout=True)
    grid = fig.add_gridspec(3, 4)
    for row, (activation, _, model_label) in enumerate(MODELS):
        sam = {a: runs[(activation, "l2-sam", a, seeds[0])] for a in alphas}
        chosen = _pick(sam)
        gd_alphas = _alphas("gd", alphas)
        gd_alpha = min(gd_alphas, key=lambda a: abs(np.log(a / chosen[-2])))
        panels = [(runs[(activation, "gd", gd_alpha, seeds[0])], f"GD, α = {gd_alpha:.3g}")]
        panels += [(sam[a], f"ℓ2-SAM, α = {a:.3g}") for a in chosen]
        for col, (res, title) in enumerate(panels[:4]):
            ax = fig.add_subplot(grid[row, col])
            _shares_panel(ax, res, f"{model_label}: {title}")
            if col == 0:
                ax.set_ylabel("share of the band")
                ax.legend(fontsize=7, loc="center right")
    for col, (activation, _, model_label) in enumerate(MODELS):
        ax = fig.add_subplot(grid[2, 2 * col : 2 * col + 2])
        for (algorithm, _, label), color, marker in zip(
            ALGORITHMS, (OKABE_ITO[5], OKABE_ITO[6]), ("o", "s"), strict=True
        ):
            points = _alphas(algorithm, alphas)
            for j, seed in enumerate(seeds):
                regimes = [_regime(runs[(activation, algorithm, a, seed)]) for a in points]
                lead = [g.minor_lead for g in regimes]
                ax.plot(points, lead, marker=marker, color=color, lw=1, alpha=0.8,
                        label=label if j == 0 else None, mfc="white" if j else color)  # fmt: skip
                for a, g in zip(points, regimes, strict=True):
                    if g.regime == "collapse":
                        ax.plot(a, 0, "x", color=color, ms=10, mew=2)
        ax.plot([], [], "kx", label="collapse (β → 0)")
        ax.set(xscale="log", xlabel="initialisation scale α",
               ylabel="τ during which a minor band leads",
               title=f"{model_label}: time with a minor band ahead (seeds {', '.join(map(str, seeds))})")  # fmt: skip
        ax.legend(fontsize=8)
    fig.suptitle(
        "Two-layer CNN on banded data: band shares of the output (solid) and filters (dashed)"
        + (" (quick)" if s.quick else ""),
        fontsize=12,
    )
    save(fig, path)


CNN_BANDED = Figure(
    "cnn_banded",
    "Band shares of a two-layer CNN's output and filters along training on banded data, GD "
    "and l2-SAM over the initialisation scale",
    "Does SAM amplify the minor frequency bands first and the major one last on a CNN, and in "
    "which range of alpha?",
    banded_tasks,
    draw_banded,
)


if __name__ == "__main__":
    figure_command(__spec__.name, CNN_BANDED)
