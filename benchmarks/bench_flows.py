#!/usr/bin/env python
"""Speed and accuracy of ``flows.simulate``, each timing next to a baseline from the same run.

Run on demand (not a pytest test)::

    python benchmarks/bench_flows.py            # full, ~3 min; writes benchmarks/results.md
    python benchmarks/bench_flows.py --quick    # smoke version, < 40 s; stdout only

Parts (every table is printed as Markdown and, in a full run, written to ``results.md``):

1. Single example D_mu, mu = (1..5), l2-SAM, L = 2, rho = 1, alpha = 0.4, rescaled clock,
   tau in [0, 10], 101 output times. Accuracy = max over times and coordinates of
   |log|beta| - log|beta_ref||, against an independent reference: the reduced system of docs/theory.md §8
   in log coordinates, ``u_j = log a_j``, ``du_j/dtau = mu_j (1 - rho mu_j / N)``,
   ``N = (2 sum_k mu_k^2 e^{2 u_k})^{1/2}``, scipy DOP853 at rtol 1e-13 (shares no code with
   ``flows``; self-checked against rtol 1e-11 and against ``simulate(rtol=1e-13)``). Compared:
   ``simulate`` (default call, which also computes log t; ``original_time=False``;
   ``backend="reference"``, the old point-by-point field; several rtols), scipy RK45 on the
   full theta in linear coordinates (plain numpy field, atol 1e-30, several rtols), the numpy
   floor (the reduced system by hand) and the numba floor of the default call with log t (the
   call without it plus the quadrature's compiled evaluations of K alone).
2. Multi-sample: n = 40, d = 10, X ~ N(0, 1), y = sign(X w), w = |N(0, 1)| (fixed seed),
   l2-SAM rho = 0.1 and GD, L = 2, alpha = 0.4, original clock, t in [0, 10], 101 outputs.
   Reference: ``simulate(rtol=1e-13)`` itself (self-referenced), checked against RK45 at
   rtol 1e-12. RK45 runs on the full theta with the exact l2-SAM field in plain numpy.
   After part 2, the numpy backend against its floor: each call split into its field
   evaluations (recorded, then replayed through the same right-hand side) and the rest,
   and the cost per evaluation at which the numpy call would be 1.5x its floor.
3. fig5-type runs (collapse for alpha <= 0.345): time and nfev, new engine against the old one
   (``backend="reference", chart="asinh"``).
4. ``analysis.regimes.leaders.leader_phase_diagram`` on a 100 x 100 grid (10 x 20 with ``--quick``),
   against an old-engine estimate from every 20th (5th) row, extrapolated linearly.
5. numba: the compiled backend against the numpy one (time, agreement).
6. Regression: the tml-epfl notebook's sparse regression (``flows.datasets.sparse_regression``:
   n = 20, d = 30), GD from u = 0.1, v = 0, L = 2, squared loss, t in [0, 200], 101 outputs.
   Reference: scipy DOP853 at rtol 1e-13 on the plain (2, d) parameters (shares no code with
   ``flows``; self-checked against rtol 1e-11 and against ``simulate(rtol=1e-13)``); error over
   the output times after 0 (beta = 0 there). ``simulate`` (numba and numpy) against scipy RK45
   on the same plain parameters; ratios against the cheapest RK45 meeting the target.

Timings: best of 3 calls (time.perf_counter), except that no further call starts once
``REP_BUDGET`` seconds were spent on a configuration (the slow old-engine baselines then get
1 or 2 calls and the phase diagram one), and that a cheap call is repeated until 0.3 s are
spent (up to 25 calls: the minimum then filters the transient slowdowns of a shared machine);
the ``reps`` column says how many calls were made.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from unittest import mock

import numpy as np
import scipy
from scipy.integrate import solve_ivp
from scipy.special import expit

import analysis.regimes.leaders as regimes
from flows import Dataset, compiled, iterate, simulate, single_example
from flows.datasets import sparse_regression
from flows.integrator import driver

#: What ``simulate(backend="auto")`` uses here.
DEFAULT_BACKEND = "numba" if compiled.available() else "numpy"

MU = np.arange(1.0, 6.0)
DEPTH = 2
ALPHA = 0.4
N_TIMES = 101
TARGET = 1e-6  # max error in log|beta| for "equal accuracy"
#: The numpy backend's target: within this factor of the numpy floor (the problem written by
#: hand for itself in the same scipy DOP853).
NUMPY_FLOOR_TARGET = 1.5
REPS = 3
REP_BUDGET = 8.0  # seconds: no further repetition once a configuration has used this much
CHEAP_SPENT, CHEAP_REPS = 0.3, 25  # cheap calls: repeated until 0.3 s spent (at most 25 calls)
RESULTS = Path(__file__).resolve().parent / "results.md"
#: Where the sections written by the other benchmarks (``bench_sliding.py``) begin.
OTHER_SECTIONS = "\n## l_inf-SAM sliding"


# --------------------------------------------------------------------------- report


class Report:
    """Markdown lines, echoed to stdout as they come and kept for ``results.md``."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, text: str = "") -> None:
        """A paragraph (or heading) line."""
        print(text, flush=True)
        self.lines.append(text)

    def table(self, header: list[str], rows: list[list[str]]) -> None:
        """A Markdown table followed by an empty line."""
        for cells in (header, ["---"] * len(header), *rows):
            self.add("| " + " | ".join(cells) + " |")
        self.add()

    def write(self, path: Path) -> None:
        """Write the report, keeping the sections other benchmarks keep in the same file
        (from :data:`OTHER_SECTIONS` on)."""
        kept = ""
        if path.exists():
            text = path.read_text(encoding="utf-8")
            at = text.find(OTHER_SECTIONS)
            kept = text[at:] if at >= 0 else ""
        path.write_text("\n".join(self.lines) + "\n" + kept, encoding="utf-8")


def ms(seconds: float) -> str:
    """Milliseconds, three significant digits."""
    return f"{seconds * 1e3:.3g}"


def sci(value: float) -> str:
    return f"{value:.1e}"


# --------------------------------------------------------------------------- timing


@dataclass(frozen=True)
class Timed:
    """Best wall time over ``reps`` calls, and the value of the last call."""

    seconds: float
    reps: int
    value: object


def best_of(fn: Callable[[], object], reps: int = REPS, budget: float = REP_BUDGET) -> Timed:
    """Time ``fn`` up to ``reps`` times (stop repeating once ``budget`` seconds are spent); a
    cheap call is repeated until :data:`CHEAP_SPENT` seconds (at most :data:`CHEAP_REPS`
    calls), so that a transient slowdown of a shared machine does not set its best time."""
    best, spent, done, value = np.inf, 0.0, 0, None
    while (done < reps and (done == 0 or spent < budget)) or (
        spent < CHEAP_SPENT and done < CHEAP_REPS
    ):
        start = time.perf_counter()
        value = fn()
        elapsed = time.perf_counter() - start
        best, spent, done = min(best, elapsed), spent + elapsed, done + 1
    return Timed(best, done, value)


@dataclass(frozen=True)
class Row:
    """One configuration: method group, configuration, timing, accuracy, work, status."""

    method: str
    config: str
    timed: Timed
    error: float
    nfev: int
    status: int

    def cells(self, baseline: float) -> list[str]:
        return [
            self.method,
            self.config,
            ms(self.timed.seconds),
            f"{self.timed.seconds / baseline:.2f}x",
            sci(self.error),
            str(self.nfev),
            str(self.status),
            str(self.timed.reps),
        ]


ROW_HEADER = [
    "method",
    "configuration",
    "time [ms]",
    "/ baseline",
    "max err",
    "nfev",
    "status",
    "reps",
]


