"""The flow on its slow manifold of tied margins (:mod:`flows.integrator.ties`).

References, none of them the code under test:
* the telescoping margin shift against exact rational arithmetic (``fractions``);
* for gradient descent the tie's weights solve the margin gradients' Gram system,
  ``p ∝ G^{-1} 1`` (``<grad u_i - grad u_1, sum_k p_k grad u_k> = 0``), written out here;
* the smooth flows (GD, l2-SAM) written out in numpy in this file, integrated by scipy's Radau:
  the loss weights at the point and at the perturbed point on their path are the reduced
  model's, and GD's blow-up time through the reduced field from an early state is the one
  of the full integration (``tests/test_depth_defaults.py``'s reference);
* end to end, the default ``simulate`` of l2-SAM and LE-SAM at depth 3 on teacher data reaches
  its blow-up (status 1), which the smooth field alone does not.
"""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from test_depth_defaults import orthant_start, radau_to, reference_blowup, teacher_set

from flows import orthant_init, simulate
from flows.algorithms import get_algorithm
from flows.clocks import get_clock
from flows.field import Problem
from flows.integrator.stiffness import TIED_BLOWUP_TOL
from flows.integrator.tied_fields import TiedField, margin_shift
from flows.model import get_loss
from flows.results import BLOWUP

RHO = 0.1


def problem_for(data, algorithm: str, depth: int, **hp) -> Problem:
    """A depth-``depth`` problem, one group per layer, rescaled clock, logistic loss."""
    return Problem(data, get_algorithm(algorithm), hp, get_loss("logistic"), np.ones(depth, int),
                   get_clock("rescaled"))  # fmt: skip


def smooth_weights(W: np.ndarray, Z: np.ndarray, rho: float):
    """``(p, q, F)`` of the smooth l2-SAM field (``rho = 0``: GD): the normalised loss
    weights at ``W`` and at ``W + rho grad L / ||grad L||``, and the rescaled field."""

    def parts(V):
        m = Z @ np.prod(V, axis=0)
        log_w = -np.logaddexp(0.0, m)
        p = np.exp(log_w - log_w.max())
        p /= p.sum()
        loo = np.array([np.prod(np.delete(V, k, axis=0), axis=0) for k in range(V.shape[0])])
        return p, (Z.T @ p) * loo

    p, descent = parts(W)
    point = W - rho * descent / np.linalg.norm(descent) if rho else W
    q, field = parts(point)
    return p, q, field


def radau_state(data, signs0, depth: int, rho: float, z_stop: float):
    """``(W, tau)`` where the smooth flow from ``orthant_init(signs0, depth, 0.5)`` first has
    ``max log|w| = z_stop`` (Radau, rtol 1e-10)."""
    W0 = orthant_start(signs0, depth)
    Z = data.y[:, None] * data.X
    z, tau = radau_to(lambda W: smooth_weights(W, Z, rho)[2] / W, W0, z_stop, 1e-10)
    return np.sign(W0) * np.exp(z), tau


def test_margin_shift_is_the_exact_difference_of_products():
    rng = np.random.default_rng(3)
    for depth in (2, 3, 4):
        theta = rng.standard_normal((depth, 5)) * 10.0 ** rng.integers(-3, 4, (depth, 5))
        eps = rng.standard_normal((depth, 5)) * 1e-3
        mult = np.ones(depth, int)
        exact = [
            float(
                np.prod(
                    [Fraction(t) + Fraction(e) for t, e in zip(theta[:, j], eps[:, j], strict=True)]
                )
                - np.prod([Fraction(t) for t in theta[:, j]])
            )
            for j in range(5)
        ]
        np.testing.assert_allclose(margin_shift(theta, eps, mult), exact, rtol=1e-13)
    batch = rng.standard_normal((4,) + theta.shape) * 1e-3  # one perturbation per side
    np.testing.assert_allclose(
        margin_shift(theta, batch, mult), [margin_shift(theta, e, mult) for e in batch], rtol=1e-15
    )
    grouped = margin_shift(theta[:2], eps[:2], np.array([1, 3]))  # rows stand for 1 and 3 layers
    np.testing.assert_allclose(
        grouped, margin_shift(theta[[0, 1, 1, 1]], eps[[0, 1, 1, 1]], np.ones(4, int)), rtol=1e-13
    )


