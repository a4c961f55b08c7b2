"""Sharpness of the training loss of the L-layer diagonal network: exact Hessian, trace, top
eigenvalue, and both along a flow.

The loss is ``L(theta) = (1/n) sum_i l(m_i)`` over all ``L*d`` parameters, with
``theta = (w^(1), ..., w^(L))`` an (L, d) array, ``a_i = y_i x_i`` and
``m_i = <beta, a_i> = sum_j a_ij prod_k w_kj``. The Hessian is exact (closed form, no finite
differences)::

    H = (1/n) sum_i [ l''(m_i) grad m_i grad m_i^T + l'(m_i) hess m_i ]

    d m_i / d w_lj             = a_ij prod_{k != l} w_kj                    (leave-one-out)
    d2 m_i / d w_lj d w_l'j'   = a_ij prod_{k != l, l'} w_kj   if j = j' and l != l'
                               = 0                             otherwise     (leave-two-out)

so the second term is ``g_j prod_{k != l, l'} w_kj`` on the (l, j), (l', j) entries (l != l')
with ``g = (1/n) sum_i l'(m_i) a_i`` (the factor of ``flows.model``'s gradient), and it vanishes
on the diagonal: ``tr H = (1/n) sum_i l''(m_i) ||grad m_i||^2 >= 0``.

Parameters are flattened layer-major, as ``theta.ravel()``: index ``l * d + j``.

Numerics
--------
* Products over layers are formed without division (prefix / suffix / middle products), so an
  exact zero in ``theta`` gives exact zeros, and in split form ``x = mantissa * 2**exponent``
  (``numpy.frexp``): mantissas are multiplied (rounding as plain float64 products do) and
  integer exponents added, and an entry (loss weight x ``a_ij`` x layer products) is turned back
  into a float once, at the end, so an intermediate over- or underflow never turns a
  representable entry into ``inf``, ``0`` or ``0 * inf = NaN``, and an exact zero factor always
  gives an exact zero.
* ``l'`` and ``l''`` are stable: logistic ``l'(m) = -expit(-m)``,
  ``l''(m) = expit(m) expit(-m)`` (``scipy.special.expit``); exponential ``l'(m) = -e^{-m}``,
  ``l''(m) = e^{-m}``. The first term uses ``sqrt(l'') grad m`` (a Gram matrix), with
  ``sqrt(l'') = 1 / (2 cosh(m/2)) = e^{-|m|/2} / (1 + e^{-|m|})`` for the logistic loss, so
  ``l''(m) ||grad m||^2`` stays correct when ``l''(m)`` alone would underflow but
  ``||grad m||`` is large.
* Margins are formed as in :func:`flows.model.margins` (scaled by the largest ``|beta_j|``), so
  they are ``+-inf`` rather than NaN once they leave float64.
* **Large margins.** The Hessian of the logistic (and exponential) loss decays like
  ``e^{-margin}``; once the loss weights ``l'(m_i)``, ``l''(m_i)`` underflow (margins beyond
  ~745, or ~1490 for the Gram factor) the values are tiny or exactly 0. No warning is raised.
* **Overflow.** An entry whose exact value exceeds float64 (e.g. large layers multiplying a zero
  one, ``theta[:, j] = (0, 1e200, 1e200)``, whose margin is 0) is ``+-inf``; then the trace is
  ``+inf`` and the top eigenvalue is ``+inf`` (the diagonal is ``>= 0``, so a Rayleigh quotient
  on ``e_p`` or ``(e_p +- e_q)/sqrt(2)`` is unbounded). An entry whose two terms overflow with
  opposite signs is NaN, and so is the top eigenvalue then.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import expit

from flows.checks import choice
from flows.data import Dataset
from flows.model import loss_arguments, loss_for
from flows.results import Trajectory

from ._checks import numeric_array, trajectory

__all__ = [
    "LOSS_DERIVATIVES",
    "hessian",
    "hessian_trace",
    "sharpness_along",
    "top_hessian_eigenvalue",
]


def _logistic(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``l'(m) = -expit(-m)`` and ``sqrt(l''(m)) = sqrt(expit(m) expit(-m)) = 1 / (2 cosh(m/2))
    = e^{-|m|/2} / (1 + e^{-|m|})`` (underflows only beyond |m| ~ 1490, not ~ 745)."""
    half = np.exp(-0.5 * np.abs(m))
    return -expit(-m), half / (1.0 + half * half)


