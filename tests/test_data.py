"""Tests of flows.data and flows.initialization:

* separability is scale-invariant: the LP check sees the same answer for ``s X`` at every
  representable scale ``s`` from 1e-300 to 1e300, and a zero row ``y_i x_i = 0`` is never
  separable;
* signed initializations: an (L, d) ``alpha`` may have nonzero entries of either sign; scalar
  and (d,) ``alpha`` must stay > 0;
* the sign pattern that an initialization keeps (:func:`flows.initialization.kept_sign_pattern`)
  and separability under that sign constraint (:func:`flows.data.sign_constrained_separable`),
  checked along discrete runs;
* the init of an orthant (:func:`flows.orthant_init`): a flow from the teacher's orthant on
  data only that orthant separates runs without the sign warning of ``simulate``.

* a separability certificate (:func:`flows.data.separating_direction`) checked in exact
  arithmetic, and the checks with it in front agree with the LP alone.

Fast (< 5 s): LPs on tiny data and short discrete runs.
"""

from __future__ import annotations

import re
import warnings
from fractions import Fraction

import numpy as np
import pytest

from flows import Dataset, iterate, orthant_init, simulate, single_example
from flows.data import (
    _equilibrated,
    _separating_lp,
    is_separable,
    separating_direction,
    sign_constrained_separable,
)
from flows.initialization import initialization, kept_sign_pattern


def names(param: str) -> str:
    """Regex: ``param`` as a whole word."""
    return rf"(?<![\w-]){re.escape(param)}(?![\w-])"


SCALES = [10.0**k for k in range(-300, 301, 25)] + [1e-10, 1e15, 2.0**-1000, 1.7e308 / 4]
SEPARABLE = (np.array([[1.0, 2.0], [-1.0, -1.0], [3.0, -0.5]]), np.array([1.0, -1.0, 1.0]))
NON_SEPARABLE = (np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]]), np.ones(4))
#: separable (beta = (1, -1)) but not by any beta >= 0: 2 b1 - b2 >= 1 and -b1 - 2 b2 >= 1.
SIGNED_ONLY = (np.array([[2.0, -1.0], [-1.0, -2.0]]), np.array([1.0, 1.0]))


# --------------------------------------------------------------------------- separability


# every other decade step (10^-275, 10^-225, ...) is slow: the default run keeps 10^k for k a
# multiple of 50 from -300 to 300 and the edge cases
@pytest.mark.parametrize(
    "scale",
    [pytest.param(s, marks=pytest.mark.slow if k % 2 else ()) for k, s in enumerate(SCALES[:25])]
    + SCALES[25:],
    ids=lambda s: f"{s:.0e}",
)
def test_separability_is_scale_invariant(scale):
    """Claim: separability of (X, y) through the origin does not depend on the scale of X, so
    single_example([s, 2 s]) and Dataset(s X, y) are accepted at every representable s, and
    non-separable data stay non-separable at every s."""
    data = single_example([scale, 2.0 * scale])
    assert data.X[0, 1] == 2.0 * scale
    X, y = SEPARABLE
    assert is_separable(scale * X, y)
    assert Dataset(scale * X, y).n == 3
    Xn, yn = NON_SEPARABLE
    assert not is_separable(scale * Xn, yn)
    with pytest.raises(ValueError, match="separable"):
        Dataset(scale * Xn, yn)
    Xs, ys = SIGNED_ONLY
    assert sign_constrained_separable(Dataset(scale * Xs, ys), [0, 0])
    assert not sign_constrained_separable(Dataset(scale * Xs, ys), [1, 1])


def test_separability_mixed_column_scales():
    """Claim: positive column scalings keep separability (beta_j -> beta_j / c_j): data that
    only the tiny second coordinate separates are still recognised."""
    X = np.array([[1.0, 1e-12], [-1.0, 1e-12]])
    assert is_separable(X, np.ones(2))
    assert not is_separable(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.ones(2))


