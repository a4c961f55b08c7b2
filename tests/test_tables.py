"""The tables are the only place a new algorithm, hyper-parameter or loss is declared:
``simulate``, ``iterate`` and the ``flows.run`` command line are built from them, and a
backend comes from one record (:mod:`flows.backends`).

The toy entries live in this file only: ``'tilted-sam'`` is l2-SAM under another name with a
hyper-parameter of a new name, ``tilt`` (schedulable), and no compiled kernel; the toy loss
``'logistic-copy'`` is the logistic loss with no compiled twin. Both must run everywhere,
and give the numbers of the entries they copy.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from flows import Cause, iterate, simulate, single_example
from flows import algorithms as algorithms_module
from flows import run as cli
from flows.algorithms import (
    ALGORITHMS,
    Algorithm,
    GradientSummary,
    HyperparameterSpec,
    known_hyperparameters,
)
from flows.backends import AUTO_ORDER, BACKENDS
from flows.datasets import gaussian_blobs
from flows.model import LOSSES
from flows.schedules import constant

MU = [1.0, 2.0, 3.0]


def tilted_perturbation(grad: GradientSummary, hp) -> np.ndarray:
    """``eps = tilt grad L / ||grad L||`` (l2-SAM's, read from a hyper-parameter of its own)."""
    return hp["tilt"] * grad.unit


TILT = HyperparameterSpec("tilt", schedulable=True, help="toy radius")
TOY = Algorithm(tilted_perturbation, (TILT,), lambda hp: hp["tilt"], zero_invariant=True)


@pytest.fixture
def toy(monkeypatch):
    """The toy algorithm and loss registered for one test."""
    monkeypatch.setitem(ALGORITHMS, "tilted-sam", TOY)
    monkeypatch.setitem(
        LOSSES, "logistic-copy", dataclasses.replace(LOSSES["logistic"], compiled_id=None)
    )


def test_new_hyperparameter_is_known_only_while_registered(toy, monkeypatch):
    """``tilt`` joins the known hyper-parameters with the entry, and leaves with it."""
    assert known_hyperparameters()["tilt"] is TILT
    monkeypatch.delitem(ALGORITHMS, "tilted-sam")
    assert "tilt" not in known_hyperparameters()
    with pytest.raises(ValueError, match="unknown hyper-parameter 'tilt'"):
        simulate(single_example(MU), "l2-sam", 2, 0.4, rho=1.0, tilt=0.5)


def test_toy_algorithm_through_simulate(toy):
    """``simulate(..., tilt=0.7)`` is l2-SAM with ``rho = 0.7`` bit for bit on the numpy backend;
    on the compiled backend it runs (no compiled kernel: scipy's loop on the compiled field)
    within 1e-10 of it; ``tilt`` is required, checked, and may be a schedule."""
    data = gaussian_blobs()
    kw = dict(t_max=3.0, n_points=21, original_time=False)
    toy_run = simulate(data, "tilted-sam", 2, 0.6, tilt=0.7, backend="numpy", **kw)
    ref = simulate(data, "l2-sam", 2, 0.6, rho=0.7, backend="numpy", **kw)
    np.testing.assert_array_equal(toy_run.log_abs_beta, ref.log_abs_beta)
    assert toy_run.hyperparameters == {"tilt": 0.7} and toy_run.cause is Cause.REACHED_END
    pytest.importorskip("numba")
    compiled = simulate(data, "tilted-sam", 2, 0.6, tilt=0.7, backend="numba", **kw)
    assert compiled.backend == "numba" and compiled.segment_loops == ("scipy DOP853",)
    np.testing.assert_allclose(compiled.log_abs_beta, ref.log_abs_beta, rtol=0, atol=1e-10)
    scheduled = simulate(data, "tilted-sam", 2, 0.6, tilt=constant(0.7), backend="numpy", **kw)
    np.testing.assert_allclose(scheduled.log_abs_beta, ref.log_abs_beta, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="tilt is required"):
        simulate(data, "tilted-sam", 2, 0.6, rho=0.7)
    with pytest.raises(ValueError, match="tilt must be >= 0"):
        simulate(data, "tilted-sam", 2, 0.6, tilt=-1.0)


def test_toy_algorithm_through_iterate(toy):
    """The discrete toy is discrete l2-SAM bit for bit (the same steps)."""
    data = single_example(MU)
    toy_run = iterate(data, "tilted-sam", 2, 0.4, tilt=0.3, eta=0.05, steps=40)
    ref = iterate(data, "l2-sam", 2, 0.4, rho=0.3, eta=0.05, steps=40)
    np.testing.assert_array_equal(toy_run.theta, ref.theta)
    assert toy_run.cause is Cause.REACHED_END


def test_toy_algorithm_through_the_command_line(toy, tmp_path, capsys):
    """``--tilt`` exists (with its help) once the entry does; the saved run equals l2-SAM's
    (1e-10: the toy takes scipy's loop where l2-SAM may take the compiled one), also with
    ``--tilt`` given as a schedule; a bad value is one ``error:`` line and status 2."""
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "--tilt" in capsys.readouterr().out
    base = ["--mu", "1,2,3", "--alpha", "0.4", "--t-max", "2", "--n-points", "11"]
    runs = {}
    for name, extra in [
        ("toy", ["--algorithm", "tilted-sam", "--tilt", "0.7"]),
        ("scheduled", ["--algorithm", "tilted-sam", "--tilt", "constant:0.7"]),
        ("ref", ["--algorithm", "l2-sam", "--rho", "0.7"]),
    ]:
        out = tmp_path / f"{name}.npz"
        assert cli.main([*base, *extra, "--out", str(out)]) == 0
        with np.load(out, allow_pickle=False) as f:
            runs[name] = f["log_abs_beta"]
    np.testing.assert_allclose(runs["toy"], runs["ref"], rtol=0, atol=1e-10)
    np.testing.assert_allclose(runs["scheduled"], runs["ref"], rtol=0, atol=1e-10)
    capsys.readouterr()
    assert cli.main([*base, "--algorithm", "tilted-sam", "--tilt", "-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "tilt" in err[0]


def test_toy_loss_runs_on_the_numpy_path(toy):
    """A loss with no compiled twin: ``auto`` picks the numpy backend, ``numba`` says it does
    not cover it, and the numbers are the logistic loss's."""
    data = single_example(MU)
    kw = dict(rho=1.0, t_max=2.0, n_points=11, original_time=False)
    run = simulate(data, "l2-sam", 2, 0.6, loss="logistic-copy", **kw)
    ref = simulate(data, "l2-sam", 2, 0.6, loss="logistic", backend="numpy", **kw)
    assert run.backend == "numpy"
    np.testing.assert_array_equal(run.log_abs_beta, ref.log_abs_beta)
    pytest.importorskip("numba")
    with pytest.raises(ValueError, match="does not cover"):
        simulate(data, "l2-sam", 2, 0.6, loss="logistic-copy", backend="numba", **kw)


def test_backend_record():
    """Every backend names its field; ``auto`` takes the first installed one that covers the
    problem; only the compiled backend brings a segment loop, a sliding combination and an
    interval rule, and no module of the integrator imports :mod:`flows.compiled`."""
    import ast
    from pathlib import Path

    assert set(AUTO_ORDER) <= set(BACKENDS)
    for name, backend in BACKENDS.items():
        assert backend.name == name and callable(backend.field)
    compiled_pieces = {
        name: (b.segment_loop is not None, b.sliding is not None, b.interval_rule is not None)
        for name, b in BACKENDS.items()
    }
    assert compiled_pieces == {
        "numba": (True, True, True),
        "numpy": (False, False, False),
        "reference": (False, False, False),
    }
    root = Path(algorithms_module.__file__).parent
    for path in sorted((root / "integrator").glob("*.py")) + [root / "fused.py", root / "field.py"]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                assert "compiled" not in module, f"{path.name} imports {module}"
    run = simulate(single_example(MU), "gd", 2, 0.5, t_max=1.0, n_points=3)
    expected = next(n for n in AUTO_ORDER if BACKENDS[n].available())
    assert run.backend == expected
    with pytest.raises(ValueError, match="backend"):
        simulate(single_example(MU), "gd", 2, 0.5, t_max=1.0, backend="fortran")
