"""Figure 9: the two clocks (original t, rescaled tau) and the loss, as two figures.

``fig9_clocks_and_loss``: the training loss of GD and l2-SAM against original time t (runs in
the original clock, stitched over several horizons), with the rescaled runs' samples placed at
their t(tau). ``fig9_clock_map``: (a) the map tau -> log t of rescaled runs (the original time
they integrate alongside) against the original-clock runs' (tau, log t), (b) its start, dense,
(c) the shares of one configuration at matched tau in both clocks.

Setting (parameters): mu, depth L, balanced init alpha (several), l2-SAM's rho, logistic loss.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.lines import Line2D
from scipy.interpolate import CubicSpline

from flows.sweep.registry import Result, Task

from . import style
from .common import (
    MU5,
    STOPPED_MARK,
    Figure,
    Setting,
    coordinate_colors,
    figure_command,
    format_mu,
    plt,
    save,
    stopped_early,
    stopped_handle,
)

ALGORITHMS9 = ("gd", "l2-sam")


def _horizons(s: Setting) -> tuple[float, ...]:
    """The horizons of the original-clock runs (stitched for a log t axis)."""
    return s.horizons


def _resolution(s: Setting) -> tuple[int, int, int]:
    """Samples per original-clock run, per long rescaled run, per short dense rescaled run."""
    return (21, 31, 31) if s.quick else (101, 251, 301)


def clocks_tasks(s: Setting) -> list[Task]:
    """Per (algorithm, alpha): original-clock runs to each horizon, one rescaled run to tau_max
    and one short dense rescaled run to tau_match, both with the original time alongside
    (``original_time``, an adaptive quadrature of ~1-2.5 s a run: not under ``--quick``)."""
    n_h, n_r, n_m = _resolution(s)
    tasks = []
    for alg in ALGORITHMS9:
        rho = None if alg == "gd" else s.rho
        for a in s.alphas:
            base = {
                "mu": s.mu,
                "algorithm": alg,
                "depth": s.depth,
                "alpha": a,
                "rho": rho,
                "rtol": 1e-8,
            }
            for h in _horizons(s):
                tasks.append(
                    Task("simulate", {**base, "clock": "original", "t_max": h, "n_points": n_h})
                )
            tasks.append(
                Task(
                    "simulate",
                    {**base, "t_max": s.tau_max, "n_points": n_r, "original_time": not s.quick},
                )
            )
            tasks.append(
                Task(
                    "simulate",
                    {
                        **base,
                        "t_max": s.tau_match,
                        "n_points": n_m,
                        "rtol": 1e-10,
                        "original_time": not s.quick,
                    },
                )
            )
    return tasks


def _log_t(result: Result) -> np.ndarray:
    """A rescaled run's log t_original (NaN where it was not integrated)."""
    if "log_t_original" not in result:
        return np.full_like(result["tau"], np.nan, dtype=float)
    return np.asarray(result["log_t_original"], dtype=float)


def _direction(log_abs_beta: np.ndarray, sign_beta: np.ndarray) -> np.ndarray:
    """Unit vectors of ``sign * exp(log_abs_beta)``, row by row."""
    top = np.max(log_abs_beta, axis=1, keepdims=True)
    v = np.where(sign_beta == 0, 0.0, sign_beta * np.exp(log_abs_beta - top))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _stitch(runs: list[Result]) -> dict[str, np.ndarray]:
    """The original-clock runs to increasing horizons as one run: each horizon's samples
    beyond the previous horizon."""
    keys = ("t", "tau", "loss", "log_abs_beta", "sign_beta")
    parts: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    prev = 0.0
    for r in runs:
        keep = r["t"] > prev
        for k in keys:
            parts[k].append(r[k][keep])
        prev = float(r["t"][-1])
    return {k: np.concatenate(v) for k, v in parts.items()}