def test_zero_row_is_never_separable():
    """Claim: an example with y_i x_i = 0 has margin 0 for every beta, so the data are not
    separable, whatever the other rows (also at tiny scales, where 1e-300 is not 0)."""
    with pytest.raises(ValueError, match="separable"):
        Dataset(np.array([[1.0, 0.0], [0.0, 0.0]]), np.ones(2))
    assert Dataset(np.array([[1.0, 0.0], [0.0, 1e-300]]), np.ones(2)).n == 2


# --------------------------------------------------------------------------- signed init


def test_signed_initialization_accepted_for_layer_arrays():
    """Claim: an (L, d) alpha may have entries of either sign (signed init); the groups keep
    them exactly; a balanced signed alpha is still reduced to one group."""
    alpha = np.array([[0.5, -0.3], [-0.5, 0.2]])
    init = initialization(alpha, 2, 2)
    np.testing.assert_array_equal(init.groups, alpha)
    assert not init.balanced
    same = initialization(np.array([[-0.5, 0.3], [-0.5, 0.3]]), 2, 2)
    assert same.balanced and same.reduced
    np.testing.assert_array_equal(same.groups, [[-0.5, 0.3]])


@pytest.mark.parametrize(
    "alpha, depth",
    [
        (-0.5, 2),
        (0.0, 2),
        ([0.5, -0.5], 2),
        ([0.5, 0.0], 2),  # scalar / (d,): must be > 0
        (np.array([[0.5, np.nan], [0.5, 0.5]]), 2),
        (np.array([[0.5, -np.inf], [0.5, 0.5]]), 2),
        (np.array([[-0.5, 0.5]]), 2),  # wrong number of layers
        ("big", 2),
    ],
)
def test_initialization_rejects(alpha, depth):
    """Claim: NaN, inf, non-positive scalar / (d,) alpha and wrong shapes -> ValueError naming
    alpha (zeros are allowed in an (L, d) array only)."""
    with pytest.raises(ValueError, match=names("alpha")):
        initialization(alpha, depth, 2)


def test_signed_initialization_runs_in_iterate():
    """Claim: a signed (L, d) init is accepted end to end by iterate and starts there."""
    alpha = np.array([[0.5, -0.3], [-0.5, 0.2]])
    run = iterate(single_example([1.0, 2.0]), "gd", depth=2, alpha=alpha, eta=0.1, steps=5)
    assert run.status == 0
    np.testing.assert_array_equal(run.theta[0], alpha)
    np.testing.assert_allclose(run.beta[0], [-0.25, -0.06])


# --------------------------------------------------------------------------- sign patterns


def test_sign_constrained_separable_example():
    """Claim: X = [[2, -1], [-1, -2]], y = (1, 1) is separable (beta = (1, -1)) but by no
    beta >= 0; with beta_2 <= 0 allowed it is; signs 0 leave a coordinate free."""
    data = Dataset(*SIGNED_ONLY)
    assert sign_constrained_separable(data, [0, 0])
    assert not sign_constrained_separable(data, [1, 1])
    assert sign_constrained_separable(data, [1, -1])
    assert sign_constrained_separable(data, [0, -1])
    assert not sign_constrained_separable(data, [-1, 1])
    assert sign_constrained_separable(single_example([1.0, -2.0]), [1, 1])  # beta = e_1
    assert not sign_constrained_separable(single_example([-1.0, -2.0]), [1, 1])


def test_one_example_separability_matches_the_lp():
    """Claim: for one example the separability checks decide without an LP
    (:func:`flows.data._one_row_separable`), and the answer is HiGHS's on the same LP
    (``z . beta >= 1`` under sign bounds): 300 random rows with zero entries and scales from
    1e-200 to 1e200, under every sign constraint in {-1, 0, 1}^d."""
    from scipy.optimize import linprog

    rng = np.random.default_rng(5)
    box = {1: (0.0, None), -1: (None, 0.0), 0: (None, None)}
    for _ in range(300):
        d = int(rng.integers(1, 5))
        z = rng.choice([-1.0, 0.0, 1.0], d) * 10.0 ** rng.uniform(-200, 200, d)
        signs = rng.choice([-1, 0, 1], d)
        unit = np.where(z == 0, 0.0, np.sign(z))  # the LP on sign(z): same feasibility
        lp = linprog(
            np.zeros(d), A_ub=-unit[None], b_ub=[-1.0], bounds=[box[s] for s in signs],
            method="highs",
        )  # fmt: skip
        assert lp.status in (0, 2)
        assert is_separable(z[None], np.ones(1)) == bool(np.any(z != 0))
        if np.any(z != 0):
            data = single_example(z)
            assert sign_constrained_separable(data, signs) == (lp.status == 0), (z, signs)


