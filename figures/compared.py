"""The three algorithms that figures 1, 6 and 7 compare: their names and colours in the legends,
and their task parameters."""

from __future__ import annotations

from .common import OKABE_ITO

ALGORITHMS = ("gd", "l2-sam", "linf-sam")
NAMES = {"gd": "GD", "l2-sam": "ℓ2-SAM", "linf-sam": "ℓ∞-SAM"}
COLORS = {"gd": OKABE_ITO[0], "l2-sam": OKABE_ITO[5], "linf-sam": OKABE_ITO[6]}


def rho_entry(algorithm: str, rho: float) -> dict:
    """The ``rho`` entry of a task's parameters: none for GD, which has no radius."""
    return {} if algorithm == "gd" else {"rho": rho}


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
