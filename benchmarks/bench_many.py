#!/usr/bin/env python
"""Many runs in one call: ``simulate_many`` / ``iterate_many`` against a Python loop of single
calls, in the same run.

Run on demand (not a pytest test)::

    python benchmarks/bench_many.py              # print the table
    python benchmarks/bench_many.py --write      # also keep it in results.md (its own section)

Cases (100 runs each): the paper's single example mu = (1, ..., 5), l2-SAM at depth 2, rho = 1,
every other setting at its default, alpha log-spaced (in [0.05, 2]: the runs below alpha ~ 0.3
collapse, and are the single call's in the batch too; and in [0.4, 2], none collapses); the same
at alpha = 1 with rho over [0.1, 1]; ``iterate`` l2-SAM on a small regression (n = 20,
d = 30, eta = 0.05, every iterate recorded): rho = 0.05 and alpha log-spaced in [0.05, 1] for
10, 100 and 1000 steps; alpha = 0.3 and rho over [0, 0.2] (rho = 0 runs as gd) for 100 steps;
alpha = 0.3, rho = 0.05 and minibatches of 5 (``batch_size=5``) over the seeds 0, ..., 99 for
100 steps. Each time is the best of ``--repeat`` (5; loop and batch taking turns), one BLAS
thread (``OPENBLAS_NUM_THREADS=1``), numba's kernels compiled before the timing.

For the ``simulate`` cases the note also gives the share of the loop that the compiled kernels
take (every ``numba`` function of ``flows.compiled._*_kernels`` that Python calls, timed by a
wrapper; the rest is the Python driver, scipy's steps and numpy, which hold the GIL), the bound
it sets on running the runs in threads on the machine's cores (at best the kernels of different
runs overlap completely, and the batch takes ``max(Python, loop / cores)``), and the time of
``simulate_many(..., threads=cores)`` (the batch in that many parts at once); the seconds the
compiled kernels take inside the batch (the same timer): the batch runs the single calls'
kernels on the same numbers (its results are bit for bit theirs), so ``loop / kernels`` bounds
its ratio on one thread; and the runs the batch leaves to the single call (a collapse, an
event) with the seconds their single calls take alone, another bound.

The last columns compare each batched result with its single call: whether every field but the
arrays is equal (status, message, steps, backend, seed, ...), and the largest difference of
``theta`` relative to the single call's largest ``|theta|`` over the runs (0: bit for bit); for
the deterministic ``iterate`` cases, the same difference between the single call's compiled
loop and its numpy loop (``backend="numpy"``): how much the runs amplify rounding. The note
under the table gives, for the seeds case, the time numpy's generators alone take to draw its
batches (``numpy.random.default_rng([seed, k]).choice``, what every single run draws at every
step): a floor of the loop, which the batch avoids by drawing the same batches compiled.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import time
from collections.abc import Callable
from typing import Any, NamedTuple

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads its BLAS

import numpy as np  # noqa: E402
from sections import write_section  # noqa: E402
from timing import best_alternating  # noqa: E402

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
#: The cores the machine has (the bound of threads).
CORES = os.cpu_count() or 1
#: The seeds case: steps and minibatch size.
SEED_STEPS, BATCH = 100, 5


def regression() -> Dataset:
    """n = 20, d = 30, Gaussian features, targets from the first three."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 30))
    return Dataset(X, X[:, :3].sum(axis=1), task="regression")


class Case(NamedTuple):
    """A case: the loop of single calls and the batch, returning the same list of results;
    for ``iterate``, the loop on numpy's backend (None for the seeds, which run on numpy);
    for ``simulate``, the batch in a pool of :data:`CORES` threads."""

    name: str
    loop: Callable[[], list]
    batch: Callable[[], list]
    numpy_loop: Callable[[], list] | None = None
    threaded: Callable[[], list] | None = None


