"""The LE-SAM study: its settings and task kinds, shared by figures 10-14 (LE-SAM and USAM
against l2-SAM; the figures are in :mod:`figures.lesam_radius`, :mod:`figures.lesam_amplification`,
:mod:`figures.lesam_regimes`, :mod:`figures.lesam_sharpness` and :mod:`figures.lesam_limits`).

**Matched settings.** On the single example ``mu = (1, ..., 5)``, L = 2: l2-SAM with
``rho = 1`` at ``alpha = 0.4`` (figure 4); LE-SAM with ``sigma = rho ||grad L(theta(0))|| =
0.3489`` and USAM with ``rho / ||grad L(theta(0))|| = 2.866`` perturb by exactly l2-SAM's
``eps`` at ``theta(0)`` (:func:`analysis.lesam.initial_gradient_norm`; :func:`compared`). The
matched budget happens to be LE-SAM's official ``sigma = 0.35``. The shape of the official
schedule (warm-up over the first 10 of 200 epochs, hold to 160, cosine to 0 at 200) is mapped
onto the horizon ``[0, T]`` as a continuous curve: :func:`warmup` =
``warmup_cosine(sigma, 0.05 T, 0.8 T, T)``; these runs use the paper's formula ``le-sam`` with
the official values (the authors' optimizer itself, ``le-sam-official``, is figure 15's). On multi-sample data
the runs are matched in the same way (:func:`matched`).

The task kinds registered here: ``'lesam-run'`` (a flow with the perturbation along it,
:func:`analysis.lesam.perturbation_along`, and optionally its sharpness,
:func:`analysis.sharpness.sharpness_along`), ``'lesam-classify'`` (regimes of a list of points)
and ``'lesam-scan'`` (regimes along one parameter with every boundary bisected).
"""

from __future__ import annotations

import numpy as np

from analysis.lesam.boundaries import scan_regimes
from analysis.lesam.perturbation import perturbation_along
from analysis.lesam.radius import initial_gradient_norm
from analysis.lesam.regimes import classify_lesam
from analysis.sharpness import sharpness_along
from flows.data import Dataset, single_example
from flows.integrator.driver import simulate
from flows.model import DEFAULT_LOSS
from flows.schedules import Schedule, warmup_cosine
from flows.sweep.kinds import simulate_arguments
from flows.sweep.registry import Result, Task, flow_kernels, register

from .common import MU5, OKABE_ITO

ALPHA, RHO, DEPTH = 0.4, 1.0, 2
#: ||grad L(theta(0))|| at alpha = 0.4 on mu = (1..5), L = 2 (0.34893)
G0 = initial_gradient_norm(single_example(MU5), ALPHA, DEPTH)
SIGMA0 = RHO * G0
RHO_USAM = RHO / G0
OFFICIAL = {"sigma": 0.35, "rho_max": 0.3}


def warmup(sigma: float, t_end: float) -> Schedule:
    """The shape of LE-SAM's official budget schedule on ``[0, t_end]`` as a continuous curve
    (10 / 200 warm-up, hold to 160 / 200, cosine to 0); the per-epoch staircase itself is
    :func:`flows.schedules.lesam_official`."""
    return warmup_cosine(sigma, 0.05 * t_end, 0.8 * t_end, t_end)


def compared(t_end: float) -> list[tuple[str, str, dict, str]]:
    """(key, algorithm, hyper-parameters, label) of the matched runs on ``D_mu`` (GD first)."""
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
            "official values: LE-SAM (paper) σ = 0.35 warm-up+cosine, ρ_max = 0.3",
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
    """A :func:`flows.simulate` run as arrays (:meth:`flows.results.Trajectory.to_arrays`;
    parameters as for a ``'simulate'`` task, schedules by spec) with the series of
    :func:`analysis.lesam.perturbation_along` (unless ``"perturbation": False``);
    ``"sharpness": True`` adds the Hessian trace and top eigenvalue
    (:func:`analysis.sharpness.sharpness_along`)."""
    data, rest = simulate_arguments(params)
    with_sharpness = bool(rest.pop("sharpness", False))
    with_perturbation = bool(rest.pop("perturbation", True))
    traj = simulate(data, **rest)
    loss = rest.get("loss", DEFAULT_LOSS)
    out = traj.to_arrays()
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
    "lesam-run",
    lesam_run,
    cost=lambda p: 0.3 + 0.002 * p.get("n_points", 201),
    keys=RUN_KEYS[:9],
    kernels=flow_kernels,
)
register(
    "lesam-classify",
    lesam_classify,
    cost=lambda p: 0.08 * len(p["points"]),
    keys=("regime",),
    kernels=lambda p: flow_kernels({}),
)
register(
    "lesam-scan",
    lesam_scan,
    cost=lambda p: 0.1 * len(p["grid"]) + 1.5,
    keys=("regime", "leaders", "lower", "upper", "below", "above", "converged"),
    kernels=lambda p: flow_kernels({}),
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


# ------------------------------------------------------------------ multi-sample data


def matched(X, y, alpha: float, depth: int, t_end: float) -> list[tuple[str, str, dict, str]]:
    """(key, algorithm, hyper-parameters, label) matched to l2-SAM rho = 1 at theta(0) on (X, y)."""
    g0 = initial_gradient_norm(Dataset(np.asarray(X), np.asarray(y)), alpha, depth)
    return [
        ("gd", "gd", {}, "gd: GD"),
        ("l2", "l2-sam", {"rho": 1.0}, "l2: ℓ2-SAM ρ = 1"),
        ("usam", "usam", {"rho": 1.0 / g0}, "usam: USAM ρ = 1/‖∇L₀‖"),
        ("le15", "le-sam", {"sigma": g0, "rho_max": 1.5}, "le15: LE-SAM σ = ‖∇L₀‖, ρ_max = 1.5"),
        ("le3", "le-sam", {"sigma": g0, "rho_max": 3.0}, "le3: LE-SAM σ = ‖∇L₀‖, ρ_max = 3"),
        (
            "wc3",
            "le-sam",
            {"sigma": warmup(g0, t_end), "rho_max": 3.0},
            "wc3: LE-SAM warm-up+cosine σ = ‖∇L₀‖, ρ_max = 3",
        ),
        (
            "official",
            "le-sam",
            {"sigma": warmup(OFFICIAL["sigma"], t_end), "rho_max": OFFICIAL["rho_max"]},
            "official values: LE-SAM (paper) σ = 0.35 warm-up+cosine, ρ_max = 0.3",
        ),
    ]


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
