"""Figures 11 and 11b: does LE-SAM keep "minor first, major last"? (settings:
:mod:`figures.lesam`).

* ``fig11_lesam_amplification``: the shares ``|beta_j| / ||beta||_1`` against tau of GD,
  l2-SAM, USAM and LE-SAM on the single example ``D_mu``, L = 2, at the settings matched at
  theta(0), one panel per run.
* ``fig11b_lesam_leaders``: the leading coordinate ``argmax_j |beta_j(tau)|`` of LE-SAM with a
  constant budget over a grid of ``(sigma, rho_max)``, one strip per pair, one panel per
  ``sigma`` (at tau = 0 the coordinate with the largest initial rate).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

from analysis.amplification import leaders
from analysis.lesam.regimes import initial_lesam_rates
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
    shares_of,
    stopped_early,
)
from .lesam import ALPHA, CAP, RHO, SIGMA0, Run, compared, run_task


def runs(s: Setting) -> list[Run]:
    """The matched runs, GD first (:func:`figures.lesam.compared`)."""
    return compared(s.horizon, s.mu, s.alpha, s.rho, s.rho_max)


def shares_tasks(s: Setting) -> list[Task]:
    """The matched runs (plain simulations)."""
    return [
        run_task(alg, hp, s.horizon, s.samples, kind="simulate", mu=s.mu, alpha=s.alpha)
        for _, alg, hp, _ in runs(s)
    ]


def panel_title(run: Run) -> str:
    """A run's panel title: its algorithm and what sets it apart (two lines at most)."""
    key, alg, hp, _ = run
    name = style.label(alg)
    titles = {
        "gd": name,
        "l2": rf"{name}, $\rho$ = {hp.get('rho', 0):g}",
        "usam": rf"{name}, $\rho$ = {hp.get('rho', 0):.3g}",
        "official": f"{name}, official\nvalues",
    }
    if key in titles:
        return titles[key]
    cap = f"{CAP} = {hp['rho_max']:g}"
    return f"{name}, {cap},\nwarm-up + cosine σ" if key.startswith("wc") else f"{name}, {cap}"


def draw_shares(results: list[Result], s: Setting, path: Path) -> None:
    """Shares of the matched runs, one panel each, the coordinates' legend in the last slot."""
    matched = runs(s)
    ncols = 4
    nrows = -(-(len(matched) + 1) // ncols)
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(style.DOUBLE, 1.75 * nrows + 0.2),
        sharex=True,
        sharey=True,
        constrained_layout=True,
    )
    flat = axes.ravel()
    colors = coordinate_colors(len(s.mu))
    stopped_any = False
    for ax, run, res in zip(flat, matched, results, strict=False):
        shares = shares_of(res)
        for j, color in enumerate(colors):
            ax.plot(res["tau"], shares[:, j], color=color, lw=1.3)
        if stopped_early(res, run[3], s):
            stopped_any = True
            ax.plot(res["tau"][-1], 1.0, **STOPPED_MARK, clip_on=False)
        ax.set_title(panel_title(run))
        ax.set(ylim=(-0.02, 1.02))
        ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel(r"rescaled time $\tau$")
    for ax in axes[:, 0]:
        ax.set_ylabel(r"share $|\beta_j|\,/\,\|\beta\|_1$")
    style.panel_letters(flat[: len(matched)])
    _coordinate_legend(flat[len(matched)], s, matched, stopped_any)
    for ax in flat[len(matched) + 1 :]:
        ax.axis("off")
    save(fig, path)


def _coordinate_legend(ax, s: Setting, matched: list[Run], stopped: bool) -> None:
    """The coordinates' colours and the matched setting, in an empty panel."""
    ax.axis("off")
    sigma = next(hp["sigma"] for key, _, hp, _ in matched if key.startswith("le"))
    handles = [
        plt.Line2D([], [], color=c, lw=1.3, label=rf"$j$ = {j + 1} ($\mu_{{{j + 1}}}$ = {m:g})")
        for j, (c, m) in enumerate(zip(coordinate_colors(len(s.mu)), s.mu, strict=True))
    ]
    if stopped:
        handles.append(plt.Line2D([], [], label="run ended early", **STOPPED_MARK))
    ax.legend(
        handles=handles,
        loc="center",
        title=f"L = 2, α = {s.alpha:g}\nLE-SAM σ = {sigma:.3g}\n(matched to ρ = {s.rho:g})",
    )


