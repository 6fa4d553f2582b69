"""Moved to :mod:`release.optimizers.ppo` (model optimizers live side by side there); kept as an import path."""

from ..optimizers.ppo import RLOptimizer, agent_checkpoint_path

__all__ = ["RLOptimizer", "agent_checkpoint_path"]
