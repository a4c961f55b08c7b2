"""Figure 13 (``fig13_lesam_sharpness``): is LE-SAM flatter at equal loss? (settings:
:mod:`figures.lesam`).

Hessian trace and top eigenvalue against the training loss, on the single example ``D_mu``
(``alpha``) and on the Gaussian blobs of figure 7 (``blobs_alpha``,
:func:`figures.blobs.gaussian_blobs`), L = 2. Compared at *equal loss*: on separable data the
Hessian of the logistic loss goes to 0 along every diverging path, so "lower sharpness" at the
end of a run says nothing. Both are divided by the loss (ratios at equal loss are unchanged) to
separate the curves. On ``D_mu`` at L = 2, ``tr H = l''(m) ||grad m||^2`` with
``||grad m||^2 = 2 sum mu_j^2 beta_j`` and ``m = sum mu_j beta_j``, so at a given loss
``tr H / l''(m)`` lies between ``2 mu_1 m`` (margin carried by the minor feature) and
``2 mu_d m`` (by the major one): the grey lines. A run that stops short of loss 1e-3 (a stall)
ends in a circle.

Matched settings on both data sets: l2-SAM's ``rho``, LE-SAM ``sigma = rho ||grad
L(theta(0))||``, USAM ``rho / ||grad L(theta(0))||`` (:func:`figures.lesam.matched`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flows.data import Dataset, single_example
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
from .lesam import ALPHA, DEPTH, RHO, Run, as_params, matched, run_style, run_task
from .multi_sample import data_task

#: A run whose loss stays above this ends in a circle (it stalls).
STALLED_LOSS = 1e-3
#: The two quantities drawn: result key and axis label.
QUANTITIES = (("trace", r"$\mathrm{tr}\,H\,/\,L$"), ("top", r"$\lambda_{\max}(H)\,/\,L$"))


def single_runs(s: Setting) -> list[Run]:
    """The matched runs on ``D_mu``."""
    return matched(single_example(s.mu), s.alpha, DEPTH, s.horizon, s.rho, s.rho_max, True)


def blob_runs(s: Setting) -> list[Run]:
    """The matched runs on the Gaussian blobs."""
    X, y = gaussian_blobs()
    return matched(Dataset(X, y), s.blobs_alpha, DEPTH, s.horizon, s.rho, s.rho_max, True)


def fig13_tasks(s: Setting) -> list[Task]:
    """Every compared run with its sharpness: single example, then blobs (same order)."""
    X, y = gaussian_blobs()
    extra: dict[str, object] = {"sharpness": True, "perturbation": False}
    single = [
        run_task(
            alg,
            hp,
            s.horizon,
            s.samples,
            mu=s.mu,
            alpha=s.alpha,
            sharpness=True,
            perturbation=False,
        )  # fmt: skip
        for _, alg, hp, _ in single_runs(s)
    ]
    blobs = [
        data_task(
            X,
            y,
            alg,
            as_params(hp),
            DEPTH,
            s.blobs_alpha,
            s.horizon,
            s.samples,
            "lesam-run",
            **extra,
        )  # fmt: skip
        for _, alg, hp, _ in blob_runs(s)
    ]
    return single + blobs


def _visible_range(ax) -> tuple[float, float]:
    """y range of the drawn lines over the x range shown (log axes)."""
    lo_x, hi_x = sorted(ax.get_xlim())
    found = [
        y[(x >= lo_x) & (x <= hi_x) & (y > 0)]
        for line in ax.get_lines()
        for x, y in [(np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float))]
        if np.size(x) > 1
    ]
    ys = np.concatenate([y for y in found if y.size] or [np.array([1.0, 10.0])])
    return float(np.min(ys)) / 1.5, float(np.max(ys)) * 1.5


def draw_fig13(results: list[Result], s: Setting, path: Path) -> None:
    """tr H / L (top) and lambda_max / L (bottom) against the loss, single example (left)
    and blobs (right)."""
    sets = (
        (rf"$\mu$ = {format_mu(s.mu)}, $\alpha$ = {s.alpha:g}", single_runs(s)),
        (rf"Gaussian blobs, $\alpha$ = {s.blobs_alpha:g}", blob_runs(s)),
    )
    fig, axes = plt.subplots(2, 2, figsize=(style.DOUBLE, 5.4), constrained_layout=True)
    half = len(results) // 2
    marks = set()
    for col, ((title, runs), chunk) in enumerate(
        zip(sets, (results[:half], results[half:]), strict=True)
    ):
        for row, (name, label) in enumerate(QUANTITIES):
            marks |= _draw_sharpness(axes[row, col], runs, chunk, name, s)
            axes[row, col].set_ylabel(label)
            if row == 0:
                axes[row, col].set_title(f"{title}: σ = {_sigma(runs):.3g}")
    _draw_margin_bounds(axes[0, 0], s.mu)
    for ax in axes.ravel():
        ax.set_ylim(*_visible_range(ax))
    style.panel_letters(axes)
    handles = [plt.Line2D([], [], label=label, **run_style(key)) for key, *_, label in sets[0][1]]
    handles += axes[0, 0].get_legend_handles_labels()[0]
    handles += [_MARK_HANDLES[m] for m in sorted(marks)]
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncol=2,
        title=rf"L = 2, matched at $\theta(0)$ to {style.label('l2-sam')} with $\rho$ = {s.rho:g}",
    )
    save(fig, path)


def _sigma(runs: list[Run]) -> float:
    """The matched budget of a list of runs (LE-SAM's constant sigma)."""
    return next(hp["sigma"] for key, _, hp, _ in runs if key.startswith("le"))


#: Legend entries of the end marks: a stalled run's circle, a run that ended early.
_MARK_HANDLES = {
    "stalled": plt.Line2D(
        [], [], ls="", marker="o", ms=6, mfc="none", mec="black", label="end of a stalled run"
    ),
    "stopped": plt.Line2D([], [], label="run ended early", **STOPPED_MARK),
}


def _draw_sharpness(ax, runs: list[Run], chunk: list[Result], name: str, s: Setting) -> set[str]:
    """``name`` (``'trace'`` or ``'top'``) divided by the loss against the loss, one line per
    run; a circle at the end of a stalled run, × at the end of one that ended early. Returns
    the end marks drawn."""
    marks = set()
    for (key, _, _, label), res in zip(runs, chunk, strict=True):
        loss = res["loss"]
        keep = (loss > 1e-290) & np.isfinite(res[name])
        x, y = loss[keep], res[name][keep] / loss[keep]
        ax.plot(x, y, **run_style(key))
        if x.size and x[-1] > STALLED_LOSS:
            ax.plot(x[-1], y[-1], ls="", marker="o", ms=6, mfc="none", mec="black")
            marks.add("stalled")
        if stopped_early(res, label, s) and x.size:
            ax.plot(x[-1], y[-1], **STOPPED_MARK)
            marks.add("stopped")
    ax.set(xscale="log", yscale="log", xlabel=r"training loss $L(\theta)$", xlim=(1.0, 1e-12))
    ax.grid(alpha=0.3, which="major")
    return marks


def _draw_margin_bounds(ax, mu) -> None:
    """On ``D_mu``: tr H / L with the whole margin on e_1 and on e_d (grey lines)."""
    mu = np.asarray(mu, dtype=float)
    m = np.geomspace(0.05, 60.0, 200)
    lo = np.logaddexp(0.0, -m)
    lpp = 1.0 / (2.0 + 2.0 * np.cosh(m))
    for j, ls in ((0, (0, (4, 2))), (mu.size - 1, (0, (1, 1.5)))):
        ax.plot(
            lo,
            lpp * 2 * mu[j] * m / lo,
            color="0.55",
            lw=0.9,
            ls=ls,
            label=rf"margin all on $e_{{{j + 1}}}$: $2\mu_{{{j + 1}}} m\,\ell''(m)/\ell(m)$",
        )


SHARPNESS = Figure(
    "fig13_lesam_sharpness",
    "Hessian trace and top eigenvalue against the training loss: GD, l2-SAM, USAM, LE-SAM "
    "(mu = {mu}, alpha = {alpha}; Gaussian blobs, alpha = {blobs_alpha}; L = 2)",
    "Compared at equal training loss, is LE-SAM flatter (lower Hessian trace and top "
    "eigenvalue) than ℓ2-SAM and GD, as its paper claims? Runs matched at θ(0) to ℓ2-SAM with "
    "ρ = {rho} (LE-SAM caps ρ_max = {rho_max}, the last also with the warm-up + cosine budget, "
    "and the official values σ = 0.35 warm-up + cosine, ρ_max = 0.3), to τ = {horizon}. Left: "
    "the single example μ = {mu}, α = {alpha}; right: the Gaussian blobs of fig 7, α = "
    "{blobs_alpha}. Both quantities are divided by the loss (ratios at equal loss unchanged). "
    "Grey: tr H/L with the whole margin on the minor (dashed) or the major feature (dotted): "
    "at equal loss, sharpness measures which feature carries the margin. At the defaults the "
    "official values' curve lies on GD's (ratio 0.99–1.00). Circles: runs that stall above loss 1e-3; × marks a run that ended "
    "early. The ratios at loss 1e-2, 1e-4, 1e-8 are in paper_repro.md.",
    fig13_tasks,
    draw_fig13,
    params={
        "mu": MU5,
        "alpha": ALPHA,
        "blobs_alpha": 1.0,
        "rho": RHO,
        "rho_max": (1.5, 3.0),
        "horizon": 8.0,
        "samples": 321,
    },
    quick={"horizon": 2.0, "samples": 41},
    example={"alpha": 0.45, "blobs_alpha": 0.9, "rho_max": (1.5, 2.5)},
)


if __name__ == "__main__":
    figure_command(__spec__.name, SHARPNESS)
