"""``train``: the discrete algorithms ``theta_{k+1} = theta_k - eta grad L(theta_k + eps_k)`` on
any :class:`~flows.networks.model.NetworkModel`.

The loss is ``L(theta) = (1/n) sum_i l(u_i)`` with ``u_i = y_i f(theta; x_i)`` for a margin
loss (labels +-1) and ``u_i = f(theta; x_i) - y_i`` for the squared loss (the tables
:data:`flows.model.LOSSES`), so ``grad L`` is the model's pullback of ``g`` with
``g_i = l'(u_i) du_i/df / n``. The perturbation ``eps_k`` is the algorithm's entry of
:data:`flows.ALGORITHMS`, applied to ``grad L(theta_k)`` over all parameters at once (one layer
group of multiplicity 1), and the base step is :class:`flows.discrete.BaseOptimizer` (PyTorch's
SGD with momentum and weight decay): the same steps :func:`flows.iterate` takes on the diagonal
network, which :class:`~flows.networks.model.DiagonalNetwork` runs through this loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..algorithms import (
    Algorithm,
    GradientSummary,
    get_algorithm,
    hyperparameters_at,
    is_scheduled,
    resolve_hyperparameters,
)
from ..checks import choice, integer, real_array
from ..clocks import CLOCKS
from ..discrete import BaseOptimizer, base_optimizer, check_budget
from ..model import LOSSES, Loss, get_loss, logsumexp, signed_weights
from ..results import Cause
from ..schedules import Hyperparameter, Schedule
from .model import NetworkModel


@dataclass(frozen=True, eq=False)
class NetworkRun:
    """Iterates of :func:`train`.

    Attributes
    ----------
    steps : (K,) iteration numbers recorded; ``t = steps * eta`` the time in ``clock``
        (``"original"`` or ``"rescaled"``, see :func:`train`).
    theta : (K, size) parameters; ``loss`` (K,) the training loss at each, and ``log_loss``
        its logarithm, finite where the loss underflows (margins past ~745).
    status : 0 finished; -1 a parameter, output or loss left float64 at some step: the run
        stops there, ``message`` says where, and the iterates up to the last finite one are
        kept. ``cause``: ``Cause.REACHED_END`` or ``Cause.OVERFLOW``.
    """

    steps: np.ndarray
    t: np.ndarray
    theta: np.ndarray
    loss: np.ndarray
    log_loss: np.ndarray
    status: int
    message: str
    algorithm: str
    eta: float
    clock: str = "original"
    cause: Cause = Cause.REACHED_END


def loss_gradient(
    model: NetworkModel,
    theta: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    loss: Loss,
    rescaled: bool = False,
) -> tuple[float, np.ndarray]:
    """``(L(theta), grad L(theta))`` by the chain rule through ``model.vjp``; with
    ``rescaled``, ``grad L / c`` instead of ``grad L``, ``c = (1/n) sum_i |l'(u_i)|`` (the
    rescaled clock of :data:`flows.CLOCKS`), from the normalised weights
    ``|l'(u_i)| / (n c)`` (a softmax in log space), so neither factor under- or overflows.
    Where an output ``f(theta; x_i)`` is not finite both are NaN (no longer the loss of a
    float64 model, although a margin loss of ``+inf`` margins would be 0)."""
    f, pullback = model.vjp(theta, X)
    if not np.all(np.isfinite(f)):
        return float("nan"), np.full(np.shape(theta), np.nan)
    u, du_df = _arguments(f, y, loss)
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        log_slope = loss.log_abs_derivative(u)  # log|l'(u)|
        weights = signed_weights(log_slope, u, loss, None if rescaled else 0.0)  # -l'(u)
        scale = 1.0 if rescaled else 1.0 / len(y)
        g = -weights * du_df * scale  # l'(u_i) du_i/df / n, or over n c
    return float(np.mean(loss.value(u))), pullback(g)


def log_mean_loss(
    model: NetworkModel, theta: np.ndarray, X: np.ndarray, y: np.ndarray, loss: Loss
) -> float:
    """``log L(theta) = log (1/n) sum_i l(u_i)`` by log-sum-exp of ``log l(u_i)``."""
    u, _ = _arguments(model.outputs(theta, X), y, loss)
    with np.errstate(divide="ignore"):
        return logsumexp(loss.log_value(u)) - float(np.log(len(y)))


def _arguments(f: np.ndarray, y: np.ndarray, loss: Loss) -> tuple[np.ndarray, np.ndarray]:
    """``u`` and ``du/df``: ``(y f, y)`` for a margin loss, ``(f - y, 1)`` for the squared."""
    if loss.task == "classification":
        return y * f, y
    return f - y, np.ones_like(y)


def summary(grad: np.ndarray, theta: np.ndarray, algorithm: Algorithm) -> GradientSummary:
    """``grad L`` (size,) as the perturbations read it: one group of multiplicity 1."""
    norm = float(np.linalg.norm(grad))
    unit = (grad / norm if norm > 0 else np.zeros_like(grad))[None, :]
    with np.errstate(divide="ignore"):
        log_norm = np.log(norm)
        log_theta = np.log(np.abs(theta))[None, :] if algorithm.reads_theta else None
    return GradientSummary(unit, np.sign(grad)[None, :], log_norm, np.ones(1), log_theta)


def _perturbation(
    algorithm: Algorithm, hp: dict, grad: np.ndarray, theta: np.ndarray
) -> np.ndarray:
    """``eps(theta)`` (size,) from ``grad L(theta)``."""
    return algorithm.perturb(summary(grad, theta, algorithm), hp)[0]


def perturbed_gradient(
    model: NetworkModel,
    theta: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    loss: Loss,
    algorithm: Algorithm,
    hp: dict,
    rescaled: bool = False,
) -> tuple[float, np.ndarray]:
    """``(L(theta), grad L(theta + eps(theta)))`` (over ``c(theta + eps)`` when ``rescaled``);
    for a per-example algorithm ``(1/n) sum_i grad l_i(theta + eps_i)``, ``eps_i`` from
    ``grad l_i(theta)``."""
    value, grad = loss_gradient(model, theta, X, y, loss)
    if not algorithm.perturbs:
        return value, loss_gradient(model, theta, X, y, loss, True)[1] if rescaled else grad
    if not algorithm.per_example:
        point = theta + _perturbation(algorithm, hp, grad, theta)
        return value, loss_gradient(model, point, X, y, loss, rescaled)[1]
    total = np.zeros_like(theta)
    for i in range(len(y)):
        rows = slice(i, i + 1)
        g_i = loss_gradient(model, theta, X[rows], y[rows], loss)[1]
        point = theta + _perturbation(algorithm, hp, g_i, theta)
        total += loss_gradient(model, point, X[rows], y[rows], loss)[1]
    return value, total / len(y)


def train(
    model: NetworkModel,
    X: np.ndarray,
    y: np.ndarray,
    theta0: np.ndarray,
    algorithm: str = "l2-sam",
    *,
    eta: float | Schedule = 0.1,
    steps: int = 1000,
    record_every: int = 1,
    loss: str | None = None,
    clock: str = "original",
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    **hyperparameters: Hyperparameter | None,
) -> NetworkRun:
    """Run ``steps`` iterations of ``algorithm`` on ``model`` from ``theta0``.

    Parameters
    ----------
    model : a :class:`~flows.networks.model.NetworkModel` (``ValueError`` naming model for
        another object).
    X : (n, ...) inputs as ``model`` reads them; ``y`` (n,) labels +-1 (margin losses) or
        targets (squared loss).
    theta0 : (size,) initial parameters.
    algorithm, eta, momentum, weight_decay, hyperparameters : as for :func:`flows.iterate`
        (``rho``, ``sigma``, ... a number or a schedule, evaluated at ``t_k = k eta``).
    steps, record_every : iterations, and every how many one is kept (the last always is).
    loss : a key of :data:`flows.model.LOSSES` (default ``"logistic"``).
    clock : ``"original"``: steps ``eta grad L(theta + eps)`` at times ``t_k = k eta``;
        ``"rescaled"``: steps ``eta grad L(theta + eps) / c(theta + eps)``,
        ``c = (1/n) sum_i |l'(u_i)|``, at ``tau_k = k eta`` (the explicit Euler scheme of the
        rescaled flow of :func:`flows.simulate`: its steps grow as the loss falls, so a run
        reaches the late, small-loss part of training in a few thousand steps).
    """
    if not isinstance(model, NetworkModel):
        raise ValueError(
            f"model must be a NetworkModel (with size, outputs and vjp), got {type(model).__name__}"
        )
    algo = get_algorithm(algorithm)
    hp = resolve_hyperparameters(algorithm, hyperparameters)
    rescaled = not CLOCKS[choice(clock, "clock", CLOCKS)].original
    the_loss = get_loss(choice(loss or "logistic", "loss", LOSSES))
    if rescaled and algo.per_example:
        raise ValueError(
            f"clock: a per-example algorithm ({algorithm!r}) runs in the original clock"
        )
    if rescaled and the_loss.task == "regression":
        raise ValueError(
            "clock: the rescaled clock (steps divided by the mean |l'|) is not defined for the "
            "squared loss, whose |l'| vanishes where the model interpolates: use "
            "clock='original'"
        )
    X = real_array(X, "X")
    y = real_array(y, "y", ndim=1)
    if X.shape[0] != y.shape[0] or y.size == 0:
        raise ValueError(f"X and y must hold the same n >= 1 examples, got {X.shape} and {y.shape}")
    if the_loss.task == "classification" and not np.all(np.abs(y) == 1):
        raise ValueError("y: a margin loss needs labels +-1")
    theta = real_array(theta0, "theta0", ndim=1).copy()
    if theta.shape != (model.size,):
        raise ValueError(f"theta0 must have shape ({model.size},), got {theta.shape}")
    base = base_optimizer(eta, momentum, weight_decay)
    steps, record_every = integer(steps, "steps", 1), integer(record_every, "record_every", 1)
    check_budget(steps, record_every, model.size)
    kept_steps, kept, losses, cause, message = _run(
        model, X, y, theta, the_loss, algo, hp, base, steps, record_every, rescaled
    )
    steps_arr = np.array(kept_steps)
    return NetworkRun(
        steps=steps_arr,
        t=steps_arr * base.unit,
        theta=np.array(kept),
        loss=np.array(losses),
        log_loss=np.array([log_mean_loss(model, th, X, y, the_loss) for th in kept]),
        status=cause.status,
        message=message,
        algorithm=algorithm,
        eta=base.unit,
        clock=clock,
        cause=cause,
    )


def _run(model, X, y, theta, loss, algo, hp, base: BaseOptimizer, steps, record_every, rescaled):
    """The recorded steps, iterates and losses, the cause and the message; stops at the first
    non-finite loss, gradient or iterate, keeping the iterates up to the last finite one."""
    scheduled = is_scheduled(hp)
    kept_steps: list[int] = []
    kept: list[np.ndarray] = []
    losses: list[float] = []
    buffer = None
    last: tuple[np.ndarray, float] | None = None  # the last finite iterate and its loss
    for k in range(steps + 1):
        values = hyperparameters_at(hp, k * base.unit) if scheduled else hp
        with np.errstate(over="ignore", invalid="ignore"):
            value, g = perturbed_gradient(model, theta, X, y, loss, algo, values, rescaled)
        if not (np.isfinite(value) and np.all(np.isfinite(g))):
            if last is None:
                kept_steps, kept, losses = [k], [theta.copy()], [float("nan")]
            elif kept_steps[-1] != k - 1:
                kept_steps.append(k - 1)
                kept.append(last[0].copy())
                losses.append(last[1])
            why = "an output or the loss" if not np.isfinite(value) else "the gradient"
            return (
                kept_steps,
                kept,
                losses,
                Cause.OVERFLOW,
                (
                    f"{why} left float64 at step {k}; the iterates up to step {kept_steps[-1]} "
                    "are kept"
                ),
            )
        last = (theta, value)
        if k % record_every == 0 or k == steps:
            kept_steps.append(k)
            kept.append(theta.copy())
            losses.append(value)
        if k == steps:
            break
        buffer = base.direction(g, theta, buffer)
        with np.errstate(over="ignore", invalid="ignore"):
            step = theta - base.rate(k) * buffer
        if not np.all(np.isfinite(step)):
            if kept_steps[-1] != k:
                kept_steps.append(k)
                kept.append(theta.copy())
                losses.append(value)
            return (
                kept_steps,
                kept,
                losses,
                Cause.OVERFLOW,
                (f"an iterate left float64 at step {k + 1}; the iterates up to step {k} are kept"),
            )
        theta = step
    return kept_steps, kept, losses, Cause.REACHED_END, f"ran {steps} steps"
