"""Where a warning of the package points: the user's call, not a line of ``flows``."""

from __future__ import annotations

import os
import sys
import types

_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def user_stacklevel() -> int:
    """The ``stacklevel`` for ``warnings.warn`` called by the caller of this function that
    points at the first frame outside the ``flows`` package (the user's call of
    :func:`flows.simulate`, a figure module's, ...): a warning is then shown once per call
    site of the user's, under Python's default filter, not once per process."""
    frame: types.FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE + os.sep):
        frame, level = frame.f_back, level + 1
    return level
