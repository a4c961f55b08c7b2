"""The integrated path: segments between events, each a chain of solver steps with dense output.

A :class:`Segment` covers ``[start, end]`` in the run's clock ``s``, in one *mode* (chart,
entries held at 0, frozen sign pattern); within it the state ``(z, tau)`` is the solver's
dense output, one polynomial per step. :class:`Path` holds the segments recorded since its
last release (a run samples them on its output grid and releases them once they hold more
than :data:`HELD_BYTES`: :func:`flows.integrator.assemble.flush`) and samples states at any
times they cover, in signed-log form (so segments integrated in different charts are read the
same way), one batch per segment.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..charts import AsinhChart, LogChart
from ..field import SignPattern
from ..signedlog import SignedLog

try:  # the layout of DOP853's dense output, to evaluate all steps of a segment at once
    from scipy.integrate._ivp.rk import Dop853DenseOutput
except ImportError:  # pragma: no cover - a scipy without it: one call per step
    Dop853DenseOutput = None


@dataclass
class Mode:
    """What changes at events.

    Attributes
    ----------
    chart : the chart the state is integrated in.
    held : (G, d) entries held at 0 (l_inf-SAM sliding on ``w = 0``, or everything after a
        collapse).
    sign_pattern : (G, d) parameter signs frozen inside ``sign(grad L)`` (sign-discontinuous
        algorithms only), else None.
    direction_pattern : (d,) signs of ``G_j(theta)`` frozen inside ``sign(grad L)``
        (sign-discontinuous algorithms only), else None.
    sliding_directions : coordinates ``j`` sliding on ``G_j(theta) = 0`` (:mod:`flows.integrator.filippov`).
    linked : groups of held parameters (flat indices) that reached 0 together and slide as one
        surface (:class:`flows.integrator.filippov.Surface`).
    collapsed : theta has collapsed to 0 for good.
    stationary : theta sits at a stationary point for good (see :class:`flows.integrator.events.Stationary`).
    tilted : the sliding directions combine their one-sided fields by the tilted rule
        (:mod:`flows.integrator.tilted`, chosen at a junction where the multilinear rule has no
        weights in the box, :mod:`flows.integrator.junctions`) instead of the multilinear one.
    tried : the ways through the latest junction tried at its instant, ``(tau, ways, logged)``:
        each way ``(candidates, roles, tilted)``, and the length of the event log after the
        last (:mod:`flows.integrator.junctions`).
    near_zero : after the run left the log chart because every parameter came near 0: the
        flat indices of the parameters whose reaching 0 is the collapse (those within
        ``e^-30`` of the largest; the others are far below any tolerance), else None.
    """

    chart: AsinhChart | LogChart
    held: np.ndarray
    sign_pattern: np.ndarray | None = None
    direction_pattern: np.ndarray | None = None
    sliding_directions: tuple[int, ...] = ()
    linked: tuple[tuple[int, ...], ...] = ()
    collapsed: bool = False
    stationary: bool = False
    near_zero: np.ndarray | None = None
    tilted: bool = False
    tried: tuple = ()

    @property
    def pattern(self) -> SignPattern | None:
        """The frozen signs of ``sign(grad L)`` (None unless the algorithm is sign-discontinuous)."""
        if self.sign_pattern is None or self.direction_pattern is None:
            return None
        return SignPattern(self.sign_pattern, self.direction_pattern)

    @property
    def sliding(self) -> bool:
        """Some switching surface slides (a held parameter, or a direction ``G_j = 0``)."""
        return not self.collapsed and (bool(self.held.any()) or bool(self.sliding_directions))

    @property
    def frozen(self) -> bool:
        """Nothing moves any more: collapsed, stationary, or every entry held at 0."""
        return self.collapsed or self.stationary or bool(self.held.all())

    def copy(self) -> Mode:
        """An independent copy (the arrays are mutated by event handlers)."""
        return Mode(
            self.chart,
            self.held.copy(),
            None if self.sign_pattern is None else self.sign_pattern.copy(),
            None if self.direction_pattern is None else self.direction_pattern.copy(),
            self.sliding_directions,
            self.linked,
            self.collapsed,
            self.stationary,
            self.near_zero,
            self.tilted,
            self.tried,
        )


Interpolant = Callable[[np.ndarray], np.ndarray]


@dataclass
class Segment:
    """Dense output over ``[start, end]``: step boundaries ``ts`` and one interpolant per step.

    ``interpolants[k]`` maps times in ``[ts[k], ts[k+1]]`` to states ``(n_state, len(s))``
    (chart coordinates, then ``tau``). A segment of the compiled loop
    (:mod:`flows.compiled.segment`) has no interpolant objects, only ``stack``: DOP853's
    dense-output arrays of every step, and ``dense``: their compiled evaluation
    ``dense(s, *stack) -> (len(s), n_state)`` (the numbers of :func:`_dop853_values`); a
    segment of scipy's DOP853 steps trades its interpolant objects for ``stack`` when
    :meth:`dop853_stack` is first called; ``chart_values``, where set, their compiled samples
    in the chart (:meth:`sample`, :func:`flows.compiled.segment.chart_values`).
    ``clock``, where set, gives ``tau`` in place of the state's last entry (a
    :class:`flows.integrator.retime.StepClock`). ``log_elapsed``, where set, is the log of the
    original time since the segment's start at each of ``ts`` (a path of l_inf-SAM's own steps,
    :mod:`flows.integrator.stepping`, whose original time the steps sum themselves).
    """

    mode: Mode
    ts: np.ndarray
    interpolants: list[Interpolant]
    stack: tuple | None = field(default=None, repr=False)
    clock: Any = field(default=None, repr=False)
    dense: Callable[..., np.ndarray] | None = field(default=None, repr=False)
    chart_values: Callable[..., tuple] | None = field(default=None, repr=False)
    log_elapsed: np.ndarray | None = field(default=None, repr=False)

    @property
    def start(self) -> float:
        """First time covered."""
        return float(self.ts[0])

    @property
    def end(self) -> float:
        """Last time covered."""
        return float(self.ts[-1])

    @classmethod
    def frozen(
        cls, mode: Mode, start: float, end: float, y: np.ndarray, tau_rate: float
    ) -> Segment:
        """A segment where ``z`` does not move and only ``tau`` advances at ``tau_rate``."""
        y = y.copy()

        def constant(s: np.ndarray) -> np.ndarray:
            out = np.repeat(y[:, None], len(s), axis=1)
            out[-1] = y[-1] + tau_rate * (s - start)
            return out

        return cls(mode, np.array([start, end]), [constant])

    def step_of(self, s: np.ndarray) -> np.ndarray:
        """Index of the step covering each time (the later one at a shared boundary)."""
        return np.clip(np.searchsorted(self.ts, s, side="right") - 1, 0, len(self.ts) - 2)

    def raw(self, s: np.ndarray) -> np.ndarray:
        """States ``(len(s), n_state)`` at times ``s`` within the segment."""
        stacked = self.dop853_stack()
        if self.dense is not None and stacked is not None:
            return self.dense(np.ascontiguousarray(s, dtype=float), *stacked)
        step = self.step_of(s)
        if stacked is not None:
            return _dop853_values(stacked, step, s)
        out = np.empty((len(s), 0))
        for k in np.unique(step):
            rows = step == k
            values = self.interpolants[k](s[rows]).T
            if out.shape[1] == 0:
                out = np.empty((len(s), values.shape[1]))
            out[rows] = values
        return out

    def dop853_stack(self) -> tuple | None:
        """``(t_old, h, F, y_old)`` of every step stacked, when all steps are DOP853 steps (the
        interpolant objects are then released: the stack holds their numbers)."""
        steps: list[Any] = self.interpolants
        if (
            self.stack is None
            and Dop853DenseOutput is not None
            and all(isinstance(i, Dop853DenseOutput) for i in steps)
        ):
            self.stack = (
                np.array([i.t_old for i in steps]),
                np.array([i.h for i in steps]),
                np.array([i.F for i in steps]),
                np.array([i.y_old for i in steps]),
            )
            self.interpolants = []
        return self.stack

    def sample(self, s: np.ndarray, shape: tuple[int, int]) -> tuple[SignedLog, np.ndarray]:
        """Parameters (signed-log, ``(len(s), G, d)``) and ``tau`` at times ``s``."""
        if self.chart_values is not None and self.stack is not None:
            sign, log_abs, tau = self.chart_values(self.mode.chart, s, self.stack, self.mode.held)
            rows = (len(s),) + shape
            theta = SignedLog(sign.reshape(rows), log_abs.reshape(rows))
            return theta, tau if self.clock is None else self.clock.at(s)
        states = self.raw(np.asarray(s, dtype=float))
        z = states[:, :-1].reshape((len(s),) + shape)
        theta = parameters_at(self.mode.chart, z, self.mode.held)
        return theta, states[:, -1] if self.clock is None else self.clock.at(s)

    def tau(self, s: np.ndarray) -> np.ndarray:
        """``tau`` at times ``s`` (as :meth:`sample`, without the parameters)."""
        s = np.asarray(s, dtype=float)
        return self.raw(s)[:, -1] if self.clock is None else self.clock.at(s)


def parameters_at(chart: AsinhChart | LogChart, z: np.ndarray, held: np.ndarray) -> SignedLog:
    """The parameters at chart coordinates ``z`` (..., entries), the ``held`` entries (shaped as
    the trailing axes of ``z``) at ``(0, -inf)``."""
    theta = chart.state(z)
    if not held.any():
        return theta
    return SignedLog(np.where(held, 0.0, theta.sign), np.where(held, -np.inf, theta.log_abs))


#: Floats of dense-output values below which one vectorised evaluation of every sample is the
#: cheapest (201 samples of a 10-entry state: 86 us against 296 us for a loop over the steps).
VECTORISED_VALUES = 2**17


def _dop853_values(stacked: tuple, step: np.ndarray, s: np.ndarray) -> np.ndarray:
    """DOP853's dense-output polynomial (as ``Dop853DenseOutput``) at times ``s`` in steps
    ``step``, all at once: the same operations in the same order, so the same numbers. Where
    the times outnumber their steps eightfold and the values exceed :data:`VECTORISED_VALUES`
    floats, each step's samples take its coefficients as they are; elsewhere each term's
    coefficients are gathered per sample, one term at a time."""
    t_old, h, F, y_old = stacked
    x = ((s - t_old[step]) / h[step])[:, None]
    if len(s) * F.shape[-1] <= VECTORISED_VALUES:
        return _horner(F, step, x) + y_old[step]
    keys, which = np.unique(step, return_inverse=True)
    if 8 * len(keys) > len(s):
        return _horner(F, step, x) + y_old[step]
    y = np.empty((len(s), y_old.shape[1]))
    for k, key in enumerate(keys):
        rows = which == k
        y[rows] = _horner(F[key], None, x[rows]) + y_old[key]
    return y


def _horner(coefficients: np.ndarray, step: np.ndarray | None, x: np.ndarray) -> np.ndarray:
    """``Dop853DenseOutput``'s polynomial at ``x`` (m, 1): sample ``i`` with the coefficients
    ``coefficients[step[i]]`` of its step (K, 7, n), or with ``step`` None those of one step
    (7, n) for all."""
    y = np.zeros((len(x), coefficients.shape[-1]))
    for i in range(coefficients.shape[-2]):
        y += coefficients[-1 - i] if step is None else coefficients[step, -1 - i]
        y *= x if i % 2 == 0 else 1 - x
    return y


#: Dense output a :class:`Path` holds before the run samples and releases it (64 MB: 8 floats
#: per state entry and step, DOP853's 7 coefficients and the step's start): with the compiled
#: loop's largest call (:data:`flows.compiled.segment.STACK_BYTES`) the most a run keeps of its
#: steps, whatever their number.
HELD_BYTES = 2**26


class Recorded(list[Segment]):
    """The segments a :class:`Path` holds, in order; appending one records it on the path
    (:meth:`Path.record`)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def append(self, segment: Segment) -> None:
        """Hold ``segment`` and record it on the path."""
        super().append(segment)
        self.path.record(segment)


