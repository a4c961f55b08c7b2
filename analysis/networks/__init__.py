"""Analyses of the networks of :mod:`flows.networks`: which frequency bands a trained CNN
uses (:mod:`.bands`), Grad-CAM attention on images (:mod:`.gradcam`), and the sweep's task
kinds for both experiments (:mod:`.runs`; importing it registers them)."""

from .bands import BandedRegime, band_shares, banded_regime, filter_shares
from .gradcam import background_share, gradcam_maps

__all__ = [
    "BandedRegime",
    "background_share",
    "band_shares",
    "banded_regime",
    "filter_shares",
    "gradcam_maps",
]
