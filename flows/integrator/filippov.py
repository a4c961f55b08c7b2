"""Filippov sliding of l_inf-SAM on its switching surfaces, one or several at once.

l_inf-SAM's field ``F(theta) = -grad L(theta + rho sign(grad L(theta)))`` jumps where an entry of
``grad_{w^(l)_j} L = -c G_j prod_{k != l} w^(k)_j`` changes sign, i.e. on two kinds of surface
(``docs/theory.md``, l_inf-SAM):

* ``w^(l)_j = 0`` (kind ``'parameter'``): flips ``sign(grad L)`` of the other layers of ``j``;
* ``G_j(theta) = 0`` (kind ``'direction'``; only on several examples, where the loss-weighted
  mean ``G = sum_i p_i y_i x_i`` moves): flips every layer of coordinate ``j``.

Within a segment every sign is frozen (:class:`~flows.field.SignPattern`), so the field is smooth
and reaching a surface is an event. There the *one-sided fields* decide (Filippov): with the
normal rates ``N+`` and ``N-`` of the surface's function ``h`` (``h = w`` or ``h = G_j``) under
the fields of its two sides, the flow crosses if both have the same sign and *slides* if both
point at the surface (``N+ < 0 < N-``); on a repelling surface (``N+ > 0 > N-``, no unique
solution) it keeps going the way it came.

While surfaces ``1..k`` slide the state moves with a convex combination of the ``2^k``
one-sided fields ``F_sigma`` (``sigma`` in ``{+1, -1}^k``, the side of each surface):

    F = sum_sigma w_sigma(lambda) F_sigma,
    w_sigma = prod_i (lambda_i if sigma_i = +1 else 1 - lambda_i),   lambda in [0, 1]^k,

with ``lambda`` solving the ``k`` equations ``sum_sigma w_sigma N_i(sigma) = 0`` (every sliding
surface kept; Newton's method, :func:`solve_multilinear`). For ``k = 1`` this is Filippov's
unique convex combination. For ``k >= 2`` the Filippov set holds more than one tangent vector;
the multilinear ("canopy") rule is the documented choice: it is Dieci and Lopez's bilinear rule
at ``k = 2``, the limit of blending each surface's two sides independently with weights
``(1 +- tanh(h_i / eps)) / 2``, and the limit of the discrete iteration when the chattering on
different surfaces is uncorrelated. A surface *releases* when its ``lambda_i`` reaches 0 or 1
(the field of one side turns tangent and then points away): the flow leaves on that side.

A parameter surface of the balanced reduced system (one group of ``L`` layers) at even ``L`` is
*inert*: flipping its side changes the perturbed ``beta'_j = (rho s)^L`` not at all, so only the
held entry's own velocity depends on the side; its ``lambda`` is solved on its own, and the
field of the other entries needs one evaluation. The others are *coupled* and enumerated
together: ``2^k`` field evaluations per step, at most :data:`MAX_COUPLED` surfaces (beyond that
the run stops with status -1 and says so). The constraint ``h_i = 0`` of a sliding direction is
kept by the combination up to the integration error (no projection).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ..field import SignPattern, VectorField, Velocity
from ..fused import FusedField
from ..signedlog import SignedLog
from .multilinear import (
    MAX_COUPLED,
    multilinear_weights,
    solve_multilinear,
    vertex_signs,
)
from .segments import Mode
from .tilted import SPREAD_RELEASE, solve_tilted_in_tau

PARAMETER, DIRECTION = "parameter", "direction"
#: Batches of the original-time quadrature are cut so that an array holds about this many
#: floats (points x vertices x max(examples, parameters)).
BATCH_ELEMENTS = 2**21


class Surface(NamedTuple):
    """A switching surface: ``kind`` ``'parameter'`` (``at`` a flat parameter index, the
    surface ``w = 0``) or ``'direction'`` (``at`` a coordinate ``j``, the surface
    ``G_j(theta) = 0``).

    Parameters that reach 0 in the same instant (the layers of a balanced coordinate in the
    full system, equal by symmetry) form *one* surface: ``members`` (flat indices, ``at``
    first) change side together, keeping their ``relative`` signs, as they do under the
    discrete iteration; enumerating their sides independently would mix in vertices the
    symmetric flow never visits.
    """

    kind: str
    at: int
    members: tuple[int, ...] = ()
    relative: tuple[float, ...] = ()

    def entry(self, shape: tuple[int, int]) -> tuple[int, int]:
        """``(group, j)`` of a parameter surface; ``(-1, j)`` (every layer) of a direction."""
        if self.kind == DIRECTION:
            return (-1, self.at)
        group, j = np.unravel_index(self.at, shape)
        return (int(group), int(j))

    def flat_sides(self, side: float) -> list[tuple[int, float]]:
        """``(flat index, sign)`` of each member of a parameter surface on ``side``."""
        members = self.members or (self.at,)
        relative = self.relative or (1.0,) * len(members)
        return [(m, side * r) for m, r in zip(members, relative, strict=True)]

    def set_side(self, pattern: SignPattern, side: float) -> None:
        """Freeze the side of this surface in ``pattern`` (in place)."""
        if self.kind == DIRECTION:
            pattern.direction[..., self.at] = side
            return
        flat = pattern.parameters.reshape(pattern.parameters.shape[:-2] + (-1,))
        for member, sign in self.flat_sides(side):
            flat[..., member] = sign


def parameter_surface(flats: list[int], sign_pattern: np.ndarray) -> Surface:
    """The surface of parameters ``flats`` reaching 0 together (signs relative to the first;
    +1 for a parameter that starts the run at 0, whose pattern sign is 0 until it leaves)."""
    signs = sign_pattern.ravel()
    return Surface(
        PARAMETER,
        flats[0],
        tuple(flats),
        tuple(float(signs[f] * signs[flats[0]]) or 1.0 for f in flats),
    )


class TooManySurfaces(Exception):
    """More than :data:`MAX_COUPLED` coupled surfaces would slide at once."""


def sliding_surfaces(mode: Mode) -> list[Surface]:
    """The surfaces sliding in ``mode``: held parameters, then directions."""
    if not mode.sliding:
        return []
    assert mode.sign_pattern is not None
    held = [int(f) for f in np.flatnonzero(mode.held.ravel())]
    groups = [list(g) for g in mode.linked]
    groups += [[f] for f in held if not any(f in g for g in groups)]
    surfaces = [parameter_surface(g, mode.sign_pattern) for g in sorted(groups)]
    return surfaces + [Surface(DIRECTION, int(j)) for j in mode.sliding_directions]


def is_inert(surface: Surface, multiplicity: np.ndarray) -> bool:
    """A parameter of the balanced reduced system at even depth: its side changes nothing but
    its own velocity (``beta'_j = (rho s)^L`` for either sign ``s``)."""
    return (
        surface.kind == PARAMETER
        and len(surface.members) <= 1
        and len(multiplicity) == 1
        and int(multiplicity[0]) % 2 == 0
    )


class Evaluation(NamedTuple):
    """The one-sided fields at one point (or, with leading axes, at each of several), in the
    original clock scaled by ``1 / max c``.

    Attributes
    ----------
    rhs : (..., V, n_state) ``c_v / c_max (dz/dtau, 1)`` of each evaluated vertex.
    rates : (..., k, V) the surfaces' normal rates ``c_v / c_max dh/dtau`` (each row up to a
        positive factor of its own).
    log_c_max : (...) ``log max_v c_v``.
    """

    rhs: np.ndarray
    rates: np.ndarray
    log_c_max: np.ndarray


class FilippovField:
    """The l_inf-SAM field of a mode in which some surfaces slide (the
    :class:`~flows.field.VectorField` interface, for the solver and the quadrature).

    The combination is taken in the original clock ``t`` (the clock of the discrete iteration
    whose small-step limit defines the flow): vertex ``v`` moves at ``dtheta/dt = c_v F_v`` with
    its own clock factor ``c_v`` and ``dtau/dt = c_v``, so a rescaled run follows
    ``dtheta/dtau = sum w_v c_v F_v / sum w_v c_v`` and ``1 / c = dt/dtau`` of the path is
    ``1 / sum w_v c_v``. (For one surface the clock does not matter: Filippov's combination is
    unique up to the speed.)

    Parameters
    ----------
    base : the field of the mode's chart (any backend); it evaluates the one-sided fields.
    mode : the mode (its held parameters and sliding directions are the surfaces).
    extra : one more surface, reached but not yet sliding, for :meth:`one_sided_rates`.
    combination : ``(base, surfaces) -> compiled combination or None``, the backend's
        (:class:`flows.backends.Backend`, ``sliding``); None: the numpy combination only.
    """

    def __init__(
        self,
        base: VectorField,
        mode: Mode,
        extra: Surface | None = None,
        combination: Callable | None = None,
    ):
        self.base = base
        self.problem = base.problem
        self.mode = mode
        self.geometry = base if isinstance(base, FusedField) else FusedField(base.problem)
        self.surfaces = sliding_surfaces(mode) + ([] if extra is None else [extra])
        mult = np.asarray(self.problem.multiplicity)
        inert = [is_inert(s, mult) and s != extra for s in self.surfaces]
        self.inert = [i for i, flag in enumerate(inert) if flag]
        self.coupled = [i for i, flag in enumerate(inert) if not flag]
        if len(self.coupled) > MAX_COUPLED:
            raise TooManySurfaces(
                f"{len(self.coupled)} coupled switching surfaces would slide at once "
                f"(at most {MAX_COUPLED}: 2^k field evaluations per step)"
            )
        self.signs = vertex_signs(len(self.coupled))
        self.patterns = np.array([self._pattern(row, 1.0) for row in self.signs])
        self.minus_patterns = np.array([self._pattern(row, -1.0) for row in self.signs])
        self.features = np.asarray(self.problem.data.signed_features, dtype=float)
        self.compiled = None if combination is None else combination(base, self.surfaces)
        self.newton = None if self.compiled is None else self.compiled.newton
        self.tilted = None if self.compiled is None else self.compiled.tilted

    def _pattern(self, coupled_sides: np.ndarray, inert_side: float) -> np.ndarray:
        """``sign(grad L)`` with the coupled surfaces on ``coupled_sides`` and the inert ones
        on ``inert_side``."""
        assert self.mode.pattern is not None
        pattern = SignPattern(
            self.mode.pattern.parameters.astype(float), self.mode.pattern.direction.astype(float)
        )
        for i, side in zip(self.coupled, coupled_sides, strict=True):
            self.surfaces[i].set_side(pattern, side)
        for i in self.inert:
            self.surfaces[i].set_side(pattern, inert_side)
        out = self.base.pattern_signs(pattern)
        assert out is not None
        return out

    # ------------------------------------------------------------------ one point

    def evaluate(self, z: np.ndarray, time: float, minus: bool = False) -> Evaluation:
        """The one-sided fields and normal rates at the flat chart state ``z``, for every
        coupled vertex (inert surfaces on +), and with ``minus`` also with the inert ones on -
        (one batched field evaluation)."""
        ev = self.evaluate_batch(z.reshape((1,) + self.problem.shape), np.array([time]), minus)
        return Evaluation(ev.rhs[0], ev.rates[0], ev.log_c_max[0])

    def evaluate_batch(self, zz: np.ndarray, times: np.ndarray, minus: bool = False) -> Evaluation:
        """:meth:`evaluate` at ``N`` chart states ``zz`` (N, G, d) and clock times ``times``
        (N,) at once (one field evaluation of N x V points)."""
        problem = self.problem
        patterns = self.patterns
        if minus and self.inert:
            patterns = np.concatenate([patterns, self.minus_patterns])
        if self.compiled is not None:
            found = self.compiled.evaluate(zz, patterns)
            if found is not None:
                return Evaluation(*found)
        count, vertices = len(zz), len(patterns)
        theta = problem.chart.state(zz)
        vel = self._velocities(theta, patterns, times)
        log_c = np.asarray(vel.log_c, dtype=float).reshape(count, vertices)
        log_c_max = np.max(log_c, axis=-1)
        weight = np.exp(log_c - log_c_max[:, None])
        with np.errstate(over="ignore", under="ignore"):
            dz = problem.chart.velocity(vel.dtheta, zz[:, None])
        rhs = weight[..., None] * np.concatenate(
            [dz.reshape(count, vertices, -1), np.ones((count, vertices, 1))], axis=-1
        )
        return Evaluation(rhs, weight[:, None, :] * self._rates(theta, vel.dtheta), log_c_max)

    def _velocities(self, theta: SignedLog, patterns: np.ndarray, times: np.ndarray) -> Velocity:
        """The rescaled field ``F`` (N, V, G, d) and ``log c`` (N, V) at each point of ``theta``
        (N, G, d) under each pattern (V, G, d): one batched call (one call per point and
        pattern for the point-by-point reference field)."""
        batch = (len(theta.sign), len(patterns)) + self.problem.shape
        if isinstance(self.base, FusedField):
            return self.base.velocity(
                SignedLog(
                    np.broadcast_to(theta.sign[:, None], batch),
                    np.broadcast_to(theta.log_abs[:, None], batch),
                ),
                np.broadcast_to(patterns, batch),
                np.broadcast_to(np.asarray(times, dtype=float)[:, None], batch[:2]),
            )
        each = [
            [self.base.velocity(SignedLog(sign, log_abs), p, float(time)) for p in patterns]
            for sign, log_abs, time in zip(theta.sign, theta.log_abs, times, strict=True)
        ]
        return Velocity(
            SignedLog(
                np.array([[v.dtheta.sign for v in row] for row in each]),
                np.array([[v.dtheta.log_abs for v in row] for row in each]),
            ),
            np.array([[float(v.log_c) for v in row] for row in each]),
        )

    def _rates(self, theta: SignedLog, velocity: SignedLog) -> np.ndarray:
        """Normal rates (N, k, V) of the surfaces under each vertex's field ``velocity``
        (signed-log, (N, V, G, d)) at the points ``theta`` (N, G, d), each row scaled by its
        largest entry."""
        count, vertices = velocity.sign.shape[:2]
        rates = np.zeros((count, len(self.surfaces), vertices))
        directions = [i for i, s in enumerate(self.surfaces) if s.kind == DIRECTION]
        for i, surface in enumerate(self.surfaces):
            if surface.kind == PARAMETER:
                log_abs = velocity.log_abs.reshape(count, vertices, -1)[..., surface.at]
                top = np.max(log_abs, axis=-1, keepdims=True)
                finite = np.isfinite(top)
                sign = velocity.sign.reshape(count, vertices, -1)[..., surface.at]
                with np.errstate(over="ignore", invalid="ignore"):
                    scaled = sign * np.exp(log_abs - np.where(finite, top, 0.0))
                rates[:, i] = np.where(finite, scaled, 0.0)
        if directions:
            d_direction = self._direction_rates(theta, velocity)
            for i in directions:
                rates[:, i] = d_direction[..., self.surfaces[i].at]
        return rates

    def _direction_rates(self, theta: SignedLog, velocity: SignedLog) -> np.ndarray:
        """``dG/dtau`` (N, V, d) at the points ``theta`` (N, G, d) along each field, up to one
        positive factor per point.

        ``G = sum_i p_i z_i`` with ``|p_i|`` proportional to ``|l'(u_i)|`` (its sign, that of
        ``-l'(u_i)``, constant away from ``p_i = 0``):
        ``d|p_i| = |p_i| (a_i dm_i - sum_k |p_k| a_k dm_k)``, ``a = d log|l'| / du``,
        ``dm_i = <z_i, dbeta>``, ``dbeta_j = sum_l dw^(l)_j prod_{k != l} w^(k)_j``.
        """
        problem = self.problem
        geometry = self.geometry
        beta = geometry.product_of_layers(theta.sign, theta.log_abs)
        margins, signed_p, _ = geometry.margins_and_weights(beta)
        assert signed_p is not None  # direction surfaces exist only for several examples
        p = np.abs(signed_p)
        with np.errstate(divide="ignore", invalid="ignore"):
            slope = problem.loss.log_derivative_slope(geometry.loss_arguments(margins))
        loo = geometry.leave_one_out(theta.sign, theta.log_abs)
        terms = velocity.log_abs + loo.log_abs[:, None]
        top = np.max(terms, axis=(1, 2, 3), keepdims=True)
        finite = np.isfinite(top)
        mult = np.asarray(problem.multiplicity, dtype=float)[:, None]
        with np.errstate(over="ignore", invalid="ignore"):
            scaled = np.exp(terms - np.where(finite, top, 0.0))
        d_beta = np.sum(mult * velocity.sign * loo.sign[:, None] * scaled, axis=-2)
        d_margin = d_beta @ self.features.T
        weighted = slope[:, None, :] * d_margin
        dp = p[:, None, :] * (weighted - np.sum(p[:, None, :] * weighted, axis=-1, keepdims=True))
        dp = np.where(p[:, None, :] > 0, dp, 0.0)  # p_i = 0: a residual at 0 (regression)
        if problem.loss.descent_sign is not None:
            dp = dp * np.sign(signed_p)[:, None, :]
        return np.where(finite[..., 0], dp @ self.features, 0.0)

    def _coupled_weights(self, ev: Evaluation) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``lambda`` (..., k_coupled), the weights (..., M) of the coupled vertices from the
        one-sided fields ``ev`` (rates (..., k, V)) (``[1]`` when none slides), and whether the
        multilinear rule solved its equations (...) (:func:`solve_multilinear`; True under
        the tilted rule, whose own margin watches it)."""
        rates = ev.rates
        if not self.coupled:
            batch = rates.shape[:-2]
            return np.empty(batch + (0,)), np.ones(batch + (1,)), np.ones(batch, dtype=bool)
        if self.mode.tilted:
            lam, weights = self._tilted_weights(ev)
            return lam, weights, np.ones(rates.shape[:-2], dtype=bool)
        lam, exact = solve_multilinear(
            rates[..., self.coupled, : len(self.signs)], self.signs, self.newton
        )
        return lam, multilinear_weights(lam, self.signs), exact

    def _tilted(self, ev: Evaluation) -> list[tuple[np.ndarray, np.ndarray, float, bool]]:
        """:func:`~flows.integrator.tilted.solve_tilted_in_tau` of the coupled surfaces at each
        point of ``ev`` (its shares are of rescaled time), flattened over the leading axes."""
        vertices = slice(0, len(self.signs))
        rates = ev.rates[..., self.coupled, vertices]
        speeds = ev.rhs[..., vertices, -1]
        flat_rates = rates.reshape((-1,) + rates.shape[-2:])
        flat_speeds = speeds.reshape(-1, speeds.shape[-1])
        return [
            solve_tilted_in_tau(r, c, self.tilted)
            for r, c in zip(flat_rates, flat_speeds, strict=True)
        ]

    def _tilted_weights(self, ev: Evaluation) -> tuple[np.ndarray, np.ndarray]:
        """The tilted rule's weights (..., M) in the original clock, and each surface's share
        of its + side (..., k) as its ``lambda``."""
        found = self._tilted(ev)
        shape = ev.rates.shape[:-2] + (len(self.signs),)
        weights = np.array([f[0] for f in found]).reshape(shape)
        shares = np.array([f[1] for f in found]).reshape(shape)
        return shares @ (self.signs > 0), weights

    def release_margin(self, z: np.ndarray, time: float) -> float:
        """Positive while every surface slides: ``min_i min(lambda_i, 1 - lambda_i)`` under the
        multilinear rule, -1 where it has no exact solution (the surfaces can no longer be kept
        together); ``1 - spread / SPREAD_RELEASE`` under the tilted rule (-1 where it has no
        solution), :mod:`flows.integrator.tilted`."""
        if not (self.mode.tilted and self.coupled):
            lam, exact = self.lambdas_exact(z, time)
            return float(np.min(np.minimum(lam, 1.0 - lam))) if exact else -1.0
        _, _, size, exact = self._tilted(self.evaluate(z, time))[0]
        return 1.0 - size / SPREAD_RELEASE if exact else -1.0

    def lambdas(self, z: np.ndarray, time: float) -> np.ndarray:
        """``lambda_i`` (k,) of every surface: the weight of its + side."""
        return self.lambdas_exact(z, time)[0]

    def lambdas_exact(self, z: np.ndarray, time: float) -> tuple[np.ndarray, bool]:
        """:meth:`lambdas`, and whether the coupled ones solve their equations exactly."""
        ev = self.evaluate(z, time, minus=True)
        out = np.empty(len(self.surfaces))
        out[self.coupled], weights, exact = self._coupled_weights(ev)
        half = len(self.signs)
        for i in self.inert:
            plus = weights @ ev.rates[i, :half]
            minus = weights @ ev.rates[i, half:]
            out[i] = minus / (minus - plus) if minus != plus else 0.5
        return out, bool(np.all(exact))

    def one_sided_rates(self, z: np.ndarray, time: float) -> tuple[float, float]:
        """``(N+, N-)`` of the extra (last) surface, the others sliding as they do."""
        ev = self.evaluate(z, time)
        last = len(self.surfaces) - 1
        sides = self.signs[:, self.coupled.index(last)]
        others = [i for i in self.coupled if i != last]
        out = []
        for side in (1.0, -1.0):
            keep = sides == side
            weights = np.ones(1)
            if others:
                sub = self.signs[keep][:, [self.coupled.index(i) for i in others]]
                lam, _ = solve_multilinear(ev.rates[others][:, keep], sub, self.newton)
                weights = multilinear_weights(lam, sub)
            out.append(float(weights @ ev.rates[last, keep]))
        return out[0], out[1]

    def _combined(self, z: np.ndarray, time: float) -> tuple[np.ndarray, float]:
        """``sum_v w_v c_v / c_max (dz/dtau, 1)`` and ``log c_max`` at ``z``."""
        ev = self.evaluate(z, time)
        weights = self._coupled_weights(ev)[1]
        return weights @ ev.rhs[: len(self.signs)], float(ev.log_c_max)

    def chart_rhs(
        self,
        z: np.ndarray,
        held: np.ndarray,
        pattern_signs: np.ndarray | None = None,
        time: float = 0.0,
    ) -> np.ndarray:
        """``d(z, tau)/ds``: the multilinear combination of the one-sided fields (in the
        original clock, then in the run's), held entries at rest (``held`` and
        ``pattern_signs`` are the mode's own)."""
        if not self.coupled:  # inert surfaces change nothing but their own held entries
            return self.base.chart_rhs(z, self.mode.held, self.patterns[0], time)
        combined, log_c_max = self._combined(z, time)
        out = combined / combined[-1]
        if self.problem.clock.original:
            with np.errstate(over="ignore", under="ignore"):
                out = out * np.exp(log_c_max + np.log(combined[-1]))
        out[:-1][self.mode.held.ravel()] = 0.0
        return out

    def pattern_signs(self, pattern: SignPattern | None) -> np.ndarray | None:
        """Unused: the combination sets every vertex's signs itself."""
        return None

    # ------------------------------------------------------------------ batches

    def log_c(
        self, theta: SignedLog, pattern_signs: np.ndarray | None = None, time=0.0
    ) -> np.ndarray:
        """The clock factor of the sliding path (...), ``c = dtau/dt = sum_v w_v c_v``. Where a
        ``lambda`` has left ``[0, 1]`` (a quadrature node of a step that ends just past a
        release, or beyond the located event by the solver's tolerance) the weights can be
        negative and ``sum_v w_v c_v <= 0``: there the weights of ``lambda`` clipped to the box,
        the nearest Filippov combination, give ``c`` (positive: every ``c_v > 0``)."""
        problem = self.problem
        if not self.coupled:
            return self.base.log_c(theta, self.patterns[0], time)
        shape = theta.sign.shape[:-2]
        zz = problem.chart.coordinates(theta).reshape((-1,) + problem.shape)
        times = np.broadcast_to(np.asarray(time, dtype=float), shape).ravel()
        out = np.empty(len(zz))
        per_point = len(self.signs) * max(problem.data.n, zz[0].size)
        step = max(1, BATCH_ELEMENTS // per_point)
        for lo in range(0, len(zz), step):
            ev = self.evaluate_batch(zz[lo : lo + step], times[lo : lo + step])
            lam, weights, _ = self._coupled_weights(ev)
            speed = np.sum(weights * ev.rhs[:, : len(self.signs), -1], axis=-1)
            outside = ~(speed > 0)  # a lambda past [0, 1] (a node beyond a release): see below
            if np.any(outside):
                boxed = multilinear_weights(np.clip(lam[outside], 0.0, 1.0), self.signs)
                speed[outside] = np.sum(boxed * ev.rhs[outside, : len(self.signs), -1], axis=-1)
            with np.errstate(divide="ignore"):
                out[lo : lo + step] = ev.log_c_max + np.log(speed)
        return out.reshape(shape)
