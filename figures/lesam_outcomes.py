"""Figures 12-14: where LE-SAM and USAM end up (settings and task kinds: :mod:`figures.lesam`).

* ``fig12_lesam_regimes`` — LE-SAM's regimes over ``(sigma, rho_max)`` at ``alpha = 0.4`` and
  over ``alpha`` at the budget matched to l2-SAM, with boundaries by bisection
  (:func:`analysis.lesam.classify_lesam`, :func:`analysis.lesam.scan_regimes`).
* ``fig13_lesam_sharpness`` — Hessian trace and top eigenvalue against the training loss, on the
  single example ``mu = (1..5)`` (alpha = 0.4) and on the Gaussian blobs of figure 7
  (alpha = 1). Compared at *equal loss*: on separable data the Hessian of the logistic loss goes
  to 0 along every diverging path, so "lower sharpness" at the end of a run says nothing.
  Both are divided by the loss (ratios at equal loss are unchanged) to separate the curves.
  On ``D_mu`` at L = 2, ``tr H = l''(m) ||grad m||^2`` with ``||grad m||^2 = 2 sum mu_j^2 beta_j``
  and ``m = sum mu_j beta_j``, so at a given loss ``tr H / l''(m)`` lies between ``2 mu_1 m``
  (margin carried by the minor feature) and ``2 mu_d m`` (by the major one): the grey lines.
* ``fig14_lesam_limits`` — angle of ``beta(tau)`` to the l1 and l2 max-margin directions, at
  L = 1 and 2, on the blobs and on the n = 12, d = 3 teacher data of figure 6 (alpha = 1).

Matched settings per data set: l2-SAM's ``rho = 1``, LE-SAM ``sigma = ||grad L(theta(0))||``,
USAM ``rho = 1 / ||grad L(theta(0))||``; LE-SAM caps ``rho_max = 1.5`` and 3, and the official
warm-up + cosine budget ending with the run.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

from analysis.lesam.radius import initial_gradient_norm
from analysis.lesam.regimes import LESAM_REGIMES
from analysis.lesam.stall import SIGMA_CRITICAL, stall_point
from analysis.loss_levels import at_loss_levels
from flows.data import Dataset
from flows.datasets import gaussian_blobs, teacher_data
from flows.sweep.registry import Result, Task

from .common import MU5, OKABE_ITO, Figure, plt, save
from .directions import angles_deg, references
from .lesam import ALPHA, DEPTH, G0, OFFICIAL, SIGMA0, STYLE, as_params, compared, run_task, warmup

# ---------------------------------------------------------------------------- settings


def _arrays(data: Dataset) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` of a :mod:`flows.datasets` data set (the blobs of figure 7, the teacher data
    of figure 6)."""
    return data.X, data.y


def matched(X, y, alpha: float, depth: int, t_end: float) -> list[tuple[str, str, dict, str]]:
    """(key, algorithm, hyper-parameters, label) matched to l2-SAM rho = 1 at theta(0) on (X, y)."""
    g0 = initial_gradient_norm(Dataset(np.asarray(X), np.asarray(y)), alpha, depth)
    return [
        ("gd", "gd", {}, "gd: GD"),
        ("l2", "l2-sam", {"rho": 1.0}, "l2: ℓ2-SAM ρ = 1"),
        ("usam", "usam", {"rho": 1.0 / g0}, "usam: USAM ρ = 1/‖∇L₀‖"),
        ("le15", "le-sam", {"sigma": g0, "rho_max": 1.5}, "le15: LE-SAM σ = ‖∇L₀‖, ρ_max = 1.5"),
        ("le3", "le-sam", {"sigma": g0, "rho_max": 3.0}, "le3: LE-SAM σ = ‖∇L₀‖, ρ_max = 3"),
        (
            "wc3",
            "le-sam",
            {"sigma": warmup(g0, t_end), "rho_max": 3.0},
            "wc3: LE-SAM warm-up+cosine σ = ‖∇L₀‖, ρ_max = 3",
        ),
        (
            "official",
            "le-sam",
            {"sigma": warmup(OFFICIAL["sigma"], t_end), "rho_max": OFFICIAL["rho_max"]},
            "official: LE-SAM σ = 0.35 warm-up+cosine, ρ_max = 0.3",
        ),
    ]


