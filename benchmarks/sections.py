"""The sections of ``benchmarks/results.md``: each benchmark's ``--write`` replaces its own.

A section runs from its heading (a ``## `` line) to the next ``## `` heading or the end.
"""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results.md"


def write_section(text: str, heading: str, path: Path = RESULTS) -> None:
    """Put ``text`` (which starts with ``heading``) into ``path`` in place of the section that
    starts with ``heading``, or at the end where there is none."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    start = old.find(heading)
    if start < 0:
        path.write_text(old.rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n", encoding="utf-8")
        return
    end = old.find("\n## ", start + len(heading))
    rest = "" if end < 0 else old[end + 1 :]
    body = text.rstrip("\n") + "\n"
    path.write_text(old[:start] + body + ("\n" + rest if rest else ""), encoding="utf-8")
