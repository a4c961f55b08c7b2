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
* Runs: :func:`simulate_to_loss` (rescaled-clock flow in chunks, stopped once the training loss
  falls below a floor) and the task kind ``'digits_flow'`` (:func:`digits_flow`) that runs it
  on a pair of digit classes from :func:`flows.datasets.digits`.

Everything works on ``log|beta|`` and ``sign(beta)``, so it is valid at any scale of beta.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from flows.cache import Result, register
from flows.data import Dataset, sign_constrained_separable
from flows.datasets import digits
from flows.integrate import simulate
from flows.results import FAILURE, SUCCESS

from ._checks import log_abs_beta_array, numeric_array
from .amplification import LeaderSequence, leader_sequence, leaders, shares
from .lesam import initial_gradient_norm

__all__ = [
    "ChunkedRun",
    "accuracy",
    "angles_to",
    "average_ranks",
    "class_mean_difference",
    "digits_flow",
    "first_below",
    "le_sam_budget",
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
    "simulate_to_loss",
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
    """Ranks 1..n of a finite vector, ties sharing their average rank."""
    x = numeric_array(x, "x", ndim=1)
    if not np.all(np.isfinite(x)):
        raise ValueError("x must be finite")
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    starts = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])
    ends = np.r_[starts[1:], x.size]
    ranks = np.empty(x.size)
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return ranks


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
    rx, ry = average_ranks(x), average_ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = np.sqrt(np.sum(rx * rx) * np.sum(ry * ry))
    return float(np.sum(rx * ry) / denom) if denom > 0 else float("nan")


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
    return np.array(
        [
            spearman(row, strength[keep])
            if np.all(np.isfinite(row)) and row.any()
            else float("nan")
            for row in sh
        ]
    )


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
    ``argmin ||beta||_1`` s.t. ``y_i <beta, x_i> >= 1``, ``signs * beta >= 0`` (an LP, HiGHS),
    scaled to unit l2 norm.

    A flow that keeps ``sign(beta) = signs`` (a balanced init at even depth, or at odd depth
    for GD / l2-SAM / LE-SAM) can only approach predictors in that orthant; GD at L = 2 is
    expected to approach this one, the l1 max-margin of the data once the signs are absorbed
    into the features. ``ValueError`` if no such ``beta`` separates the data.
    """
    X, y = _labelled(X, y)
    s = numeric_array(signs, "signs", ndim=1)
    if s.shape[0] != X.shape[1] or not np.all(np.isin(s, (-1.0, 1.0))):
        raise ValueError(f"signs must be a length-{X.shape[1]} vector of -1 and +1")
    Z = y[:, None] * X * s
    scale = float(np.max(np.abs(Z)))
    res = linprog(
        np.ones(X.shape[1]),
        A_ub=-Z / scale,
        b_ub=-np.ones(X.shape[0]),
        bounds=[(0.0, None)] * X.shape[1],
        method="highs",
    )
    if res.status != 0:
        raise ValueError(f"no beta with these signs separates the data ({res.message})")
    beta = s * res.x
    return beta / np.linalg.norm(beta)


# --------------------------------------------------------------------------- runs


@dataclass(frozen=True, eq=False)
class ChunkedRun:
    """A rescaled-clock path assembled from chunks (:func:`simulate_to_loss`).

    ``tau``, ``loss`` (T,); ``log_abs_beta``, ``sign_beta`` (T, d); ``status`` and ``message``
    of the run (0: ended at the loss floor or at ``tau_max``; otherwise the status of the chunk
    that stopped it); ``nfev`` field evaluations in all.
    """

    tau: np.ndarray
    loss: np.ndarray
    log_abs_beta: np.ndarray
    sign_beta: np.ndarray
    status: int
    message: str
    nfev: int


#: ``log|w|`` below which a restarted weight is set to this value (exp would underflow)
_LOG_FLOOR = -700.0


def _restart_alpha(log_abs_theta: np.ndarray, sign_theta: np.ndarray, depth: int) -> np.ndarray:
    """The (depth, d) init that continues a run from its last state: the layer groups expanded
    to layers; an exact 0 (a held or collapsed entry) or a weight below ``e^-700`` restarts at
    ``+-e^-700`` (it contributes ``< e^-700`` to beta)."""
    log_w = np.maximum(log_abs_theta, _LOG_FLOOR)
    w = np.where(sign_theta == 0, 1.0, sign_theta) * np.exp(log_w)
    if w.shape[0] == 1:
        return np.tile(w, (depth, 1))
    return w


def simulate_to_loss(
    data: Dataset,
    algorithm: str,
    depth: int,
    alpha,
    *,
    tau_max: float,
    loss_floor: float,
    chunk: float = 1.0,
    points_per_chunk: int = 10,
    method: str = "LSODA",
    rtol: float = 1e-8,
    max_nfev: int = 30_000,
    max_total_nfev: int | None = None,
    **hyperparameters,
) -> ChunkedRun:
    """The rescaled-clock flow of :func:`flows.simulate`, run in chunks of ``chunk`` in
    ``tau`` and stopped after the first chunk that ends with training loss ``<= loss_floor``
    (or at ``tau_max``, or at a chunk with ``status != 0``: a blow-up or a spent budget).

    Why: on many examples the rescaled field becomes stiff as the loss goes to 0 (presumably as
    the loss weights concentrate, ever more sharply, on the few smallest margins), and an
    integration to a fixed horizon can spend most of its work far past the interesting part
    (digits 0 vs 1, l2-SAM, L = 2: tau in [0, 20] takes 1.6k evaluations, [0, 60] more than
    200k). Each chunk restarts
    :func:`flows.simulate` from the last state (the flow is autonomous in ``tau``, so this is the
    same path up to the solver tolerance); see :func:`_restart_alpha` for entries at 0.

    ``points_per_chunk`` samples per chunk (equally spaced, the chunk's start excluded after the
    first); ``method``, ``rtol`` and ``max_nfev`` apply to each chunk; ``max_total_nfev`` (None:
    no limit) ends the run with status -1 after the first chunk that brings the total number
    of field evaluations above it; hyper-parameters (``rho``, ``sigma``, ``rho_max``) by
    keyword.

    The default solver is LSODA: where the field is stiff it switches to BDF and needs ~10x
    fewer evaluations than DOP853 (e.g. digits 3 vs 8, l2-SAM, tau in [38, 40]: 534 evaluations
    against 7229); at rtol 1e-8 its ``log|beta|`` is within ~1e-7 of a DOP853 run at rtol 1e-10
    (digits 0 vs 1 and 3 vs 8, tau <= 20).
    """
    if not (np.isfinite(tau_max) and tau_max > 0 and chunk > 0 and loss_floor >= 0):
        raise ValueError(
            "tau_max and chunk must be > 0 and loss_floor >= 0, got "
            f"{tau_max!r}, {chunk!r}, {loss_floor!r}"
        )
    parts: list[tuple] = []
    tau0, init, nfev = 0.0, alpha, 0
    status, message = SUCCESS, f"reached tau_max = {tau_max:g}"
    while tau0 < tau_max - 1e-12:
        span = min(chunk, tau_max - tau0)
        traj = simulate(
            data,
            algorithm,
            depth,
            init,
            t_max=span,
            n_points=points_per_chunk + 1,
            original_time=False,
            method=method,
            rtol=rtol,
            max_nfev=max_nfev,
            **hyperparameters,
        )
        nfev += traj.nfev
        first = 0 if not parts else 1
        parts.append(
            (
                tau0 + traj.tau[first:],
                traj.loss[first:],
                traj.log_abs_beta[first:],
                traj.sign_beta[first:],
            )
        )
        if traj.status != SUCCESS:
            status, message = traj.status, f"chunk at tau = {tau0:g}: {traj.message}"
            break
        if max_total_nfev is not None and nfev > max_total_nfev:
            status = FAILURE
            message = (
                f"{nfev} field evaluations by tau = {tau0 + span:g}, above the budget "
                f"max_total_nfev = {max_total_nfev}"
            )
            break
        if traj.loss[-1] <= loss_floor:
            message = (
                f"training loss {traj.loss[-1]:.3g} <= {loss_floor:g} at tau = {tau0 + span:g}"
            )
            break
        if not np.any(traj.sign_theta[-1]):
            message = f"theta collapsed to 0 by tau = {tau0 + span:g}"
            break
        init = _restart_alpha(traj.log_abs_theta[-1], traj.sign_theta[-1], depth)
        tau0 += span
    tau, loss, lb, sb = (np.concatenate(arrays) for arrays in zip(*parts, strict=True))
    return ChunkedRun(tau, loss, lb, sb, int(status), message, int(nfev))


#: hyper-parameter names a 'digits_flow' task passes on to the flow
_HYPERPARAMETERS = ("rho", "sigma", "rho_max")


def le_sam_budget(
    data: Dataset, alpha: float, depth: int, rho_max: float, start_fraction: float
) -> float:
    """The LE-SAM budget ``sigma`` whose radius starts at ``start_fraction * rho_max``:
    ``rho_0 = sigma / ||grad L(theta_0)||`` (the stabiliser ``varrho = 1e-12`` aside), so
    ``sigma = start_fraction * rho_max * ||grad L(theta_0)||``
    (:func:`analysis.lesam.initial_gradient_norm`, at the balanced init ``alpha``). As the loss falls the gradient
    shrinks and ``rho_t`` rises to ``rho_max`` (LE-SAM then is l2-SAM with ``rho = rho_max``)."""
    if not 0 < start_fraction <= 1:
        raise ValueError(f"start_fraction must be in (0, 1], got {start_fraction!r}")
    return start_fraction * float(rho_max) * initial_gradient_norm(data, float(alpha), int(depth))


def digits_flow(params: dict) -> Result:
    """Task kind ``'digits_flow'``: a flow on digits ``a`` (+1) vs ``b`` (-1).

    Parameters (JSON): ``a``, ``b``, ``seed`` (split, default 0), ``test_fraction`` (0.25);
    ``algorithm``, ``depth``, ``alpha`` (a positive scalar), ``rho`` / ``sigma`` / ``rho_max``;
    ``tau_max``, ``loss_floor``, ``chunk``, ``points_per_chunk``, ``method``, ``rtol``,
    ``max_nfev``, ``max_total_nfev`` (see :func:`simulate_to_loss`); ``sigma_start_fraction``
    sets LE-SAM's ``sigma`` by :func:`le_sam_budget` (with ``rho_max``).

    Initialization: ``|w_j^(l)(0)| = alpha`` in every layer, with ``sign(beta_j(0)) =
    s_j = orthant_signs(train)_j`` (the class a pixel votes for on average; the first layer
    carries the sign). A balanced positive init would keep ``beta >= 0`` at every depth for
    GD / l2-SAM / LE-SAM (and at even depth for l_inf-SAM), and no pair of digit classes is
    separable by a ``beta >= 0``; every pair is separable in the orthant ``s`` (checked here).
    The run is the positive balanced flow on the data with column j multiplied by ``s_j``,
    reflected back (``beta_j = s_j a_j^L``): every algorithm of the table commutes with that
    reflection (:func:`flows.initialization.kept_sign_pattern`), and the reduced balanced
    system integrates much faster than the full signed one (tested to agree).

    Returns ``tau``, ``loss`` (training), ``log_abs_beta``, ``sign_beta`` (in the original
    pixel signs), ``signs``, ``status``, ``message``, ``nfev``.
    """
    train, _ = digits(
        int(params["a"]),
        int(params["b"]),
        float(params.get("test_fraction", 0.25)),
        int(params.get("seed", 0)),
    )
    signs = orthant_signs(train.X, train.y)
    if not sign_constrained_separable(train, signs):
        raise ValueError(
            f"digits {params['a']} vs {params['b']}: no beta with the signs of the "
            "class-mean difference separates the training set"
        )
    flipped = Dataset(train.X * signs, train.y)
    hp = {k: float(params[k]) for k in _HYPERPARAMETERS if k in params}
    if "sigma_start_fraction" in params:
        hp["sigma"] = le_sam_budget(
            flipped,
            float(params["alpha"]),
            int(params["depth"]),
            hp["rho_max"],
            float(params["sigma_start_fraction"]),
        )
    run = simulate_to_loss(
        flipped,
        params["algorithm"],
        int(params["depth"]),
        float(params["alpha"]),
        tau_max=float(params["tau_max"]),
        loss_floor=float(params["loss_floor"]),
        chunk=float(params.get("chunk", 1.0)),
        points_per_chunk=int(params.get("points_per_chunk", 10)),
        method=str(params.get("method", "LSODA")),
        rtol=float(params.get("rtol", 1e-8)),
        max_nfev=int(params.get("max_nfev", 30_000)),
        max_total_nfev=(int(params["max_total_nfev"]) if "max_total_nfev" in params else None),
        **hp,
    )
    return {
        "tau": run.tau,
        "loss": run.loss,
        "log_abs_beta": run.log_abs_beta,
        "sign_beta": run.sign_beta * signs,
        "signs": signs,
        "status": np.array(run.status),
        "sigma": np.array(hp.get("sigma", np.nan)),
        "message": np.array(run.message),
        "nfev": np.array(run.nfev),
    }


def digits_flow_cost(params: dict) -> float:
    """Rough seconds of a ``'digits_flow'`` task (measured 0.1 to 2 s)."""
    return 0.2 * float(params["tau_max"]) / float(params.get("chunk", 1.0)) ** 0.5 / 10.0


register(
    "digits_flow",
    digits_flow,
    cost=digits_flow_cost,
    keys=(
        "tau",
        "loss",
        "log_abs_beta",
        "sign_beta",
        "signs",
        "status",
        "message",
        "nfev",
        "sigma",
    ),
)
