"""The runs of the digits study: :func:`simulate_to_loss` (the rescaled-clock flow in chunks,
stopped once the training loss falls below a floor) and the task kind ``'digits_flow'``
(:func:`digits_flow`) that runs it on a pair of digit classes from
:func:`flows.datasets.digits`. Importing this module registers the task kind."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flows.cache import Result, register
from flows.data import Dataset, sign_constrained_separable
from flows.datasets import digits
from flows.integrate import simulate
from flows.results import FAILURE, SUCCESS, Trajectory

from .lesam_radius import initial_gradient_norm
from .saliency import orthant_signs

__all__ = ["ChunkedRun", "digits_flow", "le_sam_budget", "simulate_to_loss"]


@dataclass(frozen=True, eq=False)
class ChunkedRun:
    """A rescaled-clock path assembled from chunks (:func:`simulate_to_loss`).

    ``tau``, ``loss`` (T,); ``log_abs_beta``, ``sign_beta`` (T, d); ``status`` and ``message``
    of the run (0: ended at the loss floor or at ``tau_max``; otherwise the status of the chunk
    that stopped it); ``nfev`` field evaluations in all.
    """

    tau: np.ndarray
    loss: np.ndarray
    log_abs_beta: np.ndarray
    sign_beta: np.ndarray
    status: int
    message: str
    nfev: int


#: ``log|w|`` below which a restarted weight is set to this value (exp would underflow)
_LOG_FLOOR = -700.0


def _restart_alpha(log_abs_theta: np.ndarray, sign_theta: np.ndarray, depth: int) -> np.ndarray:
    """The (depth, d) init that continues a run from its last state: the layer groups expanded
    to layers; an exact 0 (a held or collapsed entry) or a weight below ``e^-700`` restarts at
    ``+-e^-700`` (it contributes ``< e^-700`` to beta)."""
    log_w = np.maximum(log_abs_theta, _LOG_FLOOR)
    w = np.where(sign_theta == 0, 1.0, sign_theta) * np.exp(log_w)
    if w.shape[0] == 1:
        return np.tile(w, (depth, 1))
    return w


def simulate_to_loss(
    data: Dataset,
    algorithm: str,
    depth: int,
    alpha,
    *,
    tau_max: float,
    loss_floor: float,
    chunk: float = 1.0,
    points_per_chunk: int = 10,
    method: str = "LSODA",
    rtol: float = 1e-8,
    max_nfev: int = 30_000,
    max_total_nfev: int | None = None,
    **hyperparameters,
) -> ChunkedRun:
    """The rescaled-clock flow of :func:`flows.simulate`, run in chunks of ``chunk`` in
    ``tau`` and stopped after the first chunk that ends with training loss ``<= loss_floor``
    (or at ``tau_max``, or at a chunk with ``status != 0``: a blow-up or a spent budget).

    Why: on many examples the rescaled field becomes stiff as the loss goes to 0 (presumably as
    the loss weights concentrate, ever more sharply, on the few smallest margins), and an
    integration to a fixed horizon can spend most of its work far past the interesting part
    (digits 0 vs 1, l2-SAM, L = 2: tau in [0, 20] takes 1.6k evaluations, [0, 60] more than
    200k). Each chunk restarts
    :func:`flows.simulate` from the last state (the flow is autonomous in ``tau``, so this is the
    same path up to the solver tolerance); see :func:`_restart_alpha` for entries at 0.

    ``points_per_chunk`` samples per chunk (equally spaced, the chunk's start excluded after the
    first); ``method``, ``rtol`` and ``max_nfev`` apply to each chunk; ``max_total_nfev`` (None:
    no limit) ends the run with status -1 after the first chunk that brings the total number
    of field evaluations above it; hyper-parameters (``rho``, ``sigma``, ``rho_max``) by
    keyword.

    The default solver is LSODA: where the field is stiff it switches to BDF and needs ~10x
    fewer evaluations than DOP853 (e.g. digits 3 vs 8, l2-SAM, tau in [38, 40]: 534 evaluations
    against 7229); at rtol 1e-8 its ``log|beta|`` is within ~1e-7 of a DOP853 run at rtol 1e-10
    (digits 0 vs 1 and 3 vs 8, tau <= 20).
    """
    _check_span(tau_max, chunk, loss_floor)
    solver = {"method": method, "rtol": rtol, "max_nfev": max_nfev, **hyperparameters}
    parts: list[tuple] = []
    tau0, init, nfev = 0.0, alpha, 0
    status, message = SUCCESS, f"reached tau_max = {tau_max:g}"
    while tau0 < tau_max - 1e-12:
        span = min(chunk, tau_max - tau0)
        traj = simulate(
            data, algorithm, depth, init, t_max=span, n_points=points_per_chunk + 1,
            original_time=False, **solver,
        )  # fmt: skip
        nfev += traj.nfev
        parts.append(_chunk_samples(traj, tau0, skip_start=bool(parts)))
        stop = _stop_reason(traj, tau0, tau0 + span, nfev, max_total_nfev, loss_floor)
        if stop is not None:
            status, message = stop
            break
        init = _restart_alpha(traj.log_abs_theta[-1], traj.sign_theta[-1], depth)
        tau0 += span
    tau, loss, lb, sb = (np.concatenate(arrays) for arrays in zip(*parts, strict=True))
    return ChunkedRun(tau, loss, lb, sb, int(status), message, int(nfev))


def _check_span(tau_max: float, chunk: float, loss_floor: float) -> None:
    """``tau_max`` finite > 0, ``chunk`` > 0 and ``loss_floor`` >= 0, else ``ValueError``."""
    if not (np.isfinite(tau_max) and tau_max > 0 and chunk > 0 and loss_floor >= 0):
        raise ValueError(
            "tau_max and chunk must be > 0 and loss_floor >= 0, got "
            f"{tau_max!r}, {chunk!r}, {loss_floor!r}"
        )


def _chunk_samples(
    traj: Trajectory, tau0: float, skip_start: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``tau`` (shifted by the chunk's start ``tau0``), ``loss``, ``log_abs_beta`` and
    ``sign_beta`` of one chunk, without its first sample if ``skip_start`` (it repeats the
    previous chunk's last)."""
    first = int(skip_start)
    return (
        tau0 + traj.tau[first:],
        traj.loss[first:],
        traj.log_abs_beta[first:],
        traj.sign_beta[first:],
    )


