"""Schedules: hyper-parameters that change with the run's clock time.

Any of ``rho``, ``sigma``, ``rho_max`` of :func:`flows.simulate` and :func:`flows.iterate` may
be a callable ``value(time) -> float >= 0`` of the run's clock time (``tau`` for
``clock="rescaled"``, ``t`` for ``clock="original"``; ``k * eta`` at step ``k`` of
:func:`flows.iterate`). A plain callable (a lambda) is integrated as given. The named schedules
below are hashable values with their kink times (where the integrator restarts its segments,
so that a kink costs no accuracy), their maximum (the perturbation size the collapse threshold
uses) and a JSON spec (cache keys, the command line ``name:arg,arg,...``).

LE-SAM's official training schedule of its loss budget is :func:`lesam_official`, a staircase
in epochs (one value per epoch, from its authors' training script); :func:`warmup_cosine` is
the continuous curve of the same shape.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from .checks import choice, real

#: What ``rho``, ``sigma`` and ``rho_max`` may be: a number, or a schedule of the clock time.
Hyperparameter = float | Callable[[float], float]


@dataclass(frozen=True)
class Schedule:
    """A named schedule: ``SCHEDULES[name](*args)``; call it with a time (float or array)."""

    name: str
    args: tuple[float, ...]

    def __call__(self, time):
        if isinstance(time, (int, float)):  # one time: plain floats (the integrator's case)
            return _SCALAR_FORMULAS[self.name](float(time), *self.args)
        return _FORMULAS[self.name](np.asarray(time, dtype=float), *self.args)

    @property
    def kinks(self) -> tuple[float, ...]:
        """Times where the schedule or its slope jumps."""
        return _KINKS[self.name](*self.args)

    @property
    def maximum(self) -> float:
        """Its largest value (a :func:`multistep` with ``gamma > 1`` peaks after its last
        milestone)."""
        if self.name == "multistep":
            return float(self.args[0] * max(1.0, self.args[1] ** (len(self.args) - 2)))
        return float(self.args[0])

    def spec(self) -> dict:
        """A JSON-able description (:func:`from_spec` inverts it)."""
        return {"schedule": self.name, "args": list(self.args)}

    def __str__(self) -> str:
        return f"{self.name}:" + ",".join(f"{a:g}" for a in self.args)

    def __format__(self, spec: str) -> str:
        """As :meth:`__str__` whatever the number format asked for (``f"{rho:g}"``)."""
        return str(self)


def _constant(t: np.ndarray, value: float) -> np.ndarray:
    return np.full(t.shape, value)


def _cosine(t: np.ndarray, value: float, t_end: float) -> np.ndarray:
    """``value (1 + cos(pi t / t_end)) / 2`` on ``[0, t_end]``, 0 afterwards (0 from ``t = 0`` on
    for a decay of length 0, as :func:`warmup_cosine` with ``t_hold = t_end`` has)."""
    if t_end <= 0:
        return np.where(t < 0, value, 0.0)
    with np.errstate(over="ignore"):  # t_end subnormal: the phase is 0 or 1
        phase = np.clip(t / t_end, 0.0, 1.0)
    return 0.5 * value * (1.0 + np.cos(np.pi * phase))


def _warmup_cosine(
    t: np.ndarray, value: float, t_warmup: float, t_hold: float, t_end: float
) -> np.ndarray:
    """Linear from 0 to ``value`` on ``[0, t_warmup]``, ``value`` until ``t_hold``, cosine decay
    to 0 at ``t_end``, 0 afterwards."""
    with np.errstate(over="ignore"):  # t_warmup subnormal: the ramp is a step
        ramp = np.clip(t / t_warmup, 0.0, 1.0) if t_warmup > 0 else np.ones(t.shape)
    warm = value * ramp
    decay = _cosine(t - t_hold, value, t_end - t_hold)
    return np.where(t < t_hold, warm, decay)


def _cosine_scalar(t: float, value: float, t_end: float) -> float:
    if t_end <= 0:
        return value if t < 0 else 0.0
    try:
        phase = min(max(t / t_end, 0.0), 1.0)
    except OverflowError:  # t_end subnormal
        phase = 1.0 if t > 0 else 0.0
    return 0.5 * value * (1.0 + math.cos(math.pi * phase))


def _warmup_cosine_scalar(
    t: float, value: float, t_warmup: float, t_hold: float, t_end: float
) -> float:
    if t >= t_hold:
        return _cosine_scalar(t - t_hold, value, t_end - t_hold)
    if t_warmup <= 0:
        return value
    try:
        return value * min(max(t / t_warmup, 0.0), 1.0)
    except OverflowError:  # t_warmup subnormal
        return value if t > 0 else 0.0


def _multistep(t: np.ndarray, value: float, gamma: float, *milestones: float) -> np.ndarray:
    """``value * gamma^m(t)``, ``m(t)`` the number of milestones ``<= t``."""
    passed = np.searchsorted(np.asarray(milestones, dtype=float), t, side="right")
    return value * np.power(gamma, passed.astype(float))


def _multistep_scalar(t: float, value: float, gamma: float, *milestones: float) -> float:
    return value * gamma ** sum(1 for m in milestones if m <= t)


#: Nudge of ``t / epoch length`` before it is floored: ``(k eta) / (n eta)`` may round just
#: below the integer ``k / n`` at an epoch boundary.
_EPOCH_NUDGE = 1e-9


def _official_epoch_value(
    epoch: int, sigma: float, warmup: float, decay_start: float, epochs: float
) -> float:
    """LE-SAM's per-epoch loss budget (``schedule_lesam_sigma`` in ``lesam.py`` of
    smithgun2005/LE-SAM-ICML2026, with its training script's choices: linear warm-up from 0,
    cosine decay to 0): ``sigma epoch / (W - 1)`` for ``epoch < W`` (``sigma`` if ``W = 1``),
    ``sigma`` until ``D = max(decay_start, W)``, then
    ``sigma (1 + cos(pi (epoch - D) / (E - D - 1))) / 2``, reaching 0 at epoch ``E - 1``
    (0 throughout the decay if ``E - D <= 1``)."""
    w, e = int(warmup), int(epochs)
    if w > 0 and epoch < w:
        return sigma if w == 1 else sigma * min(max(epoch / (w - 1), 0.0), 1.0)
    start = max(int(decay_start), w)
    if epoch < start:
        return sigma
    length = e - start
    if length <= 1:
        return 0.0
    phase = min(max((epoch - start) / max(1, length - 1), 0.0), 1.0)
    return 0.5 * sigma * (1.0 + math.cos(math.pi * phase))


def _lesam_official_scalar(
    t: float, sigma: float, warmup: float, decay_start: float, epochs: float, steps: float, eta
) -> float:
    epoch = math.floor(t / (steps * eta) + _EPOCH_NUDGE)
    return _official_epoch_value(max(epoch, 0), sigma, warmup, decay_start, epochs)


def _lesam_official(t: np.ndarray, *args: float) -> np.ndarray:
    return np.array([_lesam_official_scalar(float(x), *args) for x in t.ravel()]).reshape(t.shape)


#: The same formulas for one time in plain floats (the arrays' versions above define them).
_SCALAR_FORMULAS: dict[str, Callable[..., float]] = {
    "constant": lambda t, value: value,
    "cosine": _cosine_scalar,
    "warmup_cosine": _warmup_cosine_scalar,
    "lesam_official": _lesam_official_scalar,
    "multistep": _multistep_scalar,
}

_FORMULAS: dict[str, Callable] = {
    "constant": _constant,
    "cosine": _cosine,
    "warmup_cosine": _warmup_cosine,
    "lesam_official": _lesam_official,
    "multistep": _multistep,
}
_KINKS: dict[str, Callable[..., tuple[float, ...]]] = {
    "constant": lambda value: (),
    "cosine": lambda value, t_end: (t_end,),
    "warmup_cosine": lambda value, t_warmup, t_hold, t_end: tuple(
        sorted({t for t in (t_warmup, t_hold, t_end) if t > 0})
    ),
    "lesam_official": lambda sigma, warmup, decay_start, epochs, steps, eta: tuple(
        m * steps * eta for m in range(1, int(epochs) + 1)
    ),
    "multistep": lambda value, gamma, *milestones: tuple(milestones),
}


#: The arguments of each named schedule, in order (for the messages that name them).
_ARGUMENT_NAMES: dict[str, tuple[str, ...]] = {
    "constant": ("value",),
    "cosine": ("value", "t_end"),
    "warmup_cosine": ("value", "t_warmup", "t_hold", "t_end"),
    "lesam_official": ("sigma", "warmup_epochs", "decay_start", "epochs", "steps_per_epoch", "eta"),
    "multistep": ("value", "gamma", "milestones..."),
}


def _checked(name: str, args: tuple) -> tuple[float, ...]:
    """Validated arguments of schedule ``name``: finite, value >= 0, and the times ordered (or,
    for :func:`lesam_official`, epoch counts that are whole numbers)."""
    if name == "multistep":
        return _checked_multistep(args)
    names = _ARGUMENT_NAMES[name]
    if len(args) != len(names):
        raise ValueError(f"schedule {name!r} takes {len(names)} argument(s), got {len(args)}")
    values = tuple(real(a, f"schedule {name!r}: {key}") for key, a in zip(names, args, strict=True))
    if values[0] < 0:
        raise ValueError(f"schedule {name!r}: {names[0]} must be >= 0, got {values[0]}")
    if name == "lesam_official":
        _check_epochs(values)
        return values
    previous = 0.0
    for key, t in zip(names[1:], values[1:], strict=True):
        if t < previous:
            raise ValueError(
                f"schedule {name!r}: {key} must be >= {previous:g} (times increase), got {t:g}"
            )
        previous = t
    if len(values) > 1 and values[-1] <= 0:
        raise ValueError(f"schedule {name!r}: {names[-1]} must be > 0, got {values[-1]:g}")
    return values


def _checked_multistep(args: tuple) -> tuple[float, ...]:
    """``value >= 0``, ``gamma >= 0``, then the milestones: finite times >= 0, increasing (at
    most 10^6 of them: one kink each)."""
    if len(args) < 2:
        raise ValueError(
            f"schedule 'multistep' takes value, gamma and the milestones, got {len(args)} argument(s)"
        )
    value = real(args[0], "schedule 'multistep': value")
    gamma = real(args[1], "schedule 'multistep': gamma")
    if value < 0 or gamma < 0:
        raise ValueError(
            f"schedule 'multistep': value and gamma must be >= 0, got {value:g}, {gamma:g}"
        )
    if len(args) - 2 > 10**6:
        raise ValueError(f"schedule 'multistep': at most 1e6 milestones, got {len(args) - 2}")
    milestones = tuple(
        real(m, f"schedule 'multistep': milestone {k}") for k, m in enumerate(args[2:])
    )
    previous = 0.0
    for k, m in enumerate(milestones):
        if m < previous or (k and m <= previous):
            raise ValueError(
                f"schedule 'multistep': milestones must be increasing times >= 0, got {m:g} "
                f"after {previous:g}"
            )
        previous = m
    return (value, gamma, *milestones)


def _check_epochs(values: tuple[float, ...]) -> None:
    """``warmup_epochs, decay_start >= 0``, ``epochs, steps_per_epoch >= 1`` whole numbers
    (at most 10^6 epochs: one kink each), ``eta > 0``."""
    warmup, decay_start, epochs, steps, eta = values[1:]
    names = ("warmup_epochs", "decay_start", "epochs", "steps_per_epoch")
    for key, value, least in zip(
        names, (warmup, decay_start, epochs, steps), (0, 0, 1, 1), strict=True
    ):
        if value != int(value) or not least <= value <= 10**6:
            raise ValueError(
                f"schedule 'lesam_official': {key} must be a whole number in [{least}, 1e6], "
                f"got {value:g}"
            )
    if not eta > 0:
        raise ValueError(f"schedule 'lesam_official': eta must be > 0, got {eta:g}")


def constant(value: float) -> Schedule:
    """``value`` at all times."""
    return Schedule("constant", _checked("constant", (value,)))


def cosine(value: float, t_end: float) -> Schedule:
    """Cosine decay from ``value`` at 0 to 0 at ``t_end`` (0 afterwards)."""
    return Schedule("cosine", _checked("cosine", (value, t_end)))


def warmup_cosine(value: float, t_warmup: float, t_hold: float, t_end: float) -> Schedule:
    """Linear warm-up from 0 over ``[0, t_warmup]``, hold ``value`` until ``t_hold``, cosine
    decay to 0 at ``t_end``, 0 afterwards: a continuous curve. It reaches ``value`` at
    ``t_warmup`` and 0 at ``t_end``; LE-SAM's training script instead holds one value per epoch,
    reaching ``value`` at epoch ``W - 1`` and 0 at epoch ``E - 1`` (:func:`lesam_official`)."""
    return Schedule("warmup_cosine", _checked("warmup_cosine", (value, t_warmup, t_hold, t_end)))


def lesam_official(
    sigma: float,
    warmup_epochs: int,
    decay_start: int,
    epochs: int,
    steps_per_epoch: int,
    eta: float = 1.0,
) -> Schedule:
    """LE-SAM's loss budget as its authors' training script sets it, once per epoch
    (``schedule_lesam_sigma`` of ``lesam.py``, smithgun2005/LE-SAM-ICML2026, called at the start
    of every epoch with warm-up from 0 and cosine decay to 0; their defaults: sigma 0.35,
    warm-up 10 epochs, decay from epoch 160, 200 epochs):

    ``sigma e / (W - 1)`` in epoch ``e < W``; ``sigma`` until epoch ``max(decay_start, W)``;
    then a cosine over the epochs that reaches 0 at epoch ``epochs - 1``.

    An epoch is ``steps_per_epoch`` steps of size ``eta``: the value at step ``k`` of
    :func:`flows.iterate` (time ``k eta``) is the one of epoch ``k // steps_per_epoch``, and in
    the flows an epoch lasts ``steps_per_epoch * eta`` of time. A staircase: its kinks are
    the epoch boundaries.
    """
    args = (sigma, warmup_epochs, decay_start, epochs, steps_per_epoch, eta)
    return Schedule("lesam_official", _checked("lesam_official", args))


def multistep(value: float, milestones, gamma: float = 0.1) -> Schedule:
    """Step decay: ``value * gamma^m(t)``, ``m(t)`` the number of ``milestones`` ``<= t``
    (PyTorch's ``MultiStepLR``, with the milestones in the run's clock time instead of epochs:
    for :func:`flows.iterate` step ``k`` is at ``t = k eta``, so a milestone at step ``k`` is
    the time ``k * eta``). The milestones are increasing times ``>= 0``; they are the kinks."""
    times = tuple(np.atleast_1d(np.asarray(milestones, dtype=object)).tolist())
    return Schedule("multistep", _checked("multistep", (value, gamma, *times)))


SCHEDULES: dict[str, Callable[..., Schedule]] = {
    "constant": constant,
    "cosine": cosine,
    "warmup_cosine": warmup_cosine,
    "lesam_official": lesam_official,
    "multistep": lambda value, gamma, *milestones: multistep(value, milestones, gamma),
}


def parse(text: str, name: str = "value") -> float | Schedule:
    """A number, or ``schedule:arg,arg,...`` (e.g. ``warmup_cosine:0.35,0.5,8,10``);
    ``ValueError`` naming ``name`` otherwise."""
    text = str(text).strip()
    if ":" not in text:
        try:
            number = float(text)
        except ValueError:
            raise ValueError(
                f"{name} must be a number or a schedule ({'|'.join(SCHEDULES)}:args), got {text!r}"
            ) from None
        return real(number, name)
    kind, _, args = text.partition(":")
    if kind not in SCHEDULES:
        raise ValueError(f"{name}: unknown schedule {kind!r}; one of {sorted(SCHEDULES)}")
    parts = args.split(",")
    if any(not part.strip() for part in parts):
        raise ValueError(f"{name}: an empty argument in schedule {text!r}")
    try:
        numbers = tuple(float(part) for part in parts)
    except ValueError:
        raise ValueError(f"{name}: schedule arguments must be numbers, got {text!r}") from None
    try:
        return Schedule(kind, _checked(kind, numbers))
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def from_spec(spec: dict) -> Schedule:
    """Inverse of :meth:`Schedule.spec`: a mapping ``{'schedule': name, 'args': [numbers]}``
    (``ValueError`` naming spec otherwise, with what is wrong)."""
    if not isinstance(spec, Mapping):
        raise ValueError(
            f"spec must be a mapping {{'schedule': name, 'args': [numbers]}}, got {spec!r}"[:300]
        )
    kind = choice(spec.get("schedule"), "spec['schedule']", list(SCHEDULES))
    args = spec.get("args")
    if not isinstance(args, (list, tuple)):
        raise ValueError(f"spec['args'] must be a list of numbers, got {args!r}"[:300])
    try:
        return Schedule(kind, _checked(kind, tuple(args)))
    except ValueError as exc:
        raise ValueError(f"spec: {exc}") from None


def kinks_of(values) -> np.ndarray:
    """Sorted kink times of every named schedule among ``values``."""
    times = {t for v in values if isinstance(v, Schedule) for t in v.kinks}
    return np.array(sorted(times))


def real_values(raw: object) -> np.ndarray | None:
    """``raw`` as a float array if it is a real number or an array of them (not a bool, a
    string, a complex number or an object), else None."""
    if isinstance(raw, (bool, np.bool_, str, bytes)):
        return None
    values = np.asarray(raw)
    if values.dtype.kind not in "iuf":
        return None
    return values.astype(float)


def schedule_value(key: str, schedule: Callable, time: float) -> float:
    """``schedule(time)`` as a float: a real number, finite and >= 0 (``ValueError`` naming
    ``key`` and the time otherwise, also when the schedule raises)."""
    try:
        raw = schedule(time)
    except Exception as exc:  # a user's callable: any failure is reported as its own
        raise ValueError(
            f"the schedule of {key} raised {type(exc).__name__} ({exc}) at time {time}"
        ) from exc
    values = real_values(raw)
    if values is None or values.ndim != 0:
        raise ValueError(
            f"the schedule of {key} must return a real number, got {raw!r} at time {time}"
        )
    value = float(values)
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(
            f"the schedule of {key} must return finite numbers >= 0, got {value} at time {time}"
        )
    return value


def maximum_of(value, t_max: float, key: str = "value") -> float:
    """The largest value of hyper-parameter ``key`` over ``[0, t_max]``: itself for a number,
    the schedule's maximum, or for a plain callable the largest of 257 samples (each checked by
    :func:`schedule_value`)."""
    if isinstance(value, Schedule):
        return value.maximum
    if callable(value):
        return max(schedule_value(key, value, float(t)) for t in np.linspace(0.0, t_max, 257))
    return float(value)


def constant_values(hp: dict, keys: tuple[str, ...]) -> np.ndarray | None:
    """The hyper-parameters ``keys`` (in that order) as numbers (a constant schedule is its
    value), or None if one of them varies in time (what the compiled steps, the sliding
    combination and the batched flows take; the compiled segment loop takes cosine schedules too:
    :func:`flows.compiled.field.compiled_hyperparameters`)."""
    values = []
    for key in keys:
        value = hp[key]
        if isinstance(value, Schedule) and value.name == "constant":
            value = value.maximum
        if callable(value):
            return None
        values.append(float(value))
    return np.array(values)
