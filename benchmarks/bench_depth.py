#!/usr/bin/env python
"""Depth 3 and 4 on everyday data with the defaults: how many runs end with status 0 or 1, and
how long they take.

Run on demand (not a pytest test)::

    python benchmarks/bench_depth.py              # 10 data sets x L in {3, 4} x 5 algorithms
    python benchmarks/bench_depth.py --write      # also keep the table in results.md

Each data set: n = 30 Gaussian points in d = 8, labels from a Gaussian teacher w (separable
through the origin); the initialisation ``orthant_init(sign(w), L, 0.5)``, the orthant of the
teacher. ``simulate`` with nothing but the algorithm's hyper-parameters (rho = 0.1; LE-SAM
sigma = 0.1, rho_max = 0.5) and ``t_max = 100`` (beyond every blow-up seen). Each run is its own
process, stopped after ``--timeout`` seconds (counted as a failure), ``--jobs`` at a time. The
column "by own steps" counts the runs that l_inf-SAM's own steps continued
(:mod:`flows.integrator.stepping`), their largest ``step_error``, and those whose
``step_error`` is above ``PATH_TOL``: their end is settled, their path is not.
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing as mp
import os
import platform
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from sections import write_section

from flows.integrator.stepping import PATH_TOL

ALGORITHMS = {
    "gd": {},
    "l2-sam": {"rho": 0.1},
    "linf-sam": {"rho": 0.1},
    "usam": {"rho": 0.1},
    "le-sam": {"sigma": 0.1, "rho_max": 0.5},
}
N, D, SCALE, T_MAX = 30, 8, 0.5, 100.0
HEADING = "## Depth 3 and 4 with the defaults (`python benchmarks/bench_depth.py --write`)"


def teacher_set(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(X, y, sign w)``: Gaussian X (N, D), y = sign(X w) for a Gaussian teacher w."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, D))
    w = rng.standard_normal(D)
    return X, np.sign(X @ w), np.sign(w)


def run_one(seed: int, depth: int, algorithm: str, queue) -> None:
    """One default ``simulate`` call; puts (status, seconds, tau, message, cause, step_error)
    on ``queue`` (``step_error`` None where the path has none of l_inf-SAM's own steps)."""
    from flows import Dataset, orthant_init, simulate

    X, y, signs = teacher_set(seed)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traj = simulate(
            Dataset(X, y),
            algorithm,
            depth,
            orthant_init(signs, depth, SCALE),
            t_max=T_MAX,
            original_time=False,
            **ALGORITHMS[algorithm],
        )
    seconds = time.perf_counter() - start
    stepped = traj.step_error if np.isfinite(traj.own_steps_from) else None
    queue.put((traj.status, seconds, float(traj.tau[-1]), traj.message, traj.cause.value,
               stepped))  # fmt: skip


def timed_run(seed: int, depth: int, algorithm: str, timeout: float) -> tuple:
    """``run_one`` in its own process: ``(status, seconds, tau, message, cause, step_error)``,
    with status
    None where it does not end within ``timeout`` seconds (cause 'timeout') or crashes."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=run_one, args=(seed, depth, algorithm, queue))
    proc.start()
    proc.join(timeout)
    if proc.is_alive():
        proc.kill()
        proc.join()
        return (None, timeout, float("nan"), f"no result within {timeout:g} s", "timeout", None)
    if queue.empty():
        return (None, 0.0, float("nan"), "crashed", "crashed", None)
    return queue.get()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=10, help="number of data sets (seeds 0..)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per run")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time")
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS))
    parser.add_argument("--write", action="store_true", help="keep the table in results.md")
    args = parser.parse_args()
    run_one(0, 3, "gd", mp.get_context("fork").SimpleQueue())  # numba's compile, untimed
    cases = [
        (seed, depth, algorithm)
        for seed in range(args.sets)
        for depth in (3, 4)
        for algorithm in args.algorithms.split(",")
    ]
    with ThreadPoolExecutor(args.jobs) as pool:  # each thread waits on its run's process
        results = list(pool.map(lambda case: timed_run(*case, args.timeout), cases))
    lines = [
        HEADING,
        "",
        f"- {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}, "
        f"{platform.platform()}, nproc {os.cpu_count()}, {args.jobs} run(s) at a time, "
        f"load {os.getloadavg()[0]:.2f}",
        f"- {args.sets} teacher data sets (n = {N}, d = {D}), orthant_init(sign w, L, {SCALE}), "
        f"t_max = {T_MAX:g}, timeout {args.timeout:g} s",
        "",
        "| algorithm | L | status 0 or 1 | by own steps (largest step_error) | median s | worst s "
        "| other endings (cause: runs) |",
        "|---|---|---|---|---|---|---|",
    ]
    detail = []
    for algorithm in args.algorithms.split(","):
        for depth in (3, 4):
            rows = [r for c, r in zip(cases, results, strict=True) if c[1:] == (depth, algorithm)]
            ok = sum(r[0] in (0, 1) for r in rows)
            secs = np.array([r[1] for r in rows])
            causes = [r[4] for r in rows if r[0] not in (0, 1)]
            other = ", ".join(f"{c}: {causes.count(c)}" for c in sorted(set(causes)))
            stepped = [r[5] for r in rows if r[0] in (0, 1) and r[5] is not None]
            unsettled = sum(e > PATH_TOL for e in stepped)
            by_steps = f"{len(stepped)} ({max(stepped):.1e})" if stepped else "-"
            by_steps += f", {unsettled} with only the end settled" if unsettled else ""
            lines.append(
                f"| {algorithm} | {depth} | {ok}/{len(rows)} | {by_steps} | "
                f"{np.median(secs):.2f} | {secs.max():.2f} | {other or '-'} |"
            )
    for case, r in zip(cases, results, strict=True):
        detail.append(f"seed {case[0]} L={case[1]} {case[2]}: status {r[0]}, {r[1]:.2f} s, "
                      f"tau {r[2]:.6g}: {r[3][:160]}")  # fmt: skip
    total_ok = sum(r[0] in (0, 1) for r in results)
    lines += ["", f"All: {total_ok}/{len(results)} end with status 0 or 1; worst "
              f"{max(r[1] for r in results):.2f} s.", ""]  # fmt: skip
    text = "\n".join(lines)
    print(text)
    print("\n".join(detail))
    if args.write:
        write_section(text, HEADING)


if __name__ == "__main__":
    main()
