"""The float minibatch steps (:mod:`flows.batch_steps`) against the general step.

The general step (:func:`flows.discrete.perturbed_gradient` on each batch's data set, signed-log
beyond the float range) is forced by removing the float steps; both are held to 1e-12 relative
for every algorithm of the table, each noise and sampling option, momentum and weight decay,
and for runs that enter or leave the float range midway. Written-out loops check per-example
SAM and PyTorch's momentum with weight decay on minibatches independently of both.
"""

from __future__ import annotations

import numpy as np
import pytest

import flows.discrete
from flows import Dataset, iterate
from flows.batch_steps import FloatBatchSteps
from flows.schedules import cosine

N, D = 12, 5


def regression() -> Dataset:
    rng = np.random.default_rng(11)
    X = rng.standard_normal((N, D))
    return Dataset(X, X @ np.array([1.0, 0.0, -0.5, 0.0, 0.0]), task="regression")


def classification() -> Dataset:
    rng = np.random.default_rng(3)
    X = rng.standard_normal((N, D))
    y = np.sign(X @ np.array([1.0, -2.0, 0.5, 0.0, 1.0]))
    return Dataset(X, y)


def general(monkeypatch, *args, **kw):
    """The run with every step the general one."""
    with monkeypatch.context() as m:
        m.setattr(flows.discrete, "float_batch_steps", lambda *a: None)
        return iterate(*args, **kw)


def counted(monkeypatch, *args, **kw) -> tuple:
    """The run with its float steps, and how many steps were float steps."""
    taken = []
    step = FloatBatchSteps.step

    def counting(self, *a):
        out = step(self, *a)
        taken.append(out is not None)
        return out

    with monkeypatch.context() as m:
        m.setattr(FloatBatchSteps, "step", counting)
        return iterate(*args, **kw), sum(taken)


def assert_close(a, b, rtol):
    """|a - b| <= rtol max|b| over each iterate's (L, d) entries (an entry that cancels to near
    0 keeps the absolute error of the others)."""
    scale = np.max(np.abs(b), axis=(-2, -1), keepdims=True)
    assert np.all(np.abs(a - b) <= rtol * scale), np.max(np.abs(a - b) / scale)


def assert_same_run(fast, slow, rtol=1e-12):
    assert fast.status == slow.status and fast.message == slow.message
    np.testing.assert_array_equal(fast.steps, slow.steps)
    assert_close(fast.theta, slow.theta, rtol)
    np.testing.assert_allclose(fast.loss, slow.loss, rtol=rtol, atol=0.0)
    if slow.buffer is not None:
        assert_close(fast.buffer, slow.buffer, rtol)


HP = {
    "gd": {},
    "l2-sam": {"rho": 0.1},
    "linf-sam": {"rho": 0.05},
    "usam": {"rho": 0.2},
    "le-sam": {"sigma": 0.1, "rho_max": 0.2},
    "le-sam-official": {"sigma": 0.1, "adaptive": True},
    "asam": {"rho": 0.1},
    "1-sam": {"rho": 0.05},
    "1-usam": {"rho": 0.2},
}


@pytest.mark.parametrize("task", ["regression", "classification"])
@pytest.mark.parametrize("algorithm", list(HP))
def test_every_algorithm_is_the_general_step(monkeypatch, algorithm, task):
    data = regression() if task == "regression" else classification()
    kw = dict(eta=0.05, steps=25, batch_size=4, seed=2, **HP[algorithm])
    fast, taken = counted(monkeypatch, data, algorithm, 2, 0.3, **kw)
    assert taken == 25
    assert_same_run(fast, general(monkeypatch, data, algorithm, 2, 0.3, **kw))


OPTIONS = {
    "momentum and weight decay": dict(momentum=0.9, weight_decay=0.01),
    "epoch": dict(sampling="epoch", batch_size=5),
    "replayed": dict(batch_size=None, batches=np.random.default_rng(1).permuted(
        np.tile(np.arange(N), (30, 1)), axis=1)[:, :3]),
    "label noise": dict(label_noise=0.3),
    "temperature": dict(temperature=1e-4),
    "full batch with noise": dict(batch_size=None, label_noise=0.1, temperature=1e-5),
    "schedules": dict(eta=cosine(0.05, 30 * 0.05), rho=cosine(0.1, 1.0)),
    "depth 3": dict(depth=3),
    "depth 1": dict(depth=1),
}  # fmt: skip


@pytest.mark.parametrize("task", ["regression", "classification"])
@pytest.mark.parametrize("option", list(OPTIONS))
def test_every_option_is_the_general_step(monkeypatch, option, task):
    data = regression() if task == "regression" else classification()
    kw = dict(eta=0.05, steps=30, batch_size=4, seed=5, rho=0.1, depth=2) | OPTIONS[option]
    fast, taken = counted(monkeypatch, data, "l2-sam", alpha=0.3, **kw)
    assert taken == 30
    assert_same_run(fast, general(monkeypatch, data, "l2-sam", alpha=0.3, **kw))


