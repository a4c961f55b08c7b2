"""Tests of ``analysis.saddle_to_saddle``: the saddle-to-saddle limit of the GD flow on
``beta = u ⊙ v`` from ``u(0) = alpha``, ``v(0) = 0`` (Pesme & Flammarion 2023).

Every check is against a computation that shares no code with the module: saddles against a
brute-force enumeration of supports (the KKT conditions of the sign-constrained least-squares
problem, solved by ``lstsq`` on each candidate support), jump times against ``s`` rebuilt here
from the returned saddles alone, the end point against the basis-pursuit LP of
``analysis.implicit_bias`` and against ``lstsq``, and the whole staircase against the engine's
GD flows (``flows.simulate``) in the accelerated time ``t / log(1/alpha)``.

The example (``_example``): ``X`` (3, 5) and ``y`` (3,) standard normal from
``default_rng(1091)``. Its staircase has four jumps and five saddles with supports {1}, {1, 4},
{0, 1}, {0, 1, 3}: coordinate 4 enters and leaves again, so the support is not monotone, and the
last saddle is the minimum l1-norm interpolator. It was chosen among seeded draws because no
``s_j`` of its limit changes sign (see ``test_example_keeps_the_signs_of_s``), and because the
engine follows it down to ``alpha = 1e-100`` without its stationary-point event firing at a
saddle. Both are limits of the engine at tiny ``alpha``: a float64 state ``(u_j, v_j)`` loses
``u_j^2 - v_j^2 = alpha^2`` once ``e^{2 |psi_j|} > 1 / eps`` (so ``s_j`` could not return through
0), and on a plateau the scale-free gradient is about ``alpha^(1 - max |s_j|)``, below the
event's 1e-8 when the inactive ``|s_j|`` are far from 1 and ``alpha`` is tiny.
"""

from __future__ import annotations

import functools
import itertools
import warnings

import numpy as np
import pytest

import flows
from analysis import saddle_to_saddle as s2s
from analysis.implicit_bias import min_l1_interpolator

# --------------------------------------------------------------------------- references


def _gradient(X, y, beta):
    return X.T @ (X @ beta - y) / X.shape[0]


def _loss(X, y, beta):
    return float(np.sum((X @ beta - y) ** 2)) / (2 * X.shape[0])


def _brute_force_minimiser(X, y, signs):
    """The minimiser of the squared loss with ``signs_j beta_j >= 0`` (``signs_j = +-1``) and
    ``beta_j = 0`` (``signs_j = 0``), by enumeration: on each candidate support ``S`` of the
    active set, the unconstrained least-squares solution is a KKT point iff it has the signs
    ``signs_S`` (strictly) and ``signs_j g_j >= 0`` on the rest of the active set. Returns all
    KKT points found (one, for data in general position)."""
    active = np.flatnonzero(signs != 0)
    found = []
    for size in range(active.size + 1):
        for S in itertools.combinations(active, size):
            S = list(S)
            beta = np.zeros(X.shape[1])
            if S:
                beta[S] = np.linalg.lstsq(X[:, S], y, rcond=None)[0]
                if np.any(signs[S] * beta[S] <= 0):
                    continue
            g = _gradient(X, y, beta)
            rest = [j for j in active if j not in S]
            scale = np.max(np.abs(X).T @ (np.abs(X) @ np.abs(beta) + np.abs(y))) / X.shape[0]
            if np.all(np.abs(g[S]) <= 1e-9 * scale) and np.all(
                signs[rest] * g[rest] >= -1e-9 * scale
            ):
                found.append(beta)
    return found