def measure(method: str, config: str, fn: Callable, ref: np.ndarray) -> Row:
    """Time ``fn() -> (log|beta|, nfev, status)`` and measure its error against ``ref``."""
    timed = best_of(fn)
    log_beta, nfev, status = timed.value
    return Row(method, config, timed, max_error(log_beta, ref), nfev, status)


def max_error(log_beta: np.ndarray, ref: np.ndarray) -> float:
    """max |Delta log|beta|| over times and coordinates (inf if NaN or a shape mismatch)."""
    if log_beta.shape != ref.shape or not np.all(np.isfinite(log_beta)):
        return np.inf
    return float(np.max(np.abs(log_beta - ref)))


def cheapest(rows: list[Row], method: str) -> Row | None:
    """The fastest row of ``method`` with status 0 and max error <= TARGET."""
    ok = [r for r in rows if r.method == method and r.status == 0 and r.error <= TARGET]
    return min(ok, key=lambda r: r.timed.seconds) if ok else None


def report_rows(report: Report, rows: list[Row], baseline: Row, methods: list[str]) -> None:
    """The configuration table, then the cheapest configuration of each method."""
    report.add(f"Ratios are time / time({baseline.method}, {baseline.config}).")
    report.add()
    report.table(ROW_HEADER, [r.cells(baseline.timed.seconds) for r in rows])
    report.add(f"Cheapest configuration with status 0 and max error <= {TARGET:.0e}:")
    report.add()
    best = [(m, cheapest(rows, m)) for m in methods]
    report.table(
        ["method", "configuration", "time [ms]", "max err"],
        [
            [m, r.config, ms(r.timed.seconds), sci(r.error)]
            if r
            else [m, "none reaches the target", "-", "-"]
            for m, r in best
        ],
    )


def ratio(slow: Row | None, fast: Row | None) -> float:
    """time(slow) / time(fast), NaN if either is missing."""
    return slow.timed.seconds / fast.timed.seconds if slow and fast else np.nan


# --------------------------------------------------------------------------- shared runners


def rk45_log_beta(
    field: Callable[[np.ndarray], np.ndarray], theta0: np.ndarray, t_max: float, rtol: float
) -> tuple[np.ndarray, int, int]:
    """scipy RK45 on the flat (2, d) theta in linear coordinates (atol 1e-30: pure relative
    control); log|beta| at the ``N_TIMES`` output times (NaN on failure), nfev, status."""
    shape = theta0.shape
    sol = solve_ivp(
        lambda _t, y: field(y.reshape(shape)).ravel(),
        (0.0, t_max),
        theta0.ravel(),
        method="RK45",
        rtol=rtol,
        atol=1e-30,
        t_eval=np.linspace(0.0, t_max, N_TIMES),
    )
    if sol.status != 0:
        return np.full((N_TIMES, shape[1]), np.nan), sol.nfev, sol.status
    theta = sol.y.T.reshape(N_TIMES, *shape)
    return np.sum(np.log(np.abs(theta)), axis=1), sol.nfev, sol.status


def simulate_log_beta(data: Dataset, algorithm: str, **kw) -> tuple[np.ndarray, int, int]:
    """``simulate`` at L = 2, alpha = 0.4, ``N_TIMES`` outputs: log|beta|, nfev, status."""
    traj = simulate(data, algorithm, DEPTH, ALPHA, n_points=N_TIMES, **kw)
    return traj.log_abs_beta, traj.nfev, traj.status


# --------------------------------------------------------------------------- 1. single example

RHO_1, TAU_MAX = 1.0, 10.0


def reduced_log_rhs(_tau: float, u: np.ndarray) -> np.ndarray:
    """du/dtau for u = log a (balanced L = 2 l2-SAM, single example), N in log space."""
    log_n = 0.5 * np.log(2.0) + 0.5 * np.logaddexp.reduce(2.0 * np.log(MU) + 2.0 * u)
    return MU * (1.0 - RHO_1 * MU * np.exp(-log_n))


def reduced_log_beta(rtol: float) -> tuple[np.ndarray, int, int]:
    """log|beta| (N_TIMES, d) from the reduced system in log coordinates (scipy DOP853, atol
    1e-14), nfev, status."""
    sol = solve_ivp(
        reduced_log_rhs,
        (0.0, TAU_MAX),
        np.full(MU.size, np.log(ALPHA)),
        method="DOP853",
        rtol=rtol,
        atol=1e-14,
        t_eval=np.linspace(0.0, TAU_MAX, N_TIMES),
    )
    return DEPTH * sol.y.T, sol.nfev, sol.status


def single_reference(rtol: float) -> np.ndarray:
    """log|beta| (N_TIMES, d) from the reduced system in log coordinates (DOP853)."""
    log_beta, _, status = reduced_log_beta(rtol)
    assert status == 0
    return log_beta


def log_t_reference(rtol: float, times: np.ndarray) -> np.ndarray:
    """log t at ``times`` (> 0) for the single-example l2-SAM run, independent of ``flows``.

    From the reduced solution ``u = log a`` (DOP853, rtol 1e-13, dense): the perturbed point
    ``a'_j = a_j (1 - rho mu_j / N)``, ``N = (2 sum mu_k^2 a_k^2)^(1/2)``, its margin
    ``m' = sum mu_j a'_j^2`` and ``K = -log c = softplus(m')`` (logistic loss), with ``dK/dtau``
    by the chain rule; then ``v = log t - K`` solves ``dv/dtau = exp(-v) - dK/dtau`` (stiff:
    Radau at ``rtol``; ``t(s0) = s0 e^{K(0)}`` to O(s0^2) at ``s0 = 1e-10``).
    """
    path = solve_ivp(
        reduced_log_rhs,
        (0.0, TAU_MAX),
        np.full(MU.size, np.log(ALPHA)),
        method="DOP853",
        rtol=1e-13,
        atol=1e-14,
        dense_output=True,
    ).sol

    def k_and_rate(tau: float) -> tuple[float, float]:
        u = path(tau)
        du = reduced_log_rhs(tau, u)
        a = np.exp(u)
        norm = np.sqrt(2.0 * np.sum(MU**2 * a**2))
        dnorm = np.sum(2.0 * MU**2 * a**2 * du) / norm
        shifted = a * (1.0 - RHO_1 * MU / norm)
        dshifted = a * du * (1.0 - RHO_1 * MU / norm) + a * RHO_1 * MU * dnorm / norm**2
        m = np.sum(MU * shifted**2)
        return float(np.logaddexp(0.0, m)), float(expit(m) * np.sum(2.0 * MU * shifted * dshifted))

    s0 = 1e-10
    sol = solve_ivp(
        lambda tau, v: [np.exp(-v[0]) - k_and_rate(tau)[1]],
        (s0, float(times[-1])),
        [np.log(s0)],
        method="Radau",
        rtol=rtol,
        atol=1e-13,
        t_eval=times,
        jac=lambda tau, v: [[-np.exp(-v[0])]],
    )
    assert sol.status == 0, sol.message
    return sol.y[0] + np.array([k_and_rate(tau)[0] for tau in times])


def log_t_error(log_t: np.ndarray, ref: np.ndarray) -> float:
    """max |Delta log t| / max(1, |log t|) over the output times after 0."""
    return float(np.max(np.abs(log_t[1:] - ref) / np.maximum(1.0, np.abs(ref))))


def single_sam_field(theta: np.ndarray) -> np.ndarray:
    """dtheta/dtau = grad m(theta + eps), eps = -rho grad m / ||grad m||, where for L = 2
    grad_{w1} m = mu w2 and grad_{w2} m = mu w1."""
    g = MU * theta[::-1]
    return MU * (theta - RHO_1 * g / np.sqrt(np.sum(g * g)))[::-1]


