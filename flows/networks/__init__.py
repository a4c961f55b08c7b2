"""Networks beyond the diagonal one, trained by the discrete algorithms of the table.

A model (:class:`NetworkModel`) exposes its outputs ``f(theta; x_i)`` and their pullback
``sum_i g_i grad_theta f(theta; x_i)``; :func:`train` runs GD and every SAM variant of
:data:`flows.ALGORITHMS` on it with the step semantics of :func:`flows.iterate`.

* :class:`TwoLayerCNN`: shared filters over patches, an activation, a read-out
  (:mod:`flows.networks.cnn`);
* :class:`DiagonalNetwork`: the L-layer diagonal network as such a model;
* :func:`banded_data`: labels carried by frequency bands of increasing strength
  (:mod:`flows.networks.banded`).
"""

from .banded import (
    BandedData,
    band_signal,
    band_spectrum,
    band_sums,
    banded_data,
    check_bands,
)
from .cnn import ACTIVATIONS, Activation, TwoLayerCNN, patch_indices
from .model import DiagonalNetwork, NetworkModel
from .train import (
    NetworkRun,
    log_mean_loss,
    loss_gradient,
    perturbed_gradient,
    summary,
    train,
)

__all__ = [
    "ACTIVATIONS",
    "Activation",
    "BandedData",
    "DiagonalNetwork",
    "NetworkModel",
    "NetworkRun",
    "TwoLayerCNN",
    "band_signal",
    "band_spectrum",
    "band_sums",
    "banded_data",
    "check_bands",
    "log_mean_loss",
    "loss_gradient",
    "patch_indices",
    "perturbed_gradient",
    "summary",
    "train",
]
