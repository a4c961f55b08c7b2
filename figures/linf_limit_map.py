"""Figure 3 (``fig3_linf_limit_map``): which basis vector l_inf-SAM converges to (Cor 3.5).

On mu = (1, 2), over a grid of (alpha_1 / rho, alpha_2 / rho) at L = 2 and 3: Cor 3.5's
prediction (:func:`analysis.limits.predict_linf_limit`) as a background map with its
boundaries, and the limits observed on simulated flows
(:func:`analysis.limits.observed_linf_limit`) as markers. The runs are the task kind
``'linf_limit'`` (:func:`run_linf_limit`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from analysis.limits import observed_linf_limit, predict_linf_limit, predict_linf_limits
from flows.data import single_example
from flows.integrator.driver import simulate
from flows.sweep.registry import Result, Task, flow_kernels, register

from . import style
from .common import STOPPED_MARK, Figure, Setting, figure_command, plt, save, show, stopped_early
from .linf_coordinates import RHO, solver_options

#: Side of the map in alpha_j / rho.
MAP_MAX = 2.6
#: Class names by code (0: no divergent coordinate, j + 1: e_j).
NO_LIMIT = "none (β bounded)"
#: How a cell whose observed limit differs from the prediction is marked.
MISMATCH_MARK: dict[str, Any] = {
    "ls": "",
    "marker": "D",
    "ms": 10.0,
    "mfc": "none",
    "mec": "black",
    "mew": 1.2,
}


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


def limit_map_tasks(s: Setting) -> list[Task]:
    """One ``linf_limit`` run per depth and grid point (alpha_2 outer, alpha_1 inner)."""
    return [
        Task(
            "linf_limit",
            {
                "mu": list(s.mu),
                "alpha": [a1 * s.rho, a2 * s.rho],
                "rho": s.rho,
                "depth": L,
                "t_max": s.t_max,
                "n_points": 11,
                **solver_options(s.quick),
            },
        )
        for L in s.depths
        for a2 in s.grid
        for a1 in s.grid
    ]


def _code(j: int | None) -> int:
    return 0 if j is None else j + 1


def limit_map_agreement(results: list[Result], s: Setting) -> dict:
    """Per depth: (alpha_1 / rho, alpha_2 / rho, predicted code, observed code, result) rows
    and the number of cells where the two agree."""
    it = iter(results)
    out = {}
    for L in s.depths:
        rows = []
        for a2 in s.grid:
            for a1 in s.grid:
                r = next(it)
                pred = _code(predict_linf_limit(list(s.mu), [a1 * s.rho, a2 * s.rho], s.rho, L))
                rows.append((a1, a2, pred, int(r["observed"]) + 1, r))
        agree = sum(p == o for _, _, p, o, _ in rows)
        out[L] = {"rows": rows, "agree": agree, "n": len(rows)}
    return out


def class_colors() -> list:
    """Colours of the classes: grey for no limit, then e_1 and e_2 in the coordinate colours."""
    return ["#d9d9d9", *style.coordinate_colors(2)]


def class_names(mu) -> list[str]:
    """Legend names of the classes (0: none, 1: e_1 minor, 2: e_2 major) for ``mu``."""
    return [NO_LIMIT, rf"$e_1$ ($\mu_1$ = {mu[0]:g})", rf"$e_2$ ($\mu_2$ = {mu[1]:g})"]


#: Markers of the observed classes.
CLASS_MARKERS = ["o", "s", "^"]


def _draw_depth(ax, L: int, info: dict, s: Setting, fine: np.ndarray) -> bool:
    """One depth: the predicted classes (background) and their boundaries (contours), the
    observed limits (markers), mismatches (black diamonds) and runs that ended early (×);
    whether any run ended early."""
    colors = class_colors()
    a1, a2 = np.meshgrid(fine * s.rho, fine * s.rho)  # rows: alpha_2, columns: alpha_1
    classes = 1 + predict_linf_limits(list(s.mu), np.stack([a1, a2], axis=-1), s.rho, L)
    extent = (0.0, MAP_MAX, 0.0, MAP_MAX)
    ax.imshow(
        classes,
        origin="lower",
        extent=extent,
        cmap=ListedColormap(colors),
        vmin=-0.5,
        vmax=2.5,
        alpha=0.45,
        interpolation="nearest",
        aspect="auto",
    )
    ax.contour(fine, fine, classes, levels=[0.5, 1.5], colors="black", linewidths=0.9)
    stopped = False
    for a1_, a2_, pred, obs, r in info["rows"]:
        ax.plot(
            a1_, a2_, ls="", marker=CLASS_MARKERS[obs], ms=5, mfc=colors[obs], mec="black", mew=0.6
        )
        if obs != pred:
            ax.plot(a1_, a2_, **MISMATCH_MARK)
        if stopped_early(r, f"l_inf-SAM at L = {L}, alpha/rho = ({a1_:g}, {a2_:g})", s):
            ax.plot(a1_, a2_, **STOPPED_MARK)
            stopped = True
    ax.set(xlim=(0, MAP_MAX), ylim=(0, MAP_MAX))
    ax.set_box_aspect(1.0)
    ax.set_xlabel(rf"$\alpha_1/\rho$ (minor, $\mu_1$ = {s.mu[0]:g})")
    ax.set_ylabel(rf"$\alpha_2/\rho$ (major, $\mu_2$ = {s.mu[1]:g})")
    ax.set_title(f"$L$ = {L}")
    return stopped


def draw_limit_map(results: list[Result], s: Setting, path: Path) -> None:
    """One panel per depth: predicted classes as background, observed limits as markers."""
    agreement = limit_map_agreement(results, s)
    n_fine = 60 if s.quick else 200
    fine = np.linspace(MAP_MAX / (2 * n_fine), MAP_MAX - MAP_MAX / (2 * n_fine), n_fine)
    n = len(s.depths)
    fig, axes = plt.subplots(
        1,
        n,
        figsize=(style.DOUBLE, style.DOUBLE / max(n, 2) + 1.0),
        squeeze=False,
        constrained_layout=True,
    )
    stopped = False
    for ax, L in zip(axes[0], s.depths, strict=True):
        stopped |= _draw_depth(ax, L, agreement[L], s, fine)
    _legend(fig, agreement, stopped, s)
    style.panel_letters(axes[0])
    save(fig, path)


def _legend(fig, agreement: dict, stopped: bool, s: Setting) -> None:
    """Predicted and observed classes, the boundary, the mismatches (counted), below."""
    colors, names = class_colors(), class_names(s.mu)
    handles: list = [
        Patch(facecolor=c, alpha=0.45, edgecolor="none", label=f"predicted: {n}")
        for c, n in zip(colors, names, strict=True)
    ]
    handles += [
        Line2D([], [], ls="", marker=m, ms=5, mfc=c, mec="black", label=f"observed: {n}")
        for c, m, n in zip(colors, CLASS_MARKERS, names, strict=True)
    ]
    wrong = sum(a["n"] - a["agree"] for a in agreement.values())
    total = sum(a["n"] for a in agreement.values())
    handles += [
        Line2D([], [], color="black", lw=0.9, label="predicted boundary (Cor 3.5)"),
        Line2D([], [], label=f"observed ≠ predicted: {wrong} of {total} runs", **MISMATCH_MARK),
    ]
    if stopped:
        handles.append(Line2D([], [], label="run ended early", **STOPPED_MARK))
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncol=3,
        title=rf"$\mu$ = {show(s.mu)}, $\rho$ = {s.rho:g}; flows to $\tau$ = {s.t_max:g} or a "
        rf"blow-up from $\alpha_j/\rho$ in {show(s.grid)}",
    )


def check_limit_map(s: Setting) -> str | None:
    """A setting's problem: mu not two increasing values, a depth below 2, an empty grid."""
    if len(s.mu) != 2 or not 0 < s.mu[0] < s.mu[1]:
        return f"mu must be two increasing positive values (minor, major), got {show(s.mu)}"
    if min(s.depths) < 2:
        return f"depths must be at least 2 (Cor 3.5), got {show(s.depths)}"
    return None if s.grid else "grid must have at least one value"


