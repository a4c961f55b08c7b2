"""Command line: integrate one flow and summarise it.

    python -m flows.run --algorithm l2-sam --depth 2 --mu 1,2,3,4,5 --rho 1 --alpha 0.4 --t-max 30
    python -m flows.run --data mydata.csv --algorithm linf-sam --rho 0.5 --alpha 1 --out traj.npz
    python -m flows.run --data targets.csv --loss squared --algorithm 1-usam --rho 0.2 \
        --alpha "0.1,0.1,0.1;0,0,0" --t-max 100

Bad input prints one line on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path
from typing import NoReturn

import numpy as np

from .algorithms import ALGORITHMS, HyperparameterSpec, known_hyperparameters
from .clocks import CLOCKS
from .data import TASKS, Dataset, single_example
from .integrator.driver import simulate
from .model import LOSSES, get_loss
from .results import Trajectory
from .schedules import parse


def schedule_or_number(name: str):
    """An argparse type: a number or a named schedule (``name:arg,arg,...``)."""

    def convert(text: str):
        try:
            return parse(text, name)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = name
    return convert


def number_list(text: str) -> np.ndarray:
    """``'1,2,3'`` -> array; a single number stays a scalar array; ``';'`` separates the rows
    of an (L, d) array (``'0.1,0.1;0,0'``: ``u = 0.1``, ``v = 0``)."""
    try:
        if ";" in text:
            rows = [[float(v) for v in row.split(",")] for row in text.split(";")]
            if len({len(r) for r in rows}) != 1:
                raise ValueError
            return np.array(rows)
        return (
            np.array([float(v) for v in text.split(",")]) if "," in text else np.array(float(text))
        )
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a number, a comma-separated list or rows of equal length separated by ';': "
            f"{text!r}"
        ) from None


def load_dataset(path: str, task: str = TASKS[0]) -> Dataset:
    """A data file: ``.npz`` with arrays ``X`` and ``y``, or ``.csv`` whose last column is ``y``
    (labels +-1, or real targets for ``task='regression'``)."""
    p = Path(path)
    if not p.exists():
        raise ValueError(f"--data {path!r} does not exist")
    if not p.is_file():
        raise ValueError(f"--data {path!r} is not a file")
    if p.suffix not in (".npz", ".csv"):
        raise ValueError(f"--data {path!r} must be .npz or .csv")
    try:
        if p.suffix == ".npz":
            with open(p, "rb") as handle, np.load(handle, allow_pickle=False) as f:
                if "X" not in f or "y" not in f:
                    raise ValueError("it must contain arrays 'X' and 'y'")
                X, y = f["X"], f["y"]
        else:
            with warnings.catch_warnings():  # "input contained no data": an error below
                warnings.simplefilter("ignore", UserWarning)
                table = np.loadtxt(p, delimiter=",", ndmin=2)
            if table.size == 0:
                raise ValueError("it holds no data")
            X, y = table[:, :-1], table[:, -1]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"--data {path!r} could not be read: {exc}") from None
    return Dataset(X, y, task=task)


def task_of(task: str | None, loss: str | None) -> str:
    """The data's task: ``--task``, else the task of ``--loss`` (the squared loss is a
    regression loss), else classification."""
    if task is not None:
        if task not in TASKS:
            raise ValueError(f"--task must be one of {', '.join(TASKS)}, got {task!r}")
        return task
    return TASKS[0] if loss is None else get_loss(loss).task


def save_trajectory(traj: Trajectory, path: str) -> None:
    """Write ``.npz`` (every field, :meth:`Trajectory.to_arrays`: ``Trajectory.from_arrays(
    np.load(path, allow_pickle=False))`` reads it back) or ``.csv`` (:meth:`Trajectory.to_csv`:
    t, tau, log t, loss, log|beta|, sign beta)."""
    p = Path(path)
    if p.suffix == ".npz":
        np.savez(p, **traj.to_arrays())  # type: ignore[arg-type]
    elif p.suffix == ".csv":
        traj.to_csv(p)
    else:
        raise ValueError(f"--out must end in .npz or .csv, got {path!r}")


def summary(traj: Trajectory) -> str:
    """A few lines: status, final direction, leader sequence, final log|beta| and loss."""
    from analysis.amplification import LEADERS_LABEL, trajectory_leaders

    np.set_printoptions(precision=4, suppress=True)
    lines = [
        f"{traj.algorithm}, depth {traj.depth}, clock {traj.clock}: "
        f"status {traj.status}, {traj.cause.value} ({traj.message})",
        f"backend {traj.backend}, segment loops {', '.join(traj.segment_loops) or 'none'}",
        f"final time t = {traj.t[-1]:.6g} (tau = {traj.tau[-1]:.6g}, "
        f"log t_original = {traj.log_t_original[-1]:.6g})",
        f"final direction beta/|beta| = {traj.direction[-1]}",
        f"final log|beta| = {traj.log_abs_beta[-1]}",
        f"final loss = {traj.loss[-1]:.6g}",
        f"{LEADERS_LABEL} over time: {trajectory_leaders(traj).describe()}",
    ]
    if traj.sliding_surfaces:
        lines.append(
            f"sliding: {traj.sliding_time:.6g} of rescaled time, at most "
            f"{traj.sliding_surfaces} switching surface(s) at once"
        )
    events = [e for e in traj.events if e.kind != "crossing"]
    if events:
        lines.append(
            "events (j 1-based): "
            + "; ".join(
                f"{e.kind}{'' if e.entry is None else f' j={e.entry[1] + 1}'}"
                f"{'' if e.surface is None else f' ({e.surface})'} at tau={e.tau:.6g}"
                for e in events[:10]
            )
            + (" ..." if len(events) > 10 else "")
        )
    return "\n".join(lines)


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit status 2."""

    def error(self, message: str):
        self.exit(2, f"error: {message}\n")


