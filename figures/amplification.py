"""Figure 4 (``fig4_amplification``): sequential feature amplification, the shares
``|beta_j| / ||beta||_1`` of l2-SAM against tau for several alpha, GD beside.

One panel per alpha; the coordinates in the viridis colours (minor dark, major light), l2-SAM
solid, GD dashed. Where l2-SAM collapses (beta = 0) the shares are undefined and not drawn: a
dotted line marks the collapse time. The regime phase diagram (figure 5) is in
:mod:`figures.regimes`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.lines import Line2D

from analysis.amplification import leaders
from flows.sweep.registry import Result, Task

from . import style
from .common import (
    MU5,
    STOPPED_MARK,
    Figure,
    Setting,
    coordinate_colors,
    figure_command,
    plt,
    save,
    shares_of,
    show,
    stopped_early,
)

#: Panels per row of the figure.
COLUMNS = 3
#: Height of one row of panels, inches.
ROW_HEIGHT = 1.75
#: How a new leader of l2-SAM is marked on its curve, and the end of a run that blew up.
LEADER_MARK: dict[str, Any] = {
    "marker": "o",
    "ms": 3.0,
    "ls": "",
    "mec": "white",
    "mew": 0.4,
    "zorder": 4,
}
BLOWUP_MARK: dict[str, Any] = {"marker": "|", "ms": 7.0, "mew": 1.2, "ls": "", "color": "0.2"}


def amplification_tasks(s: Setting) -> list[Task]:
    """l2-SAM and GD on ``mu`` at ``depth`` and ``rho``, one pair per alpha (alpha-major)."""
    return [
        Task(
            "simulate",
            {
                "mu": s.mu,
                "algorithm": alg,
                "depth": s.depth,
                "alpha": a,
                "rho": s.rho,
                "t_max": s.t_max,
                "n_points": s.n_points,
            },
        )
        for a in s.alphas
        for alg in ("l2-sam", "gd")
    ]


def defined_shares(result: Result) -> np.ndarray:
    """The shares of a run, NaN where beta = 0 (after a collapse the shares are undefined)."""
    out = shares_of(result)
    zero = np.all(np.isneginf(result["log_abs_beta"]), axis=1)
    out[zero] = np.nan
    return out


def collapse_time(result: Result) -> float | None:
    """The first collapse event's tau of a run, or None."""
    taus = result["event_tau"][result["event_kind"] == "collapse"]
    return float(taus[0]) if taus.size else None


def _mark_leaders(ax, res: Result, share: np.ndarray, colors: np.ndarray) -> None:
    """A dot on the curve of each coordinate where it becomes the leader (after tau = 0)."""
    lead = leaders(res["log_abs_beta"])
    for k in np.flatnonzero((lead[1:] != lead[:-1]) & (lead[1:] >= 0)) + 1:
        if k > 1:
            j = lead[k]
            ax.plot(res["t"][k], share[k, j], color=colors[j], **LEADER_MARK)


def _mark_end(ax, res: Result, share: np.ndarray, what: str, s: Setting) -> str | None:
    """Mark a run's last drawn point: × if it ended early, | if it blew up; returns which
    (``'stopped'``, ``'blow-up'``) or None."""
    last = np.flatnonzero(np.any(np.isfinite(share), axis=1))
    if not last.size:
        return None
    k = last[-1]
    if stopped_early(res, what, s):
        ax.plot(res["t"][k], np.nanmax(share[k]), **STOPPED_MARK)
        return "stopped"
    if res["cause"] == "BLOW_UP":
        ax.plot(res["t"][k], np.nanmax(share[k]), **BLOWUP_MARK)
        return "blow-up"
    return None


def _draw_panel(ax, alpha: float, sam: Result, gd: Result, s: Setting) -> set[str]:
    """One alpha: each coordinate's share under l2-SAM (solid, a dot where a coordinate takes
    the lead) and GD (dashed), the collapse time; returns how runs ended (:func:`_mark_end`, ``"collapse"``)."""
    colors = coordinate_colors(len(s.mu))
    ends: set[str] = set()
    for res, ls, lw, name in ((sam, "-", 1.4, "l2-sam"), (gd, "--", 0.9, "gd")):
        share = defined_shares(res)
        for j, color in enumerate(colors):
            ax.plot(res["t"], share[:, j], color=color, ls=ls, lw=lw)
        if name == "l2-sam":
            _mark_leaders(ax, res, share, colors)
        end = _mark_end(ax, res, share, f"{style.label(name)} at α = {alpha:g}", s)
        if end:
            ends.add(end)
    tau_c = collapse_time(sam)
    if tau_c is not None:
        ends.add("collapse")
        ax.axvline(tau_c, color="0.3", ls=":", lw=1.0)
        ax.annotate(
            f"β = 0 from\nτ = {tau_c:.3g}",
            xy=(tau_c, 0.5),
            xytext=(4, 0),
            textcoords="offset points",
            ha="left",
            va="center",
            color="0.2",
        )
    ax.set_title(f"$\\alpha$ = {alpha:g}")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlim(0.0, max(float(sam["t"][-1]), float(gd["t"][-1])))
    ax.grid(alpha=0.3, lw=0.4)
    return ends