def _s_rebuilt(X, y, times, betas, at):
    """``s(t~) = -int_0^t~ grad L(beta(r)) dr`` for the piecewise-constant ``beta`` given by
    ``times`` and ``betas`` (plateau k on [t_k, t_{k+1}), t_0 = 0)."""
    edges = np.concatenate([[0.0], times])
    out = np.zeros((len(at), X.shape[1]))
    for i, t in enumerate(at):
        s = np.zeros(X.shape[1])
        for k, start in enumerate(edges):
            end = edges[k + 1] if k + 1 < len(edges) else np.inf
            if t <= start:
                break
            s -= (min(t, end) - start) * _gradient(X, y, betas[k])
        out[i] = s
    return out


def _example():
    rng = np.random.default_rng(1091)
    return rng.standard_normal((3, 5)), rng.standard_normal(3)


def _random_problems():
    """Small problems of every shape, under- and over-determined (n > d), seeded."""
    out = []
    for seed, (n, d) in enumerate([(2, 4), (3, 5), (3, 6), (4, 6), (5, 6), (4, 4), (6, 3), (8, 4)]):
        for rep in range(3):
            rng = np.random.default_rng(1000 * seed + rep)
            out.append((rng.standard_normal((n, d)), rng.standard_normal(n)))
    return out


# --------------------------------------------------------------------------- the limit


@pytest.mark.parametrize("case", range(len(_random_problems()) + 1))
def test_saddles_are_the_constrained_minimisers(case):
    X, y = _example() if case == len(_random_problems()) else _random_problems()[case]
    path = s2s.saddle_path(X, y)
    assert path.status == s2s.REACHED_MINIMUM, path.message
    assert path.betas.shape == (path.steps + 1, X.shape[1])
    assert np.all(path.betas[0] == 0)
    s_starts = _s_rebuilt(X, y, path.times, path.betas, np.concatenate([[0.0], path.times]))
    for k in range(path.steps + 1):
        # the constraint set of plateau k, from s rebuilt here: |s_j| = 1 lets beta_j move
        active = np.abs(np.abs(s_starts[k]) - 1) <= 1e-9
        assert np.array_equal(active, path.active[k])
        signs = np.where(active, np.sign(s_starts[k]), 0.0)
        found = _brute_force_minimiser(X, y, signs)
        assert len(found) == 1, f"plateau {k}: {len(found)} KKT points"
        np.testing.assert_allclose(path.betas[k], found[0], rtol=1e-9, atol=1e-12)
        # stationary on the support; signs of beta follow s
        g = _gradient(X, y, path.betas[k])
        support = path.betas[k] != 0
        assert np.all(np.abs(g[support]) <= 1e-10 * max(1.0, np.max(np.abs(g))))
        assert np.all(np.sign(path.betas[k][support]) == np.sign(s_starts[k][support]))
        assert np.array_equal(path.supports[k], support)
        assert np.array_equal(path.signs[k], np.sign(path.betas[k]).astype(int))
        assert path.losses[k] == pytest.approx(_loss(X, y, path.betas[k]), rel=1e-12, abs=1e-15)
    assert np.all(np.diff(path.losses) < 0)  # every jump lowers the loss
    # the end: grad L = 0, a global minimiser
    g = _gradient(X, y, path.betas[-1])
    assert np.max(np.abs(g)) <= 1e-9 * np.max(np.abs(X).T @ np.abs(y))


