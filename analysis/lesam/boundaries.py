"""Boundaries between LE-SAM's regimes (:func:`analysis.lesam.regimes.classify_lesam`):
geometric bisection in one of ``alpha``, ``sigma``, ``rho_max`` with the other two fixed, and
a scan along a grid that bisects between neighbours of different regimes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from flows.checks import integer, real

from .._checks import numeric_array
from .regimes import LESAMRegime, classify_lesam

__all__ = ["LESAMBoundary", "RegimeScan", "lesam_boundary", "scan_regimes"]

#: the parameters a boundary may be swept in
SWEPT = ("alpha", "sigma", "rho_max")


@dataclass(frozen=True)
class LESAMBoundary:
    """A bisection of :func:`lesam_boundary`: the boundary lies in ``[lower, upper]`` of
    ``parameter`` when ``converged`` (regimes ``regime_lower`` below, ``regime_upper`` above);
    ``note`` says why not otherwise."""

    parameter: str
    lower: float
    upper: float
    regime_lower: int | None
    regime_upper: int | None
    iterations: int
    converged: bool
    note: str

    @property
    def value(self) -> float:
        """Geometric midpoint of the final bracket."""
        return float(np.sqrt(self.lower * self.upper))


def _check_parameter(parameter: str) -> str:
    """``parameter`` one of :data:`SWEPT`."""
    if parameter not in SWEPT:
        raise ValueError(f"parameter must be 'alpha', 'sigma' or 'rho_max', got {parameter!r}")
    return parameter


def _fixed_parameters(parameter: str, alpha, sigma, rho_max) -> dict:
    """The three parameters by name, each but the swept one required."""
    fixed = {"alpha": alpha, "sigma": sigma, "rho_max": rho_max}
    for key, value in fixed.items():
        if key != parameter and value is None:
            raise ValueError(f"{key} must be given (it is fixed while {parameter} is swept)")
    return fixed


def _classify_at(mu, parameter: str, fixed: dict, x: float, classify_options: dict) -> LESAMRegime:
    """:func:`classify_lesam` with ``parameter = x`` and the others from ``fixed``."""
    args = {**fixed, parameter: x}
    return classify_lesam(mu, args["alpha"], args["sigma"], args["rho_max"], **classify_options)


def lesam_boundary(
    mu,
    parameter: str,
    lower: float,
    upper: float,
    *,
    alpha=None,
    sigma=None,
    rho_max=None,
    rtol: float = 1e-3,
    max_iter: int = 40,
    **classify_options,
) -> LESAMBoundary:
    """Geometric bisection in ``parameter`` (``'alpha'``, ``'sigma'`` or ``'rho_max'``) between
    ``lower`` and ``upper`` for the change of :func:`classify_lesam`'s regime, the other two
    parameters fixed (the swept one's keyword is ignored).

    Stops when ``upper / lower - 1 <= rtol`` (converged), or, not converged, after ``max_iter``
    classifications, when both ends share a regime (no boundary in the bracket), or when a
    midpoint is undecided or in a third regime (``note`` names it). ``ValueError`` for an
    unknown ``parameter``, ``0 < lower < upper`` finite violated, ``rtol`` not in
    [1e-12, 1), ``max_iter`` not an int in [1, 200], or a missing fixed parameter.
    """
    parameter = _check_parameter(parameter)
    lower = real(lower, "lower", low=0.0, low_open=True)
    upper = real(upper, "upper", low=0.0, low_open=True)
    if not lower < upper:
        raise ValueError(f"lower must be < upper, got {lower!r}, {upper!r}")
    rtol = real(rtol, "rtol", low=1e-12, high=1.0, high_open=True)
    max_iter = integer(max_iter, "max_iter", 1, 200)
    fixed = _fixed_parameters(parameter, alpha, sigma, rho_max)

    def regime(x: float) -> int | None:
        return _classify_at(mu, parameter, fixed, x, classify_options).regime

    lo_r, hi_r = regime(lower), regime(upper)
    if lo_r == hi_r or lo_r is None or hi_r is None:
        note = f"regimes at the ends: {lo_r}, {hi_r}: no boundary to bisect"
        return LESAMBoundary(parameter, lower, upper, lo_r, hi_r, 2, False, note)
    return _bisect(regime, parameter, (lower, upper), (lo_r, hi_r), rtol, max_iter)


def _bisect(
    regime: Callable[[float], int | None],
    parameter: str,
    bracket: tuple[float, float],
    ends: tuple[int, int],
    rtol: float,
    max_iter: int,
) -> LESAMBoundary:
    """Geometric bisection of ``bracket``, whose ends (already classified: 2 classifications)
    have the different regimes ``ends``, until ``upper / lower - 1 <= rtol``, ``max_iter``
    classifications, or a midpoint in neither end's regime."""
    (lower, upper), (lo_r, hi_r), count = bracket, ends, 2
    while upper / lower - 1.0 > rtol:
        if count >= max_iter:
            note = f"max_iter = {max_iter} classifications reached"
            return LESAMBoundary(parameter, lower, upper, lo_r, hi_r, count, False, note)
        mid = float(np.sqrt(lower * upper))
        r = regime(mid)
        count += 1
        if r == lo_r:
            lower = mid
        elif r == hi_r:
            upper = mid
        else:
            note = f"regime {r} at {parameter} = {mid:.6g} (neither end's)"
            return LESAMBoundary(parameter, lower, upper, lo_r, hi_r, count, False, note)
    return LESAMBoundary(parameter, lower, upper, lo_r, hi_r, count, True, "converged")


@dataclass(frozen=True)
class RegimeScan:
    """:func:`scan_regimes`: the classification at every grid value and each boundary bisected
    between neighbours of different (decided) regimes."""

    parameter: str
    grid: tuple[float, ...]
    regimes: tuple[LESAMRegime, ...]
    boundaries: tuple[LESAMBoundary, ...]


def scan_regimes(
    mu,
    parameter: str,
    grid,
    *,
    alpha=None,
    sigma=None,
    rho_max=None,
    rtol: float = 1e-2,
    max_iter: int = 30,
    **classify_options,
) -> RegimeScan:
    """:func:`classify_lesam` along ``grid`` (increasing, > 0) of ``parameter``, the other two
    fixed, then :func:`lesam_boundary` between every pair of neighbours whose regimes differ
    (neighbours with an undecided regime are not bisected). Checks as :func:`lesam_boundary`;
    ``grid`` a 1-D increasing array of finite numbers > 0 with at most 200 entries."""
    values = numeric_array(grid, "grid", ndim=1)
    if not (
        0 < values.size <= 200
        and np.all(np.isfinite(values))
        and np.all(values > 0)
        and np.all(np.diff(values) > 0)
    ):
        raise ValueError("grid must be 1 to 200 increasing finite numbers > 0")
    parameter = _check_parameter(parameter)
    fixed = _fixed_parameters(parameter, alpha, sigma, rho_max)
    found = [_classify_at(mu, parameter, fixed, float(x), classify_options) for x in values]
    bounds = []
    for k in range(values.size - 1):
        a, b = found[k].regime, found[k + 1].regime
        if a != b and a is not None and b is not None:
            bounds.append(
                lesam_boundary(
                    mu,
                    parameter,
                    float(values[k]),
                    float(values[k + 1]),
                    **fixed,
                    rtol=rtol,
                    max_iter=max_iter,
                    **classify_options,
                )
            )
    return RegimeScan(parameter, tuple(float(v) for v in values), tuple(found), tuple(bounds))


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
