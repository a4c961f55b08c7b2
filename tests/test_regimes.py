"""Tests of analysis.regimes: the three regimes of the initialization scale alpha for l2-SAM at
L = 2 on the single example D_mu with uniform alpha (docs/theory.md §14, "Three regimes").

* The analytic regime-3 boundary ``rho (mu_d + mu_{d-1}) / sqrt(2 sum mu^2)`` against a
  bisection on the engine's own field, and the collapse certificate against the initial rates.
* classify over alpha grids: regimes appear in the order 1, 2, 3; regime 1 below the collapse
  certificate (and the flow really collapses), regime 3 above the regime-3 boundary (and e_d
  really leads from the first sample), regime 2 in between with a minor first leader and e_d
  last. Whether leader sequences are monotone is reported (warning + print), not asserted.
* collapse_boundary lies strictly inside (certificate, regime-3 boundary) and separates
  regime 1 from regime 2.
* Scale symmetry (docs/theory.md §8): the path depends on alpha / rho only.

Collapsing runs are the expensive ones (~1-4 s each: the integrator follows theta down to
1e-12 of rho); classify results are cached per (mu, alpha / rho) for the module. The default
grids use 9 alphas per mu; the fine grids (30 alphas) and the other collapse boundaries are
marked slow.
"""

from __future__ import annotations

import contextlib
import functools
import signal

import numpy as np
import pytest

from analysis.amplification import leader_sequence
from analysis.regimes.boundaries import (
    collapse_boundary,
    collapse_certificate_boundary,
    initial_norm,
    initial_rates_from_field,
    regime3_boundary,
    regime3_boundary_from_field,
)
from analysis.regimes.classification import RegimeResult, classify, log_gradient_norm
from analysis.regimes.leaders import leader_phase_diagram, leader_sequence_at_depth
from flows import simulate, single_example
from flows.checks import positive

MU5 = (1.0, 2.0, 3.0, 4.0, 5.0)
MUS = [MU5, (1.0, 1.5, 4.0), (1.0, 2.0, 4.0, 7.0), (0.5, 2.0, 2.5, 7.0)]
#: mu whose alpha grid runs by default (collapsing runs of (0.5, 2, 2.5, 7) cost ~4 s each).
DEFAULT_GRID_MUS = MUS[:3]
#: Engine limitation (README): with the default asinh chart, relative precision ends near
#: |theta| ~ 1e-90; just above the collapse boundary of this mu the major coordinate decays to
#: e^-300 .. e^-624 before it regrows, and classify may return None (undecided) there.
DEEP_DECAY = pytest.mark.xfail(strict=False, reason="decay below the default chart's precision")
#: Deep-decay case (regression check): for mu = (0.5, 2, 2.5, 7) just above the collapse
#: boundary (alpha/rho = 0.418 .. 0.425, boundary 0.4163) the major coordinate decays to
#: a_4 ~ e^{-300} .. e^{-624} before it regrows; an independent log-space integration of docs/theory.md
#: §8's ODE shows regime 2 with e_d leading from tau = 75 .. 142. With the asinh chart and
#: atol = 1e-30 (commit faf10f7) the engine lost that coordinate and classify returned None
#: there (up to tau = 384). See tests/test_amplification.py::
#: test_engine_matches_log_space_reference_near_collapse_boundary_default_atol.


@functools.cache
def cached_classify(mu: tuple, ratio: float) -> RegimeResult:
    """classify at rho = 1 (the path depends on alpha / rho only), cached."""
    return classify(np.array(mu), ratio, 1.0)


def first_leader(mu: tuple, ratio: float) -> int:
    """The first strict leader of |beta_j| from a short, finely sampled run (dt = 1e-4 / mu_1):
    classify samples every 0.03 / mu_1, too coarse just below the regime-3 boundary, where the
    minor leader leads only for ~(1 - alpha / alpha_3) time units."""
    t_max = 0.02 / mu[0]
    traj = simulate(
        single_example(list(mu)),
        "l2-sam",
        depth=2,
        alpha=ratio,
        rho=1.0,
        t_max=t_max,
        n_points=201,
        original_time=False,
        rtol=1e-10,
    )
    return leader_sequence(traj.tau, traj.log_abs_beta).coordinates[0]


