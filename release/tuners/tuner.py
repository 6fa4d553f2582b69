"""Tuner base class with AutoTVM's API (``autotvm.tuner.Tuner``) on MetaSchedule knob spaces.

Life cycle of :meth:`Tuner.tune` (one *round* = search, measure, update):

1. Resume: :meth:`Tuner.attach_log` gets the log's path (tuners with state beyond the records,
   the PPO agent, reload it from beside the log); every callback with a ``load(task)`` method
   (``log_to_file``) returns the records of this task already on disk; :meth:`Tuner.load_history`
   marks them visited and feeds them to :meth:`Tuner.update`. They count toward ``n_trial``.
2. While fewer than ``n_trial`` configs were measured and :meth:`Tuner.has_next`:

   a. ``configs = next_batch(batch_size)``: the search; must return unvisited configs (timed
      as ``search_s``). ``batch_size`` is the builder's ``n_parallel`` (AutoTVM's rule).
   b. the measurer replays, builds and runs them; each result is passed to the callbacks
      (log, database, progress bar) the moment it completes. Invalid configs (not a legal
      program, see ``KnobSpace.apply``) are not built, not logged and not counted as trials.
   c. ``update(configs, results)``: learn from the batch (timed as ``fit_s``; model-based
      tuners refit their cost model here).
   d. early stopping: stop once ``early_stopping`` trials passed without a new best.

Subclasses implement :meth:`next_batch` and optionally :meth:`update` and :meth:`has_next`.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Sequence

import numpy as np

from ..errors import InvalidConfigError, TunerError
from ..measure.measure import ErrorKind, MeasureResult, Measurer, measure_option
from ..measure.records import Record

logger = logging.getLogger(__name__)


class MeasureInput:
    """AutoTVM's ``MeasureInput``: ``(task, config)`` handed to callbacks."""

    __slots__ = ("task", "config")

    def __init__(self, task, config):
        self.task, self.config = task, tuple(config)

    def __repr__(self) -> str:
        return f"MeasureInput({self.task.name}, {self.config})"


