"""The weights of tied examples on the slow manifold of a smooth perturbation, and the field
they give (:mod:`flows.integrator.ties` follows it).

Near a finite-time blow-up (classification, several examples, depth ``L >= 3``, the rescaled
clock) the smallest margins tie: their gaps ``g_i = u_i - u_1`` settle to O(1) values while the
margins grow like ``u``, and they relax to those values at a rate that grows like ``u`` times
the perturbation's gain (:mod:`flows.integrator.stiffness`). The loss weights of the tied
examples are then the fast variables of a singularly perturbed system: at the point,
``p_i ∝ e^{-g_i}``, and at the perturbed point ``theta' = theta + eps``,
``q_i ∝ p_i e^{-s_i}``, where ``s_i = u_i(theta') - u_i(theta)`` is how far the perturbation
moves margin ``i`` (computed without cancellation, :func:`margin_shift`). To leading order in
``1/u`` they take the values that hold the gaps: with ``a_k(x) = grad u_k(x) = z_k *
prod_{l' != l} x^(l')`` and ``<.,.>`` over all parameters (each group counted with its
multiplicity),

    ``<a_i(theta) - a_1(theta), sum_k q_k a_k(theta')> = 0``  (``i`` in the tie ``A``,
    ``sum q = 1``: linear in ``q``, :meth:`TiedField.tie_weights`),
    ``Psi_i(p) = (log q - log p + s)_i - (log q - log p + s)_1 = 0``,

``eps`` the algorithm's perturbation of ``grad L ∝ -sum_k p_k a_k(theta)``; the field is
``F = sum_k q_k a_k(theta')``. For gradient descent ``q = p`` solves the Gram system of the
margin gradients; for the SAM variants ``Psi`` is solved by Newton's method on ``p`` from the
last solution. ``q`` enters linearly and ``s`` through logarithms, so the solve is well
conditioned where the weights themselves answer the gaps with gains of 1e8 and more.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..algorithms import GradientSummary, hyperparameters_at
from ..field import Problem

#: Newton iterations of one solve, and the scaled residual at which it stops.
NEWTON_ITERATIONS = 30
NEWTON_TOL = 1e-11
JACOBIAN_STEP = 1e-7
#: A Newton step below this (the weights sum to 1) ends the solve: the residual is then at
#: its rounding floor, ``~1e-12`` of its scale.
STEP_TOL = 1e-13


class TiedPoint(NamedTuple):
    """The reduced field at one point: ``velocity`` ``F`` (G, d); ``positive`` (A,) each tied
    example's smallest weight relative to the largest (0 where it leaves the tie); and
    ``switching``, positive while the sign pattern of the perturbation holds (``inf`` where
    nothing switches)."""

    velocity: np.ndarray
    positive: np.ndarray
    switching: float = np.inf


def _expanded(theta: np.ndarray, multiplicity: np.ndarray) -> np.ndarray:
    """The layers of the network, each group's row repeated its multiplicity times."""
    return np.repeat(theta, np.asarray(multiplicity, dtype=int), axis=-2)


def margin_shift(theta: np.ndarray, eps: np.ndarray, multiplicity: np.ndarray) -> np.ndarray:
    """``prod_l (theta_l + eps_l) - prod_l theta_l`` (shape (..., d) for ``eps`` of shape
    (..., G, d)) without cancellation, as the telescoping sum
    ``sum_l (prod_{k<l} (theta_k + eps_k)) eps_l (prod_{k>l} theta_k)`` over the expanded
    layers."""
    w, e = _expanded(theta, multiplicity), _expanded(eps, multiplicity)
    total = np.zeros(e.shape[:-2] + (w.shape[-1],))
    for layer in range(w.shape[-2]):
        before = np.prod(w[:layer] + e[..., :layer, :], axis=-2)
        after = np.prod(w[layer + 1 :], axis=0)
        total = total + before * e[..., layer, :] * after
    return total