# --------------------------------------------------------------------------- analytic boundaries


def _rho_cases(mus: list, rhos: tuple[float, ...]) -> list:
    """``(mu, rho)`` for every ``rho`` and ``mu`` (ids ``rho-mu``): every mu at rho = 1 and the
    first at every rho in the default run, the other pairs ``slow`` (the proportionality in rho
    is asserted by each case)."""
    return [
        pytest.param(
            mu,
            rho,
            id=f"{rho}-{mu}",
            marks=pytest.mark.slow if rho != 1.0 and mu != mus[0] else (),
        )
        for rho in rhos
        for mu in mus
    ]


@pytest.mark.parametrize("mu, rho", _rho_cases(MUS + [(1.0, 2.0)], (0.3, 1.0, 2.5)))
def test_regime3_boundary_matches_engine_field(mu, rho):
    """Three regimes (docs/theory.md §14, derived): e_d has the largest initial rate iff
    N0 = alpha sqrt(2 sum mu^2) >= rho (mu_d + mu_{d-1}). The analytic boundary agrees with a
    bisection on the engine's field to 1e-6 (measured ~1e-12), is proportional to rho (scale
    symmetry), and the initial leader switches from d-1 (0-based d-2) to d across it."""
    mu = np.array(mu)
    a3 = regime3_boundary(mu, rho)
    a3_field = regime3_boundary_from_field(mu, rho)
    np.testing.assert_allclose(a3_field, a3, rtol=1e-6)
    np.testing.assert_allclose(a3 / rho, regime3_boundary(mu, 1.0), rtol=1e-13)
    np.testing.assert_allclose(a3, rho * (mu[-1] + mu[-2]) / np.sqrt(2 * np.sum(mu**2)), rtol=1e-14)
    below = initial_rates_from_field(mu, 0.999 * a3, rho)
    above = initial_rates_from_field(mu, 1.001 * a3, rho)
    assert np.argmax(below) == mu.size - 2
    assert np.argmax(above) == mu.size - 1


@pytest.mark.parametrize("mu", MUS, ids=str)
@pytest.mark.parametrize("rho", [0.3, 1.0, 2.5])
def test_collapse_certificate_and_initial_rates(mu, rho):
    """Three regimes (docs/theory.md §14, derived): the engine's initial rates equal
    mu_j (1 - rho mu_j / N0) (to 1e-12), so every rate is <= 0 iff N0 <= rho mu_1, i.e. alpha
    <= collapse_certificate_boundary = rho mu_1 / sqrt(2 sum mu^2) (proportional to rho)."""
    mu = np.array(mu)
    ac = collapse_certificate_boundary(mu, rho)
    np.testing.assert_allclose(ac / rho, collapse_certificate_boundary(mu, 1.0), rtol=1e-13)
    for alpha in (0.5 * ac, 0.999 * ac, 1.001 * ac, 3.0 * ac):
        n0 = alpha * np.sqrt(2 * np.sum(mu**2))
        np.testing.assert_allclose(
            initial_rates_from_field(mu, alpha, rho),
            mu * (1 - rho * mu / n0),
            rtol=1e-12,
            atol=1e-12 * mu[-1],
        )
    assert np.max(initial_rates_from_field(mu, 0.999 * ac, rho)) < 0
    assert np.max(initial_rates_from_field(mu, 1.001 * ac, rho)) > 0


# --------------------------------------------------------------------------- regimes over alpha


def alpha_grid(mu: tuple, n: int) -> np.ndarray:
    """n alphas (rho = 1) evenly spaced from 0.5 x the collapse certificate to 1.5 x the
    regime-3 boundary (linear spacing: most points fall in regimes 2 and 3, where runs are cheap)."""
    return np.linspace(0.5 * collapse_certificate_boundary(mu), 1.5 * regime3_boundary(mu), n)