#: The floor of a numpy path: this one problem's reduced system (5 ODEs in log coordinates, a
#: dozen numpy calls per evaluation) in scipy's DOP853, without the original time.
SINGLE_FLOOR = "numpy floor: reduced system, no log t"
FLOOR_TEXT = (
    "The *numpy floor* rows solve this one problem written by hand for it (no events, charts "
    "or original time; a dozen numpy calls per evaluation) with the scipy DOP853 that the numpy "
    "backend steps with: about the best a numpy implementation can do at that rtol, since the "
    "step counts are comparable (nfev columns) and no general field evaluation is cheaper than "
    "this hand-written one."
)
#: The floor of the compiled default call with log t: the call without it, plus one compiled
#: evaluation of K = -log c at the times the quadrature samples (10 n + 1 for n steps).
QUADRATURE_FLOOR = "numba floor: no log t + K at the quadrature's nodes"
QUADRATURE_FLOOR_TEXT = (
    "The *numba floor* row is the cheapest the default call with log t can be with this "
    "quadrature: the call without log t plus the compiled evaluations of K = −log c at the "
    "times the quadrature samples it (each time one of the 11 Chebyshev–Lobatto nodes of a "
    "solver step, adjacent steps sharing one), best times of the two measured apart and added: "
    "no interval rule and no Python around them."
)


def quadrature_floor(data: Dataset, ref: np.ndarray) -> Row | None:
    """The :data:`QUADRATURE_FLOOR` row (None without numba): the default call without log t,
    and the quadrature's own K evaluations of the default call (recorded through
    :func:`flows.integrator.assemble.exponent`, then timed alone)."""
    if DEFAULT_BACKEND != "numba":
        return None
    from flows.integrator import assemble

    calls, exponent = [], assemble.exponent

    def recording(run):
        K = exponent(run)
        return lambda s, where: calls.append((K, s, where)) or K(s, where)

    with mock.patch.object(assemble, "exponent", recording):
        simulate(data, "l2-sam", DEPTH, ALPHA, rho=RHO_1, t_max=TAU_MAX, n_points=N_TIMES)
    nodes = best_of(lambda: [K(s, where) for K, s, where in calls])
    bare = best_of(
        partial(simulate_log_beta, data, "l2-sam", rho=RHO_1, t_max=TAU_MAX, original_time=False)
    )
    log_beta, nfev, status = bare.value
    evaluations = sum(s.size for _, s, _ in calls)
    timed = Timed(bare.seconds + nodes.seconds, min(bare.reps, nodes.reps), bare.value)
    config = f"{evaluations} K evaluations in {len(calls)} batch(es)"
    return Row(QUADRATURE_FLOOR, config, timed, max_error(log_beta, ref), nfev, status)


def single_configs(data: Dataset, quick: bool) -> list[tuple[str, str, Callable]]:
    """(method, configuration, call) for part 1; the first one is the baseline."""
    sim = partial(simulate_log_beta, data, "l2-sam", rho=RHO_1, t_max=TAU_MAX)
    configs = [
        ("simulate", f"default (backend {DEFAULT_BACKEND}, rtol 1e-10, log t)", sim),
        ("simulate, no log t", "original_time=False", partial(sim, original_time=False)),
        ("simulate, numpy", 'backend="numpy" (log t)', partial(sim, backend="numpy")),
        (
            "simulate, numpy, no log t",
            'backend="numpy", original_time=False',
            partial(sim, backend="numpy", original_time=False),
        ),
        ("simulate, old field", 'backend="reference"', partial(sim, backend="reference")),
    ]
    for rtol in [1e-6] if quick else [1e-6, 1e-8]:
        configs.append(
            ("simulate, numpy", f"rtol {rtol:.0e}", partial(sim, backend="numpy", rtol=rtol))
        )
    for rtol in [1e-6] if quick else [1e-6, 1e-8, 1e-12]:
        configs.append(("simulate", f"rtol {rtol:.0e}", partial(sim, rtol=rtol)))
        configs.append(
            (
                "simulate, no log t",
                f"rtol {rtol:.0e}, original_time=False",
                partial(sim, rtol=rtol, original_time=False),
            )
        )
    for rtol in [1e-7, 1e-10] if quick else [1e-7, 1e-8, 1e-10]:
        configs.append((SINGLE_FLOOR, f"rtol {rtol:.0e}", partial(reduced_log_beta, rtol)))
    theta0 = np.full((DEPTH, MU.size), ALPHA)
    for rtol in [1e-4, 1e-8] if quick else [10.0**-k for k in range(3, 13)]:
        configs.append(
            (
                "RK45 full theta",
                f"rtol {rtol:.0e}",
                partial(rk45_log_beta, single_sam_field, theta0, TAU_MAX, rtol),
            )
        )
    return configs


def part_single(report: Report, quick: bool) -> dict:
    """Part 1; returns the summary ratios."""
    report.add("## 1. Single example: D_mu, mu = (1..5), l2-SAM, rho = 1, alpha = 0.4, L = 2")
    report.add()
    report.add(
        f"Rescaled clock, tau in [0, {TAU_MAX:g}], {N_TIMES} output times; error = max "
        "over times and coordinates of |log|beta| - log|beta_ref||."
    )
    report.add()
    data = single_example(MU)
    timed_ref = best_of(lambda: single_reference(1e-13))
    ref = timed_ref.value
    sim_13, _, status_13 = simulate_log_beta(data, "l2-sam", rho=RHO_1, t_max=TAU_MAX, rtol=1e-13)
    report.add(
        "Reference: reduced system (docs/theory.md §8) in log coordinates, scipy DOP853 rtol 1e-13, "
        f"atol 1e-14 ({ms(timed_ref.seconds)} ms); independent of `flows`."
    )
    report.add()
    report.table(
        ["self-check", "max difference"],
        [
            [
                "reference(rtol 1e-13) vs reference(rtol 1e-11)",
                sci(max_error(single_reference(1e-11), ref)),
            ],
            [
                f"reference vs simulate(rtol 1e-13) (status {status_13})",
                sci(max_error(sim_13, ref)),
            ],
        ],
    )
    report.add("Original time (`log_t_original`), relative error max |Δ log t| / max(1, |log t|)")
    report.add("against an independent solution (`log_t_reference`: the reduced path's K = −log c")
    report.add("and the stiff ODE of v = log t − K, Radau):")
    report.add()
    times = np.linspace(0.0, TAU_MAX, N_TIMES)[1:]
    log_t_ref = log_t_reference(1e-10, times)
    log_t_rows = [["reference (Radau rtol 1e-10) vs rtol 1e-9", sci(log_t_error(
        np.concatenate([[0.0], log_t_reference(1e-9, times)]), log_t_ref))]]  # fmt: skip
    for backend in dict.fromkeys([DEFAULT_BACKEND, "numpy"]):
        traj = simulate(data, "l2-sam", DEPTH, ALPHA, rho=RHO_1, t_max=TAU_MAX,
                        n_points=N_TIMES, backend=backend)  # fmt: skip
        log_t_rows.append(
            [
                f"simulate default (backend {backend}) vs reference",
                sci(log_t_error(traj.log_t_original, log_t_ref)),
            ]  # fmt: skip
        )
    report.table(["log t", "max relative difference"], log_t_rows)
    configs = single_configs(data, quick)
    calls = {(m, c): fn for m, c, fn in configs}
    rows = [measure(m, c, fn, ref) for m, c, fn in configs]
    floor = quadrature_floor(data, ref)
    rows += [floor] if floor else []
    methods = [
        "simulate",
        "simulate, no log t",
        "simulate, numpy",
        "simulate, numpy, no log t",
        "simulate, old field",
        SINGLE_FLOOR,
        *([QUADRATURE_FLOOR] if floor else []),
        "RK45 full theta",
    ]
    report_rows(report, rows, rows[0], methods)
    report.add(FLOOR_TEXT)
    report.add()
    if floor:
        report.add(QUADRATURE_FLOOR_TEXT)
        report.add()
    rk, default = cheapest(rows, "RK45 full theta"), rows[0]
    old = next(r for r in rows if r.method == "simulate, old field")
    numpy_default = next(r for r in rows if r.method == "simulate, numpy")
    numpy_floor = next(r for r in rows if r.method == SINGLE_FLOOR and r.config == "rtol 1e-10")
    return {
        "rk_over_quadrature_floor": ratio(rk, floor),
        "default_over_quadrature_floor": ratio(default, floor),
        "numpy_over_numpy_floor": ratio(numpy_default, numpy_floor),
        "rk_over_default": ratio(rk, default) if default.error <= TARGET else np.nan,
        "rk_over_numpy": ratio(rk, numpy_default) if numpy_default.error <= TARGET else np.nan,
        "rk_over_cheapest": ratio(rk, cheapest(rows, "simulate")),
        "rk_over_cheapest_numpy": ratio(rk, cheapest(rows, "simulate, numpy")),
        "numpy_over_default": ratio(numpy_default, default),
        "rk_over_no_log_t": ratio(rk, cheapest(rows, "simulate, no log t")),
        "old_field_over_default": ratio(old, default),
        "rk_over_floor_default": ratio(rk, numpy_floor),
        "rk_over_floor_cheapest": ratio(rk, cheapest(rows, SINGLE_FLOOR)),
        "failures": [r for r in rows if r.status != 0],
        "budget": [
            (
                "1. l2-SAM, default call",
                numpy_default,
                calls[numpy_default.method, numpy_default.config],
                numpy_floor,
                calls[numpy_floor.method, numpy_floor.config],
            ),
        ],  # fmt: skip
    }