def test_a_run_entering_the_float_range_midway_is_the_general_one(monkeypatch):
    """From alpha = 1e-40 (|theta|^2 below exp(-150)) the first steps are general, the later
    ones float; a run continued from either part is the long run bit for bit."""
    data = regression()
    kw = dict(eta=0.5, batch_size=6, seed=1, momentum=0.5, label_noise=0.05)
    fast, taken = counted(monkeypatch, data, "gd", 2, 1e-40, steps=120, **kw)
    assert 0 < taken < 120
    assert_same_run(fast, general(monkeypatch, data, "gd", 2, 1e-40, steps=120, **kw))
    for split in (10, 110):
        first = iterate(data, "gd", 2, 1e-40, steps=split, **kw)
        rest = iterate(data, "gd", 2, steps=120 - split, start=first, eta=0.5, momentum=0.5,
                       label_noise=0.05)  # fmt: skip
        np.testing.assert_array_equal(rest.theta[-1], fast.theta[-1])
        np.testing.assert_array_equal(rest.buffer, fast.buffer)


def test_a_diverging_run_stops_where_the_general_one_stops(monkeypatch):
    """A step size past the stability limit: float steps while the residuals are small, then
    general ones (residuals past the loss check, then theta past the float range) until the
    squared loss overflows; the same status, message, steps and iterates."""
    data = regression()
    kw = dict(rho=0.01, eta=0.4, steps=50, batch_size=6, seed=3)
    fast, taken = counted(monkeypatch, data, "l2-sam", 2, 2.0, **kw)
    assert fast.status == -1 and 0 < taken < int(fast.steps[-1])
    assert np.max(np.abs(fast.theta[-1])) ** 2 > np.exp(150)  # past the float range
    assert_same_run(fast, general(monkeypatch, data, "l2-sam", 2, 2.0, **kw))


def test_margins_past_the_loss_check_are_handed_back(monkeypatch):
    """beta a multiple of a separator with margins from ~30 to ~950: the batches with a margin
    beyond 700 (where the exponential loss is evaluated by the check) take the general step,
    the others the float one, with the same iterates."""
    data = classification()
    w = 135.0 * np.array([1.0, -2.0, 0.5, 0.0, 1.0])
    alpha = [np.sign(w) * np.sqrt(np.abs(w)), np.sqrt(np.abs(w))]
    kw = dict(eta=0.1, steps=40, batch_size=2, seed=8, loss="exponential")
    fast, taken = counted(monkeypatch, data, "gd", 2, alpha, **kw)
    assert fast.status == 0 and 0 < taken < 40
    assert_same_run(fast, general(monkeypatch, data, "gd", 2, alpha, **kw))


def test_per_example_sam_on_minibatches_is_the_loop_written_out():
    """1-SAM: each example of the batch perturbed by its own normalised gradient, the step the
    mean of the examples' gradients at their own perturbed points."""
    data = regression()
    order = np.array([np.random.default_rng(50 + k).choice(N, 3, replace=False)
                      for k in range(40)])  # fmt: skip
    rho, eta = 0.05, 0.1
    run = iterate(data, "1-sam", 2, 0.3, rho=rho, eta=eta, steps=40, batches=order)
    u, v = np.full(D, 0.3), np.full(D, 0.3)
    for rows in order:
        gu, gv = np.zeros(D), np.zeros(D)
        for i in rows:
            x, y = data.X[i], data.y[i]
            r = x @ (u * v) - y
            eu, ev = r * x * v, r * x * u
            norm = np.sqrt(eu @ eu + ev @ ev)
            pu, pv = u + rho * eu / norm, v + rho * ev / norm
            r = x @ (pu * pv) - y
            gu, gv = gu + r * x * pv / len(rows), gv + r * x * pu / len(rows)
        u, v = u - eta * gu, v - eta * gv
    np.testing.assert_allclose(run.theta[-1], [u, v], rtol=1e-12)


def test_momentum_and_weight_decay_on_minibatches_are_torch_sgd_written_out():
    """d_k = g_k + wd theta_k, b_0 = d_0, b_k = mu b_{k-1} + d_k, theta_{k+1} = theta_k - eta
    b_k, with g_k the logistic loss's gradient on the batch."""
    data = classification()
    order = np.array([np.random.default_rng(k).choice(N, 5, replace=False) for k in range(50)])
    mu, wd, eta = 0.8, 0.02, 0.1
    run = iterate(data, "gd", 2, 0.4, eta=eta, steps=50, batches=order, momentum=mu,
                  weight_decay=wd)  # fmt: skip
    theta, buffer = np.full((2, D), 0.4), None
    for rows in order:
        Z = data.y[rows, None] * data.X[rows]
        slope = -1.0 / (1.0 + np.exp(Z @ (theta[0] * theta[1])))  # l'(m) of log(1 + e^-m)
        g = (slope @ Z / len(rows)) * theta[::-1] + wd * theta
        buffer = g if buffer is None else mu * buffer + g
        theta = theta - eta * buffer
    np.testing.assert_allclose(run.theta[-1], theta, rtol=1e-12)
    np.testing.assert_allclose(run.buffer, buffer, rtol=1e-12)
