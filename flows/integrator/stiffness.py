"""Stiff loss weights near a finite-time blow-up, and the blow-up time read off the growth.

On several examples the rescaled field is ``F = sum_i p_i z_i * prod_{k != l} w^(k)`` with the
loss weights ``p_i ∝ |l'(u_i)|`` (for the exponential loss the softmax of ``-u``). Near the
limit direction the smallest margins tie (the support vectors of the max-margin problem):
a gap ``u_i - u_k`` relaxes at the rate of the margins' growth times ``u``, while the
direction moves at that growth rate, so the flow is stiff with ratio

    ``S = u_min (1 - p_max)``

(``1 - p_max`` is 0 when a single example carries the weight: no tie, no stiffness). The
margins grow without bound, at depth ``L >= 3`` before the blow-up and at depth 2 exponentially
in ``tau`` (separable data: ``u ~ 1e10`` by ``tau ~ 5`` on ten Gaussian examples), and an
explicit method is held to steps ``~1 / lambda`` by the fast relaxation of the gaps: every
:data:`STIFFNESS_CHECK_NFEV` evaluations of its explicit method a run measures the ratio
``lambda / max|dz/ds|`` of the chart field's largest Jacobian eigenvalue (power iteration on
finite differences, :func:`jacobian_stiffness`) to its fastest rate and, above
:data:`STIFF_RATIO`, continues with the implicit :data:`STIFF_METHOD` (a run whose method is
implicit from the start is treated as stiff throughout). ``S`` is the mechanism and its
scaling; the measured ratio is 2e2 to 3e3 times ``S`` on the benchmark's teacher data at depth
3, so the switch does not rest on the model's constants.

The solver controls ``log|w|`` to ``rtol``, so the gaps of the tied margins are known to
``~S max(rtol, eps)``: where that reaches 1 (:class:`TiesLost`) the tied weights are uncertain
and the path is not followed further, short of the blow-up. A perturbation of size ``r_eps``
(``Algorithm.radius``) moves the margins by ``r_eps`` times the margin gradient, ``||F||_2`` in
the rescaled clock, along a direction that depends on the tied weights, so the weights at the
perturbed point answer a change of the gaps with the gain ``G = r_eps ||F||_2``
(:func:`perturbation_gain`). With ``G`` in the hundreds the implicit method's steps shrink long
before the ties are lost (l2-SAM, LE-SAM on teacher data): a stiff run checks every
:data:`STALL_CHECK_NFEV` evaluations that it advanced by at least :data:`STALL_FRACTION` of the
time left to the blow-up, and ends otherwise (:func:`stalled`), naming ``G``.

By homogeneity (``w ~ (tau* - tau)^(-1/(L-2))`` once the direction has settled) the time
left is

    ``tau* - tau = 1 / ((L - 2) r)``,  ``r = max_j d log|w_j| / dtau``

(exact for one coordinate, ``dw/dtau = mu w^(L-1)``): when the solver stops with at most
:data:`TIED_BLOWUP_TOL` ``* max(1, tau)`` left — on tied margins, or on steps below the
resolution of a large ``tau`` (a late blow-up, ``1 / BLOWUP_RATE`` closer than ``tau``'s
rounding) — the run ends in the blow-up at the extrapolated ``tau*`` (status 1,
:func:`extrapolated_blowup`), its message giving the time left.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..field import Problem
from ..results import Cause, FlowEvent
from .events import Outcome, SegmentEvent
from .segments import Mode
from .threshold_events import BlowUp

#: Evaluations of the explicit method between two checks of the stiffness ratio.
STIFFNESS_CHECK_NFEV = 5_000
#: Ratio ``lambda / max|dz/ds|`` (:func:`jacobian_stiffness`) above which the run continues
#: with :data:`STIFF_METHOD`.
STIFF_RATIO = 100.0
#: Evaluations of the stiff method between two checks of its progress (:func:`stalled`).
STALL_CHECK_NFEV = 5_000
#: Least advance of ``tau`` over :data:`STALL_CHECK_NFEV` evaluations of the stiff method,
#: relative to the time left to the blow-up by homogeneity, below which the run is stalled (a
#: fraction of the time left, not of a fixed time: each check must at least halve what is left,
#: so a run that goes on reaches the blow-up's tolerance in a bounded number of checks).
STALL_FRACTION = 0.5
#: Least advance of the clock over :data:`STIFFNESS_CHECK_NFEV` evaluations (the explicit
#: method) or :data:`STALL_CHECK_NFEV` (the stiff one), relative to ``max(1, s)``, below which
#: the steps stall and the run ends (measured:
#: l_inf-SAM sliding on three direction surfaces at depth 3, teacher seed 8, advanced 1e-4 of
#: tau over 2e5 evaluations, 45 s, its field not stiff; at depth 4, teacher seed 7, the stiff
#: method sliding on two surfaces advanced 0 over 160,000 evaluations, 200 s).
EXPLICIT_STALL = 1e-6
#: Power iterations of :func:`jacobian_stiffness` (one field evaluation each, and one more).
POWER_ITERATIONS = 8
STIFF_METHOD = "BDF"
#: The implicit and stiff methods of :data:`flows.integrator.solver.METHODS` (not switched).
IMPLICIT = ("Radau", "BDF", "LSODA")
#: Error of the tied margins' gaps, ``S max(rtol, eps)``, at which a stiff run ends: the solver
#: controls ``log|w|`` to ``rtol``, so the gaps ``u_i - u_k`` are known to ``~u rtol``; beyond 1
#: the weights of the tied examples are uncertain to O(1) and the run can leave the tie for any
#: one of them (measured: FLOW data, L = 3, alpha = 0.3, rtol 1e-8: the tie broke at u = 1e10
#: and BDF went on to a 1-sparse direction 54 degrees from the limit).
TIE_RESOLUTION = 1.0
#: Largest time left to the blow-up, relative to ``max(1, tau)``, at which a run that
#: cannot go on ends in the extrapolated blow-up.
TIED_BLOWUP_TOL = 1e-3


def tie_prone(problem: Problem) -> bool:
    """Whether the margins of a run may come to tie at growing size: classification on several
    examples, depth ``>= 2``, the rescaled clock (where they grow without bound: up to a
    finite-time blow-up at depth ``>= 3``, exponentially in ``tau`` at depth 2)."""
    data = problem.data
    return (
        not data.regression
        and data.n > 1
        and int(np.sum(problem.multiplicity)) >= 2
        and not problem.clock.original
    )


def may_stiffen(problem: Problem, method: str) -> bool:
    """Whether a run is checked for stiff weights: :func:`tie_prone`, with an explicit method
    (an implicit one is watched by :class:`TiesLost` from the start)."""
    return tie_prone(problem) and method not in IMPLICIT


def tied_margins(field, y: np.ndarray) -> tuple[float, float]:
    """``(u_min, p_max)`` at the chart state ``y``: the smallest loss argument of the predictor
    ``beta = prod_l w^(l)`` and the largest normalised weight ``|l'(u_i)| / sum_k |l'(u_k)|``."""
    event = SegmentEvent(field)
    fused = event.fused
    theta = event.theta(y)
    u = fused.loss_arguments(fused.margins(fused.product_of_layers(theta.sign, theta.log_abs)))
    with np.errstate(over="ignore", invalid="ignore"):
        log_p = field.problem.loss.log_abs_derivative(u)
        p = np.exp(log_p - np.max(log_p))
        return float(np.min(u)), float(np.max(p) / np.sum(p))


def weights_stiffness(field, y: np.ndarray) -> float:
    """``S = u_min (1 - p_max)`` at the chart state ``y`` (:func:`tied_margins`; 0 where the
    margins left the floats)."""
    u_min, p_max = tied_margins(field, y)
    return u_min * (1.0 - p_max) if np.isfinite(u_min) and np.isfinite(p_max) else 0.0


def jacobian_stiffness(rhs, y: np.ndarray, s: float) -> float:
    """``lambda / max|dz/ds|`` at the chart state ``y``: the largest Jacobian eigenvalue of the
    chart field ``rhs(s, y)`` (the last entry of ``y``, ``tau``, held fixed), by
    :data:`POWER_ITERATIONS` steps of the power iteration on forward differences, over the
    field's largest rate (0 where the field does not move or is not finite)."""
    n = y.size - 1
    f0 = np.asarray(rhs(s, y), dtype=float)[:n]
    rate = float(np.max(np.abs(f0))) if n else 0.0
    if not (np.isfinite(rate) and rate > 0):
        return 0.0
    v = np.cos(np.arange(n) + 1.0)  # fixed start: the same state gives the same estimate
    v /= np.linalg.norm(v)
    step = 1e-7 * max(1.0, float(np.linalg.norm(y[:n])))
    lam = 0.0
    for _ in range(POWER_ITERATIONS):
        shifted = y.copy()
        shifted[:n] += step * v
        with np.errstate(all="ignore"):
            jv = (np.asarray(rhs(s, shifted), dtype=float)[:n] - f0) / step
        lam = float(np.linalg.norm(jv))
        if not (np.isfinite(lam) and lam > 0):
            return 0.0
        v = jv / lam
    return lam / rate


