"""l_inf-SAM's sliding combination on the compiled backend (extra ``fast``).

:class:`CompiledSliding` drives :mod:`flows.compiled._sliding_kernels` for a
:class:`~flows.integrator.filippov.FilippovField` whose one-sided fields come from a
:class:`~flows.compiled.field.CompiledField` (l_inf-SAM with a constant radius): the one-sided fields
and normal rates of many points in one compiled call, and the multilinear and tilted Newton
solves of one point. Points outside the float range stay with the numpy code (the caller's fallback).
"""

from __future__ import annotations

import numpy as np

from ..algorithms import linf_perturbation
from ..fused import FLOAT_RANGE
from ..schedules import constant_values
from .field import CompiledField


class CompiledSliding:
    """The compiled sliding combination of one mode (see the module docstring).

    Parameters
    ----------
    field : the compiled field of the mode's chart.
    rho : l_inf-SAM's (constant) radius.
    surfaces : the sliding surfaces (``kind`` ``'parameter'`` or ``'direction'``, ``at``).
    """

    def __init__(self, field: CompiledField, rho: float, surfaces: list):
        from . import _sliding_kernels as _numba_sliding

        self.kernels = _numba_sliding
        self.field = field
        self.rho = rho
        self.chart = (field.log_chart, field.chart_sign, field.delta)
        self.kinds = np.array(
            [_numba_sliding.DIRECTION if s.kind == "direction" else _numba_sliding.PARAMETER
             for s in surfaces],
            dtype=np.int64,
        )  # fmt: skip
        self.ats = np.array([s.at for s in surfaces], dtype=np.int64)

    @classmethod
    def of(cls, field, surfaces: list) -> CompiledSliding | None:
        """The compiled combination for ``field``, or None where it does not apply (another
        backend or algorithm, a radius that follows a schedule)."""
        problem = field.problem
        if not isinstance(field, CompiledField) or problem.algorithm.perturb is not (
            linf_perturbation
        ):
            return None
        values = constant_values(problem.hyperparameters, ("rho",))
        return None if values is None else cls(field, float(values[0]), surfaces)

    def evaluate(
        self, zz: np.ndarray, patterns: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """``(rhs (N, V, n_state), rates (N, k, V), log c_max (N,))`` at the chart states ``zz``
        (N, G, d) under the vertices ``patterns`` (V, G, d), or None if a point is outside
        the float range."""
        f = self.field
        ok, rhs, rates, log_c_max = self.kernels.evaluate(
            np.ascontiguousarray(zz, dtype=float), self.chart, f.depth, f.mult_f, f.features_c,
            f.offsets_c, f.loss_id, self.rho, FLOAT_RANGE,
            np.ascontiguousarray(patterns, dtype=float), self.kinds, self.ats,
        )  # fmt: skip
        return (rhs, rates, log_c_max) if ok.all() else None

    def newton(
        self, rows: np.ndarray, signs: np.ndarray, iterations: int, tol: float
    ) -> tuple[np.ndarray, bool]:
        """``(lambda, exact)``: Newton's method on the multilinear system of one point."""
        from ..integrator.multilinear import STEP_FLOOR

        lam, exact = self.kernels.newton(
            np.ascontiguousarray(rows, dtype=float),
            np.ascontiguousarray(signs, dtype=float),
            iterations,
            tol,
            STEP_FLOOR,
        )
        return lam, bool(exact)

    def tilted(self, rates: np.ndarray, speeds: np.ndarray) -> tuple[np.ndarray, float, bool]:
        """``(w, spread, exact)``: the tilted rule of one point on the rates in the rescaled
        clock of the vertices that move (:func:`flows.integrator.tilted.solve_tilted_in_tau`)."""
        from ..integrator import tilted as rule

        w, spread, exact = self.kernels.tilted_in_tau(
            np.ascontiguousarray(rates, dtype=float), np.ascontiguousarray(speeds, dtype=float),
            rule.TILT_ITERATIONS, rule.TILT_TOL, rule.ROUNDING_TOL, rule.SPREAD_RELEASE,
        )  # fmt: skip
        return w, float(spread), bool(exact)
