"""Clocks: the same path, parametrized by rescaled time ``tau`` or by original time ``t``.

docs/theory.md §3. The engine always evaluates the *rescaled* field ``F = dtheta/dtau`` (the gradient of
the weighted margin at ``theta + eps``), related to the original one by
``dtheta/dt = -grad L(theta + eps) = c(theta + eps) F`` with
``c = (1/n) sum_i |l'(m_i(theta + eps))|`` (for one example ``c = -l'(m)``, the paper's clock;
for ``n > 1`` this is the natural generalisation, the mean loss-derivative weight).

A run integrates in its own clock ``s`` and carries ``tau`` along (``dtau/ds`` = 1 or ``c``).
The original time of a rescaled run, ``t(tau) = int_0^tau ds / c(s)``, is a stiff quadrature
(``log t`` follows the margin, which grows like ``exp(2 mu_d tau)``); it is computed afterwards
in log space by :func:`log_original_time`: ``asinh K`` (``K = -log c``) interpolated once per
solver step, every piece of the step integrated on the interpolant, pieces that need it
sampled again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .checks import choice

#: Beyond ``log t > LOG_T_LIMIT`` (margins near 1e100) ``log t`` is reported as ``+inf``.
LOG_T_LIMIT = 1e100
EPS = np.finfo(float).eps


@dataclass(frozen=True)
class Clock:
    """One clock: ``log(dtau/ds)`` from ``log c``, and whether ``s`` is the original time."""

    log_speed: Callable[[Any], Any]  # log c (a float or an array) -> log(dtau/ds)
    original: bool


CLOCKS: dict[str, Clock] = {
    "rescaled": Clock(log_speed=lambda log_c: 0.0, original=False),
    "original": Clock(log_speed=lambda log_c: log_c, original=True),
}


def get_clock(name: str) -> Clock:
    """Look ``name`` up in :data:`CLOCKS`; ``ValueError`` naming 'clock' if unknown."""
    return CLOCKS[choice(name, "clock", CLOCKS)]


def clock_for(name: str | None, data) -> str:
    """The clock name for ``data`` (a :class:`~flows.data.Dataset`): ``name`` checked, or for
    None 'rescaled' in classification and 'original' in regression.

    The rescaled clock ``dtau = c dt``, ``c = (1/n) sum_i |l'(u_i)|``, is refused in regression
    (``ValueError`` naming 'clock'): there ``c`` is the mean absolute residual, which tends to 0
    exponentially fast as the flow interpolates, so ``tau`` has a finite limit and a horizon in
    ``tau`` may never be reached (for margin losses ``c -> 0`` only as the margins grow, and
    ``tau -> inf``).
    """
    if name is None:
        return "original" if data.regression else "rescaled"
    choice(name, "clock", CLOCKS)
    if data.regression and not CLOCKS[name].original:
        raise ValueError(
            "clock: the rescaled clock (dtau = c dt with c the mean |l'|) is not defined for "
            "regression, where c -> 0 exponentially and tau stays bounded: use "
            "clock='original'"
        )
    return name


#: Degree of the interpolant of ``asinh K`` on an interval; its Chebyshev–Lobatto nodes on
#: [0, 1] (they include both ends), on which ``K`` is sampled, and the matrix taking values
#: there to its coefficients in Chebyshev polynomials of ``2 x - 1``.
DEGREE = 10
_NODES = 0.5 * (1.0 - np.cos(np.pi * np.arange(DEGREE + 1) / DEGREE))
_TO_CHEBYSHEV = np.linalg.inv(np.polynomial.chebyshev.chebvander(2.0 * _NODES - 1.0, DEGREE))
#: 16-point Gauss–Legendre rule on [0, 1] (log weights); a piece is sampled at its ends and
#: these nodes.
_GL_X, _GL_W = np.polynomial.legendre.leggauss(16)
_GL_X, _GL_LOGW = 0.5 * (_GL_X + 1.0), np.log(0.5 * _GL_W)
_SAMPLES = np.concatenate([[0.0], _GL_X, [1.0]])
#: Largest variation of ``K`` over a window integrated by the Gauss–Legendre rule (its relative
#: error on ``exp(K)`` is below 1e-11 up to there).
GL_SPREAD = 30.0
#: Where ``K`` is more than this below its maximum on a piece, ``exp(K)`` is negligible
#: (``e^-26 ~ 5e-12`` relative): a steep piece is integrated on the window above.
PEAK_DROP = 26.0
#: Interpolation error (absolute, in ``K``) below which the interpolant is trusted to place that
#: window.
TRUSTED = 0.1
#: Most steps of the Illinois method that place each end of the window.
ROOT_STEPS = 8
#: An interval of at most this many float spacings of its times is accepted as it is (its nodes
#: are barely distinct floats).
ATOMIC_ULPS = 64
#: Levels of :func:`log_original_times` (each at least halves a piece).
MAX_LEVELS = 40
#: Pieces of a run refined at once by :func:`log_original_times`; past this, a level is
#: accepted as is.
MAX_PIECES = 20_000
#: Samples of ``K`` the refinements of one run of :func:`log_original_times` may take beyond
#: its first level: this many, or :data:`REFINE_FACTOR` times the first level's, whichever is
#: more; the level that passes it is accepted as is (:class:`QuadratureReport` says so). A
#: clock factor with kinks at every scale (the sliding combination of l_inf-SAM where its
#: multilinear system changes root) would otherwise be refined for 40 levels at thousands of
#: pieces each (1.9e6 samples, 150 s, on teacher data at depth 4).
MAX_SAMPLES = 20_000
REFINE_FACTOR = 4


@dataclass
class QuadratureReport:
    """What :func:`log_original_time` spent: ``samples`` of ``K``, and whether it stopped
    refining at its cap (:data:`MAX_SAMPLES`; ``capped``: the pieces still open were accepted at the
    accuracy they had, below ``tol``)."""

    samples: int = 0
    capped: bool = False


def _chebyshev(coef: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The interpolant with Chebyshev coefficients ``coef`` (one row per row of ``x``) at the
    points ``x`` in [0, 1] (Clenshaw's recurrence in ``t = 2 x - 1``)."""
    t = 2.0 * x - 1.0
    b1 = np.zeros_like(x)
    b2 = np.zeros_like(x)
    for j in range(coef.shape[1] - 1, 0, -1):
        b1, b2 = coef[:, j, None] + 2.0 * t * b1 - b2, b1
    return coef[:, 0, None] + t * b1 - b2


