"""The figure table of ``python -m flows.sweep``: every figure of every theme module, by name.

Figures are listed in the paper's order (fig1 ... fig9) whatever module defines them.
"""
from __future__ import annotations

from .plots import amplification, geometry, linf, numerics
from .plots.common import Figure

MODULES = (amplification, geometry, linf, numerics)

FIGURES: dict[str, Figure] = {fig.name: fig for fig in sorted(
    (fig for module in MODULES for fig in module.FIGURES), key=lambda f: f.name)}
