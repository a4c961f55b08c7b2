"""The compiled field: the float fast path of the fused field in numba.

:class:`CompiledField` is :class:`~flows.fused.FusedField` with its hot path, the field at one
point in plain floats, compiled: one compiled call summarises ``grad L`` (unit direction,
signs, log norm: the :class:`~flows.algorithms.GradientSummary`), the perturbation itself
stays the algorithm table's Python function (so a new algorithm needs nothing here), and a
second compiled call evaluates the field at the perturbed point and the chart velocity.
Everything else (points outside the float range, batches, events) is the inherited numpy
code. The formulas are those of :meth:`FusedField._float_rhs`, written as loops; the tests
hold the two to 1e-10 in log|beta|. The kernels take the data as the rows ``z_i`` and the
offsets ``o_i`` of the loss arguments ``u_i = <beta, z_i> - o_i``
(:attr:`flows.data.Dataset.offsets`; zeros in classification). At one point a
per-example algorithm (:mod:`flows.per_example`) is evaluated by the compiled segment loop's
own kernel (:func:`flows.compiled._field_kernels.per_example_field_into`, through
:func:`flows.compiled._segment_kernels.field` on :meth:`CompiledField.problem_tuple`), where
the kernels evaluate its hyper-parameters; a batch of points by the inherited numpy code.

numba compiles on first use (all kernels, with the compiled loop of :mod:`flows.compiled.segment`:
~25 s on 2 cores) and caches the machine code on disk.
"""

from __future__ import annotations

import numpy as np

from ..algorithms import GradientSummary
from ..charts import LogChart
from ..data import abs_signed_features
from ..field import Problem
from ..fused import FLOAT_RANGE, FusedField, log_magnitudes
from ..schedules import Schedule
from ..signedlog import SignedLog
from . import announce_compiles, require


def compiled_hyperparameters(
    hp: dict, keys: tuple[str, ...]
) -> tuple[np.ndarray, np.ndarray] | None:
    """The hyper-parameters ``keys`` (in that order) as the compiled field evaluates them at a
    clock time (:func:`flows.compiled._field_kernels.hyperparameters_into`): their values (a
    constant schedule's value; 0 for a schedule) and a table with a row per hyper-parameter, 0
    for a number, else its schedule's code (:data:`~flows.compiled._field_kernels.SCHEDULE_CODES`)
    and arguments; None where one follows a schedule the kernels do not evaluate (a callable of
    the caller's, a staircase), or where the kernels' buffer of
    :data:`~flows.compiled._field_kernels.MOST_HYPERPARAMETERS` would not hold them all."""
    from ._field_kernels import MOST_HYPERPARAMETERS, SCHEDULE_CODES

    if len(keys) > MOST_HYPERPARAMETERS:
        return None
    values = np.zeros(len(keys))
    table = np.zeros((len(keys), 5))
    for k, key in enumerate(keys):
        value = hp[key]
        if isinstance(value, Schedule) and value.name in SCHEDULE_CODES:
            table[k, 0] = SCHEDULE_CODES[value.name]
            table[k, 1 : 1 + len(value.args)] = value.args
        elif isinstance(value, Schedule) and value.name == "constant":
            values[k] = value.maximum
        elif callable(value):
            return None
        else:
            values[k] = float(value)
    return values, table


