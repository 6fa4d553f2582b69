"""The model-optimizer role: searches the knob space on a cost model's predictions.

Life cycle inside :class:`release.tuners.model_based.ModelBasedTuner`:

1. :meth:`ModelOptimizer.observe` ``(xs, ys)`` after every batch of measurements, with all
   measured configs (int, shape ``(n, n_knobs)``) and throughputs (FLOP/s, shape ``(n,)``).
   Optional (default: nothing); the PPO optimizer starts some episodes at the best of them.
2. :meth:`ModelOptimizer.find_maximums` ``(model, num, exclusive)`` once per round, after the
   cost model's fit: up to ``num`` configs outside ``exclusive`` (the visited ones), best first.
   The optimizer queries ``model.predict`` as often as it likes and ends with
   ``model.rerank`` on its best ``model.rerank_keep(num, ratio)`` configs
   (see :class:`release.cost_model.CostModel`).
3. :attr:`ModelOptimizer.stats`: diagnostics of the last call (logged per round).
4. :meth:`ModelOptimizer.state_dict` / :meth:`ModelOptimizer.load_state_dict`: the state that
   records alone cannot rebuild. An optimizer whose :attr:`keeps_state` is True (the PPO agent)
   is saved beside the tuning log after every search call and reloaded on resume
   (:meth:`save` / :meth:`load`).

Adding an optimizer is one subclass implementing :meth:`find_maximums`.
"""

from __future__ import annotations

import os

import numpy as np


class ModelOptimizer:
    """Base class of model optimizers (AutoTVM's ``ModelOptimizer``)."""

    #: whether the optimizer has state worth keeping beside the log (checkpointed by the tuner)
    keeps_state: bool = False

    def find_maximums(self, model, num: int, exclusive: set) -> list[tuple]:
        """Up to ``num`` configs not in ``exclusive`` with the highest score of ``model``, best first."""
        raise NotImplementedError

    def observe(self, xs: np.ndarray, ys: np.ndarray) -> None:
        """The measured configs ``xs`` (n, n_knobs) and throughputs ``ys`` (n,) so far. Default: nothing."""

    @property
    def stats(self) -> dict:
        """Diagnostics of the last :meth:`find_maximums` call (empty before the first)."""
        return {}

    def state_dict(self) -> dict:
        """State to restore with :meth:`load_state_dict` (default: empty)."""
        return {}

    def load_state_dict(self, state: dict, same_space: bool = True) -> None:
        """Restore :meth:`state_dict` output; ``same_space=False`` for a warm start from another
        task. Default: nothing."""

    def save(self, path: str | os.PathLike) -> None:
        """Write :meth:`state_dict` to ``path`` (only called when :attr:`keeps_state`)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no state beside the log")

    def load(self, source, same_space: bool = True) -> None:
        """Read a checkpoint file or a state dict (only called when :attr:`keeps_state`)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no state beside the log")
