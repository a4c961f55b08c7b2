"""The fused field: the numbers of :mod:`flows.field` in a few array operations, for a batch.

:mod:`flows.field` evaluates the field one point at a time through small, separately tested
signed-log helpers; it is the reference. :class:`FusedField` computes the same quantities
(perturbed point, clock factor ``log c``, rescaled field ``F``, chart velocity) with the steps
merged and for any number of points at once: parameter arrays have shape ``(..., G, d)``, the
leading axes a batch. Two uses:

* one point per call inside ``solve_ivp`` (cheap: about a quarter of the reference's numpy
  calls, and the constant parts, such as the direction ``G = mu`` of a single example or the
  sign products of a frozen l_inf-SAM sign pattern, computed once per problem or segment);
* thousands of points per call for the quadrature of the original time and for assembling a
  trajectory.

The arithmetic is the reference's (signed-log products, log-sum-exp weights, the algorithm
table's perturbations, :func:`~flows.signedlog.add_float`), so both agree to rounding; the
tests compare them.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .algorithms import GradientSummary, hyperparameters_at, is_scheduled
from .charts import LogChart
from .field import Problem, SignPattern, Velocity, gradient_signs, gradient_summary
from .model import logsumexp
from .per_example import per_example_velocity
from .signedlog import SignedLog, add_float


def sign_power(sign: np.ndarray, m: int) -> np.ndarray:
    """``sign ** m`` (a new array) of signs (entries +-1, +-0 or NaN) for an integer ``m >= 1``,
    by repeated squaring: every product of such entries is exact, so the bits are ``**``'s,
    where numpy calls ``pow`` entry by entry for ``m >= 3`` (12 µs for 1005 entries, against
    1 µs for two products)."""
    result, base = None, sign
    while True:
        if m & 1:
            result = base if result is None else result * base
        m >>= 1
        if not m:
            break
        base = base * base
    assert result is not None  # m >= 1
    return result.copy() if result is sign else result


def _signed(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(sign x, log|x|)`` of an ordinary float array."""
    with np.errstate(divide="ignore"):
        return np.sign(x), np.log(np.abs(x))


