"""Figure ``minibatch_sam``: does minibatch noise change l2-SAM's minor-first order or its three
regimes of alpha? Minibatch l2-SAM and its SDE (:func:`flows.simulate_sde`) beside the flow.

The paper's single example ``mu`` cannot be minibatched: the data are ``n`` rows
``x_i = mu * (1 + noise * xi_i)`` (``xi_i ~ N(0, I)``, coordinate by coordinate), all labelled
+1, classified with the logistic loss, at depth 2 from ``u(0) = v(0) = alpha``. Each panel is
one ``alpha / rho`` (the regimes depend on that ratio alone): collapse, sequential
amplification, major from the start. The shares ``|beta_j| / ||beta||_1`` are drawn only where
``||beta||_1`` is at least 1 % of its start (after a collapse they are undefined).

The task kinds :func:`run_minibatch` (seeds of :func:`flows.iterate`) and :func:`run_sde`
(paths of :func:`flows.simulate_sde`) serve :mod:`figures.sde_paths` as well.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flows import Dataset, iterate, simulate_sde
from flows.sweep.registry import Result, Task, register

from . import style
from .common import (
    MU5,
    Figure,
    Setting,
    coordinate_colors,
    figure_command,
    plt,
    save,
    show,
    stopped_early,
)


def dataset(params: dict) -> Dataset:
    """The task's data (``X``, ``y``, ``task``)."""
    return Dataset(np.array(params["X"]), np.array(params["y"]), task=params["task"])


def run_minibatch(params: dict) -> Result:
    """Minibatch ``algorithm`` on every seed: ``t`` (K,), ``beta`` (seeds, K, d), ``loss``
    (seeds, K), ``status`` (seeds,); a run that stops early is NaN from there."""
    data = dataset(params)
    runs = [
        iterate(data, params["algorithm"], params["depth"], params["alpha"], eta=params["eta"],
                steps=params["steps"], record_every=params["record_every"],
                batch_size=params["batch_size"], seed=seed, **params["hyperparameters"])
        for seed in params["seeds"]
    ]  # fmt: skip
    longest = max(runs, key=lambda r: r.t.size)
    beta = np.full((len(runs), longest.t.size, data.d), np.nan)
    loss = np.full((len(runs), longest.t.size), np.nan)
    for k, run in enumerate(runs):
        beta[k, : run.t.size], loss[k, : run.t.size] = run.beta, run.loss
    return {"t": longest.t, "beta": beta, "loss": loss,
            "status": np.array([r.status for r in runs])}  # fmt: skip


def minibatch_cost(params: dict) -> float:
    """About 40 us a step and seed."""
    return 4e-5 * params["steps"] * len(params["seeds"])


def run_sde(params: dict) -> Result:
    """Paths of :func:`flows.simulate_sde`: ``t`` (K,), ``beta`` (paths, K, d), ``loss``
    (paths, K), ``status``."""
    out = simulate_sde(dataset(params), params["algorithm"], params["depth"], params["alpha"],
                       eta=params["eta"], batch_size=params["batch_size"], t_max=params["t_max"],
                       paths=params["paths"], seed=params["seed"], dt=params["dt"],
                       n_points=params["n_points"], **params["hyperparameters"])  # fmt: skip
    return {"t": out.t, "beta": out.beta, "loss": out.loss, "status": np.array(out.status)}


def sde_cost(params: dict) -> float:
    """About 25 us a step and path."""
    return 2.5e-5 * params["t_max"] / params["dt"] * params["paths"]


register("minibatch-runs", run_minibatch, minibatch_cost, ("t", "beta", "loss", "status"))
register("sde-paths", run_sde, sde_cost, ("t", "beta", "loss", "status"))


def noisy_rows(mu, n: int, noise: float, seed: int) -> np.ndarray:
    """``n`` rows ``mu * (1 + noise * xi)``, ``xi`` standard normal from ``default_rng(seed)``."""
    mu = np.asarray(mu, dtype=float)
    return mu * (1.0 + noise * np.random.default_rng(seed).standard_normal((n, mu.size)))


def common_params(s: Setting, ratio: float) -> dict:
    """Data, algorithm and initialisation of the runs at ``alpha / rho = ratio``."""
    X = noisy_rows(s.mu, s["n"], s["noise"], s["data_seed"])
    return {
        "X": X.tolist(),
        "y": [1.0] * s["n"],
        "task": "classification",
        "algorithm": "l2-sam",
        "depth": 2,
        "alpha": float(ratio * s["rho"]),
    }


