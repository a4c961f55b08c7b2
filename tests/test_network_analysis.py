"""The analyses of the network experiments (``analysis.networks``) against closed forms and
independent computations, and the experiments' findings as regression checks.

* Band shares of the output: for the linear CNN ``f(x) = <beta, x>``, ``beta_j = f(e_j)``
  read off the network's outputs on the unit vectors (not its input gradients), and, in the
  Fourier setting of ``flows/networks/cnn.py``, the depth-2 diagonal network's coefficients
  from ``flows.iterate``: ``beta = sum_k s_k W_k V_k e_k`` in the orthonormal cosine basis
  ``e_k``, so ``|rfft(beta)|_k = |W_k V_k| s_k^2`` (``s_k^2 = N/2``, or ``N`` at 0 and N/2).
* Grad-CAM (Selvaraju et al. 2017, eq. 1-2): ``a_c = (1/Q) sum_q ds/dA_qc``,
  ``M = ReLU(sum_c a_c A_c)``; with the pooled read-out ``f = sum_c a_c mean_q A_qc`` it is
  the class activation map ``ReLU(y sum_c (a_c / Q) A_qc)``.
"""

from __future__ import annotations

import numpy as np
import pytest

from analysis.networks import (
    background_share,
    band_shares,
    banded_regime,
    filter_shares,
    gradcam_maps,
)
from analysis.networks.runs import cnn_banded, cnn_digits
from flows import Dataset, iterate
from flows.networks import TwoLayerCNN, banded_data, train

N = 20
BANDS = ((1, 2), (3, 4), (5, 6), (7, 8))


