"""Figures 10 and 11: the dynamics of LE-SAM and USAM against l2-SAM on the single example
``mu = (1, ..., 5)``, L = 2; the settings and task kinds of the whole study.

* ``fig10_lesam_radius`` — the effective radius ``rho_t``, the loss budget and what the
  perturbation does to the update over tau.
* ``fig11_lesam_amplification`` — shares ``|beta_j| / ||beta||_1`` for GD, l2-SAM, USAM and
  LE-SAM, and the leader sequence over a grid of ``(sigma, rho_max)``.

**Matched settings.** l2-SAM with ``rho = 1`` at ``alpha = 0.4`` (figure 4); LE-SAM with
``sigma = rho ||grad L(theta(0))|| = 0.3489`` and USAM with ``rho / ||grad L(theta(0))|| = 2.866``
perturb by exactly l2-SAM's ``eps`` at ``theta(0)`` (:func:`analysis.lesam.initial_gradient_norm`).
The matched budget happens to be LE-SAM's official ``sigma = 0.35``. The official schedule
(warm-up over the first 10 of 200 epochs, hold to 160, cosine to 0 at 200) is mapped onto the
horizon ``[0, T]``: :func:`warmup` = ``warmup_cosine(sigma, 0.05 T, 0.8 T, T)``.

Figures 12-14 (regimes, sharpness at equal loss, limit directions) are in
:mod:`figures.lesam_outcomes`. The task kinds registered here: ``'lesam-run'`` (a flow with
the perturbation along it, :func:`analysis.lesam.perturbation_along`, and optionally its
sharpness, :func:`analysis.sharpness.sharpness_along`), ``'lesam-classify'`` (regimes of a list
of points) and ``'lesam-scan'`` (regimes along one parameter with every boundary bisected).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

from analysis.amplification import leaders
from analysis.lesam.boundaries import scan_regimes
from analysis.lesam.perturbation import perturbation_along
from analysis.lesam.radius import initial_gradient_norm
from analysis.lesam.regimes import classify_lesam, initial_lesam_rates
from analysis.lesam.stall import stall_point
from analysis.sharpness import sharpness_along
from flows.data import single_example
from flows.integrator.driver import simulate
from flows.schedules import Schedule, from_spec, warmup_cosine
from flows.sweep.kinds import dataset_from
from flows.sweep.registry import Result, Task, register

from .common import MU5, OKABE_ITO, Figure, coordinate_colors, plt, save, shares_of

ALPHA, RHO, DEPTH = 0.4, 1.0, 2
#: ||grad L(theta(0))|| at alpha = 0.4 on mu = (1..5), L = 2 (0.34893)
G0 = initial_gradient_norm(single_example(MU5), ALPHA, DEPTH)
SIGMA0 = RHO * G0
RHO_USAM = RHO / G0
OFFICIAL = {"sigma": 0.35, "rho_max": 0.3}


def warmup(sigma: float, t_end: float) -> Schedule:
    """LE-SAM's official budget schedule on ``[0, t_end]`` (10 / 200 warm-up, hold to 160 / 200)."""
    return warmup_cosine(sigma, 0.05 * t_end, 0.8 * t_end, t_end)


def compared(t_end: float) -> list[tuple[str, str, dict, str]]:
    """(key, algorithm, hyper-parameters, label) of the matched runs (GD first)."""
    return [
        ("gd", "gd", {}, "gd: GD"),
        ("l2", "l2-sam", {"rho": RHO}, f"l2: ℓ2-SAM ρ = {RHO:g}"),
        ("usam", "usam", {"rho": RHO_USAM}, f"usam: USAM ρ = 1/‖∇L₀‖ = {RHO_USAM:.3g}"),
        (
            "le15",
            "le-sam",
            {"sigma": SIGMA0, "rho_max": 1.5},
            f"le15: LE-SAM σ = {SIGMA0:.3g}, ρ_max = 1.5",
        ),
        (
            "le3",
            "le-sam",
            {"sigma": SIGMA0, "rho_max": 3.0},
            f"le3: LE-SAM σ = {SIGMA0:.3g}, ρ_max = 3",
        ),
        (
            "wc3",
            "le-sam",
            {"sigma": warmup(SIGMA0, t_end), "rho_max": 3.0},
            f"wc3: LE-SAM warm-up+cosine σ = {SIGMA0:.3g}, ρ_max = 3",
        ),
        (
            "official",
            "le-sam",
            {"sigma": warmup(OFFICIAL["sigma"], t_end), "rho_max": OFFICIAL["rho_max"]},
            "official: LE-SAM σ = 0.35 warm-up+cosine, ρ_max = 0.3",
        ),
    ]