def perturbation_gain(field, y: np.ndarray, radius: float, s: float = 0.0) -> float:
    """``radius ||F||_2``: a perturbation of size ``radius`` moves the margins by that much
    (``||F||_2`` the rescaled field's norm over all parameters, each row counted with its
    multiplicity, which is the size of the weighted margin gradient); 0 for ``radius = 0``."""
    if radius <= 0:
        return 0.0
    event = SegmentEvent(field)
    vel = field.velocity(event.theta(y), None, s)
    weights = np.log(np.asarray(field.problem.multiplicity, dtype=float))[:, None]
    with np.errstate(over="ignore", invalid="ignore"):
        log_norm = 0.5 * float(np.logaddexp.reduce((2.0 * vel.dtheta.log_abs + weights).ravel()))
        return float(radius * np.exp(min(log_norm, 700.0)))


def time_to_blowup(field, y: np.ndarray, s: float) -> float:
    """``1 / ((L - 2) r)`` at the chart state ``y`` (clock time ``s``): the rescaled time left
    to the blow-up by homogeneity (``inf`` if no parameter grows, or at depth < 3)."""
    depth = int(np.sum(field.problem.multiplicity))
    log_rate = BlowUp(field).log_growth_rate(s, y)
    if log_rate is None or depth < 3:
        return float("inf")
    return float(np.exp(-log_rate) / (depth - 2))