def _exponential(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``l'(m) = -e^{-m}`` and ``sqrt(l''(m)) = e^{-m/2}`` (``+inf`` below m ~ -1420)."""
    return -np.exp(-m), np.exp(-0.5 * m)


def _squared(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``l'(u) = u`` and ``sqrt(l''(u)) = 1`` (the squared loss of the residual)."""
    return u, np.ones_like(u)


#: ``loss name -> u -> (l'(u), sqrt(l''(u)))``, the losses of :data:`flows.model.LOSSES`.
LOSS_DERIVATIVES: dict[str, Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]] = {
    "logistic": _logistic,
    "exponential": _exponential,
    "squared": _squared,
}

#: Largest number of Hessian entries formed at once by the batched routines (memory bound).
_CHUNK_ENTRIES = 2_000_000


# ----------------------------------------------------------------------------- validation


def _check_data(data) -> Dataset:
    if not isinstance(data, Dataset):
        raise ValueError(f"data must be a flows.Dataset, got {type(data).__name__}")
    return data


def _check_loss(loss, data: Dataset) -> str:
    """``loss`` for ``data`` (None: the task's default; a loss of the other task refused,
    :func:`flows.model.loss_for`)."""
    return choice(loss_for(loss, data), "loss", LOSS_DERIVATIVES)


#: Largest number of parameters ``L * d`` whose Hessian is built (dense, float64).
MAX_PARAMETERS = 4096


def _check_theta(theta, data: Dataset) -> np.ndarray:
    arr = numeric_array(theta, "theta", ndim=2)
    if arr.shape[0] < 1 or arr.shape[1] != data.d:
        raise ValueError(f"theta must have shape (L, d) = (L >= 1, {data.d}), got {arr.shape}")
    if arr.size > MAX_PARAMETERS:
        raise ValueError(
            f"theta: the Hessian of L * d = {arr.size} parameters is too large to build "
            f"(at most {MAX_PARAMETERS}, a {MAX_PARAMETERS**2 * 8 / 2**20:.0f} MiB matrix)"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError("theta must be finite (found NaN or inf)")
    return arr


# ----------------------------------------------------------------- split-float arithmetic
# A value is a pair (mantissa, exponent) with value = mantissa * 2**exponent (numpy.frexp):
# products of k mantissas stay in [2**-k, 1) (each multiplication rounds as in float64),
# exponents are int64 sums, so nothing overflows or underflows before the final ldexp.


def _split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mant, expo = np.frexp(x)
    return mant, expo.astype(np.int64)


def _mul(*factors: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Product of split values; an exact zero factor wins over an infinite one."""
    mant, expo = factors[0]
    zero = mant == 0
    for m, e in factors[1:]:
        with np.errstate(invalid="ignore"):
            mant = mant * m
        expo = expo + e
        zero = zero | (m == 0)
    return np.where(zero, 0.0, mant), expo


def _value(split: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    mant, expo = split
    expo = np.clip(expo, -1_000_000, 1_000_000)  # ldexp takes C ints; the result saturates
    with np.errstate(over="ignore", under="ignore"):
        return np.ldexp(mant, expo.astype(np.int32))


def _layer_products(theta: np.ndarray):
    """Split-form ``beta`` (T, d), leave-one-out (T, L, d) and leave-two-out (T, L, L, d)
    products of a stack of finite parameters ``theta`` (T, L, d), all without division.

    ``two[:, l, l', j] = prod_{k != l, l'} w_kj`` for ``l != l'`` and 0 for ``l == l'``.
    """
    T, L, d = theta.shape
    mant, expo = _split(theta)
    total_e = np.sum(expo, axis=1)
    pre = np.ones((T, L + 1, d))  # pre[:, k] = prod_{k' < k} mantissa
    suf = np.ones((T, L + 1, d))  # suf[:, k] = prod_{k' >= k} mantissa
    for k in range(L):
        pre[:, k + 1] = pre[:, k] * mant[:, k]
        suf[:, L - 1 - k] = suf[:, L - k] * mant[:, L - 1 - k]
    beta = (pre[:, L], total_e)
    one = (pre[:, :L] * suf[:, 1:], total_e[:, None, :] - expo)
    two_m = np.zeros((T, L, L, d))
    two_e = np.zeros((T, L, L, d), dtype=np.int64)
    for l1 in range(L):
        middle = np.ones((T, d))  # prod_{l1 < k < l2} mantissa
        for l2 in range(l1 + 1, L):
            two_m[:, l1, l2] = two_m[:, l2, l1] = pre[:, l1] * middle * suf[:, l2 + 1]
            two_e[:, l1, l2] = two_e[:, l2, l1] = total_e - expo[:, l1] - expo[:, l2]
            middle = middle * mant[:, l2]
    return beta, one, (two_m, two_e)


def _margins(beta: tuple[np.ndarray, np.ndarray], A: np.ndarray) -> np.ndarray:
    """``m = A beta`` (T, n) from split ``beta``, scaled by the largest ``|beta_j|`` so that a
    margin beyond float64 is ``+-inf``, not NaN (as :func:`flows.model.margins`)."""
    mant, expo = beta
    nonzero = mant != 0
    top = np.max(np.where(nonzero, expo, np.iinfo(np.int64).min), axis=1)  # (T,)
    top = np.where(np.any(nonzero, axis=1), top, 0)
    scaled = _value((mant, expo - top[:, None]))  # |.| < 1
    return _value(_mul(_split(scaled @ A.T), (np.ones(1), top[:, None])))


# ------------------------------------------------------------------------------ the core


class _Parts:
    """The two ingredients of the Hessian at a stack of points ``theta`` (T, L, d).

    ``rows`` (T, n, L*d): ``sqrt(l''(m_i)) grad m_i`` as split values, so that the first term is
    ``(1/n) rows^T rows``; ``second`` (T, L, L, d): ``g_j prod_{k != l, l'} w_kj`` (split).
    """

    def __init__(self, theta: np.ndarray, data: Dataset, loss: str) -> None:
        T, L, d = theta.shape
        A = np.asarray(data.signed_features, dtype=float)
        n = A.shape[0]
        beta, one, two = _layer_products(theta)
        m = loss_arguments(_margins(beta, A), data)  # (T, n): margins, or residuals
        with np.errstate(over="ignore", under="ignore"):
            dl, sqrt_ddl = LOSS_DERIVATIVES[loss](m)
        self.shape = (T, L, d, n)
        w = _split(sqrt_ddl)  # (T, n)
        a = _split(A)  # (n, d)
        rows = _mul(
            (w[0][:, :, None, None], w[1][:, :, None, None]),
            (a[0][None, :, None, :], a[1][None, :, None, :]),
            (one[0][:, None], one[1][:, None]),
        )  # (T, n, L, d)
        self.rows = (rows[0].reshape(T, n, L * d), rows[1].reshape(T, n, L * d))
        gs = _split(_loss_factor(dl, A))  # (T, d)
        self.second = _mul((gs[0][:, None, None, :], gs[1][:, None, None, :]), two)

    def trace(self) -> np.ndarray:
        """``(1/n) sum_i l''(m_i) ||grad m_i||^2`` (T,)."""
        n = self.shape[3]
        sq = _value(_mul(self.rows, self.rows))
        return np.sum(sq, axis=(1, 2)) / n

    def matrix(self) -> np.ndarray:
        """The Hessians (T, L*d, L*d)."""
        T, L, d, n = self.shape
        P = L * d
        rows = _value(self.rows)
        first = np.empty((T, P, P))
        finite = np.all(np.isfinite(rows), axis=(1, 2))
        with np.errstate(over="ignore", invalid="ignore"):
            first[finite] = np.einsum("tip,tiq->tpq", rows[finite], rows[finite])
            for t in np.flatnonzero(~finite):  # products of inf with exact zeros stay 0
                rm, re = self.rows[0][t], self.rows[1][t]
                first[t] = np.sum(
                    _value(
                        _mul((rm[:, :, None], re[:, :, None]), (rm[:, None, :], re[:, None, :]))
                    ),
                    axis=0,
                )
            first /= n
        second = _value(self.second)  # (T, L, L, d)
        H = first.reshape(T, L, d, L, d)
        jj = np.arange(d)
        with np.errstate(over="ignore", invalid="ignore"):
            H[:, :, jj, :, jj] += np.moveaxis(second, 3, 0)
        return H.reshape(T, P, P)


def _loss_factor(dl: np.ndarray, A: np.ndarray) -> np.ndarray:
    """``g = (1/n) sum_i l'(m_i) a_i`` (T, d); an exact zero ``a_ij`` or ``l'(m_i)`` contributes
    an exact zero even when the other factor is infinite."""
    n = A.shape[0]
    with np.errstate(over="ignore", invalid="ignore"):
        terms = dl[:, :, None] * A[None, :, :]
        terms = np.where((dl[:, :, None] == 0) | (A[None] == 0), 0.0, terms)
        return np.sum(terms, axis=1) / n


def _top(H: np.ndarray) -> np.ndarray:
    """Largest algebraic eigenvalue of each symmetric matrix of a stack (T, P, P): eigvalsh
    where finite, NaN where an entry is NaN, +inf where an entry is +-inf (the diagonal of the
    Hessian is >= 0, so some Rayleigh quotient is unbounded)."""
    out = np.empty(H.shape[0])
    nan = np.any(np.isnan(H), axis=(1, 2))
    finite = np.all(np.isfinite(H), axis=(1, 2))
    if np.any(finite):
        out[finite] = np.linalg.eigvalsh(H[finite])[:, -1]
    out[~finite] = np.inf
    out[nan] = np.nan
    return out


def _chunks(T: int, entries_per_point: int):
    step = max(1, _CHUNK_ENTRIES // max(1, entries_per_point))
    for start in range(0, T, step):
        yield slice(start, min(T, start + step))


# ------------------------------------------------------------------------------- public API


def hessian(data: Dataset, theta, loss: str | None = None) -> np.ndarray:
    r"""Exact Hessian of the training loss with respect to all ``L*d`` parameters.

    .. math::

        H = \frac1n \sum_i \Big[\ell''(m_i)\, \nabla m_i \nabla m_i^\top
            + \ell'(m_i)\, \nabla^2 m_i\Big],\qquad
        \frac{\partial m_i}{\partial w_{lj}} = a_{ij} \prod_{k\neq l} w_{kj},\qquad
        \frac{\partial^2 m_i}{\partial w_{lj}\,\partial w_{l'j'}}
            = [j = j'][l \neq l']\, a_{ij} \prod_{k\neq l,l'} w_{kj},

    with ``a_i = y_i x_i`` and ``m_i = <w^(1) * ... * w^(L), a_i>``.

    Parameters
    ----------
    data : the training set, a :class:`flows.Dataset`.
    theta : (L, d) finite parameters, row ``l`` is layer ``w^(l)``.
    loss : 'logistic' (``log(1 + e^{-u})``) or 'exponential' (``e^{-u}``).

    Returns
    -------
    (L*d, L*d) symmetric array, parameters in layer-major order (``theta.ravel()``, index
    ``l * d + j``). Exact zeros of ``theta`` give exact zeros; at large margins the entries
    are tiny or exactly 0 (``e^{-margin}`` decay, underflow); an entry beyond float64 is
    ``+-inf`` (see the module docstring).

    Raises
    ------
    ValueError
        ``data`` not a Dataset; ``theta`` not an (L, d) array with L >= 1 and d = ``data.d``,
        or not finite; ``loss`` unknown.
    """
    data = _check_data(data)
    loss = _check_loss(loss, data)
    theta = _check_theta(theta, data)
    return _Parts(theta[None], data, loss).matrix()[0]


def hessian_trace(data: Dataset, theta, loss: str | None = None) -> float:
    r"""``tr H``, without forming the matrix.

    The diagonal of ``\nabla^2 m_i`` is 0 (``m_i`` is linear in each ``w_lj``), so

    .. math::

        \operatorname{tr} H = \frac1n \sum_i \ell''(m_i)\, \|\nabla m_i\|_2^2
          = \frac1n \sum_i \ell''(m_i) \sum_{l,j} a_{ij}^2 \prod_{k\neq l} w_{kj}^2 \;\ge 0 .

    Parameters and errors as :func:`hessian`. Tiny or 0 once the loss weights underflow
    (margins beyond ~1490); ``+inf`` when the exact value exceeds float64.
    """
    data = _check_data(data)
    loss = _check_loss(loss, data)
    theta = _check_theta(theta, data)
    return float(_Parts(theta[None], data, loss).trace()[0])


def top_hessian_eigenvalue(data: Dataset, theta, loss: str | None = None) -> float:
    r"""Largest *algebraic* eigenvalue ``lambda_max(H) = max_{||v|| = 1} v^T H v``.

    Not the spectral norm: near a small initialisation the Hessian is indefinite. At
    ``theta -> 0`` with L = 2, ``grad m = O(theta)`` and ``hess m_i`` couples ``w_1j`` and
    ``w_2j`` with weight ``a_ij``, so ``H -> [[0, diag(g)], [diag(g), 0]]`` with
    ``g = l'(0) (1/n) sum_i a_i``: eigenvalues ``+-|g_j|`` (``+-|a_j| / 2`` for one example
    and the logistic loss). Computed by ``numpy.linalg.eigvalsh`` of :func:`hessian`.

    Parameters and errors as :func:`hessian`. ``+inf`` if an entry of ``H`` is ``+-inf``,
    NaN if one is NaN (module docstring).
    """
    H = hessian(data, theta, loss)
    return float(_top(H[None])[0])


def sharpness_along(
    traj: Trajectory, data: Dataset, loss: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    r"""``tr H`` and ``lambda_max(H)`` at every output time of a flow.

    Parameters
    ----------
    traj : a :class:`flows.Trajectory` (its ``sign_theta``, ``log_abs_theta`` of shape
        (T, L, d) are used, so a balanced reduced run counts as the full L-layer network).
    data : the data set the flow was run on (a Trajectory does not record it; only ``d`` is
        checked).
    loss : the flow's loss (a Trajectory does not record it either).

    Returns
    -------
    trace, top : (T,) arrays, equal to :func:`hessian_trace` and
        :func:`top_hessian_eigenvalue` at ``traj.theta[k]``.

        * **NaN** at a time where some ``|theta_lj|`` overflows float64
          (``log_abs_theta > ~709.78``): the Hessian is not evaluated there.
        * Tiny or exactly 0 where the loss weights underflow (the Hessian decays like
          ``e^{-margin}``; margins beyond ~745 give 0), which is most of a long run.
        * ``+inf`` where the exact value exceeds float64 (module docstring).

    Computed in batches over times (one stacked ``eigvalsh``).

    Raises
    ------
    ValueError
        ``traj`` not a consistent Trajectory (see :func:`analysis._checks.trajectory`) or its
        ``log_abs_theta`` not (T, depth, d); ``data`` not a Dataset or of another ``d``;
        ``loss`` unknown.
    """
    traj = trajectory(traj)
    data = _check_data(data)
    loss = _check_loss(loss, data)
    T, L, d = np.shape(traj.log_abs_theta)
    if L != traj.depth:
        raise ValueError(
            f"traj.log_abs_theta must have one row per layer (depth {traj.depth}), "
            f"got shape {(T, L, d)}"
        )
    if d != data.d:
        raise ValueError(f"data must have d = {d} features like traj, got d = {data.d}")
    if L * d > MAX_PARAMETERS:
        raise ValueError(
            f"traj: the Hessian of L * d = {L * d} parameters is too large to build (at most "
            f"{MAX_PARAMETERS})"
        )
    theta = traj.theta
    ok = np.all(np.isfinite(theta), axis=(1, 2))
    trace = np.full(T, np.nan)
    top = np.full(T, np.nan)
    idx = np.flatnonzero(ok)
    for part in _chunks(len(idx), (L * d) ** 2 + L * L * d + data.n * L * d):
        sel = idx[part]
        parts = _Parts(theta[sel], data, loss)
        trace[sel] = parts.trace()
        top[sel] = _top(parts.matrix())
    return trace, top


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
