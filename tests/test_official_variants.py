"""SAM variants exactly as their authors' code runs them, against independent transcriptions.

The references below are written here in numpy from the public code, line by line, not from
the library:

* LE-SAM: ``lesam.py`` of smithgun2005/LE-SAM-ICML2026 (commit 2b3ecd9): ``LESAM._grad_norm``
  (lines 52-67: ``sqrt(sum_p ||s * p.grad||^2 + eps)``, ``s = |p|`` if adaptive), ``ascent_step``
  (lines 73-107: ``rho_t = sigma / (grad_norm + eps)``, capped only if ``rho_max > 0``;
  ``e = s * p.grad * rho_t / (grad_norm + eps)``), ``descent_step`` (lines 109-127: ``p -= e``,
  then the base optimizer's step), ``schedule_lesam_sigma`` (per epoch: linear warm-up reaching
  sigma at epoch W - 1, hold, cosine to sigma_min at epoch E - 1) and the training script's
  base optimizer ``torch.optim.SGD(lr, momentum=0.9, weight_decay)``.
* ASAM: ``asam.py`` of SamsungLabs/ASAM (commit dc9b513), ``ASAM.ascent_step`` lines 12-38:
  ``T = |w| + eta``, ``g <- T g``, ``n = ||T g|| + 1e-16``, ``eps = T (T g) rho / n``.
* PyTorch SGD (``torch/optim/sgd.py``, dampening 0, no Nesterov): ``d = g + wd p``; the first
  momentum buffer is ``d``, then ``b = mu b + d``; ``p -= lr b``.

The diagonal network has one parameter tensor per layer (``L`` tensors of shape ``(d,)``), its
loss the mean logistic loss ``mean_i log(1 + exp(-y_i <w1 * ... * wL, x_i>))``, whose gradient is
also written here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from flows import iterate, simulate, single_example
from flows.algorithms import ASAM_STABILISER, GradientSummary, asam_perturbation
from flows.datasets import gaussian_blobs
from flows.schedules import lesam_official, parse

BLOBS = gaussian_blobs()
MU = single_example([1.0, 2.0, 3.0])


def loss_gradient(layers: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``d L / d w_l = mean_i l'(m_i) y_i x_i * prod_{k != l} w_k`` for the logistic loss,
    ``l'(m) = -1 / (1 + e^m)``."""
    beta = np.prod(layers, axis=0)
    m = y * (X @ beta)
    weights = -np.exp(-np.logaddexp(0.0, m))
    G = (weights * y) @ X / len(y)
    out = np.empty_like(layers)
    for layer in range(len(layers)):
        out[layer] = G * np.prod(np.delete(layers, layer, axis=0), axis=0)
    return out


def scale_with_gradient(target: float) -> float:
    """The scale ``a`` of ``w = a * 1`` (two layers) at which the single example's gradient
    norm is ``target`` (fixed-point iteration on ``||grad|| ~ e^{-margin}``)."""
    a = 1.0
    for _ in range(60):
        g = loss_gradient(np.full((2, 3), a), MU.X, MU.y)
        a *= (np.linalg.norm(g) / target) ** (1 / 30)
    return a


def official_lesam_perturbation(layers, g, sigma, rho_max, eps, adaptive):
    """``LESAM._grad_norm`` and ``ascent_step`` of lesam.py, per layer tensor."""
    acc = None
    for p, grad in zip(layers, g, strict=True):
        scale = np.abs(p) if adaptive else 1.0
        n = np.linalg.norm(scale * grad)
        acc = n * n if acc is None else acc + n * n
    grad_norm = math.sqrt(acc + eps)
    if grad_norm == 0.0:
        return np.zeros_like(layers)
    rho_t = sigma / (grad_norm + eps)
    if rho_max is not None and rho_max > 0.0:
        rho_t = min(rho_t, rho_max)
    scale_factor = rho_t / (grad_norm + eps)
    return np.array(
        [
            (np.abs(p) if adaptive else 1.0) * grad * scale_factor
            for p, grad in zip(layers, g, strict=True)
        ]
    )


