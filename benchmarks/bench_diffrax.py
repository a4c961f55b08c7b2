#!/usr/bin/env python
"""``flows.simulate`` against jit-compiled diffrax, case by case, at equal accuracy.

Run on demand (not a pytest test; needs the extra ``bench``: jax and diffrax)::

    python benchmarks/bench_diffrax.py            # 21 cases, both diffrax solvers
    python benchmarks/bench_diffrax.py --quick    # 3 cases
    python benchmarks/bench_diffrax.py --write    # also put the section into results.md

Cases (:data:`CASES`): the paper's single example ``single_example([1, 2, 3, 4, 5])``, balanced
init ``alpha``, rescaled clock, tau in [0, t_max]: l2-SAM at L = 2 (six alpha / rho) and L = 3,
l_inf-SAM at L = 2 from alpha > rho (each a_j grows, so its field stays smooth), GD at L = 2
and 3; and Gaussian blobs (``flows.datasets.gaussian_blobs``, n = 40, d = 10, means
+-linspace(0.5, 2, 10), seed 0), GD and l2-SAM at L = 2, tau <= 2 or 3 (beyond, the softmax
weights of the tying margins make the flow stiff: ~2e4 DOP853 evaluations by tau = 4). Each case
is a run that ``simulate`` ends with status 0 and no event. Apart from these, and outside their
medians, :data:`SCALE_CASES` take blobs at research sizes (n d = 1e4 and 1e5: n = 200, d = 50
and n = 1000, d = 100, means +-linspace(0.5, 2, d) / sqrt(d / 10)), GD and l2-SAM at L = 2,
tau <= 2, where both sides spend their time in the field's matrix-vector products.

``simulate`` runs with its defaults (backend 'auto', DOP853, rtol 1e-10, the rescaled clock of
classification, ``n_points`` outputs) except ``original_time=False``: diffrax computes no log t.
diffrax (``diffeqsolve`` with ``PIDController`` and ``SaveAt(ts=...)`` at the same output times,
float64) integrates a vector field written in ``jax.numpy`` for each case, in the coordinates a
user picks: ``u = log a`` for the balanced single-example ODEs (docs/theory.md §5; atol = rtol,
an absolute error of u being a relative one of a), the plain parameters ``(w1, w2)`` for the
blobs (atol = 1e-6 rtol). It is compiled once per case and solver (``jax.jit(...).lower().
compile()``, rtol and atol traced, so one compile serves every tolerance); the compile time is
reported apart and not counted.

Equal accuracy: error = max over output times and coordinates of |log|beta| - log|beta_ref||.
The reference is scipy DOP853 at rtol 1e-13 on the same field in numpy (the field functions take
the array module as an argument), checked against ``simulate(rtol=1e-13)`` (column "ref check").
diffrax's rtol is the loosest of :data:`RTOLS` whose error is at most samflows' error.

Timing: the samflows call and the compiled diffrax call take turns, best of up to ``--reps``
each (cheap calls repeated until :data:`SPENT` seconds). Ratio = diffrax time / samflows time:
above 1, samflows is faster. Both Tsit5 and Dopri8 are measured; the table shows the one with
the lower median time ratio, and a line gives the other's.

Finally two calls are split into the driver's phases by wrapping its functions from here (no
library code changes): the default single-example call (l2-SAM, L = 2, alpha = 0.4, rho = 1)
and the case at the median ratio. Phases: argument checks and setup, the events set up per
segment, the compiled DOP853 kernel, the Python around it, sampling the outputs, and the
result's assembly.
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
from scipy.integrate import solve_ivp
from sections import write_section

import flows.compiled.segment as compiled_segment
from flows import Dataset, Trajectory, compiled, simulate, single_example
from flows.datasets import gaussian_blobs
from flows.integrator import driver, segments

try:
    import diffrax
    import jax
    import jax.numpy as jnp
except ImportError:
    print(
        "bench_diffrax.py needs the extra 'bench' (jax, diffrax): pip install -e '.[bench]'",
        file=sys.stderr,
    )
    sys.exit(2)

jax.config.update("jax_enable_x64", True)

MU = np.arange(1.0, 6.0)
BLOB_MEAN = np.linspace(0.5, 2.0, 10)
N_POINTS: int = inspect.signature(simulate).parameters["n_points"].default
REFERENCE_RTOL = 1e-13
RTOLS = 10.0 ** -np.arange(5.0, 14.01, 0.5)  # diffrax's candidates, loosest first
SOLVERS = {"Tsit5": diffrax.Tsit5(), "Dopri8": diffrax.Dopri8()}
MAX_STEPS = 200_000
SPENT = 0.3  # seconds: a cheap call is repeated until this much is spent on it
HEADING = "## Against jit-compiled diffrax (`python benchmarks/bench_diffrax.py --write`)"


@dataclass(frozen=True)
class Case:
    """One run: data ('single' or 'blobs'), algorithm, depth, balanced init, rho, tau range."""

    data: str
    algorithm: str
    depth: int
    alpha: float
    rho: float
    t_max: float = 10.0

    @property
    def name(self) -> str:
        """The table's label."""
        rho = "" if self.algorithm == "gd" else f", rho {self.rho:g}"
        return (
            f"{self.data} {self.algorithm} L={self.depth}, alpha {self.alpha:g}{rho}, "
            f"tau <= {self.t_max:g}"
        )

    def dataset(self) -> Dataset:
        """The case's data set."""
        if self.data == "single":
            return single_example(MU)
        if self.data == "blobs":
            return gaussian_blobs(seed=0, n=40, mean=BLOB_MEAN)
        n, d = SCALE_SIZES[self.data]
        return gaussian_blobs(seed=0, n=n, mean=np.linspace(0.5, 2.0, d) / np.sqrt(d / 10))

    def hyperparameters(self) -> dict[str, Any]:
        """``simulate``'s keyword hyper-parameters (rho, except for GD)."""
        return {} if self.algorithm == "gd" else {"rho": self.rho}