# the random problems after the first eight are slow; the example (the last case) is not
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(k, marks=pytest.mark.slow if 8 <= k < len(_random_problems()) else ())
        for k in range(len(_random_problems()) + 1)
    ],
)
def test_jump_times_are_where_s_first_reaches_one(case):
    X, y = _example() if case == len(_random_problems()) else _random_problems()[case]
    path = s2s.saddle_path(X, y)
    assert np.all(np.diff(path.times) > 0) and path.times[0] > 0
    # the first jump: the largest correlation reaches 1 first
    assert path.times[0] == pytest.approx(1 / np.max(np.abs(X.T @ y / X.shape[0])), rel=1e-12)
    edges = np.concatenate([[0.0], path.times])
    # s is linear on each plateau: |s| <= 1 on it iff at its two ends
    at = np.concatenate([edges, [edges[-1] + 1.0, edges[-1] + 100.0]])
    s = _s_rebuilt(X, y, path.times, path.betas, at)
    assert np.max(np.abs(s)) <= 1 + 1e-9
    for k in range(path.steps):
        start, end = s[k], s[k + 1]
        # some coordinate strictly inside on plateau k reaches +-1 exactly at its end
        reached = (np.abs(np.abs(end) - 1) <= 1e-9) & (np.abs((start + end) / 2) < 1 - 1e-9)
        assert np.any(reached), f"jump {k + 1}: no coordinate reaches |s| = 1"
    # and the module's own s agrees with s rebuilt here
    grid = np.linspace(0, edges[-1] + 2.0, 301)
    np.testing.assert_allclose(
        s2s.limit_s(path, grid), _s_rebuilt(X, y, path.times, path.betas, grid), atol=1e-12
    )


def test_end_point_is_the_minimum_l1_interpolator():
    X, y = _example()
    path = s2s.saddle_path(X, y)
    bp = min_l1_interpolator(X, y)
    assert bp.status == 0
    np.testing.assert_allclose(path.betas[-1], bp.beta, atol=1e-9)
    assert path.horizon == np.inf


def test_more_examples_than_features_end_at_least_squares():
    rng = np.random.default_rng(7)
    X, y = rng.standard_normal((9, 4)), rng.standard_normal(9)
    path = s2s.saddles(flows.Dataset(X, y, task="regression"))
    assert path.status == s2s.REACHED_MINIMUM, path.message
    np.testing.assert_allclose(path.betas[-1], np.linalg.lstsq(X, y, rcond=None)[0], atol=1e-10)
    assert path.losses[-1] > 0  # no interpolator
    np.testing.assert_allclose(s2s.plateau_at(path, 1e6), path.betas[-1])


def test_example_keeps_the_signs_of_s():
    """Why the example is a fair test of the engine: no ``s_j`` of its limit returns through 0
    once it has left it (a flow in float64 loses ``u_j^2 - v_j^2 = alpha^2`` once
    ``e^{2 |psi_j|} > 1 / eps``, and then could not follow such a coordinate at tiny alpha)."""
    X, y = _example()
    path = s2s.saddle_path(X, y)
    grid = np.linspace(0, path.times[-1] * 2, 4001)
    s = _s_rebuilt(X, y, path.times, path.betas, grid)
    for j in range(X.shape[1]):
        away = s[np.abs(s[:, j]) > 1e-3, j]
        assert away.size == 0 or np.all(np.sign(away) == np.sign(away[0]))
    assert path.steps == 4 and np.any(path.supports[2] & ~path.supports[3])  # 4 leaves


def test_orthogonal_design_is_explicit():
    """Orthogonal columns decouple the coordinates: coordinate j enters alone at
    ``1 / |g_j(0)|`` and jumps to its own least-squares value ``(x_j . y) / ||x_j||^2``."""
    X, y, beta_star = _orthogonal()
    g0 = -X.T @ y / X.shape[0]
    path = s2s.saddle_path(X, y)
    order = np.argsort(1 / np.abs(g0))
    np.testing.assert_allclose(path.times, np.sort(1 / np.abs(g0)), rtol=1e-12)
    for k in range(1, path.steps + 1):
        expected = np.zeros(X.shape[1])
        expected[order[:k]] = beta_star[order[:k]]
        np.testing.assert_allclose(path.betas[k], expected, atol=1e-12)


