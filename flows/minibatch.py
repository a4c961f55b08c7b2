"""Minibatches of :func:`flows.iterate`: which examples step ``k`` sees.

Step ``k`` (from ``theta_k`` to ``theta_{k+1}``, ``k = 0, 1, ...`` counted over the whole run)
takes the mean loss of its batch, ``(1/B) sum_{i in batch_k} l(u_i)``, and every SAM variant
perturbs with the gradient of that same batch (as the PyTorch SAM codes do; a per-example
variant perturbs each example of the batch by its own gradient).

* ``sampling="iid"``: each step an independent uniform batch of ``B`` distinct examples (what
  the theory and the SDE of minibatch SGD model);
* ``sampling="epoch"``: PyTorch's ``DataLoader(shuffle=True, batch_size=B)``: a fresh
  permutation every epoch, cut into ``ceil(n / B)`` batches, the last one shorter where ``B``
  does not divide ``n``;
* ``batches``: an integer array (steps, B) of example indices, row ``i`` for the call's
  ``i``-th step, that replays a given sample order.

The batch of step ``k`` depends only on the run's root seed and ``k`` (for ``"epoch"``, on the
epoch ``k // ceil(n / B)``): a generator ``numpy.random.default_rng([root, k])`` (or
``[root, epoch]``), so a run continued from its last step (:func:`flows.iterate`'s ``start``)
draws exactly the batches of one long run, and the same seed gives the same bits. ``seed`` is
an int >= 0, a ``numpy.random.Generator`` (its next 63-bit integer is the root) or None (fresh
entropy from the operating system; the root is kept in :attr:`flows.DiscreteRun.seed` so the run
can be repeated).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .checks import choice, integer

SAMPLINGS = ("iid", "epoch")


@dataclass(frozen=True)
class Minibatches:
    """The batches of a run over ``n`` examples (module docstring)."""

    n: int
    size: int
    sampling: str
    root: int
    given: np.ndarray | None = None
    first: int = 0

    def batch(self, k: int) -> np.ndarray:
        """The example indices of step ``k`` (counted over the whole run)."""
        if self.given is not None:
            return self.given[k - self.first]
        if self.sampling == "iid":
            return np.random.default_rng([self.root, k]).choice(self.n, self.size, replace=False)
        per_epoch = -(-self.n // self.size)
        epoch, j = divmod(k, per_epoch)
        return epoch_order(self.root, epoch, self.n)[j * self.size : (j + 1) * self.size]


@lru_cache(maxsize=4)
def epoch_order(root: int, epoch: int, n: int) -> np.ndarray:
    """The order of the ``n`` examples in epoch ``epoch`` of the root seed ``root``: the
    permutation of ``numpy.random.default_rng([root, epoch])`` (read-only: the batches of the
    epoch are slices of it, drawn once)."""
    order = np.random.default_rng([root, epoch]).permutation(n)
    order.setflags(write=False)
    return order


def root_seed(seed) -> int:
    """The root of a run's batches from ``seed`` (module docstring; ``ValueError`` naming seed
    otherwise)."""
    if seed is None:
        return int(np.random.SeedSequence().generate_state(2, np.uint32).view(np.uint64)[0] >> 1)
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(2**63))
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise ValueError(
            f"seed must be an int >= 0, a numpy.random.Generator or None, got {seed!r}"[:200]
        )
    return integer(seed, "seed", 0)


def minibatches(
    n: int, batch_size, seed, sampling: str, batches, steps: int, first: int
) -> Minibatches | None:
    """The batches of ``steps`` steps from step ``first`` on ``n`` examples, or None for
    full-batch steps (no ``batch_size``, no ``batches``); ``ValueError`` naming the parameter
    on bad input."""
    sampling = choice(sampling, "sampling", SAMPLINGS)
    if batches is None:
        if batch_size is None:
            return None
        size = integer(batch_size, "batch_size", 1)
        if size > n:
            raise ValueError(f"batch_size must be at most n = {n}, got {size}")
        return Minibatches(n, size, sampling, root_seed(seed))
    given = np.asarray(batches)
    if given.dtype.kind not in "iu" or given.ndim != 2:
        raise ValueError(
            f"batches must be an integer array (steps, B), got dtype {given.dtype} and shape "
            f"{given.shape}"
        )
    if given.shape[0] < steps:
        raise ValueError(f"batches has {given.shape[0]} rows for {steps} steps")
    if batch_size is not None and integer(batch_size, "batch_size", 1) != given.shape[1]:
        raise ValueError(f"batch_size {batch_size} differs from the batches' {given.shape[1]}")
    if given.size and (given.min() < 0 or given.max() >= n):
        raise ValueError(f"batches must hold example indices in [0, {n}), got {given.min()} "
                         f"to {given.max()}")  # fmt: skip
    ordered = np.sort(given[:steps], axis=1)
    if np.any(ordered[:, 1:] == ordered[:, :-1]):
        raise ValueError("batches: an example appears twice in one batch")
    return Minibatches(n, given.shape[1], sampling, 0, given.astype(np.int64), first)


@dataclass(frozen=True)
class StepNoise:
    """Noise a step adds (:func:`flows.iterate`'s ``label_noise`` and ``temperature``).

    * ``label_noise``: in regression, each example the step sees has target
      ``y_i + label_noise xi_i`` (HaoChen et al. 2021's label noise); in classification, each
      has its label flipped with probability ``label_noise``;
    * ``temperature`` T: SGLD, ``theta_{k+1} = theta_k - eta_k b_k + sqrt(2 eta_k T) xi``.

    The ``xi`` of step ``k`` are standard normal (the flips uniform) from
    ``numpy.random.default_rng([root, k, 1])`` (labels) and ``[root, k, 2]`` (SGLD): they depend
    on the root seed and ``k`` alone, as the batches do.
    """

    root: int
    label_noise: float = 0.0
    temperature: float = 0.0

    def labels(self, data, k: int):
        """The data step ``k`` sees (``data`` already the step's batch) with its label noise."""
        if not self.label_noise:
            return data
        return data.relabeled(self.noisy_targets(data.y, data.regression, k))

    def noisy_targets(self, y: np.ndarray, regression: bool, k: int) -> np.ndarray:
        """The targets ``y`` of step ``k``'s examples with its label noise: ``y_i + label_noise
        xi_i`` (``regression``), else each label flipped with probability ``label_noise``."""
        rng = np.random.default_rng([self.root, k, 1])
        if regression:
            return y + self.label_noise * rng.standard_normal(y.size)
        flips = rng.random(y.size) < self.label_noise
        return np.where(flips, -y, y)

    def kick(self, k: int, shape: tuple, eta: float) -> np.ndarray | float:
        """The SGLD term of step ``k``, ``sqrt(2 eta T) xi`` (0 without a temperature)."""
        if not self.temperature:
            return 0.0
        xi = np.random.default_rng([self.root, k, 2]).standard_normal(shape)
        return np.sqrt(2.0 * eta * self.temperature) * xi


def step_noise(
    label_noise, temperature, seed, chosen: Minibatches | None, data
) -> StepNoise | None:
    """The :class:`StepNoise` of a run (None where both are 0), drawing from the batches' root
    seed where there are batches, else from ``seed``; ``ValueError`` naming the parameter."""
    from .checks import real

    noise = real(label_noise, "label_noise", low=0.0)
    temp = real(temperature, "temperature", low=0.0)
    if not data.regression and noise > 1.0:
        raise ValueError(f"label_noise is a flip probability in classification, got {noise}")
    if not noise and not temp:
        return None
    root = chosen.root if chosen is not None and chosen.given is None else root_seed(seed)
    return StepNoise(root, noise, temp)
