"""The compiled backend (``backend="numba"``, extra ``fast``): the float fast path in numba.

:class:`CompiledField` is :class:`~flows.kernel.FusedField` with its hot path, the field at one
point in plain floats, compiled: one compiled call summarises ``grad L`` (unit direction,
signs, log norm: the :class:`~flows.algorithms.GradientSummary`), the perturbation itself
stays the algorithm table's Python function (so a new algorithm needs nothing here), and a
second compiled call evaluates the field at the perturbed point and the chart velocity.
Everything else (points outside the float range, batches, events) is the inherited numpy
code. The formulas are those of :meth:`FusedField._float_rhs`, written as loops; the tests
hold the two to 1e-10 in log|beta|.

numba compiles on first use (about 10 s) and caches the machine code on disk.
"""
from __future__ import annotations

import numpy as np

from .algorithms import GradientSummary
from .charts import LogChart
from .field import Problem
from .kernel import FLOAT_RANGE, FusedField
from .model import LOSSES

try:
    from numba import njit
except ImportError:  # pragma: no cover - exercised where numba is absent
    njit = None

#: Losses with a compiled ``log|l'(u)|`` (the index is the compiled loss id).
COMPILED_LOSSES = ("logistic", "exponential")


def available() -> bool:
    """Whether numba is installed."""
    return njit is not None


def require() -> None:
    """``ImportError`` naming the extra when numba is missing."""
    if njit is None:
        raise ImportError("backend 'numba' needs numba: pip install -e '.[fast]'")


def supports(problem: Problem) -> bool:
    """Whether the compiled path covers ``problem`` (its loss has a compiled derivative)."""
    return any(problem.loss is LOSSES[name] for name in COMPILED_LOSSES)


if njit is not None:

    @njit(cache=True)
    def _log_abs_derivative(u: float, loss_id: int) -> float:
        """``log|l'(u)|``: logistic ``-log(1 + e^u)``, exponential ``-u``."""
        if loss_id == 0:
            return -(max(u, 0.0) + np.log1p(np.exp(-abs(u))))
        return -u

    @njit(cache=True)
    def _forward(w, depth, features, loss_id):
        """Direction ``G`` (d,), ``log c`` and leave-one-out products (G, d) at floats ``w``."""
        groups, d = w.shape
        n = features.shape[0]
        beta = np.empty(d)
        loo = np.empty((groups, d))
        for j in range(d):
            if groups == 1:
                beta[j] = w[0, j] ** depth
                loo[0, j] = w[0, j] ** (depth - 1)
            else:
                b = 1.0
                for layer in range(groups):
                    b *= w[layer, j]
                    p = 1.0
                    for k in range(groups):
                        if k != layer:
                            p *= w[k, j]
                    loo[layer, j] = p
                beta[j] = b
        log_w = np.empty(n)
        top = -np.inf
        for i in range(n):
            m = 0.0
            for j in range(d):
                m += features[i, j] * beta[j]
            log_w[i] = _log_abs_derivative(m, loss_id)
            top = max(top, log_w[i])
        total = 0.0
        for i in range(n):
            log_w[i] = np.exp(log_w[i] - top)
            total += log_w[i]
        direction = np.zeros(d)
        for i in range(n):
            p = log_w[i] / total
            for j in range(d):
                direction[j] += p * features[i, j]
        return direction, top + np.log(total) - np.log(n), loo

    @njit(cache=True)
    def _parameters(z, log_chart, chart_sign, delta, depth, limit):
        """Float parameters from chart coordinates, and whether they are in the float range
        (see :meth:`FusedField._float_rows`)."""
        groups, d = z.shape
        w = np.empty((groups, d))
        top, bottom = -np.inf, np.inf
        for layer in range(groups):
            for j in range(d):
                if log_chart:
                    log_abs = z[layer, j]
                    w[layer, j] = chart_sign[layer, j] * np.exp(log_abs)
                else:
                    w[layer, j] = delta * np.sinh(z[layer, j])
                    log_abs = np.log(abs(w[layer, j]))
                top = max(top, log_abs)
                bottom = min(bottom, log_abs)
        ok = -limit < depth * top < limit and depth * bottom > -4.0 * limit
        return w, ok

    @njit(cache=True)
    def _summary(w, depth, multiplicity, features, loss_id, pattern, use_pattern):
        """``GradientSummary`` of ``grad L`` at ``w``: unit, sign, log norm (ok flag first)."""
        direction, log_c, loo = _forward(w, depth, features, loss_id)
        groups, d = w.shape
        g = np.empty((groups, d))
        norm2 = 0.0
        for layer in range(groups):
            for j in range(d):
                g[layer, j] = direction[j] * loo[layer, j]
                norm2 += multiplicity[layer] * g[layer, j] ** 2
        norm = np.sqrt(norm2)
        sign = np.empty((groups, d))
        unit = np.empty((groups, d))
        for layer in range(groups):
            for j in range(d):
                if use_pattern:
                    sign[layer, j] = -np.sign(direction[j]) * pattern[layer, j]
                else:
                    sign[layer, j] = -np.sign(g[layer, j])
                unit[layer, j] = sign[layer, j] * (abs(g[layer, j]) / norm) if norm > 0 else 0.0
        return norm > 0, unit, sign, np.log(norm) + log_c

    @njit(cache=True)
    def _chart_velocity(w, point, z, held, depth, features, loss_id, original_clock,
                        log_chart, delta, limit):
        """``d(z, tau)/ds`` from the perturbed point (ok flag first)."""
        groups, d = w.shape
        top, bottom = -np.inf, np.inf
        for layer in range(groups):
            for j in range(d):
                a = np.log(abs(point[layer, j]))
                top = max(top, a)
                bottom = min(bottom, a)
        out = np.zeros(groups * d + 1)
        if not (-limit < depth * top < limit and depth * bottom > -4.0 * limit):
            return False, out
        direction, log_c, loo = _forward(point, depth, features, loss_id)
        speed = np.exp(log_c) if original_clock else 1.0
        for layer in range(groups):
            for j in range(d):
                if held[layer, j]:
                    continue
                field = speed * direction[j] * loo[layer, j]
                if log_chart:
                    out[layer * d + j] = field / w[layer, j]
                else:
                    out[layer * d + j] = field / (delta * np.cosh(z[layer, j]))
        out[groups * d] = speed
        return True, out


