"""Tuners without a cost model: AutoTVM's ``RandomTuner`` and ``GridSearchTuner``."""

from __future__ import annotations

import logging

from .tuner import Tuner

logger = logging.getLogger(__name__)


class RandomTuner(Tuner):
    """Measures configs drawn uniformly at random from the whole space, without repetition
    (AutoTVM ``RandomTuner``: uniform over config indices, i.e. over distinct programs).

    Parameters
    ----------
    task : Task
    seed : int, optional
    """

    name = "random"
    #: uniform draws made on a space with limits (GPU targets), and configs they found within them
    draws = 0
    _pool: list = []

    def _random_index(self) -> int:
        size = self.space.size
        nbytes = (size.bit_length() + 7) // 8 + 8
        return int.from_bytes(self.rng.bytes(nbytes), "little") % size

    def next_batch(self, batch_size: int) -> list[tuple]:
        if self.space.constrained:
            return self._next_within_limits(batch_size)
        out: list[tuple] = []
        seen = set()
        tries = 0
        while len(out) < batch_size and len(self.visited) + len(out) < self.space.size:
            tries += 1
            if tries > 100 * batch_size + 1000:  # nearly exhausted space: enumerate what is left
                for i in range(self.space.size):
                    c = self.space.get(i)
                    if c not in self.visited and c not in seen:
                        out.append(c)
                        seen.add(c)
                        if len(out) >= batch_size:
                            break
                break
            c = self.space.get(self._random_index())
            if c not in self.visited and c not in seen:
                out.append(c)
                seen.add(c)
        return out

    def _next_within_limits(self, batch_size: int) -> list[tuple]:
        """Uniform draws over the whole space kept only when they keep the target's limits
        (``KnobSpace.feasible``, checked on the knobs in chunks, no replay), so every config handed out
        is uniform over those within the limits. Draws found within the limits and not yet handed out
        wait in a pool for the next call. At most ``KnobSpace.SAMPLE_DRAWS`` draws per config asked;
        fewer configs (none: a warning with the count) when the space holds too few within its limits.
        """
        out: list[tuple] = []
        pool = [c for c in self._pool if c not in self.visited]
        budget = self.space.SAMPLE_DRAWS * batch_size
        drawn = 0
        while True:
            while pool and len(out) < batch_size:
                c = pool.pop(0)
                if c not in self.visited and c not in out:
                    out.append(c)
            if len(out) >= batch_size or drawn >= budget or len(self.visited) + len(out) >= self.space.size:
                break
            chunk = [self.space.get(self._random_index()) for _ in range(min(budget - drawn, max(64, 16 * batch_size)))]
            drawn += len(chunk)
            ok = self.space.feasible(chunk)
            pool.extend(c for c, good in zip(chunk, ok) if good)
        self._pool = pool
        self.draws += drawn
        if not out and drawn:
            logger.warning("%s: no new config within the GPU limits in %d random draws (%d configs visited)",
                           self.task.name, drawn, len(self.visited))
        return out


class GridSearchTuner(Tuner):
    """Measures configs in grid order (``KnobSpace.get(0), get(1), ...``), AutoTVM ``GridSearchTuner``."""

    name = "grid"

    def __init__(self, task, seed: int | None = None):
        super().__init__(task, seed)
        self.counter = 0

    def has_next(self) -> bool:
        return self.counter < self.space.size and super().has_next()

    def next_batch(self, batch_size: int) -> list[tuple]:
        out = []
        while len(out) < batch_size and self.counter < self.space.size:
            c = self.space.get(self.counter)
            self.counter += 1
            if c not in self.visited:
                out.append(c)
        return out
