"""Figure 15 (``fig15_lesam_conventions``): where LE-SAM's stabiliser sits.

The paper's LE-SAM perturbs by ``rho_t = min(sigma / (||grad L|| + varrho), rho_max)``, which
tends to ``rho_max`` as the gradient vanishes: late in training it is l2-SAM with radius
``rho_max``. Its authors' optimizer puts ``eps = 1e-12`` inside the square root of the norm,
``N = sqrt(||grad L||^2 + eps)``, and divides by ``N + eps`` twice, so its perturbation is
``~ rho_max ||grad L|| / 1e-6`` once ``||grad L|| << 1e-6``: it becomes gradient descent
(:func:`flows.algorithms.official_lesam_perturbation`).

Setting: the single example ``mu = (1, ..., 5)`` and the Gaussian blobs of figure 7, L = 2,
``alpha = 0.4``; GD, l2-SAM (``rho = 0.3``) and both LE-SAMs with the official
``(sigma, rho_max) = (0.35, 0.3)``, rescaled clock to ``tau = 60``. Top: the size of the
perturbation against the gradient norm (drawn to ``||grad L|| = 1e-10000``; the runs go on to
``1e-10^260`` and ``1e-10^61``); bottom: the angle of ``beta`` to the l1 max-margin direction
(the limit of all four at L = 2) and between the two LE-SAMs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.lesam.perturbation import log_gradient_norms
from analysis.lesam.radius import lesam_radius, official_lesam_size
from flows.data import Dataset
from flows.results import Trajectory
from flows.sweep.registry import Result, Task

from .blobs import gaussian_blobs
from .common import MU5, OKABE_ITO, Figure, Setting, figure_command, plt, save
from .directions import angles_deg, directions, references, row_angles_deg
from .multi_sample import data_task

ALPHA15, DEPTH15 = 0.4, 2
SIGMA15, RHO_MAX15 = 0.35, 0.3
#: (key, algorithm, hyper-parameters, label, style)
RUNS15 = (
    ("gd", "gd", {}, "GD", dict(color=OKABE_ITO[0], lw=1.6)),
    (
        "l2",
        "l2-sam",
        {"rho": RHO_MAX15},
        f"ℓ2-SAM ρ = {RHO_MAX15:g}",
        dict(color=OKABE_ITO[5], lw=3.2, alpha=0.45),
    ),
    (
        "paper",
        "le-sam",
        {"sigma": SIGMA15, "rho_max": RHO_MAX15},
        "LE-SAM, paper: min(σ/(‖∇L‖+ϱ), ρ_max)",
        dict(color=OKABE_ITO[7], lw=1.8, ls="--"),
    ),
    (
        "official",
        "le-sam-official",
        {"sigma": SIGMA15, "rho_max": RHO_MAX15},
        "LE-SAM, official code: ε inside √ (1e-12)",
        dict(color=OKABE_ITO[6], lw=1.6),
    ),
)


def fig15_data() -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, X, y) of the two panels' data."""
    blobs = gaussian_blobs()
    return [
        ("single example μ = (1, …, 5)", np.array([MU5]), np.ones(1)),
        ("Gaussian blobs ±(1, 2), n = 40", *blobs),
    ]


def fig15_tasks(s: Setting) -> list[Task]:
    """The four runs on each data set (data-major)."""
    t_max, n = (6.0, 41) if s.quick else (60.0, 1201)
    return [
        data_task(X, y, alg, hp, DEPTH15, ALPHA15, t_max, n)
        for _, X, y in fig15_data()
        for _, alg, hp, _, _ in RUNS15
    ]


def perturbation_size(key: str, log_grad: np.ndarray) -> np.ndarray | None:
    """``||eps||`` along a run from ``log ||grad L||`` (None for GD)."""
    if key == "l2":
        return np.full(log_grad.shape, RHO_MAX15)
    if key == "paper":
        return lesam_radius(log_grad, SIGMA15, RHO_MAX15)
    if key == "official":
        return official_lesam_size(log_grad, SIGMA15, RHO_MAX15)
    return None


