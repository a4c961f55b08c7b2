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
smooth along the path; one matrix product for the nodes of each block of steps, a block's
node states within :data:`BLOCK_FLOATS`). With ``P_i`` the
antiderivative of ``p_i`` from ``-1``, ``sigma_i`` the sign of ``u_i`` at ``x = -1`` and
``r`` the roots of ``p_i`` (one between each pair of adjacent nodes where ``u_i`` changes sign,
located by Newton's method from the secant's root),

    ``int_{-1}^{x} |p_i| = sigma_i(x) P_i(x) - 2 sum_{r < x} sigma_i(r+) P_i(r)``,

which is ``sigma_i P_i(x)`` for a residual without roots: the sum over those is one polynomial
per step. A residual that changes sign twice between two adjacent nodes keeps the sign of the
nodes there (its lobe, narrower than ``h / DEGREE``, is not split off). The residuals come from
``w``, the perturbed point, ``beta`` and ``A beta - o`` in floats where all are in range, from
the signed-log field elsewhere. Runs of other losses (``c`` smooth wherever the field
is), sliding modes (whose clock factor is the Filippov combination's) and per-example
algorithms keep ``tau`` in the solver's state and error control.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..charts import AsinhChart, LogChart
from ..field import Problem
from ..fused import FusedField
from ..signedlog import SignedLog
from .segments import Mode, Segment

#: Degree of the interpolant of the residuals on a step; its Chebyshev–Lobatto nodes on
#: [-1, 1] and the matrix taking values there to Chebyshev coefficients.
DEGREE = 6
NODES = -np.cos(np.pi * np.arange(DEGREE + 1) / DEGREE)
_TO_CHEBYSHEV = np.linalg.inv(np.polynomial.chebyshev.chebvander(NODES, DEGREE))
#: Newton steps that place a root between two adjacent nodes (the residual is nearly linear
#: there; an error ``dx`` in a root changes the integral by ``~ |p'| dx^2``).
NEWTON_STEPS = 4
EPS = np.finfo(float).eps


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


def _power_basis(size: int) -> np.ndarray:
    """The matrix (size, size) taking Chebyshev coefficients (last axis) to those of the
    monomials ``x^k`` of the same polynomial: ``a = c @ _power_basis(size)``."""
    out = np.zeros((size, size))
    for j in range(size):
        power = np.polynomial.chebyshev.cheb2poly(np.eye(size)[j])
        out[j, : len(power)] = power
    return out


def _series(coef: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``sum_k coef[i, k] x_i^k``: the power series with coefficients ``coef`` (m, N) (one row
    per point) at ``x`` (m,), by Horner's rule."""
    out = coef[:, -1].copy()
    for k in range(coef.shape[1] - 2, -1, -1):
        out *= x
        out += coef[:, k]
    return out


#: The linear maps from Chebyshev coefficients (DEGREE + 1) to the power-series coefficients
#: of the antiderivative from -1 (DEGREE + 2), of the polynomial itself (DEGREE + 1) and of its
#: derivative (DEGREE): the Chebyshev form integrates, the power form evaluates in a few array
#: operations.
_INTEGRAL = np.polynomial.chebyshev.chebint(np.eye(DEGREE + 1), lbnd=-1.0, axis=0).T @ (
    _power_basis(DEGREE + 2)
)
_POWER = _power_basis(DEGREE + 1)
_DERIVATIVE = np.polynomial.chebyshev.chebder(np.eye(DEGREE + 1), axis=0).T @ _power_basis(DEGREE)


@dataclass
class StepClock:
    """``tau`` along one segment (:func:`retime`): its value at the step boundaries, the
    antiderivative of the rootless part per step, and the residuals with roots.

    Attributes
    ----------
    ts, tau : step boundaries and ``tau`` there.
    smooth : (K, DEGREE + 2) ``sum_i sigma_i P_i`` per step, scaled by ``h / 2n``, as
        power-series coefficients in ``x``.
    owner_step, owner_coef, owner_sign : per residual with roots in a step: the step, its
        scaled ``P_i`` (power series in ``x``) and ``sigma_i`` at ``x = -1``.
    roots, root_owner, root_jumps : the roots (in ``x``, increasing per residual), whose
        residual (an index of the owners), ``2 sigma_i(r+) P_i(r)``.
    """

    ts: np.ndarray
    tau: np.ndarray
    smooth: np.ndarray
    owner_step: np.ndarray
    owner_coef: np.ndarray
    owner_sign: np.ndarray
    roots: np.ndarray
    root_owner: np.ndarray
    root_jumps: np.ndarray

    def at(self, s: np.ndarray) -> np.ndarray:
        """``tau`` at times ``s`` in the segment (at a step's start, its value there exactly)."""
        s = np.asarray(s, dtype=float)
        step = np.clip(np.searchsorted(self.ts, s, side="right") - 1, 0, len(self.ts) - 2)
        h = self.ts[step + 1] - self.ts[step]
        x = np.clip(2.0 * (s - self.ts[step]) / np.where(h > 0, h, 1.0) - 1.0, -1.0, 1.0)
        return self.tau[step] + np.where(x > -1.0, self.partial(step, x), 0.0)

    def partial(self, step: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``int`` of ``c dt`` from the start of ``step`` to ``x`` in it (arrays of one shape):
        the rootless part, then for each (time, residual with roots in its step)
        ``(sigma(x) - sigma_0) P(x) - 2 sum_{r < x} sigma(r+) P(r)``."""
        out = _series(self.smooth[step], x)
        if self.owner_step.size == 0:
            return out
        first = np.searchsorted(self.owner_step, step, side="left")
        point, owner = _pairs(first, np.searchsorted(self.owner_step, step, side="right"))
        P = _series(self.owner_coef[owner], x[point])
        root_step = self.owner_step[self.root_owner]
        at, root = _pairs(
            np.searchsorted(root_step, step, side="left"),
            np.searchsorted(root_step, step, side="right"),
        )
        passed = self.roots[root] < x[at]
        offset = np.searchsorted(point, np.arange(len(x)), side="left")  # each time's first pair
        pair = (offset[at] + self.root_owner[root] - first[at])[passed]
        count = np.bincount(pair, minlength=len(owner))
        jumps = np.bincount(pair, weights=self.root_jumps[root[passed]], minlength=len(owner))
        flip = np.where(count % 2 == 1, -2.0, 0.0) * self.owner_sign[owner]
        return out + np.bincount(point, weights=flip * P - jumps, minlength=len(x))


def _node_times(ts: np.ndarray) -> np.ndarray:
    """Every node of every step between the boundaries ``ts``, each once (adjacent steps share
    their end): ``K DEGREE + 1`` times."""
    h = np.diff(ts)
    return np.append((ts[:-1, None] + 0.5 * h[:, None] * (NODES[None, :-1] + 1.0)).ravel(), ts[-1])


def _node_states(segment: Segment, first: int, stop: int) -> np.ndarray:
    """The states ``((stop - first) DEGREE + 1, n_state)`` at every node of the steps
    ``first .. stop - 1``, each once (adjacent steps share their end): DOP853's dense output as
    one product with the polynomials of its Horner form at the nodes, where the step is the
    dense output's whole step; the segment's interpolants elsewhere (a step cut short by an
    event, other methods)."""
    ts = segment.ts[first : stop + 1]
    s = _node_times(ts)
    stacked = segment.dop853_stack()
    if stacked is None:
        return segment.raw(s)
    t_old, h_dense, F, y_old = (a[first:stop] for a in stacked)
    out = np.empty((len(s), F.shape[-1]))
    out[:-1] = (np.einsum("ji,kin->kjn", _HORNER[:-1], F) + y_old[:, None, :]).reshape(
        -1, F.shape[-1]
    )
    out[-1] = _HORNER[-1] @ F[-1] + y_old[-1]
    cut = np.flatnonzero(np.abs(t_old + h_dense - ts[1:]) > 4 * EPS * np.abs(ts[1:]))
    if cut.size:
        rows = np.concatenate([DEGREE * k + np.arange(DEGREE + 1) for k in cut])
        out[rows] = segment.raw(s[rows])
    return out


#: ``Dop853DenseOutput``'s Horner form ``y = y_old + sum_i F_i prod_{j >= i'} (x or 1 - x)`` as
#: a matrix (nodes, 7): the weight of each of its 7 coefficient vectors at each node.
_X01 = 0.5 * (NODES + 1.0)
_HORNER = np.stack(
    [
        np.prod([_X01 if j % 2 == 0 else 1.0 - _X01 for j in range(6 - i, 7)], axis=0)
        for i in range(7)
    ],
    axis=1,
)


#: Parameters ``w`` as floats from chart coordinates, by chart (the others take the
#: signed-log path).
FLOAT_STATE = {
    AsinhChart: lambda chart, z: chart.delta * np.sinh(z),
    LogChart: lambda chart, z: chart.sign * np.exp(z),
}


def _loss_arguments(
    problem: Problem, fused: FusedField, segment: Segment, first: int, stop: int
) -> np.ndarray:
    """The loss arguments ``u`` ((stop - first) DEGREE + 1, n) at the perturbed point at every
    node of the steps ``first .. stop - 1``: in floats (``w`` from the chart, the perturbed
    point ``w' = w + eps`` (:meth:`~flows.fused.FusedField.float_point`),
    ``beta = prod_g w'_g^(L_g)``, ``u = A beta - o``) where every value is in range, else in
    signed-log form."""
    states = _node_states(segment, first, stop)
    z = states[:, :-1].reshape((len(states),) + problem.shape)
    s = _node_times(segment.ts[first : stop + 1])
    mode = segment.mode
    chart, held = mode.chart, mode.held
    to_float = FLOAT_STATE.get(type(chart))
    if to_float is not None:
        with np.errstate(over="ignore", invalid="ignore"):
            w = to_float(chart, z)
            if np.any(held):
                w = np.where(held, 0.0, w)
            point = fused.float_point(w, fused.pattern_signs(mode.pattern), s)
            if point is not None:
                beta = np.ones((len(z), problem.shape[1]))
                for group, power in enumerate(problem.multiplicity):
                    for _ in range(int(power)):
                        beta *= point[:, group]
                u = fused.loss_arguments(beta @ fused.features.T)
                if np.all(np.isfinite(u)):
                    return u
    theta = chart.state(z)
    theta = SignedLog(np.where(held, 0.0, theta.sign), np.where(held, -np.inf, theta.log_abs))
    shifted = fused.perturbed_point(theta.sign, theta.log_abs, fused.pattern_signs(mode.pattern), s)
    beta_log = fused.product_of_layers(shifted.sign, shifted.log_abs)
    return fused.loss_arguments(fused.margins(beta_log))


def _pairs(first: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every ``(i, j)`` with ``first[i] <= j < stop[i]``, as two index arrays."""
    counts = stop - first
    i = np.repeat(np.arange(len(first)), counts)
    starts = np.cumsum(counts) - counts
    return i, np.arange(int(counts.sum())) - starts[i] + first[i]


def retime(problem: Problem, segment: Segment, tau0: float) -> StepClock:
    """The :class:`StepClock` of ``segment`` from ``tau(start) = tau0`` (module docstring),
    its steps taken in blocks of :func:`steps_per_block` (one matrix product each)."""
    fused = FusedField(problem)
    ts = segment.ts
    K = len(ts) - 1
    block = steps_per_block(problem.shape, fused.n)
    parts = [
        _block_clock(problem, fused, segment, k, min(k + block, K)) for k in range(0, K, block)
    ]
    if len(parts) == 1:
        smooth, owner_step, owner_coef, owner_sign, roots, root_owner, root_jumps = parts[0]
    else:
        owners = np.cumsum([0] + [len(part[1]) for part in parts[:-1]])
        smooth, owner_step, owner_coef, owner_sign, roots, root_jumps = (
            np.concatenate([part[i] for part in parts]) for i in (0, 1, 2, 3, 4, 6)
        )
        root_owner = np.concatenate(
            [part[5] + off for part, off in zip(parts, owners, strict=True)]
        )
    clock = StepClock(
        ts=ts,
        tau=np.full(K + 1, float(tau0)),
        smooth=smooth,
        owner_step=owner_step,
        owner_coef=owner_coef,
        owner_sign=owner_sign,
        roots=roots,
        root_owner=root_owner,
        root_jumps=root_jumps,
    )
    whole = clock.partial(np.arange(K), np.ones(K))
    clock.tau[1:] += np.cumsum(whole)
    return clock


#: Floats of the largest array of one block of steps in :func:`retime` (32 MB): the node
#: states (or the residuals, where examples outnumber state entries) of that many nodes.
BLOCK_FLOATS = 2**22


def steps_per_block(shape: tuple[int, int], n: int) -> int:
    """Steps of one block of :func:`retime`: as many as keep ``(steps DEGREE + 1)`` nodes of
    ``max(G d + 1, n)`` floats within :data:`BLOCK_FLOATS` (at least one)."""
    width = max(shape[0] * shape[1] + 1, n)
    return max(1, (BLOCK_FLOATS // width - 1) // DEGREE)


def _block_clock(
    problem: Problem, fused: FusedField, segment: Segment, first: int, stop: int
) -> tuple[np.ndarray, ...]:
    """The arrays of :class:`StepClock` for the steps ``first .. stop - 1`` (steps and owners
    numbered within the segment and within the block): ``smooth``, ``owner_step``,
    ``owner_coef``, ``owner_sign``, ``roots``, ``root_owner``, ``root_jumps``."""
    h = np.diff(segment.ts[first : stop + 1])
    K = len(h)
    u = _loss_arguments(problem, fused, segment, first, stop)
    u = u[DEGREE * np.arange(K)[:, None] + np.arange(DEGREE + 1)]  # (steps, nodes, n)
    n = u.shape[-1]
    coef = np.einsum("ij,kjn->kin", _TO_CHEBYSHEV, u)  # (steps, DEGREE + 1, n)
    sign = np.where(u >= 0.0, 1.0, -1.0)
    scale = (0.5 * h / n)[:, None]
    smooth = scale * (np.einsum("kn,kin->ki", sign[:, 0], coef) @ _INTEGRAL)
    changes = sign[:, 1:] != sign[:, :-1]  # (steps, gaps, n)
    step_k, gap, example = np.nonzero(changes)
    order = np.lexsort((gap, example, step_k))
    step_k, gap, example = step_k[order], gap[order], example[order]
    owned = np.ones(len(step_k), dtype=bool)  # the first root of each (step, residual)
    owned[1:] = (step_k[1:] != step_k[:-1]) | (example[1:] != example[:-1])
    pairs = (step_k[owned], example[owned])
    owner = np.cumsum(owned) - 1
    owner_coef = scale[pairs[0]] * (coef[pairs[0], :, pairs[1]] @ _INTEGRAL)
    roots = _roots(coef[step_k, :, example], NODES[gap], NODES[gap + 1])
    jumps = 2.0 * sign[step_k, gap + 1, example] * _series(owner_coef[owner], roots)
    return (smooth, pairs[0] + first, owner_coef, sign[pairs[0], 0, pairs[1]], roots, owner, jumps)


def _roots(coef: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The root of each Chebyshev series (rows of ``coef``) between ``a`` and ``b``, where it
    changes sign: :data:`NEWTON_STEPS` Newton steps from the secant's root, kept in ``[a, b]``
    (value and derivative from the power form, one basis of powers per step)."""
    power, slope = coef @ _POWER, coef @ _DERIVATIVE
    fa, fb = _series(power, a), _series(power, b)
    x = a + (b - a) * fa / (fa - fb)
    for _ in range(NEWTON_STEPS):
        powers = np.vander(x, DEGREE + 1, increasing=True)
        derivative = np.vecdot(slope, powers[:, :DEGREE])
        step = np.divide(
            np.vecdot(power, powers), derivative, out=np.zeros_like(x), where=derivative != 0
        )
        x = np.minimum(np.maximum(x - step, a), b)
    return x