STYLE = {
    "gd": dict(color=OKABE_ITO[0], lw=4, alpha=0.3),
    "l2": dict(color=OKABE_ITO[5], lw=2),
    "usam": dict(color=OKABE_ITO[6], lw=1.8, ls="-."),
    "le15": dict(color=OKABE_ITO[1], lw=2),
    "le3": dict(color=OKABE_ITO[3], lw=2),
    "wc3": dict(color=OKABE_ITO[7], lw=2, ls="--"),
    "official": dict(color=OKABE_ITO[2], lw=2, ls=":"),
}

# ------------------------------------------------------------------------------ task kinds

RUN_KEYS = tuple(
    "t tau loss log_abs_beta sign_beta status message event_tau event_kind log_grad_norm "
    "radius budget capped first_order log_loss log_loss_perturbed update_angle relative_change".split()
)


def lesam_run(params: dict) -> Result:
    """A :func:`flows.simulate` run (parameters as for a ``'simulate'`` task, schedules by
    spec) with :func:`analysis.lesam.perturbation_along` (unless ``"perturbation": False``);
    ``"sharpness": True`` adds the Hessian trace and top eigenvalue
    (:func:`analysis.sharpness.sharpness_along`)."""
    data, rest = dataset_from(params)
    with_sharpness = bool(rest.pop("sharpness", False))
    with_perturbation = bool(rest.pop("perturbation", True))
    rest = {
        k: from_spec(v) if isinstance(v, dict) and "schedule" in v else v for k, v in rest.items()
    }
    if isinstance(rest.get("alpha"), list):
        rest["alpha"] = np.array(rest["alpha"])
    traj = simulate(data, **rest)
    loss = rest.get("loss", "logistic")
    out = {
        "t": traj.t,
        "tau": traj.tau,
        "loss": traj.loss,
        "log_abs_beta": traj.log_abs_beta,
        "sign_beta": traj.sign_beta,
        "status": np.array(traj.status),
        "message": np.array(traj.message),
        "event_tau": np.array([e.tau for e in traj.events]),
        "event_kind": np.array([e.kind for e in traj.events], dtype=str),
    }
    if with_perturbation:
        series = perturbation_along(traj, data, loss)
        out.update({k: np.asarray(getattr(series, k)) for k in RUN_KEYS[9:]})
    if with_sharpness:
        out["trace"], out["top"] = sharpness_along(traj, data, loss)
    return out


def lesam_classify(params: dict) -> Result:
    """:func:`analysis.lesam.classify_lesam` at ``points`` = [[alpha, sigma, rho_max], ...]
    (regime 0 = undecided)."""
    regimes = [
        classify_lesam(params["mu"], a, s, r, n_points=params.get("n_points", 121)).regime
        for a, s, r in params["points"]
    ]
    return {"regime": np.array([0 if r is None else r for r in regimes])}


def lesam_scan(params: dict) -> Result:
    """:func:`analysis.lesam.scan_regimes` along ``grid`` of ``parameter`` (others in ``fixed``):
    regimes (0 = undecided), leader sequences and the bisected boundaries."""
    scan = scan_regimes(
        params["mu"],
        params["parameter"],
        params["grid"],
        **params["fixed"],
        rtol=params["rtol"],
        n_points=params.get("n_points", 121),
    )
    b = scan.boundaries
    return {
        "regime": np.array([c.regime or 0 for c in scan.regimes]),
        "leaders": np.array([describe_leaders(c.leaders) for c in scan.regimes], dtype=str),
        "lower": np.array([x.lower for x in b]),
        "upper": np.array([x.upper for x in b]),
        "below": np.array([x.regime_lower for x in b], dtype=float),
        "above": np.array([x.regime_upper for x in b], dtype=float),
        "converged": np.array([x.converged for x in b], dtype=bool),
    }