def not_a_command(module: str) -> NoReturn:
    """``python -m module`` of a module that is not a command line: one ``error: ...`` line on
    stderr and exit status 2. Every such module of ``analysis`` and ``figures`` ends with
    ``if __name__ == "__main__": not_a_command(__spec__.name)`` (``tests/test_commands.py``)."""
    print(
        f"error: {module} is not a command line (README.md lists the command lines)",
        file=sys.stderr,
    )
    raise SystemExit(2)


def check_output_path(path: str | None, option: str, suffixes: tuple[str, ...]) -> None:
    """Fail before any work if ``path`` has the wrong suffix, is a folder, or its folder does
    not exist or is not writable."""
    if path is None:
        return
    p = Path(path)
    if p.suffix not in suffixes:
        raise ValueError(f"{option} must end in {' or '.join(suffixes)}, got {path!r}")
    if p.is_dir():
        raise ValueError(f"{option} {path!r} is a folder")
    if not p.parent.is_dir():
        what = "is not a folder" if p.parent.exists() else "does not exist"
        raise ValueError(f"{option}: folder {str(p.parent)!r} {what}")
    try:
        with tempfile.TemporaryFile(dir=p.parent):
            pass
    except OSError as exc:
        raise ValueError(
            f"{option}: folder {str(p.parent)!r} is not writable: {exc.strerror or exc}"
        ) from None


def parser() -> argparse.ArgumentParser:
    """The argument parser."""
    p = OneLineParser(prog="python -m flows.run", description=__doc__.splitlines()[0])
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--mu",
        type=number_list,
        default=None,
        help="single example (mu, +1): comma-separated features (default 1,2)",
    )
    src.add_argument("--data", help="data file: .npz with X, y or .csv with y as last column")
    p.add_argument(
        "--task",
        default=None,
        help=f"one of {', '.join(TASKS)} (default: the task of --loss, else classification)",
    )
    p.add_argument("--algorithm", default="l2-sam", help=f"one of {', '.join(ALGORITHMS)}")
    p.add_argument("--depth", type=int, default=2, help="number of layers L (default 2)")
    p.add_argument(
        "--alpha",
        type=number_list,
        default=np.array(1.0),
        help="initialization: a scalar, comma-separated per coordinate, or rows separated "
        "by ';' (one per layer, zeros and signs allowed)",
    )
    for spec in known_hyperparameters().values():
        add_hyperparameter(p, spec)
    p.add_argument("--t-max", type=float, default=10.0, help="end time in the chosen clock")
    p.add_argument(
        "--clock",
        default=None,
        help=f"one of {', '.join(CLOCKS)} (default: rescaled; original in regression)",
    )
    p.add_argument("--n-points", type=int, default=201, help="output times")
    p.add_argument(
        "--loss",
        default=None,
        help=f"one of {', '.join(LOSSES)} (default: logistic; squared in regression)",
    )
    p.add_argument("--out", help="write the trajectory (.npz or .csv)")
    p.add_argument("--plot", help="write a figure of the trajectory (.png, .pdf, .svg)")
    return p


def add_hyperparameter(p: argparse.ArgumentParser, spec: HyperparameterSpec) -> None:
    """The flag ``--name`` (``_`` as ``-``) of one hyper-parameter of the algorithm table: a
    number, or where ``spec.schedulable`` a schedule too; absent, ``spec.cli_default``; a
    switch (``spec.flag``) takes no value."""
    flag = "--" + spec.name.replace("_", "-")
    if spec.flag:
        p.add_argument(flag, dest=spec.name, action="store_true", default=None, help=spec.help)
        return
    p.add_argument(
        flag,
        dest=spec.name,
        type=schedule_or_number(spec.name) if spec.schedulable else float,
        default=spec.cli_default,
        help=spec.help or spec.name,
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (2 on bad input)."""
    args = parser().parse_args(argv)
    try:
        task = task_of(args.task, args.loss)
        if args.data is not None:
            data = load_dataset(args.data, task)
        elif task != TASKS[0]:
            raise ValueError(f"--task {task} needs --data (--mu is one classification example)")
        else:
            data = single_example(args.mu if args.mu is not None else [1.0, 2.0])
        check_output_path(args.out, "--out", (".npz", ".csv"))
        check_output_path(args.plot, "--plot", (".png", ".pdf", ".svg"))
        traj = simulate(
            data,
            args.algorithm,
            args.depth,
            args.alpha,
            t_max=args.t_max,
            clock=args.clock,
            n_points=args.n_points,
            loss=args.loss,
            **{name: getattr(args, name) for name in known_hyperparameters()},
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(summary(traj))
    if args.out:
        save_trajectory(traj, args.out)
        print(f"wrote {args.out}")
    if args.plot:
        from figures.trajectory import (
            plot_trajectory,
        )  # entry module only: flows never imports figures

        plot_trajectory(traj, args.plot)
        print(f"wrote {args.plot}")
    return 0 if traj.success else 1


if __name__ == "__main__":
    sys.exit(main())