@pytest.mark.parametrize(
    "data, signs, param",
    [
        (Dataset(*SIGNED_ONLY), [1, 1, 1], "signs"),
        (Dataset(*SIGNED_ONLY), [1, 0.5], "signs"),
        (Dataset(*SIGNED_ONLY), [1, np.nan], "signs"),
        (Dataset(*SIGNED_ONLY), "+", "signs"),
        (SIGNED_ONLY[0], [1, 1], "data"),
    ],
)
def test_sign_constrained_separable_validates(data, signs, param):
    """Claim: bad signs (wrong length, not in {-1, 0, 1}, NaN) or data that is not a Dataset
    -> ValueError naming the parameter."""
    with pytest.raises(ValueError, match=names(param)):
        sign_constrained_separable(data, signs)


def test_kept_sign_pattern_cases():
    """Claim: balanced inits keep beta_j on one side of 0: for even L every algorithm keeps
    prod_l sign(alpha[l, j]) (beta_j = that sign times a_j^L); for odd L >= 3 the algorithms
    whose field vanishes at a_j = 0 (gd, l2-sam, usam, le-sam) keep it, l_inf-SAM does not;
    L = 1 and unbalanced magnitudes are unconstrained (None)."""
    np.testing.assert_array_equal(kept_sign_pattern(0.5, 2, d=3), [1, 1, 1])
    np.testing.assert_array_equal(kept_sign_pattern([0.5, 0.7], 4), [1, 1])
    signed = np.array([[-0.5, 0.3], [-0.5, 0.3]])
    np.testing.assert_array_equal(kept_sign_pattern(signed, 2), [1, 1])
    flipped = np.array([[0.5, 0.3], [-0.5, 0.3]])  # |alpha| balanced, one layer negative
    np.testing.assert_array_equal(kept_sign_pattern(flipped, 2, algorithm="linf-sam"), [-1, 1])
    odd = np.array([[-0.5, 0.3]] * 3)
    assert kept_sign_pattern(odd, 3) is None  # some algorithm (l_inf-SAM) can cross 0
    assert kept_sign_pattern(odd, 3, algorithm="linf-sam") is None
    for algorithm in ("gd", "l2-sam", "usam", "le-sam"):
        np.testing.assert_array_equal(kept_sign_pattern(odd, 3, algorithm=algorithm), [-1, 1])
    assert kept_sign_pattern(0.5, 1, d=2) is None
    assert kept_sign_pattern(np.array([[0.5, 0.3], [0.4, 0.3]]), 2) is None
    with pytest.raises(ValueError, match=names("d")):
        kept_sign_pattern(0.5, 2)
    with pytest.raises(ValueError, match=names("algorithm")):
        kept_sign_pattern(0.5, 2, d=2, algorithm="adam")
    assert kept_sign_pattern(np.array([[0.5, 0.0], [0.5, 0.0]]), 2) is None  # a zero entry
    with pytest.raises(ValueError, match=names("depth")):
        kept_sign_pattern(0.5, 0, d=2)


