"""Tuner base class with AutoTVM's API (``autotvm.tuner.Tuner``) on MetaSchedule knob spaces.

Life cycle of :meth:`Tuner.tune` (one *round* = search, measure, update):

1. Resume: :meth:`Tuner.attach_log` gets the first callback's ``log_path`` (tuners with state
   beyond the records, the PPO agent, reload it from beside the log); every callback's
   ``records(task)`` (``log_to_file``: the records of this task it read when it was made) goes
   to :meth:`Tuner.load_history` (the session's ``resume``). They count toward ``n_trial``.
2. While fewer than ``n_trial`` configs were measured and :meth:`Tuner.has_next`:

   a. ``configs = next_batch(batch_size)``: the search; must return unvisited configs (timed
      as ``search_s``). ``batch_size`` is the builder's ``n_parallel`` (AutoTVM's rule).
   b. the measurer replays, builds and runs them; each result is passed to the callbacks
      (log, database, progress bar) the moment it completes. Invalid configs (not a legal
      program, see ``KnobSpace.apply``) are not built, not logged and not counted as trials.
   c. ``update(configs, results)``: learn from the batch (timed as ``fit_s``; model-based
      tuners refit their cost model here).
   d. early stopping: stop once ``early_stopping`` trials passed without a new best.

   The loop also stops (with one warning line) when the space is exhausted, when the tuner
   proposes nothing new, or after ``max_rejected`` invalid configs in a row (a
   :class:`TunerError` if no trial was measured): see :meth:`release.session.TuningSession.run`.
3. Output check (``check_output``, CPU targets): the best config is compiled through
   ``compile_tir`` and its output compared with the task's reference; a wrong one is logged as a
   ``wrong_output`` record and never reported as the best, and the next best is checked
   (:meth:`release.session.TuningSession.verify_best`).
4. Rejections: invalid configs are counted by kind of reason; the summary is logged and appended
   to ``<log without .jsonl>.rejections.jsonl`` beside the log (one JSON line per run).

Subclasses implement :meth:`next_batch` and optionally :meth:`update` and :meth:`has_next`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..callback import as_callback
from ..errors import TunerError, check_n_trial
from ..measure import measure as _measure
from ..measure.measure import MeasureResult, Measurer, measure_option
from ..measure.records import Record

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class KnowledgeRead:
    """What a tuner read from a knowledge base when it was made (``Tuner.knowledge_read``).

    Attributes
    ----------
    records, workloads : int
        Records and workloads of the task's ISA class the source holds (0, 0: cold).
    origin : str
        Which machines they come from (:meth:`release.knowledge.use.KnowledgeRecords.origin`; "" when cold).
    source : str
        ``"base"``, ``"pack"`` (the shipped pack), ``"records"`` or ``""`` (:class:`release.knowledge.use.KnowledgeRecords`).
    seed_workloads : int
        Workloads the transfer-tuning seeds came from (0 without seeds).
    """

    records: int = 0
    workloads: int = 0
    origin: str = ""
    source: str = ""
    seed_workloads: int = 0

    @classmethod
    def of(cls, records: "release.knowledge.use.KnowledgeRecords", seed_sources=()) -> "KnowledgeRead":
        """From the records read and each seed's source workload."""
        return cls(records.total, records.workloads, records.origin() if records else "", records.source,
                   len(set(seed_sources)))


class MeasureInput:
    """AutoTVM's ``MeasureInput``: ``(task, config)`` handed to callbacks."""

    __slots__ = ("task", "config")

    def __init__(self, task, config):
        self.task, self.config = task, tuple(config)

    @property
    def target(self):
        """The task's target (AutoTVM's ``MeasureInput.target``)."""
        return self.task.target

    def __repr__(self) -> str:
        return f"MeasureInput({self.task.name}, {self.config})"