CASES = [
    Case("single", "l2-sam", 2, 0.4, 1.0),
    Case("single", "l2-sam", 2, 0.5, 1.0),
    Case("single", "l2-sam", 2, 0.4, 0.5),
    Case("single", "l2-sam", 2, 1.0, 0.5),
    Case("single", "l2-sam", 2, 0.4, 0.1),
    Case("single", "l2-sam", 2, 1.0, 0.1),
    Case("single", "l2-sam", 3, 0.01, 0.01),
    Case("single", "l2-sam", 3, 0.01, 0.002),
    Case("single", "linf-sam", 2, 0.4, 0.1),
    Case("single", "linf-sam", 2, 1.0, 0.5),
    Case("single", "linf-sam", 2, 0.4, 0.3),
    Case("single", "gd", 2, 0.4, 0.0),
    Case("single", "gd", 3, 0.01, 0.0),
    Case("single", "gd", 3, 0.015, 0.0),
    Case("blobs", "gd", 2, 0.4, 0.0, 2.0),
    Case("blobs", "gd", 2, 0.4, 0.0, 3.0),
    Case("blobs", "gd", 2, 1.0, 0.0, 2.0),
    Case("blobs", "l2-sam", 2, 0.4, 0.1, 2.0),
    Case("blobs", "l2-sam", 2, 0.4, 0.1, 3.0),
    Case("blobs", "l2-sam", 2, 0.4, 0.3, 2.0),
    Case("blobs", "l2-sam", 2, 1.0, 0.1, 2.0),
]
QUICK = [CASES[0], CASES[8], CASES[17]]
#: Blobs at research sizes, by name: (n, d).
SCALE_SIZES = {"blobs n 200 d 50": (200, 50), "blobs n 1000 d 100": (1000, 100)}
SCALE_CASES = [
    Case(size, algorithm, 2, 0.4, rho, 2.0)
    for size in SCALE_SIZES
    for algorithm, rho in (("gd", 0.0), ("l2-sam", 0.1))
]


# --------------------------------------------------------------------------- the fields


def single_field(xp: ModuleType, u, case: Case):
    """``du/dtau`` for ``u = log a``, the balanced single-example flow at depth L (rescaled
    clock): ``da/dtau = mu (a')^(L-1)`` with ``a' = a`` (GD), ``a - rho g / N``, ``g = mu
    a^(L-1)``, ``N = (L sum g^2)^(1/2)`` (l2-SAM) or ``a - rho`` (l_inf-SAM, a > 0)."""
    a = xp.exp(u)
    if case.algorithm == "l2-sam":
        g = MU * a ** (case.depth - 1)
        point = a - case.rho * g / xp.sqrt(case.depth * xp.sum(g * g))
    elif case.algorithm == "linf-sam":
        point = a - case.rho
    else:
        point = a
    return MU * point ** (case.depth - 1) / a


