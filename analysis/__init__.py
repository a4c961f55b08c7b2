"""Analysis of flow trajectories: max-margin references, limits, amplification, regimes."""
