"""``python -m flows.sweep`` and its task runner: every figure is produced, the cache is reused,
interrupted runs resume, bad paths fail before any work, corrupt cache files are recomputed,
workers die with the sweep, two sweeps share a cache without computing a task twice, the
most expensive tasks go first, and the progress output is one line per figure (per run with
``--verbose``, within the terminal's width) plus, on a terminal, one live line."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import figures.table
from figures.common import Figure
from figures.table import FIGURES
from flows.compiled import COMPILE_NOTICE
from flows.sweep.cli import DEFAULT_CACHE, DEFAULT_OUT, main, run_tasks
from flows.sweep.progress import Progress
from flows.sweep.registry import Task, estimated_cost, register
from flows.sweep.stamps import FILE as STAMPS_FILE
from flows.sweep.store import Cache

CALLS: list[float] = []
ROOT = Path(__file__).resolve().parent.parent
#: Waits on other processes are hang guards, not pass criteria (a busy machine waits longer).
HANG_GUARD = 600.0
PNG = b"\x89PNG\r\n\x1a\n"


def counting_task(params: dict) -> dict:
    """A cheap task kind that records each computation and can simulate a crash or a bug."""
    if params.get("crash"):
        raise KeyboardInterrupt("simulated interruption")
    if params.get("bug"):
        raise ZeroDivisionError("simulated bug")
    CALLS.append(params["x"])
    return {"square": np.array(params["x"] ** 2)}


register("test-counting", counting_task, cost=lambda params: params.get("x", 0.0))


def quiet(*_):
    """A ``log`` that prints nothing."""


# --------------------------------------------------------------------------- fake figure table


def fake_tasks(quick: bool) -> list[Task]:
    return [Task("test-counting", {"x": float(x)}) for x in (1, 2, 3)]


def fake_draw(results, quick, path):
    """Writes the squares and the drawing process id (to tell where it was drawn)."""
    Path(path).write_text(f"{[float(r['square']) for r in results]} {os.getpid()}")


def broken_tasks(quick: bool) -> list[Task]:
    return [Task("test-counting", {"x": 7.0, "bug": True})]


FAKE = {
    "fake_a": Figure("fake_a", "fake A", "Is A drawn?", fake_tasks, fake_draw),
    "fake_b": Figure(
        "fake_b", "fake B", "Is B drawn?", lambda quick: fake_tasks(quick)[:2], fake_draw
    ),
}


@pytest.fixture
def fake_table(monkeypatch):
    """Replace the figure table by two cheap figures sharing tasks."""
    monkeypatch.setattr(figures.table, "FIGURES", dict(FAKE))
    CALLS.clear()
    return figures.table.FIGURES


# --------------------------------------------------------------------------- the real figures


@pytest.fixture(scope="module")
def quick_sweep(tmp_path_factory):
    """One quick sweep of every figure into a fresh folder, with a fresh cache, from the
    command line (stdout and stderr are pipes, not a terminal)."""
    root = tmp_path_factory.mktemp("sweep")
    out, cache = root / "figs", root / "cache"
    run = subprocess.run(
        [sys.executable, "-m", "flows.sweep", "--quick", "--out", str(out), "--cache", str(cache)]
        + ["--jobs", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "80"},
    )
    return run, out, cache


@pytest.mark.slow
def test_quick_sweep_writes_every_figure(quick_sweep):
    """Smoke test: each registered figure becomes a non-empty PNG."""
    run, out, _ = quick_sweep
    assert run.returncode == 0, run.stderr
    for name in FIGURES:
        path = out / f"{name}.png"
        assert path.is_file(), name
        assert path.read_bytes()[:8] == PNG
        assert path.stat().st_size > 5_000, name
    hidden = [p.name for p in out.iterdir() if p.name.startswith(".")]
    assert hidden == [STAMPS_FILE], "no temporary files left (only the stamps of drawn figures)"


@pytest.mark.slow
def test_quick_sweep_output_is_one_line_per_figure(quick_sweep):
    """Not on a terminal, the output is exactly one line per figure and the summary (no line
    per run; on stderr nothing but numba's notice of a first compile and one warning line per
    run that ended early, naming its figure)."""
    run, out, _ = quick_sweep
    *figure_lines, summary = run.stdout.splitlines()
    written = sorted(line.split(": ", 1)[0] for line in figure_lines)
    assert written == sorted(f"wrote {out / name}.png" for name in FIGURES)
    assert summary.startswith(f"done: {len(FIGURES)} of {len(FIGURES)} figure(s) (0 up to date)")
    warned = re.compile(rf"warning: ({'|'.join(FIGURES)}): .* ended early \(status -\d\): ")
    assert all(line == COMPILE_NOTICE or warned.match(line) for line in run.stderr.splitlines())


@pytest.mark.slow
def test_second_sweep_recomputes_nothing(quick_sweep, capsys):
    """A rerun takes every result from the cache."""
    _, out, cache = quick_sweep
    capsys.readouterr()
    assert main(["--quick", "--out", str(out), "--cache", str(cache), "--jobs", "1"]) == 0
    assert " 0 runs computed" in capsys.readouterr().out


def blas_threads() -> list[int]:
    """The thread counts of the BLAS libraries loaded in this process."""
    from threadpoolctl import threadpool_info

    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_one_quick_figure(tmp_path, capsys):
    """A real figure end to end (the cheapest one), serially: computed with one BLAS thread
    (checked inside a run), and the caller's BLAS threads restored afterwards."""
    before = blas_threads()
    seen: list[list[int]] = []
    original = figures.table.FIGURES["fig4_amplification"].draw

    def draw(results, quick, path):
        seen.append(blas_threads())
        return original(results, quick, path)

    fig = figures.table.FIGURES["fig4_amplification"]
    figures.table.FIGURES["fig4_amplification"] = dataclasses.replace(fig, draw=draw)
    try:
        status = main(
            [
                "--quick",
                "fig4_amplification",
                "--out",
                str(tmp_path / "o"),
                "--cache",
                str(tmp_path / "c"),
                "--jobs",
                "1",
            ]
        )
    finally:
        figures.table.FIGURES["fig4_amplification"] = fig
    assert status == 0
    assert seen and all(n == 1 for n in seen[0])
    assert blas_threads() == before
    png = tmp_path / "o" / "fig4_amplification.png"
    assert png.read_bytes()[:8] == PNG and png.stat().st_size > 5_000
    assert "wrote" in capsys.readouterr().out