def cosine_basis(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The orthonormal even basis (columns: 1/sqrt(n), sqrt(2/n) cos(2 pi k t/n), (-1)^t/sqrt(n))
    and the factors ``s_k`` of the Fourier form of the linear CNN."""
    t = np.arange(n)
    cols = [np.ones(n) / np.sqrt(n)]
    cols += [np.sqrt(2.0 / n) * np.cos(2 * np.pi * k * t / n) for k in range(1, n // 2)]
    cols.append((-1.0) ** t / np.sqrt(n))
    s = np.full(n // 2 + 1, np.sqrt(n / 2.0))
    s[[0, -1]] = np.sqrt(n)
    return np.array(cols).T, s


def test_band_shares_of_the_linear_cnn_are_those_of_beta():
    """Linear CNN: the band shares are those of ``|rfft(beta)|`` with ``beta_j = f(e_j)``, and
    ``total = n ||rfft(beta)||_1`` (every example has the same input gradient); to rounding."""
    data = banded_data(n=6, length=N, noise=0.4)
    model = TwoLayerCNN(N, N, channels=2, activation="linear")
    theta = model.initial_parameters(0.7, seed=3)
    beta = model.outputs(theta, np.eye(N))
    spectrum = np.abs(np.fft.rfft(beta))
    parts = [spectrum[list(b)].sum() for b in BANDS]
    parts.append(spectrum.sum() - sum(parts))
    shares, total = band_shares(model, theta, data.X, data.bands)
    np.testing.assert_allclose(shares, np.array(parts) / spectrum.sum(), rtol=1e-12)
    assert total == pytest.approx(6 * spectrum.sum(), rel=1e-12)


@pytest.mark.parametrize("algorithm, hp", [("gd", {}), ("l2-sam", {"rho": 0.3})])
def test_band_shares_match_the_diagonal_network_in_the_fourier_basis(algorithm, hp):
    """Along a run of the one-filter linear CNN from the balanced cosine-basis init, the band
    shares equal the shares of ``|W_k V_k| s_k^2`` of ``flows.iterate`` on the features
    ``s_k xi_k`` (1e-10: the two runs agree to ~1e-15)."""
    data = banded_data(n=2, length=N)
    E, s = cosine_basis(N)
    model = TwoLayerCNN(N, N, channels=1, activation="linear")
    alpha = 0.3
    theta0 = np.concatenate([E @ np.full(E.shape[1], alpha)] * 2)
    run = train(
        model, data.X, data.y, theta0, algorithm, eta=0.02, steps=200, record_every=50, **hp
    )
    ref = iterate(Dataset((data.X @ E) * s, data.y), algorithm, 2, alpha, eta=0.02, steps=200,
                  record_every=50, **hp)  # fmt: skip
    for theta, layers in zip(run.theta, ref.theta, strict=True):
        weights = np.abs(layers[0] * layers[1]) * s**2  # |rfft(beta)| at k = 0 .. N/2
        parts = [weights[list(b)].sum() for b in BANDS]
        parts.append(weights.sum() - sum(parts))
        shares, _ = band_shares(model, theta, data.X, data.bands)
        np.testing.assert_allclose(shares, np.array(parts) / weights.sum(), rtol=1e-10)


def test_filter_shares_of_pure_cosines():
    """A filter that is a cosine at a frequency of band k puts all its energy there; two
    channels at bands 1 and 3 with amplitudes 1 and 2 split it 1 : 4 (energies)."""
    model = TwoLayerCNN(N, N, channels=2, activation="relu")
    t = np.arange(N)
    w = np.array([np.cos(2 * np.pi * 1 * t / N), 2 * np.cos(2 * np.pi * 6 * t / N)])
    theta = np.concatenate([w.ravel(), np.ones(model.size - w.size)])
    np.testing.assert_allclose(filter_shares(model, theta, BANDS), [0.2, 0, 0.8, 0, 0], atol=1e-12)


def regime_of(leads: list[int], totals=None, loss=None, K: int = 4):
    """``banded_regime`` of a run led by the bands ``leads`` in turn (one time unit each)."""
    T = 10 * len(leads)
    t = np.arange(T) * 0.1
    shares = np.full((T, K + 1), 0.1)
    for i, band in enumerate(leads):
        shares[10 * i : 10 * i + 10, band] = 0.5
    if totals is None:  # the spectrum grows 10-fold at t = 0.2: the leaders count from there
        totals = np.concatenate([[1.0, 5.0], np.full(T - 2, 20.0)])
    loss = np.full(T, 1e-3) if loss is None else loss
    return banded_regime(t, shares, totals, loss)


def test_band_shares_refuse_bands_that_are_not_a_partition():
    """A negative frequency (it read the spectrum from the end), overlapping bands (their total
    changed: one frequency counted twice), a frequency past N/2 (an IndexError), a band that is
    not a sequence, and NaN in X (used silently) are ValueErrors naming bands or X; over valid
    bands the shares sum to 1 and the total is the same whatever the bands."""
    data = banded_data(n=4, length=N, noise=0.3)
    model = TwoLayerCNN(N, N, channels=1, activation="linear")
    theta = model.initial_parameters(1.0)
    for bad in (((-1,), (1, 2)), ((1, 2), (2, 3)), ((1, 1),), ((N // 2 + 1,),), ((1.5,),)):
        with pytest.raises(ValueError, match="bands"):
            band_shares(model, theta, data.X, bad)
        with pytest.raises(ValueError, match="bands"):
            filter_shares(model, theta, bad)
    for bad in (None, 3, "12", (), ((),), ({1: 2},), (None,), np.array(1)):
        with pytest.raises(ValueError, match="bands"):
            band_shares(model, theta, data.X, bad)
    X = data.X.copy()
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="X"):
        band_shares(model, theta, X, BANDS)
    totals = []
    for bands in (BANDS, ((0,), (N // 2,)), [[1, 2, 3]], np.array([[4, 5], [6, 7]])):
        shares, total = band_shares(model, theta, data.X, bands)
        assert shares.sum() == pytest.approx(1.0, rel=1e-12)
        totals.append(total)
    np.testing.assert_allclose(totals, totals[0], rtol=1e-12)


def test_banded_regime_refuses_what_it_cannot_read():
    """Empty records (an IndexError), a single column, NaN shares, a zero initial spectrum and
    mismatched lengths are ValueErrors naming the parameter."""
    T = 5
    t, shares = np.linspace(0, 1, T), np.full((T, 3), 1 / 3)
    totals, loss = np.ones(T), np.full(T, 0.1)
    with pytest.raises(ValueError, match="shares"):
        banded_regime([], np.zeros((0, 3)), [], [])
    with pytest.raises(ValueError, match="shares"):
        banded_regime(t, np.ones((T, 1)), totals, loss)
    with pytest.raises(ValueError, match="shares"):
        banded_regime(t, np.where(np.eye(T, 3) > 0, np.nan, shares), totals, loss)
    with pytest.raises(ValueError, match="totals"):
        banded_regime(t, shares, np.zeros(T), loss)
    with pytest.raises(ValueError, match="totals"):
        banded_regime(t, shares, np.ones(T + 1), loss)
    with pytest.raises(ValueError, match="loss"):
        banded_regime(t, shares, totals, np.full(T, np.nan))
    with pytest.raises(ValueError, match="t"):
        banded_regime(t[::-1], shares, totals, loss)
    assert banded_regime(t, shares, totals, loss).regime == "minor at the end"


def test_banded_regime_classifies_the_leader_sequences():
    """Collapse (the spectrum shrinks, the loss stays near log 2), major first, sequential and
    a minor band at the end, with the minor-lead durations of the construction."""
    T = 20
    collapse = regime_of([0, 0], totals=np.geomspace(1, 0.1, T), loss=np.full(T, 0.69))
    assert (collapse.regime, collapse.minor_lead) == ("collapse", 0.0)
    assert regime_of([3, 3, 3]).regime == "major first"
    seq = regime_of([0, 1, 3])
    assert seq.regime == "sequential" and seq.leaders == (0, 1, 3)
    assert seq.start == pytest.approx(0.2) and seq.minor_lead == pytest.approx(1.8)
    late = regime_of([3, 1, 2])
    assert late.regime == "major first" and late.minor_lead == pytest.approx(1.9)
    assert regime_of([0, 1, 2]).regime == "minor at the end"


def test_gradcam_with_a_pooled_readout_is_the_class_activation_map():
    """Pooled read-out: ``M = ReLU(y sum_c a_c A_qc / Q)`` (CAM), the activations computed
    here from the patches and filters."""
    rng = np.random.default_rng(0)
    model = TwoLayerCNN((8, 8), 3, channels=3, activation="relu", padding="same", readout="pooled")
    theta = model.initial_parameters(1.0, seed=1)
    X, y = rng.random((4, 64)), np.array([1.0, -1.0, 1.0, -1.0])
    w, a = model.split(theta)
    A = np.maximum(model.patches(X) @ w.T, 0.0)  # (n, Q, C)
    expected = np.maximum(y[:, None] * (A @ a) / 64, 0.0)
    np.testing.assert_allclose(gradcam_maps(model, theta, X, y), expected, rtol=1e-12, atol=1e-15)


def test_gradcam_weights_are_averaged_score_gradients():
    """Linear read-out: the channel weights are the averages over positions of ``ds/dA``,
    here read off by finite differences of the score in the feature maps (the score is linear
    in them: exact to rounding), and the map is the ReLU of the weighted sum."""
    rng = np.random.default_rng(2)
    model = TwoLayerCNN((6, 6), 3, channels=2, activation="relu", padding="valid")
    theta = model.initial_parameters(1.0, seed=4)
    X, y = rng.random((3, 36)), np.array([1.0, -1.0, 1.0])
    _, A = model.feature_maps(theta, X)
    _, v = model.split(theta)

    def score(i, maps):
        return y[i] * np.sum(v * maps)

    for i in range(3):
        grads = np.zeros_like(A[i])
        for q, c in np.ndindex(*A[i].shape):
            bumped = A[i].copy()
            bumped[q, c] += 1.0
            grads[q, c] = score(i, bumped) - score(i, A[i])
        expected = np.maximum(A[i] @ grads.mean(axis=0), 0.0)
        np.testing.assert_allclose(gradcam_maps(model, theta, X, y)[i], expected, atol=1e-12)


def test_background_share():
    """Mass of the map on pixels below the threshold over its total; NaN for a zero map."""
    X = np.array([[0.0, 0.1, 0.6, 1.0], [0.0, 0.0, 0.0, 1.0]])
    maps = np.array([[1.0, 1.0, 2.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    out = background_share(maps, X, 0.25)
    assert out[0] == pytest.approx(0.5) and np.isnan(out[1])


BANDED = {
    "n": 8,
    "length": N,
    "bands": [list(b) for b in BANDS],
    "strengths": [1.0, 2.0, 3.0, 4.0],
    "noise": 0.5,
    "data_seed": 0,
    "activation": "relu",
    "channels": 2,
    "eta": 0.01,
    "steps": 800,
    "clock": "rescaled",
    "records": 100,
    "rho": 0.2,
}


def banded_regime_of(algorithm: str, alpha: float, seed: int = 0):
    res = cnn_banded({**BANDED, "algorithm": algorithm, "alpha": alpha, "seed": seed})
    return banded_regime(res["t"], res["shares"], res["totals"], res["loss"])


def test_relu_cnn_on_banded_data_shows_the_three_regimes():
    """The figure's finding (``cnn_banded``, seed 0): l2-SAM collapses at alpha = 0.1, leads
    with the most minor band for more than a unit of tau at alpha = 0.2 before the major band
    takes over (GD from the same init: the major band from the start), and leads with the
    major band from the start at alpha = 1.6."""
    assert banded_regime_of("l2-sam", 0.1).regime == "collapse"
    middle = banded_regime_of("l2-sam", 0.2)
    assert middle.regime == "sequential" and middle.leaders[0] == 0 and middle.leaders[-1] == 3
    assert middle.minor_lead > 1.0
    gd = banded_regime_of("gd", 0.2)
    assert gd.regime == "major first" and gd.minor_lead == 0.0
    assert banded_regime_of("l2-sam", 1.6).regime == "major first"


@pytest.mark.slow  # 1.1-1.7 s (six more trainings); the regimes themselves: the test above
def test_the_banded_regimes_do_not_hang_on_the_step_or_the_noise():
    """The same three regimes with half the step (twice the steps) and without noise: the
    leader sequence of the sequential run is an effect of the flow, not of the scheme."""
    for change in ({"eta": 0.005, "steps": 1600, "records": 200}, {"noise": 0.0}):
        runs = {
            a: cnn_banded({**BANDED, **change, "algorithm": "l2-sam", "alpha": a, "seed": 0})
            for a in (0.1, 0.2, 1.6)
        }
        regimes = {
            a: banded_regime(r["t"], r["shares"], r["totals"], r["loss"]) for a, r in runs.items()
        }
        assert regimes[0.1].regime == "collapse", change
        assert regimes[0.2].regime == "sequential" and regimes[0.2].minor_lead > 1.0, change
        assert regimes[1.6].regime == "major first", change


@pytest.mark.slow
def test_sam_attends_more_to_the_background_just_above_its_collapse():
    """The Grad-CAM figure's finding on 4 vs 9 at alpha = 0.2, three seeds: at training loss
    0.1, SAM's maps put more of their mass on the background than GD's from the same init."""
    base = {"a": 4, "b": 9, "split_seed": 0, "kernel": 3, "channels": 4, "eta": 0.5,
            "steps": 300, "record_every": 10, "thresholds": [0.25], "n_maps": 1,
            "alpha": 0.2, "rho": 0.2}  # fmt: skip

    def at_loss(res):
        k = np.flatnonzero(res["loss"] <= 0.1)[0]
        return np.nanmean(res["background"][k, 0])

    for seed in range(3):
        gd = cnn_digits({**base, "algorithm": "gd", "seed": seed})
        sam = cnn_digits({**base, "algorithm": "l2-sam", "seed": seed})
        assert at_loss(sam) > at_loss(gd) + 0.03, seed
