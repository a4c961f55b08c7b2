"""Figures 2 and 3: l_inf-SAM on one example (Thm 3.2) and its limit-direction map (Cor 3.5).

* ``fig2_linf_coordinates`` — beta_j(tau) for alpha_j below, equal to and above rho at
  L = 2, 3, 4: the flow (:func:`flows.simulate`) against the exact solution
  (:func:`flows.closed_form.solutions.linf_sam`, evaluated at draw time).
* ``fig3_linf_limit_map`` — on mu = (1, 2), which basis vector l_inf-SAM converges to over a grid
  of (alpha_1 / rho, alpha_2 / rho): Cor 3.5's prediction (:func:`analysis.limits.predict_linf_limit`)
  as a background map with its boundaries, and the limits observed on simulated flows
  (:func:`analysis.limits.observed_linf_limit`) as markers.

In the rescaled clock the coordinates of the balanced single-example l_inf-SAM flow decouple
(docs/theory.md §8), so each case of figure 2 is simulated as its own 1-D example ``(mu_j, +1)``; one joint
3-D run per depth checks that the decoupling holds in the engine too (its agreement with the
1-D runs is printed in the figure's footer).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from analysis.limits import observed_linf_limit, predict_linf_limit, predict_linf_limits
from flows.closed_form.solutions import linf_sam
from flows.data import single_example
from flows.integrator.driver import simulate
from flows.sweep.registry import Result, Task, register

from .common import OKABE_ITO, Figure, plt, save

# --- Figure 2: Thm 3.2, one coordinate per case -------------------------------------------

RHO = 1.0
DEPTHS = (2, 3, 4)
#: (label, mu_j, alpha_j) of the three cases: alpha_j below, equal to and above rho.
CASES = (("below", 1.0, 0.5), ("equal", 2.0, 1.0), ("above", 3.0, 1.4))
CASE_COLORS = {"below": OKABE_ITO[5], "equal": OKABE_ITO[0], "above": OKABE_ITO[6]}
CASE_TEXT = {"below": "α_j < ρ", "equal": "α_j = ρ", "above": "α_j > ρ"}


def _horizons(quick: bool) -> tuple[tuple[float, int], tuple[float, int]]:
    """(t_max, n_points) of the short run (every case) and the long run (bounded cases)."""
    return ((2.0, 41), (20.0, 41)) if quick else ((3.0, 301), (300.0, 600))


def _solver(quick: bool, rtol: float = 1e-8) -> dict:
    """Solver options: DOP853 at ``rtol`` for the figures, a loose RK45 for the smoke test
    (approaching a blow-up to the detection rate 1e12 costs ~1000-3000 field evaluations)."""
    return {"rtol": 1e-6, "method": "RK45"} if quick else {"rtol": rtol}


def _linf_task(mu, alpha, depth: int, t_max: float, n_points: int, quick: bool) -> Task:
    return Task(
        "simulate",
        {
            "mu": list(mu),
            "algorithm": "linf-sam",
            "depth": depth,
            "alpha": list(alpha),
            "rho": RHO,
            "t_max": t_max,
            "n_points": n_points,
            "original_time": False,
            **_solver(quick, rtol=1e-10),
        },
    )


def coordinates_tasks(quick: bool) -> list[Task]:
    """Per depth: a short 1-D run per case, a long 1-D run per bounded case, one joint 3-D run."""
    (t_short, n_short), (t_long, n_long) = _horizons(quick)
    tasks = []
    for L in DEPTHS:
        for label, mu, alpha in CASES:
            tasks.append(_linf_task([mu], [alpha], L, t_short, n_short, quick))
            if label != "above":
                tasks.append(_linf_task([mu], [alpha], L, t_long, n_long, quick))
        tasks.append(
            _linf_task([c[1] for c in CASES], [c[2] for c in CASES], L, t_short, n_short, quick)
        )
    return tasks


def _split_coordinate_results(results: list[Result]) -> dict:
    """``{(L, label): (short, long or None)}`` and ``{L: joint}`` in the order of the tasks."""
    it = iter(results)
    per_case, joint = {}, {}
    for L in DEPTHS:
        for label, _, _ in CASES:
            short = next(it)
            long = next(it) if label != "above" else None
            per_case[L, label] = (short, long)
        joint[L] = next(it)
    return per_case, joint


def _event_tau(result: Result, kind: str) -> float:
    taus = result["event_tau"][result["event_kind"] == kind]
    return float(taus[0]) if taus.size else float("nan")


def _stitched(short: Result, long: Result | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """tau, log|beta|, sign(beta) of the 1-D case: the short run, then the long run after it."""
    tau, lb, sb = short["tau"], short["log_abs_beta"][:, 0], short["sign_beta"][:, 0]
    if long is not None:
        later = long["tau"] > tau[-1]
        tau = np.concatenate([tau, long["tau"][later]])
        lb = np.concatenate([lb, long["log_abs_beta"][later, 0]])
        sb = np.concatenate([sb, long["sign_beta"][later, 0]])
    return tau, lb, sb


def coordinate_checks(results: list[Result]) -> dict:
    """Flow vs closed form, per depth: max relative error of beta over every sample (the blow-up
    sample itself excluded, where beta is ~ infinite and the error measures the blow-up time),
    zero/non-zero mismatches, hit and blow-up times, and the joint-vs-1-D difference."""
    per_case, joint = _split_coordinate_results(results)
    out = {}
    for L in DEPTHS:
        rel, mismatch, times, n_samples = 0.0, 0, {}, 0
        for label, mu, alpha in CASES:
            short, long = per_case[L, label]
            tau, lb, sb = _stitched(short, long)
            cf = linf_sam([mu], [alpha], RHO, L, tau)
            cf_lb, cf_sb = cf.log_abs_beta[:, 0], cf.sign_beta[:, 0]
            blown = short["status"] == 1
            keep = np.ones(tau.size, dtype=bool)
            if blown:
                keep[np.flatnonzero(tau <= short["tau"][-1])[-1]] = False
            keep &= np.isfinite(cf_lb) | (cf_sb == 0)
            zero_f, zero_c = sb[keep] == 0, cf_sb[keep] == 0
            mismatch += int(np.sum(zero_f != zero_c))
            both = ~zero_f & ~zero_c
            if np.any(both):
                rel = max(rel, float(np.max(np.abs(np.expm1(lb[keep][both] - cf_lb[keep][both])))))
            n_samples += int(np.sum(keep))
            times[label] = {
                "hit_flow": _event_tau(short, "sliding"),
                "hit_exact": float(cf.hit_time[0]),
                "blowup_flow": _event_tau(short, "blow-up"),
                "blowup_exact": float(cf.blowup_time[0]),
                "final_beta": float(np.exp(lb[-1])) if sb[-1] else 0.0,
                "final_tau": float(tau[-1]),
            }
        # joint 3-D run against the 1-D runs on the joint run's grid (same grid as the short runs)
        jr = joint[L]
        m = jr["tau"].size
        diff = 0.0
        for j, (label, _, _) in enumerate(CASES):
            short = per_case[L, label][0]
            k = min(m, short["tau"].size)
            if jr["status"] == 1 or short["status"] == 1:
                k = min(k, m - 1, short["tau"].size - 1)  # the two runs stop at their own tau*
            a, b = jr["log_abs_beta"][:k, j], short["log_abs_beta"][:k, 0]
            finite = np.isfinite(a) & np.isfinite(b)
            if np.any(finite):
                diff = max(diff, float(np.max(np.abs(a[finite] - b[finite]))))
            diff = max(diff, float(np.sum(np.isfinite(a) != np.isfinite(b))))
        out[L] = {
            "max_rel_err": rel,
            "zero_mismatches": mismatch,
            "samples": n_samples,
            "times": times,
            "joint_vs_1d": diff,
            "joint_status": int(jr["status"]),
            "joint_tau_end": float(jr["tau"][-1]),
        }
    return out


def draw_coordinates(results: list[Result], quick: bool, path: Path) -> None:
    """Three panels (L = 2, 3, 4): beta_j(tau) per case, flow lines, closed-form markers."""
    per_case, _ = _split_coordinate_results(results)
    checks = coordinate_checks(results)
    (t_short, _), (t_long, _) = _horizons(quick)
    y_top = 1e8
    fig, axes = plt.subplots(
        1, len(DEPTHS), figsize=(15, 4.9), sharey=True, constrained_layout=True
    )
    for ax, L in zip(axes, DEPTHS, strict=False):
        for label, mu, alpha in CASES:
            color = CASE_COLORS[label]
            short, long = per_case[L, label]
            tau, lb, sb = _stitched(short, long)
            with np.errstate(over="ignore"):
                beta = np.where(sb == 0, 0.0, np.exp(np.minimum(lb, 700.0)))
            ax.plot(
                tau[1:],
                np.minimum(beta[1:], y_top),
                color=color,
                lw=2,
                label=f"{CASE_TEXT[label]}: μ_j={mu:g}, α_j={alpha:g}",
            )
            end = tau[-1]
            marks = np.geomspace(1.5e-2, end, 22 if not quick else 8)
            blow = checks[L]["times"][label]["blowup_exact"]
            if np.isfinite(blow):
                marks = np.geomspace(1.5e-2, blow * (1 - 1e-3), 14 if not quick else 6)
            cf = linf_sam([mu], [alpha], RHO, L, marks)
            ax.plot(
                marks,
                np.minimum(cf.beta[:, 0], y_top),
                ls="none",
                marker="o",
                ms=6,
                mfc="none",
                mec=color,
                mew=1.3,
            )
            times = checks[L]["times"][label]
            if np.isfinite(times["hit_flow"]):
                ax.axvline(times["hit_flow"], color=color, ls=":", lw=1)
                ax.annotate(
                    f"hits 0 at τ={times['hit_flow']:.10g}\n(exact {times['hit_exact']:.10g}),"
                    " then slides at 0",
                    xy=(times["hit_flow"], 0.0),
                    xytext=(times["hit_flow"] * 1.4, 2e-3),
                    fontsize=8,
                    color=color,
                    arrowprops=dict(arrowstyle="->", color=color, lw=0.8),
                )
            if np.isfinite(times["blowup_flow"]):
                ax.axvline(times["blowup_flow"], color=color, ls="--", lw=1)
                ax.annotate(
                    f"blow-up at τ*={times['blowup_flow']:.10g}\n(exact {blow:.10g})",
                    xy=(times["blowup_flow"], y_top * 0.3),
                    xytext=(times["blowup_flow"] * 1.5, 3e5),
                    fontsize=8,
                    color=color,
                    arrowprops=dict(arrowstyle="->", color=color, lw=0.8),
                )
        ax.axhline(RHO**L, color="grey", ls="-.", lw=2.5, zorder=0)
        parity = "even" if L % 2 == 0 else "odd"
        c = checks[L]
        ax.set_title(
            f"L = {L} ({parity}): max rel. error flow vs exact {c['max_rel_err']:.1e}\n"
            f"over {c['samples']} samples",
            fontsize=10,
        )
        ax.set_xscale("log")
        ax.set_yscale("symlog", linthresh=1e-2, linscale=0.6)
        ax.set_xlim(1e-2, t_long if not quick else t_long)
        ax.set_ylim(-2e-3, y_top)
        ax.set_xlabel("rescaled time τ (log scale)")
        ax.grid(alpha=0.3, which="major")
    axes[0].set_ylabel("β_j(τ) = a_j(τ)^L   (symlog: linear below 10⁻²)")
    handles, labels = axes[0].get_legend_handles_labels()
    handles += [
        Line2D([], [], color="grey", lw=2),
        Line2D([], [], color="grey", ls="none", marker="o", mfc="none"),
        Line2D([], [], color="grey", ls="-."),
    ]
    labels += ["flow (simulate)", "closed form (exact)", "ρ^L"]
    fig.legend(handles, labels, loc="outside lower center", ncol=6, fontsize=9)
    fig.suptitle(
        "Thm 3.2 — ℓ∞-SAM on one example, ρ = 1: α_j < ρ → 0 (even L, sliding) or ρ^L "
        "(odd L);  α_j = ρ → ρ^L;  α_j > ρ → diverges (finite-time blow-up for L ≥ 3)",
        fontsize=11,
    )
    save(fig, path)


# --- Figure 3: Cor 3.5, the limit map on mu = (1, 2) ----------------------------------------

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


register("linf_limit", run_linf_limit)


def _grid(quick: bool) -> tuple[float, ...]:
    return GRID_QUICK if quick else GRID


def limit_map_tasks(quick: bool) -> list[Task]:
    """One ``linf_limit`` run per depth and grid point (alpha_2 outer, alpha_1 inner)."""
    grid = _grid(quick)
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
                **_solver(quick),
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


def draw_limit_map(results: list[Result], quick: bool, path: Path) -> None:
    """Two panels (L = 2, 3): predicted classes as background, observed limits as markers."""
    agreement = limit_map_agreement(results, quick)
    n_fine = 60 if quick else 200
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


COORDINATES = Figure(
    "fig2_linf_coordinates",
    "linf-SAM beta_j(tau) for alpha_j <, =, > rho at L = 2, 3, 4: flow vs closed form",
    "Does the simulated ℓ∞-SAM flow follow the closed form coordinate by coordinate (decay to "
    "0, standstill, growth, finite-time blow-up) for α_j below, at and above ρ at L = 2, 3, 4?",
    coordinates_tasks,
    draw_coordinates,
)

LIMIT_MAP = Figure(
    "fig3_linf_limit_map",
    "linf-SAM limit direction over (alpha_1/rho, alpha_2/rho), mu = (1, 2), L = 2, 3: "
    "Cor 3.5 vs simulated",
    "Does Corollary 3.5 predict the ℓ∞-SAM limit direction over the whole (α₁/ρ, α₂/ρ) plane at "
    "L = 2 and 3, as the simulated limits show it?",
    limit_map_tasks,
    draw_limit_map,
)