class TiedField:
    """The reduced field on the tie ``active`` (indices of examples) at float parameters
    ``theta`` (shape (G, d)); see the module docstring for the equations."""

    def __init__(self, problem: Problem, active: np.ndarray) -> None:
        self.problem = problem
        self.active = np.asarray(active, dtype=int)
        self.z = problem.data.signed_features[self.active]
        self.mult = np.asarray(problem.multiplicity, dtype=float)
        self.p: np.ndarray | None = None
        self.jac: np.ndarray | None = None
        self.memo: tuple | None = None
        #: evaluations of the sides' fields spent by the weights' solves (the sliding tie's)
        self.evaluations = 0

    def inner(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``<a, b>`` over the last two axes, each group counted with its multiplicity."""
        return np.sum(a * b * self.mult[:, None], axis=(-2, -1))

    def margins(self, theta: np.ndarray) -> np.ndarray:
        """Every example's margin ``u = Z prod_l theta_l`` (n,)."""
        return self.problem.data.signed_features @ np.prod(theta ** self.mult[:, None], axis=0)

    def entry_gaps(self, theta: np.ndarray, time: float, others: np.ndarray) -> np.ndarray:
        """How far each example in ``others`` (outside the tie) is from joining it: the
        smaller of its margin's gap ``u_j - min_{k in tie} u_k`` at the point (its weight is
        ``e^{-gap}`` of the tie's largest, to O(1)) and its smallest gap at a perturbed point,
        ``min_sigma (u_j(theta + eps_sigma) - min_{k in tie} u_k(theta + eps_sigma))`` (the
        perturbation moves the margins by hundreds where they are in the tens of thousands:
        an example far above the tie at the point can carry the weight at the perturbed
        point)."""
        u = self.margins(theta)
        gaps = u[others] - np.min(u[self.active])
        if not self.problem.algorithm.perturbs:
            return gaps
        p = self.p if self.p is not None else np.full(self.active.size, 1.0 / self.active.size)
        shifts = margin_shift(theta, self.perturbations(theta, p, time), self.mult)  # (V, d)
        moved = u + shifts @ self.problem.data.signed_features.T  # (V, n)
        perturbed = moved[:, others] - np.min(moved[:, self.active], axis=1, keepdims=True)
        return np.minimum(gaps, np.min(perturbed, axis=0))

    def perturbations(self, theta: np.ndarray, p: np.ndarray, time: float) -> np.ndarray:
        """The perturbations of the points the field combines (V, G, d): one, the
        algorithm's."""
        return self.perturbation(theta, p, time)[None]

    def margin_gradients(self, theta: np.ndarray) -> np.ndarray:
        """``grad u_k = z_k * prod_{l' != l} theta^(l')`` for ``k`` in the tie: (..., A, G, d)
        for ``theta`` of shape (..., G, d)."""
        beta = np.prod(theta ** self.mult[:, None], axis=-2)
        return self.z[:, None, :] * (beta[..., None, :] / theta)[..., None, :, :]

    def perturbation(
        self, theta: np.ndarray, p: np.ndarray, time: float, sign: np.ndarray | None = None
    ) -> np.ndarray:
        """``eps`` of the algorithm at ``theta`` with the tie's weights ``p`` (shape (G, d)); the
        loss's size ``c = sum_i e^{-u_i}`` (for the perturbations that read ``||grad L||``)
        from the margins of every example; ``sign``: a frozen ``sign(grad L)`` (l_inf-SAM)."""
        descent = np.tensordot(p, self.margin_gradients(theta), axes=1)  # -grad L / c
        norm = float(np.sqrt(self.inner(descent, descent)))
        u = self.margins(theta)
        log_c = float(-np.min(u) + np.log(np.sum(np.exp(-(u - np.min(u))))))
        summary = GradientSummary(
            -descent / norm, -np.sign(descent) if sign is None else sign, log_c + np.log(norm), self.mult,
            np.log(np.abs(theta)),
        )  # fmt: skip
        return self.problem.algorithm.perturb(
            summary, hyperparameters_at(self.problem.hyperparameters, time)
        )

    def perturbed_weights(self, theta: np.ndarray, p: np.ndarray, time: float):
        """``(q, theta', shift)``: the weights ``q`` at the perturbed point ``theta'`` that hold
        the tie's gaps (``Phi(q) = 0``, a linear system with ``sum q = 1``), and how far the
        perturbation moves each tied margin (:func:`margin_shift`)."""
        eps = self.perturbation(theta, p, time)
        point = theta + eps
        shift = self.z @ margin_shift(theta, eps, self.mult)
        return self.tie_weights(theta, point), point, shift

    def tie_weights(self, theta: np.ndarray, point: np.ndarray) -> np.ndarray:
        """The weights ``q`` (``sum q = 1``) of the margin gradients at ``point`` that hold the
        tie's gaps at ``theta``: ``<grad u_i(theta) - grad u_1(theta), sum_k q_k grad u_k(point)>
        = 0`` (at ``point = theta``, the Gram system of gradient descent; one example: 1)."""
        if self.active.size == 1:
            return np.ones(1)
        grads = self.margin_gradients(theta)
        moved = grads if point is theta else self.margin_gradients(point)
        rows = self.inner((grads[1:] - grads[0])[:, None], moved[None])  # (A-1, A)
        system = np.vstack([rows / np.max(np.abs(rows)), np.ones(self.active.size)])
        rhs = np.zeros(self.active.size)
        rhs[-1] = 1.0
        return np.linalg.solve(system, rhs)

    def velocity(self, point: np.ndarray, q: np.ndarray) -> np.ndarray:
        """``F = sum_k q_k grad u_k(theta')`` (shape (G, d))."""
        return np.tensordot(q, self.margin_gradients(point), axes=1)

    def residual(self, theta: np.ndarray, p: np.ndarray, time: float) -> np.ndarray:
        """``Psi(p) = (log q - log p + shift)_k - (...)_1`` over the tie but its first example:
        0 where the weights at the perturbed point are those of the unperturbed point moved by
        the shifts, ``q ∝ p e^{-shift}`` (NaN where a weight is not positive)."""
        q, _, shift = self.perturbed_weights(theta, p, time)
        with np.errstate(invalid="ignore", divide="ignore"):
            psi = np.log(q) - np.log(p) + shift
        return psi[1:] - psi[0]

    def jacobian(self, theta: np.ndarray, p: np.ndarray, r: np.ndarray, time: float):
        """``dPsi/dp_j`` for ``j = 2..A`` (moving weight from ``p_1``), forward differences."""
        k = p.size
        jac = np.empty((k - 1, k - 1))
        for j in range(1, k):
            moved = p.copy()
            moved[j] += JACOBIAN_STEP
            moved[0] -= JACOBIAN_STEP
            jac[:, j - 1] = (self.residual(theta, moved, time) - r) / JACOBIAN_STEP
        return jac

    def weights(self, theta: np.ndarray, time: float, start: np.ndarray | None = None):
        """The tie's weights ``p`` with ``Psi(p) = 0`` (:meth:`newton`) from ``start`` (else the
        last solution, else gradient descent's, :meth:`tie_weights`); a run without perturbation has ``q = p`` and takes ``q``.
        None where it does not converge (with the last Jacobian kept, then a fresh one)."""
        k = self.active.size
        if k == 1:
            return np.ones(1)
        key = (theta.tobytes(), float(time))
        if start is None and self.memo is not None and self.memo[0] == key:
            return self.memo[1]
        p = start if start is not None else self.p
        p = self.tie_weights(theta, theta) if p is None else np.array(p, dtype=float)
        try:
            if not self.problem.algorithm.perturbs:
                found = self.perturbed_weights(theta, p, time)[0]
            else:
                found = self.newton(theta, time, p)
                if found is None and self.jac is not None:
                    self.jac = None
                    found = self.newton(theta, time, p)
        except np.linalg.LinAlgError:  # margin gradients of the tie not independent
            found = None
        if found is None or not np.all(np.isfinite(found)):
            self.jac = None
            return None
        self.p = found
        self.memo = (key, found)
        return found

    def field(self, theta: np.ndarray, time: float) -> TiedPoint | None:
        """The reduced field at ``theta``; each example's ``positive`` is the smaller of its
        weights at the point and at the perturbed point, each relative to the largest. None
        where the weights are not found."""
        p = self.weights(theta, time)
        if p is None:
            return None
        q, point, _ = self.perturbed_weights(theta, p, time)
        return TiedPoint(self.velocity(point, q), np.minimum(p / np.max(p), q / np.max(q)))

    def newton(self, theta: np.ndarray, time: float, p: np.ndarray) -> np.ndarray | None:
        """Newton's method on ``p_2..p_A`` (``p_1 = 1 - sum``) from ``p``, the last Jacobian
        kept while it contracts the residual tenfold per iteration; it ends where the residual
        is below :data:`NEWTON_TOL`, or where a step with a fresh Jacobian is below
        :data:`STEP_TOL` (the residual's rounding floor)."""
        previous = np.inf
        for _ in range(NEWTON_ITERATIONS):
            r = self.residual(theta, p, time)
            size = float(np.max(np.abs(r)))
            if not np.isfinite(size):
                return None
            if size <= NEWTON_TOL:
                return p
            fresh = self.jac is None or size > 0.1 * previous
            jac = self.jacobian(theta, p, r, time) if fresh or self.jac is None else self.jac
            self.jac = jac
            previous = size
            step = np.linalg.solve(jac, -r)
            p = p.copy()
            p[1:] += step
            p[0] = 1.0 - np.sum(p[1:])
            if np.max(np.abs(step)) <= STEP_TOL:
                if fresh:
                    return p
                previous = 0.0  # a small step of an old Jacobian: check with a fresh one
        return None
