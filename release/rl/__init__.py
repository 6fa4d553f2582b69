"""Chameleon's reinforcement-learning search: the PPO agent (:mod:`.ppo`).

The model optimizer built on it lives beside simulated annealing in :mod:`release.optimizers.ppo`;
``RLOptimizer`` and ``agent_checkpoint_path`` are still importable from here, resolved on first use
(importing them eagerly would make ``release.optimizers.ppo`` -> ``release.rl`` -> back a cycle).
"""

from .ppo import PPOAgent, PPOConfig, RoundStats

__all__ = ["PPOAgent", "PPOConfig", "RoundStats", "RLOptimizer", "agent_checkpoint_path"]


def __getattr__(name):
    if name in ("RLOptimizer", "agent_checkpoint_path"):
        from ..optimizers import ppo

        return getattr(ppo, name)
    raise AttributeError(f"module 'release.rl' has no attribute {name!r}")
