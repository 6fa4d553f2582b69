"""Task schedulers: which task gets the next chunk of trials when tuning a whole model.

:class:`TaskScheduler` is one model's tuning loop (MetaSchedule's ``TaskScheduler``): it owns the
tasks' tuners (one :class:`release.session.TuningSession` each), asks its *policy* for the next
task (``next_task_id``), runs that task's session for one chunk of trials, and runs each task's
callbacks' ``on_start``/``on_finish``, the output check of its best config and its rejection summary
once per task, after the last chunk. The policies:

- ``round-robin``: tasks in turn.
- ``gradient``: Ansor's gradient-based scheduler as MetaSchedule implements it
  (``GradientBased(alpha=0.2, window_size=3)``): after one warm-up round over every task, give
  the chunk to the task whose extra trials are expected to cut the end-to-end latency
  ``sum_i weight_i * best_latency_i`` the most. A task's gradient combines the recent slope of
  its best latency over the last ``window_size`` chunks (backward) with the optimistic
  ``-best/trials`` (forward), weighted ``alpha`` : ``1 - alpha``; 5% of picks are random.
  Tasks whose tuner reports ``flattened`` (a model-based tuner with ``patience``
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
        improving = [i for i in alive if not tuners[i].flattened]
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


class TaskScheduler:
    """One model's tuning loop over its tasks' sessions (MetaSchedule's ``TaskScheduler``).

    Each step asks the policy for a task (:meth:`next_task_id`) and runs that task's session for
    ``chunk`` trials (:meth:`release.tuners.tuner.Tuner.run_trials`: ask -> measure -> tell, every
    result to the callbacks the moment it completes). A task's life cycle around its chunks runs
    once: :meth:`~release.tuners.tuner.Tuner.begin` (``on_start``; the records were resumed by the
    caller) before its first chunk, :meth:`~release.tuners.tuner.Tuner.end` (the output check of its
    best config, its rejection summary, ``on_finish``) after the budget is spent. So a model run's
    log holds one output check and its rejections file one line per task, however many chunks the
    task got.

    Parameters
    ----------
    tasks : list[Task]
        In the order the policy's first round visits them (``tune_model``: heaviest latency share first).
    tuners : dict
        Task key -> tuner (:class:`release.tuners.tuner.Tuner`), already resumed from the log.
    policy : str or RoundRobin
        ``"gradient"`` (default), ``"round-robin"`` (:func:`make_scheduler`) or a policy object
        with ``next_task(tuners, alive)``, ``observe(i, tuner)`` and ``exhausted(i)``.
    measure_option : dict
        :func:`release.measure.measure_option`: one builder and runner (worker pools) for every
        task; each task gets its own :class:`release.measure.Measurer` over them, made once.
    callbacks : list
        Tuner callbacks given every task's results (the log first).
    chunk : int
        Trials per scheduling step (``tune_model``: the builder's ``n_parallel`` x 4, at least 8).
    check_output : bool
        Check each task's best config against its reference at the end (default True).
    seed : int, optional
        Seed of the policy's random picks.
    on_chunk : callable, optional
        ``on_chunk(tuner, gained)`` after every chunk (progress).

    Raises
    ------
    TunerError
        Unknown policy name, a ``chunk`` below 1.
    """

    def __init__(self, tasks, tuners: dict, policy="gradient", measure_option=None, callbacks=(),
                 chunk: int = 8, check_output: bool = True, seed: int | None = None, on_chunk=None):
        if not isinstance(chunk, (int, np.integer)) or chunk < 1:
            raise TunerError(f"chunk={chunk!r} must be a positive number of trials")
        self.tasks = list(tasks)
        self.tuners = [tuners[t.key] for t in self.tasks]
        self.policy = make_scheduler(policy, self.tasks, seed=seed) if isinstance(policy, str) else policy
        self.measure_option = measure_option
        self.callbacks = list(callbacks)
        self.chunk = int(chunk)
        self.check_output = check_output
        self.on_chunk = on_chunk
        self._cbs: dict[int, list] = {}  # task index -> its callbacks, once begun
        self._measurers: dict[int, object] = {}
        self.chunks = [0] * len(self.tasks)

    @property
    def used(self) -> int:
        """Trials of every task, resumed ones included."""
        return sum(tu.trials for tu in self.tuners)

    def next_task_id(self) -> int:
        """The task the policy gives the next chunk to, or -1 when no task has a config left."""
        alive = [i for i, tu in enumerate(self.tuners) if tu.has_next()]
        if not alive:
            return -1
        return self.policy.next_task(self.tuners, alive)

    def run_chunk(self, i: int, n: int) -> int:
        """Give task ``i`` up to ``n`` more trials; returns the trials it measured."""
        from .measure import Measurer

        tu = self.tuners[i]
        if i not in self._cbs:
            self._cbs[i] = tu.begin(self.callbacks, tu.trials + n, resume=False)
            self._measurers[i] = Measurer(self.tasks[i], self.measure_option)
            tu.bind_measurer(self._measurers[i])
        before = tu.trials
        tu.run_trials(self._measurers[i], before + n, self._cbs[i])
        self.chunks[i] += 1
        gained = tu.trials - before
        self.policy.observe(i, tu)
        if gained == 0:
            self.policy.exhausted(i)
        if self.on_chunk is not None:
            self.on_chunk(tu, gained)
        return gained

    def run(self, n_trial: int) -> int:
        """Chunks until ``n_trial`` trials in all (resumed ones included) or no task has a config
        left, then each begun task's end (output check, rejection summary, ``on_finish``).

        Returns
        -------
        int
            Trials of every task at the end.
        """
        used = self.used
        try:
            while used < n_trial:
                i = self.next_task_id()
                if i < 0:
                    break
                used += self.run_chunk(i, min(self.chunk, n_trial - used))
        finally:
            self.finish()
        return self.used

    def finish(self) -> None:
        """Each begun task's :meth:`~release.tuners.tuner.Tuner.end`, once; every task's end runs
        even when one raises (the first error is raised after)."""
        err = None
        for i in sorted(self._cbs):
            try:
                self.tuners[i].end(self._cbs[i], check_output=self.check_output)
            except Exception as e:  # noqa: BLE001 - the other tasks still get their check and summary
                err = err or e
        self._cbs.clear()
        if err is not None:
            raise err
