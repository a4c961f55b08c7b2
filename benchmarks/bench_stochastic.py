#!/usr/bin/env python
"""Minibatch steps of ``iterate`` against a plain numpy minibatch loop, in the same run.

Run on demand (not a pytest test)::

    python benchmarks/bench_stochastic.py              # print the table
    python benchmarks/bench_stochastic.py --write      # also keep it in results.md (its own section)

Each row is one option of ``iterate``'s minibatch steps (:mod:`flows.batch_steps`) at depth 2
from ``alpha = 0.1``, ``eta = 0.01``, on Gaussian features (targets from a 5 % sparse teacher in
regression, its signs in classification), beside the same algorithm written as a plain numpy
loop over the same batches (layers ``u, v``; ``X[rows]``, two products with it per gradient;
the same generator calls for iid and epoch batches, label noise and SGLD, so both draw the same
numbers). Sizes: n = 1000, d = 100, B = 32, 1000 steps, and n = 2000, d = 1000, B = 64, 300
steps; one recorded iterate. Times are per step, the best of ``--repeat`` (5) with the two
taking turns, one BLAS thread (``OPENBLAS_NUM_THREADS=1``). ``ratio`` = iterate / loop; ``agree``
= max |theta_iterate - theta_loop| / max |theta_loop| after the last step. The ``simulate_sde``
rows time 100 paths in one call against a Python loop of 100 one-path calls (other draws, so no
agreement).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
from collections.abc import Callable
from typing import NamedTuple

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads its BLAS

import numpy as np  # noqa: E402
from sections import write_section  # noqa: E402
from timing import best_alternating  # noqa: E402

from flows import Dataset, iterate, simulate_sde  # noqa: E402

HEADING = "## Minibatch steps against a plain numpy loop (`python benchmarks/bench_stochastic.py --write`)"
ALPHA, ETA, SEED = 0.1, 0.01, 7
#: ``(n, d, B, steps)``.
SIZES = ((1000, 100, 32, 1000), (2000, 1000, 64, 300))


class Setting(NamedTuple):
    """One data set and its batches."""

    data: Dataset
    Z: np.ndarray  # rows y_i x_i (classification) or x_i
    offsets: np.ndarray  # y_i (regression) or 0
    batches: np.ndarray  # (steps, B), replayed
    steps: int


def setting(task: str, n: int, d: int, size: int, steps: int) -> Setting:
    """Gaussian features, a 5 % sparse teacher, replayed iid batches."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, d))
    target = X @ (rng.standard_normal(d) * (rng.random(d) < 0.05))
    order = np.array([np.random.default_rng(k).choice(n, size, replace=False)
                      for k in range(steps)])  # fmt: skip
    if task == "regression":
        return Setting(Dataset(X, target, task="regression"), X, target, order, steps)
    y = np.where(target >= 0, 1.0, -1.0)
    return Setting(Dataset(X, y), y[:, None] * X, np.zeros(n), order, steps)


# ------------------------------------------------------------------ the plain loop


def gradient(u, v, Zb, ob, regression: bool):
    """The batch gradient of ``(1/B) sum_i l(<u v, z_i> - o_i)`` in ``u`` and ``v``."""
    m = Zb @ (u * v)
    s = m - ob if regression else -1.0 / (1.0 + np.exp(m))
    g = Zb.T @ s / len(ob)
    return g * v, g * u


def per_example_gradient(u, v, Zb, ob, regression: bool, perturb):
    """``(1/B) sum_i grad l_i`` at each example's own perturbed point."""
    m = Zb @ (u * v)
    s = m - ob if regression else -1.0 / (1.0 + np.exp(m))
    Gu, Gv = s[:, None] * Zb * v, s[:, None] * Zb * u
    norms = np.sqrt(np.sum(Gu * Gu, axis=1) + np.sum(Gv * Gv, axis=1))[:, None]
    eu, ev = perturb(Gu, Gv, norms)
    pu, pv = u + eu, v + ev
    m = np.sum(Zb * pu * pv, axis=1)
    s = m - ob if regression else -1.0 / (1.0 + np.exp(m))
    return (s[:, None] * Zb * pv).mean(axis=0), (s[:, None] * Zb * pu).mean(axis=0)


def l2(gu, gv, u, v, rho=0.05):
    """``rho g / ||g||``."""
    n = np.sqrt(gu @ gu + gv @ gv)
    return rho * gu / n, rho * gv / n


def linf(gu, gv, u, v, rho=0.001):
    """``rho sign(g)``."""
    return rho * np.sign(gu), rho * np.sign(gv)


def unnormalised(gu, gv, u, v, rho=0.05):
    """``rho g`` (USAM)."""
    return rho * gu, rho * gv


def lesam(gu, gv, u, v, sigma=0.05, rho_max=0.1, varrho=1e-12):
    """``min(sigma / (||g|| + varrho), rho_max) g / ||g||``."""
    n = np.sqrt(gu @ gu + gv @ gv)
    r = min(sigma / (n + varrho), rho_max) / n
    return r * gu, r * gv