def blobs_field(xp: ModuleType, w, signed_x: np.ndarray, rho: float):
    """``dw/dtau = F(w')`` on the plain parameters ``w = (w1, w2)`` (L = 2, logistic loss,
    rescaled clock): ``F = (G w2, G w1)``, ``G = sum_i p_i y_i x_i`` with ``p`` the softmax of
    ``log |l'(m_i)| = -softplus(m_i)``; ``w' = w - rho F(w) / ||F(w)||`` (l2-SAM), ``w`` (GD)."""

    def direction(w):
        log_q = -xp.logaddexp(0.0, signed_x @ (w[0] * w[1]))
        p = xp.exp(log_q - xp.max(log_q))
        G = (p / xp.sum(p)) @ signed_x
        return xp.stack([G * w[1], G * w[0]])

    point = w
    if rho > 0:
        F = direction(w)
        point = w - rho * F / xp.sqrt(xp.sum(F * F))
    return direction(point)


@dataclass(frozen=True)
class Problem:
    """A case's field in an array module, initial state, atol per rtol and log|beta|."""

    field: Callable[[ModuleType, Any], Any]
    y0: np.ndarray
    atol_factor: float
    log_beta: Callable[[np.ndarray], np.ndarray]


def problem(case: Case) -> Problem:
    """The field of ``case`` in the coordinates a user picks (log a, or plain (w1, w2))."""
    if case.data == "single":
        return Problem(
            lambda xp, y: single_field(xp, y, case),
            np.full(MU.size, np.log(case.alpha)),
            1.0,
            lambda ys: case.depth * ys,
        )
    data = case.dataset()
    signed_x = data.y[:, None] * data.X
    return Problem(
        lambda xp, y: blobs_field(xp, y, signed_x, case.rho),
        np.full((2, data.d), case.alpha),
        1e-6,
        lambda ys: np.log(np.abs(ys[:, 0] * ys[:, 1])),
    )


# --------------------------------------------------------------------------- the solvers


def reference(prob: Problem, ts: np.ndarray) -> np.ndarray:
    """log|beta| at ``ts``: scipy DOP853 at :data:`REFERENCE_RTOL` on the numpy field."""
    shape = prob.y0.shape
    sol = solve_ivp(
        lambda _t, y: np.ravel(prob.field(np, y.reshape(shape))),
        (ts[0], ts[-1]),
        prob.y0.ravel(),
        method="DOP853",
        rtol=REFERENCE_RTOL,
        atol=REFERENCE_RTOL * prob.atol_factor * 1e-2,
        t_eval=ts,
    )
    assert sol.status == 0, sol.message
    return prob.log_beta(sol.y.T.reshape(len(ts), *shape))


def compiled_diffrax(prob: Problem, solver, ts: np.ndarray) -> tuple[Callable, float]:
    """The case compiled once: ``solve(rtol) -> (ys, accepted steps, rejected steps)``, and the
    compile time in seconds."""
    term = diffrax.ODETerm(lambda _t, y, _args: prob.field(jnp, y))
    saveat = diffrax.SaveAt(ts=jnp.asarray(ts))

    def solve(y0, rtol, atol):
        sol = diffrax.diffeqsolve(
            term,
            solver,
            ts[0],
            ts[-1],
            None,
            y0,
            saveat=saveat,
            stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
            max_steps=MAX_STEPS,
        )
        return sol.ys, sol.stats["num_accepted_steps"], sol.stats["num_rejected_steps"]

    y0 = jnp.asarray(prob.y0)
    start = time.perf_counter()
    compiled = jax.jit(solve).lower(y0, 1e-8, 1e-8).compile()
    seconds = time.perf_counter() - start

    def run(rtol: float):
        return jax.block_until_ready(compiled(y0, rtol, rtol * prob.atol_factor))

    return run, seconds


