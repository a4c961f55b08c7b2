#!/usr/bin/env python
"""Many runs in one call: ``simulate_many`` / ``iterate_many`` against a Python loop of single
calls, in the same run.

Run on demand (not a pytest test)::

    python benchmarks/bench_many.py              # print the table
    python benchmarks/bench_many.py --write      # also keep it in results.md (its own section)

Cases (100 runs each, alpha log-spaced): the paper's single example mu = (1, ..., 5), l2-SAM at
depth 2, rho = 1, every other setting at its default (alpha in [0.05, 2]: the runs below
alpha ~ 0.3 collapse; and alpha in [0.4, 2], none collapses); ``iterate`` l2-SAM on a small
regression (n = 20, d = 30, rho = 0.05, eta = 0.05, every iterate recorded) for 10, 100 and 1000
steps. Each time is the best of ``--repeat`` (5; loop and batch taking turns), one BLAS thread
(``OPENBLAS_NUM_THREADS=1``), numba's kernels compiled before the timing. The last column says
whether every batched result equals its single call bit for bit.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads its BLAS

import numpy as np  # noqa: E402
from sections import write_section  # noqa: E402

from flows import (  # noqa: E402
    Dataset,
    iterate,
    iterate_many,
    simulate,
    simulate_many,
    single_example,
)

HEADING = "## Many runs in one call (`python benchmarks/bench_many.py --write`)"
RUNS = 100


def regression() -> Dataset:
    """n = 20, d = 30, Gaussian features, targets from the first three."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 30))
    return Dataset(X, X[:, :3].sum(axis=1), task="regression")


def cases() -> list[tuple[str, object, object]]:
    """``(name, loop, batch)``: two callables returning the same list of results."""
    mu = single_example([1, 2, 3, 4, 5])
    data = regression()
    out: list[tuple[str, object, object]] = []
    for low in (0.05, 0.4):
        alphas = list(np.geomspace(low, 2.0, RUNS))
        out.append(
            (
                f"simulate l2-SAM, one example, L = 2, alpha in [{low}, 2]",
                lambda a=alphas: [simulate(mu, "l2-sam", 2, x, rho=1.0) for x in a],
                lambda a=alphas: simulate_many(mu, "l2-sam", 2, a, rho=1.0),
            )
        )
    alphas = list(np.geomspace(0.05, 1.0, RUNS))
    for steps in (10, 100, 1000):
        kw = dict(rho=0.05, eta=0.05, steps=steps)
        out.append(
            (
                f"iterate l2-SAM, regression 20 x 30, {steps} steps",
                lambda kw=kw: [iterate(data, "l2-sam", 2, x, **kw) for x in alphas],
                lambda kw=kw: iterate_many(data, "l2-sam", 2, alphas, **kw),
            )
        )
    return out


def same(a, b) -> bool:
    """Every field equal, arrays bit for bit (NaN where NaN)."""
    for field in dataclasses.fields(a):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, np.ndarray):
            if x.shape != y.shape or not np.array_equal(x, y, equal_nan=x.dtype.kind == "f"):
                return False
        elif x != y:
            return False
    return True


def measure(repeat: int) -> list[tuple[str, float, float, bool]]:
    """``(case, loop seconds, batch seconds, bit for bit)`` per case, best of ``repeat``."""
    simulate(
        single_example([1, 2]), "l2-sam", rho=1.0, backend="numba"
    )  # compile in the foreground
    iterate(single_example([1, 2]), "l2-sam", rho=1.0, steps=2, backend="numba")
    rows = []
    for name, loop, batch in cases():
        best_loop = best_batch = np.inf
        for _ in range(repeat):
            start = time.perf_counter()
            singles = loop()  # type: ignore[operator]
            best_loop = min(best_loop, time.perf_counter() - start)
            start = time.perf_counter()
            batched = batch()  # type: ignore[operator]
            best_batch = min(best_batch, time.perf_counter() - start)
        equal = all(same(a, b) for a, b in zip(batched, singles, strict=True))
        rows.append((name, best_loop, best_batch, equal))
    return rows


def table(rows: list[tuple[str, float, float, bool]], repeat: int) -> str:
    """The rows as a markdown section."""
    lines = [
        HEADING,
        "",
        f"{datetime.date.today()}, {platform.processor() or platform.machine()}, load average "
        f"{os.getloadavg()[0]:.1f}, OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}, "
        f"best of {repeat}, {RUNS} runs per case.",
        "",
        "| case | loop of single calls (s) | batched (s) | ratio | bit for bit |",
        "|---|---|---|---|---|",
    ]
    for name, loop, batch, equal in rows:
        lines.append(
            f"| {name} | {loop:.3f} | {batch:.3f} | {loop / batch:.2f}x | "
            f"{'yes' if equal else 'no'} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="best of this many (5)")
    parser.add_argument("--write", action="store_true", help="keep the table in results.md")
    args = parser.parse_args()
    text = table(measure(args.repeat), args.repeat)
    print(text)
    if args.write:
        write_section(text, HEADING)


if __name__ == "__main__":
    main()