#: Legend entries of the ways a run can end, by :func:`_mark_end`'s word.
END_ENTRIES: dict[str, tuple[dict[str, Any], str]] = {
    "collapse": ({"color": "0.3", "lw": 1.0, "ls": ":"}, "collapse (β = 0)"),
    "blow-up": (BLOWUP_MARK, "finite-time blow-up"),
    "stopped": (STOPPED_MARK, "run ended early"),
}


def _legend(ax, s: Setting, ends: set[str]) -> None:
    """The coordinates (with mu_j) and the line styles, in ``ax`` (an unused panel) or beside."""
    colors = coordinate_colors(len(s.mu))
    handles = [
        Line2D([], [], color=c, lw=1.4, label=f"$j = {j + 1}$ ($\\mu_j$ = {m:g})")
        for j, (c, m) in enumerate(zip(colors, s.mu, strict=True))
    ]
    handles += [
        Line2D([], [], color="0.4", lw=1.4, label=f"solid: {style.label('l2-sam')}"),
        Line2D([], [], color="0.4", lw=0.9, ls="--", label=f"dashed: {style.label('gd')}"),
        Line2D([], [], color="0.4", label="new leader", **LEADER_MARK),
    ]
    handles += [
        Line2D([], [], label=text, **mark)
        for word, (mark, text) in END_ENTRIES.items()
        if word in ends
    ]
    ax.legend(
        handles=handles,
        loc="center",
        title=f"$L$ = {s.depth}, $\\rho$ = {s.rho:g}",
        ncol=1,
    )


def draw_amplification(results: list[Result], s: Setting, path: Path) -> None:
    """Shares against tau, one panel per alpha (rows of :data:`COLUMNS`), the legend in the
    last free slot (or a panel of its own)."""
    n = len(s.alphas)
    rows = math.ceil((n + 1) / COLUMNS)
    fig, axes = plt.subplots(
        rows,
        COLUMNS,
        figsize=(style.DOUBLE, ROW_HEIGHT * rows + 0.2),
        sharey=True,
        constrained_layout=True,
        squeeze=False,
    )
    flat = axes.ravel()
    ends: set[str] = set()
    for ax, alpha, sam, gd in zip(flat, s.alphas, results[0::2], results[1::2], strict=False):
        ends |= _draw_panel(ax, alpha, sam, gd, s)
    for ax in flat[n:]:
        ax.axis("off")
    _legend(flat[n], s, ends)
    for ax in axes[:, 0]:
        ax.set_ylabel(r"share $|\beta_j|\,/\,\|\beta\|_1$")
    for k, ax in enumerate(flat[:n]):
        if k + COLUMNS >= n:
            ax.set_xlabel(r"rescaled time $\tau$")
    style.panel_letters(flat[:n])
    save(fig, path)


def check_amplification(s: Setting) -> str | None:
    """A setting's problem: mu not positive and increasing, no alpha or a non-positive one."""
    mu = np.asarray(s.mu, dtype=float)
    if mu.size < 2 or np.any(mu <= 0) or np.any(np.diff(mu) <= 0):
        return f"mu must be positive and increasing with at least two values, got {show(s.mu)}"
    if not s.alphas or min(s.alphas) <= 0:
        return f"alphas must be positive, got {show(s.alphas)}"
    return None


AMPLIFICATION = Figure(
    "fig4_amplification",
    "ℓ2-SAM shares |β_j|/‖β‖₁ against τ for α = {alphas}, GD beside; μ = {mu}, L = {depth}, "
    "ρ = {rho}",
    "Does ℓ2-SAM at L = {depth} (μ = {mu}, ρ = {rho}, α = {alphas}, τ ≤ {t_max}) amplify the "
    "features one after the other, minor first and major last, between collapse (small α: β "
    "reaches 0 at the dotted line, after which the shares are undefined and not drawn) and "
    "major-from-the-start (large α), where GD (dashed) leads with the major feature throughout?",
    amplification_tasks,
    draw_amplification,
    params={
        "mu": MU5,
        "alphas": (0.3, 0.4, 0.5, 0.7, 1.5),
        "rho": 1.0,
        "depth": 2,
        "t_max": 6.0,
        "n_points": 601,
    },
    quick={"alphas": (0.4, 0.5), "t_max": 4.0, "n_points": 41},
    example={"mu": (1.5, 2.5, 3.5), "alphas": (0.45, 0.65), "rho": 0.9, "t_max": 3.5},
    check=check_amplification,
)


if __name__ == "__main__":
    figure_command(__spec__.name, AMPLIFICATION)