# --------------------------------------------------------------------------- 2. multi-sample

N_SAMPLES, DIM, SEED = 40, 10, 0
RHO_2, T_MAX_2 = 0.1, 10.0


def separable_data(seed: int = SEED) -> Dataset:
    """X ~ N(0, 1) of shape (40, 10), y = sign(X w) with w = |N(0, 1)| (a positive predictor,
    so balanced positive inits at L = 2 can separate the data)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N_SAMPLES, DIM))
    y = np.sign(X @ np.abs(rng.standard_normal(DIM)))
    assert np.all(y != 0)
    return Dataset(X, y)


def loss_grad(theta: np.ndarray, signed_x: np.ndarray) -> np.ndarray:
    """grad of the mean logistic loss at theta = (w1, w2): g = (1/n) sum_i l'(m_i) y_i x_i with
    l'(m) = -1 / (1 + e^m), m_i = y_i <w1 w2, x_i>; grad_{w1} = g w2, grad_{w2} = g w1."""
    g = -(expit(-(signed_x @ (theta[0] * theta[1]))) @ signed_x) / signed_x.shape[0]
    return g * theta[::-1]


def multi_field(theta: np.ndarray, signed_x: np.ndarray, rho: float) -> np.ndarray:
    """dtheta/dt = -grad L(theta + eps), eps = rho grad L / ||grad L|| (0 for rho = 0: GD)."""
    if rho > 0:
        g = loss_grad(theta, signed_x)
        theta = theta + rho * g / np.sqrt(np.sum(g * g))
    return -loss_grad(theta, signed_x)


#: The floor of a numpy path on part 2: the balanced L = 2 flow written for this problem only.
MULTI_FLOOR = "numpy floor: balanced log field"


def balanced_log_beta(
    signed_x: np.ndarray, rho: float, t_max: float, rtol: float
) -> tuple[np.ndarray, int, int]:
    """The multi-sample flow from the balanced positive init ``w1 = w2 = w > 0`` (it stays
    balanced and positive here) in ``s = log w``: ``ds/dt = -grad_{w1} L(theta') / w`` with
    :func:`multi_field`'s perturbation (``||grad L||`` over both layers = ``sqrt 2 |g|``); scipy
    DOP853, atol 1e-12. log|beta| = 2 s at the ``N_TIMES`` output times, nfev, status."""

    def grad(w: np.ndarray) -> np.ndarray:
        return -(expit(-(signed_x @ (w * w))) @ signed_x) / signed_x.shape[0] * w

    def rhs(_t: float, log_w: np.ndarray) -> np.ndarray:
        w = np.exp(log_w)
        point = w
        if rho > 0:
            g = grad(w)
            point = w + rho * g / np.sqrt(2.0 * (g @ g))
        return -grad(point) / w

    sol = solve_ivp(
        rhs,
        (0.0, t_max),
        np.full(signed_x.shape[1], np.log(ALPHA)),
        method="DOP853",
        rtol=rtol,
        atol=1e-12,
        t_eval=np.linspace(0.0, t_max, N_TIMES),
    )
    return DEPTH * sol.y.T, sol.nfev, sol.status


def multi_configs(
    sim: Callable, rk45: Callable, floor: Callable, quick: bool
) -> list[tuple[str, str, Callable]]:
    """(method, configuration, call) for part 2 from ``sim(**kw)``, ``rk45(rtol)`` and
    ``floor(rtol)``; the first one is the baseline."""
    configs = [
        ("simulate", f"default (backend {DEFAULT_BACKEND}, rtol 1e-10)", sim),
        ("simulate, numpy", 'backend="numpy"', partial(sim, backend="numpy")),
    ]
    for rtol in [1e-6, 1e-8] if quick else [1e-6, 1e-7, 1e-8]:
        configs.append(("simulate", f"rtol {rtol:.0e}", partial(sim, rtol=rtol)))
        configs.append(
            ("simulate, numpy", f"rtol {rtol:.0e}", partial(sim, backend="numpy", rtol=rtol))
        )
    for rtol in [1e-7, 1e-8] if quick else [1e-6, 1e-7, 1e-8]:
        configs.append((MULTI_FLOOR, f"rtol {rtol:.0e}", partial(floor, rtol)))
    for rtol in [1e-6, 1e-8] if quick else [1e-4, 1e-6, 1e-7, 1e-8, 1e-10, 1e-12]:
        configs.append(("RK45 full theta", f"rtol {rtol:.0e}", partial(rk45, rtol)))
    return configs