class Tuner:
    """Base tuner.

    Parameters
    ----------
    task : release.task.Task
        The task; its knob space is ``task.config_space``.
    seed : int, optional
        Seed of every random choice (NumPy ``default_rng``). None = nondeterministic.

    Attributes
    ----------
    visited : set[tuple]
        Configs measured or found invalid (canonical form).
    best_config, best_flops, best_cost
        Best measured config, its throughput (FLOP/s) and mean run time (s).
    trials : int
        Measured configs (invalid ones excluded), resumed records included.
    """

    name = "base"

    def __init__(self, task, seed: int | None = None):
        self.task = task
        self.space = task.config_space
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.visited: set[tuple] = set()
        self.best_config: tuple | None = None
        self.best_flops = 0.0
        self.best_cost = float("inf")
        self.best_iter = 0
        self.trials = 0
        self.time_search = 0.0
        self.time_fit = 0.0
        self.time_measure = 0.0
        self.round_base = 0  # last round of the resumed records: a resumed run's rounds continue from it

    # ------------------------------------------------------------------ hooks for subclasses
    def has_next(self) -> bool:
        """Whether unvisited configs remain (called before each round)."""
        return len(self.visited) < self.space.size

    def next_batch(self, batch_size: int) -> list[tuple]:
        """Return up to ``batch_size`` unvisited configs to measure next (the search step)."""
        raise NotImplementedError

    def update(self, configs: Sequence[tuple], results: Sequence[MeasureResult]) -> None:
        """Learn from measured ``results`` of ``configs`` (same order). Default: nothing."""

    def attach_log(self, path: str) -> None:
        """Called by :meth:`tune` with the tuning log's path (the first callback with ``load`` and
        ``path``, e.g. ``log_to_file``) before the log's records are resumed; a tuner with state
        beyond the records (the PPO agent) keeps it beside the log. Default: nothing."""

    # ------------------------------------------------------------------ bookkeeping
    def _note(self, result: MeasureResult) -> None:
        self.visited.add(tuple(result.config))
        if result.error_kind == ErrorKind.INVALID:
            return
        self.trials += 1
        if result.ok:
            flops = self.task.flop / result.mean_cost if result.mean_cost > 0 else 0.0
            if flops > self.best_flops:
                self.best_flops, self.best_cost = flops, result.mean_cost
                self.best_config, self.best_iter = tuple(result.config), self.trials

    def load_history(self, records: Sequence[Record]) -> int:
        """Resume from records of this task: mark them visited and learn from them.

        Returns
        -------
        int
            Number of records used (records of other tasks are ignored).
        """
        results = []
        unusable = 0
        fresh = self.trials == 0 and not self.visited
        for rec in records:
            if rec.task != self.task.key:
                continue
            if fresh:  # the refit that follows makes round round_base + 1, as in the interrupted run
                self.round_base = max(self.round_base, int(rec.round))
            try:
                c = self.space.config_of_record(rec.config, rec.trace)
            except InvalidConfigError:
                unusable += 1
                continue
            if c in self.visited:
                continue
            r = MeasureResult(config=c, costs=list(rec.costs), error_kind=rec.error_kind, error_msg=rec.error_msg,
                              build_s=rec.build_s, run_s=rec.run_s, measure_s=rec.measure_s, timestamp=rec.timestamp)
            self._note(r)
            results.append(r)
        if unusable:
            logger.warning("%s: %d record(s) fit neither this knob space nor replay their trace; ignored",
                           self.task.name, unusable)
        if results:
            self.update([r.config for r in results], results)
        return len(results)

    @property
    def best_gflops(self) -> float:
        return self.best_flops / 1e9

    # ------------------------------------------------------------------ the loop
    def tune(self, n_trial: int, measure_option: dict | None = None, early_stopping: int | None = None,
             callbacks: Sequence[Callable] = (), si_prefix: str = "G") -> "Tuner":
        """Tune for ``n_trial`` measured configs (AutoTVM's ``Tuner.tune``).

        Parameters
        ----------
        n_trial : int
            Total measured configs, resumed records included.
        measure_option : dict, optional
            From :func:`release.measure.measure_option` (default: local builder and runner,
            closed at the end). A given option's worker pools stay alive for reuse across tasks;
            close them with ``option["builder"].close()``.
        early_stopping : int, optional
            Stop once this many trials passed without improving the best.
        callbacks : sequence of callables
            ``callback(tuner, inputs, results)`` after each completed measurement (lists of one).
        si_prefix : str
            Unused (kept for AutoTVM compatibility; progress shows GFLOPS).

        Returns
        -------
        Tuner
            ``self``.

        Raises
        ------
        TunerError
            ``n_trial < 1`` or ``early_stopping < 1``.
        """
        if not isinstance(n_trial, (int, np.integer)) or n_trial < 1:
            raise TunerError(f"n_trial={n_trial!r} must be a positive integer")
        if early_stopping is not None and early_stopping < 1:
            raise TunerError(f"early_stopping={early_stopping!r} must be a positive integer or None")
        opt = measure_option if measure_option is not None else globals()["measure_option"]()
        for cb in callbacks:
            if hasattr(cb, "load") and isinstance(getattr(cb, "path", None), str):
                self.attach_log(cb.path)
                break
        for cb in callbacks:
            if hasattr(cb, "load"):
                n = self.load_history(cb.load(self.task))
                if n:
                    logger.info("%s: resumed %d records from %s", self.task.name, n, getattr(cb, "path", cb))
        for cb in callbacks:
            if hasattr(cb, "start"):
                cb.start(self, n_trial)
        measurer = Measurer(self.task, opt)
        self.measure_stats = measurer.stats
        pending_fit = 0.0
        try:
            while self.trials < n_trial and self.has_next():
                if early_stopping is not None and self.trials >= self.best_iter + early_stopping and self.trials:
                    logger.info("%s: early stopping after %d trials without a new best", self.task.name, early_stopping)
                    break
                t0 = time.perf_counter()
                want = min(measurer.batch_size, n_trial - self.trials)
                configs = [self.space.canonical(c) for c in self.next_batch(want)]
                configs = [c for c in dict.fromkeys(configs) if c not in self.visited]
                search = time.perf_counter() - t0
                self.time_search += search
                if not configs:
                    logger.info("%s: the tuner proposed no new config; stopping", self.task.name)
                    break
                share_s, share_f = search / len(configs), pending_fit / len(configs)

                round_now = self.round_base + int(getattr(self, "train_ct", 0))

                def on_result(r: MeasureResult) -> None:
                    r.search_s, r.fit_s, r.round = share_s, share_f, round_now
                    self._note(r)
                    self.time_measure += r.measure_s
                    if r.error_kind == ErrorKind.INVALID:
                        return
                    inp = [MeasureInput(self.task, r.config)]
                    for cb in callbacks:
                        cb(self, inp, [r])

                results = measurer.measure(configs, on_result=on_result)
                t1 = time.perf_counter()
                self.update(configs, results)
                pending_fit = time.perf_counter() - t1
                self.time_fit += pending_fit
        finally:
            if measure_option is None:  # pools we made; a caller's pools live on for its next task
                measurer.close()
            for cb in callbacks:
                if hasattr(cb, "finish"):
                    cb.finish(self)
        return self