# l2-SAM is slow (0.6-0.8 s): the default run keeps GD and a SAM variant (l_inf-SAM, whose
# perturbation moves every coordinate by rho)
@pytest.mark.parametrize(
    "algorithm, kw",
    [
        ("gd", {}),
        pytest.param("l2-sam", dict(rho=0.3), marks=pytest.mark.slow),
        ("linf-sam", dict(rho=0.3)),
    ],
)
def test_kept_sign_pattern_holds_and_blocks_separation(algorithm, kw):
    """Claim: from a balanced init at L = 2 (pattern beta >= 0) the iterates keep beta >= 0, so
    on SIGNED_ONLY (separable, but by no beta >= 0) one example always has margin <= 0 and the
    logistic loss never drops below log(2) / 2, while a signed init whose pattern allows
    beta_2 < 0 separates the data (loss -> 0)."""
    data = Dataset(*SIGNED_ONLY)
    pattern = kept_sign_pattern(0.5, 2, d=2, algorithm=algorithm)
    np.testing.assert_array_equal(pattern, [1, 1])
    assert not sign_constrained_separable(data, pattern)
    run = iterate(data, algorithm, depth=2, alpha=0.5, eta=0.05, steps=2000, record_every=50, **kw)
    assert run.status == 0
    assert np.all(run.beta >= 0)
    assert np.min(run.loss) >= np.log(2.0) / 2 - 1e-12
    alpha = np.array([[0.5, 0.5], [0.5, -0.5]])
    pattern = kept_sign_pattern(alpha, 2, algorithm=algorithm)
    np.testing.assert_array_equal(pattern, [1, -1])
    assert sign_constrained_separable(data, pattern)
    run = iterate(
        data, algorithm, depth=2, alpha=alpha, eta=0.05, steps=2000, record_every=50, **kw
    )
    assert run.status == 0
    assert np.all(run.beta * pattern >= 0)
    assert run.loss[-1] < 0.1


def test_is_separable_where_the_products_y_x_overflow():
    """Claim: separability depends on y_i x_i only up to a positive factor per row, so labels
    and features whose products overflow float64 are decided as their signs say (an LP on
    inf would be an error)."""
    assert is_separable(np.array([[1.8e16]]), np.array([1e292]))
    assert not is_separable(np.array([[1e200], [1e200]]), np.array([1e200, -1e200]))


def teacher_with_signs(seed: int = 0, n: int = 12) -> tuple[Dataset, np.ndarray]:
    """Data labelled by a mixed-sign teacher ``w``, which a positive ``beta`` does not
    separate."""
    w = np.array([1.0, -2.0, 0.5])
    X = np.random.default_rng(seed).normal(size=(n, 3))
    data = Dataset(X, np.sign(X @ w))
    assert not sign_constrained_separable(data, [1, 1, 1])
    return data, w


@pytest.mark.parametrize("depth", [2, 3])
def test_orthant_init_starts_in_the_teachers_orthant(depth):
    """Claim: orthant_init(sign(w), L, scale) is balanced in magnitude, signed by its first
    layer; it keeps sign(w) (kept_sign_pattern; at odd L for GD, whose field vanishes at 0);
    a GD flow from it does not warn, from a positive init it warns and names orthant_init."""
    data, w = teacher_with_signs()
    alpha = orthant_init(np.sign(w), depth, 0.1)
    assert alpha.shape == (depth, 3)
    np.testing.assert_array_equal(alpha[0], 0.1 * np.sign(w))
    np.testing.assert_array_equal(alpha[1:], 0.1)
    np.testing.assert_array_equal(kept_sign_pattern(alpha, depth, algorithm="gd"), np.sign(w))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traj = simulate(data, "gd", depth, alpha, t_max=1.0, n_points=11)
    assert traj.status == 0
    np.testing.assert_array_equal(traj.sign_beta[-1], np.sign(w))
    with pytest.warns(RuntimeWarning, match="orthant_init"):
        simulate(data, "gd", depth, 0.1, t_max=1.0, n_points=11)


def test_orthant_init_scale_per_coordinate():
    """Claim: a (d,) scale gives each coordinate its own magnitude in every layer."""
    alpha = orthant_init([-1, 1], 2, [0.2, 0.3])
    np.testing.assert_array_equal(alpha, [[-0.2, 0.3], [0.2, 0.3]])


