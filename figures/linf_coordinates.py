"""Figure 2 (``fig2_linf_coordinates``): l_inf-SAM on one example, coordinate by coordinate
(Thm 3.2).

beta_j(tau) for alpha_j below, equal to and above rho at each depth (today L = 2, 3, 4): the flow
(:func:`flows.simulate`) against the exact solution (:func:`flows.closed_form.solutions.linf_sam`,
evaluated at draw time).

In the rescaled clock the coordinates of the balanced single-example l_inf-SAM flow decouple
(docs/theory.md §8), so each case is simulated as its own 1-D example ``(mu_j, +1)``; one joint
run of all the cases per depth (drawn as + at a few samples) shows that the decoupling holds in
the engine too. The limit-direction map (figure 3) is in :mod:`figures.linf_limit_map`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.lines import Line2D

from flows.closed_form.solutions import linf_sam
from flows.sweep.registry import Result, Task

from . import style
from .common import (
    STOPPED_MARK,
    Figure,
    Setting,
    figure_command,
    plt,
    save,
    show,
    stopped_early,
    stopped_handle,
)

#: Default radius (figure 3 shares it).
RHO = 1.0
#: top of the y axis: the flow is drawn up to it (blow-up)
Y_TOP = 1e8
#: Joint-run samples marked per case.
JOINT_MARKS = 8


def solver_options(quick: bool, rtol: float = 1e-8) -> dict:
    """Solver options: DOP853 at ``rtol`` for the figures, a loose RK45 for the smoke test
    (approaching a blow-up to the detection rate 1e12 costs ~1000-3000 field evaluations)."""
    return {"rtol": 1e-6, "method": "RK45"} if quick else {"rtol": rtol}


def _linf_task(mu, alpha, depth: int, t_max: float, n_points: int, s: Setting) -> Task:
    return Task(
        "simulate",
        {
            "mu": list(mu),
            "algorithm": "linf-sam",
            "depth": depth,
            "alpha": list(alpha),
            "rho": s.rho,
            "t_max": t_max,
            "n_points": n_points,
            "original_time": False,
            **solver_options(s.quick, rtol=1e-10),
        },
    )


def bounded(alpha: float, s: Setting) -> bool:
    """Whether a coordinate starting at ``alpha`` stays bounded (``alpha <= rho``): it gets a
    long run as well."""
    return alpha <= s.rho


def coordinates_tasks(s: Setting) -> list[Task]:
    """Per depth: a short 1-D run per case, a long 1-D run per bounded case, one joint run of
    all the cases."""
    tasks = []
    for L in s.depths:
        for mu, alpha in zip(s.mus, s.alphas, strict=True):
            tasks.append(_linf_task([mu], [alpha], L, s.t_short, s.n_short, s))
            if bounded(alpha, s):
                tasks.append(_linf_task([mu], [alpha], L, s.t_long, s.n_long, s))
        tasks.append(_linf_task(s.mus, s.alphas, L, s.t_short, s.n_short, s))
    return tasks


def _split_coordinate_results(results: list[Result], s: Setting) -> tuple[dict, dict]:
    """``{(L, j): (short, long or None)}`` and ``{L: joint}`` in the order of the tasks."""
    it = iter(results)
    per_case, joint = {}, {}
    for L in s.depths:
        for j, alpha in enumerate(s.alphas):
            short = next(it)
            per_case[L, j] = (short, next(it) if bounded(alpha, s) else None)
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


def _beta(lb: np.ndarray, sb: np.ndarray) -> np.ndarray:
    """beta from log|beta| and its sign, capped at :data:`Y_TOP` (a blow-up)."""
    with np.errstate(over="ignore"):
        return np.minimum(np.where(sb == 0, 0.0, sb * np.exp(np.minimum(lb, 700.0))), Y_TOP)


def relation(alpha: float, rho: float) -> str:
    """``<``, ``=`` or ``>``: how ``alpha`` compares with ``rho``."""
    return "<" if alpha < rho else ("=" if alpha == rho else ">")


def draw_coordinates(results: list[Result], s: Setting, path: Path) -> None:
    """One panel per depth: beta_j(tau) per case, flow lines, closed-form circles, the joint
    run's samples, the times beta_j hits 0 and blows up."""
    per_case, joint = _split_coordinate_results(results, s)
    colors = style.coordinate_colors(len(s.mus))
    fig, axes = plt.subplots(
        1,
        len(s.depths),
        figsize=(style.DOUBLE, 3.1),
        sharey=True,
        squeeze=False,
        constrained_layout=True,
    )
    stopped = False
    for ax, L in zip(axes[0], s.depths, strict=True):
        for j, (mu, alpha) in enumerate(zip(s.mus, s.alphas, strict=True)):
            stopped |= _draw_case(ax, L, j, mu, alpha, per_case[L, j], colors[j], s)
            _draw_joint(ax, joint[L], j, colors[j])
        _finish_depth_panel(ax, L, s)
    axes[0, 0].set_ylabel(r"$\beta_j(\tau) = a_j(\tau)^L$ (symlog)")
    _draw_legend(fig, axes[0, 0], stopped, s)
    style.panel_letters(axes[0])
    save(fig, path)


