"""Tests of analysis.sharpness: the exact Hessian of the training loss, its trace, its top
eigenvalue, and both along a flow.

References: central finite differences of flows.model.loss_gradient (an independent code path,
signed-log arithmetic), a dense symbolic Hessian (sympy), the theta -> 0 limit at L = 2
(derived below), and closed forms at a balanced point.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import sympy as sp

from analysis.sharpness import hessian, hessian_trace, sharpness_along, top_hessian_eigenvalue
from flows import Dataset, simulate, single_example
from flows.model import loss_gradient

LOSSES = ("logistic", "exponential")


def random_data(rng: np.random.Generator, n: int, d: int) -> Dataset:
    X = rng.normal(size=(n, d))
    y = np.sign(X @ rng.normal(size=d))
    y[y == 0] = 1.0
    return Dataset(X, y)


def fd_hessian(data: Dataset, theta: np.ndarray, loss: str, h: float = 1e-5) -> np.ndarray:
    """Central differences of the gradient, column by column (layer-major order)."""
    P = theta.size
    H = np.empty((P, P))
    for p in range(P):
        e = np.zeros(P)
        e[p] = h
        e = e.reshape(theta.shape)
        H[:, p] = (
            loss_gradient(theta + e, data, loss).ravel()
            - loss_gradient(theta - e, data, loss).ravel()
        ) / (2 * h)
    return H


# ----------------------------------------------------------------- against finite differences


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("n", [1, 7])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_hessian_matches_finite_differences(depth, n, loss):
    rng = np.random.default_rng(100 * depth + n)
    data = random_data(rng, n, 3)
    for _ in range(3):
        theta = rng.normal(size=(depth, 3))
        H = hessian(data, theta, loss)
        F = fd_hessian(data, theta, loss)
        assert H.shape == (3 * depth, 3 * depth)
        scale = np.max(np.abs(F))
        assert scale > 1e-3  # a non-trivial comparison
        np.testing.assert_allclose(H, F, rtol=1e-6, atol=1e-6 * scale)


@pytest.mark.parametrize("loss", LOSSES)
def test_layer_major_order(loss):
    """Entry (l*d + j, l*d + j) is d2L/dw_lj^2: perturb one known entry and compare."""
    rng = np.random.default_rng(7)
    data = random_data(rng, 4, 3)
    theta = rng.normal(size=(2, 3))
    H = hessian(data, theta, loss)
    layer, j, h = 1, 2, 1e-5
    e = np.zeros_like(theta)
    e[layer, j] = h
    column = (loss_gradient(theta + e, data, loss) - loss_gradient(theta - e, data, loss)) / (2 * h)
    np.testing.assert_allclose(H[:, layer * 3 + j], column.ravel(), rtol=1e-6, atol=1e-9)


# ------------------------------------------------------------------------- against sympy


@pytest.mark.parametrize("loss", LOSSES)
def test_hessian_matches_sympy(loss):
    """L = 2, d = 2, n = 2, exact rationals: the dense symbolic Hessian, evaluated to 30 digits."""
    X = [[1, 2], [3, -1]]
    y = [1, -1]
    data = Dataset(np.array(X, float), np.array(y, float))  # separable: beta = (-1, 1)
    w = sp.Matrix(2, 2, sp.symbols("w10 w11 w20 w21"))
    beta = [w[0, j] * w[1, j] for j in range(2)]
    margins = [y[i] * sum(X[i][j] * beta[j] for j in range(2)) for i in range(2)]
    ell = (lambda u: sp.log(1 + sp.exp(-u))) if loss == "logistic" else (lambda u: sp.exp(-u))
    L = sum(ell(m) for m in margins) / 2
    flat = list(w)  # row-major = layer-major
    point = [sp.Rational(1, 2), sp.Rational(-3, 4), sp.Rational(2, 3), sp.Rational(1, 5)]
    exact = sp.hessian(L, flat).subs(dict(zip(flat, point, strict=True))).evalf(30)
    exact = np.array(exact.tolist(), dtype=float)
    theta = np.array([float(v) for v in point]).reshape(2, 2)
    H = hessian(data, theta, loss)
    np.testing.assert_allclose(H, exact, rtol=1e-13, atol=1e-15)
    # the structure of hess m: no (w_1j, w_2j') coupling for j != j' in the second term,
    # but the first term couples them: the entry is non-zero and matches sympy
    assert H[0, 3] != 0.0


# ----------------------------------------------------------------- matrix properties


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_symmetric_trace_and_top(depth, loss):
    rng = np.random.default_rng(depth)
    data = random_data(rng, 5, 4)
    theta = rng.normal(size=(depth, 4))
    H = hessian(data, theta, loss)
    np.testing.assert_array_equal(H, H.T)
    tr = hessian_trace(data, theta, loss)
    assert tr >= 0
    np.testing.assert_allclose(tr, np.trace(H), rtol=1e-13)
    top = top_hessian_eigenvalue(data, theta, loss)
    eig, vec = np.linalg.eigh(H)
    np.testing.assert_allclose(top, eig[-1], rtol=1e-13, atol=1e-15)
    V = rng.normal(size=(200, H.shape[0]))
    rayleigh = np.einsum("kp,pq,kq->k", V, H, V) / np.einsum("kp,kp->k", V, V)
    assert np.all(rayleigh <= top + 1e-12 * np.max(np.abs(H)))
    v = vec[:, -1]
    np.testing.assert_allclose(v @ H @ v, top, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("loss", LOSSES)
def test_depth_one_is_positive_semidefinite(loss):
    """L = 1: hess m = 0, H = (1/n) sum l'' a a^T (PSD, rank <= n)."""
    rng = np.random.default_rng(11)
    data = random_data(rng, 2, 5)
    theta = rng.normal(size=(1, 5))
    H = hessian(data, theta, loss)
    eig = np.linalg.eigvalsh(H)
    assert eig[0] >= -1e-14 * eig[-1]
    assert np.sum(eig > 1e-12 * eig[-1]) == 2


@pytest.mark.parametrize("n", [1, 6])
def test_indefinite_near_zero_depth_two(n):
    """theta -> 0, L = 2: grad m_i = O(theta) so the first term is O(theta^2), while
    d2m_i/dw_1j dw_2j = a_ij; with l'(m_i) -> l'(0) = -1/2 (logistic),
    H -> [[0, diag(g)], [diag(g), 0]], g = -(1/2) mean_i a_i, whose eigenvalues are
    +-|g_j|. So top -> max_j |g_j| > 0 > -max_j |g_j| <- smallest."""
    rng = np.random.default_rng(n)
    data = random_data(rng, n, 3) if n > 1 else single_example([1.0, 2.0, 3.0])
    g = -0.5 * np.mean(data.signed_features, axis=0)
    theta = 1e-4 * rng.uniform(0.5, 1.5, size=(2, 3))
    H = hessian(data, theta, "logistic")
    eig = np.linalg.eigvalsh(H)
    top = top_hessian_eigenvalue(data, theta, "logistic")
    assert top > 0 > eig[0]
    np.testing.assert_allclose(top, np.max(np.abs(g)), rtol=1e-6)
    np.testing.assert_allclose(eig[0], -np.max(np.abs(g)), rtol=1e-6)
    np.testing.assert_allclose(np.sort(eig), np.sort(np.concatenate([g, -g])), atol=1e-6)
    if n == 1:
        assert top == pytest.approx(3.0 / 2, rel=1e-6)  # |a_3| / 2


def test_exact_zeros_in_theta():
    """theta[:, j] = (0, 0, 5) at L = 3: every leave-one-out product has a zero factor, and of
    the leave-two-out products only prod_{k != 0, 1} = w_2j = 5 survives. A division-based
    formula would give NaN here."""
    data = single_example([1.0, 2.0])
    theta = np.array([[0.0, 0.3], [0.0, -0.7], [5.0, 1.1]])
    H = hessian(data, theta, "logistic")
    F = fd_hessian(data, theta, "logistic")
    np.testing.assert_allclose(H, F, rtol=1e-6, atol=1e-9)
    j, d = 0, 2
    idx = [layer * d + j for layer in range(3)]
    block = H[np.ix_(idx, idx)]
    m = 2.0 * 0.3 * -0.7 * 1.1
    g = -1.0 / (1.0 + np.exp(m)) * 1.0  # l'(m) a_0
    expected = np.zeros((3, 3))
    expected[0, 1] = expected[1, 0] = g * 5.0
    np.testing.assert_array_equal(block == 0.0, expected == 0.0)  # exact zeros
    np.testing.assert_allclose(block, expected, rtol=1e-14)
    assert hessian_trace(data, theta) == pytest.approx(np.trace(H), rel=1e-14)
    Z = hessian(data, np.zeros((3, 2)))
    assert np.all(Z == 0.0)  # L = 3 at theta = 0: everything vanishes
    Z2 = hessian(data, np.zeros((2, 2)))  # L = 2 at theta = 0: only l'(0) a_j
    np.testing.assert_array_equal(
        Z2, [[0, 0, -0.5, 0], [0, 0, 0, -1.0], [-0.5, 0, 0, 0], [0, -1.0, 0, 0]]
    )


def test_products_without_intermediate_overflow():
    """L = 4, theta = (1e200, 1e200, 1e-200, 1e-200), a = 1e-150: beta = 1, m = 1e-150 ~ 0.
    A left-to-right product overflows at 1e200 * 1e200; here every representable entry is
    finite, including g * prod_{k != 2, 3} w_k = -0.5e-150 * 1e400, whose product factor itself
    exceeds float64."""
    data = single_example([1e-150])
    theta = np.array([[1e200], [1e200], [1e-200], [1e-200]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        H = hessian(data, theta, "logistic")
    assert np.all(np.isfinite(H))
    # l''(0) = 1/4, l'(0) = -1/2; grad m = a (1e-200, 1e-200, 1e200, 1e200)
    np.testing.assert_allclose(H[2, 2], 0.25 * 1e100, rtol=1e-12)
    np.testing.assert_allclose(H[3, 3], 0.25 * 1e100, rtol=1e-12)
    np.testing.assert_allclose(H[2, 3], -0.5 * 1e-150 * 1e200 * 1e200, rtol=1e-12)
    np.testing.assert_allclose(H[0, 2], -0.5 * 1e-150, rtol=1e-12)  # w_2 w_4 = 1
    assert H[0, 1] == 0.0  # -0.5e-550 underflows
    assert np.isfinite(top_hessian_eigenvalue(data, theta))
    assert hessian_trace(data, theta) == pytest.approx(0.5e100, rel=1e-12)
    # L = 3, (1e200, 1e200, 1e-300), a = 1e-250: d m / d w_3 = a * 1e400 = 1e150 (its product
    # factor overflows), m = 1e-150
    data = single_example([1e-250])
    theta = np.array([[1e200], [1e200], [1e-300]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        H = hessian(data, theta, "logistic")
    np.testing.assert_allclose(H[2, 2], 0.25 * 1e300, rtol=1e-12)
    np.testing.assert_allclose(H[[0, 1], [2, 2]], -0.5 * 1e-50, rtol=1e-12)
    assert H[0, 0] == H[0, 1] == H[1, 1] == 0.0  # 1e-350 ** 2 and -0.5e-550 underflow


# ----------------------------------------------------------------------- large margins


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("margin", [1e1, 1e2, 7e2, 1e3, 1e10, 1e100, 1e300])
def test_large_margins_no_warnings(margin, loss):
    """Balanced L = 2 on D_mu with m = margin: values are tiny or 0, never a warning."""
    data = single_example([1.0, 2.0, 3.0, 4.0, 5.0])
    theta = np.full((2, 5), np.sqrt(margin / 15.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        H = hessian(data, theta, loss)
        tr = hessian_trace(data, theta, loss)
        top = top_hessian_eigenvalue(data, theta, loss)
    assert np.all(np.isfinite(H)) and np.isfinite(tr) and np.isfinite(top)
    assert tr >= 0
    # closed form of the trace: l''(m) ||grad m||^2, grad m = (w mu, w mu)
    lpp = np.exp(-margin) if loss == "exponential" else np.exp(-margin) / (1 + np.exp(-margin)) ** 2
    expected = lpp * 2 * theta[0, 0] ** 2 * 55.0
    if margin <= 100:
        assert tr > 0
        np.testing.assert_allclose(tr, expected, rtol=1e-10)
    else:
        assert tr <= max(expected, 1e-300)  # e^{-700}-tiny or underflowed to 0
    if margin >= 1e3:
        assert tr == 0.0 and top == 0.0


@pytest.mark.parametrize("loss", LOSSES)
def test_trace_correct_past_the_underflow_of_the_loss_weight(loss):
    """m = 801: l''(m) ~ e^{-801} underflows, but ||grad m||^2 ~ 1e200 and
    tr H = l''(m) ||grad m||^2 ~ e^{-801 + 200 log 10} ~ 1e-148 is representable."""
    data = single_example([1.0, 1.0])
    theta = np.array([[800.0, 1e-100], [1.0, 1e100]])  # beta = (800, 1)
    grad_sq = 1.0 + 1e200 + 800.0**2 + 1e-200
    expected = np.exp(-801.0 + np.log(grad_sq))  # l''(m) = e^{-m} (1 + O(e^{-m}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tr = hessian_trace(data, theta, loss)
        H = hessian(data, theta, loss)
    assert 1e-149 < expected < 1e-147
    np.testing.assert_allclose(tr, expected, rtol=1e-12)
    np.testing.assert_allclose(H[1, 1], expected, rtol=1e-12)  # d m / d w_11 = a w_21 = 1e100
    assert H[3, 3] == 0.0  # (1e-274)^2 underflows


def test_huge_parameters_with_underflowed_weights_are_zero():
    """L = 3, theta = 1e200: the products overflow (1e400) but the loss weights are exactly 0;
    the Hessian is 0, not 0 * inf = NaN."""
    data = single_example([1.0, 2.0])
    theta = np.full((3, 2), 1e200)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        H = hessian(data, theta)
        tr = hessian_trace(data, theta)
        top = top_hessian_eigenvalue(data, theta)
    assert np.all(H == 0.0) and tr == 0.0 and top == 0.0


def test_overflowing_entries_give_inf_top():
    """theta[:, 0] = (0, 1e200, 1e200): margin 0, but d m / d w_1 = a w_2 w_3 = 1e400."""
    data = single_example([1.0])
    theta = np.array([[0.0], [1e200], [1e200]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        H = hessian(data, theta)
    assert H[0, 0] == np.inf and not np.any(np.isnan(H))
    assert hessian_trace(data, theta) == np.inf
    assert top_hessian_eigenvalue(data, theta) == np.inf


def test_exact_zero_beats_infinite_loss_weight():
    """Exponential loss at m = -inf (beta_1 = -1e400): l' = -inf and sqrt(l'') = inf, yet an
    entry with an exact zero factor (w_21 = 0 kills d m / d w_11) is exactly 0, not
    inf * 0 = NaN; the others are +-inf and the top eigenvalue is +inf."""
    data = single_example([1.0, 2.0])
    theta = np.array([[-1e200, 0.5], [1e200, 0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        H = hessian(data, theta, "exponential")
    assert not np.any(np.isnan(H))
    assert H[1, 1] == 0.0 and H[1, 0] == 0.0 and H[1, 2] == 0.0
    assert H[0, 0] == np.inf and H[1, 3] == -np.inf  # l' a_2 prod_{k != 1, 2} = -inf
    assert top_hessian_eigenvalue(data, theta, "exponential") == np.inf
    assert hessian_trace(data, theta, "exponential") == np.inf


def test_top_is_algebraic_not_absolute():
    """L = 3, theta = c (1, 1, 1) per coordinate, c -> 0: the second term dominates, block
    g_j c (J - I) with g_j = -a_j / 2 (logistic, one example): eigenvalues -a_j c (once) and
    +a_j c / 2 (twice). So top = c max a_j / 2 while the largest |eigenvalue| is twice that."""
    c = 1e-3
    data = single_example([1.0, 3.0])
    theta = np.full((3, 2), c)
    top = top_hessian_eigenvalue(data, theta)
    eig = np.linalg.eigvalsh(hessian(data, theta))
    np.testing.assert_allclose(top, c * 3.0 / 2, rtol=1e-5)
    np.testing.assert_allclose(eig[0], -c * 3.0, rtol=1e-5)
    np.testing.assert_allclose(
        np.sort(eig), np.sort(c * np.array([-1, 0.5, 0.5, -3, 1.5, 1.5])), rtol=1e-5
    )


# ------------------------------------------------------------------------ input validation


def test_input_validation():
    data = single_example([1.0, 2.0])
    good = np.ones((2, 2))
    for f in (hessian, hessian_trace, top_hessian_eigenvalue):
        for bad in (
            np.ones((2, 3)),
            np.ones(2),
            np.ones((1, 2, 2)),
            np.ones((0, 2)),
            [[1.0, np.nan], [1.0, 1.0]],
            [[1.0, np.inf], [1.0, 1.0]],
            "theta",
            None,
        ):
            with pytest.raises(ValueError, match="theta"):
                f(data, bad)
        for bad_loss in ("squared", "no-such-loss", 1):  # squared: classification data
            with pytest.raises(ValueError, match="loss"):
                f(data, good, bad_loss)
        for bad_data in (None, np.ones((1, 2)), (np.ones((1, 2)), np.ones(1))):
            with pytest.raises(ValueError, match="data"):
                f(bad_data, good)
    traj = simulate(data, "gd", depth=2, alpha=0.4, t_max=1.0, n_points=5)
    with pytest.raises(ValueError, match="traj"):
        sharpness_along("traj", data)
    with pytest.raises(ValueError, match="data"):
        sharpness_along(traj, single_example([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="data"):
        sharpness_along(traj, None)
    with pytest.raises(ValueError, match="loss"):
        sharpness_along(traj, data, "hinge")


# --------------------------------------------------------------------- along a trajectory


def test_sharpness_along_matches_pointwise():
    data = single_example([1, 2, 3, 4, 5])
    traj = simulate(data, "gd", depth=2, alpha=0.4, t_max=5)
    trace, top = sharpness_along(traj, data)
    T = len(traj.t)
    assert trace.shape == top.shape == (T,)
    assert np.all(np.isfinite(trace)) and np.all(np.isfinite(top))
    for k in range(T):
        theta = traj.theta[k]
        assert trace[k] == pytest.approx(hessian_trace(data, theta), rel=1e-12, abs=1e-300)
        assert top[k] == pytest.approx(top_hessian_eigenvalue(data, theta), rel=1e-12, abs=1e-300)
    # independent value at tau = 0 (theta = 0.4 everywhere): l''(m) * 2 alpha^2 sum mu^2,
    # m = alpha^2 sum mu = 2.4
    m = 0.16 * 15
    assert trace[0] == pytest.approx(np.exp(-m) / (1 + np.exp(-m)) ** 2 * 2 * 0.16 * 55, rel=1e-12)
    # GD grows the margin: sharpness decays to (underflowed) 0 at the end of the run
    assert trace[-1] < 1e-100 * trace[0] and top[-1] <= top[0]


def test_sharpness_along_nan_where_theta_overflows():
    """GD at L = 2 on D_mu: a_j = alpha e^{mu_j tau}, so a_5 passes 1e308 at
    tau = (709.78 - log 0.4) / 5 ~ 142; the values there are NaN, before they are finite
    (and 0 long before, once the margin passes ~745)."""
    data = single_example([1, 2, 3, 4, 5])
    traj = simulate(data, "gd", depth=2, alpha=0.4, t_max=200.0, n_points=41)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trace, top = sharpness_along(traj, data)
    overflow = np.any(traj.log_abs_theta > np.log(np.finfo(float).max), axis=(1, 2))
    assert overflow[-1] and not overflow[0]
    assert np.all(np.isnan(trace[overflow])) and np.all(np.isnan(top[overflow]))
    assert np.all(np.isfinite(trace[~overflow])) and np.all(np.isfinite(top[~overflow]))
    late = ~overflow & (traj.tau > 10)
    assert np.any(late) and np.all(trace[late] == 0.0) and np.all(top[late] == 0.0)


@pytest.mark.parametrize("loss", LOSSES)
def test_sharpness_along_unbalanced_depth_three(loss):
    """A full (non-reduced) L = 3 run on two examples, signed unbalanced init."""
    data = Dataset(np.array([[1.0, 2.0, -0.5], [0.5, -1.0, 2.0]]), np.array([1.0, -1.0]))
    alpha = np.array([[0.3, -0.2, 0.1], [0.25, 0.2, -0.15], [0.2, 0.1, 0.3]])
    traj = simulate(
        data, "l2-sam", depth=3, alpha=alpha, rho=0.05, t_max=2.0, n_points=9, loss=loss
    )
    trace, top = sharpness_along(traj, data, loss)
    for k in range(len(traj.t)):
        theta = traj.theta[k]
        np.testing.assert_allclose(
            trace[k], np.trace(fd_hessian(data, theta, loss)), rtol=1e-6, atol=1e-12
        )
        assert top[k] == pytest.approx(top_hessian_eigenvalue(data, theta, loss), rel=1e-12)
