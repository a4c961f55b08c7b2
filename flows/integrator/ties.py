"""The flow on its slow manifold of tied margins, from where a stiff run stops to its blow-up.

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
Examples outside ``A`` carry weights ``e^{-g}`` with gaps that grow like ``u``: below
:data:`ACTIVE_WEIGHT` where the reduced field takes over, they are left out; an example whose
margin comes back within :data:`ENTER_GAP` of the tie joins ``A``, and one whose weight (at the
point or the perturbed point) reaches 0 leaves it (the segment restarts with the new tie).

The reduced field is not stiff: an explicit method follows it at the steps of the direction's
motion, up to where at most :data:`~flows.integrator.stiffness.TIED_BLOWUP_TOL`
``* max(1, tau)`` is left to the blow-up by homogeneity, and the run ends there in the
extrapolated blow-up (status 1). It takes over where a stiff run cannot go on (its steps stall,
its tied gaps are lost to rounding, or its solver fails), if the run's own weights agree with
the slow manifold's to :data:`HANDOVER_TOL`; the run's message says so and gives the
difference (measured on teacher data at depth 3: ~1e-11, the model's error being O(1/u)).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..algorithms import GradientSummary, hyperparameters_at
from ..field import Problem
from ..results import Cause, FlowEvent
from ..signedlog import SignedLog
from .segments import Mode, Segment
from .solver import integrate_segment
from .stiffness import TIED_BLOWUP_TOL

#: Smallest loss argument at which the tied weights are read as ``e^{-u}``: the logistic
#: loss's ``|l'(u)| = e^{-u} / (1 + e^{-u})`` is ``e^{-u}`` to ``4e-18`` there.
EXP_TAIL = 40.0
#: Examples whose weight is below this times the largest where the reduced field takes over
#: are left out of the tie (their gaps grow like ``u``; ``e^{-g}`` at 1e-12 and falling).
ACTIVE_WEIGHT = 1e-12
#: An example outside the tie joins it where its gap to the tie falls to this.
ENTER_GAP = 30.0
#: Largest difference between the run's own tied weights and the slow manifold's (max over
#: the tie, relative to the largest weight) at which the reduced field takes over.
HANDOVER_TOL = 1e-4
#: Newton iterations of one solve, and the scaled residual at which it stops.
NEWTON_ITERATIONS = 30
NEWTON_TOL = 1e-11
JACOBIAN_STEP = 1e-7
#: A Newton step below this (the weights sum to 1) ends the solve: the residual is then at
#: its rounding floor, ``~1e-12`` of its scale.
STEP_TOL = 1e-13
#: Changes of the tie (an example joins or leaves) one finish may make.
MAX_RESTARTS = 50


def applies(problem: Problem, mode: Mode) -> bool:
    """Whether the reduced field covers a run: a smooth perturbation of the whole gradient
    (not sign-discontinuous, not per example, no residual switch), the rescaled clock, no
    parameter held and no frozen sign pattern."""
    algo = problem.algorithm
    return (
        not problem.clock.original
        and not problem.data.regression
        and not (algo.sign_discontinuous or algo.per_example or algo.residual_switch)
        and not np.any(mode.held)
        and mode.sign_pattern is None
    )


def _expanded(theta: np.ndarray, multiplicity: np.ndarray) -> np.ndarray:
    """The layers of the network, each group's row repeated its multiplicity times."""
    return np.repeat(theta, np.asarray(multiplicity, dtype=int), axis=0)


