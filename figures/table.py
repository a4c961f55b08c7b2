"""The figure table of ``python -m flows.sweep``: every figure of the paper, in paper order.

A figure is a :class:`~figures.common.Figure` declared in the module named for what it draws
(its tasks, drawing function and caption); adding one is a new declaration and one line here.
"""

from __future__ import annotations

from . import (
    amplification,
    blobs,
    clocks_and_loss,
    cnn_banded,
    cnn_gradcam,
    depth_contrast,
    depth_kkt,
    digits_generalization,
    digits_minor_first,
    digits_saliency,
    discrete_vs_flow,
    kernel_rich,
    lesam_amplification,
    lesam_conventions,
    lesam_limits,
    lesam_radius,
    lesam_regimes,
    lesam_sharpness,
    linf_coordinates,
    linf_limit_map,
    maxmargin_angles,
    minibatch_sam,
    official_loop,
    regimes,
    saddles,
    sam_regression,
    sde_paths,
    sgd_step_size,
)
from .common import Figure

FIGURES: dict[str, Figure] = {
    fig.name: fig
    for fig in (
        depth_contrast.DEPTH_CONTRAST,  # fig1
        linf_coordinates.COORDINATES,  # fig2
        linf_limit_map.LIMIT_MAP,  # fig3
        amplification.AMPLIFICATION,  # fig4
        regimes.REGIMES,  # fig5
        maxmargin_angles.MAXMARGIN_ANGLES,  # fig6
        blobs.GAUSSIAN_BLOBS,  # fig7
        discrete_vs_flow.DISCRETE_VS_FLOW,  # fig8
        clocks_and_loss.CLOCKS_AND_LOSS,  # fig9
        clocks_and_loss.CLOCK_MAP,  # fig9: tau -> log t, one path in both clocks
        lesam_radius.RADIUS,  # fig10
        lesam_radius.CURVATURE,  # fig10b: the curvature signal of the same runs
        lesam_amplification.AMPLIFICATION,  # fig11
        lesam_amplification.LEADERS,  # fig11b: LE-SAM's leaders over (sigma, rho_max)
        lesam_regimes.REGIMES,  # fig12
        lesam_regimes.REGIMES_ALPHA,  # fig12b: LE-SAM's regimes along alpha
        lesam_sharpness.SHARPNESS,  # fig13
        lesam_limits.LIMITS,  # fig14
        lesam_conventions.CONVENTIONS,  # fig15: LE-SAM's stabiliser, paper vs official code
        official_loop.OFFICIAL_LOOP,  # fig16: LE-SAM's official training loop vs its flow
        sam_regression.SAM_REGRESSION,  # fig17: the public SAM diagonal-network experiment
        sam_regression.SAM_REGRESSION_FLOWS,  # fig17: its runs at one rho over their flows
        kernel_rich.KERNEL_RICH,  # fig18: kernel -> rich in regression, the Woodworth limit
        saddles.SADDLES,  # fig19: saddle-to-saddle at vanishing initialisation
        saddles.SADDLES_SAM,  # fig19: SAM flows against GD's saddles
        depth_kkt.DEPTH_KKT,  # fig20: which l_{2/L} KKT point the flows reach at depth
        digits_saliency.SALIENCY_0V1,  # digits study: pixel shares as 8x8 maps
        digits_saliency.SALIENCY_3V8,
        digits_saliency.SALIENCY_4V9,
        digits_minor_first.MINOR_FIRST,  # digits study: share-strength rank correlation
        digits_minor_first.STRONG_PIXELS,  # digits study: the same over the stronger half
        digits_generalization.GENERALIZATION,  # digits study: test accuracy
        digits_generalization.MAX_MARGIN,  # digits study: margin, angles to the max-margins
        digits_generalization.KKT,  # digits study: KKT residual of the l_{2/L} program
        cnn_banded.CNN_BANDED,  # networks: a two-layer CNN on banded data
        cnn_banded.CNN_BANDED_LEAD,  # networks: how long a minor band leads, against alpha
        cnn_gradcam.CNN_GRADCAM,  # networks: Grad-CAM of a two-layer CNN on digits
        cnn_gradcam.CNN_GRADCAM_BACKGROUND,  # networks: Grad-CAM mass on the background
        cnn_gradcam.CNN_GRADCAM_ALPHA,  # networks: SAM - GD background share against alpha
        sgd_step_size.SGD_STEP_SIZE,  # stochastic: GD and SGD against the step size
        minibatch_sam.MINIBATCH_SAM,  # stochastic: minibatch l2-SAM and its SDE, regimes
        sde_paths.SDE_PATHS,  # stochastic: the SDE against SGD's paths, 95 % bands
    )
}


if __name__ == "__main__":
    from flows.run import not_a_command

    not_a_command(__spec__.name)
