"""What the perturbation of a flow's own algorithm does along its trajectory: radius, budget,
first-order and exact loss increase, and how much it turns the update.

``||grad L||`` runs over all ``L*d`` parameters and is computed in signed-log arithmetic
(:func:`flows.model.loss_gradient_signed`), so ``log ||grad L||`` is finite at any margin that
float64 holds and ``-inf`` beyond (the gradient is then 0 to every float precision, and
``rho_t = min(sigma / varrho, rho_max)``, as in the engine).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from flows.algorithms import get_algorithm, hyperparameters_at
from flows.clocks import get_clock
from flows.data import Dataset
from flows.field import Problem, perturbed_point
from flows.model import (
    LOSSES,
    Loss,
    evaluate,
    loss_gradient_signed,
    margin_gradient,
    margins,
)
from flows.results import Trajectory
from flows.signedlog import SignedLog, log_norm2

from .._checks import trajectory
from .radius import check_data, check_loss, lesam_radius, schedule_values

__all__ = ["PerturbationSeries", "log_gradient_norms", "perturbation_along"]


def _samples(traj: Trajectory, data: Dataset) -> Iterator[SignedLog]:
    """Parameters per sample as full-network signed-log points (L, d), after the checks."""
    traj = trajectory(traj)
    data = check_data(data)
    if traj.log_abs_theta.shape[2] != data.d:
        raise ValueError(
            f"data must have d = {traj.log_abs_theta.shape[2]} features like traj, got d = {data.d}"
        )
    for sign, log_abs in zip(traj.sign_theta, traj.log_abs_theta, strict=True):
        yield SignedLog(np.asarray(sign, dtype=float), np.asarray(log_abs, dtype=float))


def log_gradient_norms(traj: Trajectory, data: Dataset, loss: str | None = None) -> np.ndarray:
    """``log ||grad L(theta(t))||_2`` over all ``L*d`` parameters at every sample (T,).

    Signed-log arithmetic (as :func:`flows.model.loss_gradient`, which it equals wherever the
    gradient is a float): finite at any margin inside float64, ``-inf`` at ``theta = 0`` and
    once the loss weights vanish to every precision (margins beyond ~1e308)."""
    lo = LOSSES[check_loss(loss, data)]
    out = []
    for theta in _samples(traj, data):
        ev = evaluate(theta, np.ones(theta.sign.shape[0], dtype=int), data, lo)
        out.append(log_norm2(loss_gradient_signed(ev).log_abs))
    return np.array(out)


@dataclass(frozen=True, eq=False)
class PerturbationSeries:
    """What the perturbation does along a flow, one entry per sample (T,).

    Attributes
    ----------
    t : the run's clock time (schedules are functions of it).
    log_grad_norm : ``log ||grad L(theta)||_2`` (:func:`log_gradient_norms`).
    radius : ``||eps(theta)||_2``: 0 (GD), ``rho`` (l2-SAM), ``rho sqrt(#{g != 0})`` (l_inf-SAM),
        ``rho ||grad L||`` (USAM), ``rho_t`` (LE-SAM, :func:`lesam_radius`).
    budget : LE-SAM's ``sigma(t)`` (NaN for the other algorithms).
    capped : LE-SAM's cap binds (``rho_t = rho_max``); False for the others.
    first_order : ``eps . grad L`` (``rho_t ||grad L||`` for LE-SAM: ``= sigma`` uncapped).
    log_loss, log_loss_perturbed : ``log L(theta)``, ``log L(theta + eps)`` (finite at any
        margin inside float64; ``L(theta + eps) - L(theta) = L expm1(difference)``).
    update_angle : angle (radians) between the algorithm's update ``-grad L(theta + eps)`` and
        the gradient step ``-grad L(theta)``: how much the perturbation (the "curvature signal",
        ``grad L(theta + eps) - grad L(theta) ~ H eps``) turns the step. NaN where either is 0;
        ill-conditioned where the update itself vanishes (at a stall point).
    relative_change : ``||grad L(theta + eps) - grad L(theta)|| / ||grad L(theta)||``: the size
        of that correction against the gradient (0: none; 1 at a stall, where it cancels the
        gradient; ``inf`` where the ratio exceeds float64, NaN where ``grad L(theta) = 0``).
    """

    t: np.ndarray
    log_grad_norm: np.ndarray
    radius: np.ndarray
    budget: np.ndarray
    capped: np.ndarray
    first_order: np.ndarray
    log_loss: np.ndarray
    log_loss_perturbed: np.ndarray
    update_angle: np.ndarray
    relative_change: np.ndarray


def _log_loss(theta: SignedLog, data: Dataset, loss: str) -> float:
    """``log L(theta)``, stable for large margins (``log l(m) ~ -m``)."""
    beta = SignedLog(np.prod(theta.sign, axis=0), np.sum(theta.log_abs, axis=0))
    m = margins(beta, data).to_float()
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        if loss == "logistic":
            big = m > 30.0
            terms = np.where(
                big,
                -m - 0.5 * np.exp(-np.where(big, m, 30.0)),
                np.log(np.logaddexp(0.0, -np.where(big, 30.0, m))),
            )
        else:
            terms = -m
    top = np.max(terms)
    if not np.isfinite(top):
        return float(top)
    return float(top + np.log(np.mean(np.exp(terms - top))))


def _angle(a: SignedLog, b: SignedLog) -> float:
    """Angle between two signed-log vectors (NaN if either is 0)."""
    units = []
    for v in (a, b):
        top = np.max(v.log_abs)
        if not np.isfinite(top):
            return float("nan")
        u = np.where(v.sign == 0, 0.0, v.sign * np.exp(v.log_abs - top))
        units.append(u / np.linalg.norm(u))
    u, w = units
    return float(2.0 * np.arctan2(np.linalg.norm(u - w), np.linalg.norm(u + w)))


def _relative_change(g: SignedLog, g_shifted: SignedLog) -> float:
    """``||g' - g|| / ||g||`` from signed-log vectors, relative to ``||g||`` (no overflow on
    the way; ``inf`` if the ratio does)."""
    log_norm = log_norm2(g.log_abs)
    if not np.isfinite(log_norm):
        return float("nan")
    with np.errstate(over="ignore", invalid="ignore"):
        u = np.where(g.sign == 0, 0.0, g.sign * np.exp(g.log_abs - log_norm))
        v = np.where(
            g_shifted.sign == 0, 0.0, g_shifted.sign * np.exp(g_shifted.log_abs - log_norm)
        )
        out = float(np.linalg.norm(v - u))
    return out if not np.isnan(out) else float("inf")


def _sample_terms(
    theta: SignedLog, problem: Problem, loss: str
) -> tuple[float, float, float, float, float, float]:
    """At one sample: the number of nonzero gradient entries, ``log ||grad L||_1``, the update
    angle, the relative change of the gradient, ``log L(theta)`` and ``log L(theta + eps)``."""
    data, lo, mult = problem.data, problem.loss, problem.multiplicity
    ev = evaluate(theta, mult, data, lo)
    g = loss_gradient_signed(ev)
    top = np.max(g.log_abs)
    log_l1 = top + np.log(np.sum(np.exp(g.log_abs - top))) if np.isfinite(top) else -np.inf
    shifted = perturbed_point(theta, problem)
    ev_shifted = evaluate(shifted, mult, data, lo)
    return (
        float(np.count_nonzero(g.sign)),
        float(log_l1),
        _angle(margin_gradient(ev), margin_gradient(ev_shifted)),
        _relative_change(g, loss_gradient_signed(ev_shifted)),
        _log_loss(theta, data, loss),
        _log_loss(shifted, data, loss),
    )


def _terms_along(traj: Trajectory, points: list[SignedLog], data: Dataset, loss: str) -> np.ndarray:
    """:func:`_sample_terms` at every sample (T, 6), each with the run's own perturbation (its
    algorithm, its hyper-parameters at the sample's clock time)."""
    algo = get_algorithm(traj.algorithm)
    lo: Loss = LOSSES[loss]
    mult = np.ones(traj.log_abs_theta.shape[1], dtype=int)
    clock = get_clock(traj.clock)
    rows = [
        _sample_terms(
            theta,
            Problem(
                data, algo, hyperparameters_at(traj.hyperparameters, traj.t[k]), lo, mult, clock
            ),
            loss,
        )
        for k, theta in enumerate(points)
    ]
    return np.array(rows, dtype=float).reshape(len(points), 6)


