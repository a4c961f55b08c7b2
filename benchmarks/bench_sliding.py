#!/usr/bin/env python
"""Cost of l_inf-SAM runs that slide on their switching surfaces, against GD on the same data
and horizon, measured in the same run (issue target: a sliding multi-sample run costs at most
a few times the same run with GD).

Run on demand (not a pytest test)::

    python benchmarks/bench_sliding.py

For each case: CPU seconds (best of ``--repeat``) and field evaluations of ``flows.simulate``
for GD and l_inf-SAM (rescaled clock, ``original_time=False``, default tolerances), the ratio
l_inf / GD, l_inf-SAM's default call (with the original time, whose quadrature evaluates the
sliding combination at ~1,000-3,000 nodes), and what l_inf-SAM did (status, sliding time, most
surfaces sliding at once).
Printed as Markdown and, with ``--write``, kept as the last section of ``results.md``.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import time
from pathlib import Path

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
    parser.add_argument("--write", action="store_true", help="keep the table in results.md")
    args = parser.parse_args()
    simulate(gaussian_blobs(), "linf-sam", 2, [1.5, 0.8], rho=1.0, t_max=0.1)  # compile once
    lines = [
        "## l_inf-SAM sliding on several examples (`python benchmarks/bench_sliding.py --write`)",
        "",
        f"{datetime.date.today()}, {platform.machine()}, python {platform.python_version()}. CPU "
        f"time, best of {args.repeat}, rescaled clock without the original time; the ratio is "
        "l_inf-SAM / GD in the same run (target: a few).",
        "",
        "| case | GD | l_inf-SAM | ratio (CPU) | l_inf-SAM with log t "
        "| l_inf-SAM: status, sliding time, surfaces |",
        "|---|---|---|---|---|---|",
    ]
    print("\n".join(lines))
    for name, data, depth, alpha, rho, t_max in CASES:
        common = dict(data=data(), depth=depth, alpha=alpha, t_max=t_max, original_time=False)
        t_gd, gd = timed(args.repeat, algorithm="gd", **common)
        t_linf, linf = timed(args.repeat, algorithm="linf-sam", rho=rho, **common)
        t_default, _ = timed(
            args.repeat, algorithm="linf-sam", rho=rho, **{**common, "original_time": True}
        )
        lines.append(
            f"| {name}, τ ≤ {t_max:g} | {1e3 * t_gd:.1f} ms ({gd.nfev} evals) "
            f"| {1e3 * t_linf:.1f} ms ({linf.nfev} evals) | {t_linf / t_gd:.2f} "
            f"| {1e3 * t_default:.1f} ms "
            f"| {linf.status}, {linf.sliding_time:.3g}, {linf.sliding_surfaces} |"
        )
        print(lines[-1])
    if args.write:
        path = Path(__file__).resolve().parent / "results.md"
        text = path.read_text(encoding="utf-8")
        at = text.find("\n## l_inf-SAM sliding")
        head = text if at < 0 else text[:at]
        path.write_text(head.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