def test_figure_table_in_paper_order_with_captions():
    """fig1, fig2, ... in the order of their numbers, the paper's nine first, then the studies
    without a number (e.g. digits_*), a split figure's parts as fig10, fig10b; every caption asks
    one question (and may say how to read the figure)."""
    names = list(FIGURES)
    numbered = [re.match(r"fig(\d+)[a-z]?_", n) for n in names]
    numbers = [int(m.group(1)) for m in numbered if m]
    assert numbers == sorted(numbers) and numbers[:9] == list(range(1, 10))
    assert names[: len(numbers)] == [n for n, m in zip(names, numbered, strict=True) if m]
    assert all(n == f.name for n, f in FIGURES.items())
    for fig in FIGURES.values():
        assert fig.caption.count("?") == 1, fig.name
        assert callable(fig.tasks) and callable(fig.draw)


# --------------------------------------------------------------------------- task runner


def test_interrupted_run_resumes(tmp_path):
    """Finished tasks survive an interruption; the rerun computes only the missing ones."""
    cache = Cache(tmp_path)
    tasks = [Task("test-counting", {"x": float(x)}, cost=10.0 - x) for x in range(4)]
    CALLS.clear()
    with pytest.raises(KeyboardInterrupt):
        run_tasks(
            tasks[:2] + [Task("test-counting", {"x": 9.0, "crash": True}, cost=8.5)] + tasks[2:],
            cache,
            jobs=1,
            log=quiet,
        )
    assert CALLS == [0.0, 1.0]
    assert not list(tmp_path.glob("*.tmp*")), "no partial files are left behind"
    results, computed = run_tasks(tasks, cache, jobs=1, log=quiet)
    assert computed == 2 and CALLS == [0.0, 1.0, 2.0, 3.0]
    assert [float(results[t.key()]["square"]) for t in tasks] == [0.0, 1.0, 4.0, 9.0]


def test_fresh_ignores_cache(tmp_path):
    """``fresh=True`` recomputes even what is cached."""
    cache = Cache(tmp_path)
    tasks = [Task("test-counting", {"x": 5.0})]
    run_tasks(tasks, cache, jobs=1, log=quiet)
    CALLS.clear()
    _, computed = run_tasks(tasks, cache, jobs=1, fresh=True, log=quiet)
    assert computed == 1 and CALLS == [5.0]


def test_cache_key_depends_on_parameters_not_cost():
    """Different parameters never share a cache file; equal ones always do; cost is no part."""
    a = Task("simulate", {"mu": [1.0, 2.0], "alpha": 0.4})
    assert a.key() == Task("simulate", {"alpha": 0.4, "mu": [1.0, 2.0]}).key()
    assert a.key() != Task("simulate", {"mu": [1.0, 2.0], "alpha": 0.41}).key()
    b = Task("simulate", {"mu": [1.0, 2.0], "alpha": 0.4}, cost=99.0)
    assert a.key() == b.key() and a == b


def test_longest_first_serial(tmp_path):
    """Serially, tasks run in decreasing cost: explicit ``cost`` first, else the kind's
    heuristic (here x itself)."""
    CALLS.clear()
    tasks = [
        Task("test-counting", {"x": 1.0}),
        Task("test-counting", {"x": 3.0}),
        Task("test-counting", {"x": 2.0}, cost=100.0),
        Task("test-counting", {"x": 5.0}),
    ]
    assert estimated_cost(tasks[1]) == 3.0 and estimated_cost(tasks[2]) == 100.0
    run_tasks(tasks, Cache(tmp_path), jobs=1, log=quiet)
    assert CALLS == [2.0, 5.0, 3.0, 1.0]


