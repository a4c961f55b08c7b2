"""Depth-2 flows whose perturbation is a multiple of the gradient, in coordinates that carry each
coordinate's conserved quantity exactly (``docs/theory.md`` §25).

On ``beta = u * v`` with ``g = dL/dbeta`` at ``theta``, the flow
``dtheta/dt = -grad L(theta + eps)`` with ``eps = K(theta) grad L(theta)``, ``K >= 0`` a scalar
(:attr:`flows.algorithms.Algorithm.gradient_factor`: ``K = 0`` for GD, ``rho`` for USAM,
``rho / ||grad L||_2`` for l2-SAM with ``||grad L||^2 = sum_j g_j^2 (u_j^2 + v_j^2)``,
``rho_t / ||grad L||`` for LE-SAM), perturbs the layers to ``u' = u + a v``, ``v' = v + a u``
with ``a_j = K g_j``, so that

    beta'_j = u'_j v'_j = beta_j (1 + a_j^2) + a_j (u_j^2 + v_j^2),

and with ``gt = dL/dbeta`` at ``beta'`` (``du/dt = -gt v'``, ``dv/dt = -gt u'``)

    d (u_j^2 - v_j^2) / dt = -2 a_j gt_j (u_j^2 - v_j^2),   i.e.  d log|c_j| / dt = -2 a_j gt_j,

for ``c_j = u_j^2 - v_j^2``: GD keeps ``c_j``, the SAM flows change it by a factor, never by a
difference of two large numbers. Writing ``u_j = s_j sqrt(c_j) cosh psi_j``,
``v_j = s_j sqrt(c_j) sinh psi_j`` (``c_j > 0``, ``s_j = sign u_j(0)``; ``u`` and ``v``
exchanged for ``c_j < 0``, ``s_j = sign v_j(0)``),

    d psi_j / dt = -gt_j,   u_j^2 + v_j^2 = |c_j| cosh 2 psi_j,   beta_j = (|c_j| / 2) sinh 2 psi_j.

The state holds ``psi`` (of order ``log(1/alpha)``) and ``log|c_j| - log|c_j(0)|`` (GD: none),
so ``alpha = 1e-300`` with ``c = 1e-600`` is exact. A balanced coordinate (``c_j = 0``,
``|u_j| = |v_j| > 0``) keeps ``c_j = 0`` and its layers' signs and moves in
``l_j = log|beta_j|``: ``d l_j / dt = -2 sign(beta_j) gt_j - 2 a_j gt_j``; ``u_j = v_j = 0``
stays there.

Per-example algorithms (``per_example``: ``1-sam``, ``1-usam``; :mod:`flows.per_example`)
perturb each example by its own gradient, ``eps_i = K_i grad l_i(theta)``, and average
``-grad l_i(theta + eps_i)``: with ``g_i = l'(u_i) z_i`` the example's beta-gradient,
``a_i = K_i g_i`` and ``gt_i`` that gradient at ``beta'_i``,
``d psi / dt = -(1/n) sum_i gt_i`` and ``d log|c| / dt = -(2/n) sum_i a_i gt_i``.

In the original clock the clock factor ``c = (1/n) sum_i |l'|`` at the perturbed points is
integrated beside the state as ``tau``; in the rescaled clock the field is divided by it and
``log t`` is the quadrature of ``1 / c`` along the path afterwards
(:func:`flows.clocks.log_original_time`).

Why: in ``(u, v)`` the two layers of a coordinate that grows far above ``sqrt|c_j|`` agree to
rounding; when it has to shrink back, the unstable mode ``d(u - v)/dt = gt (u - v)`` amplifies
their rounding difference until the layers split
(:func:`flows.integrator.conservation.split_layers`). Here ``c_j`` is a factor of the
representation and no such mode exists.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.integrate import OdeSolution
from scipy.optimize import brentq

from .algorithms import (
    ALGORITHMS,
    Algorithm,
    get_algorithm,
    is_scheduled,
    resolve_hyperparameters,
)
from .charts import SOLVER_RTOL_FLOOR
from .checks import choice, integer, positive
from .clocks import clock_for, get_clock, log_original_time
from .data import Dataset
from .initialization import Initialization, check_depth, initialization
from .integrator.driver import MAX_POINTS
from .integrator.events import COLLAPSE_FRACTION, STATIONARY_TOL
from .integrator.solver import METHODS
from .model import Loss, get_loss, loss_arguments, loss_for
from .results import Cause, FlowEvent, Trajectory
from .signedlog import LOG2, log_norm2

#: Smaller absolute tolerances are raised to it: the state's coordinates are logarithms (of
#: order 1 to ``log(1/alpha)``), and against a tolerance near 1e-200 scipy's error norm of a
#: component that starts at 0 overflows and no step is accepted.
ATOL_FLOOR = 1e-100
#: ``simulate``'s ``chart='auto'`` takes the conserved flow where some ``|u_j^2 - v_j^2|`` of the
#: init is below it (:func:`conserved_applies`).
UNRESOLVED_C = 1e-10
#: ``kind`` of a coordinate: ``c_j > 0``, ``c_j < 0``, balanced (``c_j = 0``), ``u_j = v_j = 0``.
ABOVE, BELOW, BALANCED, ZERO = 1, -1, 0, 2


def log_abs_sinh(x: np.ndarray) -> np.ndarray:
    """``log|sinh x|`` for any float x (``-inf`` at 0): ``|x| - log 2 + log(1 - e^(-2|x|))``."""
    a = np.abs(np.asarray(x, dtype=float))
    with np.errstate(divide="ignore"):
        return a - LOG2 + np.log(-np.expm1(-2.0 * a))


def log_cosh(x: np.ndarray) -> np.ndarray:
    """``log cosh x`` for any float x: ``log(1 + 2 sinh(x/2)^2)`` for ``|x| < 1`` (no
    cancellation near 0), ``|x| - log 2 + log(1 + e^(-2|x|))`` beyond."""
    a = np.abs(np.asarray(x, dtype=float))
    small = np.minimum(a, 1.0)
    return np.where(
        a < 1.0, np.log1p(2.0 * np.sinh(0.5 * small) ** 2), a - LOG2 + np.log1p(np.exp(-2.0 * a))
    )


def _exp_signed(sign: np.ndarray, log_abs: np.ndarray) -> np.ndarray:
    """``sign * exp(log_abs)`` (0 where ``sign = 0``, +-inf beyond float64, no warning)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(sign == 0, 0.0, sign * np.exp(log_abs))


