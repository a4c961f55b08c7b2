"""The integrator behind :func:`flows.simulate`: segments between events, in a chart.

=====================================  =========================================================
:mod:`~flows.integrator.driver`        ``simulate``: set up, integrate segment by segment, assemble
:mod:`~flows.integrator.arguments`     the checks of its arguments
:mod:`~flows.integrator.solver`        one segment: scipy solver steps up to the first event
:mod:`~flows.integrator.events`        the events that end a segment, and what each does
:mod:`~flows.integrator.filippov`      l_inf-SAM's sliding (Filippov) combination
:mod:`~flows.integrator.ties`          the slow manifold of tied margins near the blow-up
:mod:`~flows.integrator.stepping`      l_inf-SAM's own steps where its sliding is not resolved
:mod:`~flows.integrator.own_steps`     those steps' loop (numpy; compiled twin in flows.compiled)
:mod:`~flows.integrator.segments`      the integrated path: modes, segments, dense output
=====================================  =========================================================

The field itself is :mod:`flows.fused` (numpy) or :mod:`flows.compiled` (numba), chosen by the
backend table :mod:`flows.backends`.
"""