def cases() -> list[Case]:
    """The cases of the module docstring."""
    mu = single_example([1, 2, 3, 4, 5])
    data = regression()
    out = []
    for low in (0.05, 0.4):
        alphas = list(np.geomspace(low, 2.0, RUNS))
        out.append(
            Case(
                f"simulate l2-SAM, one example, L = 2, alpha in [{low}, 2]",
                lambda a=alphas: [simulate(mu, "l2-sam", 2, x, rho=1.0) for x in a],
                lambda a=alphas: simulate_many(mu, "l2-sam", 2, a, rho=1.0),
                threaded=lambda a=alphas: simulate_many(
                    mu, "l2-sam", 2, a, rho=1.0, threads=CORES
                ),  # fmt: skip
            )
        )
    rhos = list(np.linspace(0.1, 1.0, RUNS))
    out.append(
        Case(
            "simulate l2-SAM, one example, L = 2, alpha = 1, rho in [0.1, 1]",
            lambda: [simulate(mu, "l2-sam", 2, 1.0, rho=r) for r in rhos],
            lambda: simulate_many(mu, "l2-sam", 2, 1.0, rho=rhos),
            threaded=lambda: simulate_many(mu, "l2-sam", 2, 1.0, rho=rhos, threads=CORES),
        )
    )
    alphas = list(np.geomspace(0.05, 1.0, RUNS))
    for steps in (10, 100, 1000):
        kw = dict(rho=0.05, eta=0.05, steps=steps)
        out.append(
            Case(
                f"iterate l2-SAM, regression 20 x 30, {steps} steps",
                lambda kw=kw: [iterate(data, "l2-sam", 2, x, **kw) for x in alphas],
                lambda kw=kw: iterate_many(data, "l2-sam", 2, alphas, **kw),
                lambda kw=kw: [
                    iterate(data, "l2-sam", 2, x, backend="numpy", **kw) for x in alphas
                ],
            )
        )
    rhos = list(np.linspace(0.0, 0.2, RUNS))
    kw = dict(eta=0.05, steps=100)
    out.append(
        Case(
            "iterate l2-SAM, regression 20 x 30, 100 steps, rho in [0, 0.2]",
            lambda: [iterate(data, "l2-sam", 2, 0.3, rho=r, **kw) for r in rhos],
            lambda: iterate_many(data, "l2-sam", 2, 0.3, rho=rhos, **kw),
            lambda: [iterate(data, "l2-sam", 2, 0.3, rho=r, backend="numpy", **kw) for r in rhos],
        )
    )
    seed_kw = dict(rho=0.05, eta=0.05, steps=SEED_STEPS, batch_size=BATCH)
    seeds = list(range(RUNS))
    out.append(
        Case(
            f"iterate l2-SAM, regression 20 x 30, {SEED_STEPS} steps, batches of {BATCH}, "
            f"seeds 0..{RUNS - 1}",
            lambda: [iterate(data, "l2-sam", 2, 0.3, seed=s, **seed_kw) for s in seeds],
            lambda: iterate_many(data, "l2-sam", 2, 0.3, seed=seeds, **seed_kw),
        )
    )
    return out


KERNEL_MODULES = ("_field_kernels", "_segment_kernels", "_sliding_kernels",
                  "_quadrature_kernels", "_discrete_kernels")  # fmt: skip


