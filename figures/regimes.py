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
import matplotlib.ticker
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

from . import style
from .common import (
    MU5,
    STOPPED_MARK,
    Figure,
    Setting,
    coordinate_colors,
    format_mu,
    plt,
    save,
    stopped_early,
)

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


def phase_runs(mu, ratios, tau_max: float, n_tau: int, rho: float = 1.0) -> list[Task]:
    """One l2-SAM run per alpha / rho at ``rho`` (scale symmetry: in the rescaled clock the path
    depends on alpha / rho only)."""
    return [
        Task(
            "simulate",
            {
                "mu": [float(m) for m in mu],
                "algorithm": "l2-sam",
                "depth": 2,
                "alpha": float(r) * rho,
                "rho": rho,
                "t_max": tau_max,
                "n_points": n_tau,
                "original_time": False,
                "rtol": 1e-8,
            },
        )
        for r in ratios
    ]


def phase_tasks(s: Setting) -> list[Task]:
    """Figure 5: the runs at ``mu`` and ``rho`` (:func:`phase_runs`) and the collapse bisection."""
    span = FIG5_RATIOS if tuple(s.mu) == MU5 else phase_span(s.mu)
    return phase_runs(s.mu, phase_ratios(s.quick, span), *phase_horizon(s.mu, s.quick), s.rho) + [
        Task("collapse-boundary", {"mu": s.mu, "rtol": 0.3 if s.quick else 1e-4})
    ]


#: The regimes in order of alpha / rho, with their names as :data:`figures.style.REGIME_COLORS`
#: keys and as written beside the strip.
REGIMES_SHOWN = (
    ("collapse", "collapse"),
    ("sequential amplification", "sequential\namplification"),
    ("major from the start", "major from\nthe start"),
)


def _leader_grid(runs: list[Result], n_tau: int) -> np.ndarray:
    """The leading coordinate of every run (rows) at every sample (columns): -1 where beta = 0,
    -2 where the run did not reach the sample (it ended early); at tau = 0 (a tie of all
    coordinates) the leader of the next sample."""
    lead = np.full((len(runs), n_tau), -2)
    for row, r in zip(lead, runs, strict=False):
        row[: r["t"].size] = leaders(r["log_abs_beta"])
    lead[:, 0] = np.where(lead[:, 1] > -2, lead[:, 1], lead[:, 0])
    return lead


def _draw_leaders(ax, tau: np.ndarray, ratios: np.ndarray, lead: np.ndarray, d: int):
    """The leading coordinate over (tau, alpha / rho) as coloured cells (beta = 0 in the
    collapse colour, samples not reached blank); returns the mesh and the y edges."""
    colors = np.vstack(
        [matplotlib.colors.to_rgba(style.REGIME_COLORS["collapse"]), coordinate_colors(d)]
    )
    cmap = matplotlib.colors.ListedColormap(colors).with_extremes(bad="white")
    edges = np.sqrt(ratios[1:] * ratios[:-1])
    y_edges = np.concatenate([[ratios[0] ** 2 / edges[0]], edges, [ratios[-1] ** 2 / edges[-1]]])
    t_edges = np.concatenate([[tau[0]], 0.5 * (tau[1:] + tau[:-1]), [tau[-1]]])
    mesh = ax.pcolormesh(
        t_edges,
        y_edges,
        np.ma.masked_less(lead + 1, 0),
        cmap=cmap,
        vmin=-0.5,
        vmax=d + 0.5,
        rasterized=True,
    )
    return mesh, y_edges


def _draw_regime_strip(strip, bounds: tuple[float, float, float, float]) -> None:
    """The regimes as bands of :data:`figures.style.REGIME_COLORS` between the boundaries
    ``bounds`` = (bottom, collapse, regime 3, top), named on the right."""
    bottom, collapse, third, top = bounds
    ticks, names = [], []
    for (key, text), (a, b) in zip(
        REGIMES_SHOWN, ((bottom, collapse), (collapse, third), (third, top)), strict=True
    ):
        a, b = max(a, bottom), min(b, top)
        if b <= a:
            continue
        strip.axhspan(a, b, color=style.REGIME_COLORS[key], lw=0)
        ticks.append(float(np.sqrt(a * b)))
        names.append(text)
    strip.set_yscale("log")
    strip.set_ylim(bottom, top)
    strip.set_xticks([])
    strip.yaxis.tick_right()
    strip.set_yticks(ticks, names, minor=False)
    strip.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    strip.tick_params(axis="y", length=0)
    strip.set_title("regime", loc="left")


