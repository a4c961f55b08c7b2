"""GD at depth 2 in the coordinates of its conservation law (the mirror flow of ``beta``): the
GD case of :mod:`flows.conserved`, where ``c_j = u_j^2 - v_j^2`` is constant and
``d psi_j / dt = -g_j(beta)`` with ``beta_j = (|c_j| / 2) sinh 2 psi_j``."""

from __future__ import annotations

from .conserved import conserved_flow
from .data import Dataset
from .results import Trajectory


def gd_mirror_flow(
    data: Dataset,
    alpha=1.0,
    *,
    t_max: float = 10.0,
    n_points: int = 201,
    loss: str | None = None,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    max_nfev: int = 200_000,
) -> Trajectory:
    """The GD flow at depth 2 in the original clock, integrated in the coordinates of its
    conservation law: ``conserved_flow(data, 'gd', alpha, clock='original', ...)``
    (:func:`flows.conserved.conserved_flow`, whose parameters these are), the path of
    ``simulate(data, 'gd', 2, alpha, clock='original')``.

    Returns
    -------
    Trajectory
        ``algorithm='gd'``, ``depth=2``, ``clock='original'``, ``backend='conserved'``; ``tau``
        the rescaled time ``int c dt`` (``c`` the mean ``|l'|``), integrated beside ``psi``.
    """
    return conserved_flow(
        data,
        "gd",
        alpha,
        t_max=t_max,
        clock="original",
        n_points=n_points,
        loss=loss,
        rtol=rtol,
        atol=atol,
        max_nfev=max_nfev,
    )
