#!/usr/bin/env python
"""Where SAM blows up at depth on multi-example data, against GD and the KKT conditions.

    python examples/sam_at_depth.py                 # 10 teacher sets, L = 3
    python examples/sam_at_depth.py --sets 3 --depth 4

For each data set (Gaussian X, n = 30, d = 8, labels from a Gaussian teacher w; seeds 0..) the
default ``simulate`` of GD, l2-SAM (rho 0.1), LE-SAM (sigma 0.1, rho_max 0.5) and USAM (rho 0.1)
from ``orthant_init(sign w, L, 0.5)``; per run its status, the KKT residual of its last direction
for the l_{2/L} max-margin problem (:func:`analysis.margin_programs.quasi_norm.kkt_check`) and
its distance ``||beta/|beta| - beta_GD/|beta_GD| ||_2`` to GD's.
"""

from __future__ import annotations

import warnings

import numpy as np

from analysis.margin_programs.quasi_norm import kkt_check
from flows import Dataset, orthant_init, simulate
from flows.run import OneLineParser

ALGORITHMS = {
    "gd": {},
    "l2-sam": {"rho": 0.1},
    "le-sam": {"sigma": 0.1, "rho_max": 0.5},
    "usam": {"rho": 0.1},
}


def teacher_set(seed: int, n: int = 30, d: int = 8) -> tuple[Dataset, np.ndarray]:
    """Gaussian ``X`` (n, d), labels ``sign(X w)`` of a Gaussian teacher ``w``; and ``sign w``."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w = rng.standard_normal(d)
    return Dataset(X, np.sign(X @ w)), np.sign(w)


def last_direction(data: Dataset, algorithm: str, depth: int, signs: np.ndarray):
    """``(status, beta / |beta|)`` at the end of the default run."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        tr = simulate(data, algorithm, depth, orthant_init(signs, depth, 0.5), t_max=100.0,
                      original_time=False, **ALGORITHMS[algorithm])  # fmt: skip
    beta = tr.sign_beta[-1] * np.exp(tr.log_abs_beta[-1] - np.max(tr.log_abs_beta[-1]))
    return tr.status, beta / np.linalg.norm(beta)


def main() -> None:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=10, help="data sets (seeds 0..)")
    parser.add_argument("--depth", type=int, default=3, help="depth L >= 3")
    args = parser.parse_args()
    if args.sets < 1 or args.depth < 3:
        parser.error("--sets must be >= 1 and --depth >= 3")
    print("| set | " + " | ".join(f"{a}: status, KKT, to GD" for a in ALGORITHMS) + " |")
    print("|---" * (len(ALGORITHMS) + 1) + "|")
    for seed in range(args.sets):
        data, signs = teacher_set(seed)
        cells, gd = [], None
        for algorithm in ALGORITHMS:
            status, direction = last_direction(data, algorithm, args.depth, signs)
            gd = direction if gd is None else gd
            residual = kkt_check(data, args.depth, direction).kkt_residual
            distance = float(np.linalg.norm(direction - gd))
            cells.append(f"{status}, {residual:.1e}, {distance:.1e}")
        print(f"| {seed} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