def _draw_case(ax, L: int, j: int, mu: float, alpha: float, runs, color, s: Setting) -> bool:
    """One case at depth L: the flow (line, capped at Y_TOP), the closed form (circles, up to
    just before the exact blow-up time if there is one), the time beta_j hits 0 (a triangle on
    the axis) and the blow-up time (a dashed line); whether a run ended early (× at its end)."""
    tau, lb, sb = _stitched(*runs)
    beta = _beta(lb, sb)
    rel = relation(alpha, s.rho)
    ax.plot(
        tau[1:],
        beta[1:],
        color=color,
        lw=1.3,
        label=rf"$\alpha_j$ = {alpha:g} {rel} $\rho$ ($\mu_j$ = {mu:g})",
    )
    exact = linf_sam([mu], [alpha], s.rho, L, tau[-1:])
    blow = float(exact.blowup_time[0])
    end = blow * (1 - 1e-3) if np.isfinite(blow) else tau[-1]
    marks = np.geomspace(1.5e-2, end, 8 if s.quick else 14)
    cf = linf_sam([mu], [alpha], s.rho, L, marks)
    ax.plot(
        marks,
        np.minimum(cf.beta[:, 0], Y_TOP),
        ls="",
        marker="o",
        ms=3.5,
        mfc="none",
        mec=color,
        mew=0.8,
    )
    hit = _event_tau(runs[0], "sliding")
    if np.isfinite(hit):
        ax.plot(hit, 0.0, ls="", marker="v", ms=5, color=color, mec="black", mew=0.4, zorder=5)
    blown = _event_tau(runs[0], "blow-up")
    if np.isfinite(blown):
        ax.axvline(blown, color=color, ls="--", lw=0.8)
    early = False
    for run in (r for r in runs if r is not None):
        if stopped_early(run, f"l_inf-SAM, L = {L}, alpha_j = {alpha:g}", s):
            ax.plot(run["tau"][-1], beta[np.searchsorted(tau, run["tau"][-1])], **STOPPED_MARK)
            early = True
    return early


def _draw_joint(ax, joint: Result, j: int, color) -> None:
    """Coordinate j of the joint run (all the cases in one run) at :data:`JOINT_MARKS` samples
    evenly spaced in log tau (+)."""
    tau = joint["tau"]
    wanted = np.geomspace(max(tau[1], 1.5e-2), tau[-1], JOINT_MARKS)
    k = np.unique(np.clip(np.searchsorted(tau, wanted), 1, tau.size - 1))
    beta = _beta(joint["log_abs_beta"][k, j], joint["sign_beta"][k, j])
    ax.plot(tau[k], beta, ls="", marker="+", ms=5, color=color, mew=0.8)


def _finish_depth_panel(ax, L: int, s: Setting) -> None:
    """The rho^L line, the title, the axes."""
    ax.axhline(s.rho**L, color="0.5", ls="-.", lw=1.0, zorder=0)
    ax.set_title(f"$L$ = {L} ({'even' if L % 2 == 0 else 'odd'})")
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1e-2, linscale=0.6)
    ax.set_xlim(1e-2, s.t_long)
    ax.set_ylim(-2e-3, Y_TOP)
    ax.set_xlabel(r"rescaled time $\tau$")
    ax.grid(alpha=0.3, which="major", lw=0.4)


def _draw_legend(fig, ax, stopped: bool, s: Setting) -> None:
    """The cases (from ``ax``) and the marks, below the panels."""
    handles, labels = ax.get_legend_handles_labels()
    marks = [
        (Line2D([], [], color="0.3", lw=1.3), "flow (simulate, one coordinate)"),
        (Line2D([], [], color="0.3", ls="", marker="o", mfc="none"), "closed form (Thm 3.2)"),
        (Line2D([], [], color="0.3", ls="", marker="+"), "joint run, all coordinates"),
        (Line2D([], [], color="0.5", ls="-."), r"$\rho^L$"),
        (
            Line2D([], [], color="0.3", ls="", marker="v", mec="black", mew=0.4),
            "hits 0, then slides",
        ),
        (Line2D([], [], color="0.3", ls="--", lw=0.8), "blow-up time"),
    ]
    if stopped:
        marks.append((stopped_handle(), "run ended early"))
    handles += [h for h, _ in marks]
    labels += [t for _, t in marks]
    fig.legend(handles, labels, loc="outside lower center", ncol=3, title=f"$\\rho$ = {s.rho:g}")


def check_coordinates(s: Setting) -> str | None:
    """A setting's problem: not one alpha per mu, a depth below 2."""
    if len(s.mus) != len(s.alphas):
        return f"mus and alphas must have the same length, got {show(s.mus)}, {show(s.alphas)}"
    if min(s.depths) < 2:
        return f"depths must be at least 2 (Thm 3.2), got {show(s.depths)}"
    return None


COORDINATES = Figure(
    "fig2_linf_coordinates",
    "ℓ∞-SAM β_j(τ) for α_j = {alphas} against ρ = {rho} at L = {depths}: flow against the "
    "closed form",
    "Each coordinate (μ_j = {mus}, α_j = {alphas}) is simulated alone (lines; its bounded "
    "cases to τ = {t_long}) and all together (+), and compared with the closed form (circles). "
    "Does the simulated ℓ∞-SAM flow follow the closed form coordinate by coordinate (decay to "
    "0 and sliding for even L, standstill at ρ^L, growth, finite-time blow-up) for α_j below, "
    "at and above ρ = {rho} at L = {depths}?",
    coordinates_tasks,
    draw_coordinates,
    params={
        "mus": (1.0, 2.0, 3.0),
        "alphas": (0.5, 1.0, 1.4),
        "rho": RHO,
        "depths": (2, 3, 4),
        "t_short": 3.0,
        "n_short": 301,
        "t_long": 300.0,
        "n_long": 600,
    },
    quick={"t_short": 2.0, "n_short": 41, "t_long": 20.0, "n_long": 41},
    example={"alphas": (0.6, 0.9, 1.3), "rho": 0.9, "depths": (2, 3)},
    check=check_coordinates,
)


if __name__ == "__main__":
    figure_command(__spec__.name, COORDINATES)