def _interpolation_error(coef: np.ndarray) -> np.ndarray:
    """Estimate of ``max |A - P|`` for the interpolant ``P`` of degree ``N`` with Chebyshev
    coefficients ``a_n`` (rows of ``coef``).

    If they decay at a rate ``r < 1/2`` (estimated from ``a_{N-3} .. a_N``), the neglected
    tail ``sum_{n > N} |a_n| ~ |a_N| r / (1 - r)``, doubled; otherwise (under-resolved)
    ``4 (|a_{N-1}| + |a_N|)``.
    """
    a = np.abs(coef)
    n = a.shape[1] - 1
    last = a[:, n - 1] + a[:, n]
    r = np.minimum(1.0, np.sqrt(last / (a[:, n - 3] + a[:, n - 2] + 1e-300)))
    geometric = 2.0 * np.maximum(a[:, n], r * a[:, n - 1]) * r / (1.0 - np.minimum(r, 0.5))
    return np.where(r < 0.5, geometric, 4.0 * last)


def _log_exp_gauss(length: np.ndarray, samples: np.ndarray) -> np.ndarray:
    """``log int exp(K)`` per row over intervals of the given ``length`` from ``asinh K`` at
    the Gauss–Legendre nodes (rows of ``samples``), in log-sum-exp form."""
    kg = np.sinh(samples)
    top = np.max(kg, axis=1, keepdims=True)
    return top[:, 0] + np.log(np.sum(np.exp(kg - top + _GL_LOGW), axis=1)) + np.log(length)