def data_task(
    X,
    y,
    algorithm: str,
    hp: dict,
    depth: int,
    alpha: float,
    t_max: float,
    n: int,
    kind: str,
    **extra,
) -> Task:
    return Task(
        kind,
        {
            "X": np.asarray(X).tolist(),
            "y": np.asarray(y).tolist(),
            "algorithm": algorithm,
            "depth": depth,
            "alpha": alpha,
            **as_params(hp),
            "t_max": t_max,
            "n_points": n,
            "original_time": False,
            "rtol": 1e-8,
            **extra,
        },
    )


# ---------------------------------------------------------------------------- Figure 12

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


def fig12_tasks(quick: bool) -> list[Task]:
    """The (sigma, rho_max) map at alpha = 0.4 (one task per pair of sigma rows), the scan
    along rho_max at sigma = SIGMA0 and the scan along alpha at (SIGMA0, 3), both bisected."""
    sigmas = FIG12_SIGMAS[::4] if quick else FIG12_SIGMAS
    rho_max = FIG12_RHO_MAX[::4] if quick else FIG12_RHO_MAX
    alphas = FIG12_ALPHAS[::4] if quick else FIG12_ALPHAS
    rtol = 0.2 if quick else 5e-3
    rows = [
        [[ALPHA, s, r] for s in sigmas[k : k + 2] for r in rho_max]
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


def draw_fig12(results: list[Result], quick: bool, path: Path) -> None:
    """Left: regime map over (sigma, rho_max) with analytic lines and bisected boundaries;
    right: regimes and leader sequences along alpha with bisected boundaries."""
    sigmas = np.array(FIG12_SIGMAS[::4] if quick else FIG12_SIGMAS)
    rho_max = np.array(FIG12_RHO_MAX[::4] if quick else FIG12_RHO_MAX)
    alphas = np.array(FIG12_ALPHAS[::4] if quick else FIG12_ALPHAS)
    grid = np.concatenate([r["regime"] for r in results[:-2]]).reshape(len(sigmas), len(rho_max))
    scan_r, scan_a = results[-2], results[-1]
    cmap = matplotlib.colors.ListedColormap([REGIME_COLORS[k] for k in range(6)])
    fig, (ax, bx) = plt.subplots(
        1, 2, figsize=(15, 6.6), constrained_layout=True, gridspec_kw={"width_ratios": [1.15, 1]}
    )
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
    ax.set_xlim(_edges(sigmas)[[0, -1]])
    ax.set_ylim(_edges(rho_max)[[0, -1]])
    ax.legend(loc="lower left", fontsize=8, framealpha=0.92)
    ax.text(
        0.99,
        0.99,
        "\n".join(_boundary_text(scan_r)),
        transform=ax.transAxes,
        ha="right",
        va="top",
        fontsize=8,
        bbox=dict(fc="white", alpha=0.9, ec="0.6"),
    )
    # right: along alpha
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
    bx.text(
        0.99,
        0.99,
        "bisected boundaries (α):\n" + "\n".join(_boundary_text(scan_a)),
        transform=bx.transAxes,
        ha="right",
        va="top",
        fontsize=8,
        bbox=dict(fc="white", alpha=0.9, ec="0.6"),
    )
    bx.text(
        0.99,
        0.70,
        f"ℓ2-SAM with ρ = ρ_max = {FIG12_RHO_MAX_FIXED:g}:\ncollapse below "
        f"α = {0.3473 * FIG12_RHO_MAX_FIXED:.4g}, regime 3 above {0.8581 * FIG12_RHO_MAX_FIXED:.4g}\n"
        "(fig. 5, α/ρ = 0.3473, 0.8581)",
        transform=bx.transAxes,
        ha="right",
        va="top",
        fontsize=8,
        bbox=dict(fc="white", alpha=0.9, ec="0.6"),
    )
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
        "major from the start" + ("  [QUICK]" if quick else ""),
        fontsize=11,
    )
    save(fig, path)