register(
    "lesam-run", lesam_run, cost=lambda p: 0.3 + 0.002 * p.get("n_points", 201), keys=RUN_KEYS[:9]
)
register("lesam-classify", lesam_classify, cost=lambda p: 0.08 * len(p["points"]), keys=("regime",))
register(
    "lesam-scan",
    lesam_scan,
    cost=lambda p: 0.1 * len(p["grid"]) + 1.5,
    keys=("regime", "leaders", "lower", "upper", "below", "above", "converged"),
)


def as_params(hp: dict) -> dict:
    """Hyper-parameters for a task: schedules by their JSON spec (as the cache keys them)."""
    return {k: v.spec() if isinstance(v, Schedule) else v for k, v in hp.items()}


def run_task(
    algorithm: str, hp: dict, t_max: float, n_points: int, kind: str = "lesam-run", **extra
) -> Task:
    """One matched run on ``D_mu``, mu = (1..5), alpha = 0.4, L = 2 (rescaled clock)."""
    params = {
        "mu": MU5,
        "algorithm": algorithm,
        "depth": DEPTH,
        "alpha": ALPHA,
        **as_params(hp),
        "t_max": t_max,
        "n_points": n_points,
        "original_time": False,
        "rtol": 1e-9,
        **extra,
    }
    return Task(kind, params)


def describe_leaders(seq) -> str:
    """``2 → 3 → 5`` (1-based; 0 = collapsed)."""
    return " → ".join("0" if c < 0 else str(c + 1) for c in seq.coordinates)


# ---------------------------------------------------------------------------- Figure 10

FIG10_T = 8.0
FIG10_RUNS = ("l2", "usam", "le15", "le3", "wc3", "official")


def fig10_runs(quick: bool) -> list[tuple[str, str, dict, str]]:
    t_end = 2.0 if quick else FIG10_T
    return [r for r in compared(t_end) if r[0] in FIG10_RUNS]


def fig10_tasks(quick: bool) -> list[Task]:
    """The matched l2-SAM, USAM and LE-SAM runs with their perturbation series."""
    t_end, n = (2.0, 41) if quick else (FIG10_T, 241)
    return [run_task(alg, hp, t_end, n) for _, alg, hp, _ in fig10_runs(quick)]


