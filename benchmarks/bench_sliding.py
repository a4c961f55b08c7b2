#!/usr/bin/env python
"""Cost of l_inf-SAM runs that slide on their switching surfaces, against GD on the same data
and horizon, measured in the same run (issue target: a sliding multi-sample run costs at most
a few times the same run with GD).

Run on demand (not a pytest test)::

    python benchmarks/bench_sliding.py

For each case: CPU seconds (best of ``--repeat``) and field evaluations of ``flows.simulate``
for GD and l_inf-SAM (rescaled clock, ``original_time=False``, default tolerances), the ratio
l_inf / GD, and what l_inf-SAM did (status, sliding time, most surfaces sliding at once).
Printed as Markdown.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from flows import simulate
from flows.data import Dataset
from flows.datasets import gaussian_blobs, teacher_data

#: name, data, depth, alpha, rho, t_max
CASES = (
    ("blobs (n=40, d=2), L=2", gaussian_blobs, 2, [1.5, 0.8], 1.0, 8.0),
    ("teacher (n=12, d=3), L=2", teacher_data, 2, 1.0, 0.1, 8.0),
    ("teacher (n=12, d=3), L=1", teacher_data, 1, 1.0, 0.1, 200.0),
    (
        "2 examples (d=2), L=2",
        lambda: Dataset(np.array([[1.0, 2.0], [-0.3, 1.5]]), np.array([1.0, 1.0])),
        2,
        [1.5, 0.8],
        1.0,
        10.0,
    ),
)


def timed(repeat: int, **kw) -> tuple[float, object]:
    """Best CPU time of ``repeat`` calls of ``simulate(**kw)`` and the last trajectory."""
    best, traj = np.inf, None
    for _ in range(repeat):
        start = time.process_time()
        traj = simulate(**kw)
        best = min(best, time.process_time() - start)
    return best, traj


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    simulate(gaussian_blobs(), "linf-sam", 2, [1.5, 0.8], rho=1.0, t_max=0.1)  # compile once
    print(
        f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}"
    )
    print()
    print("| case | GD | l_inf-SAM | ratio (CPU) | l_inf-SAM: status, sliding time, surfaces |")
    print("|---|---|---|---|---|")
    for name, data, depth, alpha, rho, t_max in CASES:
        common = dict(data=data(), depth=depth, alpha=alpha, t_max=t_max, original_time=False)
        t_gd, gd = timed(args.repeat, algorithm="gd", **common)
        t_linf, linf = timed(args.repeat, algorithm="linf-sam", rho=rho, **common)
        print(
            f"| {name}, τ ≤ {t_max:g} | {1e3 * t_gd:.1f} ms ({gd.nfev} evals) "
            f"| {1e3 * t_linf:.1f} ms ({linf.nfev} evals) | {t_linf / t_gd:.2f} "
            f"| {linf.status}, {linf.sliding_time:.3g}, {linf.sliding_surfaces} |"
        )


if __name__ == "__main__":
    main()
