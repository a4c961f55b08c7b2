"""The L-layer diagonal linear network, its loss and gradient, in signed-log arithmetic.

Model (docs/theory.md §1): ``beta = w^(1) * ... * w^(L)`` (elementwise), loss
``L(theta) = (1/n) sum_i l(u_i)`` of the loss arguments ``u_i = <beta, z_i> - o_i``
(:class:`~flows.data.Dataset`: margins ``u_i = y_i <beta, x_i>`` in classification, residuals
``u_i = <beta, x_i> - y_i`` in regression), gradient ``grad_{w^(l)} L = g * prod_{k != l} w^(k)``
with ``g = (1/n) sum_i l'(u_i) z_i``.

Write ``g = -c G`` with the *clock factor* ``c = (1/n) sum_i |l'(u_i)|`` and the weighted mean
direction ``G = sum_i p_i z_i``, ``p_i = -l'(u_i) / (n c)`` (``sum_i |p_i| = 1``; ``p_i > 0``
for the margin losses, whose ``l' < 0``). ``G`` is bounded for any margins and ``log c`` is
finite far beyond float64: they are computed with log-sum-exp from ``log|l'(u_i)|`` and the
sign of ``-l'(u_i)``, and ``<beta, z_i>`` is kept as ``exp(M) * m_tilde``.

Parameters are stored in groups of identical layers (see :func:`flows.signedlog.leave_one_out`):
``multiplicity = (1,)*L`` is the full network, ``(L,)`` the balanced reduced system.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .checks import choice
from .data import Dataset
from .signedlog import LOG2, SignedLog, leave_one_out, product_of_layers


@dataclass(frozen=True)
class Loss:
    """A loss ``l(u)`` of the loss argument ``u`` by ``log|l'(u)|`` (vectorised), ``l(u)``
    itself, the slope ``d log|l'(u)| / du`` (for the rate of change of the example weights) and
    ``log l(u)`` (finite wherever ``l(u)`` underflows but ``u`` is a float).

    ``task`` is the :class:`~flows.data.Dataset` task it applies to; ``descent_sign`` gives
    ``sign(-l'(u))`` (None: +1 everywhere, the margin losses); ``compiled_id`` is the id of its
    compiled twin in :mod:`flows.compiled._field_kernels` (None: the numpy backend only).
    """

    log_abs_derivative: Callable[[np.ndarray], np.ndarray]
    value: Callable[[np.ndarray], np.ndarray]
    log_derivative_slope: Callable[[np.ndarray], np.ndarray]
    log_value: Callable[[np.ndarray], np.ndarray]
    compiled_id: int | None = None
    task: str = "classification"
    descent_sign: Callable[[np.ndarray], np.ndarray] | None = None


def _logistic(u: np.ndarray) -> np.ndarray:
    """The logistic loss ``log(1 + e^-u) = max(-u, 0) + log1p(e^-|u|)`` (no overflow): the
    formula of ``numpy.logaddexp(0, -u)`` in ufuncs that numpy vectorises, 2.4x faster (the
    loss at the output times). The field's entries keep ``numpy.logaddexp``, whose last bits
    decide ties of l_inf-SAM's sliding surfaces (``tests/test_filippov.py``)."""
    u = np.asarray(u, dtype=float)
    return np.maximum(-u, 0.0) + np.log1p(np.exp(-np.abs(u)))


def _log_logistic(u: np.ndarray) -> np.ndarray:
    """``log log(1 + e^-u)``; beyond ``u = 35`` it is ``-u`` to a relative ``e^-35 / 2``."""
    u = np.asarray(u, dtype=float)
    with np.errstate(divide="ignore"):
        return np.where(u > 35.0, -u, np.log(np.logaddexp(0.0, -np.minimum(u, 35.0))))


def _log_abs(u: np.ndarray) -> np.ndarray:
    """``log|u|`` (-inf at 0, without a warning)."""
    with np.errstate(divide="ignore"):
        return np.log(np.abs(u))


def _reciprocal(u: np.ndarray) -> np.ndarray:
    """``1 / u`` (+-inf at +-0, without a warning)."""
    with np.errstate(divide="ignore"):
        return 1.0 / np.asarray(u, dtype=float)


#: Loss table. Margin losses (classification): logistic ``l(u) = log(1 + e^-u)``
#: (``|l'| = sigmoid(-u)``, slope ``-sigmoid(u)``) and exponential ``e^-u`` (slope -1).
#: Squared loss (regression) ``l(u) = u^2 / 2`` of the residual: ``l' = u``, so ``|l'| = |u|``,
#: ``sign(-l') = -sign(u)``, slope ``1 / u``, ``log l = 2 log|u| - log 2``.
LOSSES: dict[str, Loss] = {
    "logistic": Loss(
        lambda u: -np.logaddexp(0.0, u),
        _logistic,
        lambda u: -np.exp(-np.logaddexp(0.0, -u)),
        _log_logistic,
        compiled_id=0,
    ),
    "exponential": Loss(
        lambda u: -u,
        lambda u: np.exp(-u),
        lambda u: -np.ones_like(u),
        lambda u: -np.asarray(u),
        compiled_id=1,
    ),
    "squared": Loss(
        _log_abs,
        lambda u: 0.5 * np.square(u),
        _reciprocal,
        lambda u: 2.0 * _log_abs(u) - LOG2,
        compiled_id=2,
        task="regression",
        descent_sign=lambda u: -np.sign(u),
    ),
}
#: The loss of :func:`flows.simulate`, :func:`flows.iterate` and ``python -m flows.run`` when
#: none is named, by the task of the data.
DEFAULT_LOSSES = {"classification": "logistic", "regression": "squared"}
DEFAULT_LOSS = DEFAULT_LOSSES["classification"]


def get_loss(name: str) -> Loss:
    """Look ``name`` up in :data:`LOSSES`; ``ValueError`` naming 'loss' if unknown."""
    return LOSSES[choice(name, "loss", LOSSES)]


def loss_for(name: str | None, data: Dataset) -> str:
    """The loss name for ``data``: ``name`` checked against the data's task, or the task's
    default (:data:`DEFAULT_LOSSES`) for None. ``ValueError`` naming 'loss' for an unknown name
    or a loss of the other task (a margin loss on regression targets, the squared loss on
    labels)."""
    if name is None:
        return DEFAULT_LOSSES[data.task]
    loss = get_loss(name)
    if loss.task != data.task:
        suited = sorted(k for k, v in LOSSES.items() if v.task == data.task)
        raise ValueError(
            f"loss {name!r} is a {loss.task} loss and the data are a {data.task} data set "
            f"(task={data.task!r}): use one of {suited}"
        )
    return name


def loss_arguments(products: np.ndarray, data: Dataset) -> np.ndarray:
    """``u_i = <beta, z_i> - o_i`` from the products ``<beta, z_i>`` (..., n): the margins
    themselves in classification, the residuals in regression."""
    return products if data.offsets is None else products - data.offsets


def signed_weights(log_w: np.ndarray, u: np.ndarray, loss: Loss, total=None) -> np.ndarray:
    """``p_i = -l'(u_i) / sum_k |l'(u_k)|`` from ``log_w = log|l'(u)|`` (..., n); ``total`` the
    log-sum-exp of ``log_w`` over the last axis if already known."""
    if total is None:
        total = np.max(log_w, axis=-1, keepdims=True)
        total = total + np.log(np.sum(np.exp(log_w - total), axis=-1, keepdims=True))
    p = np.exp(log_w - total)
    return p if loss.descent_sign is None else p * loss.descent_sign(u)


def logsumexp(a: np.ndarray) -> float:
    """``log sum exp(a)`` of a 1-D array, -inf if every entry is -inf."""
    top = np.max(a)
    if not np.isfinite(top):
        return float(top)
    return float(top + np.log(np.sum(np.exp(a - top))))


class Margins(NamedTuple):
    """Products ``m_i = <beta, z_i> = exp(log_scale) * scaled_i`` (the margins in
    classification, the predictions in regression; ``log_scale = -inf`` when ``beta = 0``)."""

    log_scale: float
    scaled: np.ndarray

    def to_float(self) -> np.ndarray:
        """The margins as floats (+-inf beyond the float64 range)."""
        if self.log_scale == -np.inf:
            return np.zeros_like(self.scaled)
        with np.errstate(over="ignore"):
            scale = np.exp(self.log_scale)
        return np.where(self.scaled == 0, 0.0, self.scaled * scale)


def margins(beta: SignedLog, data: Dataset) -> Margins:
    """``m_i = <beta, z_i>`` as ``exp(M) * (A @ beta_tilde)``, ``M = max_j log|beta_j|``."""
    top = float(np.max(beta.log_abs))
    if top == -np.inf:
        return Margins(-np.inf, np.zeros(data.n))
    scaled_beta = beta.sign * np.exp(beta.log_abs - top)
    return Margins(top, data.signed_features @ scaled_beta)


class LossWeights(NamedTuple):
    """``p_i = -l'(u_i) / sum_k |l'(u_k)|`` and ``log c = log((1/n) sum_i |l'(u_i)|)``."""

    p: np.ndarray
    log_c: float


def loss_weights(m: Margins, data: Dataset, loss: Loss) -> LossWeights:
    """Example weights and clock factor of docs/theory.md §3, stable for any margins.

    When the margins leave the float64 range, ``|l'(m_i)|`` concentrates on the examples of
    smallest scaled margin (the limit of the softmax), and ``log c`` becomes -inf. In regression
    every ``l'(u_i)`` is 0 only at an exact interpolator: then ``p = 0`` and ``log c = -inf``.
    """
    n = m.scaled.shape[0]
    u = loss_arguments(m.to_float(), data)
    log_w = loss.log_abs_derivative(u)
    log_c = logsumexp(log_w) - np.log(n)
    if np.all(log_w == -np.inf):
        if data.regression:
            return LossWeights(np.zeros(n), -np.inf)
        smallest = m.scaled == np.min(m.scaled)
        return LossWeights(smallest / np.sum(smallest), -np.inf)
    return LossWeights(signed_weights(log_w, u, loss, logsumexp(log_w)), log_c)


def mean_direction(weights: LossWeights, data: Dataset) -> SignedLog:
    """``G = sum_i p_i z_i`` in signed-log form."""
    return SignedLog.from_float(weights.p @ data.signed_features)


class Evaluation(NamedTuple):
    """Everything the flow needs at one parameter point."""

    beta: SignedLog
    log_c: float
    direction: SignedLog  # G
    partial_products: SignedLog  # prod_{k != l} w^(k), per group


def evaluate(theta: SignedLog, multiplicity: np.ndarray, data: Dataset, loss: Loss) -> Evaluation:
    """Predictor, clock factor ``c``, direction ``G`` and leave-one-out products at ``theta``."""
    beta = product_of_layers(theta, multiplicity)
    weights = loss_weights(margins(beta, data), data, loss)
    return Evaluation(
        beta, weights.log_c, mean_direction(weights, data), leave_one_out(theta, multiplicity)
    )


def margin_gradient(ev: Evaluation) -> SignedLog:
    """``G * prod_{k != l} w^(k)``: the gradient of the weighted margin, ``-grad L / c``."""
    return SignedLog(
        ev.direction.sign * ev.partial_products.sign,
        ev.direction.log_abs + ev.partial_products.log_abs,
    )


def loss_gradient_signed(ev: Evaluation) -> SignedLog:
    """``grad_{w^(l)} L = -c G * prod_{k != l} w^(k)`` in signed-log form."""
    mg = margin_gradient(ev)
    return SignedLog(-mg.sign, np.where(mg.sign == 0, -np.inf, mg.log_abs + ev.log_c))


def as_theta(theta: np.ndarray, data: Dataset) -> np.ndarray:
    """Validate a parameter array of shape (L, d) for ``data``."""
    theta = np.asarray(theta, dtype=float)
    if theta.ndim != 2 or theta.shape[1] != data.d:
        raise ValueError(f"theta must have shape (L, {data.d}), got {theta.shape}")
    return theta


def loss_value(theta: np.ndarray, data: Dataset, loss: str | None = None) -> float:
    """``L(theta) = (1/n) sum_i l(<beta(theta), z_i> - o_i)`` for a float (L, d) array (``loss``:
    the task's default for None)."""
    theta = as_theta(theta, data)
    beta = np.prod(theta, axis=0)
    u = loss_arguments(data.signed_features @ beta, data)
    return float(np.mean(LOSSES[loss_for(loss, data)].value(u)))


def loss_gradient(theta: np.ndarray, data: Dataset, loss: str | None = None) -> np.ndarray:
    """``grad L(theta)``, shape (L, d), by the same signed-log code the flows use."""
    theta = as_theta(theta, data)
    ev = evaluate(
        SignedLog.from_float(theta),
        np.ones(theta.shape[0], dtype=int),
        data,
        LOSSES[loss_for(loss, data)],
    )
    return loss_gradient_signed(ev).to_float()