def part_multi(report: Report, quick: bool) -> dict:
    """Part 2 (l2-SAM rho = 0.1, then GD); returns the summary ratios."""
    report.add(
        f"## 2. Multi-sample: n = {N_SAMPLES}, d = {DIM} (seed {SEED}), L = 2, "
        "alpha = 0.4, original clock"
    )
    report.add()
    report.add(
        f"t in [0, {T_MAX_2:g}], {N_TIMES} outputs. The reference is `simulate(rtol=1e-13)` "
        "itself (self-referenced); the independent check is its distance to RK45 on the "
        "full theta at rtol 1e-12 (plain numpy field, shares no code with `flows`)."
    )
    report.add()
    data = separable_data()
    out = {"failures": []}
    for algorithm, rho in (("l2-sam", RHO_2), ("gd", 0.0)):
        sim = partial(
            simulate_log_beta,
            data,
            algorithm,
            t_max=T_MAX_2,
            clock="original",
            **({"rho": rho} if rho > 0 else {}),
        )
        signed_x = data.y[:, None] * data.X
        field = partial(multi_field, signed_x=signed_x, rho=rho)
        rk45 = partial(rk45_log_beta, field, np.full((DEPTH, data.d), ALPHA), T_MAX_2)
        floor = partial(balanced_log_beta, signed_x, rho, T_MAX_2)
        ref, _, ref_status = sim(rtol=1e-13)
        check, _, _ = rk45(1e-12)
        configs = multi_configs(sim, rk45, floor, quick)
        name = algorithm + (f", rho = {rho:g}" if rho > 0 else "")
        report.add(f"### {name}")
        report.add()
        report.add(
            f"Reference status {ref_status}; |simulate(rtol 1e-13) - RK45(rtol 1e-12)|_max "
            f"= {sci(max_error(check, ref))}."
        )
        report.add()
        calls = {(m, c): fn for m, c, fn in configs}
        rows = [measure(m, c, fn, ref) for m, c, fn in configs]
        report_rows(
            report, rows, rows[0], ["simulate", "simulate, numpy", MULTI_FLOOR, "RK45 full theta"]
        )
        engine, by_hand = cheapest(rows, "simulate, numpy"), cheapest(rows, MULTI_FLOOR)
        if engine and by_hand:
            out.setdefault("budget", []).append(
                (f"2. {name}, cheapest <= {TARGET:.0e}", engine, calls[engine.method, engine.config],
                 by_hand, calls[by_hand.method, by_hand.config])
            )  # fmt: skip
        out[algorithm] = ratio(cheapest(rows, "RK45 full theta"), cheapest(rows, "simulate"))
        report.add(FLOOR_TEXT)
        report.add()
        out[algorithm + " floor"] = ratio(
            cheapest(rows, "RK45 full theta"), cheapest(rows, MULTI_FLOOR)
        )
        out[algorithm + " numpy"] = ratio(
            cheapest(rows, "RK45 full theta"), cheapest(rows, "simulate, numpy")
        )
        out["failures"] += [r for r in rows if r.status != 0]
    return out


# --------------------------------------------------------------------------- numpy budget


def field_cost(call: Callable[[], object], owner: object, name: str) -> tuple[float, int]:
    """Seconds per right-hand-side evaluation of ``call()``, and how many it made.

    ``owner.name`` is the integrator ``call`` hands its right-hand side to (first argument):
    every state it is evaluated at is recorded during one call, then all of them are replayed
    through the same right-hand side (best of several passes), so the time is the field's
    alone, without the solver around it.
    """
    calls: list[tuple[Callable, float, np.ndarray]] = []
    real = getattr(owner, name)

    def spy(rhs, *args, **kwargs):
        def recording(s, y):
            calls.append((rhs, s, np.array(y)))
            return rhs(s, y)

        return real(recording, *args, **kwargs)

    with mock.patch.object(owner, name, spy):
        call()
    replay = best_of(lambda: [rhs(s, y) for rhs, s, y in calls])
    return replay.seconds / max(1, len(calls)), len(calls)


BUDGET_TEXT = (
    "Each call is split into its field evaluations (every state its solver evaluated, "
    "recorded and replayed through the same right-hand side: count x cost of one) and the "
    "rest (total minus field): for the floor that is scipy's DOP853 itself, for the numpy "
    "backend the same solver plus the events, the charts' bookkeeping and the output. The "
    f"last column is the cost per evaluation at which the numpy call, its rest unchanged, "
    f"would be {NUMPY_FLOOR_TARGET}x its floor (negative: not even with a free field)."
)


def part_numpy_budget(report: Report, cases: list[tuple]) -> None:
    """Where the numpy backend's time goes, against its floor (:data:`BUDGET_TEXT`)."""
    report.add("### The numpy backend against its floor: field and rest")
    report.add()
    report.add(BUDGET_TEXT)
    report.add()
    rows = []
    for case, engine, engine_call, by_hand, by_hand_call in cases:
        per_eval, evals = field_cost(engine_call, driver, "integrate_segment")
        floor_eval, floor_evals = field_cost(by_hand_call, sys.modules[__name__], "solve_ivp")
        rest = engine.timed.seconds - evals * per_eval
        floor_rest = by_hand.timed.seconds - floor_evals * floor_eval
        needed = (NUMPY_FLOOR_TARGET * by_hand.timed.seconds - rest) / evals
        rows.append([
            case, ms(engine.timed.seconds), f"{evals} x {per_eval * 1e6:.1f}", ms(rest),
            ms(by_hand.timed.seconds), f"{floor_evals} x {floor_eval * 1e6:.1f}", ms(floor_rest),
            f"{needed * 1e6:.1f}",
        ])  # fmt: skip
    report.table(
        ["case", "numpy [ms]", "field: evals x us", "rest [ms]", "floor [ms]",
         "floor field: evals x us", "floor rest [ms]", f"field for {NUMPY_FLOOR_TARGET}x [us]"],
        rows,
    )  # fmt: skip


# --------------------------------------------------------------------------- 3. collapse runs

COLLAPSE_ALPHAS, OTHER_ALPHAS = (0.08, 0.2, 0.3, 0.345), (0.35, 0.5, 1.0)
OLD_ENGINE = {"backend": "reference", "chart": "asinh"}
COLLAPSE_TARGET = 0.050  # seconds per collapse run


def fig5_run(alpha: float, **kw):
    """The fig5-type run at ``alpha`` (rescaled clock, tau in [0, 6], 241 outputs)."""
    return simulate(
        single_example(MU),
        "l2-sam",
        depth=2,
        alpha=alpha,
        rho=1.0,
        t_max=6.0,
        n_points=241,
        original_time=False,
        rtol=1e-8,
        **kw,
    )


def describe_run(timed: Timed) -> list[str]:
    """time, nfev, status, collapse tau of a timed fig5 run."""
    traj = timed.value
    tau = traj.collapse_time
    return [
        ms(timed.seconds),
        str(traj.nfev),
        str(traj.status),
        "-" if tau is None else f"{tau:.6f}",
        str(timed.reps),
    ]


def part_collapse(report: Report, quick: bool) -> dict:
    """Part 3; returns the slowest collapse run and the speed-ups."""
    alphas = (0.3, 0.5) if quick else COLLAPSE_ALPHAS + OTHER_ALPHAS
    report.add(
        "## 3. fig5-type runs: l2-SAM, mu = (1..5), L = 2, rho = 1, tau in [0, 6], "
        "241 outputs, rtol 1e-8, original_time=False"
    )
    report.add()
    report.add(
        'Old engine = `backend="reference", chart="asinh"`. Collapse expected for '
        f"alpha <= 0.345; target <= {COLLAPSE_TARGET * 1e3:.0f} ms per collapse run."
    )
    report.add()
    rows, slowest, speedups, failures = [], 0.0, [], []
    for alpha in alphas:
        new, old = (
            best_of(partial(fig5_run, alpha)),
            best_of(partial(fig5_run, alpha, **OLD_ENGINE)),
        )
        rows.append(
            [
                f"{alpha:g}",
                *describe_run(new),
                *describe_run(old),
                f"{old.seconds / new.seconds:.1f}x",
            ]
        )
        speedups.append(old.seconds / new.seconds)
        failures += [f"alpha {alpha:g}: {t.value.message}" for t in (new, old) if t.value.status]
        if new.value.collapse_time is not None:
            slowest = max(slowest, new.seconds)
    report.table(
        [
            "alpha",
            "new [ms]",
            "nfev",
            "status",
            "collapse tau",
            "reps",
            "old [ms]",
            "old nfev",
            "old status",
            "old collapse tau",
            "old reps",
            "old / new",
        ],
        rows,
    )
    return {"slowest_collapse": slowest, "speedups": speedups, "failures": failures}


