"""Figures 10 and 10b: LE-SAM's perturbation against l2-SAM's and USAM's on the single example
``D_mu``, L = 2, at the settings matched at theta(0) (:mod:`figures.lesam`).

* ``fig10_lesam_radius``: the radius ``||eps||`` (LE-SAM's ``rho_t``), the loss increase
  ``L(theta + eps) - L(theta)`` against LE-SAM's budget ``sigma(tau)``, and the training loss,
  over tau; the stall point of LE-SAM with the largest cap as dashed lines.
* ``fig10b_lesam_curvature``: what the perturbation does to the update: the angle between the
  SAM step ``-grad L(theta + eps)`` and the gradient step, and the size of the correction
  ``||grad L(theta + eps) - grad L(theta)|| / ||grad L(theta)||``, over tau.

Both draw the same runs (``'lesam-run'`` tasks, cached once).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.lesam.radius import initial_gradient_norm
from analysis.lesam.stall import stall_point
from flows.data import single_example
from flows.sweep.registry import Result, Task

from . import style
from .common import (
    MU5,
    STOPPED_MARK,
    Figure,
    Setting,
    figure_command,
    format_mu,
    plt,
    save,
    stopped_early,
)
from .lesam import ALPHA, CAP, RHO, Run, compared, run_style, run_task

#: The parameters of both figures: D_mu, alpha, l2-SAM's radius, LE-SAM's caps, the horizon.
PARAMS = {
    "mu": MU5,
    "alpha": ALPHA,
    "rho": RHO,
    "rho_max": (1.5, 3.0),
    "horizon": 8.0,
    "samples": 241,
}
QUICK = {"horizon": 2.0, "samples": 41}
EXAMPLE = {"alpha": 0.45, "rho_max": (1.5, 2.5)}


def runs(s: Setting) -> list[Run]:
    """The matched runs drawn here: all of :func:`figures.lesam.compared` but GD."""
    return compared(s.horizon, s.mu, s.alpha, s.rho, s.rho_max)[1:]


def radius_tasks(s: Setting) -> list[Task]:
    """The matched l2-SAM, USAM and LE-SAM runs with their perturbation series."""
    return [
        run_task(alg, hp, s.horizon, s.samples, mu=s.mu, alpha=s.alpha) for _, alg, hp, _ in runs(s)
    ]


def _plot(ax, key: str, tau: np.ndarray, y: np.ndarray, stopped: bool, **kw) -> None:
    """One run's series in its style (``kw`` added), with the stop mark at its last finite
    point if the run ended early."""
    ax.plot(tau, y, **{**run_style(key), **kw})
    finite = np.flatnonzero(np.isfinite(y))
    if stopped and finite.size:
        ax.plot(tau[finite[-1]], y[finite[-1]], **STOPPED_MARK)


def _loss_increase(res: Result) -> np.ndarray:
    """``L(theta + eps) - L(theta)`` (nan where not positive)."""
    with np.errstate(over="ignore", invalid="ignore"):
        increase = np.exp(res["log_loss"]) * np.expm1(res["log_loss_perturbed"] - res["log_loss"])
    return np.where(increase > 0, increase, np.nan)


def _legend(fig, s: Setting, extra: list) -> None:
    """The runs' legend below the panels, titled with the matched setting."""
    handles = [
        plt.Line2D([], [], label=label, **run_style(key)) for key, _, _, label in runs(s)
    ] + extra
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncol=2,
        title=rf"matched at $\theta(0)$ to {style.label('l2-sam')}: $\mu$ = {format_mu(s.mu)}, "
        rf"L = 2, $\alpha$ = {s.alpha:g}",
    )


def _stopped_handle(stopped: bool) -> list:
    """The legend entry of the stop mark, if a run ended early."""
    return [plt.Line2D([], [], label="run ended early", **STOPPED_MARK)] if stopped else []


def draw_radius(results: list[Result], s: Setting, path: Path) -> None:
    """Radius, loss increase with LE-SAM's budget (thin dotted), and training loss over tau."""
    fig, (ax_r, ax_b, ax_l) = plt.subplots(
        1, 3, figsize=(style.DOUBLE, 3.4), constrained_layout=True
    )
    any_stopped = False
    for (key, alg, _, label), res in zip(runs(s), results, strict=True):
        stopped = stopped_early(res, label, s)
        any_stopped |= stopped
        tau = res["tau"]
        _plot(ax_r, key, tau, res["radius"], stopped)
        _plot(ax_b, key, tau, _loss_increase(res), stopped)
        if alg == "le-sam":
            budget = np.where(res["budget"] > 0, res["budget"], np.nan)
            ax_b.plot(tau, budget, color=run_style(key)["color"], lw=0.7, ls=":")
        _plot(ax_l, key, tau, res["loss"], stopped)
    extra = _stall_lines(ax_r, ax_l, s)
    extra.append(
        plt.Line2D([], [], color="0.3", lw=0.7, ls=":", label=r"LE-SAM's budget $\sigma(\tau)$")
    )
    ax_r.set(yscale="log", ylim=(1e-3, 10), ylabel=r"radius $\|\varepsilon\|$", title="radius")
    ax_b.set(
        yscale="log",
        ylim=(1e-5, 3),
        ylabel=r"$L(\theta+\varepsilon) - L(\theta)$",
        title="loss increase, budget",
    )
    ax_l.set(yscale="log", ylim=(1e-16, 1), ylabel=r"$L(\theta(\tau))$", title="training loss")
    _finish(fig, (ax_r, ax_b, ax_l), s, extra + _stopped_handle(any_stopped), path)


