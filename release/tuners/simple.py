"""Tuners without a cost model: AutoTVM's ``RandomTuner`` and ``GridSearchTuner``."""

from __future__ import annotations

from .tuner import Tuner


class RandomTuner(Tuner):
    """Measures configs drawn uniformly at random from the whole space, without repetition
    (AutoTVM ``RandomTuner``: uniform over config indices, i.e. over distinct programs).

    Parameters
    ----------
    task : Task
    seed : int, optional
    """

    name = "random"

    def _random_index(self) -> int:
        size = self.space.size
        nbytes = (size.bit_length() + 7) // 8 + 8
        return int.from_bytes(self.rng.bytes(nbytes), "little") % size

    def next_batch(self, batch_size: int) -> list[tuple]:
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
