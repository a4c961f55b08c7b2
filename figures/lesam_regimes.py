"""Figure 12 (``fig12_lesam_regimes``): where LE-SAM's regimes lie (settings:
:mod:`figures.lesam`).

LE-SAM's regimes on the single example ``mu = (1, ..., 5)``, L = 2, over ``(sigma, rho_max)``
at ``alpha = 0.4`` and over ``alpha`` at the budget matched to l2-SAM, with boundaries by
bisection (:func:`analysis.lesam.classify_lesam`, :func:`analysis.lesam.scan_regimes`; task kinds
``'lesam-classify'`` and ``'lesam-scan'``).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

from analysis.lesam.regimes import LESAM_REGIMES
from analysis.lesam.stall import SIGMA_CRITICAL, stall_point
from flows.sweep.registry import Result, Task

from .common import MU5, OKABE_ITO, Figure, Setting, figure_command, plt, save
from .lesam import ALPHA, G0, OFFICIAL, SIGMA0

FIG12_SIGMAS = (0.02, 0.035, 0.06, 0.1, 0.18, 0.3, 0.5, 0.7)
FIG12_RHO_MAX = tuple(float(r) for r in np.geomspace(0.1, 10.0, 9))
FIG12_ALPHAS = tuple(float(a) for a in np.geomspace(0.05, 4.0, 11))
FIG12_RHO_MAX_FIXED = 3.0
REGIME_COLORS = {
    0: "white",
    1: "#999999",
    2: OKABE_ITO[2],
    3: OKABE_ITO[4],
    4: OKABE_ITO[1],
    5: OKABE_ITO[7],
}


def fig12_tasks(s: Setting) -> list[Task]:
    """The (sigma, rho_max) map at alpha = 0.4 (one task per pair of sigma rows), the scan
    along rho_max at sigma = SIGMA0 and the scan along alpha at (SIGMA0, 3), both bisected."""
    sigmas = FIG12_SIGMAS[::4] if s.quick else FIG12_SIGMAS
    rho_max = FIG12_RHO_MAX[::4] if s.quick else FIG12_RHO_MAX
    alphas = FIG12_ALPHAS[::4] if s.quick else FIG12_ALPHAS
    rtol = 0.2 if s.quick else 5e-3
    rows = [
        [[ALPHA, sigma, r] for sigma in sigmas[k : k + 2] for r in rho_max]
        for k in range(0, len(sigmas), 2)
    ]
    return [Task("lesam-classify", {"mu": MU5, "points": pts, "n_points": 121}) for pts in rows] + [
        Task(
            "lesam-scan",
            {
                "mu": MU5,
                "parameter": "rho_max",
                "grid": list(rho_max),
                "fixed": {"alpha": ALPHA, "sigma": SIGMA0},
                "rtol": rtol,
            },
        ),
        Task(
            "lesam-scan",
            {
                "mu": MU5,
                "parameter": "alpha",
                "grid": list(alphas),
                "fixed": {"sigma": SIGMA0, "rho_max": FIG12_RHO_MAX_FIXED},
                "rtol": rtol,
            },
        ),
    ]


def _edges(values) -> np.ndarray:
    v = np.log(np.asarray(values, dtype=float))
    mid = 0.5 * (v[1:] + v[:-1])
    return np.exp(np.concatenate([[2 * v[0] - mid[0]], mid, [2 * v[-1] - mid[-1]]]))


def _boundary_text(scan: Result) -> list[str]:
    return [
        f"{LESAM_REGIMES[int(b)]} | {LESAM_REGIMES[int(a)]}: {np.sqrt(lo * hi):.4g}"
        + ("" if ok else " (not converged)")
        for lo, hi, b, a, ok in zip(
            scan["lower"],
            scan["upper"],
            scan["below"],
            scan["above"],
            scan["converged"],
            strict=True,
        )
    ]


def draw_fig12(results: list[Result], s: Setting, path: Path) -> None:
    """Left: regime map over (sigma, rho_max) with analytic lines and bisected boundaries;
    right: regimes and leader sequences along alpha with bisected boundaries."""
    sigmas = np.array(FIG12_SIGMAS[::4] if s.quick else FIG12_SIGMAS)
    rho_max = np.array(FIG12_RHO_MAX[::4] if s.quick else FIG12_RHO_MAX)
    alphas = np.array(FIG12_ALPHAS[::4] if s.quick else FIG12_ALPHAS)
    grid = np.concatenate([r["regime"] for r in results[:-2]]).reshape(len(sigmas), len(rho_max))
    scan_r, scan_a = results[-2], results[-1]
    fig, (ax, bx) = plt.subplots(
        1, 2, figsize=(15, 6.6), constrained_layout=True, gridspec_kw={"width_ratios": [1.15, 1]}
    )
    _draw_regime_map(ax, sigmas, rho_max, grid)
    _draw_map_lines(ax, sigmas, rho_max, scan_r)
    _draw_map_legend(ax, sigmas, rho_max, scan_r)
    edges = _draw_alpha_bands(bx, alphas, scan_a)
    _draw_alpha_notes(bx, scan_a)
    bx.set(
        xscale="log",
        xlim=edges[[0, -1]],
        ylim=(0, 1),
        yticks=[],
        xlabel="initialization scale α",
        title=f"(b) along α at σ = {SIGMA0:.4f}, ρ_max = {FIG12_RHO_MAX_FIXED:g} "
        "(text: leader sequence)",
    )
    handles = [
        matplotlib.patches.Patch(color=REGIME_COLORS[k], label=f"{k}: {name}")
        for k, name in LESAM_REGIMES.items()
    ]
    fig.legend(handles=handles, loc="outside right center", fontsize=9, title="regime")
    fig.suptitle(
        "LE-SAM regimes, μ = (1,…,5), L = 2, uniform α: collapse, stall, minor first, "
        "major from the start" + ("  [QUICK]" if s.quick else ""),
        fontsize=11,
    )
    save(fig, path)


def _boundary_box(ax, text: str, y: float = 0.99) -> None:
    """A boxed note in the upper right corner of ``ax`` (top at ``y``, axes fraction)."""
    ax.text(
        0.99,
        y,
        text,
        transform=ax.transAxes,
        ha="right",
        va="top",
        fontsize=8,
        bbox=dict(fc="white", alpha=0.9, ec="0.6"),
    )


def _draw_regime_map(ax, sigmas: np.ndarray, rho_max: np.ndarray, grid: np.ndarray) -> None:
    """Panel (a): the regime of every classified (sigma, rho_max) cell."""
    cmap = matplotlib.colors.ListedColormap([REGIME_COLORS[k] for k in range(6)])
    ax.pcolormesh(_edges(sigmas), _edges(rho_max), grid.T, cmap=cmap, vmin=-0.5, vmax=5.5)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="loss budget σ (constant)",
        ylabel="cap ρ_max",
        title=f"(a) LE-SAM regime over (σ, ρ_max) at α = {ALPHA:g} (cells: classify_lesam)",
    )
    ax.set_xticks([0.02, 0.05, 0.1, 0.2, 0.5], ["0.02", "0.05", "0.1", "0.2", "0.5"])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def _draw_map_lines(ax, sigmas: np.ndarray, rho_max: np.ndarray, scan_r: Result) -> None:
    """Panel (a)'s analytic lines (stall admissible, sigma_c, the corner where the first leader
    is d), the boundaries bisected along rho_max and LE-SAM's official setting."""
    s_line = np.geomspace(sigmas[0] * 0.7, SIGMA_CRITICAL * 0.9999, 200)
    radius = [stall_point(MU5, s).radius for s in s_line]
    ax.plot(s_line, radius, color="black", lw=1.8, label="stall admissible above: ρ_max = √2 a*(σ)")
    ax.axvline(
        SIGMA_CRITICAL,
        color="black",
        ls="--",
        lw=1.5,
        label=f"σ_c = {SIGMA_CRITICAL:.4f}: no stall point to the right",
    )
    n0 = ALPHA * np.sqrt(2 * np.sum(np.square(MU5)))
    rho3 = n0 / (MU5[-1] + MU5[-2])
    corner = G0 * rho3
    ax.plot(
        [corner, corner, sigmas[-1] * 1.4],
        [rho_max[-1] * 1.4, rho3, rho3],
        color="#0072B2",
        lw=2.2,
        ls=":",
        label=f"first leader = d outside the corner σ > {corner:.3f}, ρ_max > {rho3:.3f}",
    )
    for lo, hi in zip(scan_r["lower"], scan_r["upper"], strict=True):
        ax.plot(SIGMA0, np.sqrt(lo * hi), marker="D", ms=8, color="white", mec="black")
    ax.plot(
        [],
        [],
        ls="",
        marker="D",
        color="white",
        mec="black",
        label=f"bisected along ρ_max at σ = {SIGMA0:.4f}",
    )
    ax.plot(
        OFFICIAL["sigma"],
        OFFICIAL["rho_max"],
        marker="*",
        ms=15,
        color="black",
        label="LE-SAM's official (σ, ρ_max) = (0.35, 0.3)",
        ls="",
    )