REGIMES = Figure(
    "fig12_lesam_regimes",
    "LE-SAM regime map over (sigma, rho_max) at alpha=0.4 and over alpha, with bisected boundaries",
    "Where do LE-SAM's regimes (collapse, stall at a finite margin, minor first, major from the "
    "start, major-minor-major) lie over the budget σ, the cap ρ_max and the initialization α, "
    "and where are the boundaries?",
    fig12_tasks,
    draw_fig12,
)


# ---------------------------------------------------------------------------- Figure 13

FIG13_T = 8.0
BLOBS_ALPHA = 1.0
LEVELS = (1e-2, 1e-4, 1e-8)


def fig13_tasks(quick: bool) -> list[Task]:
    """Every compared run with its sharpness: single example, then blobs (same order)."""
    t_end, n = (2.0, 41) if quick else (FIG13_T, 321)
    X, y = _arrays(gaussian_blobs())
    extra = {"sharpness": True, "perturbation": False}
    single = [run_task(alg, hp, t_end, n, **extra) for _, alg, hp, _ in compared(t_end)]
    blobs = [
        data_task(X, y, alg, hp, DEPTH, BLOBS_ALPHA, t_end, n, "lesam-run", **extra)
        for _, alg, hp, _ in matched(X, y, BLOBS_ALPHA, DEPTH, t_end)
    ]
    return single + blobs


def _visible_range(ax) -> tuple[float, float]:
    """y range of the drawn lines over the x range shown (log axes)."""
    lo_x, hi_x = sorted(ax.get_xlim())
    ys = [
        y[(x >= lo_x) & (x <= hi_x) & (y > 0)]
        for line in ax.get_lines()
        for x, y in [(np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float))]
        if np.size(x) > 1
    ]
    ys = np.concatenate([y for y in ys if y.size] or [np.array([1.0, 10.0])])
    return float(np.min(ys)) / 1.5, float(np.max(ys)) * 1.5


def _ratio_lines(runs: list[tuple[str, Result]], name: str = "trace") -> list[str]:
    """Ratios of ``name`` to l2-SAM and GD at the loss LEVELS (from at_loss_levels)."""
    at = {key: at_loss_levels(res["loss"], res[name], LEVELS) for key, res in runs}
    what = "tr H" if name == "trace" else "λmax"
    lines = [f"{what} ratio at loss " + " / ".join(f"{v:g}" for v in LEVELS)]
    for key in ("usam", "le15", "le3", "wc3", "official"):
        for ref in ("l2", "gd"):
            ratio = at[key] / at[ref]
            lines.append(
                f"{key} / {ref}: "
                + " / ".join("—" if not np.isfinite(r) else f"{r:.3g}" for r in ratio)
            )
    return lines