def test_measured_costs_order_the_next_run(tmp_path):
    """Compute times are recorded (``costs.json``, by kind and parameters) and, on the next
    run, order the tasks before any estimate does."""
    import json

    cache = Cache(tmp_path)
    tasks = [Task("test-counting", {"x": x}) for x in (1.0, 2.0, 3.0)]
    run_tasks(tasks, cache, jobs=1, log=quiet)
    measured = cache.measured_costs()
    assert set(measured) == {t.cost_key() for t in tasks}
    assert all(0.0 <= v < 1.0 for v in measured.values())
    (tmp_path / "costs.json").write_text(
        json.dumps({tasks[0].cost_key(): 50.0, tasks[1].cost_key(): 0.1, tasks[2].cost_key(): 7.0})
    )
    CALLS.clear()
    run_tasks(tasks, cache, jobs=1, fresh=True, log=quiet)
    assert CALLS == [1.0, 3.0, 2.0]
    (tmp_path / "costs.json").write_text("{not json")
    assert cache.measured_costs() == {}, "an unreadable hint is ignored"


class RecordingExecutor(Executor):
    """Runs each call at once in this thread and records the order of the submissions."""

    def __init__(self):
        self.submitted: list[float] = []

    def submit(self, fn, /, *args, **kwargs):
        self.submitted.append(args[1].params["x"])
        future = Future()
        future.set_result(fn(*args, **kwargs))
        return future


def test_longest_first_any_executor(tmp_path):
    """With an executor (here one that records), the most expensive tasks are submitted first,
    and the cached ones not at all."""
    cache = Cache(tmp_path)
    run_tasks([Task("test-counting", {"x": 4.0})], cache, jobs=1, log=quiet)
    ex = RecordingExecutor()
    xs = [0.5, 8.0, 4.0, 2.0, 16.0, 1.0]
    results, computed = run_tasks(
        [Task("test-counting", {"x": x}) for x in xs], cache, executor=ex, log=quiet
    )
    assert ex.submitted == [16.0, 8.0, 2.0, 1.0, 0.5]
    assert computed == 5 and len(results) == 6


def test_thread_pool_executor(tmp_path):
    """``run_tasks`` accepts any ``concurrent.futures.Executor``."""
    tasks = [Task("test-counting", {"x": float(x)}) for x in range(6)]
    with ThreadPoolExecutor(3) as ex:
        results, computed = run_tasks(tasks, Cache(tmp_path), executor=ex, log=quiet)
    assert computed == 6
    assert sorted(float(r["square"]) for r in results.values()) == [0, 1, 4, 9, 16, 25]


def test_process_pool_results(tmp_path):
    """The local process pool (jobs = 2) computes and stores every task."""
    tasks = [Task("test-counting", {"x": float(x)}) for x in range(5)]
    results, computed = run_tasks(tasks, Cache(tmp_path), jobs=2, log=quiet)
    assert computed == 5 and len(list(tmp_path.glob("test-counting-*.npz"))) == 5
    assert [float(results[t.key()]["square"]) for t in tasks] == [0, 1, 4, 9, 16]


def test_failing_task_raises_or_is_collected(tmp_path):
    """A failing task raises TaskError naming it, or (``errors`` given) is recorded while the
    other tasks complete."""
    from flows.sweep.cli import TaskError

    bad = Task("test-counting", {"x": 7.0, "bug": True})
    good = Task("test-counting", {"x": 2.0})
    with pytest.raises(TaskError, match="ZeroDivisionError"):
        run_tasks([bad], Cache(tmp_path), jobs=1, log=quiet)
    errors: dict = {}
    results, computed = run_tasks([bad, good], Cache(tmp_path), jobs=1, log=quiet, errors=errors)
    assert list(errors) == [bad.key()] and computed == 1 and good.key() in results


# --------------------------------------------------------------------------- corrupt cache


@pytest.mark.parametrize("damage", ["truncated", "garbage", "missing keys", "empty"])
def test_corrupt_cache_file_is_recomputed(tmp_path, capsys, damage):
    """An unreadable cache file is a warning on stderr and the task is computed again."""
    cache = Cache(tmp_path)
    task = Task("test-counting", {"x": 3.0})
    run_tasks([task], cache, jobs=1, log=quiet)
    path = cache.path(task)
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(b"not a zip file at all" * 10)
    elif damage == "missing keys":
        np.savez(path, __keys__=np.array(["square", "other"]), square=np.array(9.0))
    else:
        path.write_bytes(b"")
    CALLS.clear()
    capsys.readouterr()
    results, computed = run_tasks([task], cache, jobs=1, log=quiet)
    err = capsys.readouterr().err
    assert "warning" in err and str(path) in err
    assert computed == 1 and CALLS == [3.0] and float(results[task.key()]["square"]) == 9.0
    assert cache.load(task) is not None, "the recomputed file is whole again"


def test_simulate_file_without_its_arrays_is_recomputed(tmp_path, capsys):
    """Legacy files (no key list) are checked against the arrays their kind must hold."""
    cache = Cache(tmp_path)
    task = Task(
        "simulate",
        {
            "mu": [1.0, 2.0],
            "algorithm": "gd",
            "depth": 2,
            "alpha": 0.5,
            "t_max": 0.1,
            "n_points": 3,
            "original_time": False,
        },
    )
    cache.path(task).parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache.path(task), t=np.zeros(3))
    assert cache.load(task) is None
    assert "lacks" in capsys.readouterr().err


