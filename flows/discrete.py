"""``iterate``: the discrete algorithms ``theta_{k+1} = theta_k - eta grad L(theta_k + eps(theta_k))``.

The same perturbation table and gradient code as the flows (:mod:`flows.field`), in ordinary
float64 (the iterates are what a practitioner would run). Step ``k`` sits at original time
``t = k eta``, so a run is compared with ``simulate(..., clock="original")``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .algorithms import effective_algorithm, get_algorithm, resolve_hyperparameters
from .backends import choose_backend
from .batch_steps import float_batch_steps
from .checks import choice, integer, positive, real
from .clocks import CLOCKS
from .data import Dataset
from .field import Problem
from .fused import FusedField
from .initialization import initialization
from .minibatch import Minibatches, StepNoise, minibatches, step_noise
from .model import Loss, get_loss, loss_arguments, loss_for
from .results import Cause, write_csv
from .schedules import Hyperparameter, Schedule, schedule_value
from .signedlog import SignedLog


@dataclass(frozen=True, eq=False)
class DiscreteRun:
    """Iterates of a discrete algorithm.

    Attributes
    ----------
    steps : (K,) iteration numbers recorded; ``t = steps * eta`` the original time (``eta``
        the step size, or the peak of its schedule).
    theta : (K, L, d) parameters; ``beta`` (K, d); ``loss`` (K,).
    status : 0 finished; -1 an iterate (theta, beta or the margins) left float64 at some step:
        the run stops there, ``message`` says at which step and why, and the iterates recorded
        so far are kept, plus the last representable one (so every returned value is finite;
        if ``beta`` already overflows at step 0, only the initial ``theta`` is returned, with
        its ``beta = +-inf`` and ``loss = nan``).
    cause : ``Cause.REACHED_END`` or ``Cause.OVERFLOW`` (:class:`flows.results.Cause`).
    backend : ``'numba'`` where the compiled loop ran the steps (steps outside the plain float
        range are numpy's there too), ``'numpy'`` otherwise.
    buffer : the momentum buffer ``b_k`` of the last step taken (None before the first step):
        with the last iterate and step number, what :func:`iterate`'s ``start`` continues from.
    batch_size, sampling, seed : the minibatches (:mod:`flows.minibatch`): their size (None:
        full-batch steps), ``'iid'``, ``'epoch'`` or ``'replayed'``, and the root seed of the
        batches drawn (None where none were).
    """

    steps: np.ndarray
    t: np.ndarray
    theta: np.ndarray
    beta: np.ndarray
    loss: np.ndarray
    status: int
    message: str
    algorithm: str
    eta: float
    cause: Cause = Cause.REACHED_END
    momentum: float = 0.0
    weight_decay: float = 0.0
    backend: str = "numpy"
    buffer: np.ndarray | None = None
    batch_size: int | None = None
    sampling: str = ""
    seed: int | None = None

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Every field as numpy arrays (for ``np.savez`` and a reading with
        ``allow_pickle=False``); :meth:`from_arrays` inverts it exactly.

        ``steps``, ``t``, ``theta``, ``beta``, ``loss``: the arrays themselves; ``message``,
        ``algorithm``, ``backend``: 0-d str; ``cause``: 0-d str, the :class:`Cause` member's
        name; ``status``: 0-d int64; ``eta``, ``momentum``, ``weight_decay``: 0-d float64;
        ``buffer``: the buffer, or an array of shape (0,) where it is None; ``batch_size`` and
        ``seed``: 0-d int64, -1 where None; ``sampling``: 0-d str.
        """
        return {
            **{name: np.asarray(getattr(self, name)) for name in _RUN_ARRAYS},
            **{name: np.array(getattr(self, name), dtype=str) for name in _RUN_TEXT},
            **{name: np.array(float(getattr(self, name))) for name in _RUN_FLOATS},
            "status": np.array(self.status, dtype=np.int64),
            "cause": np.array(self.cause.name),
            "buffer": np.empty(0) if self.buffer is None else np.asarray(self.buffer),
            **{name: np.array(-1 if getattr(self, name) is None else getattr(self, name),
                              dtype=np.int64) for name in _RUN_OPTIONAL},
        }  # fmt: skip

    @classmethod
    def from_arrays(cls, arrays) -> DiscreteRun:
        """The run :meth:`to_arrays` wrote (a dict, or the ``NpzFile`` of ``np.load``), every
        array bit for bit; other arrays in ``arrays`` are ignored. ``ValueError`` naming a
        missing array, or a ``cause`` that is not a :class:`Cause`'s name."""
        names = (*_RUN_ARRAYS, *_RUN_TEXT, *_RUN_FLOATS, *_RUN_OPTIONAL, "status", "cause",
                 "buffer")  # fmt: skip
        missing = [name for name in names if name not in arrays]
        if missing:
            raise ValueError(f"discrete run arrays: missing {', '.join(missing)}")
        a = {name: np.asarray(arrays[name]) for name in names}
        cause = str(a["cause"][()])
        if cause not in Cause.__members__:
            raise ValueError(
                f"discrete run arrays: cause {cause!r} is not one of {list(Cause.__members__)}"
            )
        fields: dict[str, Any] = {
            **{name: a[name] for name in _RUN_ARRAYS},
            **{name: str(a[name][()]) for name in _RUN_TEXT},
            **{name: float(a[name][()]) for name in _RUN_FLOATS},
            **{name: None if int(a[name][()]) < 0 else int(a[name][()]) for name in _RUN_OPTIONAL},
        }
        return cls(
            **fields,
            status=int(a["status"][()]),
            cause=Cause[cause],
            buffer=None if a["buffer"].size == 0 else a["buffer"],
        )

    @property
    def log_abs_beta(self) -> np.ndarray:
        """``log|beta|`` (-inf where 0)."""
        with np.errstate(divide="ignore"):
            return np.log(np.abs(self.beta))

    def table(self) -> tuple[list[str], np.ndarray]:
        """The columns of :meth:`to_csv`: their names and their values (K rows).

        Returns
        -------
        names : ``step``, ``t``, ``loss``, ``beta_j`` for ``j = 1, ..., d``, then
            ``theta_l_j`` for layer ``l = 1, ..., L`` and ``j = 1, ..., d`` (1-based, as in the
            docs).
        columns : (K, 3 + d + L d) float array, the fields of those names side by side
            (``theta`` row by row: ``theta[:, l, j]`` is column ``3 + d + l d + j``).
        """
        k, depth, d = self.theta.shape
        names = (
            ["step", "t", "loss"]
            + [f"beta_{j + 1}" for j in range(d)]
            + [f"theta_{layer + 1}_{j + 1}" for layer in range(depth) for j in range(d)]
        )
        columns = np.column_stack(
            [self.steps, self.t, self.loss, self.beta, self.theta.reshape(k, depth * d)]
        )
        return names, columns

    def to_csv(self, path: str | os.PathLike) -> None:
        """Write :meth:`table` to ``path`` as CSV (:func:`flows.results.write_csv`: a header
        line of the names, then the values exactly)."""
        write_csv(path, *self.table())


#: The fields of :meth:`DiscreteRun.to_arrays` by kind.
_RUN_ARRAYS = ("steps", "t", "theta", "beta", "loss")
_RUN_TEXT = ("message", "algorithm", "backend", "sampling")
_RUN_OPTIONAL = ("batch_size", "seed")
_RUN_FLOATS = ("eta", "momentum", "weight_decay")


def perturbed_gradient(
    theta: np.ndarray, problem: Problem, time: float = 0.0, field: FusedField | None = None
) -> np.ndarray:
    """``grad L(theta + eps(theta))`` on the full (L, d) parameters, with scheduled
    hyper-parameters evaluated at ``time``: ``-c F`` of the flows' fused field
    (:class:`flows.fused.FusedField`, or ``field`` if given: built once per run), so a step uses
    the field the flows integrate (plain floats inside the float range, signed-log beyond it;
    for a per-example algorithm ``(1/n) sum_i grad l_i(theta + eps_i)``)."""
    field = FusedField(problem) if field is None else field
    vel = field.velocity(SignedLog.from_float(theta), None, time)
    return SignedLog(-vel.dtheta.sign, vel.dtheta.log_abs + vel.log_c).to_float()


def sam_step(theta: np.ndarray, problem: Problem, eta: float, time: float = 0.0) -> np.ndarray:
    """One step ``theta - eta grad L(theta + eps(theta))`` (no momentum, no weight decay)."""
    return theta - eta * perturbed_gradient(theta, problem, time)


@dataclass(frozen=True)
class BaseOptimizer:
    """The step the perturbed gradient ``g_k`` drives, with PyTorch SGD's semantics
    (``torch.optim.SGD``, dampening 0, no Nesterov): ``d_k = g_k + weight_decay theta_k``,
    ``b_0 = d_0``, ``b_k = momentum b_{k-1} + d_k``, ``theta_{k+1} = theta_k - eta_k b_k``.

    ``eta`` a number, or a named schedule (:mod:`flows.schedules`) of the step time
    ``t_k = k * unit`` with ``unit`` its peak value (so that a schedule written in epochs of
    ``steps_per_epoch * unit`` lines up with the steps).
    """

    eta: float | Schedule
    momentum: float = 0.0
    weight_decay: float = 0.0
    backend: str = "numpy"

    @property
    def unit(self) -> float:
        """The time of one step: ``eta``, or a schedule's peak value."""
        return self.eta.maximum if isinstance(self.eta, Schedule) else float(self.eta)

    def rate(self, k: int) -> float:
        """``eta_k``."""
        if isinstance(self.eta, Schedule):
            return schedule_value("eta", self.eta, k * self.unit)
        return float(self.eta)

    def direction(self, g: np.ndarray, theta: np.ndarray, buffer: np.ndarray | None) -> np.ndarray:
        """``b_k`` from ``g_k``, ``theta_k`` and ``b_{k-1}`` (None at the first step)."""
        d = g + self.weight_decay * theta if self.weight_decay else g
        if not self.momentum or buffer is None:
            return d
        return self.momentum * buffer + d


def iterate(
    data: Dataset,
    algorithm: str = "l2-sam",
    depth: int = 2,
    alpha=1.0,
    *,
    eta: float | Schedule = 1e-3,
    steps: int = 1000,
    record_every: int = 1,
    loss: str | None = None,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    backend: str = "auto",
    start: DiscreteRun | None = None,
    batch_size: int | None = None,
    seed: int | np.random.Generator | None = None,
    sampling: str = "iid",
    batches: np.ndarray | None = None,
    label_noise: float = 0.0,
    temperature: float = 0.0,
    **hyperparameters: Hyperparameter | None,
) -> DiscreteRun:
    """Run ``steps`` iterations of GD / SAM with step size ``eta`` (see :func:`flows.simulate`
    for the other parameters, the hyper-parameters among them); every ``record_every``-th
    iterate is kept.

    ``start``: a :class:`DiscreteRun` (status 0) to continue, in place of ``alpha``: from its
    last iterate, step number ``K`` and momentum buffer, ``steps`` more steps (numbered
    ``K + 1, ...``; the recorded ones are those with ``k`` a multiple of ``record_every``, and
    the last). With the same data, algorithm, hyper-parameters and optimizer, ``n`` steps then
    ``m`` more are the ``n + m`` steps of one call, bit for bit (minibatches included: the
    continued run takes ``start``'s batch size, sampling and seed unless given).

    Minibatches (:mod:`flows.minibatch`): ``batch_size`` B, each step the mean loss of B
    examples with the perturbation on the same batch; ``sampling`` ``'iid'`` (default) or
    ``'epoch'``; ``seed`` an int, a ``numpy.random.Generator`` or None; ``batches`` an integer
    array (steps, B) of example indices replaying a given order. Minibatch steps run on numpy
    (``backend='numba'`` is refused), in plain floats on the batch's rows while the iterates are
    in the float range (:mod:`flows.batch_steps`); the recorded loss is the full data's.

    Noise (:class:`flows.minibatch.StepNoise`, drawn from ``seed`` as the batches are):
    ``label_noise`` the standard deviation of Gaussian noise added to the targets of each step's
    examples (regression) or the probability of flipping each one's label (classification);
    ``temperature`` T adds ``sqrt(2 eta T) xi`` to each step (SGLD). At 0 each is the run
    without it.

    The base optimizer is SGD as PyTorch runs it (:class:`BaseOptimizer`): ``momentum`` and
    ``weight_decay`` (both 0: plain gradient steps), and ``eta`` a number or a named schedule.
    Step ``k`` (from ``theta_k`` to ``theta_{k+1}``) is at the time ``t_k = k * eta`` (``eta``'s
    peak value for a schedule), where every schedule (``eta``'s and the hyper-parameters') is
    evaluated.

    ``backend``: ``'auto'`` (the default) runs the steps in the compiled loop of
    :mod:`flows.compiled.discrete` where numba is installed and the run allows it (an algorithm
    and a loss with compiled twins, no schedule), ``'numba'`` insists on numba, ``'numpy'`` runs
    every step in numpy. Either way a step that leaves the plain float range is the numpy
    step; :attr:`DiscreteRun.backend` says which ran."""
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flows.Dataset, got {type(data).__name__}")
    hp = resolve_hyperparameters(algorithm, hyperparameters)
    the_loss = get_loss(loss_for(loss, data))
    init = initialization(alpha, depth, data.d, reduced=False)
    base = base_optimizer(eta, momentum, weight_decay)
    steps, record_every = integer(steps, "steps", 1), integer(record_every, "record_every", 1)
    check_budget(steps, record_every, init.groups.size)
    theta, first, buffer = _starting_point(start, init.groups)
    if start is not None and batch_size is None and batches is None:
        batch_size, sampling = start.batch_size, start.sampling or sampling
    if start is not None and seed is None:
        seed = start.seed
    chosen = minibatches(data.n, batch_size, seed, sampling, batches, steps, first)
    noise = step_noise(label_noise, temperature, seed, chosen, data)
    algo = get_algorithm(effective_algorithm(algorithm, hp))  # eps = 0: gd's steps
    problem = Problem(data, algo, hp, the_loss, init.multiplicity, CLOCKS["original"])
    stochastic = chosen is not None or noise is not None
    if stochastic and backend == "numba":
        raise ValueError("backend: minibatch and noisy steps run on numpy; use 'auto' or 'numpy'")
    compiled = None if stochastic else discrete_steps(backend, problem, base)
    fast = (
        float_batch_steps(problem, base, chosen, noise, LOSS_CHECK_ARGUMENT)
        if stochastic
        else compiled
    )
    kept_steps, kept, cause, message, buffer = _run(
        theta, problem, base, steps, record_every, fast, first, buffer, chosen, noise
    )
    thetas = np.array(kept)
    with np.errstate(over="ignore"):  # beta = +-inf where it already overflows at step 0
        betas = np.prod(thetas, axis=1)
    steps_arr = np.array(kept_steps)
    return DiscreteRun(
        steps=steps_arr,
        t=steps_arr * base.unit,
        theta=thetas,
        beta=betas,
        loss=_losses(betas, data, the_loss),
        status=cause.status,
        message=message,
        algorithm=algorithm,
        eta=base.unit,
        cause=cause,
        momentum=base.momentum,
        weight_decay=base.weight_decay,
        backend="numpy" if compiled is None else "numba",
        buffer=buffer,
        batch_size=None if chosen is None else chosen.size,
        sampling=""
        if chosen is None
        else ("replayed" if chosen.given is not None else chosen.sampling),
        seed=_root_of(chosen, noise),
    )


def _root_of(chosen: Minibatches | None, noise: StepNoise | None) -> int | None:
    """The root seed a run drew from (None where it drew nothing)."""
    if noise is not None:
        return noise.root
    return None if chosen is None or chosen.given is not None else chosen.root


def _starting_point(
    start: DiscreteRun | None, groups: np.ndarray
) -> tuple[np.ndarray, int, np.ndarray | None]:
    """``(theta, k, buffer)`` a call starts from: ``alpha``'s layers at step 0, or the last
    iterate, step and momentum buffer of ``start`` (``ValueError`` naming start where it is not
    a finished :class:`DiscreteRun` of the call's depth and dimension)."""
    if start is None:
        return groups.copy(), 0, None
    if not isinstance(start, DiscreteRun):
        raise ValueError(f"start must be a flows.DiscreteRun, got {type(start).__name__}")
    if start.status != 0:
        raise ValueError(
            f"start: the run ended with status {start.status} ({start.message}); only a run "
            "that finished its steps can be continued"
        )
    theta = np.array(start.theta[-1], dtype=float)
    if theta.shape != groups.shape:
        raise ValueError(
            f"start: its parameters have shape {theta.shape}, the call's depth and data "
            f"{groups.shape}"
        )
    buffer = None if start.buffer is None else np.array(start.buffer, dtype=float)
    return theta, int(start.steps[-1]), buffer


#: Caps of one ``iterate`` call: the steps (at ~10-100 us each, 1e8 steps are hours) and the
#: floats its recorded iterates hold (2**28 floats = 2 GiB).
MAX_STEPS = 10**8
MAX_RECORDED_FLOATS = 2**28


def check_budget(steps: int, record_every: int, size: int) -> None:
    """``ValueError`` naming ``steps`` (or ``record_every``) when the run exceeds
    :data:`MAX_STEPS`, or when its recorded iterates (``steps // record_every + 2`` of ``size``
    parameters each, plus ``beta``) would exceed :data:`MAX_RECORDED_FLOATS`."""
    if steps > MAX_STEPS:
        raise ValueError(f"steps must be at most {MAX_STEPS:.0e} (one iterate call), got {steps}")
    recorded = (steps // record_every + 2) * 2 * size
    if recorded > MAX_RECORDED_FLOATS:
        raise ValueError(
            f"steps={steps} with record_every={record_every} would record "
            f"{recorded * 8 / 2**30:.1f} GiB of iterates (at most {MAX_RECORDED_FLOATS * 8 / 2**30:.0f}"
            " GiB): raise record_every"
        )


def base_optimizer(eta, momentum, weight_decay) -> BaseOptimizer:
    """The checked :class:`BaseOptimizer` of :func:`iterate`'s arguments."""
    if isinstance(eta, Schedule):
        if not eta.maximum > 0:
            raise ValueError(f"eta: a schedule of the step size must have a peak > 0, got {eta}")
    elif callable(eta):
        raise ValueError(
            "eta must be a number or a named schedule of flows.schedules (its peak value sets "
            "the time of a step), not a plain callable"
        )
    else:
        eta = positive(eta, "eta")
    return BaseOptimizer(
        eta, real(momentum, "momentum", low=0.0), real(weight_decay, "weight_decay", low=0.0)
    )


#: The backends ``iterate`` takes.
BACKENDS = ("auto", "numba", "numpy")


def discrete_steps(backend: str, problem: Problem, base: BaseOptimizer):
    """The compiled loop of the run (``Backend.discrete`` of :data:`flows.backends.BACKENDS`),
    or None for numpy's steps; ``ValueError`` naming ``backend`` when ``'numba'`` cannot run
    it."""
    chosen = choose_backend(choice(backend, "backend", BACKENDS), problem)
    steps = None
    if chosen.discrete is not None:
        steps = chosen.discrete(
            problem, base.eta, base.momentum, base.weight_decay, LOSS_CHECK_ARGUMENT
        )
    if steps is None and backend == "numba":
        raise ValueError(
            "backend 'numba' runs iterate for the algorithms and losses with compiled twins, at "
            "a constant step size and hyper-parameters; use backend='auto' or 'numpy'"
        )
    return steps


def _run(
    theta: np.ndarray,
    problem: Problem,
    base: BaseOptimizer,
    steps: int,
    record_every: int,
    fast_steps=None,
    first: int = 0,
    buffer: np.ndarray | None = None,
    batches: Minibatches | None = None,
    noise: StepNoise | None = None,
) -> tuple[list[int], list[np.ndarray], Cause, str, np.ndarray | None]:
    """The recorded ``(steps, thetas)`` of ``steps`` steps from ``theta`` (L, d) at step
    ``first`` with momentum buffer ``buffer`` (None: no step taken yet), the cause, the message
    and the buffer after the last step; ``batches`` (:mod:`flows.minibatch`) gives each step's
    examples (None: all of them), ``noise`` its label noise and SGLD term.

    ``fast_steps`` (the compiled loop of :func:`discrete_steps`, or the float minibatch steps
    of :mod:`flows.batch_steps`) runs the steps it can; the general numpy step the others.
    Stops at the first iterate that float64 cannot represent on the data its step saw (a
    minibatch step checks its batch's margins and loss), keeping the last one that it can.
    """
    kept_steps, kept = [first], [theta.copy()]
    why = _not_representable(theta, problem.data, problem.loss)
    if why:
        return (
            kept_steps,
            kept,
            Cause.OVERFLOW,
            (
                f"iterate not representable at step {first}: {why}; only the initial theta is returned"
            ),
            buffer,
        )
    last_k, last = first, theta
    field = FusedField(problem)
    k, end = first, first + steps
    while k < end:
        if fast_steps is not None:
            k, theta, buffer = fast_steps.advance(
                theta, buffer, k, end, record_every, kept_steps, kept
            )
            last_k, last = k, theta
            if k == end:
                break
        k += 1
        with np.errstate(over="ignore", invalid="ignore"):
            seen = problem.data
            if batches is None and noise is None:
                g = perturbed_gradient(theta, problem, (k - 1) * base.unit, field)
            else:
                seen = seen if batches is None else seen.rows(batches.batch(k - 1))
                seen = seen if noise is None else noise.labels(seen, k - 1)
                g = perturbed_gradient(theta, replace(problem, data=seen), (k - 1) * base.unit)
            buffer = base.direction(g, theta, buffer)
            rate = base.rate(k - 1)
            theta = theta - rate * buffer
            if noise is not None:
                theta = theta + noise.kick(k - 1, theta.shape, rate)
        why = _not_representable(theta, seen, problem.loss)  # on the data the step saw
        if why:
            if kept_steps[-1] != last_k:
                kept_steps.append(last_k)
                kept.append(last.copy())
            return (
                kept_steps,
                kept,
                Cause.OVERFLOW,
                (
                    f"iterate not representable at step {k}: {why}; "
                    f"the iterates up to step {last_k} are kept"
                ),
                buffer,
            )
        last_k, last = k, theta
        if k % record_every == 0 or k == end:
            kept_steps.append(k)
            kept.append(theta.copy())
    return kept_steps, kept, Cause.REACHED_END, f"ran {steps} steps", buffer


#: The loss arguments of the recorded iterates are computed in blocks of at most
#: ``max(n d, LOSS_BLOCK)`` floats (not K n at once).
LOSS_BLOCK = 2**20


def _losses(betas: np.ndarray, data: Dataset, loss: Loss) -> np.ndarray:
    """Mean loss ``(1/n) sum_i l(<beta, z_i> - o_i)`` of each ``beta`` (K, d) on ``data``
    (``nan`` where a margin is not finite), a block of rows at a time (:data:`LOSS_BLOCK`)."""
    rows = max(1, max(data.n * data.d, LOSS_BLOCK) // data.n)
    out = np.empty(betas.shape[0])
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, betas.shape[0], rows):
            u = loss_arguments(betas[start : start + rows] @ data.signed_features.T, data)
            finite = np.all(np.isfinite(u), axis=1)
            out[start : start + rows] = np.where(finite, np.mean(loss.value(u), axis=1), np.nan)
    return out


def _not_representable(theta: np.ndarray, data: Dataset, loss: Loss) -> str:
    """Why the iterate ``theta`` (L, d) cannot be represented in float64, or '' if it can.

    Checks the parameters, ``beta = prod_l theta^(l)``, the margins ``<beta, y_i x_i>`` and the
    loss ``(1/n) sum_i l(u_i)`` (the squared loss overflows from residuals of ~1e154, the
    exponential one from margins below -709), in that order.
    """
    if np.any(np.isnan(theta)):
        return "theta became NaN (an invalid operation in the update, e.g. inf - inf)"
    if not np.all(np.isfinite(theta)):
        return f"|theta| overflows float64 (beyond {np.finfo(float).max:.3g})"
    with np.errstate(over="ignore", invalid="ignore"):
        beta = np.prod(theta, axis=0)
        if not np.all(np.isfinite(beta)):
            top = float(np.max(np.abs(theta)))
            return (
                f"beta = prod_l theta^(l) overflows float64 (|theta| up to {top:.3g}, "
                f"{theta.shape[0]} layers)"
            )
        products = data.signed_features @ beta
        if not np.all(np.isfinite(products)):
            return "the margins <beta, y_i x_i> overflow float64"
        u = loss_arguments(products, data)
        large = np.max(np.abs(u), initial=0.0) > LOSS_CHECK_ARGUMENT
        if large and not np.isfinite(np.mean(loss.value(u))):
            return "the training loss overflows float64"
    return ""


#: The losses of the table are finite for loss arguments below this size (e^700 and
#: 700^2 / 2 are floats): only beyond it does :func:`_not_representable` evaluate the loss.
LOSS_CHECK_ARGUMENT = 700.0
