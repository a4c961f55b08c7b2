"""A run keeps a bounded part of its path (flows/integrator/assemble.py, segments.py).

Claims:

* sampling the output grid and integrating the original time as the path is recorded, a batch
  of segments at a time, gives the trajectory of one sampling of the whole path, bit for bit
  (every field of ``to_arrays``): with a batch per segment (``HELD_BYTES = 0``) against the
  default (these small paths are held whole), on runs with the original-time quadrature and
  sliding segments, ``tau`` by quadrature over many compiled calls, a collapse at ``s = 0``, a
  blow-up and a conservation cut; ``K`` in batches of one time agrees to rounding (1e-13);
* scipy's steps handed to the path in pieces of 16 (``RECORD_BYTES = 0``) give the trajectory
  of the whole segments, bit for bit but for ``tau`` and ``log_t_original``, whose quadratures
  sum per piece (1e-13), on the numpy backend's runs;
* the held dense output stays within ``HELD_BYTES`` after each segment recorded;
* the layers of one parameter group are a read-only view of it (numpy's ``broadcast_to``);
* (slow) the peak resident memory of a fresh process running a long flow at ``d = 2e4``
  grows by less than a quarter of the dense output of its added steps (four times the steps),
  where holding the whole path grows it by at least 70% of it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from flows import Dataset, simulate, single_example
from flows.integrator import assemble, driver, segments, solver
from flows.results import Cause


def _regression() -> Dataset:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(4, 6))
    return Dataset(X, X @ np.array([1.0, 0.5, 0.0, 0.0, 0.0, 0.0]), task="regression")


def _conservation_cut() -> Dataset:
    rng = np.random.default_rng(152)
    return Dataset(rng.standard_normal((4, 6)), rng.standard_normal(4), task="regression")


RUNS = {
    "linf-sam sliding, rescaled": lambda: simulate(
        single_example([1.0, 2.0, 3.0]), "linf-sam", 2, np.array([0.2, 0.5, 0.9]), rho=0.5,
        t_max=3.0, n_points=31, backend="numpy",
    ),
    "l2-sam regression, tau by quadrature": lambda: simulate(
        _regression(), "l2-sam", 2, 0.3, rho=0.05, t_max=50.0, n_points=31
    ),
    "collapse at s = 0": lambda: simulate(
        single_example([1.0, 2.0]), "asam", 2, 1e-300, rho=0.5, t_max=1.0, n_points=5
    ),
    "l2-sam L3 blow-up": lambda: simulate(
        single_example([1.0, 2.0, 3.0, 4.0, 5.0]), "l2-sam", 3, 0.4, rho=0.5, t_max=6.0,
        n_points=31,
    ),
    "gd conservation cut": lambda: simulate(
        _conservation_cut(), "gd", 2, np.vstack([np.full(6, 1e-12), np.zeros(6)]),
        t_max=20.0 * np.log(1e12), n_points=200, chart="asinh",
    ),
}  # fmt: skip


def _kept_run(monkeypatch, make) -> tuple:
    """The trajectory of ``make()`` and its run state (the driver's assemble spied on)."""
    runs = []
    original = driver.assemble
    monkeypatch.setattr(driver, "assemble", lambda run, *a: runs.append(run) or original(run, *a))
    traj = make()
    return traj, runs[-1]


def _assert_same(a, b, rtol: float = 0.0) -> None:
    x, y = a.to_arrays(), b.to_arrays()
    assert x.keys() == y.keys()
    for key in x:
        if rtol and x[key].dtype.kind == "f":
            np.testing.assert_allclose(x[key], y[key], rtol=rtol, atol=0, err_msg=key)
        else:
            np.testing.assert_array_equal(x[key], y[key], err_msg=key)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_taking_the_output_per_segment_is_sampling_the_whole_path(name, monkeypatch):
    make = RUNS[name]
    if name.startswith("l2-sam regression"):  # many compiled calls, each a segment
        from flows.compiled import segment

        monkeypatch.setattr(segment, "CAPACITY", 16)
    whole, run = _kept_run(monkeypatch, make)
    assert len(run.output.parts) == 1  # a small path is held whole
    if name == "gd conservation cut":
        assert whole.cause is Cause.PRECISION_LOST
    monkeypatch.setattr(segments, "HELD_BYTES", 0)
    flushed, run = _kept_run(monkeypatch, make)
    assert len(run.output.parts) >= (8 if name.startswith("l2-sam regression") else 2)
    _assert_same(flushed, whole)
    monkeypatch.setattr(assemble, "EXPONENT_BLOCK", 1)  # K one time at a time
    _assert_same(_kept_run(monkeypatch, make)[0], whole, rtol=1e-13)


#: Runs whose segments take many of scipy's steps on the numpy backend.
SCIPY_RUNS = {
    "l2-sam regression, tau by quadrature": lambda: simulate(
        _regression(), "l2-sam", 2, 0.3, rho=0.05, t_max=50.0, n_points=31, backend="numpy"
    ),
    "l2-sam L3 blow-up": lambda: simulate(
        single_example([1.0, 2.0, 3.0, 4.0, 5.0]), "l2-sam", 3, 0.4, rho=0.5, t_max=6.0,
        n_points=31, backend="numpy",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SCIPY_RUNS))
def test_scipy_steps_in_pieces_are_the_whole_segments(name, monkeypatch):
    whole, kept = _kept_run(monkeypatch, SCIPY_RUNS[name])
    monkeypatch.setattr(solver, "RECORD_BYTES", 0)  # pieces of 16 steps
    pieces, kept_pieces = _kept_run(monkeypatch, SCIPY_RUNS[name])
    assert kept_pieces.path.count >= kept.path.count + 2  # long segments went in pieces
    x, y = pieces.to_arrays(), whole.to_arrays()
    for key in x:
        if key in ("tau", "log_t_original"):
            np.testing.assert_allclose(x[key], y[key], rtol=1e-13, atol=0, err_msg=key)
        else:
            np.testing.assert_array_equal(x[key], y[key], err_msg=key)


def test_the_path_holds_at_most_its_share(monkeypatch):
    monkeypatch.setattr(segments, "HELD_BYTES", 1_000)
    held = []
    record = segments.Path.record

    def spy(self, segment):
        record(self, segment)
        held.append(self.held_bytes)

    monkeypatch.setattr(segments.Path, "record", spy)
    traj, run = _kept_run(monkeypatch, RUNS["linf-sam sliding, rescaled"])
    assert traj.status == 0 and len(run.output.parts) > 2
    assert max(held) <= 1_000


CHILD = """
import json, sys
import numpy as np
from flows import Dataset, compiled, simulate
from flows.compiled import segment
from flows.integrator import assemble, segments
steps, whole = json.loads(sys.argv[1])
segment.CAPACITY = 16  # the compiled calls' own buffers small: what is measured is the path's
segments.HELD_BYTES = 2**62 if whole else 2**24
assemble.EXPONENT_BLOCK = 2**62 if whole else assemble.EXPONENT_BLOCK
rng = np.random.default_rng(0)
X = rng.standard_normal((10, 20_000))
traj = simulate(Dataset(X, X[:, :5].sum(axis=1), task="regression"), "gd", 2, 0.1,
                t_max=100.0, max_nfev=12 * steps, backend="numba")
# the high-water mark of this process's own memory (VmHWM, kB): ru_maxrss would also count
# the parent's resident memory when it forked (Linux keeps it across exec)
status = open("/proc/self/status").read().split("VmHWM:")[1]
peak = int(status.split()[0]) / 1024
print(json.dumps([peak, traj.nfev, compiled.kernels_compiled()]))
"""


def _peak(steps: int, whole: bool) -> tuple[float, int]:
    """Peak resident MB and evaluations of :data:`CHILD`'s run in a fresh process, taken again
    (at most 3 times) where the child compiled kernels: numba's compile peaks higher than the
    path (a cache that another process rewrites while a child loads it sends the child to
    compile)."""
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps([steps, whole])],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        peak, nfev, compiled = json.loads(done.stdout.splitlines()[-1])
        if compiled == 0:
            return peak, nfev
    raise AssertionError(f"every child compiled kernels ({compiled} the last time)")