class ConservedCoordinates:
    """The map between ``(u, v)`` and ``(psi, log|c|)``, from the initial layers (2, d).

    Attributes
    ----------
    log_c : ``log|c_j(0)|`` (``-inf`` for balanced and zero coordinates).
    kind : per coordinate :data:`ABOVE` (``|u_j| > |v_j|``), :data:`BELOW`, :data:`BALANCED`
        (``|u_j| = |v_j| > 0``) or :data:`ZERO`.
    signs : ``s_j`` (``sign u_j(0)`` for :data:`ABOVE`, ``sign v_j(0)`` for :data:`BELOW`).
    layer_signs : the signs of the initial layers (2, d), which balanced coordinates keep.
    psi0 : the initial first part of the state: ``psi_j`` (hyperbolic coordinates),
        ``log|beta_j|`` (balanced), 0 (zero).
    """

    def __init__(self, init: np.ndarray):
        u, v = np.asarray(init, dtype=float)
        with np.errstate(divide="ignore"):
            log_c = np.log(np.abs(u - v)) + np.log(np.abs(u + v))
        kind = np.where(np.abs(u) > np.abs(v), ABOVE, np.where(np.abs(u) < np.abs(v), BELOW, 0))
        self.kind = np.where((u == 0) & (v == 0), ZERO, kind)
        self.hyperbolic = np.abs(self.kind) == 1
        self.log_c = np.where(self.hyperbolic, log_c, -np.inf)
        self.signs = np.where(self.kind == ABOVE, np.sign(u), np.sign(v))
        self.layer_signs = np.sign(np.asarray(init, dtype=float))
        balanced_sign = self.layer_signs[0] * self.layer_signs[1]
        self._sign_otherwise = np.where(self.kind == BALANCED, balanced_sign, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(self.kind == ABOVE, np.abs(v) / np.abs(u), np.abs(u) / np.abs(v))
            psi = np.sign(u) * np.sign(v) * np.arctanh(np.where(self.hyperbolic, ratio, 0.0))
            log_beta = np.log(np.abs(u)) + np.log(np.abs(v))
        self.psi0 = np.where(self.kind == BALANCED, log_beta, np.where(self.hyperbolic, psi, 0.0))

    def log_abs_beta(self, psi: np.ndarray, log_c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(log|beta|, sign beta)`` (..., d): ``log|c| - log 2 + log|sinh 2 psi|`` and
        ``sign psi`` (hyperbolic), ``psi`` itself and the layers' signs (balanced)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            two = 2.0 * np.abs(psi)
            hyperbolic = log_c + two - 2.0 * LOG2 + np.log(-np.expm1(-2.0 * two))
        log_beta = np.where(self.hyperbolic, hyperbolic, self._log_beta_otherwise(psi))
        sign = np.where(self.hyperbolic, np.sign(psi), self._sign_otherwise)
        return log_beta, np.where(log_beta == -np.inf, 0.0, sign)

    def log_squares(self, psi: np.ndarray, log_c: np.ndarray) -> np.ndarray:
        """``log(u_j^2 + v_j^2)`` (..., d): ``log|c| + log cosh 2 psi`` (hyperbolic),
        ``log 2 + log|beta|`` (balanced), ``-inf`` (zero)."""
        with np.errstate(invalid="ignore"):
            two = 2.0 * np.abs(psi)
            hyperbolic = log_c + two - LOG2 + np.log1p(np.exp(-2.0 * two))
        return np.where(self.hyperbolic, hyperbolic, LOG2 + self._log_beta_otherwise(psi))

    def _log_beta_otherwise(self, psi: np.ndarray) -> np.ndarray:
        """``log|beta|`` of the coordinates that are not hyperbolic: ``psi`` (balanced),
        ``-inf`` (zero); anything for the others."""
        return np.where(self.kind == BALANCED, psi, -np.inf)

    def layers(self, psi: np.ndarray, log_c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(log|theta|, sign theta)`` (..., 2, d): ``sqrt|c| cosh psi`` and
        ``sqrt|c| |sinh psi|`` (u and v for :data:`ABOVE`, v and u for :data:`BELOW`, the
        sinh layer of sign ``s_j sign psi_j``), ``sqrt|beta|`` each (balanced)."""
        half = 0.5 * log_c
        with np.errstate(invalid="ignore"):
            ch, sh = half + log_cosh(psi), half + log_abs_sinh(psi)
        above = self.kind == ABOVE
        s = self.signs * np.ones_like(psi)
        hyperbolic_abs = (np.where(above, ch, sh), np.where(above, sh, ch))
        hyperbolic_sign = (
            np.where(above, s, s * np.sign(psi)),
            np.where(above, s * np.sign(psi), s),
        )
        log_abs, sign = [], []
        for layer in range(2):
            log_abs.append(
                np.where(
                    self.hyperbolic,
                    hyperbolic_abs[layer],
                    np.where(self.kind == BALANCED, 0.5 * psi, -np.inf),
                )
            )
            sign.append(
                np.where(
                    self.hyperbolic,
                    hyperbolic_sign[layer],
                    np.where(self.kind == BALANCED, self.layer_signs[layer], 0.0),
                )
            )
        return np.stack(log_abs, axis=-2), np.stack(sign, axis=-2)


class _Weights(NamedTuple):
    """The examples' loss slopes at points (batch axes ``...``): ``q_i = -l'(u_i) / sum_k
    |l'(u_k)|`` (..., n) (0 where every ``l'`` is 0), ``log c = log((1/n) sum_i |l'(u_i)|)``
    (...), ``log|l'(u_i)|`` and ``sign(-l'(u_i))`` (..., n)."""

    q: np.ndarray
    log_c: np.ndarray
    log_w: np.ndarray
    descent: np.ndarray


class ConservedField:
    """The field of the flow (module docstring) in the state
    ``z = (psi, log|c| - log|c(0)|, tau)``: the middle part only for a perturbing algorithm,
    ``tau`` only in the original clock (the original time of a rescaled run is a quadrature
    afterwards, :func:`flows.clocks.log_original_time`).

    ``ConservedField(...)(s, z)`` is ``dz/ds``; the methods take states with batch axes
    ``(..., size of z)`` unless they say otherwise."""

    def __init__(
        self,
        data: Dataset,
        algorithm: Algorithm,
        hp: Mapping[str, float],
        loss: Loss,
        coords: ConservedCoordinates,
        original: bool,
    ):
        if algorithm.gradient_factor is None:
            raise ValueError("algorithm must have a gradient_factor for the conserved flow")
        self.data, self.algorithm, self.hp, self.loss = data, algorithm, dict(hp), loss
        self.coords, self.original = coords, original
        self.factor = algorithm.gradient_factor
        self.features = np.asarray(data.signed_features, dtype=float)
        self.log_features = _log_abs(self.features)
        self.log_n = math.log(data.n)
        self.d = data.d
        self.perturbs = algorithm.perturbs
        self.per_example = algorithm.per_example
        self.balanced = coords.kind == BALANCED
        self.moving = coords.hyperbolic | self.balanced

    def initial_state(self) -> np.ndarray:
        """``z(0)``."""
        drift = np.zeros(self.d if self.perturbs else 0)
        return np.concatenate([self.coords.psi0, drift, [0.0] if self.original else []])

    def split(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(psi, log|c|)`` of states."""
        psi = z[..., : self.d]
        if not self.perturbs:
            return psi, self.coords.log_c * np.ones_like(psi)
        return psi, self.coords.log_c + z[..., self.d : 2 * self.d]  # -inf stays -inf

    def beta(self, z: np.ndarray) -> np.ndarray:
        """``beta`` at states (floats, +-inf beyond float64)."""
        log_beta, sign = self.coords.log_abs_beta(*self.split(z))
        return _exp_signed(sign, log_beta)

    def weights(self, products: np.ndarray) -> _Weights:
        """:class:`_Weights` from the products ``<beta, z_i>`` (..., n) (under ``np.errstate``:
        an interpolator has ``log|l'| = -inf``)."""
        loss = self.loss
        u = loss_arguments(products, self.data)
        log_w = loss.log_abs_derivative(u)
        descent = np.ones_like(u) if loss.descent_sign is None else loss.descent_sign(u)
        top = np.max(log_w, axis=-1, keepdims=True)
        safe = np.where(top > -np.inf, top, 0.0)
        w = np.exp(log_w - safe)
        total = np.sum(w, axis=-1, keepdims=True)
        q = np.where(top > -np.inf, descent * w / total, 0.0)
        log_c = np.where(top > -np.inf, safe + np.log(total), -np.inf)[..., 0] - self.log_n
        return _Weights(q, log_c, log_w, descent)

    def perturbation(
        self, weights: _Weights, log_squares: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(log|a|, sign a)`` of ``a = K g`` for the gradients the perturbation acts on: of
        ``g = -c G``, ``G = sum_i q_i z_i`` (shape (..., d)), or of each example's
        ``g_i = -|l'(u_i)| sign(-l'(u_i)) z_i`` (``per_example``, shape (..., n, d)); ``a = 0``
        where the gradient is 0 (``eps = 0`` there). ``log ||g||^2 = log sum_j g_j^2
        (u_j^2 + v_j^2)`` by log-sum-exp (under ``np.errstate``)."""
        if self.per_example:
            log_scale = weights.log_w  # (..., n)
            log_direction = self.log_features  # (n, d)
            sign = -weights.descent[..., None] * np.sign(self.features)
            log_squares = log_squares[..., None, :]
        else:
            direction = np.sum(weights.q[..., None] * self.features, axis=-2)
            log_scale = weights.log_c
            log_direction = np.log(np.abs(direction))
            sign = -np.sign(direction)
        terms = 2.0 * log_direction + log_squares
        top = np.max(terms, axis=-1)
        safe = np.where(top > -np.inf, top, 0.0)
        log_sum = safe + np.log(np.sum(np.exp(terms - safe[..., None]), axis=-1))
        log_norm = log_scale + 0.5 * np.where(top > -np.inf, log_sum, -np.inf)
        log_k = self.factor(log_norm, self.hp)
        log_size = np.where(log_norm > -np.inf, log_k + log_scale, -np.inf)
        return log_size[..., None] + log_direction, sign

    def __call__(self, s: float, z: np.ndarray) -> np.ndarray:
        """``dz/ds`` (NaN where ``beta``, a perturbed point or the margins leave float64)."""
        with np.errstate(all="ignore"):
            first, drift, log_c = self._rates(z)
            parts = [first, drift] if self.perturbs else [first]
            if not self.original:
                return np.concatenate(parts, axis=-1)
            speed = np.exp(log_c)[..., None]
            return np.concatenate([speed * p for p in parts] + [speed], axis=-1)

    def log_speed(self, z: np.ndarray) -> np.ndarray:
        """``log c`` at the perturbed points of states: ``log(dtau/dt)`` (NaN where the field
        is)."""
        with np.errstate(all="ignore"):
            return self._rates(z)[2]

    def _rates(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``dpsi/dtau``, ``d log|c| / dtau`` (rescaled clock) and ``log c`` at the perturbed
        points, under ``np.errstate`` (all NaN where a product ``<beta', z_i>`` is not finite)."""
        coords, features = self.coords, self.features
        psi, log_c = self.split(z)
        log_beta, sign_beta = coords.log_abs_beta(psi, log_c)
        beta = sign_beta * np.exp(log_beta)
        if self.perturbs:
            log_squares = coords.log_squares(psi, log_c)
            log_a, sign_a = self.perturbation(self.weights(beta @ features.T), log_squares)
            rows = (..., None, slice(None)) if self.per_example else (...,)  # a point each
            # beta' = beta (1 + a^2) + a (u^2 + v^2), relative to its largest term
            first = log_beta[rows]
            second, third = first + 2.0 * log_a, log_a + log_squares[rows]
            top = np.maximum(np.maximum(first, second), third)
            safe = np.where(top > -np.inf, top, 0.0)
            scaled = sign_beta[rows] * (np.exp(first - safe) + np.exp(second - safe))
            perturbed = (scaled + sign_a * np.exp(third - safe)) * np.exp(safe)
            if self.per_example:
                products = np.sum(features * perturbed, axis=-1)
            else:
                products = perturbed @ features.T
            a = sign_a * np.exp(log_a)
        else:
            products = beta @ features.T
        finite = np.all(np.isfinite(products), axis=-1)
        at = self.weights(np.where(finite[..., None], products, 0.0))
        rate = at.q @ features  # -gt / c
        if self.per_example:
            drift = 2.0 * np.sum(at.q[..., None] * a * features, axis=-2)
        else:
            drift = 2.0 * a * rate if self.perturbs else np.zeros_like(rate)
        first = np.where(self.balanced, 2.0 * sign_beta * rate + drift, rate)
        first = np.where(self.moving, first, 0.0)
        drift = np.where(coords.hyperbolic, drift, 0.0)
        bad = ~finite[..., None]
        return (
            np.where(bad, np.nan, first),
            np.where(bad, np.nan, drift),
            np.where(finite, at.log_c, np.nan),
        )

    def log_clock_factor(self, z: np.ndarray, collapsed: bool) -> float:
        """``log c`` at the unperturbed point of a state (at ``beta = 0`` if ``collapsed``):
        the rate of the clock once the path rests there (``eps = 0`` at ``grad L = 0``)."""
        beta = np.zeros(self.d) if collapsed else self.beta(z)
        with np.errstate(all="ignore"):
            return float(self.weights(self.features @ beta).log_c)

    def largest_layer(self, z: np.ndarray) -> float:
        """``max log|w|`` over both layers (the collapse threshold's measure)."""
        log_abs, _ = self.coords.layers(*self.split(z))
        return float(np.max(log_abs))

    def stationarity(self, z: np.ndarray) -> float:
        """``log S`` of :class:`flows.integrator.threshold_events.Stationary`: in regression
        ``max_j |G_j| / H_j`` over the coordinates that can move (``u_j^2 + v_j^2 > 0``), else
        ``||G * (v, u)|| / ||H * (v, u)||`` (``G = sum_i q_i z_i``, ``H_j = sum_i |q_i| |z_ij|``
        at ``theta``); ``-inf`` where nothing can move or ``grad L = 0``."""
        beta = self.beta(z)
        log_squares = self.coords.log_squares(*self.split(z))
        with np.errstate(all="ignore"):
            weights = self.weights(self.features @ beta)
            log_g = _log_abs(weights.q @ self.features)
            log_h = _log_abs(np.abs(weights.q) @ np.abs(self.features))
            if self.data.regression:
                movable = log_squares > -np.inf
                ratios = np.where(movable & (log_h > -np.inf), log_g - log_h, -np.inf)
                return float(np.max(ratios, initial=-np.inf))
            top = log_norm2(log_h + 0.5 * log_squares)
            if top == -np.inf:
                return 0.0
            return float(log_norm2(log_g + 0.5 * log_squares) - top)

    def log_loss(self, z: np.ndarray) -> float:
        """``log L(theta)`` by log-sum-exp of ``log l(u_i)``."""
        beta = self.beta(z)
        with np.errstate(all="ignore"):
            log_l = self.loss.log_value(loss_arguments(self.features @ beta, self.data))
            top = float(np.max(log_l))
            if not np.isfinite(top):
                return top
            return top + math.log(float(np.sum(np.exp(log_l - top)))) - self.log_n

    def residuals(self, z: np.ndarray) -> np.ndarray:
        """The loss arguments ``u_i`` at ``theta`` (residuals in regression)."""
        beta = self.beta(z)
        with np.errstate(all="ignore"):
            return loss_arguments(self.features @ beta, self.data)


def _log_abs(x: np.ndarray) -> np.ndarray:
    """``log|x|`` (``-inf`` at 0, no warning)."""
    with np.errstate(divide="ignore"):
        return np.log(np.abs(x))


@dataclass(frozen=True)
class _Event:
    """A threshold the run watches: it fires where ``value(z)`` falls to 0. ``freeze``: theta
    rests from there on (at 0 if ``collapse``) and the run goes on to ``t_max``; else the run
    ends there with ``cause``. ``message(s, tau, z)`` says what happened."""

    kind: str
    value: Callable[[np.ndarray], float]
    cause: Cause
    message: Callable[[float, float, np.ndarray], str]
    freeze: bool = False
    collapse: bool = False


def _events(field: ConservedField, radius: float, loss_floor: float | None) -> list[_Event]:
    """The events of :func:`flows.simulate` that can happen on this path: collapse (radius > 0),
    a stationary point (n > 1), the loss floor, a residual reaching 0 (``residual_switch``)."""
    found = []
    if radius > 0:
        level = math.log(radius) + math.log(COLLAPSE_FRACTION)
        found.append(
            _Event(
                "collapse",
                lambda z: field.largest_layer(z) - level,
                Cause.COLLAPSE,
                lambda s, tau, z: f"theta collapsed to 0 at tau={tau:.6g} and stays there",
                freeze=True,
                collapse=True,
            )
        )
    if field.data.n > 1:
        why = (
            "a critical point of the squared loss (an interpolator where the loss is 0, a "
            "least-squares point or a saddle otherwise)"
            if field.data.regression
            else "the data are not separable by the signs this initialization keeps"
        )
        log_tol = math.log(STATIONARY_TOL)
        found.append(
            _Event(
                "stationary",
                lambda z: field.stationarity(z) - log_tol,
                Cause.STATIONARY,
                lambda s, tau, z: (
                    f"reached a stationary point (grad L = 0, theta != 0) at tau={tau:.6g} and "
                    f"stays there (eps = 0 at grad L = 0); {why}"
                ),
                freeze=True,
            )
        )
    if loss_floor is not None:
        log_floor = math.log(loss_floor)
        found.append(
            _Event(
                "loss floor",
                lambda z: field.log_loss(z) - log_floor,
                Cause.LOSS_FLOOR,
                lambda s, tau, z: (
                    f"training loss reached loss_floor={loss_floor:g} at tau={tau:.10g}"
                ),
            )
        )
    if field.algorithm.residual_switch and field.loss.descent_sign is not None:
        signs = np.sign(field.residuals(field.initial_state()))
        found.append(
            _Event(
                "residual switch",
                lambda z: float(np.min(signs * field.residuals(z))),
                Cause.RESIDUAL_SWITCH,
                lambda s, tau, z: (
                    f"the residual of example {int(np.argmin(np.abs(field.residuals(z))))} "
                    f"reached 0 at t={s:.10g}: there the per-example normalised perturbation "
                    "flips sign and the flow slides on r_i = 0, which this engine does not "
                    "follow; the path up to there is returned"
                ),
            )
        )
    return found


def check_conserved(
    data, algorithm: str, depth, alpha, reduced, hyperparameters: Mapping
) -> tuple[Algorithm, Initialization, dict]:
    """The algorithm entry, initialization (the full system) and hyper-parameters of a run that
    :func:`conserved_flow` integrates: depth 2, an algorithm with a
    :attr:`~flows.algorithms.Algorithm.gradient_factor`, numbers (not schedules) as
    hyper-parameters, ``reduced`` not True. ``ValueError`` naming the parameter that rules it
    out."""
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flows.Dataset, got {type(data).__name__}")
    algo = get_algorithm(algorithm)
    if algo.gradient_factor is None:
        eligible = [k for k, v in ALGORITHMS.items() if v.gradient_factor is not None]
        raise ValueError(
            f"algorithm {algorithm!r} does not perturb along the gradient (eps = K grad L), "
            f"which the conserved flow needs: one of {eligible}"
        )
    if check_depth(depth) != 2:
        raise ValueError(f"depth must be 2 for the conserved flow (beta = u * v), got {depth!r}")
    if reduced:
        raise ValueError("reduced must be None or False for the conserved flow (the full system)")
    init = initialization(alpha, 2, data.d, False if reduced is None else reduced)
    hp = resolve_hyperparameters(algorithm, hyperparameters)
    if is_scheduled(hp):
        name = next(k for k, v in hp.items() if callable(v))
        raise ValueError(f"{name} must be a number for the conserved flow, not a schedule")
    return algo, init, hp


def conserved_applies(
    data, algorithm: str, depth, alpha, reduced, hyperparameters: Mapping
) -> bool:
    """Whether ``simulate``'s ``chart='auto'`` takes :func:`conserved_flow` for this run (in
    regression): :func:`check_conserved` passes, the init is unbalanced, and some coordinate's
    ``|c_j| = |u_j^2 - v_j^2|`` is nonzero and below :data:`UNRESOLVED_C` (from ``u(0) = a``,
    ``v(0) = 0``: ``a < 1e-5``). Above it float64 layers that grow to order 1 keep ``c_j`` to
    1e-6 of itself, and the ``(u, v)`` engine (compiled, 10 to 40 times faster) follows the
    same path."""
    try:
        _, init, _ = check_conserved(data, algorithm, depth, alpha, reduced, hyperparameters)
    except ValueError:
        return False
    coords = ConservedCoordinates(init.groups)
    at_risk = coords.hyperbolic & (coords.log_c < math.log(UNRESOLVED_C))
    return not init.balanced and bool(np.any(at_risk))


def conserved_flow(
    data: Dataset,
    algorithm: str = "gd",
    alpha=1.0,
    *,
    t_max: float = 10.0,
    clock: str | None = None,
    n_points: int = 201,
    loss: str | None = None,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    method: str = "DOP853",
    max_nfev: int = 200_000,
    loss_floor: float | None = None,
    original_time: bool = True,
    **hyperparameters: float | None,
) -> Trajectory:
    """The flow of ``algorithm`` at depth 2 in the coordinates ``(psi, log|c|)`` of the module
    docstring: the path of ``simulate(data, algorithm, 2, alpha, ...)``, which follows it where
    float64 ``(u, v)`` resolves ``c_j = u_j^2 - v_j^2``, at any ``alpha``.

    Parameters
    ----------
    data : a :class:`~flows.data.Dataset` (classification or regression).
    algorithm : a name in :data:`flows.algorithms.ALGORITHMS` whose entry has a
        ``gradient_factor`` ('gd', 'l2-sam', 'usam', 'le-sam', '1-sam', '1-usam').
    alpha : an init at depth 2 (:func:`flows.initialization.initialization`; e.g.
        ``[[a] * d, [0] * d]``, ``u(0) = a``, ``v(0) = 0``), integrated as the full system.
    t_max, clock, n_points, loss, max_nfev, loss_floor, original_time : as for
        :func:`flows.simulate` (``n_points`` at most 1e5; ``clock`` None: 'rescaled' in
        classification, 'original' in regression).
    rtol, atol : tolerances of the solver on ``psi`` (of order ``log(1/alpha)``), on
        ``log|c| - log|c(0)|`` and on ``tau`` (original clock); ``rtol`` below ``100 eps`` is
        taken as ``100 eps`` (:data:`flows.charts.SOLVER_RTOL_FLOOR`), ``atol`` below 1e-100
        as 1e-100 (:data:`ATOL_FLOOR`).
    method : a scipy solver: 'DOP853' (default), 'RK45', 'RK23', 'Radau', 'BDF' or 'LSODA'.
        The explicit ones reject a trial step whose field leaves float64; LSODA may take it,
        and the run then ends there with cause 'left float64'.
    **hyperparameters : the algorithm's hyper-parameters (numbers; schedules are refused).

    Returns
    -------
    Trajectory
        ``backend='conserved'``, ``depth=2``, the full system. ``status`` 0: ``t_max`` reached,
        or the run rests from a collapse (``theta = 0``, where the algorithm's radius is
        positive and every layer falls below ``radius * 1e-12``, the threshold of
        :func:`flows.simulate`) or a stationary point on, or the loss reached ``loss_floor``;
        -1: the budget is spent, a residual reached 0 (``1-sam``), the solver failed (a
        step size that became NaN included), or beta, a perturbed point or a margin left
        float64 (cause 'left float64'). A run that stops early returns the state it
        integrated to as its last sample. Events as in ``simulate``.

    Raises
    ------
    ValueError
        Naming the parameter: bad input, or a run this flow does not integrate
        (:func:`check_conserved`).
    """
    algo, init, hp = check_conserved(data, algorithm, 2, alpha, None, hyperparameters)
    the_loss = get_loss(loss_for(loss, data))
    the_clock = get_clock(clock_for(clock, data))
    t_max = positive(t_max, "t_max")
    n_points = integer(n_points, "n_points", 2, MAX_POINTS)
    max_nfev = integer(max_nfev, "max_nfev", 1)
    rtol, atol = (
        max(positive(rtol, "rtol"), SOLVER_RTOL_FLOOR),
        max(positive(atol, "atol"), ATOL_FLOOR),
    )
    solver = METHODS[choice(method, "method", METHODS)]
    floor = None if loss_floor is None else positive(loss_floor, "loss_floor")
    if not isinstance(original_time, (bool, np.bool_)):
        raise ValueError(f"original_time must be True or False, got {original_time!r}")
    coords = ConservedCoordinates(init.groups)
    field = ConservedField(data, algo, hp, the_loss, coords, the_clock.original)
    events = _events(field, float(algo.radius(hp)), floor)
    path = _Loop(field, events, np.linspace(0.0, t_max, n_points)).run(solver, rtol, atol, max_nfev)
    return _trajectory(field, path, algorithm, method, bool(original_time))


class _BudgetSpent(Exception):
    """The field's evaluations reached ``max_nfev`` inside a step."""


class _NanStep(Exception):
    """The solver asked for the field at a NaN time (its step size became NaN)."""


@dataclass
class _Path:
    """The sampled path: clock times, states, the rows at which theta is 0, how it ended, and
    ``K(s, ref) = -log c`` at the perturbed points with the steps of its two segments (the
    integrated one, and the rest, where the path rests after a collapse or a stationary
    point), for :func:`flows.clocks.log_original_time`."""

    s: np.ndarray
    z: np.ndarray
    zero: np.ndarray
    cause: Cause
    message: str
    events: list[FlowEvent]
    nfev: int
    exponent: Callable[[np.ndarray, np.ndarray], np.ndarray]
    steps: list[np.ndarray]


class _Loop:
    """The solver loop: steps of a scipy solver with the field's evaluations counted inside
    them, the events located on each step's dense output, the grid sampled as it is passed."""

    def __init__(self, field: ConservedField, events: list[_Event], grid: np.ndarray):
        self.field, self.events, self.grid = field, events, grid
        self.s: list[float] = []
        self.z: list[np.ndarray] = []
        self.zero: list[bool] = []
        self.log: list[FlowEvent] = []
        self.nfev = 0
        self.budget = 0
        self.nonfinite = False
        self.steps: list[float] = [0.0]
        self.pieces: list[Callable] = []
        self.end = 0.0  # where the integrated path ends
        self.rest: tuple[np.ndarray, float] | None = None  # the state at rest and its log c

    def rhs(self, s: float, z: np.ndarray) -> np.ndarray:
        """The field, counted; a NaN time or a spent budget leave the step at once."""
        if not math.isfinite(s):
            raise _NanStep
        if self.nfev >= self.budget:
            raise _BudgetSpent
        self.nfev += 1
        out = self.field(s, z)
        if not np.all(np.isfinite(out)):
            self.nonfinite = True
        return out

    def tau(self, s: float, z: np.ndarray) -> float:
        """Rescaled time at a state."""
        return float(z[-1]) if self.field.original else s

    def sample(self, until: float, dense) -> None:
        """Grid points after the last sample up to ``until``, from ``dense``."""
        k = len(self.s)
        later = self.grid[k:][self.grid[k:] <= until]
        if later.size:
            self.s.extend(later.tolist())
            self.z.extend(np.atleast_2d(dense(later).T))
            self.zero.extend([False] * later.size)

    def last(self, s: float, z: np.ndarray) -> None:
        """The state integrated to, as the last sample (if past the last grid sample)."""
        self.end = s
        if not self.s or s > self.s[-1]:
            self.s.append(s)
            self.z.append(np.array(z, dtype=float))
            self.zero.append(False)

    def fire(self, event: _Event, s: float, z: np.ndarray) -> tuple[Cause, str]:
        """Apply ``event`` at ``(s, z)``: the rest of the grid at rest, or the last sample."""
        tau = self.tau(s, z)
        self.log.append(FlowEvent(tau, event.kind))
        message = event.message(s, tau, z)
        self.end = s
        if not event.freeze:
            self.last(s, z)
            return event.cause, message
        log_c = self.field.log_clock_factor(z, event.collapse)
        self.rest = (np.asarray(z, dtype=float), log_c)
        rest = self.grid[len(self.s) :]
        states = np.repeat(np.asarray(z, dtype=float)[None, :], rest.size, axis=0)
        if self.field.original:
            with np.errstate(over="ignore"):
                states[:, -1] = z[-1] + (rest - s) * np.exp(log_c)
        self.s.extend(rest.tolist())
        self.z.extend(states)
        self.zero.extend([event.collapse] * rest.size)
        return event.cause, message

    def first_event(self, s0: float, s1: float, dense) -> tuple[_Event, float] | None:
        """The earliest event whose value falls to 0 within the step ``[s0, s1]``."""
        found: tuple[_Event, float] | None = None
        for event in self.events:
            if not event.value(dense(s1)) <= 0:
                continue
            if not event.value(dense(s0)) > 0:  # already at the step's start
                return event, s0
            root = brentq(
                lambda s, e=event: e.value(dense(s)), s0, s1, xtol=1e-14 * max(1.0, abs(s1))
            )
            if found is None or root < found[1]:
                found = (event, root)
        return found

    def run(self, solver_class, rtol: float, atol: float, max_nfev: int) -> _Path:
        """Integrate from the initial state to the end of the grid, or to where the run ends."""
        self.budget = max_nfev
        t_max = float(self.grid[-1])
        z0 = self.field.initial_state()
        self.last(0.0, z0)
        cause, message = self._integrate(solver_class, z0, t_max, rtol, atol)
        integrated = np.array([t for t in self.steps if t < self.end] + [self.end])
        steps = [integrated] if self.rest is None else [integrated, np.array([self.end, t_max])]
        return _Path(
            np.array(self.s),
            np.array(self.z),
            np.array(self.zero),
            cause,
            message,
            self.log,
            self.nfev,
            self.exponent,
            steps,
        )

    def exponent(self, s: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """``K = -log c`` at the perturbed points of the path at times ``s`` (``ref``: a time
        inside the segment each belongs to)."""
        out = np.empty(len(s))
        resting = np.zeros(len(s), dtype=bool) if self.rest is None else ref > self.end
        if self.rest is not None:
            out[resting] = -self.rest[1]
        if not np.all(resting):
            path = OdeSolution(np.array(self.steps), self.pieces)
            out[~resting] = -self.field.log_speed(path(s[~resting]).T)
        return out

    def _integrate(self, solver_class, z0, t_max, rtol, atol) -> tuple[Cause, str]:
        """The loop of :meth:`run`: its cause and message."""
        if not np.all(np.isfinite(self.rhs(0.0, z0))):
            return Cause.OVERFLOW, _LEFT_FLOAT64.format(s=0.0)
        for event in self.events:
            if event.value(z0) <= 0:
                return self.fire(event, 0.0, z0)
        with np.errstate(all="ignore"):  # a trial step that leaves float64 is the solver's
            try:
                solver = solver_class(self.rhs, 0.0, z0, t_max, rtol=rtol, atol=atol)
            except _BudgetSpent:
                return Cause.BUDGET_SPENT, self._budget_message(0.0, t_max)
            except _NanStep:
                return self._failed(0.0, z0, "its step size became NaN")
            while solver.status == "running":
                s0, y0 = solver.t, solver.y.copy()
                self.nonfinite = False
                try:
                    error = solver.step()
                except _BudgetSpent:
                    self.last(s0, y0)
                    return Cause.BUDGET_SPENT, self._budget_message(s0, t_max)
                except _NanStep:
                    return self._failed(s0, y0, "its step size became NaN")
                except (ValueError, np.linalg.LinAlgError) as failure:  # an implicit method's
                    return self._failed(s0, y0, str(failure))  # linear algebra on NaN
                if solver.status == "failed" or not np.all(np.isfinite(solver.y)):
                    return self._failed(s0, y0, str(error))
                dense = solver.dense_output()
                self.steps.append(solver.t)
                self.pieces.append(dense)
                hit = self.first_event(s0, solver.t, dense)
                if hit is not None:
                    event, root = hit
                    self.sample(root, dense)
                    return self.fire(event, root, dense(root))
                self.sample(solver.t, dense)
        self.end = t_max
        return Cause.REACHED_END, "reached t_max"

    def _budget_message(self, s: float, t_max: float) -> str:
        """The message of a run whose ``max_nfev`` is spent."""
        return (
            f"max_nfev={self.budget} field evaluations spent by s={s:.6g} "
            f"(t_max={t_max:g}); the path up to there is returned"
        )

    def _failed(self, s: float, z: np.ndarray, why: str) -> tuple[Cause, str]:
        """A step from ``(s, z)`` that failed: the cause (the field left float64 during it, or
        the solver failed) and message; ``(s, z)`` is the last sample."""
        self.last(s, z)
        if self.nonfinite:
            return Cause.OVERFLOW, _LEFT_FLOAT64.format(s=s)
        text = f"solver failed at s={s:.6g}: {why}"
        largest = float(np.max(np.abs(self.field(s, z))))
        if largest * max(abs(s), 1.0) * np.finfo(float).eps > 1e-3:
            return Cause.SOLVER_FAILED, (
                f"{text}; the field is {largest:.3g} there, so the flow moves on a time scale "
                f"~{1 / largest:.3g} that the clock cannot resolve: rescale X or y"
            )
        return Cause.SOLVER_FAILED, text


_LEFT_FLOAT64 = (
    "the field is not finite in the step from s={s:.6g}: beta, a perturbed point or a margin "
    "leaves float64 there or where the solver tried its step; the path up to there is returned"
)


def _trajectory(
    field: ConservedField, path: _Path, algorithm: str, method: str, original_time: bool
) -> Trajectory:
    """The :class:`~flows.results.Trajectory` of the sampled path."""
    coords = field.coords
    psi, log_c = field.split(path.z)
    log_beta, sign_beta = coords.log_abs_beta(psi, log_c)
    log_theta, sign_theta = coords.layers(psi, log_c)
    zero = path.zero
    log_beta = np.where(zero[:, None], -np.inf, log_beta)
    sign_beta = np.where(zero[:, None], 0.0, sign_beta)
    log_theta = np.where(zero[:, None, None], -np.inf, log_theta)
    sign_theta = np.where(zero[:, None, None], 0.0, sign_theta)
    beta = _exp_signed(sign_beta, log_beta)
    with np.errstate(all="ignore"):
        arguments = loss_arguments(beta @ field.features.T, field.data)
        losses = np.mean(field.loss.value(arguments), axis=1)
        if field.original:
            tau, log_t = path.z[:, -1], np.log(path.s)
        elif original_time:
            tau, log_t = path.s, log_original_time(path.s, path.steps, path.exponent)
        else:
            tau, log_t = path.s, np.full(path.s.shape, np.nan)
    return Trajectory(
        t=path.s,
        tau=tau,
        log_t_original=log_t,
        log_abs_theta=log_theta,
        sign_theta=sign_theta,
        log_abs_beta=log_beta,
        sign_beta=sign_beta,
        loss=losses,
        status=path.cause.status,
        message=path.message,
        algorithm=algorithm,
        depth=2,
        clock="original" if field.original else "rescaled",
        hyperparameters=dict(field.hp),
        cause=path.cause,
        backend="conserved",
        segment_loops=(f"scipy {method}",),
        events=tuple(path.events),
        nfev=path.nfev,
    )
