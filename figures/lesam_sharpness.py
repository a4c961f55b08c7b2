"""Figure 13 (``fig13_lesam_sharpness``): is LE-SAM flatter at equal loss? (settings:
:mod:`figures.lesam`).

Hessian trace and top eigenvalue against the training loss, on the single example
``mu = (1..5)`` (alpha = 0.4) and on the Gaussian blobs of figure 7 (alpha = 1,
:func:`figures.blobs.gaussian_blobs`). Compared at *equal loss*: on separable data the Hessian
of the logistic loss goes to 0 along every diverging path, so "lower sharpness" at the end of a
run says nothing. Both are divided by the loss (ratios at equal loss are unchanged) to separate
the curves. On ``D_mu`` at L = 2, ``tr H = l''(m) ||grad m||^2`` with
``||grad m||^2 = 2 sum mu_j^2 beta_j`` and ``m = sum mu_j beta_j``, so at a given loss
``tr H / l''(m)`` lies between ``2 mu_1 m`` (margin carried by the minor feature) and
``2 mu_d m`` (by the major one): the grey lines.

Matched settings on the blobs: l2-SAM's ``rho = 1``, LE-SAM ``sigma = ||grad L(theta(0))||``,
USAM ``rho = 1 / ||grad L(theta(0))||`` (:func:`figures.lesam.matched`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.lesam.stall import stall_point
from analysis.loss_levels import at_loss_levels
from flows.sweep.registry import Result, Task

from .blobs import gaussian_blobs
from .common import MU5, Figure, Setting, figure_command, plt, save
from .lesam import DEPTH, SIGMA0, as_params, compared, matched, run_style, run_task
from .multi_sample import data_task

FIG13_T = 8.0
BLOBS_ALPHA = 1.0
LEVELS = (1e-2, 1e-4, 1e-8)


def fig13_tasks(s: Setting) -> list[Task]:
    """Every compared run with its sharpness: single example, then blobs (same order)."""
    t_end, n = (2.0, 41) if s.quick else (FIG13_T, 321)
    X, y = gaussian_blobs()
    extra = {"sharpness": True, "perturbation": False}
    single = [run_task(alg, hp, t_end, n, **extra) for _, alg, hp, _ in compared(t_end)]
    blobs = [
        data_task(X, y, alg, as_params(hp), DEPTH, BLOBS_ALPHA, t_end, n, "lesam-run", **extra)
        for _, alg, hp, _ in matched(X, y, BLOBS_ALPHA, DEPTH, t_end)
    ]
    return single + blobs


def _visible_range(ax) -> tuple[float, float]:
    """y range of the drawn lines over the x range shown (log axes)."""
    lo_x, hi_x = sorted(ax.get_xlim())
    ys = [
        y[(x >= lo_x) & (x <= hi_x) & (y > 0)]
        for line in ax.get_lines()
        for x, y in [(np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float))]
        if np.size(x) > 1
    ]
    ys = np.concatenate([y for y in ys if y.size] or [np.array([1.0, 10.0])])
    return float(np.min(ys)) / 1.5, float(np.max(ys)) * 1.5


def _ratio_lines(runs: list[tuple[str, Result]], name: str = "trace") -> list[str]:
    """Ratios of ``name`` to l2-SAM and GD at the loss LEVELS (from at_loss_levels)."""
    at = {key: at_loss_levels(res["loss"], res[name], LEVELS) for key, res in runs}
    what = "tr H" if name == "trace" else "λmax"
    lines = [f"{what} ratio at loss " + " / ".join(f"{v:g}" for v in LEVELS)]
    for key in ("usam", "le15", "le3", "wc3", "official"):
        for ref in ("l2", "gd"):
            ratio = at[key] / at[ref]
            lines.append(
                f"{key} / {ref}: "
                + " / ".join("—" if not np.isfinite(r) else f"{r:.3g}" for r in ratio)
            )
    return lines


def draw_fig13(results: list[Result], s: Setting, path: Path) -> None:
    """tr H / L and lambda_max / L against the loss, single example (left) and blobs (right)."""
    t_end = 2.0 if s.quick else FIG13_T
    X, y = gaussian_blobs()
    sets = (
        ("single example μ = (1,…,5), α = 0.4", compared(t_end)),
        (
            f"Gaussian blobs ±(1, 2), n = 40, α = {BLOBS_ALPHA:g}",
            matched(X, y, BLOBS_ALPHA, DEPTH, t_end),
        ),
    )
    fig, axes = plt.subplots(2, 2, figsize=(14, 9.6), constrained_layout=True)
    half = len(results) // 2
    for col, ((title, runs), chunk) in enumerate(
        zip(sets, (results[:half], results[half:]), strict=True)
    ):
        for row, (name, label) in enumerate((("trace", "tr H / L"), ("top", "λ_max(H) / L"))):
            _draw_sharpness(axes[row, col], f"{title}: {label}", runs, chunk, name, label)
        if col == 0:
            _draw_margin_bounds(axes[0, 0])
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=8.5)
    fig.suptitle(
        "Sharpness against the training loss (L = 2, settings matched at θ(0)): is "
        "LE-SAM flatter than ℓ2-SAM and GD at equal loss?" + ("  [QUICK]" if s.quick else ""),
        fontsize=11,
    )
    save(fig, path)


def _draw_sharpness(
    ax, title: str, runs: list[tuple], chunk: list[Result], name: str, label: str
) -> None:
    """``name`` (``'trace'`` or ``'top'``) divided by the loss against the loss, one line per
    run (a circle at the end of a stalled run), with the ratios at the loss LEVELS."""
    keyed = [(key, res) for (key, *_), res in zip(runs, chunk, strict=True)]
    for (key, _, _, text), res in zip(runs, chunk, strict=True):
        loss = res["loss"]
        keep = (loss > 1e-290) & np.isfinite(res[name])
        ax.plot(loss[keep], res[name][keep] / loss[keep], label=text, **run_style(key))
        if loss[-1] > 1e-3:  # a stalled run: its end point
            ax.plot(
                loss[-1],
                res[name][-1] / loss[-1],
                marker="o",
                ms=9,
                ls="",
                color=run_style(key)["color"],
                mec="black",
            )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="training loss L(θ) (training goes →)",
        ylabel=label,
        xlim=(1.0, 1e-12),
        title=title,
    )
    ax.set_ylim(*_visible_range(ax))
    ax.grid(alpha=0.3, which="both")
    ax.text(
        0.99,
        0.02,
        "\n".join(_ratio_lines(keyed, name)),
        transform=ax.transAxes,
        ha="right",
        va="bottom",
        fontsize=7,
        family="monospace",
        bbox=dict(fc="white", alpha=0.9, ec="0.6"),
    )


def _draw_margin_bounds(ax) -> None:
    """On ``D_mu``: tr H / L with the whole margin on e_1 and on e_d (grey lines), and a note on
    the stalled runs."""
    m = np.geomspace(0.05, 60.0, 200)
    lo = np.logaddexp(0.0, -m)
    lpp = 1.0 / (2.0 + 2.0 * np.cosh(m))
    for j, ls in ((0, "--"), (len(MU5) - 1, "-.")):
        ax.plot(
            lo,
            lpp * 2 * MU5[j] * m / lo,
            color="0.5",
            lw=1,
            ls=ls,
            label=f"margin all on e_{j + 1}: ℓ''(m)·2μ_{j + 1}m / ℓ(m)",
        )
    stall = stall_point(MU5, SIGMA0, 3.0)
    ax.annotate(
        f"circles: stalled runs (loss {stall.loss:.3f} on D_μ)",
        (
            stall.loss,
            2 * MU5[0] * stall.margin / (2 + 2 * np.cosh(stall.margin)) / stall.loss,
        ),
        fontsize=8,
        xytext=(0.5, 40),
        arrowprops=dict(arrowstyle="->"),
    )


SHARPNESS = Figure(
    "fig13_lesam_sharpness",
    "Hessian trace and top eigenvalue vs training loss: GD, l2-SAM, USAM, LE-SAM (single example, blobs)",
    "Compared at equal training loss, is LE-SAM flatter (lower Hessian trace and top eigenvalue) "
    "than ℓ2-SAM and GD, as its paper claims, on the single example and on Gaussian blobs?",
    fig13_tasks,
    draw_fig13,
)


if __name__ == "__main__":
    figure_command(__spec__.name, SHARPNESS)
