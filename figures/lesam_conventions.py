"""Figure 15 (``fig15_lesam_conventions``): where LE-SAM's stabiliser sits.

The paper's LE-SAM perturbs by ``rho_t = min(sigma / (||grad L|| + varrho), rho_max)``, which
tends to ``rho_max`` as the gradient vanishes: late in training it is l2-SAM with radius
``rho_max``. Its authors' optimizer puts ``eps = 1e-12`` inside the square root of the norm,
``N = sqrt(||grad L||^2 + eps)``, and divides by ``N + eps`` twice, so its perturbation is
``~ rho_max ||grad L|| / 1e-6`` once ``||grad L|| << 1e-6``: it becomes gradient descent
(:func:`flows.algorithms.official_lesam_perturbation`).

Setting: the single example ``D_mu`` and the Gaussian blobs of figure 7, L = 2, uniform
``alpha``; GD, l2-SAM (``rho = rho_max``) and both LE-SAMs with ``(sigma, rho_max)`` (the
official values by default), rescaled clock to ``horizon``. Top: the size of the perturbation
against the gradient norm, up to ``||grad L|| = 1e-10000`` (the turn); bottom: the angle of
``beta`` to the l1 max-margin direction (the limit of all four at L = 2), and between the two
LE-SAMs, over the whole run (to ``||grad L|| = 1e-10^260`` on ``D_mu`` at the defaults).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.lesam.perturbation import log_gradient_norms
from analysis.lesam.radius import lesam_radius, official_lesam_size
from flows.data import Dataset
from flows.results import Trajectory
from flows.sweep.registry import Result, Task

from . import style
from .blobs import gaussian_blobs
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
from .directions import angles_deg, directions, references, row_angles_deg
from .lesam import CAP
from .multi_sample import data_task

DEPTH15 = 2
#: The runs: key, algorithm; l2-SAM's radius is rho_max, the LE-SAMs' (sigma, rho_max).
RUNS15 = (("gd", "gd"), ("l2", "l2-sam"), ("paper", "le-sam"), ("official", "le-sam-official"))
#: Where the official code's stabiliser takes over: ||grad L|| = sqrt(1e-12).
TURN = 6.0
#: The line where ||grad L|| = 10^-TURN.
TURN_LINE = {"color": "0.5", "ls": ":", "lw": 1.0}
#: The angle between the two LE-SAMs.
BETWEEN = {"color": "0.45", "lw": 1.0, "ls": "-."}


def hyper(key: str, s: Setting) -> dict:
    """A run's hyper-parameters."""
    table = {
        "gd": {},
        "l2": {"rho": s.rho_max},
        "paper": {"sigma": s.sigma, "rho_max": s.rho_max},
        "official": {"sigma": s.sigma, "rho_max": s.rho_max},
    }
    return table[key]


def run_label(key: str, alg: str, s: Setting) -> str:
    """A run's legend label: the algorithm's own and the values run."""
    values = {
        "gd": "",
        "l2": rf", $\rho$ = {s.rho_max:g}",
        "paper": f" (paper's formula), σ = {s.sigma:g}, {CAP} = {s.rho_max:g}",
        "official": f", σ = {s.sigma:g}, {CAP} = {s.rho_max:g}",
    }
    return style.label(alg) + values[key]


def run_style(key: str, alg: str) -> dict:
    """A run's line: its algorithm's style (l2-SAM wide and light, under the paper's LE-SAM
    that it equals)."""
    kw = style.algorithm_style(alg)
    del kw["label"]
    kw["markevery"] = (0.03 * len(key), 0.15)
    if key == "l2":
        kw.update(lw=2.6, alpha=0.45)
    return kw


def fig15_data(s: Setting) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, X, y) of the two columns' data."""
    return [
        (rf"$\mu$ = {format_mu(s.mu)}", np.array([s.mu], dtype=float), np.ones(1)),
        ("Gaussian blobs", *gaussian_blobs()),
    ]


def fig15_tasks(s: Setting) -> list[Task]:
    """The four runs on each data set (data-major)."""
    return [
        data_task(X, y, alg, hyper(key, s), DEPTH15, s.alpha, s.horizon, s.samples)
        for _, X, y in fig15_data(s)
        for key, alg in RUNS15
    ]


def perturbation_size(key: str, log_grad: np.ndarray, s: Setting) -> np.ndarray | None:
    """``||eps||`` along a run from ``log ||grad L||`` (None for GD)."""
    sizes = {
        "l2": lambda: np.full(log_grad.shape, s.rho_max),
        "paper": lambda: lesam_radius(log_grad, s.sigma, s.rho_max),
        "official": lambda: official_lesam_size(log_grad, s.sigma, s.rho_max),
    }
    return sizes[key]() if key in sizes else None


def fig15_series(results: list[Result], s: Setting) -> list[dict]:
    """Per data set: each run's ``log10 ||grad L||``, perturbation size and angle to the l1
    max-margin direction, and the angle between the two LE-SAMs, on each run's samples."""
    it = iter(results)
    out = []
    for name, X, y in fig15_data(s):
        data, l1 = Dataset(X, y), references(X, y)[1]
        runs = {}
        for key, _ in RUNS15:
            res = next(it)
            log_grad = log_gradient_norms(Trajectory.from_arrays(res), data)
            runs[key] = dict(
                res=res,
                log10_grad=log_grad / np.log(10.0),
                size=perturbation_size(key, log_grad, s),
                angle=angles_deg(res, l1),
            )
        between = row_angles_deg(
            directions(runs["paper"]["res"]), directions(runs["official"]["res"])
        )
        out.append(dict(name=name, runs=runs, between=between))
    return out


