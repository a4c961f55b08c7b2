"""Figures 4 and 5: sequential feature amplification and the regime phase diagram."""
from __future__ import annotations

from pathlib import Path

import numpy as np

import matplotlib

from ..cache import Result, Task, register
from .common import MU5, Figure, coordinate_colors, plt, save, shares_of

# --- Figure 4: sequential feature amplification -------------------------------------------

#: collapse (0.3), amplification (0.4, 0.5, 0.7) and major-from-the-start (1.5) at rho = 1
AMPLIFICATION_ALPHAS = (0.3, 0.4, 0.5, 0.7, 1.5)


def amplification_tasks(quick: bool) -> list[Task]:
    """l2-SAM and GD at L = 2 on mu = (1..5), rho = 1, for several alpha."""
    alphas = AMPLIFICATION_ALPHAS[1:3] if quick else AMPLIFICATION_ALPHAS
    t_max, n = (4.0, 41) if quick else (6.0, 601)
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
            ax.plot(sam["t"], shares_of(sam)[:, j], color=color, lw=2.2,
                    label=f"j={j + 1} (μ={MU5[j]:g})")
            ax.plot(gd["t"], shares_of(gd)[:, j], color=color, lw=1.2, ls="--")
        collapse = sam["event_tau"][sam["event_kind"] == "collapse"]
        if collapse.size:
            ax.axvline(collapse[0], color="#D55E00", ls=":", lw=1.5)
            ax.text(collapse[0] + 0.1, 0.5, f"collapse:\nβ = 0 from\nτ = {collapse[0]:.3g}",
                    color="#D55E00", fontsize=9, va="center", ha="left")
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


# --- Figure 5: regime phase diagram ------------------------------------------------------

def phase_ratios(quick: bool) -> np.ndarray:
    """alpha / rho values of the phase diagram (log-spaced)."""
    return np.array([0.3, 0.5, 1.0]) if quick else np.geomspace(0.08, 1.6, 48)


def collapse_boundary_task(params: dict) -> Result:
    """Cached bisection for the collapse boundary (analysis.regimes.collapse_boundary)."""
    from analysis.regimes import collapse_boundary

    return {"alpha": np.array(collapse_boundary(params["mu"], 1.0, rtol=params["rtol"]))}


register("collapse-boundary", collapse_boundary_task)


def phase_tasks(quick: bool) -> list[Task]:
    """One l2-SAM run per alpha/rho (rho = 1, scale symmetry) and the collapse bisection."""
    tau_max, n_tau = (2.0, 21) if quick else (6.0, 241)
    runs = [Task("simulate", {"mu": MU5, "algorithm": "l2-sam", "depth": 2, "alpha": float(r),
                              "rho": 1.0, "t_max": tau_max, "n_points": n_tau,
                              "original_time": False, "rtol": 1e-8})
            for r in phase_ratios(quick)]
    return runs + [Task("collapse-boundary", {"mu": MU5, "rtol": 0.3 if quick else 1e-4})]


def draw_phase(results: list[Result], quick: bool, path: Path) -> None:
    """Leading coordinate over (alpha/rho, tau), regimes and boundaries marked."""
    from analysis.amplification import leaders
    from analysis.regimes import collapse_certificate_boundary, regime3_boundary

    ratios = phase_ratios(quick)
    runs, boundary = results[:-1], float(results[-1]["alpha"])
    tau = runs[0]["t"]
    lead = np.array([leaders(r["log_abs_beta"]) for r in runs])
    lead[:, 0] = lead[:, 1]
    d = len(MU5)
    colors = np.vstack([[0.85, 0.85, 0.85, 1.0], coordinate_colors(d)])
    cmap = matplotlib.colors.ListedColormap(colors)
    fig, ax = plt.subplots(figsize=(8.5, 5.2), constrained_layout=True)
    edges = np.sqrt(ratios[1:] * ratios[:-1])
    y_edges = np.concatenate([[ratios[0] ** 2 / edges[0]], edges, [ratios[-1] ** 2 / edges[-1]]])
    t_edges = np.concatenate([[tau[0]], 0.5 * (tau[1:] + tau[:-1]), [tau[-1]]])
    mesh = ax.pcolormesh(t_edges, y_edges, lead + 1, cmap=cmap, vmin=-0.5, vmax=d + 0.5)
    ax.set_yscale("log")
    lines = [(boundary, "collapse boundary (flow, bisection)", "-"),
             (collapse_certificate_boundary(MU5), "N₀ = ρμ₁: collapse certified below", ":"),
             (regime3_boundary(MU5), "N₀ = ρ(μ_d + μ_{d−1}): regime 3 above", "--")]
    for value, label, style in lines:
        ax.axhline(value, color="#D55E00", ls=style, lw=1.8, label=f"{label}: α/ρ = {value:.4g}")
    for y, text in ((np.sqrt(ratios[0] * boundary), "regime 1: collapse"),
                    (np.sqrt(boundary * regime3_boundary(MU5)), "regime 2: minor first"),
                    (np.sqrt(regime3_boundary(MU5) * ratios[-1]), "regime 3: major from start")):
        ax.text(tau[-1] * 0.98, y, text, ha="right", va="center", fontsize=9,
                bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none"})
    cbar = fig.colorbar(mesh, ax=ax, ticks=range(0, d + 1))
    cbar.ax.set_yticklabels(["β = 0"] + [f"j = {j + 1}" for j in range(d)])
    cbar.set_label("leading coordinate argmax_j |β_j(τ)|")
    ax.set(xlabel="rescaled time τ", ylabel="initialization scale α / ρ",
           title="ℓ2-SAM, L = 2, μ = (1,…,5): leading coordinate over (α/ρ, τ)")
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)
    save(fig, path)


def draw_phase_diagram_file(mu, path: str) -> None:
    """Compute and draw the phase diagram for any ``mu`` (used by ``analysis.regimes --plot``)."""
    from ..cache import compute

    if list(mu) != MU5:
        raise ValueError("the phase-diagram plot is drawn for mu = (1,...,5) only")
    draw_phase([compute(t) for t in phase_tasks(False)], False, Path(path))


FIGURES = [
    Figure("fig4_amplification",
           "l2-SAM shares |beta_j|/|beta|_1 vs tau for several alpha, GD beside",
           amplification_tasks, draw_amplification),
    Figure("fig5_regimes", "l2-SAM leading coordinate over (alpha/rho, tau): the three regimes",
           phase_tasks, draw_phase),
]