@pytest.mark.parametrize(
    "signs, depth, scale, param",
    [
        ([1, 0], 2, 0.1, "signs"),
        ([1, 0.5], 2, 0.1, "signs"),
        ([1, -2], 2, 0.1, "signs"),
        ([[1, -1]], 2, 0.1, "signs"),
        ([], 2, 0.1, "signs"),
        ([1, np.nan], 2, 0.1, "signs"),
        ("+-", 2, 0.1, "signs"),
        ([1, -1], 0, 0.1, "depth"),
        ([1, -1], 2.5, 0.1, "depth"),
        ([1, -1], 2, 0.0, "scale"),
        ([1, -1], 2, -0.1, "scale"),
        ([1, -1], 2, [0.1, 0.1, 0.1], "scale"),
        ([1, -1], 2, [[0.1, 0.1]], "scale"),
        ([1, -1], 2, np.inf, "scale"),
    ],
)
def test_orthant_init_rejects(signs, depth, scale, param):
    """Claim: signs other than a (d,) array of -1 and +1, a bad depth, or a scale that is not
    finite and > 0 (scalar or (d,)) -> ValueError naming the parameter."""
    with pytest.raises(ValueError, match=names(param)):
        orthant_init(signs, depth, scale)


def _exact_margins(Z: np.ndarray, beta: np.ndarray) -> list[Fraction]:
    """``Z beta`` in exact rational arithmetic (every float is a rational)."""
    exact = [Fraction(float(b)) for b in beta]
    return [sum(Fraction(float(z)) * b for z, b in zip(row, exact, strict=True)) for row in Z]


def test_separating_direction_is_a_certificate():
    """Claim: the direction the certificate search returns separates the equilibrated rows
    exactly (margins computed in rational arithmetic), within the sign bounds it was given,
    on teacher data and under the teacher's sign constraint."""
    rng = np.random.default_rng(11)
    for _ in range(3):
        n, d = 40, 6
        X = rng.standard_normal((n, d))
        w = rng.standard_normal(d)
        Z = _equilibrated(np.sign(X @ w)[:, None] * X)
        box = [(0.0, None) if v > 0 else (None, 0.0) for v in w]
        for bounds in ([(None, None)] * d, box):
            beta = separating_direction(Z, bounds)
            assert beta is not None
            assert min(_exact_margins(Z, beta)) > 0
            assert all((lo is None or b >= lo) and (hi is None or b <= hi)
                       for b, (lo, hi) in zip(beta, bounds, strict=True))  # fmt: skip


@pytest.mark.slow
def test_separability_with_the_certificate_matches_the_lp():
    """Claim: with the certificate search in front, the separability checks give HiGHS's answer
    on the same LP (alone): 150 random sign-labelled sets, about half of them not separable
    (random labels), with and without a random sign constraint."""
    from scipy.optimize import linprog

    rng = np.random.default_rng(12)
    box = {1: (0.0, None), -1: (None, 0.0), 0: (None, None)}
    outcomes = set()
    for _ in range(150):
        n, d = int(rng.integers(2, 14)), int(rng.integers(1, 5))
        X = rng.standard_normal((n, d))
        y = rng.choice([-1.0, 1.0], n)
        signs = rng.choice([-1, 0, 1], d)
        Z = _equilibrated(y[:, None] * X)
        for bounds in ([(None, None)] * d, [box[s] for s in signs]):
            lp = linprog(np.zeros(d), A_ub=-Z, b_ub=-np.ones(n), bounds=bounds, method="highs")
            assert lp.status in (0, 2)
            assert _separating_lp(y[:, None] * X, bounds) == (lp.status == 0)
            outcomes.add(lp.status)
    assert outcomes == {0, 2}


def test_large_teacher_data_need_no_lp(monkeypatch):
    """Claim: teacher data of n d = 2e5 are certified separable without the LP (which HiGHS
    takes minutes over at n d = 1e7)."""
    import flows.data

    def refuse(*args, **kwargs):
        raise AssertionError("the LP was called")

    monkeypatch.setattr(flows.data, "linprog", refuse)
    rng = np.random.default_rng(13)
    X = rng.standard_normal((2000, 100))
    Dataset(X, np.sign(X @ rng.standard_normal(100)))
