"""Figure 17 (``fig17_sam_regression``): the public SAM diagonal-network experiment, run here.

Andriushchenko & Flammarion (2022) train ``beta = u * v`` from ``u = 0.1``, ``v = 0`` on noiseless
3-sparse regression (n = 20, d = 30; :func:`flows.datasets.sparse_regression`) with GD, n-SAM and
1-SAM; their notebook (tml-epfl/understanding-sam, ``diagonal_linear_nets/diag_nets_sam.ipynb``
at 306adde, cell 4) sweeps rho and prints the test loss after 10001 steps. Both SAM variants of
that code are unnormalised: n-SAM is ``usam`` at the same rho, 1-SAM (``w + 2 rho grad l_k``)
is ``1-usam`` at ``2 rho`` (``docs/theory.md``, regression). Cell 4 runs GD and 1-SAM at
``gamma = 15/d`` and n-SAM at ``gamma = 10/d`` (a variable left over from cell 3; the printed
numbers are reproduced only with it), as here.

Two figures: ``fig17_sam_regression``, the test loss against rho with the notebook's printed
values as plus signs; ``fig17_sam_regression_flows``, (a) training and (b) test loss along the
runs at rho = 0.1 against ``t = k gamma`` over the flows of the same algorithms, and (c) the
distance of the iterates at ``t = 20`` to their flow as the step shrinks.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
from matplotlib.transforms import blended_transform_factory

from flows.datasets import sparse_regression
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

D17 = 30
#: The notebook's step sizes (cell 4): 15/d for GD and 1-SAM, 10/d for n-SAM.
GAMMA17 = {"gd": 15 / D17, "usam": 10 / D17, "1-usam": 15 / D17}
#: The notebook's names of the two SAM variants and the factor from its rho to ours.
VARIANTS17 = {"usam": ("n-SAM", 1.0), "1-usam": ("1-SAM", 2.0)}
ALGORITHMS17 = ("gd", *VARIANTS17)
#: The setting of the notebook's cell 4, and the test losses it prints (GD, then n-SAM and 1-SAM
#: by rho).
NOTEBOOK_SETTING17 = {"alpha": 0.1, "steps": 10001}
NOTEBOOK_RHOS17 = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 0.9)
NOTEBOOK_GD17 = 0.016445781003091926
NOTEBOOK17: dict[str, tuple[float, ...]] = {
    "usam": (
        0.015756677115280553, 0.015774538224235406, 0.01583739124793595, 0.016019930687941112,
        0.016695513663723727, 0.019007119935097728, 0.032812027137658364,
    ),
    "1-usam": (
        0.016174901502986682, 0.015641003537756094, 0.013855445463941646, 0.009469059057662111,
        0.0015339774886805526, 6.350068450874803e-09, np.nan,
    ),
}  # fmt: skip


def _init(alpha: float) -> list[list[float]]:
    """``u(0) = alpha``, ``v(0) = 0``."""
    return [[alpha] * D17, [0.0] * D17]


def _data_params() -> dict:
    split = sparse_regression()
    return {"X": split.train.X.tolist(), "y": split.train.y.tolist(), "task": "regression"}


def _hp(algorithm: str, rho: float) -> dict:
    """Our hyper-parameters for the notebook's ``rho``."""
    return {} if algorithm == "gd" else {"rho": VARIANTS17[algorithm][1] * rho}


def _iterate(s: Setting, algorithm: str, rho: float, gamma: float, steps: int, every: int) -> Task:
    return Task(
        "iterate",
        {
            **_data_params(),
            "algorithm": algorithm,
            "depth": 2,
            "alpha": _init(s.alpha),
            "eta": gamma,
            "steps": steps,
            "record_every": every,
            **_hp(algorithm, rho),
        },
    )


