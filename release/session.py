"""``TuningSession``: the single owner of one task's tuning state, with an ask/tell interface.

Every driver runs the same round through a session (in the spirit of Optuna's ``study.ask()`` /
``study.tell()``):

===============================  =============================================================
driver                           how it uses the session
===============================  =============================================================
``Tuner.tune`` (AutoTVM API)     :meth:`TuningSession.resume` from the log, then
                                 :meth:`TuningSession.run` (ask -> measure -> tell)
``ReleaseSearchStrategy``        ``generate_measure_candidates`` asks, ``notify_runner_results``
(MetaSchedule)                   tells; records already in the database are told first
``release.relax.tune_model``     a task scheduler over sessions that share one measure option
                                 and one log, read once at start; each chunk is one ``run``
Ray worker                       ``Tuner.tune`` on the worker (one session per Ray task)
===============================  =============================================================

Life of one round
-----------------
1. :meth:`ask` ``(n)``: the proposer (the tuner: ``next_batch``) proposes up to ``n`` configs;
   the session makes them canonical, drops duplicates and visited ones, and books the time as
   *search*. Each config asked carries its share of that search time, of the previous round's
   fit time and the round number, stamped on its result when it is observed.
2. the driver measures them (a :class:`release.measure.Measurer`, MetaSchedule's runner, ...).
3. :meth:`observe` ``(result)`` as each result completes (bookkeeping only: visited, trial
   count, best; an ``invalid`` result marks the config visited and is not a trial).
4. :meth:`tell` ``(configs, results)``: observes any result not yet observed, then lets the
   proposer learn (``proposer.update``: model-based tuners refit here), booked as *fit*.

:meth:`resume` ``(records)`` is :meth:`tell` over stored records of the task (a resumed run's
rounds continue from the last stored round).

After the rounds, :meth:`verify_best` checks the best config's output against the task's reference
(:class:`release.check.OutputChecker`); a wrong one becomes a ``wrong_output`` result (logged, never
a best) and the next best is checked instead.

The proposer is any object with ``has_next() -> bool``, ``next_batch(n) -> list[config]``,
``update(configs, results)`` and an integer ``rounds`` (cost-model refits so far):
:class:`release.tuners.Tuner` and its subclasses.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import replace
from typing import Callable, Sequence

from .errors import InvalidConfigError, TunerError
from .measure.measure import ErrorKind, MeasureResult

logger = logging.getLogger(__name__)


class TuningSession:
    """Tuning state of one task and the ask/tell round over it.

    Parameters
    ----------
    task : release.task.Task
        The task; configs are canonical configs of ``task.config_space``.
    proposer : release.tuners.Tuner
        Proposes configs and learns from results (see the module docstring).

    Attributes
    ----------
    visited : set[tuple]
        Configs measured or found invalid (canonical form).
    best_config : tuple or None
        Fastest successfully measured config.
    best_flops, best_cost : float
        Its throughput (FLOP/s) and mean run time (s); 0 and ``inf`` before any success.
    best_iter : int
        Trial count at which the best was found (for early stopping).
    trials : int
        Measured configs (invalid ones excluded), resumed records included.
    time_search, time_fit, time_measure : float
        Seconds spent proposing (``ask``), learning (``tell``) and measuring (``measure_s`` of
        the results observed).
    round_base : int
        Last round of the resumed records (a resumed run's rounds continue from it).
    rejections : dict[str, list]
        Invalid configs by kind of reason (:func:`rejection_kind`): ``kind -> [count, first
        message]``, in the order first seen; :meth:`rejection_summary` prints them.
    stop_reason : str
        Why the last :meth:`run` stopped: ``"n_trial"``, ``"early_stopping"``, ``"exhausted"``
        (every config of the space visited), ``"no_new_config"`` (the proposer proposed nothing
        new), ``"rejections"`` (``max_rejected`` invalid configs in a row) or ``""`` (not run).
    verified : bool or None
        Whether :meth:`verify_best` checked the current best's output (None: not checked).
    """

    #: most configs of another machine's records of this task measured first as seeds (by their timing there)
    max_seeds = 32

    def __init__(self, task, proposer):
        self.task = task
        self.space = task.config_space
        self.proposer = proposer
        self.visited: set[tuple] = set()
        self.best_config: tuple | None = None
        self.best_flops = 0.0
        self.best_cost = float("inf")
        self.best_iter = 0
        self.trials = 0
        self.time_search = 0.0
        self.time_fit = 0.0
        self.time_measure = 0.0
        self.round_base = 0
        self._pending_fit = 0.0  # fit time of the last tell, shared out over the next ask's configs
        self._asked: dict[tuple, tuple[float, float, int]] = {}  # config -> (search_s, fit_s, round)
        self._ok_costs: dict[tuple, float] = {}  # successfully measured config -> mean cost (s)
        self.wrong: set[tuple] = set()  # configs whose output failed the reference check
        self.rejections: dict[str, list] = {}
        self.rejected_in_a_row = 0
        self.stop_reason = ""
        self.verified: bool | None = None
        self.seeds_elsewhere = 0  # configs of this task measured on other machines, queued as seeds
        self._seed_queue: list[tuple] = []  # handed out by ask() before the proposer's configs

    # ------------------------------------------------------------------ state
    @property
    def round(self) -> int:
        """Current round: the resumed base plus the proposer's cost-model refits."""
        return self.round_base + int(self.proposer.rounds)

    @property
    def best_gflops(self) -> float:
        """Best throughput in GFLOPS (0 before any success)."""
        return self.best_flops / 1e9

    def has_next(self) -> bool:
        """Whether the proposer can propose more (unvisited configs remain, search not ended)."""
        return self.proposer.has_next()

    # ------------------------------------------------------------------ ask / observe / tell
    def ask(self, n: int) -> list[tuple]:
        """Up to ``n`` configs to measure next: canonical, distinct, none visited.

        Parameters
        ----------
        n : int
            Most configs wanted (the builder's batch size, or MetaSchedule's trials per iteration).

        Returns
        -------
        list[tuple]
            Seeds of :meth:`resume` first (another machine's best configs of this task, any
            proposer), then canonical configs in the proposer's order; empty when it proposed nothing new. The
            time taken is booked as search time and shared out over them.
        """
        t0 = time.perf_counter()
        seeds = []
        while self._seed_queue and len(seeds) < n:  # other machines' best configs of this task first
            c = self._seed_queue.pop(0)
            if c not in self.visited and c not in seeds:
                seeds.append(c)
        rest = self.proposer.next_batch(n - len(seeds)) if len(seeds) < n else []
        configs = seeds + [self.space.canonical(c) for c in rest]
        configs = [c for c in dict.fromkeys(configs) if c not in self.visited]
        search = time.perf_counter() - t0
        self.time_search += search
        if configs:
            share_s, share_f = search / len(configs), self._pending_fit / len(configs)
            self._pending_fit = 0.0
            round_now = self.round
            for c in configs:
                self._asked[c] = (share_s, share_f, round_now)
        return configs

    def observe(self, result: MeasureResult) -> None:
        """Book one result the moment it completes: visited, trial count and best.

        A result of a config handed out by :meth:`ask` gets that config's ``search_s``,
        ``fit_s`` and ``round``. An ``invalid`` result marks its config visited and is no trial
        (its reason is counted in :attr:`rejections`). A ``wrong_output`` result of a config
        already measured is no new trial: it takes the config out of the running for the best
        (the next fastest becomes the best).
        """
        config = tuple(result.config)
        stamp = self._asked.pop(config, None)
        if stamp is not None:
            result.search_s, result.fit_s, result.round = stamp
        seen = config in self.visited
        self.visited.add(config)
        self.time_measure += result.measure_s
        if result.error_kind == ErrorKind.INVALID:
            kind = rejection_kind(result.error_msg)
            entry = self.rejections.setdefault(kind, [0, result.error_msg])
            entry[0] += 1
            self.rejected_in_a_row += 1
            return
        self.rejected_in_a_row = 0
        if result.error_kind == ErrorKind.WRONG_OUTPUT:
            self.wrong.add(config)
            self._ok_costs.pop(config, None)
            if not seen:
                self.trials += 1
            if config == self.best_config:
                self._recompute_best()
            return
        self.trials += 1
        if result.ok and config not in self.wrong:
            self._ok_costs[config] = result.mean_cost
            flops = self.task.flop / result.mean_cost if result.mean_cost > 0 else 0.0
            if flops > self.best_flops:
                self.best_flops, self.best_cost = flops, result.mean_cost
                self.best_config, self.best_iter = config, self.trials
                self.verified = None

    def _recompute_best(self) -> None:
        """Best = fastest config in :attr:`_ok_costs` (after the best was found wrong)."""
        self.best_config, self.best_flops, self.best_cost, self.verified = None, 0.0, float("inf"), None
        if self._ok_costs:
            config = min(self._ok_costs, key=self._ok_costs.__getitem__)
            cost = self._ok_costs[config]
            self.best_config, self.best_cost = config, cost
            self.best_flops = self.task.flop / cost if cost > 0 else 0.0

    def tell(self, configs: Sequence[tuple], results: Sequence[MeasureResult], observed: bool = False) -> None:
        """Learn from measured ``results`` of ``configs`` (same order), booked as fit time.

        Parameters
        ----------
        configs : sequence of tuple
            The configs measured (canonical).
        results : sequence of MeasureResult
            Their results, same order.
        observed : bool
            True when every result was already passed to :meth:`observe` as it completed (the
            measuring loop does so, to log each result at once); otherwise they are observed here.
        """
        if not observed:
            for r in results:
                self.observe(r)
        t1 = time.perf_counter()
        self.proposer.update(configs, results)
        self._pending_fit = time.perf_counter() - t1
        self.time_fit += self._pending_fit

    def resume(self, records) -> int:
        """:meth:`tell` over stored records of this task (others are ignored).

        Records of this task (:meth:`release.task.Task.owns`: its program on its ISA class) measured
        on this machine (:meth:`release.task.Task.tier` ``"machine"``) are trials already done.
        Those measured on another machine of the ISA class are not: their timings are never mixed
        with this machine's; their best configs become seeds, measured here first
        (:attr:`seeds_elsewhere` counts them; one info line names the machines). Records whose
        config does not fit the knob space are matched through their trace
        (``KnobSpace.config_of_record``) or, failing that, skipped with one warning; configs
        already visited are skipped. A fresh session's rounds continue from the records' last
        round.

        Parameters
        ----------
        records : iterable of release.measure.Record

        Returns
        -------
        int
            Number of records used as trials (seeds not counted).
        """
        results = []
        unusable = 0
        fresh = self.trials == 0 and not self.visited
        elsewhere = []
        for rec in records:
            if not self.task.owns(rec):
                continue
            if self.task.tier(rec) != "machine":  # another machine's timing: a seed, never a trial or a cost
                elsewhere.append(rec)
                continue
            if fresh:  # the refit that follows makes round round_base + 1, as in the interrupted run
                self.round_base = max(self.round_base, int(rec.round))
            try:
                c = self.space.config_of_record(rec.config, rec.trace)
            except InvalidConfigError:
                unusable += 1
                continue
            if c in self.visited and rec.error_kind != ErrorKind.WRONG_OUTPUT:
                continue
            r = rec if rec.config == c else replace(rec, config=c)  # a record is a result (one type)
            self._observe_stored(r)
            results.append(r)
        if unusable:
            logger.warning("%s: %d record(s) fit neither this knob space nor replay their trace; ignored",
                           self.task.name, unusable)
        if results:
            self.proposer.update([r.config for r in results], results)
        if elsewhere:
            self._seed_from_elsewhere(elsewhere)
        return len(results)

    def _seed_from_elsewhere(self, records) -> None:
        """Queue the best configs (by their timing there, at most :attr:`max_seeds`) of this task
        measured on other machines of its ISA class: :meth:`ask` hands them out before the
        proposer's configs, whatever the proposer."""
        from .target import machine_of

        ok = sorted((r for r in records if r.ok), key=lambda r: r.mean_cost)
        configs, seen = [], set(self.visited)
        for rec in ok:
            try:
                c = self.space.config_of_record(rec.config, rec.trace)
            except InvalidConfigError:
                continue
            if c not in seen:
                seen.add(c)
                configs.append(c)
        machines = sorted({machine_of(r.target, r.machine) for r in records})
        self._seed_queue.extend(c for c in configs[:self.max_seeds] if c not in self._seed_queue)
        n = self.seeds_elsewhere = len(self._seed_queue)
        logger.info("%s: %d record(s) of this task from %s (another machine of %s): not trials here; %d of "
                    "their best configs are measured first as seeds", self.task.name, len(records),
                    ", ".join(machines[:3]) + (" ..." if len(machines) > 3 else ""), self.task.isa_class, n)

    def _observe_stored(self, result: MeasureResult) -> None:
        """:meth:`observe` for a stored result: its measuring time is not this session's."""
        before = self.time_measure
        self.observe(result)
        self.time_measure = before

    # ------------------------------------------------------------------ the measuring loop
    # ------------------------------------------------------------------ rejections, the best's output
    def rejection_summary(self) -> list[str]:
        """One line per kind of rejection: ``"<count> x <first message>"``, most frequent first."""
        items = sorted(self.rejections.items(), key=lambda kv: -kv[1][0])
        return [f"{n} x {first}" for _, (n, first) in items]

    def verify_best(self, checker, on_result: Callable[[MeasureResult], None] | None = None) -> list[MeasureResult]:
        """Check the best config's output; while it is wrong, mark it and check the next best.

        Parameters
        ----------
        checker : callable
            ``checker(config) -> str``: ``""`` when the output is right, else why it is wrong
            (:class:`release.check.OutputChecker`).
        on_result : callable, optional
            Gets each ``wrong_output`` :class:`MeasureResult` (the log appends it, so a resumed
            run and ``apply_history_best`` skip that config too).

        Returns
        -------
        list[MeasureResult]
            The ``wrong_output`` results, in the order found; after the call :attr:`best_config`
            is a config whose output matched (``verified`` True) or None when none did.
        """
        wrong = []
        while self.best_config is not None and not self.verified:
            config, cost = self.best_config, self.best_cost
            msg = checker(config)
            if not msg:
                self.verified = True
                break
            logger.warning("%s: config %s (%.4g ms) is not reported as the best: %s", self.task.name,
                           list(config), cost * 1e3, msg)
            r = MeasureResult(config=config, error_kind=ErrorKind.WRONG_OUTPUT, error_msg=msg, timestamp=time.time())
            self.observe(r)
            wrong.append(r)
            if on_result is not None:
                on_result(r)
        return wrong

    def run(self, measurer, n_trial: int, early_stopping: int | None = None,
            on_result: Callable[[MeasureResult], None] | None = None, max_rejected: int = 1000) -> None:
        """Rounds of ask -> measure -> tell until ``trials == n_trial`` or the proposer is done.

        Parameters
        ----------
        measurer : release.measure.Measurer
            Anything with ``batch_size`` and ``measure(configs, on_result=...)``.
        n_trial : int
            Stop once this many trials (resumed ones included) were measured.
        early_stopping : int, optional
            Stop once this many trials passed without a new best.
        on_result : callable, optional
            ``on_result(result)`` for every valid result, after it is observed (logs, progress).
        max_rejected : int
            Stop once this many configs in a row were invalid (replayed, rejected, not a trial;
            default 1000): the cap on replays per trial. With no trial measured this raises.

        Raises
        ------
        TunerError
            ``max_rejected`` invalid configs in a row before any trial (the space yields no valid
            config within the bound); the message names the rejections by kind.

        Notes
        -----
        A run that stops before ``n_trial`` because the space is exhausted, the proposer has
        nothing new, or too many configs in a row were invalid says so in one warning line;
        :attr:`stop_reason` tells which.
        """
        self.stop_reason = ""
        self.rejected_in_a_row = 0
        while self.trials < n_trial:
            if not self.has_next():
                self.stop_reason = "exhausted" if len(self.visited) >= self.space.size else "no_new_config"
                break
            if early_stopping is not None and self.trials >= self.best_iter + early_stopping and self.trials:
                logger.info("%s: early stopping after %d trials without a new best", self.task.name, early_stopping)
                self.stop_reason = "early_stopping"
                break
            if self.rejected_in_a_row >= max_rejected:
                self.stop_reason = "rejections"
                break
            configs = self.ask(min(measurer.batch_size, n_trial - self.trials))
            if not configs:
                self.stop_reason = "exhausted" if len(self.visited) >= self.space.size else "no_new_config"
                break

            def done(r: MeasureResult) -> None:
                self.observe(r)
                if r.error_kind != ErrorKind.INVALID and on_result is not None:
                    on_result(r)

            results = measurer.measure(configs, on_result=done)
            self.tell(configs, results, observed=True)
        else:
            self.stop_reason = "n_trial"
        self._say_why_stopped(n_trial, max_rejected)

    def _say_why_stopped(self, n_trial: int, max_rejected: int) -> None:
        """One warning line when the run stopped short of ``n_trial`` for want of configs."""
        name, invalid = self.task.name, sum(n for n, _ in self.rejections.values())
        if self.stop_reason == "rejections":
            why = "; ".join(self.rejection_summary()[:3])
            if self.trials == 0:
                raise TunerError(f"{name}: no valid config in {max_rejected} replays in a row (the knob space of "
                                 f"{self.space.size:.3g} configs may hold none); rejected: {why}")
            logger.warning("%s: stopped after %d of %d trials: %d configs in a row were invalid; rejected: %s",
                           name, self.trials, n_trial, max_rejected, why)
        elif self.stop_reason == "exhausted":
            logger.warning("%s: the knob space is exhausted after %d of %d trials: all %d configs visited "
                           "(%d invalid)", name, self.trials, n_trial, self.space.size, invalid)
        elif self.stop_reason == "no_new_config":
            logger.warning("%s: stopped after %d of %d trials: the tuner proposed no new config (%d of %d configs "
                           "visited)", name, self.trials, n_trial, len(self.visited), self.space.size)


def rejection_kind(reason: str) -> str:
    """The kind of an invalid config's reason: its text before the first ``:`` with numbers and
    bracketed values replaced by ``#`` (``"postprocessor RewriteParallelVectorizeUnroll rejected the
    schedule"``, ``"compute location # is not legal with these tile sizes (TVM would use #)"``,
    ``"replay failed"``)."""
    head = (reason or "unknown").split(":", 1)[0]
    return re.sub(r"\[[^\]]*\]|-?\d+(\.\d+)?", "#", head).strip()
