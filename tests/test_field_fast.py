"""The float-range fast paths of the compiled field (:mod:`flows.compiled._field_kernels`)
against independent log-form computations, on both sides of where they hand over.

* The example weights in floats (:func:`weights_into`: ``|l'(u_i)|`` itself where the largest
  lies in ``(DIRECT_LOW, DIRECT_HIGH)``) against a log-sum-exp of ``log|l'(u_i)|`` written here
  with numpy and scipy: to 1e-12 wherever both apply, and across the boundary (margins around
  600, where a logistic or exponential ``|l'|`` leaves the direct range).
* ``sinh`` with one exponential against numpy's (libm's).
* The branch-free chart map against the charts' own velocity in signed-log form.
* Runs whose margins cross 600, on both backends.
* Powers of signs by products (:func:`flows.fused.sign_power`) against numpy's ``**``, bit for
  bit, for every entry a sign array can hold.
* The float-range test's shortcut (powers against bounds moved inward) against the test by
  logarithms written here, at sizes on both sides of every bound and at its ulps; and the
  finiteness of ``log ||grad L||`` without its logarithms against the logarithms.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp

from flows import Dataset, simulate
from flows.charts import AsinhChart, LogChart
from flows.signedlog import SignedLog

kernels = pytest.importorskip("flows.compiled._field_kernels")

LOSS_IDS = {"logistic": 0, "exponential": 1, "squared": 2}


def log_form(u: np.ndarray, loss: str, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """``p``, ``G = p Z`` and ``log c`` by log-sum-exp of ``log|l'(u_i)|`` (independent of the
    package): logistic ``-log(1 + e^u)``, exponential ``-u``, squared ``log|u|``."""
    with np.errstate(divide="ignore"):
        log_w = {
            "logistic": -np.logaddexp(0.0, u),
            "exponential": -u,
            "squared": np.log(np.abs(u)),
        }[loss]
    sign = -np.sign(u) if loss == "squared" else np.ones_like(u)
    total = logsumexp(log_w)
    p = sign * np.exp(log_w - total)
    return p, p @ Z, total - np.log(u.size)


def fast(u: np.ndarray, loss: str, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, bool]:
    """:func:`kernels.weights_into` on copies: ``(p, G, log c, direct)``, ``direct`` whether the
    largest ``|l'(u_i)|`` is in the kernel's direct range."""
    size, p, direction = np.empty(u.size), np.empty(u.size), np.empty(Z.shape[1])
    log_c = kernels.weights_into(u.copy(), Z, LOSS_IDS[loss], size, p, direction)
    largest = max(kernels.abs_derivative(v, LOSS_IDS[loss]) for v in u)
    return p, direction, log_c, bool(kernels.DIRECT_LOW < largest < kernels.DIRECT_HIGH)


def assert_same_weights(u: np.ndarray, loss: str, Z: np.ndarray) -> bool:
    """The kernel's weights equal :func:`log_form`'s: ``p`` to 1e-12 relative, ``G`` to 1e-12 of
    its terms' scale ``max|z_ij|``, ``log c`` to 1e-12 absolute (``c`` relative); returns
    whether the kernel took its direct form."""
    p, direction, log_c, direct = fast(u, loss, Z)
    want_p, want_direction, want_log_c = log_form(u, loss, Z)
    np.testing.assert_allclose(p, want_p, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(direction, want_direction, rtol=0, atol=1e-12 * np.abs(Z).max())
    assert log_c == pytest.approx(want_log_c, rel=1e-14, abs=1e-12)
    return direct


@pytest.mark.parametrize("loss", sorted(LOSS_IDS))
def test_direct_weights_equal_the_log_form(loss):
    """Where the largest ``|l'(u_i)|`` is in the direct range, the weights in floats equal the
    log-sum-exp ones to 1e-12, at loss arguments of sizes 1e-3 to 1e2 (50 examples)."""
    rng = np.random.default_rng(5)
    Z = rng.standard_normal((50, 7))
    for scale in (1e-3, 1.0, 30.0, 100.0):
        u = scale * rng.standard_normal(50)
        assert assert_same_weights(u, loss, Z)


@pytest.mark.parametrize(
    ("loss", "shifts"),
    [
        ("logistic", (590.0, 599.0, 601.0, 700.0, 800.0)),  # |l'| = e^-u past e^-600
        ("exponential", (-800.0, -710.0, -601.0, -599.0, 599.0, 601.0, 800.0)),  # both ends
    ],
)
def test_weights_across_the_direct_range(loss, shifts):
    """Loss arguments shifted past the ends of the direct range (the smallest margin at 600
    for both losses, -600 and -709.8, where ``e^-u`` overflows, for the exponential loss): the
    kernel changes form and stays within 1e-12 of the log form on both sides."""
    rng = np.random.default_rng(6)
    Z = rng.standard_normal((40, 5))
    spread = np.abs(rng.standard_normal(40)) * 20.0
    spread -= spread.min()
    forms = set()
    for shift in shifts:
        forms.add(assert_same_weights(shift + spread, loss, Z))
    assert forms == {True, False}


def test_exact_interpolator_weights():
    """Every residual 0: the log form's ``p = 0``, ``G = 0``, ``log c = -inf``."""
    Z = np.ones((4, 3))
    p, direction, log_c, direct = fast(np.zeros(4), "squared", Z)
    assert not direct and log_c == -np.inf
    assert not p.any() and not direction.any()