def margin_shift(theta: np.ndarray, eps: np.ndarray, multiplicity: np.ndarray) -> np.ndarray:
    """``prod_l (theta_l + eps_l) - prod_l theta_l`` (shape (d,)) without cancellation, as the
    telescoping sum ``sum_l (prod_{k<l} (theta_k + eps_k)) eps_l (prod_{k>l} theta_k)`` over
    the expanded layers."""
    w, e = _expanded(theta, multiplicity), _expanded(eps, multiplicity)
    total = np.zeros(w.shape[1])
    for layer in range(w.shape[0]):
        before = np.prod(w[:layer] + e[:layer], axis=0)
        after = np.prod(w[layer + 1 :], axis=0)
        total += before * e[layer] * after
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

    def inner(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``<a, b>`` over the last two axes, each group counted with its multiplicity."""
        return np.sum(a * b * self.mult[:, None], axis=(-2, -1))

    def margin_gradients(self, theta: np.ndarray) -> np.ndarray:
        """``grad u_k = z_k * prod_{l' != l} theta^(l')`` for ``k`` in the tie, (A, G, d)."""
        beta = np.prod(theta ** self.mult[:, None], axis=0)
        return self.z[:, None, :] * (beta / theta)[None]

    def perturbation(self, theta: np.ndarray, p: np.ndarray, time: float) -> np.ndarray:
        """``eps`` of the algorithm at ``theta`` with the tie's weights ``p`` (shape (G, d)); the
        loss's size ``c = sum_i e^{-u_i}`` (for the perturbations that read ``||grad L||``)
        from the margins of every example."""
        descent = np.tensordot(p, self.margin_gradients(theta), axes=1)  # -grad L / c
        norm = float(np.sqrt(self.inner(descent, descent)))
        u = self.problem.data.signed_features @ np.prod(theta ** self.mult[:, None], axis=0)
        log_c = float(-np.min(u) + np.log(np.sum(np.exp(-(u - np.min(u))))))
        summary = GradientSummary(
            -descent / norm, -np.sign(descent), log_c + np.log(norm), self.mult,
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
        = 0`` (at ``point = theta``, the Gram system of gradient descent)."""
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

    def field(self, theta: np.ndarray, time: float) -> tuple[np.ndarray, np.ndarray] | None:
        """``(F, (p, q))`` at ``theta``: the reduced field and the tie's weights at the point
        and at the perturbed point; None where the weights are not found."""
        p = self.weights(theta, time)
        if p is None:
            return None
        q, point, _ = self.perturbed_weights(theta, p, time)
        return self.velocity(point, q), np.concatenate([p, q])

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


class _Reduced:
    """The reduced field in a run's chart: ``rhs(s, y)`` with ``y = (z, tau)``, and the
    functions of its events (each with a ``direction``, as :func:`integrate_segment` reads)."""

    def __init__(self, problem: Problem, mode: Mode, active: np.ndarray, p0: np.ndarray) -> None:
        self.problem, self.mode = problem, mode
        self.tied = TiedField(problem, active)
        self.tied.p = p0
        self.depth = int(np.sum(problem.multiplicity))
        self.outside = np.setdiff1d(np.arange(problem.data.n), active)
        self.memo: tuple | None = None

    def theta(self, y: np.ndarray) -> np.ndarray:
        """Float parameters at the chart state ``y``."""
        return self.mode.chart.state(y[:-1].reshape(self.problem.shape)).to_float()

    def at(self, s: float, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """``(theta, F, (p, q))`` at the chart state ``y`` (None where the weights are not
        found)."""
        key = (y.tobytes(), s)
        if self.memo is not None and self.memo[0] == key:
            return self.memo[1]
        theta = self.theta(y)
        with np.errstate(all="ignore"):
            found = self.tied.field(theta, s)
        value = None if found is None else (theta, found[0], found[1])
        self.memo = (key, value)
        return value

    def rhs(self, s: float, y: np.ndarray) -> np.ndarray:
        """``d(z, tau)/ds`` of the reduced field (NaN where the weights are not found: the
        solver rejects the step)."""
        found = self.at(s, y)
        if found is None:
            return np.full(y.shape, np.nan)
        theta, dw, _ = found
        dz = self.mode.chart.velocity(SignedLog.from_float(dw), y[:-1].reshape(theta.shape))
        return np.append(dz.ravel(), 1.0)

    def time_left(self, s: float, y: np.ndarray) -> float:
        """``1 / ((L - 2) r)``, ``r = max_j dlog|w_j|/dtau`` of the reduced field."""
        found = self.at(s, y)
        if found is None:
            return np.inf
        with np.errstate(all="ignore"):
            rate = float(np.max(found[1] / found[0]))
        return 1.0 / ((self.depth - 2) * rate) if rate > 0 else np.inf

    def near_blowup(self, s: float, y: np.ndarray) -> float:
        """``log(time left) - log(TIED_BLOWUP_TOL max(1, tau))``: 0 where the run ends."""
        left = self.time_left(s, y)
        return float(np.log(left) - np.log(TIED_BLOWUP_TOL * max(1.0, float(y[-1]))))

    def smallest_weight(self, s: float, y: np.ndarray) -> float:
        """The tie's smallest weight relative to its largest, at the point or at the perturbed
        point: 0 where an example leaves the tie."""
        found = self.at(s, y)
        if found is None:
            return 1.0
        p, q = np.split(found[2], 2)
        return float(min(np.min(p) / np.max(p), np.min(q) / np.max(q)))

    def closest_gap(self, s: float, y: np.ndarray) -> float:
        """``min_{j outside} (u_j - min_{k in tie} u_k) - ENTER_GAP``: 0 where one joins."""
        if self.outside.size == 0:
            return np.inf
        theta = self.theta(y)
        u = self.problem.data.signed_features @ np.prod(
            theta ** np.asarray(self.problem.multiplicity, dtype=float)[:, None], axis=0
        )
        return float(np.min(u[self.outside]) - np.min(u[self.tied.active]) - ENTER_GAP)


@dataclass
class _Watch:
    """A terminal event of :func:`integrate_segment`: ``function(s, y)`` crossing 0 in
    ``direction``."""

    function: Callable[[float, np.ndarray], float]
    direction: float = -1.0

    def __call__(self, s: float, y: np.ndarray) -> float:
        return self.function(s, y)


def _start(run, mode: Mode) -> tuple[np.ndarray, np.ndarray, float] | None:
    """The tie where the reduced field takes over a run at ``run.y``: its examples, their
    weights on the slow manifold, and the largest difference from the run's own weights;
    None where the margins are not in the exponential tail, or the weights are not found,
    not positive or too far from the run's (:data:`HANDOVER_TOL`)."""
    problem = run.problem
    theta = mode.chart.state(run.y[:-1].reshape(problem.shape)).to_float()
    with np.errstate(all="ignore"):
        u = problem.data.signed_features @ np.prod(
            theta ** np.asarray(problem.multiplicity, dtype=float)[:, None], axis=0
        )
    if not (np.all(np.isfinite(u)) and np.min(u) >= EXP_TAIL):
        return None
    own = np.exp(-(u - np.min(u)))
    active = np.flatnonzero(own > ACTIVE_WEIGHT * np.max(own))
    own = own[active] / np.sum(own[active])
    with np.errstate(all="ignore"):
        p = TiedField(problem, active).weights(theta, run.s, own)
    if p is None or np.min(p) <= 0:
        return None
    difference = float(np.max(np.abs(p - own)) / np.max(p))
    return (active, p, difference) if difference <= HANDOVER_TOL else None


def finish(run, why: str) -> bool:
    """Follow a stiff run that cannot go on (``why``) on its slow manifold to the blow-up (see
    the module docstring); whether the reduced field took over (it then ends the run: in the
    blow-up extrapolated by homogeneity, at ``t_max``, or where its own solver fails or the
    budget is spent)."""
    mode = run.mode
    if not applies(run.problem, mode):
        return False
    start = _start(run, mode)
    if start is None:
        return False
    active, p, difference = start
    tau0 = float(run.y[-1])
    rtol, atol = run.tolerances(mode)
    for _ in range(MAX_RESTARTS):
        reduced = _Reduced(run.problem, mode, active, p)
        watched = [
            _Watch(reduced.near_blowup),
            _Watch(reduced.smallest_weight),
            _Watch(reduced.closest_gap),
        ]
        result = integrate_segment(
            reduced.rhs, run.s, run.y, run.s_end, watched, "DOP853", rtol, atol,
            max(1, run.budget - run.nfev),
        )  # fmt: skip
        run.nfev += result.nfev
        if len(result.ts) > 1:
            run.used("tied weights")
            run.path.segments.append(Segment(mode.copy(), np.array(result.ts), result.interpolants))
            run.s, run.y = result.ts[-1], result.y.copy()
        tau = float(run.y[-1])
        model = (
            f"from tau={tau0:.10g}, where {why}, the path follows its slow manifold: the "
            f"weights of the tied examples hold their gaps ({len(active)} examples at the "
            f"start; they differed from the run's own weights by {difference:.2g})"
        )
        if result.status == "event" and result.event == 0:
            left = reduced.time_left(run.s, run.y)
            run.log.append(FlowEvent(tau + left, "blow-up"))
            run.stop(
                Cause.BLOW_UP,
                f"finite-time blow-up at tau={tau + left:.10g}, extrapolated: the path ends "
                f"{left:.3g} before it at tau={tau:.10g}; {model}; tau* = tau + "
                "1/((L - 2) r), r = max_j dlog|w_j|/dtau, by homogeneity",
            )
            return True
        if result.status == "event":
            p = reduced.tied.p if reduced.tied.p is not None else p
            if result.event == 1:  # a weight reached 0: the example leaves the tie
                found = reduced.at(run.s, run.y)
                both = np.split(found[2], 2) if found is not None else (p, p)
                leaving = int(
                    np.argmin(np.minimum(both[0] / np.max(both[0]), both[1] / np.max(both[1])))
                )
                keep = np.arange(active.size) != leaving
                active, p = active[keep], p[keep] / np.sum(p[keep])
            else:  # an example's margin came back to the tie: it joins with weight 0
                theta = reduced.theta(run.y)
                u = run.problem.data.signed_features @ np.prod(
                    theta ** np.asarray(run.problem.multiplicity, dtype=float)[:, None], 0
                )
                joining = reduced.outside[int(np.argmin(u[reduced.outside]))]
                active, p = np.append(active, joining), np.append(p, 0.0)
            continue
        if result.status == "end":
            run.message = f"reached t_max; {model}"
        elif result.status == "budget":
            run.stop(Cause.BUDGET_SPENT, f"budget spent at tau={tau:.10g}; {model}")
        else:
            run.stop(
                Cause.SOLVER_FAILED,
                f"solver failed at tau={tau:.10g}: {result.message}; {model}",
            )
        return True
    run.stop(
        Cause.TOO_MANY_EVENTS,
        f"the tie changed more than {MAX_RESTARTS} times by tau={float(run.y[-1]):.10g}",
    )
    return True
