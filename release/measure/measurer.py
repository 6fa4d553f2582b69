"""The measurer: replay, build and run configs of one task, and ``measure_option``.

Life cycle of :meth:`Measurer.measure` (one batch): each config is replayed to a schedule
(``KnobSpace.apply``; an invalid one is reported at once and never built), the schedules are
built in parallel (:class:`release.measure.builder.Builder`), the artifacts are run
(:class:`release.measure.runner.Runner`: one by one, or all at once when ``batched``), and each
:class:`release.measure.result.MeasureResult` goes to ``on_result`` the moment it completes.
With a runner's ``early_termination`` ratio set, each run gets the cutoff ``early_termination x`` the task's best
mean cost so far (:attr:`Measurer.best_cost`), and a candidate cut after its first repeat is marked
``cut_short`` (AdaTune-style early termination; see ``LocalRunner``).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from typing import Sequence

from ..errors import InvalidConfigError, TunerError
from ._pool import keep_interrupts
from .builder import Builder, LocalBuilder, MetaScheduleBuilder
from .result import ErrorKind, MeasureResult
from .runner import LocalRunner, MetaScheduleRunner, Runner

logger = logging.getLogger(__name__)


def _as_builder(builder):
    """Wrap a MetaSchedule ``Builder`` in :class:`MetaScheduleBuilder`; others unchanged."""
    from tvm.s_tir.meta_schedule.builder import Builder as MSBuilder

    return MetaScheduleBuilder(builder) if isinstance(builder, MSBuilder) else builder


def _as_runner(runner):
    """Wrap a MetaSchedule ``Runner`` in :class:`MetaScheduleRunner`; others unchanged."""
    from tvm.s_tir.meta_schedule.runner import Runner as MSRunner

    return MetaScheduleRunner(runner) if isinstance(runner, MSRunner) else runner


def measure_option(builder=None, runner=None) -> dict:
    """AutoTVM's ``measure_option``: ``{"builder": Builder, "runner": Runner}``.

    Parameters
    ----------
    builder : Builder, MetaSchedule Builder, "local" or None
        None / ``"local"``: a :class:`LocalBuilder` with defaults. A MetaSchedule ``Builder``
        (including ``PyBuilder`` subclasses) is wrapped in :class:`MetaScheduleBuilder`.
    runner : Runner, MetaSchedule Runner, "local" or None
        None / ``"local"``: a :class:`LocalRunner` with defaults. A MetaSchedule ``Runner`` is
        wrapped in :class:`MetaScheduleRunner`.

    Raises
    ------
    TunerError
        Anything else.
    """
    if builder is None or (isinstance(builder, str) and builder == "local"):
        builder = LocalBuilder()
    if runner is None or (isinstance(runner, str) and runner == "local"):
        runner = LocalRunner()
    builder, runner = _as_builder(builder), _as_runner(runner)
    if not isinstance(builder, Builder):
        raise TunerError(f"builder {builder!r} is not a release.measure.Builder nor a MetaSchedule Builder")
    if not isinstance(runner, Runner):
        raise TunerError(f"runner {runner!r} is not a release.measure.Runner nor a MetaSchedule Runner")
    return {"builder": builder, "runner": runner}


class Measurer:
    """Measures configs of one task: replay + postprocessors, build, run.

    Parameters
    ----------
    task : release.task.Task
    option : dict
        From :func:`measure_option`.

    best_cost : float, optional
        Best mean cost (seconds) of this task known before the first measurement (a resumed
        run's); default ``inf``. Only used for early termination.

    Attributes
    ----------
    best_cost : float
        Lowest mean cost (seconds) of a fully timed, successful result of this task so far (or
        the ``best_cost`` given); a candidate cut short never lowers it. The early-termination
        cutoff is ``runner.early_termination * best_cost``; while it is ``inf`` nothing is cut.

    Notes
    -----
    Invalid configs (see :meth:`release.space.KnobSpace.apply`) come back with
    ``error_kind == "invalid"`` and are never built.

    A result cut short keeps its one cost, so its ``mean_cost`` is above ``early_termination`` times the
    best mean at the time, which is at least the final best: a cut result is never the best of a
    run (the cost model learns its one-repeat mean, still an upper bound on its speed). Only if the
    best is later found to give a wrong output can a cut result become the next best.
    """

    def __init__(self, task, option: dict, best_cost: float | None = None):
        self.task = task
        self.builder: Builder = option["builder"]
        self.runner: Runner = option["runner"]
        keep_interrupts()  # Ctrl-C inside a MetaSchedule builder or runner stays a KeyboardInterrupt
        self.runner.check_device(task.target)
        self.best_cost = float("inf") if best_cost is None else float(best_cost)
        #: wall seconds per phase, summed over calls: replay (+postprocessors), build (parallel
        #: phase), run (all runs), total (whole measure calls); and counts (``cut_short``:
        #: candidates cut after their first repeat)
        self.stats = {"replay": 0.0, "build": 0.0, "run": 0.0, "total": 0.0, "configs": 0, "measured": 0,
                      "batches": 0, "cut_short": 0}

    def _cutoff(self) -> float | None:
        """Seconds above which a first repeat ends a candidate's timing (None: no cut)."""
        ratio = float(self.runner.early_termination or 0.0)
        if ratio <= 0.0 or self.best_cost == float("inf"):
            return None
        return ratio * self.best_cost

    def _book(self, r: MeasureResult, cutoff: float | None) -> None:
        """Mark ``r`` cut_short when a cutoff applied and it got fewer costs than ``repeat``;
        a fully timed success may lower :attr:`best_cost`."""
        repeat = int(self.runner.repeat or 0)
        r.cut_short = bool(cutoff is not None and r.ok and 0 < len(r.costs) < repeat)
        if r.cut_short:
            self.stats["cut_short"] += 1
        elif r.ok:
            self.best_cost = min(self.best_cost, r.mean_cost)

    @property
    def batch_size(self) -> int:
        """Configs per batch: the build workers, or the RPC devices if there are more of them."""
        return max(self.builder.n_parallel, self.runner.n_parallel)

    def measure(self, configs: Sequence[Sequence[int]], on_result=None) -> list[MeasureResult]:
        """Measure ``configs``; one :class:`MeasureResult` per config, in order.

        Parameters
        ----------
        configs : list of config tuples
        on_result : callable, optional
            ``on_result(result)`` is called as soon as each result completes (invalid configs at
            once, build failures after the parallel build, runs one by one), so a caller can log
            every measurement before the next one starts.
        """
        from tvm.s_tir.meta_schedule.arg_info import ArgInfo

        clock = [time.perf_counter()]

        def done(r: MeasureResult) -> None:
            now = time.perf_counter()
            r.timestamp = time.time()
            r.measure_s = now - clock[0]
            clock[0] = now
            if on_result is not None:
                on_result(r)

        space = self.task.config_space
        t_start = time.perf_counter()
        results: list[MeasureResult] = []
        todo = []  # (index, mod, args)
        for c in configs:
            c = space.canonical(c)
            r = MeasureResult(config=c).stamp(self.task)  # a record of this task from the start
            results.append(r)
            try:
                sch = space.apply(c)
            except InvalidConfigError as err:
                r.error_kind, r.error_msg = ErrorKind.INVALID, err.reason
                done(r)
                continue
            r.set_trace(sch.trace)
            todo.append((len(results) - 1, sch.mod, ArgInfo.from_entry_func(sch.mod, remove_preproc=True)))
        t_replayed = time.perf_counter()
        built = self.builder.build([m for _, m, _ in todo], self.task.target_json)
        t_built = time.perf_counter()
        to_run = []
        for (i, _, args), (path, secs, kind, msg) in zip(todo, built):
            r = results[i]
            r.build_s = secs
            if kind:
                r.error_kind, r.error_msg = kind, msg
                done(r)
            else:
                to_run.append((i, path, args))
        cutoffs = {}  # result index -> the cutoff its run was given

        def run_one(item):
            cutoff = cutoffs[item[0]] = self._cutoff()  # the best so far, this batch's runs included
            extra = {} if cutoff is None else {"cutoff": cutoff}
            return self.runner.run([(item[1], item[2])], self.task.target, **extra)[0]

        if self.runner.batched:  # the whole batch shares the cutoff of the best before it
            cutoff = self._cutoff()
            extra = {} if cutoff is None else {"cutoff": cutoff}
            cutoffs.update((i, cutoff) for i, _, _ in to_run)
            ran = self.runner.run([(p, a) for _, p, a in to_run], self.task.target, **extra) if to_run else []
            pairs = zip(to_run, ran)
        else:
            pairs = ((item, run_one(item)) for item in to_run)
        for (i, path, _), (costs, secs, kind, msg) in pairs:
            r = results[i]
            r.costs, r.run_s, r.error_kind, r.error_msg = costs, secs, kind, msg
            r.threads = self.runner.threads
            r.cache_flush = bool(getattr(self.runner, "enable_cpu_cache_flush", False))
            self._book(r, cutoffs.get(i))
            shutil.rmtree(os.path.dirname(path), ignore_errors=True)
            done(r)
        t_end = time.perf_counter()
        st = self.stats
        st["replay"] += t_replayed - t_start
        st["build"] += t_built - t_replayed
        st["run"] += sum(r.run_s for r in results)
        st["total"] += t_end - t_start
        st["configs"] += len(results)
        st["measured"] += len(todo)
        st["batches"] += 1
        return results

    def close(self) -> None:
        self.builder.close()
        self.runner.close()


def measure_defaults(tasks: Sequence, option: dict, on_result=None) -> list[MeasureResult]:
    """Measure TVM's default schedule of each of ``tasks`` once: its program as extracted, unscheduled,
    lowered as the untuned build lowers it (for a CPU: one thread, the loops as written).

    The candidate a tuned kernel must beat (a tuned model is never slower than the untuned one):
    built in one parallel batch by ``option``'s builder, run by its runner like any config, each
    result a ``MeasureResult`` with ``default=True``, ``config=()`` and no trace. Build or run
    failures come back as such (``error_kind``); a default that does not run simply does not compete.
    MetaSchedule's ``tune_relax`` has no such candidate; AutoTVM's ``FallbackContext`` is the
    schedule it competes with.

    Parameters
    ----------
    tasks : list of release.task.Task
    option : dict
        From :func:`measure_option` (its builder and runner are used, not closed).
    on_result : callable, optional
        ``on_result(result)`` for each result as soon as it completes (a log callback).

    Returns
    -------
    list of MeasureResult
        One per task, in order, stamped for its task.
    """
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    builder, runner = option["builder"], option["runner"]
    by_target: dict = {}
    for i, t in enumerate(tasks):
        by_target.setdefault(t.target_json, []).append(i)
    results = [MeasureResult(default=True).stamp(t) for t in tasks]
    for target_json, idx in by_target.items():
        mods = [tasks[i].mod for i in idx]
        t0 = time.perf_counter()
        built = builder.build(mods, target_json)
        for i, (path, secs, kind, msg) in zip(idx, built):
            r = results[i]
            r.build_s = secs
            if kind:
                r.error_kind, r.error_msg = kind, msg
            else:
                args = ArgInfo.from_entry_func(tasks[i].mod, remove_preproc=True)
                costs, rsecs, kind, msg = runner.run([(path, args)], tasks[i].target)[0]
                r.costs, r.run_s, r.error_kind, r.error_msg = costs, rsecs, kind, msg
                r.threads = runner.threads
                r.cache_flush = bool(getattr(runner, "enable_cpu_cache_flush", False))
                shutil.rmtree(os.path.dirname(path), ignore_errors=True)
            r.timestamp = time.time()
            r.measure_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            if on_result is not None:
                on_result(r)
    return results


def measure_missing_defaults(tasks: list, option: dict, log) -> int:
    """Measure TVM's default schedule of each of ``tasks`` that ``log`` (a path or a
    :class:`release.measure.records.log_to_file`) has no default record of on this machine
    (:func:`release.measure.measurer.measure_defaults`), appending each result to the log as it
    completes. CPU (``llvm``) tasks only: on a GPU the unscheduled program is not a kernel TVM
    builds (it has no thread binding). Returns how many were measured."""
    from .records import log_to_file

    log = log if isinstance(log, log_to_file) else log_to_file(log)
    todo = [t for t in tasks if t.target.kind.name == "llvm"
            and not any(t.tier(r) == "machine" for r in log.defaults(t))]
    if todo:
        measure_defaults(todo, option, on_result=lambda r: log.append([r]))
    return len(todo)
