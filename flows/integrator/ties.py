"""The flow on its slow manifold of tied margins, from where a stiff run stops to its blow-up
(or its end, at depth 2).

As the margins grow (classification, several examples, the rescaled clock: near a finite-time
blow-up at depth ``L >= 3``, exponentially in ``tau`` at depth 2) the smallest margins tie and
their loss weights become the fast variables of a singularly perturbed system; to leading order
in ``1/u`` they take the values that hold the tie's gaps (:mod:`flows.integrator.tied_fields`
for a smooth perturbation, :mod:`flows.integrator.sliding_ties` for l_inf-SAM with its frozen
signs and sliding directions), and the field they give is the reduced field.
Examples outside ``A`` carry weights ``e^{-g}`` with gaps that grow like ``u``: below
:data:`ACTIVE_WEIGHT` where the reduced field takes over, they are left out; an example whose
margin comes back within :data:`ENTER_GAP` of the tie joins ``A``, and one whose weight (at the
point or the perturbed point) reaches 0 leaves it (the segment restarts with the new tie).

The reduced field is not stiff: an explicit method follows it at the steps of the direction's
motion, up to where at most :data:`~flows.integrator.stiffness.TIED_BLOWUP_TOL`
``* max(1, tau)`` is left to the blow-up by homogeneity, and the run ends there in the
extrapolated blow-up (status 1); at depth 2 up to ``t_max``. It takes over where a stiff run
cannot go on (its steps stall, its tied gaps are lost to rounding, or its solver fails), or
where an explicit run's steps stall on margins tied to their rounding, if the run's own weights
agree with the slow manifold's to :data:`HANDOVER_TOL`; the run's message says so and gives the
difference (measured on teacher data at depth 3: ~1e-11, the model's error being O(1/u)).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..field import Problem
from ..results import Cause, FlowEvent
from ..signedlog import SignedLog
from .segments import Mode, Segment
from .sliding_ties import SlidingTiedField
from .solver import integrate_segment
from .stiffness import TIED_BLOWUP_TOL, left_or_end
from .tied_fields import TiedField, TiedPoint

#: Smallest loss argument at which the tied weights are read as ``e^{-u}``: the logistic
#: loss's ``|l'(u)| = e^{-u} / (1 + e^{-u})`` is ``e^{-u}`` to ``4e-18`` there.
EXP_TAIL = 40.0
#: Examples whose weight is below this times the largest where the reduced field takes over
#: are left out of the tie (their gaps grow like ``u``; ``e^{-g}`` at 1e-12 and falling).
ACTIVE_WEIGHT = 1e-12
#: An example outside the tie joins it where its gap to the tie falls to this.
ENTER_GAP = 30.0
#: Largest difference between the run's own tied weights and the slow manifold's (max over
#: the tie, relative to the largest weight) at which the reduced field takes over; a larger
#: one where :data:`HANDOVER_SHIFT` allows it.
HANDOVER_TOL = 1e-4
#: Largest ``max |log p - log own|`` over the tie, relative to its smallest margin ``u_min``, at
#: which the reduced field takes over from weights further apart than :data:`HANDOVER_TOL`: the
#: tie's margins would move by at most this share of their size to carry the manifold's
#: weights. Where the reduced field takes over (the ties lost, or a stiff stall) the run
#: resolves its gaps only to ``~u rtol`` (the solver controls ``log|w|`` to ``rtol``;
#: :data:`flows.integrator.stiffness.TIE_RESOLUTION`), and a stalled implicit method leaves
#: them further off: measured 1e-3 in log at ``u`` = 2e8 (rtol 1e-8) and 0.76 at ``u`` = 1.3e8
#: (rtol 1e-10, 6e-9 of the margins), the reduced field then reaching the blow-up of runs at
#: other tolerances to 2e-8. The sliding ties allow 1e-4 (:data:`SLIDING_HANDOVER_TOL`).
HANDOVER_SHIFT = 1e-7
#: For l_inf-SAM sliding on directions, the largest change of the tie's gaps (``max_k |log p_k
#: - log own_k|``) relative to its smallest margin at which the reduced field takes over: its
#: run keeps the sliding surfaces only up to its integration error (no projection), and over a
#: stiff stall that error, amplified by the margins, moves the tie's weights off
#: ``Z_J^T p = 0`` by up to tens of percent (measured 7e-4 to 0.7 in log on teacher data at
#: depth 3), a change of the margins by 1e-7 to 2e-6 of their size.
SLIDING_HANDOVER_TOL = 1e-4
#: Changes of the tie (an example joins or leaves) one finish may make.
MAX_RESTARTS = 50
#: Evaluations of the reduced field one segment may take, and evaluations of the sliding
#: sides' fields (each Gauss-Newton iteration takes one per free weight and one more): it is not
#: stiff (a run to its blow-up takes a few hundred of each); a segment that spends these has
#: stalled.
STALL_NFEV = 1000
STALL_SIDES = 3000
#: The first step of a segment, as a share of the time left to the blow-up by homogeneity, or
#: to the run's end at depth 2 (the solver's own first guess can step over where the tie or its
#: sliding changes).
FIRST_STEP = 1e-3


def applies(problem: Problem, mode: Mode) -> bool:
    """Whether the reduced field covers a run: a perturbation of the whole gradient (not per
    example, no residual switch), the rescaled clock, no parameter held; a sign-discontinuous
    perturbation with its signs frozen (sliding on directions only)."""
    algo = problem.algorithm
    frozen = mode.pattern is not None
    return (
        not problem.clock.original
        and not problem.data.regression
        and not (algo.per_example or algo.residual_switch)
        and not np.any(mode.held)
        and frozen == algo.sign_discontinuous
    )


def tied_field(problem: Problem, mode: Mode, active: np.ndarray) -> TiedField:
    """The reduced field of the tie ``active`` in ``mode``: l_inf-SAM's with its frozen signs
    and sliding directions, or a smooth perturbation's."""
    if problem.algorithm.sign_discontinuous:
        return SlidingTiedField(problem, mode, active)
    return TiedField(problem, active)