def clock_checks(results: list[Result], s: Setting) -> dict:
    """Per (algorithm, alpha): stitched original-clock samples, the rescaled runs, the largest
    angle between directions at matched tau, the largest |log t| mismatch, the end loss."""
    alphas, horizons = s.alphas, _horizons(s)
    it = iter(results)
    out = {}
    for alg in ALGORITHMS9:
        for a in alphas:
            orig = [next(it) for _ in horizons]
            resc, match = next(it), next(it)
            joined = _stitch(orig)
            t, tau, loss = joined["t"], joined["tau"], joined["loss"]
            lb, sb = joined["log_abs_beta"], joined["sign_beta"]
            # directions at matched tau: the dense short rescaled run, spline in tau (log|beta|)
            # (before a collapse only: beta = 0 has no direction)
            alive_m = np.all(match["sign_beta"] != 0, axis=1)
            n_alive = int(np.argmin(alive_m)) if not np.all(alive_m) else alive_m.size
            angle = np.nan
            alive = np.all(sb != 0, axis=1) & (tau <= match["tau"][max(n_alive - 1, 0)])
            if np.any(alive) and n_alive >= 4:
                spline = CubicSpline(
                    match["tau"][:n_alive], match["log_abs_beta"][:n_alive], axis=0
                )
                u = _direction(lb[alive], sb[alive])
                v = _direction(
                    spline(tau[alive]),
                    np.sign(match["sign_beta"][0])[None, :] * np.ones_like(lb[alive]),
                )
                # 2 arcsin(|u - v| / 2): accurate for tiny angles (arccos is not)
                angle = float(np.max(2 * np.arcsin(np.linalg.norm(u - v, axis=1) / 2)))
            # log t of the dense rescaled run (spline) against the original-clock runs'
            # (tau, log t), for tau from the first positive grid point to TAU_MATCH
            lt = _log_t(resc)
            is_inf = np.isposinf(lt)
            first_inf = float(resc["tau"][np.argmax(is_inf)]) if np.any(is_inf) else np.nan
            mt, mlt = match["tau"][1:], _log_t(match)[1:]
            sel = (t > 0) & (tau >= mt[0]) & (tau <= mt[-1])
            dlogt = np.nan
            if np.any(sel) and np.all(np.isfinite(mlt)):
                # log t - log tau is smooth in tau (t = tau / c(0) + O(tau^2)): spline that
                spline_t = CubicSpline(mt, mlt - np.log(mt))
                dlogt = float(
                    np.max(np.abs(spline_t(tau[sel]) + np.log(tau[sel]) - np.log(t[sel])))
                )
            out[alg, a] = {
                "t": t,
                "tau": tau,
                "loss": loss,
                "log_abs_beta": lb,
                "sign_beta": sb,
                "rescaled": resc,
                "match": match,
                "angle": angle,
                "first_inf_tau": first_inf,
                "dlogt": dlogt,
                "loss_end": float(loss[-1]),
                "t_end": float(t[-1]),
                "tau_end": float(tau[-1]),
                "collapse_tau": next(
                    (
                        float(et)
                        for ek, et in zip(
                            orig[-1]["event_kind"], orig[-1]["event_tau"], strict=False
                        )
                        if ek == "collapse"
                    ),
                    np.nan,
                ),
            }
    return out


def _configurations(s: Setting) -> list[tuple[str, float, tuple[float, ...]]]:
    """``(algorithm, alpha, colour)`` of every run, in task order."""
    n = len(s.alphas)
    return [
        (alg, a, style.shade(style.ALGORITHM_STYLES[alg].color, k, n))
        for alg in ALGORITHMS9
        for k, a in enumerate(s.alphas)
    ]


def _algorithm(alg: str, s: Setting) -> str:
    """``ℓ2-SAM, ρ = 1`` (``GD``)."""
    return style.label(alg) + ("" if alg == "gd" else f", ρ = {s.rho:g}")


def _name(alg: str, alpha: float, s: Setting) -> str:
    """``ℓ2-SAM, ρ = 1, α = 0.4``."""
    return f"{_algorithm(alg, s)}, α = {alpha:g}"


