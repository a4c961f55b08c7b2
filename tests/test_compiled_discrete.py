"""The compiled loop of ``iterate`` (flows.compiled.discrete) against numpy's steps.

The numpy loop (``backend="numpy"``) is the general path: every step through the fused field,
in signed-log arithmetic where floats would over- or underflow. The compiled loop must give the
same iterates to rounding wherever it runs, hand every other step back to numpy, and stop where
numpy stops, with the same message. The runs compared are ones where rounding differences stay
at rounding (l2-SAM and LE-SAM in regression amplify a 1e-16 difference by ~2 per step once they
bounce around the interpolators, so those runs are kept short).
"""

from __future__ import annotations

import numpy as np
import pytest

from flows import iterate, single_example
from flows.algorithms import ALGORITHMS
from flows.compiled import steps_compiled
from flows.datasets import gaussian_blobs, sparse_regression
from flows.results import Cause
from flows.schedules import cosine

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
numba = pytest.importorskip("numba")

COMPILED = sorted(name for name, a in ALGORITHMS.items() if steps_compiled(a))
#: Hyper-parameters of each compiled algorithm in the runs below.
HP = {
    "gd": {},
    "l2-sam": {"rho": 0.05},
    "linf-sam": {"rho": 0.01},
    "usam": {"rho": 0.1},
    "le-sam": {"sigma": 0.1, "rho_max": 0.1},
    "1-sam": {"rho": 0.05},
    "1-usam": {"rho": 0.2},
    "asam": {"rho": 0.05},
    "le-sam-official": {"sigma": 0.1, "rho_max": 0.1, "adaptive": True},
}
REGRESSION = sparse_regression().train
BLOBS = gaussian_blobs()
V_ZERO = np.array([[0.1] * REGRESSION.d, [0.0] * REGRESSION.d])


def _both(data, algorithm, depth, alpha, **kwargs):
    fast = iterate(data, algorithm, depth, alpha, backend="auto", **kwargs, **HP[algorithm])
    slow = iterate(data, algorithm, depth, alpha, backend="numpy", **kwargs, **HP[algorithm])
    return fast, slow


def _assert_same(fast, slow, rtol=1e-11):
    np.testing.assert_array_equal(fast.steps, slow.steps)
    assert (fast.status, fast.cause, fast.message) == (slow.status, slow.cause, slow.message)
    scale = np.max(np.abs(slow.theta), axis=(1, 2), keepdims=True)
    assert np.max(np.abs(fast.theta - slow.theta) / scale) < rtol


def test_every_compiled_algorithm_has_a_hyperparameter_set_here():
    assert set(HP) == set(COMPILED)


@pytest.mark.parametrize("optimizer", [{}, {"momentum": 0.9, "weight_decay": 1e-3}])
@pytest.mark.parametrize("algorithm", COMPILED)
def test_compiled_steps_equal_numpy_steps_in_regression(algorithm, optimizer):
    """Claim: from u = 0.1, v = 0 (the zeros stay exact until the first step) on the sparse
    regression, 80 steps of the compiled loop are numpy's to 1e-11, with SGD momentum and
    weight decay too, recorded at every 7th step and the last."""
    fast, slow = _both(REGRESSION, algorithm, 2, V_ZERO, eta=0.3, steps=80, record_every=7,
                       **optimizer)  # fmt: skip
    assert fast.backend == "numba" and slow.backend == "numpy"
    assert fast.steps[-1] == 80 and fast.steps[1] == 7
    _assert_same(fast, slow)


@pytest.mark.parametrize("algorithm", COMPILED)
def test_compiled_steps_equal_numpy_steps_on_blobs_at_depth_3(algorithm):
    """Claim: the same on the logistic loss, 40 examples, three layers, 600 steps."""
    _assert_same(*_both(BLOBS, algorithm, 3, 0.5, eta=0.1, steps=600, record_every=50))


def test_compiled_loop_records_past_its_buffer():
    """Claim: a run that records more iterates than one compiled call holds (every step of
    2,500) is recorded in full and equals numpy's."""
    from flows.compiled.discrete import CAPACITY

    steps = 2 * CAPACITY + 452
    fast, slow = _both(single_example([1.0, 2.0]), "usam", 2, 0.3, eta=0.01, steps=steps)
    assert fast.steps.tolist() == list(range(steps + 1))
    _assert_same(fast, slow)