def test_gd_tie_weights_solve_the_gram_system():
    rng = np.random.default_rng(7)
    data, _ = teacher_set(4)
    theta = rng.uniform(1.0, 3.0, (3, data.d)) * np.sign(rng.standard_normal((3, data.d)))
    active = np.array([2, 5, 11, 17])
    a = data.y[active, None, None] * data.X[active, None, :] * (np.prod(theta, 0) / theta)[None]
    gram = np.einsum("igd,kgd->ik", a, a)
    expected = np.linalg.solve(gram, np.ones(active.size))
    expected /= expected.sum()
    found = TiedField(problem_for(data, "gd", 3), active).weights(theta, 0.0)
    np.testing.assert_allclose(found, expected, rtol=1e-10)


@pytest.mark.parametrize("algorithm", ["gd", "l2-sam"])
def test_a_tie_of_one_example_moves_along_its_margin_gradient(algorithm):
    """A tie left with one example (its partners' weights below the handover's tolerance) has
    weights 1 at the point and the perturbed point, and the field ``a_k(theta')``, its margin's
    gradient at the perturbed point: ``z_k * prod_{l' != l} theta'^(l')``, with l2-SAM's
    ``theta' = theta + rho grad L / ||grad L||`` from that example's own weight (computed here
    directly)."""
    rng = np.random.default_rng(5)
    data, _ = teacher_set(4)
    theta = rng.uniform(1.0, 3.0, (3, data.d)) * np.sign(rng.standard_normal((3, data.d)))
    k = 7
    tied = TiedField(problem_for(data, algorithm, 3, rho=RHO), np.array([k]))
    np.testing.assert_array_equal(tied.weights(theta, 0.0), [1.0])
    q, point, _ = tied.perturbed_weights(theta, np.ones(1), 0.0)
    np.testing.assert_array_equal(q, [1.0])
    z = data.y[k] * data.X[k]
    descent = z * np.prod(theta, axis=0) / theta  # -grad L / c along the one example
    expected_point = theta - RHO * descent / np.linalg.norm(descent) if algorithm != "gd" else theta
    np.testing.assert_allclose(point, expected_point, rtol=1e-13)
    field = tied.field(theta, 0.0)
    assert field is not None
    np.testing.assert_allclose(
        field.velocity, z * np.prod(expected_point, axis=0) / expected_point, rtol=1e-12
    )


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 3])
def test_l2_sam_weights_on_the_smooth_path_are_the_slow_manifolds(seed):
    data, signs = teacher_set(seed)
    W, _ = radau_state(data, signs, 3, RHO, 3.5)
    Z = data.y[:, None] * data.X
    p, q, _ = smooth_weights(W, Z, RHO)
    active = np.flatnonzero(p > 1e-12 * p.max())
    tied = TiedField(problem_for(data, "l2-sam", 3, rho=RHO), active)
    mine_p = tied.weights(W, 0.0)
    assert mine_p is not None
    mine_q = tied.perturbed_weights(W, mine_p, 0.0)[0]
    np.testing.assert_allclose(mine_p, p[active] / p[active].sum(), atol=1e-7)
    np.testing.assert_allclose(mine_q, q[active] / q[active].sum(), atol=1e-7)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_gd_blowup_time_through_the_reduced_field_from_an_early_state(seed):
    data, signs = teacher_set(seed)
    W, t0 = radau_state(data, signs, 3, 0.0, 3.0)
    Z = data.y[:, None] * data.X
    p = smooth_weights(W, Z, 0.0)[0]
    tied = TiedField(problem_for(data, "gd", 3), np.flatnonzero(p > 1e-12 * p.max()))
    S = np.sign(W)

    def rhs(_t, z):
        V = S * np.exp(z.reshape(W.shape))
        return (tied.field(V, 0.0)[0] / V).ravel()

    def near(t, z):
        return 1.0 / np.max(rhs(t, z)) - TIED_BLOWUP_TOL * t

    near.terminal = True
    sol = solve_ivp(rhs, (t0, 100.0), np.log(np.abs(W)).ravel(), method="DOP853",
                    rtol=1e-12, atol=1e-14, events=near)  # fmt: skip
    assert sol.status == 1, sol.message
    blowup = sol.t[-1] + 1.0 / np.max(rhs(0.0, sol.y[:, -1]))
    assert abs(blowup - reference_blowup(data, signs, 3, 6.0)) < 2e-6 * blowup


