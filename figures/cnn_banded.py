"""A two-layer CNN on banded data, GD against l2-SAM over the initialisation scale: does SAM
amplify the minor bands first and the major one last, as on diagonal networks?

Data (:func:`flows.networks.banded_data`): signals of length 20 whose label lives in four
frequency bands of strengths 1, 2, 3, 4 (two frequencies each), plus white noise of norm
about 0.5, 8 examples. Models (:func:`analysis.networks.runs.banded_model`): one full-width
circular filter with a linear activation (a diagonal network in the Fourier basis) and two
filters with ReLU, each with a linear read-out. Training: the Euler scheme of the rescaled
flow (``clock="rescaled"``, step 0.01 in tau, tau <= 8), from ``alpha`` times LeCun-normal
weights (seeds 0, 1, 2), alpha from 0.1 to 1.6 by factors sqrt(2) (GD at every other one);
l2-SAM with rho = 0.2.

* ``cnn_banded`` — the band shares of the output (the input-gradient spectrum, solid) and of
  the filters (their spectral energy, dashed) along training, first seed, at a collapsing, the
  most sequential and the largest alpha, beside GD. The leaders are read
  (:func:`analysis.networks.banded_regime`) once the spectrum has grown 10 times its start
  (before: shaded, the initial weights dominate); each panel's title says which bands lead
  from there on.
* ``cnn_banded_lead`` — how long a minor band leads against alpha, every seed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.networks import banded_regime
from analysis.networks.bands import GROWTH
from analysis.networks.runs import cnn_banded  # noqa: F401 - registers the task kinds
from flows.sweep.registry import Result, Task

from . import style
from .common import (
    STOPPED_MARK,
    Figure,
    Setting,
    figure_command,
    plt,
    save,
    stopped_early,
    stopped_handle,
)

BANDS = ((1, 2), (3, 4), (5, 6), (7, 8))
DATA = {"n": 8, "length": 20, "data_seed": 0}
#: (activation, channels, label)
MODELS = (("relu", 2, "ReLU, 2 filters"), ("linear", 1, "linear, 1 filter"))
ALGORITHMS = ("gd", "l2-sam")
#: the Euler step in tau and a record every 8 steps
ETA = 0.01
RECORD_EVERY = 8

PARAMS: dict[str, object] = {
    "alphas": tuple(float(a) for a in 0.1 * np.sqrt(2.0) ** np.arange(9)),  # 0.1 .. 1.6
    "seeds": (0, 1, 2),
    "rho": 0.2,
    "strengths": (1.0, 2.0, 3.0, 4.0),
    "noise": 0.5,
    "tau_max": 8.0,
}
QUICK: dict[str, object] = {
    "alphas": PARAMS["alphas"][::2],  # type: ignore[index]
    "seeds": (0,),
    "tau_max": 4.0,
}


def check(s: Setting) -> str | None:
    """Four strengths (one per band), positive scales, a horizon of at least one record."""
    if len(s.strengths) != len(BANDS):
        return f"give {len(BANDS)} strengths (one per band), got {s.strengths}"
    if min(*s.alphas, s.rho, s.tau_max) <= 0 or s.tau_max < RECORD_EVERY * ETA:
        return f"alphas and rho must be positive, tau_max at least {RECORD_EVERY * ETA:g}"
    return None


def gd_alphas(alphas: tuple[float, ...]) -> tuple[float, ...]:
    """GD runs at every other alpha: below alpha ~ 1 its rescaled dynamics hardly depends on
    alpha (a 2-homogeneous model at small margins), and it never lets a minor band lead."""
    return alphas[::2]


def alphas_of(algorithm: str, s: Setting) -> tuple[float, ...]:
    """The alphas ``algorithm`` runs at."""
    return gd_alphas(s.alphas) if algorithm == "gd" else s.alphas


def runs(s: Setting) -> list[tuple[str, str, float, int]]:
    """``(activation, algorithm, alpha, seed)`` in task order."""
    return [
        (activation, algorithm, alpha, seed)
        for activation, _, _ in MODELS
        for algorithm in ALGORITHMS
        for alpha in alphas_of(algorithm, s)
        for seed in s.seeds
    ]


def banded_tasks(s: Setting) -> list[Task]:
    """Per model, algorithm, alpha and seed, one run."""
    channels = {activation: c for activation, c, _ in MODELS}
    steps = int(round(s.tau_max / ETA))
    return [
        Task(
            "cnn_banded",
            {
                **DATA,
                "noise": s.noise,
                "bands": [list(b) for b in BANDS],
                "strengths": list(s.strengths),
                "activation": activation,
                "channels": channels[activation],
                "algorithm": algorithm,
                **({"rho": s.rho} if algorithm == "l2-sam" else {}),
                "alpha": float(alpha),
                "seed": seed,
                "eta": ETA,
                "steps": steps,
                "clock": "rescaled",
                "records": steps // RECORD_EVERY,
            },
        )
        for activation, algorithm, alpha, seed in runs(s)
    ]


def by_run(s: Setting, results: list[Result]) -> dict[tuple, Result]:
    """Results keyed by ``(activation, algorithm, alpha, seed)``."""
    return dict(zip(runs(s), results, strict=True))


def regime(res: Result):
    """The run's :class:`analysis.networks.BandedRegime`."""
    return banded_regime(res["t"], res["shares"], res["totals"], res["loss"])