# --------------------------------------------------------------------------- 4. phase diagram

PHASE_TAU_MAX, PHASE_TARGET = 6.0, 10.0


def old_engine_phase_estimate(ratios: np.ndarray, n_tau: int, every: int) -> float:
    """Old-engine wall time of the whole diagram, extrapolated from every ``every``-th row
    (``simulate`` inside ``analysis.regimes`` bound to the old backend and asinh chart)."""
    old_simulate = partial(simulate, **OLD_ENGINE)
    with mock.patch.object(regimes, "simulate", old_simulate):
        timed = best_of(
            lambda: regimes.leader_phase_diagram(MU, ratios[::every], PHASE_TAU_MAX, n_tau), reps=1
        )
    return timed.seconds * ratios.size / ratios[::every].size


def part_phase(report: Report, quick: bool) -> dict:
    """Part 4; returns the wall time and the old-engine estimate."""
    n_ratio, n_tau, every = (10, 20, 5) if quick else (100, 100, 20)
    ratios = np.geomspace(0.08, 1.6, n_ratio)
    report.add(
        f"## 4. `analysis.regimes.leaders.leader_phase_diagram`: {n_ratio} ratios "
        f"(geomspace(0.08, 1.6)) x {n_tau} tau, tau_max = {PHASE_TAU_MAX:g}"
    )
    report.add()
    timed = best_of(lambda: regimes.leader_phase_diagram(MU, ratios, PHASE_TAU_MAX, n_tau))
    _, lead = timed.value
    estimate = old_engine_phase_estimate(ratios, n_tau, every)
    report.table(
        ["engine", "wall time [s]", "reps", "rows not reached (lead == -2)"],
        [
            [
                "new (default)",
                f"{timed.seconds:.2f}",
                str(timed.reps),
                str(int(np.sum(np.any(lead == -2, axis=1)))),
            ],
            [f"old, estimated from every {every}th row x {every}", f"{estimate:.2f}", "1", "-"],
        ],
    )
    return {"seconds": timed.seconds, "old_estimate": estimate}


# --------------------------------------------------------------------------- environment


def machine_lines() -> list[str]:
    """Versions, machine, CPU model and date."""
    try:
        nproc = subprocess.run(["nproc"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        nproc = str(os.cpu_count())
    model = "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return [
        f"- python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}",
        f"- machine: {platform.platform()}, nproc {nproc}, CPU {model}",
        f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
    ]


def load_average() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg()) + " (1 / 5 / 15 min)"


# --------------------------------------------------------------------------- summary


def part_numba(report: Report) -> None:
    """Part 5: the compiled backend against the numpy one (same numbers, time ratio)."""
    report.add("## 5. numba")
    report.add()
    if not compiled.available():
        report.add(
            "numba is not installed (`pip install -e '.[fast]'`): compiled backend not measured."
        )
        report.add()
        return
    data = single_example(MU)
    rows = []
    for name, depth, kw in (
        ("single example, default call", DEPTH, dict(t_max=TAU_MAX, n_points=N_TIMES)),
        (
            "single example, original_time=False",
            DEPTH,
            dict(t_max=TAU_MAX, n_points=N_TIMES, original_time=False),
        ),
        (
            "fig5 collapse run alpha = 0.3",
            DEPTH,
            dict(alpha=0.3, t_max=6.0, n_points=241, original_time=False, rtol=1e-8),
        ),
        ("single example, L = 3 (blow-up), default call", 3, dict(t_max=TAU_MAX, n_points=N_TIMES)),
    ):
        kw = {"alpha": ALPHA, **kw}
        runs = {
            b: best_of(partial(simulate, data, "l2-sam", depth, rho=RHO_1, backend=b, **kw))
            for b in ("numpy", "numba")
        }
        fast, slow = runs["numba"].value, runs["numpy"].value
        before_end = slice(None, -1) if slow.status == 1 else slice(None)  # see below
        finite = np.isfinite(slow.log_abs_beta[before_end])
        gap = np.max(
            np.abs(fast.log_abs_beta[before_end][finite] - slow.log_abs_beta[before_end][finite]),
            initial=0.0,
        )
        rows.append(
            [
                name,
                ms(runs["numpy"].seconds),
                ms(runs["numba"].seconds),
                f"{runs['numpy'].seconds / runs['numba'].seconds:.1f}x",
                sci(gap),
            ]
        )
    report.table(["run", "numpy [ms]", "numba [ms]", "numpy / numba", "max |dlog|beta||"], rows)
    report.add(
        "A blow-up ends where d log|w|/dtau = 1e12 (`flows.integrator.events.BLOWUP_RATE`): one ulp of tau "
        "moves log|beta| there by ~1e-4, so that last output is left out of the difference."
    )
    report.add()


# --------------------------------------------------------------------------- 6. regression

T_MAX_6, ALPHA_6 = 200.0, 0.1


