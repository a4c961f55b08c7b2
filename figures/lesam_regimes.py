"""Figures 12 and 12b: where LE-SAM's regimes lie on the single example ``D_mu``, L = 2
(settings: :mod:`figures.lesam`), in the regime colours of figure 5
(:data:`figures.style.REGIME_COLORS`).

* ``fig12_lesam_regimes``: the regime over ``(sigma, rho_max)`` at one ``alpha`` (every cell
  classified, :func:`analysis.lesam.classify_lesam`), with the analytic lines (stall
  admissible, ``sigma_c``, the corner outside which the first leader is ``e_d``), the
  boundaries bisected along ``rho_max`` at the matched budget
  (:func:`analysis.lesam.scan_regimes`) and LE-SAM's official ``(sigma, rho_max)``.
* ``fig12b_lesam_regimes_alpha``: the regime along ``alpha`` at one ``(sigma, rho_max)``, the
  boundaries bisected, the leader sequence written in each band, and l2-SAM's boundaries with
  ``rho = rho_max`` (figure 5's collapse boundary, cached with it, and the analytic regime-3
  boundary).

Task kinds ``'lesam-classify'`` and ``'lesam-scan'`` (:mod:`figures.lesam`) and figure 5's
``'collapse-boundary'`` (:mod:`figures.regimes`).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

from analysis.lesam.radius import initial_gradient_norm
from analysis.lesam.regimes import LESAM_REGIMES
from analysis.lesam.stall import SIGMA_CRITICAL, stall_point
from analysis.regimes.boundaries import regime3_boundary
from flows.data import single_example
from flows.sweep.registry import Result, Task

from . import (
    regimes,  # noqa: F401  (registers figure 5's 'collapse-boundary' task kind)
    style,
)
from .common import MU5, Figure, Setting, figure_command, format_mu, plt, save
from .lesam import ALPHA, CAP, DEPTH, OFFICIAL, RHO, SIGMA0

FIG12_SIGMAS = (0.02, 0.035, 0.06, 0.1, 0.18, 0.3, 0.5, 0.7)
FIG12_RHO_MAX = tuple(float(r) for r in np.geomspace(0.1, 10.0, 9))
FIG12_ALPHAS = tuple(float(a) for a in np.geomspace(0.05, 4.0, 11))
#: The regime names by the classifier's number (0: undecided).
NAMES = {0: "undecided", **LESAM_REGIMES}


def regime_color(k: int) -> str:
    """The colour of regime number ``k`` (by its name, shared with figure 5)."""
    return style.REGIME_COLORS[NAMES[int(k)]]


def regime_handles() -> list:
    """One legend patch per regime."""
    return [
        matplotlib.patches.Patch(fc=regime_color(k), ec="0.5", lw=0.4, label=name)
        for k, name in NAMES.items()
    ]


def g0(s: Setting) -> float:
    """``||grad L(theta(0))||`` on ``D_mu`` at the setting's alpha, L = 2."""
    return initial_gradient_norm(single_example(s.mu), s.alpha, DEPTH)


def map_tasks(s: Setting) -> list[Task]:
    """The (sigma, rho_max) map at alpha (one task per pair of sigma rows), and the scan along
    rho_max at the budget matched to l2-SAM with radius rho, bisected."""
    rows = [
        [[s.alpha, sigma, r] for sigma in s.sigmas[k : k + 2] for r in s.rho_max]
        for k in range(0, len(s.sigmas), 2)
    ]
    mu = list(s.mu)
    return [Task("lesam-classify", {"mu": mu, "points": pts, "n_points": 121}) for pts in rows] + [
        Task(
            "lesam-scan",
            {
                "mu": mu,
                "parameter": "rho_max",
                "grid": list(s.rho_max),
                "fixed": {"alpha": s.alpha, "sigma": s.rho * g0(s)},
                "rtol": s.rtol,
            },
        )
    ]


def _edges(values) -> np.ndarray:
    """Cell edges (geometric midpoints) around log-spaced ``values``."""
    v = np.log(np.asarray(values, dtype=float))
    if v.size == 1:
        return np.exp(v[0] + np.array([-0.5, 0.5]))
    mid = 0.5 * (v[1:] + v[:-1])
    return np.exp(np.concatenate([[2 * v[0] - mid[0]], mid, [2 * v[-1] - mid[-1]]]))


