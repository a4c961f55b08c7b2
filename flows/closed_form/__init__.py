"""Closed forms of the balanced single-example flows (GD and l_inf-SAM at any depth).

==================================  ============================================================
:mod:`~flows.closed_form.solutions`  ``gd`` and ``linf_sam``: the solutions in log space
:mod:`~flows.closed_form.branches`   the branches they are made of (growth, decay, blow-up, hit)
:mod:`~flows.closed_form.checks`     input checks (``ValueError`` naming the parameter)
==================================  ============================================================
"""