def asam_perturbation_reference(layers, g, rho, eta):
    """``ASAM.ascent_step`` of asam.py (every tensor of the network is a weight)."""
    t_w = np.abs(layers) + eta
    tg = t_w * g
    wgrad_norm = np.linalg.norm([np.linalg.norm(row) for row in tg]) + 1.0e-16
    return t_w * tg * (rho / wgrad_norm)


def sgd_run(layers, X, y, perturbation, steps, lr, momentum=0.0, weight_decay=0.0, lr_of=None):
    """SAM-style two-step training with torch.optim.SGD as the base optimizer."""
    p = layers.copy()
    buf = None
    for k in range(steps):
        g = loss_gradient(p, X, y)
        e = perturbation(p, g, k)
        gp = loss_gradient(p + e, X, y)
        d = gp + weight_decay * p if weight_decay != 0 else gp
        if momentum != 0:
            buf = d.copy() if buf is None else momentum * buf + d
            d = buf
        p = p - (lr if lr_of is None else lr_of(k)) * d
    return p


def schedule_lesam_sigma(epoch, sigma_init, sigma_min, decay_start, total_epochs, warmup_epochs):
    """``schedule_lesam_sigma`` of lesam.py with mode 'cosine' and warmup_start 0."""
    warmup_epochs = max(0, int(warmup_epochs))
    if warmup_epochs > 0 and epoch < warmup_epochs:
        if warmup_epochs == 1:
            sigma = sigma_init
        else:
            t = max(0.0, min(1.0, float(epoch) / float(warmup_epochs - 1)))
            sigma = 0.0 + (sigma_init - 0.0) * t
        return float(max(min(0.0, sigma_init), min(max(0.0, sigma_init), sigma)))
    effective = max(decay_start, warmup_epochs)
    if epoch < effective:
        return float(sigma_init)
    decay_len = total_epochs - effective
    if decay_len <= 1:
        return float(sigma_min)
    t = max(0.0, min(1.0, float(epoch - effective) / float(max(1, decay_len - 1))))
    sigma = sigma_min + 0.5 * (sigma_init - sigma_min) * (1.0 + math.cos(math.pi * t))
    return float(max(min(sigma_init, sigma_min), min(max(sigma_init, sigma_min), sigma)))


# --------------------------------------------------------------------------- LE-SAM


