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
- fixed budgets (:class:`FixedBudgets`, :func:`split_budget`): each task's trials fixed up front
  (``equal`` or by ``flop``), tasks in order; what ``tune_model_ray`` did before the scheduler ran it.

Where a chunk runs is the scheduler's *executor*: :class:`InProcessExecutor` (default) runs one chunk
at a time in this process through the task's tuner; :class:`release.distributed.ray_executor.RayExecutor`
hands chunks to one long-lived Ray actor per task, up to the cluster's capacity at once. An executor
has ``capacity`` (chunks at once), ``submit(i, n)``, ``wait()`` (the chunks that returned, as
``(task index, trials gained)``) and ``finish(indices)`` (each begun task's end, once).
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

    def room(self, i: int, tuner) -> int | None:
        """Trials task ``i`` may still get (``None``: no limit of its own; the run's budget applies)."""
        return None


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


def split_budget(tasks, n_trial: int, split: str = "equal") -> list[int]:
    """Trials per task (same order as ``tasks``), summing to ``n_trial``.

    ``"equal"``: ``n_trial // len(tasks)`` each, the remainder one by one to the first tasks
    (:func:`release.relax.extract_tasks` sorts heaviest first). ``"flop"``: proportional to
    ``weight * flop`` (largest remainders), at least 1 each.

    Raises
    ------
    TunerError
        Unknown ``split``, or fewer trials than tasks.
    """
    n = len(tasks)
    if n_trial < n:
        raise TunerError(f"n_trial={n_trial} is fewer than the {n} tasks; give at least one trial per task")
    if split == "equal":
        return [n_trial // n + (1 if i < n_trial % n else 0) for i in range(n)]
    if split == "flop":
        w = [max(float(t.flop) * max(int(t.weight), 1), 1.0) for t in tasks]
        spare = n_trial - n
        share = [spare * x / sum(w) for x in w]
        out = [1 + int(s) for s in share]
        for i in sorted(range(n), key=lambda i: -(share[i] - int(share[i])))[: n_trial - sum(out)]:
            out[i] += 1
        return out
    raise TunerError(f"unknown budget split {split!r}; use 'equal' or 'flop'")


class FixedBudgets(RoundRobin):
    """Budgets fixed up front: task ``i`` gets chunks until it has ``budgets[i]`` trials (resumed
    ones included); the first idle task in order with room left gets the next chunk.

    Parameters
    ----------
    tasks : list[Task]
    budgets : list[int]
        Trials per task, same order (:func:`split_budget`).

    Raises
    ------
    TunerError
        ``budgets`` not one per task.
    """

    def __init__(self, tasks, budgets, seed: int | None = None):
        super().__init__(tasks, seed)
        if len(budgets) != len(tasks):
            raise TunerError(f"{len(budgets)} budgets for {len(tasks)} tasks")
        self.budgets = [int(b) for b in budgets]

    def next_task(self, tuners, alive: list[int]) -> int:
        return alive[0]

    def room(self, i: int, tuner) -> int | None:
        return max(0, self.budgets[i] - tuner.trials)


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


class InProcessExecutor:
    """Runs each chunk in this process, one at a time, through the task's tuner (the default executor).

    A task's :meth:`~release.tuners.tuner.Tuner.begin` (callbacks' ``on_start``; the records were
    resumed by the caller) and its :class:`release.measure.Measurer` (over the one shared
    ``measure_option``) are made before its first chunk; :meth:`finish` runs each begun task's
    :meth:`~release.tuners.tuner.Tuner.end` (output check, rejection summary, ``on_finish``) once.

    Parameters
    ----------
    measure_option : dict
        :func:`release.measure.measure_option`: one builder and runner for every task.
    callbacks : list
        Tuner callbacks given every task's results (the log first).
    check_output : bool
        Check each task's best config against its reference at its end (default True).
    """

    capacity = 1

    def __init__(self, measure_option=None, callbacks=(), check_output: bool = True):
        self.measure_option = measure_option
        self.callbacks = list(callbacks)
        self.check_output = check_output
        self.tasks: list = []
        self.tuners: list = []
        self._cbs: dict[int, list] = {}  # task index -> its callbacks, once begun
        self._measurers: dict[int, object] = {}
        self._queue: list[tuple[int, int]] = []

    def bind(self, tasks, tuners) -> None:
        """The scheduler's tasks and their tuners (same order); called once by :class:`TaskScheduler`."""
        self.tasks, self.tuners = list(tasks), list(tuners)

    @property
    def begun(self) -> list[int]:
        """Indices of the tasks whose life cycle has begun (their end is still due)."""
        return sorted(self._cbs)

    def submit(self, i: int, n: int) -> None:
        """Queue up to ``n`` more trials for task ``i``; they run in :meth:`wait`."""
        self._queue.append((i, n))

    def wait(self) -> list[tuple[int, int]]:
        """Run the oldest queued chunk; returns ``[(i, trials it measured)]``."""
        from .measure import Measurer

        i, n = self._queue.pop(0)
        tu = self.tuners[i]
        if i not in self._cbs:
            self._cbs[i] = tu.begin(self.callbacks, tu.trials + n, resume=False)
            self._measurers[i] = Measurer(self.tasks[i], self.measure_option)
            tu.bind_measurer(self._measurers[i])
        before = tu.trials
        tu.run_trials(self._measurers[i], before + n, self._cbs[i])
        return [(i, tu.trials - before)]

    def finish(self, indices) -> None:
        """Each given begun task's :meth:`~release.tuners.tuner.Tuner.end`, once; every task's end
        runs even when one raises (the first error is raised after)."""
        err = None
        for i in indices:
            cbs = self._cbs.pop(i, None)
            if cbs is None:
                continue
            try:
                self.tuners[i].end(cbs, check_output=self.check_output)
            except Exception as e:  # noqa: BLE001 - the other tasks still get their check and summary
                err = err or e
        self._queue.clear()
        if err is not None:
            raise err


class TaskScheduler:
    """One model's tuning loop over its tasks (MetaSchedule's ``TaskScheduler``).

    Each step asks the policy for a task (:meth:`next_task_id`, among the tasks with configs left,
    no chunk running and room under the policy's own limit) and hands that task ``chunk`` trials to
    the executor. The default :class:`InProcessExecutor` runs the task's session here
    (:meth:`release.tuners.tuner.Tuner.run_trials`: ask -> measure -> tell, every result to the
    callbacks the moment it completes), one chunk at a time; an executor with a ``capacity`` above
    one (:class:`release.distributed.ray_executor.RayExecutor`) runs that many chunks at once, and
    whenever one returns the policy picks the next task among the idle ones. A task's life cycle
    around its chunks runs once: its begin (``on_start``) before its first chunk, its end (the output
    check of its best config, its rejection summary, ``on_finish``) after the budget is spent. So a
    model run's log holds one output check and its rejections file one line per task, however many
    chunks the task got.

    Parameters
    ----------
    tasks : list[Task]
        In the order the policy's first round visits them (``tune_model``: heaviest latency share first).
    tuners : dict
        Task key -> tuner (:class:`release.tuners.tuner.Tuner`), already resumed from the log; with
        another executor, any object with ``trials``, ``best_cost`` (s), ``best_config``,
        ``flattened`` and ``has_next()`` the executor keeps current (the Ray executor's
        :class:`release.distributed.ray_executor.RemoteTask`).
    policy : str or RoundRobin
        ``"gradient"`` (default), ``"round-robin"`` (:func:`make_scheduler`) or a policy object
        with ``next_task(tuners, alive)``, ``observe(i, tuner)``, ``exhausted(i)`` and
        ``room(i, tuner)`` (:class:`RoundRobin`'s subclasses, :class:`FixedBudgets`).
    measure_option : dict
        :func:`release.measure.measure_option` of the default executor: one builder and runner
        (worker pools) for every task; each task gets its own :class:`release.measure.Measurer`
        over them, made once.
    callbacks : list
        Tuner callbacks of the default executor, given every task's results (the log first).
    chunk : int
        Trials per scheduling step (``tune_model``: the builder's ``n_parallel`` x 4, at least 8).
    check_output : bool
        The default executor checks each task's best config against its reference at the end
        (default True).
    seed : int, optional
        Seed of the policy's random picks.
    on_chunk : callable, optional
        ``on_chunk(tuner, gained)`` after every chunk (progress).
    executor : optional
        Where chunks run (default: an :class:`InProcessExecutor` over ``measure_option``,
        ``callbacks`` and ``check_output``); an object with ``bind(tasks, tuners)``, ``capacity``,
        ``begun``, ``submit(i, n)``, ``wait()`` and ``finish(indices)``.

    Raises
    ------
    TunerError
        Unknown policy name, a ``chunk`` below 1.
    """

    def __init__(self, tasks, tuners: dict, policy="gradient", measure_option=None, callbacks=(),
                 chunk: int = 8, check_output: bool = True, seed: int | None = None, on_chunk=None,
                 executor=None):
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
        self.executor = executor if executor is not None else InProcessExecutor(measure_option, callbacks,
                                                                                check_output)
        self.executor.bind(self.tasks, self.tuners)
        self.chunks = [0] * len(self.tasks)
        self.running: dict[int, int] = {}  # task index -> trials of its chunk in flight

    @property
    def used(self) -> int:
        """Trials of every task, resumed ones included."""
        return sum(tu.trials for tu in self.tuners)

    def next_task_id(self) -> int:
        """The task the policy gives the next chunk to, or -1 when no idle task has a config and
        room left."""
        alive = [i for i, tu in enumerate(self.tuners)
                 if i not in self.running and tu.has_next() and self.policy.room(i, tu) != 0]
        if not alive:
            return -1
        return self.policy.next_task(self.tuners, alive)

    def _chunk_size(self, i: int, left: int) -> int:
        room = self.policy.room(i, self.tuners[i])
        return min(self.chunk, left, room) if room is not None else min(self.chunk, left)

    def _book(self, i: int, gained: int) -> None:
        self.running.pop(i, None)
        self.chunks[i] += 1
        tu = self.tuners[i]
        self.policy.observe(i, tu)
        if gained == 0:
            self.policy.exhausted(i)
        if self.on_chunk is not None:
            self.on_chunk(tu, gained)

    def run_chunk(self, i: int, n: int) -> int:
        """Give task ``i`` up to ``n`` more trials and wait for them; returns the trials it measured."""
        self.running[i] = n
        self.executor.submit(i, n)
        while True:
            for j, gained in self.executor.wait():
                self._book(j, gained)
                if j == i:
                    return gained

    def run(self, n_trial: int) -> int:
        """Chunks until ``n_trial`` trials in all (resumed ones included) or no task has a config
        left, then each begun task's end (output check, rejection summary, ``on_finish``).

        Up to the executor's ``capacity`` chunks are in flight at once; their trials count against
        ``n_trial`` from the moment they are handed out, so the run never exceeds it.

        Returns
        -------
        int
            Trials of every task at the end.
        """
        used = self.used
        try:
            while True:
                while len(self.running) < self.executor.capacity:
                    left = n_trial - used - sum(self.running.values())
                    if left <= 0:
                        break
                    i = self.next_task_id()
                    if i < 0:
                        break
                    n = self._chunk_size(i, left)
                    self.running[i] = n
                    self.executor.submit(i, n)
                if not self.running:
                    break
                for i, gained in self.executor.wait():
                    used += gained
                    self._book(i, gained)
        finally:
            self.running.clear()
            self.finish()
        return self.used

    def finish(self) -> None:
        """Each begun task's end (:meth:`~release.tuners.tuner.Tuner.end` in process), once; every
        task's end runs even when one raises (the first error is raised after)."""
        self.executor.finish(self.executor.begun)