def draw_fig13(results: list[Result], quick: bool, path: Path) -> None:
    """tr H / L and lambda_max / L against the loss, single example (left) and blobs (right)."""
    t_end = 2.0 if quick else FIG13_T
    X, y = _arrays(gaussian_blobs())
    sets = (
        ("single example μ = (1,…,5), α = 0.4", compared(t_end)),
        (
            f"Gaussian blobs ±(1, 2), n = 40, α = {BLOBS_ALPHA:g}",
            matched(X, y, BLOBS_ALPHA, DEPTH, t_end),
        ),
    )
    fig, axes = plt.subplots(2, 2, figsize=(14, 9.6), constrained_layout=True)
    half = len(results) // 2
    for col, ((title, runs), chunk) in enumerate(
        zip(sets, (results[:half], results[half:]), strict=True)
    ):
        keyed = [(key, res) for (key, *_), res in zip(runs, chunk, strict=True)]
        for row, (name, label) in enumerate((("trace", "tr H / L"), ("top", "λ_max(H) / L"))):
            ax = axes[row, col]
            for (key, _, _, text), res in zip(runs, chunk, strict=True):
                loss = res["loss"]
                keep = (loss > 1e-290) & np.isfinite(res[name])
                ax.plot(loss[keep], res[name][keep] / loss[keep], label=text, **STYLE[key])
                if loss[-1] > 1e-3:  # a stalled run: its end point
                    ax.plot(
                        loss[-1],
                        res[name][-1] / loss[-1],
                        marker="o",
                        ms=9,
                        ls="",
                        color=STYLE[key]["color"],
                        mec="black",
                    )
            ax.set(
                xscale="log",
                yscale="log",
                xlabel="training loss L(θ) (training goes →)",
                ylabel=label,
                xlim=(1.0, 1e-12),
                title=f"{title}: {label}",
            )
            ax.set_ylim(*_visible_range(ax))
            ax.grid(alpha=0.3, which="both")
            ax.text(
                0.99,
                0.02,
                "\n".join(_ratio_lines(keyed, name)),
                transform=ax.transAxes,
                ha="right",
                va="bottom",
                fontsize=7,
                family="monospace",
                bbox=dict(fc="white", alpha=0.9, ec="0.6"),
            )
        if col == 0:
            m = np.geomspace(0.05, 60.0, 200)
            lo = np.logaddexp(0.0, -m)
            lpp = 1.0 / (2.0 + 2.0 * np.cosh(m))
            for j, ls in ((0, "--"), (len(MU5) - 1, "-.")):
                axes[0, 0].plot(
                    lo,
                    lpp * 2 * MU5[j] * m / lo,
                    color="0.5",
                    lw=1,
                    ls=ls,
                    label=f"margin all on e_{j + 1}: ℓ''(m)·2μ_{j + 1}m / ℓ(m)",
                )
            stall = stall_point(MU5, SIGMA0, 3.0)
            axes[0, 0].annotate(
                f"circles: stalled runs (loss {stall.loss:.3f} on D_μ)",
                (
                    stall.loss,
                    2 * MU5[0] * stall.margin / (2 + 2 * np.cosh(stall.margin)) / stall.loss,
                ),
                fontsize=8,
                xytext=(0.5, 40),
                arrowprops=dict(arrowstyle="->"),
            )
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=8.5)
    fig.suptitle(
        "Sharpness against the training loss (L = 2, settings matched at θ(0)): is "
        "LE-SAM flatter than ℓ2-SAM and GD at equal loss?" + ("  [QUICK]" if quick else ""),
        fontsize=11,
    )
    save(fig, path)


SHARPNESS = Figure(
    "fig13_lesam_sharpness",
    "Hessian trace and top eigenvalue vs training loss: GD, l2-SAM, USAM, LE-SAM (single example, blobs)",
    "Compared at equal training loss, is LE-SAM flatter (lower Hessian trace and top eigenvalue) "
    "than ℓ2-SAM and GD, as its paper claims, on the single example and on Gaussian blobs?",
    fig13_tasks,
    draw_fig13,
)

# ---------------------------------------------------------------------------- Figure 14

FIG14_KEYS = ("gd", "usam", "le15", "le3", "wc3")
#: (name, builder, {depth: (t_max, n_points)})
FIG14_SETS = (
    ("Gaussian blobs ±(1, 2), n = 40", gaussian_blobs, {1: (1000.0, 501), 2: (8.0, 321)}),
    ("teacher data n = 12, d = 3", teacher_data, {1: (200.0, 401), 2: (8.0, 321)}),
)
FIG14_ALPHA = 1.0


