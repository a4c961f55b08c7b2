"""samflows: GD and SAM flows on L-layer diagonal linear networks.

>>> from flows import single_example, simulate
>>> traj = simulate(single_example([1, 2, 3, 4, 5]), "l2-sam", depth=2, rho=1.0, alpha=0.4,
...                 t_max=30.0)
"""

from .algorithms import ALGORITHMS
from .clocks import CLOCKS
from .data import Dataset, single_example
from .discrete import DiscreteRun, iterate
from .initialization import orthant_init
from .integrator.driver import simulate
from .many import batch_runs, iterate_many, simulate_many
from .results import Cause, Trajectory
from .sde import SDEPaths, simulate_sde

__all__ = [
    "ALGORITHMS",
    "CLOCKS",
    "Cause",
    "Dataset",
    "DiscreteRun",
    "SDEPaths",
    "Trajectory",
    "batch_runs",
    "iterate",
    "iterate_many",
    "orthant_init",
    "simulate",
    "simulate_sde",
    "simulate_many",
    "single_example",
]
