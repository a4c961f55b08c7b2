#!/usr/bin/env python
"""A big l2-SAM regime map: the leading coordinate over an n x n (alpha/rho, tau) grid.

    python examples/big_phase_map.py --scheduler local --jobs 2          # 300 x 300, this machine
    python examples/big_phase_map.py --scheduler tcp://host:8786 --n 1000 --chunk 20
    python examples/big_phase_map.py --jobs 2 --n 100                    # local process pool

:func:`analysis.regimes.leaders.leader_phase_diagram` (single example ``mu``, L = 2, rho = 1, so the
map depends on alpha / rho only) over ``--n`` log-spaced ratios in ``--ratios`` and ``--n``
times in ``[0, --tau-max]``, one flow per ratio, ``--chunk`` ratios per task. The tasks go
through the sweep's runner (:func:`flows.sweep.runner.run_tasks`): on a dask cluster with
``--scheduler`` (:mod:`flows.sweep.dask_cluster`; ``local`` starts one of ``--jobs`` workers here), else
on a local pool of ``--jobs`` processes; cached in ``--cache``, so an interrupted map resumes
and a rerun only redraws. Writes ``OUT.npz`` (``ratios``, ``tau``, ``lead``: 0-based leading
coordinate, -1 collapsed, -2 not reached; ``mu``) and ``OUT.png``, and prints the wall time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from analysis.regimes.leaders import leader_phase_diagram
from flows.run import OneLineParser
from flows.sweep.cli import check_directory
from flows.sweep.registry import Result, Task, register
from flows.sweep.runner import run_tasks
from flows.sweep.store import Cache

#: seconds per flow, roughly (collapsing runs, at small alpha / rho, cost about 3x more)
SECONDS_PER_RUN = 0.15


def grid_ratios(span: list[float], n: int) -> np.ndarray:
    """The map's ``n`` ratios, log-spaced over ``span``."""
    return np.geomspace(span[0], span[1], n)


def phase_rows(params: dict) -> Result:
    """One task: the map's rows ``rows[0]:rows[1]`` (``n`` ratios by ``n`` times)."""
    first, last = params["rows"]
    ratios = grid_ratios(params["span"], params["n"])[first:last]
    tau, lead = leader_phase_diagram(params["mu"], ratios, params["tau_max"], params["n"])
    return {"tau": tau, "lead": lead}


def phase_rows_cost(params: dict) -> float:
    """Rough seconds of a task: collapsing runs (alpha / rho below ~0.35 for mu = 1..5) first."""
    first, last = params["rows"]
    ratios = grid_ratios(params["span"], params["n"])[first:last]
    return SECONDS_PER_RUN * float(np.sum(np.where(ratios < 0.35, 3.0, 1.0)))


register("big-phase-rows", phase_rows, cost=phase_rows_cost, keys=("tau", "lead"))


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="python examples/big_phase_map.py", description=__doc__.strip().split("\n")[0]
    )
    p.add_argument("--scheduler", metavar="ADDRESS", help="dask scheduler tcp://host:port or local")
    p.add_argument("--jobs", type=int, default=2, help="processes / local dask workers (2)")
    p.add_argument("--n", type=int, default=300, help="ratios and times of the grid (300)")
    p.add_argument("--chunk", type=int, default=10, help="ratios per task (10)")
    p.add_argument("--mu", default="1,2,3,4,5", help="the example, increasing (1,2,3,4,5)")
    p.add_argument("--ratios", default="0.08,1.6", help="alpha/rho range LO,HI (0.08,1.6)")
    p.add_argument("--tau-max", type=float, default=6.0, help="horizon in tau (6)")
    p.add_argument("--out", default="big_phase_map", help="writes OUT.npz and OUT.png")
    p.add_argument("--cache", default=str(Path(".cache") / "big_phase_map"), help="task cache")
    p.add_argument("--fresh", action="store_true", help="ignore cached tasks")
    return p


