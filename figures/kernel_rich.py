"""Figure 18 (``fig18_kernel_rich``): from the kernel to the rich regime, GD and SAM flows in
regression against the implicit-bias limit of GD.

On the sparse regression of figure 17 (n = 20, d = 30, 3-sparse teacher), flows of GD, USAM
(rho = 0.1) and 1-USAM (rho = 0.2; the public code's 1-SAM at 0.1) from ``u = alpha``,
``v = 0`` run until the training loss falls to 1e-9; beside them the interpolator that
minimises GD's potential (:func:`analysis.implicit_bias.woodworth_interpolator`), and its two
ends: the minimum-l2 interpolator (alpha -> inf, the kernel regime) and the minimum-l1 one
(alpha -> 0, the rich regime; here the teacher itself). Panels: (a) the test loss and (b) the
l1 norm of the limit against alpha; an arrow from 1-USAM's smallest alpha to the alpha at
which GD's limit has its test loss.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.implicit_bias import (
    min_l1_interpolator,
    min_l2_interpolator,
    woodworth_interpolator,
)
from flows.datasets import sparse_regression
from flows.results import Cause, Trajectory
from flows.sweep.registry import Result, Task

from . import style
from .common import STOPPED_MARK, Figure, Setting, figure_command, plt, save, stopped_early

D18 = 30
#: Smallest alpha of flows that are slow below it: 1-USAM from 0.03 needs ~20 s to the floor.
SLOW_BELOW18 = {"1-usam": 0.1}


def _init(alpha: float) -> list[list[float]]:
    return [[alpha] * D18, [0.0] * D18]


def _hp(s: Setting, algorithm: str) -> dict:
    """``algorithm``'s hyper-parameters (``s.rho`` lists those of the algorithms other than GD)."""
    sam = [a for a in s.algorithms if a != "gd"]
    return {} if algorithm == "gd" else {"rho": s.rho[sam.index(algorithm)]}


def _alphas(s: Setting, algorithm: str) -> tuple[float, ...]:
    """The initialisation scales of ``algorithm``'s flows."""
    return tuple(a for a in s.alphas if a >= SLOW_BELOW18.get(algorithm, 0.0) * (1 - 1e-12))


def fig18_tasks(s: Setting) -> list[Task]:
    """One flow per algorithm and alpha, to the loss floor."""
    split = sparse_regression()
    return [
        Task(
            "simulate",
            {
                "X": split.train.X.tolist(),
                "y": split.train.y.tolist(),
                "task": "regression",
                "algorithm": a,
                "depth": 2,
                "alpha": _init(alpha),
                "t_max": 1e5,
                "n_points": 2,
                "loss_floor": s.floor,
                "rtol": 1e-9,
                **_hp(s, a),
            },
        )
        for a in s.algorithms
        for alpha in _alphas(s, a)
    ]


def _test_loss(beta: np.ndarray, test) -> float:
    r = test.X @ beta - test.y
    return float(0.5 * np.mean(r * r))


def _label(s: Setting, algorithm: str) -> str:
    """``ℓ2-SAM, ρ = 0.1``: the algorithm's label and its rho."""
    rho = _hp(s, algorithm).get("rho")
    return style.label(algorithm) + ("" if rho is None else f", ρ = {rho:g}")


def _ends(results: list[Result], s: Setting) -> dict[str, tuple[tuple[float, ...], list, list]]:
    """Per algorithm: its alphas, the final beta of each flow, and whether the flow fell short of
    the loss floor (a warning on stderr where it ended early)."""
    out, start = {}, 0
    for a in s.algorithms:
        alphas = _alphas(s, a)
        chunk = results[start : start + len(alphas)]
        start += len(alphas)
        runs = [Trajectory.from_arrays(r) for r in chunk]
        short = [
            stopped_early(r, f"{a} flow from alpha = {alpha:g}", s)
            or t.cause is not Cause.LOSS_FLOOR
            for r, t, alpha in zip(chunk, runs, alphas, strict=True)
        ]
        out[a] = (alphas, [t.beta[-1] for t in runs], short)
    return out


def _equivalent_alpha(ax, alpha: float, value: float, fine: np.ndarray, curve: np.ndarray) -> None:
    """An arrow from 1-USAM's ``value`` at ``alpha`` to the alpha at which GD's limit has the
    same value (``curve`` over ``fine``, increasing), labelled with that alpha."""
    if not curve[0] <= value <= curve[-1]:
        return
    equal = float(np.exp(np.interp(value, curve, np.log(fine))))
    ax.annotate(
        "",
        xy=(equal, value),
        xytext=(alpha, value),
        arrowprops={"arrowstyle": "->", "color": style.ALGORITHM_STYLES["1-usam"].color, "lw": 0.8},
    )
    ax.annotate(
        f"as GD from α = {equal:.2g}",
        (alpha, value),
        xytext=(5, 0),
        textcoords="offset points",
        ha="left",
        va="center",
        color=style.ALGORITHM_STYLES["1-usam"].color,
    )


