"""Task schedulers: which task gets the next chunk of trials when tuning a whole model.

- ``round-robin``: tasks in turn.
- ``gradient``: Ansor's gradient-based scheduler as MetaSchedule implements it
  (``GradientBased(alpha=0.2, window_size=3)``): after one warm-up round over every task, give
  the chunk to the task whose extra trials are expected to cut the end-to-end latency
  ``sum_i weight_i * best_latency_i`` the most. A task's gradient combines the recent slope of
  its best latency over the last ``window_size`` chunks (backward) with the optimistic
  ``-best/trials`` (forward), weighted ``alpha`` : ``1 - alpha``; 5% of picks are random.
  Tasks whose tuner reports ``flattened`` (issue 17: a model-based tuner with ``patience``
  trials without a new best and no local phase left, :attr:`release.tuners.model_based.ModelBasedTuner.flattened`)
  are passed over while any other task is still improving, so their budget goes to those tasks;
  when every task has flattened, all compete again.
"""

from __future__ import annotations

import numpy as np

from .errors import TunerError


class RoundRobin:
    """Tasks in turn, skipping exhausted ones."""

    def __init__(self, tasks, seed: int | None = None):
        self.n = len(tasks)
        self.pos = -1

    def next_task(self, tuners, alive: list[int]) -> int:
        for _ in range(self.n):
            self.pos = (self.pos + 1) % self.n
            if self.pos in alive:
                return self.pos
        return alive[0]

    def observe(self, i: int, tuner) -> None:
        pass

    def exhausted(self, i: int) -> None:
        pass


class GradientBased(RoundRobin):
    """Ansor / MetaSchedule gradient-based task scheduling (see module docstring).

    Parameters
    ----------
    tasks : list[Task]
        Their ``weight`` is the chain-rule factor of the end-to-end latency.
    alpha : float
        Weight of the backward (observed) gradient (default 0.2, MetaSchedule's).
    window_size : int
        Chunks over which the backward gradient is measured (default 3).
    eps : float
        Share of random picks (default 0.05).
    seed : int, optional
    """

    def __init__(self, tasks, alpha: float = 0.2, window_size: int = 3, eps: float = 0.05, seed: int | None = None):
        super().__init__(tasks, seed)
        self.weights = np.array([t.weight for t in tasks], dtype=float)
        self.alpha, self.window, self.eps = alpha, window_size, eps
        self.history: list[list[tuple[int, float]]] = [[] for _ in tasks]  # (trials, best latency s)
        self.rng = np.random.default_rng(seed)
        self.warm = 0

    def observe(self, i: int, tuner) -> None:
        self.history[i].append((tuner.trials, tuner.best_cost if tuner.best_config is not None else float("inf")))

    def next_task(self, tuners, alive: list[int]) -> int:
        if self.warm < self.n:  # one round over every task first
            self.warm += 1
            return super().next_task(tuners, alive)
        improving = [i for i in alive if not getattr(tuners[i], "flattened", False)]
        if improving:  # a flattened task hands its budget to tasks still improving
            alive = improving
        if self.rng.random() < self.eps:
            return int(self.rng.choice(alive))
        best_i, best_g = alive[0], np.inf
        for i in alive:
            h = self.history[i]
            tu = tuners[i]
            lat = tu.best_cost if tu.best_config is not None else np.inf
            if not np.isfinite(lat) or tu.trials == 0:
                return i  # nothing works yet: it needs trials most
            if len(h) > self.window and np.isfinite(h[-1 - self.window][1]):
                (t0, l0), (t1, l1) = h[-1 - self.window], h[-1]
                backward = (l1 - l0) / max(1, t1 - t0)
            else:
                backward = 0.0
            forward = -lat / tu.trials
            g = self.weights[i] * (self.alpha * backward + (1 - self.alpha) * forward)
            if g < best_g:
                best_i, best_g = i, g
        return best_i


def make_scheduler(name: str, tasks, seed: int | None = None):
    """``round-robin`` or ``gradient``.

    Raises
    ------
    TunerError
        Unknown scheduler name.
    """
    if name == "round-robin":
        return RoundRobin(tasks, seed)
    if name == "gradient":
        return GradientBased(tasks, seed=seed)
    raise TunerError(f"unknown task scheduler {name!r}; choose round-robin or gradient")