def _gradient_norm(log_grad_norm: np.ndarray) -> np.ndarray:
    """``||grad L||`` from its logarithm (0 and ``inf`` where it leaves float64)."""
    with np.errstate(over="ignore", under="ignore"):
        return np.exp(log_grad_norm)


def _radius(
    name: str, log_grad_norm: np.ndarray, hp: Mapping[str, np.ndarray], nonzero: np.ndarray
) -> np.ndarray:
    """``||eps||_2`` of algorithm ``name`` at every sample (formulas of
    :class:`PerturbationSeries`)."""
    if name == "gd":
        return np.zeros(log_grad_norm.shape)
    if name == "l2-sam":
        return np.where(np.isneginf(log_grad_norm), 0.0, hp["rho"])
    if name == "linf-sam":
        return hp["rho"] * np.sqrt(nonzero)
    if name == "usam":
        return hp["rho"] * _gradient_norm(log_grad_norm)
    if name == "le-sam":
        return lesam_radius(log_grad_norm, hp["sigma"], hp["rho_max"], float(hp["varrho"][0]))
    # a new algorithm needs its radius here
    raise ValueError(f"traj.algorithm {name!r} has no radius formula here")  # pragma: no cover


def _first_order(
    name: str,
    radius: np.ndarray,
    log_grad_norm: np.ndarray,
    log_l1: np.ndarray,
    hp: Mapping[str, np.ndarray],
) -> np.ndarray:
    """``eps . grad L``: ``rho ||grad L||_1`` for l_inf-SAM, ``radius ||grad L||_2`` else."""
    with np.errstate(over="ignore", under="ignore"):
        if name == "linf-sam":
            return hp["rho"] * np.exp(log_l1)
        return radius * _gradient_norm(log_grad_norm)


