#!/usr/bin/env python
"""Overhead of running sweep tasks on dask against the local process pool, in the same run.

Run on demand (not a pytest test; needs the dask extra, ``pip install -e '.[dask]'``)::

    python benchmarks/bench_dask.py               # 1,000 tiny tasks on 2 workers, ~1 min
    python benchmarks/bench_dask.py --n 200       # smaller

Parts (printed as Markdown):

1. Overhead: ``--n`` tiny tasks (a task kind that computes nothing: what is timed is the
   runner, the transport and the cache write) through :func:`flows.sweep.runner.run_tasks` with a
   fresh cache, on (a) this process (``jobs=1``), (b) the local process pool of ``--workers``
   processes, (c) a ``LocalCluster`` of ``--workers`` single-threaded worker processes via
   :class:`flows.sweep.dask_cluster.DaskExecutor` (cluster started before the clock runs). Per task =
   wall time / n. Target: dask <= 20 ms per task.
2. Identity: every cached array of (a), (b), (c), and of the quick fig4 runs (real
   ``simulate`` tasks) on the pool and on dask, compared bit for bit (dtype, shape, bytes).
   Target: identical whichever executor ran them.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from flows.sweep.pool import local_pool
from flows.sweep.registry import Task, register
from flows.sweep.runner import run_tasks
from flows.sweep.store import SECONDS_ENTRY, Cache

DASK_TARGET_MS = 20.0


def tiny_task(params: dict) -> dict:
    """A task that computes (almost) nothing: a few small arrays from its parameter."""
    x = params["x"]
    return {"x": np.array(x), "row": np.sqrt(np.arange(8.0) + x), "label": np.array(f"t{x:g}")}


register("bench-tiny", tiny_task)


def quiet(*_):
    """A ``log`` that prints nothing."""


def arrays(folder: Path) -> dict[str, dict[str, np.ndarray]]:
    """Every cached result's arrays by file name (without the compute time)."""
    out = {}
    for path in sorted(folder.glob("*.npz")):
        with np.load(path, allow_pickle=False) as f:
            out[path.name] = {k: f[k] for k in f.files if k != SECONDS_ENTRY}
    return out


def differences(a: dict, b: dict) -> list[str]:
    """Files or arrays that differ between two caches (empty: identical, bit for bit)."""
    if sorted(a) != sorted(b):
        return [f"different files: {sorted(set(a) ^ set(b))[:3]}"]
    diff = []
    for name in a:
        for key in sorted(set(a[name]) | set(b[name])):
            x, y = a[name].get(key), b[name].get(key)
            if (
                x is None
                or y is None
                or x.dtype != y.dtype
                or x.shape != y.shape
                or x.tobytes() != y.tobytes()
            ):
                diff.append(f"{name}:{key}")
    return diff


def timed_run(tasks: list[Task], folder: Path, **kwargs) -> float:
    """Wall seconds of one ``run_tasks`` call with a fresh cache in ``folder``."""
    start = time.perf_counter()
    _, computed = run_tasks(tasks, Cache(folder), log=quiet, **kwargs)
    took = time.perf_counter() - start
    assert computed == len({t.key() for t in tasks}), (computed, len(tasks))
    return took


def quick_fig4_tasks() -> list[Task]:
    """The real simulate tasks of the quick fig4 (the figure table's own declaration)."""
    from figures.table import FIGURES

    return FIGURES["fig4_amplification"].tasks(True)


def main(argv: list[str] | None = None) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-dask-") as scratch:
        return bench(Path(scratch), argv)


def bench(root: Path, argv: list[str] | None) -> int:
    """The benchmark, with its caches in ``root``; 0 if both targets are met."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1000, help="tiny tasks (default 1000)")
    p.add_argument("--workers", type=int, default=2, help="pool processes = dask workers")
    args = p.parse_args(argv)
    try:
        import distributed
    except ImportError:
        print("error: needs dask.distributed: pip install -e '.[dask]'", file=sys.stderr)
        return 2
    from flows.sweep.dask_cluster import DaskExecutor

    print(f"# dask against the local process pool ({args.n} tiny tasks, {args.workers} workers)\n")
    print(
        f"- python {platform.python_version()}, dask {distributed.__version__}, numpy "
        f"{np.__version__}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}\n"
    )
    tasks = [Task("bench-tiny", {"x": float(i)}) for i in range(args.n)]
    real = quick_fig4_tasks()
    seconds: dict[str, float] = {}
    seconds["this process (jobs=1)"] = timed_run(tasks, root / "serial", jobs=1)
    # the pool is forked before any dask thread exists
    pool = local_pool(args.workers)
    try:
        seconds["process pool"] = timed_run(
            tasks, root / "pool", executor=pool, window=args.workers
        )
        timed_run(real, root / "pool-fig4", executor=pool, window=args.workers)
    finally:
        pool.shutdown()
    start = time.perf_counter()
    cluster = distributed.LocalCluster(
        n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    dask = DaskExecutor(distributed.Client(cluster, set_as_default=False), cluster)
    dask.client.wait_for_workers(args.workers)
    startup = time.perf_counter() - start
    try:
        dask.client.run(lambda: None)  # workers up and answering
        seconds["dask LocalCluster"] = timed_run(tasks, root / "dask", executor=dask)
        timed_run(real, root / "dask-fig4", executor=dask)
    finally:
        dask.shutdown()

    pool_s = seconds["process pool"]
    print("## 1. Overhead: wall time of n tiny tasks (fresh cache)\n")
    print("| executor | wall [s] | per task [ms] | / process pool |")
    print("| --- | --- | --- | --- |")
    for name, took in seconds.items():
        print(f"| {name} | {took:.2f} | {took / args.n * 1e3:.2f} | {took / pool_s:.2f}x |")
    print(f"\n(cluster start-up, not in the wall time: {startup:.1f} s)\n")

    checks = {
        "tiny: dask vs this process": differences(arrays(root / "dask"), arrays(root / "serial")),
        "tiny: dask vs process pool": differences(arrays(root / "dask"), arrays(root / "pool")),
        "fig4 quick (simulate): dask vs process pool": differences(
            arrays(root / "dask-fig4"), arrays(root / "pool-fig4")
        ),
    }
    print("## 2. Identity of the cached arrays\n")
    print("| comparison | files | differing arrays |")
    print("| --- | --- | --- |")
    for name, diff in checks.items():
        files = len(list((root / ("dask-fig4" if "fig4" in name else "dask")).glob("*.npz")))
        print(f"| {name} | {files} | {len(diff)} {' '.join(diff[:3])} |")

    dask_ms = seconds["dask LocalCluster"] / args.n * 1e3
    identical = not any(checks.values())
    print("\n## Targets\n")
    print("| target | measured | goal | |")
    print("| --- | --- | --- | --- |")
    print(
        f"| dask overhead per tiny task | {dask_ms:.2f} ms ({dask_ms / (pool_s / args.n * 1e3):.1f}x"
        f" the pool's) | <= {DASK_TARGET_MS:g} ms | {'met' if dask_ms <= DASK_TARGET_MS else 'NOT MET'} |"
    )
    print(
        f"| results identical whichever executor | {'yes' if identical else 'NO'} | bit for bit "
        f"| {'met' if identical else 'NOT MET'} |"
    )
    print(f"\n- load at end {os.getloadavg()[0]:.2f}")
    return 0 if identical and dask_ms <= DASK_TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
