"""Input validation: every bad input is a ``ValueError`` naming the parameter, and the CLI
turns it into one ``error: ...`` line on stderr with exit status 2 (no traceback).

Fast (a few seconds): validation happens before any integration, and the CLI cases run in this
process through ``main``. As processes (the whole path of ``python -m flows.run``, launched
concurrently by one module-scoped fixture) they are ``slow``; a bad input through ``python -m
flows.run`` stays in the default run in tests/test_robustness_engine.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

from flows import Dataset, iterate, simulate, single_example
from flows.results import Cause, Trajectory

MU = single_example([1.0, 2.0])
GOOD = dict(rho=1.0, alpha=0.5, t_max=0.1, n_points=3)


def names(param: str) -> str:
    """Regex: ``param`` as a whole word (so 'y' does not match inside 'every')."""
    return rf"(?<![\w-]){re.escape(param)}(?![\w-])"


# --------------------------------------------------------------------------- Dataset

BAD_DATASETS = {
    "X 1-D": (lambda: Dataset(np.array([1.0, 2.0]), np.array([1.0])), "X"),
    "X 3-D": (lambda: Dataset(np.ones((1, 2, 1)), np.array([1.0])), "X"),
    "X empty": (lambda: Dataset(np.ones((0, 2)), np.ones(0)), "X"),
    "y 2-D": (lambda: Dataset(np.eye(2), np.ones((2, 1))), "y"),
    "y too short": (lambda: Dataset(np.eye(2), np.array([1.0])), "y"),
    "y too long": (lambda: Dataset(np.eye(2), np.array([1.0, 1.0, -1.0])), "y"),
    "label 0": (lambda: Dataset(np.eye(2), np.array([1.0, 0.0])), "y"),
    "label 0.5": (lambda: Dataset(np.eye(2), np.array([1.0, 0.5])), "y"),
    "label 2": (lambda: Dataset(np.eye(2), np.array([2.0, -1.0])), "y"),
    "X nan": (lambda: Dataset(np.array([[1.0, np.nan]]), np.array([1.0])), "X"),
    "X inf": (lambda: Dataset(np.array([[1.0, np.inf]]), np.array([1.0])), "X"),
    "X -inf": (lambda: Dataset(np.array([[-np.inf, 1.0]]), np.array([1.0])), "X"),
    "y nan": (lambda: Dataset(np.eye(2), np.array([1.0, np.nan])), "y"),
    "y inf": (lambda: Dataset(np.eye(2), np.array([1.0, np.inf])), "y"),
    "X not numeric": (lambda: Dataset([["a", "b"]], [1.0]), "X"),
    "mu nan": (lambda: single_example([1.0, np.nan]), "mu"),
    "mu inf": (lambda: single_example([1.0, np.inf]), "mu"),
    "mu 2-D": (lambda: single_example([[1.0, 2.0]]), "mu"),
    "mu zero": (lambda: single_example([0.0, 0.0]), "mu"),
}


@pytest.mark.parametrize("case", list(BAD_DATASETS))
def test_bad_dataset(case):
    build, param = BAD_DATASETS[case]
    with pytest.raises(ValueError, match=names(param)):
        build()


@pytest.mark.parametrize(
    "X, y",
    [
        ([[1.0, 0.0], [1.0, 0.0]], [1.0, -1.0]),  # same point, both labels
        ([[0.0, 0.0]], [1.0]),  # zero feature vector: no margin through the origin
        ([[1.0, 1.0], [2.0, 2.0]], [1.0, -1.0]),  # collinear, opposite labels
        ([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]], [1.0, 1.0, 1.0, 1.0]),
    ],
)
def test_non_separable(X, y):
    with pytest.raises(ValueError, match="separable"):
        Dataset(np.array(X), np.array(y))


def test_dataset_accepts_good_input():
    ds = Dataset(np.array([[1.0, 2.0], [-1.0, -1.0]]), np.array([1.0, -1.0]))
    assert (ds.n, ds.d) == (2, 2)


# --------------------------------------------------------------------------- simulate / iterate

SHARED_BAD = {  # keyword overrides on GOOD, and the parameter the message must name
    "rho < 0": (dict(rho=-1.0), "rho"),
    "rho nan": (dict(rho=np.nan), "rho"),
    "rho inf": (dict(rho=np.inf), "rho"),
    "rho text": (dict(rho="big"), "rho"),
    "rho missing": (dict(rho=None), "rho"),
    "alpha 0": (dict(alpha=0.0), "alpha"),
    "alpha < 0": (dict(alpha=-0.5), "alpha"),
    "alpha vector with 0": (dict(alpha=[0.5, 0.0]), "alpha"),
    "alpha wrong length": (dict(alpha=[0.5, 0.5, 0.5]), "alpha"),
    "alpha wrong (L,d) rows": (dict(alpha=np.full((3, 2), 0.5)), "alpha"),
    "alpha wrong (L,d) cols": (dict(alpha=np.full((2, 3), 0.5)), "alpha"),
    "alpha 3-D": (dict(alpha=np.full((2, 2, 1), 0.5)), "alpha"),
    "alpha nan": (dict(alpha=np.nan), "alpha"),
    "alpha vector nan": (dict(alpha=[0.5, np.nan]), "alpha"),
    "alpha inf": (dict(alpha=np.inf), "alpha"),
    "depth 0": (dict(depth=0), "depth"),
    "depth -1": (dict(depth=-1), "depth"),
    "depth 1.5": (dict(depth=1.5), "depth"),
    "depth 2.0 float": (dict(depth=2.0), "depth"),
    "depth True": (dict(depth=True), "depth"),
    "unknown algorithm": (dict(algorithm="foo"), "algorithm"),
    "algorithm None": (dict(algorithm=None), "algorithm"),
    "unknown loss": (dict(loss="hinge"), "loss"),
    "le-sam without sigma or rho_max": (dict(algorithm="le-sam"), "sigma"),
    "le-sam without sigma": (dict(algorithm="le-sam", rho_max=1.0), "sigma"),
    "le-sam without rho_max": (dict(algorithm="le-sam", sigma=0.1), "rho_max"),
    "le-sam sigma < 0": (dict(algorithm="le-sam", sigma=-0.1, rho_max=1.0), "sigma"),
    "le-sam rho_max nan": (dict(algorithm="le-sam", sigma=0.1, rho_max=np.nan), "rho_max"),
}

SIMULATE_BAD = {
    **SHARED_BAD,
    "unknown clock": (dict(clock="wall"), "clock"),
    "t_max 0": (dict(t_max=0.0), "t_max"),
    "t_max < 0": (dict(t_max=-1.0), "t_max"),
    "t_max nan": (dict(t_max=np.nan), "t_max"),
    "t_max inf": (dict(t_max=np.inf), "t_max"),
    "n_points 1": (dict(n_points=1), "n_points"),
    "n_points 0": (dict(n_points=0), "n_points"),
    "n_points 2.5": (dict(n_points=2.5), "n_points"),
    "chart_scale 0": (dict(chart_scale=0.0), "chart_scale"),
}

ITERATE_BAD = {
    **SHARED_BAD,
    "eta 0": (dict(eta=0.0), "eta"),
    "eta < 0": (dict(eta=-1e-3), "eta"),
    "eta nan": (dict(eta=np.nan), "eta"),
    "eta inf": (dict(eta=np.inf), "eta"),
    "steps 0": (dict(steps=0), "steps"),
    "steps < 0": (dict(steps=-5), "steps"),
    "steps 1.5": (dict(steps=1.5), "steps"),
    "record_every 0": (dict(record_every=0), "record_every"),
}


def _simulate(**overrides):
    kw = {**GOOD, **overrides}
    algorithm = kw.pop("algorithm", "l2-sam")
    depth = kw.pop("depth", 2)
    alpha = kw.pop("alpha")
    return simulate(MU, algorithm, depth, alpha, **kw)


def _iterate(**overrides):
    kw = {"rho": 1.0, "alpha": 0.5, "eta": 1e-2, "steps": 3, **overrides}
    algorithm = kw.pop("algorithm", "l2-sam")
    depth = kw.pop("depth", 2)
    alpha = kw.pop("alpha")
    return iterate(MU, algorithm, depth, alpha, **kw)


@pytest.mark.parametrize("case", list(SIMULATE_BAD))
def test_simulate_rejects(case):
    overrides, param = SIMULATE_BAD[case]
    with pytest.raises(ValueError, match=names(param)):
        _simulate(**overrides)


@pytest.mark.parametrize("case", list(ITERATE_BAD))
def test_iterate_rejects(case):
    overrides, param = ITERATE_BAD[case]
    with pytest.raises(ValueError, match=names(param)):
        _iterate(**overrides)


@pytest.mark.parametrize("run", [simulate, iterate])
def test_data_must_be_a_dataset(run):
    with pytest.raises(ValueError, match=names("data")):
        run(np.array([[1.0, 2.0]]), "l2-sam", 2, 0.5, rho=1.0)


def test_le_sam_missing_both_names_a_required_parameter():
    with pytest.raises(ValueError, match=r"sigma|rho_max"):
        _simulate(algorithm="le-sam", rho=None)


def test_good_input_runs():
    """The baseline the bad cases perturb is itself valid."""
    assert _simulate().success
    assert _iterate().status == 0
    assert _simulate(algorithm="le-sam", sigma=0.1, rho_max=1.0).success
    assert _simulate(alpha=np.full((2, 2), 0.5), reduced=False).success


def test_simulate_t_max_text():
    with pytest.raises(ValueError, match=names("t_max")):
        _simulate(t_max="a")


@pytest.mark.filterwarnings("ignore:At least one element of `rtol` is too small")
def test_simulate_rtol_negative():
    with pytest.raises(ValueError, match=names("rtol")):
        _simulate(rtol=-1.0)


# --------------------------------------------------------------------------- CLI

NONSEP_CSV = "1,0,1\n1,0,-1\n"
SEP_CSV = "1,2,1\n-1,-1,-1\n"
REG_CSV = "1,2,0.5\n-1,0.5,-0.3\n"  # real targets: regression

CLI_BAD = {  # args -> a word the error line must contain
    "rho -1": (["--rho", "-1"], "rho"),
    "alpha 0": (["--rho", "1", "--alpha", "0"], "alpha"),
    "algorithm foo": (["--rho", "1", "--algorithm", "foo"], "algorithm"),
    "clock foo": (["--rho", "1", "--clock", "foo"], "clock"),
    "mu 1,nan": (["--rho", "1", "--mu", "1,nan"], "mu"),
    "depth 0": (["--rho", "1", "--depth", "0"], "depth"),
    "data missing.csv": (["--rho", "1", "--data", "missing.csv"], "missing.csv"),
    "out x.txt": (["--rho", "1", "--out", "x.txt"], "--out"),
    "non-separable csv": (["--rho", "1", "--data", "nonsep.csv"], "separable"),
    "le-sam no sigma": (["--algorithm", "le-sam", "--rho-max", "1"], "sigma"),
    "targets as labels": (["--data", "reg.csv"], "task='regression'"),
    "rescaled regression": (
        ["--data", "reg.csv", "--loss", "squared", "--clock", "rescaled"],
        "clock",
    ),  # fmt: skip
    "regression without data": (["--task", "regression"], "--data"),
    "task foo": (["--data", "reg.csv", "--task", "ranking"], "--task"),
    "squared on labels": (
        ["--data", "sep.csv", "--task", "classification", "--loss", "squared"],
        "loss",
    ),  # fmt: skip
    "alpha rows": (["--alpha", "1,2;3", "--data", "reg.csv", "--loss", "squared"], "alpha"),
}

#: Errors outside simulate: argparse type errors and output paths (checked before any work).
CLI_OTHER = {
    # argparse type errors print the usage block as well (3+ lines)
    "depth 1.5 (argparse)": ["--rho", "1", "--depth", "1.5"],
    # output folder missing: reported before the simulation
    "out missing dir": ["--rho", "1", "--t-max", "0.1", "--n-points", "3", "--out", "nodir/x.csv"],
}

HAPPY = ["--rho", "1", "--alpha", "0.4", "--t-max", "1", "--n-points", "17"]
HAPPY_RUNS = {
    "csv+png": ["--mu", "1,2,3", *HAPPY, "--out", "traj.csv", "--plot", "traj.png"],
    "npz": ["--data", "sep.csv", *HAPPY, "--out", "traj.npz"],
}


#: Run as processes (the whole path of ``python -m flows.run``, ``slow``: 1-3 s each); every
#: case also runs in this process through ``main`` (no start-up cost), the bad inputs with
#: warnings as errors.
SUBPROCESS_CASES = {"rho -1": CLI_BAD["rho -1"][0], **HAPPY_RUNS}
#: A hang guard, not a pass criterion: a case still running then has hung.
HANG_GUARD = 600.0


def _workdir(cwd):
    """A working directory with the data files of the cases."""
    (cwd / "nonsep.csv").write_text(NONSEP_CSV)
    (cwd / "sep.csv").write_text(SEP_CSV)
    (cwd / "reg.csv").write_text(REG_CSV)
    return cwd


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    """Run the subprocess cases concurrently, each in its own tmp dir;
    ``{name: (returncode, out, err, cwd)}``."""
    env = {**os.environ, "MPLBACKEND": "Agg"}
    procs = {}
    for name, args in SUBPROCESS_CASES.items():
        cwd = _workdir(tmp_path_factory.mktemp("cli"))
        procs[name] = (
            subprocess.Popen(
                [sys.executable, "-m", "flows.run", *args],
                cwd=cwd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            ),
            cwd,
        )
    results = {}
    for name, (proc, cwd) in procs.items():
        out, err = proc.communicate(timeout=HANG_GUARD)
        results[name] = (proc.returncode, out, err, cwd)
    return results


def _in_process(args, tmp_path, monkeypatch, capsys):
    """``flows.run.main(args)`` in ``tmp_path`` with warnings as errors (a library warning would
    be a second line on stderr): ``(returncode, out, err, cwd)``."""
    import flows.run

    monkeypatch.chdir(_workdir(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            code = flows.run.main(args)
        except SystemExit as exc:
            code = exc.code
    out, err = capsys.readouterr()
    return code, out, err, tmp_path


def _assert_one_error_line(result):
    code, out, err, _ = result
    assert "Traceback" not in err and "Traceback" not in out
    assert code == 2, (code, err)
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error:"), err
    return lines[0]


@pytest.mark.slow  # the same input through main: test_cli_bad_input[rho -1]
def test_cli_bad_input_as_a_process(cli):
    """``python -m flows.run --rho -1``: one error line naming rho, status 2."""
    assert "rho" in _assert_one_error_line(cli["rho -1"])


@pytest.mark.parametrize("case", list(CLI_BAD))
def test_cli_bad_input(case, tmp_path, monkeypatch, capsys):
    line = _assert_one_error_line(_in_process(CLI_BAD[case][0], tmp_path, monkeypatch, capsys))
    assert CLI_BAD[case][1] in line


@pytest.mark.parametrize("case", list(CLI_OTHER))
def test_cli_one_line_contract_other_errors(case, tmp_path, monkeypatch, capsys):
    _assert_one_error_line(_in_process(CLI_OTHER[case], tmp_path, monkeypatch, capsys))


def test_cli_regression_run(tmp_path, monkeypatch, capsys):
    """``--data reg.csv --loss squared`` runs regression in the original clock from an (L, d)
    init given by rows (``u = 0.3``, ``v = 0``) and writes the trajectory, whose final loss is
    the mean squared residual of its own beta."""
    args = ["--data", "reg.csv", "--loss", "squared", "--algorithm", "1-usam", "--rho", "0.1",
            "--alpha", "0.3,0.3;0,0", "--t-max", "20", "--n-points", "5", "--out", "r.npz"]  # fmt: skip
    code, out, err, cwd = _in_process(args, tmp_path, monkeypatch, capsys)
    assert code == 0, err
    assert "clock original" in out
    with np.load(cwd / "r.npz", allow_pickle=False) as f:
        beta = f["sign_beta"][-1] * np.exp(f["log_abs_beta"][-1])
        loss = f["loss"][-1]
    table = np.loadtxt(cwd / "reg.csv", delimiter=",")
    r = table[:, :-1] @ beta - table[:, -1]
    assert loss == pytest.approx(0.5 * np.mean(r * r), rel=1e-10)
    assert loss < 1e-4


def _check_csv_and_png(result):
    code, out, err, cwd = result
    assert code == 0, err
    assert "Traceback" not in err
    csv, png = cwd / "traj.csv", cwd / "traj.png"
    assert csv.stat().st_size > 0 and png.stat().st_size > 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = csv.read_text().splitlines()
    header = lines[0].split(",")
    assert header[:4] == ["t", "tau", "log_t_original", "loss"]
    assert [h for h in header if h.startswith("log_abs_beta_")] == [
        "log_abs_beta_1",
        "log_abs_beta_2",
        "log_abs_beta_3",
    ]
    assert len(lines) == 1 + 17
    table = np.loadtxt(csv, delimiter=",", skiprows=1, ndmin=2)
    assert table.shape == (17, len(header))
    np.testing.assert_allclose(table[:, 0], np.linspace(0.0, 1.0, 17))


def _check_npz(result):
    code, out, err, cwd = result
    assert code == 0, err
    path = cwd / "traj.npz"
    assert path.stat().st_size > 0
    with np.load(path, allow_pickle=False) as f:
        assert f["t"].shape == (17,)
        assert f["log_abs_beta"].shape == (17, 2)
        assert f["log_abs_theta"].shape == (17, 2, 2)
        assert np.all(np.isfinite(f["log_abs_beta"]))
        traj = Trajectory.from_arrays(f)
    assert traj.cause is Cause.REACHED_END and traj.algorithm == "l2-sam"
    assert traj.hyperparameters == {"rho": 1.0}


def _happy_in_process(name, tmp_path, monkeypatch, capsys):
    """The happy run ``name`` through ``flows.run.main`` in ``tmp_path`` (the library's warnings
    as the suite treats them): ``(returncode, out, err, cwd)``."""
    import flows.run

    monkeypatch.chdir(_workdir(tmp_path))
    code = flows.run.main(HAPPY_RUNS[name])
    out, err = capsys.readouterr()
    return code, out, err, tmp_path


@pytest.mark.slow  # the same checks through main: the test below
def test_cli_happy_csv_and_png(cli):
    _check_csv_and_png(cli["csv+png"])


def test_cli_happy_csv_and_png_in_process(tmp_path, monkeypatch, capsys):
    _check_csv_and_png(_happy_in_process("csv+png", tmp_path, monkeypatch, capsys))


@pytest.mark.slow  # the same checks through main: the test below
def test_cli_happy_npz(cli):
    _check_npz(cli["npz"])


def test_cli_happy_npz_in_process(tmp_path, monkeypatch, capsys):
    _check_npz(_happy_in_process("npz", tmp_path, monkeypatch, capsys))


@pytest.mark.parametrize(
    "kw, name",
    [
        (dict(rho="1.0"), "rho"),
        (dict(rho=True), "rho"),
        (dict(alpha=True), "alpha"),
        (dict(alpha=["0.5", "0.5"]), "alpha"),
        (dict(t_max=True), "t_max"),
        (dict(rtol=True), "rtol"),
        (dict(rtol=0.5), "rtol"),
    ],
)
def test_strict_numbers_in_simulate(kw, name):
    """Strings and bools are not numbers, and rtol is at most 0.1: a ValueError naming the
    parameter, never a conversion."""
    args = dict(rho=1.0, alpha=0.5, t_max=0.5, n_points=3) | kw
    with pytest.raises(ValueError, match=names(name)):
        simulate(single_example([1.0, 2.0]), "l2-sam", 2, **args)


@pytest.mark.parametrize(
    "X",
    [
        np.array([[1.0 + 1.0j, 2.0], [1.0, 0.0]]),
        np.ma.masked_array([[1.0, 2.0], [1.0, 0.0]], mask=[[0, 1], [0, 0]]),
        np.array([[True, False], [False, True]]),
    ],
    ids=["complex", "masked", "bool"],
)
def test_dataset_refuses_complex_masked_and_bool_features(X):
    """Complex, masked or boolean ``X``: a ValueError naming X (no imaginary part dropped, no
    mask ignored)."""
    with pytest.raises(ValueError, match=names("X")):
        Dataset(X, np.ones(2))
