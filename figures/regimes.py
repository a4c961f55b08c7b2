"""The regimes of l2-SAM at L = 2: the (alpha/rho, tau) phase diagram, drawn for any increasing
``mu`` (:func:`draw_phase_diagram`, :func:`phase_diagram_file`; figure 5, ``fig5_regimes``, is
its instance at ``mu = (1, ..., 5)``), and the command line of the regime analysis
(:mod:`analysis.regimes`):

    python -m figures.regimes --mu 1,2,3,4,5 --rho 1 --plot phase.png
    python -m figures.regimes --mu 0.5,1.7,2.9 --n-alpha 6

Prints the collapse certificate, the collapse boundary (bisection on the flow), the analytic
regime-3 boundary and a table of regimes over alpha; ``--plot`` draws the phase diagram for the
given ``mu``. Bad input prints one line ``error: ...`` on stderr and exits with status 2, before
any computation.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib
import numpy as np

from analysis.amplification import LEADERS_LABEL, leaders
from analysis.regimes.boundaries import (
    collapse_boundary,
    collapse_certificate_boundary,
    regime3_boundary,
)
from analysis.regimes.classification import classify
from analysis.regimes.inputs import check_mu
from flows.checks import positive
from flows.run import OneLineParser, check_output_path
from flows.sweep.registry import Result, Task, compute, flow_kernels, register

from .common import MU5, Figure, Setting, coordinate_colors, format_mu, plt, save

#: alpha/rho range of figure 5 (mu = (1..5))
FIG5_RATIOS = (0.08, 1.6)
FIG5_QUICK = (0.3, 0.5, 1.0)
#: the generic range: from LOW x the collapse certificate to HIGH x the regime-3 boundary
#: (for mu = (1..5) this is about FIG5_RATIOS)
LOW, HIGH = 0.84, 1.86


def phase_ratios(quick: bool, span: tuple[float, float] = FIG5_RATIOS) -> np.ndarray:
    """alpha / rho values of the phase diagram: 48 log-spaced over ``span``; ``quick``: three
    cheap ones (collapsing runs are the slow ones), those of figure 5 or the upper half of span."""
    lo, hi = span
    if not quick:
        return np.geomspace(lo, hi, 48)
    return np.array(FIG5_QUICK) if span == FIG5_RATIOS else np.geomspace(np.sqrt(lo * hi), hi, 3)


def phase_span(mu) -> tuple[float, float]:
    """An alpha / rho range that shows the three regimes of ``mu`` (module constants)."""
    return LOW * collapse_certificate_boundary(mu), HIGH * regime3_boundary(mu)


def phase_horizon(mu, quick: bool) -> tuple[float, int]:
    """(tau_max, n_tau): 6 / mu_1 (the slowest rate sets the time scale), 241 samples."""
    tau_max = 6.0 / float(np.min(mu))
    return (tau_max / 3.0, 21) if quick else (tau_max, 241)


def collapse_boundary_task(params: dict) -> Result:
    """Cached bisection for the collapse boundary (analysis.regimes.boundaries.collapse_boundary)."""
    return {"alpha": np.array(collapse_boundary(params["mu"], 1.0, rtol=params["rtol"]))}


def collapse_boundary_cost(params: dict) -> float:
    """About 2 s a bisection step (one classify run each)."""
    return 2.0 * np.log2(1.0 / params["rtol"])


register(
    "collapse-boundary",
    collapse_boundary_task,
    cost=collapse_boundary_cost,
    kernels=lambda p: flow_kernels({}),
)


def phase_runs(mu, ratios, tau_max: float, n_tau: int) -> list[Task]:
    """One l2-SAM run per alpha / rho at rho = 1 (scale symmetry: the path depends on alpha / rho)."""
    return [
        Task(
            "simulate",
            {
                "mu": [float(m) for m in mu],
                "algorithm": "l2-sam",
                "depth": 2,
                "alpha": float(r),
                "rho": 1.0,
                "t_max": tau_max,
                "n_points": n_tau,
                "original_time": False,
                "rtol": 1e-8,
            },
        )
        for r in ratios
    ]


def phase_tasks(s: Setting) -> list[Task]:
    """Figure 5: the runs at mu = (1..5) and the collapse bisection."""
    tau_max, n_tau = (2.0, 21) if s.quick else (6.0, 241)
    return phase_runs(MU5, phase_ratios(s.quick), tau_max, n_tau) + [
        Task("collapse-boundary", {"mu": MU5, "rtol": 0.3 if s.quick else 1e-4})
    ]


def draw_phase_diagram(
    mu, ratios: np.ndarray, runs: list[Result], boundary: float, path: Path
) -> None:
    """Leading coordinate over (alpha/rho, tau) for any ``mu``: regimes and boundaries marked.

    ``runs`` are the results of :func:`phase_runs` on ``ratios`` (same horizon), ``boundary``
    the collapse boundary alpha / rho from the flow.
    """
    mu = [float(m) for m in check_mu(mu)]
    ratios = np.asarray(ratios, dtype=float)
    longest = max(runs, key=lambda r: r["t"].size)
    tau = longest["t"]
    # -2 marks samples a run did not reach (it stopped early, status -1): left blank
    lead = np.full((len(runs), tau.size), -2)
    for row, r in zip(lead, runs, strict=False):
        row[: r["t"].size] = leaders(r["log_abs_beta"])
    lead[:, 0] = np.where(lead[:, 1] > -2, lead[:, 1], lead[:, 0])  # no leader at tau = 0 (ties)
    stopped = [float(r) for r, run in zip(ratios, runs, strict=False) if run["t"].size < tau.size]
    d = len(mu)
    colors = np.vstack([[0.85, 0.85, 0.85, 1.0], coordinate_colors(d)])
    cmap = matplotlib.colors.ListedColormap(colors).with_extremes(bad="white")
    fig, ax = plt.subplots(figsize=(8.5, 5.2), constrained_layout=True)
    edges = np.sqrt(ratios[1:] * ratios[:-1])
    y_edges = np.concatenate([[ratios[0] ** 2 / edges[0]], edges, [ratios[-1] ** 2 / edges[-1]]])
    t_edges = np.concatenate([[tau[0]], 0.5 * (tau[1:] + tau[:-1]), [tau[-1]]])
    mesh = ax.pcolormesh(
        t_edges, y_edges, np.ma.masked_less(lead + 1, 0), cmap=cmap, vmin=-0.5, vmax=d + 0.5
    )
    ax.set_yscale("log")
    third = regime3_boundary(mu)
    lines = [
        (boundary, "collapse boundary (flow, bisection)", "-"),
        (collapse_certificate_boundary(mu), "N₀ = ρμ₁: collapse certified below", ":"),
        (third, "N₀ = ρ(μ_d + μ_{d−1}): regime 3 above", "--"),
    ]
    for value, label, style in lines:
        ax.axhline(value, color="#D55E00", ls=style, lw=1.8, label=f"{label}: α/ρ = {value:.4g}")
    lo, hi = y_edges[0], y_edges[-1]
    for a, b, text in (
        (lo, boundary, "regime 1: collapse"),
        (boundary, third, "regime 2: minor first"),
        (third, hi, "regime 3: major from start"),
    ):
        a, b = max(a, lo), min(b, hi)
        if b > a:
            ax.text(
                tau[-1] * 0.98,
                np.sqrt(a * b),
                text,
                ha="right",
                va="center",
                fontsize=9,
                bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none"},
            )
    ax.set_ylim(lo, hi)
    cbar = fig.colorbar(mesh, ax=ax, ticks=range(0, d + 1))
    cbar.ax.set_yticklabels(["β = 0"] + [f"j = {j + 1}" for j in range(d)])
    cbar.set_label("leading coordinate argmax_j |β_j(τ)|")
    ax.set(
        xlabel="rescaled time τ",
        ylabel="initialization scale α / ρ",
        title=f"ℓ2-SAM, L = 2, μ = {format_mu(mu)}: leading coordinate over (α/ρ, τ)",
    )
    if stopped:
        ax.plot(
            [],
            [],
            ls="",
            marker="s",
            mfc="white",
            mec="0.5",
            label=f"blank: run stopped early ({len(stopped)} of {len(runs)})",
        )
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)
    save(fig, path)


def draw_phase(results: list[Result], s: Setting, path: Path) -> None:
    """Figure 5 from the results of :func:`phase_tasks`."""
    draw_phase_diagram(MU5, phase_ratios(s.quick), results[:-1], float(results[-1]["alpha"]), path)


def phase_diagram_file(
    mu, path: str | Path, boundary: float | None = None, quick: bool = False
) -> None:
    """Compute and draw the phase diagram of any increasing ``mu``.

    ``boundary`` is the collapse boundary alpha / rho if already known (else bisected here).
    """
    mu = check_mu(mu)
    ratios = phase_ratios(quick, phase_span(mu))
    runs = [compute(t) for t in phase_runs(mu, ratios, *phase_horizon(mu, quick))]
    if boundary is None:
        boundary = collapse_boundary(mu, 1.0, rtol=0.3 if quick else 1e-4)
    draw_phase_diagram(mu, ratios, runs, boundary, Path(path))


REGIMES = Figure(
    "fig5_regimes",
    "l2-SAM leading coordinate over (alpha/rho, tau): the three regimes",
    "Where in (α/ρ, τ) do the three regimes of ℓ2-SAM at L = 2 (collapse, minor-first "
    "amplification, major from the start) lie, and do the certified, analytic and bisected "
    "boundaries separate them?",
    phase_tasks,
    draw_phase,
)

# --- command line ---------------------------------------------------------------------------

#: Most rows of the table (each row is one flow).
MAX_ROWS = 10_000


def parser() -> argparse.ArgumentParser:
    """The argument parser."""
    p = OneLineParser(
        prog="python -m figures.regimes",
        description="Regimes of l2-SAM (L = 2) over the initialization scale.",
    )
    p.add_argument("--mu", default="1,2,3,4,5", help="comma-separated increasing features")
    p.add_argument("--rho", type=float, default=1.0)
    p.add_argument("--n-alpha", type=int, default=12, help="rows of the table")
    p.add_argument(
        "--plot", help="write the (alpha/rho, tau) phase diagram here (.png, .pdf or .svg)"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """``python -m figures.regimes --mu 1,2,3,4,5 --rho 1 [--plot phase.png]``."""
    args = parser().parse_args(argv)
    try:
        try:
            values = [float(v) for v in args.mu.split(",")]
        except ValueError:
            raise ValueError(f"--mu must be comma-separated numbers, got {args.mu!r}") from None
        mu = check_mu(values)
        rho = positive(args.rho, "rho")
        if not 1 <= args.n_alpha <= MAX_ROWS:
            raise ValueError(f"--n-alpha must be in [1, {MAX_ROWS}], got {args.n_alpha}")
        check_output_path(args.plot, "--plot", (".png", ".pdf", ".svg"))
        # raise (naming mu / rho) before any flow runs if the boundaries leave float64
        a3 = regime3_boundary(mu, rho)
        a1 = collapse_boundary(mu, rho)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"mu = {mu}, rho = {rho:g}")
    print(
        f"collapse certain below alpha = {collapse_certificate_boundary(mu, rho):.6g} (N0 <= rho mu_1)"
    )
    print(f"collapse boundary (flow, bisection): alpha = {a1:.6g}   (alpha/rho = {a1 / rho:.6g})")
    print(f"regime-3 boundary (analytic):        alpha = {a3:.6g}   (alpha/rho = {a3 / rho:.6g})")
    print(f"{'alpha':>10} {'regime':>7}  {LEADERS_LABEL}, rescaled time")
    for alpha in np.geomspace(0.5 * a1, 2.0 * a3, args.n_alpha):
        res = classify(mu, alpha, rho)
        print(f"{alpha:10.4g} {res.regime!s:>7}  {res.leaders.describe()}", flush=True)
    if args.plot:
        phase_diagram_file(mu, args.plot, boundary=a1 / rho)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
