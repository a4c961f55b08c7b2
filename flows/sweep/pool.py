"""A local process pool whose workers die with the process that started it.

When that process dies, even by SIGKILL, its workers are re-parented; each worker watches
``os.getppid()`` and exits as soon as it changes, so a killed sweep leaves no worker behind.
Tasks run with one BLAS thread (:func:`single_blas_thread`, in every worker and in a sweep
that runs them in-process): the pool already keeps every core busy, the BLAS thread pool's
spinning on the small matrix products of a run costs CPU that the other workers need (digits,
l_inf-SAM: 50% more CPU for the same wall time with two BLAS threads), and the numbers then do
not depend on the machine's core count (a threaded BLAS splits sums differently).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor

from threadpoolctl import threadpool_limits

#: how often a worker checks that the sweep that started it is still alive (seconds)
PARENT_POLL = 0.2


def local_pool(jobs: int) -> ProcessPoolExecutor:
    """A process pool of ``jobs`` workers that die with this process (fork where available,
    so that task kinds registered at run time are known to the workers)."""
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    return ProcessPoolExecutor(
        max_workers=jobs, mp_context=context, initializer=worker_init, initargs=(os.getpid(),)
    )


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel what is queued and end the workers now (on an error or an interruption)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()


def single_blas_thread() -> threadpool_limits:
    """Limit the BLAS libraries loaded in this process to one thread; the limit holds until
    the returned object's ``restore_original_limits()`` (or the end of a ``with`` block)."""
    return threadpool_limits(limits=1, user_api="blas")


def worker_init(parent: int) -> None:
    """Pool initializer: one BLAS thread; the worker exits when its parent (the sweep) dies."""
    single_blas_thread()
    _watch_parent(parent)


def _watch_parent(parent: int) -> None:
    """Exit this process (``os._exit``) as soon as ``parent`` is no longer its parent."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL)
        os._exit(70)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