class _Reduced:
    """The reduced field in a run's chart: ``rhs(s, y)`` with ``y = (z, tau)``, and the
    functions of its events (each with a ``direction``, as :func:`integrate_segment` reads)."""

    def __init__(self, problem: Problem, mode: Mode, active: np.ndarray, p0: np.ndarray) -> None:
        self.problem, self.mode = problem, mode
        self.tied = tied_field(problem, mode, active)
        self.tied.p = p0
        self.depth = int(np.sum(problem.multiplicity))
        self.outside = np.setdiff1d(np.arange(problem.data.n), active)
        self.memo: tuple | None = None

    def theta(self, y: np.ndarray) -> np.ndarray:
        """Float parameters at the chart state ``y``."""
        return self.mode.chart.state(y[:-1].reshape(self.problem.shape)).to_float()

    def at(self, s: float, y: np.ndarray) -> tuple[np.ndarray, TiedPoint] | None:
        """``(theta, the reduced field there)`` at the chart state ``y`` (None where the
        weights are not found)."""
        key = (y.tobytes(), s)
        if self.memo is not None and self.memo[0] == key:
            return self.memo[1]
        theta = self.theta(y)
        with np.errstate(all="ignore"):
            found = self.tied.field(theta, s)
        value = None if found is None else (theta, found)
        self.memo = (key, value)
        return value

    def rhs(self, s: float, y: np.ndarray) -> np.ndarray:
        """``d(z, tau)/ds`` of the reduced field (NaN where the weights are not found: the
        solver rejects the step)."""
        found = self.at(s, y)
        if found is None:
            return np.full(y.shape, np.nan)
        theta, point = found
        dz = self.mode.chart.velocity(
            SignedLog.from_float(point.velocity), y[:-1].reshape(theta.shape)
        )
        return np.append(dz.ravel(), 1.0)

    def time_left(self, s: float, y: np.ndarray) -> float:
        """``1 / ((L - 2) r)``, ``r = max_j dlog|w_j|/dtau`` of the reduced field (``inf`` at
        depth 2, where nothing blows up, or where no parameter grows)."""
        found = self.at(s, y)
        if found is None or self.depth < 3:
            return np.inf
        with np.errstate(all="ignore"):
            rate = float(np.max(found[1].velocity / found[0]))
        return 1.0 / ((self.depth - 2) * rate) if rate > 0 else np.inf

    def near_blowup(self, s: float, y: np.ndarray) -> float:
        """``log(time left) - log(TIED_BLOWUP_TOL max(1, tau))``: 0 where the run ends."""
        left = self.time_left(s, y)
        return float(np.log(left) - np.log(TIED_BLOWUP_TOL * max(1.0, float(y[-1]))))

    def smallest_weight(self, s: float, y: np.ndarray) -> float:
        """The tie's smallest weight relative to its largest (:class:`TiedPoint`): 0 where an
        example leaves the tie."""
        found = self.at(s, y)
        return 1.0 if found is None else float(np.min(found[1].positive))

    def switching(self, s: float, y: np.ndarray) -> float:
        """Positive while the perturbation's signs and sliding hold (:class:`TiedPoint`)."""
        found = self.at(s, y)
        return 1.0 if found is None else min(float(found[1].switching), 1.0)

    def unspent(self, s: float, y: np.ndarray) -> float:
        """Evaluations of the sides' fields left to the segment: 0 where it has stalled."""
        return float(STALL_SIDES - self.tied.evaluations)

    def closest_gap(self, s: float, y: np.ndarray) -> float:
        """The smallest gap of an example outside the tie
        (:meth:`~flows.integrator.tied_fields.TiedField.entry_gaps`) less ``ENTER_GAP``: 0
        where one joins."""
        if self.outside.size == 0:
            return np.inf
        with np.errstate(all="ignore"):
            gaps = self.tied.entry_gaps(self.theta(y), s, self.outside)
        return float(np.min(gaps) - ENTER_GAP)


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
    not positive or too far from the run's (:data:`HANDOVER_TOL`, :data:`HANDOVER_SHIFT`), or
    its sliding does not hold there. Where the weights of the whole tie are not found, its smallest weight is
    left out while it is below ``HANDOVER_TOL`` of the largest (an example on its way out of
    the tie: leaving it out changes the weights by less than the handover allows)."""
    problem = run.problem
    theta = mode.chart.state(run.y[:-1].reshape(problem.shape)).to_float()
    with np.errstate(all="ignore"):
        u = problem.data.signed_features @ np.prod(
            theta ** np.asarray(problem.multiplicity, dtype=float)[:, None], axis=0
        )
    if not (np.all(np.isfinite(u)) and np.min(u) >= EXP_TAIL):
        return None
    own = np.exp(-(u - np.min(u)))
    active = _carrying(problem, mode, theta, run.s, own)
    while active.size:
        found = _tie_weights(
            problem, mode, active, own[active] / np.sum(own[active]), theta, run.s, np.min(u)
        )
        if found is not None:
            return found
        smallest = int(np.argmin(own[active]))
        if own[active[smallest]] > HANDOVER_TOL * np.max(own):
            return None
        active = np.delete(active, smallest)
    return None


def _carrying(problem: Problem, mode: Mode, theta, time: float, own: np.ndarray) -> np.ndarray:
    """The examples whose weight is above :data:`ACTIVE_WEIGHT` of the largest at the point
    (``own``), or at a perturbed point
    (:meth:`~flows.integrator.tied_fields.TiedField.entry_gaps`)."""
    active = np.flatnonzero(own > ACTIVE_WEIGHT * np.max(own))
    outside = np.setdiff1d(np.arange(own.size), active)
    if outside.size == 0:
        return active
    tied = tied_field(problem, mode, active)
    tied.p = own[active] / np.sum(own[active])
    with np.errstate(all="ignore"):
        gaps = tied.entry_gaps(theta, time, outside)
    return np.union1d(active, outside[gaps < -np.log(ACTIVE_WEIGHT)])


def _tie_weights(problem: Problem, mode: Mode, active, own, theta, time, smallest: float):
    """``(active, p, difference)`` of :func:`_start` for one tie (``smallest``: its smallest
    margin), or None."""
    tied = tied_field(problem, mode, active)
    with np.errstate(all="ignore"):
        p = tied.weights(theta, time, own)
        point = None if p is None else tied.field(theta, time)
    if p is None or point is None or np.min(p) <= 0 or not point.switching > 0:
        return None
    difference = float(np.max(np.abs(p - own)) / np.max(p))
    gaps = float(np.max(np.abs(np.log(p) - np.log(own))))
    if mode.sliding_directions:
        return (active, p, difference) if gaps <= SLIDING_HANDOVER_TOL * smallest else None
    resolved = difference <= HANDOVER_TOL or gaps <= HANDOVER_SHIFT * smallest
    return (active, p, difference) if resolved else None


def _joining(reduced: _Reduced, run) -> int:
    """The example outside the tie nearest to joining it at the run's state."""
    with np.errstate(all="ignore"):
        gaps = reduced.tied.entry_gaps(reduced.theta(run.y), run.s, reduced.outside)
    return int(reduced.outside[int(np.argmin(gaps))])


