"""Limit directions of flows: estimates from trajectories and the l_inf-SAM prediction.

* :func:`final_direction` — ``beta / ||beta||_2`` at the end of a run, with diagnostics of how
  far it still moves, whether ``beta`` collapsed to 0 and whether it diverges.
* :func:`angle_series` — angle to a reference direction over time.
* :func:`predict_linf_limit` — Cor 3.5 (docs/theory.md §14): which basis vector ``e_{j*}`` l_inf-SAM
  selects on the single example ``D_mu`` from a balanced initialization, or None.
* :func:`observed_linf_limit` — the same read off a simulated trajectory.

Coordinates are 0-based throughout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flows.checks import integer, real, real_array
from flows.results import BLOWUP, Trajectory

from ._checks import trajectory
from .maxmargin import angle

__all__ = [
    "LimitEstimate",
    "angle_series",
    "final_direction",
    "linf_limit_scores",
    "observed_linf_limit",
    "predict_linf_limit",
    "predict_linf_limits",
]


@dataclass(frozen=True, eq=False)
class LimitEstimate:
    """The direction at the end of a trajectory and how trustworthy it is as a limit.

    Attributes
    ----------
    direction : (d,) ``beta / ||beta||_2`` at the last sample (zeros if ``beta = 0``).
    t_end, tau_end : last sample time (trajectory's clock) and rescaled time.
    movement : largest angle (radians) between ``direction`` and the directions sampled in the
        last ``window`` fraction of the run (``[t_end - window (t_end - t_0), t_end]``), samples
        with ``beta = 0`` ignored; ``nan`` if ``beta = 0`` at the end. Small = settled (but a
        slowly rotating direction, e.g. ``O(1 / log t)`` in the original clock, can look settled
        on a short window).
    growth : increase of ``max_j log|beta_j|`` over that window (``nan`` if undefined).
    collapsed : ``beta`` is exactly 0 at the end, or the run has a 'collapse' event.
    diverged : the run ended in a finite-time blow-up (status 1), or ``max_j log|beta_j|``
        rose by more than ``growth_tol`` over the window and was still rising in its second half
        at at least a quarter of the window's mean rate (a heuristic; see :func:`final_direction`).
    status : the trajectory's status.
    """

    direction: np.ndarray
    t_end: float
    tau_end: float
    movement: float
    growth: float
    collapsed: bool
    diverged: bool
    status: int

    def angle_to(self, reference) -> float:
        """Angle (radians) between the final direction and ``reference`` (``nan`` if either is 0)."""
        return angle(self.direction, reference)

    @property
    def leader(self) -> int | None:
        """``argmax_j |direction_j|`` (None if ``beta = 0``)."""
        if not np.any(self.direction):
            return None
        return int(np.argmax(np.abs(self.direction)))


def _check_window(window) -> float:
    try:
        return real(window, "window", low=0.0, low_open=True, high=1.0)
    except ValueError:
        raise ValueError(f"window must be a number in (0, 1], got {window!r}") from None


def angle_series(traj: Trajectory, reference) -> np.ndarray:
    """Angle (radians) between ``beta(t)`` and ``reference`` at every sample (T,).

    ``nan`` where ``beta = 0``. Uses ``traj.direction`` (computed in log space), so it is valid
    beyond float64. ``ValueError`` naming 'traj' or 'reference' for bad input.
    """
    traj = trajectory(traj)
    ref = real_array(reference, "reference", ndim=1)
    dirs = traj.direction
    if ref.shape[0] != dirs.shape[1]:
        raise ValueError(f"reference must have length d = {dirs.shape[1]}, got {ref.shape[0]}")
    return np.array([angle(u, ref) for u in dirs])


def final_direction(
    traj: Trajectory, window: float = 0.2, growth_tol: float = 5e-2
) -> LimitEstimate:
    """Estimate the limit direction of ``traj`` by its final direction, with diagnostics.

    Parameters
    ----------
    traj : a simulated :class:`flows.Trajectory`.
    window : fraction (in ``(0, 1]``) of the run, measured in the trajectory's own clock
        ``traj.t``, over which ``movement`` and ``growth`` are measured.
    growth_tol : minimum rise of ``max_j log|beta_j|`` over the window to call it diverging
        (``5e-2``: the largest ``|beta_j|`` grew by at least ~5 %).

    ``diverged`` is a heuristic and cannot be more: from a finite window, slow divergence and
    slow convergence look alike. In the rescaled clock the paper's L >= 2 flows grow like
    ``exp(c tau)`` or blow up (status 1), far above the threshold; but an algebraic approach
    to a bound (l_inf-SAM, odd L, ``alpha_j < rho``: ``beta_j -> rho^L`` with a deficit
    ``~ 1 / tau``) rises by ``~ 0.25 c / T`` over the window, and logarithmic divergence
    (L = 1 in the rescaled clock: ``log beta ~ log tau``, rise ``log 1.25`` for window 0.2;
    any flow in the original clock: ``log beta ~ log log t``, rise ``~ 0.22 / log T``) can fall
    below it. Read ``growth`` (and run longer) in those cases.
    """
    traj = trajectory(traj)
    window = _check_window(window)
    growth_tol = real(growth_tol, "growth_tol", low=0.0)
    t = np.asarray(traj.t, dtype=float)
    dirs = traj.direction
    final = dirs[-1]
    beta_zero = ~np.any(traj.sign_beta != 0, axis=1)
    collapsed = bool(beta_zero[-1]) or traj.collapse_time is not None
    start = t[-1] - window * (t[-1] - t[0])
    in_window = np.flatnonzero(t >= start)
    if in_window.size < 2 and t.size >= 2:
        in_window = np.arange(t.size - 2, t.size)
    alive = in_window[~beta_zero[in_window]]
    if beta_zero[-1] or alive.size == 0:
        movement = float("nan")
    else:
        movement = float(np.nanmax([angle(final, dirs[k]) for k in alive]))
    top = np.max(traj.log_abs_beta, axis=1)
    k0, k1 = in_window[0], in_window[-1]
    kmid = in_window[len(in_window) // 2]
    with np.errstate(invalid="ignore"):
        growth = float(top[k1] - top[k0])
        late = float(top[k1] - top[kmid])
        frac_late = (t[k1] - t[kmid]) / (t[k1] - t[k0]) if t[k1] > t[k0] else 0.0
    diverged = traj.status == BLOWUP or bool(
        not collapsed
        and np.isfinite(growth)
        and growth > growth_tol
        and np.isfinite(late)
        and late >= 0.25 * frac_late * growth
    )
    return LimitEstimate(
        direction=final,
        t_end=float(t[-1]),
        tau_end=float(traj.tau[-1]),
        movement=movement,
        growth=growth,
        collapsed=collapsed,
        diverged=bool(diverged),
        status=int(traj.status),
    )


# --------------------------------------------------------------------------- Cor 3.5


def _check_linf_inputs(mu, alpha, rho, depth):
    mu = real_array(mu, "mu", ndim=1)
    if np.any(mu <= 0):
        raise ValueError("mu must be > 0 entrywise (the setting of Cor 3.5: 0 < mu_1 < ... < mu_d)")
    alpha = real_array(alpha, "alpha")
    if alpha.ndim == 0:
        alpha = np.full(mu.shape, float(alpha))
    if alpha.shape[-1:] != mu.shape:
        raise ValueError(
            f"alpha must be a scalar or have the shape of mu {mu.shape} (or a stack of such, "
            f"(..., d)), got {alpha.shape} (Cor 3.5 is for balanced initializations)"
        )
    if np.any(alpha <= 0):
        raise ValueError("alpha must be > 0")
    try:
        rho = real(rho, "rho", low=0.0)
    except ValueError:
        raise ValueError(f"rho must be a finite number >= 0, got {rho!r}") from None
    depth = integer(depth, "depth", 1, 2**53)
    if depth == 1:
        raise ValueError(
            "depth must be >= 2 for Cor 3.5; for L = 1 Thm 3.1 applies instead "
            "(l_inf-SAM converges to the l2 max-margin direction)"
        )
    return mu, alpha, rho, depth


def linf_limit_scores(mu, alpha, rho, depth: int) -> np.ndarray:
    """``log(mu_j (alpha_j - rho)^(L-2))`` for ``alpha_j > rho``, ``-inf`` otherwise: (d,), or
    (..., d) for a stack of initializations ``alpha`` (..., d).

    For ``L >= 3`` this is ``-log((L-2) tau_j)`` with ``tau_j = 1 / ((L-2) mu_j (alpha_j -
    rho)^(L-2))`` the blow-up time of coordinate j (docs/theory.md §8): the largest score blows up first.
    For ``L = 2`` it is ``log mu_j``, the exponential growth rate ``a_j ~ e^{mu_j tau}``.
    """
    mu, alpha, rho, depth = _check_linf_inputs(mu, alpha, rho, depth)
    above = alpha > rho
    with np.errstate(divide="ignore", invalid="ignore"):
        scores = np.log(mu) + (depth - 2) * np.log(np.where(above, alpha - rho, 1.0))
    return np.where(above, scores, -np.inf)


def predict_linf_limit(mu, alpha, rho, depth: int, rtol: float = 1e-12) -> int | None:
    """Cor 3.5: the index ``j*`` of the limit direction ``e_{j*}`` of l_inf-SAM on ``D_mu``.

    Balanced initialization ``w^(l)(0) = alpha`` (scalar or (d,)), depth ``L >= 2``:
    ``j* = argmax_{j : alpha_j > rho} mu_j (alpha_j - rho)^(L-2)`` (0-based); for ``L = 2`` this
    is ``argmax mu_j`` over ``alpha_j > rho``. Returns None when no ``alpha_j > rho``: then no
    coordinate diverges (Thm 3.2: ``beta_j -> 0`` for even L, ``-> rho^L`` for odd L,
    ``beta_j = rho^L`` if ``alpha_j = rho``) and there is no limit *direction* in the
    divergent sense.

    For ``L >= 3`` each ``alpha_j > rho`` blows up at a finite rescaled time
    ``tau_j = 1 / ((L-2) mu_j (alpha_j - rho)^(L-2))``; ``j*`` is also the coordinate that blows
    up *first* (smallest ``tau_j``), which is where the flow (and a simulated trajectory, status
    1) ends, with ``beta_{j*} = inf`` and the other coordinates finite.

    Ties (scores equal to relative ``rtol``): the *largest* index among them is returned, by
    convention. In a tie the limit direction is in fact *not* a basis vector: for L = 2 two
    coordinates with equal ``mu_j`` grow at the same rate (their ratio tends to
    ``((alpha_i - rho) / (alpha_j - rho))^2``); for L >= 3 they blow up simultaneously.

    Raises
    ------
    ValueError
        For L = 1 (Thm 3.1 applies instead) and for invalid ``mu`` (must be > 0), ``alpha``
        (> 0, scalar or shape of mu), ``rho`` (>= 0), ``depth`` or ``rtol`` (a number in
        ``[0, 1)``); the message names the parameter.
    """
    alpha = real_array(alpha, "alpha")
    if alpha.ndim > 1:
        raise ValueError(
            f"alpha must be a scalar or have the shape of mu, got {alpha.shape} "
            "(predict_linf_limits takes a stack of initializations)"
        )
    j = int(predict_linf_limits(mu, alpha, rho, depth, rtol))
    return None if j < 0 else j


def predict_linf_limits(mu, alpha, rho, depth: int, rtol: float = 1e-12) -> np.ndarray:
    """:func:`predict_linf_limit` for a stack of initializations ``alpha`` (..., d) at once:
    the index ``j*`` per initialization (int array of shape ``alpha.shape[:-1]``), ``-1`` where
    no ``alpha_j > rho`` (None there). Same rule, same ties (largest index), same errors.
    """
    rtol = real(rtol, "rtol", low=0.0, high=1.0, high_open=True)
    scores = linf_limit_scores(mu, alpha, rho, depth)
    best = np.max(scores, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        ties = scores >= best - rtol * np.maximum(1.0, np.abs(best))
    last_tie = scores.shape[-1] - 1 - np.argmax(ties[..., ::-1], axis=-1)
    return np.where(np.isfinite(best[..., 0]), last_tie, -1)


def observed_linf_limit(traj: Trajectory, log_bound: float | None = None) -> int | None:
    """The coordinate that dominates ``beta`` at the end of ``traj`` (0-based), or None.

    * status 1 (finite-time blow-up, L >= 3): ``argmax_j log|beta_j|`` at the blow-up, i.e. the
      coordinate that blew up first.
    * otherwise: ``argmax_j log|beta_j|`` at the last sample if ``max_j log|beta_j|`` exceeds
      ``log_bound``, else None ("beta stays bounded").

    ``log_bound`` defaults to ``log(10 max(alpha_max, rho)^L)`` with ``alpha_max`` the largest
    initial ``|w_j^(l)|`` and ``rho = traj.hyperparameters['rho']`` (0 if absent): by Thm 3.2 a
    coordinate with ``alpha_j <= rho`` stays in ``[0, max(alpha_j, rho)^L]`` for ever, so
    exceeding ten times that bound signals divergence. A divergent coordinate with ``alpha_j``
    barely above ``rho`` needs a long horizon to cross it (L = 2: ``a_j = rho + (alpha_j - rho)
    e^{mu_j tau}``); too short a run reports None. Ties at the end: largest index.
    ``log_bound`` may be any number but NaN (``ValueError`` naming it), ``+-inf`` included.
    """
    traj = trajectory(traj)
    if log_bound is not None:
        log_bound = real(log_bound, "log_bound", finite=False)
    log_beta = np.asarray(traj.log_abs_beta[-1], dtype=float)
    if np.all(np.isneginf(log_beta)) or np.all(traj.sign_beta[-1] == 0):
        return None
    top = np.max(log_beta)
    if traj.status != BLOWUP:
        if log_bound is None:
            rho = traj.hyperparameters.get("rho")
            rho = 0.0 if rho is None else real(rho, "traj.hyperparameters['rho']", low=0.0)
            log_alpha_max = float(np.max(traj.log_abs_theta[0]))
            log_bound = np.log(10.0) + traj.depth * max(
                log_alpha_max, np.log(rho) if rho > 0 else -np.inf
            )
        if not top > log_bound:
            return None
    return int(np.flatnonzero(log_beta == top)[-1])


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