def check_regimes_on_grid(mu: tuple, ratios: np.ndarray) -> list[str]:
    """Assert the three-regime picture on a grid; return the non-monotone leader sequences."""
    d = len(mu)
    ac, a3 = collapse_certificate_boundary(mu), regime3_boundary(mu)
    results = [cached_classify(mu, float(r)) for r in ratios]
    regimes = [res.regime for res in results]
    table = "; ".join(
        f"{r:.4g}: {res.regime} [{res.leaders.describe()}]"
        for r, res in zip(ratios, results, strict=True)
    )
    assert None not in regimes, f"undecided alphas for mu = {mu}: {table}"
    assert np.all(np.diff(regimes) >= 0), f"regimes not in order 1, 2, 3 for mu = {mu}: {table}"
    assert set(regimes) == {1, 2, 3}, table
    non_monotone = []
    for r, res in zip(ratios, results, strict=True):
        seq = res.leaders.coordinates
        if r < ac:
            assert res.regime == 1, (r, res.certificate)
        if r >= a3:
            assert res.regime == 3, (r, res.certificate)
        if res.regime == 1:
            assert res.collapse_time is not None and seq[-1] == -1, (r, res.leaders.describe())
        elif res.regime == 3:
            assert seq == (d - 1,), (r, res.leaders.describe())  # e_d leads from the first sample
        else:
            assert res.collapse_time is None and seq[-1] == d - 1, (r, res.leaders.describe())
            lead0 = first_leader(mu, float(r))
            assert lead0 < d - 1, (r, lead0)
            rates = initial_rates_from_field(mu, float(r))
            # the largest initial rate (exact ties, e.g. N0 = mu_j + mu_k, go either way)
            assert rates[lead0] >= np.max(rates) - 1e-12 * np.max(np.abs(rates)), (r, rates)
        if not res.monotone:
            non_monotone.append(f"mu = {mu}, alpha/rho = {r:.4g}: {res.leaders.describe()}")
    print(f"\nregimes for mu = {mu} (certificate {ac:.4g}, regime-3 boundary {a3:.4g}): {table}")
    return non_monotone


def report_non_monotone(cases: list[str]) -> None:
    if cases:
        print("non-monotone leader sequences (1-based):\n  " + "\n  ".join(cases))


# mu = (1, 2, 4, 7) is slow (0.4-0.6 s): the default run keeps mu = (1..5) and (1, 1.5, 4)
@pytest.mark.parametrize(
    "mu",
    [
        pytest.param(mu, marks=pytest.mark.slow if mu == (1.0, 2.0, 4.0, 7.0) else ())
        for mu in DEFAULT_GRID_MUS
    ],
    ids=str,
)
def test_three_regimes_in_order_default_grid(mu):
    """Three regimes (docs/theory.md §14), l2-SAM, L = 2, uniform alpha, rho = 1, 9 alphas from 0.5 x the
    collapse certificate to 1.5 x the regime-3 boundary: regimes appear in the order 1, 2, 3,
    all three present; regime 1 (a real collapse) below the certificate, regime 3 (e_d leads
    from the first sample) above the regime-3 boundary; in regime 2 the first leader is a minor
    coordinate (< d-1, 0-based, = the largest initial rate) and the last one is e_d.
    Non-monotone leader sequences are reported, not asserted."""
    report_non_monotone(check_regimes_on_grid(mu, alpha_grid(mu, 9)))


@pytest.mark.slow
@pytest.mark.parametrize("mu", MUS[:3] + [pytest.param(MUS[3], marks=DEEP_DECAY)], ids=str)
def test_three_regimes_in_order_fine_grid(mu):
    """As the default-grid test (three regimes, docs/theory.md §14) on 30 alphas per mu, plus 6 alphas
    within +-3 % of the collapse boundary (where leader sequences are least monotone)."""
    cb = collapse_boundary(np.array(mu), rtol=3e-3)
    ratios = np.sort(
        np.concatenate(
            [alpha_grid(mu, 30), cb * np.array([0.97, 0.985, 0.995, 1.005, 1.015, 1.03])]
        )
    )
    report_non_monotone(check_regimes_on_grid(mu, ratios))


# --------------------------------------------------------------------------- collapse boundary