def regression_field(theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``dtheta/dt = -grad L`` for ``L = (1/2n) ||X (u * v) - y||^2`` at ``theta = (u, v)``,
    in plain floats: ``r = X (u * v) - y``, ``grad_u = X^T r v / n``, ``grad_v = X^T r u / n``."""
    u, v = theta
    g = X.T @ (X @ (u * v) - y) / X.shape[0]
    return -np.stack([g * v, g * u])


def rk45_after_start(
    field: Callable[[np.ndarray], np.ndarray], theta0: np.ndarray, rtol: float
) -> tuple[np.ndarray, int, int]:
    """:func:`rk45_log_beta` over ``[0, T_MAX_6]`` without the row of t = 0 (beta = 0 there:
    log|beta| = -inf in every method)."""
    with np.errstate(divide="ignore"):
        log_beta, nfev, status = rk45_log_beta(field, theta0, T_MAX_6, rtol)
    return log_beta[1:], nfev, status


def plain_solution(
    X: np.ndarray, y: np.ndarray, theta0: np.ndarray, rtol: float
) -> tuple[np.ndarray, int]:
    """scipy DOP853 on the plain (2, d) parameters (atol 1e-30): theta (N_TIMES, 2, d) at the
    output times and the status (the reference of part 6)."""
    sol = solve_ivp(
        lambda _t, th: regression_field(th.reshape(theta0.shape), X, y).ravel(),
        (0.0, T_MAX_6),
        theta0.ravel(),
        method="DOP853",
        rtol=rtol,
        atol=1e-30,
        t_eval=np.linspace(0.0, T_MAX_6, N_TIMES),
    )
    return sol.y.T.reshape(-1, *theta0.shape), sol.status


def plain_log_beta(theta: np.ndarray) -> np.ndarray:
    """log|beta| = log|u v| at the output times after 0."""
    return np.log(np.abs(theta[1:, 0] * theta[1:, 1]))


def plain_loss(theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``L = (1/2n) ||X (u * v) - y||^2`` at each output time."""
    r = (theta[:, 0] * theta[:, 1]) @ X.T - y
    return 0.5 * np.mean(r * r, axis=-1)


def regression_configs(
    data: Dataset, theta0: np.ndarray, quick: bool
) -> list[tuple[str, str, Callable]]:
    """(method, configuration, call) for part 6."""

    def sim(**kw) -> tuple[np.ndarray, int, int]:
        traj = simulate(data, "gd", 2, theta0, t_max=T_MAX_6, n_points=N_TIMES, **kw)
        return traj.log_abs_beta[1:], traj.nfev, traj.status

    configs: list[tuple[str, str, Callable]] = [
        ("simulate", f"default (backend {DEFAULT_BACKEND}, rtol 1e-10)", sim),
        ("simulate, numpy", 'backend="numpy"', partial(sim, backend="numpy")),
    ]
    for rtol in [1e-9] if quick else [1e-8, 1e-9]:
        configs.append(("simulate", f"rtol {rtol:.0e}", partial(sim, rtol=rtol)))
        configs.append(
            ("simulate, numpy", f"rtol {rtol:.0e}", partial(sim, backend="numpy", rtol=rtol))
        )
    field = partial(regression_field, X=data.X, y=data.y)
    for rtol in [1e-7, 1e-8] if quick else [1e-6, 1e-7, 1e-8, 1e-9, 1e-10]:
        configs.append(
            ("RK45 full theta", f"rtol {rtol:.0e}", partial(rk45_after_start, field, theta0, rtol))
        )
    return configs


def part_regression(report: Report, quick: bool) -> dict:
    """Part 6; returns the summary ratios."""
    data = sparse_regression().train
    theta0 = np.vstack([np.full(data.d, ALPHA_6), np.zeros(data.d)])
    report.add(
        f"## 6. Regression: `sparse_regression()` (n = {data.n}, d = {data.d}), GD, L = 2, "
        f"u = {ALPHA_6:g}, v = 0, squared loss"
    )
    report.add()
    timed_ref = best_of(lambda: plain_solution(data.X, data.y, theta0, 1e-13))
    theta, ref_status = timed_ref.value
    ref = plain_log_beta(theta)
    check = plain_log_beta(plain_solution(data.X, data.y, theta0, 1e-11)[0])
    sim_13 = simulate(data, "gd", 2, theta0, t_max=T_MAX_6, n_points=N_TIMES, rtol=1e-13)
    loss = plain_loss(theta, data.X, data.y)
    report.add(
        f"Original clock, t in [0, {T_MAX_6:g}], {N_TIMES} output times (the loss falls from "
        f"{loss[0]:.3g} to {loss[-1]:.3g}, by {loss[0] / loss[-1]:.2g}); error = max over the "
        "times after 0 (beta = 0 at t = 0) and coordinates of |log|beta| - log|beta_ref||."
    )
    report.add()
    report.add(
        f"Reference: scipy DOP853 rtol 1e-13, atol 1e-30 (status {ref_status}, "
        f"{ms(timed_ref.seconds)} ms) on the plain (2, d) parameters, the gradient written out "
        "in floats; independent of `flows`. RK45 integrates the same plain field (atol 1e-30)."
    )
    report.add()
    report.table(
        ["self-check", "max difference"],
        [
            ["reference(rtol 1e-13) vs reference(rtol 1e-11)", sci(max_error(check, ref))],
            [
                f"reference vs simulate(rtol 1e-13) (status {sim_13.status})",
                sci(max_error(sim_13.log_abs_beta[1:], ref)),
            ],
        ],
    )
    rows = [measure(m, c, fn, ref) for m, c, fn in regression_configs(data, theta0, quick)]
    methods = ["simulate", "simulate, numpy", "RK45 full theta"]
    rk = cheapest(rows, "RK45 full theta")
    report_rows(report, rows, rk or rows[0], methods)
    return {
        "rk_over_simulate": ratio(rk, cheapest(rows, "simulate")),
        "rk_over_numpy": ratio(rk, cheapest(rows, "simulate, numpy")),
        "failures": [r for r in rows if r.status != 0],
    }


#: Part 7: the step size and steps of the discrete runs (fig 17's GD step, 1-USAM's rho).
ETA_7, STEPS_7, RHOS_7 = 0.3, 2001, {"gd": 0.0, "usam": 0.1, "1-usam": 0.2}


def hand_iterate(X: np.ndarray, y: np.ndarray, theta0: np.ndarray, algorithm: str,
                 rho: float, eta: float, steps: int) -> np.ndarray:  # fmt: skip
    """The discrete run written out for ``beta = u * v`` and ``L = (1/2n) ||X beta - y||^2``
    (independent of ``flows``): ``grad_u = (X^T r / n) v``, ``grad_v = (X^T r / n) u``; USAM
    ascends by ``rho grad L``, 1-USAM by ``rho grad l_i`` per example (``l_i = r_i^2 / 2``) and
    averages the examples' gradients. Returns the last ``(2, d)`` iterate."""
    n = X.shape[0]
    u, v = theta0[0].copy(), theta0[1].copy()

    def grad(u, v, rows=slice(None), scale=1.0 / n):
        r = X[rows] @ (u * v) - y[rows]
        g = scale * (X[rows].T @ r)
        return g * v, g * u

    for _ in range(steps):
        if algorithm == "gd":
            gu, gv = grad(u, v)
        elif algorithm == "usam":
            eu, ev = grad(u, v)
            gu, gv = grad(u + rho * eu, v + rho * ev)
        else:
            r = X @ (u * v) - y
            eu, ev = rho * r[:, None] * X * v, rho * r[:, None] * X * u  # (n, d): rho grad l_i
            pu, pv = u + eu, v + ev
            ri = np.sum(X * pu * pv, axis=1) - y
            gu, gv = np.mean(ri[:, None] * X * pv, axis=0), np.mean(ri[:, None] * X * pu, axis=0)
        u, v = u - eta * gu, v - eta * gv
    return np.vstack([u, v])


def part_discrete(report: Report, quick: bool) -> None:
    """Part 7: ``iterate`` compiled, numpy and written out by hand (the numpy floor)."""
    data = sparse_regression().train
    theta0 = np.vstack([np.full(data.d, ALPHA_6), np.zeros(data.d)])
    steps = 201 if quick else STEPS_7
    report.add(
        f"## 7. Discrete iterations: `iterate` on `sparse_regression()`, L = 2, u = {ALPHA_6:g}, "
        f"v = 0, eta = {ETA_7:g}, {steps} steps"
    )
    report.add()
    report.add(
        "Per step, best of several runs. *By hand*: the same steps written out in numpy for "
        "`beta = u * v` (`hand_iterate`; independent of `flows`, and the floor of a numpy loop); "
        "the difference is the largest |theta - theta_hand| / max|theta_hand| at the last step."
    )
    report.add()
    rows = []
    for algorithm, rho in RHOS_7.items():
        hp = {} if algorithm == "gd" else {"rho": rho}

        def run(backend, algorithm=algorithm, hp=hp):
            return iterate(data, algorithm, 2, theta0, eta=ETA_7, steps=steps,
                           record_every=steps, backend=backend, **hp).theta[-1]  # fmt: skip

        hand = best_of(partial(hand_iterate, data.X, data.y, theta0, algorithm, rho, ETA_7, steps))
        timed = {b: best_of(partial(run, b)) for b in (DEFAULT_BACKEND, "numpy")}
        scale = np.max(np.abs(hand.value))
        gap = {b: float(np.max(np.abs(t.value - hand.value)) / scale) for b, t in timed.items()}
        per = {b: t.seconds / steps * 1e6 for b, t in timed.items()}
        rows.append([
            algorithm, f"{per[DEFAULT_BACKEND]:.3g}", f"{per['numpy']:.3g}",
            f"{hand.seconds / steps * 1e6:.3g}",
            f"{per['numpy'] / per[DEFAULT_BACKEND]:.1f}x",
            f"{hand.seconds / steps * 1e6 / per[DEFAULT_BACKEND]:.1f}x",
            sci(gap[DEFAULT_BACKEND]), sci(gap["numpy"]),
        ])  # fmt: skip
    report.table(
        ["algorithm", f"{DEFAULT_BACKEND} [us/step]", "numpy [us/step]", "by hand [us/step]",
         f"numpy / {DEFAULT_BACKEND}", f"by hand / {DEFAULT_BACKEND}",
         f"{DEFAULT_BACKEND} vs by hand", "numpy vs by hand"],
        rows,
    )  # fmt: skip


def verdict(met: bool) -> str:
    return "MET" if met else "NOT MET"


def summary_rows(
    single: dict, multi: dict, collapse: dict, phase: dict, regression: dict
) -> list[list[str]]:
    """(quantity, value, target, verdict) rows."""
    r1, r_np = single["rk_over_default"], single["rk_over_numpy"]
    return [
        [
            f"1. time(RK45 <= 1e-6) / time(simulate default, backend {DEFAULT_BACKEND})",
            f"{r1:.2f}x",
            ">= 30x (numba)" if DEFAULT_BACKEND == "numba" else ">= 10x",
            verdict(r1 >= (30 if DEFAULT_BACKEND == "numba" else 10)),
        ],
        [
            '1. time(RK45 <= 1e-6) / time(simulate default, backend="numpy")',
            f"{r_np:.2f}x",
            "-",
            "-",
        ],
        [
            f"1. time(RK45 <= 1e-6) / time(cheapest simulate <= 1e-6 with log t, {DEFAULT_BACKEND})",
            f"{single['rk_over_cheapest']:.2f}x",
            "-",
            "-",
        ],
        [
            "1. time(RK45 <= 1e-6) / time(cheapest simulate <= 1e-6 with log t, numpy)",
            f"{single['rk_over_cheapest_numpy']:.2f}x",
            "-",
            "-",
        ],
        [
            "1. time(RK45 <= 1e-6) / time(numpy floor at the default rtol 1e-10, no log t)",
            f"{single['rk_over_floor_default']:.2f}x",
            "-",
            "-",
        ],
        [
            "1. time(RK45 <= 1e-6) / time(cheapest numpy floor <= 1e-6, no log t)",
            f"{single['rk_over_floor_cheapest']:.2f}x",
            "-",
            "-",
        ],
        [
            "1. time(RK45 <= 1e-6) / time(numba floor: no log t + K at the quadrature's nodes)",
            f"{single['rk_over_quadrature_floor']:.2f}x",
            "-",
            "-",
        ],
        [
            "1. time(simulate default) / time(numba floor with log t), default call",
            f"{single['default_over_quadrature_floor']:.2f}x",
            "-",
            "-",
        ],
        [
            '1. time(simulate default, backend="numpy") / time(numpy floor, rtol 1e-10, no log t)',
            f"{single['numpy_over_numpy_floor']:.2f}x",
            f"<= {NUMPY_FLOOR_TARGET}x",
            verdict(single["numpy_over_numpy_floor"] <= NUMPY_FLOOR_TARGET),
        ],
        [
            "1. time(numpy backend) / time(default backend), default call",
            f"{single['numpy_over_default']:.2f}x",
            "-",
            "-",
        ],
        [
            "1. time(RK45 <= 1e-6) / time(cheapest simulate, original_time=False)",
            f"{single['rk_over_no_log_t']:.2f}x",
            "-",
            "-",
        ],
        [
            "1. time(old field) / time(fused field), default call",
            f"{single['old_field_over_default']:.1f}x",
            "-",
            "-",
        ],
        *[
            [
                f"2. {name}: time(RK45 <= 1e-6) / time(simulate <= 1e-6)",
                f"{multi[key]:.2f}x",
                ">= 1x",
                verdict(multi[key] >= 1),
            ]
            for key, name in (
                ("l2-sam", f"l2-SAM rho 0.1, {DEFAULT_BACKEND}"),
                ("gd", f"GD, {DEFAULT_BACKEND}"),
            )
        ],
        *[
            [
                f"2. {name}, numpy: time(simulate <= 1e-6) / time(numpy floor <= 1e-6)",
                f"{multi[floor] / multi[key]:.2f}x",
                f"<= {NUMPY_FLOOR_TARGET}x",
                verdict(multi[floor] / multi[key] <= NUMPY_FLOOR_TARGET),
            ]
            for key, floor, name in (
                ("l2-sam numpy", "l2-sam floor", "l2-SAM rho 0.1"),
                ("gd numpy", "gd floor", "GD"),
            )
        ],
        *[
            [
                f"2. {name}: time(RK45 <= 1e-6) / time(numpy floor <= 1e-6)",
                f"{multi[key]:.2f}x",
                "-",
                "-",
            ]
            for key, name in (("l2-sam floor", "l2-SAM rho 0.1"), ("gd floor", "GD"))
        ],
        [
            "3. slowest collapse run [ms]",
            ms(collapse["slowest_collapse"]),
            f"<= {COLLAPSE_TARGET * 1e3:.0f}",
            verdict(collapse["slowest_collapse"] <= COLLAPSE_TARGET),
        ],
        [
            "3. old / new engine, fig5 runs (min .. max)",
            f"{min(collapse['speedups']):.1f}x .. {max(collapse['speedups']):.1f}x",
            "-",
            "-",
        ],
        [
            "4. phase diagram wall time [s]",
            f"{phase['seconds']:.2f}",
            f"<= {PHASE_TARGET:g}",
            verdict(phase["seconds"] <= PHASE_TARGET),
        ],
        [
            "4. old (estimated) / new, phase diagram",
            f"{phase['old_estimate'] / phase['seconds']:.1f}x",
            "-",
            "-",
        ],
        *[
            [
                f"6. regression GD: time(RK45 <= 1e-6) / time(simulate <= 1e-6, {name})",
                f"{regression[key]:.2f}x",
                "-",
                "-",
            ]
            for key, name in (("rk_over_simulate", DEFAULT_BACKEND), ("rk_over_numpy", "numpy"))
        ],
    ]


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--quick",
        action="store_true",
        help="smoke version: fewer configurations, small phase diagram",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"Markdown results file (default: {RESULTS} for a full run, none with --quick)",
    )
    args = ap.parse_args(argv)
    out = args.out if args.out is not None else (None if args.quick else RESULTS)
    start = time.perf_counter()
    report = Report()
    report.add("# samflows benchmark" + (" (--quick)" if args.quick else ""))
    report.add()
    report.add(f"Command: `python benchmarks/bench_flows.py{' --quick' if args.quick else ''}`")
    report.add()
    for line in machine_lines():
        report.add(line)
    report.add(
        f"- load average at start: {load_average()} — the machine may be shared with "
        "other jobs, so timings are noisy upwards; best of up to 3 calls each (of up to 25 for calls under 0.1 s)."
    )
    report.add()
    single = part_single(report, args.quick)
    multi = part_multi(report, args.quick)
    part_numpy_budget(report, single["budget"] + multi.get("budget", []))
    collapse = part_collapse(report, args.quick)
    phase = part_phase(report, args.quick)
    part_numba(report)
    regression = part_regression(report, args.quick)
    part_discrete(report, args.quick)
    report.add("## Summary")
    report.add()
    report.table(
        ["quantity", "value", "target", "verdict"],
        summary_rows(single, multi, collapse, phase, regression),
    )
    failures = [
        f"{r.method} {r.config}: status {r.status}"
        for r in single["failures"] + multi["failures"] + regression["failures"]
    ] + collapse["failures"]
    report.add("Runs with status != 0: " + ("; ".join(failures) if failures else "none") + ".")
    report.add()
    report.add(f"- load average at end: {load_average()}")
    report.add(f"- total benchmark time: {time.perf_counter() - start:.1f} s")
    if out is not None:
        report.write(out)
        print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