def leaders_text(res: Result) -> str:
    """What the panel shows, measured: which bands lead once the spectrum has grown, or the
    collapse."""
    got = regime(res)
    if got.regime == "collapse":
        return "output shrinks: collapse"
    if not got.leaders:
        return "no band leads alone"
    bands = " → ".join(str(k + 1) for k in got.leaders)
    return f"τ ≥ {got.start:.2g}: band{'s' if len(got.leaders) > 1 else ''} {bands}"


def shares_panel(ax, res: Result, s: Setting, title: str, what: str) -> None:
    """Band shares of the output (solid) and filters (dashed) against tau, the span before the
    spectrum has grown shaded, the leaders in the title."""
    colors = style.coordinate_colors(len(BANDS))
    for k, color in enumerate(colors):
        label = f"band {k + 1} (μ = {s.strengths[k]:g})"
        ax.plot(res["t"], res["shares"][:, k], color=color, lw=1.4, label=label)
        ax.plot(res["t"], res["filter_shares"][:, k], color=color, lw=0.8, ls="--")
    ax.plot(res["t"], res["shares"][:, -1], color="0.6", lw=1.0, label="other frequencies")
    start = regime(res).start
    if np.isfinite(start):
        ax.axvspan(res["t"][0], start, color="0.9", zorder=0)
    if stopped_early(res, what, s):
        ax.plot(res["t"][-1], res["shares"][-1, -1], **STOPPED_MARK)
    ax.set(ylim=(0, 1), xlim=(res["t"][0], res["t"][-1]), xlabel="rescaled time τ")
    ax.set_title(f"{title}\n{leaders_text(res)}")


def picks(by_alpha: dict[float, Result]) -> list[float]:
    """The panels' alphas: the largest collapsing one, the one whose minor band leads the
    longest, the largest one (each once)."""
    regimes = {a: regime(r) for a, r in by_alpha.items()}
    collapsed = [a for a, g in regimes.items() if g.regime == "collapse"]
    alive = [a for a, g in regimes.items() if g.regime != "collapse"]
    longest = max(alive, key=lambda a: regimes[a].minor_lead) if alive else max(by_alpha)
    return list(dict.fromkeys(([max(collapsed)] if collapsed else []) + [longest, max(by_alpha)]))


def draw_banded(results: list[Result], s: Setting, path: Path) -> None:
    """One row of share panels per model: GD, then l2-SAM at the picked alphas (first seed)."""
    runs_ = by_run(s, results)
    seed = s.seeds[0]
    rows = []
    for activation, _, model in MODELS:
        sam = {a: runs_[(activation, "l2-sam", a, seed)] for a in s.alphas}
        chosen = picks(sam)
        longest = chosen[-2] if len(chosen) > 1 else chosen[0]
        gd_alpha = min(gd_alphas(s.alphas), key=lambda a: abs(np.log(a / longest)))
        row = [(runs_[(activation, "gd", gd_alpha, seed)], "gd", gd_alpha)]
        rows.append((model, row + [(sam[a], "l2-sam", a) for a in chosen]))
    cols = max(len(r) for _, r in rows)
    fig, axes = plt.subplots(len(rows), cols, figsize=(style.DOUBLE, 1.2 + 1.9 * len(rows)),
                             layout="constrained", sharey=True, squeeze=False)  # fmt: skip
    for (model, panels), axrow in zip(rows, axes, strict=True):
        for ax, (res, alg, alpha) in zip(axrow, panels, strict=False):
            what = f"{model}, {alg} at alpha = {alpha:g}, seed {seed}"
            shares_panel(ax, res, s, f"{style.label(alg)}, α = {alpha:.3g}", what)
        for ax in axrow[len(panels) :]:
            ax.axis("off")
        axrow[0].set_ylabel(f"{model}\nshare of the band")
    handles, _ = axes[0, 0].get_legend_handles_labels()
    handles += [
        plt.Line2D([], [], color="0.3", lw=1.4, label="output (input-gradient spectrum)"),
        plt.Line2D([], [], color="0.3", lw=0.8, ls="--", label="filters (spectral energy)"),
        plt.Rectangle((0, 0), 1, 1, color="0.9", label=f"spectrum < {GROWTH:g}× its start"),
    ]
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncol=3,
        title=f"{style.label('l2-sam')}: ρ = {s.rho:g}; seed {seed}; steps of {ETA:g} in τ",
    )
    save(fig, path)


