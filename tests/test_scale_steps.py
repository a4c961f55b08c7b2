"""``iterate``'s compiled loop on data of a few thousand entries.

The compiled loop computes each iterate's loss arguments once (for its range check) and keeps
them for the next gradient, its matrix-vector products in vectorised loops with reassociated
sums. Its iterates are held to the general path (``backend="numpy"``: the fused field, in
signed-log arithmetic outside the float range) and to a loop written by hand; across the
float-range boundary (a diverging run, a run growing into the range) it stops where the general
path stops.
"""

from __future__ import annotations

import numpy as np
import pytest

from flows import Dataset, iterate
from flows.results import Cause

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
numba = pytest.importorskip("numba")
discrete = pytest.importorskip("flows.compiled.discrete")

RNG = np.random.default_rng(7)
X_WIDE = RNG.standard_normal((30, 60))  # n d = 1800
REGRESSION = Dataset(X_WIDE, X_WIDE[:, :3].sum(axis=1), task="regression")
X_TALL = RNG.standard_normal((80, 20))  # n d = 1600
CLASSIFICATION = Dataset(X_TALL, np.sign(X_TALL @ RNG.standard_normal(20)))
HP = {"gd": {}, "l2-sam": {"rho": 0.05}, "linf-sam": {"rho": 0.01}, "usam": {"rho": 0.1},
      "le-sam": {"sigma": 0.1, "rho_max": 0.1}}  # fmt: skip


def _run(data, algorithm, depth, backend, **kwargs):
    return iterate(data, algorithm, depth, 0.3, backend=backend, **HP[algorithm], **kwargs)


def _assert_same(fast, slow, rtol=1e-12):
    np.testing.assert_array_equal(fast.steps, slow.steps)
    assert (fast.status, fast.cause, fast.message) == (slow.status, slow.cause, slow.message)
    scale = np.max(np.abs(slow.theta), axis=(1, 2), keepdims=True)
    assert np.max(np.abs(fast.theta - slow.theta) / scale) < rtol


@pytest.mark.parametrize("depth", [2, 3])
@pytest.mark.parametrize("algorithm", sorted(HP))
@pytest.mark.parametrize("data", [REGRESSION, CLASSIFICATION], ids=["regression", "logistic"])
def test_compiled_steps_equal_the_general_path(data, algorithm, depth):
    """Claim: 60 compiled steps are the general path's to 1e-12 (every compiled algorithm, both
    tasks, depth 2 and 3, n d of 1600 and 1800), recorded at every 25th step and the last."""
    kwargs = {"eta": 0.02, "steps": 60, "record_every": 25}
    fast = _run(data, algorithm, depth, "numba", **kwargs)
    slow = _run(data, algorithm, depth, "numpy", **kwargs)
    assert fast.backend == "numba" and slow.backend == "numpy"
    assert fast.steps.tolist() == [0, 25, 50, 60]
    _assert_same(fast, slow)


def _gd_by_hand(data: Dataset, alpha: float, eta: float, steps: int) -> list[np.ndarray]:
    """GD on ``beta = u * v`` and the squared loss ``(1/n) sum_i r_i^2 / 2`` written out:
    ``grad_u L = (X^T r / n) v``, ``grad_v L = (X^T r / n) u``; every iterate."""
    X, y = data.X, data.y
    u, v = np.full(data.d, alpha), np.full(data.d, alpha)
    out = [np.vstack([u, v])]
    for _ in range(steps):
        g = X.T @ (X @ (u * v) - y) / data.n
        u, v = u - eta * g * v, v - eta * g * u
        out.append(np.vstack([u, v]))
    return out


def test_recorded_iterates_are_the_steps_written_out():
    """Claim: with ``record_every=7`` the run keeps steps 0, 7, ..., 49 and the last (53), and
    each kept iterate is that step of GD written out by hand to 1e-12."""
    run = iterate(REGRESSION, "gd", 2, 0.3, eta=0.02, steps=53, record_every=7, backend="numba")
    assert run.steps.tolist() == [0, 7, 14, 21, 28, 35, 42, 49, 53]
    hand = _gd_by_hand(REGRESSION, 0.3, 0.02, 53)
    for step, theta in zip(run.steps, run.theta, strict=True):
        assert np.max(np.abs(theta - hand[step])) < 1e-12 * np.max(np.abs(hand[step]))


def test_a_diverging_run_leaves_the_float_range_where_the_general_path_does():
    """Claim: GD at a step size far past stability grows through the float range (beyond
    ``|w|^L = e^150`` its steps are numpy's) until an iterate overflows; the run stops at the
    same step with the same message and iterates as the general path, and the backend says the
    compiled loop ran."""
    kwargs = {"eta": 5.0, "steps": 400, "record_every": 1}
    fast = _run(REGRESSION, "gd", 2, "numba", **kwargs)
    slow = _run(REGRESSION, "gd", 2, "numpy", **kwargs)
    assert fast.cause is Cause.OVERFLOW and fast.backend == "numba"
    assert np.max(np.abs(fast.theta)) ** 2 > np.exp(150.0)  # a step past the float range
    _assert_same(fast, slow)


