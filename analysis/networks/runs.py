"""The sweep's task kinds of the network experiments (importing this module registers them):

* ``'cnn_banded'`` (:func:`cnn_banded`): a two-layer CNN on banded data, the band shares of
  its output and filters along training;
* ``'cnn_digits'`` (:func:`cnn_digits`): a two-layer CNN on a pair of 8x8 digit classes,
  its test accuracy and Grad-CAM attention along training.
"""

from __future__ import annotations

import numpy as np

from flows.datasets import digits
from flows.networks import NetworkRun, TwoLayerCNN, banded_data, train
from flows.sweep.registry import Result, register

from .bands import band_shares, filter_shares
from .gradcam import background_share, gradcam_maps

__all__ = ["banded_model", "cnn_banded", "cnn_digits", "digits_model"]


def _train(model: TwoLayerCNN, X: np.ndarray, y: np.ndarray, params: dict, **options) -> NetworkRun:
    """:func:`~flows.networks.train` from ``alpha`` times the model's initial parameters of
    ``seed``, with the task's ``algorithm``, ``rho``, ``eta`` and ``steps``."""
    return train(
        model,
        X,
        y,
        model.initial_parameters(params["alpha"], params["seed"]),
        params["algorithm"],
        eta=params["eta"],
        steps=params["steps"],
        **{k: params[k] for k in ("rho",) if k in params},
        **options,
    )


def banded_model(params: dict) -> TwoLayerCNN:
    """The CNN of a ``'cnn_banded'`` task: one full-width circular filter per channel
    (``kernel = length``) and a linear read-out."""
    return TwoLayerCNN(params["length"], params["length"], params["channels"], params["activation"])


def cnn_banded(params: dict) -> Result:
    """Task kind ``'cnn_banded'``.

    Parameters (JSON): data ``n``, ``length``, ``bands`` (lists of frequencies), ``strengths``,
    ``noise``, ``data_seed``; model ``activation``, ``channels``; run ``algorithm``, ``rho``,
    ``alpha`` and ``seed`` (:meth:`~flows.networks.TwoLayerCNN.initial_parameters`), ``eta``,
    ``steps``, ``clock``, ``records`` (iterates kept, equally spaced).

    Result: ``t``, ``loss``, ``shares`` and ``totals`` (:func:`~analysis.networks.band_shares`
    per record), ``filter_shares``, ``status``.
    """
    data = banded_data(
        params["n"],
        params["length"],
        [tuple(b) for b in params["bands"]],
        params["strengths"],
        params["noise"],
        params["data_seed"],
    )
    model = banded_model(params)
    run = _train(
        model,
        data.X,
        data.y,
        params,
        record_every=max(params["steps"] // params["records"], 1),
        clock=params["clock"],
    )
    out = [band_shares(model, theta, data.X, data.bands) for theta in run.theta]
    return {
        "t": run.t,
        "loss": run.loss,
        "shares": np.array([o[0] for o in out]),
        "totals": np.array([o[1] for o in out]),
        "filter_shares": np.array([filter_shares(model, theta, data.bands) for theta in run.theta]),
        "status": np.array(run.status),
    }


def digits_model(params: dict) -> TwoLayerCNN:
    """The CNN of a ``'cnn_digits'`` task: ``kernel x kernel`` filters with zero ("same")
    padding, so the feature maps and the Grad-CAM maps are 8x8 like the images."""
    return TwoLayerCNN((8, 8), params["kernel"], params["channels"], "relu", "same")


def cnn_digits(params: dict) -> Result:
    """Task kind ``'cnn_digits'``.

    Parameters (JSON): ``a``, ``b`` (classes, +1 and -1), ``split_seed``; model ``kernel``,
    ``channels``; run ``algorithm``, ``rho``, ``alpha``, ``seed``, ``eta``, ``steps``,
    ``record_every``; ``thresholds`` (background: scaled intensity below one of them) and
    ``n_maps`` (Grad-CAM maps kept for the first test images of each class).

    Result: ``t``, ``steps``, ``loss``, ``accuracy`` (test, per record), ``background``
    (records x thresholds x test images: :func:`~analysis.networks.background_share`, NaN
    where a map is 0), ``maps`` (records x 2 n_maps x 64) with their ``map_images`` (test
    rows), ``status``.
    """
    train_set, test_set = digits(params["a"], params["b"], seed=params["split_seed"])
    model = digits_model(params)
    run = _train(model, train_set.X, train_set.y, params, record_every=params["record_every"])
    X, y = test_set.X, test_set.y
    k = params["n_maps"]
    shown = np.concatenate([np.flatnonzero(y > 0)[:k], np.flatnonzero(y < 0)[:k]])
    maps = [gradcam_maps(model, theta, X, y) for theta in run.theta]
    return {
        "t": run.t,
        "steps": run.steps,
        "loss": run.loss,
        "accuracy": np.array([np.mean(np.sign(model.outputs(th, X)) == y) for th in run.theta]),
        "background": np.array(
            [[background_share(m, X, thr) for thr in params["thresholds"]] for m in maps]
        ),
        "maps": np.array([m[shown] for m in maps]),
        "map_images": shown,
        "status": np.array(run.status),
    }


register(
    "cnn_banded",
    cnn_banded,
    cost=lambda p: 2e-4 * p["steps"] * p["n"] / 8.0 * (2.0 if p["algorithm"] != "gd" else 1.0),
    keys=("t", "loss", "shares", "totals", "filter_shares", "status"),
)
register(
    "cnn_digits",
    cnn_digits,
    cost=lambda p: 3e-3 * p["steps"] * (2.0 if p["algorithm"] != "gd" else 1.0),
    keys=("t", "steps", "loss", "accuracy", "background", "maps", "map_images", "status"),
)


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
