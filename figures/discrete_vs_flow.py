"""Figure 8 (``fig8_discrete_vs_flow``): discrete SAM against its flow.

Discrete GD / l2-SAM / l_inf-SAM (:func:`flows.iterate`, step eta) against the flow in the
original clock (:func:`flows.simulate`, ``clock="original"``): (a) the error at a fixed time T
against eta, first order; (b) one discrete trajectory over its flow.

Setting (parameters): mu, depth L, balanced init alpha, logistic loss; each algorithm's rho
(l_inf-SAM's below alpha, so that no coordinate reaches 0).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.lines import Line2D

from flows.sweep.registry import Result, Task

from . import style
from .common import (
    MU5,
    STOPPED_MARK,
    Figure,
    Setting,
    coordinate_colors,
    figure_command,
    format_mu,
    plt,
    save,
    stopped_early,
)


def _rho(s: Setting, algorithm: str) -> float | None:
    """``algorithm``'s rho (None for GD, which has none; ``s.rho`` lists the others' in order)."""
    return None if algorithm == "gd" else s.rho[_sam(s).index(algorithm)]


def _sam(s: Setting) -> list[str]:
    """The algorithms other than GD, in order."""
    return [a for a in s.algorithms if a != "gd"]


def discrete_tasks(s: Setting) -> list[Task]:
    """Per algorithm: the flow (original clock) to T, then iterate for each eta to T."""
    tasks = []
    for alg in s.algorithms:
        base = {
            "mu": s.mu,
            "algorithm": alg,
            "depth": s.depth,
            "alpha": s.alpha,
            "rho": _rho(s, alg),
        }
        tasks.append(
            Task(
                "simulate",
                {
                    **base,
                    "clock": "original",
                    "t_max": s.horizon,
                    "n_points": 21 if s.quick else 201,
                    "rtol": 1e-11,
                },
            )
        )
        for eta in s.etas:
            steps = int(round(s.horizon / eta))
            tasks.append(
                Task(
                    "iterate",
                    {**base, "eta": eta, "steps": steps, "record_every": max(1, steps // 50)},
                )
            )
    return tasks


def discrete_errors(results: list[Result], s: Setting) -> dict:
    """Per algorithm: eta, error ``max_j |log|beta_j^disc(T)| - log|beta_j^flow(T)||``, the fitted
    log-log slope, the flow, the discrete runs and which of them ended early."""
    it = iter(results)
    out = {}
    for alg in s.algorithms:
        flow = next(it)
        runs = [next(it) for _ in s.etas]
        ref = flow["log_abs_beta"][-1]
        with np.errstate(divide="ignore"):
            errs = np.array([np.max(np.abs(np.log(np.abs(r["beta"][-1])) - ref)) for r in runs])
        fit = np.isfinite(errs) & (errs > 0)
        slope = np.polyfit(np.log(np.array(s.etas)[fit]), np.log(errs[fit]), 1)[0]
        out[alg] = {
            "eta": np.array(s.etas),
            "err": errs,
            "slope": float(slope),
            "flow": flow,
            "runs": runs,
            "stopped": [
                stopped_early(r, f"{alg} steps, eta = {eta:g}", s)
                for r, eta in zip(runs, s.etas, strict=True)
            ],
        }
    return out


def _rho_text(s: Setting, alg: str) -> str:
    """``", ρ = 1"`` for a SAM algorithm, nothing for GD."""
    rho = _rho(s, alg)
    return "" if rho is None else f", ρ = {rho:g}"


def _draw_errors(ax, errors: dict, s: Setting) -> bool:
    """Panel (a): the error at T against eta per algorithm (its steps' style) and a slope-1
    reference; whether a run ended early (marked)."""
    stopped = False
    for alg in s.algorithms:
        e = errors[alg]
        kwargs = style.algorithm_style(alg, "steps")
        kwargs["label"] = f"{style.label(alg)}{_rho_text(s, alg)}: slope {e['slope']:.2f}"
        ax.loglog(e["eta"], e["err"], **kwargs)
        for eta, err, early in zip(e["eta"], e["err"], e["stopped"], strict=True):
            if early:
                ax.plot(eta, err, **STOPPED_MARK)
                stopped = True
    eta = np.array(s.etas)
    top = max(np.nanmax(errors[a]["err"]) for a in s.algorithms)
    ax.loglog(eta, 2.0 * top * eta / eta.max(), color=style.GREY, ls=":", label="∝ η")
    ax.set(
        xlabel="step size η",
        ylabel=r"$\max_j\,|\Delta \log|\beta_j(T)||$",
        title=f"$\\mu$ = {format_mu(s.mu)}, L = {s.depth}, α = {s.alpha:g}, T = {s.horizon:g}",
    )
    ax.set_ylim(bottom=min(np.nanmin(errors[a]["err"]) for a in s.algorithms) / 40)
    ax.grid(alpha=0.3, which="major")
    ax.legend(loc="lower right")
    return stopped


def _draw_trajectory(bx, errors: dict, s: Setting) -> bool:
    """Panel (b): |beta_j| of the shown algorithm's steps at the shown eta (hollow markers)
    over its flow (lines); whether that run ended early (marked)."""
    alg = s.shown
    e = errors[alg]
    k = s.etas.index(s.shown_eta) if s.shown_eta in s.etas else 0
    run, flow, eta = e["runs"][k], e["flow"], s.etas[k]
    colors = coordinate_colors(len(s.mu))
    for j, c in enumerate(colors):
        bx.semilogy(
            flow["t"],
            np.exp(flow["log_abs_beta"][:, j]),
            color=c,
            label=f"$\\mu_{{{j + 1}}}$ = {s.mu[j]:g}",
        )
        bx.semilogy(
            run["t"],
            np.abs(run["beta"][:, j]),
            ls="none",
            marker="o",
            ms=2.5,
            mfc="none",
            mec=c,
            mew=0.7,
        )
    if e["stopped"][k]:
        bx.plot(run["t"][-1], np.max(np.abs(run["beta"][-1])), **STOPPED_MARK)
    handles, labels = bx.get_legend_handles_labels()
    handles += [
        Line2D([], [], color=style.GREY),
        Line2D([], [], color=style.GREY, ls="none", marker="o", ms=2.5, mfc="none"),
    ]
    labels += ["flow", f"steps, η = {eta:g}"]
    bx.legend(handles, labels, loc="upper left", ncol=3, columnspacing=0.8)
    top = max(np.max(np.exp(flow["log_abs_beta"])), np.max(np.abs(run["beta"])))
    bx.set_ylim(top=4.0 * top)
    bx.set(
        xlabel="original time t = kη",
        ylabel=r"$|\beta_j|$",
        title=f"{style.label(alg)}{_rho_text(s, alg)}: steps over the flow",
    )
    bx.grid(alpha=0.3, which="major")
    return bool(e["stopped"][k])


def draw_discrete(results: list[Result], s: Setting, path: Path) -> None:
    """(a) error at T against eta (log-log) with a slope-1 reference; (b) one discrete run
    (markers) over its flow (lines), one colour per coordinate; × marks a run that ended early."""
    errors = discrete_errors(results, s)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(style.DOUBLE, 2.7), constrained_layout=True)
    stopped = _draw_errors(ax, errors, s) | _draw_trajectory(bx, errors, s)
    if stopped:
        ax.plot([], [], **{**STOPPED_MARK, "label": "× run ended early"})
        ax.legend(loc="lower right")
    style.panel_letters((ax, bx))
    save(fig, path)


def check(s: Setting) -> str | None:
    """One rho per SAM algorithm, the shown algorithm among them, positive steps below T."""
    if len(s.rho) != len(_sam(s)):
        return f"give one rho per algorithm other than GD ({len(_sam(s))}), got {len(s.rho)}"
    if s.shown not in s.algorithms:
        return f"shown = {s.shown} is not one of the algorithms {s.algorithms}"
    if min(s.etas) <= 0 or max(s.etas) >= s.horizon:
        return f"step sizes must lie in (0, horizon = {s.horizon:g}), got {s.etas}"
    return None


DISCRETE_VS_FLOW = Figure(
    "fig8_discrete_vs_flow",
    "discrete SAM vs flow: error at T against eta (GD, l2-SAM, linf-SAM), one trajectory",
    "(a) The error at time T = {horizon} between the steps and the flow, against the step size "
    "η, for each algorithm (the legend gives the fitted log-log slope; dotted: slope 1). "
    "(b) |β_j| of the steps at η = {shown_eta} (hollow markers) over the flow (lines). "
    "μ = {mu}, L = {depth}, α = {alpha}; each SAM algorithm's ρ in the legend of (a). "
    "Does discrete GD / SAM with step η follow its flow, with an error at a fixed time that is "
    "first order in η?",
    discrete_tasks,
    draw_discrete,
    params={
        "mu": MU5,
        "depth": 2,
        "alpha": 0.4,
        "algorithms": ("gd", "l2-sam", "linf-sam"),
        "rho": (1.0, 0.2),
        "etas": (0.2, 0.1, 0.05, 0.02, 0.01, 0.005),
        "horizon": 10.0,
        "shown": "l2-sam",
        "shown_eta": 0.05,
    },
    quick={"etas": (0.1, 0.05, 0.02), "horizon": 1.0},
    example={"mu": (1.0, 2.0, 3.5), "alpha": 0.35, "rho": (0.7, 0.15), "horizon": 1.5},
    check=check,
)


if __name__ == "__main__":
    figure_command(__spec__.name, DISCRETE_VS_FLOW)
