"""``simulate`` never hangs, never throws away the path, never answers wrongly in silence.

The cases of the reliability issue that concern the engine: a flow that reaches a critical
point, a collapse that holds from the start, a budget that runs out, outputs too large to
allocate, signed initializations and the warning that tells a user to use one.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import expit

from flows import Dataset, simulate, single_example
from flows.algorithms import ALGORITHMS, GradientSummary, resolve_hyperparameters
from flows.results import Cause

#: Separable (by beta = (1, -1)) but by no beta >= 0: balanced positive inits at even depth keep
#: beta >= 0, so the flow ends at a critical point.
CRITICAL = Dataset(np.array([[2.0, -1.0], [-1.0, -2.0]]), np.array([1.0, 1.0]))


def critical_point_a() -> float:
    """The stationary point of the balanced L = 2 flow on CRITICAL, independently: there
    b = 0 and G_1 = sum_i p_i y_i x_i1 = 0 with p_i proportional to sigmoid(-m_i),
    m = (2 a^2, -a^2), i.e. 2 sigmoid(-2 a^2) = sigmoid(a^2)."""
    a2 = brentq(lambda u: 2.0 * expit(-2.0 * u) - expit(u), 1e-6, 10.0, xtol=1e-15)
    return float(np.sqrt(a2))


@pytest.mark.parametrize(
    "algorithm,kw",
    [("l2-sam", dict(rho=0.5)), ("le-sam", dict(sigma=0.5, rho_max=0.5)), ("gd", {})],
)
def test_critical_point_is_an_event_and_the_path_is_kept(algorithm, kw):
    """The flow reaches grad L = 0 with theta != 0: a 'stationary' event, status 0, theta stays
    at the point (found independently to 1e-6) until t_max, the loss at its value there; a
    warning at call time says the kept signs cannot separate the data; few evaluations (the
    old engine spent its whole budget and returned t = 0 only)."""
    t_max = 5.0 if algorithm != "gd" else 60.0
    with pytest.warns(RuntimeWarning, match="no predictor with these signs separates"):
        tr = simulate(CRITICAL, algorithm, 2, 1.0, t_max=t_max, clock="original", **kw)
    assert tr.cause is Cause.STATIONARY and tr.status == 0
    assert [e.kind for e in tr.events] == ["stationary"]
    assert tr.t[-1] == t_max and tr.nfev < 20_000
    a = critical_point_a()
    np.testing.assert_allclose(np.abs(tr.theta[-1][:, 0]), a, rtol=1e-6)
    assert np.all(np.abs(tr.theta[-1][:, 1]) < 1e-6)
    after = tr.tau > tr.events[0].tau
    assert np.all(np.diff(tr.loss[after]) == 0) and np.all(np.diff(tr.tau[after]) > 0)
    m = np.array([2.0, -1.0]) * a * a
    assert tr.loss[-1] == pytest.approx(np.mean(np.logaddexp(0.0, -m)), rel=1e-6)


def test_signed_initialization_separates_where_positive_cannot():
    """A signed (L, d) alpha with beta_2 < 0 starts in the orthant of the separator
    (1, -1): no warning, no stationary point, the loss goes to 0."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tr = simulate(
            CRITICAL,
            "l2-sam",
            2,
            np.array([[1.0, -1.0], [1.0, 1.0]]),
            rho=0.5,
            t_max=5.0,
            clock="original",
        )
    assert tr.status == 0 and not tr.events
    assert tr.loss[-1] < 0.01 and np.all(tr.sign_beta[-1] == [1, -1])


def test_collapse_that_holds_from_the_start_is_seen_at_once():
    """alpha = 1e-300 < rho * 1e-12: collapsed at tau = 0, without a single step (the old
    engine ground for two minutes and failed)."""
    tr = simulate(single_example([1.0, 2.0, 3.0, 4.0, 5.0]), "l2-sam", alpha=1e-300, rho=1.0)
    assert tr.status == 0 and tr.collapse_time == 0.0 and tr.nfev == 0
    assert np.all(tr.beta[1:] == 0.0)


