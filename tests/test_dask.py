"""``python -m flows.sweep --scheduler``: sweeps on a dask cluster (:mod:`flows.sweep.dask_cluster`).

The dask path gives the same cached results as the local process pool, a worker killed
mid-task loses no other result (and a rerun computes only what is missing), a malformed or
unreachable address is one error line with status 2 within seconds, and without dask the error
names the extra to install. Runs on one ``LocalCluster(n_workers=2, processes=True,
threads_per_worker=1)`` shared by the module (about 20 s in all on two loaded cores).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

import figures.table  # noqa: E402
from figures.common import Figure  # noqa: E402
from flows.sweep.cli import main  # noqa: E402
from flows.sweep.dask_cluster import INSTALL_HINT, DaskExecutor, connect  # noqa: E402
from flows.sweep.registry import Task, register  # noqa: E402
from flows.sweep.runner import run_tasks  # noqa: E402
from flows.sweep.store import SECONDS_ENTRY, Cache  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
#: Waits on other processes are hang guards, not pass criteria (a busy machine waits longer).
HANG_GUARD = 600.0
PNG = b"\x89PNG\r\n\x1a\n"


def quiet(*_):
    """A ``log`` that prints nothing."""


def sleepy_task(params: dict) -> dict:
    """A slow fake task kind: marks each start (``<x>-<pid>-<ns>`` in ``marks``), then sleeps;
    with ``hang``, its first start sleeps a minute (the test kills its worker meanwhile)."""
    marks = Path(params["marks"])
    first = not list(marks.glob(f"{params['x']}-*"))
    (marks / f"{params['x']}-{os.getpid()}-{time.time_ns()}").touch()
    time.sleep(60.0 if params.get("hang") and first else params["sleep"])
    return {"x": np.array(params["x"]), "root": np.sqrt(np.arange(5.0) * params["x"])}


def square_task(params: dict) -> dict:
    """A cheap fake task kind."""
    return {"square": np.array(params["x"] ** 2), "grid": np.linspace(0.0, params["x"], 7)}


register("test-dask-sleepy", sleepy_task)
register("test-dask-square", square_task)


@pytest.fixture(scope="module")
def cluster():
    """The module's local cluster: two single-threaded worker processes."""
    with distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
    ) as local:
        yield local


@pytest.fixture
def executor(cluster):
    """A :class:`DaskExecutor` on the module's cluster, with both workers up."""
    dask = connect(cluster.scheduler_address)
    dask.client.wait_for_workers(2, timeout=HANG_GUARD)
    yield dask
    dask.shutdown()


def arrays(folder: Path) -> dict[str, dict[str, np.ndarray]]:
    """The arrays of every cached result in ``folder`` by file name (no compute time)."""
    out = {}
    for path in sorted(folder.glob("*.npz")):
        with np.load(path, allow_pickle=False) as f:
            out[path.name] = {k: f[k] for k in f.files if k != SECONDS_ENTRY}
    return out


def assert_same_arrays(a: dict, b: dict) -> None:
    """Same files, same arrays, bit for bit (dtype, shape and bytes)."""
    assert sorted(a) == sorted(b) and a
    for name in a:
        assert sorted(a[name]) == sorted(b[name]), name
        for key, value in a[name].items():
            other = b[name][key]
            assert value.dtype == other.dtype and value.shape == other.shape, (name, key)
            assert value.tobytes() == other.tobytes(), (name, key)


# --------------------------------------------------------------------------- results