def _window_end(coef: np.ndarray, out: np.ndarray, inside: np.ndarray, floor: np.ndarray):
    """Where ``sinh P`` (``P``: the interpolants, rows of ``coef``) crosses ``floor`` between
    ``out`` (below) and ``inside`` (above), by the Illinois method on ``P - asinh(floor)``, up
    to :data:`ROOT_STEPS` steps and until ``sinh P`` at ``out`` is within about 1 of
    ``floor``: the end of the final bracket on the ``out`` side (so that the window holds
    everything above ``floor``)."""
    target = np.arcsinh(floor)
    close = 1.0 / (1.0 + np.abs(floor))
    f_out = _chebyshev(coef, out[:, None])[:, 0] - target
    f_in = _chebyshev(coef, inside[:, None])[:, 0] - target
    miss = f_out.copy()
    for _ in range(ROOT_STEPS):
        active = miss < -close
        if not np.any(active):
            break
        gap = f_in - f_out
        x = np.where(gap > 0, out - f_out * (inside - out) / np.where(gap > 0, gap, 1.0), out)
        f = _chebyshev(coef, x[:, None])[:, 0] - target
        step_out, step_in = active & (f <= 0), active & (f > 0)
        f_in = np.where(step_out, 0.5 * f_in, np.where(step_in, f, f_in))
        f_out = np.where(step_in, 0.5 * f_out, np.where(step_out, f, f_out))
        miss = np.where(step_out, f, miss)
        out, inside = np.where(step_out, x, out), np.where(step_in, x, inside)
    return out


def _peak_window(coef: np.ndarray, x: np.ndarray, samples: np.ndarray, floor: np.ndarray):
    """``[x_lo, x_hi]`` (in [0, 1]) outside which ``sinh P`` stays below ``floor`` on each row
    of the points ``x`` (increasing; ``samples``: the interpolant ``P`` of ``asinh K`` there):
    the outermost points above ``floor`` and their outer neighbours bracket the two ends."""
    above = samples >= np.arcsinh(floor)[:, None]
    n = x.shape[1]
    first = np.argmax(above, axis=1)
    last = n - 1 - np.argmax(above[:, ::-1], axis=1)
    x_lo, x_hi = x[:, 0].copy(), x[:, -1].copy()
    low, high = np.flatnonzero(first > 0), np.flatnonzero(last < n - 1)
    x_lo[low] = _window_end(coef[low], x[low, first[low] - 1], x[low, first[low]], floor[low])
    x_hi[high] = _window_end(coef[high], x[high, last[high] + 1], x[high, last[high]], floor[high])
    return x_lo, x_hi


#: An interval rule: ``(lo, hi, k, tol, last, which, a, b) -> (value, done, narrow, w_lo,
#: w_hi)``.
Rule = Callable[..., tuple[np.ndarray, ...]]