def _joined(u: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The tie's weights ``p`` with an example of margin ``u[-1]`` appended (the one joining;
    ``u``: the margins of the new tie) at its own weight ``e^{-(u_j - u_k)} p_k`` relative to
    the heaviest tied example ``k``, normalised."""
    heaviest = int(np.argmax(p))
    joined = np.append(p, p[heaviest] * np.exp(-(u[-1] - u[heaviest])))
    return joined / np.sum(joined)


def _switched(reduced: _Reduced, run, last: tuple | None) -> Mode | None:
    """The mode after the sliding set or the signs change on the slow manifold (logged as a
    'release', 'sliding' or 'crossing'), or None where no change is consistent or the same
    direction switches again in the same instant (``last``: the previous switch)."""
    tied = reduced.tied
    if not isinstance(tied, SlidingTiedField):
        return None
    with np.errstate(all="ignore"):
        found = tied.switched(reduced.theta(run.y), run.s)
    tau = float(run.y[-1])
    if found is None or (last is not None and last == (tau, found[1])):
        return None
    mode, j, kind = found
    run.log.append(FlowEvent(tau, kind, (-1, j), "direction"))
    run.mode = mode
    return mode


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
    last: tuple | None = None
    departed: tuple | None = None
    entering = False  # the last segment ended where an example's gap reached the entry gap
    for _ in range(MAX_RESTARTS):
        reduced = _Reduced(run.problem, mode, active, p)
        # an example outside carries weight; the located event may leave its gap a rounding
        # above the entry gap, so the one that ended the segment joins
        if entering or reduced.closest_gap(run.s, run.y) <= 0:
            entering = False
            joining = _joining(reduced, run)
            if departed == (float(run.y[-1]), joining):
                run.stop(
                    Cause.UNDECIDED_JUNCTION,
                    f"at tau={float(run.y[-1]):.10g} the slow manifold ends: example {joining} "
                    "leaves the tie (its weight at the point reaches 0) while it carries the "
                    "weight of a side at the perturbed point",
                )
                return True
            active = np.append(active, joining)
            p = _joined(reduced.tied.margins(reduced.theta(run.y))[active], p)
            continue
        first = reduced.at(run.s, run.y)
        if first is not None and not first[1].switching > 0:  # past a switch from the start
            switched = _switched(reduced, run, last)
            if switched is not None:
                mode, last = switched, (float(run.y[-1]), run.log[-1].entry[1])
                continue
            first = None
        if first is None:  # a changed tie or sliding set with no weights, or no way on
            run.stop(
                Cause.UNDECIDED_JUNCTION,
                f"at tau={float(run.y[-1]):.10g} the slow manifold ends: no weights of the tie "
                f"({len(active)} examples) hold its gaps and keep the sliding directions "
                f"{list(mode.sliding_directions)} with the signs of the others",
            )
            return True
        watched = [
            _Watch(reduced.near_blowup),
            _Watch(reduced.smallest_weight),
            _Watch(reduced.closest_gap),
            _Watch(reduced.switching),
            _Watch(reduced.unspent),
        ]
        left = left_or_end(reduced.time_left(run.s, run.y), run.s, run.s_end)
        result = integrate_segment(
            reduced.rhs, run.s, run.y, run.s_end, watched, "DOP853", rtol, atol,
            max(1, min(STALL_NFEV, run.budget - run.nfev)), first_step=FIRST_STEP * left,
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
        if result.status == "event" and result.event != 4:
            p = reduced.tied.p if reduced.tied.p is not None else p
            if result.event == 1:  # a weight reached 0: the example leaves the tie
                found = reduced.at(run.s, run.y)
                leaving = int(np.argmin(p if found is None else found[1].positive))
                departed = (tau, int(active[leaving]))
                keep = np.arange(active.size) != leaving
                active, p = active[keep], p[keep] / np.sum(p[keep])
            elif result.event == 2:  # an example's gap reached the entry gap: it joins
                entering = True
            elif result.event == 3:  # the sliding set or a sign changes
                switched = _switched(reduced, run, last)
                if switched is None:
                    run.stop(
                        Cause.UNDECIDED_JUNCTION,
                        f"at tau={tau:.10g} a sliding direction releases or another direction "
                        f"reaches 0 with no consistent way on; {model}",
                    )
                    return True
                mode, last = switched, (tau, run.log[-1].entry[1])
            continue  # an example's margin came back to the tie: it joins at the restart
        if result.status == "end":
            run.message = f"reached t_max; {model}"
        elif (result.status == "budget" and run.nfev < run.budget) or result.event == 4:
            run.stop(
                Cause.PRECISION_LOST,
                f"the reduced field's steps stall at tau={tau:.10g} ({result.nfev} evaluations "
                f"in one segment, {reduced.tied.evaluations} of the sides' fields); {model}",
            )
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
