"""Pixel saliency of the flows on the handwritten digits (the analog of the paper's Grad-CAM
figures): which pixels a predictor ``beta`` relies on, and whether the weak ones come first.

* Data side: :func:`class_mean_difference`, :func:`pixel_strength` (``|mean_a - mean_b|`` over
  the training set: how much a pixel tells the two classes apart), :func:`orthant_signs` (the
  signs of the class-mean difference: the orthant the study's flows start in).
* Orders: :func:`average_ranks`, :func:`spearman` (rank correlation, ties by average ranks),
  :func:`share_strength_correlation` (Spearman between the shares ``|beta_j| / ||beta||_1``
  and the strengths at every sample, over all pixels or e.g. the :func:`stronger_half`),
  :func:`leader_strength_quantile`, :func:`leader_changes`, :func:`lowest_before`.
* Predictor quality along a path: :func:`scaled_beta`, :func:`accuracy`,
  :func:`normalized_margins`, :func:`angles_to`; the reference :func:`orthant_l1_max_margin`
  (the l1 max-margin predictor among the ``beta`` with given signs).
* Runs: :mod:`analysis.digits_runs` (:func:`analysis.digits_runs.simulate_to_loss` and the task
  kind ``'digits_flow'``).

Everything works on ``log|beta|`` and ``sign(beta)``, so it is valid at any scale of beta.
"""

from __future__ import annotations

import numpy as np

from ._checks import log_abs_beta_array, numeric_array
from .amplification import LeaderSequence, leader_sequence, leaders, shares
from .margin_programs.l1 import solve_l1

__all__ = [
    "accuracy",
    "angles_to",
    "average_ranks",
    "class_mean_difference",
    "first_below",
    "leader_changes",
    "leader_strength_quantile",
    "lowest_before",
    "normalized_margins",
    "orthant_l1_max_margin",
    "orthant_signs",
    "pixel_strength",
    "quantized",
    "scaled_beta",
    "share_strength_correlation",
    "spearman",
    "stronger_half",
]


#: decimals of ``log|beta|`` kept when ranking (:func:`quantized`)
TIE_DECIMALS = 9

# --------------------------------------------------------------------------- data side