def _interval_rule(
    lo: np.ndarray,
    hi: np.ndarray,
    k: np.ndarray,
    tol: float,
    last: bool,
    which: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
) -> tuple[np.ndarray, ...]:
    """One level of :func:`log_original_times`: intervals ``[lo, hi]`` with ``K`` at the nodes
    (rows of ``k``) and pieces ``[a, b]`` of them (``which``: the interval of each piece);
    per piece ``log int exp(K)``, whether it is accepted, and for the others whether to
    narrow them to a window ``[w_lo, w_hi]`` (times; the piece itself where not narrowed) or
    to refine them.

    ``A = asinh K`` is interpolated (degree :data:`DEGREE`): an error ``e`` of ``A`` moves
    ``K`` by at most ``(1 + |K|) expm1(e)``, relative for large ``K`` as the tolerance is. On a
    piece ``A`` is sampled (from the interpolant) at its ends and the 16 Gauss–Legendre nodes.
    A piece is accepted when that error at the maximum of ``K`` is below ``tol`` relative to
    the value (or below the resolution of ``K`` in floats: ``A`` varies by
    ``spread * ulp(s) / length`` between representable times) and ``exp(K)`` is integrated
    accurately: by Gauss–Legendre where ``K`` varies by at most :data:`GL_SPREAD`, on the
    piece or, for a steeper one, on the window where ``K`` is within :data:`PEAK_DROP` of its
    maximum (the rest is negligible; its ends by the Illinois method on the interpolant); or,
    where ``K`` is so large that the bounds of Markov's inequality (``|A'| <= N^2 spread(A) /
    length``) already are within the tolerance, ``max K + log(length) - w <= log int exp(K)
    <= max K + log(length)`` with ``w = 1 + log(N^2 spread(A) (1 + max |K|))``, as
    ``max K + log(length) - min(w, log1p(spread(K)))`` (exact to ``O(1)`` for an exponential
    ``K``). A steep piece with a trusted interpolant (error below :data:`TRUSTED`, the
    tolerance or the resolution) whose window is too steep for the rule is narrowed to the
    window; any other is refined. At the ``last`` level, and on an interval only
    :data:`ATOMIC_ULPS` floats long, everything is accepted; where ``K`` is not finite at a
    node (``+inf``: ``c = 0``, ``t`` is infinite; else NaN) a piece is accepted with that value
    once it is its interval.
    """
    length = hi - lo
    values = np.arcsinh(k)
    coef = values @ _TO_CHEBYSHEV.T
    error = _interpolation_error(coef)[which]
    reach = np.maximum(np.abs(lo), np.abs(hi))
    resolution = (100.0 * EPS * np.ptp(values, axis=1) * reach / length)[which]
    atomic = (length <= ATOMIC_ULPS * np.spacing(reach))[which] | last
    coef = coef[which]
    x_a, x_b = (a - lo[which]) / length[which], (b - hi[which]) / length[which] + 1.0
    x = x_a[:, None] + (x_b - x_a)[:, None] * _SAMPLES
    samples = _chebyshev(coef, x)
    high, low = np.max(samples, axis=1), np.min(samples, axis=1)
    top = np.sinh(high)
    spread = top - np.sinh(low)
    scale = np.maximum(1.0, np.abs(top))
    grow = (1.0 + np.abs(top)) * np.expm1(error)
    resolution *= 1.0 + np.abs(top)
    span = b - a
    gauss = spread <= GL_SPREAD
    bracket = np.maximum(0.0, 1.0 + np.log(DEGREE**2 * (high - low) * (1.0 + np.abs(top))))
    flat = ~gauss & ((bracket <= tol * scale) | atomic)
    value = np.where(flat, top + np.log(span) - np.minimum(bracket, np.log1p(spread)), np.nan)
    value[gauss] = _log_exp_gauss(span[gauss], samples[gauss, 1:-1])
    steep = ~gauss & ~flat & (grow <= np.maximum(TRUSTED, tol * scale) + resolution)
    w_lo, w_hi = x_a.copy(), x_b.copy()
    windowed = np.zeros(len(a), dtype=bool)
    if np.any(steep):
        s = np.flatnonzero(steep)
        w_lo[s], w_hi[s] = _peak_window(
            coef[s], x[s], samples[s], top[s] - PEAK_DROP - 2.0 * grow[s]
        )
        ag = _chebyshev(coef[s], w_lo[s, None] + (w_hi - w_lo)[s, None] * _GL_X)
        rise = np.maximum(top[s], np.sinh(np.max(ag, axis=1))) - np.sinh(np.min(ag, axis=1))
        fits = rise <= GL_SPREAD
        windowed[s] = fits
        value[s[fits]] = _log_exp_gauss(((w_hi - w_lo)[s] * length[which][s])[fits], ag[fits])
    accurate = grow <= tol * np.maximum(1.0, np.abs(value)) + resolution
    done = (gauss | flat | windowed) & accurate
    done |= atomic
    narrow = steep & ~done & (w_hi - w_lo <= 0.5 * (x_b - x_a))
    broken = ~np.isfinite(k).all(axis=1)[which]  # c = 0 somewhere (K = +inf), or NaN
    value[broken] = np.where(np.any(k == np.inf, axis=1)[which], np.inf, np.nan)[broken]
    whole = (a == lo[which]) & (b == hi[which])
    done[broken] = (whole | atomic)[broken]
    narrow[broken] = False
    start, width = lo[which], length[which]
    least = ATOMIC_ULPS * np.spacing(reach[which])  # a window at least this long
    w_lo = np.maximum(a, np.minimum(start + w_lo * width, start + w_hi * width - least))
    w_hi = np.minimum(b, np.maximum(start + w_hi * width, w_lo + least))
    return value, done, narrow, np.where(narrow, w_lo, a), np.where(narrow, w_hi, b)


def log_original_time(
    grid: np.ndarray,
    steps: list[np.ndarray],
    K: Callable[[np.ndarray, np.ndarray], np.ndarray],
    tol: float = 1e-9,
    rule: Rule | None = None,
    report: QuadratureReport | None = None,
    initial: float = -np.inf,
) -> np.ndarray:
    """``log t(tau) = log(t_0 + int_{grid[0]}^tau exp(K))``, ``K = -log c``, at the increasing
    times ``grid``, from ``log t_0 = initial`` at ``grid[0]`` (default ``t_0 = 0``):
    :func:`log_original_times` of one run, ``K(s, ref)`` as there. ``report`` (if given)
    records the samples of ``K`` taken and whether a cap ended the refinement; a path
    integrated in stretches, each from ``log t`` where the one before it ends, is summed in the
    order of one call over the whole path."""
    report = QuadratureReport() if report is None else report
    log_t, samples, capped = log_original_times(
        grid, [steps], lambda s, ref, run: K(s, ref), tol, rule, np.array([initial])
    )
    report.samples += int(samples[0])
    report.capped |= bool(capped[0])
    return log_t[0]