def tasks(s: Setting) -> list[Task]:
    """Per ``alpha / rho``: the flow, full-batch steps, minibatch steps (seeds), the SDE."""
    out = []
    steps = int(round(s["t_max"] / s["eta"]))
    every = max(steps // s["samples"], 1)
    for ratio in s["ratios"]:
        base = common_params(s, ratio)
        rho = {"rho": s["rho"]}
        flow = {k: base[k] for k in ("X", "y", "task", "algorithm", "depth", "alpha")}
        out += [
            Task("simulate", flow | rho | {"clock": "original", "t_max": s["t_max"],
                                           "n_points": s["samples"] + 1}),
            Task("minibatch-runs", base | {"hyperparameters": rho, "eta": s["eta"],
                                           "steps": steps, "record_every": every,
                                           "batch_size": s["n"], "seeds": [0]}),
            Task("minibatch-runs", base | {"hyperparameters": rho, "eta": s["eta"],
                                           "steps": steps, "record_every": every,
                                           "batch_size": s["batch_size"],
                                           "seeds": list(range(1, s["seeds"] + 1))}),
            Task("sde-paths", base | {"hyperparameters": rho, "eta": s["eta"],
                                      "batch_size": s["batch_size"], "t_max": s["t_max"],
                                      "paths": s["seeds"], "seed": 1, "dt": s["eta"] / 4,
                                      "n_points": s["samples"] + 1}),
        ]  # fmt: skip
    return out


def shares(beta: np.ndarray, start: float) -> np.ndarray:
    """``|beta_j| / ||beta||_1`` over the last axis, NaN where ``||beta||_1 < start / 100``."""
    size = np.sum(np.abs(beta), axis=-1, keepdims=True)
    with np.errstate(all="ignore"):
        return np.where(size >= start / 100.0, np.abs(beta) / size, np.nan)


def mean_where_defined(values: np.ndarray) -> np.ndarray:
    """The mean over the runs (axis 0) of the entries that are not NaN; NaN where none is
    (early times, where every run's shares are undefined)."""
    count = np.sum(~np.isnan(values), axis=0)
    with np.errstate(invalid="ignore"):
        return np.where(count > 0, np.nansum(values, axis=0) / count, np.nan)


def leader_order(t: np.ndarray, share: np.ndarray, after: float) -> tuple[int, ...]:
    """The coordinates (1-based) in the order they first lead (largest share) at times
    ``>= after``; () where the shares are undefined throughout."""
    keep = (t >= after) & np.all(np.isfinite(share), axis=-1)
    order: list[int] = []
    for j in np.argmax(share[keep], axis=-1):
        if int(j) + 1 not in order:
            order.append(int(j) + 1)
    return tuple(order)


def describe(order: tuple[int, ...]) -> str:
    """``2→3→4→5``, or ``β → 0`` for no leader."""
    return "→".join(map(str, order)) if order else "β → 0"


def regime(beta: np.ndarray, start: float, d: int) -> str:
    """The flow's regime from its path ``beta`` (K, d): collapse where ``||beta||_1`` falls
    below 1 % of its start, major from the start where coordinate ``d`` leads from the second
    sample on, else sequential amplification."""
    size = np.sum(np.abs(beta), axis=-1)
    if np.min(size) < start / 100.0:
        return "collapse"
    if np.all(np.argmax(np.abs(beta[1:]), axis=-1) == d - 1):
        return "major from the start"
    return "sequential"


def flow_arrays(result: Result) -> tuple[np.ndarray, np.ndarray]:
    """``t`` and ``beta`` (K, d) of a ``simulate`` result (original clock)."""
    with np.errstate(under="ignore"):
        beta = result["sign_beta"] * np.exp(result["log_abs_beta"])
    return result["t"], beta


def draw(results: list[Result], s: Setting, path: Path) -> None:
    """Shares against t (top row) and ``||beta||_1`` (bottom row), one column per
    ``alpha / rho``: the flow solid, full-batch steps dashed (bottom row only), the mean over
    seeds of minibatch SAM dash-dotted, the mean over paths of the SDE dotted."""
    d = len(s.mu)
    colors = coordinate_colors(d)
    ratios = s["ratios"]
    fig, axes = plt.subplots(2, len(ratios), figsize=(style.DOUBLE, 4.4), sharex=True,
                             squeeze=False, constrained_layout=True)  # fmt: skip
    after = 10 * s["eta"]
    for col, ratio in enumerate(ratios):
        flow, steps, mini, sde = results[4 * col : 4 * col + 4]
        top, bottom = axes[0, col], axes[1, col]
        start = d * (ratio * s["rho"]) ** 2
        t_flow, beta_flow = flow_arrays(flow)
        what = f"α/ρ = {ratio:g}"
        for name, r in (("the flow", flow), ("minibatch SAM", mini), ("the SDE", sde),
                        ("full-batch steps", steps)):  # fmt: skip
            if np.any(np.asarray(r["status"]) < 0):
                stopped_early({"status": np.min(r["status"])}, f"{name} at {what}", s)
        runs = (
            (t_flow, beta_flow[None], "flow"),
            (steps["t"], steps["beta"], "steps"),
            (mini["t"], mini["beta"], "minibatch"),
            (sde["t"], sde["beta"], "sde"),
        )
        for t, beta, dynamics in runs:
            kw = style.algorithm_style("l2-sam", dynamics) | {"marker": ""}
            size = np.sum(np.abs(beta), axis=-1)
            bottom.plot(t[1:], np.nanmean(size, axis=0)[1:], **kw)
            if size.shape[0] > 1:
                low, high = np.nanquantile(size, [0.1, 0.9], axis=0)
                bottom.fill_between(t[1:], low[1:], high[1:], color=kw["color"], alpha=0.15,
                                    lw=0)  # fmt: skip
            if dynamics == "steps":
                continue
            mean_share = mean_where_defined(shares(beta, start))
            for j in range(d):
                top.plot(t[1:], mean_share[1:, j], color=colors[j], ls=kw["ls"], lw=1.0)
        reference = leader_order(t_flow, shares(beta_flow, start), after)
        same_mini = sum(leader_order(mini["t"], shares(b, start), after) == reference
                        for b in mini["beta"])  # fmt: skip
        same_sde = sum(leader_order(sde["t"], shares(b, start), after) == reference
                       for b in sde["beta"])  # fmt: skip
        top.set_title(f"{regime(beta_flow, start, d)}, {what}\n"
                      f"flow's leaders {describe(reference)}\nsame: "
                      f"minibatch {same_mini}/{len(mini['beta'])}, "
                      f"SDE {same_sde}/{len(sde['beta'])}", fontsize=7)  # fmt: skip
        top.set_ylim(-0.02, 1.02)
        bottom.set_yscale("log")
        bottom.set_xlabel("time t")
        for ax in (top, bottom):
            ax.set_xscale("log")
            ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel(r"share $|\beta_j|/\|\beta\|_1$")
    axes[1, 0].set_ylabel(r"$\|\beta\|_1$")
    coordinates = [plt.Line2D([], [], color=c, lw=1.5) for c in colors]
    names = [f"j = {j + 1} (μ = {m:g})" for j, m in enumerate(s.mu)]
    dynamics = [
        plt.Line2D([], [], **style.algorithm_style("l2-sam", k) | {"marker": ""})
        for k in ("flow", "steps", "minibatch", "sde")
    ]
    words = [
        style.label("l2-sam") + f" flow, ρ = {show(s['rho'])}",
        style.label("l2-sam") + f" steps (full batch, η = {show(s['eta'])})",
        style.label("l2-sam") + f" minibatch, B = {s['batch_size']}, {s['seeds']} seeds",
        style.label("l2-sam") + f" SDE, {s['seeds']} paths",
    ]
    fig.legend(coordinates + dynamics, names + words, loc="outside lower center", ncols=3)
    style.panel_letters(axes, x=-0.12)
    save(fig, path)


MINIBATCH_SAM = Figure(
    "minibatch_sam",
    "minibatch l2-SAM and its SDE beside the flow: shares and norm against t, three regimes",
    "Does minibatch noise change ℓ2-SAM's minor-first order or its three regimes of α? "
    "n = {n} examples x_i = μ ⊙ (1 + {noise} ξ_i), μ = {mu}, ξ_i standard normal, all "
    "labelled +1 (logistic loss), depth 2, ρ = {rho}; one column per α/ρ in {ratios} (collapse, "
    "sequential amplification, major from the start). Top: the shares |β_j|/‖β‖₁ (drawn where "
    "‖β‖₁ is at least 1 % of its start), bottom: ‖β‖₁ (band: 10–90 % over seeds), against the "
    "original time t; the flow solid, full-batch steps of η = {eta} dashed, minibatch steps "
    "(batches of {batch_size} drawn iid, mean over {seeds} seeds) dash-dotted, the SDE of "
    "minibatch SAM (mean over {seeds} paths, Euler–Maruyama step η/4) dotted. The titles count "
    "the runs whose coordinates first lead in the flow's order (from t = 10η).",
    tasks,
    draw,
    params={
        "mu": MU5,
        "n": 10,
        "noise": 0.2,
        "data_seed": 0,
        "rho": 0.01,
        "ratios": (0.3, 0.45, 1.5),
        "eta": 0.02,
        "batch_size": 2,
        "seeds": 16,
        "t_max": 5.0,
        "samples": 250,
    },
    quick={"seeds": 3, "t_max": 1.0, "samples": 25, "ratios": (0.3, 1.5)},
    example={"rho": 0.02, "batch_size": 3, "ratios": (0.35, 1.6)},
)


if __name__ == "__main__":
    figure_command(__spec__.name, MINIBATCH_SAM)