def _stopped(results: list[Result], s: Setting) -> dict:
    """Per (algorithm, alpha): whether one of its runs ended early (a warning on stderr)."""
    per = len(_horizons(s)) + 2
    out = {}
    for k, (alg, a, _) in enumerate(_configurations(s)):
        runs = results[k * per : (k + 1) * per]
        out[alg, a] = any([stopped_early(r, f"{alg}, alpha = {a:g}", s) for r in runs])
    return out


def _draw_loss(ax, checks: dict, stopped: dict, alg: str, s: Setting) -> None:
    """The loss against original time t of ``alg`` at every alpha (lines), the rescaled runs'
    samples at their t(tau) (hollow markers); × where a run ended early, the collapse named."""
    for a, color in [(a, c) for g, a, c in _configurations(s) if g == alg]:
        c = checks[alg, a]
        ax.loglog(c["t"], c["loss"], color=color, label=f"α = {a:g}")
        r = c["rescaled"]
        lt = _log_t(r)
        ok = np.isfinite(lt) & (lt <= np.log(c["t_end"]))
        ok[0] = False
        ax.loglog(
            np.exp(lt[ok]),
            r["loss"][ok],
            ls="none",
            marker="o",
            ms=3,
            mfc="none",
            mec=color,
            mew=0.7,
        )
        if stopped[alg, a]:
            ax.plot(c["t"][-1], c["loss"][-1], **STOPPED_MARK)
        if np.isfinite(c["collapse_tau"]):
            ax.annotate(f"collapse at τ = {c['collapse_tau']:.3g}", (c["t"][-1], c["loss"][-1]),
                        xytext=(-2, -4), textcoords="offset points", ha="right", va="top", color=color)  # fmt: skip
    ax.set(
        xlabel="original time t",
        title=_algorithm(alg, s),
        xlim=(1e-2, None),
    )
    ax.grid(alpha=0.3, which="major")
    handles, labels = ax.get_legend_handles_labels()
    handles.append(Line2D([], [], ls="none", marker="o", ms=3, mfc="none", mec=style.GREY))
    labels.append("rescaled run at t(τ)")
    ax.legend(handles, labels, loc="lower left")


def draw_loss(results: list[Result], s: Setting, path: Path) -> None:
    """The training loss against original time t: (a) GD, (b) l2-SAM, one shade per alpha."""
    checks = clock_checks(results, s)
    stopped = _stopped(results, s)
    fig, axes = plt.subplots(
        1, 2, figsize=(style.DOUBLE, 2.8), constrained_layout=True, sharey=True
    )
    for ax, alg in zip(axes, ALGORITHMS9, strict=True):
        _draw_loss(ax, checks, stopped, alg, s)
    axes[0].set_ylabel("training loss")
    _setting_note(fig, s, any(stopped.values()))
    style.panel_letters(axes)
    save(fig, path)


def _setting_note(fig, s: Setting, stopped: bool) -> None:
    """The setting (and what × means) as a legend-less line under the panels."""
    words = f"μ = {format_mu(s.mu)}, L = {s.depth}, logistic loss"
    if stopped:
        words += "; × run ended early"
    fig.legend([], [], loc="outside lower center", title=words)


