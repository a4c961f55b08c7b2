"""Signed-log arithmetic: numbers stored as ``(sign, log|x|)``.

Parameters of a diagonal network grow like ``exp(2 mu_d tau)`` and pass the float64 range
long before the dynamics become uninteresting. Every quantity the flow needs (products of
layers, gradient norms, the perturbed point) is therefore computed on pairs ``(s, l)`` with
``x = s * exp(l)``, ``s`` in {-1, 0, +1} and ``l = -inf`` exactly when ``x == 0``.

The integration chart ``z = asinh(w / delta)`` is also defined here: it is linear near 0 (so a
parameter crosses or reaches 0 transversally) and logarithmic for ``|w| >> delta`` (so it grows
to any magnitude), and ``(sign w, log|w|)`` is recovered from ``z`` without overflow.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

LOG2 = float(np.log(2.0))


class SignedLog(NamedTuple):
    """An array ``x = sign * exp(log_abs)``; ``sign`` is 0 exactly where ``log_abs`` is -inf."""

    sign: np.ndarray
    log_abs: np.ndarray

    @classmethod
    def from_float(cls, x: np.ndarray) -> SignedLog:
        """Signed-log form of an ordinary float array."""
        x = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore"):
            return cls(np.sign(x), np.log(np.abs(x)))

    def to_float(self) -> np.ndarray:
        """``sign * exp(log_abs)``; +-inf beyond the float64 range, exact zeros kept."""
        with np.errstate(over="ignore"):
            return np.where(self.sign == 0, 0.0, self.sign * np.exp(self.log_abs))


def leave_one_out(x: SignedLog, multiplicity: np.ndarray) -> SignedLog:
    """Products over all other layers, ``prod_{k != l} w^(k)``, without division.

    ``x`` holds one row per layer *group*; group ``k`` stands for ``multiplicity[k]`` identical
    layers (the full system has all multiplicities 1, the balanced reduced system has a single
    group of multiplicity L). Row ``l`` of the result is the product of every layer except one
    copy of group ``l``: prefix and suffix products of the other groups times
    ``w_l^(multiplicity[l] - 1)``, so exact zeros stay exact.

    Parameters
    ----------
    x : SignedLog with arrays of shape (G, d)
    multiplicity : (G,) positive integers

    Returns
    -------
    SignedLog of shape (G, d)
    """
    sign, log_abs = x
    mult = np.asarray(multiplicity)[:, None]
    if len(multiplicity) == 1:
        if mult[0, 0] == 1:
            return SignedLog(np.ones_like(sign), np.zeros_like(log_abs))
        with np.errstate(invalid="ignore"):
            return SignedLog(sign ** (mult - 1), (mult - 1) * log_abs)
    with np.errstate(invalid="ignore"):
        powered_log = mult * log_abs
        own_log = np.where(mult > 1, (mult - 1) * log_abs, 0.0)
    powered_sign = sign**mult
    own_sign = sign ** (mult - 1)

    def exclusive(a: np.ndarray, op, neutral: float, reverse: bool) -> np.ndarray:
        a = a[::-1] if reverse else a
        out = np.full_like(a, neutral)
        out[1:] = op.accumulate(a[:-1], axis=0)
        return out[::-1] if reverse else out

    out_sign = (
        exclusive(powered_sign, np.multiply, 1.0, False)
        * exclusive(powered_sign, np.multiply, 1.0, True)
        * own_sign
    )
    out_log = (
        exclusive(powered_log, np.add, 0.0, False)
        + exclusive(powered_log, np.add, 0.0, True)
        + own_log
    )
    return SignedLog(out_sign, np.where(out_sign == 0, -np.inf, out_log))


def product_of_layers(x: SignedLog, multiplicity: np.ndarray) -> SignedLog:
    """``beta = prod_k w^(k)`` over all layers (groups repeated by their multiplicity)."""
    sign, log_abs = x
    mult = np.asarray(multiplicity)[:, None]
    out_sign = np.prod(sign**mult, axis=0)
    with np.errstate(invalid="ignore"):
        out_log = np.sum(mult * log_abs, axis=0)
    return SignedLog(out_sign, np.where(out_sign == 0, -np.inf, out_log))


def log_norm2(
    log_abs: np.ndarray,
    weights: np.ndarray | None = None,
    axis: int | tuple[int, ...] | None = None,
):
    """``log sqrt(sum_i weights_i * exp(2 log_abs_i))`` by log-sum-exp; -inf for a zero vector.

    With ``axis`` (e.g. ``(-2, -1)`` for a batch of parameter arrays) the reduction runs over
    those axes only and an array is returned (the reduced axes kept with size 1); without it,
    over everything, and a float is returned.
    """
    two = 2.0 * np.asarray(log_abs, dtype=float)
    if weights is not None:
        with np.errstate(divide="ignore"):
            two = two + np.log(np.broadcast_to(weights, two.shape))
    top = np.max(two, axis=axis, keepdims=True)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.sum(np.exp(two - safe), axis=axis, keepdims=True)
        out = np.where(np.isfinite(top), 0.5 * (safe + np.log(total)), top / 2.0)
    if axis is None:
        return float(out.reshape(()))
    return out


def signed_sum(sign: np.ndarray, log_abs: np.ndarray, axis: int) -> SignedLog:
    """``sum sign * exp(log_abs)`` along ``axis`` (removed) in signed-log form, relative to the
    largest term (so any magnitudes; the cancellation error is that of float sums)."""
    top = np.max(np.where(sign == 0, -np.inf, log_abs), axis=axis, keepdims=True)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(invalid="ignore"):
        total = np.sum(np.where(sign == 0, 0.0, sign * np.exp(log_abs - safe)), axis=axis)
    with np.errstate(divide="ignore"):
        out_log = np.log(np.abs(total)) + np.squeeze(safe, axis=axis)
    return SignedLog(np.sign(total), np.where(total == 0, -np.inf, out_log))


def add_float(x: SignedLog, eps: np.ndarray) -> SignedLog:
    """Signed-log form of ``x + eps`` for an ordinary (bounded) float array ``eps``.

    Computed relative to the larger of the two terms, so that ``|x|`` far beyond float64 and
    ``|x|`` far below ``|eps|`` are both exact to rounding.
    """
    sign, log_abs = x
    eps = np.asarray(eps, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_eps = np.log(np.abs(eps))
        x_dominates = log_abs >= log_eps
        # ratio of the smaller term to the larger one, in [-1, 1]
        small_over_big = np.where(
            x_dominates,
            np.sign(eps) * sign * np.exp(log_eps - log_abs),
            sign * np.sign(eps) * np.exp(log_abs - log_eps),
        )
        big_log = np.where(x_dominates, log_abs, log_eps)
        big_sign = np.where(x_dominates, sign, np.sign(eps))
        out_log = big_log + np.log1p(small_over_big)
    out_log = np.where((big_sign == 0) | (np.isneginf(log_abs) & (eps == 0)), -np.inf, out_log)
    out_sign = np.where(np.isneginf(out_log), 0.0, big_sign)
    return SignedLog(out_sign, out_log)


def log_sinh(x: np.ndarray) -> np.ndarray:
    """``log(sinh x)`` for ``x >= 0``, exact for tiny x and without overflow for huge x."""
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore", over="ignore"):
        small = np.log(np.sinh(np.minimum(x, 1.0)))
        large = x - LOG2 + np.log1p(-np.exp(-2.0 * np.maximum(x, 1.0)))
    return np.where(x < 1.0, small, large)


def log_cosh(x: np.ndarray) -> np.ndarray:
    """``log(cosh x)``, stable for any real x."""
    ax = np.abs(np.asarray(x, dtype=float))
    return ax - LOG2 + np.log1p(np.exp(-2.0 * ax))


def chart_to_signed_log(z: np.ndarray, delta: float) -> SignedLog:
    """Parameters ``w = delta * sinh(z)`` of the asinh chart, in signed-log form."""
    return SignedLog(np.sign(z), np.log(delta) + log_sinh(np.abs(z)))


def signed_log_to_chart(x: SignedLog, delta: float) -> np.ndarray:
    """Chart coordinate ``z = asinh(w / delta)`` of ``w = sign * exp(log_abs)``, any magnitude."""
    sign, log_abs = x
    rel = log_abs - np.log(delta)
    with np.errstate(over="ignore"):
        direct = np.arcsinh(np.exp(np.minimum(rel, 30.0)))
    # for w/delta > e^30, asinh(u) = log(2u) + O(u^-2)
    return sign * np.where(rel < 30.0, direct, rel + LOG2)


def chart_velocity(dw: SignedLog, z: np.ndarray, delta: float) -> np.ndarray:
    """``dz/dtau = (dw/dtau) / (delta cosh z)`` for the asinh chart, from ``dw`` in signed-log form."""
    with np.errstate(over="ignore"):
        return dw.sign * np.exp(dw.log_abs - np.log(delta) - log_cosh(z))
