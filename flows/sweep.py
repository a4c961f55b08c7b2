"""Regenerate the paper's figures: ``python -m flows.sweep``.

    python -m flows.sweep                 # every figure into figures/
    python -m flows.sweep --list          # names and titles
    python -m flows.sweep fig4_amplification --out /tmp/figs --jobs 2
    python -m flows.sweep --fresh         # ignore the cache

Each figure declares its expensive runs as :class:`~flows.cache.Task` objects; the runs of all
selected figures are computed in parallel (``--jobs``), cached on disk (``--cache``), then the
figures are drawn. A rerun, or a rerun after an interruption, only computes what is missing.
"""
from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from .cache import Cache, Result, Task, compute
from .run import OneLineParser

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "figures"
DEFAULT_CACHE = Path(__file__).resolve().parent.parent / ".cache" / "sweep"


def _compute_one(task: Task) -> tuple[Task, Result, float]:
    start = time.perf_counter()
    return task, compute(task), time.perf_counter() - start


def run_tasks(tasks: list[Task], cache: Cache, jobs: int, fresh: bool = False,
              log=print, seconds: dict[str, float] | None = None) -> tuple[dict[str, Result], int]:
    """Results of ``tasks`` by key, computing the missing ones on ``jobs`` processes.

    Returns the results and how many were computed (the rest came from the cache); the compute
    time of each computed task is added to ``seconds`` (by key) when given.
    """
    unique = {t.key(): t for t in tasks}
    results: dict[str, Result] = {}
    missing = []
    for key, task in unique.items():
        cached = None if fresh else cache.load(task)
        if cached is None:
            missing.append(task)
        else:
            results[key] = cached
    if not missing:
        return results, 0
    log(f"computing {len(missing)} runs ({len(unique) - len(missing)} cached) on {jobs} process(es)")
    done = 0
    start = time.perf_counter()

    def finish(task: Task, result: Result, took: float) -> None:
        nonlocal done
        cache.store(task, result)
        results[task.key()] = result
        if seconds is not None:
            seconds[task.key()] = took
        done += 1
        log(f"  [{done}/{len(missing)}] {task.describe()} {took:.1f}s "
            f"(elapsed {time.perf_counter() - start:.0f}s)")

    if jobs <= 1 or len(missing) == 1:
        for task in missing:
            finish(*_compute_one(task))
    else:
        with ProcessPoolExecutor(max_workers=jobs,
                                 mp_context=multiprocessing.get_context("fork")) as pool:
            futures = [pool.submit(_compute_one, t) for t in missing]
            for fut in as_completed(futures):
                finish(*fut.result())
    return results, len(missing)


def parser() -> argparse.ArgumentParser:
    """The argument parser."""
    p = OneLineParser(prog="python -m flows.sweep", description="Regenerate the paper's figures.")
    p.add_argument("names", nargs="*", help="figures to make (default: all; see --list)")
    p.add_argument("--list", action="store_true", help="list the figures and exit")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="output directory (default figures/)")
    p.add_argument("--cache", default=str(DEFAULT_CACHE), help="cache directory")
    p.add_argument("--jobs", type=int, default=multiprocessing.cpu_count(),
                   help="parallel processes (default: all cores)")
    p.add_argument("--fresh", action="store_true", help="ignore cached results")
    p.add_argument("--quick", action="store_true",
                   help="tiny configuration (smoke test; not the paper's figures)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; exit status 2 on bad arguments."""
    from .paper_figures import FIGURES

    args = parser().parse_args(argv)
    if args.list:
        for name, fig in FIGURES.items():
            print(f"{name:28s} {fig.title}")
        return 0
    unknown = [n for n in args.names if n not in FIGURES]
    if unknown:
        print(f"error: unknown figure(s) {', '.join(unknown)}; see --list", file=sys.stderr)
        return 2
    if args.jobs < 1:
        print("error: --jobs must be >= 1", file=sys.stderr)
        return 2
    selected = [FIGURES[n] for n in (args.names or FIGURES)]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = Cache(args.cache)
    start = time.perf_counter()
    plan = {fig.name: fig.tasks(args.quick) for fig in selected}
    seconds: dict[str, float] = {}
    results, computed = run_tasks([t for ts in plan.values() for t in ts], cache, args.jobs,
                                  args.fresh, seconds=seconds)
    for fig in selected:
        t0 = time.perf_counter()
        path = out / f"{fig.name}.png"
        fig.draw([results[t.key()] for t in plan[fig.name]], args.quick, path)
        keys = {t.key() for t in plan[fig.name]}
        fresh = [k for k in keys if k in seconds]
        print(f"wrote {path}: {len(keys)} runs ({len(fresh)} computed in "
              f"{sum(seconds[k] for k in fresh):.1f}s of compute, {len(keys) - len(fresh)} cached), "
              f"drawn in {time.perf_counter() - t0:.1f}s")
    print(f"done: {len(selected)} figure(s), {computed} runs computed, "
          f"{len(results) - computed} from cache, {time.perf_counter() - start:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