# --------------------------------------------------------------------------- command line


@pytest.mark.slow  # 2 s (two fresh processes); the same through main: the test below; a bad input
# through ``python -m flows.sweep`` stays in the default run in tests/test_robustness_engine.py
def test_cli_list_and_bad_name():
    """``--list`` names every figure with its caption; an unknown name is a one-line error
    with status 2."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "flows.sweep", *args],
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for args in (["--list"], ["no_such_figure"])
    ]
    (out, _), (_, err) = [p.communicate(timeout=HANG_GUARD) for p in procs]
    assert procs[0].returncode == 0
    assert all(name in out for name in FIGURES)
    settings = {name: fig.setting() for name, fig in FIGURES.items()}
    assert all(
        fig.caption_for(settings[name]) in out and fig.title_for(settings[name]) in out
        for name, fig in FIGURES.items()
    )
    assert procs[1].returncode == 2 and err.count("\n") == 1 and "Traceback" not in err


def test_cli_list_and_bad_name_in_process(capsys):
    """The same through ``main``: ``--list`` names every figure with its caption and title; an
    unknown name is one line on stderr, status 2, no traceback."""
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in FIGURES)
    settings = {name: fig.setting() for name, fig in FIGURES.items()}
    assert all(
        fig.caption_for(settings[name]) in out and fig.title_for(settings[name]) in out
        for name, fig in FIGURES.items()
    )
    assert main(["no_such_figure"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_cli_list_names_only_the_figures_asked_for(capsys):
    """``--list NAME`` lists that figure alone; an unknown name is one ``error:`` line and status
    2, as for a sweep of it."""
    name = next(iter(FIGURES))
    assert main(["--list", name]) == 0
    out = capsys.readouterr().out
    assert out.startswith(name) and all(other not in out for other in list(FIGURES)[1:])
    assert main(["--list", name, "no_such_figure"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("error: unknown figure(s) no_such_figure")


def test_default_paths_are_relative_to_the_current_directory(fake_table, tmp_path, monkeypatch):
    """Defaults ``figures/`` and ``.cache/sweep/`` are taken in the current directory."""
    assert DEFAULT_OUT == Path("figures") and DEFAULT_CACHE == Path(".cache/sweep")
    monkeypatch.chdir(tmp_path)
    assert main(["--jobs", "1", "fake_a"]) == 0
    assert (tmp_path / "figures" / "fake_a.png").is_file()
    assert len(list((tmp_path / ".cache" / "sweep").glob("test-counting-*.npz"))) == 3


@pytest.mark.parametrize("option", ["--out", "--cache"])
def test_bad_directories_fail_before_any_compute(fake_table, tmp_path, capsys, option):
    """A path that cannot be a writable directory: one error line, status 2, nothing computed."""
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    args = {"--out": str(tmp_path / "o"), "--cache": str(tmp_path / "c")}
    args[option] = str(blocker / "sub")
    status = main(["--jobs", "1", *[a for kv in args.items() for a in kv]])
    err = capsys.readouterr().err
    assert status == 2 and CALLS == []
    assert err.count("\n") == 1 and err.startswith("error:") and option in err
    assert not (tmp_path / "o" / "fake_a.png").exists()


@pytest.mark.slow  # 1.8 s (a fresh process); in process: test_bad_directories_fail_before_any_compute;
# a bad input through ``python -m flows.sweep`` stays in the default run in
# tests/test_robustness_engine.py
def test_bad_directory_cli_one_line(tmp_path):
    """The same from the command line, for a real figure: no traceback, status 2."""
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "flows.sweep",
            "--quick",
            "fig4_amplification",
            "--out",
            str(blocker),
            "--cache",
            str(tmp_path / "c"),
        ],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.count("\n") == 1 and "--out" in run.stderr
    assert not (tmp_path / "c").exists() or not list((tmp_path / "c").iterdir())


def test_sweep_draws_in_worker_processes(fake_table, tmp_path, capsys):
    """With --jobs 2 the figures are drawn in the pool; not on a terminal the output is one
    line per figure and the summary, nothing per run, nothing on stderr."""
    out = tmp_path / "o"
    assert main(["--jobs", "2", "--out", str(out), "--cache", str(tmp_path / "c")]) == 0
    captured = capsys.readouterr()
    for name, squares in (("fake_a", [1.0, 4.0, 9.0]), ("fake_b", [1.0, 4.0])):
        text, pid = (out / f"{name}.png").read_text().rsplit(" ", 1)
        assert text == str(squares) and int(pid) != os.getpid()
    *figure_lines, summary = captured.out.splitlines()
    assert sorted(line.split(": ", 1)[0] for line in figure_lines) == [
        f"wrote {out / 'fake_a'}.png",
        f"wrote {out / 'fake_b'}.png",
    ]
    assert summary.startswith("done: 2 of 2 figure(s) (0 up to date), 3 runs computed")
    assert captured.err == ""


def test_verbose_adds_one_line_per_run_within_the_width(fake_table, tmp_path, capsys, monkeypatch):
    """``--verbose``: a header and one line per run, each within the terminal's width
    (long parameters abbreviated), besides the figure lines and the summary."""
    monkeypatch.setenv("COLUMNS", "80")
    grid = np.linspace(0.08, 1.6, 18).tolist()
    fake_table["long"] = Figure(
        "long",
        "long parameters",
        "Does its line fit?",
        lambda quick: [
            Task("test-counting", {"x": x, "X": np.ones((40, 10)).tolist(), "ratios": grid})
            for x in (10.0, 11.0)
        ],
        fake_draw,
    )
    args = ["--verbose", "--jobs", "1", "--out", str(tmp_path / "o"), "--cache"]
    assert main([*args, str(tmp_path / "c")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "computing 5 runs (0 cached) on 1 process(es), most expensive first"
    runs = [line for line in lines if not line.startswith(("wrote ", "done: "))][1:]
    assert [line.split("]")[0] for line in runs] == [f"  [{i}/5" for i in range(1, 6)]
    assert all(len(line) <= 80 for line in runs), runs
    assert "test-counting(x=11, X=<40x10>, ratios=[0.08, " in runs[0]
    assert sum(line.startswith("wrote ") for line in lines) == 3
    assert lines[-1].startswith("done: 3 of 3 figure(s)") and len(lines) == 10


def test_failed_task_skips_its_figure_only(fake_table, tmp_path, capsys):
    """A run that raises: an error line at once, its figure is not drawn, the others are,
    exit status 1."""
    fake_table["broken"] = Figure("broken", "broken", "Does it fail?", broken_tasks, fake_draw)
    status = main(["--jobs", "1", "--out", str(tmp_path / "o"), "--cache", str(tmp_path / "c")])
    err = capsys.readouterr().err.splitlines()
    assert status == 1
    assert err[0] == "error: test-counting(x=7, bug=True) failed: ZeroDivisionError: simulated bug"
    assert err[1].startswith("error: broken not drawn: 1 run(s) failed") and len(err) == 2
    assert (tmp_path / "o" / "fake_a.png").is_file()
    assert not (tmp_path / "o" / "broken.png").exists()


# --------------------------------------------------------------------------- progress display


def test_task_labels_are_abbreviated():
    """Arrays and nested lists show their shape, long lists their ends and length, numbers 4
    digits; a width cuts the label, ending in an ellipsis."""
    task = Task(
        "k",
        {
            "X": np.zeros((40, 10)),
            "points": [[1.0, 2.0], [3.0, 4.0]],
            "ratios": np.linspace(0.08, 1.6, 18).tolist(),
            "mu": [1.0, 2.0, 3.0],
            "sigma": {"schedule": "cosine", "args": [0.3489290400359852, 2.0]},
            "rho": None,
            "n": 3,
        },
    )
    label = (
        "k(X=<40x10>, points=<2x2>, ratios=[0.08, …, 1.6] (18), mu=[1, 2, 3], "
        "sigma={schedule: cosine, args: [0.3489, 2]}, rho=None, n=3)"
    )
    assert task.describe() == label
    assert task.describe(20) == label[:19] + "…" and task.describe(len(label)) == label


class FakeTerminal:
    """A text stream that says it is a terminal and keeps what was written."""

    def __init__(self):
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True

    def screen(self) -> list[str]:
        """The rows a terminal shows for :attr:`text` (``\\r`` returns, characters overwrite),
        trailing blanks dropped."""
        rows, col = [""], 0
        for char in self.text:
            if char == "\r":
                col = 0
            elif char == "\n":
                rows, col = [*rows, ""], 0
            else:
                row = rows[-1].ljust(col)
                rows[-1], col = row[:col] + char + row[col + 1 :], col + 1
        return [row.rstrip() for row in rows]


class FakeClock:
    """Seconds that pass only when a test says so."""

    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def fake_progress(
    verbose: bool = False, width: int = 60
) -> tuple[Progress, FakeTerminal, FakeClock]:
    """A progress display of 2 figures on a fake terminal, with a fake clock, no ticker."""
    terminal, clock = FakeTerminal(), FakeClock()
    progress = Progress(
        2, verbose, out=terminal, err=terminal, clock=clock, columns=width, ticker=False
    )
    return progress, terminal, clock


def test_live_line_counts_and_time_left():
    """The live line shows figures and runs done of all, the elapsed time, and the time left
    only once enough is done: from the cost estimates, scaled to the seconds measured so far,
    and the drawings' mean time."""
    progress, terminal, clock = fake_progress()
    tasks = [Task("test-counting", {"x": float(x)}) for x in range(4)]
    costs = dict(zip([t.key() for t in tasks], [4.0, 2.0, 1.0, 1.0], strict=True))
    with progress:
        assert terminal.screen() == ["figures 0/2, 0:00 elapsed"]
        clock.now += 1
        progress.planned(tasks, 1, "on 2 process(es)", costs)
        assert terminal.screen() == ["figures 0/2, runs 1/5, 0:01 elapsed"]
        progress.started(tasks[0])
        progress.started(tasks[1])
        clock.now += 4
        progress.finished(tasks[0], "computed", 8.0)  # twice the estimate
        assert terminal.screen() == ["figures 0/2, runs 2/5 (1 started), 0:05 elapsed"]
        clock.now += 2
        progress.finished(tasks[1], "computed", 4.0)
        clock.now += 1
        progress.started(tasks[2])
        progress.finished(tasks[2], "computed", 2.0)
        progress.refresh(force=True)
        # 7 s for 14 s of work: 1 cost unit left = 2 s of work, 1 s at that rate
        assert terminal.screen() == ["figures 0/2, runs 4/5, 0:08 elapsed, about 0:01 left"]
        progress.figure("wrote a.png: 3 runs", drawn=3.0)
        # 2 s + a drawing of 3 s left, after 17 s of work in 7 s: 2.06 s, said 0:03
        assert terminal.screen() == [
            "wrote a.png: 3 runs",
            "figures 1/2, runs 4/5, 0:08 elapsed, about 0:03 left",
        ]