@pytest.mark.parametrize(
    "mu, rtol",
    [
        pytest.param(MU5, 1e-2, id="mu=1..5"),
        pytest.param((1.0, 1.5, 4.0), 1e-4, id="mu=1,1.5,4", marks=pytest.mark.slow),
        pytest.param((1.0, 2.0, 4.0, 7.0), 1e-4, id="mu=1,2,4,7", marks=pytest.mark.slow),
        pytest.param(
            (0.5, 2.0, 2.5, 7.0), 1e-4, id="mu=.5,2,2.5,7", marks=[pytest.mark.slow, DEEP_DECAY]
        ),
    ],
)
def test_collapse_boundary_separates_regime_1_from_2(mu, rtol):
    """Three regimes (docs/theory.md §14; the exact collapse boundary needs the flow): collapse_boundary
    lies strictly between the collapse certificate and the regime-3 boundary, scales with rho,
    and classify gives regime 1 at 0.98 x and regime 2 at 1.02 x the boundary (the flow
    collapses just below and not just above it)."""
    mu_arr = np.array(mu)
    cb = collapse_boundary(mu_arr, rtol=rtol)
    ac, a3 = collapse_certificate_boundary(mu_arr), regime3_boundary(mu_arr)
    print(f"\ncollapse boundary mu = {mu}: {cb:.6g} (certificate {ac:.6g}, regime 3 {a3:.6g})")
    assert ac < cb < a3
    assert 1.05 * ac < cb < 0.95 * a3  # strictly inside, not at a bracket end
    below, above = cached_classify(mu, 0.98 * cb), cached_classify(mu, 1.02 * cb)
    assert below.regime == 1, below.leaders.describe()
    assert below.collapse_time is not None
    assert above.regime == 2, above.leaders.describe()
    assert above.collapse_time is None


# --------------------------------------------------------------------------- scale symmetry


@pytest.mark.parametrize("ratio, c", [(0.2, 3.7), (0.45, 0.1), (0.45, 3.7), (0.7, 0.1), (1.0, 3.7)])
def test_classify_scale_symmetry(ratio, c):
    """Scale symmetry (docs/theory.md §8, L = 2: the path depends on alpha / rho only):
    classify(mu, c alpha, c rho) equals classify(mu, alpha, rho) in regime and leader sequence,
    and a direct simulate at (c alpha, c rho), which does not go through alpha / rho, has
    log|beta| = log|beta(alpha / rho, 1)| + 2 log c (to 1e-6) and the same leader sequence."""
    mu = MU5
    rho = 0.8
    base = classify(np.array(mu), ratio * rho, rho)
    scaled = classify(np.array(mu), c * ratio * rho, c * rho)
    assert scaled.regime == base.regime
    assert scaled.leaders.coordinates == base.leaders.coordinates
    np.testing.assert_allclose(scaled.leaders.switch_times, base.leaders.switch_times, rtol=1e-9)

    # a collapsing ratio (0.2 collapses at tau ~ 0.6) is compared before the collapse only
    t_max = 4.0 if ratio > 0.35 else 0.5
    kw = dict(depth=2, t_max=t_max, n_points=201, original_time=False, rtol=1e-10)
    ref = simulate(single_example(list(mu)), "l2-sam", alpha=ratio, rho=1.0, **kw)
    direct = simulate(single_example(list(mu)), "l2-sam", alpha=c * ratio * rho, rho=c * rho, **kw)
    # compare while |a_j| > e^-20 rho (relative error control holds there; deeper into a
    # collapse the engine's atol governs, see test_amplification)
    shifted = direct.log_abs_beta - 2 * np.log(c * rho)
    ok = np.isfinite(ref.log_abs_beta) & np.isfinite(shifted) & (ref.log_abs_beta > -40)
    rows = np.all(ok, axis=1)
    assert np.sum(rows) > 10
    np.testing.assert_allclose(shifted[ok], ref.log_abs_beta[ok], atol=1e-6)
    assert (
        leader_sequence(direct.tau[rows], shifted[rows]).coordinates
        == leader_sequence(ref.tau[rows], ref.log_abs_beta[rows]).coordinates
    )


