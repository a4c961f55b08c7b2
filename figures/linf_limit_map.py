"""Figure 3 (``fig3_linf_limit_map``): which basis vector l_inf-SAM converges to (Cor 3.5).

On mu = (1, 2), over a grid of (alpha_1 / rho, alpha_2 / rho) at L = 2 and 3: Cor 3.5's
prediction (:func:`analysis.limits.predict_linf_limit`) as a background map with its
boundaries, and the limits observed on simulated flows
(:func:`analysis.limits.observed_linf_limit`) as markers. The runs are the task kind
``'linf_limit'`` (:func:`run_linf_limit`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from analysis.limits import observed_linf_limit, predict_linf_limit, predict_linf_limits
from flows.data import single_example
from flows.integrator.driver import simulate
from flows.sweep.registry import Result, Task, flow_kernels, register

from .common import OKABE_ITO, Figure, Setting, figure_command, plt, save
from .linf_coordinates import RHO, solver_options

MU2 = (1.0, 2.0)
MAP_DEPTHS = (2, 3)
#: alpha_j / rho of the simulated grid: one exactly at rho, none on the L = 3 tie curve.
GRID = (0.3, 0.6, 1.0, 1.2, 1.5, 1.9, 2.4)
GRID_QUICK = (0.6, 1.5)
MAP_MAX = 2.6
CLASS_COLORS = ["#d9d9d9", OKABE_ITO[1], OKABE_ITO[2]]  # none, e_1, e_2
CLASS_MARKERS = ["o", "s", "^"]
CLASS_NAMES = ["none (β bounded)", "e₁ (minor)", "e₂ (major)"]


def run_linf_limit(params: dict) -> Result:
    """Simulate l_inf-SAM from a balanced init and read the limit with observed_linf_limit.

    Returns ``observed`` (0-based index, -1 for None), ``status``, ``tau_end`` and the final
    ``log_abs_beta``.
    """
    traj = simulate(
        single_example(params["mu"]),
        "linf-sam",
        depth=params["depth"],
        alpha=np.array(params["alpha"], dtype=float),
        rho=params["rho"],
        t_max=params["t_max"],
        n_points=params["n_points"],
        rtol=params["rtol"],
        method=params.get("method", "DOP853"),
        original_time=False,
    )
    obs = observed_linf_limit(traj)
    return {
        "observed": np.array(-1 if obs is None else obs),
        "status": np.array(traj.status),
        "tau_end": np.array(traj.tau[-1]),
        "log_abs_beta_end": traj.log_abs_beta[-1],
    }


register(
    "linf_limit",
    run_linf_limit,
    kernels=lambda p: flow_kernels({"algorithm": "linf-sam", **p}),
)


def _grid(quick: bool) -> tuple[float, ...]:
    return GRID_QUICK if quick else GRID


def limit_map_tasks(s: Setting) -> list[Task]:
    """One ``linf_limit`` run per depth and grid point (alpha_2 outer, alpha_1 inner)."""
    grid = _grid(s.quick)
    return [
        Task(
            "linf_limit",
            {
                "mu": list(MU2),
                "alpha": [a1 * RHO, a2 * RHO],
                "rho": RHO,
                "depth": L,
                "t_max": 10.0,
                "n_points": 11,
                **solver_options(s.quick),
            },
        )
        for L in MAP_DEPTHS
        for a2 in grid
        for a1 in grid
    ]


def _code(j: int | None) -> int:
    return 0 if j is None else j + 1


def limit_map_agreement(results: list[Result], quick: bool) -> dict:
    """Per depth: (alpha_1, alpha_2, predicted code, observed code) rows and the agreement count."""
    grid = _grid(quick)
    it = iter(results)
    out = {}
    for L in MAP_DEPTHS:
        rows = []
        for a2 in grid:
            for a1 in grid:
                r = next(it)
                pred = _code(predict_linf_limit(list(MU2), [a1 * RHO, a2 * RHO], RHO, L))
                obs = int(r["observed"]) + 1
                rows.append((a1, a2, pred, obs, int(r["status"]), float(r["tau_end"])))
        agree = sum(p == o for _, _, p, o, _, _ in rows)
        out[L] = {"rows": rows, "agree": agree, "n": len(rows)}
    return out


def _boundaries(ax, L: int) -> None:
    """Cor 3.5's class boundaries in (alpha_1/rho, alpha_2/rho) (mu = (1, 2))."""
    kw = dict(color="black", lw=1.6)
    top = MAP_MAX
    if L == 2:
        ax.plot([0, top], [1, 1], **kw)  # alpha_2 = rho: e_2 above
        ax.plot([1, 1], [0, 1], **kw)  # alpha_1 = rho below it
        return
    ax.plot([0, 1], [1, 1], **kw)  # alpha_2 = rho, alpha_1 < rho
    ax.plot([1, 1], [0, 1], **kw)  # alpha_1 = rho, alpha_2 < rho
    a1 = np.linspace(1, top, 50)  # mu_1 (a1 - 1) = mu_2 (a2 - 1)
    ax.plot(a1, 1 + MU2[0] * (a1 - 1) / MU2[1], **kw)


