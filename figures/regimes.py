"""Command line of the regime analysis (:mod:`analysis.regimes`), with the phase-diagram plot.

    python -m figures.regimes --mu 1,2,3,4,5 --rho 1 --plot phase.png
    python -m figures.regimes --mu 0.5,1.7,2.9 --n-alpha 6

Prints the collapse certificate, the collapse boundary (bisection on the flow), the analytic
regime-3 boundary and a table of regimes over alpha; ``--plot`` draws the (alpha/rho, tau)
phase diagram for the given ``mu`` (any increasing ``mu``). Bad input prints one line
``error: ...`` on stderr and exits with status 2, before any computation.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from analysis.regimes.boundaries import (
    collapse_boundary,
    collapse_certificate_boundary,
    regime3_boundary,
)
from analysis.regimes.classification import classify
from analysis.regimes.inputs import check_mu, check_positive
from flows.run import OneLineParser, check_output_path

#: Most rows of the table (each row is one flow).
MAX_ROWS = 10_000


def parser() -> argparse.ArgumentParser:
    """The argument parser."""
    p = OneLineParser(
        prog="python -m figures.regimes",
        description="Regimes of l2-SAM (L = 2) over the initialization scale.",
    )
    p.add_argument("--mu", default="1,2,3,4,5", help="comma-separated increasing features")
    p.add_argument("--rho", type=float, default=1.0)
    p.add_argument("--n-alpha", type=int, default=12, help="rows of the table")
    p.add_argument(
        "--plot", help="write the (alpha/rho, tau) phase diagram here (.png, .pdf or .svg)"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """``python -m figures.regimes --mu 1,2,3,4,5 --rho 1 [--plot phase.png]``."""
    args = parser().parse_args(argv)
    try:
        try:
            values = [float(v) for v in args.mu.split(",")]
        except ValueError:
            raise ValueError(f"--mu must be comma-separated numbers, got {args.mu!r}") from None
        mu = check_mu(values)
        rho = check_positive(args.rho, "rho")
        if not 1 <= args.n_alpha <= MAX_ROWS:
            raise ValueError(f"--n-alpha must be in [1, {MAX_ROWS}], got {args.n_alpha}")
        check_output_path(args.plot, "--plot", (".png", ".pdf", ".svg"))
        # raise (naming mu / rho) before any flow runs if the boundaries leave float64
        a3 = regime3_boundary(mu, rho)
        a1 = collapse_boundary(mu, rho)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"mu = {mu}, rho = {rho:g}")
    print(
        f"collapse certain below alpha = {collapse_certificate_boundary(mu, rho):.6g} (N0 <= rho mu_1)"
    )
    print(f"collapse boundary (flow, bisection): alpha = {a1:.6g}   (alpha/rho = {a1 / rho:.6g})")
    print(f"regime-3 boundary (analytic):        alpha = {a3:.6g}   (alpha/rho = {a3 / rho:.6g})")
    print(f"{'alpha':>10} {'regime':>7}  leader sequence (1-based, rescaled time)")
    for alpha in np.geomspace(0.5 * a1, 2.0 * a3, args.n_alpha):
        res = classify(mu, alpha, rho)
        print(f"{alpha:10.4g} {res.regime!s:>7}  {res.leaders.describe()}", flush=True)
    if args.plot:
        from .amplification import phase_diagram_file

        phase_diagram_file(mu, args.plot, boundary=a1 / rho)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