def draw_map(results: list[Result], s: Setting, path: Path) -> None:
    """The regime map over (sigma, rho_max) with the analytic lines, the bisected boundaries
    and the official setting; the legend on the right."""
    sigmas, rho_max = np.array(s.sigmas), np.array(s.rho_max)
    grid = np.concatenate([r["regime"] for r in results[:-1]]).reshape(len(sigmas), len(rho_max))
    fig, ax = plt.subplots(figsize=(style.DOUBLE, 3.3), constrained_layout=True)
    cmap = matplotlib.colors.ListedColormap([regime_color(k) for k in NAMES])
    ax.pcolormesh(
        _edges(sigmas), _edges(rho_max), grid.T, cmap=cmap, vmin=-0.5, vmax=len(NAMES) - 0.5
    )
    lines = _map_lines(ax, s, results[-1])
    ax.set(
        xscale="log",
        yscale="log",
        xlim=_edges(sigmas)[[0, -1]],
        ylim=_edges(rho_max)[[0, -1]],
        xlabel="loss budget σ (constant)",
        ylabel=f"cap {CAP}",
        title=rf"LE-SAM's regime, $\mu$ = {format_mu(s.mu)}, L = 2, $\alpha$ = {s.alpha:g}",
    )
    lo, hi = ax.get_xlim()
    ticks = [t for t in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0) if lo <= t <= hi]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    fig.legend(handles=regime_handles() + lines, loc="outside right center", title="regime", ncol=1)
    save(fig, path)


def _map_lines(ax, s: Setting, scan: Result) -> list:
    """The stall-admissible curve, sigma_c, the first-leader corner, the bisected boundaries
    and the official setting; returns their legend handles."""
    mu = np.asarray(s.mu, dtype=float)
    lo_sigma = min(s.sigmas) * 0.7
    s_line = np.geomspace(lo_sigma, SIGMA_CRITICAL * 0.9999, 200)
    points = [stall_point(mu, x) for x in s_line]
    radius = [np.nan if p is None else p.radius for p in points]
    ax.plot(
        s_line,
        radius,
        color="black",
        lw=1.2,
        label=rf"stall admissible above: {CAP} = $\sqrt{{2}}\,a^*(\sigma)$",
    )
    ax.axvline(
        SIGMA_CRITICAL,
        color="black",
        ls=(0, (4, 2)),
        lw=1.0,
        label=rf"$\sigma_c$ = {SIGMA_CRITICAL:.3g}: no stall point beyond",
    )
    n0 = s.alpha * np.sqrt(2 * np.sum(np.square(mu)))
    rho3 = n0 / (mu[-1] + mu[-2])
    corner = g0(s) * rho3
    ax.plot(
        [corner, corner, max(s.sigmas) * 1.4],
        [max(s.rho_max) * 1.4, rho3, rho3],
        color=style.BLUE,
        lw=1.5,
        ls=(0, (1, 1.2)),
        label=rf"first leader $e_{{{mu.size}}}$ outside this corner",
    )
    sigma_scan = s.rho * g0(s)
    for lo, hi in zip(scan["lower"], scan["upper"], strict=True):
        ax.plot(sigma_scan, np.sqrt(lo * hi), marker="D", ms=5, color="white", mec="black")
    ax.plot(
        OFFICIAL["sigma"], OFFICIAL["rho_max"], marker="*", ms=9, color="black", ls="",
        label=f"LE-SAM's official (σ, {CAP}) = ({OFFICIAL['sigma']:g}, {OFFICIAL['rho_max']:g})",
    )  # fmt: skip
    handles = ax.get_lines()
    bisected = plt.Line2D(
        [], [], ls="", marker="D", ms=5, color="white", mec="black",
        label=f"boundaries bisected along {CAP} at σ = {sigma_scan:.3g}",
    )  # fmt: skip
    return [h for h in handles if not h.get_label().startswith("_")] + [bisected]


def alpha_tasks(s: Setting) -> list[Task]:
    """The scan along alpha at (sigma, rho_max), bisected, and figure 5's collapse boundary of
    l2-SAM (alpha / rho) on the same mu."""
    return [
        Task(
            "lesam-scan",
            {
                "mu": list(s.mu),
                "parameter": "alpha",
                "grid": list(s.alphas),
                "fixed": {"sigma": s.sigma, "rho_max": s.rho_max},
                "rtol": s.rtol,
            },
        ),
        l2_regimes_task(s),
    ]


def l2_regimes_task(s: Setting) -> Task:
    """Figure 5's task: l2-SAM's collapse boundary alpha / rho on ``mu`` (bisection on the
    flow, :func:`figures.regimes.collapse_boundary_task`)."""
    return Task("collapse-boundary", {"mu": s.mu, "rtol": 0.3 if s.quick else 1e-4})