def _stall_lines(ax_r, ax_l, s: Setting) -> list:
    """The stall point of LE-SAM with the largest cap (its radius and loss, dashed grey) when
    it is an equilibrium; its legend entry."""
    sigma = s.rho * _g0(s)
    stall = stall_point(s.mu, sigma, s.rho_max[-1])
    if stall is None or not stall.admissible:
        return []
    for ax, value in ((ax_r, stall.radius), (ax_l, stall.loss)):
        ax.axhline(value, color="0.4", lw=0.8, ls="--")
    return [
        plt.Line2D(
            [],
            [],
            color="0.4",
            lw=0.8,
            ls="--",
            label=f"LE-SAM's stall point, {CAP} = {s.rho_max[-1]:g}: "
            f"radius {stall.radius:.3g}, loss {stall.loss:.3g}",
        )
    ]


def _g0(s: Setting) -> float:
    """``||grad L(theta(0))||`` on ``D_mu`` at the setting's alpha."""
    return initial_gradient_norm(single_example(s.mu), s.alpha, 2)


def _finish(fig, axes, s: Setting, extra: list, path: Path) -> None:
    """Time axes, grids, panel letters, the legend; save."""
    for ax in axes:
        ax.set_xlabel(r"rescaled time $\tau$")
        ax.grid(alpha=0.3, which="major")
    style.panel_letters(axes)
    _legend(fig, s, extra)
    save(fig, path)


def draw_curvature(results: list[Result], s: Setting, path: Path) -> None:
    """The angle the perturbation turns the step, and the size of the correction, over tau."""
    fig, (ax_a, ax_c) = plt.subplots(1, 2, figsize=(style.DOUBLE, 3.1), constrained_layout=True)
    any_stopped = False
    for (key, _, _, label), res in zip(runs(s), results, strict=True):
        stopped = stopped_early(res, label, s)
        any_stopped |= stopped
        _plot(ax_a, key, res["tau"], np.degrees(res["update_angle"]), stopped)
        _plot(ax_c, key, res["tau"], res["relative_change"], stopped)
    ax_c.axhline(1.0, color="0.4", lw=0.8, ls="--")
    ax_a.set(
        ylim=(-3, 97),
        yticks=range(0, 91, 15),
        ylabel="angle [deg]",
        title=r"angle between $-\nabla L(\theta+\varepsilon)$ and $-\nabla L(\theta)$",
    )
    ax_c.set(
        yscale="log",
        ylim=(1e-3, 1e8),
        ylabel="relative size",
        title=r"$\|\nabla L(\theta+\varepsilon) - \nabla L(\theta)\| \,/\, \|\nabla L(\theta)\|$",
    )
    extra = [plt.Line2D([], [], color="0.4", lw=0.8, ls="--", label="correction = gradient")]
    _finish(fig, (ax_a, ax_c), s, extra + _stopped_handle(any_stopped), path)


def _check(s: Setting) -> str | None:
    """The caps must be positive and increasing (the last one is the schedule's)."""
    caps = np.asarray(s.rho_max, dtype=float)
    if np.any(caps <= 0) or np.any(np.diff(caps) <= 0):
        return f"rho_max must be positive and increasing, got {s.rho_max}"
    return None


RADIUS = Figure(
    "fig10_lesam_radius",
    "LE-SAM's radius, loss increase against its budget, and training loss over tau, "
    "vs l2-SAM and USAM (mu = {mu}, L = 2, alpha = {alpha})",
    "Starting from the same perturbation as ℓ2-SAM with ρ = {rho} (α = {alpha}, μ = {mu}, "
    "L = 2), how does LE-SAM's radius ρ_t evolve, does its loss increase stay at the budget σ, "
    "and where does the training loss go? (a) the radius ‖ε‖ (ρ_t for LE-SAM; USAM's is "
    "ρ‖∇L‖); (b) the exact loss increase L(θ+ε) − L(θ) (solid) and LE-SAM's budget σ(τ) (thin "
    "dotted; the first-order increase ρ_t‖∇L‖ equals it while the cap ρ_max does not bind); "
    "(c) the training loss. Dashed: the stall point of LE-SAM with ρ_max = the last of "
    "{rho_max} (radius √2a*, loss ℓ(m*); analysis.lesam.stall_point), drawn when it is an "
    "equilibrium. LE-SAM's variants share its colour and differ by marker (hollow: warm-up + "
    "cosine budget); × marks a run that ended early.",
    radius_tasks,
    draw_radius,
    params=PARAMS,
    quick=QUICK,
    example=EXAMPLE,
    check=_check,
)

CURVATURE = Figure(
    "fig10b_lesam_curvature",
    "The angle the perturbation turns the update, and the size of its correction, over tau: "
    "l2-SAM, USAM, LE-SAM (mu = {mu}, L = 2, alpha = {alpha})",
    "When does the perturbation change the update (the 'curvature signal' LE-SAM's paper says "
    "SAM only gets late)? Same runs as fig10_lesam_radius (matched to ℓ2-SAM with ρ = {rho} at "
    "θ(0), α = {alpha}, μ = {mu}, L = 2). (a) the angle between the SAM step −∇L(θ+ε) and the "
    "gradient step −∇L(θ): the change of direction; (b) the size of the correction against "
    "the gradient (dashed: equal): the change of speed. × marks a run that ended early.",
    radius_tasks,
    draw_curvature,
    params=PARAMS,
    quick=QUICK,
    example=EXAMPLE,
    check=_check,
)


if __name__ == "__main__":
    figure_command(__spec__.name, RADIUS, CURVATURE)
