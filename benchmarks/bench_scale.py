#!/usr/bin/env python
"""Time against the data size ``n d``: ``iterate`` and ``simulate`` beside the numpy floor.

Run on demand (not a pytest test)::

    python benchmarks/bench_scale.py                      # n d = 1e2 .. 1e7, ~5 min
    python benchmarks/bench_scale.py --quick              # n d = 1e2 .. 1e5, < 1 min
    python benchmarks/bench_scale.py --write --plot docs/scale.png
    python benchmarks/bench_scale.py --only memory --write   # peak memory against steps

Cases, at depth L = 2 on a geometric grid of ``n d`` (and L = 3 at two sizes):

* regression: ``X ~ N(0, 1)`` (n, d) with ``n <= d``, ``y = X beta*`` with ``beta*_j = 1`` on the
  first five coordinates, the squared loss, every layer at ``alpha = 0.1``;
* classification: ``X ~ N(0, 1)`` with ``n >= d``, ``y = sign(X w)`` for a teacher
  ``w = |N(0, 1)|`` (so that the positive init's orthant separates the data), the logistic
  loss, ``alpha = 0.1``;
* GD and l2-SAM (``rho = 0.05``), step size ``eta = 0.1 n / (sqrt n + sqrt d)^2`` (a tenth of
  ``1 / ||X||^2 / n`` at the init's scale).

**steps**: ``iterate(data, algorithm, L, alpha, eta=eta, steps=K, record_every=K)`` (numba
where installed) against the loop a user writes for the same steps in numpy
(``beta = theta.prod(0)``, ``grad = (l'(X beta - y) @ X / n) * beta / theta``, SAM's
``theta + rho g / ||g||``), ``K = 1e8 / (n d)`` steps, at least 100 and at most 2000 (from
about 3000 steps on, l2-SAM drives some classification weights below ``1e-100``, where steps
leave the plain float range); the table gives the largest relative difference of the final
``theta`` between the two, and the time of ``backend="numpy"`` (the steps without numba) over
the floor's.

**flows**: ``simulate(data, algorithm, L, alpha, t_max=T, clock="original", rtol=RTOL)``
(everything else at its default, 201 output times) against scipy ``solve_ivp`` with
``method="DOP853"`` at the same ``rtol`` (``atol`` 1e-30: relative control, as the log chart's)
on the same numpy gradient, ``dtheta/dt = -grad L(theta + eps)``, with the same 201 output
times; ``T = 100 eta``. The table gives the largest relative difference of ``beta(T)``.

**memory**: the peak resident memory (``ru_maxrss``) of a fresh process that runs one long
``simulate`` at ``n d = 1e6`` (regression, GD, ``n`` 20, ``d`` 50000: 3.2 MB of dense output
per step) against its steps, set by ``t_max`` (limited by stability from ``t ~ 1`` on; 201
outputs in every run): with the defaults (the path sampled and released every
:data:`flows.integrator.segments.HELD_BYTES` of dense output, ``K`` sampled in batches of
:data:`flows.integrator.assemble.EXPONENT_BLOCK`), and with both set past any run (the whole
path held and sampled at once); and with the defaults but compiled calls of up to 256 MB of
steps (:data:`flows.compiled.segment.STACK_BYTES`, 32 MB by default: a call's buffer is
alive until the path hands it to the output). Each process also holds numpy, scipy, numba's
kernels, the data and the output.

The data's separability is certified by the teacher (every ``y_i <w, x_i> > 0``, ``w > 0``), in
place of the linear programs of :class:`flows.Dataset` and of ``simulate``'s check that the
init's orthant separates the data (HiGHS takes 5 s at n = 2000, d = 500 and more than five
minutes at n = 5000, d = 2000; ``simulate`` would count its LP in the first call).

Timings: one process, ``OPENBLAS_NUM_THREADS=1`` (a shared machine's threads make BLAS times
vary tenfold), samflows and its floor taking turns, each the best of ``--repeats`` calls (at
most 3 at ``n d >= 1e6``); samflows' compiled kernels are compiled (in the foreground) or
loaded before the first timing.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads its BLAS
os.environ.setdefault("SAMFLOWS_NO_BACKGROUND_COMPILE", "1")  # numba from the first call on

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402
from scipy.special import expit  # noqa: E402
from sections import write_section  # noqa: E402

import flows.data  # noqa: E402
import flows.integrator.arguments  # noqa: E402
from flows import Dataset, iterate, simulate  # noqa: E402

HEADING = "## Scale: time against n d (`python benchmarks/bench_scale.py --write`)"
MEMORY_HEADING = (
    "## Scale: peak memory against steps (`python benchmarks/bench_scale.py --only memory --write`)"
)
#: The long run of the memory part: (task, algorithm, n, d), and its horizons.
MEMORY_RUN = ("regression", "gd", 20, 50_000)
MEMORY_T = (0.1, 2.5, 10.0, 40.0)
MEMORY_HOW = ("defaults", "whole", "large calls")
#: (n, d) per grid point: regression wide (n <= d), classification tall (n >= d).
SHAPES = {
    "regression": [(10, 10), (20, 50), (50, 200), (100, 1000), (200, 5000), (500, 20000)],
    "classification": [(20, 5), (50, 20), (200, 50), (500, 200), (2000, 500), (10000, 1000)],
}
ALGORITHMS = {"gd": {}, "l2-sam": {"rho": 0.05}}
ALPHA, RTOL, STEP_WORK, MAX_STEPS, HORIZON = 0.1, 1e-8, 1e8, 2000, 100.0
DEPTH3_SIZES = (1e5, 1e6)
#: The steps of issue "research scale" at depth 2 and 3: (task, algorithm, n, d, steps).
NAMED_STEPS = [("regression", "gd", 200, 2000, 3000), ("classification", "l2-sam", 2000, 784, 300)]
SIGN_CONSTRAINED_LP = flows.integrator.arguments.sign_constrained_separable


def teacher(d: int) -> np.ndarray:
    """The teacher ``w = |N(0, 1)|`` (d,) of the classification data (seeded by ``d``)."""
    return np.abs(np.random.default_rng(d).standard_normal(d))


def certified_separable(X: np.ndarray, y: np.ndarray) -> bool:
    """Separability from the teacher: every ``y_i <w, x_i> > 0``."""
    return bool(np.all(y * (X @ teacher(X.shape[1])) > 0))


def certified_sign_separable(data: Dataset, signs: np.ndarray) -> bool:
    """Separability by a predictor of the signs ``signs`` (``simulate``'s check of its init):
    the teacher, of positive entries, certifies it for positive signs."""
    if np.all(signs > 0) and certified_separable(data.X, data.y):
        return True
    return SIGN_CONSTRAINED_LP(data, signs)


def problem(task: str, n: int, d: int) -> Dataset:
    """The data of the module docstring (seeded by the shape)."""
    rng = np.random.default_rng(n * 100_003 + d)
    X = rng.standard_normal((n, d))
    if task == "regression":
        return Dataset(X, X[:, :5].sum(axis=1), task="regression")
    return Dataset(X, np.sign(X @ teacher(d)))


def step_size(n: int, d: int) -> float:
    """``eta = 0.1 n / (sqrt n + sqrt d)^2``."""
    return 0.1 * n / (np.sqrt(n) + np.sqrt(d)) ** 2


def numpy_gradient(data: Dataset, rho: float) -> Callable[[np.ndarray], np.ndarray]:
    """``theta -> grad L(theta + eps(theta))`` written by hand in numpy (theta (L, d) > 0)."""
    Z, n = np.ascontiguousarray(data.signed_features), data.n
    offsets = data.offsets

    def grad(theta: np.ndarray) -> np.ndarray:
        beta = theta.prod(axis=0)
        if offsets is None:
            weights = -expit(-(Z @ beta))  # l'(m) of the logistic loss
        else:
            weights = Z @ beta - offsets  # l'(r) = r of the squared loss
        return (weights @ Z / n) * beta / theta

    def perturbed(theta: np.ndarray) -> np.ndarray:
        g = grad(theta)
        return grad(theta + rho * g / np.sqrt(np.sum(g * g)))

    return perturbed if rho > 0 else grad


def numpy_steps(data: Dataset, depth: int, rho: float, eta: float, steps: int) -> np.ndarray:
    """``steps`` steps ``theta <- theta - eta grad L(theta + eps)`` in numpy; the last theta."""
    grad = numpy_gradient(data, rho)
    theta = np.full((depth, data.d), ALPHA)
    for _ in range(steps):
        theta = theta - eta * grad(theta)
    return theta


def numpy_flow(data: Dataset, depth: int, rho: float, t_max: float) -> tuple[np.ndarray, int]:
    """``theta(t)`` of the flow by scipy DOP853 on :func:`numpy_gradient`; ``beta(t_max)`` and
    the number of gradient evaluations."""
    grad, shape = numpy_gradient(data, rho), (depth, data.d)
    sol = solve_ivp(
        lambda _t, z: -grad(z.reshape(shape)).ravel(),
        (0.0, t_max),
        np.full(depth * data.d, ALPHA),
        method="DOP853",
        rtol=RTOL,
        atol=1e-30,
        t_eval=np.linspace(0.0, t_max, 201),
    )
    if sol.status != 0:
        raise RuntimeError(f"solve_ivp: {sol.message}")
    return sol.y[:, -1].reshape(shape).prod(axis=0), sol.nfev


def samflows_steps(
    data: Dataset, depth: int, algorithm: str, eta: float, steps: int, backend: str = "auto"
):
    """The last ``theta`` of ``iterate`` (its status checked) and its backend."""
    run = iterate(data, algorithm, depth, ALPHA, eta=eta, steps=steps, record_every=steps,
                  backend=backend, **ALGORITHMS[algorithm])  # fmt: skip
    if run.status != 0:
        raise RuntimeError(f"iterate: {run.message}")
    return run.theta[-1], run.backend


def samflows_flow(data: Dataset, depth: int, algorithm: str, t_max: float):
    """``beta(t_max)`` of ``simulate`` (its status checked) and ``'backend, evaluations'``."""
    traj = simulate(data, algorithm, depth, ALPHA, t_max=t_max, clock="original", rtol=RTOL,
                    **ALGORITHMS[algorithm])  # fmt: skip
    if traj.status != 0:
        raise RuntimeError(f"simulate: {traj.message}")
    return traj.sign_beta[-1] * np.exp(traj.log_abs_beta[-1]), f"{traj.backend}, {traj.nfev}"


def best_times(calls: list[Callable[[], Any]], repeats: int) -> list[tuple[float, Any]]:
    """For each call, the fastest of ``repeats`` (seconds) and its last result; the calls take
    turns, so that a change of the machine's load falls on all of them."""
    times: list[list[float]] = [[] for _ in calls]
    out: list[Any] = [None] * len(calls)
    for _ in range(repeats):
        for i, call in enumerate(calls):
            start = time.perf_counter()
            out[i] = call()
            times[i].append(time.perf_counter() - start)
    return [(min(t), o) for t, o in zip(times, out, strict=True)]


@dataclass
class Row:
    """One measured case: samflows and its floor on the same problem."""

    kind: str  # 'steps' or 'flows'
    task: str
    algorithm: str
    depth: int
    n: int
    d: int
    work: str  # steps, or the horizon
    steps: int  # steps of a 'steps' row (0 for flows)
    samflows: float
    floor: float
    difference: float
    backend: str

    @property
    def case(self) -> str:
        return f"{self.kind}, {self.task}, {self.algorithm}, L={self.depth}"

    @property
    def ratio(self) -> float:
        return self.samflows / self.floor


def relative_difference(a: np.ndarray, b: np.ndarray) -> float:
    """``max |a - b| / max |b|``."""
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def measure(
    kind: str, task: str, algorithm: str, depth: int, n: int, d: int, repeats: int,
    steps: int | None = None,
) -> Row:  # fmt: skip
    """Time one case against its floor (see the module docstring), best of ``repeats`` calls
    (at most three from ``n d = 1e6``); ``steps`` in place of the default number."""
    data = problem(task, n, d)
    eta, rho = step_size(n, d), ALGORITHMS[algorithm].get("rho", 0.0)
    repeats = min(repeats, 3) if n * d >= 1e6 else repeats
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "steps":
            if steps is None:
                steps = int(np.clip(STEP_WORK / (n * d), 100, MAX_STEPS))
            (ours, (theta, backend)), (floor, reference), (general, _) = best_times(
                [
                    lambda: samflows_steps(data, depth, algorithm, eta, steps),
                    lambda: numpy_steps(data, depth, rho, eta, steps),
                    lambda: samflows_steps(data, depth, algorithm, eta, steps, "numpy"),
                ],
                repeats,
            )
            backend = f"{backend}; numpy backend {general / floor:.2f}x"
            difference, work = relative_difference(theta, reference), f"{steps} steps"
            count = steps
        else:
            t_max = HORIZON * eta
            (ours, (beta, backend)), (floor, (reference, evaluations)) = best_times(
                [
                    lambda: samflows_flow(data, depth, algorithm, t_max),
                    lambda: numpy_flow(data, depth, rho, t_max),
                ],
                repeats,
            )
            backend = f"{backend} / {evaluations}"
            difference, work = relative_difference(beta, reference), f"t <= {t_max:.3g}"
            count = 0
    return Row(kind, task, algorithm, depth, n, d, work, count, ours, floor, difference, backend)


def warm_up() -> None:
    """One small call of each kind, so that no timing pays for loading compiled kernels."""
    for task, (n, d) in (("regression", (10, 10)), ("classification", (20, 5))):
        data = problem(task, n, d)
        for algorithm in ALGORITHMS:
            samflows_steps(data, 2, algorithm, 1e-3, 5)
            samflows_flow(data, 2, algorithm, 1e-2)


def table(rows: list[Row], kind: str) -> list[str]:
    """Markdown table of the rows of ``kind``."""
    what = "max rel. diff. of theta" if kind == "steps" else "max rel. diff. of beta(T)"
    last = "backend; numpy backend / floor" if kind == "steps" else "backend, evaluations / floor's"
    lines = [
        f"| case | n x d | n d | work | samflows s | floor s | ratio | {what} | {last} |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.kind == kind:
            lines.append(
                f"| {r.case} | {r.n} x {r.d} | {r.n * r.d:.0e} | {r.work} | {r.samflows:.4g} | "
                f"{r.floor:.4g} | {r.ratio:.2f} | {r.difference:.1e} | {r.backend} |"
            )
    return lines


def summary(rows: list[Row]) -> list[str]:
    """Worst and median ratio per kind at ``n d >= 1e4``."""
    lines = []
    for kind in ("steps", "flows"):
        ratios = [r.ratio for r in rows if r.kind == kind and r.n * r.d >= 1e4]
        if ratios:
            lines.append(
                f"- {kind}, n d >= 1e4: median ratio {np.median(ratios):.2f}, worst "
                f"{max(ratios):.2f} ({len(ratios)} rows)"
            )
    return lines


def report(rows: list[Row], seconds: float, repeats: int) -> str:
    """The section of ``results.md``."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        HEADING,
        "",
        f"- {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}, "
        f"{platform.platform()}, nproc {os.cpu_count()}, load {load:.2f}, "
        f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}, {seconds:.0f} s in all",
        f"- alpha = {ALPHA}, eta = 0.1 n / (sqrt n + sqrt d)^2, l2-SAM rho = 0.05; flows: "
        f"clock 'original', rtol {RTOL:g}, T = {HORIZON:g} eta, 201 outputs; floor: scipy "
        "DOP853 at the same rtol (atol 1e-30) on a hand-written numpy gradient; steps: a "
        "hand-written numpy loop; best of "
        f"{repeats} calls (at most 3 from n d = 1e6); ratio = samflows / floor",
        "- differences: rounding, and the tolerance for the flows; a steps row above 1e-12 is a "
        "run that amplifies rounding (l2-SAM in regression doubles a 1e-16 difference per step "
        "once it bounces between interpolators)",
        "",
        "### Steps (`iterate`)",
        "",
        *table(rows, "steps"),
        "",
        "### Flows (`simulate`)",
        "",
        *table(rows, "flows"),
        "",
        *summary(rows),
        "",
    ]
    return "\n".join(lines)


def plot(rows: list[Row], path: Path) -> None:
    """Log-log time against ``n d`` (per step for ``iterate``, per call for ``simulate``):
    samflows solid, its floor dashed, one colour per case at depth 2 on the grid, one panel per
    kind."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=False)
    for ax, kind in zip(axes, ("steps", "flows"), strict=True):
        cases = sorted({r.case for r in rows if r.kind == kind and r.depth == 2})
        colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for colour, case in zip(colours, cases, strict=False):
            mine = [r for r in rows if r.case == case and (r.n, r.d) in SHAPES[r.task]]
            size = [r.n * r.d for r in mine]
            label = case.split(", ", 1)[1]
            per = [1.0 / r.steps if kind == "steps" else 1.0 for r in mine]
            ax.loglog(size, [r.samflows * p for r, p in zip(mine, per, strict=True)], "o-",
                      color=colour, label=label)  # fmt: skip
            ax.loglog(size, [r.floor * p for r, p in zip(mine, per, strict=True)], "x--",
                      color=colour)  # fmt: skip
        ax.set_xlabel("n d")
        ax.set_ylabel("seconds per step" if kind == "steps" else "seconds per call")
        title = "iterate vs numpy loop" if kind == "steps" else "simulate vs scipy DOP853"
        ax.set_title(f"{kind}: {title} (dashed)")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def memory_child(t_max: float, how: str) -> dict:
    """In this (fresh) process: the memory part's run to ``t_max`` (``how``: 'defaults';
    'whole': :data:`~flows.integrator.segments.HELD_BYTES` and
    :data:`~flows.integrator.assemble.EXPONENT_BLOCK` past any run; 'large calls':
    :data:`flows.compiled.segment.STACK_BYTES` 256 MB); its peak resident memory (MB),
    evaluations, time and status."""
    import flows.compiled.segment
    import flows.integrator.assemble
    import flows.integrator.segments

    if how == "whole":
        flows.integrator.segments.HELD_BYTES = 2**62
        flows.integrator.assemble.EXPONENT_BLOCK = 2**62
    if how == "large calls":
        flows.compiled.segment.STACK_BYTES = 2**28
    task, algorithm, n, d = MEMORY_RUN
    data = problem(task, n, d)
    start = time.perf_counter()
    traj = simulate(data, algorithm, 2, ALPHA, t_max=t_max, **ALGORITHMS[algorithm])
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux
    return {"peak": peak, "nfev": traj.nfev, "seconds": seconds, "status": traj.status,
            "t": float(traj.t[-1])}  # fmt: skip


def measure_memory() -> list[dict]:
    """:func:`memory_child` in a fresh process for each horizon of :data:`MEMORY_T`, defaults
    and whole path taking turns."""
    rows = []
    for t_max in MEMORY_T:
        row: dict[str, Any] = {"t_max": t_max}
        for how in MEMORY_HOW:
            done = subprocess.run(
                [sys.executable, __file__, "--memory-child", json.dumps([t_max, how])],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            row[how] = json.loads(done.stdout.splitlines()[-1])
        rows.append(row)
        print(memory_table([row])[-1], flush=True)
    return rows


def memory_table(rows: list[dict]) -> list[str]:
    """Markdown table of the memory part."""
    lines = [
        "| t_max | evaluations | steps (about) | peak MB, defaults | peak MB, whole path "
        "| peak MB, calls of 256 MB | s, defaults | s, whole path |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        a, b, c = r["defaults"], r["whole"], r["large calls"]
        lines.append(
            f"| {r['t_max']:g} | {a['nfev']} | {a['nfev'] // 12} | {a['peak']:.0f} | "
            f"{b['peak']:.0f} | {c['peak']:.0f} | "
            f"{a['seconds']:.2f} | {b['seconds']:.2f} |"
        )
    return lines


def memory_report(rows: list[dict], seconds: float) -> str:
    """The memory section of ``results.md``."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    task, algorithm, n, d = MEMORY_RUN
    lines = [
        MEMORY_HEADING,
        "",
        f"- {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}, "
        f"{platform.platform()}, nproc {os.cpu_count()}, load {load:.2f}, "
        f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}, {seconds:.0f} s in all",
        f"- {task}, {algorithm}, L = 2, n = {n}, d = {d} (3.2 MB of dense output per step), "
        f"alpha = {ALPHA}, default rtol, 201 outputs, steps about evaluations / 12; peak: "
        "ru_maxrss of a fresh process per run; whole path: HELD_BYTES and EXPONENT_BLOCK past "
        "any run (the path held and sampled at once)",
        "",
        *memory_table(rows),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n d up to 1e5 only")
    parser.add_argument("--write", action="store_true", help="put the tables into results.md")
    parser.add_argument("--plot", type=Path, help="write the log-log plot to this path")
    parser.add_argument("--repeats", type=int, default=3, help="calls per timing (best of)")
    parser.add_argument("--only", choices=("steps", "flows", "memory"), help="one kind only")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.write and (args.quick or args.only in ("steps", "flows")):
        parser.error("--write keeps whole tables: run without --quick and --only steps/flows")
    if args.memory_child:
        print(json.dumps(memory_child(*json.loads(args.memory_child))))
        return
    # the teacher certifies separability, in place of the LPs (module docstring)
    flows.data.is_separable = certified_separable
    flows.integrator.arguments.sign_constrained_separable = certified_sign_separable
    start = time.perf_counter()
    if args.only in (None, "memory"):
        text = memory_report(measure_memory(), time.perf_counter() - start)
        print(text)
        if args.write:
            write_section(text, MEMORY_HEADING)
        if args.only == "memory":
            return
        start = time.perf_counter()
    warm_up()
    top = 1e5 if args.quick else 1e7
    rows = []
    for kind in ("steps", "flows"):
        if args.only not in (None, kind):
            continue
        for task, shapes in SHAPES.items():
            for algorithm in ALGORITHMS:
                for n, d in shapes:
                    if n * d <= top:
                        rows.append(measure(kind, task, algorithm, 2, n, d, args.repeats))
                        print(table([rows[-1]], kind)[-1], flush=True)
                if kind == "steps":
                    for n, d in shapes:
                        if n * d in DEPTH3_SIZES and n * d <= top:
                            rows.append(measure(kind, task, algorithm, 3, n, d, args.repeats))
                            print(table([rows[-1]], kind)[-1], flush=True)
    if args.only in (None, "steps") and not args.quick:
        for task, algorithm, n, d, steps in NAMED_STEPS:
            for depth in (2, 3):
                rows.append(measure("steps", task, algorithm, depth, n, d, args.repeats, steps))
                print(table([rows[-1]], "steps")[-1], flush=True)
    text = report(rows, time.perf_counter() - start, args.repeats)
    print(text)
    if args.write:
        write_section(text, HEADING)
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
