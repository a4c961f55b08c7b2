"""Figure 2 (``fig2_linf_coordinates``): l_inf-SAM on one example, coordinate by coordinate
(Thm 3.2).

beta_j(tau) for alpha_j below, equal to and above rho at L = 2, 3, 4: the flow
(:func:`flows.simulate`) against the exact solution (:func:`flows.closed_form.solutions.linf_sam`,
evaluated at draw time).

In the rescaled clock the coordinates of the balanced single-example l_inf-SAM flow decouple
(docs/theory.md §8), so each case is simulated as its own 1-D example ``(mu_j, +1)``; one joint
3-D run per depth checks that the decoupling holds in the engine too (its largest difference
from the 1-D runs: ``joint_vs_1d`` of :func:`coordinate_checks`). The limit-direction map
(figure 3) is in :mod:`figures.linf_limit_map`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.lines import Line2D

from flows.closed_form.solutions import linf_sam
from flows.sweep.registry import Result, Task

from .common import OKABE_ITO, Figure, Setting, figure_command, plt, save

RHO = 1.0
DEPTHS = (2, 3, 4)
#: (label, mu_j, alpha_j) of the three cases: alpha_j below, equal to and above rho.
CASES = (("below", 1.0, 0.5), ("equal", 2.0, 1.0), ("above", 3.0, 1.4))
CASE_COLORS = {"below": OKABE_ITO[5], "equal": OKABE_ITO[0], "above": OKABE_ITO[6]}
CASE_TEXT = {"below": "α_j < ρ", "equal": "α_j = ρ", "above": "α_j > ρ"}
#: top of the y axis: the flow is drawn up to it (blow-up)
Y_TOP = 1e8


def _horizons(quick: bool) -> tuple[tuple[float, int], tuple[float, int]]:
    """(t_max, n_points) of the short run (every case) and the long run (bounded cases)."""
    return ((2.0, 41), (20.0, 41)) if quick else ((3.0, 301), (300.0, 600))


def solver_options(quick: bool, rtol: float = 1e-8) -> dict:
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
            **solver_options(quick, rtol=1e-10),
        },
    )


def coordinates_tasks(s: Setting) -> list[Task]:
    """Per depth: a short 1-D run per case, a long 1-D run per bounded case, one joint 3-D run."""
    (t_short, n_short), (t_long, n_long) = _horizons(s.quick)
    tasks = []
    for L in DEPTHS:
        for label, mu, alpha in CASES:
            tasks.append(_linf_task([mu], [alpha], L, t_short, n_short, s.quick))
            if label != "above":
                tasks.append(_linf_task([mu], [alpha], L, t_long, n_long, s.quick))
        tasks.append(
            _linf_task([c[1] for c in CASES], [c[2] for c in CASES], L, t_short, n_short, s.quick)
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


def draw_coordinates(results: list[Result], s: Setting, path: Path) -> None:
    """Three panels (L = 2, 3, 4): beta_j(tau) per case, flow lines, closed-form markers."""
    per_case, _ = _split_coordinate_results(results)
    checks = coordinate_checks(results)
    t_long = _horizons(s.quick)[1][0]
    fig, axes = plt.subplots(
        1, len(DEPTHS), figsize=(15, 4.9), sharey=True, constrained_layout=True
    )
    for ax, L in zip(axes, DEPTHS, strict=False):
        for label, mu, alpha in CASES:
            times = checks[L]["times"][label]
            _draw_case(ax, L, label, mu, alpha, per_case[L, label], times, s.quick)
            _mark_events(ax, CASE_COLORS[label], times)
        _finish_depth_panel(ax, L, checks[L], t_long)
    axes[0].set_ylabel("β_j(τ) = a_j(τ)^L   (symlog: linear below 10⁻²)")
    _draw_legend(fig, axes[0])
    fig.suptitle(
        "Thm 3.2 — ℓ∞-SAM on one example, ρ = 1: α_j < ρ → 0 (even L, sliding) or ρ^L "
        "(odd L);  α_j = ρ → ρ^L;  α_j > ρ → diverges (finite-time blow-up for L ≥ 3)",
        fontsize=11,
    )
    save(fig, path)


def _draw_case(
    ax,
    L: int,
    label: str,
    mu: float,
    alpha: float,
    runs: tuple[Result, Result | None],
    times: dict,
    quick: bool,
) -> None:
    """One case at depth L: the flow (line, capped at Y_TOP) and the closed form (markers, up
    to just before the exact blow-up time if there is one)."""
    color = CASE_COLORS[label]
    tau, lb, sb = _stitched(*runs)
    with np.errstate(over="ignore"):
        beta = np.where(sb == 0, 0.0, np.exp(np.minimum(lb, 700.0)))
    ax.plot(
        tau[1:],
        np.minimum(beta[1:], Y_TOP),
        color=color,
        lw=2,
        label=f"{CASE_TEXT[label]}: μ_j={mu:g}, α_j={alpha:g}",
    )
    end = tau[-1]
    marks = np.geomspace(1.5e-2, end, 22 if not quick else 8)
    blow = times["blowup_exact"]
    if np.isfinite(blow):
        marks = np.geomspace(1.5e-2, blow * (1 - 1e-3), 14 if not quick else 6)
    cf = linf_sam([mu], [alpha], RHO, L, marks)
    ax.plot(
        marks,
        np.minimum(cf.beta[:, 0], Y_TOP),
        ls="none",
        marker="o",
        ms=6,
        mfc="none",
        mec=color,
        mew=1.3,
    )


def _mark_events(ax, color: str, times: dict) -> None:
    """The flow's hitting time of 0 and blow-up time (vertical lines), annotated with the exact
    ones."""
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
            f"blow-up at τ*={times['blowup_flow']:.10g}\n(exact {times['blowup_exact']:.10g})",
            xy=(times["blowup_flow"], Y_TOP * 0.3),
            xytext=(times["blowup_flow"] * 1.5, 3e5),
            fontsize=8,
            color=color,
            arrowprops=dict(arrowstyle="->", color=color, lw=0.8),
        )


def _finish_depth_panel(ax, L: int, check: dict, t_long: float) -> None:
    """The rho^L line, the title with the flow's error against the closed form, the axes."""
    ax.axhline(RHO**L, color="grey", ls="-.", lw=2.5, zorder=0)
    parity = "even" if L % 2 == 0 else "odd"
    ax.set_title(
        f"L = {L} ({parity}): max rel. error flow vs exact {check['max_rel_err']:.1e}\n"
        f"over {check['samples']} samples",
        fontsize=10,
    )
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1e-2, linscale=0.6)
    ax.set_xlim(1e-2, t_long)
    ax.set_ylim(-2e-3, Y_TOP)
    ax.set_xlabel("rescaled time τ (log scale)")
    ax.grid(alpha=0.3, which="major")


def _draw_legend(fig, ax) -> None:
    """The cases (from ``ax``) and the line kinds, below the panels."""
    handles, labels = ax.get_legend_handles_labels()
    handles += [
        Line2D([], [], color="grey", lw=2),
        Line2D([], [], color="grey", ls="none", marker="o", mfc="none"),
        Line2D([], [], color="grey", ls="-."),
    ]
    labels += ["flow (simulate)", "closed form (exact)", "ρ^L"]
    fig.legend(handles, labels, loc="outside lower center", ncol=6, fontsize=9)


COORDINATES = Figure(
    "fig2_linf_coordinates",
    "linf-SAM beta_j(tau) for alpha_j <, =, > rho at L = 2, 3, 4: flow vs closed form",
    "Does the simulated ℓ∞-SAM flow follow the closed form coordinate by coordinate (decay to "
    "0, standstill, growth, finite-time blow-up) for α_j below, at and above ρ at L = 2, 3, 4?",
    coordinates_tasks,
    draw_coordinates,
)


if __name__ == "__main__":
    figure_command(__spec__.name, COORDINATES)