def samflows_call(case: Case, **options) -> Callable[[], Trajectory]:
    """The timed ``simulate`` call: defaults except ``original_time=False`` (and ``options``)."""
    data = case.dataset()
    return lambda: simulate(
        data,
        case.algorithm,
        case.depth,
        case.alpha,
        t_max=case.t_max,
        original_time=False,
        **options,
        **case.hyperparameters(),
    )


def samflows_steps(call: Callable[[], object]) -> int:
    """Accepted solver steps of one ``call`` (counted on its path, untimed)."""
    counted: list[int] = []
    assemble = driver.assemble

    def counting(run, *args):
        counted.append(sum(len(seg.ts) - 1 for seg in run.path.segments))
        return assemble(run, *args)

    driver.assemble = counting
    try:
        call()
    finally:
        driver.assemble = assemble
    return counted[0]


def error(log_beta: np.ndarray, ref: np.ndarray) -> float:
    """max |log|beta| - log|beta_ref|| over output times and coordinates."""
    return float(np.max(np.abs(np.asarray(log_beta) - ref)))


def take_turns(first: Callable, second: Callable, reps: int) -> tuple[float, float]:
    """Best wall times of ``first`` and ``second`` called alternately ``reps`` times (more while
    either has spent less than :data:`SPENT` seconds, up to 10 ``reps``)."""
    best = [np.inf, np.inf]
    spent = [0.0, 0.0]
    done = 0
    while done < reps or (min(spent) < SPENT and done < 10 * reps):
        for i, fn in enumerate((first, second)):
            start = time.perf_counter()
            fn()
            elapsed = time.perf_counter() - start
            best[i], spent[i] = min(best[i], elapsed), spent[i] + elapsed
        done += 1
    return best[0], best[1]


@dataclass(frozen=True)
class SolverRow:
    """diffrax with one solver on one case, at the loosest rtol matching samflows' error."""

    seconds: float
    samflows_seconds: float
    error: float
    rtol: float
    accepted: int
    rejected: int
    compile_seconds: float

    @property
    def ratio(self) -> float:
        """diffrax time / samflows time."""
        return self.seconds / self.samflows_seconds


@dataclass(frozen=True)
class CaseRow:
    """One case: samflows' backend, error, evaluations and accepted steps, the reference's
    check, and each diffrax solver's row."""

    case: Case
    backend: str
    error: float
    nfev: int
    steps: int
    reference_check: float
    solvers: dict[str, SolverRow]


def measure(case: Case, reps: int) -> CaseRow:
    """Both sides on one case: errors against the reference, diffrax's rtol, times."""
    ts = np.linspace(0.0, case.t_max, N_POINTS)
    prob = problem(case)
    ref = reference(prob, ts)
    call = samflows_call(case)
    traj = call()
    assert traj.status == 0 and not traj.events, (case.name, traj.message, traj.events)
    assert np.allclose(traj.tau, ts, rtol=0.0, atol=1e-12)
    tight = samflows_call(case, rtol=REFERENCE_RTOL)()
    sam_error = error(traj.log_abs_beta, ref)
    solvers = {}
    for name, solver in SOLVERS.items():
        run, compile_seconds = compiled_diffrax(prob, solver, ts)
        for rtol in RTOLS:
            ys, accepted, rejected = run(float(rtol))
            err = error(prob.log_beta(np.asarray(ys)), ref)
            if err <= sam_error:
                break
        samflows_seconds, seconds = take_turns(call, lambda r=run, t=float(rtol): r(t), reps)
        solvers[name] = SolverRow(
            seconds, samflows_seconds, err, float(rtol), int(accepted), int(rejected),
            compile_seconds,
        )  # fmt: skip
    return CaseRow(
        case,
        traj.backend,
        sam_error,
        traj.nfev,
        samflows_steps(call),
        error(tight.log_abs_beta, ref),
        solvers,
    )


# --------------------------------------------------------------------------- phases


