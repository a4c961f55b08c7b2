"""The result of a flow integration: one object with the path, both clocks and the status,
its form as numpy arrays (:meth:`Trajectory.to_arrays`, :meth:`Trajectory.from_arrays`) and as
a CSV table (:meth:`Trajectory.to_csv`; :func:`write_csv` writes the tables of the discrete runs
too)."""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np

from .schedules import Schedule, from_spec

#: ``status`` values, as in ``scipy.integrate.solve_ivp``.
SUCCESS, BLOWUP, FAILURE = 0, 1, -1


class Cause(enum.Enum):
    """Why a run ended where it did (``Trajectory.cause``; :attr:`status` is its ``status``).

    ``message`` gives the details in words; code reads the cause."""

    REACHED_END = "reached the end"
    COLLAPSE = "collapse"
    STATIONARY = "stationary point"
    LOSS_FLOOR = "loss floor"
    BLOW_UP = "blow-up"
    BUDGET_SPENT = "budget spent"
    SOLVER_FAILED = "solver failed"
    TOO_MANY_SURFACES = "too many sliding surfaces"
    UNDECIDED_JUNCTION = "undecided junction"
    TOO_MANY_EVENTS = "too many events"
    OVERFLOW = "left float64"
    RESIDUAL_SWITCH = "residual switch"
    PRECISION_LOST = "precision lost"

    @property
    def status(self) -> int:
        """0 (an answer over the whole horizon, or up to a loss floor), 1 (a finite-time
        blow-up) or -1 (the run could not go on: the path ends there)."""
        return _STATUS.get(self, FAILURE)


_STATUS = {
    Cause.REACHED_END: SUCCESS,
    Cause.COLLAPSE: SUCCESS,
    Cause.STATIONARY: SUCCESS,
    Cause.LOSS_FLOOR: SUCCESS,
    Cause.BLOW_UP: BLOWUP,
}


@dataclass(frozen=True)
class FlowEvent:
    """Something that happened at rescaled time ``tau``: ``kind`` in {'crossing', 'sliding',
    'release', 'collapse', 'blow-up', 'stationary', 'loss floor', 'own steps'}; for the first
    three the switching surface: ``surface`` 'parameter' (``w^(group)_j = 0``, ``entry = (group, j)``) or 'direction'
    (``G_j(theta) = 0``, every layer of ``j``: ``entry = (-1, j)``); None for global events."""

    tau: float
    kind: str
    entry: tuple[int, int] | None = None
    surface: str | None = None


#: The arrays of :meth:`Trajectory.to_arrays` by what they hold: the path (the fields of that
#: name), text (0-d str), numbers (0-d, of the type given), the events (parallel 1-d arrays).
_PATH = (
    "t",
    "tau",
    "log_t_original",
    "loss",
    "log_abs_beta",
    "sign_beta",
    "log_abs_theta",
    "sign_theta",
)
_TEXT = ("message", "algorithm", "clock", "backend")
_NUMBERS: dict[str, type] = {
    "status": int,
    "depth": int,
    "nfev": int,
    "reduced": bool,
    "sliding_time": float,
    "sliding_surfaces": int,
    "own_steps_from": float,
    "own_steps": int,
    "step_error": float,
}
_EVENTS = ("event_tau", "event_kind", "event_group", "event_j", "event_surface")

#: Every array :meth:`Trajectory.to_arrays` writes and :meth:`Trajectory.from_arrays` needs.
ARRAY_NAMES: tuple[str, ...] = (
    _PATH + _TEXT + tuple(_NUMBERS) + ("cause", "segment_loops", "hyperparameters") + _EVENTS
)


def write_csv(path: str | os.PathLike, names: Sequence[str], columns: np.ndarray) -> None:
    """Write the table ``columns`` (rows, ``len(names)``) to ``path`` as CSV: a header line of
    the comma-separated ``names``, then one row per line, every value exactly (``%.18e``;
    ``inf``, ``-inf`` and ``nan`` as such). ``np.loadtxt(path, delimiter=",", skiprows=1,
    ndmin=2)`` reads the values back bit for bit.

    Raises
    ------
    ValueError
        Naming 'columns' if it is not a 2-D array with ``len(names)`` columns.
    """
    columns = np.asarray(columns, dtype=float)
    if columns.ndim != 2 or columns.shape[1] != len(names):
        raise ValueError(
            f"columns must be a 2-D array with {len(names)} columns (one per name), "
            f"got shape {columns.shape}"
        )
    np.savetxt(path, columns, delimiter=",", header=",".join(names), comments="")


