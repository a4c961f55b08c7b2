"""A two-layer convolutional network: shared filters over patches, an activation, a read-out.

For an input ``x`` (an ``H x W`` image, ``H = 1`` for a signal) with patches
``x_(q)`` (the ``kh x kw`` windows at positions ``q = 1..Q``, flattened to ``K = kh kw``
entries), ``C`` filters ``w_c`` (K,) and an activation ``sigma``:

    A_qc = sigma(<w_c, x_(q)>),    f(x) = sum_qc v_qc A_qc          (read-out "linear"),
                                   f(x) = sum_c a_c (1/Q) sum_q A_qc (read-out "pooled").

Padding ``"circular"`` wraps the windows around (a circular convolution: every position is a
window, ``Q = H W``), ``"same"`` pads with zeros (``Q = H W``), ``"valid"`` keeps the windows
inside the input (``Q = (H - kh + 1)(W - kw + 1)``). The filters act by correlation,
``<w_c, x_(q)> = sum_k w_ck x_(q + k)``, as in the deep-learning frameworks.

Both activations of :data:`ACTIVATIONS` are positively 1-homogeneous, so ``f`` is
2-homogeneous in ``theta`` like the depth-2 diagonal network: the initialisation scale
``alpha`` (:meth:`TwoLayerCNN.initial_parameters`) is the only scale of the model. With
``"linear"``, ``f(x) = <beta, x>`` for ``beta = sum_c w_c (*) v_c``: a factorised linear
predictor. With one full-width circular filter (``kh x kw = H x W``) and a linear read-out it
is a diagonal network in the Fourier basis: on even signals, ``<v, w (*) x> =
sum_k V_k W_k s_k xi_k`` in the orthonormal cosine basis (``xi_k`` the coefficients of ``x``,
``s_k`` = sqrt(N/2), or sqrt(N) at frequencies 0 and N/2), so GD and the SAM variants
with l2-type perturbations follow exactly the depth-2 diagonal network on the features
``s_k xi_k`` (docs/theory.md, "Networks").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..checks import choice, integer, memory, positive


@dataclass(frozen=True)
class Activation:
    """``sigma`` and its derivative ``sigma'`` (elementwise; at a kink the right derivative)."""

    value: Callable[[np.ndarray], np.ndarray]
    derivative: Callable[[np.ndarray], np.ndarray]


#: Activation table. Both are positively 1-homogeneous (``f`` is then 2-homogeneous in
#: ``theta``): ``"linear"`` (the factorised linear predictor that connects to the diagonal
#: network) and ``"relu"`` (``max(0, z)``, derivative 1 for z > 0, 0 otherwise).
ACTIVATIONS: dict[str, Activation] = {
    "linear": Activation(lambda z: z, np.ones_like),
    "relu": Activation(lambda z: np.maximum(z, 0.0), lambda z: (z > 0).astype(float)),
}
PADDINGS = ("circular", "same", "valid")
READOUTS = ("linear", "pooled")


def patch_indices(shape: tuple[int, int], kernel: tuple[int, int], padding: str) -> np.ndarray:
    """``(Q, K)`` indices into the flattened input of the windows, window ``q`` in row-major
    order of its top-left corner; index ``H W`` stands for a zero (``"same"`` padding, centred
    windows: offsets ``-(kh - 1) // 2 .. kh // 2``)."""
    H, W = shape
    kh, kw = kernel
    di, dj = np.meshgrid(np.arange(kh), np.arange(kw), indexing="ij")
    if padding == "valid":
        qi, qj = np.meshgrid(np.arange(H - kh + 1), np.arange(W - kw + 1), indexing="ij")
    else:
        qi, qj = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")
    rows = qi.reshape(-1, 1) + di.reshape(1, -1)
    cols = qj.reshape(-1, 1) + dj.reshape(1, -1)
    if padding == "circular":
        return (rows % H) * W + cols % W
    if padding == "same":
        rows, cols = rows - (kh - 1) // 2, cols - (kw - 1) // 2
        inside = (rows >= 0) & (rows < H) & (cols >= 0) & (cols < W)
        return np.where(inside, rows * W + cols, H * W)
    return rows * W + cols