def draw_lead(results: list[Result], s: Setting, path: Path) -> None:
    """Per model, the time a minor band leads against alpha, GD and l2-SAM, every seed (the
    first filled); a triangle at 0 marks a collapse."""
    runs_ = by_run(s, results)
    fig, axes = plt.subplots(1, len(MODELS), figsize=(style.DOUBLE, 2.6), layout="constrained",
                             sharey=True)  # fmt: skip
    stopped = False
    for ax, (activation, _, model) in zip(axes, MODELS, strict=True):
        for alg in ALGORITHMS:
            look = style.algorithm_style(alg, "steps")
            points = alphas_of(alg, s)
            for j, seed in enumerate(s.seeds):
                got = [runs_[(activation, alg, a, seed)] for a in points]
                regimes = [regime(r) for r in got]
                label = look["label"] + (f", ρ = {s.rho:g}" if alg == "l2-sam" else "")
                ax.plot(points, [g.minor_lead for g in regimes], color=look["color"],
                        marker=look["marker"], ls=look["ls"], lw=0.9,
                        mfc=look["color"] if j == 0 else "white",
                        label=label if j == 0 else "_seed")  # fmt: skip
                for a, g, r in zip(points, regimes, got, strict=True):
                    if g.regime == "collapse":
                        ax.plot(a, 0.0, marker="v", ms=6, color=look["color"], ls="")
                    what = f"{model}, {alg} at alpha = {a:g}, seed {seed}"
                    if stopped_early(r, what, s):
                        stopped = True
                        ax.plot(a, g.minor_lead, **STOPPED_MARK)
        seeds = ", ".join(map(str, s.seeds))
        ax.set(xscale="log", xlabel="initialisation scale α", title=f"{model}, seeds {seeds}")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("τ during which a minor\nband leads")
    handles, _ = axes[0].get_legend_handles_labels()
    handles.append(plt.Line2D([], [], marker="v", color="0.3", ls="", label="collapse"))
    handles.append(plt.Line2D([], [], marker="s", mfc="white", color="0.3", ls="",
                              label="open markers: further seeds"))  # fmt: skip
    if stopped:
        handles.append(stopped_handle("run stopped short of its horizon"))
    fig.legend(handles=handles, loc="outside lower center", ncol=4)
    save(fig, path)


CNN_BANDED = Figure(
    "cnn_banded",
    "Band shares of a two-layer CNN's output and filters along training on banded data, GD "
    "and l2-SAM at a collapsing, the most sequential and the largest alpha",
    "Bands of strengths μ = {strengths}, noise {noise}, τ ≤ {tau_max}; each title: the bands "
    "that lead once the input-gradient spectrum has grown 10 times (before: shaded). Does SAM "
    "amplify the minor frequency bands first and the major one last on a CNN where GD leads "
    "with the major band?",
    banded_tasks,
    draw_banded,
    params=PARAMS,
    quick=QUICK,
    example={"alphas": (0.2, 0.4), "seeds": (1,), "rho": 0.3},
    check=check,
)

CNN_BANDED_LEAD = Figure(
    "cnn_banded_lead",
    "Time during which a minor band leads against alpha, two-layer CNNs on banded data, GD "
    "and l2-SAM, every seed",
    "Bands of strengths μ = {strengths}, noise {noise}, τ ≤ {tau_max}, α = {alphas} (GD at "
    "every other one); a minor band's lead is counted once the spectrum has grown 10 times. "
    "In which range of α does a minor band lead under SAM, between its collapse and the "
    "major band leading from the start?",
    banded_tasks,
    draw_lead,
    params=PARAMS,
    quick=QUICK,
    example={"seeds": (1, 2), "rho": 0.3},
    check=check,
)


if __name__ == "__main__":
    figure_command(__spec__.name, CNN_BANDED, CNN_BANDED_LEAD)