def extrapolated_blowup(
    field, y: np.ndarray, s: float, why: str, log: list[FlowEvent]
) -> str | None:
    """End a run that cannot go on at the chart state ``y`` (clock time ``s``) in the blow-up
    extrapolated by homogeneity, if at most :data:`TIED_BLOWUP_TOL` ``* max(1, tau)`` is left
    (:func:`time_to_blowup`): log the event at ``tau*`` and return the run's message (``why``
    says what stopped it); None if more is left."""
    tau = float(y[-1])
    left = time_to_blowup(field, y, s)
    if not left <= TIED_BLOWUP_TOL * max(1.0, tau):
        return None
    log.append(FlowEvent(tau + left, "blow-up"))
    return (
        f"finite-time blow-up at tau={tau + left:.10g}, extrapolated: the path ends {left:.3g} "
        f"before it at tau={tau:.10g}, where {why}; tau* = tau + 1/((L - 2) r), "
        "r = max_j dlog|w_j|/dtau, by homogeneity"
    )


def left_or_end(to_blowup: float, s: float, end: float) -> float:
    """The rescaled time a run at clock time ``s`` has left: ``to_blowup``, the time to its
    blow-up by homogeneity, or to its ``end`` where no blow-up is ahead (``to_blowup = inf``:
    depth 2, or no parameter grows)."""
    return to_blowup if np.isfinite(to_blowup) else end - s


def time_left(field, y: np.ndarray, s: float, end: float) -> float:
    """:func:`left_or_end` of a run at the chart state ``y`` (:func:`time_to_blowup`)."""
    return left_or_end(time_to_blowup(field, y, s), s, end)


def stalled(field, y: np.ndarray, s: float, advanced: float, end: float) -> bool:
    """Whether a stiff run that ``advanced`` in ``tau`` over its last
    :data:`STALL_CHECK_NFEV` evaluations has stalled: less than :data:`STALL_FRACTION` of the
    time it has left (:func:`time_left`, its end ``end``). The tied gaps relax at
    rates that grow like ``u (1 + G)``: measured on teacher data at depth 3 (l2-SAM), Jacobian
    eigenvalues of -2e9 at ``u = 1e4`` and -2e13 at ``u = 1e6`` against growth rates of 2.5 to
    11, all real. Finite differences at the solver's steps leave the gaps' linear range there,
    the implicit method's Newton iterations fail and its steps shrink without end, short of
    the point where :class:`TiesLost` fires (seen at ``S (1 + G) rtol`` from 0.07 on)."""
    return advanced < STALL_FRACTION * time_left(field, y, s, end)