@pytest.mark.slow
@pytest.mark.parametrize(
    "algorithm,hp", [("l2-sam", {"rho": RHO}), ("le-sam", {"sigma": 0.1, "rho_max": 0.5})]
)
def test_sam_at_depth_3_reaches_its_blowup_with_the_defaults(algorithm, hp):
    data, signs = teacher_set(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        tr = simulate(data, algorithm, 3, orthant_init(signs, 3, 0.5), t_max=100.0,
                      original_time=False, **hp)  # fmt: skip
    assert tr.status == BLOWUP, tr.message
    assert "slow manifold" in tr.message
    blowup = next(e.tau for e in tr.events if e.kind == "blow-up")
    assert tr.tau[-1] < blowup <= tr.tau[-1] * (1 + 2 * TIED_BLOWUP_TOL)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3])
def test_sam_blows_up_along_a_kkt_direction_of_the_depth_3_margin_problem(seed):
    """At depth 3 on teacher data the blow-up direction of l2-SAM (through the slow manifold)
    satisfies the KKT conditions of the l_{2/3} max-margin problem (``kkt_check``: multipliers
    by non-negative least squares) and is GD's."""
    from analysis.margin_programs.quasi_norm import kkt_check

    data, signs = teacher_set(seed)
    directions = []
    for algorithm, hp in (("gd", {}), ("l2-sam", {"rho": RHO})):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            tr = simulate(data, algorithm, 3, orthant_init(signs, 3, 0.5), t_max=100.0,
                          original_time=False, **hp)  # fmt: skip
        assert tr.status == BLOWUP, tr.message
        beta = tr.sign_beta[-1] * np.exp(tr.log_abs_beta[-1] - tr.log_abs_beta[-1].max())
        assert kkt_check(data, 3, beta).kkt_residual < 1e-5
        directions.append(beta / np.linalg.norm(beta))
    assert np.linalg.norm(directions[0] - directions[1]) < 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("seed", [4, 7])