def draw_fig18(results: list[Result], s: Setting, path: Path) -> None:
    """(a) Test loss and (b) ||beta||_1 of the flows' limits against alpha, GD's limit as a grey
    band, the l2 and l1 interpolators as dashed lines; × marks a flow short of the floor."""
    split = sparse_regression()
    fine = np.geomspace(min(s.alphas), max(s.alphas), 41)
    limits = [woodworth_interpolator(split.train, init=np.array(_init(a))).beta for a in fine]
    l2, l1 = min_l2_interpolator(split.train).beta, min_l1_interpolator(split.train).beta
    ends = _ends(results, s)
    fig, axes = plt.subplots(1, 2, figsize=(style.DOUBLE, 3.1), constrained_layout=True)
    measures = [
        (lambda b: _test_loss(b, split.test), "test loss", "log"),
        (lambda b: float(np.sum(np.abs(b))), r"$\|\beta\|_1$ of the limit", "linear"),
    ]
    short_any = False
    for ax, (measure, ylabel, scale) in zip(axes, measures, strict=True):
        curve = np.array([measure(b) for b in limits])
        ax.plot(fine, curve, color="0.75", lw=4, label="GD's limit (Woodworth)")
        ax.axhline(
            measure(l2), color=style.BLACK, ls="--", lw=0.7, label=r"min-$\ell_2$ interpolator"
        )
        if scale == "linear":  # basis pursuit recovers the teacher: its test loss is ~1e-32
            ax.axhline(
                measure(l1), color=style.BLACK, ls=":", lw=0.9, label=r"min-$\ell_1$ = teacher"
            )
        for a, (alphas, betas, short) in ends.items():
            kwargs = {**style.algorithm_style(a), "label": _label(s, a)}
            if a == "gd":
                kwargs.update(ls="", ms=5)
            values = [measure(b) for b in betas]
            ax.plot(alphas, values, **kwargs)
            for alpha, value, miss in zip(alphas, values, short, strict=True):
                if miss:
                    ax.plot(alpha, value, **STOPPED_MARK)
                    short_any = True
            if scale == "log" and a == "1-usam" and alphas:
                _equivalent_alpha(ax, alphas[0], values[0], fine, curve)
        ax.set(
            xscale="log",
            yscale=scale,
            xlabel="initialisation scale α (u = α, v = 0)",
            ylabel=ylabel,
        )
        ax.grid(alpha=0.3, which="major")
    axes[0].set_title(f"test loss at training loss {s.floor:g}")
    axes[1].set_title(
        rf"sparsity; the teacher's $\|\theta^*\|_1$ = {np.abs(split.teacher).sum():.3g}"
    )
    if short_any:
        axes[1].plot([], [], **{**STOPPED_MARK, "label": "× floor not reached"})
    fig.legend(*axes[1].get_legend_handles_labels(), loc="outside lower center", ncol=4)
    style.panel_letters(axes)
    save(fig, path)


KERNEL_RICH = Figure(
    "fig18_kernel_rich",
    "Test loss and l1 norm of the limits of GD, USAM and 1-USAM flows against alpha, with GD's "
    "implicit-bias limit and its l2 / l1 ends",
    "β = u ⊙ v on sparse regression (n = 20, d = 30, 3-sparse teacher), flows from u = α, v = 0 "
    "run to a training loss of {floor}: (a) the test loss and (b) ‖β‖₁ of the interpolator each "
    "reaches, against α; grey band: the interpolator of GD's potential (Woodworth et al.); "
    "dashed: the minimum-ℓ2 interpolator (α → ∞, kernel regime); dotted: the minimum-ℓ1 one "
    "(α → 0, rich regime; the teacher). GD's flows lie on the band and USAM's next to it; "
    "1-USAM's limit is sparser, like GD's from a smaller α (arrow). Do GD flows in regression "
    "end at the interpolator of Woodworth's potential for every initialisation scale, and which "
    "SAM flows reach sparser interpolators?",
    fig18_tasks,
    draw_fig18,
    params={
        "alphas": (0.03, 0.1, 0.3, 1.0, 3.0),
        "algorithms": ("gd", "usam", "1-usam"),
        "rho": (0.1, 0.2),
        "floor": 1e-9,
    },
    quick={"alphas": (0.3, 1.0, 3.0)},
    example={"rho": (0.15, 0.25), "floor": 1e-7},
    check=lambda s: (
        None
        if len(s.rho) == len([a for a in s.algorithms if a != "gd"])
        else "give one rho per algorithm other than GD"
    ),
)


if __name__ == "__main__":
    figure_command(__spec__.name, KERNEL_RICH)
