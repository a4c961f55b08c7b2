"""Figure ``sde_paths``: the SDE of minibatch SGD (:func:`flows.simulate_sde`, Li, Tai & E
2017) against minibatch SGD's own paths, mean and 95 % band of one coordinate of ``beta`` over
many seeds and paths, for two step sizes.

The data are those of ``tests/test_sde.py``: ``n`` Gaussian rows in ``d`` dimensions
(``default_rng(data_seed)``), targets ``X (1, 0, -1/2, 0, ...)``; GD at depth 2 from
``u(0) = v(0) = alpha`` (so ``beta >= 0``), batches of ``batch_size`` drawn iid.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flows.sweep.registry import Result, Task

from . import style
from .common import Figure, Setting, figure_command, plt, save, show, stopped_early
from .minibatch_sam import flow_arrays


def regression_rows(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``X`` (n, d) standard normal from ``default_rng(seed)`` and ``y = X w``, ``w`` =
    ``(1, 0, -1/2, 0, ...)``."""
    X = np.random.default_rng(seed).standard_normal((n, d))
    w = np.zeros(d)
    w[0], w[min(2, d - 1)] = 1.0, -0.5
    return X, X @ w


def tasks(s: Setting) -> list[Task]:
    """The flow, then per step size minibatch SGD (seeds) and its SDE (paths)."""
    X, y = regression_rows(s["n"], s["d"], s["data_seed"])
    base = {"X": X.tolist(), "y": y.tolist(), "task": "regression", "algorithm": "gd",
            "depth": 2, "alpha": s["alpha"]}  # fmt: skip
    out = [Task("simulate", base | {"t_max": s["t_max"], "n_points": 201, "rtol": 1e-10})]
    for eta in s["etas"]:
        steps = int(round(s["t_max"] / eta))
        out += [
            Task("minibatch-runs", base | {"hyperparameters": {}, "eta": float(eta),
                                           "steps": steps, "record_every": 1,
                                           "batch_size": s["batch_size"],
                                           "seeds": list(range(1, s["paths"] + 1))}),
            Task("sde-paths", base | {"hyperparameters": {}, "eta": float(eta),
                                      "batch_size": s["batch_size"], "t_max": s["t_max"],
                                      "paths": s["paths"], "seed": 1, "dt": float(eta) / 4,
                                      "n_points": steps + 1}),
        ]  # fmt: skip
    return out


def band(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean over the first axis and 1.96 standard errors."""
    mean = np.mean(values, axis=0)
    return mean, 1.96 * np.std(values, axis=0, ddof=1) / np.sqrt(values.shape[0])


def draw(results: list[Result], s: Setting, path: Path) -> None:
    """One panel per step size: the mean of ``beta_j`` over minibatch SGD's seeds
    (dash-dotted) and over the SDE's paths (dotted), each with its 95 % band (±1.96 standard
    errors), the flow solid; below, the difference of the two means with its band."""
    j = s["coordinate"] - 1
    etas = s["etas"]
    fig, axes = plt.subplots(2, len(etas), figsize=(style.DOUBLE, 3.8), sharex=True,
                             sharey="row", squeeze=False, constrained_layout=True)  # fmt: skip
    t_flow, beta_flow = flow_arrays(results[0])
    for col, eta in enumerate(etas):
        sgd, sde = results[1 + 2 * col], results[2 + 2 * col]
        for name, r in (("minibatch SGD", sgd), ("the SDE", sde)):
            if np.any(np.asarray(r["status"]) < 0):
                stopped_early({"status": np.min(r["status"])}, f"{name} at η = {eta:g}", s)
        top, bottom = axes[0, col], axes[1, col]
        top.plot(t_flow, beta_flow[:, j], **style.algorithm_style("gd") | {"marker": ""})
        means = []
        for r, dynamics, what in ((sgd, "minibatch", "seeds"), (sde, "sde", "paths")):
            kw = style.algorithm_style("gd", dynamics) | {"marker": ""}
            kw["label"] += f", {s['paths']} {what}"
            mean, half = band(r["beta"][:, :, j])
            means.append((mean, half))
            top.plot(r["t"], mean, **kw)
            top.fill_between(r["t"], mean - half, mean + half, color=kw["color"], alpha=0.2, lw=0)
        (m_sgd, h_sgd), (m_sde, h_sde) = means
        gap, gap_half = m_sgd - m_sde, np.hypot(h_sgd, h_sde)
        bottom.axhline(0.0, color=style.GREY, lw=0.8)
        bottom.plot(sgd["t"], gap, color=style.BLACK, lw=1.0)
        bottom.fill_between(sgd["t"], gap - gap_half, gap + gap_half, color=style.BLACK,
                            alpha=0.2, lw=0)  # fmt: skip
        top.set_title(f"η = {eta:g}, B = {s['batch_size']} of n = {s['n']}")
        bottom.set_xlabel("time t = kη")
        for ax in (top, bottom):
            ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel(rf"mean $\beta_{{{s['coordinate']}}}$ (95 % band)")
    axes[1, 0].set_ylabel(r"minibatch $-$ SDE")
    axes[0, 0].legend(loc="lower right", title=rf"$\alpha = {show(s['alpha'])}$, d = {s['d']}")
    style.panel_letters(axes, x=-0.1)
    save(fig, path)


def check(s: Setting) -> str | None:
    """A coordinate outside 1..d or a batch size outside 1..n."""
    if not 1 <= s["coordinate"] <= s["d"]:
        return f"coordinate must be in 1..d = 1..{s['d']}, got {s['coordinate']}"
    if not 1 <= s["batch_size"] <= s["n"]:
        return f"batch_size must be in 1..n = 1..{s['n']}, got {s['batch_size']}"
    return None


SDE_PATHS = Figure(
    "sde_paths",
    "mean and 95% band of beta_j: minibatch SGD's seeds against the SDE's paths",
    "Does the SDE of minibatch SGD (Li, Tai & E 2017; Euler–Maruyama, step η/4) follow SGD's "
    "paths? GD at depth 2 from α = {alpha} on n = {n} Gaussian regression examples in "
    "d = {d} (data seed {data_seed}), batches of {batch_size} drawn iid, step sizes {etas}: "
    "top, the mean of β_{coordinate} over {paths} SGD seeds (dash-dotted) and {paths} SDE "
    "paths (dotted) with ±1.96 standard errors, the flow solid; bottom, the difference of the "
    "means with its 95 % band (zero in grey).",
    tasks,
    draw,
    params={
        "n": 10,
        "d": 4,
        "data_seed": 21,
        "alpha": 0.3,
        "batch_size": 2,
        "etas": (0.2, 0.05),
        "paths": 400,
        "t_max": 5.0,
        "coordinate": 1,
    },
    quick={"paths": 20, "t_max": 1.0},
    example={"alpha": 0.35, "batch_size": 3, "etas": (0.15, 0.06)},
    check=check,
)


if __name__ == "__main__":
    figure_command(__spec__.name, SDE_PATHS)
