"""Figure ``sgd_step_size``: the interpolator full-batch GD and minibatch SGD reach on a sparse
regression, against the step size.

Even, Pesme, Gunasekar & Flammarion 2023 ("(S)GD over diagonal linear networks: implicit bias,
large stepsizes and edge of stability") predict that large steps help SGD (a sparser
interpolator, a smaller test loss) and can hurt GD. The data are
:func:`flows.datasets.sparse_regression` (``x ~ N(0, I_d)``, a ``sparsity``-sparse teacher
``beta*`` of unit norm); the network is ``beta = u * v`` at depth 2 from ``u(0) = alpha``,
``v(0) = 0`` (their initialisation, ``beta(0) = 0``, signed ``beta``). The test loss is the
population one, ``E (x^T (beta - beta*))^2 / 2 = ||beta - beta*||^2 / 2``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

from flows import iterate
from flows.datasets import sparse_regression
from flows.sweep.registry import Result, Task, register

from . import style
from .common import STOPPED_MARK, Figure, Setting, figure_command, plt, save, show


def steps_for(eta: float, t_train: float, min_steps: int) -> int:
    """Steps of a run at step size ``eta``: the time ``t_train``, at least ``min_steps``."""
    return max(math.ceil(t_train / eta), min_steps)


def run_step_size(params: dict) -> Result:
    """One step size, every seed: the end point's population test loss, ``||beta||_1``, train
    loss and status (arrays over ``seeds``; a full-batch run, ``batch_size`` 0, has one seed)."""
    split = sparse_regression(params["n"], 1, params["d"], params["sparsity"], params["data_seed"])
    alpha = params["alpha"] * np.vstack([np.ones(params["d"]), np.zeros(params["d"])])
    eta = params["eta"]
    steps = steps_for(eta, params["t_train"], params["min_steps"])
    batch = params["batch_size"] or None
    rows = []
    for seed in params["seeds"]:
        run = iterate(split.train, "gd", 2, alpha, eta=eta, steps=steps, record_every=steps,
                      batch_size=batch, seed=seed)  # fmt: skip
        beta = run.beta[-1]
        with np.errstate(all="ignore"):
            test = 0.5 * float(np.sum((beta - split.teacher) ** 2))
        rows.append((test, float(np.sum(np.abs(beta))), float(run.loss[-1]), run.status))
    test, l1, train, status = (np.array(c) for c in zip(*rows, strict=True))
    return {
        "test_loss": test,
        "l1": l1,
        "train_loss": train,
        "status": status.astype(int),
        "teacher_l1": np.array(np.sum(np.abs(split.teacher))),
    }


def step_size_cost(params: dict) -> float:
    """About 30 us a minibatch step, 10 us a full-batch one, per seed."""
    steps = steps_for(params["eta"], params["t_train"], params["min_steps"])
    per_step = 3e-5 if params["batch_size"] else 1e-5
    return per_step * steps * len(params["seeds"]) * (1.0 + params["n"] / 20.0)


register(
    "sparse-regression-step-size",
    run_step_size,
    step_size_cost,
    ("test_loss", "l1", "train_loss", "status", "teacher_l1"),
)


def step_size_task(s: Setting, eta: float, minibatch: bool) -> Task:
    """The runs at step size ``eta``: full-batch GD (one run) or SGD (``s.seeds`` seeds)."""
    return Task(
        "sparse-regression-step-size",
        {
            "n": s["n"],
            "d": s["d"],
            "sparsity": s["sparsity"],
            "data_seed": s["data_seed"],
            "alpha": s["alpha"],
            "eta": float(eta),
            "batch_size": s["batch_size"] if minibatch else 0,
            "seeds": list(range(1, s["seeds"] + 1)) if minibatch else [0],
            "t_train": s["t_train"],
            "min_steps": s["min_steps"],
        },
    )


def tasks(s: Setting) -> list[Task]:
    """GD at each of ``gd_etas``, then SGD at each of ``sgd_etas``."""
    return [step_size_task(s, e, False) for e in s["gd_etas"]] + [
        step_size_task(s, e, True) for e in s["sgd_etas"]
    ]


def mean_and_error(values: np.ndarray, ok: np.ndarray) -> tuple[float, float]:
    """Mean and standard error of ``values`` over the runs ``ok`` (0 error for one run)."""
    kept = values[ok]
    if kept.size == 0:
        return math.nan, math.nan
    error = float(np.std(kept, ddof=1) / np.sqrt(kept.size)) if kept.size > 1 else 0.0
    return float(np.mean(kept)), error


def curve(results: list[Result], key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, standard error of ``key`` over the finished runs of each step size, and whether any
    run of that step size ended early."""
    stats = [mean_and_error(r[key], r["status"] >= 0) for r in results]
    failed = np.array([bool(np.any(r["status"] < 0)) for r in results])
    return np.array([m for m, _ in stats]), np.array([e for _, e in stats]), failed


