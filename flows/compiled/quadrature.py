"""The compiled interval rule of the original-time quadrature (:func:`flows.clocks.log_original_time`)."""

from __future__ import annotations

from ..clocks import Rule
from . import require


def interval_rule() -> Rule:
    """The compiled interval rule (:func:`flows.compiled._quadrature_kernels.interval_rule`)."""
    require()
    from ._quadrature_kernels import interval_rule as rule

    return rule
