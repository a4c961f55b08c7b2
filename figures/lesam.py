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

**How the runs are drawn.** Each algorithm in its colour of :mod:`figures.style`; LE-SAM's
variants, all in LE-SAM's colour, by marker (:func:`run_style`); the labels say the values
run.

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

from . import style
from .common import MU5

ALPHA, RHO, DEPTH = 0.4, 1.0, 2
#: ||grad L(theta(0))|| at alpha = 0.4 on mu = (1..5), L = 2 (0.34893)
G0 = initial_gradient_norm(single_example(MU5), ALPHA, DEPTH)
SIGMA0 = RHO * G0
RHO_USAM = RHO / G0
OFFICIAL = {"sigma": 0.35, "rho_max": 0.3}
#: The cap's symbol in labels (mathtext).
CAP = r"$\rho_{\max}$"


def warmup(sigma: float, t_end: float) -> Schedule:
    """The shape of LE-SAM's official budget schedule on ``[0, t_end]`` as a continuous curve
    (10 / 200 warm-up, hold to 160 / 200, cosine to 0); the per-epoch staircase itself is
    :func:`flows.schedules.lesam_official`."""
    return warmup_cosine(sigma, 0.05 * t_end, 0.8 * t_end, t_end)


#: A matched run: (key, algorithm, hyper-parameters, label); the key names its style
#: (:func:`run_style`).
Run = tuple[str, str, dict, str]

#: Markers of LE-SAM's variants, by their place in the list of caps (filled: a constant budget,
#: hollow: the warm-up + cosine schedule), beside the algorithm's own marker.
LE_MARKERS = ("v", "p", "h", "8")


def matched(
    data: Dataset,
    alpha: float,
    depth: int,
    t_end: float,
    rho: float = RHO,
    rho_max: tuple[float, ...] = (1.5, 3.0),
    symbolic: bool = False,
) -> list[Run]:
    """The runs matched to l2-SAM with radius ``rho`` at theta(0) on ``data`` (GD first):
    l2-SAM, USAM ``rho / ||grad L(theta(0))||``, LE-SAM ``sigma = rho ||grad L(theta(0))||``
    with each cap of ``rho_max``, the same budget warmed up and decayed (:func:`warmup`) with
    the last cap, and the official values (:data:`OFFICIAL`) on the same schedule. The labels
    give the matched values, or with ``symbolic`` their formulas (for a legend shared by
    several data sets)."""
    g0 = initial_gradient_norm(data, alpha, depth)
    sigma = rho * g0
    le = style.label("le-sam")
    grad0 = r"$\|\nabla L_0\|$"
    sigma_text = r"$\rho\|\nabla L_0\|$" if symbolic else f"{sigma:.3g}"
    usam_text = f"{rho:g}/{grad0}" + ("" if symbolic else f" = {rho / g0:.3g}")
    return [
        ("gd", "gd", {}, style.label("gd")),
        ("l2", "l2-sam", {"rho": rho}, rf"{style.label('l2-sam')}, $\rho$ = {rho:g}"),
        (
            "usam",
            "usam",
            {"rho": rho / g0},
            rf"USAM, $\rho$ = {usam_text}",
        ),
        *(
            (
                f"le{k}",
                "le-sam",
                {"sigma": sigma, "rho_max": r},
                f"{le}, σ = {sigma_text}, {CAP} = {r:g}",
            )
            for k, r in enumerate(rho_max)
        ),
        (
            f"wc{len(rho_max) - 1}",
            "le-sam",
            {"sigma": warmup(sigma, t_end), "rho_max": rho_max[-1]},
            f"{le}, σ = {sigma_text} warm-up + cosine, {CAP} = {rho_max[-1]:g}",
        ),
        (
            "official",
            "le-sam",
            {"sigma": warmup(OFFICIAL["sigma"], t_end), "rho_max": OFFICIAL["rho_max"]},
            f"{le}, official σ = {OFFICIAL['sigma']:g} warm-up + cosine, "
            f"{CAP} = {OFFICIAL['rho_max']:g}",
        ),
    ]


def compared(
    t_end: float,
    mu: tuple[float, ...] = MU5,
    alpha: float = ALPHA,
    rho: float = RHO,
    rho_max: tuple[float, ...] = (1.5, 3.0),
) -> list[Run]:
    """:func:`matched` on the single example ``D_mu`` at L = 2."""
    return matched(single_example(mu), alpha, DEPTH, t_end, rho, rho_max)


def run_style(key: str) -> dict:
    """Plot keywords of the matched run ``key`` (no label): its algorithm's colour and line
    (:func:`figures.style.algorithm_style`); LE-SAM's variants by marker, one per cap (filled
    for a constant budget, hollow for a schedule, a star for the official values); markers
    spaced along the line, staggered between runs."""
    kind = {"gd": "gd", "l2": "l2-sam", "usam": "usam"}.get(key, "le-sam")
    kw = style.algorithm_style(kind)
    del kw["label"]
    if key.startswith(("le", "wc")):
        kw["marker"] = LE_MARKERS[int(key[2:]) % len(LE_MARKERS)]
    if key.startswith("wc"):
        kw["mfc"] = "white"
    if key == "official":
        kw.update(marker="*", ms=5.0)
    kw["markevery"] = (RUN_ORDER.get(key[:2], 0) * 0.02, 0.15)
    return kw


#: Where each kind of run puts its first marker (staggered so that markers do not coincide).
RUN_ORDER = {"gd": 0, "l2": 1, "us": 2, "le": 3, "wc": 4, "of": 5}

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
    algorithm: str,
    hp: dict,
    t_max: float,
    n_points: int,
    kind: str = "lesam-run",
    mu: tuple[float, ...] = MU5,
    alpha: float = ALPHA,
    **extra,
) -> Task:
    """One run on ``D_mu`` at L = 2 from uniform ``alpha`` (rescaled clock)."""
    params = {
        "mu": tuple(float(m) for m in mu),
        "algorithm": algorithm,
        "depth": DEPTH,
        "alpha": alpha,
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


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
