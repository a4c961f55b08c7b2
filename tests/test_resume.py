"""Continuing a discrete run (``iterate(start=run)``) and storing one
(``DiscreteRun.to_arrays`` / ``from_arrays``).

References: the single call of ``n + m`` steps (the same steps, recorded in one call), bit for
bit, on both backends, with momentum and weight decay (whose buffer must carry over: without it
the continued run differs from step ``n + 1`` on); and the round trip through ``np.savez`` read
back with ``allow_pickle=False``.
"""

from __future__ import annotations

import numpy as np
import pytest

from flows import Dataset, DiscreteRun, iterate, single_example

MU = np.array([1.0, 2.0, 3.0])


def regression() -> Dataset:
    rng = np.random.default_rng(5)
    X = rng.standard_normal((12, 6))
    return Dataset(X, X @ np.array([1.0, 0.0, 0.0, -0.5, 0.0, 0.0]), task="regression")


CASES = {
    "l2-sam, logistic, momentum": (lambda: single_example(MU), "l2-sam",
                                   dict(rho=0.1, eta=0.05, momentum=0.9, weight_decay=1e-3)),
    "gd, regression, momentum": (regression, "gd", dict(eta=0.02, momentum=0.5)),
    "usam, regression": (regression, "usam", dict(rho=0.05, eta=0.02)),
}  # fmt: skip


@pytest.mark.parametrize("backend", ["numpy", "auto"])
@pytest.mark.parametrize("case", list(CASES))
def test_n_steps_then_m_more_are_the_n_plus_m_steps_bit_for_bit(case, backend):
    make, algorithm, kw = CASES[case]
    data = make()
    whole = iterate(data, algorithm, 2, 0.3, steps=300, record_every=7, backend=backend, **kw)
    first = iterate(data, algorithm, 2, 0.3, steps=120, record_every=7, backend=backend, **kw)
    rest = iterate(data, algorithm, 2, steps=180, record_every=7, backend=backend, start=first,
                   **kw)  # fmt: skip
    assert rest.steps[0] == 120 and rest.steps[-1] == 300
    joined_steps = np.concatenate([first.steps, rest.steps[1:]])
    joined = np.concatenate([first.theta, rest.theta[1:]])
    at = np.isin(whole.steps, joined_steps)
    assert np.array_equal(whole.steps[at], joined_steps[np.isin(joined_steps, whole.steps)])
    np.testing.assert_array_equal(joined[np.isin(joined_steps, whole.steps)], whole.theta[at])
    np.testing.assert_array_equal(rest.theta[-1], whole.theta[-1])
    np.testing.assert_array_equal(rest.t, rest.steps * whole.eta)


def test_the_momentum_buffer_is_what_carries_over():
    """Dropping the buffer (a fresh start from the same iterate) changes the next steps."""
    data = single_example(MU)
    kw = dict(rho=0.1, eta=0.05, momentum=0.9)
    first = iterate(data, "l2-sam", 2, 0.3, steps=50, **kw)
    assert first.buffer is not None
    fresh = DiscreteRun(**{**first.__dict__, "buffer": None})
    kept = iterate(data, "l2-sam", 2, steps=10, start=first, **kw)
    lost = iterate(data, "l2-sam", 2, steps=10, start=fresh, **kw)
    assert not np.allclose(kept.theta[-1], lost.theta[-1], rtol=1e-6)


def test_arrays_round_trip_through_npz_and_continue(tmp_path):
    data = regression()
    kw = dict(rho=0.05, eta=0.02, momentum=0.5)
    run = iterate(data, "l2-sam", 2, 0.3, steps=40, **kw)
    np.savez(tmp_path / "run.npz", **run.to_arrays())
    with np.load(tmp_path / "run.npz", allow_pickle=False) as stored:
        back = DiscreteRun.from_arrays(stored)
    for name in ("steps", "t", "theta", "beta", "loss", "buffer"):
        np.testing.assert_array_equal(getattr(back, name), getattr(run, name))
    for name in ("status", "message", "algorithm", "eta", "cause", "momentum", "weight_decay",
                 "backend"):  # fmt: skip
        assert getattr(back, name) == getattr(run, name)
    a = iterate(data, "l2-sam", 2, steps=20, start=run, **kw)
    b = iterate(data, "l2-sam", 2, steps=20, start=back, **kw)
    np.testing.assert_array_equal(a.theta, b.theta)
    missing = {k: v for k, v in run.to_arrays().items() if k != "buffer"}
    with pytest.raises(ValueError, match="missing buffer"):
        DiscreteRun.from_arrays(missing)


def test_a_bad_start_is_refused_by_name():
    data = single_example(MU)
    run = iterate(data, "gd", 2, 0.3, eta=0.1, steps=5)
    with pytest.raises(ValueError, match="start: its parameters have shape"):
        iterate(data, "gd", 3, eta=0.1, steps=5, start=run)
    with pytest.raises(ValueError, match="start must be a flows.DiscreteRun"):
        iterate(data, "gd", 2, eta=0.1, steps=5, start=run.theta)
    overflowed = DiscreteRun(**{**run.__dict__, "status": -1, "message": "left float64"})
    with pytest.raises(ValueError, match="start: the run ended with status -1"):
        iterate(data, "gd", 2, eta=0.1, steps=5, start=overflowed)