# slow: the second case of each kind of cap (not binding, binding, absent); the default run
# keeps one of each, with both depths and both settings of adaptive
@pytest.mark.parametrize(
    "depth,rho_max,adaptive",
    [
        (2, 0.3, False),
        pytest.param(3, 0.3, True, marks=pytest.mark.slow),
        pytest.param(2, 1e-3, True, marks=pytest.mark.slow),
        (3, 1e-3, False),
        (2, 0.0, True),
        pytest.param(3, -1.0, False, marks=pytest.mark.slow),
    ],
)
def test_official_lesam_matches_the_transcription(depth, rho_max, adaptive):
    """iterate('le-sam-official') on Gaussian blobs equals the transcribed optimizer with SGD
    (momentum 0.9, weight decay 5e-4) after 1 and 500 steps (rtol 1e-10); the cap binds at
    rho_max = 1e-3 (rho_t = sigma / N is ~0.5 there), is absent at rho_max <= 0."""
    X, y = BLOBS.X, BLOBS.y
    init = np.full((depth, BLOBS.d), 0.5)
    kw = dict(sigma=0.35, rho_max=rho_max, eps=1e-12, adaptive=adaptive)

    def perturbation(p, g, k):
        return official_lesam_perturbation(p, g, 0.35, rho_max, 1e-12, adaptive)

    for steps in (1, 500):
        ref = sgd_run(init, X, y, perturbation, steps, 0.05, momentum=0.9, weight_decay=5e-4)
        run = iterate(
            BLOBS, "le-sam-official", depth, 0.5, eta=0.05, steps=steps, record_every=steps,
            momentum=0.9, weight_decay=5e-4, **kw,
        )  # fmt: skip
        np.testing.assert_allclose(run.theta[-1], ref, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("target", [1e-2, 1e-4, 1e-6, 1e-8, 1e-10, 1e-12])
@pytest.mark.parametrize("adaptive", [False, True])
def test_official_lesam_at_tiny_gradients(target, adaptive):
    """One step from a point whose gradient norm is ``target`` (1e-2 .. 1e-12; the single
    example at a large margin): the step equals the transcription (rtol 1e-12), and below
    sqrt(eps) = 1e-6 the perturbation vanishes with the gradient (``||e|| / ||g|| ->
    rho_max / 1e-6``), so the step tends to gradient descent's (within 1e-3 from 1e-10 on)."""
    X, y = MU.X, MU.y
    a = scale_with_gradient(target)
    layers = np.full((2, 3), a)
    g = loss_gradient(layers, X, y)
    e = official_lesam_perturbation(layers, g, 0.35, 0.3, 1e-12, adaptive)
    ref = layers - 0.1 * loss_gradient(layers + e, X, y)
    run = iterate(MU, "le-sam-official", 2, a, eta=0.1, steps=1, adaptive=adaptive)
    np.testing.assert_allclose(run.theta[-1], ref, rtol=1e-12)
    if target <= 1e-8 and not adaptive:
        ratio = np.linalg.norm(e) / np.linalg.norm(g)
        assert ratio == pytest.approx(0.3 / math.sqrt(np.linalg.norm(g) ** 2 + 1e-12), rel=1e-6)
    if target <= 1e-10 and not adaptive:
        gd = iterate(MU, "gd", 2, a, eta=0.1, steps=1)
        step, gd_step = run.theta[-1] - layers, gd.theta[-1] - layers
        assert np.max(np.abs(step - gd_step)) <= 1e-3 * np.max(np.abs(gd_step))


def test_the_two_lesam_conventions_part_late_in_training():
    """Where ||grad L|| << 1e-6 the paper's LE-SAM perturbs by rho_max while the official one
    perturbs by ~rho_max ||grad L|| / 1e-6: at ||grad L|| = 1e-9 the paper's step is more than
    5 times the official one (17 measured); at 1e-2 they agree to the stabilisers (1e-7)."""
    for target, differ in ((1e-2, False), (1e-9, True)):
        a = scale_with_gradient(target)
        layers = np.full((2, 3), a)
        paper = iterate(MU, "le-sam", 2, a, eta=0.1, steps=1, sigma=0.35, rho_max=0.3)
        official = iterate(MU, "le-sam-official", 2, a, eta=0.1, steps=1)
        gap = np.max(np.abs(paper.theta[-1] - official.theta[-1]))
        step = np.max(np.abs(official.theta[-1] - layers))
        if differ:
            assert gap > 5 * step
        else:
            assert gap <= 1e-7 * step


# --------------------------------------------------------------------------- ASAM


@pytest.mark.parametrize("depth", [2, 3])
def test_asam_matches_the_transcription(depth):
    """iterate('asam') equals the transcribed ASAM step with SGD after 1 and 500 steps."""
    X, y = BLOBS.X, BLOBS.y
    init = np.full((depth, BLOBS.d), 0.5)

    def perturbation(p, g, k):
        return asam_perturbation_reference(p, g, 0.5, 0.01)

    for steps in (1, 500):
        ref = sgd_run(init, X, y, perturbation, steps, 0.05, momentum=0.9, weight_decay=5e-4)
        run = iterate(
            BLOBS, "asam", depth, 0.5, eta=0.05, steps=steps, record_every=steps,
            momentum=0.9, weight_decay=5e-4, rho=0.5, eta_asam=0.01,
        )  # fmt: skip
        np.testing.assert_allclose(run.theta[-1], ref, rtol=1e-10, atol=1e-14)


def test_asam_perturbation_has_the_radius_in_its_own_norm():
    """||T^-1 eps|| = rho ||T g|| / (||T g|| + 1e-16) for random parameters and gradients
    (T = |theta| + eta), over scales of the gradient from 1e-8 to 1e8."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        theta = rng.normal(size=(3, 4)) * 10.0 ** rng.uniform(-3, 3)
        g = rng.normal(size=(3, 4)) * 10.0 ** rng.uniform(-8, 8)
        norm = np.linalg.norm(g)
        grad = GradientSummary(
            g / norm, np.sign(g), math.log(norm), np.ones(3), np.log(np.abs(theta))
        )
        rho, eta = 0.7, 0.01
        eps = asam_perturbation(grad, {"rho": rho, "eta_asam": eta})
        T = np.abs(theta) + eta
        tg = np.linalg.norm(T * g)
        assert np.linalg.norm(eps / T) == pytest.approx(
            rho * tg / (tg + ASAM_STABILISER), rel=1e-12
        )


# --------------------------------------------------------------------------- base optimizer


@pytest.mark.parametrize(
    "algorithm,off",
    [
        ("l2-sam", {"rho": 0.0}),
        ("usam", {"rho": 0.0}),
        ("linf-sam", {"rho": 0.0}),
        ("asam", {"rho": 0.0}),
        ("le-sam", {"sigma": 0.0, "rho_max": 1.0}),
        ("le-sam-official", {"sigma": 0.0}),
        ("le-sam-official", {"sigma": 0.0, "adaptive": True}),
    ],
)
def test_no_perturbation_is_the_base_optimizer_bit_for_bit(algorithm, off):
    """rho = 0 (or sigma = 0): every SAM variant's iterates equal GD's with the same base
    optimizer (momentum, weight decay, a cosine learning rate) bit for bit."""
    base = dict(eta=parse("cosine:0.05,5"), momentum=0.9, weight_decay=5e-4, steps=100)
    gd = iterate(BLOBS, "gd", 3, 0.5, **base)
    run = iterate(BLOBS, algorithm, 3, 0.5, **base, **off)
    np.testing.assert_array_equal(run.theta, gd.theta)


def test_sgd_semantics_with_a_learning_rate_schedule():
    """GD with momentum, weight decay and a cosine learning rate equals torch.optim.SGD's
    update transcribed above, the rate of step k taken at the step time k * (peak rate)."""
    X, y = BLOBS.X, BLOBS.y
    init = np.full((2, BLOBS.d), 0.5)
    schedule = parse("cosine:0.05,10")
    ref = sgd_run(
        init, X, y, lambda p, g, k: np.zeros_like(p), 150, None, 0.9, 1e-3,
        lr_of=lambda k: 0.5 * 0.05 * (1 + math.cos(math.pi * min(k * 0.05 / 10, 1.0))),
    )  # fmt: skip
    run = iterate(BLOBS, "gd", 2, 0.5, eta=schedule, steps=150, momentum=0.9, weight_decay=1e-3)
    np.testing.assert_allclose(run.theta[-1], ref, rtol=1e-12)
    assert run.eta == 0.05 and run.t[-1] == pytest.approx(150 * 0.05)


def test_base_optimizer_arguments_are_checked():
    """Negative momentum or weight decay, a plain callable or a zero schedule as eta: a
    ValueError naming the parameter."""
    for kw, name in [
        ({"momentum": -0.1}, "momentum"),
        ({"weight_decay": -1.0}, "weight_decay"),
        ({"momentum": True}, "momentum"),
        ({"eta": lambda t: 0.1}, "eta"),
        ({"eta": parse("constant:0")}, "eta"),
    ]:
        with pytest.raises(ValueError, match=name):
            iterate(MU, "gd", 2, 0.5, steps=2, **kw)


# --------------------------------------------------------------------------- schedule


@pytest.mark.parametrize("warmup,decay,epochs", [(10, 160, 200), (1, 5, 8), (0, 3, 4), (3, 3, 4)])
def test_lesam_official_staircase_is_the_per_epoch_value(warmup, decay, epochs):
    """lesam_official at step k (time k eta) equals schedule_lesam_sigma(k // steps_per_epoch)
    at every step of every epoch (and beyond the last one, 0), including the epoch
    boundaries where k eta / (steps eta) rounds below an integer."""
    steps, eta = 7, 0.1
    schedule = lesam_official(0.35, warmup, decay, epochs, steps, eta)
    for k in range((epochs + 2) * steps):
        expected = schedule_lesam_sigma(
            min(k // steps, epochs + 1), 0.35, 0.0, decay, epochs, warmup
        )
        assert schedule(k * eta) == pytest.approx(expected, abs=1e-15), k
    assert schedule.kinks[:2] == pytest.approx((steps * eta, 2 * steps * eta))
    assert parse(str(schedule)) == schedule


def test_lesam_official_drives_iterate_and_simulate():
    """The staircase as sigma of the official LE-SAM in iterate (per step) and in a flow
    (kinks at the epoch boundaries); its arguments are checked."""
    schedule = lesam_official(0.35, 2, 3, 5, 4, 0.05)
    run = iterate(BLOBS, "le-sam-official", 2, 0.5, eta=0.05, steps=20, sigma=schedule)
    assert run.status == 0
    flow = simulate(BLOBS, "le-sam-official", 2, 0.5, t_max=1.0, clock="original", sigma=schedule)
    assert flow.status == 0
    for bad in [(0.35, 1.5, 3, 5, 4, 0.05), (0.35, 2, 3, 0, 4, 0.05), (0.35, 2, 3, 5, 4, 0.0)]:
        with pytest.raises(ValueError, match="lesam_official"):
            lesam_official(*bad)


# --------------------------------------------------------------------------- flows


@pytest.mark.parametrize(
    "algorithm,kw",
    [("le-sam-official", {}), ("le-sam-official", {"adaptive": True}), ("asam", {"rho": 0.5})],
)
def test_flows_are_the_small_step_limit_of_the_iterates(algorithm, kw):
    """The original-clock flow of each new perturbation is the eta -> 0 limit of its iterates:
    the error at t = 2 halves (ratio 1.7 .. 2.3) when eta halves; and the rescaled clock gives
    the same path (beta at the rescaled run's end equals the original-clock run's at that
    original time, rtol 1e-6)."""
    flow = simulate(BLOBS, algorithm, 2, 0.5, t_max=2.0, clock="original", rtol=1e-11, **kw)
    errors = []
    for eta in (0.02, 0.01, 0.005):
        run = iterate(BLOBS, algorithm, 2, 0.5, eta=eta, steps=round(2.0 / eta), **kw)
        errors.append(np.max(np.abs(run.beta[-1] - flow.beta[-1])))
    assert all(1.7 <= a / b <= 2.3 for a, b in zip(errors[:-1], errors[1:], strict=False)), errors
    rescaled = simulate(BLOBS, algorithm, 2, 0.5, t_max=0.8, rtol=1e-11, **kw)
    t_end = float(np.exp(rescaled.log_t_original[-1]))
    original = simulate(BLOBS, algorithm, 2, 0.5, t_max=t_end, clock="original", rtol=1e-11, **kw)
    np.testing.assert_allclose(rescaled.beta[-1], original.beta[-1], rtol=1e-6)


@pytest.mark.parametrize("rho_max", [0.3, 0.0])
def test_official_size_along_a_run_is_the_transcribed_norm(rho_max):
    """analysis.lesam.radius.official_lesam_size(log ||g||) equals ||e|| of the transcribed
    ascent step (non-adaptive) for gradients of norm 1e2 .. 1e-14, capped and uncapped."""
    from analysis.lesam.radius import official_lesam_size

    rng = np.random.default_rng(5)
    for log10 in np.linspace(2, -14, 17):
        g = rng.normal(size=(2, 3))
        g *= 10.0**log10 / np.linalg.norm(g)
        e = official_lesam_perturbation(np.ones((2, 3)), g, 0.35, rho_max, 1e-12, False)
        size = official_lesam_size(np.log(np.linalg.norm(g)), 0.35, rho_max)
        assert float(size) == pytest.approx(np.linalg.norm(e), rel=1e-12)
