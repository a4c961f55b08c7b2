"""The presentation layer: figures drawn from the flows (``flows``) and their analysis (``analysis``).

Layering: ``flows`` -> ``analysis`` -> ``figures``; nothing below imports this package or
matplotlib. :mod:`figures.table` lists the paper's figures (``python -m flows.sweep``), one
theme module per group (:mod:`figures.amplification`, :mod:`figures.geometry`,
:mod:`figures.linf`, :mod:`figures.numerics`); :mod:`figures.regimes` is the command line of the
regime analysis, :mod:`figures.trajectory` the plot of ``python -m flows.run --plot``.
"""
