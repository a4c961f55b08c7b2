"""Sweeps: expensive computations as cached tasks, run in parallel, and the figures drawn from
them (``python -m flows.sweep``).

=============================  ===============================================================
:mod:`~flows.sweep.registry`   :class:`Task`, the task kinds and :func:`register`
:mod:`~flows.sweep.kinds`      the engine's kinds, ``simulate`` and ``iterate``
:mod:`~flows.sweep.store`      the on-disk cache: atomic writes, per-task locks, measured costs
:mod:`~flows.sweep.runner`     runs the missing tasks, most expensive first, and reports each
:mod:`~flows.sweep.progress`   what the sweep says: a live line on a terminal, a line a figure
:mod:`~flows.sweep.pool`       the local process pool (one BLAS thread a worker)
:mod:`~flows.sweep.dask_cluster`  the same tasks on a dask cluster (extra ``dask``)
:mod:`~flows.sweep.stamps`     which figures are up to date
:mod:`~flows.sweep.cli`        the command line (:mod:`flows.sweep.__main__`)
=============================  ===============================================================
"""

from .dask_cluster import (
    DaskExecutor,
    SchedulerError,
    address_problem,
    connect,
    import_distributed,
)
from .gate import CompileGate
from .kinds import (  # importing kinds registers the engine's task kinds
    dataset_from,
    iterate_cost,
    iterate_kernels,
    run_iterate,
    run_simulate,
    simulate_arguments,
    simulate_cost,
)
from .pool import local_pool, single_blas_thread, stop_pool, worker_init
from .progress import Above, Progress, RunEvents, TaskLines, clock_time
from .registry import (
    Result,
    Task,
    compute,
    estimated_cost,
    flow_kernels,
    kernel_groups,
    register,
)
from .runner import Outcome, TaskError, run_tasks, work
from .stamps import Stamps, stamp
from .store import Cache, warn

# The command line (flows.sweep.cli, run by ``python -m flows.sweep``) is not re-exported.
__all__ = [
    "Above",
    "Cache",
    "CompileGate",
    "DaskExecutor",
    "Outcome",
    "Progress",
    "Result",
    "RunEvents",
    "SchedulerError",
    "Stamps",
    "Task",
    "TaskError",
    "TaskLines",
    "address_problem",
    "clock_time",
    "compute",
    "connect",
    "dataset_from",
    "estimated_cost",
    "flow_kernels",
    "import_distributed",
    "iterate_cost",
    "iterate_kernels",
    "kernel_groups",
    "local_pool",
    "register",
    "run_iterate",
    "run_simulate",
    "run_tasks",
    "simulate_arguments",
    "simulate_cost",
    "single_blas_thread",
    "stamp",
    "stop_pool",
    "warn",
    "work",
    "worker_init",
]
