"""Moved to :mod:`release.optimizers.sa` (model optimizers live side by side there); kept as an import path."""

from ..optimizers.sa import SAParams, SimulatedAnnealingOptimizer

__all__ = ["SAParams", "SimulatedAnnealingOptimizer"]
