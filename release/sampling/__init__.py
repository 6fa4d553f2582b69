"""Chameleon's adaptive sampling: k-means over candidate configs plus sample synthesis."""

from .adaptive import AdaptiveSampler, AdaptiveSamplingConfig

__all__ = ["AdaptiveSampler", "AdaptiveSamplingConfig"]