def draw_fig10(results: list[Result], quick: bool, path: Path) -> None:
    """Radius, loss budget, training loss and update angle over tau."""
    fig, axes = plt.subplots(2, 3, figsize=(17, 8.8), constrained_layout=True)
    (ax_r, ax_b, ax_l), (ax_a, ax_c, ax_legend) = axes
    stall = stall_point(MU5, SIGMA0, 3.0)
    for (key, alg, _, label), res in zip(fig10_runs(quick), results, strict=True):
        tau, st = res["tau"], STYLE[key]
        ax_r.plot(tau, res["radius"], label=label, **st)
        with np.errstate(over="ignore", invalid="ignore"):
            increase = np.exp(res["log_loss"]) * np.expm1(
                res["log_loss_perturbed"] - res["log_loss"]
            )
        ax_b.plot(tau, np.where(increase > 0, increase, np.nan), **st)
        if alg == "le-sam":
            ax_b.plot(
                tau,
                np.where(res["budget"] > 0, res["budget"], np.nan),
                color=st["color"],
                lw=1,
                ls=(0, (1, 2)),
            )
        ax_l.plot(tau, res["loss"], **st)
        ax_a.plot(tau, np.degrees(res["update_angle"]), **st)
        ax_c.plot(tau, res["relative_change"], **st)
    ax_r.axhline(stall.radius, color="0.4", lw=0.8, ls="--")
    ax_r.text(
        FIG10_T * 0.45 if not quick else 0.5,
        stall.radius * 1.15,
        f"stall radius √2·a* = {stall.radius:.3f}",
        fontsize=8,
        color="0.3",
    )
    ax_r.set(
        yscale="log",
        ylim=(1e-3, 10),
        ylabel="effective radius ‖ε‖ (ρ_t for LE-SAM)",
        title="(a) radius ρ_t = min(σ/(‖∇L‖+ϱ), ρ_max)",
    )
    ax_b.set(
        yscale="log",
        ylim=(1e-5, 3),
        ylabel="L(θ+ε) − L(θ)\n(first order ρ_t‖∇L‖ = σ while uncapped)",
        title="(b) loss increase (solid), budget σ(τ) (dotted)",
    )
    ax_l.axhline(stall.loss, color="0.4", lw=0.8, ls="--")
    ax_l.text(
        FIG10_T * 0.45 if not quick else 0.5,
        stall.loss * 2.5,
        f"stall: loss ℓ(m*) = {stall.loss:.4f}, m* = {stall.margin:.3f} on e₁",
        fontsize=8,
        color="0.3",
    )
    ax_l.set(
        yscale="log",
        ylim=(1e-16, 1),
        ylabel="training loss L(θ(τ))",
        title="(c) training loss: ρ_max = 3 stalls",
    )
    ax_a.set(
        ylabel="angle between −∇L(θ+ε) and −∇L(θ) [deg]",
        ylim=(-3, 97),
        title="(d) curvature signal, direction: the angle SAM turns the step",
    )
    ax_c.set(
        yscale="log",
        ylim=(1e-3, 1e8),
        ylabel="‖∇L(θ+ε) − ∇L(θ)‖ / ‖∇L(θ)‖",
        title="(e) curvature signal, size: correction against the gradient",
    )
    ax_c.axhline(1.0, color="0.4", lw=0.8, ls="--")
    for ax in axes.ravel()[:5]:
        ax.set_xlabel("rescaled time τ")
        ax.grid(alpha=0.3, which="both")
    ax_legend.axis("off")
    ax_legend.legend(
        *ax_r.get_legend_handles_labels(),
        loc="center",
        fontsize=9,
        title="matched at θ(0): same ε as ℓ2-SAM ρ = 1",
    )
    fig.suptitle(
        f"LE-SAM's radius and loss budget vs ℓ2-SAM and USAM: μ = (1,…,5), L = 2, "
        f"α = {ALPHA:g}, matched at θ(0) (σ = ρ‖∇L₀‖ = {SIGMA0:.4f})"
        + ("  [QUICK]" if quick else ""),
        fontsize=11,
    )
    save(fig, path)


RADIUS = Figure(
    "fig10_lesam_radius",
    "LE-SAM's effective radius rho_t and loss budget over tau vs l2-SAM and USAM (mu=(1..5), L=2)",
    "Starting from the same perturbation as ℓ2-SAM, how does LE-SAM's radius ρ_t evolve, does it "
    "hold the loss increase at its budget σ, and when does its perturbation turn the update (the "
    "claimed early curvature signal)?",
    fig10_tasks,
    draw_fig10,
)

# ---------------------------------------------------------------------------- Figure 11

FIG11_T = 8.0
FIG11_PANELS = ("gd", "l2", "usam", "le15", "le3", "wc3", "official")
#: (sigma, rho_max) rows of the leader strips
FIG11_GRID = tuple((s, r) for s in (0.03, 0.1, SIGMA0, 1.0) for r in (0.3, 1.0, 1.5, 3.0))
FIG11_STRIP_T = 24.0


def fig11_tasks(quick: bool) -> list[Task]:
    """The matched runs (shares), then LE-SAM over FIG11_GRID (leader strips)."""
    t_end, n = (2.0, 41) if quick else (FIG11_T, 401)
    runs = [run_task(alg, hp, t_end, n, kind="simulate") for _, alg, hp, _ in compared(t_end)]
    grid = FIG11_GRID[::5] if quick else FIG11_GRID
    t_strip, n_strip = (4.0, 41) if quick else (FIG11_STRIP_T, 481)
    return runs + [
        run_task("le-sam", {"sigma": s, "rho_max": r}, t_strip, n_strip, kind="simulate", rtol=1e-8)
        for s, r in grid
    ]


