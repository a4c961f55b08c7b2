"""A zero perturbation size is the base optimizer bit for bit.

Every algorithm of :data:`flows.algorithms.ALGORITHMS` declares the hyper-parameters whose value
0 makes its perturbation identically 0 (:attr:`~flows.algorithms.Algorithm.zeroed_by`: ``rho``;
``sigma`` or ``rho_max`` of LE-SAM; ``sigma`` of the official LE-SAM, whose ``rho_max = 0`` is
no cap). ``iterate`` and ``simulate`` then run gradient descent's code path and backend
(:func:`flows.algorithms.effective_algorithm`), so their arrays equal GD's exactly, while the
result keeps the algorithm's name and hyper-parameters. A schedule, even one that is 0 at some
times, keeps the algorithm's own run.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flows import iterate, simulate, single_example
from flows.algorithms import (
    ALGORITHMS,
    BASE_ALGORITHM,
    GradientSummary,
    effective_algorithm,
    resolve_hyperparameters,
)
from flows.data import Dataset
from flows.schedules import cosine

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

#: A nonzero value of each hyper-parameter that some algorithm zeroes (for the others).
NONZERO = {"rho": 0.3, "sigma": 0.2, "rho_max": 0.5}
#: (algorithm, the hyper-parameters with one zeroing value 0), every declaration of the table.
ZEROINGS = [
    (name, {**{k: NONZERO[k] for k in algo.zeroed_by}, zeroed: 0.0})
    for name, algo in ALGORITHMS.items()
    for zeroed in algo.zeroed_by
]
IDS = [f"{name}-{next(k for k, v in hp.items() if v == 0)}" for name, hp in ZEROINGS]

CLASSIFICATION = single_example([1.0, 2.0, 0.5])
_rng = np.random.default_rng(41)
REGRESSION = Dataset(_rng.standard_normal((3, 3)), _rng.standard_normal(3), task="regression")
DATA = {"classification": CLASSIFICATION, "regression": REGRESSION}
ALPHA = 0.5
ITERATE = dict(eta=0.05, steps=40, record_every=4)
SIMULATE = dict(t_max=2.0, n_points=11)
TRAJECTORY_ARRAYS = ("log_abs_beta", "sign_beta", "t", "tau", "loss")


@functools.cache
def gd_iterates(task: str, depth: int):
    return iterate(DATA[task], "gd", depth, ALPHA, **ITERATE)


@functools.cache
def gd_flow(task: str, depth: int):
    return simulate(DATA[task], "gd", depth, ALPHA, **SIMULATE)


def assert_same_iterates(run, reference) -> None:
    for name in ("steps", "t", "theta", "beta", "loss"):
        np.testing.assert_array_equal(getattr(run, name), getattr(reference, name), err_msg=name)
    assert (run.status, run.backend) == (reference.status, reference.backend)


def assert_same_flow(traj, reference) -> None:
    for name in TRAJECTORY_ARRAYS:
        np.testing.assert_array_equal(getattr(traj, name), getattr(reference, name), err_msg=name)
    assert (traj.status, traj.backend) == (reference.status, reference.backend)


def test_every_perturbing_algorithm_declares_its_zero():
    """Only gradient descent has nothing that zeroes its (absent) perturbation."""
    for name, algo in ALGORITHMS.items():
        assert bool(algo.zeroed_by) == algo.perturbs, name
        assert set(algo.zeroed_by) <= set(algo.names), name


@pytest.mark.parametrize(("name", "given"), ZEROINGS, ids=IDS)
def test_the_declared_zero_is_a_zero_perturbation(name, given):
    """``perturb`` with the declared zero returns 0 at random gradients (and a nonzero
    perturbation without it): the declaration matches the formula."""
    algo = ALGORITHMS[name]
    rng = np.random.default_rng(0)
    g = rng.standard_normal((5, 2, 3))
    norm = np.sqrt(np.sum(g * g, axis=(-2, -1), keepdims=True))
    summary = GradientSummary(
        unit=g / norm,
        sign=np.sign(g),
        log_norm=np.log(norm),
        multiplicity=np.ones(2, dtype=int),
        log_abs_theta=np.log(rng.uniform(0.1, 2.0, (5, 2, 3))),
    )
    hp = resolve_hyperparameters(name, given)
    assert np.all(algo.perturb(summary, hp) == 0)
    nonzero = resolve_hyperparameters(name, {k: NONZERO[k] for k in algo.zeroed_by})
    assert np.any(algo.perturb(summary, nonzero) != 0)


@pytest.mark.parametrize(("name", "given"), ZEROINGS, ids=IDS)
def test_zero_perturbation_runs_gradient_descent(name, given):
    assert effective_algorithm(name, resolve_hyperparameters(name, given)) == BASE_ALGORITHM
    nonzero = {k: NONZERO[k] for k in ALGORITHMS[name].zeroed_by}
    assert effective_algorithm(name, resolve_hyperparameters(name, nonzero)) == name


def test_a_cap_of_zero_is_no_cap_for_the_official_lesam():
    hp = resolve_hyperparameters("le-sam-official", {"rho_max": 0.0})
    assert effective_algorithm("le-sam-official", hp) == "le-sam-official"


@pytest.mark.parametrize("task", DATA)
@pytest.mark.parametrize("depth", [2, 3])
@pytest.mark.parametrize(("name", "given"), ZEROINGS, ids=IDS)
def test_iterate_at_zero_is_gd(name, given, depth, task):
    run = iterate(DATA[task], name, depth, ALPHA, **ITERATE, **given)
    assert_same_iterates(run, gd_iterates(task, depth))
    assert run.algorithm == name


@pytest.mark.parametrize("task", DATA)
@pytest.mark.parametrize("depth", [2, 3])
@pytest.mark.parametrize(("name", "given"), ZEROINGS, ids=IDS)
def test_simulate_at_zero_is_gd(name, given, depth, task):
    traj = simulate(DATA[task], name, depth, ALPHA, **SIMULATE, **given)
    assert_same_flow(traj, gd_flow(task, depth))
    assert traj.algorithm == name
    assert traj.hyperparameters == resolve_hyperparameters(name, given)


@pytest.mark.parametrize("name", ["asam", "1-sam"])
def test_numpy_backend_at_zero_is_gd_on_numpy(name):
    """An explicit backend is kept: the numpy run of ``rho = 0`` is GD's numpy run."""
    args = dict(depth=3, alpha=ALPHA, backend="numpy", rho=0.0)
    assert_same_iterates(
        iterate(CLASSIFICATION, name, **args, **ITERATE),
        iterate(CLASSIFICATION, "gd", **args, **ITERATE),
    )
    assert_same_flow(
        simulate(CLASSIFICATION, name, **args, **SIMULATE),
        simulate(CLASSIFICATION, "gd", **args, **SIMULATE),
    )


