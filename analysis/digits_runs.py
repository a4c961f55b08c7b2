"""The runs of the digits study: the task kind ``'digits_flow'`` (:func:`digits_flow`), a
rescaled-clock flow on a pair of digit classes from :func:`flows.datasets.digits`, stopped
where the training loss falls to a floor. Importing this module registers the task kind."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from flows.data import Dataset, sign_constrained_separable
from flows.datasets import digits
from flows.integrator.driver import simulate
from flows.sweep.registry import Result, flow_kernels, register

from .lesam.radius import initial_gradient_norm
from .saliency import orthant_signs

__all__ = ["digits_flow", "le_sam_budget"]


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
    """Task kind ``'digits_flow'``: a flow on digits ``a`` (+1) vs ``b`` (-1), stopped where
    the training loss falls to ``loss_floor``.

    Parameters (JSON): ``a``, ``b``, ``seed`` (split, default 0), ``test_fraction`` (0.25);
    ``algorithm``, ``depth``, ``alpha`` (a positive scalar), ``rho`` / ``sigma`` / ``rho_max``;
    ``tau_max``, ``loss_floor`` (0: no floor), ``n_points`` (equally spaced samples in
    ``[0, tau_max]``, default 5 per unit of tau), ``method`` (default LSODA), ``rtol`` (1e-8),
    ``max_nfev`` (200,000); ``sigma_start_fraction`` sets LE-SAM's ``sigma`` by
    :func:`le_sam_budget` (with ``rho_max``).

    One :func:`flows.simulate` call in the rescaled clock with ``loss_floor``: the run ends
    where the loss reaches the floor (an event), not at a fixed horizon far past it, where the
    field grows stiff as the loss weights concentrate on the few smallest margins. LSODA
    switches to BDF there and needs ~10x fewer evaluations than DOP853 (digits 3 vs 8, l2-SAM,
    tau in [38, 40]: 534 against 7229); at rtol 1e-8 its ``log|beta|`` is within ~1e-7 of a
    DOP853 run at rtol 1e-10. (Restarting the flow in chunks would lose l_inf-SAM's sliding
    modes: a ``G_j`` kept at 0 by the sliding combination sits ~1e-8 off 0 after the solver's
    drift, and a restart cannot tell it from a ``G_j`` merely near 0.)

    Initialization: ``|w_j^(l)(0)| = alpha`` in every layer, with ``sign(beta_j(0)) =
    s_j = orthant_signs(train)_j`` (the class a pixel votes for on average; the first layer
    carries the sign). A balanced positive init would keep ``beta >= 0`` at every depth for
    GD / l2-SAM / LE-SAM (and at even depth for l_inf-SAM), and no pair of digit classes is
    separable by a ``beta >= 0``; every pair is separable in the orthant ``s`` (checked here).
    The run is the positive balanced flow on the data with column j multiplied by ``s_j``,
    reflected back (``beta_j = s_j a_j^L``): every algorithm of the table commutes with that
    reflection (:func:`flows.initialization.kept_sign_pattern`), and the reduced balanced
    system integrates much faster than the full signed one (tested to agree).

    Returns the run's arrays (:meth:`flows.results.Trajectory.to_arrays`) in the original
    pixel signs (``sign_beta``, and ``sign_theta`` in the first layer, multiplied by ``s``),
    with ``signs`` (``s``) and ``sigma`` (NaN where the algorithm has none).
    """
    flipped, signs = _reflected_training_set(params)
    hp = _flow_hyperparameters(params, flipped)
    run = simulate(
        flipped,
        params["algorithm"],
        int(params["depth"]),
        float(params["alpha"]),
        original_time=False,
        **_run_options(params),
        **hp,
    )
    sign_theta = run.sign_theta.copy()
    sign_theta[:, 0] *= signs
    reflected = replace(run, sign_beta=run.sign_beta * signs, sign_theta=sign_theta)
    return reflected.to_arrays() | {"signs": signs, "sigma": np.array(hp.get("sigma", np.nan))}


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


#: samples per unit of tau where a task gives no ``n_points``
SAMPLES_PER_TAU = 5


def _run_options(params: dict) -> dict:
    """The keywords of :func:`flows.simulate` from the task (the study's defaults where absent);
    ``ValueError`` for a ``tau_max`` that is not > 0 or a ``loss_floor`` < 0."""
    tau_max, floor = float(params["tau_max"]), float(params["loss_floor"])
    if not (np.isfinite(tau_max) and tau_max > 0 and floor >= 0):
        raise ValueError(f"tau_max must be > 0 and loss_floor >= 0, got {tau_max!r}, {floor!r}")
    return {
        "t_max": tau_max,
        "loss_floor": floor if floor > 0 else None,
        "n_points": int(params.get("n_points", round(SAMPLES_PER_TAU * tau_max) + 1)),
        "method": str(params.get("method", "LSODA")),
        "rtol": float(params.get("rtol", 1e-8)),
        "max_nfev": int(params.get("max_nfev", 200_000)),
    }


def digits_flow_cost(params: dict) -> float:
    """Rough seconds of a ``'digits_flow'`` task (measured 0.1 to 2 s; l_inf-SAM, whose pixels
    come to slide on several coupled surfaces, 1.5 to 15 s)."""
    sliding = 8.0 if params.get("algorithm") == "linf-sam" else 1.0
    return sliding * 0.2 * float(params["tau_max"]) / 10.0


register(
    "digits_flow",
    digits_flow,
    cost=digits_flow_cost,
    kernels=lambda p: flow_kernels({"method": "LSODA", **p}),
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


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
