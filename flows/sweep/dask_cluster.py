"""Sweeps on a dask cluster: ``python -m flows.sweep --scheduler ADDRESS``.

``ADDRESS`` is ``tcp://host:port`` (or ``tls://``; ``host:port`` means ``tcp://``), the address
of a running ``dask scheduler``, or ``local`` to start a :class:`distributed.LocalCluster` of
``--jobs`` single-threaded worker processes on this machine. :func:`connect` returns a
:class:`DaskExecutor`: a :class:`concurrent.futures.Executor` that the task runner
(:func:`flows.sweep.runner.run_tasks`) uses like the local process pool, with one difference
(``cache_here``): the sweep, not the workers, takes each task's cache lock and stores its
result, so the workers need not see the cache directory and a task that finished is cached
here whatever happens to the workers afterwards. A worker that dies mid-task loses only that
task: dask runs it again on another worker (or, after ``distributed.scheduler.allowed-failures``
deaths, reports it as failed and a rerun computes it).

The workers need samflows (and whatever defines the task kinds, e.g. ``figures``) importable:
they receive each task kind's function by reference. dask is optional (the ``dask`` extra:
``pip install -e '.[dask]'``); nothing here imports it before :func:`connect` is called.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import re
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

#: how to get dask (the error line of ``--scheduler`` without it)
INSTALL_HINT = "pip install -e '.[dask]'"
#: how long (seconds) to try to reach a scheduler before giving up
CONNECT_TIMEOUT = 3.0
#: tasks kept submitted per worker thread (the runner's window): enough that the workers never
#: wait for the sweep (which may be drawing a figure), few enough that the order holds
TASKS_PER_THREAD = 4
#: bounds of the window (each task out holds a cache lock, i.e. an open file, here)
WINDOW_RANGE = (8, 256)
#: accepted address schemes
SCHEMES = ("tcp", "tls")

_ADDRESS = re.compile(
    r"^(?:(?P<scheme>[a-z]+)://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[^:/\[\]\s]+):(?P<port>\d+)/?$"
)


class SchedulerError(ValueError):
    """``--scheduler`` cannot be used: dask is missing, the address is malformed or nothing
    answers there. The message is the command line's one error line."""


def address_problem(address: str) -> str | None:
    """What is wrong with a ``--scheduler`` value (checked before dask is imported), or None."""
    if address == "local":
        return None
    m = _ADDRESS.match(address or "")
    if m is None:
        return f"--scheduler {address!r} is not tcp://host:port or local"
    if m["scheme"] is not None and m["scheme"] not in SCHEMES:
        return f"--scheduler {address!r}: scheme {m['scheme']!r} is not one of {', '.join(SCHEMES)}"
    if not 1 <= int(m["port"]) <= 65535:
        return f"--scheduler {address!r}: port {m['port']} is not in 1..65535"
    return None


def import_distributed() -> Any:
    """The ``distributed`` module, or :class:`SchedulerError` naming the extra to install."""
    try:
        import distributed
    except ImportError as exc:
        missing = getattr(exc, "name", None) or "dask.distributed"
        raise SchedulerError(
            f"--scheduler needs dask.distributed ({missing} is not installed): {INSTALL_HINT}"
        ) from exc
    return distributed


def connect(address: str, jobs: int = 1) -> DaskExecutor:
    """A :class:`DaskExecutor` on the scheduler at ``address``, or on a new local cluster of
    ``jobs`` single-threaded worker processes (``address == "local"``).

    Raises :class:`SchedulerError` (within about :data:`CONNECT_TIMEOUT`) when dask is not
    installed, the address is malformed or no scheduler answers there.
    """
    problem = address_problem(address)
    if problem:
        raise SchedulerError(problem)
    if jobs < 1:
        raise SchedulerError("--jobs must be >= 1")
    distributed = import_distributed()
    cluster = None
    try:
        if address == "local":
            cluster = distributed.LocalCluster(
                n_workers=jobs,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",  # a free port: two local sweeps do not collide
            )
            # its workers are children of this process and end with it, even on SIGKILL
            client = distributed.Client(cluster, timeout=CONNECT_TIMEOUT, set_as_default=False)
        else:
            _probe(address)
            client = distributed.Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
    except SchedulerError:
        raise
    except Exception as exc:
        if cluster is not None:
            cluster.close()
        if isinstance(exc, OSError):
            raise SchedulerError(f"no dask scheduler reachable at {address}: {exc}") from exc
        raise SchedulerError(
            f"cannot use the dask scheduler at {address}: {type(exc).__name__}: {exc}"
        ) from exc
    return DaskExecutor(client, cluster)


