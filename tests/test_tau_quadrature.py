"""``tau`` of original-clock regression runs (the squared loss) by quadrature along the steps
(:mod:`flows.integrator.retime`), against an independent computation.

The reference integrates the flow in the plain coordinates ``(u, v)`` of a depth-2 network
with scipy's DOP853 at rtol 1e-13 on a hand-written field (the state only: it is smooth), then
integrates ``c = mean_i |r_i|`` (``r`` the residuals at the perturbed point) with
``scipy.integrate.quad`` on the pieces between the roots of every residual (found by ``brentq``
on the reference's dense output). ``tau`` agrees to 1e-9 of its final value on both backends,
for GD and l2-SAM, from a balanced init (log chart) and an unbalanced one (asinh chart); a
loss-floor event is located in ``t`` as the reference locates it and reports ``tau`` there. In
the rescaled clock ``tau`` is the clock itself, and classification's ``c`` is smooth: there
``tau`` stays in the solver's state (checked against the same reference on logistic data).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import quad, solve_ivp
from scipy.optimize import brentq
from scipy.special import expit

import flows.integrator.retime as retime_module
from flows import Dataset, simulate
from flows.algorithms import get_algorithm, resolve_hyperparameters
from flows.charts import LogChart
from flows.clocks import get_clock
from flows.field import Problem
from flows.fused import FusedField
from flows.model import LOSSES

N, D, T_MAX, RHO = 20, 40, 30.0, 0.05


def regression_data() -> Dataset:
    rng = np.random.default_rng(7)
    X = rng.standard_normal((N, D))
    y = X[:, :3].sum(axis=1) + 0.3 * rng.standard_normal(N)
    return Dataset(X, y, task="regression")


def reference(data: Dataset, u0: np.ndarray, v0: np.ndarray, rho: float, loss: str):
    """The dense reference path of ``(u, v)`` and ``c(t)`` at the perturbed point."""
    X, n, d = data.X, data.n, data.d
    target = data.y if loss == "squared" else None
    Z = X * data.y[:, None] if loss == "logistic" else X

    def weights(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``l'(u_i)`` per example (residuals, or ``-sigmoid(-m)``)."""
        m = Z @ (u * v)
        return m - target if loss == "squared" else -expit(-m)

    def perturbed(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        u, v = w[:d], w[d:]
        if rho == 0:
            return u, v
        g = weights(u, v) @ Z / n
        grad = np.concatenate([g * v, g * u])
        step = rho * grad / np.linalg.norm(grad)
        return u + step[:d], v + step[d:]

    def rhs(_t: float, w: np.ndarray) -> np.ndarray:
        pu, pv = perturbed(w)
        g = weights(pu, pv) @ Z / n
        return -np.concatenate([g * pv, g * pu])

    sol = solve_ivp(rhs, (0.0, T_MAX), np.concatenate([u0, v0]), method="DOP853",
                    rtol=1e-13, atol=1e-15, dense_output=True)  # fmt: skip
    assert sol.status == 0

    def per_example(t: float) -> np.ndarray:
        return weights(*perturbed(sol.sol(t)))

    return sol, per_example


def reference_tau(per_example, times: np.ndarray) -> np.ndarray:
    """``int_0^t mean|l'(u_i)| dt'`` at ``times``, piecewise between the residuals' roots."""
    fine = np.linspace(0.0, times[-1], 40 * len(times))
    values = np.array([per_example(t) for t in fine])
    breaks = [0.0, times[-1], *times]
    for i in range(values.shape[1]):
        for k in np.flatnonzero(np.sign(values[1:, i]) != np.sign(values[:-1, i])):
            breaks.append(
                brentq(lambda t, i=i: per_example(t)[i], fine[k], fine[k + 1], xtol=1e-15)
            )
    breaks = np.unique(breaks)

    def c(t: float) -> float:
        return float(np.mean(np.abs(per_example(t))))

    pieces = [quad(c, a, b, epsabs=1e-15, epsrel=1e-13, limit=200)[0]
              for a, b in zip(breaks[:-1], breaks[1:], strict=True)]  # fmt: skip
    cumulative = np.concatenate([[0.0], np.cumsum(pieces)])
    return cumulative[np.searchsorted(breaks, times)]


@pytest.mark.parametrize("backend", ["numba", "numpy"])
@pytest.mark.parametrize(("algorithm", "balanced"), [("gd", True), ("gd", False), ("l2-sam", True)])
def test_tau_against_the_reference(backend: str, algorithm: str, balanced: bool) -> None:
    data = regression_data()
    u0 = np.full(D, 0.1)
    v0 = u0.copy() if balanced else np.full(D, 0.03)
    rho = RHO if algorithm == "l2-sam" else 0.0
    traj = simulate(data, algorithm, 2, np.stack([u0, v0]), t_max=T_MAX, n_points=31,
                    backend=backend, **({"rho": rho} if rho else {}))  # fmt: skip
    assert traj.status == 0, traj.message
    _, per_example = reference(data, u0, v0, rho, "squared")
    want = reference_tau(per_example, traj.t)
    signs = np.sign(np.array([per_example(t) for t in traj.t]))
    assert np.any(signs[1:] != signs[:-1]), "the residuals must change sign (kinks of c)"
    np.testing.assert_allclose(traj.tau, want, rtol=0, atol=1e-9 * want[-1])


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_a_loss_floor_event_in_tau(backend: str) -> None:
    """The run stops where the loss falls to the floor: at the reference's time of it, and
    with the reference's ``tau`` there in the event and in the path."""
    data = regression_data()
    u0 = np.full(D, 0.1)
    _, per_example = reference(data, u0, u0, 0.0, "squared")

    def loss(t: float) -> float:
        return float(np.mean(per_example(t) ** 2) / 2.0)

    floor = loss(0.6 * T_MAX)
    traj = simulate(data, "gd", 2, 0.1, t_max=T_MAX, n_points=31, loss_floor=floor,
                    backend=backend)  # fmt: skip
    assert traj.events[-1].kind == "loss floor", traj.message
    t_hit = brentq(lambda t: loss(t) - floor, 0.3 * T_MAX, 0.9 * T_MAX, xtol=1e-14)
    assert traj.t[-1] == pytest.approx(t_hit, rel=1e-8)
    want = reference_tau(per_example, np.array([0.0, t_hit]))[-1]
    assert traj.events[-1].tau == pytest.approx(want, rel=1e-9)
    assert traj.tau[-1] == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_classification_tau_in_the_state(backend: str) -> None:
    """Logistic loss (``c`` smooth), original clock: ``tau`` from the solver's state."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((N, 5))
    data = Dataset(X, np.sign(X @ np.abs(rng.standard_normal(5))))
    traj = simulate(data, "gd", 2, 0.1, t_max=T_MAX, n_points=31, clock="original",
                    backend=backend)  # fmt: skip
    assert traj.status == 0, traj.message
    _, per_example = reference(data, np.full(5, 0.1), np.full(5, 0.1), 0.0, "logistic")
    want = reference_tau(per_example, traj.t)
    np.testing.assert_allclose(traj.tau, want, rtol=0, atol=1e-9 * want[-1])


def test_tau_in_blocks_of_steps_equals_one_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """The quadrature in blocks of one step each (the memory bound of a long segment) gives
    the ``tau`` of one block for every step (the fast path), to rounding."""
    data = regression_data()
    kw = dict(t_max=T_MAX, n_points=31, rho=RHO)
    one = simulate(data, "l2-sam", 2, 0.1, **kw)
    assert retime_module.steps_per_block((2, D), N) > one.nfev  # every step in one block
    monkeypatch.setattr(retime_module, "BLOCK_FLOATS", 1)
    assert retime_module.steps_per_block((2, D), N) == 1
    blocks = simulate(data, "l2-sam", 2, 0.1, **kw)
    assert blocks.status == one.status == 0 and blocks.nfev == one.nfev
    np.testing.assert_allclose(blocks.tau, one.tau, rtol=1e-13, atol=0)
    np.testing.assert_array_equal(blocks.log_abs_beta, one.log_abs_beta)


@pytest.mark.parametrize("algorithm", ["gd", "l2-sam", "usam"])
@pytest.mark.parametrize("mult", [[2], [1, 1], [3]])
def test_float_point_equals_the_signed_log_perturbed_point(algorithm: str, mult) -> None:
    """The nodes' perturbed points in floats (``FusedField.float_point``) equal the signed-log
    field's ``perturbed_point`` at a batch of points from 1e-2 to 1e1, each at its own clock
    time, to 1e-12 of the largest entry; past the float range a perturbing algorithm has no
    float point (GD's point is the parameters themselves)."""
    data = regression_data()
    shape = (len(mult), D)
    problem = Problem(data, get_algorithm(algorithm),
                      resolve_hyperparameters(algorithm, dict(rho=0.2)), LOSSES["squared"],
                      np.array(mult), get_clock("original"), LogChart(np.ones(shape)))  # fmt: skip
    fused = FusedField(problem)
    rng = np.random.default_rng(5)
    log_abs = rng.uniform(-4.0, 2.0, (4,) + shape)
    sign = np.where(rng.random((4,) + shape) < 0.5, -1.0, 1.0)
    times = np.array([0.0, 1.0, 2.0, 3.0])
    point = fused.float_point(sign * np.exp(log_abs), None, times)
    want = fused.perturbed_point(sign, log_abs, None, times)
    assert point is not None
    expected = want.sign * np.exp(want.log_abs)
    np.testing.assert_allclose(point, expected, rtol=0, atol=1e-12 * np.max(np.abs(expected)))
    huge = sign * np.exp(log_abs + 200.0 / sum(mult))  # |beta| ~ e^200: outside FLOAT_RANGE
    unperturbed = fused.float_point(huge, None, times)
    assert unperturbed is huge if algorithm == "gd" else unperturbed is None
