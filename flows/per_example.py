"""Per-example SAM (m-sharpness with m = 1): every example perturbed by its own gradient.

For an algorithm whose table entry sets ``per_example`` (``1-sam``, ``1-usam``) the flow is

    dtheta/dt = -(1/n) sum_i grad l_i(theta + eps_i),   eps_i = eps(grad l_i(theta)),

with ``l_i(theta) = l(u_i(theta))`` the loss of example ``i`` alone and ``eps`` the entry's
perturbation (``rho g / ||g||`` for ``1-sam``, ``rho g`` for ``1-usam``) applied to the
gradient ``g = grad l_i`` of that example. In the engine's form (:mod:`flows.model`):
``grad l_i(theta_i) = -|l'(u_i(theta_i))| s_i z_i * prod_{k != l} theta_i^(k)``
(``s_i = sign(-l')``), so with ``c = (1/n) sum_i |l'(u_i(theta_i))|`` the rescaled field is

    F = sum_i q_i z_i * prod_{k != l} theta_i^(k),   q_i = s_i |l'(u_i(theta_i))| / (n c).

:func:`per_example_velocity` evaluates it for a batch of points (axes ``(..., G, d)``; the
examples are one more batch axis): in plain floats where every quantity is far inside the
float64 range (:func:`_float_velocity`), in signed-log arithmetic otherwise.
"""

from __future__ import annotations

import numpy as np

from .algorithms import GradientSummary
from .field import Velocity, gradient_summary
from .signedlog import SignedLog, add_float, signed_sum


def _log_sum_exp(a: np.ndarray, axis: int) -> np.ndarray:
    """``log sum exp(a)`` along ``axis`` (kept with size 1), -inf where every entry is -inf."""
    top = np.max(a, axis=axis, keepdims=True)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(
            np.isfinite(top), safe + np.log(np.sum(np.exp(a - safe), axis=axis, keepdims=True)), top
        )


def _example_terms(fused, sign: np.ndarray, log_abs: np.ndarray, own: bool):
    """``log|l'(u_i)|``, ``s_i``, the leave-one-out products and the margins ``<beta, z_i>`` at
    the points ``(sign, log_abs)``: of shape (..., G, d) with every example (``own=False``), or
    (..., n, G, d) with point ``i`` evaluated on example ``i`` only (``own=True``)."""
    loss = fused.problem.loss
    beta = fused.product_of_layers(sign, log_abs)  # (..., d) or (..., n, d)
    top = np.max(beta.log_abs, axis=-1, keepdims=True)
    safe = np.where(np.isfinite(top), top, 0.0)
    scaled_beta = np.where(beta.sign == 0, 0.0, beta.sign * np.exp(beta.log_abs - safe))
    if own:
        scaled = np.sum(scaled_beta * fused.features, axis=-1)  # (..., n)
    else:
        scaled = scaled_beta @ fused.features.T  # (..., n)
    with np.errstate(over="ignore", invalid="ignore"):
        m = np.where(scaled == 0, 0.0, scaled * np.exp(safe[..., 0] if own else safe))
    u = fused.loss_arguments(m)
    log_w = loss.log_abs_derivative(u)
    s = np.ones_like(u) if loss.descent_sign is None else loss.descent_sign(u)
    return log_w, s, fused.leave_one_out(sign, log_abs), m