class FusedField:
    """The field of ``problem`` for batches of points (see the module docstring).

    Parameters
    ----------
    problem : the flow (data, algorithm, hyper-parameters, loss, layer groups, clock, chart).
    """

    def __init__(self, problem: Problem):
        self.problem = problem
        self.features = np.ascontiguousarray(problem.data.signed_features)  # (n, d)
        self.offsets = problem.data.offsets  # (n,) or None
        self.n = problem.data.n
        self.multiplicity = np.asarray(problem.multiplicity)
        self.layer_weights = self.multiplicity[:, None].astype(float)  # (G, 1), for norms
        self.groups = len(self.multiplicity)
        self.depth = int(self.multiplicity.sum())
        if self.groups > 1 and np.any(self.multiplicity != 1):
            raise ValueError("FusedField needs one group of multiplicity L or L groups of 1")
        self.log_n = float(np.log(self.n))
        self.scheduled = is_scheduled(problem.hyperparameters)

    @functools.cached_property
    def direction(self) -> tuple[np.ndarray, np.ndarray]:
        """``(sign G, log|G|)`` of one example, where ``p = +-1`` and the direction ``G = +-z``
        is constant in sign (made on first use)."""
        return _signed(self.features[0])

    def hyperparameters(self, time=0.0) -> dict:
        """The hyper-parameters at clock time ``time`` (an array of shape (..., 1, 1) for a
        batch of points): the problem's own unless some are schedules."""
        if not self.scheduled:
            return self.problem.hyperparameters
        return hyperparameters_at(self.problem.hyperparameters, time)

    # ------------------------------------------------------------------ network

    def product_of_layers(self, sign: np.ndarray, log_abs: np.ndarray) -> SignedLog:
        """``beta = prod_l w^(l)``: (..., G, d) -> (..., d) (``log|beta| = -inf`` wherever
        ``sign beta = 0``)."""
        if self.groups == 1:
            m = self.depth
            out_sign = sign_power(sign[..., 0, :], m)
            out_log = m * log_abs[..., 0, :]
        else:
            out_sign = np.prod(sign, axis=-2)
            out_log = np.sum(log_abs, axis=-2)
        return SignedLog(out_sign, _where(out_sign == 0, -np.inf, out_log))

    def leave_one_out(self, sign: np.ndarray, log_abs: np.ndarray) -> SignedLog:
        """``prod_{k != l} w^(k)`` per group, without division (exact zeros stay exact)."""
        if self.groups == 1:
            m = self.depth
            if m == 1:
                return SignedLog(np.ones_like(sign), np.zeros_like(log_abs))
            return SignedLog(sign_power(sign, m - 1), (m - 1) * log_abs)
        if self.groups == 2:
            out_sign, out_log = sign[..., ::-1, :], log_abs[..., ::-1, :]
        else:
            out_sign = _exclusive(sign, np.multiply, 1.0)
            out_log = _exclusive(log_abs, np.add, 0.0)
        return SignedLog(out_sign, np.where(out_sign == 0, -np.inf, out_log))

    def log_loss(self, theta: SignedLog) -> float:
        """``log L(theta)`` at one point, ``L = (1/n) sum_i l(m_i)``: the log-sum-exp of the
        ``log l(m_i)``, finite far below the float range of ``L``."""
        m = self.margins(self.product_of_layers(theta.sign, theta.log_abs))
        return logsumexp(self.problem.loss.log_value(self.loss_arguments(m))) - self.log_n

    def loss_arguments(self, m: np.ndarray) -> np.ndarray:
        """``u = m - o`` (:func:`flows.model.loss_arguments`)."""
        return m if self.offsets is None else m - self.offsets

    def margins(self, beta: SignedLog) -> np.ndarray:
        """Products ``m_i = <beta, z_i>`` (..., n) as floats (+-inf beyond float64)."""
        scaled, safe = self._scaled_margins(beta)
        zero = scaled == 0
        with np.errstate(over="ignore", invalid="ignore"):
            return _where(zero, 0.0, _times(scaled, np.exp(safe)))

    def _margins(self, beta: SignedLog) -> tuple[np.ndarray, np.ndarray]:
        """Margins as floats and scaled by ``exp(-max_j log|beta_j|)`` (exact zeros kept)."""
        scaled, safe = self._scaled_margins(beta)
        with np.errstate(over="ignore", invalid="ignore"):
            m = scaled * np.exp(safe)
        return _where(scaled == 0, 0.0, m), scaled

    def _scaled_margins(self, beta: SignedLog) -> tuple[np.ndarray, np.ndarray]:
        """``A (sign beta exp(log|beta| - M))`` (..., n) and ``M = max_j log|beta_j|`` (..., 1)
        (0 where not finite): the margins are ``exp(M)`` times the first. The temporaries are
        written in place."""
        top = beta.log_abs.max(axis=-1, keepdims=True)
        safe = np.where(np.isfinite(top), top, 0.0)
        terms = np.subtract(beta.log_abs, safe)
        np.exp(terms, out=terms)
        return _times(terms, beta.sign) @ self.features.T, safe

    def weights(self, beta: SignedLog) -> tuple[np.ndarray | None, np.ndarray]:
        """Example weights ``p`` (..., n) and ``log c`` (...) from the predictor.

        As :func:`flows.model.loss_weights`: margins ``m = exp(M) (A beta~)`` with
        ``M = max_j log|beta_j|``, ``p_i = -l'(u_i) / sum_k |l'(u_k)|`` (signed in
        regression); when every ``|l'(u_i)|`` underflows the weights concentrate on the smallest
        scaled margins (regression: are 0) and ``log c = -inf``. ``p`` is None for one example
        of a margin loss (``p = 1``).
        """
        return self.margins_and_weights(beta)[1:]

    def margins_and_weights(
        self, beta: SignedLog
    ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """The margins (:meth:`margins`) and the weights (:meth:`weights`) in one pass."""
        m, scaled = self._margins(beta)
        loss = self.problem.loss
        u = self.loss_arguments(m)
        log_w = loss.log_abs_derivative(u)
        if self.n == 1 and loss.descent_sign is None:
            return m, None, log_w[..., 0]
        w_top = np.max(log_w, axis=-1, keepdims=True)
        degenerate = np.isneginf(w_top)
        w_safe = np.where(degenerate, 0.0, w_top)
        e = np.exp(log_w - w_safe)
        total = np.where(degenerate, 1.0, np.sum(e, axis=-1, keepdims=True))
        log_c = np.where(degenerate, -np.inf, w_safe + np.log(total))[..., 0] - self.log_n
        p = e / total  # every l'(u_i) = 0 (an exact interpolator): p = 0
        if loss.descent_sign is not None:
            p = p * loss.descent_sign(u)
        elif np.any(degenerate):
            smallest = scaled == np.min(scaled, axis=-1, keepdims=True)
            p = np.where(degenerate, smallest / np.sum(smallest, axis=-1, keepdims=True), p)
        return m, p, log_c

    def evaluate(
        self, sign: np.ndarray, log_abs: np.ndarray
    ) -> tuple[SignedLog, np.ndarray, SignedLog]:
        """Direction ``G`` (..., d), ``log c`` (...) and leave-one-out products at ``theta``."""
        p, log_c = self.weights(self.product_of_layers(sign, log_abs))
        direction = self.direction if p is None else _signed(p @ self.features)
        return SignedLog(*direction), log_c, self.leave_one_out(sign, log_abs)

    # ------------------------------------------------------------------ field

    def pattern_signs(self, pattern: SignPattern | None) -> np.ndarray | None:
        """``sign(grad L)`` of a frozen sign pattern (constant over a segment; shape (..., G, d)
        for a pattern with leading batch axes)."""
        return None if pattern is None else gradient_signs(pattern, self.multiplicity)

    def perturbed_point(
        self,
        sign: np.ndarray,
        log_abs: np.ndarray,
        pattern_signs: np.ndarray | None = None,
        time=0.0,
    ) -> SignedLog:
        """``theta' = theta + eps(theta)`` (see :func:`flows.field.perturbed_point`);
        ``pattern_signs`` (frozen ``sign(grad L)``) from :meth:`pattern_signs`; ``time`` the clock time (a float, or
        one per point of a batch)."""
        algorithm = self.problem.algorithm
        if not algorithm.perturbs:
            return SignedLog(sign, log_abs)
        direction, log_c, loo = self.evaluate(sign, log_abs)
        d_sign = direction.sign[..., None, :]
        grad_sign = -d_sign * loo.sign if pattern_signs is None else pattern_signs
        grad = gradient_summary(
            SignedLog(grad_sign, direction.log_abs[..., None, :] + loo.log_abs),
            np.asarray(log_c)[..., None, None],
            self.multiplicity,
            log_abs,
        )
        eps = algorithm.perturb(grad, self.hyperparameters(_batch_time(time, sign)))
        finite = np.all(np.isfinite(eps), axis=(-2, -1), keepdims=True)
        if not np.all(finite):
            eps = np.where(finite, eps, np.nan)
        return add_float(SignedLog(sign, log_abs), eps)

    def velocity(
        self, theta: SignedLog, pattern_signs: np.ndarray | None = None, time=0.0
    ) -> Velocity:
        """``F = G(theta') prod_{k != l} theta'^(k)`` and ``log c(theta')`` (in plain floats when
        every point of the batch is inside the float range, see :meth:`_float_velocity`)."""
        if self.problem.algorithm.per_example:
            return per_example_velocity(self, theta, time)
        fast = self._float_velocity(theta, pattern_signs, time)
        if fast is not None:
            return fast
        point = self.perturbed_point(theta.sign, theta.log_abs, pattern_signs, time)
        direction, log_c, loo = self.evaluate(point.sign, point.log_abs)
        sign = direction.sign[..., None, :] * loo.sign
        log_abs = direction.log_abs[..., None, :] + loo.log_abs
        invalid = np.isnan(np.sum(point.log_abs, axis=(-2, -1), keepdims=True))
        if np.any(invalid):  # a non-finite perturbation: the solver must see NaN, as with
            sign = np.where(invalid, np.nan, sign)  # the reference field
            log_abs = np.where(invalid, np.nan, log_abs)
        return Velocity(SignedLog(sign, log_abs), log_c)

    def log_c(
        self, theta: SignedLog, pattern_signs: np.ndarray | None = None, time=0.0
    ) -> np.ndarray:
        """``log c(theta')`` (...): the clock factor at the perturbed point (in plain floats
        for the points where they suffice, see :meth:`_float_rows`)."""
        if self.problem.algorithm.per_example:
            return np.asarray(per_example_velocity(self, theta, time).log_c)
        out = np.empty(theta.sign.shape[:-2])
        time = np.broadcast_to(np.asarray(time, dtype=float), out.shape)
        fast = self._float_rows(theta.log_abs, small_matter=False)
        if np.any(fast):
            floats = self._float_perturbed(
                theta.sign[fast] * np.exp(theta.log_abs[fast]), pattern_signs, time[fast]
            )
            if floats is None:
                fast[...] = False
            else:
                out[fast] = self._float_evaluate(floats)[1]
        slow = ~fast
        if np.any(slow):
            point = self.perturbed_point(
                theta.sign[slow], theta.log_abs[slow], pattern_signs, time[slow]
            )
            out[slow] = self.weights(self.product_of_layers(point.sign, point.log_abs))[1]
        return out

    def chart_rhs(
        self,
        z: np.ndarray,
        held: np.ndarray,
        pattern_signs: np.ndarray | None = None,
        time: float = 0.0,
    ) -> np.ndarray:
        """``d(z, tau)/ds`` for one flat chart state ``z`` (see :func:`flows.field.chart_rhs`).

        In ordinary floats (:meth:`_float_rhs`) while every quantity is far inside the float64
        range, in signed-log arithmetic otherwise.
        """
        problem = self.problem
        z = z.reshape(problem.shape)
        fast = self._float_rhs(z, held, pattern_signs, time)
        if fast is not None:
            return fast
        vel = self.velocity(problem.chart.state(z), pattern_signs, time)
        log_speed = problem.clock.log_speed(vel.log_c)
        dw = SignedLog(vel.dtheta.sign, vel.dtheta.log_abs + log_speed)
        dz = np.where(held, 0.0, problem.chart.velocity(dw, z))
        return np.append(dz.ravel(), np.exp(log_speed))

    # ------------------------------------------------------------------ float fast path

    def _float_rows(self, log_abs: np.ndarray, small_matter: bool = True) -> np.ndarray:
        """Which points (leading axes of ``log_abs``, shape (..., G, d)) plain floats represent.

        At such a point the largest ``|w|^L`` is within ``exp(+-FLOAT_RANGE)`` (margins, norms
        and loss weights far from overflow and underflow) and, if ``small_matter``, the smallest
        ``|w|^L`` above ``exp(-4 FLOAT_RANGE)`` (products of L parameters stay normal floats, no
        exact zeros). Small parameters matter for the velocity in the log chart (``dz = F / w``
        at relative precision); they do not for ``log c`` (their share of the margins is below
        rounding) nor in the asinh chart, where they are far below its absolute tolerance.
        """
        with np.errstate(invalid="ignore"):
            top = self.depth * log_abs.max(axis=(-2, -1))
            ok = (top > -FLOAT_RANGE) & (top < FLOAT_RANGE)
            if small_matter:
                ok &= self.depth * log_abs.min(axis=(-2, -1)) > -4.0 * FLOAT_RANGE
            return ok

    def _float_evaluate(
        self, theta: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | float, np.ndarray]:
        """Direction ``G`` (..., d), ``log c`` (...) and leave-one-out products at float
        parameters ``theta`` (..., G, d); at one point (G, d) ``log c`` is a float."""
        if theta.ndim == 2:
            return self._point_evaluate(theta)
        beta, loo = self._float_products(theta)
        loss = self.problem.loss
        u = self.loss_arguments(beta @ self.features.T)
        log_w = loss.log_abs_derivative(u)
        if loss.descent_sign is None:
            if self.n == 1:
                return self.features[0], log_w[..., 0], loo
            top = log_w.max(axis=-1, keepdims=True)
            e = np.exp(log_w - top)
            total = e.sum(axis=-1, keepdims=True)
            return ((e / total) @ self.features, (top + np.log(total))[..., 0] - self.log_n, loo)
        # signed weights; every l'(u_i) = 0 (an exact interpolator): p = 0, log c = -inf
        top = log_w.max(axis=-1, keepdims=True)
        exact = np.isneginf(top)
        e = np.exp(log_w - np.where(exact, 0.0, top))
        total = e.sum(axis=-1, keepdims=True)
        p = e * loss.descent_sign(u) / np.where(exact, 1.0, total)
        log_c = np.where(exact, -np.inf, top + np.log(np.where(exact, 1.0, total)))
        return p @ self.features, log_c[..., 0] - self.log_n, loo

    def _float_products(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``beta = prod_l w^(l)`` (..., d) and the leave-one-out products (..., G, d) of float
        parameters ``theta`` (..., G, d)."""
        if self.groups == 1:
            m = self.depth
            return theta[..., 0, :] ** m, theta if m == 2 else theta ** (m - 1)
        loo = theta[..., ::-1, :] if self.groups == 2 else _exclusive(theta, np.multiply, 1.0)
        return np.prod(theta, axis=-2), loo

    def _point_evaluate(self, theta: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
        """:meth:`_float_evaluate` at one point ``theta`` (G, d), with ``log c`` a float: the
        same operations in the same order (the same bits), without the batch axes.

        ``G = sum_i p_i z_i`` with ``p = e / sum e``, ``e_i = exp(log|l'(u_i)| - top)`` (times
        the descent signs of a signed loss), ``log c = top + log sum e - log n``.
        """
        beta, loo = self._float_products(theta)
        loss = self.problem.loss
        u = self.loss_arguments(beta @ self.features.T)
        log_w = loss.log_abs_derivative(u)
        if self.n == 1 and loss.descent_sign is None:
            return self.features[0], float(log_w[0]), loo
        top = log_w.max()
        if top == -np.inf:  # every l'(u_i) = 0 (an exact interpolator): p = 0, log c = -inf
            return np.zeros(self.features.shape[1]), -math.inf, loo
        e = np.exp(log_w - top)
        total = e.sum()
        p = e / total if loss.descent_sign is None else e * loss.descent_sign(u) / total
        return p @ self.features, float(top + np.log(total)) - self.log_n, loo

    def float_point(
        self, w: np.ndarray, pattern_signs: np.ndarray | None = None, time=0.0
    ) -> np.ndarray | None:
        """``theta' = theta + eps(theta)`` in floats at float parameters ``w`` (..., G, d), or
        None unless every point and its perturbation are in the float range (the rows of
        :meth:`log_c`'s float path: small parameters, whose share of the margins is below
        rounding, do not count)."""
        if not self.problem.algorithm.perturbs:
            return w
        with np.errstate(divide="ignore", invalid="ignore"):
            if not np.all(self._float_rows(np.log(np.abs(w)), small_matter=False)):
                return None
        return self._float_perturbed(w, pattern_signs, time)

    def _float_perturbed(
        self, w: np.ndarray, pattern_signs: np.ndarray | None, time=0.0, small_matter=False
    ) -> np.ndarray | None:
        """``theta' = theta + eps(theta)`` in floats (shape (..., G, d)), or None where any
        point leaves the float range (:meth:`_float_rows`) or has a zero gradient (then the
        signed-log path)."""
        problem = self.problem
        if not problem.algorithm.perturbs:
            return w
        direction, log_c, loo = self._float_evaluate(w)
        g = direction[..., None, :] * loo  # -grad L / c
        norm = np.sqrt(np.sum(self.multiplicity[:, None] * g * g, axis=(-2, -1), keepdims=True))
        if not np.all(norm > 0):
            return None
        sign = -np.sign(g) if pattern_signs is None else pattern_signs
        log_norm = np.log(norm) + np.asarray(log_c)[..., None, None]
        if np.ndim(w) == 2:
            log_norm = float(log_norm.reshape(()))
        log_abs_w = log_magnitudes(w) if problem.algorithm.reads_theta else None
        eps = problem.algorithm.perturb(
            GradientSummary(
                sign * (np.abs(g) / norm), sign, log_norm, self.multiplicity, log_abs_w
            ),
            self.hyperparameters(_batch_time(time, w)),
        )
        point = w + eps
        with np.errstate(divide="ignore", invalid="ignore"):
            if not np.all(self._float_rows(np.log(np.abs(point)), small_matter)):
                return None
        return point

    def _float_velocity(
        self, theta: SignedLog, pattern_signs: np.ndarray | None, time=0.0
    ) -> Velocity | None:
        """:meth:`velocity` in plain floats, or None unless every point is in the float range
        (exact zeros allowed: they stay exact; see :meth:`_float_rows`)."""
        log_abs = np.where(theta.sign == 0, 0.0, theta.log_abs)
        if not np.all(self._float_rows(log_abs)):
            return None
        w = np.where(theta.sign == 0, 0.0, theta.sign * np.exp(log_abs))
        point = self._float_perturbed(w, pattern_signs, time, small_matter=False)
        if point is None:
            return None
        smallest = np.min(np.abs(point[point != 0]), initial=1.0)
        if self.depth * np.log(smallest) <= -4.0 * FLOAT_RANGE:
            return None
        direction, log_c, loo = self._float_evaluate(point)
        return Velocity(SignedLog(*_signed(direction[..., None, :] * loo)), log_c)

    def _float_rhs(
        self, z: np.ndarray, held: np.ndarray, pattern_signs: np.ndarray | None, time: float = 0.0
    ) -> np.ndarray | None:
        """:meth:`chart_rhs` in plain float64 arithmetic at one point, or None outside its range.

        The same formulas as the signed-log path: ``eps`` from the algorithm table on the
        gradient summary, ``theta' = theta + eps``, ``F = G(theta') prod_{k != l} theta'``,
        then the chart velocity ``dz/ds = (dtau/ds) F / w`` (log chart) or
        ``(dtau/ds) F / (delta cosh z)`` (asinh chart); correctly rounded float operations on
        numbers far from overflow and underflow lose nothing against the signed-log form. The
        parameters are ``sign exp z`` or ``delta sinh z`` (inf where that overflows: outside the
        range), and the range checks of :meth:`_float_rows` are made on Python floats, once per
        point.
        """
        problem, chart = self.problem, self.problem.chart
        if problem.algorithm.per_example:
            return None
        if isinstance(chart, LogChart):
            bottom = np.minimum.reduce(z, axis=None)
            if not self._point_in_range(np.maximum.reduce(z, axis=None), bottom, True):
                return None
            w = chart.sign * np.exp(z)
        else:
            with np.errstate(over="ignore"):
                w = chart.delta * np.sinh(z)
            if not self._point_in_range(_log(np.maximum.reduce(np.abs(w), axis=None)), 0.0, False):
                return None
        small_matter = isinstance(chart, LogChart)
        point = self._point_perturbed(w, pattern_signs, time, small_matter)
        if point is None:
            return None
        direction, log_c, loo = self._float_evaluate(point)
        speed = float(np.exp(problem.clock.log_speed(float(log_c))))
        field = speed * direction[None] * loo
        dz = field / w if isinstance(chart, LogChart) else field / (chart.delta * np.cosh(z))
        dz[held] = 0.0
        out = np.empty(dz.size + 1)
        out[:-1] = dz.ravel()
        out[-1] = speed
        return out

    def _point_perturbed(
        self, w: np.ndarray, pattern_signs: np.ndarray | None, time: float, small_matter: bool
    ) -> np.ndarray | None:
        """:meth:`_float_perturbed` at one point ``w`` (G, d): ``theta' = w + eps(w)`` with
        ``||grad L|| = c ||G prod_{k != l} w^(k)||``, or None on a zero gradient or outside
        the float range."""
        problem = self.problem
        if not problem.algorithm.perturbs:
            return w
        direction, log_c, loo = self._float_evaluate(w)
        g = direction[None] * loo  # -grad L / c
        norm = math.sqrt(np.add.reduce(self.layer_weights * g * g, axis=None))
        if not norm > 0:
            return None
        if pattern_signs is None:  # sign * (|g| / norm) with sign = -sign(g)
            sign, unit = -np.sign(g), g / -norm
        else:
            sign, unit = pattern_signs, pattern_signs * (np.abs(g) / norm)
        log_abs_w = log_magnitudes(w) if problem.algorithm.reads_theta else None
        grad = GradientSummary(
            unit, sign, math.log(norm) + float(log_c), self.multiplicity, log_abs_w
        )
        point = w + problem.algorithm.perturb(grad, self.hyperparameters(float(time)))
        size = np.abs(point)
        bottom = _log(np.minimum.reduce(size, axis=None)) if small_matter else 0.0
        top = _log(np.maximum.reduce(size, axis=None))
        return point if self._point_in_range(top, bottom, small_matter) else None

    def _point_in_range(self, top: float, bottom: float, small_matter: bool) -> bool:
        """:meth:`_float_rows` of one point from its largest and smallest ``log|w|`` (False
        for NaN)."""
        top *= self.depth
        return -FLOAT_RANGE < top < FLOAT_RANGE and (
            not small_matter or self.depth * bottom > -4.0 * FLOAT_RANGE
        )


#: See :meth:`FusedField._float_rows` (float64 spans about ``exp(+-708)``).
FLOAT_RANGE = 150.0


def _holds(shape: tuple, other: tuple) -> bool:
    """Whether ``shape`` and ``other`` broadcast to ``shape`` (equal shapes answered without
    ``numpy.broadcast_shapes``, 1.7 µs a call)."""
    return other == shape or np.broadcast_shapes(shape, other) == shape


def _times(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a * b``, written into ``a`` where the product has ``a``'s shape (``a`` a temporary)."""
    if _holds(a.shape, np.shape(b)):
        return np.multiply(a, b, out=a)
    return a * b


def _where(condition: np.ndarray, value: float, a: np.ndarray) -> np.ndarray:
    """``numpy.where(condition, value, a)``, written into ``a`` where it has the result's shape
    (``a`` a temporary)."""
    if _holds(a.shape, condition.shape):
        np.copyto(a, value, where=condition)
        return a
    return np.where(condition, value, a)


def _batch_time(time, points: np.ndarray):
    """Clock times shaped to broadcast against points (..., G, d): a float stays a float."""
    time = np.asarray(time, dtype=float)
    return float(time) if time.ndim == 0 else time.reshape(points.shape[:-2] + (1, 1))


def _exclusive(a: np.ndarray, op: np.ufunc, neutral: float) -> np.ndarray:
    """``op``-products over all rows but one along axis -2 (prefix times suffix)."""
    prefix = np.full_like(a, neutral)
    suffix = np.full_like(a, neutral)
    prefix[..., 1:, :] = op.accumulate(a[..., :-1, :], axis=-2)
    suffix[..., :-1, :] = op.accumulate(a[..., :0:-1, :], axis=-2)[..., ::-1, :]
    return op(prefix, suffix)


def _log(x: float) -> float:
    """``log x`` of a float ``x >= 0`` (-inf at 0, NaN for NaN)."""
    return math.log(x) if x > 0 else -math.inf if x == 0 else math.nan


def log_magnitudes(w: np.ndarray) -> np.ndarray:
    """``log|w|`` elementwise (-inf at zeros, without a warning)."""
    with np.errstate(divide="ignore"):
        return np.log(np.abs(w))