def test_budget_spent_returns_the_path_so_far():
    """LE-SAM with a huge radius cap drives minor coordinates below 1e-308, where the
    perturbation loses them (a known limitation): the budget runs out, and the run reports
    status -1 with the path up to there, not just the initial point."""
    tr = simulate(
        single_example([1.0, 2.0, 3.0, 4.0, 5.0]),
        "le-sam",
        sigma=0.5,
        rho_max=999.0,
        t_max=100.0,
        max_nfev=3_000,  # the path reaches s ~ 37 after ~1,600 evaluations, then stalls there
    )
    assert tr.cause is Cause.BUDGET_SPENT and tr.status == -1
    assert "max_nfev=3000" in tr.message
    assert tr.t[-1] > 10.0 and len(tr.t) > 10 and np.all(np.isfinite(tr.log_abs_beta[:, 0]))


def test_budget_spent_on_stiff_tied_margins_says_so():
    """GD at depth 2 on Gaussian blobs in 10 dimensions: as the margins grow their weights tie
    between examples and the explicit method's steps shrink (no switch to the stiff method
    at depth 2). The run whose budget runs out there says so and names the smallest margin;
    an implicit method, as it advises, goes further on the same budget and is not advised;
    neither is a run on one example."""
    rng = np.random.default_rng(0)
    y = np.where(np.arange(40) % 2 == 0, 1.0, -1.0)
    X = y[:, None] * np.linspace(0.5, 2.0, 10) + 0.6 * rng.normal(size=(40, 10))
    data = Dataset(X, y)
    explicit = simulate(data, "gd", 2, 0.4, max_nfev=2000)
    assert explicit.cause is Cause.BUDGET_SPENT
    assert "tie between examples and the flow is stiff" in explicit.message
    assert "method='BDF'" in explicit.message
    implicit = simulate(data, "gd", 2, 0.4, max_nfev=2000, method="BDF")
    assert implicit.t[-1] > 1.5 * explicit.t[-1]
    assert "tie between" not in implicit.message
    one = simulate(single_example([1.0, 2.0]), "gd", 2, 0.5, max_nfev=30)
    assert one.cause is Cause.BUDGET_SPENT and "tie between" not in one.message


def test_lesam_without_its_stabiliser_takes_the_cap_where_the_gradient_underflows():
    """LE-SAM with ``varrho = 0`` where ``||grad L||`` underflows to 0 (``log ||grad L||`` =
    -800): ``sigma / ||grad L||`` is infinite, ``rho_t`` the cap ``rho_max``, without a
    floating-point warning (the suite makes one an error); and the run that met it (one
    example, depth 3, the numpy backend's quadrature of log t) keeps the contract."""
    unit = np.array([[0.6, 0.8]])
    summary = GradientSummary(unit, np.sign(unit), np.array([[-800.0]]), np.array([1]))
    hp = resolve_hyperparameters("le-sam", {"sigma": 1.0, "rho_max": 0.7, "varrho": 0.0})
    np.testing.assert_array_equal(ALGORITHMS["le-sam"].perturb(summary, hp), 0.7 * unit)
    data = Dataset(np.array([[1.0]]), np.array([1.0]))
    run = simulate(data, "le-sam", 3, np.array([1.5]), sigma=1.0, rho_max=1.0, varrho=0.0,
                   t_max=1.0, max_nfev=2000, backend="numpy")  # fmt: skip
    assert run.status in (0, 1), run.message


def test_output_size_is_capped():
    """n_points is validated up front (10 million outputs would run for half an hour)."""
    with pytest.raises(ValueError, match="n_points"):
        simulate(single_example([1.0, 2.0]), "gd", 2, 0.5, n_points=10_000_000)


