"""Figure 9 (``fig9_clocks_and_loss``): the two clocks (original t, rescaled tau) and the loss.

Training loss against original time t (GD and l2-SAM), the map tau -> log t of rescaled runs
(``log_t_original``), and the check that both clocks trace the same path (directions at
matched tau).

Setting: the single example mu = (1, ..., 5), depth L = 2, balanced init alpha, logistic loss.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.lines import Line2D
from scipy.interpolate import CubicSpline

from flows.sweep.registry import Result, Task

from .common import MU5, OKABE_ITO, Figure, Setting, coordinate_colors, figure_command, plt, save

ALPHAS9 = (0.2, 0.4, 1.0)
ALGOS9 = (("gd", None, "GD", "--"), ("l2-sam", 1.0, "ℓ2-SAM (ρ = 1)", "-"))
HORIZONS = (1.0, 1e2, 1e4, 1e6)  # original-clock runs, stitched for a log t axis
TAU_MAX = 25.0  # rescaled runs (log t = +inf from tau ~ 23)
TAU_MATCH = 1.5  # short rescaled runs compared with the original-clock runs
SHOWN9 = ("l2-sam", 0.4)


def _config9(quick: bool):
    """(alphas, horizons, n per horizon, tau_max, n rescaled, n matched)."""
    if quick:
        return (0.4,), (1.0, 1e2), 21, 6.0, 31, 31
    return ALPHAS9, HORIZONS, 101, TAU_MAX, 251, 301


def _tau_match(quick: bool) -> float:
    """Horizon of the short dense rescaled runs."""
    return TAU_MATCH if not quick else 1.0


def clocks_tasks(s: Setting) -> list[Task]:
    """Per (algorithm, alpha): original-clock runs to each horizon, one rescaled run with
    log t_original to tau = TAU_MAX, one short dense rescaled run (tau <= TAU_MATCH, also with
    log t_original) for the matched-tau comparison."""
    alphas, horizons, n_h, tau_max, n_r, n_m = _config9(s.quick)
    tasks = []
    for alg, rho, _, _ in ALGOS9:
        for a in alphas:
            base = {"mu": MU5, "algorithm": alg, "depth": 2, "alpha": a, "rho": rho, "rtol": 1e-8}
            for h in horizons:
                tasks.append(
                    Task("simulate", {**base, "clock": "original", "t_max": h, "n_points": n_h})
                )
            # log_t_original is an adaptive quadrature (~1-2.5 s a run): skipped in s.quick mode
            tasks.append(
                Task(
                    "simulate",
                    {**base, "t_max": tau_max, "n_points": n_r, "original_time": not s.quick},
                )
            )
            tasks.append(
                Task(
                    "simulate",
                    {
                        **base,
                        "t_max": _tau_match(s.quick),
                        "n_points": n_m,
                        "rtol": 1e-10,
                        "original_time": not s.quick,
                    },
                )
            )
    return tasks


def _direction(log_abs_beta: np.ndarray, sign_beta: np.ndarray) -> np.ndarray:
    top = np.max(log_abs_beta, axis=1, keepdims=True)
    v = np.where(sign_beta == 0, 0.0, sign_beta * np.exp(log_abs_beta - top))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def clock_checks(results: list[Result], quick: bool) -> dict:
    """Per (algorithm, alpha): stitched original-clock samples, the rescaled runs, the largest
    angle between directions at matched tau, the largest |log t| mismatch, the end loss."""
    alphas, horizons, *_ = _config9(quick)
    it = iter(results)
    out = {}
    for alg, _, _, _ in ALGOS9:
        for a in alphas:
            orig = [next(it) for _ in horizons]
            resc, match = next(it), next(it)
            # stitch: each horizon's samples beyond the previous horizon
            t, tau, lb, sb, loss = [], [], [], [], []
            prev = 0.0
            for r in orig:
                keep = r["t"] > prev
                t.append(r["t"][keep])
                tau.append(r["tau"][keep])
                loss.append(r["loss"][keep])
                lb.append(r["log_abs_beta"][keep])
                sb.append(r["sign_beta"][keep])
                prev = r["t"][-1]
            t, tau, loss = np.concatenate(t), np.concatenate(tau), np.concatenate(loss)
            lb, sb = np.concatenate(lb), np.concatenate(sb)
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
            lt = resc["log_t_original"]
            is_inf = np.isposinf(lt)
            first_inf = float(resc["tau"][np.argmax(is_inf)]) if np.any(is_inf) else np.nan
            mt, mlt = match["tau"][1:], match["log_t_original"][1:]
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


def draw_clocks(results: list[Result], s: Setting, path: Path) -> None:
    """Loss vs original t; tau -> log t; shares at matched tau (both clocks)."""
    alphas, *_ = _config9(s.quick)
    checks = clock_checks(results, s.quick)
    alpha_colors = dict(zip(alphas, (OKABE_ITO[6], OKABE_ITO[5], OKABE_ITO[3]), strict=False))
    fig, (ax, bx, cx) = plt.subplots(1, 3, figsize=(18, 5.6), constrained_layout=True)
    _draw_loss(ax, checks, alphas, alpha_colors)
    _draw_clock_map(bx, checks, alphas, alpha_colors)
    _draw_clock_zoom(bx, checks, alphas, alpha_colors, _tau_match(s.quick))
    _finish_clock_map(bx, checks, alphas)
    _draw_same_path(cx, checks, alphas)
    handles = [Line2D([], [], color="grey", ls="--", lw=2), Line2D([], [], color="grey", lw=2)]
    fig.legend(handles, ["GD", "ℓ2-SAM (ρ = 1)"], loc="outside lower center", ncol=2, fontsize=9)
    fig.suptitle(
        "Original time t vs rescaled time τ: μ = (1,…,5), L = 2, logistic loss", fontsize=11
    )
    save(fig, path)


def _runs9(alphas) -> list[tuple[str, str, str, float]]:
    """``(algorithm, label, line style, alpha)`` of every configuration, in task order."""
    return [(alg, label, ls, a) for alg, _, label, ls in ALGOS9 for a in alphas]


def _draw_loss(ax, checks: dict, alphas, alpha_colors: dict) -> None:
    """Panel (a): the loss against original time t, the rescaled runs' samples at t(tau) on it."""
    for alg, label, ls, a in _runs9(alphas):
        c = checks[alg, a]
        color = alpha_colors[a]
        ax.loglog(
            c["t"],
            c["loss"],
            color=color,
            ls=ls,
            lw=2,
            label=f"{label}, α = {a:g}: loss(t={c['t_end']:.0e}) = {c['loss_end']:.1e}",
        )
        r = c["rescaled"]
        ok = np.isfinite(r["log_t_original"]) & (r["log_t_original"] <= np.log(c["t_end"]))
        ok[0] = False
        ax.loglog(
            np.exp(r["log_t_original"][ok]),
            r["loss"][ok],
            ls="none",
            marker="o",
            ms=4,
            mfc="none",
            mec=color,
        )
    ax.set(
        xlabel="original time t (log)",
        ylabel="training loss L(θ) (log)",
        title='Loss against original time t\n(lines: clock="original"; ○: rescaled runs at '
        "t(τ) from log_t_original)",
        xlim=(1e-2, None),
    )
    ax.grid(alpha=0.3, which="major")
    ax.legend(fontsize=7.5, loc="lower left")


