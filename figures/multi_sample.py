"""Runs on multi-sample data ``(X, y)``: one run as a task (:func:`data_task`, also used by
figures 13 and 14), and the runs of figures 6 and 7, GD / l2-SAM / l_inf-SAM, all by
:func:`flows.simulate` (l_inf-SAM's sliding on the surfaces ``G_j(theta) = 0`` included,
:mod:`flows.integrator.filippov`)."""

from __future__ import annotations

import numpy as np

from flows.sweep.registry import Task

from .compared import ALGORITHMS, rho_entry

#: ``{quick: {depth: (t_max, n_points)}}``: the horizon of a figure's runs
Horizons = dict[bool, dict[int, tuple[float, int]]]


def data_task(
    X,
    y,
    algorithm: str,
    params: dict,
    depth: int,
    alpha,
    t_max: float,
    n_points: int,
    kind: str = "simulate",
    **extra,
) -> Task:
    """One run of ``kind`` on the data ``(X, y)`` in the rescaled clock; ``params`` are the
    algorithm's hyper-parameters as task parameters, ``extra`` further task parameters."""
    return Task(
        kind,
        {
            "X": np.asarray(X).tolist(),
            "y": np.asarray(y).tolist(),
            "algorithm": algorithm,
            "depth": depth,
            "alpha": alpha,
            **params,
            "t_max": t_max,
            "n_points": n_points,
            "original_time": False,
            "rtol": 1e-8,
            **extra,
        },
    )


def multi_sample_tasks(
    X: np.ndarray,
    y: np.ndarray,
    depths: tuple[int, ...],
    alpha,
    rho: float,
    horizons: Horizons,
    quick: bool,
    algorithms: tuple[str, ...] = ALGORITHMS,
) -> list[Task]:
    """``algorithms`` (GD / l2-SAM / l_inf-SAM) on data ``(X, y)`` for each depth
    (depth-major), over ``horizons[quick][depth]``, in the rescaled clock."""
    return [
        data_task(X, y, alg, rho_entry(alg, rho), depth, alpha, *horizons[quick][depth])
        for depth in depths
        for alg in algorithms
    ]


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
