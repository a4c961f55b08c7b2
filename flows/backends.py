"""The backends of :func:`flows.simulate`: one record each, naming every piece it brings.

* ``numba`` (extra ``fast``): the field :class:`~flows.compiled.field.CompiledField`, the
  compiled DOP853 segment loop (:mod:`flows.compiled.segment`), l_inf-SAM's compiled sliding
  combination (:mod:`flows.compiled.sliding`), the compiled interval rule of the original-time
  quadrature (:mod:`flows.compiled.quadrature`), the compiled loop of ``iterate``'s steps
  (:mod:`flows.compiled.discrete`) and that of l_inf-SAM's own steps
  (:mod:`flows.compiled.stepping`);
* ``numpy``: the fused field :class:`~flows.fused.FusedField`; scipy's solvers
  (:mod:`flows.integrator.solver`), the numpy sliding combination
  (:mod:`flows.integrator.filippov`) and quadrature (:mod:`flows.clocks`);
* ``reference``: the point-by-point field :class:`~flows.field.ReferenceField` (slow; for
  cross-checks), with the numpy pieces.

``backend='auto'`` takes the first of :data:`AUTO_ORDER` that is installed and covers the
problem (numba covers the losses with a compiled twin), skipping numba while its kernels compile
in the background after an install (:mod:`flows.compiled.background`). The driver
(:mod:`flows.integrator.driver`) asks :func:`choose_backend` once per run and hands the record's
pieces on; nothing else in the engine imports :mod:`flows.compiled`. A compiled piece may still decline a given segment (the
segment loop's ``applies``, a sliding combination that returns None): the numpy code then runs
it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from . import compiled
from .clocks import Rule
from .compiled import discrete, quadrature, segment, stepping
from .compiled.background import compiled_ready
from .compiled.field import CompiledField
from .compiled.sliding import CompiledSliding
from .field import Problem, ReferenceField
from .fused import FusedField


class SegmentLoop(NamedTuple):
    """A segment loop of a backend besides the Python one of :mod:`flows.integrator.solver`.

    Attributes
    ----------
    name : how ``Trajectory.segment_loops`` names it.
    applies : ``(field, mode, method) -> bool``: whether it integrates this segment.
    advance : integrates a segment (:func:`flows.compiled.segment.advance`).
    exponent : ``(field, segment, s) -> K or None``: ``-log c`` along one of its segments, for
        the original-time quadrature (None: the numpy field computes it).
    arguments : ``(field, mode, radius, near_zero, y, loss_floor) -> arguments``: what
        ``advance`` is given of the problem and the events for a segment from ``y``
        (:func:`flows.compiled.segment.loop_arguments`), for a segment set up ahead.
    """

    name: str
    applies: Callable[..., bool]
    advance: Callable[..., Any]
    exponent: Callable[..., Any]
    arguments: Callable[..., Any]


@dataclass(frozen=True)
class Backend:
    """One backend: the field it builds and the compiled pieces it brings (None: numpy's).

    Attributes
    ----------
    name : its name in :data:`BACKENDS` (``Trajectory.backend``).
    field : ``problem -> vector field``.
    covers : whether it can integrate ``problem`` at all (``auto`` skips it otherwise).
    available : whether its dependencies are installed.
    require : raises ``ImportError`` naming the extra to install when they are not.
    segment_loop : its own segment loop (None: scipy's only).
    sliding : ``(field, surfaces) -> combination or None``: the compiled sliding combination of
        l_inf-SAM (:class:`flows.compiled.sliding.CompiledSliding`; None: numpy's).
    interval_rule : the interval rule of the original-time quadrature (None: numpy's).
    discrete : ``(problem, eta, momentum, weight_decay, loss_limit) -> loop or None``: the
        compiled loop of :func:`flows.iterate`'s steps (:func:`flows.compiled.discrete.stepper`;
        None: numpy's steps).
    own_steps : the compiled loop of l_inf-SAM's own steps
        (:func:`flows.compiled.stepping.own_steps`; None: numpy's,
        :func:`flows.integrator.own_steps.own_steps`).
    """

    name: str
    field: Callable[[Problem], Any]
    covers: Callable[[Problem], bool] = lambda problem: True
    available: Callable[[], bool] = lambda: True
    require: Callable[[], None] = lambda: None
    segment_loop: SegmentLoop | None = None
    sliding: Callable[..., Any] | None = None
    interval_rule: Callable[[], Rule] | None = None
    discrete: Callable[..., Any] | None = None
    own_steps: Callable[..., Any] | None = None


def _compiled_loss(problem: Problem) -> bool:
    """Whether the loss of ``problem`` has a compiled twin."""
    return problem.loss.compiled_id is not None


BACKENDS: dict[str, Backend] = {
    "numba": Backend(
        "numba",
        CompiledField,
        covers=_compiled_loss,
        available=compiled.available,
        require=compiled.require,
        segment_loop=SegmentLoop(
            "compiled DOP853",
            segment.applies,
            segment.advance,
            segment.exponent,
            segment.loop_arguments,
        ),
        sliding=CompiledSliding.of,
        interval_rule=quadrature.interval_rule,
        discrete=discrete.stepper,
        own_steps=stepping.own_steps,
    ),
    "numpy": Backend("numpy", FusedField),
    "reference": Backend("reference", ReferenceField),
}

#: What ``backend='auto'`` tries, in order.
AUTO_ORDER = ("numba", "numpy")


def choose_backend(name: str, problem: Problem) -> Backend:
    """The backend ``name`` (checked: installed and covering ``problem``), or for ``'auto'`` the
    first of :data:`AUTO_ORDER` that is installed, covers it and is ready: numba is not while
    its kernels compile in the background after an install (:func:`compiled_ready` starts that
    compile on the first such call and says so on stderr; ``backend='numba'`` compiles them in
    the foreground instead)."""
    if name == "auto":
        return next(
            b
            for b in (BACKENDS[n] for n in AUTO_ORDER)
            if b.available() and b.covers(problem) and (b.name != "numba" or compiled_ready())
        )
    backend = BACKENDS[name]
    backend.require()
    if not backend.covers(problem):
        raise ValueError(f"backend {name!r} does not cover this problem (its loss is not compiled)")
    return backend
