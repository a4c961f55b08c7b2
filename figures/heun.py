"""Fallback integrator for l_inf-SAM on multi-sample data (task kind ``'heun_flow'``), and the
runs of figures 6 and 7 that use it (:func:`multi_sample_tasks`).

On multi-sample data the l_inf-SAM field ``-grad L(theta + rho sign(grad L(theta)))`` also jumps
on the surfaces ``d L / d w_j = 0`` with ``w_j != 0`` (where ``G_j(theta)`` changes sign), not
only at ``w_j = 0``. :func:`flows.simulate` locates only the second kind; when the flow reaches a
Filippov sliding mode on the first kind, DOP853 shrinks its step without end and the run
stalls. Minimal reproducer (t_max = 3 takes 0.2 s; t_max = 5 does not finish in 60 s)::

    simulate(Dataset(np.array([[1.0, 2.0], [-0.3, 1.5]]), np.array([1.0, 1.0])), "linf-sam",
             depth=2, alpha=np.array([1.5, 0.8]), rho=1.0, t_max=5.0, original_time=False)

(``w_2`` slides at 0 from tau = 1.009; then ``beta_1 = w_1^2`` climbs to 1.4955, the minimiser of
the loss along ``e_1``, where ``G_1(theta)`` changes sign: an attracting sliding surface.)
For the l_inf-SAM runs at L = 2 on multi-sample data the figures therefore use
:func:`heun_flow`: an explicit Heun scheme with an error-controlled step bounded below by
``h_min``; at a discontinuity the step sits at ``h_min`` and the iterate chatters
across the surface with an ``O(h_min)`` amplitude (a standard approximation of the Filippov
solution). It evaluates the engine's own field (:func:`flows.field.rescaled_velocity`), in
float64 (fine here: ``|beta| < 1e4``). Checked against :func:`flows.simulate` where both run
(GD and l_inf-SAM with rho = 0.02 on the fig6 data, L = 2, tau = 8: angles agree to 1e-3 deg).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from flows.algorithms import get_algorithm, resolve_hyperparameters
from flows.cache import Result, Task, dataset_from, register
from flows.clocks import get_clock
from flows.field import Problem, rescaled_velocity
from flows.initialization import initialization
from flows.model import LOSSES
from flows.signedlog import SignedLog

from .compared import ALGORITHMS, rho_entry

#: ``{quick: {depth: (t_max, n_points)}}``: the horizon of a figure's runs
Horizons = dict[bool, dict[int, tuple[float, int]]]


def multi_sample_tasks(
    X: np.ndarray,
    y: np.ndarray,
    depths: tuple[int, ...],
    alpha,
    rho: float,
    horizons: Horizons,
    quick: bool,
) -> list[Task]:
    """GD / l2-SAM / l_inf-SAM on data ``(X, y)`` for each depth (depth-major), over
    ``horizons[quick][depth]``; l_inf-SAM at L >= 2 runs on the Heun fallback (module doc), the
    others on :func:`flows.simulate`."""
    out = []
    for depth in depths:
        t_max, n = horizons[quick][depth]
        for alg in ALGORITHMS:
            params = {
                "X": X.tolist(),
                "y": y.tolist(),
                "algorithm": alg,
                "depth": depth,
                "alpha": alpha,
                **rho_entry(alg, rho),
                "t_max": t_max,
                "n_points": n,
            }
            if alg == "linf-sam" and depth >= 2:
                out.append(Task("heun_flow", params))
            else:
                out.append(Task("simulate", {**params, "original_time": False, "rtol": 1e-8}))
    return out


def heun_flow(params: dict) -> Result:
    """Rescaled-clock flow by an explicit Heun scheme with a step floor ``h_min`` (module doc).

    Parameters (a Task dict): ``X``/``y`` or ``mu``; ``algorithm``, ``depth``, ``alpha``,
    ``rho``, ``t_max``, ``n_points`` as for :func:`flows.simulate`; ``rtol`` (default 1e-4),
    ``h_min`` (1e-3), ``h_max`` (0.05). Returns the keys of a ``'simulate'`` result plus
    ``nfev`` and ``floor_steps`` (steps accepted at ``h_min`` with the error test failed: the
    chattering count).
    """
    data, rest = dataset_from(params)
    algorithm = rest["algorithm"]
    depth = int(rest["depth"])
    rtol = float(rest.get("rtol", 1e-4))
    h_min, h_max = float(rest.get("h_min", 1e-3)), float(rest.get("h_max", 0.05))
    t_max, n_points = float(rest["t_max"]), int(rest["n_points"])
    hp = resolve_hyperparameters(algorithm, {"rho": rest.get("rho")})
    init = initialization(np.asarray(rest.get("alpha", 1.0), dtype=float), depth, data.d)
    problem = Problem(
        data,
        get_algorithm(algorithm),
        hp,
        LOSSES["logistic"],
        init.multiplicity,
        get_clock("rescaled"),
        1.0,
    )

    def field(theta: np.ndarray) -> np.ndarray:
        return rescaled_velocity(SignedLog.from_float(theta), problem).dtheta.to_float()

    run = _heun_steps(
        field, init.groups.astype(float), np.linspace(0.0, t_max, n_points), rtol, h_min, h_max
    )
    return _simulate_like(run, init.multiplicity, data.signed_features)


def heun_flow_cost(params: dict) -> float:
    """Rough seconds: ~1e-4 s a step at the floor ``h_min``, more with more examples."""
    steps = float(params["t_max"]) / float(params.get("h_min", 1e-3))
    return 1e-4 * steps * (1.0 + len(params.get("y", ())) / 20.0)


register("heun_flow", heun_flow, cost=heun_flow_cost)


class _HeunRun(NamedTuple):
    """The states on the grid times reached, and how the run went."""

    tau: np.ndarray
    states: np.ndarray
    nfev: int
    floor_steps: int
    status: int
    message: str


def _heun_steps(
    field: Callable[[np.ndarray], np.ndarray],
    theta: np.ndarray,
    grid: np.ndarray,
    rtol: float,
    h_min: float,
    h_max: float,
) -> _HeunRun:
    """Heun steps from ``theta`` at ``tau = 0`` to ``grid[-1]``, the states interpolated
    linearly at the ``grid`` times; stops at a non-finite state (``status = -1``)."""
    n_points = grid.size
    states = np.empty((n_points,) + theta.shape)
    states[0] = theta
    tau, h, k, nfev, floor_steps = 0.0, h_min, 1, 1, 0
    f0 = field(theta)
    status, message = 0, "reached t_max"
    while k < n_points:
        h = min(h, grid[k] - tau) if grid[k] - tau > 1e-14 else h
        euler = theta + h * f0
        f1 = field(euler)
        heun = theta + 0.5 * h * (f0 + f1)
        nfev += 1
        scale = rtol * (0.5 * (np.abs(theta) + np.abs(heun)) + 1e-3)
        err = float(np.max(np.abs(heun - euler) / scale))
        if not np.all(np.isfinite(heun)):
            status, message = -1, f"non-finite state at tau={tau:.6g}"
            break
        if err <= 1.0 or h <= h_min * (1 + 1e-9):
            floor_steps += err > 1.0
            previous, tau_prev = theta, tau
            theta, tau = heun, tau + h
            f0 = field(theta)
            nfev += 1
            while k < n_points and grid[k] <= tau + 1e-12:
                w = (grid[k] - tau_prev) / (tau - tau_prev)
                states[k] = (1 - w) * previous + w * theta
                k += 1
            h *= min(2.0, max(0.2, 0.9 / np.sqrt(max(err, 1e-12))))
        else:
            h *= max(0.2, 0.9 / np.sqrt(err))
        h = min(max(h, h_min), h_max)
    return _HeunRun(grid[:k], states[:k], nfev, floor_steps, status, message)


def _simulate_like(run: _HeunRun, multiplicity: np.ndarray, signed: np.ndarray) -> Result:
    """The run as a ``'simulate'`` result (beta, logistic loss, no events), plus ``nfev`` and
    ``floor_steps``."""
    beta = np.prod(run.states ** multiplicity[None, :, None], axis=1)
    with np.errstate(divide="ignore"):
        log_abs_beta = np.log(np.abs(beta))
    loss = np.mean(np.logaddexp(0.0, -(beta @ signed.T)), axis=1)
    grid = run.tau
    return {
        "t": grid,
        "tau": grid.copy(),
        "log_t_original": np.full(grid.shape, np.nan),
        "loss": loss,
        "log_abs_beta": log_abs_beta,
        "sign_beta": np.sign(beta),
        "status": np.array(run.status),
        "message": np.array(run.message),
        "event_tau": np.zeros(0),
        "event_kind": np.zeros(0, dtype=str),
        "event_j": np.zeros(0, dtype=int),
        "nfev": np.array(run.nfev),
        "floor_steps": np.array(run.floor_steps),
    }
