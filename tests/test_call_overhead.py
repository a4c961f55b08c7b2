"""Tests of the short cuts that keep a small call cheap (flows/integrator/segments.py,
flows/compiled/segment.py, flows/integrator/threshold_events.py).

* the compiled loop's segments sample their dense output in numba with scipy's own
  ``Dop853DenseOutput`` numbers, bit for bit, at step boundaries and beyond the ends too;
* a one-segment path is sampled as the general path samples it, into arrays of its own;
* the compiled loop is declined in every mode the module docstring excludes, and for a
  scheduled hyper-parameter, by the flags held on the field and the mode alone;
* the collapse and near-zero thresholds read ``log max|w|`` in the log chart as the signed-log
  parameters give it.

Fast (< 5 s): short single-example runs.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.integrate._ivp.rk import Dop853DenseOutput

from flows import compiled, simulate, single_example
from flows.integrator import driver
from flows.integrator.segments import Mode
from flows.integrator.threshold_events import Collapse, NearZero
from flows.schedules import cosine, multistep

MU = np.arange(1.0, 6.0)

pytestmark = pytest.mark.skipif(not compiled.available(), reason="needs numba")


def _run(algorithm: str = "l2-sam", t_max: float = 4.0, **hp):
    """The run state of a default-style call (its path kept), via the driver's assemble."""
    kept = {}
    assemble = driver.assemble

    def spy(run, *args):
        kept["run"] = run
        return assemble(run, *args)

    driver.assemble = spy
    try:
        simulate(single_example(MU), algorithm, 2, 0.4, t_max=t_max, n_points=41,
                 backend="numba", **hp)  # fmt: skip
    finally:
        driver.assemble = assemble
    return kept["run"]


def test_compiled_dense_output_is_scipys_bit_for_bit():
    """Claim: a compiled segment's states equal scipy's Dop853DenseOutput of each step, built
    from the same arrays, bit for bit: inside steps, at shared boundaries (the later step) and
    outside the segment (the first or the last step)."""
    run = _run(rho=1.0)
    seg = run.path.segments[0]
    assert seg.dense is not None and len(seg.ts) > 3
    t_old, h, F, y_old = seg.stack
    rng = np.random.default_rng(0)
    s = np.concatenate(
        [rng.uniform(seg.start, seg.end, 200), seg.ts, [seg.start - 0.1, seg.end + 0.1]]
    )
    got = seg.raw(s)
    for when, y in zip(s, got, strict=True):
        k = int(np.clip(np.searchsorted(seg.ts, when, side="right") - 1, 0, len(t_old) - 1))
        step = Dop853DenseOutput(t_old[k], t_old[k] + h[k], y_old[k], F[k])
        np.testing.assert_array_equal(y, step(when))


def test_one_segment_path_is_sampled_as_the_general_path():
    """Claim: a one-segment path gives the general path's samples (segment index given)
    bit for bit, in contiguous arrays that share memory with no other sample."""
    run = _run(rho=1.0)
    path = run.path
    assert len(path.segments) == 1
    s = np.linspace(0.0, path.end, 57)
    theta, tau, which = path.sample(s)
    general, tau_general, _ = path.sample(s, which=np.zeros(len(s), dtype=int))
    np.testing.assert_array_equal(which, 0)
    np.testing.assert_array_equal(theta.sign, general.sign)
    np.testing.assert_array_equal(theta.log_abs, general.log_abs)
    np.testing.assert_array_equal(tau, tau_general)
    again, tau_again, _ = path.sample(s)
    arrays = (theta.sign, theta.log_abs, tau)
    for k, array in enumerate(arrays):
        assert array.flags.c_contiguous
        for other in (*arrays[k + 1 :], again.sign, again.log_abs, tau_again):
            assert not np.shares_memory(array, other)


def _modes(mode: Mode) -> dict[str, Mode]:
    """``mode`` changed in each way that rules the compiled loop out."""
    held = mode.copy()
    held.held[0, 0] = True
    undecided = mode.copy()
    undecided.sign_pattern = np.sign(np.ones(mode.held.shape))
    undecided.sign_pattern[0, 1] = 0.0
    return {
        "held entry": held,
        "sliding direction": dataclasses.replace(mode.copy(), sliding_directions=(1,)),
        "collapsed": dataclasses.replace(mode.copy(), collapsed=True),
        "stationary": dataclasses.replace(mode.copy(), stationary=True),
        "undecided sign": undecided,
    }


def test_compiled_loop_declines_where_its_docstring_says():
    """Claim: ``applies`` holds for the plain mode and method DOP853 only, and is False in
    every excluded mode, for another method, and for a hyper-parameter that follows a schedule
    the kernels do not evaluate (a callable of the caller's, a staircase); a cosine schedule
    runs compiled."""
    from flows.compiled.segment import applies

    run = _run(rho=1.0)
    field = run.field_for(run.mode)
    assert applies(field, run.mode, "DOP853")
    assert not applies(field, run.mode, "RK45")
    for name, mode in _modes(run.mode).items():
        assert not applies(field, mode, "DOP853"), name
    for rho in (lambda t: 1.0 / (1.0 + t), multistep(1.0, [0.5])):
        scheduled = _run(rho=rho, t_max=1.0)
        assert not applies(scheduled.field_for(scheduled.mode), scheduled.mode, "DOP853")
    scheduled = _run(rho=cosine(1.0, 4.0), t_max=1.0)
    assert applies(scheduled.field_for(scheduled.mode), scheduled.mode, "DOP853")


@pytest.mark.parametrize("event", [Collapse, NearZero])
def test_smallness_in_the_log_chart_reads_the_largest_parameter(event):
    """Claim: in the log chart the thresholds take ``log max|w|`` equal to the maximum of the
    signed-log parameters' ``log|w|`` (exact zeros, ``z = -inf``, included)."""
    run = _run(rho=1.0)
    watched = event(run.field_for(run.mode), radius=2.0)
    rng = np.random.default_rng(1)
    for y in (rng.normal(size=run.y.size), np.full(run.y.size, -np.inf)):
        y[-1] = 0.0
        want = float(np.max(watched.theta(y).log_abs))
        assert watched.log_largest(y) == want
        assert watched.already(y) == (want < np.log(2.0 * watched.fraction))
