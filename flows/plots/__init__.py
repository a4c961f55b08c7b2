"""Paper figures, one module per theme; each exports ``FIGURES``, a list of :class:`~flows.plots.common.Figure`."""