def _draw_clock_map(ax, checks: dict, s: Setting) -> None:
    """(a) tau -> log t of the long rescaled runs (lines; ▲ at the first tau where log t is
    +inf, drawn on the dotted line at the top) and the original-clock runs' (tau, log t)."""
    top = 1e100
    for alg, a, color in _configurations(s):
        c = checks[alg, a]
        r = c["rescaled"]
        lt = _log_t(r)
        fin = np.isfinite(lt)
        ax.plot(r["tau"][fin][1:], lt[fin][1:], color=color, label=_name(alg, a, s))
        if np.isfinite(c["first_inf_tau"]):
            ax.plot(
                c["first_inf_tau"], top, ls="", marker="^", ms=5, color=color, mec="black", mew=0.5
            )
        _draw_original_clock_samples(ax, c, r["tau"][-1], 4, color)
    ax.axhline(top, color=style.GREY, ls=":", lw=0.8)
    ax.annotate("log t = +∞", (0.02, top), xycoords=("axes fraction", "data"),
                xytext=(0, -3), textcoords="offset points", va="top", color="0.3")  # fmt: skip
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_yticks([0, 1e25, 1e50, 1e75, 1e100])
    tau_end = max(checks[k]["rescaled"]["tau"][-1] for k in checks)
    ax.set(xlabel="rescaled time τ", ylabel="log t", ylim=(-5, 1e104), xlim=(0, tau_end),
           title="τ ↦ log t")  # fmt: skip
    ax.grid(alpha=0.3, which="major")


def _draw_original_clock_samples(ax, check: dict, tau_end: float, every: int, color) -> None:
    """Every ``every``-th sample ``(tau, log t)`` of the original-clock runs with ``0 < t`` and
    ``tau <= tau_end``, as hollow circles."""
    sel = (check["t"] > 0) & (check["tau"] <= tau_end)
    ax.plot(check["tau"][sel][::every], np.log(check["t"][sel])[::every], ls="none", marker="o", ms=3,
            mfc="none", mec=color, mew=0.7)  # fmt: skip


def _draw_clock_start(ax, checks: dict, s: Setting) -> None:
    """(b) The dense short runs' tau -> log t for tau <= tau_match over the original-clock
    runs' samples."""
    for alg, a, color in _configurations(s):
        c = checks[alg, a]
        m = c["match"]
        ax.plot(m["tau"][1:], _log_t(m)[1:], color=color)
        _draw_original_clock_samples(ax, c, m["tau"][-1], 3, color)
    ax.set(xlim=(0, s.tau_match), ylim=(-5, 16), xlabel="rescaled time τ", ylabel="log t",
           title=f"τ ≤ {s.tau_match:g}")  # fmt: skip
    ax.grid(alpha=0.3, which="major")


def _draw_same_path(ax, checks: dict, s: Setting) -> None:
    """(c) The shares of the shown configuration at matched tau: the rescaled run (lines) and
    the original-clock runs at their tau (hollow markers)."""
    a = s.shown_alpha if s.shown_alpha in s.alphas else s.alphas[0]
    c = checks["l2-sam", a]
    m = c["match"]
    top = np.max(m["log_abs_beta"], axis=1, keepdims=True)
    shares_m = np.exp(m["log_abs_beta"] - top)
    shares_m /= shares_m.sum(axis=1, keepdims=True)
    sel = c["tau"] <= m["tau"][-1]
    top_o = np.max(c["log_abs_beta"][sel], axis=1, keepdims=True)
    shares_o = np.exp(c["log_abs_beta"][sel] - top_o)
    shares_o /= shares_o.sum(axis=1, keepdims=True)
    for j, col in enumerate(coordinate_colors(len(s.mu))):
        ax.plot(m["tau"], shares_m[:, j], color=col, label=f"$\\mu_{{{j + 1}}}$ = {s.mu[j]:g}")
        ax.plot(
            c["tau"][sel][::3],
            shares_o[::3, j],
            ls="none",
            marker="o",
            ms=3,
            mfc="none",
            mec=col,
            mew=0.7,
        )
    ax.set(xlabel="rescaled time τ", ylabel=r"share $|\beta_j| / \|\beta\|_1$",
           title=_name("l2-sam", a, s))  # fmt: skip
    ax.set_ylim(0, 1.6 * np.nanmax(shares_m))
    ax.grid(alpha=0.3, which="major")
    ax.legend(loc="upper left", ncol=2, columnspacing=0.8, handlelength=1.2)