class Tuner:
    """Base tuner: the *proposer* of a :class:`release.session.TuningSession`.

    Parameters
    ----------
    task : release.task.Task
        The task; its knob space is ``task.config_space``.
    seed : int, optional
        Seed of every random choice (NumPy ``default_rng``). None = nondeterministic.

    Attributes
    ----------
    session : release.session.TuningSession
        Owner of the tuning state; the attributes below read it.
    visited : set[tuple]
        Configs measured or found invalid (canonical form).
    best_config, best_flops, best_cost
        Best measured config, its throughput (FLOP/s) and mean run time (s).
    trials : int
        Measured configs (invalid ones excluded), resumed records included.
    rounds : int
        Cost-model refits so far (0 for tuners without a model).
    """

    name = "base"
    #: how the tuner can use a knowledge base (:mod:`release.knowledge`): ``()`` not at all,
    #: ``("seeds",)`` transfer-tuning seeds only, ``("seeds", "model")`` also a transferred cost model
    knowledge_uses: tuple = ()
    #: whether ``release tune`` / ``tune-model`` start it warm from the default knowledge base without
    #: being asked (ours); the baselines start cold as AutoTVM's and MetaSchedule's tuners do
    warm_by_default: bool = False
    #: what it read from a knowledge base when it was made (:class:`KnowledgeRead`)
    knowledge_read: KnowledgeRead = KnowledgeRead()
    #: where :meth:`end` appended the rejection summary ("" until it did)
    rejections_path: str = ""
    _log: str | None = None  # the tuning log's path, set by begin()

    def __init__(self, task, seed: int | None = None):
        from ..session import TuningSession

        self.task = task
        self.space = task.config_space
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.session = TuningSession(task, self)

    # ------------------------------------------------------------------ state (owned by the session)
    visited = property(lambda self: self.session.visited, doc="Configs measured or found invalid.")
    best_config = property(lambda self: self.session.best_config, doc="Best measured config or None.")
    best_flops = property(lambda self: self.session.best_flops, doc="Its throughput (FLOP/s).")
    best_cost = property(lambda self: self.session.best_cost, doc="Its mean run time (s).")
    best_iter = property(lambda self: self.session.best_iter, doc="Trial count when the best was found.")
    trials = property(lambda self: self.session.trials, doc="Measured configs, resumed ones included.")
    time_search = property(lambda self: self.session.time_search, doc="Seconds spent proposing.")
    time_fit = property(lambda self: self.session.time_fit, doc="Seconds spent learning.")
    time_measure = property(lambda self: self.session.time_measure, doc="Seconds spent measuring.")
    round_base = property(lambda self: self.session.round_base, doc="Last round of the resumed records.")

    @property
    def rounds(self) -> int:
        """Cost-model refits so far (the round number of the next proposal); 0 without a model."""
        return 0

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

    # ------------------------------------------------------------------ resume
    def load_history(self, records: Sequence[Record]) -> int:
        """Resume from records of this task: :meth:`release.session.TuningSession.resume`.

        Returns
        -------
        int
            Number of records used (records of other tasks are ignored).
        """
        return self.session.resume(records)

    @property
    def best_gflops(self) -> float:
        return self.best_flops / 1e9

    @property
    def knowledge_used(self) -> tuple[int, int]:
        """``(records, workloads)`` of :attr:`knowledge_read` (``(0, 0)``: cold)."""
        return self.knowledge_read.records, self.knowledge_read.workloads

    @property
    def flattened(self) -> bool:
        """Whether the task stopped improving, so a task scheduler may hand its budget to others
        (:mod:`release.scheduler`). The base tuner never says so; model-based tuners do after
        ``patience`` trials without a new best."""
        return False

    # ------------------------------------------------------------------ the loop
    def tune(self, n_trial: int, measure_option=None, early_stopping: int | None = None,
             callbacks: Sequence[Callable] = (), si_prefix: str = "G", resume: bool = True,
             check_output: bool = True, max_rejected: int = 1000) -> "Tuner":
        """Tune for ``n_trial`` measured configs (AutoTVM's ``Tuner.tune``).

        Resumes from the callbacks' logs (:meth:`load_history`), then runs the session's rounds
        (:meth:`release.session.TuningSession.run`: ask -> measure -> tell).

        Parameters
        ----------
        n_trial : int
            Total measured configs, resumed records included.
        measure_option : dict or Measurer, optional
            From :func:`release.measure.measure_option` (default: local builder and runner,
            closed at the end), or a measurer (an object with ``batch_size`` and
            ``measure(configs, on_result)``, e.g. :class:`release.measure.Measurer`). A given
            option's worker pools stay alive for reuse across tasks; close them with
            ``option["builder"].close()``.
        early_stopping : int, optional
            Stop once this many trials passed without improving the best.
        callbacks : sequence of Callback or callables
            :class:`release.callback.Callback` s (``log_to_file``, ``progress_bar``, ...) or plain
            functions ``callback(tuner, inputs, results)`` called after each completed measurement
            (lists of one).
        si_prefix : str
            Unused (kept for AutoTVM compatibility; progress shows GFLOPS).
        resume : bool
            Resume from the callbacks' stored records (``Callback.records``; default True). False
            when the caller already told the session the log (``tune_model`` reads its log once).
        check_output : bool
            Check the best config's output against the task's reference before it is reported
            (default True; CPU targets only, others are left unchecked with an info line). A wrong
            config becomes a ``wrong_output`` record.
        max_rejected : int
            Most invalid configs in a row before the run stops (default 1000; the cap on replays
            per trial).

        Returns
        -------
        Tuner
            ``self``.

        Raises
        ------
        TunerError
            ``n_trial < 1``, ``early_stopping < 1``, ``max_rejected < 1``, or ``max_rejected``
            invalid configs in a row before any trial.
        """
        if not isinstance(max_rejected, (int, np.integer)) or max_rejected < 1:
            raise TunerError(f"max_rejected={max_rejected!r} must be a positive integer")
        check_n_trial(n_trial)
        if early_stopping is not None and early_stopping < 1:
            raise TunerError(f"early_stopping={early_stopping!r} must be a positive integer or None")
        own = measure_option is None
        if measure_option is None or isinstance(measure_option, dict):
            opt = measure_option if measure_option is not None else globals()["measure_option"]()
            measurer = None
        else:
            opt, measurer = None, measure_option
        cbs = self.begin(callbacks, n_trial, resume=resume)
        if measurer is None:
            measurer = Measurer(self.task, opt)
        self.bind_measurer(measurer)
        try:
            self.run_trials(measurer, n_trial, cbs, early_stopping=early_stopping, max_rejected=max_rejected)
        finally:
            try:
                self.end(cbs, check_output=check_output)
            finally:
                if own:  # pools we made; a caller's pools live on for its next task
                    measurer.close()
        return self

    # ------------------------------------------------------------------ the steps of tune()
    # A model's task scheduler (:class:`release.scheduler.TaskScheduler`) runs them itself: begin
    # and end once per task, run_trials once per chunk of trials the task is given.
    def begin(self, callbacks: Sequence[Callable] = (), n_trial: int = 0, resume: bool = True) -> list:
        """Step 1 of :meth:`tune`: attach the log, resume from the callbacks' records, ``on_start``.

        Parameters
        ----------
        callbacks : sequence of Callback or callables
            As :meth:`tune` takes them.
        n_trial : int
            Passed to each callback's ``on_start`` (the trials the caller means to reach).
        resume : bool
            Read each callback's stored records (default True).

        Returns
        -------
        list[release.callback.Callback]
            The callbacks as :class:`release.callback.Callback` objects, for :meth:`run_trials` and
            :meth:`end`.
        """
        cbs = [as_callback(cb) for cb in callbacks]
        self._log = next((cb.log_path for cb in cbs if cb.log_path), None)
        if self._log is not None:
            self.attach_log(self._log)
        if resume:
            for cb in cbs:
                n = self.load_history(cb.records(self.task))
                if n:
                    logger.info("%s: resumed %d records from %s", self.task.name, n, cb.log_path or cb)
        for cb in cbs:
            cb.on_start(self, n_trial)
        return cbs

    def bind_measurer(self, measurer) -> None:
        """Start a :class:`release.measure.Measurer`'s early termination from the session's best
        (resumed records included) and expose its counters as :attr:`measure_stats`."""
        if isinstance(measurer, _measure.Measurer):  # early termination starts from the resumed records' best
            # (the class itself, not this module's name for it: a test may replace that name by a factory)
            measurer.best_cost = min(measurer.best_cost, self.session.best_cost)
        self.measure_stats = measurer.stats

    def run_trials(self, measurer, n_trial: int, cbs: Sequence = (), early_stopping: int | None = None,
                   max_rejected: int = 1000) -> None:
        """Step 2 of :meth:`tune`: the session's rounds up to ``n_trial`` trials in all
        (:meth:`release.session.TuningSession.run`), each result handed to ``cbs``' ``on_result``."""
        self.session.run(measurer, n_trial, early_stopping=early_stopping, on_result=self._on_result(cbs),
                         max_rejected=max_rejected)

    def end(self, cbs: Sequence = (), check_output: bool = True) -> None:
        """Steps 3 and 4 of :meth:`tune`: check the best config's output, write the rejection
        summary, ``on_finish``. Each runs even when the one before raises."""
        try:
            if check_output:
                self._check_best(self._on_result(cbs))
        finally:
            try:
                self._report_rejections(self._log)
            finally:
                for cb in cbs:
                    cb.on_finish(self)

    def _on_result(self, cbs: Sequence):
        """``on_result(result)`` of the session: each callback's ``on_result(tuner, inputs, results)``."""
        def on_result(r: MeasureResult) -> None:
            inp = [MeasureInput(self.task, r.config)]
            for cb in cbs:
                cb.on_result(self, inp, [r])

        return on_result

    # ------------------------------------------------------------------ after the rounds
    def _check_best(self, on_result) -> None:
        """:meth:`release.session.TuningSession.verify_best` with an :class:`release.check.OutputChecker`."""
        from ..check import OutputChecker

        if self.best_config is None:
            return
        if not OutputChecker.applies(self.task):
            logger.info("%s: the best config's output is not checked on target kind %s (CPU only)",
                        self.task.name, self.task.target.kind.name)
            return
        checker = OutputChecker(self.task)
        try:
            wrong = self.session.verify_best(checker, on_result=on_result)
        except Exception as err:  # noqa: BLE001 - a failing user reference must not lose the run
            from ..errors import error_line

            logger.warning("%s: the best config's output could not be checked (the reference failed: %s)",
                           self.task.name, error_line(err))
            return
        if wrong and self.best_config is None:
            logger.warning("%s: none of the %d successfully measured configs gives the reference's output: "
                           "no best", self.task.name, len(wrong))

    def _report_rejections(self, log: str | None) -> None:
        """Log the invalid configs by kind and append them to ``<log stem>.rejections.jsonl``."""
        rej = self.session.rejections
        if not rej:
            return
        n = sum(c for c, _ in rej.values())
        logger.info("%s: %d invalid configs rejected (not built, not trials): %s", self.task.name, n,
                    "; ".join(self.session.rejection_summary()))
        if log is None:
            return
        import json
        import os
        import time

        path = rejections_path(log)
        line = {"task": self.task.key, "timestamp": time.time(), "tuner": self.name, "trials": self.trials,
                "rejected": n, "kinds": [{"kind": k, "count": c, "first": m} for k, (c, m) in
                                         sorted(rej.items(), key=lambda kv: -kv[1][0])]}
        try:
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(line) + "\n")
        except OSError as err:
            logger.warning("could not write the rejection summary to %s: %s", path, err)
        else:
            self.rejections_path = os.fspath(path)


def rejections_path(log: str) -> str:
    """``<log without .jsonl>.rejections.jsonl``: where :meth:`Tuner.tune` appends its rejection summary."""
    base = log[: -len(".jsonl")] if log.endswith(".jsonl") else log
    return base + ".rejections.jsonl"