@pytest.mark.slow  # five fresh processes, ~20 s (and the kernels' compile, once)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM of /proc/self/status")
def test_peak_memory_does_not_grow_with_the_steps():
    """Each child measures its own high-water mark (VmHWM): ``ru_maxrss`` keeps the forking
    process's resident size across exec, and after the slow tests an xdist worker holds 510 MB,
    which every child then reported. The children run on the compiled backend from numba's
    cache: this process first waits for the suite's compiling processes (its own first kernel
    load does, tests/conftest.py), a first child compiles what is left, and a child that
    compiled anyway is run again (numba's compile peaks higher than the path)."""
    pytest.importorskip("numba")
    simulate(single_example([1.0, 2.0]), "gd", 2, 0.5, t_max=0.1, n_points=2, backend="numba")
    _peak(12, False)
    short, nfev_short = _peak(60, False)
    long, nfev_long = _peak(240, False)
    assert nfev_long >= 3.5 * nfev_short  # the long run takes about 4x the steps
    # its dense output: 64 bytes per state entry and step, ~180 steps more
    grown = 64 * 20_001 * (nfev_long - nfev_short) / 12 / 2**20
    assert long - short < 0.25 * grown
    whole_short, _ = _peak(60, True)
    whole_long, _ = _peak(240, True)
    assert whole_long - whole_short > 0.7 * grown


def test_the_layers_of_one_group_are_a_read_only_view():
    """``log_abs_theta`` and ``sign_theta`` of a reduced run: numpy's ``broadcast_to`` of the
    group (the same numbers and strides, read-only, sharing its memory), contiguous or not."""
    from flows.integrator.assemble import layers

    groups = np.random.default_rng(0).standard_normal((7, 1, 4))
    for group in (groups, groups[::2], np.empty((0, 1, 4))):
        view = layers(group, np.array([3]))
        expected = np.broadcast_to(group, (group.shape[0], 3, 4))
        assert view.shape == expected.shape and view.strides == expected.strides
        np.testing.assert_array_equal(view, expected)
        assert not view.flags.writeable
        assert group.size == 0 or np.shares_memory(view, group)
    run = simulate(single_example([1.0, 2.0]), "gd", 3, 0.5, t_max=1.0)
    assert run.log_abs_theta.strides[1] == 0 and not run.log_abs_theta.flags.writeable