def _float_velocity(fused, theta: SignedLog, time) -> Velocity | None:
    """:func:`per_example_velocity` in plain floats (the same formulas), or None unless every
    point and every perturbed point is far inside the float range (the range of
    :meth:`flows.fused.FusedField._float_rows`), every ``log|l'(u_i)|`` is finite at ``theta``
    and some is at the perturbed points.

    The sizes ``|l'(u_i)|`` stay in log form, as the signed-log path keeps them: an example's
    gradient ``-s_i |l'(u_i)| h_i`` (``h_i = z_i * prod_{k != l} w^(k)``) has the unit vector
    ``-s_i h_i / ||h_i||`` and ``log`` norm ``log|l'(u_i)| + log ||h_i||``, and the weights are
    ``q_i = s_i e^(a_i - a) / sum_k e^(a_k - a)`` with ``a_i = log|l'(u_i(theta_i))|``,
    ``a = max_i a_i`` and ``log c = a + log sum_k e^(a_k - a) - log n``. Squared, or summed as
    floats, the sizes would underflow once the margins pass ~170 (``|l'|^2 < 1e-308``,
    classification well into training) and lose their digits before that."""
    problem, loss = fused.problem, fused.problem.loss
    log_abs = np.where(theta.sign == 0, 0.0, theta.log_abs)
    if not np.all(fused._float_rows(log_abs, small_matter=False)):
        return None
    w = np.where(theta.sign == 0, 0.0, theta.sign * np.exp(log_abs))
    loo = _float_leave_one_out(fused, w)
    u = fused.loss_arguments(_float_products(fused, w) @ fused.features.T)  # (..., n)
    log_w = loss.log_abs_derivative(u)
    s = np.ones_like(u) if loss.descent_sign is None else loss.descent_sign(u)
    h = s[..., :, None, None] * fused.features[:, None, :] * loo[..., None, :, :]  # -grad / |l'|
    size = np.sqrt(np.sum(fused.layer_weights * h * h, axis=(-2, -1), keepdims=True))
    if not (np.all(size > 0) and np.all(np.isfinite(size)) and np.all(np.isfinite(log_w))):
        return None
    unit = -h / size
    summary = GradientSummary(
        unit,
        np.sign(unit),
        np.log(size) + log_w[..., :, None, None],
        fused.multiplicity,
        log_magnitudes(np.broadcast_to(w[..., None, :, :], h.shape))
        if problem.algorithm.reads_theta
        else None,
    )
    t = np.asarray(time, dtype=float)
    when = float(t) if t.ndim == 0 else t.reshape(t.shape + (1, 1, 1))
    with np.errstate(over="ignore", invalid="ignore"):  # a radius e^(log norm) beyond floats
        eps = problem.algorithm.perturb(summary, fused.hyperparameters(when))
    point = w[..., None, :, :] + eps
    with np.errstate(divide="ignore", invalid="ignore"):
        if not np.all(fused._float_rows(np.log(np.abs(point)), small_matter=False)):
            return None
    m_i = np.sum(_float_products(fused, point) * fused.features, axis=-1)  # (..., n)
    u_i = fused.loss_arguments(m_i)
    log_w_i = loss.log_abs_derivative(u_i)
    top = np.max(log_w_i, axis=-1, keepdims=True)
    if not np.all(np.isfinite(top)):  # every l'(u_i) = 0, or one infinite: the signed-log path
        return None
    s_i = np.ones_like(u_i) if loss.descent_sign is None else loss.descent_sign(u_i)
    sizes = np.exp(log_w_i - top)
    total = np.sum(sizes, axis=-1, keepdims=True)
    field = np.sum(
        (s_i * sizes / total)[..., :, None, None]
        * fused.features[:, None, :]
        * _float_leave_one_out(fused, point),
        axis=-3,
    )
    log_c = top[..., 0] + np.log(total[..., 0]) - fused.log_n
    return Velocity(SignedLog(np.sign(field), log_magnitudes(field)), log_c)


def _float_products(fused, w: np.ndarray) -> np.ndarray:
    """``beta = prod_l w^(l)`` of float points (..., G, d) -> (..., d)."""
    if fused.groups == 1:
        return w[..., 0, :] ** fused.depth
    return np.prod(w, axis=-2)


def _float_leave_one_out(fused, w: np.ndarray) -> np.ndarray:
    """``prod_{k != l} w^(k)`` of float points (..., G, d), without division."""
    if fused.groups == 1:
        return np.ones_like(w) if fused.depth == 1 else w ** (fused.depth - 1)
    if fused.groups == 2:
        return w[..., ::-1, :]
    prefix = np.ones_like(w)
    suffix = np.ones_like(w)
    prefix[..., 1:, :] = np.cumprod(w[..., :-1, :], axis=-2)
    suffix[..., :-1, :] = np.cumprod(w[..., :0:-1, :], axis=-2)[..., ::-1, :]
    return prefix * suffix


