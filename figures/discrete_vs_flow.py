"""Figure 8 (``fig8_discrete_vs_flow``): discrete SAM against its flow.

Discrete GD / l2-SAM / l_inf-SAM (:func:`flows.iterate`, step eta) against the flow in the
original clock (:func:`flows.simulate`, ``clock="original"``): the error at a fixed time T is
first order in eta; one discrete trajectory over its flow.

Setting: the single example mu = (1, ..., 5), depth L = 2, balanced init alpha, logistic loss.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.lines import Line2D

from flows.sweep.registry import Result, Task

from .common import MU5, OKABE_ITO, Figure, Setting, coordinate_colors, figure_command, plt, save

ALPHA8 = 0.4
#: (algorithm, rho, label, colour); l_inf-SAM uses rho < alpha so that no coordinate hits 0.
ALGOS8 = (
    ("gd", None, "GD", OKABE_ITO[0]),
    ("l2-sam", 1.0, "ℓ2-SAM, ρ = 1", OKABE_ITO[5]),
    ("linf-sam", 0.2, "ℓ∞-SAM, ρ = 0.2", OKABE_ITO[6]),
)
ETAS = (0.2, 0.1, 0.05, 0.02, 0.01, 0.005)
ETAS_QUICK = (0.1, 0.05, 0.02)
#: the discrete run drawn over its flow in the right panel (algorithm index, eta)
SHOWN8 = (1, 0.05)


def _config8(quick: bool) -> tuple[float, tuple[float, ...]]:
    """Horizon T (original time) and the step sizes."""
    return (1.0, ETAS_QUICK) if quick else (10.0, ETAS)


def discrete_tasks(s: Setting) -> list[Task]:
    """Per algorithm: the flow (original clock) to T, then iterate for each eta to T."""
    T, etas = _config8(s.quick)
    tasks = []
    for alg, rho, _, _ in ALGOS8:
        tasks.append(
            Task(
                "simulate",
                {
                    "mu": MU5,
                    "algorithm": alg,
                    "depth": 2,
                    "alpha": ALPHA8,
                    "rho": rho,
                    "clock": "original",
                    "t_max": T,
                    "n_points": 21 if s.quick else 201,
                    "rtol": 1e-11,
                },
            )
        )
        for eta in etas:
            steps = int(round(T / eta))
            tasks.append(
                Task(
                    "iterate",
                    {
                        "mu": MU5,
                        "algorithm": alg,
                        "depth": 2,
                        "alpha": ALPHA8,
                        "rho": rho,
                        "eta": eta,
                        "steps": steps,
                        "record_every": max(1, steps // 50),
                    },
                )
            )
    return tasks


def discrete_errors(results: list[Result], quick: bool) -> dict:
    """Per algorithm: eta, error ``max_j |log|beta_j^disc(T)| - log|beta_j^flow(T)||``, the fitted
    log-log slope and intercept, and the runs."""
    _, etas = _config8(quick)
    it = iter(results)
    out = {}
    for alg, _, _, _ in ALGOS8:
        flow = next(it)
        runs = [next(it) for _ in etas]
        ref = flow["log_abs_beta"][-1]
        with np.errstate(divide="ignore"):
            errs = np.array([np.max(np.abs(np.log(np.abs(r["beta"][-1])) - ref)) for r in runs])
        slope, intercept = np.polyfit(np.log(etas), np.log(errs), 1)
        out[alg] = {
            "eta": np.array(etas),
            "err": errs,
            "slope": float(slope),
            "intercept": float(intercept),
            "flow": flow,
            "runs": runs,
            "status": [int(r["status"]) for r in runs],
        }
    return out


def draw_discrete(results: list[Result], s: Setting, path: Path) -> None:
    """Left: error vs eta (log-log) with slope-1 reference; right: one discrete run over its flow."""
    T, etas = _config8(s.quick)
    errors = discrete_errors(results, s.quick)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5.2), constrained_layout=True)
    for alg, _, label, color in ALGOS8:
        e = errors[alg]
        ax.loglog(
            e["eta"],
            e["err"],
            marker="o",
            color=color,
            lw=1.8,
            label=f"{label}: fitted slope {e['slope']:.3f}",
        )
    eta = np.array(etas)
    anchor = errors["l2-sam"]["err"][0] * 2.0
    ax.loglog(
        eta,
        anchor * eta / eta[0],
        color="grey",
        ls="--",
        lw=1.2,
        label="slope 1 (first order in η)",
    )
    ax.set(
        xlabel="step size η",
        ylabel="max_j |log|β_j^discrete(T)| − log|β_j^flow(T)||",
        title=f"Error at original time T = {T:g} against step size η",
    )
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=9, loc="lower right")

    k_alg, eta_shown = SHOWN8
    alg, _, label, _ = ALGOS8[k_alg]
    e = errors[alg]
    run = e["runs"][list(etas).index(eta_shown)] if eta_shown in etas else e["runs"][0]
    shown = eta_shown if eta_shown in etas else etas[0]
    flow = e["flow"]
    colors = coordinate_colors(len(MU5))
    for j, c in enumerate(colors):
        bx.semilogy(
            flow["t"],
            np.exp(flow["log_abs_beta"][:, j]),
            color=c,
            lw=2,
            label=f"j = {j + 1} (μ_j = {MU5[j]:g})",
        )
        bx.semilogy(
            run["t"],
            np.abs(run["beta"][:, j]),
            ls="none",
            marker="o",
            ms=4.5,
            mfc="none",
            mec=c,
            mew=1.1,
        )
    bx.set(
        xlabel="original time t = k η",
        ylabel="|β_j|",
        title=f"{label}: discrete (markers, η = {shown:g}) over the flow (lines)",
    )
    bx.grid(alpha=0.3, which="both")
    handles, labels = bx.get_legend_handles_labels()
    handles += [
        Line2D([], [], color="grey", lw=2),
        Line2D([], [], color="grey", ls="none", marker="o", mfc="none"),
    ]
    labels += ["flow (simulate, original clock)", f"discrete SAM, η = {shown:g}"]
    bx.legend(handles, labels, fontsize=8.5, loc="lower right")
    fig.suptitle(
        f"Discrete SAM follows the SAM flow: μ = (1,…,5), L = 2, α = {ALPHA8:g}; "
        "error at fixed T is O(η)",
        fontsize=11,
    )
    save(fig, path)


DISCRETE_VS_FLOW = Figure(
    "fig8_discrete_vs_flow",
    "discrete SAM vs flow: error at T against eta (gd, l2-SAM, linf-SAM), one trajectory",
    "Does discrete GD / SAM with step η follow its flow, with an error at a fixed time that is "
    "first order in η?",
    discrete_tasks,
    draw_discrete,
)


if __name__ == "__main__":
    figure_command(__spec__.name, DISCRETE_VS_FLOW)