def _mark_stopped(ax, tau: np.ndarray, ratios, runs: list[Result], setting: Setting) -> bool:
    """× at the last sample of each run that ended early (and a line on stderr); whether any."""
    stopped = False
    for ratio, run in zip(ratios, runs, strict=False):
        if stopped_early(run, f"l2-SAM at alpha/rho = {ratio:g}", setting):
            ax.plot(tau[run["t"].size - 1], ratio, **STOPPED_MARK)
            stopped = True
    return stopped


def draw_phase_diagram(
    mu,
    ratios: np.ndarray,
    runs: list[Result],
    boundary: float,
    path: Path,
    rho: float = 1.0,
    setting: Setting | None = None,
) -> None:
    """Leading coordinate over (alpha/rho, tau) for any ``mu``, the regimes as a strip beside
    it (:data:`figures.style.REGIME_COLORS`), and the three boundaries as lines.

    ``runs`` are the results of :func:`phase_runs` on ``ratios`` (same horizon), ``boundary``
    the collapse boundary alpha / rho from the flow, ``rho`` the radius of the runs;
    ``setting`` names the figure in the warnings about runs that ended early.
    """
    mu = [float(m) for m in check_mu(mu)]
    setting = setting or Setting({"mu": tuple(mu), "rho": rho}, figure="phase diagram")
    ratios = np.asarray(ratios, dtype=float)
    tau = max(runs, key=lambda r: r["t"].size)["t"]
    d = len(mu)
    fig, (ax, strip, cax) = plt.subplots(
        1,
        3,
        figsize=(style.DOUBLE, 3.0),
        constrained_layout=True,
        gridspec_kw={"width_ratios": [1.0, 0.035, 0.03]},
    )
    mesh, y_edges = _draw_leaders(ax, tau, ratios, _leader_grid(runs, tau.size), d)
    ax.set_yscale("log")
    third = regime3_boundary(mu)
    lines = [
        (boundary, "collapse boundary (bisection on the flow)", "-"),
        (collapse_certificate_boundary(mu), r"$N_0 = \rho\mu_1$: collapse certain below", ":"),
        (third, rf"$N_0 = \rho(\mu_{d} + \mu_{d - 1})$: major from the start above", "--"),
    ]
    for value, label, ls in lines:
        ax.axhline(value, color=style.BLACK, ls=ls, lw=1.4, label=f"{label}, {value:.4g}")
    lo, hi = y_edges[0], y_edges[-1]
    _draw_regime_strip(strip, (lo, boundary, third, hi))
    if _mark_stopped(ax, tau, ratios, runs, setting):
        ax.plot([], [], label="run ended early (blank after ×)", **STOPPED_MARK)
    ax.set_ylim(lo, hi)
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    cbar = fig.colorbar(mesh, cax=cax, ticks=range(0, d + 1))
    cbar.ax.set_yticklabels([r"$\beta = 0$"] + [f"$j$ = {j + 1}" for j in range(d)])
    cbar.set_label(r"leading coordinate (largest $|\beta_j(\tau)|$)")
    ax.set(
        xlabel=r"rescaled time $\tau$",
        ylabel=r"initialisation scale $\alpha/\rho$",
        title=rf"{style.label('l2-sam')}, $L$ = 2, $\mu$ = {format_mu(mu)}, $\rho$ = {rho:g}",
    )
    fig.legend(loc="outside lower center", ncol=2)
    save(fig, path)


def draw_phase(results: list[Result], s: Setting, path: Path) -> None:
    """Figure 5 from the results of :func:`phase_tasks`."""
    span = FIG5_RATIOS if tuple(s.mu) == MU5 else phase_span(s.mu)
    draw_phase_diagram(
        s.mu,
        phase_ratios(s.quick, span),
        results[:-1],
        float(results[-1]["alpha"]),
        path,
        rho=s.rho,
        setting=s,
    )


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


def check_phase(s: Setting) -> str | None:
    """A setting's problem: ``mu`` not positive and increasing, ``rho`` not positive."""
    try:
        check_mu(s.mu)
    except ValueError as exc:
        return str(exc)
    return None if s.rho > 0 else f"rho must be positive, got {s.rho:g}"


REGIMES = Figure(
    "fig5_regimes",
    "ℓ2-SAM's leading coordinate over (α/ρ, τ), μ = {mu}, ρ = {rho}: the three regimes",
    "Where in (α/ρ, τ) do the three regimes of ℓ2-SAM at L = 2 (μ = {mu}, ρ = {rho}) lie — "
    "collapse (β reaches 0: grey), sequential amplification (minor coordinates lead first) and "
    "major from the start — and do the certified (dotted), analytic (dashed) and bisected "
    "(solid) boundaries separate them?",
    phase_tasks,
    draw_phase,
    params={"mu": MU5, "rho": 1.0},
    example={"mu": (0.5, 1.7, 2.9), "rho": 0.8},
    check=check_phase,
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
