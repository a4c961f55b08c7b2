"""Timing shared by the benchmarks: calls taking turns, the best time of each."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def best_alternating(repeat: int, *calls: Callable[[], Any]) -> tuple[list[float], list[Any]]:
    """Each of ``calls`` ``repeat`` times, taking turns (so a change of load falls on all of
    them alike): the best ``time.perf_counter`` seconds of each, and what each returned last."""
    best = [float("inf")] * len(calls)
    results: list[Any] = [None] * len(calls)
    for _ in range(repeat):
        for i, call in enumerate(calls):
            start = time.perf_counter()
            results[i] = call()
            best[i] = min(best[i], time.perf_counter() - start)
    return best, results