def test_simultaneous_arrivals_join_together():
    """Two decoupled coordinates with the same ``|g_j(0)|`` reach ``|s| = 1`` at the same time:
    one jump activates both, each to its own least-squares value."""
    Q, _ = np.linalg.qr(np.random.default_rng(5).standard_normal((3, 3)))
    X = Q * np.array([1.0, 2.0, 3.0])
    beta_star = np.array([2.0, -0.5, 0.1])  # |g_j(0)| = ||x_j||^2 |beta*_j| / n: 2/3, 2/3, 0.3
    y = X @ beta_star
    g0 = np.abs(X.T @ y / 3)
    assert g0[0] == pytest.approx(g0[1], rel=1e-12) and g0[2] < g0[0]
    path = s2s.saddle_path(X, y)
    assert path.status == s2s.REACHED_MINIMUM and path.steps == 2
    np.testing.assert_allclose(path.times, [1 / g0[0], 1 / g0[2]], rtol=1e-9)
    np.testing.assert_allclose(path.betas[1], [beta_star[0], beta_star[1], 0.0], atol=1e-12)
    np.testing.assert_allclose(path.betas[2], beta_star, atol=1e-12)


def test_reading_the_path():
    X, y = _example()
    path = s2s.saddle_path(X, y)
    t = path.times
    np.testing.assert_array_equal(s2s.plateau_at(path, 0.0), np.zeros(5))
    np.testing.assert_array_equal(s2s.plateau_at(path, t[0] / 2), path.betas[0])
    np.testing.assert_array_equal(s2s.plateau_at(path, t[0]), path.betas[1])  # right-continuous
    np.testing.assert_array_equal(s2s.plateau_at(path, (t[1] + t[2]) / 2), path.betas[2])
    grid = np.array([[0.1, t[3] + 1.0], [t[1], t[2] - 1e-9]])
    values = s2s.limit_path(path, grid)
    assert values.shape == (2, 2, 5)
    np.testing.assert_array_equal(values[0, 1], path.betas[4])
    np.testing.assert_array_equal(values[1, 0], path.betas[2])
    np.testing.assert_array_equal(values[1, 1], path.betas[2])
    assert np.all(np.abs(s2s.limit_s(path, np.linspace(0, 20, 101))) <= 1 + 1e-12)


# --------------------------------------------------------------------------- statuses


def test_step_cap_status_and_horizon():
    X, y = _example()
    full = s2s.saddle_path(X, y)
    cut = s2s.saddle_path(X, y, max_steps=2)
    assert cut.status == s2s.STEP_CAP and cut.steps == 2
    assert "max_steps" in cut.message
    np.testing.assert_array_equal(cut.betas, full.betas[:3])
    assert cut.horizon == pytest.approx(full.times[2], rel=1e-12)
    assert np.all(np.isnan(s2s.plateau_at(cut, full.times[2] + 0.1)))
    np.testing.assert_array_equal(s2s.plateau_at(cut, full.times[1] + 0.01), full.betas[2])


def test_zero_targets_end_at_once():
    X = np.random.default_rng(0).standard_normal((3, 4))
    path = s2s.saddle_path(X, np.zeros(3))
    assert path.status == s2s.REACHED_MINIMUM and path.steps == 0
    assert path.times.shape == (0,) and path.horizon == np.inf
    np.testing.assert_array_equal(s2s.plateau_at(path, 5.0), np.zeros(4))