# --------------------------------------------------------------------------- validation, caps


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raise TimeoutError instead of hanging if the block spends more than ``seconds`` of CPU
    time (a profiling timer: a busy machine does not make it fire sooner)."""

    def handler(signum, frame):
        raise TimeoutError(f"did not finish within {seconds} s of CPU time")

    previous = signal.signal(signal.SIGPROF, handler)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


MU2 = [1.0, 2.0]
BAD_CALLS = {  # name: (call, parameter the ValueError must name)
    "classify max_extensions -1": (lambda: classify(MU2, 1.0, max_extensions=-1), "max_extensions"),
    "classify max_extensions 1.5": (
        lambda: classify(MU2, 1.0, max_extensions=1.5),
        "max_extensions",
    ),
    "classify max_extensions True": (
        lambda: classify(MU2, 1.0, max_extensions=True),
        "max_extensions",
    ),
    "classify max_extensions 10**6": (
        lambda: classify(MU2, 1.0, max_extensions=10**6),
        "max_extensions",
    ),
    "classify n_points 1": (lambda: classify(MU2, 1.0, n_points=1), "n_points"),
    "classify t_max nan": (lambda: classify(MU2, 1.0, t_max=np.nan), "t_max"),
    "classify alpha text": (lambda: classify(MU2, "a"), "alpha"),
    "classify rho None": (lambda: classify(MU2, 1.0, rho=None), "rho"),
    "classify alpha / rho overflows": (lambda: classify(MU2, 1e300, rho=1e-300), "alpha"),
    "collapse_boundary rho -1": (lambda: collapse_boundary(MU2, rho=-1.0), "rho"),
    "collapse_boundary rho 0": (lambda: collapse_boundary(MU2, rho=0.0), "rho"),
    "collapse_boundary rtol nan": (lambda: collapse_boundary(MU2, rtol=np.nan), "rtol"),
    "collapse_boundary rtol 0": (lambda: collapse_boundary(MU2, rtol=0.0), "rtol"),
    "collapse_boundary rtol 1": (lambda: collapse_boundary(MU2, rtol=1.0), "rtol"),
    "collapse_boundary max_iter 0": (lambda: collapse_boundary(MU2, max_iter=0), "max_iter"),
    "regime3_boundary_from_field rho -0.5": (
        lambda: regime3_boundary_from_field(MU2, rho=-0.5),
        "rho",
    ),
    "regime3_boundary_from_field rho 0": (lambda: regime3_boundary_from_field(MU2, rho=0.0), "rho"),
    "regime3_boundary_from_field rho nan": (
        lambda: regime3_boundary_from_field(MU2, rho=np.nan),
        "rho",
    ),
    "regime3_boundary_from_field rtol 0": (
        lambda: regime3_boundary_from_field(MU2, rtol=0.0),
        "rtol",
    ),
    "regime3_boundary_from_field rtol 1e-20": (
        lambda: regime3_boundary_from_field(MU2, rtol=1e-20),
        "rtol",
    ),
    "regime3_boundary_from_field rtol nan": (
        lambda: regime3_boundary_from_field(MU2, rtol=np.nan),
        "rtol",
    ),
    "initial_rates_from_field alpha 0": (lambda: initial_rates_from_field(MU2, 0.0), "alpha"),
    "initial_rates_from_field rho -1": (lambda: initial_rates_from_field(MU2, 1.0, -1.0), "rho"),
    "initial_norm alpha -1": (lambda: initial_norm(MU2, -1.0), "alpha"),
    "initial_norm mu": (lambda: initial_norm([1.0, np.nan], 1.0), "mu"),
    "log_gradient_norm shape": (
        lambda: log_gradient_norm(np.zeros((3, 3)), np.array(MU2)),
        "log_abs_beta",
    ),
    "log_gradient_norm nan": (
        lambda: log_gradient_norm(np.array([[np.nan, 0.0]]), np.array(MU2)),
        "log_abs_beta",
    ),
    "check_positive text": (lambda: positive("a", "rho"), "rho"),
    "check_positive None": (lambda: positive(None, "rho"), "rho"),
    "leader_phase_diagram ratios": (lambda: leader_phase_diagram(MU2, [0.5, -1.0], 1.0), "ratios"),
    "leader_phase_diagram ratios empty": (lambda: leader_phase_diagram(MU2, [], 1.0), "ratios"),
    "leader_phase_diagram tau_max": (lambda: leader_phase_diagram(MU2, [0.5], 0.0), "tau_max"),
    "leader_phase_diagram n_tau": (lambda: leader_phase_diagram(MU2, [0.5], 1.0, n_tau=1), "n_tau"),
    "leader_sequence_at_depth depth": (
        lambda: leader_sequence_at_depth(MU2, 1.0, 0.5, 0, 1.0),
        "depth",
    ),
    "leader_sequence_at_depth t_max": (
        lambda: leader_sequence_at_depth(MU2, 1.0, 0.5, 2, -1.0),
        "t_max",
    ),
    "leader_sequence_at_depth rho": (
        lambda: leader_sequence_at_depth(MU2, 1.0, -0.5, 2, 1.0),
        "rho",
    ),
}


@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_regime_functions_validate_up_front(case, monkeypatch):
    """Every public function of analysis.regimes rejects bad input with a ValueError naming the
    parameter, before any flow is simulated (also max_extensions = -1, rho = -1, rho = -0.5,
    rho = 0 and rtol = 0, which would otherwise fail late, return a negative boundary or loop
    without end)."""
    import analysis.regimes.classification as classification
    import analysis.regimes.leaders as regimes

    def no_simulation(*args, **kwargs):
        raise AssertionError("simulate called before the input was validated")

    for module in (regimes, classification):  # every module of the regimes that simulates
        monkeypatch.setattr(module, "simulate", no_simulation)
    call, name = BAD_CALLS[case]
    with time_limit(5.0), pytest.raises(ValueError, match=rf"\b{name}\b"):
        call()


def test_collapse_boundary_iteration_cap_is_reported():
    """An iteration cap that is hit is reported: collapse_boundary_search says converged=False
    with the bracket found so far, and collapse_boundary raises a RuntimeError naming max_iter
    instead of returning an unconverged number. (Only the first bisection point, alpha / rho =
    0.567 for mu = (1, 2, 3), is run: regime 2, cheap; collapsing runs cost seconds.)"""
    from analysis.regimes.boundaries import collapse_boundary_search

    mu = np.array([1.0, 2.0, 3.0])
    ac, a3 = collapse_certificate_boundary(mu), regime3_boundary(mu)
    search = collapse_boundary_search(mu, rho=2.0, rtol=1e-6, max_iter=1)
    assert search.iterations == 1 and not search.converged and search.undecided == ()
    assert search.lo == pytest.approx(2.0 * ac) and search.hi == pytest.approx(ac + a3)
    assert search.alpha == pytest.approx(0.5 * (search.lo + search.hi))
    with pytest.raises(RuntimeError, match="max_iter"):
        collapse_boundary(mu, rtol=1e-6, max_iter=1)
    done = collapse_boundary_search(mu, rho=2.0, rtol=0.7)  # (a3 - ac) / (ac + a3) < 0.7
    assert done.converged and done.iterations == 1
    assert collapse_boundary(mu, rho=2.0, rtol=0.7) == pytest.approx(done.alpha)


# the moderate scales 1e-10 and 1e15 are slow: the default run keeps the extremes
@pytest.mark.parametrize(
    "scale",
    [
        2.0**-990,
        1e-300,
        pytest.param(1e-10, marks=pytest.mark.slow),
        pytest.param(1e15, marks=pytest.mark.slow),
        1e300,
    ],
)
def test_regimes_are_scale_invariant_in_mu(scale):
    """Scale symmetry in mu (docs/theory.md §8, single example, rescaled clock: mu -> s mu is tau -> tau / s):
    the boundaries do not depend on the scale of mu, the initial rates scale with it, and
    classify gives the same regime and leaders with switch times divided by s, at every scale
    where 12 / mu_1 is representable (1e-300 and 1e300 included, where an unscaled N0 would
    underflow or overflow)."""
    mu = np.array([1.0, 2.0, 3.0])
    assert regime3_boundary(scale * mu) == pytest.approx(regime3_boundary(mu), rel=1e-14)
    assert collapse_certificate_boundary(scale * mu) == pytest.approx(
        collapse_certificate_boundary(mu), rel=1e-14
    )
    np.testing.assert_allclose(
        initial_rates_from_field(scale * mu, 0.5),
        scale * initial_rates_from_field(mu, 0.5),
        rtol=1e-12,
    )
    assert regime3_boundary_from_field(scale * mu) == pytest.approx(regime3_boundary(mu), rel=1e-6)
    base, scaled = classify(mu, 0.5), classify(scale * mu, 0.5)
    assert base.regime == scaled.regime == 2
    assert scaled.leaders.coordinates == base.leaders.coordinates
    np.testing.assert_allclose(
        np.array(scaled.leaders.switch_times) * scale, base.leaders.switch_times, rtol=1e-6
    )
