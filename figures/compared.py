"""The three algorithms that figures 1, 6 and 7 compare, and their task parameters (their
colours, markers and names are those of :mod:`figures.style`)."""

from __future__ import annotations

from . import style

ALGORITHMS = ("gd", "l2-sam", "linf-sam")

#: Line widths and opacities of the compared algorithms, so that coinciding paths stay visible:
#: GD wide and light under l2-SAM, l_inf-SAM thinnest on top.
LAYERS: dict[str, dict[str, float]] = {
    "gd": {"lw": 3.2, "alpha": 0.35},
    "l2-sam": {"lw": 1.6, "alpha": 0.9},
    "linf-sam": {"lw": 0.9, "alpha": 1.0},
}


def line_style(algorithm: str) -> dict[str, object]:
    """``Axes.plot`` keywords of an algorithm's flow line without markers: its colour and label
    (:func:`figures.style.algorithm_style`), the solid line of a flow and its layer
    (:data:`LAYERS`, a middle width for other algorithms)."""
    kwargs = style.algorithm_style(algorithm, "flow")
    kwargs.pop("marker")
    return {**kwargs, **LAYERS.get(algorithm, {"lw": 1.2})}


def rho_entry(algorithm: str, rho: float) -> dict:
    """The ``rho`` entry of a task's parameters: none for GD, which has no radius."""
    return {} if algorithm == "gd" else {"rho": rho}


def check_algorithms(algorithms) -> str | None:
    """A problem with a tuple of algorithm names (empty, or one without a style), or None."""
    if not algorithms:
        return "give at least one algorithm"
    unknown = [a for a in algorithms if a not in style.ALGORITHM_STYLES]
    return (
        f"algorithms without a style: {unknown}; known: {list(style.ALGORITHM_STYLES)}"
        if unknown
        else None
    )


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