def test_duplicated_feature_is_undecided():
    """Two identical columns reach ``|s| = 1`` together and only their sum is determined: the
    rules do not decide the split, so the path stops there with status -1."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((3, 4))
    y = rng.standard_normal(3)
    j = int(np.argmax(np.abs(X.T @ y)))
    X = np.column_stack([X, X[:, j]])
    path = s2s.saddle_path(X, y)
    assert path.status == s2s.UNDECIDED
    assert "not unique" in path.message
    assert path.steps == 0 and path.horizon == pytest.approx(1 / np.max(np.abs(X.T @ y / 3)))
    assert np.all(np.isnan(s2s.plateau_at(path, path.horizon + 1e-3)))
    np.testing.assert_array_equal(s2s.plateau_at(path, path.horizon / 2), np.zeros(5))


@pytest.mark.parametrize(("sx", "sy"), [(1.0, 1e160), (1.0, 1e300), (1e-150, 1.0), (1e150, 1e-150)])
def test_path_is_scale_covariant(sx, sy):
    """The path of ``(sx X, sy y)``: saddles ``beta sy / sx``, times ``t / (sx sy)``, gradients
    ``g sx sy``, the same ``s`` and status, no warning. At ``y`` 1e160 it stopped at the first
    jump ('the loss did not decrease (inf >= inf)') with overflow warnings."""
    X, y = _example()
    base = s2s.saddle_path(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        path = s2s.saddle_path(X * sx, y * sy)
    assert path.status == base.status == s2s.REACHED_MINIMUM, path.message
    np.testing.assert_allclose(path.times * sx * sy, base.times, rtol=1e-12)
    np.testing.assert_allclose(path.betas * sx / sy, base.betas, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(path.gradients / (sx * sy), base.gradients, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(path.signs, base.signs)
    np.testing.assert_allclose(path.s, base.s, rtol=1e-12, atol=1e-15)
    with np.errstate(over="ignore"):
        expected = base.losses * np.float64(sy) ** 2
    if np.all(np.isfinite(expected)):  # the last loss is 0 to rounding
        np.testing.assert_allclose(path.losses, expected, rtol=1e-12, atol=1e-12 * expected[0])
    else:  # beyond float64 but at the minimum (rounding)
        assert np.all(np.isinf(path.losses[:-1][np.isinf(expected[:-1])]))
    beta, ok, _ = s2s.constrained_minimiser(X * sx, y * sy, base.signs[-1])
    assert ok
    np.testing.assert_allclose(beta * sx / sy, base.betas[-1], rtol=1e-12, atol=1e-15)


def test_constrained_minimiser_alone():
    X, y = _example()
    signs = np.array([1.0, -1.0, 0.0, -1.0, 1.0])
    beta, ok, message = s2s.constrained_minimiser(X, y, signs)
    assert ok, message
    found = _brute_force_minimiser(X, y, signs)
    assert len(found) == 1
    np.testing.assert_allclose(beta, found[0], atol=1e-12)


# --------------------------------------------------------------------------- bad input


def _classification():
    return flows.Dataset(np.array([[1.0, 2.0], [2.0, 1.0]]), np.array([1.0, 1.0]))


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: s2s.saddles(_classification()), "data"),
        (lambda: s2s.saddles(np.eye(2)), "data"),
        (lambda: s2s.saddles(_reg(), max_steps=0), "max_steps"),
        (lambda: s2s.saddles(_reg(), max_steps=2.0), "max_steps"),
        (lambda: s2s.saddles(_reg(), max_steps=True), "max_steps"),
        (lambda: s2s.saddles(_reg(), max_steps="3"), "max_steps"),
        (lambda: s2s.saddles(_reg(), tolerance=0.0), "tolerance"),
        (lambda: s2s.saddles(_reg(), tolerance=np.nan), "tolerance"),
        (lambda: s2s.saddles(_reg(), tolerance=0.5), "tolerance"),
        (lambda: s2s.saddle_path(np.ones((2, 3)), np.ones(3)), "y"),
        (lambda: s2s.saddle_path(np.array([[np.inf, 1.0]]), np.ones(1)), "X"),
        (lambda: s2s.saddle_path(np.ones((2, 3)), np.array([1.0, np.nan])), "y"),
        (lambda: s2s.constrained_minimiser(np.eye(2), np.ones(2), [0.5, 1.0]), "signs"),
        (lambda: s2s.constrained_minimiser(np.eye(2), np.ones(2), [1.0]), "signs"),
        (lambda: s2s.plateau_at(s2s.saddles(_reg()), -1.0), "t"),
        (lambda: s2s.plateau_at(s2s.saddles(_reg()), np.inf), "t"),
        (lambda: s2s.limit_path(s2s.saddles(_reg()), [0.0, np.nan]), "times"),
        (lambda: s2s.limit_s(s2s.saddles(_reg()), [-0.5]), "times"),
        (lambda: s2s.limit_path("not a path", [1.0]), "path"),
    ],
)
def test_bad_input_is_refused_by_name(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def _reg():
    X, y = _example()
    return flows.Dataset(X, y, task="regression")


# --------------------------------------------------------------------------- against the engine


def _orthogonal():
    """n = d = 4, orthogonal columns of norms 4, 3, 2, 1.6 (the coordinates decouple) and
    ``y = X beta_star``: four jumps at ``1 / |g_j(0)|`` = 0.444, 0.5, 0.667, 0.781."""
    Q, _ = np.linalg.qr(np.random.default_rng(3).standard_normal((4, 4)))
    X = Q * np.array([4.0, 3.0, 2.0, 1.6])
    beta_star = np.array([0.5, -1.0, 1.5, -2.0])
    return X, X @ beta_star, beta_star


@functools.cache
def _flow(problem: str, alpha: float, t_max: float, n_points: int = 4001):
    """The engine's GD flow from ``u(0) = alpha``, ``v(0) = 0`` up to the accelerated time
    ``t_max``: ``(t / log(1/alpha), beta, loss, status, message)``. ``atol`` is kept 1e-20 below
    ``alpha`` (the asinh chart controls relative errors only down to ``|theta| ~ atol / rtol``;
    the default 1e-100 lets the flow stall from about ``alpha = 1e-120`` on)."""
    X, y = _example() if problem == "example" else _orthogonal()[:2]
    d = X.shape[1]
    log_inv = np.log(1 / alpha)
    run = flows.simulate(
        flows.Dataset(X, y, task="regression"),
        "gd",
        2,
        np.vstack([alpha * np.ones(d), np.zeros(d)]),
        t_max=t_max * log_inv,
        n_points=n_points,
        backend="numpy",
        atol=min(1e-100, 1e-20 * alpha),
    )
    beta = run.beta
    loss = np.sum((beta @ X.T - y) ** 2, axis=1) / (2 * X.shape[0])
    return run.t / log_inv, beta, loss, run.status, run.message


def _crossings(t, loss, levels):
    """The first time the (non-increasing) loss falls to each level, by linear interpolation."""
    out = np.full(len(levels), np.nan)
    for k, level in enumerate(levels):
        below = np.flatnonzero(loss <= level)
        if below.size and below[0] > 0:
            i = below[0]
            w = (loss[i - 1] - level) / (loss[i - 1] - loss[i])
            out[k] = t[i - 1] + w * (t[i] - t[i - 1])
    return out


def _errors(problem, alpha):
    """Jump-time errors (the flow's loss crossing the midpoint between consecutive plateau
    losses, minus the limit's jump time) and saddle errors (sup norm at plateau midpoints; the
    last plateau read one plateau length after its start)."""
    X, y = _example() if problem == "example" else _orthogonal()[:2]
    path = s2s.saddle_path(X, y)
    last = path.times[-1] - path.times[-2]
    t, beta, loss, status, message = _flow(problem, alpha, path.times[-1] + 1.5 * last)
    assert status == 0 and message == "reached t_max", message
    losses = [_loss(X, y, b) for b in path.betas]
    levels = [(a + b) / 2 for a, b in itertools.pairwise(losses)]
    jumps = _crossings(t, loss, levels) - path.times
    edges = np.concatenate([[0.0], path.times])
    points = np.concatenate([(edges[:-1] + edges[1:]) / 2, [path.times[-1] + last]])
    flow_at = np.array([[np.interp(p, t, beta[:, j]) for j in range(X.shape[1])] for p in points])
    return jumps, np.max(np.abs(flow_at - path.betas), axis=1)


def test_orthogonal_jumps_have_the_logistic_offset():
    """With decoupled coordinates each jump is a one-dimensional logistic escape:
    ``beta_j = (alpha^2 / 4) e^{2 |g_j| t}`` until it matters, then
    ``d beta_j / dt = 2 |g_j| beta_j (1 - beta_j / beta*_j)``, so the loss passes the midpoint of
    its two plateaus (at ``beta_j = (1 - 1/sqrt 2) beta*_j``) at
    ``t = [2 log(1/alpha) + log(4 |beta*_j| / (1 + sqrt 2))] / (2 |g_j|)``: in accelerated time
    the limit ``1 / |g_j|`` plus ``c_j / log(1/alpha)``. This checks the constants of the
    parametrisation (``k = alpha^2 / 2``, the ``1/(2n)`` of the loss) against the engine."""
    X, y, beta_star = _orthogonal()
    g0 = np.abs(X.T @ y / X.shape[0])
    order = np.argsort(1 / g0)
    c = np.log(4 * np.abs(beta_star[order]) / (1 + np.sqrt(2))) / (2 * g0[order])
    for alpha, tol in ((1e-8, 1e-3), (1e-30, 1e-5)):
        jumps, _ = _errors("orthogonal", alpha)
        log_inv = np.log(1 / alpha)
        np.testing.assert_allclose(jumps, c / log_inv, atol=tol)
        assert np.max(np.abs(jumps)) > 10 * tol  # the offset is there, and it is c / log(1/alpha)


@pytest.mark.slow  # 2-2.6 s (four long flows); the engine's flows against the staircase stay in
# the default run on the decoupled data (test_orthogonal_jumps_have_the_logistic_offset)
def test_flow_approaches_the_staircase():
    """GD flows at alpha = 1e-2, 1e-4, 1e-8, 1e-30 against the limit, in t / log(1/alpha).

    Measured: largest jump-time error 1.04, 0.78, 0.82, 0.19 (``x log(1/alpha)``: 4.8, 7.2,
    15.0, 13.4: the rate ``1 / log(1/alpha)`` once ``alpha <= 1e-8``); saddle error at plateau
    midpoints (plateaus 1..4) 0.31, 0.17, 0.10, 6.5e-3, falling like a power of ``alpha``."""
    results = {alpha: _errors("example", alpha) for alpha in (1e-2, 1e-4, 1e-8, 1e-30)}
    jump = {a: float(np.max(np.abs(j))) for a, (j, _) in results.items()}
    saddle = {a: float(np.max(e[1:])) for a, (_, e) in results.items()}
    # on the first plateau |s_j| <= 1/2 at its midpoint: |beta_j| <= (alpha^2 / 4) alpha^-1
    for alpha, (_, e) in results.items():
        assert e[0] <= alpha / 3
    assert saddle[1e-2] > saddle[1e-4] > saddle[1e-8] > saddle[1e-30]
    assert saddle[1e-30] < 1e-2
    assert jump[1e-30] < 0.25 < jump[1e-8]
    for alpha, err in jump.items():
        assert err * np.log(1 / alpha) < 20.0


@pytest.mark.slow
def test_rate_over_a_hundred_decades():
    """alpha = 1e-16, 1e-60 and 1e-100 continue the trend: ``jump x log(1/alpha)`` settles near
    13.4 (the 1 / log(1/alpha) rate) and the saddle errors fall to 2.3e-6 at 1e-100."""
    errs = {alpha: _errors("example", alpha) for alpha in (1e-8, 1e-16, 1e-30, 1e-60, 1e-100)}
    scaled = [float(np.max(np.abs(j))) * np.log(1 / a) for a, (j, _) in errs.items()]
    assert max(scaled[1:]) / min(scaled[1:]) < 1.1
    saddle = [float(np.max(e[1:])) for _, e in errs.values()]
    assert all(a > b for a, b in itertools.pairwise(saddle))
    assert saddle[-1] < 1e-5