@pytest.mark.slow  # 3 s: a whole quick figure on the cluster (the task path is tested below)
def test_quick_figure_on_dask_matches_process_pool(cluster, tmp_path, capsys):
    """fig4 (quick) on the cluster and on the local process pool (a separate process: no fork
    under the cluster's threads): the same cache files, array for array, bit for bit."""
    pool = subprocess.Popen(
        [sys.executable, "-m", "flows.sweep", "--quick", "fig4_amplification", "--jobs", "2"]
        + ["--out", str(tmp_path / "pool-out"), "--cache", str(tmp_path / "pool")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    args = ["--quick", "fig4_amplification", "--scheduler", cluster.scheduler_address]
    dask_run = [*args, "--verbose", "--out", str(tmp_path / "o"), "--cache", str(tmp_path / "dask")]
    assert main(dask_run) == 0
    out, err = pool.communicate(timeout=HANG_GUARD)
    assert pool.returncode == 0, err
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("computing 4 runs (0 cached) on dask cluster tcp://")
    assert [line.split("]")[0] for line in lines[1:5]] == [f"  [{i}/4" for i in range(1, 5)]
    assert lines[5].startswith("wrote ") and "4 runs computed" in lines[6] and len(lines) == 7
    assert (tmp_path / "o" / "fig4_amplification.png").read_bytes()[:8] == PNG
    assert_same_arrays(arrays(tmp_path / "dask"), arrays(tmp_path / "pool"))
    # a rerun on the cluster takes everything from the cache the dask run wrote
    assert main([*args, "--out", str(tmp_path / "o"), "--cache", str(tmp_path / "dask")]) == 0
    assert " 0 runs computed" in capsys.readouterr().out


@pytest.mark.slow
def test_run_tasks_on_dask_equals_serial(executor, tmp_path):
    """``run_tasks`` with the executor: every result computed once and stored here, the same
    arrays as a serial run."""
    tasks = [Task("test-dask-square", {"x": float(x)}) for x in range(12)]
    results, computed = run_tasks(tasks, Cache(tmp_path / "d"), executor=executor, log=quiet)
    assert computed == 12 and len(list((tmp_path / "d").glob("*.npz"))) == 12
    serial, _ = run_tasks(tasks, Cache(tmp_path / "s"), jobs=1, log=quiet)
    assert_same_arrays(arrays(tmp_path / "d"), arrays(tmp_path / "s"))
    for task in tasks:
        assert float(results[task.key()]["square"]) == float(serial[task.key()]["square"])


@pytest.mark.slow  # 2.5-3.5 s: starts a cluster of its own (the command line's dask path stays in
# the default run: test_worker_address_is_not_a_scheduler; its results: the test above)
def test_local_scheduler_with_fake_figure(monkeypatch, tmp_path, capsys):
    """``--scheduler local --jobs 1``: a local cluster of its own; the figure is drawn here;
    the output is the figure's line and the summary, as without dask."""
    figure = Figure(
        "fake_dask",
        "fake",
        "Is it drawn?",
        lambda quick: [Task("test-dask-square", {"x": float(x)}) for x in (1, 2, 3)],
        lambda results, quick, path: Path(path).write_text(
            f"{[float(r['square']) for r in results]} {os.getpid()}"
        ),
    )
    monkeypatch.setattr(figures.table, "FIGURES", {"fake_dask": figure})
    args = ["--scheduler", "local", "--jobs", "1", "--out", str(tmp_path), "--cache"]
    assert main([*args, str(tmp_path / "c")]) == 0
    text, pid = (tmp_path / "fake_dask.png").read_text().rsplit(" ", 1)
    assert text == "[1.0, 4.0, 9.0]" and int(pid) == os.getpid()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"wrote {tmp_path / 'fake_dask.png'}: 3 runs (3 computed in ")
    assert lines[1].startswith("done: 1 of 1 figure(s) (0 up to date), 3 runs computed")
    assert len(lines) == 2


# --------------------------------------------------------------------------- a worker dies


def kill_when_started(marks: Path, x: float, cache: Path, killed: list, cached: list) -> None:
    """Wait (up to :data:`HANG_GUARD`) for task ``x`` to start with two results already cached,
    then SIGKILL the worker process running it; ``killed`` gets its pid, ``cached`` the files
    cached then."""
    deadline = time.monotonic() + HANG_GUARD
    while time.monotonic() < deadline:
        started = list(marks.glob(f"{x}-*"))
        stored = [p for p in cache.glob("*.npz") if not p.name.startswith(".")]  # not temp files
        if started and len(stored) >= 2:
            cached.extend(p.name for p in stored)
            time.sleep(0.2)  # the cluster has forgotten what is cached (released futures)
            os.kill(int(started[0].name.split("-")[1]), signal.SIGKILL)
            killed.append(int(started[0].name.split("-")[1]))
            return
        time.sleep(0.01)


@pytest.mark.parametrize(
    "allowed_failures",
    [
        pytest.param(
            0, marks=pytest.mark.slow
        ),  # 1.3 s; the executor path stays in the default run
        pytest.param(3, marks=pytest.mark.slow),  # the retried case: 2 s, a second worker
    ],
    ids=["task-fails", "task-retried"],
)
def test_worker_killed_mid_task_loses_nothing_else(cluster, executor, tmp_path, allowed_failures):
    """A worker is SIGKILLed while it computes one of six slow tasks. The others are cached;
    the killed one is either retried by dask on another worker (allowed failures left) or
    reported as failed, and then a rerun computes exactly the failed ones. What was cached
    before the kill is never computed again. (A task that had finished on the killed worker
    but whose result had not reached the sweep yet is lost with the worker: dask computes it
    again, which is fine.)"""
    cluster.scheduler.allowed_failures = allowed_failures
    marks = tmp_path / "marks"
    marks.mkdir()
    hang = 5.0
    tasks = [
        Task(
            "test-dask-sleepy",
            {"x": float(x), "sleep": 0.3, "marks": str(marks), "hang": x == hang},
            cost=10.0 - x,  # submitted in order of x
        )
        for x in range(1, 7)
    ]
    cache = Cache(tmp_path / "cache")
    killed: list[int] = []
    cached_at_kill: list[str] = []
    killer = threading.Thread(
        target=kill_when_started, args=(marks, hang, tmp_path / "cache", killed, cached_at_kill)
    )
    killer.start()
    try:
        errors: dict = {}
        results, computed = run_tasks(tasks, cache, executor=executor, log=quiet, errors=errors)
    finally:
        killer.join()
        cluster.scheduler.allowed_failures = 3
    assert killed, "the task to kill never started"
    failed = {t.params["x"] for t in tasks if t.key() in errors}
    assert computed + len(failed) == 6 and len(results) == 6 - len(failed)
    if allowed_failures == 0:
        assert hang in failed and "KilledWorker" in str(errors[tasks[4].key()])
    else:
        assert not failed
    for task in tasks:  # what finished is cached, whole
        stored = cache.load(task)
        assert (stored is None) == (task.params["x"] in failed)
        if stored is not None:
            assert float(stored["x"]) == task.params["x"]
    again, recomputed = run_tasks(tasks, cache, executor=executor, log=quiet)
    assert recomputed == len(failed) and len(again) == 6
    starts = {t.params["x"]: len(list(marks.glob(f"{t.params['x']}-*"))) for t in tasks}
    assert starts[hang] == 2, "the killed task ran again (retry or rerun)"
    before = [t.params["x"] for t in tasks if cache.path(t).name in cached_at_kill]
    assert len(before) >= 2 and hang not in before
    assert all(starts[x] == 1 for x in before), f"a cached task was computed again: {starts}"


# --------------------------------------------------------------------------- locks


@pytest.mark.slow  # 1.2 s; the lock protocol itself is tested on the serial runner (test_sweep.py)
def test_task_locked_by_another_process_is_waited_for(tmp_path):
    """With the cache kept here (``cache_here``), a task whose lock another process holds is
    not submitted: the runner does the others, polls the lock, then reuses that process's
    result."""
    cache = Cache(tmp_path)
    held = Task("test-dask-square", {"x": 2.0})
    script = textwrap.dedent(f"""
        import time
        import numpy as np
        from flows.sweep.registry import Task
        from flows.sweep.store import Cache
        cache = Cache({str(tmp_path)!r})
        task = Task("test-dask-square", {{"x": 2.0}})
        with cache.lock(task):
            print("locked", flush=True)
            time.sleep(0.6)
            cache.store(task, {{"square": np.array(-4.0), "grid": np.zeros(7)}})
    """)
    holder = subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    lines: list[str] = []
    other = Task("test-dask-square", {"x": 1.0})
    with ThreadPoolExecutor(2) as pool:
        results, computed = run_tasks(
            [held, other], cache, executor=pool, log=lines.append, cache_here=True
        )
    holder.wait(timeout=HANG_GUARD)
    assert computed == 1 and float(results[other.key()]["square"]) == 1.0
    assert float(results[held.key()]["square"]) == -4.0, "the other process's result is reused"
    assert sum("another process is computing it" in line for line in lines) == 1


# --------------------------------------------------------------------------- errors


def free_port() -> int:
    """A local TCP port with nothing listening on it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # waits for the connection timeout (~4.5 s)
def test_unreachable_scheduler_is_one_error_line_within_seconds(tmp_path):
    """Nothing listens at the address: status 2, one ``error:`` line, well within 10 s (the
    connect timeout is 3 s), nothing computed."""
    start = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "flows.sweep", "--quick", "fig4_amplification"]
        + ["--scheduler", f"tcp://127.0.0.1:{free_port()}"]
        + ["--out", str(tmp_path / "o"), "--cache", str(tmp_path / "c")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert time.monotonic() - start < 10.0
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
    assert run.stderr.startswith("error: no dask scheduler reachable at tcp://127.0.0.1:")
    assert not list((tmp_path / "c").glob("*.npz"))


@pytest.mark.parametrize(
    "address, says",
    [
        ("foo", "is not tcp://host:port or local"),
        ("http://host:8786", "scheme 'http'"),
        ("tcp://host:0", "port 0"),
        ("tcp://host", "is not tcp://host:port"),
        ("", "is not tcp://host:port"),
    ],
)
def test_malformed_address_is_one_error_line(tmp_path, capsys, address, says):
    """A malformed address is refused before dask is touched."""
    status = main(["--scheduler", address, "--out", str(tmp_path / "o"), "--cache", str(tmp_path)])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and err.startswith("error: --scheduler")
    assert says in err


def test_worker_address_is_not_a_scheduler(cluster, tmp_path, capsys):
    """The address of a worker: refused, naming what answered."""
    worker = next(iter(cluster.scheduler_info["workers"]))
    status = main(["--scheduler", worker, "--out", str(tmp_path / "o"), "--cache", str(tmp_path)])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "is not a dask scheduler" in err


def test_without_dask_the_error_names_the_extra(monkeypatch, tmp_path, capsys):
    """``distributed`` not importable: one line naming the extra, status 2, nothing run."""
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    args = ["--quick", "fig4_amplification", "--scheduler", "local", "--out", str(tmp_path)]
    status = main([*args, "--cache", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and err.startswith("error: --scheduler needs")
    assert INSTALL_HINT in err and "pip install -e '.[dask]'" in err
    assert not list((tmp_path / "c").glob("*.npz"))


def test_executor_reports_where_it_runs(executor):
    """Label and window follow the cluster (2 workers of one thread)."""
    assert isinstance(executor, DaskExecutor) and executor.cache_here
    assert executor.threads == 2 and executor.window >= 8
    assert executor.label.startswith("dask cluster tcp://") and "2 workers" in executor.label
