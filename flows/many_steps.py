"""Minibatch and noisy steps of many :func:`flows.iterate` runs at once, for
:func:`flows.iterate_many`.

Each run keeps its own batches, label noise and SGLD draws (its
:class:`flows.batch_steps.FloatBatchSteps`, built as the single call builds it, draws them from
the run's seed at each step), and step ``k`` of every run is the float step of
:meth:`flows.batch_steps.FloatBatchSteps.step` on the rows its batch selects:

    u_i = <beta, z_i> - o_i,   g = (1/B) sum_i l'(u_i) z_i * prod_{k != l} theta^(k),

the perturbed point ``theta + eps(g)`` and the gradient there, the base optimizer's step and
the SGLD term, with the same checks. The runs' arrays are stacked along a leading axis
(``theta`` is ``(runs, L, d)``, the rows ``(runs, B, d)``), so that each numpy operation acts on
every run: the products are stacked matrix products and the norms sums over a run's entries,
summed in another order than the single run's ``numpy.dot`` and ``numpy.vdot``. A run's
iterates agree with its single call's to rounding; its batches and noise are the same draws.

A run whose step a check stops (where the single run would hand that step back to the general
step) leaves the batch: :func:`flows.iterate_many` runs it as the single call.
"""

from __future__ import annotations

import math

import numpy as np

from .algorithms import GradientSummary
from .batch_steps import FloatBatchSteps
from .compiled import available
from .fused import log_magnitudes
from .minibatch import epoch_order