def _flow(s: Setting, algorithm: str, rho: float, t_max: float, n_points: int) -> Task:
    return Task(
        "simulate",
        {
            **_data_params(),
            "algorithm": algorithm,
            "depth": 2,
            "alpha": _init(s.alpha),
            "t_max": t_max,
            "n_points": n_points,
            **_hp(algorithm, rho),
        },
    )


def _grid_run(s: Setting, algorithm: str, rho: float) -> Task:
    """The notebook's run of ``algorithm`` at its ``rho`` and step size, ``s.steps`` steps."""
    return _iterate(s, algorithm, rho, GAMMA17[algorithm], s.steps, max(1, s.steps // 400))


def fig17_tasks(s: Setting) -> list[Task]:
    """GD once, then each SAM variant at every rho."""
    return [_grid_run(s, "gd", 0.0)] + [_grid_run(s, a, rho) for a in VARIANTS17 for rho in s.rhos]


def flows_tasks(s: Setting) -> list[Task]:
    """The notebook's runs at ``s.rho`` and their flows to the same time, then the runs with
    the smaller steps to ``s.horizon`` and the flows' values there."""
    runs = [_grid_run(s, a, s.rho) for a in ALGORITHMS17]
    flows = [_flow(s, a, s.rho, (s.steps - 1) * GAMMA17[a], 401) for a in ALGORITHMS17]
    small = [
        _iterate(s, a, s.rho, g, round(s.horizon / g), round(s.horizon / g))
        for a in ALGORITHMS17
        for g in s.gammas
    ]
    ends = [_flow(s, a, s.rho, s.horizon, 2) for a in ALGORITHMS17]
    return runs + flows + small + ends


def _loss(beta: np.ndarray, data) -> np.ndarray:
    """``(1/2n) ||X beta - y||^2`` per row of ``beta``."""
    r = np.atleast_2d(beta) @ data.X.T - data.y
    return 0.5 * np.mean(r * r, axis=-1)


def _final_test_loss(result: Result, test) -> float:
    """The test loss after the last step (NaN if the run left float64, as the notebook's)."""
    if int(result["status"]) != 0:
        return np.nan
    return float(_loss(result["beta"][-1], test)[0])


def _label(algorithm: str, rho: float | None = None) -> str:
    """``USAM (n-SAM)`` or, with the notebook's ``rho``, ``USAM, ρ = 0.1 (n-SAM)``."""
    if algorithm == "gd":
        return style.label("gd")
    name, factor = VARIANTS17[algorithm]
    at = "" if rho is None else f", ρ = {factor * rho:g}"
    return f"{style.label(algorithm)}{at} (the notebook's {name})"


def _notebook_values(s: Setting, algorithm: str) -> tuple[list[float], list[float]]:
    """The notebook's printed test losses at the rhos of ``s`` it ran (none away from its
    setting)."""
    if any(s[k] != v for k, v in NOTEBOOK_SETTING17.items()):
        return [], []
    pairs = [
        (rho, NOTEBOOK17[algorithm][NOTEBOOK_RHOS17.index(rho)])
        for rho in s.rhos
        if rho in NOTEBOOK_RHOS17
    ]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def draw_fig17(results: list[Result], s: Setting, path: Path) -> None:
    """Test loss after ``s.steps`` steps against the notebook's rho: GD as a line, USAM (n-SAM)
    and 1-USAM (1-SAM) per rho, the notebook's printed values as plus signs, × at the bottom
    where a run diverged."""
    split = sparse_regression()
    fig, ax = plt.subplots(figsize=(style.SINGLE, 2.7), constrained_layout=True)
    bottom = blended_transform_factory(ax.transData, ax.transAxes)
    gd = style.algorithm_style("gd", "steps")
    ax.axhline(
        _final_test_loss(results[0], split.test), color=gd["color"], ls=gd["ls"], label=_label("gd")
    )
    diverged = False
    for k, a in enumerate(VARIANTS17):
        runs = results[1 + k * len(s.rhos) : 1 + (k + 1) * len(s.rhos)]
        ours = [_final_test_loss(r, split.test) for r in runs]
        ax.plot(s.rhos, ours, **{**style.algorithm_style(a, "steps"), "label": _label(a)})
        for rho, run in zip(s.rhos, runs, strict=True):
            if stopped_early(
                run, f"{style.plain_label(a)} steps at the notebook's rho = {rho:g}", s
            ):
                ax.plot(rho, 0.04, transform=bottom, **STOPPED_MARK)
                diverged = True
    xs, ys = _notebook_values(s, "usam")
    xs1, ys1 = _notebook_values(s, "1-usam")
    if xs:
        ax.plot(xs + xs1, ys + ys1, ls="", marker="+", ms=7, mew=1.0, color="0.25",
                label="the notebook's printed value")  # fmt: skip
        ax.plot(s.rhos[0], NOTEBOOK_GD17, ls="", marker="+", ms=7, mew=1.0, color="0.25")
    if diverged:
        ax.plot([], [], **{**STOPPED_MARK, "label": "× diverged"})
    ax.set(xscale="log", yscale="log", xlabel="ρ (the notebook's)", ylabel="test loss",
           title=f"after {s.steps} steps from u = {s.alpha:g}, v = 0")  # fmt: skip
    ax.grid(alpha=0.3, which="major")
    ax.legend(loc="lower left")
    save(fig, path)


def _split_flows(results: list[Result], s: Setting) -> tuple[list, list, list, list]:
    """The results of :func:`flows_tasks`: runs, flows, smaller steps (by algorithm), ends."""
    n, m = len(ALGORITHMS17), len(s.gammas)
    runs, flows = results[:n], results[n : 2 * n]
    small = [results[2 * n + k * m : 2 * n + (k + 1) * m] for k in range(n)]
    return runs, flows, small, results[2 * n + n * m :]


def _draw_losses(axes, runs: list, flows: list, s: Setting) -> bool:
    """(a) training and (b) test loss along the runs (dashed) over their flows (solid), against
    ``t = k gamma``; whether a run ended early (marked)."""
    split = sparse_regression()
    stopped = False
    for a, run, flow in zip(ALGORITHMS17, runs, flows, strict=True):
        flow_beta = flow["sign_beta"] * np.exp(flow["log_abs_beta"])
        early = stopped_early(run, f"{a} steps at rho = {s.rho:g}", s)
        for ax, data in zip(axes, (split.train, split.test), strict=True):
            steps = {
                **style.algorithm_style(a, "steps"),
                "label": f"{_label(a)} steps, γ = {GAMMA17[a]:.2g}",
            }
            ax.plot(run["t"][1:], _loss(run["beta"], data)[1:], markevery=0.2, **steps)
            flow_style = {**style.algorithm_style(a), "label": "_flow"}
            ax.plot(flow["t"][1:], _loss(flow_beta, data)[1:], markevery=0.2, **flow_style)
            if early:
                ax.plot(run["t"][-1], _loss(run["beta"][-1], data)[0], **STOPPED_MARK)
        stopped |= early
    for ax, what in zip(axes, ("training", "test"), strict=True):
        ax.set(xscale="log", yscale="log", xlabel="t = kγ", ylabel=f"{what} loss")
    return stopped


def _draw_step_limit(ax, small: list, ends: list, s: Setting) -> None:
    """(c) The relative distance of the iterates at ``s.horizon`` to their flow against the
    step size, and a reference line proportional to it."""
    for a, runs, end in zip(ALGORITHMS17, small, ends, strict=True):
        target = (end["sign_beta"] * np.exp(end["log_abs_beta"]))[-1]
        gaps = [np.linalg.norm(r["beta"][-1] - target) / np.linalg.norm(target) for r in runs]
        kwargs = style.algorithm_style(a, "steps")
        if a == "gd":  # under USAM's points: drawn wider
            kwargs.update(lw=3.0, ms=6)
        ax.plot(s.gammas, gaps, **kwargs)
    gammas = np.array(s.gammas)
    ax.plot(gammas, 0.3 * gammas, color=style.GREY, ls=":", label="∝ γ")
    ax.set(xscale="log", yscale="log", xlabel="step size γ",
           ylabel=rf"$\|\beta_\gamma - \beta\| / \|\beta\|$ at t = {s.horizon:g}")  # fmt: skip
    ax.set_xticks(s.gammas, [str(Fraction(g).limit_denominator(1000)) for g in s.gammas])
    ax.minorticks_off()


def draw_flows(results: list[Result], s: Setting, path: Path) -> None:
    """(a) Training and (b) test loss of the notebook's runs at ``s.rho`` over their flows; (c)
    the distance at ``s.horizon`` of the iterates to their flow against the step size."""
    runs, flows, small, ends = _split_flows(results, s)
    fig, axes = plt.subplots(1, 3, figsize=(style.DOUBLE, 2.9), constrained_layout=True)
    stopped = _draw_losses(axes[:2], runs, flows, s)
    _draw_step_limit(axes[2], small, ends, s)
    for ax in axes:
        ax.grid(alpha=0.3, which="major")
    for ax, title in zip(axes, ("training loss", "test loss", "distance to the flow"), strict=True):
        ax.set_title(title)
    handles, labels = axes[0].get_legend_handles_labels()
    handles += [plt.Line2D([], [], color=style.GREY), axes[2].lines[-1]]
    labels += ["flows: solid", "∝ γ"]
    if stopped:
        handles.append(stopped_handle())
        labels.append("× run ended early")
    fig.legend(
        handles,
        labels,
        loc="outside lower center",
        ncol=3,
        title=f"the notebook's ρ = {s.rho:g}, {s.steps} steps from u = {s.alpha:g}, v = 0",
    )
    style.panel_letters(axes)
    save(fig, path)


SAM_REGRESSION = Figure(
    "fig17_sam_regression",
    "Test loss vs rho of GD, n-SAM and 1-SAM on the public sparse-regression experiment",
    "The diagonal-network experiment of Andriushchenko & Flammarion (tml-epfl/understanding-sam, "
    "cell 4), run here: β = u ⊙ v from u = {alpha}, v = 0 on noiseless 3-sparse regression "
    "(n = 20, d = 30), test loss after {steps} steps of GD (γ = 15/d), the notebook's n-SAM "
    "(USAM at its ρ, γ = 10/d) and 1-SAM (1-USAM at 2ρ, γ = 15/d); plus signs: the values the "
    "notebook prints (at its setting). Does this toolkit reproduce the experiment, 1-SAM "
    "reaching a sparser, better-generalising interpolator?",
    fig17_tasks,
    draw_fig17,
    params={**NOTEBOOK_SETTING17, "rhos": NOTEBOOK_RHOS17},
    quick={"steps": 1001},
    example={"alpha": 0.12, "steps": 801},
)

SAM_REGRESSION_FLOWS = Figure(
    "fig17_sam_regression_flows",
    "The public sparse-regression runs at one rho over their flows, and the step-size limit",
    "The runs of figure 17 at the notebook's ρ = {rho} (dashed, t = kγ) over the flows of the "
    "same algorithms (solid, original clock): (a) training and (b) test loss; (c) the relative "
    "distance at t = {horizon} of the iterates with step γ to their flow (dotted: ∝ γ). Which "
    "flows do the notebook's runs follow, and do the steps converge to them as γ shrinks?",
    flows_tasks,
    draw_flows,
    params={
        **NOTEBOOK_SETTING17,
        "rho": 0.1,
        "horizon": 20.0,
        "gammas": (0.5, 1 / 6, 1 / 18, 1 / 54),
    },
    quick={"steps": 1001},
    example={"rho": 0.03, "horizon": 12.0},
)


if __name__ == "__main__":
    figure_command(__spec__.name, SAM_REGRESSION, SAM_REGRESSION_FLOWS)
