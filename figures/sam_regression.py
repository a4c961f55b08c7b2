"""Figure 17 (``fig17_sam_regression``): the public SAM diagonal-network experiment, run here.

Andriushchenko & Flammarion (2022) train ``beta = u * v`` from ``u = 0.1``, ``v = 0`` on noiseless
3-sparse regression (n = 20, d = 30; :func:`flows.datasets.sparse_regression`) with GD, n-SAM and
1-SAM; their notebook (tml-epfl/understanding-sam, ``diagonal_linear_nets/diag_nets_sam.ipynb``
at 306adde, cell 4) sweeps rho and prints the test loss after 10001 steps. Both SAM variants of
that code are unnormalised: n-SAM is ``usam`` at the same rho, 1-SAM (``w + 2 rho grad l_k``)
is ``1-usam`` at ``2 rho`` (``docs/theory.md``, regression). Cell 4 runs GD and 1-SAM at
``gamma = 15/d`` and n-SAM at ``gamma = 10/d`` (a variable left over from cell 3; the printed
numbers are reproduced only with it), as here.

Panels: (a) the test loss against rho, the notebook's printed values as crosses; (b) training
and test loss along the runs at rho = 0.1 against ``t = k gamma``, with the flows of the same
algorithms; (c) the distance of the iterates at ``t = 20`` to their flow as the step shrinks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flows.datasets import sparse_regression
from flows.sweep.registry import Result, Task

from .common import OKABE_ITO, Figure, Setting, figure_command, plt, save

ALPHA17, STEPS17 = 0.1, 10001
D17 = 30
GAMMA17 = {"gd": 15 / D17, "usam": 10 / D17, "1-usam": 15 / D17}
RHOS17 = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 0.9)
#: The notebook's names of the two SAM variants and the factor from its rho to ours.
VARIANTS17 = {"usam": ("n-SAM", 1.0), "1-usam": ("1-SAM", 2.0)}
#: The test losses cell 4 of the notebook prints (GD, then n-SAM and 1-SAM by rho).
NOTEBOOK17 = {
    "gd": 0.016445781003091926,
    "usam": (
        0.015756677115280553, 0.015774538224235406, 0.01583739124793595, 0.016019930687941112,
        0.016695513663723727, 0.019007119935097728, 0.032812027137658364,
    ),
    "1-usam": (
        0.016174901502986682, 0.015641003537756094, 0.013855445463941646, 0.009469059057662111,
        0.0015339774886805526, 6.350068450874803e-09, np.nan,
    ),
}  # fmt: skip
CURVE_RHO17 = 0.1
#: Horizon and step sizes of panel (c).
T17 = 20.0
GAMMAS17 = (0.5, 1 / 6, 1 / 18, 1 / 54)


def _init() -> list[list[float]]:
    """``u(0) = alpha``, ``v(0) = 0``."""
    return [[ALPHA17] * D17, [0.0] * D17]


def _data_params() -> dict:
    split = sparse_regression()
    return {"X": split.train.X.tolist(), "y": split.train.y.tolist(), "task": "regression"}


def _hp(algorithm: str, rho: float) -> dict:
    """Our hyper-parameters for the notebook's ``rho``."""
    return {} if algorithm == "gd" else {"rho": VARIANTS17[algorithm][1] * rho}


def _iterate(algorithm: str, rho: float, gamma: float, steps: int, every: int) -> Task:
    return Task(
        "iterate",
        {
            **_data_params(),
            "algorithm": algorithm,
            "depth": 2,
            "alpha": _init(),
            "eta": gamma,
            "steps": steps,
            "record_every": every,
            **_hp(algorithm, rho),
        },
    )


def _flow(algorithm: str, rho: float, t_max: float, n_points: int) -> Task:
    return Task(
        "simulate",
        {
            **_data_params(),
            "algorithm": algorithm,
            "depth": 2,
            "alpha": _init(),
            "t_max": t_max,
            "n_points": n_points,
            **_hp(algorithm, rho),
        },
    )


def _steps(quick: bool) -> int:
    return 1001 if quick else STEPS17


