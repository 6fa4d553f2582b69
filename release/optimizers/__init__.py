"""Model optimizers: search the knob space on a cost model's predictions (see :mod:`.base`).

- :class:`SimulatedAnnealingOptimizer` (:mod:`.sa`): AutoTVM's simulated annealing;
- :class:`RLOptimizer` (:mod:`.ppo`): Chameleon's PPO agent (imports PyTorch; loaded on demand).
"""

from .base import ModelOptimizer
from .sa import SAParams, SimulatedAnnealingOptimizer

__all__ = ["ModelOptimizer", "SimulatedAnnealingOptimizer", "SAParams", "RLOptimizer", "agent_checkpoint_path"]


def __getattr__(name):
    if name in ("RLOptimizer", "agent_checkpoint_path"):
        from . import ppo

        return getattr(ppo, name)
    raise AttributeError(f"module 'release.optimizers' has no attribute {name!r}")
