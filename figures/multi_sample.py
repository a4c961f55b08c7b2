"""The runs of figures 6 and 7: GD / l2-SAM / l_inf-SAM on multi-sample data, all by
:func:`flows.simulate` (l_inf-SAM's sliding on the surfaces ``G_j(theta) = 0`` included,
:mod:`flows.integrator.filippov`)."""

from __future__ import annotations

import numpy as np

from flows.sweep.registry import Task

from .compared import ALGORITHMS, rho_entry

#: ``{quick: {depth: (t_max, n_points)}}``: the horizon of a figure's runs
Horizons = dict[bool, dict[int, tuple[float, int]]]


def multi_sample_tasks(
    X: np.ndarray,
    y: np.ndarray,
    depths: tuple[int, ...],
    alpha,
    rho: float,
    horizons: Horizons,
    quick: bool,
) -> list[Task]:
    """GD / l2-SAM / l_inf-SAM on data ``(X, y)`` for each depth (depth-major), over
    ``horizons[quick][depth]``, in the rescaled clock."""
    out = []
    for depth in depths:
        t_max, n = horizons[quick][depth]
        for alg in ALGORITHMS:
            params = {
                "X": X.tolist(),
                "y": y.tolist(),
                "algorithm": alg,
                "depth": depth,
                "alpha": alpha,
                **rho_entry(alg, rho),
                "t_max": t_max,
                "n_points": n,
                "original_time": False,
                "rtol": 1e-8,
            }
            out.append(Task("simulate", params))
    return out
