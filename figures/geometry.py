"""Figures 1, 6 and 7: where the direction of beta goes, against the max-margin references.

* ``fig1_depth_contrast`` — the single example ``mu = (1, 2)``, ``alpha = (1.5, 0.8)``,
  ``rho = 1``: paths of beta in the plane for GD, l_inf-SAM and l2-SAM at L = 1 and L = 2,
  with the l1 (``e_2``) and l2 (``mu/|mu|``) max-margin rays. Thm 3.1 (L = 1: all three go to
  the l2 max-margin direction) against Cor 3.5 (L = 2: l_inf-SAM goes to ``e_1`` because
  ``alpha_2 < rho``, while GD and l2-SAM go to ``e_2``).
* ``fig6_maxmargin_angles`` — seeded separable data (n = 12, d = 3, random teacher with a
  margin): angle between ``beta(tau)/|beta|`` and the l1 / l2 max-margin directions against
  the rescaled time, GD / l2-SAM / l_inf-SAM at L = 1 and L = 2.
* ``fig7_gaussian_blobs`` — two Gaussian blobs with means ``+-(1, 2)``: the data with the final
  directions, the angle of beta in the plane against tau, and the training loss.

Clock: the rescaled one (SPEC §3); for n > 1 the engine divides by
``c = (1/n) sum_i |l'(m_i(theta + eps))|``.

Fallback integrator (task kind ``'heun_flow'``)
-----------------------------------------------
On multi-sample data the l_inf-SAM field ``-grad L(theta + rho sign(grad L(theta)))`` also jumps
on the surfaces ``d L / d w_j = 0`` with ``w_j != 0`` (where ``G_j(theta)`` changes sign), not
only at ``w_j = 0``. :func:`flows.simulate` locates only the second kind; when the flow reaches a
Filippov sliding mode on the first kind, DOP853 shrinks its step without end and the run
stalls. Minimal reproducer (t_max = 3 takes 0.2 s; t_max = 5 does not finish in 60 s)::

    simulate(Dataset(np.array([[1.0, 2.0], [-0.3, 1.5]]), np.array([1.0, 1.0])), "linf-sam",
             depth=2, alpha=np.array([1.5, 0.8]), rho=1.0, t_max=5.0, original_time=False)

(``w_2`` slides at 0 from tau = 1.009; then ``beta_1 = w_1^2`` climbs to 1.4955, the minimiser of
the loss along ``e_1``, where ``G_1(theta)`` changes sign: an attracting sliding surface.)
For the l_inf-SAM runs at L = 2 on multi-sample data this module therefore uses
:func:`heun_flow`: an explicit Heun scheme with an error-controlled step bounded below by
``h_min``; at a discontinuity the step sits at ``h_min`` and the iterate chatters
across the surface with an ``O(h_min)`` amplitude (a standard approximation of the Filippov
solution). It evaluates the engine's own field (:func:`flows.field.rescaled_velocity`), in
float64 (fine here: ``|beta| < 1e4``). Checked against :func:`flows.simulate` where both run
(GD and l_inf-SAM with rho = 0.02 on the fig6 data, L = 2, tau = 8: angles agree to 1e-3 deg).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.maxmargin import max_margin
from flows.algorithms import get_algorithm, resolve_hyperparameters
from flows.cache import Result, Task, dataset_from, register
from flows.clocks import get_clock
from flows.data import is_separable
from flows.field import Problem, rescaled_velocity
from flows.initialization import initialization
from flows.model import LOSSES
from flows.signedlog import SignedLog

from .common import OKABE_ITO, Figure, plt, save

ALGORITHMS = ("gd", "l2-sam", "linf-sam")
NAMES = {"gd": "GD", "l2-sam": "ℓ2-SAM", "linf-sam": "ℓ∞-SAM"}
COLORS = {"gd": OKABE_ITO[0], "l2-sam": OKABE_ITO[5], "linf-sam": OKABE_ITO[6]}
REF_COLORS = {1: OKABE_ITO[3], 2: OKABE_ITO[1]}  # l1 max-margin green, l2 orange

# --------------------------------------------------------------------------- fallback flow


def heun_flow(params: dict) -> Result:
    """Rescaled-clock flow by an explicit Heun scheme with a step floor ``h_min`` (module doc).

    Parameters (a Task dict): ``X``/``y`` or ``mu``; ``algorithm``, ``depth``, ``alpha``,
    ``rho``, ``t_max``, ``n_points`` as for :func:`flows.simulate`; ``rtol`` (default 1e-4),
    ``h_min`` (1e-3), ``h_max`` (0.05). Returns the keys of a ``'simulate'`` result plus
    ``nfev`` and ``floor_steps`` (steps accepted at ``h_min`` with the error test failed: the
    chattering count).
    """
    data, rest = dataset_from(params)
    algorithm = rest["algorithm"]
    depth = int(rest["depth"])
    rtol = float(rest.get("rtol", 1e-4))
    h_min, h_max = float(rest.get("h_min", 1e-3)), float(rest.get("h_max", 0.05))
    t_max, n_points = float(rest["t_max"]), int(rest["n_points"])
    hp = resolve_hyperparameters(algorithm, {"rho": rest.get("rho")})
    init = initialization(np.asarray(rest.get("alpha", 1.0), dtype=float), depth, data.d)
    problem = Problem(data, get_algorithm(algorithm), hp, LOSSES["logistic"],
                      init.multiplicity, get_clock("rescaled"), 1.0)

    def field(theta: np.ndarray) -> np.ndarray:
        return rescaled_velocity(SignedLog.from_float(theta), problem).dtheta.to_float()

    grid = np.linspace(0.0, t_max, n_points)
    states = np.empty((n_points,) + init.groups.shape)
    theta = init.groups.astype(float).copy()
    states[0] = theta
    tau, h, k, nfev, floor_steps = 0.0, h_min, 1, 1, 0
    f0 = field(theta)
    status, message = 0, "reached t_max"
    while k < n_points:
        h = min(h, grid[k] - tau) if grid[k] - tau > 1e-14 else h
        euler = theta + h * f0
        f1 = field(euler)
        heun = theta + 0.5 * h * (f0 + f1)
        nfev += 1
        scale = rtol * (0.5 * (np.abs(theta) + np.abs(heun)) + 1e-3)
        err = float(np.max(np.abs(heun - euler) / scale))
        if not np.all(np.isfinite(heun)):
            status, message = -1, f"non-finite state at tau={tau:.6g}"
            break
        if err <= 1.0 or h <= h_min * (1 + 1e-9):
            floor_steps += err > 1.0
            previous, tau_prev = theta, tau
            theta, tau = heun, tau + h
            f0 = field(theta)
            nfev += 1
            while k < n_points and grid[k] <= tau + 1e-12:
                w = (grid[k] - tau_prev) / (tau - tau_prev)
                states[k] = (1 - w) * previous + w * theta
                k += 1
            h *= min(2.0, max(0.2, 0.9 / np.sqrt(max(err, 1e-12))))
        else:
            h *= max(0.2, 0.9 / np.sqrt(err))
        h = min(max(h, h_min), h_max)
    states = states[:k]
    grid = grid[:k]
    beta = np.prod(states ** init.multiplicity[None, :, None], axis=1)
    with np.errstate(divide="ignore"):
        log_abs_beta = np.log(np.abs(beta))
    z = data.signed_features
    loss = np.mean(np.logaddexp(0.0, -(beta @ z.T)), axis=1)
    return {"t": grid, "tau": grid.copy(), "log_t_original": np.full(grid.shape, np.nan),
            "loss": loss, "log_abs_beta": log_abs_beta, "sign_beta": np.sign(beta),
            "status": np.array(status), "message": np.array(message),
            "event_tau": np.zeros(0), "event_kind": np.zeros(0, dtype=str),
            "event_j": np.zeros(0, dtype=int), "nfev": np.array(nfev),
            "floor_steps": np.array(floor_steps)}


def heun_flow_cost(params: dict) -> float:
    """Rough seconds: ~1e-4 s a step at the floor ``h_min``, more with more examples."""
    steps = float(params["t_max"]) / float(params.get("h_min", 1e-3))
    return 1e-4 * steps * (1.0 + len(params.get("y", ())) / 20.0)


register("heun_flow", heun_flow, cost=heun_flow_cost)

# --------------------------------------------------------------------------- data sets


def teacher_data(seed: int = 90, n: int = 12, d: int = 3,
                 margin: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """Separable data from a random unit teacher ``w``: ``x ~ N(0, I)`` kept when
    ``|<w, x>| >= margin``, ``y = sign <w, x>``.

    Columns are then sign-flipped so that the l1 max-margin solution is ``>= 0``: a balanced
    positive initialization keeps ``beta = a^2 >= 0`` at L = 2, so only then can GD reach the
    l1 max-margin direction (flipping a column is a symmetry of the whole problem).
    Seed 90 was picked (among 0..199) for a large angle, 30 deg, between the l1 and l2
    max-margin directions, so that the two references are told apart at a glance.
    """
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    w /= np.linalg.norm(w)
    rows = []
    while len(rows) < n:
        x = rng.normal(size=d)
        if abs(x @ w) >= margin:
            rows.append(x)
    X = np.array(rows)
    y = np.sign(X @ w)
    flips = np.where(max_margin(X, y, 1).beta < 0, -1.0, 1.0)
    return X * flips, y


def gaussian_blobs(seed: int = 5, n: int = 40, std: float = 0.6) -> tuple[np.ndarray, np.ndarray]:
    """Two blobs: ``x_i = y_i (1, 2) + std N(0, I)``, labels alternating +1, -1; redrawn (same
    generator) until separable through the origin. Seed 5 (first draw separable) gives
    l1 max-margin ``e_2`` and an l2 max-margin 16 deg away from it."""
    rng = np.random.default_rng(seed)
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    while True:
        X = y[:, None] * np.array([1.0, 2.0]) + std * rng.normal(size=(n, 2))
        if is_separable(X, y):
            return X, y


# --------------------------------------------------------------------------- helpers


def directions(result: Result) -> np.ndarray:
    """``beta / |beta|_2`` per sample (T, d), in log space (0 where beta = 0)."""
    lb, sb = result["log_abs_beta"], result["sign_beta"]
    top = np.max(lb, axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    scaled = np.where(sb == 0, 0.0, sb * np.exp(lb - top))
    norm = np.linalg.norm(scaled, axis=1, keepdims=True)
    return np.divide(scaled, norm, out=np.zeros_like(scaled), where=norm > 0)


def log_norm(result: Result) -> np.ndarray:
    """``log |beta|_2`` per sample (-inf where beta = 0)."""
    lb = np.where(result["sign_beta"] == 0, -np.inf, result["log_abs_beta"])
    top = np.max(lb, axis=1)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return safe + 0.5 * np.log(np.sum(np.exp(2 * (lb - safe[:, None])), axis=1))


def angles_deg(result: Result, reference) -> np.ndarray:
    """Angle (degrees) between ``beta(tau)`` and ``reference`` at every sample."""
    ref = np.asarray(reference, dtype=float)
    ref = ref / np.linalg.norm(ref)
    u = directions(result)
    a = 2 * np.arctan2(np.linalg.norm(u - ref, axis=1), np.linalg.norm(u + ref, axis=1))
    return np.where(np.linalg.norm(u, axis=1) > 0, np.degrees(a), np.nan)


def references(X, y) -> dict[int, np.ndarray]:
    """l1 and l2 max-margin directions (unit l2 vectors) by p."""
    return {p: max_margin(np.asarray(X), np.asarray(y), p).direction for p in (1, 2)}


def _fmt(v) -> str:
    return "(" + ", ".join(f"{x:.3f}" for x in np.asarray(v)) + ")"


def _rho(alg: str, rho: float) -> dict:
    return {} if alg == "gd" else {"rho": rho}


# --------------------------------------------------------------------------- Figure 1

FIG1_MU = [1.0, 2.0]
FIG1_ALPHA = [1.5, 0.8]
FIG1_RHO = 1.0


def _fig1_horizon(depth: int, quick: bool) -> tuple[float, int]:
    if quick:
        return (2.0, 41) if depth == 1 else (0.5, 21)
    return (300.0, 3001) if depth == 1 else (5.0, 501)


def fig1_tasks(quick: bool) -> list[Task]:
    """GD, l_inf-SAM, l2-SAM on D_mu at L = 1 and 2 (order: depth-major, ALGORITHMS)."""
    out = []
    for depth in (1, 2):
        t_max, n = _fig1_horizon(depth, quick)
        for alg in ALGORITHMS:
            out.append(Task("simulate", {"mu": FIG1_MU, "algorithm": alg, "depth": depth,
                                         "alpha": FIG1_ALPHA, **_rho(alg, FIG1_RHO),
                                         "t_max": t_max, "n_points": n,
                                         "original_time": False}))
    return out


def draw_fig1(results: list[Result], quick: bool, path: Path) -> None:
    """Two panels: beta drawn as its direction times log(1 + |beta|), with the reference rays."""
    mu = np.array(FIG1_MU)
    refs = {1: np.array([0.0, 1.0]), 2: mu / np.linalg.norm(mu)}
    fig, axes = plt.subplots(1, 2, figsize=(12, 6.0), constrained_layout=True)
    styles = {"gd": dict(lw=5, alpha=0.35), "l2-sam": dict(lw=2.2, ls="--"),
              "linf-sam": dict(lw=1.6, ls="-")}
    for ax, depth, runs in zip(axes, (1, 2), (results[:3], results[3:])):
        rmax = 0.0
        for alg, res in zip(ALGORITHMS, runs):
            u = directions(res)
            r = np.logaddexp(0.0, log_norm(res))
            pts = u * r[:, None]
            rmax = max(rmax, float(np.nanmax(r)))
            final = u[-1]
            ax.plot(pts[:, 0], pts[:, 1], color=COLORS[alg], **styles[alg],
                    label=f"{NAMES[alg]}: final β/‖β‖ = {_fmt(final)}")
            ax.plot(*pts[-1], marker="*", ms=17, color=COLORS[alg], mec="black", mew=0.7,
                    zorder=5)
            ax.plot(*pts[0], marker="o", ms=7, color="grey", zorder=4)
            slide = [t for t, kind in zip(res["event_tau"], res["event_kind"])
                     if kind == "sliding"]
            if slide:
                k = int(np.searchsorted(res["tau"], slide[0]))
                ax.annotate(f"β₂ reaches 0 and slides\n(τ = {slide[0]:.2f})", pts[k],
                            xytext=(pts[k][0] + 0.9, pts[k][1] + 1.2), fontsize=9,
                            color=COLORS[alg], arrowprops=dict(arrowstyle="->",
                                                                color=COLORS[alg]))
        reach = 1.08 * rmax
        for p, ref in refs.items():
            name = "ℓ1 max-margin e₂" if p == 1 else "ℓ2 max-margin μ/‖μ‖"
            ax.plot([0, reach * ref[0]], [0, reach * ref[1]], color=REF_COLORS[p], lw=8,
                    alpha=0.4, solid_capstyle="butt", zorder=0, label=f"{name} = {_fmt(ref)}")
        ax.plot([], [], ls="", marker="o", color="grey", label="start (β(0) = α^L)")
        ax.plot([], [], ls="", marker="*", ms=12, color="grey", label="end of run")
        ax.set_xlim(-0.05 * reach, 1.05 * reach)
        ax.set_ylim(-0.05 * reach, 1.05 * reach)
        ax.set_aspect("equal")
        ax.grid(alpha=0.3)
        ax.set_xlabel("β₁ · log(1+‖β‖₂) / ‖β‖₂")
        ax.set_ylabel("β₂ · log(1+‖β‖₂) / ‖β‖₂")
        tmax = runs[0]["tau"][-1]
        if depth == 1:
            ax.set_title(f"L = 1 (τ ≤ {tmax:g}): all three → ℓ2 max-margin (Thm 3.1)\n"
                         "paths coincide: at L = 1 the rescaled field is μ whatever ε is",
                         fontsize=10.5)
        else:
            ax.set_title(f"L = 2 (τ ≤ {tmax:g}): GD, ℓ2-SAM → e₂ (ℓ1 max-margin);\n"
                         "ℓ∞-SAM → e₁, the minor feature (Cor 3.5: α₂ = 0.8 < ρ)",
                         fontsize=10.5)
        ax.legend(loc="center right", fontsize=8.5, framealpha=0.9)
    fig.suptitle("Depth contrast on one example μ = (1, 2), α = (1.5, 0.8), ρ = 1, rescaled "
                 "clock: each point has the direction of β and radius log(1+‖β‖₂)"
                 + ("  [QUICK]" if quick else ""), fontsize=11)
    save(fig, path)


# --------------------------------------------------------------------------- Figure 6

FIG6_RHO = 0.1
FIG6_ALPHA = 1.0


def _fig6_horizon(depth: int, quick: bool) -> tuple[float, int]:
    if quick:
        return (5.0, 21) if depth == 1 else (1.0, 21)
    return (3000.0, 6001) if depth == 1 else (8.0, 801)


def multi_sample_tasks(X: np.ndarray, y: np.ndarray, depths: tuple[int, ...], alpha, rho: float,
                       horizon, quick: bool) -> list[Task]:
    """GD / l2-SAM / l_inf-SAM on data ``(X, y)`` for each depth (depth-major); l_inf-SAM at
    L >= 2 runs on the Heun fallback (module doc), the others on :func:`flows.simulate`."""
    out = []
    for depth in depths:
        t_max, n = horizon(depth, quick)
        for alg in ALGORITHMS:
            params = {"X": X.tolist(), "y": y.tolist(), "algorithm": alg, "depth": depth,
                      "alpha": alpha, **_rho(alg, rho), "t_max": t_max, "n_points": n}
            if alg == "linf-sam" and depth >= 2:
                out.append(Task("heun_flow", params))
            else:
                out.append(Task("simulate", {**params, "original_time": False, "rtol": 1e-8}))
    return out


def fig6_tasks(quick: bool) -> list[Task]:
    """Three algorithms at L = 1 and 2 on :func:`teacher_data` (depth-major)."""
    X, y = teacher_data()
    return multi_sample_tasks(X, y, (1, 2), FIG6_ALPHA, FIG6_RHO, _fig6_horizon, quick)


def draw_fig6(results: list[Result], quick: bool, path: Path) -> None:
    """Angle to the l2 (solid) and l1 (dashed) max-margin directions against tau, log-log."""
    X, y = teacher_data()
    refs = references(X, y)
    between = np.degrees(np.arccos(np.clip(refs[1] @ refs[2], -1, 1)))
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2), constrained_layout=True)
    for ax, depth, runs in zip(axes, (1, 2), (results[:3], results[3:])):
        lines = []
        for alg, res in zip(ALGORITHMS, runs):
            tau = res["tau"]
            keep = tau > 0
            a2, a1 = angles_deg(res, refs[2]), angles_deg(res, refs[1])
            wide = dict(lw=5, alpha=0.35) if alg == "gd" else dict(lw=1.8)
            ax.plot(tau[keep], a2[keep], color=COLORS[alg], **wide)
            ax.plot(tau[keep], a1[keep], color=COLORS[alg], ls="--", **wide)
            tag = " (Heun fallback)" if "floor_steps" in res else ""
            lines.append(f"{NAMES[alg]}{tag}: ∠ℓ2 = {a2[-1]:.3g}°, ∠ℓ1 = {a1[-1]:.3g}°")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(1e-2 if not quick else None, 120)
        ax.set_xlabel("rescaled time τ (log scale)")
        ax.set_ylabel("angle between β(τ) and the max-margin direction\n[degrees, log scale]")
        ax.grid(alpha=0.3, which="both")
        ax.text(0.02, 0.03, f"at τ = {runs[0]['tau'][-1]:g}:\n" + "\n".join(lines),
                transform=ax.transAxes, fontsize=8.5, va="bottom",
                bbox=dict(boxstyle="round", fc="white", alpha=0.9, ec="0.7"))
        if depth == 1:
            ax.set_title("L = 1: all → ℓ2 max-margin (Thm 3.1), angle ∝ 1/τ (slow)",
                         fontsize=10.5)
        else:
            ax.set_title("L = 2: GD → ℓ1 max-margin (KKT point); here both SAMs too",
                         fontsize=10.5)
    handles = [plt.Line2D([], [], color=COLORS[a], label=NAMES[a],
                          **(dict(lw=5, alpha=0.35) if a == "gd" else dict(lw=1.8)))
               for a in ALGORITHMS]
    handles += [plt.Line2D([], [], color="grey", lw=2, label="angle to ℓ2 max-margin"),
                plt.Line2D([], [], color="grey", lw=1.5, ls="--",
                           label="angle to ℓ1 max-margin")]
    fig.legend(handles=handles, loc="outside right center", fontsize=9)
    fig.suptitle(f"Separable data n = {len(y)}, d = {X.shape[1]} (teacher seed 90), α = "
                 f"{FIG6_ALPHA:g}, ρ = {FIG6_RHO:g}; ℓ1 max-margin {_fmt(refs[1])}, ℓ2 "
                 f"max-margin {_fmt(refs[2])}, {between:.1f}° apart"
                 + ("  [QUICK]" if quick else ""), fontsize=10.5)
    save(fig, path)


# --------------------------------------------------------------------------- Figure 7

FIG7_ALPHA = [1.5, 0.8]
FIG7_RHO = 1.0


def _fig7_horizon(depth: int, quick: bool) -> tuple[float, int]:
    if quick:
        return (5.0, 21) if depth == 1 else (0.5, 21)
    return (1000.0, 2001) if depth == 1 else (8.0, 801)


def fig7_tasks(quick: bool) -> list[Task]:
    """Three algorithms at L = 2 then L = 1 on :func:`gaussian_blobs`."""
    X, y = gaussian_blobs()
    return multi_sample_tasks(X, y, (2, 1), FIG7_ALPHA, FIG7_RHO, _fig7_horizon, quick)


def draw_fig7(results: list[Result], quick: bool, path: Path) -> None:
    """Data with final-direction rays; polar angle of beta vs tau; loss vs tau."""
    X, y = gaussian_blobs()
    refs = references(X, y)
    fig, (ax0, ax1, ax2) = plt.subplots(1, 3, figsize=(17, 5.6), constrained_layout=True,
                                        gridspec_kw={"width_ratios": [1.05, 1.2, 1.0]})
    pos, neg = y > 0, y < 0
    ax0.scatter(X[pos, 0], X[pos, 1], s=22, marker="o", color=OKABE_ITO[2],
                edgecolor="k", lw=0.4, label="y = +1 (mean (1, 2))")
    ax0.scatter(X[neg, 0], X[neg, 1], s=26, marker="s", color=OKABE_ITO[7],
                edgecolor="k", lw=0.4, label="y = −1 (mean −(1, 2))")
    bad = y * X[:, 0] <= 0
    ax0.scatter(X[bad, 0], X[bad, 1], s=170, facecolor="none", edgecolor=COLORS["linf-sam"],
                lw=1.5, label="point e₁ misclassifies")
    R = 3.6
    for p, ref in refs.items():
        ax0.plot([0, R * ref[0]], [0, R * ref[1]], color=REF_COLORS[p], lw=7, alpha=0.45,
                 solid_capstyle="round", label=f"ℓ{p} max-margin {_fmt(ref)}")
    L2, L1 = results[:3], results[3:]
    for depth, runs, ls in ((2, L2, "-"), (1, L1, "--")):
        for alg, res in zip(ALGORITHMS, runs):
            u = directions(res)[-1]
            ax0.annotate("", xy=(R * u[0], R * u[1]), xytext=(0, 0),
                         arrowprops=dict(arrowstyle="-|>", color=COLORS[alg], lw=1.8, ls=ls,
                                         shrinkA=0, shrinkB=0))
    ax0.plot([], [], color="grey", lw=1.8, label="final β/‖β‖, L = 2 (solid)")
    ax0.plot([], [], color="grey", lw=1.8, ls="--", label="final β/‖β‖, L = 1 (dashed)")
    for alg in ALGORITHMS:
        ax0.plot([], [], color=COLORS[alg], lw=2.5, label=NAMES[alg])
    ax0.axhline(0, color="0.6", lw=0.6)
    ax0.axvline(0, color="0.6", lw=0.6)
    ax0.set_aspect("equal")
    ax0.set(xlim=(-3.4, 4.0), ylim=(-3.4, 4.0), xlabel="x₁ (and β₁ direction)",
            ylabel="x₂ (and β₂ direction)",
            title="data and final directions of β (arrows)")
    ax0.text(3.9, -0.25, "L = 2 ℓ∞-SAM → e₁", color=COLORS["linf-sam"], ha="right",
             va="top", fontsize=8.5)
    ax0.legend(fontsize=7.5, loc="upper left", framealpha=0.9)

    phi_ref = {p: np.degrees(np.arctan2(r[1], r[0])) for p, r in refs.items()}
    summary = []
    for depth, runs, ls in ((2, L2, "-"), (1, L1, "--")):
        for alg, res in zip(ALGORITHMS, runs):
            u = directions(res)
            phi = np.degrees(np.arctan2(u[:, 1], u[:, 0]))
            keep = res["tau"] > 0
            ax1.plot(res["tau"][keep], phi[keep], color=COLORS[alg], ls=ls, lw=2)
            ax2.plot(res["tau"][keep], res["loss"][keep], color=COLORS[alg], ls=ls, lw=2)
            summary.append(f"L={depth} {NAMES[alg]}: φ = {phi[-1]:.2f}°, "
                           f"∠ℓ1 = {angles_deg(res, refs[1])[-1]:.2g}°, "
                           f"∠ℓ2 = {angles_deg(res, refs[2])[-1]:.2g}°")
    for p, phi in phi_ref.items():
        ax1.axhline(phi, color=REF_COLORS[p], lw=6, alpha=0.45,
                    label=f"ℓ{p} max-margin (φ = {phi:.1f}°)")
    ax1.set_xscale("log")
    ax1.set(xlabel="rescaled time τ (log scale)",
            ylabel="polar angle φ of β = atan2(β₂, β₁) [deg]",
            title="direction of β(τ): L = 2 solid, L = 1 dashed", ylim=(-5, 95))
    ax1.grid(alpha=0.3, which="both")
    ax1.legend(fontsize=8, loc="center left")
    ax1.text(0.98, 0.12, "\n".join(summary), transform=ax1.transAxes, fontsize=7.5,
             ha="right", va="bottom", bbox=dict(boxstyle="round", fc="white", alpha=0.9,
                                                 ec="0.7"))
    stuck = L2[2]
    stuck_beta = np.sign(stuck["sign_beta"][-1]) * np.exp(stuck["log_abs_beta"][-1])
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_ylim(1e-16, 2.0)
    ax2.set(xlabel="rescaled time τ (log scale)", ylabel="training loss (logistic, mean)",
            title="loss: L = 2 ℓ∞-SAM stops at a non-separating\nstationary point "
                  f"(β = {_fmt(stuck_beta)}, loss {stuck['loss'][-1]:.3g})")
    ax2.grid(alpha=0.3, which="both")
    handles = [plt.Line2D([], [], color=COLORS[a], lw=2, label=NAMES[a]) for a in ALGORITHMS]
    handles += [plt.Line2D([], [], color="grey", lw=2, label="L = 2"),
                plt.Line2D([], [], color="grey", lw=2, ls="--", label="L = 1")]
    ax2.legend(handles=handles, fontsize=8, loc="lower left")
    fig.suptitle(f"Gaussian blobs, n = {len(y)}, means ±(1, 2), std 0.6 (seed 5); α = "
                 f"{tuple(FIG7_ALPHA)}, ρ = {FIG7_RHO:g}, rescaled clock; L = 2 ℓ∞-SAM by the "
                 "Heun fallback (engine stalls on its sliding surface)"
                 + ("  [QUICK]" if quick else ""), fontsize=10.5)
    save(fig, path)


DEPTH_CONTRAST = Figure(
    "fig1_depth_contrast",
    "mu=(1,2): beta paths of GD / linf-SAM / l2-SAM at L=1 and L=2 with max-margin rays",
    "Does depth decide the limit direction: at L = 1 do GD, ℓ∞-SAM and ℓ2-SAM all reach the "
    "ℓ2 max-margin direction, while at L = 2 ℓ∞-SAM ends on the minor feature e₁ (Cor 3.5) and "
    "GD and ℓ2-SAM on the ℓ1 max-margin e₂?",
    fig1_tasks, draw_fig1)

MAXMARGIN_ANGLES = Figure(
    "fig6_maxmargin_angles",
    "n=12, d=3 data: angle to l1/l2 max-margin vs tau, GD / l2-SAM / linf-SAM, L=1,2",
    "On generic separable data, does β(τ) approach the ℓ2 max-margin direction at L = 1 and "
    "the ℓ1 max-margin direction at L = 2, for GD and for both SAMs, and how fast?",
    fig6_tasks, draw_fig6)

GAUSSIAN_BLOBS = Figure(
    "fig7_gaussian_blobs",
    "Gaussian blobs +-(1,2): final directions, direction angle and loss vs tau",
    "On two Gaussian blobs, where does the direction of β go for each algorithm at L = 1 and "
    "L = 2, and does ℓ∞-SAM at L = 2 stop at a non-separating stationary point?",
    fig7_tasks, draw_fig7)