def tasks_of(args: argparse.Namespace) -> tuple[np.ndarray, list[Task]]:
    """The grid's ratios and its tasks (``ValueError`` naming a bad option)."""
    if not 2 <= args.n <= 100_000:
        raise ValueError(f"--n must be in 2..100000, got {args.n}")
    if args.chunk < 1:
        raise ValueError(f"--chunk must be >= 1, got {args.chunk}")
    try:
        mu = [float(m) for m in args.mu.split(",")]
        lo, hi = (float(r) for r in args.ratios.split(","))
    except ValueError:
        raise ValueError("--mu and --ratios are comma-separated numbers") from None
    if not 0 < lo < hi < np.inf:
        raise ValueError(f"--ratios must be 0 < LO < HI, got {args.ratios}")
    ratios = grid_ratios([lo, hi], args.n)
    tasks = [
        Task(
            "big-phase-rows",
            {
                "mu": mu,
                "span": [lo, hi],
                "n": int(args.n),
                "rows": [i, min(i + args.chunk, args.n)],
                "tau_max": float(args.tau_max),
            },
        )
        for i in range(0, args.n, args.chunk)
    ]
    # the analysis checks mu and the horizon: on one cheap row, before any task is sent
    leader_phase_diagram(mu, ratios[-1:], args.tau_max, 2)
    return ratios, tasks


def draw(path: Path, mu: list[float], ratios: np.ndarray, tau: np.ndarray, lead: np.ndarray):
    """The map as a PNG (figures' palette; regime boundaries from the analysis)."""
    import matplotlib

    from analysis.regimes.boundaries import collapse_certificate_boundary, regime3_boundary
    from figures.common import coordinate_colors, plt, save

    d = len(mu)
    colors = np.vstack([[0.85, 0.85, 0.85, 1.0], coordinate_colors(d)])
    cmap = matplotlib.colors.ListedColormap(colors).with_extremes(bad="white")
    fig, ax = plt.subplots(figsize=(8.5, 5.2), constrained_layout=True)
    mesh = ax.pcolormesh(
        tau, ratios, np.ma.masked_less(lead + 1, 0), cmap=cmap, vmin=-0.5, vmax=d + 0.5
    )
    ax.set_yscale("log")
    for value, label, style in (
        (collapse_certificate_boundary(mu), "collapse certified below", ":"),
        (regime3_boundary(mu), "regime 3 above", "--"),
    ):
        ax.axhline(value, color="#D55E00", ls=style, lw=1.5, label=f"{label}: α/ρ = {value:.4g}")
    cbar = fig.colorbar(mesh, ax=ax, ticks=range(0, d + 1))
    cbar.ax.set_yticklabels(["β = 0"] + [f"j = {j + 1}" for j in range(d)])
    cbar.set_label("leading coordinate argmax_j |β_j(τ)|")
    ax.set(
        xlabel="rescaled time τ",
        ylabel="α / ρ",
        title=f"ℓ2-SAM, L = 2, μ = {mu}: leader over a {len(ratios)} x {len(tau)} grid",
    )
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)
    save(fig, path)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        ratios, tasks = tasks_of(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    problem = check_directory(str(out.parent), "--out") or check_directory(args.cache, "--cache")
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    executor = None
    if args.scheduler is not None:
        from flows.sweep.dask_cluster import SchedulerError, connect

        try:
            executor = connect(args.scheduler, args.jobs)
        except SchedulerError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    start = time.perf_counter()
    try:
        results, computed = run_tasks(
            tasks, Cache(args.cache), args.jobs, args.fresh, executor=executor
        )
    finally:
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
    took = time.perf_counter() - start
    lead = np.vstack([results[t.key()]["lead"] for t in tasks])
    tau = results[tasks[0].key()]["tau"]
    mu = tasks[0].params["mu"]
    np.savez(out.with_suffix(".npz"), ratios=ratios, tau=tau, lead=lead, mu=np.array(mu))
    draw(out.with_suffix(".png"), mu, ratios, tau, lead)
    where = args.scheduler or f"{args.jobs} local process(es)"
    print(
        f"{args.n} x {args.n} map ({len(tasks)} tasks, {computed} computed) in {took:.1f} s "
        f"on {where}; rows not reached: {int(np.sum(np.any(lead == -2, axis=1)))}; wrote "
        f"{out.with_suffix('.npz')} and {out.with_suffix('.png')}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
