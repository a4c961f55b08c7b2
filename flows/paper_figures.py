"""The figure table of ``python -m flows.sweep``: every figure of every theme module, by name."""
from __future__ import annotations

from .plots import amplification, linf, numerics
from .plots.common import Figure

FIGURES: dict[str, Figure] = {fig.name: fig for module in (amplification, linf, numerics)
                              for fig in module.FIGURES}