def _probe(address: str) -> None:
    """Ask ``address`` who it is, in a loop of our own, before a client is made: a client that
    fails to start on something that is not a scheduler takes seconds more to close (at exit,
    with a traceback). :class:`SchedulerError` unless a dask scheduler answers."""
    from distributed.core import rpc
    from distributed.security import Security

    timeout = CONNECT_TIMEOUT

    async def identity() -> dict:
        args = Security().get_connection_args("client")
        remote = rpc(address, timeout=timeout, connection_args=args)
        try:
            return await asyncio.wait_for(remote.identity(), timeout)
        finally:
            await remote.close_rpc()

    try:
        who = asyncio.run(identity())
    except (TimeoutError, OSError) as exc:
        reason = str(exc) or f"no answer within {CONNECT_TIMEOUT:g} s"
        raise SchedulerError(f"no dask scheduler reachable at {address}: {reason}") from exc
    except Exception as exc:
        raise SchedulerError(
            f"{address} does not answer as a dask scheduler ({type(exc).__name__}: {exc})"
        ) from exc
    kind = who.get("type") if isinstance(who, dict) else None
    if kind != "Scheduler":
        raise SchedulerError(f"{address} is not a dask scheduler (it says it is a {kind})")


class DaskExecutor(cf.Executor):
    """A :class:`concurrent.futures.Executor` on a ``dask.distributed`` client (and the local
    cluster it owns, if any), for :func:`flows.sweep.runner.run_tasks`.

    ``submit`` sends ``fn(*args, **kwargs)`` to the cluster (never deduplicated: ``pure=False``)
    and returns a :class:`concurrent.futures.Future`; once the result is here the cluster
    forgets it (a worker that dies later makes dask compute nothing again). ``cache_here``
    tells the runner to keep the cache in this process; ``window`` is how many tasks it keeps
    submitted; ``label`` says where the tasks run. :meth:`shutdown` also closes the client and
    the local cluster.
    """

    cache_here = True

    def __init__(self, client: Any, cluster: Any = None):
        self.client, self.cluster = client, cluster
        self._out: set[Any] = set()  # the dask futures whose results are not here yet
        self._lock = threading.Lock()
        self._closed = False

    @property
    def threads(self) -> int:
        """Worker threads of the cluster now."""
        return sum(self.client.nthreads().values())

    @property
    def window(self) -> int:
        """Tasks to keep submitted: :data:`TASKS_PER_THREAD` per worker thread, within
        :data:`WINDOW_RANGE` (a cluster whose workers are still joining gets work)."""
        low, high = WINDOW_RANGE
        return min(max(TASKS_PER_THREAD * self.threads, low), high)

    @property
    def label(self) -> str:
        """Where the tasks run, for the progress lines."""
        workers = len(self.client.nthreads())
        kind = "local dask cluster" if self.cluster is not None else "dask cluster"
        return f"{kind} {self.client.scheduler.address} ({workers} workers, {self.threads} threads)"

    def submit(self, fn, /, *args, **kwargs) -> cf.Future:
        """Run ``fn(*args, **kwargs)`` on the cluster (``kwargs`` are ``fn``'s, never dask's)."""
        if self._closed:
            raise RuntimeError("cannot submit to a DaskExecutor after shutdown")
        task = self.client.submit(partial(fn, **kwargs) if kwargs else fn, *args, pure=False)
        out: cf.Future = cf.Future()
        with self._lock:
            self._out.add(task)
        out.add_done_callback(lambda f: task.cancel() if f.cancelled() else None)
        self.client.loop.add_callback(self._deliver, task, out)
        return out

    async def _deliver(self, task: Any, out: cf.Future) -> None:
        """Gather the result of the dask future ``task`` into ``out`` (on the client's event
        loop, so that many results are in flight at once), then release ``task``."""
        try:
            value = await self.client.gather(task, asynchronous=True)
        except BaseException as exc:  # noqa: BLE001 - passed on (KilledWorker, the task's own)
            _settle(out.set_exception, exc)
        else:
            _settle(out.set_result, value)
        finally:
            with self._lock:
                self._out.discard(task)
            task.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Wait for (or, ``cancel_futures`` or not ``wait``, cancel) what was submitted, then
        close the client and the local cluster. Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            out = list(self._out)
        try:
            if out and wait and not cancel_futures:
                self._wait(out)
            elif out:
                self.client.cancel(out)
        finally:
            self.client.close()
            if self.cluster is not None:
                self.cluster.close()

    @staticmethod
    def _wait(futures: list) -> None:
        """Wait until ``futures`` are done (their errors are their submitters' business)."""
        import distributed

        distributed.wait(futures)


def _settle(setter: Callable[[Any], None], value: Any) -> None:
    """``setter(value)`` unless the future was cancelled meanwhile."""
    try:
        setter(value)
    except cf.InvalidStateError:
        pass