def strip_cells(s: Setting) -> list[tuple[float, float]]:
    """(sigma, rho_max) of the strips, sigma-major."""
    return [(sigma, r) for sigma in s.sigmas for r in s.rho_max]


def leader_tasks(s: Setting) -> list[Task]:
    """LE-SAM with a constant budget at every (sigma, rho_max) of the grid."""
    return [
        run_task(
            "le-sam",
            {"sigma": sigma, "rho_max": r},
            s.horizon,
            s.samples,
            kind="simulate",
            mu=s.mu,
            alpha=s.alpha,
            rtol=1e-8,
        )
        for sigma, r in strip_cells(s)
    ]


def _leader_rows(results: list[Result], s: Setting) -> np.ndarray:
    """The leading coordinate (0-based; -1 where beta = 0) of each run over its samples, the
    first sample from the initial rates."""
    tau = results[0]["tau"]
    lead = np.full((len(results), tau.size), -1)
    for row, res, (sigma, r) in zip(lead, results, strip_cells(s), strict=True):
        got = leaders(res["log_abs_beta"])
        row[: got.size] = got
        row[0] = int(np.argmax(initial_lesam_rates(s.mu, s.alpha, sigma, r)))
    return lead


def draw_leaders(results: list[Result], s: Setting, path: Path) -> None:
    """One panel per sigma, one strip per rho_max, coloured by the leading coordinate."""
    d = len(s.mu)
    cmap = matplotlib.colors.ListedColormap(
        np.vstack([[0.85, 0.85, 0.85, 1.0], coordinate_colors(d)])
    )
    lead = _leader_rows(results, s)
    tau = results[0]["tau"]
    edges = np.concatenate([[tau[0]], 0.5 * (tau[1:] + tau[:-1]), [tau[-1]]])
    n = len(s.sigmas)
    ncols = min(2, n)
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(style.DOUBLE if ncols > 1 else style.SINGLE, 1.3 * nrows + 1.0),
        sharex=True,
        squeeze=False,
        constrained_layout=True,
    )
    k = len(s.rho_max)
    for i, (ax, sigma) in enumerate(zip(axes.ravel(), s.sigmas, strict=False)):
        mesh = ax.pcolormesh(
            edges, np.arange(k + 1), lead[i * k : (i + 1) * k] + 1, cmap=cmap, vmin=-0.5,
            vmax=d + 0.5,
        )  # fmt: skip
        ax.set_yticks([])
        ax.invert_yaxis()
        _label_rows(ax, s.rho_max)
        ax.set_title(f"σ = {sigma:.3g}")
        _mark_stopped(ax, results[i * k : (i + 1) * k], s)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel(r"rescaled time $\tau$")
    style.panel_letters(axes.ravel()[:n])
    cbar = fig.colorbar(mesh, ax=axes, ticks=range(0, d + 1), location="bottom", shrink=0.6)
    cbar.ax.set_xticklabels([r"$\beta = 0$"] + [f"{j + 1}" for j in range(d)])
    cbar.set_label(
        rf"leading coordinate $\mathrm{{argmax}}_j\,|\beta_j(\tau)|$ (LE-SAM, constant σ; "
        rf"$\mu$ = {format_mu(s.mu)}, L = 2, $\alpha$ = {s.alpha:g})"
    )
    save(fig, path)


def _label_rows(ax, caps: tuple[float, ...]) -> None:
    """``rho_max = r`` to the left of each strip."""
    transform = matplotlib.transforms.blended_transform_factory(ax.transAxes, ax.transData)
    for row, r in enumerate(caps):
        ax.text(-0.02, row + 0.5, f"{CAP} = {r:g}", transform=transform, ha="right", va="center")