def draw_limit_map(results: list[Result], s: Setting, path: Path) -> None:
    """Two panels (L = 2, 3): predicted classes as background, observed limits as markers."""
    agreement = limit_map_agreement(results, s.quick)
    n_fine = 60 if s.quick else 200
    fine = np.linspace(MAP_MAX / (2 * n_fine), MAP_MAX - MAP_MAX / (2 * n_fine), n_fine)
    cmap = ListedColormap(CLASS_COLORS)
    fig, axes = plt.subplots(1, len(MAP_DEPTHS), figsize=(12, 5.6), constrained_layout=True)
    for ax, L in zip(axes, MAP_DEPTHS, strict=False):
        a1, a2 = np.meshgrid(fine * RHO, fine * RHO)  # rows: alpha_2, columns: alpha_1
        classes = 1 + predict_linf_limits(list(MU2), np.stack([a1, a2], axis=-1), RHO, L)
        ax.imshow(
            classes,
            origin="lower",
            extent=(0, MAP_MAX, 0, MAP_MAX),
            cmap=cmap,
            vmin=-0.5,
            vmax=2.5,
            alpha=0.45,
            interpolation="nearest",
            aspect="equal",
        )
        _boundaries(ax, L)
        info = agreement[L]
        for a1, a2, pred, obs, _status, _ in info["rows"]:
            ax.plot(
                a1,
                a2,
                ls="none",
                marker=CLASS_MARKERS[obs],
                ms=10,
                mfc=CLASS_COLORS[obs],
                mec="black",
                mew=1.0,
            )
            if obs != pred:
                ax.plot(a1, a2, ls="none", marker="x", ms=16, color="red", mew=2.5)
        ax.set(
            xlim=(0, MAP_MAX),
            ylim=(0, MAP_MAX),
            xlabel="α₁ / ρ  (minor coordinate, μ₁ = 1)",
            ylabel="α₂ / ρ  (major coordinate, μ₂ = 2)",
        )
        rule = "argmax μ_j over α_j > ρ" if L == 2 else "argmax μ_j (α_j − ρ) over α_j > ρ"
        ax.set_title(
            f"L = {L}: prediction j* = {rule}\nobserved = predicted at "
            f"{info['agree']}/{info['n']} simulated points",
            fontsize=10,
        )
    handles = [
        Patch(facecolor=c, alpha=0.45, edgecolor="none", label=f"predicted: {n}")
        for c, n in zip(CLASS_COLORS, CLASS_NAMES, strict=False)
    ]
    handles += [
        Line2D([], [], ls="none", marker=m, ms=9, mfc=c, mec="black", label=f"observed: {n}")
        for c, m, n in zip(CLASS_COLORS, CLASS_MARKERS, CLASS_NAMES, strict=False)
    ]
    handles += [
        Line2D(
            [],
            [],
            color="black",
            lw=1.6,
            label="predicted boundary: α_j = ρ;\nL = 3 also μ₁(α₁−ρ) = μ₂(α₂−ρ)",
        ),
        Line2D([], [], ls="none", marker="x", color="red", mew=2.5, label="observed ≠ predicted"),
    ]
    fig.legend(handles=handles, loc="outside right center", fontsize=9)
    fig.suptitle(
        "Cor 3.5 — which basis vector ℓ∞-SAM converges to, μ = (1, 2), ρ = 1 "
        "(flows to τ = 10 or blow-up)",
        fontsize=11,
    )
    save(fig, path)


LIMIT_MAP = Figure(
    "fig3_linf_limit_map",
    "linf-SAM limit direction over (alpha_1/rho, alpha_2/rho), mu = (1, 2), L = 2, 3: "
    "Cor 3.5 vs simulated",
    "Does Corollary 3.5 predict the ℓ∞-SAM limit direction over the whole (α₁/ρ, α₂/ρ) plane at "
    "L = 2 and 3, as the simulated limits show it?",
    limit_map_tasks,
    draw_limit_map,
)


if __name__ == "__main__":
    figure_command(__spec__.name, LIMIT_MAP)
