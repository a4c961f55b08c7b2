"""Figures 1 and 6: where the direction of beta goes, against the max-margin references.

* ``fig1_depth_contrast`` — the single example ``mu = (1, 2)``, ``alpha = (1.5, 0.8)``,
  ``rho = 1``: paths of beta in the plane for GD, l_inf-SAM and l2-SAM at L = 1 and L = 2,
  with the l1 (``e_2``) and l2 (``mu/|mu|``) max-margin rays. Thm 3.1 (L = 1: all three go to
  the l2 max-margin direction) against Cor 3.5 (L = 2: l_inf-SAM goes to ``e_1`` because
  ``alpha_2 < rho``, while GD and l2-SAM go to ``e_2``).
* ``fig6_maxmargin_angles`` — seeded separable data (n = 12, d = 3, random teacher with a
  margin): angle between ``beta(tau)/|beta|`` and the l1 / l2 max-margin directions against
  the rescaled time, GD / l2-SAM / l_inf-SAM at L = 1 and L = 2 (:mod:`figures.multi_sample`).

Figure 7, on the same theme, is in :mod:`figures.blobs`; the shared pieces (directions, angles,
references, legend colours) are in :mod:`figures.directions`.

Clock: the rescaled one (docs/theory.md §3); for n > 1 the engine divides by
``c = (1/n) sum_i |l'(m_i(theta + eps))|``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flows import datasets
from flows.sweep.registry import Result, Task

from .blobs import GAUSSIAN_BLOBS  # noqa: F401 - the figure table reads it from here
from .common import Figure, plt, save
from .compared import ALGORITHMS, COLORS, NAMES, rho_entry
from .directions import REF_COLORS, angles_deg, directions, format_vector, log_norm, references
from .multi_sample import Horizons, multi_sample_tasks

# --------------------------------------------------------------------------- Figure 1

FIG1_MU = [1.0, 2.0]
FIG1_ALPHA = [1.5, 0.8]
FIG1_RHO = 1.0
FIG1_HORIZONS: Horizons = {
    True: {1: (2.0, 41), 2: (0.5, 21)},
    False: {1: (300.0, 3001), 2: (5.0, 501)},
}


def fig1_tasks(quick: bool) -> list[Task]:
    """GD, l_inf-SAM, l2-SAM on D_mu at L = 1 and 2 (order: depth-major, ALGORITHMS)."""
    out = []
    for depth in (1, 2):
        t_max, n = FIG1_HORIZONS[quick][depth]
        for alg in ALGORITHMS:
            out.append(
                Task(
                    "simulate",
                    {
                        "mu": FIG1_MU,
                        "algorithm": alg,
                        "depth": depth,
                        "alpha": FIG1_ALPHA,
                        **rho_entry(alg, FIG1_RHO),
                        "t_max": t_max,
                        "n_points": n,
                        "original_time": False,
                    },
                )
            )
    return out


def draw_fig1(results: list[Result], quick: bool, path: Path) -> None:
    """Two panels: beta drawn as its direction times log(1 + |beta|), with the reference rays."""
    mu = np.array(FIG1_MU)
    refs = {1: np.array([0.0, 1.0]), 2: mu / np.linalg.norm(mu)}
    fig, axes = plt.subplots(1, 2, figsize=(12, 6.0), constrained_layout=True)
    styles = {
        "gd": dict(lw=5, alpha=0.35),
        "l2-sam": dict(lw=2.2, ls="--"),
        "linf-sam": dict(lw=1.6, ls="-"),
    }
    for ax, depth, runs in zip(axes, (1, 2), (results[:3], results[3:]), strict=True):
        rmax = 0.0
        for alg, res in zip(ALGORITHMS, runs, strict=True):
            u = directions(res)
            r = np.logaddexp(0.0, log_norm(res))
            pts = u * r[:, None]
            rmax = max(rmax, float(np.nanmax(r)))
            final = u[-1]
            ax.plot(
                pts[:, 0],
                pts[:, 1],
                color=COLORS[alg],
                **styles[alg],
                label=f"{NAMES[alg]}: final β/‖β‖ = {format_vector(final)}",
            )
            ax.plot(*pts[-1], marker="*", ms=17, color=COLORS[alg], mec="black", mew=0.7, zorder=5)
            ax.plot(*pts[0], marker="o", ms=7, color="grey", zorder=4)
            slide = [
                t
                for t, kind in zip(res["event_tau"], res["event_kind"], strict=True)
                if kind == "sliding"
            ]
            if slide:
                k = int(np.searchsorted(res["tau"], slide[0]))
                ax.annotate(
                    f"β₂ reaches 0 and slides\n(τ = {slide[0]:.2f})",
                    pts[k],
                    xytext=(pts[k][0] + 0.9, pts[k][1] + 1.2),
                    fontsize=9,
                    color=COLORS[alg],
                    arrowprops=dict(arrowstyle="->", color=COLORS[alg]),
                )
        reach = 1.08 * rmax
        for p, ref in refs.items():
            name = "ℓ1 max-margin e₂" if p == 1 else "ℓ2 max-margin μ/‖μ‖"
            ax.plot(
                [0, reach * ref[0]],
                [0, reach * ref[1]],
                color=REF_COLORS[p],
                lw=8,
                alpha=0.4,
                solid_capstyle="butt",
                zorder=0,
                label=f"{name} = {format_vector(ref)}",
            )
        ax.plot([], [], ls="", marker="o", color="grey", label="start (β(0) = α^L)")
        ax.plot([], [], ls="", marker="*", ms=12, color="grey", label="end of run")
        ax.set_xlim(-0.05 * reach, 1.05 * reach)
        ax.set_ylim(-0.05 * reach, 1.05 * reach)
        ax.set_aspect("equal")
        ax.grid(alpha=0.3)
        ax.set_xlabel("β₁ · log(1+‖β‖₂) / ‖β‖₂")
        ax.set_ylabel("β₂ · log(1+‖β‖₂) / ‖β‖₂")
        tmax = runs[0]["tau"][-1]
        if depth == 1:
            ax.set_title(
                f"L = 1 (τ ≤ {tmax:g}): all three → ℓ2 max-margin (Thm 3.1)\n"
                "paths coincide: at L = 1 the rescaled field is μ whatever ε is",
                fontsize=10.5,
            )
        else:
            ax.set_title(
                f"L = 2 (τ ≤ {tmax:g}): GD, ℓ2-SAM → e₂ (ℓ1 max-margin);\n"
                "ℓ∞-SAM → e₁, the minor feature (Cor 3.5: α₂ = 0.8 < ρ)",
                fontsize=10.5,
            )
        ax.legend(loc="center right", fontsize=8.5, framealpha=0.9)
    fig.suptitle(
        "Depth contrast on one example μ = (1, 2), α = (1.5, 0.8), ρ = 1, rescaled "
        "clock: each point has the direction of β and radius log(1+‖β‖₂)"
        + ("  [QUICK]" if quick else ""),
        fontsize=11,
    )
    save(fig, path)


# --------------------------------------------------------------------------- Figure 6

FIG6_RHO = 0.1
FIG6_ALPHA = 1.0
FIG6_HORIZONS: Horizons = {
    True: {1: (5.0, 21), 2: (1.0, 21)},
    False: {1: (3000.0, 6001), 2: (8.0, 801)},
}


def teacher_data() -> tuple[np.ndarray, np.ndarray]:
    """Figure 6's data, :func:`flows.datasets.teacher_data` (n = 12, d = 3, seed 90: a 30 deg
    angle between the l1 and l2 max-margin directions), as arrays."""
    data = datasets.teacher_data()
    return np.array(data.X), np.array(data.y)


def fig6_tasks(quick: bool) -> list[Task]:
    """Three algorithms at L = 1 and 2 on :func:`teacher_data` (depth-major)."""
    X, y = teacher_data()
    return multi_sample_tasks(X, y, (1, 2), FIG6_ALPHA, FIG6_RHO, FIG6_HORIZONS, quick)


def draw_fig6(results: list[Result], quick: bool, path: Path) -> None:
    """Angle to the l2 (solid) and l1 (dashed) max-margin directions against tau, log-log."""
    X, y = teacher_data()
    refs = references(X, y)
    between = np.degrees(np.arccos(np.clip(refs[1] @ refs[2], -1, 1)))
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2), constrained_layout=True)
    for ax, depth, runs in zip(axes, (1, 2), (results[:3], results[3:]), strict=True):
        lines = []
        for alg, res in zip(ALGORITHMS, runs, strict=True):
            tau = res["tau"]
            keep = tau > 0
            a2, a1 = angles_deg(res, refs[2]), angles_deg(res, refs[1])
            wide = dict(lw=5, alpha=0.35) if alg == "gd" else dict(lw=1.8)
            ax.plot(tau[keep], a2[keep], color=COLORS[alg], **wide)
            ax.plot(tau[keep], a1[keep], color=COLORS[alg], ls="--", **wide)
            lines.append(f"{NAMES[alg]}: ∠ℓ2 = {a2[-1]:.3g}°, ∠ℓ1 = {a1[-1]:.3g}°")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(1e-2 if not quick else None, 120)
        ax.set_xlabel("rescaled time τ (log scale)")
        ax.set_ylabel("angle between β(τ) and the max-margin direction\n[degrees, log scale]")
        ax.grid(alpha=0.3, which="both")
        ax.text(
            0.02,
            0.03,
            f"at τ = {runs[0]['tau'][-1]:g}:\n" + "\n".join(lines),
            transform=ax.transAxes,
            fontsize=8.5,
            va="bottom",
            bbox=dict(boxstyle="round", fc="white", alpha=0.9, ec="0.7"),
        )
        if depth == 1:
            ax.set_title("L = 1: all → ℓ2 max-margin (Thm 3.1), angle ∝ 1/τ (slow)", fontsize=10.5)
        else:
            ax.set_title("L = 2: GD → ℓ1 max-margin (KKT point); here both SAMs too", fontsize=10.5)
    handles = [
        plt.Line2D(
            [],
            [],
            color=COLORS[a],
            label=NAMES[a],
            **(dict(lw=5, alpha=0.35) if a == "gd" else dict(lw=1.8)),
        )
        for a in ALGORITHMS
    ]
    handles += [
        plt.Line2D([], [], color="grey", lw=2, label="angle to ℓ2 max-margin"),
        plt.Line2D([], [], color="grey", lw=1.5, ls="--", label="angle to ℓ1 max-margin"),
    ]
    fig.legend(handles=handles, loc="outside right center", fontsize=9)
    fig.suptitle(
        f"Separable data n = {len(y)}, d = {X.shape[1]} (teacher seed 90), α = "
        f"{FIG6_ALPHA:g}, ρ = {FIG6_RHO:g}; ℓ1 max-margin {format_vector(refs[1])}, "
        f"ℓ2 max-margin {format_vector(refs[2])}, {between:.1f}° apart"
        + ("  [QUICK]" if quick else ""),
        fontsize=10.5,
    )
    save(fig, path)


DEPTH_CONTRAST = Figure(
    "fig1_depth_contrast",
    "mu=(1,2): beta paths of GD / linf-SAM / l2-SAM at L=1 and L=2 with max-margin rays",
    "Does depth decide the limit direction: at L = 1 do GD, ℓ∞-SAM and ℓ2-SAM all reach the "
    "ℓ2 max-margin direction, while at L = 2 ℓ∞-SAM ends on the minor feature e₁ (Cor 3.5) and "
    "GD and ℓ2-SAM on the ℓ1 max-margin e₂?",
    fig1_tasks,
    draw_fig1,
)

MAXMARGIN_ANGLES = Figure(
    "fig6_maxmargin_angles",
    "n=12, d=3 data: angle to l1/l2 max-margin vs tau, GD / l2-SAM / linf-SAM, L=1,2",
    "On generic separable data, does β(τ) approach the ℓ2 max-margin direction at L = 1 and "
    "the ℓ1 max-margin direction at L = 2, for GD and for both SAMs, and how fast?",
    fig6_tasks,
    draw_fig6,
)
