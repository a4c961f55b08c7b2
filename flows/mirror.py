"""GD at depth 2 in the coordinates of its conservation law (the mirror flow of ``beta``).

GD on ``beta = u * v`` keeps ``c_j = u_j^2 - v_j^2`` constant: with ``g = dL/dbeta``,
``d(u_j^2 - v_j^2)/dt = 2 u_j (-v_j g_j) - 2 v_j (-u_j g_j) = 0``. Writing

    beta_j = (|c_j| / 2) sinh(2 psi_j)   (c_j != 0),

``u_j = s_j sqrt(c_j) cosh psi_j``, ``v_j = s_j sqrt(c_j) sinh psi_j`` (``c_j > 0``,
``s_j = sign u_j(0)``) or ``u_j = s_j sqrt(-c_j) sinh psi_j``, ``v_j = s_j sqrt(-c_j) cosh psi_j``
(``c_j < 0``, ``s_j = sign v_j(0)``), the flow becomes

    d psi_j / dt = -g_j(beta),

the hyperbolic-entropy mirror flow (docs/theory.md §25). A balanced coordinate (``c_j = 0``,
``|u_j| = |v_j| > 0``) keeps its signs and moves in ``l_j = log|beta_j|``:
``d l_j/dt = -2 sign(beta_j) g_j``; ``u_j = v_j = 0`` stays there.

In ``(u, v)`` the two layers of a coordinate that grows far above ``sqrt|c_j|`` agree to
rounding; when it has to shrink back, the unstable mode ``d(u - v)/dt = g (u - v)`` amplifies
their rounding difference until the layers split (:func:`flows.integrator.conservation.split_layers`).
Here ``c_j`` is a constant of the representation (kept as ``log|c_j|``, so ``alpha = 1e-300``
with ``c = 1e-600`` is exact) and no such mode exists.
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import DOP853

from .checks import integer, positive
from .data import Dataset
from .initialization import initialization
from .model import Loss, get_loss, loss_arguments, loss_for, signed_weights
from .results import Cause, Trajectory

LOG2 = float(np.log(2.0))


def log_abs_sinh(x: np.ndarray) -> np.ndarray:
    """``log|sinh x|`` for any float x (``-inf`` at 0): ``|x| - log 2 + log(1 - e^(-2|x|))``."""
    a = np.abs(np.asarray(x, dtype=float))
    with np.errstate(divide="ignore"):
        return a - LOG2 + np.log(-np.expm1(-2.0 * a))


def log_cosh(x: np.ndarray) -> np.ndarray:
    """``log cosh x`` for any float x: ``log(1 + 2 sinh(x/2)^2)`` for ``|x| < 1`` (no
    cancellation near 0), ``|x| - log 2 + log(1 + e^(-2|x|))`` beyond."""
    a = np.abs(np.asarray(x, dtype=float))
    small = np.minimum(a, 1.0)
    return np.where(
        a < 1.0, np.log1p(2.0 * np.sinh(0.5 * small) ** 2), a - LOG2 + np.log1p(np.exp(-2.0 * a))
    )


class MirrorCoordinates:
    """The map between ``(u, v)`` and the flow's state, from the initial layers (2, d).

    Attributes
    ----------
    log_c : ``log|c_j|`` (``-inf`` for balanced coordinates).
    kind : per coordinate 1 (``c_j > 0``), -1 (``c_j < 0``), 0 (balanced), 2 (``u = v = 0``).
    signs : ``s_j`` (``sign u_j(0)`` for kind 1, ``sign v_j(0)`` for kind -1); for kind 0 the
        signs of the two layers are in ``layer_signs``.
    """

    def __init__(self, init: np.ndarray):
        u, v = init
        with np.errstate(divide="ignore"):
            self.log_c = np.log(np.abs(u - v)) + np.log(np.abs(u + v))
        self.kind = np.where(np.abs(u) > np.abs(v), 1, np.where(np.abs(u) < np.abs(v), -1, 0))
        self.kind = np.where((u == 0) & (v == 0), 2, self.kind)
        self.signs = np.where(self.kind == 1, np.sign(u), np.sign(v))
        self.layer_signs = np.sign(init)
        self.state0 = self._state(u, v)

    def _state(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``psi_j = sign(u_j v_j) atanh(|v_j| / |u_j|)`` (kind 1; ``|u_j| / |v_j|`` for kind
        -1: ``tanh psi`` is the ratio of the sinh layer to the cosh one), ``log|beta_j|``
        (kind 0), 0 (kind 2)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(self.kind == 1, np.abs(v) / np.abs(u), np.abs(u) / np.abs(v))
            psi = np.sign(u) * np.sign(v) * np.arctanh(np.where(np.abs(self.kind) == 1, ratio, 0.0))
            log_beta = np.log(np.abs(u)) + np.log(np.abs(v))
        return np.where(self.kind == 0, log_beta, np.where(self.kind == 2, 0.0, psi))

    def log_abs_beta(self, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(log|beta|, sign beta)`` of states (..., d)."""
        hyperbolic = np.abs(self.kind) == 1
        log_beta = np.where(
            hyperbolic,
            self.log_c - LOG2 + log_abs_sinh(2.0 * state),
            np.where(self.kind == 0, state, -np.inf),
        )
        balanced_sign = self.layer_signs[0] * self.layer_signs[1]
        sign = np.where(hyperbolic, np.sign(state), np.where(self.kind == 0, balanced_sign, 0.0))
        return log_beta, sign

    def layers(self, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(log|theta|, sign theta)`` of states (T, d), each (T, 2, d)."""
        half = 0.5 * self.log_c
        ch, sh = half + log_cosh(state), half + log_abs_sinh(state)
        magnitudes = np.where(self.kind == 1, ch, sh), np.where(self.kind == 1, sh, ch)  # u, v
        s = self.signs * np.ones_like(state)
        signs = (
            np.where(self.kind == 1, s, s * np.sign(state)),
            np.where(self.kind == 1, s * np.sign(state), s),
        )
        log_abs, sign = [], []
        for layer in range(2):
            log_abs.append(
                np.where(
                    np.abs(self.kind) == 1,
                    magnitudes[layer],
                    np.where(self.kind == 0, 0.5 * state, -np.inf),
                )
            )
            sign.append(
                np.where(
                    np.abs(self.kind) == 1,
                    signs[layer],
                    np.where(self.kind == 0, self.layer_signs[layer], 0.0),
                )
            )
        return np.stack(log_abs, axis=-2), np.stack(sign, axis=-2)


def _loss_slopes(beta: np.ndarray, data: Dataset, loss: Loss) -> tuple[np.ndarray, np.ndarray]:
    """``l'(u_i)`` and ``|l'(u_i)|`` at ``beta`` (float)."""
    u = loss_arguments(data.signed_features @ beta, data)
    log_w = loss.log_abs_derivative(u)
    return -signed_weights(log_w, u, loss, 0.0), np.exp(log_w)


def gd_mirror_flow(
    data: Dataset,
    alpha=1.0,
    *,
    t_max: float = 10.0,
    n_points: int = 201,
    loss: str | None = None,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    max_nfev: int = 200_000,
) -> Trajectory:
    """The GD flow at depth 2 in the original clock, integrated in the coordinates of its
    conservation law (module docstring); the same path as ``simulate(data, "gd", 2, alpha,
    clock="original")``, which it follows where that run keeps ``u_j^2 - v_j^2``.

    Parameters
    ----------
    data, alpha, t_max, n_points, loss : as for :func:`flows.simulate` (``alpha`` any
        initialization of :func:`flows.initialization.initialization` at depth 2).
    rtol, atol : tolerances of scipy's DOP853 on ``psi`` (``atol`` absolute: ``psi`` is of
        order ``log(1 / alpha)``).
    max_nfev : budget of field evaluations; a run that spends it ends with status -1 and the
        path so far.

    Returns
    -------
    Trajectory
        ``algorithm='gd'``, ``depth=2``, ``clock='original'``, ``backend='mirror'``; ``tau``
        the rescaled time ``int c dt`` (``c`` the mean ``|l'|``), integrated beside ``psi``.
    """
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flows.Dataset, got {type(data).__name__}")
    t_max = positive(t_max, "t_max")
    n_points = integer(n_points, "n_points", 2)
    max_nfev = integer(max_nfev, "max_nfev", 1)
    rtol, atol = positive(rtol, "rtol"), positive(atol, "atol")
    the_loss = get_loss(loss_for(loss, data))
    coords = MirrorCoordinates(initialization(alpha, 2, data.d, reduced=False).groups)
    hyperbolic = np.abs(coords.kind) == 1
    balanced_sign = coords.layer_signs[0] * coords.layer_signs[1]
    scale = np.where(hyperbolic, 1.0, np.where(coords.kind == 0, 2.0 * balanced_sign, 0.0))

    def field(_t: float, z: np.ndarray) -> np.ndarray:
        log_beta, sign = coords.log_abs_beta(z[:-1])
        with np.errstate(over="ignore", invalid="ignore"):
            beta = sign * np.exp(log_beta)
            slope, magnitude = _loss_slopes(beta, data, the_loss)
            g = data.signed_features.T @ slope / data.n
        return np.append(-scale * g, np.mean(magnitude))

    times = np.linspace(0.0, t_max, n_points)
    solver = DOP853(field, 0.0, np.append(coords.state0, 0.0), t_max, rtol=rtol, atol=atol)
    states = [solver.y.copy()]
    cause, message = Cause.REACHED_END, "reached t_max"
    while len(states) < n_points:
        if solver.nfev > max_nfev:
            cause = Cause.BUDGET_SPENT
            message = f"max_nfev={max_nfev} field evaluations spent by t={solver.t:.6g}"
            break
        error = solver.step()
        if solver.status == "failed":
            cause, message = Cause.SOLVER_FAILED, f"solver failed at t={solver.t:.6g}: {error}"
            break
        if not np.all(np.isfinite(solver.y)):
            cause, message = Cause.OVERFLOW, f"beta left float64 at t={solver.t:.6g}"
            break
        dense = solver.dense_output()
        while len(states) < n_points and times[len(states)] <= solver.t:
            states.append(dense(times[len(states)]))
    return _trajectory(coords, np.array(states), times[: len(states)], data, the_loss, cause,
                       message, solver.nfev)  # fmt: skip


def _trajectory(coords, states, t, data, loss, cause, message, nfev) -> Trajectory:
    """The :class:`~flows.results.Trajectory` of the sampled states (T, d + 1)."""
    log_beta, sign_beta = coords.log_abs_beta(states[:, :-1])
    log_theta, sign_theta = coords.layers(states[:, :-1])
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        beta = sign_beta * np.exp(log_beta)
        u = loss_arguments(beta @ data.signed_features.T, data)
        losses = np.mean(loss.value(u), axis=1)
        log_t = np.log(t)
    return Trajectory(
        t=t,
        tau=states[:, -1],
        log_t_original=log_t,
        log_abs_theta=log_theta,
        sign_theta=sign_theta,
        log_abs_beta=log_beta,
        sign_beta=sign_beta,
        loss=losses,
        status=cause.status,
        message=message,
        algorithm="gd",
        depth=2,
        clock="original",
        hyperparameters={},
        cause=cause,
        backend="mirror",
        nfev=int(nfev),
    )
