"""The presentation layer: figures drawn from the flows (``flows``) and their analysis (``analysis``).

Layering: ``flows`` -> ``analysis`` -> ``figures``; nothing below imports this package or
matplotlib. :mod:`figures.table` lists the paper's figures (``python -m flows.sweep``); each
figure module is named for what it draws (:mod:`figures.depth_contrast`,
:mod:`figures.linf_coordinates`, :mod:`figures.linf_limit_map`, :mod:`figures.amplification`,
:mod:`figures.regimes`, :mod:`figures.maxmargin_angles`, :mod:`figures.blobs`,
:mod:`figures.discrete_vs_flow`, :mod:`figures.clocks_and_loss`, ``figures.lesam_*``,
``figures.digits_*``), with the settings of the LE-SAM and digits studies in
:mod:`figures.lesam` and :mod:`figures.digits`. :mod:`figures.regimes` is also the command line
of the regime analysis, :mod:`figures.trajectory` the plot of ``python -m flows.run --plot``.
"""
