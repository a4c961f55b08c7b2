"""The presentation layer outside the sweep: the regimes command line (``python -m
figures.regimes``) and the phase diagram for any ``mu``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import figures.regimes
from figures.regimes import draw_phase_diagram, phase_ratios, phase_span

ROOT = Path(__file__).resolve().parent.parent
PNG = b"\x89PNG\r\n\x1a\n"


def fake_run(d: int, leader_path: list[int], n: int) -> dict:
    """A result whose leading coordinate follows ``leader_path`` over ``n`` samples."""
    tau = np.linspace(0.0, 3.0, 21)[:n]
    log_abs_beta = np.full((n, d), -1.0)
    for i, j in enumerate(np.array_split(np.arange(n), len(leader_path))):
        log_abs_beta[j, leader_path[i]] = 0.0
    return {"t": tau, "log_abs_beta": log_abs_beta}


# mu = (1..5), the one it was always drawn for, is slow: any other mu stays in the default run
@pytest.mark.parametrize(
    "mu",
    [(0.5, 1.7, 2.9), pytest.param((1.0, 2.0, 3.0, 4.0, 5.0), marks=pytest.mark.slow), (0.2, 0.3)],
    ids=str,
)
def test_phase_diagram_any_mu(tmp_path, mu):
    """The phase diagram draws for any increasing mu (once drawn for mu = (1..5) only),
    including runs that stopped early."""
    d = len(mu)
    ratios = phase_ratios(False, phase_span(mu))[::8]
    runs = [
        fake_run(d, list(range(min(k, d - 1), d)), 21 if k != 2 else 9) for k in range(len(ratios))
    ]
    path = tmp_path / "phase.png"
    draw_phase_diagram(mu, ratios, runs, boundary=float(ratios[1]), path=path)
    assert path.read_bytes()[:8] == PNG and path.stat().st_size > 5_000


def test_phase_span_brackets_the_regimes():
    """The generic alpha / rho range holds the collapse certificate and the regime-3 boundary."""
    from analysis.regimes.boundaries import collapse_certificate_boundary, regime3_boundary

    for mu in ((0.5, 1.7, 2.9), (1.0, 2.0, 3.0, 4.0, 5.0)):
        lo, hi = phase_span(mu)
        assert lo < collapse_certificate_boundary(mu) < regime3_boundary(mu) < hi


@pytest.mark.parametrize(
    "args, word",
    [
        (["--mu", "1,x"], "--mu"),
        (["--mu", "3,2,1"], "mu"),
        (["--rho", "-1"], "rho"),
        (["--plot", "p.txt"], "--plot"),
        (["--plot", "no/such/dir/p.png"], "--plot"),
        (["--n-alpha", "0"], "--n-alpha"),
    ],
)
def test_regimes_cli_bad_input_before_any_work(monkeypatch, capsys, args, word):
    """Bad input: one ``error:`` line naming the option, status 2, before any computation."""

    def boom(*_, **__):
        raise AssertionError("computed before checking the input")

    monkeypatch.setattr(figures.regimes, "collapse_boundary", boom)
    assert figures.regimes.main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error:") and word in err


@pytest.mark.slow  # 1.3-1.8 s (a fresh process); the same through main: the test below; a bad input
# through ``python -m figures.regimes`` stays in the default run in tests/test_robustness_engine.py
def test_regimes_cli_unknown_option_is_one_line():
    run = subprocess.run(
        [sys.executable, "-m", "figures.regimes", "--bogus"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,  # a hang guard: a slow machine only waits longer
    )
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "Traceback" not in run.stderr


def test_regimes_cli_unknown_option_is_one_line_in_process(capsys):
    """``main(["--bogus"])``: status 2 (argparse's exit), one line on stderr, no traceback."""
    try:
        status = figures.regimes.main(["--bogus"])
    except SystemExit as exc:
        status = exc.code
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.slow
def test_regimes_cli_plot_for_any_mu(tmp_path):
    """``python -m figures.regimes --mu 0.5,1.7,2.9 --plot p.png`` (it failed before for any mu
    other than (1..5)): the table, the boundaries, and the phase diagram."""
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "figures.regimes",
            "--mu",
            "0.5,1.7,2.9",
            "--n-alpha",
            "2",
            "--plot",
            str(tmp_path / "p.png"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=1800,
    )
    assert run.returncode == 0, run.stderr
    assert "collapse boundary" in run.stdout and f"wrote {tmp_path / 'p.png'}" in run.stdout
    assert (tmp_path / "p.png").read_bytes()[:8] == PNG