def test_abs_derivative_is_the_exponential_of_the_log_form():
    """``|l'(u)|`` against ``exp(log|l'(u)|)`` of the kernels, u from -700 to 700."""
    for loss, loss_id in LOSS_IDS.items():
        for u in np.linspace(-700.0, 700.0, 1401):
            got = kernels.abs_derivative(u, loss_id)
            want = np.exp(kernels.log_abs_derivative(u, loss_id))
            assert got == pytest.approx(want, rel=1e-12, abs=1e-320), (loss, u)


def test_sinh_equals_libm():
    """:func:`kernels.sinh` within 4e-16 of numpy's, across ``|z| = 1`` (its two forms), at
    0, -0, subnormals and up to 709; inf from 709.8, as far outside the float range as libm's
    1e308."""
    z = np.concatenate(
        [
            np.linspace(-3.0, 3.0, 60001),
            np.nextafter(1.0, 0.0) * np.array([1.0, -1.0]),
            np.array([1.0, -1.0, 1e-300, -5e-324, 1e-8, 20.0, 300.0, -709.0]),
        ]
    )
    got = np.array([kernels.sinh(v) for v in z])
    np.testing.assert_allclose(got, np.sinh(z), rtol=4e-16, atol=0)
    assert np.signbit(kernels.sinh(-0.0)) and kernels.sinh(0.0) == 0.0
    assert kernels.sinh(710.0) == np.inf and kernels.sinh(-710.0) == -np.inf


@pytest.mark.parametrize("log_chart", [False, True])
@pytest.mark.parametrize("original", [False, True])
def test_chart_map_equals_the_charts(log_chart, original):
    """``d(z, tau)/ds`` of :func:`kernels.chart_map_into` against the chart's velocity of the
    signed-log field ``(dtau/ds) F`` (:class:`AsinhChart`, :class:`LogChart`), held entries 0,
    ``|w|`` from 1e-200 to 1e200 (past 1e150, where the asinh map's square would overflow)."""
    rng = np.random.default_rng(7)
    shape = (2, 30)
    w = np.sign(rng.standard_normal(shape)) * np.exp(rng.uniform(-460.0, 460.0, shape))
    velocity = rng.standard_normal(shape)
    held = rng.random(shape) < 0.2
    log_c, delta = -0.7, 0.3
    out = np.empty(w.size + 1)
    assert kernels.chart_map_into(velocity, log_c, w, held, original, log_chart, delta, out)
    speed = np.exp(log_c) if original else 1.0
    field = speed * velocity
    dw = SignedLog(np.sign(field), np.log(np.abs(field)))
    if log_chart:
        chart = LogChart(np.sign(w))
        want = chart.velocity(dw, np.log(np.abs(w)))
    else:
        chart = AsinhChart(delta)
        want = chart.velocity(dw, chart.coordinates(SignedLog(np.sign(w), np.log(np.abs(w)))))
    want = np.where(held, 0.0, want).ravel()
    np.testing.assert_allclose(out[:-1], want, rtol=1e-12, atol=0)
    assert out[-1] == speed


@pytest.mark.parametrize("loss", ["logistic", "exponential"])
def test_run_across_margin_600(loss):
    """A run whose smallest margin starts at 590 and passes 600 (where the compiled field
    hands its weights to the log form) ends as on the numpy backend (the log form
    throughout): status 0, log|beta| to 1e-9."""
    rng = np.random.default_rng(3)
    X = rng.uniform(0.2, 1.0, (6, 3))
    data = Dataset(X, np.ones(6))
    alpha = np.sqrt(590.0 / X.sum(axis=1).min())
    runs = {
        backend: simulate(
            data, "gd", 2, alpha, t_max=0.05, clock="rescaled", loss=loss, backend=backend
        )
        for backend in ("numba", "numpy")
    }
    for run in runs.values():
        assert run.status == 0
        margins = (run.sign_beta * np.exp(run.log_abs_beta)) @ data.signed_features.T
        assert margins[0].min() == pytest.approx(590.0) and margins[-1].min() > 610.0
    assert runs["numba"].backend == "numba"
    np.testing.assert_allclose(
        runs["numba"].log_abs_beta, runs["numpy"].log_abs_beta, rtol=1e-9, atol=0
    )