def draw_alpha(results: list[Result], s: Setting, path: Path) -> None:
    """One band per alpha in its regime's colour, ending at the bisected boundaries (black
    lines), with the leader sequence written in it; l2-SAM's boundaries at rho = rho_max
    as triangles on the top edge."""
    scan, l2 = results
    alphas = np.array(s.alphas)
    fig, ax = plt.subplots(figsize=(style.DOUBLE, 2.6), constrained_layout=True)
    edges = _edges(alphas)
    for lo, hi in zip(scan["lower"], scan["upper"], strict=True):  # bands end at boundaries
        k = int(np.searchsorted(alphas, lo, side="right"))
        edges[k] = np.sqrt(lo * hi)
    for k, (reg, text) in enumerate(zip(scan["regime"], scan["leaders"], strict=True)):
        ax.axvspan(edges[k], edges[k + 1], color=regime_color(reg), lw=0)
        middle = np.sqrt(edges[k] * edges[k + 1])
        ax.text(middle, 0.03, text, rotation=90, ha="center", va="bottom")
    for lo, hi in zip(scan["lower"], scan["upper"], strict=True):
        ax.axvline(np.sqrt(lo * hi), color="black", lw=1.2)
    l2_lines = (float(l2["alpha"][()]) * s.rho_max, regime3_boundary(s.mu, s.rho_max))
    ax.plot(l2_lines, [1.0, 1.0], clip_on=False, zorder=5, **L2_MARK)
    ax.set(
        xscale="log",
        xlim=edges[[0, -1]],
        ylim=(0, 1),
        yticks=[],
        xlabel=r"initialization scale $\alpha$",
        ylabel="leader sequence",
        title=rf"LE-SAM along $\alpha$: $\mu$ = {format_mu(s.mu)}, L = 2, σ = {s.sigma:.3g}, "
        f"{CAP} = {s.rho_max:g}",
    )
    lines = [
        plt.Line2D([], [], color="black", lw=1.2, label="boundaries bisected"),
        plt.Line2D(
            [],
            [],
            **L2_MARK,
            label=rf"{style.label('l2-sam')}'s boundaries at $\rho$ = {CAP} (fig 5)",
        ),  # fmt: skip
    ]
    fig.legend(handles=regime_handles() + lines, loc="outside right center", title="regime")
    save(fig, path)


#: How l2-SAM's boundaries are marked on the top edge of fig 12b.
L2_MARK = {"ls": "", "marker": "v", "ms": 6, "color": style.BLUE, "mec": "white", "mew": 0.5}


def _check_grid(s: Setting) -> str | None:
    """The grids must be positive and increasing (log-spaced cells)."""
    for name in ("sigmas", "rho_max", "alphas"):
        if name in s and isinstance(s[name], tuple):
            values = np.asarray(s[name], dtype=float)
            if np.any(values <= 0) or np.any(np.diff(values) <= 0):
                return f"{name} must be positive and increasing, got {s[name]}"
    return None


REGIMES = Figure(
    "fig12_lesam_regimes",
    "LE-SAM's regime over (sigma, rho_max) at alpha = {alpha} (mu = {mu}, L = 2), with the "
    "analytic lines and the boundaries bisected along rho_max",
    "Where do LE-SAM's regimes (collapse, stall at a finite margin, minor first, major from the "
    "start, major-minor-major) lie over the constant budget σ and the cap ρ_max? Each cell is "
    "one classified run (analysis.lesam.classify_lesam) on μ = {mu}, L = 2, α = {alpha}; "
    "σ = {sigmas}, ρ_max = {rho_max}. Lines: the cap above which LE-SAM's stall point is an "
    "equilibrium (√2 a*(σ)), σ_c beyond which there is no stall point, and the corner outside "
    "which the largest initial rate is the major coordinate's. Diamonds: the boundaries "
    "bisected along ρ_max (relative tolerance {rtol}) at the budget matched to ℓ2-SAM with "
    "ρ = {rho}; their values are in paper_repro.md. Star: LE-SAM's official (σ, ρ_max). "
    "Regime colours as in fig 5.",
    map_tasks,
    draw_map,
    params={
        "mu": MU5,
        "alpha": ALPHA,
        "rho": RHO,
        "sigmas": FIG12_SIGMAS,
        "rho_max": FIG12_RHO_MAX,
        "rtol": 5e-3,
    },
    quick={"sigmas": FIG12_SIGMAS[::4], "rho_max": FIG12_RHO_MAX[::4], "rtol": 0.2},
    example={"alpha": 0.45},
    check=_check_grid,
)

REGIMES_ALPHA = Figure(
    "fig12b_lesam_regimes_alpha",
    "LE-SAM's regime along alpha at sigma = {sigma}, rho_max = {rho_max} (mu = {mu}, L = 2), "
    "bisected boundaries, l2-SAM's at rho = rho_max",
    "Along the initialization scale α, which regimes does LE-SAM pass through, and how do its "
    "boundaries compare with ℓ2-SAM's at ρ = ρ_max? One band per α = {alphas} (μ = {mu}, L = 2, "
    "σ = {sigma}, ρ_max = {rho_max}) in its regime's colour (fig 5's palette), with the leader "
    "sequence of its run (1-based, 0 = collapsed); black: the boundaries bisected (relative "
    "tolerance {rtol}; values in paper_repro.md); blue triangles: ℓ2-SAM's collapse and regime-3 "
    "boundaries with ρ = ρ_max (fig 5's α/ρ times ρ_max).",
    alpha_tasks,
    draw_alpha,
    params={
        "mu": MU5,
        "sigma": SIGMA0,
        "rho_max": 3.0,
        "alphas": FIG12_ALPHAS,
        "rtol": 5e-3,
    },
    quick={"alphas": FIG12_ALPHAS[::4], "rtol": 0.2},
    example={"rho_max": 2.5},
    check=_check_grid,
)


if __name__ == "__main__":
    figure_command(__spec__.name, REGIMES, REGIMES_ALPHA)