def draw_fig11(results: list[Result], quick: bool, path: Path) -> None:
    """Shares of the matched runs (7 panels) and leader strips over (sigma, rho_max)."""
    from analysis.amplification import leader_sequence

    t_end = 2.0 if quick else FIG11_T
    runs = compared(t_end)
    fig = plt.figure(figsize=(17, 9.0), constrained_layout=True)
    grid = fig.add_gridspec(2, 5, width_ratios=[1, 1, 1, 1, 1.35])
    colors = coordinate_colors(len(MU5))
    for k, ((key, _, _, label), res) in enumerate(zip(runs, results, strict=False)):
        ax = fig.add_subplot(grid[k // 4, k % 4])
        sh = shares_of(res)
        for j, color in enumerate(colors):
            ax.plot(res["tau"], sh[:, j], color=color, lw=2, label=f"j = {j + 1} (μ = {j + 1})")
        seq = leader_sequence(res["tau"], res["log_abs_beta"])
        ax.set_title(
            label.split(": ", 1)[1].replace(", ", ",\n", 1).replace(": ", ":\n", 1)
            + f"\nleaders: {describe_leaders(seq)}",
            fontsize=8.5,
        )
        ax.set(xlabel="rescaled time τ", ylim=(-0.02, 1.02))
        if k % 4 == 0:
            ax.set_ylabel("share |β_j| / ‖β‖₁")
        ax.grid(alpha=0.3)
        if key == "le3":
            ax.text(
                0.97,
                0.3,
                "stall: β → (2.654, 0, …, 0)\nloss stays 0.068",
                ha="right",
                fontsize=8,
                transform=ax.transAxes,
                bbox=dict(fc="white", alpha=0.85, ec="none"),
            )
    handles, labels = fig.axes[0].get_legend_handles_labels()
    legend_ax = fig.add_subplot(grid[1, 3])
    legend_ax.axis("off")
    legend_ax.legend(handles, labels, loc="center", title="coordinate (minor → major)", fontsize=9)
    strips = results[len(runs) :]
    cells = FIG11_GRID[::5] if quick else FIG11_GRID
    ax = fig.add_subplot(grid[:, 4])
    d = len(MU5)
    cmap = matplotlib.colors.ListedColormap(
        np.vstack([[0.85, 0.85, 0.85, 1.0], coordinate_colors(d)])
    )
    tau = strips[0]["tau"]
    lead = np.full((len(strips), tau.size), -1)
    for row, (res, (s, r)) in zip(lead, zip(strips, cells, strict=True), strict=True):
        got = leaders(res["log_abs_beta"])
        row[: got.size] = got
        row[0] = int(np.argmax(initial_lesam_rates(MU5, ALPHA, s, r)))
    edges = np.concatenate([[tau[0]], 0.5 * (tau[1:] + tau[:-1]), [tau[-1]]])
    mesh = ax.pcolormesh(
        edges, np.arange(len(strips) + 1), lead + 1, cmap=cmap, vmin=-0.5, vmax=d + 0.5
    )
    ax.set_yticks(
        np.arange(len(strips)) + 0.5, [f"σ = {s:.3g}, ρ_max = {r:g}" for s, r in cells], fontsize=8
    )
    ax.invert_yaxis()
    for i in range(1, len(strips)):
        if cells[i][0] != cells[i - 1][0]:
            ax.axhline(i, color="white", lw=2)
    cbar = fig.colorbar(mesh, ax=ax, ticks=range(0, d + 1), location="bottom", shrink=0.9)
    cbar.ax.set_xticklabels(["β = 0"] + [f"{j + 1}" for j in range(d)])
    cbar.set_label("leading coordinate argmax_j |β_j(τ)|")
    ax.set(xlabel="rescaled time τ", title=f"LE-SAM, constant σ: leader over τ\n(α = {ALPHA:g})")
    fig.suptitle(
        f"Does LE-SAM keep 'minor first, major last'? Shares |β_j|/‖β‖₁, μ = (1,…,5), "
        f"L = 2, α = {ALPHA:g}, settings matched at θ(0); leaders over τ ≤ {t_end:g}"
        + ("  [QUICK]" if quick else ""),
        fontsize=11,
    )
    save(fig, path)


AMPLIFICATION = Figure(
    "fig11_lesam_amplification",
    "Shares |beta_j|/|beta|_1 over tau: GD, l2-SAM, USAM, LE-SAM; LE-SAM leaders over (sigma, rho_max)",
    "Does LE-SAM (or USAM) keep ℓ2-SAM's 'minor first, major last' at matched settings, and how "
    "does its leader sequence depend on the budget σ and the cap ρ_max?",
    fig11_tasks,
    draw_fig11,
)
