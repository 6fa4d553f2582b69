"""Chameleon's reinforcement-learning search: the PPO agent and the model optimizer built on it."""

from .optimizer import RLOptimizer, agent_checkpoint_path
from .ppo import PPOAgent, PPOConfig, RoundStats

__all__ = ["PPOAgent", "PPOConfig", "RoundStats", "RLOptimizer", "agent_checkpoint_path"]