def test_a_schedule_that_reaches_zero_keeps_the_algorithm():
    """``rho`` decaying to 0 at t = 1 (and 0 afterwards) is not a zero perturbation: the run is
    l2-SAM's, which leaves GD's path."""
    schedules = [cosine(0.3, 1.0), lambda t: 0.0 * t]  # a callable is never read as a constant
    for rho in schedules:
        hp = resolve_hyperparameters("l2-sam", {"rho": rho})
        assert effective_algorithm("l2-sam", hp) == "l2-sam"
    hp = resolve_hyperparameters("le-sam", {"sigma": cosine(0.2, 1.0), "rho_max": 0.5})
    assert effective_algorithm("le-sam", hp) == "le-sam"
    args = dict(depth=2, alpha=ALPHA, clock="original", **SIMULATE)
    traj = simulate(CLASSIFICATION, "l2-sam", rho=schedules[0], **args)
    reference = simulate(CLASSIFICATION, "gd", **args)
    assert not np.array_equal(traj.log_abs_beta, reference.log_abs_beta)
    run = iterate(CLASSIFICATION, "l2-sam", 2, ALPHA, rho=schedules[0], **ITERATE)
    assert not np.array_equal(run.theta, gd_iterates("classification", 2).theta)


@pytest.mark.parametrize("name", ["asam", "linf-sam", "le-sam-official", "l2-sam", "usam"])
def test_conserved_branch_at_zero_is_gd(name):
    """Regression at depth 2 from an unbalanced init below 1e-5 runs in the conserved
    coordinates (chart 'auto'): at a zero perturbation size, GD's run there too."""
    zero = {"sigma": 0.0} if name == "le-sam-official" else {"rho": 0.0}
    alpha = np.array([[1e-6] * 3, [0.0] * 3])
    traj = simulate(REGRESSION, name, 2, alpha, **zero, **SIMULATE)
    assert traj.algorithm == name
    assert_same_flow(traj, simulate(REGRESSION, "gd", 2, alpha, **SIMULATE))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from(ZEROINGS),
    depth=st.sampled_from([2, 3]),
    regression=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 3),
    d=st.integers(1, 3),
    alpha=st.floats(0.05, 2.0),
)
def test_zero_perturbation_is_gd_on_random_data(case, depth, regression, seed, n, d, alpha):
    name, given = case
    rng = np.random.default_rng(seed)
    if regression:
        data = Dataset(rng.standard_normal((n, d)), rng.standard_normal(n), task="regression")
    else:
        data = single_example(rng.uniform(0.1, 3.0, d) * rng.choice([-1.0, 1.0], d))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        steps = dict(eta=0.05, steps=10)
        assert_same_iterates(
            iterate(data, name, depth, alpha, **steps, **given),
            iterate(data, "gd", depth, alpha, **steps),
        )
        flow = dict(t_max=1.0, n_points=5)
        assert_same_flow(
            simulate(data, name, depth, alpha, **flow, **given),
            simulate(data, "gd", depth, alpha, **flow),
        )