@pytest.mark.parametrize(
    "loss,floor,backend",
    [
        ("logistic", 1e-6, "numpy"),
        ("logistic", 1e-300, "numpy"),
        ("exponential", 1e-40, "numpy"),
        ("logistic", 1e-20, "auto"),
    ],
)
def test_loss_floor_ends_the_run_where_the_exact_loss_reaches_it(loss, floor, backend):
    """GD, L = 2, one example mu: beta_j = alpha^2 e^(2 mu_j tau) exactly, so the floor is
    reached where the margin sum_j mu_j beta_j equals -log(expm1(floor)) (logistic) or
    -log(floor) (exponential), found by brentq; the run stops there (status 0, a 'loss floor'
    event) to 1e-8 in tau, also where the loss itself is below the float range (1e-300)."""
    mu, alpha = np.array([1.0, 2.0, 3.0]), 0.5
    target = -np.log(np.expm1(floor)) if loss == "logistic" else -np.log(floor)
    tau_star = brentq(
        lambda tau: np.log(np.sum(mu * alpha**2 * np.exp(2 * mu * tau))) - np.log(target),
        0.0, 50.0, xtol=1e-14,
    )  # fmt: skip
    tr = simulate(single_example(mu), "gd", 2, alpha, t_max=50.0, n_points=101, loss=loss,
                  loss_floor=floor, original_time=False, backend=backend)  # fmt: skip
    assert tr.cause is Cause.LOSS_FLOOR and tr.status == 0
    assert tr.events[-1].kind == "loss floor"
    assert tr.tau[-1] == pytest.approx(tau_star, abs=1e-8)
    assert np.all(tr.tau[:-1] < tau_star)


def test_loss_floor_holding_at_the_start_and_bad_values():
    """A floor above the initial loss ends the run at tau = 0; a floor that is not a finite
    number > 0 is a ValueError naming it."""
    tr = simulate(single_example([1.0, 2.0]), "l2-sam", 2, 1.0, rho=0.1, loss_floor=0.9)
    assert tr.cause is Cause.LOSS_FLOOR and tr.status == 0 and tr.tau[-1] == 0.0
    for bad in (0.0, -1.0, np.nan, np.inf, "1e-3"):
        with pytest.raises(ValueError, match="loss_floor"):
            simulate(single_example([1.0, 2.0]), "gd", 2, 1.0, loss_floor=bad)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("ratio", [1e7, 1e8, 1e12, 1e100])
def test_a_large_feature_ratio_is_not_a_stationary_point(ratio, backend):
    """Two examples on two axes, one feature ``ratio`` times the other: the data are separable
    by positive weights, so the loss goes to 0 at every ratio; the stationary test measures
    each coordinate's terms against their own sizes, so a large feature does not make the other
    one's gradient look like 0 (it did from ratio 1e8 on, a silently wrong 'stationary')."""
    if backend == "numba":
        pytest.importorskip("numba")
    data = Dataset(np.array([[0.0, ratio], [1.0, 0.0]]), np.ones(2))
    tr = simulate(data, "gd", 2, 0.5, t_max=5.0, backend=backend)
    assert tr.cause is Cause.REACHED_END and "stationary" not in [e.kind for e in tr.events]
    assert tr.loss[-1] < 1e-3


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_a_field_beyond_the_clock_is_named_and_warns_nothing(backend):
    """Features of size 1e300 make the vector field ~3e300 at the start: no step of the clock
    resolves a time scale of 1e-300, so the run fails at once, with a message that names the
    field's size and what to change, and no numerical warning on the way (one escaped from
    scipy's step-size control)."""
    X = np.array([[1e300, 2e300], [3e300, -1e300]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tr = simulate(Dataset(X, np.ones(2)), "gd", 2, 0.5, t_max=5.0, backend=backend)
    assert tr.cause is Cause.SOLVER_FAILED and tr.status == -1
    assert "vector field is 3e+300" in tr.message and "rescale X" in tr.message


@pytest.mark.parametrize(
    "data,depth",
    [
        (single_example([1.0, 2.0, 3.0]), 50),
        (Dataset(np.array([[1e-300, 2e-300], [3e-300, -1e-300]]), np.ones(2)), 2),
    ],
)
@pytest.mark.parametrize("algorithm,kw", [("gd", {}), ("l2-sam", {"rho": 0.1})])
def test_extreme_depth_and_tiny_features_warn_nothing(data, depth, algorithm, kw):
    """Depth 50 (a blow-up) and features of size 1e-300 (a flow that barely moves): no
    numerical warning escapes, and the status is one of the documented ones."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tr = simulate(data, algorithm, depth, 0.9, t_max=10.0, **kw)
    assert tr.cause in (Cause.REACHED_END, Cause.BLOW_UP)
