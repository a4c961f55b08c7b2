"""``tau`` of an original-clock run with the squared loss, by quadrature along the steps.

In the original clock ``tau(t) = int_0^t c dt'`` with ``c = (1/n) sum_i |l'(u_i)|`` at the
perturbed point ``theta' = theta + eps``. For the squared loss ``|l'(u)| = |u|``: ``c`` has a
kink wherever a residual ``u_i`` changes sign, where neither a Runge-Kutta step nor its error
estimate is accurate. Such a run integrates ``tau`` in its state without error control (the
steps follow the network alone, :meth:`flows.integrator.state.Run.tolerances`) and replaces it,
segment by segment as the run records them, by

    ``tau(s) = tau(s_0) + (h / 2n) sum_i int_{-1}^{x} |p_i(x')| dx'``

on each step ``[s_0, s_0 + h]`` (``s = s_0 + h (x + 1) / 2``), ``p_i`` the interpolant of
degree :data:`DEGREE` of ``u_i`` at the Chebyshev–Lobatto nodes of the step (the residuals are
smooth along the path; one matrix product for every node of a segment). With ``P_i`` the
antiderivative of ``p_i`` from ``-1``, ``sigma_i`` the sign of ``u_i`` at ``x = -1`` and
``r`` the roots of ``p_i`` (one between each pair of adjacent nodes where ``u_i`` changes sign,
located by bisection),

    ``int_{-1}^{x} |p_i| = sigma_i(x) P_i(x) - 2 sum_{r < x} sigma_i(r+) P_i(r)``,

which is ``sigma_i P_i(x)`` for a residual without roots: the sum over those is one polynomial
per step. A residual that changes sign twice between two adjacent nodes (a lobe narrower than
``h / DEGREE``) is counted as one sign. Runs of other losses (``c`` smooth wherever the field
is), sliding modes (whose clock factor is the Filippov combination's) and per-example
algorithms keep ``tau`` in the solver's state and error control.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..field import Problem
from ..fused import FusedField
from .segments import Mode, Segment

#: Degree of the interpolant of the residuals on a step; its Chebyshev–Lobatto nodes on
#: [-1, 1] and the matrix taking values there to Chebyshev coefficients.
DEGREE = 8
NODES = -np.cos(np.pi * np.arange(DEGREE + 1) / DEGREE)
_TO_CHEBYSHEV = np.linalg.inv(np.polynomial.chebyshev.chebvander(NODES, DEGREE))
#: Bisection steps that place a root between two adjacent nodes (to below 1e-16 of a step).
BISECTIONS = 56


def applies(problem: Problem) -> bool:
    """Whether ``tau`` of ``problem`` is computed by quadrature in its moving, non-sliding
    modes: the original clock, the squared loss, an algorithm of one perturbation."""
    return (
        problem.clock.original
        and problem.loss.descent_sign is not None
        and not problem.algorithm.per_example
    )


def retimed(problem: Problem, mode: Mode) -> bool:
    """Whether ``tau`` is computed by quadrature in ``mode`` (see the module docstring)."""
    return applies(problem) and not mode.sliding and not mode.frozen


def _clenshaw(coef: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Chebyshev series with coefficients ``coef`` (m, N) (one row per point) at ``x`` (m,)."""
    b1 = np.zeros_like(x)
    b2 = np.zeros_like(x)
    for j in range(coef.shape[1] - 1, 0, -1):
        b1, b2 = coef[:, j] + 2.0 * x * b1 - b2, b1
    return coef[:, 0] + x * b1 - b2


def _antiderivative(coef: np.ndarray) -> np.ndarray:
    """Chebyshev coefficients (..., N + 1) of ``int_{-1}^x`` of the series ``coef`` (..., N)."""
    return np.polynomial.chebyshev.chebint(coef, lbnd=-1.0, axis=-1)