def _mark_stopped(ax, results: list[Result], s: Setting) -> None:
    """× at the end of each strip whose run ended early."""
    for row, res in enumerate(results):
        if stopped_early(res, f"strip {row + 1} of panel {ax.get_title()}", s):
            ax.plot(res["tau"][-1], row + 0.5, **STOPPED_MARK, clip_on=False)


def _check_caps(s: Setting) -> str | None:
    """The caps must be positive and increasing."""
    caps = np.asarray(s.rho_max, dtype=float)
    if np.any(caps <= 0) or np.any(np.diff(caps) <= 0):
        return f"rho_max must be positive and increasing, got {s.rho_max}"
    return None


AMPLIFICATION = Figure(
    "fig11_lesam_amplification",
    "Shares |beta_j|/|beta|_1 over tau: GD, l2-SAM, USAM, LE-SAM matched at theta(0) "
    "(mu = {mu}, L = 2, alpha = {alpha})",
    "Does LE-SAM (or USAM) keep ℓ2-SAM's 'minor first, major last' at matched settings? The "
    "shares |β_j|/‖β‖₁ against τ up to τ = {horizon}, on μ = {mu}, L = 2, α = {alpha}: GD, "
    "ℓ2-SAM with ρ = {rho}, and runs matched to it at θ(0): USAM ρ/‖∇L₀‖, LE-SAM σ = "
    "ρ‖∇L₀‖ with the caps ρ_max = {rho_max}, the same budget warmed up and decayed (the shape "
    "of the official schedule over [0, τ]) with the last cap, and the official values (σ = "
    "0.35 warm-up + cosine, ρ_max = 0.3). Colours: coordinates from minor (dark) to major "
    "(light). The leader sequences and switch times are in paper_repro.md; the leaders over "
    "a grid of budgets are fig11b_lesam_leaders.",
    shares_tasks,
    draw_shares,
    params={
        "mu": MU5,
        "alpha": ALPHA,
        "rho": RHO,
        "rho_max": (1.5, 3.0),
        "horizon": 8.0,
        "samples": 401,
    },
    quick={"horizon": 2.0, "samples": 41},
    example={"alpha": 0.45, "rho_max": (1.5, 2.5)},
    check=_check_caps,
)

LEADERS = Figure(
    "fig11b_lesam_leaders",
    "LE-SAM's leading coordinate over tau for constant budgets sigma = {sigmas} and caps "
    "rho_max = {rho_max} (mu = {mu}, L = 2, alpha = {alpha})",
    "How does LE-SAM's order of amplification depend on the budget σ and the cap ρ_max? Each "
    "strip is one run of LE-SAM with a constant budget σ (panels: σ = {sigmas}) and cap ρ_max "
    "(rows: {rho_max}) on μ = {mu}, L = 2, α = {alpha}, coloured by the leading coordinate "
    "argmax_j |β_j(τ)| up to τ = {horizon} (grey: β = 0, collapse); at τ = 0 the coordinate "
    "with the largest initial rate. σ = 0.349 is the budget matched to ℓ2-SAM with ρ = 1 at "
    "α = 0.4. × marks a run that ended early.",
    leader_tasks,
    draw_leaders,
    params={
        "mu": MU5,
        "alpha": ALPHA,
        "sigmas": (0.03, 0.1, SIGMA0, 1.0),
        "rho_max": (0.3, 1.0, 1.5, 3.0),
        "horizon": 24.0,
        "samples": 481,
    },
    quick={"sigmas": (0.1,), "rho_max": (1.0, 3.0), "horizon": 4.0, "samples": 41},
    example={"sigmas": (0.2,), "rho_max": (0.7, 2.5)},
    check=_check_caps,
)


if __name__ == "__main__":
    figure_command(__spec__.name, AMPLIFICATION, LEADERS)
