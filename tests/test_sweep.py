"""``python -m flows.sweep``: every figure is produced, the cache is reused, interrupted runs resume."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from flows.cache import Cache, Task, register
from flows.paper_figures import FIGURES
from flows.sweep import main, run_tasks

CALLS: list[float] = []


def counting_task(params: dict) -> dict:
    """A cheap task kind that records each computation and can simulate a crash."""
    if params.get("crash"):
        raise KeyboardInterrupt("simulated interruption")
    CALLS.append(params["x"])
    return {"square": np.array(params["x"] ** 2)}


register("test-counting", counting_task)


@pytest.fixture(scope="module")
def quick_sweep(tmp_path_factory):
    """One quick sweep of every figure into a fresh folder, with a fresh cache."""
    root = tmp_path_factory.mktemp("sweep")
    out, cache = root / "figs", root / "cache"
    status = main(["--quick", "--out", str(out), "--cache", str(cache), "--jobs", "2"])
    return status, out, cache


def test_quick_sweep_writes_every_figure(quick_sweep):
    """Smoke test: each registered figure becomes a non-empty PNG."""
    status, out, _ = quick_sweep
    assert status == 0
    for name in FIGURES:
        path = out / f"{name}.png"
        assert path.is_file(), name
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert path.stat().st_size > 5_000, name


def test_second_sweep_recomputes_nothing(quick_sweep, capsys):
    """A rerun takes every result from the cache."""
    _, out, cache = quick_sweep
    capsys.readouterr()
    assert main(["--quick", "--out", str(out), "--cache", str(cache), "--jobs", "1"]) == 0
    assert "0 runs computed" in capsys.readouterr().out


def test_interrupted_run_resumes(tmp_path):
    """Finished tasks survive an interruption; the rerun computes only the missing ones."""
    cache = Cache(tmp_path)
    tasks = [Task("test-counting", {"x": float(x)}) for x in range(4)]
    CALLS.clear()
    with pytest.raises(KeyboardInterrupt):
        run_tasks(tasks[:2] + [Task("test-counting", {"x": 9.0, "crash": True})] + tasks[2:],
                  cache, jobs=1, log=lambda *_: None)
    assert CALLS == [0.0, 1.0]
    assert not list(tmp_path.glob("*.tmp*")), "no partial files are left behind"
    results, computed = run_tasks(tasks, cache, jobs=1, log=lambda *_: None)
    assert computed == 2 and CALLS == [0.0, 1.0, 2.0, 3.0]
    assert [float(results[t.key()]["square"]) for t in tasks] == [0.0, 1.0, 4.0, 9.0]


def test_fresh_ignores_cache(tmp_path):
    """``fresh=True`` recomputes even what is cached."""
    cache = Cache(tmp_path)
    tasks = [Task("test-counting", {"x": 5.0})]
    run_tasks(tasks, cache, jobs=1, log=lambda *_: None)
    CALLS.clear()
    _, computed = run_tasks(tasks, cache, jobs=1, fresh=True, log=lambda *_: None)
    assert computed == 1 and CALLS == [5.0]


def test_cache_key_depends_on_parameters():
    """Different parameters never share a cache file; equal ones always do."""
    a = Task("simulate", {"mu": [1.0, 2.0], "alpha": 0.4})
    assert a.key() == Task("simulate", {"alpha": 0.4, "mu": [1.0, 2.0]}).key()
    assert a.key() != Task("simulate", {"mu": [1.0, 2.0], "alpha": 0.41}).key()


def test_cli_list_and_bad_name():
    """``--list`` names every figure; an unknown name is a one-line error with status 2."""
    run = subprocess.run([sys.executable, "-m", "flows.sweep", "--list"], capture_output=True,
                         text=True, check=True)
    assert all(name in run.stdout for name in FIGURES)
    bad = subprocess.run([sys.executable, "-m", "flows.sweep", "no_such_figure"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr


def test_default_output_folder_is_the_repository_figures():
    """The main job writes into the committed ``figures/`` folder."""
    from flows.sweep import DEFAULT_OUT

    assert DEFAULT_OUT == Path(__file__).resolve().parent.parent / "figures"