def draw(results: list[Result], s: Setting, path: Path) -> None:
    """(a) Test loss and (b) ``||beta||_1`` of the end point against the step size: GD dashed,
    SGD dash-dotted with its standard error over seeds (a band), ``||beta*||_1`` dotted; × where
    a seed diverged."""
    gd_etas, sgd_etas = np.array(s["gd_etas"]), np.array(s["sgd_etas"])
    gd, sgd = results[: gd_etas.size], results[gd_etas.size :]
    for r, e in zip(sgd, sgd_etas, strict=True):
        if np.any(r["status"] < 0):
            print(
                f"warning: {s.figure}: SGD at eta = {e:g} diverged on "
                f"{int(np.sum(r['status'] < 0))} of {r['status'].size} seeds (left out of the mean)",
                file=sys.stderr,
            )
    fig, axes = plt.subplots(2, 1, figsize=(style.SINGLE, 3.9), sharex=True,
                             constrained_layout=True)  # fmt: skip
    sgd_label = f"GD minibatch (SGD), B = {s['batch_size']}, {s['seeds']} seeds"
    lines = (
        (gd, gd_etas, style.algorithm_style("gd", "steps") | {"label": "GD steps (full batch)"}),
        (sgd, sgd_etas, style.algorithm_style("gd", "minibatch") | {"label": sgd_label}),
    )
    keys = (("test_loss", r"test loss $\|\beta-\beta^*\|^2/2$"), ("l1", r"$\|\beta\|_1$"))
    for ax, (key, ylabel) in zip(axes, keys, strict=True):
        for runs, etas, kwargs in lines:
            mean, error, failed = curve(runs, key)
            ax.plot(etas, mean, ms=3.5, **kwargs)
            if np.any(error > 0):
                ax.fill_between(etas, mean - error, mean + error, color=kwargs["color"],
                                alpha=0.2, lw=0)  # fmt: skip
            if np.any(failed):
                ax.plot(etas[failed], mean[failed], **STOPPED_MARK)
        ax.set_ylabel(ylabel)
        ax.set_xscale("log")
        ax.grid(alpha=0.3)
    teacher = float(gd[0]["teacher_l1"])
    axes[1].axhline(teacher, color=style.GREY, ls=":", lw=1.0)
    axes[1].annotate(r"$\|\beta^*\|_1$", (0.02, teacher), xycoords=("axes fraction", "data"),
                     va="bottom", color=style.GREY)  # fmt: skip
    axes[1].set_xlabel(r"step size $\eta$")
    axes[0].set_title(
        f"n = {s['n']}, d = {s['d']}, {s['sparsity']}-sparse, "
        rf"$\alpha = {show(s['alpha'])}$"
    )
    axes[0].legend(loc="upper left")
    style.panel_letters(axes)
    save(fig, path)


def check(s: Setting) -> str | None:
    """A batch size above n, or step sizes that are not positive."""
    if not 1 <= s["batch_size"] < s["n"]:
        return f"batch_size must be in [1, n) = [1, {s['n']}), got {s['batch_size']}"
    if min(s["gd_etas"] + s["sgd_etas"]) <= 0:
        return "the step sizes must be positive"
    return None


SGD_STEP_SIZE = Figure(
    "sgd_step_size",
    "test loss and l1 norm of the interpolator against the step size, GD and SGD",
    "Do large steps help SGD and hurt GD on sparse regression (Even et al. 2023)? The "
    "interpolator reached by full-batch GD and by minibatch SGD (batches of {batch_size}, "
    "drawn iid; mean ± standard error over {seeds} seeds as a band) on n = {n} Gaussian examples "
    "in d = {d} with a {sparsity}-sparse teacher β* (data seed {data_seed}), β = u ⊙ v from "
    "u(0) = α = {alpha}, v(0) = 0; each run lasts the time {t_train} (at least {min_steps} steps). "
    "(a) the population test loss ‖β − β*‖²/2, (b) ‖β‖₁ with ‖β*‖₁ dotted. × marks a step size at which a "
    "seed diverged (left out of the mean and band).",
    tasks,
    draw,
    params={
        "n": 40,
        "d": 100,
        "sparsity": 5,
        "data_seed": 0,
        "alpha": 0.3,
        "batch_size": 1,
        "seeds": 5,
        "gd_etas": (0.05, 0.1, 0.2, 0.4, 0.8, 1.4),
        "sgd_etas": (0.02, 0.05, 0.1, 0.15, 0.2),
        "t_train": 60.0,
        "min_steps": 1500,
    },
    quick={
        "n": 20,
        "d": 40,
        "sparsity": 3,
        "seeds": 2,
        "gd_etas": (0.1, 0.8),
        "sgd_etas": (0.02, 0.1),
        "t_train": 20.0,
        "min_steps": 200,
    },
    example={"alpha": 0.35, "batch_size": 2, "n": 24},
    check=check,
)


if __name__ == "__main__":
    figure_command(__spec__.name, SGD_STEP_SIZE)