def _labelled(X, y) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` checked: X (n, d) finite, y (n,) in {-1, +1} with both labels present."""
    X = numeric_array(X, "X", ndim=2)
    y = numeric_array(y, "y", ndim=1)
    if not np.all(np.isfinite(X)):
        raise ValueError("X must be finite")
    if y.shape[0] != X.shape[0]:
        raise ValueError(
            f"y must have one label per row of X: got {y.shape[0]} labels for {X.shape[0]} rows"
        )
    if not np.all(np.isin(y, (-1.0, 1.0))) or not (np.any(y > 0) and np.any(y < 0)):
        raise ValueError("y must contain only labels -1 and +1, and both of them")
    return X, y


def class_mean_difference(X, y) -> np.ndarray:
    """``mean(x_i : y_i = +1) - mean(x_i : y_i = -1)`` per feature (d,)."""
    X, y = _labelled(X, y)
    return X[y > 0].mean(axis=0) - X[y < 0].mean(axis=0)


def pixel_strength(X, y) -> np.ndarray:
    """The strength of every pixel: ``|mean over class +1 - mean over class -1|`` (d,).

    A strong pixel tells the classes apart on average (the "major" features of the paper's
    single example, where ``mu_j`` is the strength); a pixel that is constant on the training
    set has strength 0.
    """
    return np.abs(class_mean_difference(X, y))


def orthant_signs(X, y) -> np.ndarray:
    """``sign(mean_+ - mean_-)`` per feature in {-1, +1} (+1 where the difference is 0): the
    class a pixel votes for on average. The digits study starts its flows with
    ``sign(beta) = orthant_signs`` (:func:`digits_flow`)."""
    return np.where(class_mean_difference(X, y) >= 0, 1.0, -1.0)


def stronger_half(strength) -> np.ndarray:
    """Mask of the pixels whose strength is above the median strength of the pixels with
    strength > 0. Within them, the single-example picture predicts opposite orders: GD grows
    the strongest fastest, SAM (rate ``mu_j (1 - rho mu_j / N)`` at L = 2, largest at
    ``mu_j = N / (2 rho)``) shrinks or slows the strongest, so the share-strength rank
    correlation over this half is negative for SAM in its amplification phase."""
    strength = numeric_array(strength, "strength", ndim=1)
    positive = strength[strength > 0]
    if positive.size == 0:
        raise ValueError("strength must have a positive entry")
    return strength > np.median(positive)


# --------------------------------------------------------------------------- rank order


def average_ranks(x) -> np.ndarray:
    """Ranks 1..n of a finite vector (n,), or of every row of a matrix (T, n), ties sharing
    their average rank: a value whose equal values sit at sorted positions ``a..b`` (0-based)
    gets ``(a + b) / 2 + 1``."""
    x = numeric_array(x, "x")
    if x.ndim not in (1, 2):
        raise ValueError(f"x must be 1- or 2-dimensional, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("x must be finite")
    rows = np.atleast_2d(x)
    order = np.argsort(rows, axis=1, kind="mergesort")
    sorted_x = np.take_along_axis(rows, order, axis=1)
    position = np.broadcast_to(np.arange(rows.shape[1]), rows.shape)
    starts_group = np.ones(rows.shape, dtype=bool)
    starts_group[:, 1:] = sorted_x[:, 1:] != sorted_x[:, :-1]
    ends_group = np.roll(starts_group, -1, axis=1)
    ends_group[:, -1] = True
    first = np.maximum.accumulate(np.where(starts_group, position, 0), axis=1)
    last = np.minimum.accumulate(np.where(ends_group, position, rows.shape[1])[:, ::-1], axis=1)[
        :, ::-1
    ]
    ranks = np.empty(rows.shape)
    np.put_along_axis(ranks, order, (first + last) / 2.0 + 1.0, axis=1)
    return ranks.reshape(x.shape)


def _rank_correlations(rows: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's correlation of every row of ``rows`` (T, n) with ``y`` (n,): the Pearson
    correlation of their average ranks; ``nan`` for a constant row (or a constant ``y``)."""
    rx = average_ranks(rows)
    ry = average_ranks(y)
    rx = rx - rx.mean(axis=1, keepdims=True)
    ry = ry - ry.mean()
    denom = np.sqrt(np.sum(rx * rx, axis=1) * np.sum(ry * ry))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (rx @ ry) / denom, np.nan)


def spearman(x, y) -> float:
    """Spearman's rank correlation of two equally long vectors: the Pearson correlation of
    their average ranks; ``nan`` if either is constant (no order) or has fewer than 2 entries.
    """
    x = numeric_array(x, "x", ndim=1)
    y = numeric_array(y, "y", ndim=1)
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same length, got {x.size} and {y.size}")
    if x.size < 2:
        return float("nan")
    return float(_rank_correlations(x[None, :], y)[0])


def _pixel_mask(strength: np.ndarray, mask) -> np.ndarray:
    if mask is None:
        return strength > 0
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != strength.shape:
        raise ValueError(f"mask must have shape {strength.shape}, got {mask.shape}")
    return mask


def share_strength_correlation(log_abs_beta, strength, mask=None) -> np.ndarray:
    """Spearman correlation between the shares ``|beta_j| / ||beta||_1`` and ``strength`` at
    every sample (T,), over the pixels in ``mask`` (default: ``strength > 0``, i.e. pixels
    that vary on the training set; a pixel that is 0 in every training image keeps its
    initial weight and would only add ties).

    Positive: the predictor leans on strong pixels (major first); negative: on weak ones.
    ``nan`` where the shares are all equal (e.g. a uniform initialization at ``tau = 0``) or
    not defined (``beta = 0``).
    """
    lb = log_abs_beta_array(log_abs_beta)
    strength = numeric_array(strength, "strength", ndim=1)
    if strength.shape[0] != lb.shape[1]:
        raise ValueError(f"strength must have length d = {lb.shape[1]}, got {strength.shape[0]}")
    keep = _pixel_mask(strength, mask)
    sh = shares(quantized(lb))[:, keep]
    defined = np.all(np.isfinite(sh), axis=1) & np.any(sh != 0, axis=1)
    out = np.full(sh.shape[0], np.nan)
    if sh.shape[1] >= 2:
        out[defined] = _rank_correlations(sh[defined], strength[keep])
    return out


def quantized(log_abs_beta, decimals: int = TIE_DECIMALS) -> np.ndarray:
    """``log|beta|`` rounded to ``decimals`` decimals (``-inf`` kept): entries equal up to a
    relative ``~1e-9`` become exactly equal, so a uniform initialization read back from a
    solver's dense output (equal up to rounding) has no spurious order."""
    lb = log_abs_beta_array(log_abs_beta)
    return np.where(np.isfinite(lb), np.round(lb, decimals), lb)


def leader_changes(tau, log_abs_beta) -> LeaderSequence:
    """:func:`analysis.amplification.leader_sequence` of :func:`quantized` ``log|beta|``: the
    leading pixels in order and the times at which each takes over (samples whose largest
    ``|beta_j|`` is tied, as at a uniform initialization, are skipped)."""
    return leader_sequence(tau, quantized(log_abs_beta))


def leader_strength_quantile(log_abs_beta, strength, mask=None) -> np.ndarray:
    """For the leading pixel ``argmax_j |beta_j|`` at each sample, the fraction of pixels in
    ``mask`` (default ``strength > 0``) whose strength is at most the leader's (T,): 1 means the
    strongest pixel leads, small values a weak one; ``nan`` where ``beta = 0``."""
    lb = log_abs_beta_array(log_abs_beta)
    strength = numeric_array(strength, "strength", ndim=1)
    if strength.shape[0] != lb.shape[1]:
        raise ValueError(f"strength must have length d = {lb.shape[1]}, got {strength.shape[0]}")
    pool = strength[_pixel_mask(strength, mask)]
    lead = leaders(quantized(lb))
    return np.array([np.mean(pool <= strength[j]) if j >= 0 else np.nan for j in lead])


def first_below(values, levels) -> np.ndarray:
    """Index of the first sample with ``values <= level`` for every level (-1 if never)."""
    values = numeric_array(values, "values", ndim=1)
    out = []
    for level in np.atleast_1d(np.asarray(levels, dtype=float)):
        hit = np.flatnonzero(values <= level)
        out.append(int(hit[0]) if hit.size else -1)
    return np.array(out, dtype=int)


def lowest_before(values, loss, fraction: float = 0.5) -> float:
    """The smallest of ``values`` (NaN ignored) over the samples before the training loss
    first falls to ``fraction * loss[0]`` (all samples if it never does): e.g. the lowest
    share-strength correlation of the early phase of a run. ``nan`` if none is defined."""
    values = numeric_array(values, "values", ndim=1)
    loss = numeric_array(loss, "loss", ndim=1)
    if values.shape != loss.shape:
        raise ValueError(
            f"values and loss must have the same length, got {values.size} and {loss.size}"
        )
    hit = first_below(loss, fraction * loss[0])[0]
    early = values[: (hit + 1 if hit >= 0 else values.size)]
    early = early[np.isfinite(early)]
    return float(np.min(early)) if early.size else float("nan")


# --------------------------------------------------------------------------- along a path


def scaled_beta(log_abs_beta, sign_beta) -> np.ndarray:
    """``beta / max_j |beta_j|`` per sample (T, d): the direction of beta as floats, at any
    scale (rows with ``beta = 0`` are 0)."""
    lb = log_abs_beta_array(log_abs_beta)
    sb = numeric_array(sign_beta, "sign_beta", ndim=2)
    if sb.shape != lb.shape:
        raise ValueError(f"sign_beta must have shape {lb.shape}, got {sb.shape}")
    top = np.max(lb, axis=1, keepdims=True)
    safe = np.where(np.isfinite(top), top, 0.0)
    return np.where(sb == 0, 0.0, sb * np.exp(lb - safe))


def accuracy(log_abs_beta, sign_beta, X, y) -> np.ndarray:
    """Fraction of examples with ``y_i <beta, x_i> > 0`` at every sample (T,) (a margin of
    exactly 0 counts as an error)."""
    X, y = _labelled(X, y)
    b = scaled_beta(log_abs_beta, sign_beta)
    if b.shape[1] != X.shape[1]:
        raise ValueError(f"X must have d = {b.shape[1]} columns, got {X.shape[1]}")
    return np.mean((b @ (y[:, None] * X).T) > 0, axis=1)


def normalized_margins(log_abs_beta, sign_beta, X, y, p: int) -> np.ndarray:
    """``min_i y_i <beta, x_i> / ||beta||_p`` at every sample (T,) (``nan`` where beta = 0),
    on ``beta / max|beta_j|`` (so at any scale of beta), for all samples at once; the same
    numbers as :func:`analysis.maxmargin.normalized_margin` row by row."""
    X, y = _labelled(X, y)
    if p not in (1, 2):
        raise ValueError(f"p must be 1 or 2, got {p!r}")
    b = scaled_beta(log_abs_beta, sign_beta)
    if b.shape[1] != X.shape[1]:
        raise ValueError(f"X must have d = {b.shape[1]} columns, got {X.shape[1]}")
    norm = np.linalg.norm(b, ord=p, axis=1)
    worst = np.min(b @ (y[:, None] * X).T, axis=1)
    return np.divide(worst, norm, out=np.full(norm.shape, np.nan), where=norm > 0)


def angles_to(log_abs_beta, sign_beta, reference) -> np.ndarray:
    """Angle (degrees) between ``beta`` and ``reference`` at every sample (T,) (``nan`` where
    beta = 0), as :func:`analysis.angles.angle` computes it (``2 atan2(||u - v||, ||u + v||)``
    on the unit vectors, accurate near 0 and 180 degrees), for all samples at once."""
    b = scaled_beta(log_abs_beta, sign_beta)
    ref = numeric_array(reference, "reference", ndim=1)
    if ref.shape[0] != b.shape[1] or not np.all(np.isfinite(ref)) or not np.any(ref):
        raise ValueError(f"reference must be a finite nonzero vector of length d = {b.shape[1]}")
    v = ref / np.max(np.abs(ref))
    v = v / np.linalg.norm(v)
    norm = np.linalg.norm(b, axis=1, keepdims=True)
    u = np.divide(b, norm, out=np.zeros_like(b), where=norm > 0)
    out = np.degrees(2.0 * np.arctan2(np.linalg.norm(u - v, axis=1), np.linalg.norm(u + v, axis=1)))
    return np.where(norm[:, 0] > 0, out, np.nan)


def orthant_l1_max_margin(X, y, signs) -> np.ndarray:
    """The l1 max-margin predictor among the ``beta`` with ``signs_j beta_j >= 0``:
    ``argmin ||beta||_1`` s.t. ``y_i <beta, x_i> >= 1``, ``signs * beta >= 0`` (the l1 program
    of :mod:`analysis.margin_programs` in the orthant), scaled to unit l2 norm.

    A flow that keeps ``sign(beta) = signs`` (a balanced init at even depth, or at odd depth
    for GD / l2-SAM / LE-SAM) can only approach predictors in that orthant; GD at L = 2 is
    expected to approach this one, the l1 max-margin of the data once the signs are absorbed
    into the features. ``ValueError`` if no such ``beta`` separates the data.
    """
    X, y = _labelled(X, y)
    s = numeric_array(signs, "signs", ndim=1)
    if s.shape[0] != X.shape[1] or not np.all(np.isin(s, (-1.0, 1.0))):
        raise ValueError(f"signs must be a length-{X.shape[1]} vector of -1 and +1")
    try:
        solution = solve_l1(y[:, None] * X * s, nonnegative=True)
    except ValueError as exc:
        raise ValueError(f"no beta with these signs separates the data ({exc})") from exc
    return s * solution.direction


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