def lesam_official(gu, gv, u, v, sigma=0.05, rho_max=0.1, e=1e-12):
    """``min(sigma / (N + e), rho_max) g / (N + e)``, ``N = sqrt(||g||^2 + e)``."""
    norm = np.sqrt(gu @ gu + gv @ gv + e)
    r = min(sigma / (norm + e), rho_max) / (norm + e)
    return r * gu, r * gv


def asam(gu, gv, u, v, rho=0.05, offset=0.01):
    """``rho T^2 g / (||T g|| + 1e-16)``, ``T = |theta| + offset``."""
    tu, tv = np.abs(u) + offset, np.abs(v) + offset
    n = np.sqrt(np.sum((tu * gu) ** 2) + np.sum((tv * gv) ** 2))
    f = rho / (n + 1e-16)
    return f * tu * tu * gu, f * tv * tv * gv


def per_example_l2(Gu, Gv, norms, rho=0.05):
    """``rho g_i / ||g_i||`` per example."""
    return rho * Gu / norms, rho * Gv / norms


def per_example_unnormalised(Gu, Gv, norms, rho=0.05):
    """``rho g_i`` per example."""
    return rho * Gu, rho * Gv


def plain_loop(s: Setting, rows: Callable[[int], np.ndarray], perturb=None, per_example=None,
               momentum=0.0, label_noise=0.0, temperature=0.0) -> np.ndarray:  # fmt: skip
    """Minibatch GD / SAM on ``u, v`` over ``rows(k)``, PyTorch's momentum, label noise and
    SGLD drawn as :class:`flows.minibatch.StepNoise` draws them; the last ``(u, v)``."""
    regression = s.data.regression
    d = s.Z.shape[1]
    u, v = np.full(d, ALPHA), np.full(d, ALPHA)
    bu = bv = None
    for k in range(s.steps):
        index = rows(k)
        Zb, ob = s.Z[index], s.offsets[index]
        if label_noise:
            ob = ob + label_noise * np.random.default_rng([SEED, k, 1]).standard_normal(len(ob))
        if per_example is not None:
            gu, gv = per_example_gradient(u, v, Zb, ob, regression, per_example)
        else:
            gu, gv = gradient(u, v, Zb, ob, regression)
            if perturb is not None:
                eu, ev = perturb(gu, gv, u, v)
                gu, gv = gradient(u + eu, v + ev, Zb, ob, regression)
        if momentum:
            bu, bv = (gu, gv) if bu is None else (momentum * bu + gu, momentum * bv + gv)
            gu, gv = bu, bv
        u, v = u - ETA * gu, v - ETA * gv
        if temperature:
            xi = np.random.default_rng([SEED, k, 2]).standard_normal((2, d))
            kick = np.sqrt(2 * ETA * temperature) * xi
            u, v = u + kick[0], v + kick[1]
    return np.array([u, v])


def iid_rows(n: int, size: int) -> Callable[[int], np.ndarray]:
    """The batches of ``sampling='iid'`` with the root seed :data:`SEED`."""
    return lambda k: np.random.default_rng([SEED, k]).choice(n, size, replace=False)