LIMIT_MAP = Figure(
    "fig3_linf_limit_map",
    "ℓ∞-SAM limit direction over (α₁/ρ, α₂/ρ), μ = {mu}, ρ = {rho}, L = {depths}: Cor 3.5 "
    "against simulated flows",
    "Background: Cor 3.5's prediction j* = argmax over α_j > ρ of μ_j (α_j − ρ)^(L−2) (none if "
    "no α_j > ρ), with its boundaries; markers: the limit read from a flow at each grid point "
    "(α/ρ in {grid}), a black diamond where it differs from the prediction. Does Corollary 3.5 "
    "predict the ℓ∞-SAM limit direction over the whole (α₁/ρ, α₂/ρ) plane at L = {depths} "
    "(μ = {mu}, ρ = {rho}), as the simulated limits show it?",
    limit_map_tasks,
    draw_limit_map,
    params={
        "mu": (1.0, 2.0),
        "rho": RHO,
        "depths": (2, 3),
        "grid": (0.3, 0.6, 1.0, 1.2, 1.5, 1.9, 2.4),
        "t_max": 10.0,
    },
    quick={"grid": (0.6, 1.5)},
    example={"mu": (1.0, 2.5), "rho": 0.8, "grid": (0.7, 1.6)},
    check=check_limit_map,
)


if __name__ == "__main__":
    figure_command(__spec__.name, LIMIT_MAP)