def draw_clock_map(results: list[Result], s: Setting, path: Path) -> None:
    """(a) tau -> log t; (b) its start; (c) one configuration's shares in both clocks. Lines:
    rescaled runs; hollow markers: original-clock runs at their tau."""
    checks = clock_checks(results, s)
    stopped = _stopped(results, s)
    fig, axes = plt.subplots(1, 3, figsize=(style.DOUBLE, 3.0), constrained_layout=True)
    _draw_clock_map(axes[0], checks, s)
    _draw_clock_start(axes[1], checks, s)
    _draw_same_path(axes[2], checks, s)
    handles, labels = axes[0].get_legend_handles_labels()
    handles += [
        Line2D([], [], ls="none", marker="o", ms=3, mfc="none", mec=style.GREY),
        Line2D([], [], ls="none", marker="^", ms=5, color=style.GREY, mec="black", mew=0.5),
    ]
    labels += ["original-clock run", "first τ with log t = +∞"]
    if any(stopped.values()):
        handles.append(stopped_handle())
        labels.append("× run ended early")
    fig.legend(handles, labels, loc="outside lower center", ncol=4,
               title=f"μ = {format_mu(s.mu)}, L = {s.depth}, logistic loss")  # fmt: skip
    style.panel_letters(axes)
    save(fig, path)


def _check(s: Setting) -> str | None:
    """Increasing horizons; the matched runs shorter than the long ones."""
    if list(s.horizons) != sorted(s.horizons):
        return f"horizons must increase, got {s.horizons}"
    if not 0 < s.tau_match <= s.tau_max:
        return f"need 0 < tau_match <= tau_max, got {s.tau_match:g}, {s.tau_max:g}"
    return None


PARAMS9 = {
    "mu": MU5,
    "depth": 2,
    "alphas": (0.2, 0.4, 1.0),
    "rho": 1.0,
    "horizons": (1.0, 1e2, 1e4, 1e6),
    "tau_max": 25.0,
    "tau_match": 1.5,
    "shown_alpha": 0.4,
}
QUICK9 = {"alphas": (0.4,), "horizons": (1.0, 1e2), "tau_max": 6.0, "tau_match": 1.0}

CLOCKS_AND_LOSS = Figure(
    "fig9_clocks_and_loss",
    "loss vs original time t of GD and l2-SAM for several alpha",
    "The training loss of (a) GD and (b) ℓ2-SAM (ρ = {rho}) against original time t on "
    "μ = {mu}, L = {depth}, from α = {alphas} (lighter: larger α): runs in the original clock "
    "to t = {horizons}, stitched; hollow markers: the rescaled runs' samples at their t(τ). How "
    "fast do GD and ℓ2-SAM lower the loss in original time?",
    clocks_tasks,
    draw_loss,
    params=PARAMS9,
    quick=QUICK9,
    example={"alphas": (0.3,), "rho": 0.8, "mu": (1.0, 2.0, 3.5), "shown_alpha": 0.3},
    check=_check,
)

CLOCK_MAP = Figure(
    "fig9_clock_map",
    "tau -> log t of rescaled runs against original-clock runs; one path in both clocks",
    "The runs of figure 9 in both clocks: (a) the original time log t that rescaled runs "
    "integrate alongside, to τ = {tau_max} (lines; ▲: the first τ where t leaves float64), "
    "and the original-clock runs' (τ, log t) (hollow markers); (b) the same for τ ≤ "
    "{tau_match}, dense; (c) the shares of ℓ2-SAM from α = {shown_alpha} at matched τ, the "
    "rescaled run (lines) and the original-clock runs (markers). Do the two clocks trace the "
    "same path, with log t growing like the margin?",
    clocks_tasks,
    draw_clock_map,
    params=PARAMS9,
    quick=QUICK9,
    example={"alphas": (0.3,), "rho": 0.8, "mu": (1.0, 2.0, 3.5), "shown_alpha": 0.3},
    check=_check,
)


if __name__ == "__main__":
    figure_command(__spec__.name, CLOCKS_AND_LOSS, CLOCK_MAP)