def phase_breakdown(case: Case, reps: int) -> list[tuple[str, float]]:
    """Seconds per phase of ``case``'s timed call, from the fastest of ``reps`` calls with each
    phase's functions wrapped (module attributes replaced for the duration); the last row is
    the best unwrapped call. The events' ``already`` checks at a segment's start count in the
    Python around the kernel."""
    wrapped: dict[str, list[tuple[Any, str]]] = {
        "argument checks and setup": [(driver, "_conserved_run"), (driver, "_setup")],
        "events: set up per segment": [(driver, "segment_events"), (compiled_segment, "_watch")],
        "compiled DOP853 kernel": [],
        "sampling the outputs": [(segments.Path, "sample")],
        "integrate_segment": [(driver, "_integrate_segment")],
        "assemble": [(driver, "assemble")],
    }
    if compiled.available():
        import flows.compiled._segment_kernels as kernels

        wrapped["compiled DOP853 kernel"].append((kernels, "segment"))
    spent = dict.fromkeys(wrapped, 0.0)

    def timed(phase: str, fn: Callable) -> Callable:
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[phase] += time.perf_counter() - start

        return wrapper

    originals = [
        (owner, attr, getattr(owner, attr)) for fns in wrapped.values() for owner, attr in fns
    ]
    for phase, fns in wrapped.items():
        for owner, attr in fns:
            setattr(owner, attr, timed(phase, getattr(owner, attr)))
    call = samflows_call(case)
    best: dict[str, float] = {}
    try:
        for _ in range(reps):
            for key in spent:
                spent[key] = 0.0
            start = time.perf_counter()
            call()
            total = time.perf_counter() - start
            if total < best.get("total", np.inf):
                best = dict(spent, total=total)
    finally:
        for owner, attr, fn in originals:
            setattr(owner, attr, fn)
    unwrapped = np.inf
    for _ in range(reps):
        start = time.perf_counter()
        call()
        unwrapped = min(unwrapped, time.perf_counter() - start)
    events = best["events: set up per segment"]
    kernel = best["compiled DOP853 kernel"]
    sample = best["sampling the outputs"]
    return [
        ("argument checks and setup", best["argument checks and setup"]),
        ("events: set up per segment", events),
        ("compiled DOP853 kernel", kernel),
        ("Python around the kernel", best["integrate_segment"] - events - kernel),
        ("sampling the outputs", sample),
        ("result assembly", best["assemble"] - sample),
        (
            "rest of simulate",
            best["total"] - best["argument checks and setup"] - best["integrate_segment"]
            - best["assemble"],
        ),
        ("total (wrapped)", best["total"]),
        ("total (not wrapped)", unwrapped),
    ]  # fmt: skip


# --------------------------------------------------------------------------- report


def ms(seconds: float) -> str:
    """Milliseconds, three significant digits."""
    return f"{seconds * 1e3:.3g}"


