"""How much each frequency band contributes to a CNN trained on banded data
(:func:`flows.networks.banded_data`), and which regime of the diagonal network's theory a run
is in.

* Output: the spectrum of the input gradients ``grad_x f(x_i)``. For the linear CNN
  ``f(x) = <beta, x>`` this is the spectrum of ``beta``; with one full-width circular filter
  on even data it is ``|beta_k|`` of the equivalent diagonal network up to one factor for
  every frequency in ``1 .. N/2 - 1``, so the band shares are the diagonal shares
  ``|beta_j| / ||beta||_1`` summed over each band.
* Filters: the spectral energy ``sum_c |w_c_hat(f)|^2`` of the first-layer filters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis._checks import cnn_inputs, cnn_parameters, numeric_array, time_axis
from analysis.amplification import leader_sequence
from flows.networks import TwoLayerCNN
from flows.networks.banded import band_spectrum, band_sums


def band_shares(
    model: TwoLayerCNN, theta: np.ndarray, X: np.ndarray, bands
) -> tuple[np.ndarray, float]:
    """``(shares, total)``: the shares of the summed input-gradient spectrum
    ``sum_i |grad_x f(x_i)_hat(f)|`` per band, the last entry every other frequency (K + 1,),
    and its total ``sum_i ||grad_x f(x_i)_hat||_1``.

    ``bands``: disjoint, non-empty sets of frequencies in ``0 .. N/2``
    (:func:`flows.networks.banded.check_bands`), so the shares sum to 1 and the total does
    not depend on them. ``ValueError`` naming model (not a :class:`~flows.networks.TwoLayerCNN`),
    theta, X ((n, N) finite) or bands."""
    theta, X = cnn_inputs(model, theta, X)
    spectrum = band_spectrum(model.input_gradients(theta, X), bands).sum(axis=0)
    total = float(spectrum.sum())
    return spectrum / total if total > 0 else np.full(spectrum.shape, np.nan), total


def filter_shares(model: TwoLayerCNN, theta: np.ndarray, bands) -> np.ndarray:
    """Shares of the filters' spectral energy ``sum_c |w_c_hat(f)|^2`` per band (K + 1,), each
    filter zero-padded to the signal length (its DFT then samples the same frequencies);
    ``bands`` and the ``ValueError`` as for :func:`band_shares`."""
    theta = cnn_parameters(model, theta)
    w, _ = model.split(theta)
    energy = np.abs(np.fft.rfft(w, n=model.n_inputs, axis=1)) ** 2
    parts = band_sums(energy.sum(axis=0), bands)
    total = parts.sum()
    return parts / total if total > 0 else np.full(parts.shape, np.nan)


#: The learned part of the predictor dominates its initial value once the input-gradient
#: spectrum has grown by this factor: the leaders are read from there on.
GROWTH = 10.0


@dataclass(frozen=True)
class BandedRegime:
    """The regime of a banded run, in the terms of the diagonal network's three regimes.

    ``regime``: ``"collapse"`` (the output shrinks: the input-gradient spectrum ends below its
    start and the loss stays near ``log 2``), ``"major first"`` (the first band to lead once
    the learned part dominates is the major one), ``"sequential"`` (a minor band leads first
    and the major one last), ``"minor at the end"`` (a minor band still leads when the run
    ends, or no band ever leads alone: ties throughout). ``leaders`` are the leading bands (0-based) in order, from ``start``, the first
    time the spectrum's total is :data:`GROWTH` times its initial value, with their times;
    ``minor_lead`` is how long (in the run's clock) a minor band leads from ``start`` on (0
    for a collapse, the whole run if the spectrum never grows that much).
    """

    regime: str
    leaders: tuple[int, ...]
    times: tuple[float, ...]
    start: float
    minor_lead: float


def banded_regime(
    t: np.ndarray, shares: np.ndarray, totals: np.ndarray, loss: np.ndarray
) -> BandedRegime:
    """Classify a run from its band shares (T, K + 1; the last column the other
    frequencies), spectrum totals (T,) and losses (T,) at times ``t`` (T,).

    ``ValueError`` naming the parameter: ``shares`` not (T, K + 1) with T >= 1, K >= 1 and
    entries in [0, 1]; ``t`` not finite and non-decreasing; ``totals`` not finite and >= 0,
    or 0 at the start (the growth is measured against it); ``loss`` NaN or negative; a length
    other than T."""
    shares = numeric_array(shares, "shares", ndim=2)
    T = shares.shape[0]
    if T < 1 or shares.shape[1] < 2:
        raise ValueError(
            f"shares must be (T, K + 1) with T >= 1 records and K >= 1 bands, got {shares.shape}"
        )
    if not np.all((shares >= 0) & (shares <= 1)):
        raise ValueError("shares must be in [0, 1] (found NaN or a value outside)")
    t = time_axis(t, "t", T, rows="shares")
    totals = _per_record(totals, "totals", T)
    if not np.all(np.isfinite(totals) & (totals >= 0)) or not totals[0] > 0:
        raise ValueError("totals must be finite, >= 0 and > 0 at the start (the growth's scale)")
    loss = _per_record(loss, "loss", T)
    if not np.all(loss >= 0):
        raise ValueError("loss must be >= 0 (found NaN or a negative value)")
    K = shares.shape[1] - 1
    grown = np.flatnonzero(totals >= GROWTH * totals[0])
    if grown.size == 0:
        shrunk = totals[-1] < totals[0] and loss[-1] > 0.5 * np.log(2.0)
        regime = "collapse" if shrunk else "minor at the end"
        return BandedRegime(regime, (), (), float("nan"), 0.0 if shrunk else float(t[-1] - t[0]))
    k0 = int(grown[0])
    with np.errstate(divide="ignore"):
        seq = leader_sequence(t[k0:], np.log(shares[k0:, :K]))
    if not seq.coordinates:  # the bands tie at every record: none leads
        return BandedRegime("minor at the end", (), (), float(t[k0]), 0.0)
    first, last = seq.coordinates[0], seq.coordinates[-1]
    if first == K - 1:
        regime = "major first"
    elif last == K - 1:
        regime = "sequential"
    else:
        regime = "minor at the end"
    ends = np.append(seq.switch_times[1:], t[-1])
    minor = sum(
        end - begin
        for c, begin, end in zip(seq.coordinates, seq.switch_times, ends, strict=True)
        if c != K - 1
    )
    return BandedRegime(regime, seq.coordinates, seq.switch_times, float(t[k0]), float(minor))


def _per_record(value, name: str, T: int) -> np.ndarray:
    """A (T,) array of numbers, one per row of shares (``ValueError`` naming ``name``)."""
    arr = numeric_array(value, name, ndim=1)
    if arr.shape[0] != T:
        raise ValueError(
            f"{name} must have one entry per row of shares ({T} rows), got {arr.shape[0]}"
        )
    return arr


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