def fig15_series(results: list[Result]) -> list[dict]:
    """Per data set: each run's ``log10 ||grad L||``, perturbation size and angle to the l1
    max-margin direction, and the angle between the two LE-SAMs, on each run's samples."""
    it = iter(results)
    out = []
    for name, X, y in fig15_data():
        data, l1 = Dataset(X, y), references(X, y)[1]
        runs = {}
        for key, *_ in RUNS15:
            res = next(it)
            log_grad = log_gradient_norms(Trajectory.from_arrays(res), data)
            runs[key] = dict(
                res=res,
                log10_grad=log_grad / np.log(10.0),
                size=perturbation_size(key, log_grad),
                angle=angles_deg(res, l1),
            )
        between = angles_between(runs["paper"]["res"], runs["official"]["res"])
        out.append(dict(name=name, runs=runs, between=between))
    return out


def angles_between(a: Result, b: Result) -> np.ndarray:
    """Angle (degrees) between the directions of two runs on the same time grid."""
    return row_angles_deg(directions(a), directions(b))


def official_turning_point(series: dict) -> float:
    """The training loss where the official LE-SAM's ``||grad L||`` falls below ``1e-6``
    (nan if it does not within the run)."""
    run = series["runs"]["official"]
    below = np.flatnonzero(run["log10_grad"] < -6.0)
    return float(run["res"]["loss"][below[0]]) if below.size else float("nan")


def draw_fig15(results: list[Result], s: Setting, path: Path) -> None:
    """Perturbation size (top) and angles (bottom) against ``||grad L||``, per data set."""
    series = fig15_series(results)
    fig, axes = plt.subplots(2, 2, figsize=(13, 8.6), constrained_layout=True, sharex="col")
    for col, panel in enumerate(series):
        top, bottom = axes[0, col], axes[1, col]
        for key, _, _, label, style in RUNS15:
            run = panel["runs"][key]
            x = -run["log10_grad"]
            if run["size"] is not None:
                top.plot(x, run["size"], label=label, **style)
            keep = np.isfinite(run["angle"]) & (run["angle"] > 0)
            bottom.plot(x[keep], run["angle"][keep], label=label, **style)
        x = -panel["runs"]["official"]["log10_grad"]
        keep = panel["between"] > 0
        bottom.plot(
            x[keep],
            panel["between"][keep],
            color="0.45",
            lw=1.3,
            ls="-.",
            label="between the two LE-SAMs",
        )
        for ax in (top, bottom):
            ax.axvline(6.0, color="0.5", ls=":", lw=1.2)
            ax.grid(alpha=0.3, which="both")
        loss_at = official_turning_point(panel)
        top.set(
            xscale="log",
            xlim=(0.3, 1e4),
            yscale="log",
            ylim=(1e-9, 1.0),
            ylabel="‖ε‖ (perturbation size)",
            title=f"{panel['name']}, L = {DEPTH15}, α = {ALPHA15:g}",
        )
        top.text(
            6.1, 2e-9, f" ‖∇L‖ = 1e-6 (loss {loss_at:.2g}):\n the official LE-SAM turns into GD",
            fontsize=8.5, va="bottom",
        )  # fmt: skip
        end = {k: panel["runs"][k]["angle"][-1] for k in ("gd", "l2", "paper", "official")}
        bottom.set(
            yscale="log",
            ylim=(1e-4, 90),
            xlabel="−log10 ‖∇L(θ)‖ (log scale; training goes right)",
            ylabel="angle [deg]",
        )
        bottom.text(
            0.02, 0.03,
            "angle to the l1 max-margin at the end:\n"
            + "\n".join(f"{k:8s} {v:8.3g}°" for k, v in end.items())
            + f"\nbetween the LE-SAMs: at most {np.nanmax(panel['between']):.3g}°, "
            f"at the end {panel['between'][-1]:.3g}°",
            transform=bottom.transAxes, fontsize=8, family="monospace", va="bottom",
            bbox=dict(fc="white", alpha=0.9, ec="0.6"),
        )  # fmt: skip
    handles, labels = axes[1, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=5, fontsize=9)
    fig.suptitle(
        "LE-SAM's two conventions: the paper's tends to ℓ2-SAM(ρ_max), the official code's to GD"
        + ("  [QUICK]" if s.quick else ""),
        fontsize=11,
    )
    save(fig, path)


CONVENTIONS = Figure(
    "fig15_lesam_conventions",
    "Perturbation size and angle to the l1 max-margin vs ||grad L||: GD, l2-SAM, paper and official LE-SAM",
    "Where LE-SAM's stabiliser sits (outside or inside the norm's square root) decides whether it "
    "becomes ℓ2-SAM or GD late in training: how much does the path, and the direction reached, "
    "depend on it?",
    fig15_tasks,
    draw_fig15,
)


if __name__ == "__main__":
    figure_command(__spec__.name, CONVENTIONS)