def perturbation_along(
    traj: Trajectory, data: Dataset, loss: str | None = None
) -> PerturbationSeries:
    """Radius, budget, first-order and exact loss increase and update angle of the flow's own
    algorithm (``traj.algorithm``, ``traj.hyperparameters`` at ``traj.t``) at every sample.

    ``data`` and ``loss`` must be those of the run (a Trajectory does not record them). The
    perturbed point is the engine's (:func:`flows.field.perturbed_point`); the radius and the
    first-order term follow the formulas of :class:`PerturbationSeries`.
    """
    loss = check_loss(loss, data)
    points = list(_samples(traj, data))
    name = traj.algorithm
    if get_algorithm(name).per_example:
        raise ValueError(
            f"traj: {name} perturbs every example at its own point; perturbation_along reads "
            "the one perturbed point of the other algorithms"
        )
    lg = log_gradient_norms(traj, data, loss)
    hp = {k: schedule_values(v, traj.t, k) for k, v in traj.hyperparameters.items()}
    nonzero, log_l1, angle, change, log_loss, log_loss_p = _terms_along(traj, points, data, loss).T
    radius = _radius(name, lg, hp, nonzero)
    lesam = name == "le-sam"
    return PerturbationSeries(
        np.asarray(traj.t, dtype=float),
        lg,
        radius,
        hp["sigma"] if lesam else np.full(lg.shape, np.nan),
        radius >= hp["rho_max"] if lesam else np.zeros(lg.shape, dtype=bool),
        _first_order(name, radius, lg, log_l1, hp),
        log_loss,
        log_loss_p,
        angle,
        change,
    )


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
