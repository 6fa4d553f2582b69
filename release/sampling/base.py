"""The sampler role: picks which of a round's plan to measure.

Life cycle inside :class:`release.tuners.model_based.ModelBasedTuner`, once per round right
after the model optimizer's search:

1. :meth:`Sampler.sample` ``(candidates, space, visited, plan_size)``: the plan (best first) in,
   the configs to measure out (no visited, invalid or duplicate config; at most ``plan_size``).
2. :meth:`Sampler.epsilon_count` ``(picked, plan_size)``: how many of the picked configs (the
   last ones) the tuner replaces by random unvisited configs (AutoTVM's epsilon-greedy rule).
3. :attr:`Sampler.last_k`: how many configs the last call picked (logged per round).

Adding a sampler is one subclass implementing :meth:`sample`.
"""

from __future__ import annotations

from typing import Sequence


class Sampler:
    """Base class of samplers."""

    #: configs picked by the last :meth:`sample` call (None before the first)
    last_k: int | None = None

    def sample(self, candidates: Sequence[tuple], space, visited: set, plan_size: int) -> list[tuple]:
        """Pick the configs to measure from ``candidates`` (the plan, canonical configs, best first)."""
        raise NotImplementedError

    def epsilon_count(self, picked: int, plan_size: int) -> int:
        """Random configs replacing the tail of a round's ``picked`` configs: 5% of those picked."""
        return int(0.05 * picked)


class PassThroughSampler(Sampler):
    """Measure the whole plan as the optimizer ordered it (AutoTVM's ``ModelBasedTuner``).

    The epsilon-greedy share is AutoTVM's: 5% of ``plan_size`` (3 of a 64-config plan).
    """

    def sample(self, candidates: Sequence[tuple], space, visited: set, plan_size: int) -> list[tuple]:
        """``candidates`` unchanged."""
        out = [tuple(c) for c in candidates]
        self.last_k = len(out)
        return out

    def epsilon_count(self, picked: int, plan_size: int) -> int:
        """5% of ``plan_size`` (AutoTVM), whatever the plan's length."""
        return int(0.05 * plan_size)
