"""The algorithm table: each algorithm is gradient descent at a perturbed point ``theta + eps(theta)``.

``docs/theory.md`` (algorithms). Adding a SAM variant means adding one :class:`Algorithm` to
:data:`ALGORITHMS`. Every perturbation receives ``grad L(theta)`` summarised as a
:class:`GradientSummary` (its unit direction, its signs and the log of its norm, so that
neither rounding nor overflow touches the direction: the norm may be ``exp(-1e18)``); the
field implementations (:mod:`flows.field`, :mod:`flows.fused`) build the summary.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from .checks import choice, real
from .schedules import real_values, schedule_value


class GradientSummary(NamedTuple):
    """``grad L(theta)`` as the perturbations need it.

    Attributes
    ----------
    unit : ``grad L / ||grad L||_2`` (shape (..., G, d); the norm over all L*d parameters,
        each group counted with its multiplicity; 0 where ``grad L = 0``).
    sign : ``sign(grad L)`` (with a frozen sign pattern for l_inf-SAM, see
        :func:`flows.field.perturbed_point`).
    log_norm : ``log ||grad L||_2`` (shape (..., 1, 1) or a float; -inf where ``grad L = 0``).
    multiplicity : (G,) how many identical layers each row stands for (rows of the balanced
        reduced system stand for L layers).
    log_abs_theta : ``log|theta|`` at the point (shape of ``unit``; ``-inf`` at zeros), for the
        perturbations that scale by the parameters (ASAM, adaptive LE-SAM: those whose
        :attr:`Algorithm.reads_theta`; None for the others).
    """

    unit: np.ndarray
    sign: np.ndarray
    log_norm: np.ndarray | float
    multiplicity: np.ndarray
    log_abs_theta: np.ndarray | None = None


Perturbation = Callable[[GradientSummary, Mapping[str, float]], np.ndarray]
#: ``log K`` from ``log ||grad L||_2`` (an array) and the hyper-parameters, for a perturbation
#: ``eps = K grad L`` (:attr:`Algorithm.gradient_factor`).
GradientFactor = Callable[[np.ndarray, Mapping[str, float]], np.ndarray]


def no_perturbation(grad: GradientSummary, hp: Mapping[str, float]) -> np.ndarray:
    """``eps = 0`` (gradient descent)."""
    return np.zeros_like(grad.unit)


def l2_perturbation(grad: GradientSummary, hp: Mapping[str, float]) -> np.ndarray:
    """``eps = rho grad L / ||grad L||_2`` (0 where ``grad L = 0``)."""
    return hp["rho"] * grad.unit


def linf_perturbation(grad: GradientSummary, hp: Mapping[str, float]) -> np.ndarray:
    """``eps = rho sign(grad L)`` elementwise (``sign 0 = 0``)."""
    return hp["rho"] * grad.sign


def unnormalized_perturbation(grad: GradientSummary, hp: Mapping[str, float]) -> np.ndarray:
    """``eps = rho grad L`` (USAM); may overflow, which the integrator reports."""
    with np.errstate(over="ignore", invalid="ignore"):
        return hp["rho"] * np.exp(grad.log_norm) * grad.unit


def loss_equilibrated_perturbation(grad: GradientSummary, hp: Mapping[str, float]) -> np.ndarray:
    """LE-SAM: ``eps = rho_t grad L / ||grad L||``, ``rho_t = min(sigma / (||grad L|| + varrho), rho_max)``
    (``rho_max`` where ``||grad L||`` underflows with ``varrho = 0``: ``sigma / 0`` is inf)."""
    with np.errstate(over="ignore", divide="ignore"):
        grad_norm = np.exp(grad.log_norm)
        return np.minimum(hp["sigma"] / (grad_norm + hp["varrho"]), hp["rho_max"]) * grad.unit


def no_factor(log_norm: np.ndarray, hp: Mapping[str, float]) -> np.ndarray:
    """``log K = -inf`` (gradient descent: ``eps = 0``)."""
    return np.full(np.shape(log_norm), -np.inf)


def l2_factor(log_norm: np.ndarray, hp: Mapping[str, float]) -> np.ndarray:
    """``log K = log rho - log ||grad L||`` (:func:`l2_perturbation`)."""
    with np.errstate(divide="ignore"):
        return np.log(hp["rho"]) - np.asarray(log_norm, dtype=float)


def unnormalized_factor(log_norm: np.ndarray, hp: Mapping[str, float]) -> np.ndarray:
    """``log K = log rho`` (:func:`unnormalized_perturbation`)."""
    with np.errstate(divide="ignore"):
        return np.full(np.shape(log_norm), np.log(hp["rho"]))


def loss_equilibrated_factor(log_norm: np.ndarray, hp: Mapping[str, float]) -> np.ndarray:
    """``log K = log rho_t - log ||grad L||``, ``rho_t = min(sigma / (||grad L|| + varrho),
    rho_max)`` (:func:`loss_equilibrated_perturbation`)."""
    log_norm = np.asarray(log_norm, dtype=float)
    with np.errstate(over="ignore", divide="ignore"):
        rho_t = np.minimum(hp["sigma"] / (np.exp(log_norm) + hp["varrho"]), hp["rho_max"])
        return np.log(rho_t) - log_norm


def _norm(values: np.ndarray, multiplicity: np.ndarray) -> np.ndarray:
    """``||values||_2`` over the last two axes, each row counted ``multiplicity`` times (shape
    (..., 1, 1)); ``values`` are of modulus at most 1 here (no overflow)."""
    weights = np.asarray(multiplicity, dtype=float)[:, None]
    return np.sqrt(np.sum(weights * values * values, axis=(-2, -1), keepdims=True))


def _scale(grad: GradientSummary, offset: float) -> tuple[np.ndarray, np.ndarray]:
    """``|theta| + offset = exp(top) * scaled`` with ``scaled`` of largest entry 1 per point
    (``top`` of shape (..., 1, 1)): the scalings of ASAM and adaptive LE-SAM, computed without
    overflow whatever ``|theta|`` (the algorithms that call it declare ``reads_theta``)."""
    if grad.log_abs_theta is None:
        raise ValueError("this perturbation reads theta: its Algorithm must set reads_theta")
    log_t = grad.log_abs_theta
    if offset > 0:
        log_t = np.logaddexp(log_t, np.log(offset))
    top = np.max(log_t, axis=(-2, -1), keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    return np.exp(log_t - top), top


def official_lesam_perturbation(grad: GradientSummary, hp: Mapping[str, float]) -> np.ndarray:
    """LE-SAM as its authors' optimizer computes it (``lesam.py`` of
    smithgun2005/LE-SAM-ICML2026 at 2b3ecd9: ``LESAM._grad_norm``, lines 52-67, and
    ``LESAM.ascent_step``, lines 73-107):

    ``eps = s * grad L * rho_t / (N + e)``, ``N = sqrt(||s * grad L||^2 + e)``,
    ``rho_t = sigma / (N + e)``, then ``rho_t = min(rho_t, rho_max)`` only if ``rho_max > 0``,

    with ``e`` = ``eps`` (1e-12) and ``s = |theta|`` if ``adaptive`` else 1. Since
    ``N >= sqrt(e)``, the perturbation vanishes with the gradient (the step becomes gradient
    descent once ``||grad L|| << sqrt(e) = 1e-6``), unlike the paper's formula
    (:func:`loss_equilibrated_perturbation`, which tends to ``rho_max`` there). Computed from
    ``log ||grad L||`` and ``log|theta|``, so neither a tiny nor a huge gradient or parameter is
    rounded away.
    """
    e = hp["eps"]
    if hp["adaptive"]:  # then grad.log_abs_theta is given (reads_theta)
        s, log_s = _scale(grad, 0.0)
        scaled = s * grad.unit
    else:
        scaled, log_s = grad.unit, np.zeros(np.shape(grad.log_norm))
    with np.errstate(divide="ignore", over="ignore"):
        log_sg = np.asarray(grad.log_norm) + log_s + np.log(_norm(scaled, grad.multiplicity))
        log_n = 0.5 * np.logaddexp(2.0 * log_sg, np.log(e))
        log_shifted = np.logaddexp(log_n, np.log(e))  # log(N + e)
        rho_t = hp["sigma"] * np.exp(-log_shifted)
        cap = np.asarray(hp["rho_max"])  # one value per point of a batch when scheduled
        rho_t = np.where(cap > 0, np.minimum(rho_t, cap), rho_t)
        factor = rho_t * np.exp(np.asarray(grad.log_norm) + log_s - log_shifted)
    return factor * scaled


#: The constant ASAM's code adds to ``||T grad L||`` (``asam.py`` of SamsungLabs/ASAM, line 27).
ASAM_STABILISER = 1e-16


def asam_perturbation(grad: GradientSummary, hp: Mapping[str, float]) -> np.ndarray:
    """ASAM (Kwon et al. 2021, ``asam.py`` of SamsungLabs/ASAM at dc9b513, ``ASAM.ascent_step``,
    lines 12-38): ``eps = rho T^2 grad L / (||T grad L|| + 1e-16)``, ``T = |theta| + eta_asam``
    elementwise (every layer of the network is a weight), so ``||T^-1 eps|| = rho`` up to the
    stabiliser. With ``T = exp(top) T'`` (largest entry of ``T'`` 1):
    ``eps = rho exp(top) T'^2 u / (||T' u|| + 1e-16 exp(-top) / ||grad L||)``, ``u`` the unit
    gradient."""
    T, top = _scale(grad, hp["eta_asam"])
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        damping = ASAM_STABILISER * np.exp(-top - np.asarray(grad.log_norm))
        denominator = _norm(T * grad.unit, grad.multiplicity) + damping
        factor = np.where(denominator > 0, hp["rho"] * np.exp(top) / denominator, 0.0)
    return factor * T * T * grad.unit


@dataclass(frozen=True)
class HyperparameterSpec:
    """One hyper-parameter an algorithm reads, as :func:`flows.simulate`, :func:`flows.iterate`
    and ``python -m flows.run`` take it (by ``name``; the flag ``--name`` with ``_`` as ``-``).

    Attributes
    ----------
    name : the keyword.
    default : the value when it is not given (None: required).
    schedulable : it may be a schedule, a callable of the clock time (:mod:`flows.schedules`).
    minimum : values below it are refused (None: any finite number).
    cli_default : the value ``python -m flows.run`` uses when its flag is absent (None: not
        given, so ``default`` applies).
    help : what it is, for the command line's help.
    flag : a switch: True or False (stored as 1.0 / 0.0; ``--name`` on the command line).
    """

    name: str
    default: float | None = None
    schedulable: bool = False
    minimum: float | None = 0.0
    cli_default: float | None = None
    help: str = ""
    flag: bool = False


@dataclass(frozen=True)
class Algorithm:
    """One entry of the table.

    Attributes
    ----------
    perturb : ``eps(theta)`` from ``grad L(theta)``.
    hyperparameters : what ``perturb`` and ``radius`` read, in this order (the compiled
        kernels of :mod:`flows.compiled` receive the values in this order too).
    radius : the size of the perturbation, for the collapse threshold (0: never collapses).
    sign_discontinuous : the field jumps where a gradient entry changes sign (l_inf-SAM);
        the integrator then locates zero crossings and sliding.
    zero_invariant : the field of a balanced layer ``a_j`` vanishes where ``a_j = 0`` (the
        perturbation of ``w_j`` is a multiple of ``prod_{k != l} w_j^(k)``), so ``a_j`` cannot
        cross 0 (:func:`flows.initialization.kept_sign_pattern`).
    compiled_id : the id of its compiled perturbation in
        :func:`flows.compiled._field_kernels.perturbed_point_into` and, for those in
        :data:`flows.compiled.discrete.STEP_IDS`, :mod:`flows.compiled._discrete_kernels` (for
        a per-example algorithm: the perturbation each example's gradient gets); None: the
        compiled loops do not apply and the run takes the Python loops, on any backend.
    reads_theta : ``perturb`` reads :attr:`GradientSummary.log_abs_theta` (the fields compute
        it only then).
    per_example : m-sharpness with m = 1 (:mod:`flows.per_example`): ``perturb`` acts on each
        example's own gradient ``grad l_i`` and the field averages ``grad l_i`` at the n
        perturbed points.
    residual_switch : the perturbation jumps where an example's ``l'(u_i)`` changes sign, as a
        normalised per-example gradient ``rho sign(r_i) z_i * ... / ||...||`` does at a zero
        residual ``r_i`` in regression (the flow would slide on ``r_i = 0``): the integrator
        ends the run there (:class:`flows.integrator.threshold_events.ResidualSwitch`).
    gradient_factor : for a perturbation that is a scalar multiple of the gradient it acts on,
        ``eps = K grad L`` (of each example's ``grad l_i`` where ``per_example``) with ``K >= 0``
        a function of that gradient's norm alone: ``log K`` from ``log ||grad L||_2`` and the
        hyper-parameters (``-inf`` for ``K = 0``); ``perturb`` is then ``K ||grad L|| *
        grad.unit``. None for the others. The depth-2 flows of these algorithms run in the
        coordinates of :mod:`flows.conserved`.
    zeroed_by : the hyper-parameters any one of which, given as the number 0, makes ``eps``
        identically 0 (``rho`` of l2-SAM; ``sigma`` or ``rho_max`` of LE-SAM):
        :func:`flows.simulate` and :func:`flows.iterate` then run gradient descent
        (:func:`effective_algorithm`).
    """

    perturb: Perturbation
    hyperparameters: tuple[HyperparameterSpec, ...] = ()
    radius: Callable[[Mapping[str, float]], float] = lambda hp: 0.0
    sign_discontinuous: bool = False
    zero_invariant: bool = False
    compiled_id: int | None = None
    reads_theta: bool = False
    per_example: bool = False
    residual_switch: bool = False
    gradient_factor: GradientFactor | None = None
    zeroed_by: tuple[str, ...] = ()

    def vanishes(self, hp: Mapping[str, object]) -> bool:
        """Whether ``eps`` is identically 0 with the resolved hyper-parameters ``hp``: one of
        :attr:`zeroed_by` is the number 0 and none of ``hp`` is a schedule (a schedule, even
        one that is 0 at some times, keeps the algorithm's own run)."""
        if is_scheduled(hp):
            return False
        return any(hp[name] == 0 for name in self.zeroed_by)

    @property
    def perturbs(self) -> bool:
        """False for plain gradient descent (``eps = 0``): no perturbation to evaluate."""
        return self.perturb is not no_perturbation

    @property
    def names(self) -> tuple[str, ...]:
        """The names of its hyper-parameters, in their declared order."""
        return tuple(spec.name for spec in self.hyperparameters)


_SCHEDULE = "a number or a schedule, e.g. warmup_cosine:0.35,0.5,8,10 (flows.schedules)"
RHO = HyperparameterSpec(
    "rho", schedulable=True, cli_default=1.0, help=f"perturbation radius (default 1): {_SCHEDULE}"
)
SIGMA = HyperparameterSpec("sigma", schedulable=True, help=f"LE-SAM loss budget: {_SCHEDULE}")
RHO_MAX = HyperparameterSpec("rho_max", schedulable=True, help=f"LE-SAM radius cap: {_SCHEDULE}")
VARRHO = HyperparameterSpec("varrho", default=1e-12, help="LE-SAM stabiliser (default 1e-12)")
OFFICIAL_SIGMA = HyperparameterSpec(
    "sigma", default=0.35, schedulable=True, help=f"LE-SAM loss budget: {_SCHEDULE}"
)
OFFICIAL_RHO_MAX = HyperparameterSpec(
    "rho_max", default=0.3, schedulable=True, minimum=None, help="official LE-SAM cap (<= 0: none)"
)
EPS = HyperparameterSpec(
    "eps",
    default=1e-12,
    minimum=float(np.finfo(float).tiny),  # > 0: without it the uncapped radius is unbounded
    help="official LE-SAM stabiliser (> 0, default 1e-12)",
)
ADAPTIVE = HyperparameterSpec(
    "adaptive", default=0.0, flag=True, help="official LE-SAM scaled by |theta| (a switch)"
)
ETA_ASAM = HyperparameterSpec("eta_asam", default=0.01, help="ASAM's offset of |theta| (0.01)")


def _rho(hp: Mapping[str, float]) -> float:
    """The radius ``rho``."""
    return hp["rho"]


def _rho_max(hp: Mapping[str, float]) -> float:
    """LE-SAM's largest radius, ``rho_max``."""
    return hp["rho_max"]


def _unnormalised_radius(hp: Mapping[str, float]) -> float:
    """0: USAM never collapses. Its perturbation ``rho grad L`` is a multiple of the layer
    products, so near ``theta = 0`` it is of the size of ``theta`` times ``rho |g|`` (the
    perturbed point ``theta + rho grad L`` scales with ``theta``) and the flow near 0 is
    GD's, slowed or sped up: no fixed-size push through 0 as in l2-SAM. (A collapse threshold
    at ``rho`` would stop a run from ``alpha = 1e-30`` at once with theta = 0, silently wrong.)"""
    return 0.0


def _official_radius(hp: Mapping[str, float]) -> float:
    """0: the official LE-SAM never collapses. Near ``theta = 0`` its gradient vanishes (as the
    product of the other layers), and with it the perturbation, ``~ sigma grad L / eps`` once
    ``||grad L|| << sqrt(eps)``, capped or not: no fixed-size push through 0 as in l2-SAM."""
    return 0.0


def _asam_radius(hp: Mapping[str, float]) -> float:
    """ASAM's radius near 0, where ``T = eta_asam``: ``rho eta_asam``."""
    return hp["rho"] * hp["eta_asam"]


ALGORITHMS: dict[str, Algorithm] = {
    "gd": Algorithm(no_perturbation, zero_invariant=True, compiled_id=0, gradient_factor=no_factor),
    "l2-sam": Algorithm(
        l2_perturbation,
        (RHO,),
        _rho,
        zero_invariant=True,
        compiled_id=1,
        gradient_factor=l2_factor,
        zeroed_by=("rho",),
    ),
    "linf-sam": Algorithm(
        linf_perturbation,
        (RHO,),
        _rho,
        sign_discontinuous=True,
        compiled_id=4,
        zeroed_by=("rho",),
    ),
    "usam": Algorithm(
        unnormalized_perturbation,
        (RHO,),
        _unnormalised_radius,
        zero_invariant=True,
        compiled_id=2,
        gradient_factor=unnormalized_factor,
        zeroed_by=("rho",),
    ),
    "le-sam": Algorithm(
        loss_equilibrated_perturbation,
        (SIGMA, RHO_MAX, VARRHO),
        _rho_max,
        zero_invariant=True,
        compiled_id=3,
        gradient_factor=loss_equilibrated_factor,
        zeroed_by=("sigma", "rho_max"),
    ),
    "le-sam-official": Algorithm(
        official_lesam_perturbation,
        (OFFICIAL_SIGMA, OFFICIAL_RHO_MAX, EPS, ADAPTIVE),
        _official_radius,
        zero_invariant=True,
        compiled_id=6,
        reads_theta=True,
        zeroed_by=("sigma",),  # rho_max <= 0 is no cap
    ),
    "asam": Algorithm(
        asam_perturbation,
        (RHO, ETA_ASAM),
        _asam_radius,
        zero_invariant=True,
        compiled_id=5,
        reads_theta=True,
        zeroed_by=("rho",),
    ),
    "1-sam": Algorithm(
        l2_perturbation,
        (RHO,),
        _rho,
        zero_invariant=True,
        per_example=True,
        residual_switch=True,
        compiled_id=1,
        gradient_factor=l2_factor,
        zeroed_by=("rho",),
    ),
    "1-usam": Algorithm(
        unnormalized_perturbation,
        (RHO,),
        _unnormalised_radius,
        zero_invariant=True,
        per_example=True,
        compiled_id=2,
        gradient_factor=unnormalized_factor,
        zeroed_by=("rho",),
    ),
}


def get_algorithm(name: str) -> Algorithm:
    """Look ``name`` up in :data:`ALGORITHMS`; ``ValueError`` naming 'algorithm' if unknown."""
    return ALGORITHMS[choice(name, "algorithm", ALGORITHMS)]


#: The base optimizer: the entry a run takes when its algorithm's perturbation vanishes.
BASE_ALGORITHM = "gd"


def effective_algorithm(name: str, hp: Mapping[str, object]) -> str:
    """The entry of :data:`ALGORITHMS` that runs algorithm ``name`` with its resolved
    hyper-parameters ``hp`` (:func:`resolve_hyperparameters`): :data:`BASE_ALGORITHM` where the
    perturbation is identically 0 (:meth:`Algorithm.vanishes`, e.g. ``rho = 0``), so that the run
    is gradient descent's bit for bit (its code path and backend), else ``name``. The run keeps
    ``name`` and ``hp`` in its result."""
    return BASE_ALGORITHM if get_algorithm(name).vanishes(hp) else name


def known_hyperparameters() -> dict[str, HyperparameterSpec]:
    """Every hyper-parameter some algorithm of :data:`ALGORITHMS` reads, by name (the first
    declaration of a name; ``schedulable`` if any algorithm lets it follow a schedule)."""
    known: dict[str, HyperparameterSpec] = {}
    for algo in ALGORITHMS.values():
        for spec in algo.hyperparameters:
            first = known.setdefault(spec.name, spec)
            if spec.schedulable and not first.schedulable:
                known[spec.name] = replace(first, schedulable=True)
    return known


def _checked(spec: HyperparameterSpec, value):
    """A finite real number >= ``spec.minimum`` (:func:`flows.checks.real`), or (where
    ``spec.schedulable``) a callable."""
    key = spec.name
    if spec.flag:
        if isinstance(value, (bool, np.bool_)):
            return float(value)
        try:
            number = real(value, key)
        except ValueError:
            raise ValueError(f"{key} must be True or False, got {value!r}") from None
        if number not in (0.0, 1.0):
            raise ValueError(f"{key} must be True or False, got {value!r}")
        return number
    if callable(value):
        if not spec.schedulable:
            schedulable = [s.name for s in known_hyperparameters().values() if s.schedulable]
            raise ValueError(
                f"{key} must be a number (only {', '.join(schedulable)} may be schedules)"
            )
        return value
    return real(value, key, low=spec.minimum)


def resolve_hyperparameters(name: str, given: Mapping[str, object]) -> dict:
    """The hyper-parameters algorithm ``name`` reads, with defaults filled in.

    ``given`` maps names to values (None: not given). Every name must be one that some
    algorithm of the table reads (``ValueError`` naming it otherwise), and every value given
    (used or not) must pass that hyper-parameter's checks, so ``rho=-1`` is an error even for
    ``gd``; values the algorithm does not read are ignored, so one set of keyword arguments can
    drive a loop over algorithms.
    """
    algo = get_algorithm(name)
    known = known_hyperparameters()
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ValueError(
            f"unknown hyper-parameter {unknown[0]!r}: the algorithms of the table read "
            f"{', '.join(sorted(known))}"
        )
    own = {spec.name: spec for spec in algo.hyperparameters}
    checked = {k: _checked(own.get(k, known[k]), v) for k, v in given.items() if v is not None}
    out: dict = {}
    for spec in algo.hyperparameters:
        value = checked.get(spec.name, spec.default)
        if value is None:
            raise ValueError(f"{spec.name} is required for algorithm {name!r}")
        out[spec.name] = value if callable(value) else float(value)
    return out


def is_scheduled(hp: Mapping[str, object]) -> bool:
    """Whether any hyper-parameter is a schedule."""
    return any(callable(v) for v in hp.values())


def hyperparameters_at(hp: Mapping[str, object], time) -> dict:
    """The values at clock time ``time`` (a float, or an array for a batch of points, shaped
    to broadcast against the parameters, e.g. (B, 1, 1)). A schedule must return finite
    numbers >= 0 (``ValueError`` naming the hyper-parameter otherwise)."""
    if isinstance(time, (int, float)):
        return {
            key: schedule_value(key, value, float(time)) if callable(value) else value
            for key, value in hp.items()
        }
    out = {}
    for key, value in hp.items():
        if not callable(value):
            out[key] = value
            continue
        t = np.asarray(time, dtype=float)
        try:
            v = real_values(value(t))
        except Exception:  # a scalar-only callable (or a failing one): one call per time
            v = None
        if v is None or v.shape != t.shape:
            v = np.array([schedule_value(key, value, float(x)) for x in t.ravel()])
            v = v.reshape(t.shape)
        if not (np.all(np.isfinite(v)) and np.all(v >= 0)):
            raise ValueError(
                f"the schedule of {key} must return finite numbers >= 0, got {v} at time {t}"
            )
        out[key] = float(v) if v.ndim == 0 else v
    return out