def per_example_velocity(fused, theta: SignedLog, time=0.0) -> Velocity:
    """``F`` and ``log c`` of the module docstring at the points ``theta`` (..., G, d), for the
    fused field ``fused`` (:class:`flows.fused.FusedField`) of a per-example algorithm.

    Where every ``l'(u_i(theta_i))`` is 0 (regression at an exact interpolator) ``F = 0`` and
    ``log c = -inf``. Where a margin at ``theta`` or at a ``theta_i`` leaves the float range the
    field is NaN (the solver then ends the run with status -1): the per-example weights are
    computed from float margins.
    """
    fast = _float_velocity(fused, theta, time)
    if fast is not None:
        return fast
    problem = fused.problem
    z_sign, z_log = np.sign(fused.features), log_magnitudes(fused.features)  # (n, d)
    log_w, s, loo, m = _example_terms(fused, theta.sign, theta.log_abs, own=False)
    # grad l_i = -s_i |l'_i| z_i * loo: signs and log-magnitudes (..., n, G, d)
    grad_sign = -(s[..., :, None, None] * z_sign[:, None, :]) * loo.sign[..., None, :, :]
    grad_log = z_log[:, None, :] + loo.log_abs[..., None, :, :]
    point_log_abs = np.broadcast_to(theta.log_abs[..., None, :, :], grad_log.shape)
    summary = gradient_summary(
        SignedLog(grad_sign, grad_log),
        log_w[..., :, None, None],
        fused.multiplicity,
        point_log_abs,
    )
    time = np.asarray(time, dtype=float)
    when = float(time) if time.ndim == 0 else time.reshape(time.shape + (1, 1, 1))
    eps = problem.algorithm.perturb(summary, fused.hyperparameters(when))
    point = add_float(
        SignedLog(np.broadcast_to(theta.sign[..., None, :, :], grad_log.shape), point_log_abs),
        np.where(np.all(np.isfinite(eps), axis=(-2, -1), keepdims=True), eps, np.nan),
    )
    log_w_i, s_i, loo_i, m_i = _example_terms(fused, point.sign, point.log_abs, own=True)
    total = _log_sum_exp(log_w_i, axis=-1)  # (..., 1)
    term_sign = (s_i[..., None, None] * z_sign[:, None, :]) * loo_i.sign
    degenerate = np.isneginf(total)[..., None]  # (..., 1, 1)
    with np.errstate(invalid="ignore"):  # log q_i first: log|l'| may be -1e200, |loo| e^500
        log_q = log_w_i - np.where(np.isneginf(total), 0.0, total)
    term_log = log_q[..., None, None] + z_log[:, None, :] + loo_i.log_abs
    field = signed_sum(term_sign, term_log, axis=-3)
    field_log = field.log_abs
    log_c = total[..., 0] - fused.log_n
    invalid = np.isnan(np.sum(point.log_abs, axis=(-3, -2, -1)))[..., None, None]
    finite = np.all(np.isfinite(m), axis=-1) & np.all(np.isfinite(m_i), axis=-1)
    invalid |= ~finite[..., None, None]
    sign = np.where(degenerate, 0.0, field.sign)
    field_log = np.where(degenerate, -np.inf, field_log)
    if np.any(invalid):  # a non-finite perturbation: the solver must see NaN
        sign, field_log = np.where(invalid, np.nan, sign), np.where(invalid, np.nan, field_log)
        log_c = np.where(invalid[..., 0, 0], np.nan, log_c)
    return Velocity(SignedLog(sign, field_log), log_c)


def log_magnitudes(x: np.ndarray) -> np.ndarray:
    """``log|x|`` (-inf at 0, without a warning)."""
    with np.errstate(divide="ignore"):
        return np.log(np.abs(x))
