#!/usr/bin/env python
"""Speed and accuracy of ``flows.simulate`` against plain alternatives, on one problem.

Run on demand (not a pytest test)::

    python benchmarks/bench_flows.py [--quick]

Problem: the single example D_mu, mu = (1, 2, 3, 4, 5), l2-SAM with rho = 1, balanced
init alpha = 0.4, depth L = 2, rescaled clock, tau in [0, 10]::

    eps(theta) = -rho grad_m(theta) / ||grad_m(theta)||   (norm over all L*d parameters)
    dtheta/dtau = grad_m(theta + eps(theta)),   grad_{w^(l)} m = mu * prod_{k != l} w^(k)

Compared, all against the same reference, on log|beta_j| at the 101 times tau = 0, 0.1, ..., 10:

* reference: an independent solve of the reduced system of SPEC §4 in log coordinates,
  u_j = log a_j, du_j/dtau = mu_j (1 - rho mu_j / N), N = (2 sum_k mu_k^2 e^{2 u_k})^{1/2},
  with scipy DOP853 at rtol = 1e-13, atol = 1e-14 (log|beta_j| = 2 u_j). It shares no code with
  ``flows``. Its own error is estimated against the same solve at rtol = 1e-11 and against
  ``flows.simulate(rtol=1e-13)``.
* ``flows.simulate``: defaults (DOP853, rtol 1e-10, asinh chart) and other rtol values. The time
  is the whole call, which also computes log of the original time (an adaptive quadrature).
* (a) discrete l2-SAM in the rescaled clock, theta_{k+1} = theta_k + h grad_m(theta_k + eps),
  plain numpy on the full (L, d) theta, several step sizes h (first order in h).
* (b) ``scipy.integrate.solve_ivp`` RK45 on the full theta (an L*d vector) in linear
  coordinates, atol = 1e-30 (pure relative control: no coordinate goes below 0.1 here),
  outputs at the 101 times through ``t_eval`` (RK45's dense output), several rtol values.

Each configuration: wall time = best of 3 repetitions (time.perf_counter), and the max over the
101 times and 5 coordinates of |log|beta| - log|beta_ref||. Then, at equal accuracy (max error
<= 1e-6), the cheapest configuration of each method and the time ratios against simulate.
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from contextlib import contextmanager
from unittest import mock

import numpy as np
import scipy
from scipy.integrate import solve_ivp

import flows
from flows import simulate, single_example

MU = np.arange(1.0, 6.0)
RHO = 1.0
ALPHA = 0.4
DEPTH = 2
T_MAX = 10.0
N_TIMES = 101
TIMES = np.linspace(0.0, T_MAX, N_TIMES)
TARGET = 1e-6
REPS = 3
#: Secondary error column: times tau <= T_HALF only (see the diagnosis printed at the end).
T_HALF = 3.5


# --------------------------------------------------------------------------- helpers


def best_of(fn, reps=REPS):
    """(best wall time over ``reps`` calls, result of the last call)."""
    best, result = np.inf, None
    for _ in range(reps):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def max_error(log_beta: np.ndarray, ref: np.ndarray, upto: float = T_MAX) -> float:
    """max |Delta log|beta|| over coordinates and the times <= ``upto`` (inf if NaN / bad shape)."""
    if log_beta.shape != ref.shape or not np.all(np.isfinite(log_beta)):
        return np.inf
    keep = TIMES <= upto + 1e-12
    return float(np.max(np.abs(log_beta[keep] - ref[keep])))


# --------------------------------------------------------------------------- reference


def reduced_log_rhs(_tau, u):
    """du/dtau for u = log a (balanced L = 2 l2-SAM), N in log space."""
    log_n = 0.5 * np.log(2.0) + 0.5 * np.logaddexp.reduce(2.0 * np.log(MU) + 2.0 * u)
    return MU * (1.0 - RHO * MU * np.exp(-log_n))


def reference(rtol=1e-13, atol=1e-14) -> np.ndarray:
    """log|beta| (101, d) from the reduced system in log coordinates (DOP853)."""
    u0 = np.full(MU.size, np.log(ALPHA))
    sol = solve_ivp(reduced_log_rhs, (0.0, T_MAX), u0, method="DOP853", rtol=rtol, atol=atol,
                    t_eval=TIMES)
    assert sol.status == 0, sol.message
    return DEPTH * sol.y.T


# --------------------------------------------------------------------------- plain numpy field


def margin_grad(theta: np.ndarray) -> np.ndarray:
    """grad_{w^(l)} m = mu * prod_{k != l} w^(k) for theta of shape (L, d) (no division)."""
    if theta.shape[0] == 2:
        return MU * theta[::-1]
    ones = np.ones((1, theta.shape[1]))
    prefix = np.cumprod(np.vstack([ones, theta[:-1]]), axis=0)
    suffix = np.cumprod(np.vstack([ones, theta[:0:-1]]), axis=0)[::-1]
    return MU * prefix * suffix


def sam_field(theta: np.ndarray) -> np.ndarray:
    """dtheta/dtau = grad_m(theta + eps), eps = -rho grad_m / ||grad_m|| (all parameters)."""
    g = margin_grad(theta)
    return margin_grad(theta - RHO * g / np.sqrt(np.sum(g * g)))


def discrete_sam(h: float) -> tuple[np.ndarray, int]:
    """(a): theta_{k+1} = theta_k + h F(theta_k); log|beta| at TIMES and the number of steps."""
    per_output = int(round((TIMES[1] - TIMES[0]) / h))
    assert abs(per_output * h - (TIMES[1] - TIMES[0])) < 1e-12, "h must divide the output step"
    theta = np.full((DEPTH, MU.size), ALPHA)
    out = np.empty((N_TIMES, MU.size))
    out[0] = np.sum(np.log(np.abs(theta)), axis=0)
    for i in range(1, N_TIMES):
        for _ in range(per_output):
            theta = theta + h * sam_field(theta)
        out[i] = np.sum(np.log(np.abs(theta)), axis=0)
    return out, per_output * (N_TIMES - 1)


def rk45_full(rtol: float) -> tuple[np.ndarray, int]:
    """(b): solve_ivp RK45 on the flat L*d theta, linear coordinates."""
    shape = (DEPTH, MU.size)
    y0 = np.full(DEPTH * MU.size, ALPHA)
    sol = solve_ivp(lambda _t, y: sam_field(y.reshape(shape)).ravel(), (0.0, T_MAX), y0,
                    method="RK45", rtol=rtol, atol=1e-30, t_eval=TIMES)
    if sol.status != 0:
        return np.full((N_TIMES, MU.size), np.nan), sol.nfev
    theta = sol.y.T.reshape(N_TIMES, *shape)
    return np.sum(np.log(np.abs(theta)), axis=1), sol.nfev


def run_simulate(data, **kw) -> tuple[np.ndarray, int]:
    traj = simulate(data, "l2-sam", DEPTH, ALPHA, rho=RHO, t_max=T_MAX, n_points=N_TIMES, **kw)
    assert traj.status == 0, traj.message
    assert np.allclose(traj.t, TIMES)
    return traj.log_abs_beta, traj.nfev


@contextmanager
def without_original_time():
    """Diagnostic only: replace the log-original-time quadrature inside simulate by zeros."""
    with mock.patch("flows.integrate.log_original_time",
                    lambda tau, log_c, *a, **k: np.zeros_like(np.asarray(tau, dtype=float))):
        yield


# --------------------------------------------------------------------------- main


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer configurations (smoke test)")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()

    print(f"python {platform.python_version()} ({sys.executable}), numpy {np.__version__}, "
          f"scipy {scipy.__version__}, flows from {flows.__file__}")
    print(f"machine: {platform.machine()} {platform.system()} {platform.release()}")
    print(f"problem: mu = {MU.tolist()}, l2-sam, rho = {RHO}, alpha = {ALPHA}, L = {DEPTH}, "
          f"rescaled clock, tau in [0, {T_MAX:g}], {N_TIMES} output times; "
          f"best of {REPS} runs\n")

    data = single_example(MU)

    # reference and its self-checks
    t_ref, ref = best_of(lambda: reference(1e-13))
    ref_11 = reference(1e-11)
    sim_13, _ = run_simulate(data, rtol=1e-13)
    print("reference: reduced system (SPEC §4) in log coordinates, solve_ivp DOP853 "
          f"rtol 1e-13 atol 1e-14 ({t_ref * 1e3:.1f} ms)")
    print(f"  |ref(rtol 1e-13) - ref(rtol 1e-11)|_max       = {max_error(ref_11, ref):.2e}")
    print(f"  |ref - flows.simulate(rtol 1e-13)|_max        = {max_error(sim_13, ref):.2e}")
    print(f"  final log|beta| = {np.array2string(ref[-1], precision=6)}\n")

    rows = []  # (method, config, time, error, work, error on tau <= T_HALF)

    def record(method, config, fn, work_label):
        t, (log_beta, work) = best_of(fn)
        rows.append((method, config, t, max_error(log_beta, ref), f"{work} {work_label}",
                     max_error(log_beta, ref, T_HALF)))

    sim_rtols = [1e-6, 1e-8, 1e-12] if not args.quick else [1e-6]
    record("simulate", "defaults (DOP853, rtol 1e-10)", lambda: run_simulate(data), "nfev")
    for rtol in sim_rtols:
        record("simulate", f"rtol {rtol:.0e}", lambda r=rtol: run_simulate(data, rtol=r), "nfev")
    with without_original_time():
        record("simulate*", "defaults, no log-t quadrature", lambda: run_simulate(data), "nfev")
        record("simulate*", "rtol 1e-06, no log-t quadrature",
               lambda: run_simulate(data, rtol=1e-6), "nfev")

    steps = [1e-2, 1e-3, 1e-4] if not args.quick else [1e-2, 1e-3]
    for h in steps:
        record("(a) discrete", f"h = {h:.0e}", lambda h=h: discrete_sam(h), "steps")

    rk_rtols = [10.0 ** -k for k in range(3, 13)] if not args.quick else [1e-4, 1e-8]
    for rtol in rk_rtols:
        record("(b) RK45 full", f"rtol {rtol:.0e}", lambda r=rtol: rk45_full(r), "nfev")

    # table
    half = f"err t<={T_HALF:g}"
    print(f"{'method':<15} {'configuration':<33} {'time [ms]':>10} {'max err':>10} {half:>10}"
          "  work")
    print("-" * 97)
    for method, config, t, err, work, err_half in rows:
        print(f"{method:<15} {config:<33} {t * 1e3:>10.2f} {err:>10.2e} {err_half:>10.2e}  "
              f"{work}")
    print("(simulate* = diagnostic: simulate with flows.integrate.log_original_time patched "
          "out, i.e. the\n integration alone; not a configuration a user can select)\n")

    # equal accuracy
    def cheapest(method, col=3):
        ok = [r for r in rows if r[0] == method and r[col] <= TARGET]
        return min(ok, key=lambda r: r[2]) if ok else None

    print(f"cheapest configuration with max error <= {TARGET:.0e}:")
    best = {m: cheapest(m) for m in ("simulate", "simulate*", "(a) discrete", "(b) RK45 full")}
    for m, r in best.items():
        print(f"  {m:<15} " + (f"{r[1]:<33} {r[2] * 1e3:9.2f} ms  (err {r[3]:.1e})" if r
                                else "none reaches the target"))
    sim, rk = best["simulate"], best["(b) RK45 full"]

    # (a): first order, extrapolate from the smallest step size
    disc = [r for r in rows if r[0] == "(a) discrete"]
    if best["(a) discrete"] is None and len(disc) >= 2:
        (_, c1, t1, e1, *_), (_, c2, t2, e2, *_) = disc[-2], disc[-1]
        h1, h2 = (float(c.split("=")[1]) for c in (c1, c2))
        order = np.log(e1 / e2) / np.log(h1 / h2)
        const = e2 / h2
        h_need = TARGET / const
        t_need = t2 * h2 / h_need
        print(f"  (a) observed order {order:.2f} between h = {h1:.0e} and {h2:.0e}; "
              f"error ~ {const:.2f} h, so max error {TARGET:.0e} needs h ~ {h_need:.1e}, "
              f"~{T_MAX / h_need:.1e} steps, ~{t_need:.0f} s (extrapolated)")
        t_a = t_need
    else:
        t_a = best["(a) discrete"][2] if best["(a) discrete"] else np.nan

    print()
    if sim and rk:
        ratio_b = rk[2] / sim[2]
        print(f"time(b) / time(simulate) = {ratio_b:.3g}   "
              f"[{rk[1]} vs simulate {sim[1]}]")
    else:
        ratio_b = np.nan
        print("time(b) / time(simulate): not available (a method misses the target)")
    if sim:
        print(f"time(a) / time(simulate) = {t_a / sim[2]:.3g}"
              + ("   (a: extrapolated)" if best["(a) discrete"] is None else ""))
    if best["simulate*"] and rk:
        print(f"diagnostic: time(b) / time(simulate*, integration only) = "
              f"{rk[2] / best['simulate*'][2]:.3g}")
    if not sim:
        floor = min(r[3] for r in rows if r[0] == "simulate")
        print(f"\nsimulate never reaches {TARGET:.0e}: its error floor is {floor:.1e} whatever "
              f"rtol, while its error on tau <= {T_HALF:g} is tiny -> a field error, not a "
              "tolerance\nissue (the minor coordinates drift from tau ~ 3.7, margins ~ 1e10, on). "
              f"Secondary comparison, accuracy judged on tau <= {T_HALF:g} only "
              f"(times still for [0, {T_MAX:g}]):")
        sim_h, rk_h = cheapest("simulate", 5), cheapest("(b) RK45 full", 5)
        simx_h = cheapest("simulate*", 5)
        for name, r in (("simulate", sim_h), ("simulate*", simx_h), ("(b) RK45 full", rk_h)):
            print(f"  {name:<15} " + (f"{r[1]:<33} {r[2] * 1e3:9.2f} ms  (err {r[5]:.1e})"
                                      if r else "none reaches the target"))
        if sim_h and rk_h:
            print(f"  time(b) / time(simulate)  = {rk_h[2] / sim_h[2]:.3g}")
        if simx_h and rk_h:
            print(f"  time(b) / time(simulate*) = {rk_h[2] / simx_h[2]:.3g}")
    met = np.isfinite(ratio_b) and ratio_b >= 10.0
    print(f"\ntarget 'simulate >= 10x faster than (b) at max error <= {TARGET:.0e}': "
          f"{'MET' if met else 'NOT MET'}")
    print(f"\ntotal benchmark time {time.perf_counter() - t_start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
