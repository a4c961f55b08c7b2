"""l_inf-SAM's slow manifold of tied margins while it slides on direction surfaces.

Near its blow-up at depth ``L >= 3`` l_inf-SAM's tied margins settle as a smooth perturbation's
do (:mod:`flows.integrator.tied_fields`), often while it slides on ``k`` direction surfaces
``G_j = sum_i p_i z_ij = 0`` (``j`` in ``J``, :mod:`flows.integrator.filippov`). Its
perturbation ``eps_sigma = rho sign(grad L)`` is fixed there by the frozen signs and by the side
``sigma`` in ``{+1, -1}^J`` of each sliding surface: it does not depend on the weights. Each
side moves at the rescaled velocity

    ``F_sigma = sum_k q^sigma_k a_k(theta + eps_sigma)``,  ``q^sigma ∝ p e^{-s^sigma}``,

with clock factor ``c_sigma ∝ sum_k p_k e^{-s^sigma_k}`` (``s^sigma``: how far ``eps_sigma``
moves each tied margin, :func:`~flows.integrator.tied_fields.margin_shift`), and moves the
sliding surfaces at the normal rates (``v_{sigma k} = <a_k(theta), F_sigma>``)

    ``r_{j, sigma} = dG_j/dtau = -sum_k p_k z_kj (v_{sigma k} - sum_i p_i v_{sigma i})``.

The run's own rule (the multilinear one, or the tilted one where its mode says so) combines the
sides from these rates and clock factors into shares ``W_sigma`` of ``tau``:
``F = sum_sigma W_sigma F_sigma``. On the slow manifold the tie's weights ``p``

* keep every sliding surface: ``Z_J^T p = 0`` and ``sum p = 1`` (``k + 1`` linear constraints,
  ``p = p0 + N c`` with ``N`` a basis of their null space);
* hold the gaps: ``<a_i(theta) - a_1(theta), F> = 0`` for ``i`` in the tie.

Once ``Z_J^T p = 0``, the rule's own equations ``sum_sigma W_sigma r_sigma = 0`` are ``k``
combinations of the gap equations (coefficients ``p_k z_kj``): the ``A - 1 - k`` coordinates
``c`` are found by Gauss-Newton on the gap equations. Where ``A - 1 = k`` the constraints alone
fix ``p``; a tie of ``k`` examples or fewer cannot keep ``k`` surfaces (no slow manifold).

The sliding holds while the rule's own margin stays positive (the multilinear ``lambda``'s
distance to the faces of the box, or the tilted spread's to
:data:`~flows.integrator.tilted.SPREAD_RELEASE`) and the other directions keep their signs
(``sign(G_j) G_j > 0``): :attr:`~flows.integrator.tied_fields.TiedPoint.switching`.
"""

from __future__ import annotations

import numpy as np

from ..field import Problem, SignPattern, gradient_signs
from .multilinear import multilinear_weights, solve_multilinear, vertex_signs
from .segments import Mode
from .tied_fields import (
    JACOBIAN_STEP,
    NEWTON_TOL,
    STEP_TOL,
    TiedField,
    TiedPoint,
    margin_shift,
)
from .tilted import SPREAD_RELEASE, solve_tilted

#: Largest ``|Z_J^T p|`` (relative to ``sum_k p_k |z_kj|``) of weights that keep the sliding
#: surfaces, and largest scaled gap residual accepted where the constraints fix ``p``.
CONSTRAINT_TOL = 1e-9
GAP_TOL = 1e-3
#: Gauss-Newton iterations at most, each contracting the residual at least this much (from a
#: solution at a nearby point they contract it a hundredfold and more), its step halved until
#: it does.
GAUSS_NEWTON_ITERATIONS = 10
CONTRACTION = 0.5
HALVINGS = 8