def test_logistic_loss_equals_logaddexp():
    """The logistic loss of :data:`flows.model.LOSSES` (``max(-u, 0) + log1p(e^-|u|)``) against
    ``numpy.logaddexp(0, -u)``: within 1e-15 relative from -800 to 800, exact at +-0 and +-inf,
    NaN at NaN."""
    from flows.model import LOSSES

    value = LOSSES["logistic"].value
    u = np.concatenate([np.linspace(-800.0, 800.0, 16001), [0.0, -0.0, np.inf, -np.inf]])
    np.testing.assert_allclose(value(u), np.logaddexp(0.0, -u), rtol=1e-15, atol=0)
    assert np.isnan(value(np.array([np.nan]))).all()


def test_abs_features_once_per_data_set():
    """The ``|z_ij|`` of the stationary event are made once per data set and shared by the
    runs on it, compiled or not (:func:`flows.data.abs_signed_features`), and freed with the
    data set."""
    import gc
    import weakref

    from flows.data import abs_signed_features

    X = np.random.default_rng(8).standard_normal((20, 30))
    data = Dataset(X, X[:, 0], task="regression")
    runs = [simulate(data, "gd", 2, 0.1, t_max=1.0, backend=b) for b in ("numba", "numpy")]
    assert runs[0].status == runs[1].status == 0
    kept = abs_signed_features(data)
    np.testing.assert_array_equal(kept, np.abs(X))
    simulate(data, "gd", 2, 0.1, t_max=1.0, backend="numba")
    assert abs_signed_features(data) is kept
    freed = weakref.ref(kept)
    del data, kept, runs
    gc.collect()
    assert freed() is None


@pytest.mark.parametrize("m", range(1, 13))
def test_sign_power_is_numpys_power_bit_for_bit(m):
    """``sign_power(s, m)`` and ``s ** m`` (libm's ``pow`` per entry) give the same bits on
    +-1, +-0 and NaN of either sign, and a new array."""
    from flows.fused import sign_power

    signs = np.array([[-1.0, 0.0, -0.0, 1.0], [np.nan, -np.nan, -1.0, 1.0]])
    out = sign_power(signs, m)
    assert out.tobytes() == (signs**m).tobytes()
    assert out is not signs and not np.shares_memory(out, signs)


def range_by_logs(largest: float, smallest: float, depth: int, small_matters: bool) -> bool:
    """:meth:`flows.fused.FusedField._float_rows` of one point by logarithms (numpy's):
    ``depth log largest`` in ``(-150, 150)`` and, if ``small_matters``, ``depth log smallest``
    above -600."""
    with np.errstate(divide="ignore", invalid="ignore"):
        top, bottom = depth * np.log(largest), depth * np.log(smallest)
    return bool(-150.0 < top < 150.0 and (not small_matters or bottom > -600.0))


@pytest.mark.parametrize("depth", [1, 2, 3, 4, 7])
def test_float_range_shortcut_equals_the_logarithms(depth):
    """:func:`kernels.sizes_in_float_range` at ``limit = 150`` (its shortcut) against
    :func:`range_by_logs`: sizes at each bound ``exp(+-150 / L)``, ``exp(-600 / L)``, 40 ulps
    around it and a relative 1e-9 and 1e-6 off, and far inside, outside, 0, inf and NaN."""
    assert kernels.FLOAT_RANGE == 150.0
    sizes = [0.0, 5e-324, 1e-300, 1e-30, 0.5, 1.0, 3.0, 1e30, 1e300, np.inf, np.nan]
    for edge in (150.0 / depth, -150.0 / depth, -600.0 / depth):
        at = np.exp(edge)
        sizes += [at * (1 + f) for f in (-1e-6, -1e-9, 1e-9, 1e-6)]
        x = at
        for _ in range(20):
            x = np.nextafter(x, 0.0)
        for _ in range(40):
            sizes.append(x)
            x = np.nextafter(x, np.inf)
    inside = 0
    for largest in sizes:
        for smallest in (0.0, 1e-300, np.exp(-600.0 / depth), 1.0, largest):
            for small_matters in (False, True):
                got = kernels.sizes_in_float_range(largest, smallest, depth, 150.0, small_matters)
                assert got == range_by_logs(largest, smallest, depth, small_matters), (
                    largest, smallest, small_matters,
                )  # fmt: skip
                inside += got
    assert 0 < inside < 10 * len(sizes)  # both answers occur


def test_log_norm_finite_equals_the_logarithms():
    """:func:`kernels.log_norm_finite` against ``isfinite`` of :func:`kernels.log_norm_from`
    (``log norm + top + log total - log n``) for norms, tops and totals that are 0, subnormal,
    ordinary, the largest float, inf or NaN, with the norm positive, as where it is asked."""
    values = [0.0, 5e-324, 1e-300, 1.0, 7.5, 1e300, 1.7976931348623157e308, np.inf, np.nan]
    tops = values + [-v for v in values[1:]]
    for norm in values[1:]:
        for top in tops:
            for total in (1.0, 3.0, 40.0, 1e-260 * 40, np.inf, np.nan):
                want = np.isfinite(kernels.log_norm_from(norm, top, total, 40))
                assert kernels.log_norm_finite(norm, top, total) == want, (norm, top, total)