def fig17_tasks(s: Setting) -> list[Task]:
    """The rho grid (GD once), the curves' flows, then panel (c)'s step sizes and flows."""
    steps = _steps(s.quick)
    every = max(1, steps // 400)
    grid = [_iterate("gd", 0.0, GAMMA17["gd"], steps, every)]
    grid += [_iterate(a, rho, GAMMA17[a], steps, every) for a in VARIANTS17 for rho in RHOS17]
    flows = [_flow(a, CURVE_RHO17, (steps - 1) * GAMMA17[a], 401) for a in ("gd", *VARIANTS17)]
    small = [
        _iterate(a, CURVE_RHO17, g, round(T17 / g), round(T17 / g))
        for a in ("gd", *VARIANTS17)
        for g in GAMMAS17
    ]
    ends = [_flow(a, CURVE_RHO17, T17, 2) for a in ("gd", *VARIANTS17)]
    return grid + flows + small + ends


def _loss(beta: np.ndarray, data) -> np.ndarray:
    """``(1/2n) ||X beta - y||^2`` per row of ``beta``."""
    r = np.atleast_2d(beta) @ data.X.T - data.y
    return 0.5 * np.mean(r * r, axis=-1)


def _final_test_loss(result: Result, test) -> float:
    """The test loss after the last step (NaN if the run left float64, as the notebook's)."""
    if int(result["status"]) != 0:
        return np.nan
    return float(_loss(result["beta"][-1], test)[0])


COLORS17 = {"gd": "k", "usam": OKABE_ITO[5], "1-usam": OKABE_ITO[1]}
LABELS17 = {"gd": "GD", "usam": "n-SAM (usam, ρ)", "1-usam": "1-SAM (1-usam, 2ρ)"}


def draw_fig17(results: list[Result], s: Setting, path: Path) -> None:
    """Test loss vs rho; loss curves with their flows; distance to the flow vs step size."""
    split = sparse_regression()
    n_grid = 1 + len(VARIANTS17) * len(RHOS17)
    grid, rest = results[:n_grid], results[n_grid:]
    flows, rest = rest[:3], rest[3:]
    small, ends = rest[: 3 * len(GAMMAS17)], rest[3 * len(GAMMAS17) :]
    fig, axes = plt.subplots(1, 3, figsize=(16, 5.2), constrained_layout=True)

    ax = axes[0]
    ax.axhline(_final_test_loss(grid[0], split.test), color="k", lw=1.2, label="GD")
    ax.axhline(NOTEBOOK17["gd"], color="k", lw=3, alpha=0.2)
    for k, a in enumerate(VARIANTS17):
        runs = grid[1 + k * len(RHOS17) : 1 + (k + 1) * len(RHOS17)]
        ours = [_final_test_loss(r, split.test) for r in runs]
        ax.plot(RHOS17, ours, "o-", color=COLORS17[a], label=LABELS17[a])
        ax.plot(RHOS17, NOTEBOOK17[a], "x", color="k", ms=9, mew=1.4)
        for rho, value in zip(RHOS17, ours, strict=True):
            if np.isnan(value):
                ax.annotate("diverges", (rho, 1e-8), color=COLORS17[a], fontsize=8, ha="center")
    ax.plot([], [], "x", color="k", label="the notebook's printed value")
    ax.set(xscale="log", yscale="log", xlabel="ρ (the notebook's)", ylabel="test loss",
           title=f"(a) after {_steps(s.quick)} steps, from u = {ALPHA17:g}, v = 0")  # fmt: skip
    ax.legend(fontsize=8, loc="lower left")

    ax = axes[1]
    curve_index = RHOS17.index(CURVE_RHO17)
    picks = {
        "gd": grid[0],
        **{a: grid[1 + k * len(RHOS17) + curve_index] for k, a in enumerate(VARIANTS17)},
    }
    for (a, run), flow in zip(picks.items(), flows, strict=True):
        beta = run["beta"]
        flow_beta = flow["sign_beta"] * np.exp(flow["log_abs_beta"])
        ax.plot(run["t"][1:], _loss(beta, split.train)[1:], color=COLORS17[a], lw=1.6,
                label=f"{LABELS17[a]}, steps γ = {GAMMA17[a]:.3g}")  # fmt: skip
        ax.plot(run["t"][1:], _loss(beta, split.test)[1:], color=COLORS17[a], lw=1.6, ls=":")
        ax.plot(flow["t"][1:], _loss(flow_beta, split.train)[1:], color=COLORS17[a], lw=3,
                alpha=0.3)  # fmt: skip
        ax.plot(flow["t"][1:], _loss(flow_beta, split.test)[1:], color=COLORS17[a], lw=3,
                alpha=0.3, ls=":")  # fmt: skip
    ax.plot([], [], color="0.5", lw=3, alpha=0.3, label="the flow (original clock)")
    ax.plot([], [], color="0.5", ls=":", label="test loss (dotted)")
    ax.set(xscale="log", yscale="log", xlabel="t = k γ", ylabel="loss",
           title=f"(b) train (solid) and test (dotted), ρ = {CURVE_RHO17:g}")  # fmt: skip
    ax.legend(fontsize=7, loc="lower left")

    ax = axes[2]
    for k, a in enumerate(("gd", *VARIANTS17)):
        end = ends[k]
        target = (end["sign_beta"] * np.exp(end["log_abs_beta"]))[-1]
        runs = small[k * len(GAMMAS17) : (k + 1) * len(GAMMAS17)]
        gaps = [np.linalg.norm(r["beta"][-1] - target) / np.linalg.norm(target) for r in runs]
        style = dict(lw=5, alpha=0.35, ms=9) if a == "gd" else dict(lw=1.5, ms=5)
        ax.plot(GAMMAS17, gaps, "o-", color=COLORS17[a], label=LABELS17[a], **style)
    ax.plot(GAMMAS17, 0.3 * np.array(GAMMAS17), color="0.6", ls="--", label="∝ γ")
    ax.set(xscale="log", yscale="log", xlabel="step size γ",
           ylabel=f"‖β_γ(t) − β_flow(t)‖ / ‖β_flow(t)‖ at t = {T17:g}",
           title=f"(c) the steps approach the flow (ρ = {CURVE_RHO17:g})")  # fmt: skip
    ax.set_xticks(GAMMAS17, ["1/2", "1/6", "1/18", "1/54"])
    ax.minorticks_off()
    ax.legend(fontsize=8)
    for a in axes:
        a.grid(alpha=0.3, which="both")
    fig.suptitle(
        "The public SAM diagonal-network experiment (tml-epfl/understanding-sam, cell 4): "
        "β = u ⊙ v, sparse regression n = 20, d = 30" + ("  [QUICK]" if s.quick else ""),
        fontsize=11,
    )
    save(fig, path)


SAM_REGRESSION = Figure(
    "fig17_sam_regression",
    "Test loss vs rho of GD, n-SAM and 1-SAM on the public sparse-regression experiment, "
    "their flows, and the step-size limit",
    "Does this toolkit reproduce the SAM diagonal-network experiment of Andriushchenko & "
    "Flammarion (1-SAM reaching a sparser, better-generalising interpolator), and which flows "
    "do those runs follow?",
    fig17_tasks,
    draw_fig17,
)


if __name__ == "__main__":
    figure_command(__spec__.name, SAM_REGRESSION)
