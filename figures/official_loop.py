"""Figure 16 (``fig16_official_loop``): LE-SAM's official training loop against the plain flow it
is analysed as.

LE-SAM's training script runs its optimizer (:func:`flows.algorithms.official_lesam_perturbation`)
on SGD with momentum 0.9, weight decay 5e-4 and a cosine learning rate, with the loss budget
``sigma`` set once per epoch (:func:`flows.schedules.lesam_official`: warm-up over 10 of 200
epochs, hold, cosine from epoch 160). Here, on the Gaussian blobs of figure 7 (L = 2,
``alpha = 0.4``, full batch, 5 steps an epoch, peak rate 0.05): the flow of the official
perturbation with a constant budget (original clock, one epoch = 5 x 0.05 of time), then
discrete runs adding one ingredient at a time: the steps; the staircase budget; momentum and the
cosine rate; weight decay (the whole loop).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flows.schedules import cosine, lesam_official
from flows.sweep.registry import Result, Task

from .blobs import gaussian_blobs
from .common import OKABE_ITO, Figure, Setting, figure_command, plt, save
from .directions import references, row_angles_deg
from .multi_sample import data_task

ALPHA16, DEPTH16 = 0.4, 2
EPOCHS16, STEPS16, ETA16 = 200, 5, 0.05
SIGMA16, RHO_MAX16 = 0.35, 0.3
MOMENTUM16, WEIGHT_DECAY16 = 0.9, 5e-4


def _config(quick: bool) -> tuple[int, int]:
    """Epochs and steps per epoch of the runs."""
    return (20, 2) if quick else (EPOCHS16, STEPS16)


def fig16_runs(quick: bool) -> list[tuple[str, dict, str, dict]]:
    """(key, iterate parameters, label, style) of the discrete runs."""
    epochs, steps = _config(quick)
    horizon = epochs * steps * ETA16
    staircase = lesam_official(
        SIGMA16, max(1, epochs // 20), int(0.8 * epochs), epochs, steps, ETA16
    )
    plain = {"eta": ETA16, "sigma": SIGMA16}
    stairs = {"eta": ETA16, "sigma": staircase.spec()}
    loop = {"eta": cosine(ETA16, horizon).spec(), "sigma": staircase.spec(), "momentum": MOMENTUM16}
    return [
        (
            "steps",
            plain,
            "steps (η = 0.05), σ constant",
            dict(color=OKABE_ITO[5], lw=2.6, alpha=0.55),
        ),
        ("stairs", stairs, "+ σ staircase per epoch", dict(color=OKABE_ITO[1], lw=1.6, ls="--")),
        ("momentum", loop, "+ momentum 0.9, cosine rate", dict(color=OKABE_ITO[3], lw=1.6)),
        (
            "official",
            {**loop, "weight_decay": WEIGHT_DECAY16},
            "+ weight decay 5e-4: the official loop",
            dict(color=OKABE_ITO[6], lw=1.8),
        ),
    ]


def fig16_tasks(s: Setting) -> list[Task]:
    """The flow (original clock), then the discrete runs."""
    epochs, steps = _config(s.quick)
    X, y = gaussian_blobs()
    hp = {"sigma": SIGMA16, "rho_max": RHO_MAX16}
    flow = data_task(
        X, y, "le-sam-official", hp, DEPTH16, ALPHA16, epochs * steps * ETA16, epochs + 1,
        clock="original",
    )  # fmt: skip
    runs = [
        Task(
            "iterate",
            {
                "X": X.tolist(),
                "y": y.tolist(),
                "algorithm": "le-sam-official",
                "depth": DEPTH16,
                "alpha": ALPHA16,
                "rho_max": RHO_MAX16,
                "steps": epochs * steps,
                "record_every": steps,
                **params,
            },
        )
        for _, params, _, _ in fig16_runs(s.quick)
    ]
    return [flow, *runs]


def _beta_norm(beta: np.ndarray) -> np.ndarray:
    """``||beta||_2`` per row."""
    return np.linalg.norm(beta, axis=1)


def _angle_to(beta: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Angle (degrees) of each row of ``beta`` to the unit ``reference``."""
    return row_angles_deg(beta / np.linalg.norm(beta, axis=1, keepdims=True), reference)


def draw_fig16(results: list[Result], s: Setting, path: Path) -> None:
    """Loss, angle to the l1 max-margin direction and ||beta|| against epochs."""
    epochs, steps = _config(s.quick)
    X, y = gaussian_blobs()
    l1 = references(X, y)[1]
    flow, *runs = results
    fig, axes = plt.subplots(1, 3, figsize=(15, 5.2), constrained_layout=True)
    epoch_time = steps * ETA16
    flow_beta = flow["sign_beta"] * np.exp(flow["log_abs_beta"])
    series = [
        (
            "flow",
            flow["t"] / epoch_time,
            flow["loss"],
            flow_beta,
            "flow of the official step, σ constant",
            dict(color="k", lw=1.2),
        )
    ]
    for (key, _, label, style), res in zip(fig16_runs(s.quick), runs, strict=True):
        series.append((key, res["t"] / epoch_time, res["loss"], res["beta"], label, style))
    ends = []
    for key, x, loss, beta, label, style in series:
        axes[0].plot(x, loss, label=label, **style)
        axes[1].plot(x[1:], _angle_to(beta[1:], l1), **style)
        axes[2].plot(x, _beta_norm(beta), **style)
        ends.append(
            f"{key:9s} loss {loss[-1]:8.2g}  angle {_angle_to(beta[-1:], l1)[0]:6.3g}°  ‖β‖ {_beta_norm(beta[-1:])[0]:6.3g}"
        )
    axes[0].set(yscale="log", ylabel="training loss", title="loss")
    axes[1].set(yscale="log", ylabel="angle to the ℓ1 max-margin [deg]", title="direction")
    axes[2].set(yscale="log", ylabel="‖β‖₂", title="scale of β (weight decay bounds it)")
    for ax in axes:
        ax.set_xlabel(f"epoch ({steps} steps, {epoch_time:g} of flow time)")
        ax.grid(alpha=0.3, which="both")
    axes[2].text(
        0.02, 0.02, f"after {epochs} epochs:\n" + "\n".join(ends), transform=axes[2].transAxes,
        fontsize=7, family="monospace", va="bottom", bbox=dict(fc="white", alpha=0.9, ec="0.6"),
    )  # fmt: skip
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=5, fontsize=9)
    fig.suptitle(
        f"LE-SAM's official training loop vs the plain flow (Gaussian blobs, L = {DEPTH16}, "
        f"α = {ALPHA16:g}, σ = {SIGMA16:g}, ρ_max = {RHO_MAX16:g})"
        + ("  [QUICK]" if s.quick else ""),
        fontsize=11,
    )
    save(fig, path)


OFFICIAL_LOOP = Figure(
    "fig16_official_loop",
    "Loss, angle to the l1 max-margin and ||beta|| vs epochs: the official LE-SAM loop, ingredient by ingredient",
    "Which ingredients of LE-SAM's official training loop (steps, staircase budget, momentum and "
    "cosine rate, weight decay) move it away from the flow it is analysed as?",
    fig16_tasks,
    draw_fig16,
)


if __name__ == "__main__":
    figure_command(__spec__.name, OFFICIAL_LOOP)