@dataclass
class StepClock:
    """``tau`` along one segment (:func:`retime`): its value at the step boundaries, the
    antiderivative of the rootless part per step, and the residuals with roots.

    Attributes
    ----------
    ts, tau : step boundaries and ``tau`` there.
    smooth : (K, DEGREE + 2) ``sum_i sigma_i P_i`` per step, scaled by ``h / 2n``.
    owner_step, owner_coef, owner_sign : per residual with roots in a step: the step, its
        scaled ``P_i`` and ``sigma_i`` at ``x = -1``.
    roots, root_owner, root_after : the roots (in ``x``, increasing per residual), whose
        residual (an index of the owners), ``sigma_i`` after the root.
    """

    ts: np.ndarray
    tau: np.ndarray
    smooth: np.ndarray
    owner_step: np.ndarray
    owner_coef: np.ndarray
    owner_sign: np.ndarray
    roots: np.ndarray
    root_owner: np.ndarray
    root_after: np.ndarray

    def at(self, s: np.ndarray) -> np.ndarray:
        """``tau`` at times ``s`` in the segment."""
        s = np.asarray(s, dtype=float)
        step = np.clip(np.searchsorted(self.ts, s, side="right") - 1, 0, len(self.ts) - 2)
        h = self.ts[step + 1] - self.ts[step]
        x = np.clip(2.0 * (s - self.ts[step]) / np.where(h > 0, h, 1.0) - 1.0, -1.0, 1.0)
        return self.tau[step] + self.partial(step, x)

    def partial(self, step: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``int`` of ``c dt`` from the start of ``step`` to ``x`` in it (arrays of one shape)."""
        out = _clenshaw(self.smooth[step], x)
        at_roots = _clenshaw(self.owner_coef[self.root_owner], self.roots)
        for k in np.intersect1d(np.unique(step), self.owner_step):
            rows = np.flatnonzero(step == k)
            mine = np.flatnonzero(self.owner_step == k)
            P = _clenshaw(
                self.owner_coef[np.tile(mine, rows.size)], np.repeat(x[rows], mine.size)
            ).reshape(rows.size, mine.size)
            ours = np.flatnonzero(np.isin(self.root_owner, mine))
            which = np.searchsorted(mine, self.root_owner[ours])  # (roots,) -> column
            passed = self.roots[ours][None, :] < x[rows, None]  # (rows, roots)
            member = np.zeros((len(ours), mine.size))
            member[np.arange(len(ours)), which] = 1.0
            count = passed.astype(float) @ member  # roots passed per residual
            flip = np.where(count % 2 == 1, -2.0, 0.0)  # sigma(x) - sigma_0 = flip sigma_0
            jumps = (passed * (self.root_after[ours] * at_roots[ours])) @ member
            out[rows] += np.sum(flip * self.owner_sign[mine] * P - 2.0 * jumps, axis=1)
        return out


def retime(problem: Problem, segment: Segment, tau0: float) -> StepClock:
    """The :class:`StepClock` of ``segment`` from ``tau(start) = tau0`` (module docstring)."""
    fused = FusedField(problem)
    ts = segment.ts
    h = np.diff(ts)
    K = len(h)
    # every node once: adjacent steps share their end
    s = np.append((ts[:-1, None] + 0.5 * h[:, None] * (NODES[None, :-1] + 1.0)).ravel(), ts[-1])
    theta, _ = segment.sample(s, problem.shape)
    point = fused.perturbed_point(
        theta.sign, theta.log_abs, fused.pattern_signs(segment.mode.pattern), s
    )
    u = fused.loss_arguments(fused.margins(fused.product_of_layers(point.sign, point.log_abs)))
    u = u[DEGREE * np.arange(K)[:, None] + np.arange(DEGREE + 1)]  # (steps, nodes, n)
    n = u.shape[-1]
    coef = np.einsum("ij,kjn->kin", _TO_CHEBYSHEV, u)  # (steps, DEGREE + 1, n)
    sign = np.where(u >= 0.0, 1.0, -1.0)
    scale = (0.5 * h / n)[:, None]
    smooth = scale * _antiderivative(np.einsum("kn,kin->ki", sign[:, 0], coef))
    changes = sign[:, 1:] != sign[:, :-1]  # (steps, gaps, n)
    step_k, gap, example = np.nonzero(changes)
    order = np.lexsort((gap, example, step_k))
    step_k, gap, example = step_k[order], gap[order], example[order]
    pairs, owner = np.unique(np.stack([step_k, example]), axis=1, return_inverse=True)
    clock = StepClock(
        ts=ts,
        tau=np.full(K + 1, float(tau0)),
        smooth=smooth,
        owner_step=pairs[0],
        owner_coef=scale[pairs[0]] * _antiderivative(coef[pairs[0], :, pairs[1]]),
        owner_sign=sign[pairs[0], 0, pairs[1]],
        roots=_roots(coef[step_k, :, example], NODES[gap], NODES[gap + 1]),
        root_owner=owner.ravel(),
        root_after=sign[step_k, gap + 1, example],
    )
    whole = clock.partial(np.arange(K), np.ones(K))
    clock.tau[1:] += np.cumsum(whole)
    return clock


def _roots(coef: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The root of each series (rows of ``coef``) between ``a`` and ``b``, where it changes
    sign, by bisection."""
    fa = _clenshaw(coef, a)
    for _ in range(BISECTIONS):
        mid = 0.5 * (a + b)
        fm = _clenshaw(coef, mid)
        left = np.sign(fm) == np.sign(fa)
        a, fa = np.where(left, mid, a), np.where(left, fm, fa)
        b = np.where(left, b, mid)
    return 0.5 * (a + b)