def draw_fig15(results: list[Result], s: Setting, path: Path) -> None:
    """Perturbation size against ``-log10 ||grad L||`` (top, to ||grad L|| = 1e-10000) and
    angles against tau (bottom, the whole run), one column per data set."""
    fig, axes = plt.subplots(2, 2, figsize=(style.DOUBLE, 4.9), constrained_layout=True)
    stopped_any = False
    for col, panel in enumerate(fig15_series(results, s)):
        top, bottom = axes[0, col], axes[1, col]
        for key, alg in RUNS15:
            run = panel["runs"][key]
            if run["size"] is not None:
                top.plot(-run["log10_grad"], run["size"], **run_style(key, alg))
            tau = run["res"]["tau"]
            keep = np.isfinite(run["angle"]) & (run["angle"] > 0) & (tau > 0)
            bottom.plot(tau[keep], run["angle"][keep], **run_style(key, alg))
            if stopped_early(run["res"], f"{run_label(key, alg, s)} on {panel['name']}", s):
                stopped_any = True
                bottom.plot(tau[keep][-1], run["angle"][keep][-1], **STOPPED_MARK)
        official = panel["runs"]["official"]
        keep = (panel["between"] > 0) & (official["res"]["tau"] > 0)
        bottom.plot(official["res"]["tau"][keep], panel["between"][keep], **BETWEEN)
        top.axvline(TURN, **TURN_LINE)
        turned = np.flatnonzero(official["log10_grad"] < -TURN)
        if turned.size:
            bottom.axvline(official["res"]["tau"][turned[0]], **TURN_LINE)
        top.set(
            xscale="log",
            xlim=(0.3, 1e4),
            yscale="log",
            ylim=(1e-9, 1.0),
            xlabel=r"$-\log_{10}\|\nabla L(\theta)\|$ (training goes right)",
            ylabel=r"$\|\varepsilon\|$",
            title=rf"{panel['name']}, L = {DEPTH15}, $\alpha$ = {s.alpha:g}",
        )
        bottom.set(
            xscale="log",
            yscale="log",
            xlabel=r"rescaled time $\tau$",
            ylabel=r"angle to the $\ell_1$ max-margin [deg]",
        )
        for ax in (top, bottom):
            ax.grid(alpha=0.3, which="major")
    style.panel_letters(axes)
    _legend(fig, s, stopped_any)
    save(fig, path)


def _legend(fig, s: Setting, stopped: bool) -> None:
    """The runs, the angle between the LE-SAMs, the turn and the stop mark, below the panels."""
    handles = [
        plt.Line2D([], [], label=run_label(key, alg, s), **run_style(key, alg))
        for key, alg in RUNS15
    ]
    handles += [
        plt.Line2D([], [], label="angle between the two LE-SAMs", **BETWEEN),
        plt.Line2D(
            [],
            [],
            color="0.5",
            ls=":",
            lw=1.0,
            label=r"$\|\nabla L\| = 10^{-6}$: the official code's $\epsilon$ = 1e-12 takes over",
        ),  # fmt: skip
    ]
    if stopped:
        handles.append(plt.Line2D([], [], label="run ended early", **STOPPED_MARK))
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncol=2,
    )


CONVENTIONS = Figure(
    "fig15_lesam_conventions",
    "Perturbation size and angle to the l1 max-margin against ||grad L||: GD, l2-SAM, the "
    "paper's and the official LE-SAM (sigma = {sigma}, rho_max = {rho_max}, L = 2, "
    "alpha = {alpha})",
    "Where LE-SAM's stabiliser sits (outside or inside the norm's square root) decides whether "
    "it becomes ℓ2-SAM or GD late in training: how much does the path, and the direction "
    "reached, depend on it? GD, ℓ2-SAM with ρ = ρ_max, and LE-SAM by the paper's formula and "
    "by its authors' code, σ = {sigma}, ρ_max = {rho_max}, on μ = {mu} (left) and the Gaussian "
    "blobs of fig 7 (right), L = 2, α = {alpha}, to τ = {horizon}, against −log10‖∇L‖. Top: "
    "the perturbation size, up to ‖∇L‖ = 1e-10000; the official code's turns into GD's (0) "
    "below ‖∇L‖ = 1e-6 (dotted). Bottom: the angle to the ℓ1 max-margin direction over the "
    "whole run, and the angle between the two LE-SAMs (dash-dot); where its ρ_t sits at the "
    "cap (from the start at the defaults) the paper's LE-SAM equals ℓ2-SAM. The losses at the turn and the largest angles are "
    "in paper_repro.md. × marks a run that ended early.",
    fig15_tasks,
    draw_fig15,
    params={
        "mu": MU5,
        "alpha": 0.4,
        "sigma": 0.35,
        "rho_max": 0.3,
        "horizon": 60.0,
        "samples": 1201,
    },
    quick={"horizon": 6.0, "samples": 41},
    example={"sigma": 0.4, "rho_max": 0.25},
)


if __name__ == "__main__":
    figure_command(__spec__.name, CONVENTIONS)
