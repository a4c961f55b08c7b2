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

from . import kinds as _kinds  # noqa: F401  (registers the engine's task kinds)
from .registry import Result, Task, register

__all__ = ["Result", "Task", "register"]
