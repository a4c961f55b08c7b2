"""l_inf-SAM's own steps: explicit Euler on its discontinuous field in ``tau`` (numpy loop).

One step from ``theta_k`` (all ``L`` layers, floats), with ``F = -grad L / c`` the rescaled
field (``docs/theory.md`` §3; the weights ``p_i ∝ |l'(u_i)|`` in log form, so margins of any
size)::

    eps_k = rho sign(grad L(theta_k)) = -rho sign(F(theta_k)),
    theta_{k+1} = theta_k + dtau_k F(theta_k + eps_k),
    dtau_k = h ||theta_k||_2 / ||F(theta_k + eps_k)||_2,

each step moving ``theta`` by ``h`` of its norm: discrete l_inf-SAM with a normalised step. It
crosses every switching surface it meets and chatters along those the flow slides on; the time
it spends on each side is its displacement there over that side's speed, as in Filippov's
combination. The clock
advances by ``dtau_k`` (rescaled) or ``dt_k = dtau_k / c(theta_k + eps_k)`` (original), and
``log`` of the original time since the start by ``logaddexp``.

**Checkpoints.** Where ``log ||beta||_1`` first reaches ``k`` :data:`CHECKPOINT_SPACING` above
its value at the start (``k = 0, 1, ...``), the loop keeps ``log ||beta||_1``, ``beta / ||beta||_1``, ``tau``
and ``log ||theta||_2`` (up to the checkpoints' capacity): the path as a curve, parametrised
by the size of ``beta`` (as the discrete iteration is compared in ``tests/test_junctions.py``),
and at depth ``L >= 3`` the time left to the blow-up by homogeneity: ``||theta||^-(L - 2)``
falls linearly to 0 at ``tau*``, so from the last two checkpoints
``tau* - tau = q (tau - tau_c) / (q_c - q)``, ``q = ||theta||^-(L - 2)``.

The loop stops at the first of: the clock reaches ``s_end`` (the last step shortened to land
there; :data:`END`); the time left is below ``blowup_tol max(1, tau)`` (:data:`BLOWUP`);
``max_steps`` steps (:data:`BUDGET`); a field that is not finite (:data:`RANGE`). At each grid
time it passes it keeps ``theta``, ``tau`` and the log-time elapsed, linear between the two
steps around it.

:mod:`flows.compiled.stepping` runs the same loop compiled; :mod:`flows.integrator.stepping`
uses either to continue a run.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..fused import _exclusive
from ..model import Loss, logsumexp

END, BLOWUP, BUDGET, RANGE = 0, 1, 2, 3
#: Increase of ``log ||beta||_1`` between checkpoints, and their capacity.
CHECKPOINT_SPACING = 0.05
CHECKPOINTS = 4096


class Steps(NamedTuple):
    """What :func:`own_steps` returns.

    Attributes
    ----------
    status : :data:`END`, :data:`BLOWUP`, :data:`BUDGET` or :data:`RANGE`.
    steps : steps taken.
    theta : (L, d) after the last step.
    s, tau, log_elapsed : the clock, ``tau`` and ``log`` of the original time since the start
        there.
    time_left : the time left to the blow-up at the last checkpoint (``inf`` at ``L <= 2`` or
        before two checkpoints).
    kept : how many grid times were passed; their rows of ``kept_theta`` (m, L, d),
        ``kept_tau`` and ``kept_log_elapsed`` (m,) are filled.
    checkpoints : how many checkpoints were kept; their rows of ``check_log_size``,
        ``check_direction`` (C, d), ``check_tau`` and ``check_log_norm`` are filled.
    """

    status: int
    steps: int
    theta: np.ndarray
    s: float
    tau: float
    log_elapsed: float
    time_left: float
    kept: int
    kept_theta: np.ndarray
    kept_tau: np.ndarray
    kept_log_elapsed: np.ndarray
    checkpoints: int
    check_log_size: np.ndarray
    check_direction: np.ndarray
    check_tau: np.ndarray
    check_log_norm: np.ndarray


def rescaled_field(theta: np.ndarray, features: np.ndarray, loss: Loss) -> tuple[np.ndarray, float]:
    """``(F, log c)`` at ``theta``: ``F = G ⊙ prod_{k != l} theta^(k)``, ``G = sum_i p_i z_i``,
    and the clock factor."""
    log_w = loss.log_abs_derivative(features @ np.prod(theta, axis=0))
    total = logsumexp(log_w)
    g = np.exp(log_w - total) @ features
    return g * _exclusive(theta, np.multiply, 1.0), total - np.log(len(log_w))


def own_steps(
    theta: np.ndarray,
    s: float,
    tau: float,
    s_end: float,
    original: bool,
    h: float,
    max_steps: int,
    grid: np.ndarray,
    features: np.ndarray,
    loss: Loss,
    rho: float,
    blowup_tol: float,
) -> Steps:
    """The steps of the module docstring from ``theta`` (L, d) at clock ``s`` and ``tau``,
    keeping the states at the increasing ``grid`` times in ``(s, s_end]``."""
    theta = np.array(theta, dtype=float)
    depth, d = theta.shape
    kept_theta = np.empty((len(grid),) + theta.shape)
    kept_tau, kept_log = np.empty(len(grid)), np.empty(len(grid))
    check = (np.empty(CHECKPOINTS), np.empty((CHECKPOINTS, d)), np.empty(CHECKPOINTS),
             np.empty(CHECKPOINTS))  # fmt: skip
    kept, checkpoints, steps, status = 0, 0, 0, BUDGET
    log_elapsed, time_left = -np.inf, np.inf
    with np.errstate(all="ignore"):
        base = np.log(np.sum(np.abs(np.prod(theta, axis=0))))
        checkpoints = _checkpoint(theta, tau, base, check, checkpoints)
        while steps < max_steps:
            f, _ = rescaled_field(theta, features, loss)
            point = theta - rho * np.sign(f)
            f, log_c = rescaled_field(point, features, loss)
            dtau = h * np.sqrt(np.sum(theta * theta) / np.sum(f * f))
            if not (np.isfinite(dtau) and dtau > 0 and np.isfinite(log_c)):
                status = RANGE
                break
            ds = dtau * np.exp(-log_c) if original else dtau
            last = ds >= s_end - s
            fraction = (s_end - s) / ds if last else 1.0
            while kept < len(grid) and grid[kept] <= s + fraction * ds:
                x = (grid[kept] - s) / ds
                kept_theta[kept] = theta + x * dtau * f
                kept_tau[kept] = tau + x * dtau
                kept_log[kept] = np.logaddexp(log_elapsed, np.log(x * dtau) - log_c)
                kept += 1
            theta = theta + fraction * dtau * f
            tau += fraction * dtau
            s = s_end if last else s + ds
            log_elapsed = np.logaddexp(log_elapsed, np.log(fraction * dtau) - log_c)
            steps += 1
            if last:
                status = END
                break
            before = checkpoints
            checkpoints = _checkpoint(theta, tau, base, check, checkpoints)
            if checkpoints > before >= 1 and depth >= 3:
                time_left = _time_left(check, checkpoints, depth)
                if time_left < blowup_tol * max(1.0, tau):
                    status = BLOWUP
                    break
    return Steps(status, steps, theta, s, tau, log_elapsed, time_left, kept, kept_theta,
                 kept_tau, kept_log, checkpoints, *check)  # fmt: skip


def _checkpoint(theta: np.ndarray, tau: float, base: float, check: tuple, count: int) -> int:
    """Keep ``theta`` as checkpoint ``k`` for every ``k >= count`` with ``log ||beta||_1 >=
    base + k CHECKPOINT_SPACING`` (up to the capacity); the number kept."""
    log_size, direction, taus, log_norm = check
    beta = np.prod(theta, axis=0)
    size = np.log(np.sum(np.abs(beta)))
    while count < CHECKPOINTS and size >= base + count * CHECKPOINT_SPACING:
        log_size[count], direction[count] = size, beta / np.exp(size)
        taus[count], log_norm[count] = tau, 0.5 * np.log(np.sum(theta * theta))
        count += 1
    return count


def _time_left(check: tuple, count: int, depth: int) -> float:
    """``tau* - tau`` at the last checkpoint from the last two (the module docstring)."""
    _, _, taus, log_norm = check
    q = np.exp(-(depth - 2) * (log_norm[count - 1] - log_norm[count - 2]))  # q / q_c
    if not q < 1.0:  # two checkpoints of one step
        return np.inf
    return float(q * (taus[count - 1] - taus[count - 2]) / (1.0 - q))