def median_row(rows: list[CaseRow], solver: str) -> CaseRow:
    """The row whose ratio is the median's (the upper one of an even count)."""
    ordered = sorted(rows, key=lambda row: row.solvers[solver].ratio)
    return ordered[len(ordered) // 2]


def chosen_solver(rows: list[CaseRow]) -> str:
    """The diffrax solver with the lower median ratio (the faster at equal accuracy)."""
    return min(SOLVERS, key=lambda name: np.median([row.solvers[name].ratio for row in rows]))


def table(rows: list[CaseRow], solver: str) -> list[str]:
    """The lines of the table of ``rows`` against diffrax's ``solver``."""
    lines = [
        "| case | samflows ms | diffrax ms | ratio | samflows err | diffrax err | diffrax rtol "
        "| samflows accepted steps (nfev) | diffrax accepted + rejected steps | compile s | ref check |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        d = row.solvers[solver]
        lines.append(
            f"| {row.case.name} | {ms(d.samflows_seconds)} | {ms(d.seconds)} | {d.ratio:.2f} | "
            f"{row.error:.1e} | {d.error:.1e} | {d.rtol:.0e} | {row.steps} ({row.nfev}) | "
            f"{d.accepted} + {d.rejected} | {d.compile_seconds:.2f} | {row.reference_check:.1e} |"
        )
    return lines


def spread(ratios: np.ndarray) -> str:
    """The median, the 10th percentile, min and max of the ratios ``diffrax / samflows``, and the
    90th percentile of samflows' time over diffrax's (the inverse's upper tail)."""
    return (
        f"median {np.median(ratios):.2f}, p10 {np.percentile(ratios, 10):.2f} (samflows / "
        f"diffrax p90 {np.percentile(1.0 / ratios, 90):.2f}), min {ratios.min():.2f}, max "
        f"{ratios.max():.2f}"
    )


def report(
    rows: list[CaseRow],
    phases: dict[str, list[tuple[str, float]]],
    seconds: float,
    scale: list[CaseRow],
) -> str:
    """The section of ``results.md``: the chosen solver's table, medians, the phases of the
    calls in ``phases`` (by case name), and the research-size rows ``scale`` against both
    solvers."""
    medians = {
        name: float(np.median([row.solvers[name].ratio for row in rows])) for name in SOLVERS
    }
    chosen = chosen_solver(rows)
    other = next(name for name in SOLVERS if name != chosen)
    ratios = np.array([row.solvers[chosen].ratio for row in rows])
    load = os.getloadavg()[0]
    lines = [
        HEADING,
        "",
        f"- {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}, "
        f"{platform.platform()}, nproc {os.cpu_count()}, load {load:.2f}, jax {jax.__version__}, "
        f"diffrax {diffrax.__version__} (CPU, float64), {seconds:.0f} s in all",
        f"- samflows: `simulate` defaults (backend {rows[0].backend}, DOP853, rtol "
        f"1e-10, {N_POINTS} outputs) except `original_time=False`; diffrax: `diffeqsolve`, "
        f"{chosen} (the faster: median ratio {medians[chosen]:.2f} against {other}'s "
        f"{medians[other]:.2f}), `PIDController`, `SaveAt(ts=...)` at the same times, jit-compiled "
        "once per case (compile column, not timed); rtol = the loosest of 10^-5 ... 10^-14 "
        "(half decades) within samflows' error; atol = rtol (log a) or 1e-6 rtol (plain w)",
        "- error: max |log|beta| - log|beta_ref|| over the outputs; reference: scipy DOP853 at "
        "rtol 1e-13 on the field in numpy; ref check: `simulate(rtol=1e-13)` against it",
        "- ratio = diffrax time / samflows time (above 1: samflows faster); best of alternating "
        "calls; a diffrax error above samflows' would mean that rtol 1e-14 did not reach it",
        "",
        *table(rows, chosen),
    ]
    lines += [
        "",
        f"Ratio over {len(rows)} cases: {spread(ratios)} ({other}: "
        f"{spread(np.array([row.solvers[other].ratio for row in rows]))}). The target, "
        "samflows' time at or below diffrax's at the median and the 90th percentile of their "
        "time ratio, asks a median and a 10th percentile of this ratio of at least 1.",
        "",
        "Phases of samflows' call (µs, the fastest wrapped call; `original_time=False`): the "
        "default single-example call and the median case",
        "",
        "| phase | " + " | ".join(phases) + " |",
        "|---|" + "---|" * len(phases),
        *(
            f"| {name} | "
            + " | ".join(f"{split[i][1] * 1e6:.0f}" for split in phases.values())
            + " |"
            for i, (name, _) in enumerate(next(iter(phases.values())))
        ),
        "",
    ]
    for name in SOLVERS if scale else ():
        lines += [
            f"At research sizes (not in the ratios above), against {name}:",
            "",
            *table(scale, name),
            "",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 cases, no research sizes")
    parser.add_argument("--reps", type=int, default=15, help="timed calls per side and case")
    parser.add_argument("--write", action="store_true", help="put the section into results.md")
    args = parser.parse_args()
    start = time.perf_counter()
    rows = []
    for case in QUICK if args.quick else CASES:
        rows.append(measure(case, args.reps))
        print(f"{case.name}: " + ", ".join(
            f"{name} {row.ratio:.2f}" for name, row in rows[-1].solvers.items()
        ), flush=True)  # fmt: skip
    scale = []
    for case in () if args.quick else SCALE_CASES:
        scale.append(measure(case, args.reps))
        print(f"{case.name}: " + ", ".join(
            f"{name} {row.ratio:.2f}" for name, row in scale[-1].solvers.items()
        ), flush=True)  # fmt: skip
    median = median_row(rows, chosen_solver(rows)).case
    phases = {case.name: phase_breakdown(case, 5 * args.reps) for case in (CASES[0], median)}
    text = report(rows, phases, time.perf_counter() - start, scale)
    print(text)
    if args.write:
        write_section(text, HEADING)


if __name__ == "__main__":
    main()