def test_steps_outside_the_float_range_are_numpy_steps():
    """Claim: from alpha = 1e-80 (|w|^2 = 1e-160, outside the compiled float path) GD's steps
    are numpy's until the iterates grow into it; the whole run equals numpy's."""
    data = single_example([1.0, 2.0])
    fast, slow = _both(data, "gd", 2, 1e-80, eta=0.5, steps=400, record_every=20)
    _assert_same(fast, slow)
    assert fast.theta[-1].max() > 1e-40  # it did grow into the range


def test_compiled_loop_stops_where_numpy_stops():
    """Claim: where an iterate overflows (GD on the exponential loss overshooting to a loss of
    e^973 at step 2) both loops stop at the same step with the same message and iterates."""
    data = single_example([1.0])
    kwargs = {"eta": 1.0, "steps": 10, "record_every": 5, "loss": "exponential"}
    fast, slow = _both(data, "gd", 2, np.array([[1.0], [-1.0]]), **kwargs)
    assert fast.cause is Cause.OVERFLOW and "step 2" in fast.message
    _assert_same(fast, slow, rtol=1e-14)


def test_backend_numba_refuses_what_it_cannot_compile():
    """Claim: backend='numba' names the backend where the compiled loop does not apply (a
    step size on a schedule); 'auto' then runs numpy's steps."""
    data = single_example([1.0, 2.0])
    with pytest.raises(ValueError, match="backend 'numba'"):
        iterate(data, "gd", 2, 0.5, eta=cosine(0.1, 10.0), steps=5, backend="numba")
    assert iterate(data, "gd", 2, 0.5, eta=cosine(0.1, 10.0), steps=5).backend == "numpy"
    with pytest.raises(ValueError, match="backend"):
        iterate(data, "gd", 2, 0.5, eta=0.1, steps=5, backend="fortran")


def _steps_by_hand(algorithm: str, rho: float, eta: float, steps: int) -> np.ndarray:
    """The runs below written out for ``beta = u * v`` and the squared loss
    ``L = (1/n) sum_i r_i^2 / 2``: ``grad_u l_i = r_i x_i v``, ``grad_v l_i = r_i x_i u``; USAM
    ascends by ``rho grad L``, 1-USAM by ``rho grad l_i`` for example ``i`` and averages."""
    X, y = REGRESSION.X, REGRESSION.y
    u, v = V_ZERO[0].copy(), V_ZERO[1].copy()
    for _ in range(steps):
        r = X @ (u * v) - y
        examples_u, examples_v = r[:, None] * X * v, r[:, None] * X * u  # grad l_i, (n, d)
        if algorithm == "gd":
            pu, pv = u, v
        elif algorithm == "usam":
            pu, pv = u + rho * examples_u.mean(0), v + rho * examples_v.mean(0)
        else:
            pu, pv = u + rho * examples_u, v + rho * examples_v  # one point per example
        pu, pv = np.broadcast_to(pu, X.shape), np.broadcast_to(pv, X.shape)
        rp = np.sum(X * pu * pv, axis=1) - y
        u, v = (
            u - eta * np.mean(rp[:, None] * X * pv, 0),
            v - eta * np.mean(rp[:, None] * X * pu, 0),
        )
    return np.vstack([u, v])


@pytest.mark.parametrize("algorithm", ["gd", "usam", "1-usam"])
def test_compiled_steps_equal_the_steps_written_out(algorithm):
    """Claim: GD, USAM and 1-USAM in the compiled loop are the update rules themselves, written
    out by hand for two layers and the squared loss (no flows code), to 1e-12 after 300 steps."""
    rho = HP[algorithm].get("rho", 0.0)
    run = iterate(REGRESSION, algorithm, 2, V_ZERO, eta=0.3, steps=300, record_every=300,
                  backend="numba", **HP[algorithm])  # fmt: skip
    hand = _steps_by_hand(algorithm, rho, 0.3, 300)
    assert np.max(np.abs(run.theta[-1] - hand)) < 1e-12 * np.max(np.abs(hand))