def test_compile_time_counts_as_work_done_not_in_the_rate():
    """A run that waited for numba to compile counts its compile seconds as work done (they
    took a worker's time) but not in the seconds per cost unit of the runs left (the kernels
    compile once): the time left stays what the runs themselves take."""
    progress, terminal, clock = fake_progress()
    tasks = [Task("test-counting", {"x": float(x)}) for x in range(4)]
    with progress:
        progress.planned(tasks, 0, "on 2 process(es)", {t.key(): 1.0 for t in tasks})
        clock.now += 10
        progress.finished(tasks[0], "computed", 1.0, compiling=9.0)
        progress.finished(tasks[1], "computed", 1.0)
        progress.finished(tasks[2], "computed", 1.0)
        progress.refresh(force=True)
        # 12 s of work in 10 s; 1 cost unit left at 1 s per unit: 0.83 s, said 0:01 (with the
        # compile in the rate, 4 s per unit: 3.3 s)
        assert terminal.screen() == ["figures 0/2, runs 3/4, 0:10 elapsed, about 0:01 left"]


def test_a_run_still_out_counts_as_work_being_done():
    """While one worker is busy with a long run (say, numba compiling the kernels), the time
    since it started counts as work done, and as that much less of its own work left: the
    time left is not that of a single worker."""
    progress, terminal, clock = fake_progress(width=80)
    tasks = [Task("test-counting", {"x": float(x)}) for x in range(20)]
    costs = {t.key(): 1.0 for t in tasks} | {tasks[0].key(): 10.0}
    with progress:
        progress.planned(tasks, 0, "on 2 process(es)", costs)
        progress.started(tasks[0])  # out all along
        for task in tasks[1:7]:
            progress.started(task)
            clock.now += 1
            progress.finished(task, "computed", 1.0)
        progress.refresh(force=True)
        # 6 s for 6 s of runs done and 6 s of the run out; left: 13 s for the runs not started
        # and 10 - 6 s for the run out: 6 * 17 / 12 = 8.5 s, said 0:09 (without the run out's
        # time as work done: 0:17; without it as work less left: 0:12; neither: 0:23)
        assert terminal.screen() == [
            "figures 0/2, runs 6/20 (1 started), 0:06 elapsed, about 0:09 left"
        ]


