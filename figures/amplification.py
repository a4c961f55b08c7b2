"""Figures 4 and 5: sequential feature amplification and the regime phase diagram.

The phase diagram is drawn for any increasing ``mu`` (:func:`draw_phase_diagram`,
:func:`phase_diagram_file`, used by ``python -m figures.regimes --plot``); figure 5 is its
instance at ``mu = (1, ..., 5)``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

from analysis.amplification import leaders
from analysis.regimes.boundaries import (
    collapse_boundary,
    collapse_certificate_boundary,
    regime3_boundary,
)
from analysis.regimes.inputs import check_mu
from flows.sweep.registry import Result, Task, compute, register

from .common import MU5, Figure, coordinate_colors, format_mu, plt, save, shares_of

# --- Figure 4: sequential feature amplification -------------------------------------------

#: collapse (0.3), amplification (0.4, 0.5, 0.7) and major-from-the-start (1.5) at rho = 1
AMPLIFICATION_ALPHAS = (0.3, 0.4, 0.5, 0.7, 1.5)


def amplification_tasks(quick: bool) -> list[Task]:
    """l2-SAM and GD at L = 2 on mu = (1..5), rho = 1, for several alpha."""
    alphas = AMPLIFICATION_ALPHAS[1:3] if quick else AMPLIFICATION_ALPHAS
    t_max, n = (4.0, 41) if quick else (6.0, 601)
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


def draw_amplification(results: list[Result], quick: bool, path: Path) -> None:
    """Shares against tau, one panel per alpha; l2-SAM solid, GD dashed."""
    alphas = AMPLIFICATION_ALPHAS[1:3] if quick else AMPLIFICATION_ALPHAS
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

# --- Figure 5: regime phase diagram (any mu) -------------------------------------------------

#: alpha/rho range of figure 5 (mu = (1..5))
FIG5_RATIOS = (0.08, 1.6)
FIG5_QUICK = (0.3, 0.5, 1.0)
#: the generic range: from LOW x the collapse certificate to HIGH x the regime-3 boundary
#: (for mu = (1..5) this is about FIG5_RATIOS)
LOW, HIGH = 0.84, 1.86


def phase_ratios(quick: bool, span: tuple[float, float] = FIG5_RATIOS) -> np.ndarray:
    """alpha / rho values of the phase diagram: 48 log-spaced over ``span``; ``quick``: three
    cheap ones (collapsing runs are the slow ones), those of figure 5 or the upper half of span."""
    lo, hi = span
    if not quick:
        return np.geomspace(lo, hi, 48)
    return np.array(FIG5_QUICK) if span == FIG5_RATIOS else np.geomspace(np.sqrt(lo * hi), hi, 3)


def phase_span(mu) -> tuple[float, float]:
    """An alpha / rho range that shows the three regimes of ``mu`` (module constants)."""
    return LOW * collapse_certificate_boundary(mu), HIGH * regime3_boundary(mu)


def phase_horizon(mu, quick: bool) -> tuple[float, int]:
    """(tau_max, n_tau): 6 / mu_1 (the slowest rate sets the time scale), 241 samples."""
    tau_max = 6.0 / float(np.min(mu))
    return (tau_max / 3.0, 21) if quick else (tau_max, 241)


def collapse_boundary_task(params: dict) -> Result:
    """Cached bisection for the collapse boundary (analysis.regimes.boundaries.collapse_boundary)."""
    return {"alpha": np.array(collapse_boundary(params["mu"], 1.0, rtol=params["rtol"]))}


def collapse_boundary_cost(params: dict) -> float:
    """About 2 s a bisection step (one classify run each)."""
    return 2.0 * np.log2(1.0 / params["rtol"])


register("collapse-boundary", collapse_boundary_task, cost=collapse_boundary_cost)


def phase_runs(mu, ratios, tau_max: float, n_tau: int) -> list[Task]:
    """One l2-SAM run per alpha / rho at rho = 1 (scale symmetry: the path depends on alpha / rho)."""
    return [
        Task(
            "simulate",
            {
                "mu": [float(m) for m in mu],
                "algorithm": "l2-sam",
                "depth": 2,
                "alpha": float(r),
                "rho": 1.0,
                "t_max": tau_max,
                "n_points": n_tau,
                "original_time": False,
                "rtol": 1e-8,
            },
        )
        for r in ratios
    ]


def phase_tasks(quick: bool) -> list[Task]:
    """Figure 5: the runs at mu = (1..5) and the collapse bisection."""
    tau_max, n_tau = (2.0, 21) if quick else (6.0, 241)
    return phase_runs(MU5, phase_ratios(quick), tau_max, n_tau) + [
        Task("collapse-boundary", {"mu": MU5, "rtol": 0.3 if quick else 1e-4})
    ]


def draw_phase_diagram(
    mu, ratios: np.ndarray, runs: list[Result], boundary: float, path: Path
) -> None:
    """Leading coordinate over (alpha/rho, tau) for any ``mu``: regimes and boundaries marked.

    ``runs`` are the results of :func:`phase_runs` on ``ratios`` (same horizon), ``boundary``
    the collapse boundary alpha / rho from the flow.
    """
    mu = [float(m) for m in check_mu(mu)]
    ratios = np.asarray(ratios, dtype=float)
    longest = max(runs, key=lambda r: r["t"].size)
    tau = longest["t"]
    # -2 marks samples a run did not reach (it stopped early, status -1): left blank
    lead = np.full((len(runs), tau.size), -2)
    for row, r in zip(lead, runs, strict=False):
        row[: r["t"].size] = leaders(r["log_abs_beta"])
    lead[:, 0] = np.where(lead[:, 1] > -2, lead[:, 1], lead[:, 0])  # no leader at tau = 0 (ties)
    stopped = [float(r) for r, run in zip(ratios, runs, strict=False) if run["t"].size < tau.size]
    d = len(mu)
    colors = np.vstack([[0.85, 0.85, 0.85, 1.0], coordinate_colors(d)])
    cmap = matplotlib.colors.ListedColormap(colors).with_extremes(bad="white")
    fig, ax = plt.subplots(figsize=(8.5, 5.2), constrained_layout=True)
    edges = np.sqrt(ratios[1:] * ratios[:-1])
    y_edges = np.concatenate([[ratios[0] ** 2 / edges[0]], edges, [ratios[-1] ** 2 / edges[-1]]])
    t_edges = np.concatenate([[tau[0]], 0.5 * (tau[1:] + tau[:-1]), [tau[-1]]])
    mesh = ax.pcolormesh(
        t_edges, y_edges, np.ma.masked_less(lead + 1, 0), cmap=cmap, vmin=-0.5, vmax=d + 0.5
    )
    ax.set_yscale("log")
    third = regime3_boundary(mu)
    lines = [
        (boundary, "collapse boundary (flow, bisection)", "-"),
        (collapse_certificate_boundary(mu), "N₀ = ρμ₁: collapse certified below", ":"),
        (third, "N₀ = ρ(μ_d + μ_{d−1}): regime 3 above", "--"),
    ]
    for value, label, style in lines:
        ax.axhline(value, color="#D55E00", ls=style, lw=1.8, label=f"{label}: α/ρ = {value:.4g}")
    lo, hi = y_edges[0], y_edges[-1]
    for a, b, text in (
        (lo, boundary, "regime 1: collapse"),
        (boundary, third, "regime 2: minor first"),
        (third, hi, "regime 3: major from start"),
    ):
        a, b = max(a, lo), min(b, hi)
        if b > a:
            ax.text(
                tau[-1] * 0.98,
                np.sqrt(a * b),
                text,
                ha="right",
                va="center",
                fontsize=9,
                bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none"},
            )
    ax.set_ylim(lo, hi)
    cbar = fig.colorbar(mesh, ax=ax, ticks=range(0, d + 1))
    cbar.ax.set_yticklabels(["β = 0"] + [f"j = {j + 1}" for j in range(d)])
    cbar.set_label("leading coordinate argmax_j |β_j(τ)|")
    ax.set(
        xlabel="rescaled time τ",
        ylabel="initialization scale α / ρ",
        title=f"ℓ2-SAM, L = 2, μ = {format_mu(mu)}: leading coordinate over (α/ρ, τ)",
    )
    if stopped:
        ax.plot(
            [],
            [],
            ls="",
            marker="s",
            mfc="white",
            mec="0.5",
            label=f"blank: run stopped early ({len(stopped)} of {len(runs)})",
        )
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)
    save(fig, path)


def draw_phase(results: list[Result], quick: bool, path: Path) -> None:
    """Figure 5 from the results of :func:`phase_tasks`."""
    draw_phase_diagram(MU5, phase_ratios(quick), results[:-1], float(results[-1]["alpha"]), path)


def phase_diagram_file(
    mu, path: str | Path, boundary: float | None = None, quick: bool = False
) -> None:
    """Compute and draw the phase diagram of any increasing ``mu``.

    ``boundary`` is the collapse boundary alpha / rho if already known (else bisected here).
    """
    mu = check_mu(mu)
    ratios = phase_ratios(quick, phase_span(mu))
    runs = [compute(t) for t in phase_runs(mu, ratios, *phase_horizon(mu, quick))]
    if boundary is None:
        boundary = collapse_boundary(mu, 1.0, rtol=0.3 if quick else 1e-4)
    draw_phase_diagram(mu, ratios, runs, boundary, Path(path))


REGIMES = Figure(
    "fig5_regimes",
    "l2-SAM leading coordinate over (alpha/rho, tau): the three regimes",
    "Where in (α/ρ, τ) do the three regimes of ℓ2-SAM at L = 2 (collapse, minor-first "
    "amplification, major from the start) lie, and do the certified, analytic and bisected "
    "boundaries separate them?",
    phase_tasks,
    draw_phase,
)