@dataclass
class Path:
    """The segments of a run, in order: those recorded since the last :meth:`release`
    (``segments``; appending one calls ``listener`` with it), the time the last one ends
    (``end``, 0 before the first), how many were recorded in all (``count``) and the dense
    output held (``held_bytes``, estimated as 8 floats per state entry and step)."""

    shape: tuple[int, int]
    segments: list[Segment] = field(init=False)
    end: float = 0.0
    count: int = 0
    held_bytes: int = 0
    listener: Callable[[Segment], None] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.segments = Recorded(self)

    def record(self, segment: Segment) -> None:
        """Account for ``segment``, appended to ``segments``, and tell the listener."""
        self.count += 1
        self.end = segment.end
        self.held_bytes += 64 * (len(segment.ts) - 1) * (self.shape[0] * self.shape[1] + 1)
        if self.listener is not None:
            self.listener(segment)

    @property
    def full(self) -> bool:
        """The held segments' dense output is past :data:`HELD_BYTES`."""
        return self.held_bytes > HELD_BYTES

    def release(self) -> None:
        """Drop the held segments (their samples taken)."""
        self.segments.clear()
        self.held_bytes = 0

    def segment_of(self, s: np.ndarray) -> np.ndarray:
        """Index of the segment covering each time (the earlier one at a shared boundary)."""
        ends = np.array([seg.end for seg in self.segments])
        return np.minimum(np.searchsorted(ends, s, side="left"), len(ends) - 1)

    def sample(
        self, s: np.ndarray, which: np.ndarray | None = None
    ) -> tuple[SignedLog, np.ndarray, np.ndarray]:
        """Parameters ``(len(s), G, d)``, ``tau`` and the segment index at times ``s``.

        ``which`` chooses the segment of each time (default :meth:`segment_of`); the caller
        passes it to take one-sided values at event times.
        """
        s = np.asarray(s, dtype=float)
        if which is None and len(self.segments) == 1:  # every time on the one segment
            theta, tau = self.segments[0].sample(s, self.shape)
            sign, log_abs = np.ascontiguousarray(theta.sign), np.ascontiguousarray(theta.log_abs)
            return SignedLog(sign, log_abs), np.ascontiguousarray(tau), np.zeros(len(s), np.intp)
        which = self.segment_of(s) if which is None else np.asarray(which)
        sign = np.empty((len(s),) + self.shape)
        log_abs = np.empty_like(sign)
        tau = np.empty(len(s))
        for i in np.unique(which):
            rows = which == i
            theta, tau[rows] = self.segments[i].sample(s[rows], self.shape)
            sign[rows], log_abs[rows] = theta
        return SignedLog(sign, log_abs), tau, which
