"""Compile the numba kernels ahead of their first use: ``python -m flows.compiled.warm``.

numba compiles a kernel the first time a call needs it and caches the machine code on disk
(``__pycache__`` beside the module, or ``NUMBA_CACHE_DIR``), so only the first call after an
install or an update pays for it (:data:`flows.compiled.COMPILE_NOTICE`). This module makes
that first call on small problems, one per group of kernels, in parallel processes, and leaves a
stamp file per group in numba's cache folder when its calls are done
(:mod:`flows.compiled.background`, which also starts this module in the background on the first
``backend="auto"`` call that finds the kernels not cached):

* ``segment``: the compiled DOP853 segment loop, its events, the original-time quadrature;
* ``sliding``: l_inf-SAM's sliding combination, on scipy's loop (so that it needs none of the
  segment loop's kernels), with the field kernels and the quadrature's interval rule, and its
  own steps;
* ``discrete``: the compiled loop of ``iterate``'s steps.

Regression (the squared loss) runs on the same kernels with the same argument types (the
targets as offsets, zeros in classification), so these calls compile what it needs too.

    python -m flows.compiled.warm            # every group, as many processes as cores
    python -m flows.compiled.warm --group sliding
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

from . import announce_compiles, available, kernels_compiled
from .background import mark_compiled


def _segment_group() -> None:
    """A default l2-SAM call with its original time, and a loss floor on several examples."""
    from ..data import single_example
    from ..datasets import gaussian_blobs
    from ..integrator.driver import simulate

    simulate(single_example([1.0, 2.0]), "l2-sam", 2, 0.4, rho=1.0, t_max=1.0, n_points=3,
             backend="numba")  # fmt: skip
    simulate(gaussian_blobs(), "gd", 3, 0.4, t_max=1.0, n_points=3, loss_floor=1e-3,
             backend="numba")  # fmt: skip


def _sliding_group() -> None:
    """l_inf-SAM sliding on several examples, with scipy's RK45 (no compiled segment loop), the
    Newton solves (multilinear and tilted) of a point where several surfaces meet, and
    l_inf-SAM's own steps."""
    import numpy as np

    from ..datasets import gaussian_blobs
    from ..integrator.driver import simulate
    from ..model import LOSSES
    from . import _sliding_kernels
    from .stepping import own_steps

    simulate(gaussian_blobs(), "linf-sam", 2, [1.5, 0.8], rho=1.0, t_max=8.0, n_points=3,
             method="RK45", backend="numba")  # fmt: skip
    _sliding_kernels.newton(np.ones((2, 4)), np.ones((4, 2)), 1, 0.0, 0.0)
    _sliding_kernels.tilted_in_tau(np.ones((2, 4)), np.ones(4), 1, 0.0, 0.0, 1.0)
    own_steps(np.ones((3, 2)), 0.0, 0.0, 1.0, False, 0.1, 3, np.array([0.5]), np.eye(2),
              LOSSES["logistic"], 0.1, 1e-3)  # fmt: skip


def _discrete_group() -> None:
    """``iterate``'s compiled loop: l2-SAM on one example, 1-USAM in regression."""
    from ..data import single_example
    from ..datasets import sparse_regression
    from ..discrete import iterate

    iterate(single_example([1.0, 2.0]), "l2-sam", 2, 0.4, eta=0.1, steps=3, rho=0.1,
            backend="numba")  # fmt: skip
    iterate(sparse_regression().train, "1-usam", 2, 0.1, eta=0.1, steps=3, rho=0.1,
            backend="numba")  # fmt: skip


def _many_group() -> None:
    """``iterate_many``'s kernels: deterministic runs stepped together, and seeded minibatch
    draws."""
    from ..data import single_example
    from ..many import iterate_many

    data = single_example([1.0, 2.0])
    iterate_many(data, "l2-sam", 2, [0.4, 0.5], rho=0.1, eta=0.1, steps=3, backend="numba")
    iterate_many(data, "l2-sam", 2, 0.4, rho=0.1, eta=0.1, steps=3, batch_size=1, seed=[0, 1],
                 backend="numba")  # fmt: skip


#: The groups of kernels, each compiled by one small call; the longest first, so that the
#: processes of :func:`warm` end together (on 2 cores from an empty cache: segment 38 s, sliding
#: 29 s, many 18 s, discrete 10 s).
GROUPS: dict[str, Callable[[], None]] = {
    "segment": _segment_group,
    "sliding": _sliding_group,
    "many": _many_group,
    "discrete": _discrete_group,
}


def compile_group(name: str) -> int:
    """Make the calls of group ``name`` and leave its stamp in numba's cache folder
    (:func:`flows.compiled.background.mark_compiled`: ``backend="auto"`` takes numba once every
    group's is there); the number of kernels numba compiled for them (0 when every one came
    from its cache)."""
    announce_compiles()
    before = kernels_compiled()
    GROUPS[name]()
    mark_compiled(name)
    return kernels_compiled() - before


def warm(groups: tuple[str, ...] = tuple(GROUPS), jobs: int | None = None) -> tuple[int, float]:
    """Compile the kernels of ``groups`` in up to ``jobs`` processes (default: the cores);
    ``(kernels compiled, seconds)``."""
    unknown = sorted(set(groups) - set(GROUPS))
    if unknown:
        raise ValueError(f"group must be one of {sorted(GROUPS)}, got {unknown[0]!r}")
    start = time.perf_counter()
    jobs = max(1, min(len(groups), jobs or os.cpu_count() or 1))
    if jobs == 1:
        counts = [compile_group(name) for name in groups]
    else:
        with ProcessPoolExecutor(jobs) as pool:
            counts = list(pool.map(compile_group, groups))
    return sum(counts), time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    """Entry point; 0 when the kernels are compiled (or were cached), 2 on bad input."""
    p = argparse.ArgumentParser(
        prog="python -m flows.compiled.warm", description=__doc__.splitlines()[0]
    )
    p.add_argument("--group", action="append", choices=sorted(GROUPS), help="only these groups")
    p.add_argument("--jobs", type=int, default=None, help="processes (default: the cores)")
    args = p.parse_args(argv)
    if not available():
        print("error: the compiled backend needs numba: pip install -e '.[fast]'", file=sys.stderr)
        return 2
    if args.jobs is not None and args.jobs < 1:
        print(f"error: --jobs must be >= 1, got {args.jobs}", file=sys.stderr)
        return 2
    compiled, seconds = warm(tuple(args.group or GROUPS), args.jobs)
    if compiled:
        print(f"compiled {compiled} numba kernels in {seconds:.1f} s (cached on disk from now on)")
    else:
        print(f"the numba kernels were compiled already (loaded in {seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