def seconds(call: Callable[[], Any]) -> float:
    """The seconds one ``call()`` takes."""
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def kernel_seconds(loop: Callable[[], Any]) -> tuple[float, float]:
    """Seconds of one call of ``loop`` and of the compiled kernels in it (every numba function
    of :data:`KERNEL_MODULES` wrapped by a timer while it runs; the kernels compiled
    before)."""
    import importlib

    spent = [0.0]

    def timed(kernel):
        def call(*args, **kwargs):
            start = time.perf_counter()
            try:
                return kernel(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - start

        return call

    patched = []
    for name in KERNEL_MODULES:
        module = importlib.import_module(f"flows.compiled.{name}")
        for attr, value in vars(module).copy().items():
            if hasattr(value, "py_func"):
                patched.append((module, attr, value))
                setattr(module, attr, timed(value))
    try:
        total = seconds(loop)
    finally:
        for module, attr, value in patched:
            setattr(module, attr, value)
    return total, spent[0]


def draws_alone(repeat: int) -> float:
    """Seconds the seeds case's batches take to draw, every run and step (best of ``repeat``)."""
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        for seed in range(RUNS):
            for k in range(SEED_STEPS):
                np.random.default_rng([seed, k]).choice(20, BATCH, replace=False)
        best = min(best, time.perf_counter() - start)
    return best


#: The arrays whose difference :func:`compare` measures (the others must be equal).
ROUNDED = ("theta", "beta", "loss", "buffer")


class Row(NamedTuple):
    """The measurements of a case: seconds of the loop and the batch, whether every field but
    :data:`ROUNDED` is equal, theta's largest relative difference, batched against single and
    (``iterate``) the single call's numba loop against its numpy loop; for ``simulate``,
    seconds of a thread pool over the single calls and of the compiled kernels in the loop."""

    name: str
    loop: float
    batch: float
    equal: bool
    difference: float
    numpy_loop: float
    threads: float
    timed_pass: float
    kernels: float
    batch_pass: float
    batch_kernels: float
    left: int
    left_alone: float


def compare(a, b) -> tuple[bool, float]:
    """Whether every field but :data:`ROUNDED` is equal (arrays bit for bit) and those have the
    same shapes, and the largest ``|theta_a - theta_b|`` relative to ``max |theta_b|`` (a flow,
    which has no ``theta``: 0, its arrays all compared bit for bit)."""
    equal = True
    for field in dataclasses.fields(b):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(y, np.ndarray):
            if x.shape != y.shape:
                return False, np.inf
            if field.name not in ROUNDED:
                equal = equal and bool(np.array_equal(x, y, equal_nan=y.dtype.kind == "f"))
        else:
            equal = equal and x == y
    if not hasattr(b, "theta"):  # a flow: every array bit for bit
        rounded = all(
            np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True)
            for name in ROUNDED
            if hasattr(b, name)
        )
        return equal and rounded, 0.0
    return equal, float(np.max(np.abs(a.theta - b.theta)) / np.max(np.abs(b.theta)))


def largest_difference(runs, singles) -> float:
    """The largest ``|theta - theta_single|`` relative to ``max |theta_single|`` over the runs."""
    return max(compare(a, b)[1] for a, b in zip(runs, singles, strict=True))


