"""Tests of what ``flows.simulate`` keeps between calls (flows/integrator/driver.py,
flows/integrator/arguments.py): the initialization and the signs it keeps are built once per
scalar ``alpha`` and reused; an array ``alpha`` of the same values takes the general path.

* the cached path gives the general path's trajectory bit for bit, on a second call too;
* the cached arrays are read-only, so no run can change another's start;
* bad scalars are refused with the general path's ``ValueError`` on every call;
* the sign warning fires on every call, the kept signs taken from the cache;
* the output grid is made once per ``(t_max, n_points)``, and a run's times are its own.

Fast (< 5 s): short single-example runs.
"""

from __future__ import annotations

import numpy as np
import pytest

from flows import simulate, single_example
from flows.integrator.driver import _initialization

MU = np.arange(1.0, 6.0)

FIELDS = ("t", "tau", "log_t_original", "log_abs_theta", "sign_theta", "log_abs_beta", "loss")


@pytest.mark.parametrize(
    "algorithm, depth, alpha, hp",
    [("l2-sam", 2, 0.4, {"rho": 1.0}), ("gd", 3, 0.05, {}), ("linf-sam", 2, 0.4, {"rho": 0.1})],
)
def test_cached_initialization_gives_the_general_paths_trajectory(algorithm, depth, alpha, hp):
    """Claim: a scalar alpha (cached) and the same alpha as a 0-d array (not cached) give the
    same trajectory bit for bit, and so does a second call on the cached path."""
    data = single_example(MU)
    kw = dict(t_max=3.0, n_points=31, **hp)
    general = simulate(data, algorithm, depth, np.array(alpha), **kw)
    for _ in range(2):
        cached = simulate(data, algorithm, depth, alpha, **kw)
        for name in FIELDS:
            np.testing.assert_array_equal(getattr(cached, name), getattr(general, name), name)
        assert (cached.status, cached.message, cached.nfev) == (
            general.status,
            general.message,
            general.nfev,
        )


def test_cached_initialization_is_read_only():
    """Claim: the cached groups and multiplicities cannot be written, and equal a fresh
    initialization's."""
    from flows.initialization import initialization

    init = _initialization(0.3, 4, 5, None)
    fresh = initialization(np.array(0.3), 4, 5, None)
    np.testing.assert_array_equal(init.groups, fresh.groups)
    np.testing.assert_array_equal(init.multiplicity, fresh.multiplicity)
    with pytest.raises(ValueError):
        init.groups[0, 0] = 1.0
    with pytest.raises(ValueError):
        init.multiplicity[0] = 1


@pytest.mark.parametrize("alpha", [-0.4, 0.0, float("nan"), float("inf"), True])
def test_bad_scalar_alpha_refused_on_every_call(alpha):
    """Claim: a bad scalar alpha raises a ValueError naming alpha, on a repeated call too (the
    cache keeps no failure)."""
    data = single_example(MU)
    for _ in range(2):
        with pytest.raises(ValueError, match="alpha"):
            simulate(data, "l2-sam", 2, alpha, rho=1.0, t_max=1.0, n_points=3)


def test_sign_warning_on_every_call():
    """Claim: data separable only by a negative beta warn on every call from a positive
    scalar alpha at even depth (the kept signs come from the cache the second time)."""
    data = single_example([-1.0, -2.0])
    for _ in range(2):
        with pytest.warns(RuntimeWarning, match="keeps sign"):
            simulate(data, "gd", 2, 0.5, t_max=0.5, n_points=3)


@pytest.mark.parametrize("t_max, n_points", [(3.0, 31), (2.5, 2), (1e-3, 7)])
def test_a_runs_times_are_its_own_and_the_grid_is_linspace(t_max, n_points):
    """Claim: the times of a run equal ``linspace(0, t_max, n_points)`` bit for bit; writing
    into one run's ``t`` changes neither another run's nor the next call's."""
    data = single_example(MU)
    first = simulate(data, "l2-sam", 2, 0.4, rho=1.0, t_max=t_max, n_points=n_points)
    second = simulate(data, "l2-sam", 2, 0.4, rho=1.0, t_max=t_max, n_points=n_points)
    expected = np.linspace(0.0, t_max, n_points)
    np.testing.assert_array_equal(first.t, expected)
    first.t[...] = -1.0
    np.testing.assert_array_equal(second.t, expected)
    third = simulate(data, "l2-sam", 2, 0.4, rho=1.0, t_max=t_max, n_points=n_points)
    np.testing.assert_array_equal(third.t, expected)