def compiling_task(params: dict) -> dict:
    """A task kind that takes ``params["took"]`` seconds of a fake clock, ``params["compiling"]``
    of them compiling (see :func:`test_a_tasks_seconds_leave_out_its_compile_time`)."""
    FAKE_CLOCKS["wall"] += params["took"]
    FAKE_CLOCKS["compile"] += params["compiling"]
    return {"x": np.array(1.0)}


FAKE_CLOCKS = {"wall": 0.0, "compile": 0.0}
register("test-compiling", compiling_task)


def test_a_tasks_seconds_leave_out_its_compile_time(tmp_path, monkeypatch):
    """The seconds of a computed task (stored with its result, recorded as its measured cost,
    reported per figure) are its wall time less what numba spent compiling kernels
    meanwhile; the verbose line names the compile time apart."""
    import flows.sweep.runner as runner

    fake_time = SimpleNamespace(
        perf_counter=lambda: FAKE_CLOCKS["wall"], time=time.time, sleep=time.sleep
    )
    monkeypatch.setattr(runner, "time", fake_time)
    monkeypatch.setattr(runner, "compile_seconds", lambda: FAKE_CLOCKS["compile"])
    task = Task("test-compiling", {"took": 30.0, "compiling": 26.0})
    seconds: dict[str, float] = {}
    lines: list[str] = []
    cache = Cache(tmp_path)
    run_tasks([task], cache, jobs=1, log=lines.append, seconds=seconds)
    assert seconds == {task.key(): 4.0}
    assert cache.measured_costs()[task.cost_key()] == 4.0
    with np.load(cache.path(task)) as stored:
        assert float(stored["__seconds__"]) == 4.0
    assert re.search(r"\] test-compiling\(.*\) 4\.0s \+ 26s compiling \(elapsed", lines[-1])