class CompiledField(FusedField):
    """:class:`FusedField` whose one-point float path is compiled (see the module docstring)."""

    def __init__(self, problem: Problem):
        require()
        super().__init__(problem)
        self.loss_id = next(i for i, name in enumerate(COMPILED_LOSSES)
                            if problem.loss is LOSSES[name])
        chart = problem.chart
        self.log_chart = isinstance(chart, LogChart)
        self.chart_sign = (np.asarray(chart.sign, dtype=float) if self.log_chart
                           else np.ones(problem.shape))
        self.delta = 1.0 if self.log_chart else float(chart.delta)
        self.features_c = np.ascontiguousarray(self.features, dtype=float)
        self.mult_f = self.multiplicity.astype(float)
        self.no_pattern = np.zeros(problem.shape)

    def _float_rhs(self, z: np.ndarray, held: np.ndarray,
                   pattern_signs: np.ndarray | None) -> np.ndarray | None:
        """The compiled version of :meth:`FusedField._float_rhs` (None outside its range)."""
        problem = self.problem
        w, ok = _parameters(z, self.log_chart, self.chart_sign, self.delta, self.depth,
                            FLOAT_RANGE)
        if not ok:
            return None
        point = w
        if problem.algorithm.perturbs:
            use_pattern = pattern_signs is not None
            ok, unit, sign, log_norm = _summary(
                w, self.depth, self.mult_f, self.features_c, self.loss_id,
                pattern_signs if use_pattern else self.no_pattern, use_pattern)
            if not ok:
                return None
            eps = problem.algorithm.perturb(
                GradientSummary(unit, sign, float(log_norm), self.multiplicity),
                problem.hyperparameters)
            point = w + eps
        ok, out = _chart_velocity(w, point, z, held, self.depth, self.features_c, self.loss_id,
                                  problem.clock.original, self.log_chart, self.delta,
                                  FLOAT_RANGE)
        return out if ok else None
