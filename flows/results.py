"""The result of a flow integration: one object with the path, both clocks and the status."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: ``status`` values, as in ``scipy.integrate.solve_ivp``.
SUCCESS, BLOWUP, FAILURE = 0, 1, -1


@dataclass(frozen=True)
class FlowEvent:
    """Something that happened at rescaled time ``tau``: ``kind`` in {'crossing', 'sliding',
    'release', 'collapse', 'blow-up', 'stationary', 'loss floor'}; for the first three the switching surface:
    ``surface`` 'parameter' (``w^(group)_j = 0``, ``entry = (group, j)``) or 'direction'
    (``G_j(theta) = 0``, every layer of ``j``: ``entry = (-1, j)``); None for global events."""

    tau: float
    kind: str
    entry: tuple[int, int] | None = None
    surface: str | None = None


@dataclass(frozen=True, eq=False)
class Trajectory:
    """A flow on an L-layer diagonal linear network, sampled at ``t``.

    Attributes
    ----------
    t : (T,) times in the chosen clock.
    tau : (T,) rescaled time; ``log_t_original`` : (T,) log of the original time
        (``+inf`` once the margins leave float64, since ``t ~ exp(margin)``).
    log_abs_theta, sign_theta : (T, L, d) parameters in signed-log form.
    log_abs_beta, sign_beta : (T, d) the predictor ``beta = prod_l w^(l)`` in signed-log form.
    loss : (T,) the training loss at ``theta`` (0 when it underflows).
    status : 0 reached ``t_max``; 1 finite-time blow-up (at ``blowup_time``); -1 failure.
    message : what happened, in words.
    events : crossings, sliding, releases, collapse, blow-up (in rescaled time).
    nfev : field evaluations spent (every one-sided field of a sliding combination counts).
    reduced : integrated as the balanced reduced system.
    sliding_time : rescaled time during which some switching surface of l_inf-SAM slid.
    sliding_surfaces : the most switching surfaces sliding at once.
    """

    t: np.ndarray
    tau: np.ndarray
    log_t_original: np.ndarray
    log_abs_theta: np.ndarray
    sign_theta: np.ndarray
    log_abs_beta: np.ndarray
    sign_beta: np.ndarray
    loss: np.ndarray
    status: int
    message: str
    algorithm: str
    depth: int
    clock: str
    hyperparameters: dict
    events: tuple[FlowEvent, ...] = ()
    nfev: int = 0
    reduced: bool = False
    sliding_time: float = 0.0
    sliding_surfaces: int = 0

    @property
    def success(self) -> bool:
        """True unless the integration failed (a blow-up is a successful, truthful answer)."""
        return self.status >= 0

    @property
    def beta(self) -> np.ndarray:
        """``beta`` (T, d); +-inf where it exceeds float64, exact 0 where it is 0."""
        with np.errstate(over="ignore"):
            return np.where(self.sign_beta == 0, 0.0, self.sign_beta * np.exp(self.log_abs_beta))

    @property
    def theta(self) -> np.ndarray:
        """Parameters (T, L, d); +-inf where they exceed float64."""
        with np.errstate(over="ignore"):
            return np.where(self.sign_theta == 0, 0.0, self.sign_theta * np.exp(self.log_abs_theta))

    @property
    def direction(self) -> np.ndarray:
        """``beta / ||beta||_2`` (T, d) computed in log space (0 where ``beta = 0``)."""
        top = np.max(self.log_abs_beta, axis=1, keepdims=True)
        safe_top = np.where(np.isfinite(top), top, 0.0)
        scaled = np.where(
            self.sign_beta == 0, 0.0, self.sign_beta * np.exp(self.log_abs_beta - safe_top)
        )
        norm = np.linalg.norm(scaled, axis=1, keepdims=True)
        return np.divide(scaled, norm, out=np.zeros_like(scaled), where=norm > 0)

    def times_of(self, kind: str) -> list[float]:
        """Rescaled times of all events of one ``kind``."""
        return [e.tau for e in self.events if e.kind == kind]

    @property
    def blowup_time(self) -> float | None:
        """Rescaled time of the finite-time blow-up, or None."""
        times = self.times_of("blow-up")
        return times[0] if times else None

    @property
    def collapse_time(self) -> float | None:
        """Rescaled time at which ``theta`` collapsed to 0, or None."""
        times = self.times_of("collapse")
        return times[0] if times else None