class SlidingTiedField(TiedField):
    """The reduced field of l_inf-SAM on the tie ``active`` in ``mode`` (its frozen signs, its
    sliding directions and its rule); see the module docstring for the equations."""

    def __init__(self, problem: Problem, mode: Mode, active: np.ndarray) -> None:
        super().__init__(problem, active)
        pattern = mode.pattern
        assert pattern is not None
        self.directions = np.asarray(mode.sliding_directions, dtype=int)
        others = np.setdiff1d(np.arange(problem.data.d), self.directions)
        signs = np.asarray(pattern.direction, dtype=float)[others]
        self.others, self.other_signs = others[signs != 0], signs[signs != 0]
        self.mode = mode
        self.tilted = bool(mode.tilted)
        self.sides = vertex_signs(self.directions.size)
        self.grad_signs = np.array([self._grad_signs(pattern, row) for row in self.sides])
        self.constraints = np.vstack([self.z[:, self.directions].T, np.ones(self.active.size)])
        self.target = np.zeros(self.directions.size + 1)
        self.target[-1] = 1.0
        self.free = self.null_space(np.ones(self.active.size)).shape[1]
        self.last: tuple | None = None

    def null_space(self, scale: np.ndarray) -> np.ndarray:
        """A basis ``N`` (A, A - 1 - k at full rank) of the changes ``scale * (N c)`` of the
        weights that keep the constraints ``Z_J^T p = 0``, ``sum p = 1``."""
        _, values, vt = np.linalg.svd(self.constraints * scale)
        rank = int(np.sum(values > 1e-12 * values[0]))
        return vt[rank:].T

    def _grad_signs(self, pattern: SignPattern, sides: np.ndarray) -> np.ndarray:
        """``sign(grad L)`` (G, d) of the frozen ``pattern`` with the sliding directions on
        ``sides``."""
        direction = np.array(pattern.direction, dtype=float)
        direction[self.directions] = sides
        return gradient_signs(SignPattern(pattern.parameters, direction), self.problem.multiplicity)

    def feasible(self, p: np.ndarray) -> np.ndarray | None:
        """``p`` moved onto ``Z_J^T p = 0``, ``sum p = 1`` with the least relative change
        (``sum_k (dp_k)^2 / p_k``: a weight stays of its own size; one at 0 stays there); None
        where no such weights keep the sliding surfaces."""
        scale = np.maximum(p, 0.0)
        gap = self.constraints @ p - self.target
        weighted = self.constraints * scale
        moved = p - weighted.T @ np.linalg.lstsq(weighted @ self.constraints.T, gap, rcond=None)[0]
        size = np.abs(self.constraints) @ np.abs(moved)
        off = np.abs(self.constraints @ moved - self.target)
        return moved if np.all(off <= CONSTRAINT_TOL * np.maximum(size, 1.0)) else None

    def perturbations(self, theta: np.ndarray, p: np.ndarray, time: float) -> np.ndarray:
        """``eps_sigma = rho sign(grad L)`` of each side (V, G, d)."""
        return self.perturbation(theta, p, time, self.grad_signs)

    def sides_at(self, theta: np.ndarray, p: np.ndarray, time: float):
        """Each side's ``(F_sigma (V, G, d), log c_sigma (V,), v (V, A))`` at ``theta`` with the
        tie's weights ``p``."""
        eps = self.perturbations(theta, p, time)  # (V, G, d)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_w = np.log(np.abs(p)) - margin_shift(theta, eps, self.mult) @ self.z.T  # (V, A)
            top = np.max(log_w, axis=-1, keepdims=True)
            w = np.sign(p) * np.exp(log_w - top)  # signed: a weight passing 0 is located
            total = np.sum(w, axis=-1, keepdims=True)
            log_total = top + np.log(total)
        q = w / total
        fields = np.einsum("va,vagd->vgd", q, self.margin_gradients(theta + eps))
        v = self.inner(self.margin_gradients(theta)[None], fields[:, None])
        return fields, log_total[:, 0], v

    def switched(self, theta: np.ndarray, time: float) -> tuple[Mode, int, str] | None:
        """The mode after the sliding set or the signs change at ``theta`` (where
        :attr:`TiedPoint.switching` reached 0), the direction and the kind of the change
        ('release', 'sliding' or 'crossing'); None where no change is consistent.

        * The rule's weights reached the boundary of Filippov's set: a direction ``j`` leaves
          on side ``s`` where the rule has weights on the other directions with ``j`` held on
          ``s`` (the vertices with ``sigma_j = s``) and ``G_j`` then moves into ``s``; tried
          in order of how lopsided ``j``'s shares are, its heavier side first.
        * Another direction's ``G_j`` reached 0: it crosses where the weights with its sign
          flipped put ``G_j`` on the new side, else slides where the tie has weights that keep
          it with the others (the rule then in the box; the multilinear rule first, then the
          tilted one, as at a junction of the full field).
        """
        p = self.weights(theta, time)
        if p is None:
            return None
        _, log_c, v = self.sides_at(theta, p, time)
        rates = self.rates(p, v)
        shares, margin = self.rule(rates, log_c, self.sides, self.tilted)
        if margin <= self.kept(p):
            return self._released(shares, rates, log_c)
        return self._reached(theta, time, p)

    def _released(self, shares: np.ndarray, rates: np.ndarray, log_c: np.ndarray):
        """The first consistent release (:meth:`switched`), or None."""
        plus = shares @ (self.sides > 0)
        k = self.directions.size
        for i in np.argsort(np.minimum(plus, 1.0 - plus), kind="stable"):
            rest = [c for c in range(k) if c != i]
            for side in (1.0, -1.0) if plus[i] > 0.5 else (-1.0, 1.0):
                on = self.sides[:, i] == side
                kept, margin = self.rule(
                    rates[on][:, rest], log_c[on], self.sides[on][:, rest],
                    self.tilted and len(rest) >= 2,
                )  # fmt: skip
                if margin > 0 and side * float(kept @ rates[on][:, i]) > 0:
                    mode = self.mode.copy()
                    assert mode.direction_pattern is not None
                    j = int(self.directions[i])
                    mode.direction_pattern[j] = side
                    mode.sliding_directions = tuple(d for d in mode.sliding_directions if d != j)
                    mode.tilted = mode.tilted and len(rest) >= 2
                    return mode, j, "release"
        return None

    def _reached(self, theta: np.ndarray, time: float, p: np.ndarray):
        """Direction ``j`` (the other direction nearest 0) crosses or slides (:meth:`switched`):
        it crosses where the weights with its sign flipped put ``G_j`` on its new side, slides
        where the tie has weights that keep it with the others (the rule then in the box)."""
        kept = self.kept_each(p)
        if kept.size == 0:
            return None
        i = int(np.argmin(kept))
        j, sign = int(self.others[i]), float(self.other_signs[i])
        crossing = self.mode.copy()
        assert crossing.direction_pattern is not None
        crossing.direction_pattern[j] = -sign
        ways = [(crossing, "crossing")]
        for tilted in sorted({self.tilted, True}):  # the multilinear rule first, as at a junction
            sliding = self.mode.copy()
            sliding.sliding_directions = (*sliding.sliding_directions, j)
            sliding.tilted = tilted
            ways.append((sliding, "sliding"))
        for mode, kind in ways:
            tied = SlidingTiedField(self.problem, mode, self.active)
            with np.errstate(all="ignore"):
                found = tied.weights(theta, time, p)
                point = None if found is None else tied.field(theta, time)
            if point is None or not point.switching > 0:
                continue
            if kind == "sliding" or -sign * float(found @ self.z[:, j]) > 0:
                return mode, j, kind
        return None

    def rates(self, p: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``dG_j/dtau`` (V, k) of the sliding directions on each side, from ``v`` (V, A)."""
        centred = v - (v @ p)[:, None]
        return -(centred * p) @ self.z[:, self.directions]

    def rule(
        self, rates: np.ndarray, log_c: np.ndarray, sides: np.ndarray, tilted: bool
    ) -> tuple[np.ndarray, float]:
        """The rule's shares ``W`` of ``tau`` over the sides (rows of ``sides``) with normal
        rates ``rates`` (sides x directions) and clock factors ``log c``, and its margin
        (positive while every direction slides; -1 where the rule has no solution)."""
        if rates.shape[1] == 0:
            return np.ones(len(rates)) / len(rates), np.inf
        if rates.shape[1] == 1:  # Filippov's unique combination, in tau (every rule's)
            r = rates[:, 0]
            with np.errstate(divide="ignore", invalid="ignore"):
                shares = np.array([r[1], -r[0]]) / (r[1] - r[0])
            attracting = bool(np.all(sides[:, 0] * r < 0))
            return shares, float(np.min(shares)) if attracting else -1.0
        if tilted:  # shares of tau from the rates in tau: no clock factor to underflow
            shares, spread, exact = solve_tilted(rates.T)
            return shares, (1.0 - spread / SPREAD_RELEASE) if exact else -1.0
        speeds = np.exp(log_c - np.max(log_c))
        lam, solved = solve_multilinear((rates * speeds[:, None]).T, sides)
        weights = multilinear_weights(lam, sides) * speeds
        margin = float(np.min(np.minimum(lam, 1.0 - lam))) if bool(solved) else -1.0
        return weights / np.sum(weights), margin

    def combined(self, theta: np.ndarray, p: np.ndarray, time: float):
        """``(F, residual, margin)``: the combined field, the gap residual
        ``<a_i - a_1, F>`` (i = 2..A) scaled by the largest gap rate of any side (the scale
        to which the rule's own equations are solved) and the rule's margin."""
        key = (theta.tobytes(), p.tobytes(), float(time))
        if self.last is not None and self.last[0] == key:
            return self.last[1]
        self.evaluations += 1
        fields, log_c, v = self.sides_at(theta, p, time)
        centred = v - (v @ p)[:, None]
        shares, margin = self.rule(self.rates(p, v), log_c, self.sides, self.tilted)
        m = shares @ centred
        residual = (m[1:] - m[0]) / np.max(np.abs(centred))
        found = (np.tensordot(shares, fields, axes=1), residual, margin)
        self.last = (key, found)
        return found

    def weights(self, theta: np.ndarray, time: float, start: np.ndarray | None = None):
        """The tie's weights on the slow manifold from ``start`` (else the last solution,
        else uniform weights), by Gauss-Newton on the gap equations over the weights that keep
        the sliding surfaces; None where there are none, or it does not converge."""
        key = (theta.tobytes(), float(time))
        if start is None and self.memo is not None and self.memo[0] == key:
            return self.memo[1]
        p = start if start is not None else self.p
        p = np.full(self.active.size, 1.0 / self.active.size) if p is None else p
        found = self.feasible(np.array(p, dtype=float))
        if found is not None:
            found = self.gauss_newton(theta, time, found)
        if found is None or not np.all(np.isfinite(found)):
            return None
        self.p = found
        self.memo = (key, found)
        return found

    def gauss_newton(self, theta: np.ndarray, time: float, p: np.ndarray) -> np.ndarray | None:
        """Gauss-Newton on the gap residual over ``p + |p| * (N c)`` (relative changes: the
        tie's weights at the perturbed point are ``e^{-s}``-spread, so a weight far below the
        others can still carry its side), forward differences along each basis vector
        (towards the side that keeps every weight non-negative); converged below
        :data:`NEWTON_TOL`, or at a step below :data:`STEP_TOL` (the rounding floor); with no
        free coordinate, ``p`` where its residual is below :data:`GAP_TOL`. Where the rule has
        no solution (past the boundary of Filippov's set: the sliding is about to change, and
        :attr:`TiedPoint.switching` locates where), the current ``p``. A step that does not
        contract the residual by :data:`CONTRACTION` is halved, at most :data:`HALVINGS` times;
        None where it still does not."""
        _, r, margin = self.combined(theta, p, time)
        for _ in range(GAUSS_NEWTON_ITERATIONS):
            size = float(np.max(np.abs(r), initial=0.0))
            if not np.isfinite(size):
                return None
            if size <= NEWTON_TOL or margin < 0:  # past the rule's boundary: an event locates it
                return p
            if self.free == 0:
                return p if size <= GAP_TOL else None
            scale = np.maximum(np.abs(p), np.finfo(float).tiny)
            basis = scale[:, None] * self.null_space(scale)
            jac = np.empty((r.size, basis.shape[1]))
            for i, direction in enumerate(basis.T):
                h = JACOBIAN_STEP if np.all(p + JACOBIAN_STEP * direction >= 0) else -JACOBIAN_STEP
                jac[:, i] = (self.combined(theta, p + h * direction, time)[1] - r) / h
            step = np.linalg.lstsq(jac, -r, rcond=None)[0]
            for _ in range(HALVINGS):
                trial = p + basis @ step
                _, r_trial, m_trial = self.combined(theta, trial, time)
                reduced = float(np.max(np.abs(r_trial), initial=0.0))
                if reduced <= CONTRACTION * size or m_trial < 0:
                    break
                step = step / 2.0
            else:
                return None
            p, r, margin = trial, r_trial, m_trial
            if np.max(np.abs(step)) <= STEP_TOL:
                return p
        return None

    def field(self, theta: np.ndarray, time: float) -> TiedPoint | None:
        """The reduced field at ``theta``: ``positive`` is each weight relative to the largest
        (the weights at the perturbed point are ``e^{-s}``-spread by construction: a tied
        example leaves where its weight at the point reaches 0), ``switching`` the smaller of
        the rule's margin and the other directions' ``sign(G_j) G_j / sum_k p_k |z_kj|``."""
        p = self.weights(theta, time)
        if p is None:
            return None
        velocity, _, margin = self.combined(theta, p, time)
        return TiedPoint(velocity, p / np.max(p), min(margin, self.kept(p)))

    def kept_each(self, p: np.ndarray) -> np.ndarray:
        """``sign(G_j) G_j / sum_k p_k |z_kj|`` of each direction that does not slide."""
        z = self.z[:, self.others]
        return self.other_signs * (p @ z) / np.maximum(p @ np.abs(z), 1e-300)

    def kept(self, p: np.ndarray) -> float:
        """The smallest of :meth:`kept_each` (``inf`` where every direction slides)."""
        return float(np.min(self.kept_each(p), initial=np.inf))