def _draw_map_legend(ax, sigmas: np.ndarray, rho_max: np.ndarray, scan_r: Result) -> None:
    """Panel (a)'s limits, legend and the bisected boundaries as text."""
    ax.set_xlim(_edges(sigmas)[[0, -1]])
    ax.set_ylim(_edges(rho_max)[[0, -1]])
    ax.legend(loc="lower left", fontsize=8, framealpha=0.92)
    _boundary_box(ax, "\n".join(_boundary_text(scan_r)))


def _draw_alpha_bands(bx, alphas: np.ndarray, scan_a: Result) -> np.ndarray:
    """Panel (b): one band per alpha in its regime's colour, ending at the bisected boundaries
    (black lines), with the leader sequence written in it; returns the band edges."""
    edges = _edges(alphas)
    for lo, hi in zip(scan_a["lower"], scan_a["upper"], strict=True):  # bands end at boundaries
        k = int(np.searchsorted(alphas, lo, side="right"))
        edges[k] = np.sqrt(lo * hi)
    for k, (reg, text) in enumerate(zip(scan_a["regime"], scan_a["leaders"], strict=True)):
        bx.axvspan(edges[k], edges[k + 1], color=REGIME_COLORS[int(reg)], lw=0)
        middle = np.sqrt(edges[k] * edges[k + 1])  # inside the band, off the boundary lines
        bx.text(middle, 0.03, text, rotation=90, ha="center", va="bottom", fontsize=8.5)
    for lo, hi in zip(scan_a["lower"], scan_a["upper"], strict=True):
        bx.axvline(np.sqrt(lo * hi), color="black", lw=1.5)
    return edges