def test_live_line_fits_the_width_and_lines_go_above_it():
    """Each drawing of the live line fits the width (less one column); a figure line, a
    verbose run line and a warning printed by anyone go above it; on exit the live line is
    cleared and stdout and stderr are given back."""
    progress, terminal, clock = fake_progress(verbose=True, width=36)
    task = Task("test-counting", {"x": 1.0, "ratios": np.linspace(0.08, 1.6, 18).tolist()})
    before = sys.stdout, sys.stderr
    with progress:
        progress.planned([task], 0, "here", {task.key(): 1.0})
        clock.now += 3725
        progress.finished(task, "computed", 0.5)
        progress.figure("wrote a.png: 1 runs")
        print("warning: something", file=sys.stderr)
        assert terminal.screen() == [
            "computing 1 runs (0 cached) here, most expensive first",
            "  [1/1] test-c… 0.5s (elapsed 3725s)",
            "wrote a.png: 1 runs",
            "warning: something",
            "figures 1/2, runs 1/1, 1:02:05 elap",
        ]
    assert (sys.stdout, sys.stderr) == before
    assert terminal.screen()[-1] == ""
    drawings = [part.split("\n")[-1] for part in terminal.text.split("\r")]
    assert max(len(part) for part in drawings) == 35


def test_refreshes_at_most_a_few_times_a_second():
    """Events closer together than the interval do not redraw the line; the next one does."""
    progress, terminal, clock = fake_progress()
    tasks = [Task("test-counting", {"x": float(x)}) for x in range(3)]
    with progress:
        progress.planned(tasks, 0, "here", {})
        drawn = terminal.text.count("figures ")
        clock.now += 0.1
        progress.started(tasks[0])
        progress.started(tasks[1])
        assert terminal.text.count("figures ") == drawn
        clock.now += 0.2
        progress.started(tasks[2])
        assert terminal.text.count("figures ") == drawn + 1


def test_not_a_terminal_no_live_line():
    """Not on a terminal: no live line, no taking over of stdout and stderr; one line per
    figure (runs only with ``verbose``)."""
    terminal = FakeTerminal()
    terminal.isatty = lambda: False  # type: ignore[method-assign]
    task = Task("test-counting", {"x": 1.0})
    before = sys.stdout, sys.stderr
    with Progress(1, out=terminal, err=terminal, ticker=False) as progress:
        assert (sys.stdout, sys.stderr) == before
        progress.planned([task], 0, "here", {task.key(): 1.0})
        progress.finished(task, "computed", 0.5)
        progress.figure("wrote a.png: 1 runs")
    assert terminal.text == "wrote a.png: 1 runs\n"


# --------------------------------------------------------------------------- processes

#: A sweep-like script: a slow task kind (records its pid, then sleeps), run on 2 workers.
SLOW_SCRIPT = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    from flows.sweep.registry import Task, register
    from flows.sweep.store import Cache
    from flows.sweep.cli import run_tasks

    def slow(params):
        with open(os.path.join(sys.argv[2], f"{os.getpid()}-{params['x']}"), "w"):
            pass
        time.sleep(params["sleep"])
        return {"x": np.array(params["x"])}

    register("test-slow", slow)
    xs = [float(x) for x in sys.argv[3].split(",")]
    tasks = [Task("test-slow", {"x": x, "sleep": float(sys.argv[4])}) for x in xs]
    results, computed = run_tasks(tasks, Cache(sys.argv[1]), jobs=2, log=lambda *a: None)
    print(computed, sum(float(r["x"]) for r in results.values()))
