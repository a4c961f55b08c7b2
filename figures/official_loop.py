"""Figure 16 (``fig16_official_loop``): LE-SAM's official training loop against the plain flow it
is analysed as.

LE-SAM's training script runs its optimizer (:func:`flows.algorithms.official_lesam_perturbation`)
on SGD with momentum 0.9, weight decay 5e-4 and a cosine learning rate, with the loss budget
``sigma`` set once per epoch (:func:`flows.schedules.lesam_official`: warm-up over the first
twentieth of the epochs, hold, cosine from four fifths). Here, on the Gaussian blobs of figure 7
(L = 2, uniform ``alpha``, full batch, ``steps_per_epoch`` steps an epoch, peak rate ``eta``):
the flow of the official perturbation with a constant budget (original clock, one epoch =
``steps_per_epoch * eta`` of time), then discrete runs adding one ingredient at a time: the
steps; the staircase budget; momentum and the cosine rate; weight decay (the whole loop). The
flow is drawn in LE-SAM's colour solid, the steps in its colour dashed (figures.style's line per
dynamics), each added ingredient a darker shade with its own marker.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

from flows.schedules import cosine, lesam_official
from flows.sweep.registry import Result, Task

from . import style
from .blobs import gaussian_blobs
from .common import STOPPED_MARK, Figure, Setting, figure_command, plt, save, stopped_early
from .directions import references, row_angles_deg
from .lesam import CAP
from .multi_sample import data_task

DEPTH16 = 2
ALGORITHM = "le-sam-official"
#: Darker shades of LE-SAM's colour for the ingredients added to the steps, with their markers.
SHADES = (("#A8527F", "s"), ("#7D3A5E", "^"), ("#4F2340", "D"))


def horizon(s: Setting) -> float:
    """The flow time of the whole run: epochs x steps an epoch x the peak rate."""
    return s.epochs * s.steps_per_epoch * s.eta


def fig16_runs(s: Setting) -> list[tuple[str, dict, str, dict]]:
    """(key, iterate parameters, label, style) of the discrete runs."""
    staircase = lesam_official(
        s.sigma, max(1, s.epochs // 20), int(0.8 * s.epochs), s.epochs, s.steps_per_epoch, s.eta
    )
    plain = {"eta": s.eta, "sigma": s.sigma}
    stairs = {"eta": s.eta, "sigma": staircase.spec()}
    loop = {
        "eta": cosine(s.eta, horizon(s)).spec(),
        "sigma": staircase.spec(),
        "momentum": s.momentum,
    }
    steps_style = style.algorithm_style(ALGORITHM, "steps")
    steps_label = f"{steps_style.pop('label')}, η = {s.eta:g}, σ constant"
    added = [
        ("stairs", stairs, "+ σ staircase per epoch"),
        ("momentum", loop, f"+ momentum {s.momentum:g}, cosine rate"),
        (
            "official",
            {**loop, "weight_decay": s.weight_decay},
            f"+ weight decay {s.weight_decay:g}: the official loop",
        ),
    ]
    return [("steps", plain, steps_label, steps_style)] + [
        (key, params, label, {**steps_style, "color": color, "marker": marker})
        for (key, params, label), (color, marker) in zip(added, SHADES, strict=True)
    ]


def fig16_tasks(s: Setting) -> list[Task]:
    """The flow (original clock), then the discrete runs."""
    X, y = gaussian_blobs()
    hp = {"sigma": s.sigma, "rho_max": s.rho_max}
    flow = data_task(
        X, y, ALGORITHM, hp, DEPTH16, s.alpha, horizon(s), s.epochs + 1, clock="original"
    )
    runs = [
        Task(
            "iterate",
            {
                "X": X.tolist(),
                "y": y.tolist(),
                "algorithm": ALGORITHM,
                "depth": DEPTH16,
                "alpha": s.alpha,
                "rho_max": s.rho_max,
                "steps": s.epochs * s.steps_per_epoch,
                "record_every": s.steps_per_epoch,
                **params,
            },
        )
        for _, params, _, _ in fig16_runs(s)
    ]
    return [flow, *runs]


def _angle_to(beta: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Angle (degrees) of each row of ``beta`` to the unit ``reference``."""
    return row_angles_deg(beta / np.linalg.norm(beta, axis=1, keepdims=True), reference)


