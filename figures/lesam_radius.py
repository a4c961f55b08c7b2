"""Figure 10 (``fig10_lesam_radius``): LE-SAM's effective radius and loss budget against l2-SAM
and USAM on the single example ``mu = (1, ..., 5)``, L = 2 (settings: :mod:`figures.lesam`).

The effective radius ``rho_t``, the loss increase ``L(theta + eps) - L(theta)`` against the
budget, the training loss, and what the perturbation does to the update (the angle it turns the
step, the size of its correction) over tau.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.lesam.stall import stall_point
from flows.sweep.registry import Result, Task

from .common import MU5, Figure, Setting, figure_command, plt, save
from .lesam import ALPHA, SIGMA0, STYLE, compared, run_task

FIG10_T = 8.0
FIG10_RUNS = ("l2", "usam", "le15", "le3", "wc3", "official")


def fig10_runs(quick: bool) -> list[tuple[str, str, dict, str]]:
    """The matched runs of :func:`figures.lesam.compared` drawn here (all but GD)."""
    t_end = 2.0 if quick else FIG10_T
    return [r for r in compared(t_end) if r[0] in FIG10_RUNS]


def fig10_tasks(s: Setting) -> list[Task]:
    """The matched l2-SAM, USAM and LE-SAM runs with their perturbation series."""
    t_end, n = (2.0, 41) if s.quick else (FIG10_T, 241)
    return [run_task(alg, hp, t_end, n) for _, alg, hp, _ in fig10_runs(s.quick)]


def draw_fig10(results: list[Result], s: Setting, path: Path) -> None:
    """Radius, loss budget, training loss and update angle over tau."""
    fig, axes = plt.subplots(2, 3, figsize=(17, 8.8), constrained_layout=True)
    (ax_r, ax_b, ax_l), (ax_a, ax_c, ax_legend) = axes
    stall = stall_point(MU5, SIGMA0, 3.0)
    for (key, alg, _, label), res in zip(fig10_runs(s.quick), results, strict=True):
        _draw_run(axes, key, alg, label, res)
    _finish_with_stall(
        ax_r,
        stall.radius,
        f"stall radius √2·a* = {stall.radius:.3f}",
        stall.radius * 1.15,
        s.quick,
        yscale="log",
        ylim=(1e-3, 10),
        ylabel="effective radius ‖ε‖ (ρ_t for LE-SAM)",
        title="(a) radius ρ_t = min(σ/(‖∇L‖+ϱ), ρ_max)",
    )
    _finish_loss_increase(ax_b)
    _finish_with_stall(
        ax_l,
        stall.loss,
        f"stall: loss ℓ(m*) = {stall.loss:.4f}, m* = {stall.margin:.3f} on e₁",
        stall.loss * 2.5,
        s.quick,
        yscale="log",
        ylim=(1e-16, 1),
        ylabel="training loss L(θ(τ))",
        title="(c) training loss: ρ_max = 3 stalls",
    )
    _finish_curvature_signal(ax_a, ax_c)
    for ax in axes.ravel()[:5]:
        ax.set_xlabel("rescaled time τ")
        ax.grid(alpha=0.3, which="both")
    ax_legend.axis("off")
    ax_legend.legend(
        *ax_r.get_legend_handles_labels(),
        loc="center",
        fontsize=9,
        title="matched at θ(0): same ε as ℓ2-SAM ρ = 1",
    )
    fig.suptitle(
        f"LE-SAM's radius and loss budget vs ℓ2-SAM and USAM: μ = (1,…,5), L = 2, "
        f"α = {ALPHA:g}, matched at θ(0) (σ = ρ‖∇L₀‖ = {SIGMA0:.4f})"
        + ("  [QUICK]" if s.quick else ""),
        fontsize=11,
    )
    save(fig, path)


def _draw_run(axes: np.ndarray, key: str, alg: str, label: str, res: Result) -> None:
    """One run's radius, loss increase (and LE-SAM's budget), loss, update angle and relative
    correction, in the five panels."""
    (ax_r, ax_b, ax_l), (ax_a, ax_c, _) = axes
    tau, st = res["tau"], STYLE[key]
    ax_r.plot(tau, res["radius"], label=label, **st)
    with np.errstate(over="ignore", invalid="ignore"):
        increase = np.exp(res["log_loss"]) * np.expm1(res["log_loss_perturbed"] - res["log_loss"])
    ax_b.plot(tau, np.where(increase > 0, increase, np.nan), **st)
    if alg == "le-sam":
        ax_b.plot(
            tau,
            np.where(res["budget"] > 0, res["budget"], np.nan),
            color=st["color"],
            lw=1,
            ls=(0, (1, 2)),
        )
    ax_l.plot(tau, res["loss"], **st)
    ax_a.plot(tau, np.degrees(res["update_angle"]), **st)
    ax_c.plot(tau, res["relative_change"], **st)


def _note_x(quick: bool) -> float:
    """Where the notes on the stall lines start."""
    return FIG10_T * 0.45 if not quick else 0.5


def _finish_with_stall(ax, value: float, note: str, note_y: float, quick: bool, **axes) -> None:
    """A panel's stall value (dashed line, with ``note`` at height ``note_y``) and its axes
    properties ``axes``."""
    ax.axhline(value, color="0.4", lw=0.8, ls="--")
    ax.text(_note_x(quick), note_y, note, fontsize=8, color="0.3")
    ax.set(**axes)


def _finish_loss_increase(ax) -> None:
    """Panel (b): the axes."""
    ax.set(
        yscale="log",
        ylim=(1e-5, 3),
        ylabel="L(θ+ε) − L(θ)\n(first order ρ_t‖∇L‖ = σ while uncapped)",
        title="(b) loss increase (solid), budget σ(τ) (dotted)",
    )


def _finish_curvature_signal(ax_a, ax_c) -> None:
    """Panels (d) and (e): the axes, and the line where the correction equals the gradient."""
    ax_a.set(
        ylabel="angle between −∇L(θ+ε) and −∇L(θ) [deg]",
        ylim=(-3, 97),
        title="(d) curvature signal, direction: the angle SAM turns the step",
    )
    ax_c.set(
        yscale="log",
        ylim=(1e-3, 1e8),
        ylabel="‖∇L(θ+ε) − ∇L(θ)‖ / ‖∇L(θ)‖",
        title="(e) curvature signal, size: correction against the gradient",
    )
    ax_c.axhline(1.0, color="0.4", lw=0.8, ls="--")


RADIUS = Figure(
    "fig10_lesam_radius",
    "LE-SAM's effective radius rho_t and loss budget over tau vs l2-SAM and USAM (mu=(1..5), L=2)",
    "Starting from the same perturbation as ℓ2-SAM, how does LE-SAM's radius ρ_t evolve, does it "
    "hold the loss increase at its budget σ, and when does its perturbation turn the update (the "
    "claimed early curvature signal)?",
    fig10_tasks,
    draw_fig10,
)


if __name__ == "__main__":
    figure_command(__spec__.name, RADIUS)