def left_to_single_calls(batch: Callable[[], list]) -> tuple[int, Callable[[], list]]:
    """How many single calls a ``simulate_many`` batch leaves to :func:`flows.simulate` (a
    collapse, an event; those it started go on from its first kernel call,
    :func:`flows.many_flows.go_on`), and one call that makes them again: a floor of the
    batch."""
    import flows.many as many

    calls: list = []
    originals = {"simulate": many.simulate, "go_on": many.go_on}

    def spy(name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls.append((originals[name], args, kwargs))
            return originals[name](*args, **kwargs)

        return call

    for name in originals:
        setattr(many, name, spy(name))
    try:
        batch()
    finally:
        for name, original in originals.items():
            setattr(many, name, original)
    return len(calls), lambda: [f(*a, **k) for f, a, k in calls]


def measure(repeat: int) -> list[Row]:
    """A :class:`Row` per case, each time the best of ``repeat`` (loop, batch, and for
    ``simulate`` the batch in threads and the single calls the batch leaves, taking turns; the
    kernels' timer after them)."""
    simulate(
        single_example([1, 2]), "l2-sam", rho=1.0, backend="numba"
    )  # compile in the foreground
    iterate(single_example([1, 2]), "l2-sam", rho=1.0, steps=2, backend="numba")
    rows = []
    for case in cases():
        calls = [case.loop, case.batch]
        left = 0
        if case.threaded is not None:
            left, again = left_to_single_calls(case.batch)
            calls += [case.threaded, again]
        best, results = best_alternating(repeat, *calls)
        singles, batched = results[0], results[1]
        compared = [compare(a, b) for a, b in zip(batched, singles, strict=True)]
        numpy_loop = np.nan
        if case.numpy_loop is not None:
            numpy_loop = largest_difference(case.numpy_loop(), singles)
        threads = timed_pass = kernels = batch_pass = batch_kernels = left_alone = np.nan
        if case.threaded is not None:
            threads, left_alone = best[2], best[3]
            timed_pass, kernels = min(kernel_seconds(case.loop) for _ in range(repeat))
            batch_pass, batch_kernels = min(kernel_seconds(case.batch) for _ in range(repeat))
        rows.append(
            Row(case.name, best[0], best[1], all(c[0] for c in compared),
                max(c[1] for c in compared), numpy_loop, threads, timed_pass, kernels,
                batch_pass, batch_kernels, left, left_alone)
        )  # fmt: skip
    return rows


def left_note(row: Row) -> str:
    """What the runs a batch leaves to the single call cost."""
    if row.left == 0:
        return "It leaves no run to the single call."
    return (
        f"It leaves {row.left} runs to the single call, which take {row.left_alone:.3f} s "
        f"alone (at most {row.loop / row.left_alone:.2f}x)."
    )


def table(rows: list[Row], repeat: int, draws: float) -> str:
    """The rows as a markdown section."""
    lines = [
        HEADING,
        "",
        f"{datetime.date.today()}, {platform.processor() or platform.machine()}, load average "
        f"{os.getloadavg()[0]:.1f}, OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}, "
        f"best of {repeat}, {RUNS} runs per case.",
        "",
        "| case | loop of single calls (s) | batched (s) | ratio | other fields equal | "
        "theta: batched vs single | theta: single, numba vs numpy |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        reference = "-" if np.isnan(row.numpy_loop) else f"{row.numpy_loop:.1e}"
        lines.append(
            f"| {row.name} | {row.loop:.3f} | {row.batch:.3f} | {row.loop / row.batch:.2f}x | "
            f"{'yes' if row.equal else 'no'} | {row.difference:.1e} | {reference} |"
        )
    lines.append("")
    for row in rows:
        if np.isnan(row.kernels):
            continue
        python = row.timed_pass - row.kernels
        share = row.kernels / row.timed_pass
        lines.append(
            f"{row.name}: in the loop the compiled kernels take {row.kernels:.3f} s of "
            f"{row.timed_pass:.3f} s timed kernel by kernel ({share:.0%}), Python {python:.3f} s "
            f"(a pool of single calls in threads on {CORES} cores: at most "
            f"{1 / max(1 - share, 1 / CORES):.2f}x the loop). In the batch they take "
            f"{row.batch_kernels:.3f} s of {row.batch_pass:.3f} s: on one thread it can be at "
            f"most {row.loop / row.batch_kernels:.2f}x the loop. {left_note(row)} "
            f"simulate_many(threads={CORES}) took {row.threads:.3f} s "
            f"({row.loop / row.threads:.2f}x)."
        )
    seeds = rows[-1]
    lines += [
        "",
        f"Seeds case: numpy's generators take {draws:.3f} s of the loop's {seeds.loop:.3f} s "
        f"({draws / seeds.loop:.0%}) to draw its batches; the batch draws the same batches in "
        "compiled code (flows.seeded_draws, checked against numpy's).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="best of this many (5)")
    parser.add_argument("--write", action="store_true", help="keep the table in results.md")
    args = parser.parse_args()
    text = table(measure(args.repeat), args.repeat, draws_alone(args.repeat))
    print(text)
    if args.write:
        write_section(text, HEADING)


if __name__ == "__main__":
    main()