def _stop_reason(
    traj: Trajectory,
    tau0: float,
    tau_end: float,
    nfev: int,
    max_total_nfev: int | None,
    loss_floor: float,
) -> tuple[int, str] | None:
    """``(status, message)`` if the run ends after the chunk ``[tau0, tau_end]``: a failed
    chunk, the evaluation budget spent, the loss floor reached or theta collapsed; else None."""
    if traj.status != SUCCESS:
        return traj.status, f"chunk at tau = {tau0:g}: {traj.message}"
    if max_total_nfev is not None and nfev > max_total_nfev:
        return FAILURE, (
            f"{nfev} field evaluations by tau = {tau_end:g}, above the budget "
            f"max_total_nfev = {max_total_nfev}"
        )
    if traj.loss[-1] <= loss_floor:
        return SUCCESS, f"training loss {traj.loss[-1]:.3g} <= {loss_floor:g} at tau = {tau_end:g}"
    if not np.any(traj.sign_theta[-1]):
        return SUCCESS, f"theta collapsed to 0 by tau = {tau_end:g}"
    return None


#: hyper-parameter names a 'digits_flow' task passes on to the flow
_HYPERPARAMETERS = ("rho", "sigma", "rho_max")


def le_sam_budget(
    data: Dataset, alpha: float, depth: int, rho_max: float, start_fraction: float
) -> float:
    """The LE-SAM budget ``sigma`` whose radius starts at ``start_fraction * rho_max``:
    ``rho_0 = sigma / ||grad L(theta_0)||`` (the stabiliser ``varrho = 1e-12`` aside), so
    ``sigma = start_fraction * rho_max * ||grad L(theta_0)||``
    (:func:`analysis.lesam.initial_gradient_norm`, at the balanced init ``alpha``). As the loss falls the gradient
    shrinks and ``rho_t`` rises to ``rho_max`` (LE-SAM then is l2-SAM with ``rho = rho_max``)."""
    if not 0 < start_fraction <= 1:
        raise ValueError(f"start_fraction must be in (0, 1], got {start_fraction!r}")
    return start_fraction * float(rho_max) * initial_gradient_norm(data, float(alpha), int(depth))