def test_linf_sam_sliding_at_depth_3_holds_its_gaps_to_the_blowup(seed):
    """l_inf-SAM at depth 3 on teacher data stalls while it slides on direction surfaces with
    5 or 6 examples tied; through the slow manifold of the sliding tie it reaches its blow-up
    (status 1). Read off the output path alone: over the reduced segment the tied examples'
    gaps move by less than 1e-3 while their margins grow more than 1000-fold."""
    data, signs = teacher_set(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        tr = simulate(data, "linf-sam", 3, orthant_init(signs, 3, 0.5), t_max=100.0,
                      original_time=False, rho=RHO, n_points=4000)  # fmt: skip
    assert tr.status == BLOWUP, tr.message
    assert "slow manifold" in tr.message
    start = float(tr.message.split("from tau=")[1].split(",")[0])
    margins = tr.beta @ (data.y[:, None] * data.X).T
    first = int(np.searchsorted(tr.tau, start))
    tie = np.flatnonzero(margins[-1] - margins[-1].min() < 20.0)
    assert tie.size >= 3
    gaps = margins[[first, -1]][:, tie] - margins[[first, -1]][:, tie].min(axis=1, keepdims=True)
    assert np.max(np.abs(gaps[1] - gaps[0])) < 1e-3
    assert margins[-1].min() > 1e3 * margins[first].min()


def test_one_sliding_direction_takes_filippovs_shares_in_tau():
    """With one sliding direction the sliding tie's shares of tau cancel the direction's rate
    (``W+ r+ + W- r- = 0``, written out by hand), equal the multilinear rule's where the two
    sides' clock factors are equal, and the slide is refused where it repels."""
    from flows.integrator.multilinear import multilinear_weights, solve_multilinear
    from flows.integrator.sliding_ties import SlidingTiedField

    rule = SlidingTiedField.rule.__get__(object.__new__(SlidingTiedField))
    sides = np.array([[1.0], [-1.0]])
    for r_plus, r_minus in ((-2.0, 3.0), (-1e-3, 5e2), (-7.0, 7.0)):
        rates = np.array([[r_plus], [r_minus]])
        shares, margin = rule(rates, np.zeros(2), sides, False)
        assert shares[0] * r_plus + shares[1] * r_minus == pytest.approx(0.0, abs=1e-12)
        np.testing.assert_allclose(shares, [r_minus, -r_plus] / np.float64(r_minus - r_plus))
        lam, _ = solve_multilinear(rates.T, sides)
        np.testing.assert_allclose(shares, multilinear_weights(lam, sides), rtol=1e-9)
        assert margin == pytest.approx(min(shares))
    assert rule(np.array([[2.0], [-3.0]]), np.zeros(2), sides, False)[1] == -1.0  # repelling


def test_entry_gaps_read_each_sides_perturbed_margins():
    """An example outside l_inf-SAM's sliding tie is as far from joining it as the smaller of
    its margin's gap at the point and its smallest gap at a side's perturbed point,
    ``min_sigma (u_j(theta + eps_sigma) - min_{k in tie} u_k(theta + eps_sigma))``, with
    ``eps_sigma = rho sign(grad L)`` written out for each side of the sliding direction and the
    margins taken as plain products at the perturbed point."""
    from flows.integrator.segments import Mode
    from flows.integrator.sliding_ties import SlidingTiedField

    data, _ = teacher_set(4)
    rng = np.random.default_rng(11)
    theta = rng.uniform(8.0, 12.0, (3, data.d))
    direction = np.where(rng.random(data.d) < 0.5, -1.0, 1.0)
    mode = Mode(None, np.zeros(theta.shape, bool), np.ones(theta.shape), direction.copy(), (2,))  # type: ignore[arg-type]
    Z = data.y[:, None] * data.X
    u = Z @ np.prod(theta, axis=0)
    active = np.argsort(u)[:3]
    others = np.setdiff1d(np.arange(data.n), active)
    tied = SlidingTiedField(problem_for(data, "linf-sam", 3, rho=RHO), mode, active)
    expected = u[others] - u[active].min()
    for side in (1.0, -1.0):
        signs = direction.copy()
        signs[2] = side
        eps = RHO * np.tile(-signs, (3, 1))  # sign(grad L) = -sign(G_j) prod_{k != l} sign(w_k)
        moved = Z @ np.prod(theta + eps, axis=0)
        expected = np.minimum(expected, moved[others] - moved[active].min())
    found = tied.entry_gaps(theta, 0.0, others)
    np.testing.assert_allclose(found, expected, rtol=0, atol=1e-9 * np.max(np.abs(u)))
    assert np.any(found < u[others] - u[active].min() - 1.0)  # a side's perturbed point counts


def test_a_step_whose_dense_output_is_not_finite_ends_the_segment(monkeypatch):
    """Where the extra stages of a step's dense output meet a non-finite field (a reduced field
    is NaN where its weights are not found) the step's inside is unknown: the segment fails
    there with nothing of that step kept, its state the last finite one."""
    from scipy.integrate import DOP853

    from flows.integrator.solver import integrate_segment

    def nan_inside(self):
        return lambda s: np.full(self.y.shape, np.nan)

    monkeypatch.setattr(DOP853, "dense_output", nan_inside)
    y0 = np.array([1.0, 2.0])
    out = integrate_segment(
        lambda s, y: -y, 0.0, y0, 1.0, [], "DOP853", 1e-8, np.full(2, 1e-12), 1000
    )
    assert out.status == "failed" and "not finite within a step" in out.message
    assert out.ts == [0.0] and not out.interpolants and np.array_equal(out.y, y0)


def test_smooth_entry_gaps_read_the_perturbed_margins():
    """For l2-SAM the entry gap of an example outside the tie is the smaller of its gap at the
    point and at ``theta + eps``, ``eps = rho grad L / ||grad L||`` with ``grad L`` the tie's
    (``-sum_k p_k grad u_k``), written out here with the margins as plain products. The ascent
    step lowers the tie's margins most where they are the smallest (on the depth benchmark no
    example outside a tie came closer than 267 at the perturbed point); the ties checked here
    are taken along the sorted margins, down to one where an example outside comes closer at
    the perturbed point."""
    data, _ = teacher_set(4)
    rng = np.random.default_rng(12)
    theta = rng.uniform(8.0, 12.0, (3, data.d))
    Z = data.y[:, None] * data.X
    u = Z @ np.prod(theta, axis=0)
    rho = 5.0  # moves the margins by tens
    loo = np.array([np.prod(np.delete(theta, k, axis=0), axis=0) for k in range(3)])
    closer = 0
    for start in range(0, data.n - 3, 3):
        active = np.argsort(u)[start : start + 3]
        others = np.setdiff1d(np.arange(data.n), active)
        tied = TiedField(problem_for(data, "l2-sam", 3, rho=rho), active)
        tied.p = np.array([0.5, 0.3, 0.2])
        descent = np.tensordot(tied.p, Z[active][:, None, :] * loo[None], axes=1)
        moved = Z @ np.prod(theta - rho * descent / np.linalg.norm(descent), axis=0)
        point, perturbed = u[others] - u[active].min(), moved[others] - moved[active].min()
        found = tied.entry_gaps(theta, 0.0, others)
        scale = 1e-9 * np.max(np.abs(u))
        np.testing.assert_allclose(found, np.minimum(point, perturbed), rtol=0, atol=scale)
        closer += int(np.any(perturbed < point - 1.0))
    assert closer >= 1


def test_the_reduced_field_takes_over_within_the_runs_resolution_of_its_gaps():
    """Where the tied margins' gaps are no longer resolved (margins ~2e8 at rtol 1e-8: known to
    ~2 in absolute terms), the run's own weights of its three tied examples differ from the slow
    manifold's by 3.4e-4 of the largest, about 1e-3 in log (5e-12 of the margins, within
    ``HANDOVER_SHIFT``). The reduced field takes over there and reaches the blow-up where a run
    at rtol 1e-10 does (blow-up time within 1e-7, direction of beta within 1e-5 where the two
    paths end); the 1e-4 criterion alone would refuse it and end the run with status -1 short
    of it."""
    from flows.datasets import gaussian_blobs

    data = gaussian_blobs(seed=1, n=40, mean=np.linspace(0.5, 2.0, 10))
    runs = [simulate(data, "asam", 3, 1.0, rho=1.0, rtol=rtol) for rtol in (1e-8, 1e-10)]
    for run in runs:
        assert run.status == BLOWUP, run.message
    times = [next(e.tau for e in run.events if e.kind == "blow-up") for run in runs]
    assert abs(times[0] - times[1]) < 1e-7
    directions = []
    for run in runs:
        beta = run.sign_beta[-1] * np.exp(run.log_abs_beta[-1] - np.max(run.log_abs_beta[-1]))
        directions.append(beta / np.linalg.norm(beta))
    np.testing.assert_allclose(directions[0], directions[1], atol=1e-5)


def test_an_example_reaching_the_entry_gap_joins_the_tie():
    """GD on Gaussian blobs at L = 3, rtol 1e-8: on the slow manifold an outside example's gap
    reaches the entry gap; the located event leaves it a rounding above, and the example
    joins all the same (a restart that re-read the gap would keep the tie and meet the event
    at once, 50 times, ending with status -1). The run reaches the blow-up where a run at rtol
    1e-10 does, to 1e-7."""
    from flows.datasets import gaussian_blobs

    data = gaussian_blobs(seed=0, n=40, mean=np.linspace(0.5, 2.0, 10))
    runs = [simulate(data, "gd", 3, 1.0, rtol=rtol) for rtol in (1e-8, 1e-10)]
    for run in runs:
        assert run.status == BLOWUP, run.message
    assert "slow manifold" in runs[0].message
    times = [next(e.tau for e in run.events if e.kind == "blow-up") for run in runs]
    assert abs(times[0] - times[1]) < 1e-7


@pytest.mark.slow
def test_a_stalled_stiff_run_hands_over_with_its_weights_off_the_manifold():
    """l2-SAM on Gaussian blobs at L = 3, rtol 1e-10: BDF stalls with the tie's own weights 0.76
    in log off the slow manifold's (u = 1.3e8: 6e-9 of the margins, within ``HANDOVER_SHIFT``,
    though beyond u rtol). The reduced field takes over and reaches the blow-up where runs at
    rtol 1e-9 and 1e-12 do, to 1e-7 (the criteria in ``u rtol`` or 1e-4 alone end it with
    status -1 at the stall)."""
    from flows.datasets import gaussian_blobs

    data = gaussian_blobs(seed=0, n=40, mean=np.linspace(0.5, 2.0, 10))
    runs = [simulate(data, "l2-sam", 3, 1.0, rho=0.1, rtol=rtol) for rtol in (1e-10, 1e-9, 1e-12)]
    for run in runs:
        assert run.status == BLOWUP, run.message
    times = [next(e.tau for e in run.events if e.kind == "blow-up") for run in runs]
    assert max(times) - min(times) < 1e-7


def blobs_depth_2():
    """Forty Gaussian examples in ten features: at depth 2 in the rescaled clock their margins
    tie at ``u ~ 1e6`` by ``tau = 5`` (the flow stiff), ``u ~ 1e20`` by ``tau = 10``."""
    from flows.datasets import gaussian_blobs

    return gaussian_blobs(seed=0, n=40, mean=np.linspace(0.5, 2.0, 10))


def test_depth_2_default_follows_the_stiff_flow_as_radau_does(monkeypatch):
    """At depth 2 the default call switches to the stiff method where the tied margins make the
    flow stiff, and reaches t_max on the path of Radau at rtol 1e-10 on the whole field
    (margins checked for stiffness only from depth 3 on, as the reference: no switch, no
    reduced field), to 1e-7 in ``log|beta|`` at every sample."""
    from flows.integrator import stiffness

    data = blobs_depth_2()
    tr = simulate(data, "gd", 2, 0.4, t_max=5.0)
    assert tr.status == 0, tr.message

    tie_prone = stiffness.tie_prone

    def from_depth_3(problem):
        return tie_prone(problem) and int(np.sum(problem.multiplicity)) >= 3

    monkeypatch.setattr(stiffness, "tie_prone", from_depth_3)
    ref = simulate(data, "gd", 2, 0.4, t_max=5.0, method="Radau", rtol=1e-10)
    assert ref.status == 0, ref.message
    assert np.array_equal(tr.sign_beta, ref.sign_beta)
    assert np.max(np.abs(tr.log_abs_beta - ref.log_abs_beta)) < 1e-7


@pytest.mark.parametrize(
    "name,algorithm,hp",
    [("blobs", "gd", {}), ("blobs", "l2-sam", {"rho": RHO}), ("small", "gd", {})],
)
def test_depth_2_defaults_end_on_a_kkt_direction_of_the_l1_margin_problem(name, algorithm, hp):
    """At depth 2, t_max = 10, the margins reach ``~1e20``: the default call goes on on their
    slow manifold to t_max (status 0), and its direction satisfies the KKT conditions of the
    l1 max-margin problem (``kkt_check`` at depth 2, multipliers by non-negative least squares).
    On ten examples ("small", seed 2) the explicit steps stall first, the weights of margins
    tied to their rounding switching between examples at every step, and the run hands over
    there."""
    from analysis.margin_programs.quasi_norm import kkt_check
    from flows.datasets import gaussian_blobs

    if name == "small":
        data = gaussian_blobs(seed=2, n=10, mean=np.linspace(0.3, 2.5, 5), std=0.3)
        alpha = 1.0
    else:
        data, alpha = blobs_depth_2(), 0.4
    tr = simulate(data, algorithm, 2, alpha, **hp)
    assert tr.status == 0 and tr.t[-1] == 10.0, tr.message
    assert "slow manifold" in tr.message
    beta = tr.sign_beta[-1] * np.exp(tr.log_abs_beta[-1] - tr.log_abs_beta[-1].max())
    assert kkt_check(data, 2, beta).kkt_residual < 1e-4