def fig14_runs(quick: bool):
    """(data name, X, y, depth, t_max, n, run tuple) in task order."""
    for name, build, horizons in FIG14_SETS:
        X, y = _arrays(build())
        for depth in (1, 2):
            t_max, n = (2.0, 21) if quick else horizons[depth]
            for run in matched(X, y, FIG14_ALPHA, depth, t_max):
                if run[0] in FIG14_KEYS:
                    yield name, X, y, depth, t_max, n, run


def fig14_tasks(quick: bool) -> list[Task]:
    """GD, USAM and LE-SAM at L = 1 and 2 on the blobs and the teacher data."""
    return [
        data_task(X, y, alg, hp, depth, FIG14_ALPHA, t_max, n, "simulate")
        for _, X, y, depth, t_max, n, (_, alg, hp, _) in fig14_runs(quick)
    ]


def draw_fig14(results: list[Result], quick: bool, path: Path) -> None:
    """Angle to the l2 (solid) and l1 (dashed) max-margin directions against tau, per panel."""
    fig, axes = plt.subplots(2, 2, figsize=(14, 9.4), constrained_layout=True)
    panels: dict[tuple[str, int], list] = {}
    for (name, X, y, depth, _, _, run), res in zip(fig14_runs(quick), results, strict=True):
        panels.setdefault((name, depth), []).append((X, y, run, res))
    for ax, ((name, depth), runs) in zip(axes.ravel(), panels.items(), strict=True):
        refs = references(runs[0][0], runs[0][1])
        between = np.degrees(np.arccos(np.clip(refs[1] @ refs[2], -1.0, 1.0)))
        lines = []
        for _, _, (key, *_), res in runs:
            keep = res["tau"] > 0
            a2, a1 = angles_deg(res, refs[2]), angles_deg(res, refs[1])
            ax.plot(res["tau"][keep], a2[keep], **STYLE[key])
            ax.plot(res["tau"][keep], a1[keep], **{**STYLE[key], "ls": "--", "lw": 1.2})
            lines.append(
                f"{key:5s} to l2 {a2[-1]:7.3g}°  to l1 {a1[-1]:7.3g}°  loss {res['loss'][-1]:.2g}"
            )
        ax.set(
            xscale="log",
            yscale="log",
            ylim=(1e-4, 120),
            xlabel="rescaled time τ (log)",
            ylabel="angle to max-margin direction [deg]",
            title=f"{name}, L = {depth} (ℓ1 and ℓ2 max-margin {between:.1f}° apart)",
        )
        ax.grid(alpha=0.3, which="both")
        ax.text(
            0.02,
            0.02,
            f"at τ = {runs[0][3]['tau'][-1]:g}:\n" + "\n".join(lines),
            transform=ax.transAxes,
            fontsize=7.5,
            family="monospace",
            va="bottom",
            bbox=dict(fc="white", alpha=0.9, ec="0.6"),
        )
    handles = [
        plt.Line2D([], [], label=label, **STYLE[key])
        for _, _, (key, _, _, label), _ in next(iter(panels.values()))
    ]
    handles += [
        plt.Line2D([], [], color="grey", lw=2, label="angle to ℓ2 max-margin"),
        plt.Line2D([], [], color="grey", lw=1.2, ls="--", label="angle to ℓ1 max-margin"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=4, fontsize=9)
    fig.suptitle(
        f"Limit directions of USAM and LE-SAM vs the max-margin solutions (α = "
        f"{FIG14_ALPHA:g}, matched to ℓ2-SAM ρ = 1 at θ(0))" + ("  [QUICK]" if quick else ""),
        fontsize=11,
    )
    save(fig, path)


LIMITS = Figure(
    "fig14_lesam_limits",
    "Angle of beta to the l1/l2 max-margin directions vs tau: GD, USAM, LE-SAM at L=1,2 (blobs, n=12 d=3)",
    "Do USAM and LE-SAM converge in direction to the same max-margin solution as GD (ℓ2 at L = 1, "
    "ℓ1 at L = 2), or does LE-SAM's budget change the limit?",
    fig14_tasks,
    draw_fig14,
)
