"""One first compile per kernel group: which queued task may start now.

numba compiles a kernel group (:mod:`flows.compiled.warm`) on its first use in a process and
caches it on disk. Two workers that start tasks of the same cold group at once both compile it,
and the second core does no work meanwhile. :class:`CompileGate` holds a task back while the
first task of one of its groups (:func:`flows.sweep.registry.kernel_groups`) is running, and
lets tasks of other groups, or of none, start instead. Once that first task is done the group
is on disk and its tasks run freely. With numba's cache warm the first task of each group is
quick, and so is the hold.
"""

from __future__ import annotations

from collections import deque

from .registry import Task, kernel_groups


class CompileGate:
    """Picks the next queued task whose kernel groups are not being compiled elsewhere."""

    def __init__(self, active: bool = True):
        self.active = active
        self.warm: set[str] = set()
        self.warming: dict[str, Task] = {}

    def take(self, queue: deque, force: bool = False) -> tuple | None:
        """Remove and return the first ``(task, ...)`` entry of ``queue`` that may start, and
        mark the groups it will compile first; None if every queued task waits for a group
        being compiled (with ``force``, the first entry then: nothing else is running)."""
        for index, entry in enumerate(queue):
            if self._groups(entry[0]).isdisjoint(self.warming):
                del queue[index]
                return self._started(entry)
        return self._started(queue.popleft()) if force and queue else None

    def _started(self, entry: tuple) -> tuple:
        for group in self._groups(entry[0]) - self.warm:
            self.warming.setdefault(group, entry[0])
        return entry

    def done(self, task: Task) -> None:
        """``task`` finished (or failed): the groups it compiled first are warm."""
        for group in [g for g, owner in self.warming.items() if owner is task]:
            del self.warming[group]
            self.warm.add(group)

    def _groups(self, task: Task) -> frozenset[str]:
        return kernel_groups(task) if self.active else frozenset()