def epoch_rows(n: int, size: int) -> Callable[[int], np.ndarray]:
    """The batches of ``sampling='epoch'``: one permutation per epoch."""
    per_epoch = -(-n // size)
    orders: dict[int, np.ndarray] = {}

    def rows(k: int) -> np.ndarray:
        epoch, j = divmod(k, per_epoch)
        if epoch not in orders:
            orders.clear()
            orders[epoch] = np.random.default_rng([SEED, epoch]).permutation(n)
        return orders[epoch][j * size : (j + 1) * size]

    return rows


# ------------------------------------------------------------------ the cases


class Case(NamedTuple):
    """A row: ``iterate`` (its last iterate) and the plain loop (its last iterate, or None)."""

    name: str
    ours: Callable[[], np.ndarray]  # the last iterate
    plain: Callable[[], np.ndarray | None]


#: ``(algorithm, hyper-parameters, plain perturbation, per-example perturbation)``.
VARIANTS = (
    ("l2-sam", {"rho": 0.05}, l2, None),
    ("linf-sam", {"rho": 0.001}, linf, None),
    ("usam", {"rho": 0.05}, unnormalised, None),
    ("le-sam", {"sigma": 0.05, "rho_max": 0.1}, lesam, None),
    ("le-sam-official", {"sigma": 0.05, "rho_max": 0.1}, lesam_official, None),
    ("asam", {"rho": 0.05}, asam, None),
    ("1-sam", {"rho": 0.05}, None, per_example_l2),
    ("1-usam", {"rho": 0.05}, None, per_example_unnormalised),
)


def run(s: Setting, algorithm: str = "gd", **kw) -> Callable[[], np.ndarray]:
    """``iterate`` on the setting (replayed batches unless ``kw`` says otherwise)."""
    if "batch_size" not in kw:
        kw["batches"] = s.batches
    return lambda: iterate(s.data, algorithm, 2, ALPHA, eta=ETA, steps=s.steps,
                           record_every=s.steps, **kw).theta[-1]  # fmt: skip


def cases() -> list[Case]:
    out: list[Case] = []
    for n, d, size, steps in SIZES:
        tag = f"n={n} d={d} B={size}"
        for task in ("regression", "classification"):
            s = setting(task, n, d, size, steps)
            replayed = s.batches.__getitem__
            out.append(Case(f"gd, {task}, {tag}", run(s), lambda s=s, r=replayed: plain_loop(s, r)))
            out.append(Case(f"l2-sam, {task}, {tag}", run(s, "l2-sam", rho=0.05),
                            lambda s=s, r=replayed: plain_loop(s, r, l2)))  # fmt: skip
        s = setting("regression", n, d, size, steps)
        replayed = s.batches.__getitem__
        for name, hp, perturb, own in VARIANTS[1:]:
            out.append(Case(f"{name}, regression, {tag}", run(s, name, **hp),
                            lambda s=s, r=replayed, p=perturb, o=own: plain_loop(s, r, p, o)))  # fmt: skip
        options = (
            ("gd, momentum 0.9", dict(momentum=0.9), {"momentum": 0.9}, replayed),
            ("gd, label noise 0.1", dict(label_noise=0.1, seed=SEED), {"label_noise": 0.1},
             replayed),
            ("gd, SGLD T = 1e-6", dict(temperature=1e-6, seed=SEED), {"temperature": 1e-6},
             replayed),
            ("gd, iid batches drawn", dict(batch_size=size, seed=SEED), {}, iid_rows(n, size)),
            ("gd, epoch batches drawn", dict(batch_size=size, seed=SEED, sampling="epoch"), {},
             epoch_rows(n, size)),
        )  # fmt: skip
        for name, ours, plain, rows in options:
            out.append(Case(f"{name}, regression, {tag}", run(s, **ours),
                            lambda s=s, r=rows, p=plain: plain_loop(s, r, **p)))  # fmt: skip
    rng = np.random.default_rng(1)
    X = rng.standard_normal((100, 20))
    small = Dataset(X, X[:, :3].sum(axis=1), task="regression")
    for algorithm, hp in (("gd", {}), ("l2-sam", {"rho": 0.05})):
        kw = dict(eta=0.05, batch_size=10, t_max=1.0, n_points=11, **hp)
        out.append(Case(
            f"simulate_sde {algorithm}, 100 paths (loop: 100 one-path calls), n=100 d=20",
            lambda a=algorithm, kw=kw: simulate_sde(small, a, 2, 0.5, paths=100, seed=0, **kw).theta,
            lambda a=algorithm, kw=kw: sde_loop(small, a, kw),
        ))  # fmt: skip
    return out


def sde_loop(data: Dataset, algorithm: str, kw: dict) -> None:
    """100 one-path ``simulate_sde`` calls (seeds 0..99)."""
    for seed in range(100):
        simulate_sde(data, algorithm, 2, 0.5, paths=1, seed=seed, **kw)


def measure(repeat: int) -> list[tuple[str, float, float, float | None]]:
    """``(case, iterate seconds, loop seconds, agreement)`` per case, best of ``repeat``."""
    rows = []
    for case in cases():
        (best_ours, best_plain), (ours, plain) = best_alternating(repeat, case.ours, case.plain)
        agree = None
        if isinstance(plain, np.ndarray):
            agree = float(np.max(np.abs(ours - plain)) / np.max(np.abs(plain)))
        rows.append((case.name, best_ours, best_plain, agree))
        print(f"{case.name}: {best_ours / best_plain:.2f}", flush=True)
    return rows


def table(rows: list[tuple[str, float, float, float | None]], repeat: int) -> str:
    """The rows as a markdown section (times per step for iterate, per call for the SDE)."""
    lines = [
        HEADING,
        "",
        f"{datetime.date.today()}, {platform.processor() or platform.machine()}, nproc "
        f"{os.cpu_count()}, load average {os.getloadavg()[0]:.1f}, OPENBLAS_NUM_THREADS="
        f"{os.environ['OPENBLAS_NUM_THREADS']}, best of {repeat}; depth 2, alpha {ALPHA}, eta "
        f"{ETA}, replayed batches unless drawn; the module docstring has the setting.",
        "",
        "| case | iterate (us/step) | plain numpy loop (us/step) | ratio | agree |",
        "|---|---|---|---|---|",
    ]
    for name, ours, plain, agree in rows:
        steps = next((st for n, d, b, st in SIZES if f"n={n} d={d} B={b}" in name), None)
        unit = 1e6 / steps if steps else 1e3
        cells = f"{ours * unit:.1f} | {plain * unit:.1f}"
        if steps is None:
            cells = f"{ours * unit:.1f} ms (call) | {plain * unit:.1f} ms (loop)"
        mark = "-" if agree is None else f"{agree:.0e}"
        lines.append(f"| {name} | {cells} | {ours / plain:.2f} | {mark} |")
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