def _tick(value: float, _pos: int) -> str:
    """A log axis' tick label: the value at 1, 2, 3 and 5 times a power of ten, else none."""
    mantissa = round(value / 10 ** np.floor(np.log10(value)), 6)
    return f"{value:g}" if mantissa in (1.0, 2.0, 3.0, 5.0) else ""


def draw_fig16(results: list[Result], s: Setting, path: Path) -> None:
    """Loss, angle to the l1 max-margin direction and ||beta|| against epochs."""
    X, y = gaussian_blobs()
    l1 = references(X, y)[1]
    flow, *runs = results
    epoch_time = s.steps_per_epoch * s.eta
    flow_style = style.algorithm_style(ALGORITHM, "flow")
    flow_label = f"{flow_style.pop('label')}, flow, σ constant"
    series = [
        (flow, flow["t"], flow["sign_beta"] * np.exp(flow["log_abs_beta"]), flow_label, flow_style)
    ]
    series += [
        (res, res["t"], res["beta"], label, kw)
        for (_, _, label, kw), res in zip(fig16_runs(s), runs, strict=True)
    ]
    fig, axes = plt.subplots(1, 3, figsize=(style.DOUBLE, 3.0), constrained_layout=True)
    handles = []
    stopped_any = False
    for res, t, beta, label, kw in series:
        x = t / epoch_time
        every = {"markevery": max(1, x.size // 8)}
        norm = np.linalg.norm(beta, axis=1)
        ys = (res["loss"], _angle_to(beta, l1), norm)
        for ax, yv in zip(axes, ys, strict=True):
            ax.plot(x, yv, **kw, **every)
        handles.append(plt.Line2D([], [], label=label, **kw))
        if stopped_early(res, label, s):
            stopped_any = True
            for ax, yv in zip(axes, ys, strict=True):
                ax.plot(x[-1], yv[-1], **STOPPED_MARK)
    axes[0].set(yscale="log", ylabel="training loss", title="loss")
    axes[1].set(yscale="log", ylabel=r"angle to the $\ell_1$ max-margin [deg]", title="direction")
    axes[2].set(yscale="log", ylabel=r"$\|\beta\|_2$", title=r"scale of $\beta$")
    plain = matplotlib.ticker.FuncFormatter(_tick)
    for ax in axes:
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3, which="major")
    for ax in axes[1:]:
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
    style.panel_letters(axes)
    if stopped_any:
        handles.append(plt.Line2D([], [], label="run ended early", **STOPPED_MARK))
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncol=2,
        title=rf"Gaussian blobs, L = {DEPTH16}, $\alpha$ = {s.alpha:g}, σ = {s.sigma:g}, "
        f"{CAP} = {s.rho_max:g}; {s.epochs} epochs of {s.steps_per_epoch} steps "
        f"({epoch_time:g} of flow time each)",
    )
    save(fig, path)


OFFICIAL_LOOP = Figure(
    "fig16_official_loop",
    "Loss, angle to the l1 max-margin and ||beta|| over {epochs} epochs: LE-SAM's official loop, "
    "ingredient by ingredient, against its flow (Gaussian blobs, L = 2)",
    "Which ingredients of LE-SAM's official training loop (steps, staircase budget, momentum and "
    "cosine rate, weight decay) move it away from the flow it is analysed as? On the Gaussian "
    "blobs of fig 7, L = 2, α = {alpha}, σ = {sigma}, ρ_max = {rho_max}, full batch, "
    "{steps_per_epoch} steps an epoch at peak rate η = {eta}, {epochs} epochs: the flow of the "
    "official step with a constant budget (solid), then the discrete runs (dashed) adding one "
    "ingredient at a time: the steps, the per-epoch σ staircase (warm-up over the first "
    "twentieth, cosine from four fifths), momentum {momentum} with a cosine rate, weight decay "
    "{weight_decay} (the official loop). The values after the last epoch are in "
    "paper_repro.md. × marks a run that ended early.",
    fig16_tasks,
    draw_fig16,
    params={
        "alpha": 0.4,
        "sigma": 0.35,
        "rho_max": 0.3,
        "epochs": 200,
        "steps_per_epoch": 5,
        "eta": 0.05,
        "momentum": 0.9,
        "weight_decay": 5e-4,
    },
    quick={"epochs": 20, "steps_per_epoch": 2},
    example={"momentum": 0.8, "weight_decay": 0.002},
)


if __name__ == "__main__":
    figure_command(__spec__.name, OFFICIAL_LOOP)