def _draw_alpha_notes(bx, scan_a: Result) -> None:
    """Panel (b)'s notes: the bisected boundaries, and l2-SAM's boundaries at rho = rho_max."""
    _boundary_box(bx, "bisected boundaries (α):\n" + "\n".join(_boundary_text(scan_a)))
    _boundary_box(
        bx,
        f"ℓ2-SAM with ρ = ρ_max = {FIG12_RHO_MAX_FIXED:g}:\ncollapse below "
        f"α = {0.3473 * FIG12_RHO_MAX_FIXED:.4g}, regime 3 above {0.8581 * FIG12_RHO_MAX_FIXED:.4g}\n"
        "(fig. 5, α/ρ = 0.3473, 0.8581)",
        y=0.70,
    )


REGIMES = Figure(
    "fig12_lesam_regimes",
    "LE-SAM regime map over (sigma, rho_max) at alpha=0.4 and over alpha, with bisected boundaries",
    "Where do LE-SAM's regimes (collapse, stall at a finite margin, minor first, major from the "
    "start, major-minor-major) lie over the budget σ, the cap ρ_max and the initialization α, "
    "and where are the boundaries?",
    fig12_tasks,
    draw_fig12,
)


if __name__ == "__main__":
    figure_command(__spec__.name, REGIMES)
