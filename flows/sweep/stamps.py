"""Which figures are up to date: a warm sweep redraws a figure only when something changed.

A figure's *stamp* is a hash of its runs' task keys (which include the engine version) and of
its setting (the parameters it is drawn at, ``--quick`` among them). :class:`Stamps` keeps the stamp of every figure drawn into an output
folder in ``<out>/.sweep-stamps.json`` (written atomically; an unreadable file counts as
empty). A figure is up to date when none of its runs was computed in this sweep, its PNG
exists, its stamp is the recorded one and the PNG is newer than the drawing code.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

FILE = ".sweep-stamps.json"


def stamp(keys: Iterable[str], setting: str) -> str:
    """The stamp of a figure drawn from the runs ``keys`` at ``setting`` (its text)."""
    text = json.dumps({"runs": sorted(keys), "setting": setting})
    return hashlib.sha256(text.encode()).hexdigest()[:20]


class Stamps:
    """The recorded stamps of the figures in ``out``; ``code_mtime`` is the time of the newest
    drawing code (a PNG older than it is redrawn)."""

    def __init__(self, out: Path, code_mtime: float):
        self.path = Path(out) / FILE
        self.code_mtime = code_mtime
        try:
            saved = json.loads(self.path.read_text())
            self.saved: dict[str, str] = saved if isinstance(saved, dict) else {}
        except (OSError, ValueError):
            self.saved = {}
        self.new: dict[str, str] = {}

    def up_to_date(self, image: Path, keys: Iterable[str], setting: str) -> bool:
        """Whether ``image`` already shows its figure drawn from these runs at ``setting``."""
        try:
            fresh_enough = image.stat().st_mtime >= self.code_mtime
        except OSError:
            return False
        return fresh_enough and self.saved.get(image.name) == stamp(keys, setting)

    def drawn(self, image: Path, keys: Iterable[str], setting: str) -> None:
        """Record that ``image`` was just drawn from these runs at ``setting``."""
        self.new[image.name] = stamp(keys, setting)

    def write(self) -> None:
        """Save the recorded stamps (temporary file, then rename); nothing to do if none is new."""
        if not self.new:
            return
        merged = {**self.saved, **self.new}
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".stamps.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(merged, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
