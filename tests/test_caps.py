"""Every loop whose length a user chooses has a cap, checked before the first iteration, with a
``ValueError`` that names the parameter and the limit (or, for random draws, says what to
change)."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.lesam.boundaries import scan_regimes
from analysis.regimes import leaders
from analysis.sharpness import MAX_PARAMETERS, hessian
from flows import iterate, simulate, single_example
from flows.datasets import MAX_DRAWS, gaussian_blobs, teacher_data
from flows.discrete import MAX_STEPS
from flows.integrator.driver import MAX_POINTS

MU = single_example([1.0, 2.0])


def test_random_builders_stop_after_their_draws():
    """gaussian_blobs redraws until separable and teacher_data until n points clear the margin:
    at most MAX_DRAWS draws, then a ValueError naming the parameter to lower (a margin of 8
    standard deviations or blobs of std 50 would otherwise loop for ever)."""
    with pytest.raises(ValueError, match=rf"margin: {MAX_DRAWS} batches"):
        teacher_data(margin=8.0)
    with pytest.raises(ValueError, match=rf"std: no separable draw in {MAX_DRAWS} draws"):
        gaussian_blobs(std=50.0, n=200)
    for call, name in [
        (lambda: gaussian_blobs(n=10**7), "n"),
        (lambda: teacher_data(d=0), "d"),
        (lambda: teacher_data(margin=-1.0), "margin"),
    ]:
        with pytest.raises(ValueError, match=rf"^{name}\b"):
            call()


def test_grids_and_horizons_are_capped_before_any_run(monkeypatch):
    """A phase diagram of more than MAX_RATIOS flows, an LE-SAM scan of more than 200 grid
    points, an iterate of more than MAX_STEPS steps and a simulate of more than MAX_POINTS
    output times are refused before a single flow or step runs."""

    def no_run(*args, **kwargs):
        raise AssertionError("a flow ran before the size was checked")

    monkeypatch.setattr(leaders, "simulate", no_run)
    with pytest.raises(ValueError, match="ratios must be a 1-D array of 1 to 10000"):
        leaders.leader_phase_diagram([1.0, 2.0], np.ones(leaders.MAX_RATIOS + 1), 1.0)
    with pytest.raises(ValueError, match="grid must be 1 to 200"):
        scan_regimes([1.0, 2.0], "alpha", np.arange(1.0, 202.0), sigma=0.5, rho_max=1.0)
    with pytest.raises(ValueError, match="steps must be at most"):
        iterate(MU, "gd", 2, 0.5, eta=0.1, steps=MAX_STEPS + 1)
    with pytest.raises(ValueError, match="n_points"):
        simulate(MU, "gd", 2, 0.5, t_max=1.0, n_points=MAX_POINTS + 1)


def test_hessian_size_is_capped():
    """The dense Hessian of L * d parameters is refused beyond MAX_PARAMETERS (naming theta),
    before the (L d)^2 matrix is allocated; at the cap it is built."""
    d = MAX_PARAMETERS // 2 + 1
    data = single_example(np.ones(d))
    with pytest.raises(ValueError, match=r"^theta: the Hessian of L \* d"):
        hessian(data, np.full((2, d), 0.1))
    small = single_example(np.ones(4))
    assert hessian(small, np.full((2, 4), 0.1)).shape == (8, 8)


def test_sweep_jobs_are_capped(tmp_path, capsys):
    """``python -m flows.sweep --jobs 100000`` would start that many processes: refused with one
    error line and status 2 before any work (no output folder, no cache written)."""
    from flows.sweep.cli import MAX_JOBS, main

    out, cache = tmp_path / "figs", tmp_path / "cache"
    argv = [
        "fig4_amplification",
        "--jobs",
        str(MAX_JOBS + 1),
        "--out",
        str(out),
        "--cache",
        str(cache),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--jobs must be in [1," in err[0]
    assert not out.exists() and not cache.exists()