def digits_flow(params: dict) -> Result:
    """Task kind ``'digits_flow'``: a flow on digits ``a`` (+1) vs ``b`` (-1).

    Parameters (JSON): ``a``, ``b``, ``seed`` (split, default 0), ``test_fraction`` (0.25);
    ``algorithm``, ``depth``, ``alpha`` (a positive scalar), ``rho`` / ``sigma`` / ``rho_max``;
    ``tau_max``, ``loss_floor``, ``chunk``, ``points_per_chunk``, ``method``, ``rtol``,
    ``max_nfev``, ``max_total_nfev`` (see :func:`simulate_to_loss`); ``sigma_start_fraction``
    sets LE-SAM's ``sigma`` by :func:`le_sam_budget` (with ``rho_max``).

    Initialization: ``|w_j^(l)(0)| = alpha`` in every layer, with ``sign(beta_j(0)) =
    s_j = orthant_signs(train)_j`` (the class a pixel votes for on average; the first layer
    carries the sign). A balanced positive init would keep ``beta >= 0`` at every depth for
    GD / l2-SAM / LE-SAM (and at even depth for l_inf-SAM), and no pair of digit classes is
    separable by a ``beta >= 0``; every pair is separable in the orthant ``s`` (checked here).
    The run is the positive balanced flow on the data with column j multiplied by ``s_j``,
    reflected back (``beta_j = s_j a_j^L``): every algorithm of the table commutes with that
    reflection (:func:`flows.initialization.kept_sign_pattern`), and the reduced balanced
    system integrates much faster than the full signed one (tested to agree).

    Returns ``tau``, ``loss`` (training), ``log_abs_beta``, ``sign_beta`` (in the original
    pixel signs), ``signs``, ``status``, ``message``, ``nfev``.
    """
    flipped, signs = _reflected_training_set(params)
    hp = _flow_hyperparameters(params, flipped)
    run = simulate_to_loss(
        flipped,
        params["algorithm"],
        int(params["depth"]),
        float(params["alpha"]),
        **_chunk_options(params),
        **hp,
    )
    return {
        "tau": run.tau,
        "loss": run.loss,
        "log_abs_beta": run.log_abs_beta,
        "sign_beta": run.sign_beta * signs,
        "signs": signs,
        "status": np.array(run.status),
        "sigma": np.array(hp.get("sigma", np.nan)),
        "message": np.array(run.message),
        "nfev": np.array(run.nfev),
    }


def _reflected_training_set(params: dict) -> tuple[Dataset, np.ndarray]:
    """The training set of digits ``a`` vs ``b`` with column j multiplied by ``s_j``, and the
    orthant signs ``s`` (:func:`analysis.saliency.orthant_signs`); ``ValueError`` if no
    ``beta`` with these signs separates it."""
    train, _ = digits(
        int(params["a"]),
        int(params["b"]),
        float(params.get("test_fraction", 0.25)),
        int(params.get("seed", 0)),
    )
    signs = orthant_signs(train.X, train.y)
    if not sign_constrained_separable(train, signs):
        raise ValueError(
            f"digits {params['a']} vs {params['b']}: no beta with the signs of the "
            "class-mean difference separates the training set"
        )
    return Dataset(train.X * signs, train.y), signs


def _flow_hyperparameters(params: dict, data: Dataset) -> dict:
    """``rho`` / ``sigma`` / ``rho_max`` of the task, with LE-SAM's ``sigma`` from
    ``sigma_start_fraction`` (:func:`le_sam_budget` on ``data``) when given."""
    hp = {k: float(params[k]) for k in _HYPERPARAMETERS if k in params}
    if "sigma_start_fraction" in params:
        hp["sigma"] = le_sam_budget(
            data,
            float(params["alpha"]),
            int(params["depth"]),
            hp["rho_max"],
            float(params["sigma_start_fraction"]),
        )
    return hp


def _chunk_options(params: dict) -> dict:
    """The keywords of :func:`simulate_to_loss` from the task (its defaults where absent)."""
    return {
        "tau_max": float(params["tau_max"]),
        "loss_floor": float(params["loss_floor"]),
        "chunk": float(params.get("chunk", 1.0)),
        "points_per_chunk": int(params.get("points_per_chunk", 10)),
        "method": str(params.get("method", "LSODA")),
        "rtol": float(params.get("rtol", 1e-8)),
        "max_nfev": int(params.get("max_nfev", 30_000)),
        "max_total_nfev": (int(params["max_total_nfev"]) if "max_total_nfev" in params else None),
    }


def digits_flow_cost(params: dict) -> float:
    """Rough seconds of a ``'digits_flow'`` task (measured 0.1 to 2 s; l_inf-SAM, whose pixels
    come to slide on several coupled surfaces, 1.5 to 15 s)."""
    sliding = 8.0 if params.get("algorithm") == "linf-sam" else 1.0
    return sliding * 0.2 * float(params["tau_max"]) / float(params.get("chunk", 1.0)) ** 0.5 / 10.0


register(
    "digits_flow",
    digits_flow,
    cost=digits_flow_cost,
    keys=(
        "tau",
        "loss",
        "log_abs_beta",
        "sign_beta",
        "signs",
        "status",
        "message",
        "nfev",
        "sigma",
    ),
)