def log_original_times(
    grid: np.ndarray,
    steps: list[list[np.ndarray]],
    K: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray],
    tol: float = 1e-9,
    rule: Rule | None = None,
    initial: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``log t = log(t_0 + int_{grid[0]}^tau exp(K))`` on the increasing times ``grid`` for
    many runs at once, from ``log t_0 = initial[r]`` (default ``-inf``, ``t_0 = 0``).

    ``steps[r]``: the solver steps of each stretch of run ``r``'s path (strictly increasing
    times, or a stretch of zero length; together from ``grid[0]`` to ``grid[-1]``; within a step
    the path is one polynomial, and ``K`` may jump between stretches, at event times).
    ``K(s, ref, run)`` evaluates the exponent of run ``run[q]`` at ``s[q]``; ``ref[q]`` is a
    time inside the stretch the sample belongs to, so that ``K`` can take one-sided values.

    Each run's integral is cut at the grid times and its steps. The first level samples ``K``
    at the ``DEGREE + 1`` Chebyshev–Lobatto nodes of every step (adjacent steps of a stretch
    sharing their common node) and applies ``rule`` (:func:`_interval_rule`, or an
    implementation with the same signature and results: the compiled backend's
    :func:`flows.compiled._quadrature_kernels.interval_rule`) to every piece of each step. A
    later level samples the pieces still open, each narrowed to its peak window, restricted to
    itself (where its interval held more) or bisected, up to :data:`MAX_LEVELS` levels;
    accepted pieces are added in log space to their original piece, and the pieces
    accumulated. ``tol`` is relative in log. A run's refinements take at most
    :data:`MAX_SAMPLES` samples of ``K``, or :data:`REFINE_FACTOR` times its first level's,
    and at most :data:`MAX_PIECES` pieces at once; levels, caps and pieces are counted per
    run, and the rule acts piece by piece, so a run's numbers are those it has alone. Entries
    where ``log t`` exceeds :data:`LOG_T_LIMIT` are ``+inf`` (``t`` is then beyond
    ``exp(1e100)``). Returns ``log t`` (runs, len(grid)), and per run the samples of ``K``
    taken and whether a cap ended its refinement.
    """
    rule = _interval_rule if rule is None else rule
    count = len(steps)
    grid = np.asarray(grid, dtype=float)
    steps = [[np.asarray(s, dtype=float) for s in stretches] for stretches in steps]
    initial = np.full(count, -np.inf) if initial is None else np.asarray(initial, dtype=float)
    out = np.full((count, grid.size), np.inf)
    out[:, 0] = initial
    samples, capped = np.zeros(count, dtype=np.int64), np.zeros(count, dtype=bool)
    edges = [_edges(grid, stretches) for stretches in steps]
    if edges[0].size < 2:  # the grid is one time: every run's edges are that time
        return out, samples, capped
    lo, hi, which, times, ref, index, time_run = _first_levels(steps, edges)
    a = np.concatenate([e[:-1] for e in edges])
    b = np.concatenate([e[1:] for e in edges])
    run_of = np.repeat(np.arange(count), [e.size - 1 for e in edges])
    k = K(times, ref, time_run)[index]
    samples += np.bincount(time_run, minlength=count)
    allowed = samples + np.maximum(MAX_SAMPLES, REFINE_FACTOR * samples)
    total = np.full(a.size, -np.inf)
    owner = np.arange(a.size)
    ref = ref[index[:, 0]]  # per interval
    for level in range(MAX_LEVELS + 1):
        open_pieces = np.bincount(run_of, minlength=count)
        if level > 0:
            nodes = lo[:, None] + _NODES[None, :] * (hi - lo)[:, None]
            repeat = _NODES.size
            k = K(nodes.ravel(), np.repeat(ref, repeat), np.repeat(run_of, repeat))
            k = k.reshape(nodes.shape)
            samples += open_pieces * repeat
        capped_now = samples >= allowed
        last = (level == MAX_LEVELS) | (open_pieces > MAX_PIECES) | capped_now
        value, done, narrow, w_lo, w_hi = _rule_by_last(
            rule, lo, hi, k, tol, last[run_of], which, a, b
        )
        if level == 0:
            total = np.where(done, value, -np.inf)
        else:
            np.logaddexp.at(total, owner[done], value[done])
        capped |= capped_now & (open_pieces > 0)
        if done.all():
            break
        whole = (a == lo[which]) & (b == hi[which])
        split = ~done & ~narrow & whole
        keep = ~done & ~split
        mid = 0.5 * (a[split] + b[split])
        ref = ref[which]
        a, b, owner, ref, run_of = (
            np.concatenate([np.where(narrow, w_lo, a)[keep], a[split], mid]),
            np.concatenate([np.where(narrow, w_hi, b)[keep], mid, b[split]]),
            *(np.concatenate([x[keep], x[split], x[split]]) for x in (owner, ref, run_of)),
        )
        lo, hi, which = a, b, np.arange(a.size)
    piece_start = np.concatenate([[0], np.cumsum([e.size - 1 for e in edges])])
    for r in range(count):
        logs = total[piece_start[r] : piece_start[r + 1]]
        at_edges = np.logaddexp.accumulate(np.concatenate([initial[r : r + 1], logs]))
        at_edges[at_edges > LOG_T_LIMIT] = np.inf
        out[r, 1:] = at_edges[np.searchsorted(edges[r], grid[1:])]
    return out, samples, capped


def _edges(grid: np.ndarray, stretches: list[np.ndarray]) -> np.ndarray:
    """The ends of a run's pieces: the grid times and the step boundaries strictly inside the
    grid."""
    inner = np.concatenate([grid[:0], *stretches])
    return np.unique(np.concatenate([grid, inner[(inner > grid[0]) & (inner < grid[-1])]]))


def _first_levels(steps: list[list[np.ndarray]], edges: list[np.ndarray]) -> tuple:
    """The first level of :func:`log_original_times` for every run (``steps[r]``: its
    stretches, ``edges[r]`` the ends of its pieces), one after the other: the steps ``lo``,
    ``hi`` of the stretches of positive length, the step of each piece, the times at the nodes
    of every step (adjacent steps of a stretch sharing one) with their ``ref`` (the middle of
    the stretch) and run, and the rows of those times at the nodes of each step."""
    parts = [[s for s in stretches if s[-1] > s[0]] for stretches in steps]
    flat = [s for part in parts for s in part]
    stretch_run = np.repeat(np.arange(len(steps)), [len(part) for part in parts])
    counts = np.array([s.size - 1 for s in flat])
    lo = np.concatenate([s[:-1] for s in flat])
    hi = np.concatenate([s[1:] for s in flat])
    inner = _NODES.size - 1
    stretch = np.repeat(np.arange(len(flat)), counts)
    index = (inner * np.arange(lo.size) + stretch)[:, None] + np.arange(_NODES.size)
    times = np.empty(inner * lo.size + len(flat))
    times[index] = lo[:, None] + _NODES * (hi - lo)[:, None]
    middle = np.array([0.5 * (s[0] + s[-1]) for s in flat])
    ref = np.repeat(middle, inner * counts + 1)
    time_run = np.repeat(stretch_run, inner * counts + 1)
    intervals = np.bincount(np.repeat(stretch_run, counts), minlength=len(steps))
    start = np.concatenate([[0], np.cumsum(intervals)])
    which = np.concatenate([
        np.searchsorted(lo[start[r] : start[r + 1]], 0.5 * (e[:-1] + e[1:]), side="right") - 1
        + start[r]
        for r, e in enumerate(edges)
    ])  # fmt: skip
    return lo, hi, which, times, ref, index, time_run


def _rule_by_last(rule, lo, hi, k, tol, last, which, a, b) -> tuple[np.ndarray, ...]:
    """``rule`` on the pieces, each with its own ``last`` (one call per value that occurs: the
    rule acts piece by piece)."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        if last.all() or not last.any():
            return rule(lo, hi, k, tol, bool(last[0]), which, a, b)
        results = [np.empty(a.size), np.empty(a.size, bool), np.empty(a.size, bool),
                   np.empty(a.size), np.empty(a.size)]  # fmt: skip
        for flag in (False, True):
            rows = np.flatnonzero(last == flag)
            part = rule(lo, hi, k, tol, flag, which[rows], a[rows], b[rows])
            for full, piece in zip(results, part, strict=True):
                full[rows] = piece
        return tuple(results)