def _stored_hyperparameter(key: str, value: object) -> object:
    """The JSON form of hyper-parameter ``key``: a number as it is, a named schedule by its
    :meth:`~flows.schedules.Schedule.spec`; ``ValueError`` naming ``key`` for anything else
    (an arbitrary callable has no stored form)."""
    if isinstance(value, Schedule):
        return value.spec()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    raise ValueError(
        f"hyper-parameter {key}={value!r} cannot be stored as arrays: only numbers and the "
        "named schedules of flows.schedules can (not an arbitrary callable)"
    )


def _loaded_hyperparameter(value: object) -> object:
    """Inverse of :func:`_stored_hyperparameter`."""
    return from_spec(value) if isinstance(value, dict) else value


class OnFirstRead:
    """A field given as an array, or as a function of no arguments that computes it: the
    function is called on the first read, and its array kept for every later read (and for
    pickling and :meth:`Trajectory.to_arrays`)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_{name}"

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> OnFirstRead: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> np.ndarray: ...
    def __get__(self, obj: object | None, owner: type | None = None) -> Any:
        if obj is None:  # no default value for the dataclass field
            raise AttributeError(self.slot[1:])
        value = obj.__dict__[self.slot]
        if callable(value):
            value = value()
            obj.__dict__[self.slot] = value
        return value

    def __set__(self, obj: object, value: np.ndarray | Callable[[], np.ndarray]) -> None:
        obj.__dict__[self.slot] = value


def _text(array: np.ndarray) -> str:
    """The string held by a 0-d str array."""
    return str(array[()])


@dataclass(frozen=True, eq=False)
class Trajectory:
    """A flow on an L-layer diagonal linear network, sampled at ``t``.

    Attributes
    ----------
    t : (T,) times in the chosen clock.
    tau : (T,) rescaled time; ``log_t_original`` : (T,) log of the original time
        (``+inf`` once the margins leave float64, since ``t ~ exp(margin)``).
    log_abs_theta, sign_theta : (T, L, d) parameters in signed-log form.
    log_abs_beta, sign_beta : (T, d) the predictor ``beta = prod_l w^(l)`` in signed-log form.
    loss : (T,) the training loss at ``theta`` (0 when it underflows); computed on its first
        read where the run hands over a function of no arguments in its place.
    status : 0 reached ``t_max`` (or the loss floor); 1 finite-time blow-up (at
        ``blowup_time``); -1 failure.
    message : what happened, in words.
    cause : why the run ended where it did (:class:`Cause`; ``cause.status == status``).
    backend : the field implementation that ran (``'numba'``, ``'numpy'``, ``'reference'``).
    segment_loops : the segment loops that integrated the path, in order of first use
        (``'compiled DOP853'``: :mod:`flows.compiled.segment`; ``'scipy <method>'``:
        :mod:`flows.integrator.solver`).
    events : crossings, sliding, releases, collapse, blow-up (in rescaled time).
    nfev : field evaluations spent (every one-sided field of a sliding combination counts).
    reduced : integrated as the balanced reduced system.
    sliding_time : rescaled time during which some switching surface of l_inf-SAM slid.
    sliding_surfaces : the most switching surfaces sliding at once.
    own_steps_from, own_steps, step_error : where l_inf-SAM's sliding was not resolved and its
        own steps continued the path (:mod:`flows.integrator.stepping`): the ``tau`` they start
        at (``inf``: nowhere), how many the path took, and the largest difference of
        ``beta / ||beta||_1`` from the path at twice their step (its error estimate; 0 where
        no steps ran). Above ``flows.integrator.stepping.PATH_TOL`` (1e-2) only the path's
        end is settled, the message says where the path is not, and the run warned.
    """

    t: np.ndarray
    tau: np.ndarray
    log_t_original: np.ndarray
    log_abs_theta: np.ndarray
    sign_theta: np.ndarray
    log_abs_beta: np.ndarray
    sign_beta: np.ndarray
    status: int
    message: str
    algorithm: str
    depth: int
    clock: str
    hyperparameters: dict
    loss: OnFirstRead = OnFirstRead()  # required: OnFirstRead gives no default
    cause: Cause = Cause.REACHED_END
    backend: str = "numpy"
    segment_loops: tuple[str, ...] = ()
    events: tuple[FlowEvent, ...] = ()
    nfev: int = 0
    reduced: bool = False
    sliding_time: float = 0.0
    sliding_surfaces: int = 0
    own_steps_from: float = np.inf
    own_steps: int = 0
    step_error: float = 0.0

    def __getstate__(self) -> dict[str, Any]:
        """The fields for pickling, ``loss`` computed (a function need not pickle)."""
        self.loss  # noqa: B018 - computes and keeps the loss
        return dict(self.__dict__)

    @property
    def success(self) -> bool:
        """True unless the integration failed (a blow-up is a successful, truthful answer)."""
        return self.status >= 0

    @property
    def beta(self) -> np.ndarray:
        """``beta`` (T, d); +-inf where it exceeds float64, exact 0 where it is 0."""
        with np.errstate(over="ignore"):
            return np.where(self.sign_beta == 0, 0.0, self.sign_beta * np.exp(self.log_abs_beta))

    @property
    def theta(self) -> np.ndarray:
        """Parameters (T, L, d); +-inf where they exceed float64."""
        with np.errstate(over="ignore"):
            return np.where(self.sign_theta == 0, 0.0, self.sign_theta * np.exp(self.log_abs_theta))

    @property
    def direction(self) -> np.ndarray:
        """``beta / ||beta||_2`` (T, d) computed in log space (0 where ``beta = 0``)."""
        top = np.max(self.log_abs_beta, axis=1, keepdims=True)
        safe_top = np.where(np.isfinite(top), top, 0.0)
        scaled = np.where(
            self.sign_beta == 0, 0.0, self.sign_beta * np.exp(self.log_abs_beta - safe_top)
        )
        norm = np.linalg.norm(scaled, axis=1, keepdims=True)
        return np.divide(scaled, norm, out=np.zeros_like(scaled), where=norm > 0)

    def times_of(self, kind: str) -> list[float]:
        """Rescaled times of all events of one ``kind``."""
        return [e.tau for e in self.events if e.kind == kind]

    @property
    def blowup_time(self) -> float | None:
        """Rescaled time of the finite-time blow-up, or None."""
        times = self.times_of("blow-up")
        return times[0] if times else None

    @property
    def collapse_time(self) -> float | None:
        """Rescaled time at which ``theta`` collapsed to 0, or None."""
        times = self.times_of("collapse")
        return times[0] if times else None

    def table(self) -> tuple[list[str], np.ndarray]:
        """The columns of :meth:`to_csv`: their names and their values (T rows).

        Returns
        -------
        names : ``t``, ``tau``, ``log_t_original``, ``loss``, then ``log_abs_beta_j`` and
            ``sign_beta_j`` for ``j = 1, ..., d`` (1-based, as ``beta_j`` in the docs).
        columns : (T, 4 + 2 d) float array, the fields of those names side by side.
        """
        d = self.log_abs_beta.shape[1]
        names = (
            ["t", "tau", "log_t_original", "loss"]
            + [f"log_abs_beta_{j + 1}" for j in range(d)]
            + [f"sign_beta_{j + 1}" for j in range(d)]
        )
        columns = np.column_stack(
            [self.t, self.tau, self.log_t_original, self.loss, self.log_abs_beta, self.sign_beta]
        )
        return names, columns

    def to_csv(self, path: str | os.PathLike) -> None:
        """Write :meth:`table` to ``path`` as CSV (:func:`write_csv`: a header line of the
        names, then the values exactly). The parameters ``theta`` and the run's record (status,
        events, hyper-parameters) are in :meth:`to_arrays` only."""
        write_csv(path, *self.table())

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Every field as numpy arrays (:data:`ARRAY_NAMES`), for ``np.savez`` and a reading
        with ``allow_pickle=False``; :meth:`from_arrays` inverts it exactly.

        Returns
        -------
        dict
            ``t``, ``tau``, ``log_t_original``, ``loss``, ``log_abs_beta``, ``sign_beta``,
            ``log_abs_theta``, ``sign_theta``: the path arrays themselves (not copies).
            ``message``, ``algorithm``, ``clock``, ``backend``: 0-d str; ``cause``: 0-d str,
            the :class:`Cause` member's name (``'BLOW_UP'``). ``status``, ``depth``,
            ``nfev``, ``sliding_surfaces``, ``own_steps``: 0-d int64; ``reduced``: 0-d bool;
            ``sliding_time``, ``own_steps_from``, ``step_error``: 0-d float64.
            ``segment_loops``: (k,) str.
            ``hyperparameters``: 0-d str, a JSON object (numbers as numbers, a named schedule
            by its :meth:`~flows.schedules.Schedule.spec`). The events as parallel (E,)
            arrays: ``event_tau`` (float64), ``event_kind`` (str), ``event_group`` and
            ``event_j`` (int64: ``entry``, both -1 where it is None), ``event_surface`` (str,
            ``''`` where it is None).

        Raises
        ------
        ValueError
            If a hyper-parameter is neither a number nor a named schedule (an arbitrary
            callable cannot be stored); the message names it.
        """
        events = self.events
        entries = [(-1, -1) if e.entry is None else e.entry for e in events]
        hyperparameters = {k: _stored_hyperparameter(k, v) for k, v in self.hyperparameters.items()}
        return {
            **{name: np.asarray(getattr(self, name)) for name in _PATH},
            **{name: np.array(getattr(self, name), dtype=str) for name in _TEXT},
            **{name: np.array(kind(getattr(self, name))) for name, kind in _NUMBERS.items()},
            "cause": np.array(self.cause.name),
            "segment_loops": np.array(self.segment_loops, dtype=str),
            "hyperparameters": np.array(json.dumps(hyperparameters)),
            "event_tau": np.array([e.tau for e in events], dtype=float),
            "event_kind": np.array([e.kind for e in events], dtype=str),
            "event_group": np.array([group for group, _ in entries], dtype=np.int64),
            "event_j": np.array([j for _, j in entries], dtype=np.int64),
            "event_surface": np.array([e.surface or "" for e in events], dtype=str),
        }

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> Trajectory:
        """The trajectory :meth:`to_arrays` wrote (a dict, or the ``NpzFile`` of
        ``np.load``): every field as it was, the path arrays bit for bit.

        Hyper-parameters come back as numbers and named schedules
        (:func:`flows.schedules.from_spec`). An event's ``entry`` is None where ``event_j`` is
        -1 (a coordinate is >= 0), its ``surface`` None where ``event_surface`` is ``''``.
        Other arrays in ``arrays`` are ignored.

        Raises
        ------
        ValueError
            If an array of :data:`ARRAY_NAMES` is missing (the message names it), or
            ``cause`` is not the name of a :class:`Cause`.
        """
        missing = [name for name in ARRAY_NAMES if name not in arrays]
        if missing:
            raise ValueError(f"trajectory arrays: missing {', '.join(missing)}")
        a = {name: np.asarray(arrays[name]) for name in ARRAY_NAMES}
        cause = _text(a["cause"])
        if cause not in Cause.__members__:
            raise ValueError(
                f"trajectory arrays: cause {cause!r} is not one of {list(Cause.__members__)}"
            )
        events = tuple(
            FlowEvent(
                float(tau),
                str(kind),
                None if j < 0 else (int(group), int(j)),
                str(surface) or None,
            )
            for tau, kind, group, j, surface in zip(*(a[name] for name in _EVENTS), strict=True)
        )
        fields: dict[str, Any] = {
            **{name: a[name] for name in _PATH},
            **{name: _text(a[name]) for name in _TEXT},
            **{name: kind(a[name][()]) for name, kind in _NUMBERS.items()},
        }
        hyperparameters = json.loads(_text(a["hyperparameters"]))
        return cls(
            **fields,
            cause=Cause[cause],
            segment_loops=tuple(str(loop) for loop in a["segment_loops"]),
            hyperparameters={k: _loaded_hyperparameter(v) for k, v in hyperparameters.items()},
            events=events,
        )