def _draw_clock_map(bx, checks: dict, alphas, alpha_colors: dict) -> None:
    """Panel (b): tau -> log t of the rescaled runs (lines, ▲ where log t becomes +inf) and the
    original-clock runs' (tau, log t) (circles)."""
    for alg, label, ls, a in _runs9(alphas):
        c = checks[alg, a]
        r = c["rescaled"]
        lt = r["log_t_original"]
        fin = np.isfinite(lt)
        bx.plot(
            r["tau"][fin][1:],
            lt[fin][1:],
            color=alpha_colors[a],
            ls=ls,
            lw=2,
            label=f"{label}, α = {a:g}",
        )
        if np.isfinite(c["first_inf_tau"]):
            bx.plot(c["first_inf_tau"], 1e100, marker="^", ms=9, color=alpha_colors[a], mec="black")
        _draw_original_clock_samples(bx, c, r["tau"][-1], 4, 3.5, alpha_colors[a])


def _draw_original_clock_samples(
    ax, check: dict, tau_end: float, every: int, size: float, color
) -> None:
    """Every ``every``-th sample ``(tau, log t)`` of the original-clock runs with
    ``0 < t`` and ``tau <= tau_end``, as open circles."""
    sel = (check["t"] > 0) & (check["tau"] <= tau_end)
    ax.plot(
        check["tau"][sel][::every],
        np.log(check["t"][sel])[::every],
        ls="none",
        marker="o",
        ms=size,
        mfc="none",
        mec=color,
    )


def _draw_clock_zoom(bx, checks: dict, alphas, alpha_colors: dict, tau_match: float) -> None:
    """Inset of panel (b): the dense short runs' tau -> log t for tau <= tau_match, with the
    largest |log t| mismatch against the original-clock runs."""
    ins = bx.inset_axes([0.56, 0.08, 0.42, 0.36])
    for alg, _, ls, a in _runs9(alphas):
        c = checks[alg, a]
        m = c["match"]
        ins.plot(m["tau"][1:], m["log_t_original"][1:], color=alpha_colors[a], ls=ls, lw=1.5)
        _draw_original_clock_samples(ins, c, m["tau"][-1], 3, 3, alpha_colors[a])
    dlogts = [checks[k]["dlogt"] for k in checks if np.isfinite(checks[k]["dlogt"])]
    worst = max(dlogts) if dlogts else np.nan
    ins.set(xlim=(0, tau_match), ylim=(-5, 16), ylabel="log t")
    ins.set_title(f"zoom, τ ≤ {tau_match:g}: max |Δ log t| = {worst:.1e}", fontsize=8)
    ins.tick_params(labelsize=7)
    ins.xaxis.label.set_size(8)
    ins.yaxis.label.set_size(8)
    ins.grid(alpha=0.3)