class ManyFloatSteps:
    """The float steps of several runs that share their problem up to the hyper-parameters,
    their optimizer and their batch size (module docstring).

    Parameters
    ----------
    singles : each run's :class:`~flows.batch_steps.FloatBatchSteps` (its batches and noise).
    hyperparameters : by name, the runs' values as an array (runs,) each.
    """

    def __init__(self, singles: list[FloatBatchSteps], hyperparameters: dict[str, np.ndarray]):
        self.singles = singles
        first = singles[0]
        self.first = first
        self.hp = {k: np.asarray(v, dtype=float)[:, None, None] for k, v in hyperparameters.items()}
        self.perturbs = first.algorithm.perturbs
        self.room = np.array([s.room for s in singles])
        self.noisy = any(s.noise is not None for s in singles)
        self.noisy_labels = np.array([s.noisy_labels for s in singles])
        self.sampling = _common_sampling(singles)
        self.roots = [0 if s.batches is None else s.batches.root for s in singles]
        if self.sampling == "iid" and not _compiled_draws(self.roots, first):
            self.sampling = None
        self.orders: dict[tuple[int, int], np.ndarray] = {}

    def advance(
        self, theta: np.ndarray, steps: int, record_every: int, kept: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Steps ``1, ..., steps`` of every run from ``theta`` (runs, L, d); the iterate of
        every step that ``record_every`` divides, and of the last, into ``kept[:, i]`` (``i`` =
        1, 2, ...). Returns which runs took every step (bool (runs,)) and their momentum
        buffers after the last one."""
        runs = theta.shape[0]
        alive = np.arange(runs)
        ok = self.in_range(theta)
        theta, alive = theta[ok], alive[ok]
        beta = self.first.product(theta)
        buffer: np.ndarray | None = None
        recorded = 0
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for k in range(steps):
                if not alive.size:
                    break
                Z, offsets = self.rows(alive, k)
                g, ok = self.gradient(theta, beta, Z, offsets, alive)
                buffer = self.first.base.direction(g, theta, buffer)
                rate = self.first.base.rate(k)
                theta = theta - rate * buffer
                if self.noisy:
                    theta = theta + np.stack(
                        [self.kick(r, k, theta.shape[1:], rate) for r in alive]
                    )
                beta, kept_ok = self.kept(theta, Z, offsets, alive)
                ok &= kept_ok
                if not ok.all():
                    theta, beta, buffer, alive = theta[ok], beta[ok], buffer[ok], alive[ok]
                if (k + 1) % record_every == 0 or k + 1 == steps:
                    recorded += 1
                    kept[alive, recorded] = theta
        done = np.zeros(runs, dtype=bool)
        done[alive] = True
        buffers = np.empty_like(kept[:, 0])
        if buffer is not None:
            buffers[alive] = buffer
        return done, buffers

    def kick(self, r: int, k: int, shape: tuple, rate: float) -> np.ndarray:
        """Run ``r``'s SGLD term of step ``k`` (:meth:`flows.minibatch.StepNoise.kick`; 0
        without noise)."""
        noise = self.singles[r].noise
        return np.broadcast_to(0.0 if noise is None else noise.kick(k, shape, rate), shape)

    def rows(self, alive: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray | None]:
        """The rows ``z_i`` (runs, B, d) and offsets (runs, B) or None that step ``k`` of each
        run sees, with its label noise (each run's own draws): by the runs' batch indices of
        :meth:`indices` where the runs share a sampling and no label noise, else each run's
        :meth:`FloatBatchSteps.rows`."""
        index = self.indices(alive, k)
        if index is not None:
            offsets = self.first.offsets
            return self.first.Z[index], None if offsets is None else offsets[index]
        rows = [self.singles[r].rows(k) for r in alive]
        Z = np.stack([z for z, _ in rows])
        if rows[0][1] is None:
            return Z, None
        return Z, np.stack([o for _, o in rows])

    def indices(self, alive: np.ndarray, k: int) -> np.ndarray | None:
        """The example indices (runs, B) of step ``k`` of each run, where the runs share a
        sampling without label noise (None otherwise): every example for full batches, the
        compiled draws of :func:`flows.seeded_draws.iid_batches` for ``'iid'``, slices of each
        run's epoch order for ``'epoch'`` (drawn once an epoch, as
        :meth:`flows.minibatch.Minibatches.batch` draws it)."""
        if self.sampling is None or self.noisy_labels.any():
            return None
        if self.sampling == "full":
            return np.broadcast_to(
                np.arange(self.first.Z.shape[0]), (alive.size, self.first.Z.shape[0])
            )
        batches = self.first.batches
        assert batches is not None
        if self.sampling == "iid":
            from .seeded_draws import iid_batches

            return iid_batches(np.array([self.roots[r] for r in alive]), k, batches.n, batches.size)
        per_epoch = -(-batches.n // batches.size)
        epoch, j = divmod(k, per_epoch)
        if j == 0:
            self.orders = {key: v for key, v in self.orders.items() if key[1] == epoch}
        rows = []
        for r in alive:
            if (r, epoch) not in self.orders:
                self.orders[r, epoch] = epoch_order(int(self.roots[r]), epoch, batches.n)
            rows.append(self.orders[r, epoch][j * batches.size : (j + 1) * batches.size])
        return np.stack(rows)

    def in_range(self, theta: np.ndarray) -> np.ndarray:
        """Where each run's ``theta`` (runs, L, d) is in the float range of
        :meth:`FloatBatchSteps.largest` (bool (runs,))."""
        top, bottom = self.extremes(theta)
        low, high = self.first.top_range
        return (low < top) & (top < high) & (bottom > self.first.floor)

    @staticmethod
    def extremes(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The largest and smallest ``|theta|`` of each run (runs, ...), exact zeros counted
        as 1 (NaN where NaN)."""
        size = np.abs(theta.reshape(theta.shape[0], -1))
        size = np.where(size == 0, 1.0, size)
        return np.max(size, axis=1), np.min(size, axis=1)

    def plain_gradient(
        self, theta: np.ndarray, beta: np.ndarray, Z: np.ndarray, offsets: np.ndarray | None
    ) -> np.ndarray:
        """``grad L_B(theta)`` of each run: ``((1/B) sum_i l'(u_i) z_i) * prod_{k != l}
        theta^(k)`` (runs, L, d)."""
        u = np.matmul(Z, beta[:, :, None])[:, :, 0]
        if offsets is not None:
            u -= offsets
        g = np.matmul(self.first.weight(u)[:, None, :], Z)[:, 0, :]
        g *= self.first.sign / Z.shape[1]
        return g[:, None, :] * self.first.leave_one_out(theta)

    def gradient(
        self, theta: np.ndarray, beta: np.ndarray, Z: np.ndarray, offsets: np.ndarray | None,
        alive: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        """``grad L_B(theta + eps(grad L_B(theta)))`` of each run (``eps = 0`` for gd), and
        where it was computed in the float range with a nonzero gradient (bool (runs,))."""
        g = self.plain_gradient(theta, beta, Z, offsets)
        if not self.perturbs:
            return g, np.ones(theta.shape[0], dtype=bool)
        norm = np.sqrt(np.sum(g * g, axis=(1, 2)))
        ok = (norm > 0.0) & (norm < math.inf)
        norm = np.where(ok, norm, 1.0)[:, None, None]
        unit = g / norm
        log_abs = log_magnitudes(theta) if self.first.algorithm.reads_theta else None
        summary = GradientSummary(
            unit, np.sign(unit), np.log(norm), self.first.multiplicity, log_abs
        )
        hp = {k: v[alive] for k, v in self.hp.items()}
        point = theta + self.first.algorithm.perturb(summary, hp)
        ok &= self.in_range(point)
        return self.plain_gradient(point, self.first.product(point), Z, offsets), ok

    def kept(
        self, theta: np.ndarray, Z: np.ndarray, offsets: np.ndarray | None, alive: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``beta`` of each run's iterate and whether the run keeps it
        (:meth:`FloatBatchSteps.kept`: in the float range, every ``|u_i|`` of its rows within
        the loss-check argument, bounded first by ``max_i ||z_i|| ||beta|| + max_i |o_i|``)."""
        top, bottom = self.extremes(theta)
        low, high = self.first.top_range
        ok = (low < top) & (top < high) & (bottom > self.first.floor)
        beta = self.first.product(theta)
        room = self.room[alive]
        if offsets is not None and self.noisy_labels.any():
            room = np.array(
                [
                    self.singles[r].room_for(float(np.max(np.abs(o))))
                    if self.noisy_labels[r]
                    else self.room[r]
                    for r, o in zip(alive, offsets, strict=True)
                ]
            )
        bounded = (self.first.root_d * top**self.first.depth <= room) | (
            np.sqrt(np.sum(beta * beta, axis=1)) <= room
        )
        if not bounded.all():
            u = np.matmul(Z, beta[:, :, None])[:, :, 0]
            if offsets is not None:
                u = u - offsets
            bounded |= np.max(np.abs(u), axis=1) <= self.first.loss_limit
        return beta, ok & bounded


def _common_sampling(singles: list[FloatBatchSteps]) -> str | None:
    """``'full'`` (every example each step), ``'iid'`` or ``'epoch'`` where every run samples
    that way (drawn from its root seed), else None."""
    kinds = {
        "full"
        if s.batches is None
        else "given"
        if s.batches.given is not None
        else s.batches.sampling
        for s in singles
    }
    kind = kinds.pop() if len(kinds) == 1 else None
    return kind if kind in ("full", "iid", "epoch") else None


def _compiled_draws(roots: list[int], first: FloatBatchSteps) -> bool:
    """Whether the compiled draws of :mod:`flows.seeded_draws` serve these runs: numba is
    installed, the roots are below 2^63 and the population at most
    :data:`flows.seeded_draws.MAX_POPULATION`, and they draw numpy's batches for the first
    runs (two steps each)."""
    batches = first.batches
    if not available() or batches is None or batches.n > 10_000 or max(roots) >= 2**63:
        return False
    from .seeded_draws import MAX_POPULATION, matches_numpy

    return batches.n <= MAX_POPULATION and matches_numpy(
        np.array(roots[:4], dtype=np.int64), batches.n, batches.size
    )
