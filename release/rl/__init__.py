"""Chameleon's reinforcement-learning search: the PPO agent and the model optimizer built on it."""

from .optimizer import RLOptimizer
from .ppo import PPOAgent, PPOConfig, RoundStats

__all__ = ["PPOAgent", "PPOConfig", "RoundStats", "RLOptimizer"]
