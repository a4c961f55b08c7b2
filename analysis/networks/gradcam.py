"""Grad-CAM (Selvaraju et al. 2017) for the two-layer CNN, and how much of it falls on the
background of an image.

For the class score ``s(x)`` (here ``s = y f(x)``, the score of the image's own class of a
binary classifier) and the feature maps ``A_qc`` of the convolutional layer, the channel
weights are the spatially averaged gradients ``a_c = (1/Q) sum_q ds/dA_qc`` and the map is
``M_q = ReLU(sum_c a_c A_qc)``. With ``"same"`` padding the positions ``q`` are the pixels, so
the map needs no upsampling.
"""

from __future__ import annotations

import numpy as np

from analysis._checks import cnn_inputs
from flows.checks import real_array
from flows.networks import TwoLayerCNN


def gradcam_maps(model: TwoLayerCNN, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``M_q`` of every image (n, Q) for the score ``y_i f(x_i)``; ``ValueError`` naming model
    (not a :class:`~flows.networks.TwoLayerCNN`), theta, X ((n, H W) finite) or y (n labels
    +-1)."""
    theta, X = cnn_inputs(model, theta, X)
    y = real_array(y, "y", ndim=1)
    if y.shape[0] != X.shape[0] or not np.all(np.abs(y) == 1):
        raise ValueError(f"y must be {X.shape[0]} labels +-1 (one per row of X)")
    _, A = model.feature_maps(theta, X)
    weights = np.asarray(y, dtype=float)[:, None] * model.head_weights(theta).mean(axis=0)[None]
    return np.maximum(np.einsum("nqc,nc->nq", A, weights), 0.0)


def background_share(maps: np.ndarray, X: np.ndarray, threshold: float) -> np.ndarray:
    """Per image, the share of the map's mass on background pixels (intensity below
    ``threshold``): ``sum_{x_q < thr} M_q / sum_q M_q`` (n,), NaN where the map is 0."""
    mass = maps.sum(axis=1)
    on_background = np.where(X < threshold, maps, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(mass > 0, on_background / mass, np.nan)


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