""")


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_workers_exit_when_the_sweep_is_killed(tmp_path):
    """SIGKILL the sweep: its worker processes (busy on hour-long tasks) end too (they watch
    their parent), long before their tasks would."""
    marks = tmp_path / "marks"
    marks.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_SCRIPT, str(tmp_path / "cache"), str(marks), "1,2,3", "3600"],
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + HANG_GUARD
        while len(list(marks.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = {int(p.name.split("-")[0]) for p in marks.iterdir()}
        assert len(workers) == 2 and all(alive(pid) for pid in workers)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=HANG_GUARD)
        deadline = time.monotonic() + HANG_GUARD
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in workers if alive(pid)], "orphaned workers still running"
    finally:
        proc.kill()
        for p in marks.iterdir():  # never leave sleepers behind, even if the test failed
            try:
                os.kill(int(p.name.split("-")[0]), signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.slow  # 1.4-2.2 s (two sweeps of two workers each); the per-task lock across processes
# stays in the default run: test_lock_held_by_another_process_is_waited_for
def test_two_sweeps_on_one_cache_compute_each_task_once(tmp_path):
    """Two sweeps started together on the same cache and tasks: each task computed once (per-task
    lock; the second sweep waits and reuses), and both get every result."""
    marks = tmp_path / "marks"
    marks.mkdir()
    args = [
        sys.executable,
        "-c",
        SLOW_SCRIPT,
        str(tmp_path / "cache"),
        str(marks),
        "1,2,3,4",
        "0.25",
    ]
    first = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    second = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    outs = [p.communicate(timeout=HANG_GUARD)[0].split() for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0]
    computed_by_task = sorted(p.name.split("-")[1] for p in marks.iterdir())
    assert computed_by_task == ["1.0", "2.0", "3.0", "4.0"], "a task was computed twice"
    assert sum(int(o[0]) for o in outs) == 4, outs
    assert all(float(o[1]) == 10.0 for o in outs)


def test_stale_lock_file_does_not_block(tmp_path):
    """A lock file left behind by a dead process (the file stays, its lock died with it): the
    lock is free at once, and the task is computed."""
    cache = Cache(tmp_path)
    task = Task("test-counting", {"x": 6.0})
    cache.path(task).with_suffix(".lock").write_text("12345 0\n")
    with cache.lock(task, block=False) as acquired:
        assert acquired
    results, computed = run_tasks([task], cache, jobs=1, log=quiet)
    assert computed == 1


def test_lock_held_by_another_process_is_waited_for(tmp_path):
    """While another process holds a task's lock, the runner does the other tasks, then waits
    and reuses the result that process stored (nothing computed twice)."""
    cache = Cache(tmp_path)
    held = Task("test-counting", {"x": 2.0})
    script = textwrap.dedent(f"""
        import sys, time
        import numpy as np
        from flows.sweep.registry import Task
        from flows.sweep.store import Cache
        cache = Cache({str(tmp_path)!r})
        task = Task("test-counting", {{"x": 2.0}})
        with cache.lock(task):
            print("locked", flush=True)
            time.sleep(0.5)
            cache.store(task, {{"square": np.array(-4.0)}})
    """)
    holder = subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "locked"
    CALLS.clear()
    lines: list[str] = []
    results, computed = run_tasks(
        [held, Task("test-counting", {"x": 1.0})], cache, jobs=1, log=lines.append
    )
    holder.wait(timeout=HANG_GUARD)
    assert CALLS == [1.0] and computed == 1
    assert float(results[held.key()]["square"]) == -4.0, "the other process's result is reused"
    assert any("another process" in line for line in lines)


def test_warm_sweep_redraws_only_what_changed(tmp_path, capsys, monkeypatch):
    """A rerun with every run cached leaves an up-to-date PNG alone (same bytes, same mtime);
    --redraw draws it again; drawing code newer than the PNG, or other runs (another engine
    version), make it stale."""
    import flows.sweep.cli as sweep_module

    args = [
        "--quick",
        "fig4_amplification",
        "--out",
        str(tmp_path / "o"),
        "--cache",
        str(tmp_path / "c"),
        "--jobs",
        "1",
    ]
    assert main(args) == 0
    png = tmp_path / "o" / "fig4_amplification.png"
    first = png.stat().st_mtime_ns
    capsys.readouterr()
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "up to date" in out and "(1 up to date)" in out and png.stat().st_mtime_ns == first
    assert main([*args, "--redraw"]) == 0
    assert "wrote" in capsys.readouterr().out and png.stat().st_mtime_ns > first
    monkeypatch.setattr(sweep_module, "_code_mtime", lambda: png.stat().st_mtime + 1.0)
    assert main(args) == 0
    assert "wrote" in capsys.readouterr().out
    monkeypatch.undo()
    monkeypatch.setattr("flows.sweep.registry.ENGINE_VERSION", "test-other-engine")
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "(0 up to date)" in out and "wrote" in out


def test_compile_gate_starts_one_first_compile_per_kernel_group():
    """Claim: while the first task of a kernel group runs, the gate passes over the other tasks
    of that group (a task of another group, or of none, starts instead); once it is done the
    group's tasks start freely; with every queued task waiting and nothing running, ``force``
    starts the first; an inactive gate (no numba) keeps the queue's order."""
    from collections import deque

    from flows.sweep.gate import CompileGate
    from flows.sweep.registry import Task

    flow_a = Task("simulate", {"algorithm": "gd", "mu": [1.0]})
    flow_b = Task("simulate", {"algorithm": "l2-sam", "mu": [2.0]})
    steps = Task("iterate", {"algorithm": "gd", "mu": [1.0]})
    plain = Task("no-kernels", {})
    gate = CompileGate()
    queue = deque([(flow_a, False), (flow_b, False), (steps, False), (plain, False)])
    assert gate.take(queue)[0] is flow_a
    assert gate.take(queue)[0] is steps  # flow_b waits for flow_a's first compile
    assert gate.take(queue)[0] is plain
    assert gate.take(queue) is None and [e[0] for e in queue] == [flow_b]
    gate.done(flow_a)
    assert gate.take(queue)[0] is flow_b
    again = deque([(Task("iterate", {"algorithm": "usam"}), False)])
    assert gate.take(again) is None and gate.take(again, force=True) is not None
    off = CompileGate(active=False)
    queue = deque([(flow_a, False), (flow_b, False)])
    assert [off.take(queue)[0], off.take(queue)[0]] == [flow_a, flow_b]