def _finish_clock_map(bx, checks: dict, alphas) -> None:
    """Panel (b)'s log t = +inf line, symlog axis, labels and legend."""
    bx.axhline(1e100, color="grey", ls=":", lw=1)
    bx.text(
        0.3,
        3e98,
        "log t = +∞ from here on (margin ≳ 10¹⁰⁰; ▲ = first τ with log t = +∞)",
        fontsize=8,
        color="dimgrey",
        va="top",
    )
    bx.set_yscale("symlog", linthresh=1.0)
    bx.set_yticks([0] + [10.0**k for k in range(10, 101, 10)])
    bx.set(
        xlabel="rescaled time τ",
        ylabel="log t_original (symlog)",
        ylim=(-5, 1e104),
        xlim=(0, checks[ALGOS9[0][0], alphas[0]]["rescaled"]["tau"][-1]),
        title="Clock map τ ↦ log t (lines: rescaled runs' log_t_original;\n"
        "○: original-clock runs' (τ, log t))",
    )
    bx.grid(alpha=0.3, which="major")
    bx.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0.0, 0.93))


def _draw_same_path(cx, checks: dict, alphas) -> None:
    """Panel (c): shares at matched tau for one configuration (SHOWN9) in both clocks, and the
    largest angle between the directions of every configuration."""
    alg_s, a_s = SHOWN9 if SHOWN9[1] in alphas else (SHOWN9[0], alphas[0])
    c = checks[alg_s, a_s]
    m = c["match"]
    colors = coordinate_colors(len(MU5))
    top = np.max(m["log_abs_beta"], axis=1, keepdims=True)
    shares_m = np.exp(m["log_abs_beta"] - top)
    shares_m /= shares_m.sum(axis=1, keepdims=True)
    sel = c["tau"] <= m["tau"][-1]
    top_o = np.max(c["log_abs_beta"][sel], axis=1, keepdims=True)
    shares_o = np.exp(c["log_abs_beta"][sel] - top_o)
    shares_o /= shares_o.sum(axis=1, keepdims=True)
    for j, col in enumerate(colors):
        cx.plot(m["tau"], shares_m[:, j], color=col, lw=2, label=f"j = {j + 1} (μ_j = {MU5[j]:g})")
        cx.plot(
            c["tau"][sel][::3], shares_o[::3, j], ls="none", marker="o", ms=4, mfc="none", mec=col
        )
    cx.text(
        0.02,
        0.98,
        "\n".join(_angle_lines(checks, alphas, m["tau"][-1])),
        transform=cx.transAxes,
        fontsize=7.5,
        va="top",
        bbox=dict(facecolor="white", alpha=0.85, edgecolor="lightgrey"),
    )
    cx.set(
        xlabel="rescaled time τ",
        ylabel="share |β_j| / ‖β‖₁",
        ylim=(0, 0.75),
        title=f"Same path in both clocks ({dict((a[0], a[2]) for a in ALGOS9)[alg_s]}, "
        f"α = {a_s:g}):\nlines rescaled run, ○ original-clock run at its τ",
    )
    cx.grid(alpha=0.3)
    cx.legend(fontsize=8, loc="lower right")


def _angle_lines(checks: dict, alphas, tau_end: float) -> list[str]:
    """The largest angle between the two clocks' directions, one line per configuration (up to
    the collapse where there is one)."""
    lines = [f"max angle between β directions at matched τ (τ ≤ {tau_end:g}):"]
    for alg, label, _, a in _runs9(alphas):
        ang = checks[alg, a]["angle"]
        col = checks[alg, a]["collapse_tau"]
        lines.append(
            f"  {label}, α = {a:g}: "
            + ("n/a" if np.isnan(ang) else f"{ang:.1e} rad")
            + (f" (τ < {col:.3f}: β collapses to 0 at τ = {col:.3f})" if np.isfinite(col) else "")
        )
    return lines


CLOCKS_AND_LOSS = Figure(
    "fig9_clocks_and_loss",
    "loss vs original time (GD, l2-SAM), tau -> log t map, same path in both clocks",
    "Do the original and the rescaled clock trace the same path, how does τ map to log t, and "
    "how fast does the loss fall in original time?",
    clocks_tasks,
    draw_clocks,
)


if __name__ == "__main__":
    figure_command(__spec__.name, CLOCKS_AND_LOSS)