#: Inits below the float range: every ``|w|^2 = 1e-80 < e^-150`` at depth 2; a third layer of
#: ``|w|^3 = 1e-750 < e^-600`` at depth 3.
BELOW = {2: 1e-40, 3: np.vstack([np.ones((2, REGRESSION.d)), np.full((1, REGRESSION.d), 1e-250)])}


@pytest.mark.parametrize("depth", [2, 3])
def test_a_run_from_below_the_float_range_is_the_general_path(depth):
    """Claim: GD from an init below the float range (numpy's steps there) that grows into it
    (compiled steps) equals the general path to 1e-12 over 120 steps."""
    kwargs = {"eta": 0.2, "steps": 120, "record_every": 1}
    fast = iterate(REGRESSION, "gd", depth, BELOW[depth], backend="numba", **kwargs)
    slow = iterate(REGRESSION, "gd", depth, BELOW[depth], backend="numpy", **kwargs)
    sizes = np.abs(fast.theta) ** depth
    assert sizes[-1].max() > np.exp(-150.0) and sizes[-1].min() > np.exp(-600.0)
    _assert_same(fast, slow)


def test_the_record_buffer_holds_only_what_the_call_records():
    """Claim: a compiled call that records two iterates allocates room for two (not the
    buffer's full capacity of L d floats each)."""
    from flows.compiled.discrete import CAPACITY

    assert CAPACITY > 2
    sizes = []
    original = discrete.np.empty

    def spy(shape, *args, **kwargs):
        sizes.append(shape)
        return original(shape, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(discrete.np, "empty", spy)
        run = iterate(REGRESSION, "gd", 2, 0.3, eta=0.02, steps=50, record_every=50)
    assert run.steps.tolist() == [0, 50]
    assert (1, 2, REGRESSION.d) in sizes and (CAPACITY, 2, REGRESSION.d) not in sizes


@pytest.mark.slow
@pytest.mark.parametrize("depth", [2, 3])
def test_compiled_steps_at_research_size(depth):
    """Claim: at n = 200, d = 2000 (n d = 4e5) 300 GD and l2-SAM steps are the general
    path's to 1e-12."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((200, 2000))
    data = Dataset(X, X[:, :5].sum(axis=1), task="regression")
    for algorithm in ("gd", "l2-sam"):
        kwargs = {"eta": 0.002, "steps": 300, "record_every": 100}
        fast = _run(data, algorithm, depth, "numba", **kwargs)
        slow = _run(data, algorithm, depth, "numpy", **kwargs)
        _assert_same(fast, slow)


def test_losses_of_many_recorded_iterates_are_computed_in_blocks(monkeypatch):
    """Claim: with ``LOSS_BLOCK`` below ``n d`` (n = 30, d = 2: blocks of d = 2 recorded
    iterates), the recorded losses are ``(1/n) sum_i r_i^2 / 2`` of GD written out, at each of
    the 13 recorded steps, to 1e-12."""
    import flows.discrete

    monkeypatch.setattr(flows.discrete, "LOSS_BLOCK", 1)
    small = Dataset(X_WIDE[:, :2], X_WIDE[:, 2], task="regression")
    run = iterate(small, "gd", 2, 0.3, eta=0.02, steps=12, backend="numba")
    hand = _gd_by_hand(small, 0.3, 0.02, 12)
    for step, loss in zip(run.steps, run.loss, strict=True):
        r = small.X @ np.prod(hand[step], axis=0) - small.y
        assert abs(loss - 0.5 * np.mean(r * r)) < 1e-12 * abs(loss)


def test_weights_beyond_the_direct_range_are_the_general_paths():
    """Claim: at a margin of -650 on the exponential loss (``|l'| = e^650``, beyond the range
    where the compiled loop weighs examples by ``|l'|`` itself: log-sum-exp weights there) a
    step into that range (margin -467) and the steps after it equal the general path to 1e-12
    (the first step's ``e^650``-sized gradient carries a relative rounding of ~1e-14)."""
    data = Dataset(np.array([[1.0, 0.5]]), np.array([1.0]))
    alpha = np.array([[-25.5, 1.0], [25.5, 1.0]])  # beta = (-650.25, 1)
    kwargs = {"eta": 1e-283, "steps": 20, "loss": "exponential"}
    fast = iterate(data, "gd", 2, alpha, backend="numba", **kwargs)
    slow = iterate(data, "gd", 2, alpha, backend="numpy", **kwargs)
    margins = fast.beta @ data.signed_features[0]
    assert margins[0] < -600.0 < margins[1] < 0.0
    _assert_same(fast, slow)
