"""Chameleon's adaptive sampling: k-means over candidate configs plus sample synthesis."""

from .adaptive import AdaptiveSampler, AdaptiveSamplingConfig
from .base import PassThroughSampler, Sampler

__all__ = ["Sampler", "PassThroughSampler", "AdaptiveSampler", "AdaptiveSamplingConfig"]