def _blowup_ahead(field, y: np.ndarray, s: float) -> str:
    """Where the blow-up is, in words, for a run that ends short of it."""
    left = time_to_blowup(field, y, s)
    if not np.isfinite(left):
        return "no blow-up is ahead (depth 2, or no parameter grows)"
    return f"the blow-up is not near ({left:.3g} left by homogeneity)"


def end_short_of_blowup(
    field, y: np.ndarray, s: float, when: str, why: str, log: list[FlowEvent], advice: str = ""
) -> Outcome:
    """End a run that cannot go on at the chart state ``y`` (clock time ``s``, written
    ``when``) for the reason ``why``: in the blow-up extrapolated by homogeneity if it is near
    (:func:`extrapolated_blowup`), else with 'precision lost' and the time left."""
    message = extrapolated_blowup(field, y, s, why, log)
    if message is not None:
        return Outcome(stop=True, cause=Cause.BLOW_UP, message=message)
    return Outcome(
        stop=True,
        cause=Cause.PRECISION_LOST,
        message=(
            f"at {when} {why}, and {_blowup_ahead(field, y, s)}; the path up to there is "
            f"returned{advice}"
        ),
    )


def stall_reason(field, y: np.ndarray, radius: float, s: float) -> str:
    """What holds a stalled run back: the tied margins, and the gain with which the weights at
    the perturbed point answer their gaps (:func:`perturbation_gain`) where it exceeds 1."""
    gain = perturbation_gain(field, y, radius, s)
    text = f"the margins (smallest {tied_margins(field, y)[0]:.3g}) tie between examples"
    if gain > 1:
        text += f", and the weights at the perturbed point answer their gaps {gain:.3g}-fold"
    return text


def tie_message(field, y: np.ndarray, radius: float = 0.0, s: float = 0.0) -> str:
    """Why a stiff run ends: its tied margins' gaps are not resolved any more (amplified by
    the perturbation's gain, :func:`perturbation_gain`, where it is above 1)."""
    gain = perturbation_gain(field, y, radius, s)
    amplified = (
        f", amplified {gain:.3g}-fold by the perturbation at the perturbed point,"
        if gain > 1
        else ""
    )
    return (
        f"the margins (smallest {tied_margins(field, y)[0]:.3g}) tie between examples and "
        f"their differences{amplified} are not resolved at the solver's tolerance"
    )


@dataclass
class TiesLost(SegmentEvent):
    """``g = log(S max(rtol, eps)) - log TIE_RESOLUTION`` (:func:`weights_stiffness`): the error
    of the tied margins' gaps reaches :data:`TIE_RESOLUTION`; ``radius`` (the algorithm's) is
    for the message (:func:`tie_message`). The run ends there: in the blow-up
    extrapolated by homogeneity when at most :data:`TIED_BLOWUP_TOL` ``* max(1, tau)`` is left,
    else with cause 'precision lost' (status -1)."""

    rtol: float = 1e-10
    radius: float = 0.0
    direction = 1.0

    def __call__(self, s: float, y: np.ndarray) -> float:
        stiff = weights_stiffness(self.field, y)
        if stiff <= 0:
            return -np.inf
        resolution = max(self.rtol, float(np.finfo(float).eps))
        return float(np.log(stiff * resolution) - np.log(TIE_RESOLUTION))

    def already(self, y: np.ndarray) -> bool:
        """The ties are lost where the segment starts."""
        return self(0.0, y) >= 0

    def handle(
        self, y: np.ndarray, mode: Mode, s: float, tau: float, log: list[FlowEvent]
    ) -> Outcome:
        """End the run: the blow-up if it is near, else precision lost."""
        why = tie_message(self.field, y, self.radius, s)
        return end_short_of_blowup(
            self.field, y, s, f"tau={tau:.10g}", why, log, " (a smaller rtol goes further)"
        )