def _sizes(value, name: str, single: Callable[[int], tuple[int, int]]) -> tuple[int, int]:
    """Two integers >= 1 from a pair (a tuple, a list or a 1-d array) or from one integer ``k``
    (``single(k)``); ``ValueError`` naming ``name`` otherwise."""
    if isinstance(value, (tuple, list)) or (isinstance(value, np.ndarray) and value.ndim == 1):
        if len(value) != 2:
            raise ValueError(f"{name} must be an integer or a pair of integers, got {value!r}")
        return integer(value[0], name, 1), integer(value[1], name, 1)
    return single(integer(value, name, 1))


class TwoLayerCNN:
    """The network of the module docstring.

    Parameters
    ----------
    input_shape : ``(H, W)``, or an int ``N`` for signals of length N (``(1, N)``).
    kernel : ``(kh, kw)``, or an int (``(1, k)`` for signals, ``(k, k)`` for images).
    channels : the number of filters ``C``.
    activation : a key of :data:`ACTIVATIONS`.
    padding : ``"circular"``, ``"same"`` or ``"valid"``.
    readout : ``"linear"`` (a weight per position and channel) or ``"pooled"`` (the mean over
        positions, then a weight per channel).

    ``theta`` is the flat vector ``[w (C, K) row by row, then v (Q, C) or a (C,)]``.

    Sizes are capped by :data:`flows.checks.MAX_FLOATS` (a ``ValueError`` naming the parameter
    and the memory it would need): the window indices ``Q K`` (input_shape), the weights
    ``C (K + Q)`` or ``C (K + 1)`` (channels), and the patches ``n Q K`` of an input array
    (X).
    """

    def __init__(
        self,
        input_shape: int | tuple[int, int],
        kernel: int | tuple[int, int],
        channels: int = 1,
        activation: str = "relu",
        padding: str = "circular",
        readout: str = "linear",
    ):
        self.input_shape = _sizes(input_shape, "input_shape", lambda n: (1, n))
        signal = self.input_shape[0] == 1
        kh, kw = _sizes(kernel, "kernel", lambda k: (1, k) if signal else (k, k))
        if kh > self.input_shape[0] or kw > self.input_shape[1]:
            raise ValueError(f"kernel {kernel} is larger than the input {self.input_shape}")
        self.kernel = (kh, kw)
        self.channels = integer(channels, "channels", 1)
        self.activation = choice(activation, "activation", ACTIVATIONS)
        self.padding = choice(padding, "padding", PADDINGS)
        self.readout = choice(readout, "readout", READOUTS)
        H, W = self.input_shape
        Q = (H - kh + 1) * (W - kw + 1) if self.padding == "valid" else H * W
        memory(Q * kh * kw, "input_shape", f"the window indices ({Q} windows of {kh} x {kw})")
        head = Q if self.readout == "linear" else 1
        memory(self.channels * (kh * kw + head), "channels", f"{self.channels} channels' weights")
        self.indices = patch_indices(self.input_shape, self.kernel, self.padding)
        self._sigma = ACTIVATIONS[self.activation]
        self._cached: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def n_inputs(self) -> int:
        """``H W``."""
        return self.input_shape[0] * self.input_shape[1]

    @property
    def positions(self) -> int:
        """``Q``."""
        return self.indices.shape[0]

    @property
    def kernel_size(self) -> int:
        """``K = kh kw``."""
        return self.kernel[0] * self.kernel[1]

    @property
    def size(self) -> int:
        """``C K`` filter weights plus ``Q C`` (linear) or ``C`` (pooled) read-out weights."""
        head = self.positions * self.channels if self.readout == "linear" else self.channels
        return self.channels * self.kernel_size + head

    def split(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(w (C, K), v (Q, C) or a (C,))`` from the flat ``theta``."""
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self.size,):
            raise ValueError(f"theta must have shape ({self.size},), got {theta.shape}")
        n_filter = self.channels * self.kernel_size
        w = theta[:n_filter].reshape(self.channels, self.kernel_size)
        head = theta[n_filter:]
        return w, head.reshape(self.positions, self.channels) if self.readout == "linear" else head

    def patches(self, X: np.ndarray) -> np.ndarray:
        """``x_(q)`` of every input: (n, Q, K). ``X`` is (n, H W) (rows flattened row-major).

        The patches of the last ``X`` seen are kept (training calls this with one array
        several times a step); an array written to in place between calls is not noticed,
        so pass a new array for new inputs."""
        if self._cached is not None and self._cached[0] is X:
            return self._cached[1]
        values = np.asarray(X, dtype=float)
        if values.ndim != 2 or values.shape[1] != self.n_inputs:
            raise ValueError(f"X must have shape (n, {self.n_inputs}), got {values.shape}")
        n, (Q, K) = values.shape[0], self.indices.shape
        memory(n * Q * K, "X", f"the patches of {n} inputs ({Q} windows of {K} entries each)")
        padded = np.concatenate([values, np.zeros((values.shape[0], 1))], axis=1)
        P = np.ascontiguousarray(padded[:, self.indices])
        self._cached = (X, P)
        return P

    def feature_maps(self, theta: np.ndarray, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pre-activations ``<w_c, x_(q)>`` and activations ``A_qc``, each (n, Q, C)."""
        w, _ = self.split(theta)
        P = self.patches(X)
        n, Q, K = P.shape
        pre = (P.reshape(n * Q, K) @ w.T).reshape(n, Q, self.channels)
        return pre, self._sigma.value(pre)

    def head_weights(self, theta: np.ndarray) -> np.ndarray:
        """``d f / d A_qc`` (Q, C): ``v``, or ``a_c / Q`` for every q when pooled."""
        _, head = self.split(theta)
        if self.readout == "linear":
            return head
        return np.broadcast_to(head / self.positions, (self.positions, self.channels))

    def outputs(self, theta: np.ndarray, X: np.ndarray) -> np.ndarray:
        """``f(x_i)`` (n,)."""
        return self.vjp(theta, X)[0]

    def vjp(
        self, theta: np.ndarray, X: np.ndarray
    ) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]:
        """``f(x_i)`` (n,) and the pullback ``g -> sum_i g_i grad_theta f(x_i)``:
        ``dv_qc = sum_i g_i A_iqc``, ``dw_c = sum_iq g_i v_qc sigma'(<w_c, x_i(q)>) x_i(q)``
        (the forward pass computed once for both)."""
        w, _ = self.split(theta)
        P = self.patches(X)
        n, Q, K = P.shape
        rows = P.reshape(n * Q, K)
        pre = rows @ w.T  # (n Q, C)
        A = self._sigma.value(pre).reshape(n, Q * self.channels)
        head = np.ascontiguousarray(self.head_weights(theta)).ravel()  # (Q C,)

        def pullback(g: np.ndarray) -> np.ndarray:
            g = np.asarray(g, dtype=float)
            d_head = g @ A
            if self.readout == "pooled":
                d_head = d_head.reshape(Q, self.channels).sum(axis=0) / Q
            d_pre = (np.outer(g, head).reshape(n * Q, self.channels)) * self._sigma.derivative(pre)
            return np.concatenate([(d_pre.T @ rows).ravel(), d_head])

        return A @ head, pullback

    def input_gradients(self, theta: np.ndarray, X: np.ndarray) -> np.ndarray:
        """``grad_x f(x_i)`` (n, H W): ``sum_qc v_qc sigma'(<w_c, x_(q)>) w_c`` scattered back
        onto the input entries of each window (zero-padding entries dropped)."""
        w, _ = self.split(theta)
        pre, _ = self.feature_maps(theta, X)
        d_pre = self.head_weights(theta)[None] * self._sigma.derivative(pre)
        per_window = d_pre @ w  # (n, Q, K)
        out = np.zeros((per_window.shape[0], self.n_inputs + 1))
        for k in range(self.kernel_size):  # for one offset k, the windows read distinct entries
            out[:, self.indices[:, k]] += per_window[:, :, k]  # (but the padding entry)
        return out[:, : self.n_inputs]

    def initial_parameters(self, alpha: float, seed: int = 0) -> np.ndarray:
        """``alpha`` times LeCun-normal weights: filter entries ``N(0, 1/K)``, read-out entries
        ``N(0, 1/(Q C))`` (linear) or ``N(0, 1/C)`` (pooled), from
        ``numpy.random.default_rng(seed)``."""
        alpha = positive(alpha, "alpha")
        rng = np.random.default_rng(integer(seed, "seed", 0))
        n_filter = self.channels * self.kernel_size
        fan_in = self.positions * self.channels if self.readout == "linear" else self.channels
        filters = rng.standard_normal(n_filter) / np.sqrt(self.kernel_size)
        head = rng.standard_normal(self.size - n_filter) / np.sqrt(fan_in)
        return alpha * np.concatenate([filters, head])