class CompiledField(FusedField):
    """:class:`FusedField` whose one-point float path is compiled (see the module docstring)."""

    def __init__(self, problem: Problem):
        require()
        announce_compiles()
        from . import _field_kernels as _numba_kernels

        super().__init__(problem)
        self.kernels = _numba_kernels
        if problem.loss.compiled_id is None:
            raise ValueError("backend 'numba' has no compiled form of this loss")
        self.loss_id = problem.loss.compiled_id
        chart = problem.chart
        self.log_chart = isinstance(chart, LogChart)
        if isinstance(chart, LogChart):
            self.chart_sign, self.delta = np.asarray(chart.sign, dtype=float), 1.0
        else:
            self.chart_sign, self.delta = np.ones(problem.shape), float(chart.delta)
        self.features_c = np.ascontiguousarray(self.features, dtype=float)
        self._abs_features: np.ndarray | None = None
        # a writable copy, as the zeros of classification: one numba type (no new specialisation)
        offsets = problem.data.offsets
        self.offsets_c = np.zeros(self.n) if offsets is None else np.array(offsets, dtype=float)
        self.mult_f = self.multiplicity.astype(float)
        self.no_pattern = np.zeros(problem.shape)
        #: The hyper-parameters as the compiled segment loop takes them (None where it cannot):
        #: :func:`compiled_hyperparameters`.
        self.hp_table = compiled_hyperparameters(problem.hyperparameters, problem.algorithm.names)

    def problem_tuple(self, held: np.ndarray, pattern_signs: np.ndarray | None) -> tuple:
        """The arguments of the compiled field and of the events it watches
        (:mod:`flows.compiled._segment_kernels`), with the ``held`` entries and the frozen
        ``pattern_signs`` (None: no pattern): the |z_ij| of the stationary event, then the
        hyper-parameters' schedule table (:func:`compiled_hyperparameters`; :attr:`hp_table`
        not None)."""
        problem = self.problem
        assert self.hp_table is not None  # the callers checked
        values, schedule = self.hp_table
        return (
            problem.shape,
            self.log_chart,
            self.chart_sign,
            self.delta,
            self.depth,
            self.mult_f,
            self.features_c,
            self.loss_id,
            problem.clock.original,
            np.ascontiguousarray(held),
            problem.algorithm.compiled_id,
            values,
            FLOAT_RANGE,
            np.zeros(problem.shape) if pattern_signs is None else pattern_signs,
            self.offsets_c,
            problem.algorithm.per_example,
            self.abs_features,
            schedule,
        )

    @property
    def abs_features(self) -> np.ndarray:
        """``|z_ij|`` (n, d) for the stationary event of the compiled loop: made on first use,
        once per data set (:func:`flows.data.abs_signed_features`)."""
        if self._abs_features is None:
            self._abs_features = abs_signed_features(self.problem.data)
        return self._abs_features

    def _float_evaluate(
        self, theta: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | float, np.ndarray]:
        """:meth:`FusedField._float_evaluate`, compiled for one point (G, d): the forward pass
        behind one-point velocities (the blow-up event) and the stationary event."""
        if theta.ndim != 2:
            return super()._float_evaluate(theta)
        w = np.ascontiguousarray(theta, dtype=float)
        return self.kernels.forward(w, self.depth, self.features_c, self.offsets_c, self.loss_id)

    def log_loss(self, theta: SignedLog) -> float:
        """:meth:`FusedField.log_loss`, compiled where the point is in the float range."""
        if not self._float_rows(theta.log_abs, small_matter=False):
            return super().log_loss(theta)
        w = np.where(theta.sign == 0, 0.0, theta.sign * np.exp(theta.log_abs))
        return float(
            self.kernels.log_mean_loss(w, self.depth, self.features_c, self.offsets_c, self.loss_id)
        )

    def _per_example_rhs(self, z: np.ndarray, held: np.ndarray, time: float) -> np.ndarray | None:
        """``d(z, tau)/ds`` of a per-example algorithm at one point, compiled
        (:func:`flows.compiled._segment_kernels.field`: the float path of
        :func:`flows.per_example._float_velocity`, then the chart map), or None outside that
        path or where the kernels do not evaluate the hyper-parameters."""
        from . import _segment_kernels
        from .discrete import PER_EXAMPLE_IDS

        if self.hp_table is None or self.problem.algorithm.compiled_id not in PER_EXAMPLE_IDS:
            return None
        y = np.append(np.ravel(z), 0.0).astype(float)
        ok, out = _segment_kernels.field(y, self.problem_tuple(held, None), float(time))
        return out if ok else None

    def _float_rhs(
        self, z: np.ndarray, held: np.ndarray, pattern_signs: np.ndarray | None, time: float = 0.0
    ) -> np.ndarray | None:
        """The compiled version of :meth:`FusedField._float_rhs` (None outside its range)."""
        problem = self.problem
        if problem.algorithm.per_example:
            return self._per_example_rhs(z, held, time)
        # one array layout for every solver (a strided state is a second numba specialisation)
        z = np.ascontiguousarray(z, dtype=float)
        w, ok = self.kernels.parameters(
            z, self.log_chart, self.chart_sign, self.delta, self.depth, FLOAT_RANGE
        )
        if not ok:
            return None
        point = w
        if problem.algorithm.perturbs:
            use_pattern = pattern_signs is not None
            ok, unit, sign, log_norm = self.kernels.summary(
                w,
                self.depth,
                self.mult_f,
                self.features_c,
                self.offsets_c,
                self.loss_id,
                pattern_signs if use_pattern else self.no_pattern,
                use_pattern,
            )
            if not ok:
                return None
            log_abs_w = log_magnitudes(w) if problem.algorithm.reads_theta else None
            eps = problem.algorithm.perturb(
                GradientSummary(unit, sign, float(log_norm), self.multiplicity, log_abs_w),
                self.hyperparameters(time),
            )
            point = w + eps
        ok, out = self.kernels.chart_velocity(
            w,
            point,
            held,
            self.depth,
            self.features_c,
            self.offsets_c,
            self.loss_id,
            problem.clock.original,
            self.log_chart,
            self.delta,
            FLOAT_RANGE,
        )
        return out if ok else None
