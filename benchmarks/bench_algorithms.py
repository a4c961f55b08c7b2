#!/usr/bin/env python
"""Every algorithm of the table on the compiled backend against the numpy backend, in the same
run: which segment loops each run takes, and what the compiled one gains.

Run on demand (not a pytest test)::

    python benchmarks/bench_algorithms.py            # print the table
    python benchmarks/bench_algorithms.py --write    # also keep it in results.md

Cases: every algorithm of :data:`flows.algorithms.ALGORITHMS` with the hyper-parameters of
:data:`HYPERPARAMETERS`, ``alpha = 0.5``, on three data sets at depth 2, as a flow
(``simulate``, ``original_time=False``) and as steps (``iterate``, :data:`STEP_SIZE`,
:data:`STEPS` steps, the last recorded):
the paper's single example ``mu = (1, ..., 5)`` (tau <= 10), Gaussian blobs
(``gaussian_blobs(seed=0, n=40, mean=linspace(0.5, 2, 10))``, tau <= 3) and a regression
(n = 20, d = 8, Gaussian rows, targets ``x_1 + x_2``, t <= 5). Each time is the best of
``--repeat`` (3) calls, the two backends taking turns, numba's kernels compiled before. The
columns give both backends' times, their ratio, what the numba run took (a flow's
``Trajectory.segment_loops``: 'compiled DOP853' is the compiled loop, 'scipy ...' the Python
one; the steps' ``DiscreteRun.backend``), both statuses, and how far the two runs are apart: a
flow's largest difference of ``log|beta|`` where both are finite (the same path, up to the
solver's tolerance), the steps' largest difference of ``theta`` relative to its largest entry
(rounding, amplified by the steps).

A run that leaves the compiled loop shows it here: this is the table to read when an algorithm
of the table is slower than it should be.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
from collections.abc import Callable
from typing import Any, NamedTuple

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads its BLAS

import numpy as np  # noqa: E402
from sections import write_section  # noqa: E402
from timing import best_alternating  # noqa: E402

from flows import Dataset, iterate, simulate, single_example  # noqa: E402
from flows.algorithms import ALGORITHMS  # noqa: E402
from flows.datasets import gaussian_blobs  # noqa: E402

HEADING = (
    "## Every algorithm, compiled against numpy (`python benchmarks/bench_algorithms.py --write`)"
)
#: ``iterate``'s step size and steps.
STEP_SIZE, STEPS = 0.05, 1000
#: Hyper-parameters of each algorithm in the runs (numbers: the compiled loop can take them).
HYPERPARAMETERS = {
    "gd": {},
    "l2-sam": {"rho": 0.2},
    "linf-sam": {"rho": 0.1},
    "usam": {"rho": 0.2},
    "le-sam": {"sigma": 0.1, "rho_max": 0.3},
    "le-sam-official": {"sigma": 0.1, "rho_max": 0.3},
    "asam": {"rho": 0.2},
    "1-sam": {"rho": 0.2},
    "1-usam": {"rho": 0.2},
}


def data_sets() -> dict[str, tuple[Dataset, float]]:
    """The three data sets of the module docstring, with each one's ``t_max``."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 8))
    return {
        "single example": (single_example([1, 2, 3, 4, 5]), 10.0),
        "blobs n 40 d 10": (gaussian_blobs(seed=0, n=40, mean=np.linspace(0.5, 2.0, 10)), 3.0),
        "regression n 20 d 8": (Dataset(X, X[:, :2].sum(axis=1), task="regression"), 5.0),
    }


def gap(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| over the rows both runs have, where both are finite."""
    rows = min(len(a), len(b))
    a, b = a[:rows], b[:rows]
    both = np.isfinite(a) & np.isfinite(b)
    return float(np.max(np.abs(a[both] - b[both]), initial=0.0))


class Row(NamedTuple):
    """One call of one algorithm on one data set, on both backends."""

    kind: str
    data: str
    algorithm: str
    numba: float
    numpy: float
    ran: str
    status: str
    gap: float


def timed(repeat: int, call: Callable[[str], Any]) -> tuple[float, float, Any, Any]:
    """``call("numba")`` and ``call("numpy")`` taking turns (the kernels compiled before): the
    best seconds of each and the last result of each."""
    call("numba")
    (fast_s, slow_s), (fast, slow) = best_alternating(
        repeat, lambda: call("numba"), lambda: call("numpy")
    )
    return fast_s, slow_s, fast, slow


def measure(repeat: int) -> list[Row]:
    """One row per call, data set and algorithm (see the module docstring)."""
    missing = set(ALGORITHMS) - set(HYPERPARAMETERS)
    if missing:
        raise SystemExit(f"bench_algorithms: no hyper-parameters for {sorted(missing)}")
    rows = []
    for name, (data, t_max) in data_sets().items():
        for algorithm, hp in HYPERPARAMETERS.items():
            flow = dict(hp, t_max=t_max, original_time=False)
            fast_s, slow_s, fast, slow = timed(
                repeat,
                lambda b, a=algorithm, d=data, kw=flow: simulate(d, a, 2, 0.5, backend=b, **kw),
            )
            rows.append(Row("simulate", name, algorithm, fast_s, slow_s, ", ".join(fast.segment_loops),
                            f"{fast.status}, {slow.status}",
                            gap(fast.log_abs_beta, slow.log_abs_beta)))  # fmt: skip
            steps = dict(hp, eta=STEP_SIZE, steps=STEPS, record_every=STEPS)
            fast_s, slow_s, fast, slow = timed(
                repeat,
                lambda b, a=algorithm, d=data, kw=steps: iterate(d, a, 2, 0.5, backend=b, **kw),
            )
            scale = np.max(np.abs(slow.theta))
            rows.append(Row("iterate", name, algorithm, fast_s, slow_s, fast.backend,
                            f"{fast.status}, {slow.status}",
                            gap(fast.theta / scale, slow.theta / scale)))  # fmt: skip
    return rows


def table(rows: list[Row], repeat: int) -> str:
    """The section of ``results.md``: the flows, then the steps."""
    when = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        HEADING,
        "",
        f"{when}, {platform.machine()}, load {load:.1f}, best of {repeat}, depth 2, alpha 0.5.",
    ]
    columns = {
        "simulate": ("`simulate`, `original_time=False`", "numba's segment loops",
                     "log\\|beta\\| gap"),
        "iterate": (f"`iterate`, eta {STEP_SIZE}, {STEPS} steps", "numba's loop",
                    "theta gap / max\\|theta\\|"),
    }  # fmt: skip
    for kind, (title, ran, difference) in columns.items():
        lines += [
            "",
            f"{title}:",
            "",
            f"| data | algorithm | numba ms | numpy ms | numpy / numba | {ran} "
            f"| status (numba, numpy) | {difference} |",
            "|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r.data} | {r.algorithm} | {r.numba * 1e3:.2f} | {r.numpy * 1e3:.1f} | "
            f"{r.numpy / r.numba:.1f}x | {r.ran} | {r.status} | {r.gap:.1e} |"
            for r in rows
            if r.kind == kind
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="calls per backend (best taken)")
    parser.add_argument("--write", action="store_true", help="keep the table in results.md")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    text = table(measure(args.repeat), args.repeat)
    print(text)
    if args.write:
        write_section(text, HEADING)


if __name__ == "__main__":
    main()
