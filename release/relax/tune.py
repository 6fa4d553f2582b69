"""Tuning drivers over a model's tasks: ours and MetaSchedule's.

:func:`tune_model` splits one trial budget over the tasks with :class:`release.scheduler.TaskScheduler`
(one :class:`release.session.TuningSession` per task, one shared, resumable log) and returns a
:class:`TuneModelResult`; :func:`default_ms` reads TVM's default schedule's times from the log.
:func:`tune_with_metaschedule` runs MetaSchedule's own ``tune_relax`` on the same prepared module with the
same budget and evaluator settings (the baseline of ``tune-model`` and the model benchmarks).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

from ..callback import Callback
from ..errors import check_n_trial
from .extract import latency_shares, prepare
from .frontend import Model
from .layout import default_prepack


@dataclass
class TuneModelResult:
    """Outcome of :func:`tune_model`: per-task best records and time split."""

    tasks: list
    tuners: dict = field(default_factory=dict)
    wall_s: float = 0.0
    #: task key -> milliseconds of TVM's default schedule on this machine (``Record.default``;
    #: absent where it was not measured or did not run)
    default_ms: dict = field(default_factory=dict)

    def table(self) -> list[dict]:
        """One row per task, in tuning order: ``task``, ``weight``, ``gflop``, ``flop_share`` and
        ``latency_share`` (fractions, :func:`~release.relax.extract.latency_shares`), ``trials``, ``best_ms``,
        ``gflops``, ``default_ms`` (TVM's default schedule, NaN where not measured)."""
        rows = []
        flop_share = latency_shares(self.tasks)
        lat_share = latency_shares(self.tasks, self.tuners)
        for t, fs, ls in zip(self.tasks, flop_share, lat_share):
            tu = self.tuners.get(t.key)
            rows.append(dict(task=t.name, weight=t.weight, gflop=t.flop / 1e9, flop_share=float(fs),
                             latency_share=float(ls), trials=tu.trials if tu else 0,
                             best_ms=(tu.best_cost * 1e3 if tu and tu.best_config else float("nan")),
                             gflops=(tu.best_gflops if tu else 0.0),
                             default_ms=self.default_ms.get(t.key, float("nan"))))
        return rows

    def lost_to_default(self) -> list[str]:
        """Names of the tasks that were tuned (a trial or more) and whose best tuned kernel is slower
        than TVM's default schedule, or never ran: they keep the default in the compiled model."""
        return [r["task"] for r in self.table()
                if r["trials"] and r["default_ms"] == r["default_ms"] and not r["best_ms"] <= r["default_ms"]]


def default_chunk(n_parallel: int) -> int:
    """Trials a task gets per scheduling step of :func:`tune_model`: 4 batches of the builder's
    ``n_parallel`` workers, at least 8. One round over every task costs ``len(tasks) * chunk``."""
    return max(8, int(n_parallel) * 4)


def tune_model(tasks: list, n_trial: int, log: str, tuner: str = "release+", scheduler: str = "gradient",
               measure_option: dict | None = None, chunk: int | None = None, seed: int = 0,
               progress: bool = True, tuner_kwargs: dict | None = None,
               callbacks: list | None = None, knowledge=None, defaults: bool = True) -> TuneModelResult:
    """Tune ``tasks`` with a total budget of ``n_trial`` measurements, resumable from ``log``.

    Parameters
    ----------
    tasks : list[Task]
        From :func:`~release.relax.extract.extract_tasks`.
    n_trial : int
        Total measured configs over all tasks (resumed records count).
    log : str
        JSON-lines log shared by all tasks, read once at start (records already there resume each
        task's session) and appended to after every measurement.
    tuner : str
        Tuner name (``release.tuners.TUNERS``) used for every task. Default ``"release+"``: the paper's
        ``ReleaseTuner`` (PPO search on an XGBoost cost model, adaptive sampling) with this project's
        search improvements (:class:`release.tuners.release_tuner.ReleasePlusTuner`), as the CLI's
        ``tune-model``; ``"release"`` for the paper's own (``"random"`` was the default before).
    scheduler : str
        ``"round-robin"`` or ``"gradient"`` (Ansor / MetaSchedule's gradient-based scheduler).
    chunk : int, optional
        Trials given to a task per scheduling step (default: the builder's ``n_parallel`` x 4, at least 8).
    progress : bool
        A tqdm bar over the whole budget (trials done, elapsed, estimated time left; the task
        tuned now, its best and its latency share). Default True.
    callbacks : list, optional
        Further tuner callbacks (:class:`release.callback.Callback`), given every task's results
        after the log's.
    knowledge : str, PathLike or KnowledgeBase, optional
        A knowledge base (:mod:`release.knowledge`): read once for all tasks; model-based tuners
        start warm from it (:mod:`release.cost_model.transfer`), and every measurement and each
        task's program are added to it, so a task tuned later in the run learns from the ones
        tuned before it, and a later model from this one. Default None: cold, nothing written
        (AutoTVM's behaviour; the CLI's ``tune-model`` uses the default base unless
        ``--no-knowledge``).
    defaults : bool
        Measure each task's default schedule (TVM's untuned kernel) once, before tuning, as the
        candidate every tuned config must beat (:func:`release.measure.measurer.measure_defaults`);
        recorded in the log (``Record.default``), never re-measured on resume, not counted in
        ``n_trial``. Applying the log keeps the default where it is faster
        (:class:`release.measure.records.ApplyHistoryBest`). Default True.

    Notes
    -----
    The loop is :class:`release.scheduler.TaskScheduler` over the tasks' tuning sessions
    (:class:`release.session.TuningSession`, one per task) that share one measure option (worker
    pools) and one log: each step gives ``chunk`` trials to the task the policy (``scheduler``)
    picks and runs that task's session (ask -> measure -> tell) with the task's measurer, made
    once. Callbacks' ``on_start``/``on_finish``, the output check of each task's best config and its
    rejection summary run once per task, after its last chunk.

    Tasks are tuned in the order of their share of the end-to-end latency
    (:func:`~release.relax.extract.latency_shares`): the measured ``weight x best latency`` of the tasks the log already
    has records of, the FLOP share (``weight x flop``) standing in for the others. The scheduler's
    first round follows that order, so a budget short of one round per task reaches the tasks that
    cost the model most; the returned result lists the tasks in that order.
    """
    from ..errors import TunerError
    from ..measure import measure_option as make_option
    from ..measure.measurer import measure_missing_defaults
    from ..measure.records import log_to_file
    from ..scheduler import TaskScheduler
    from ..tuners import get_tuner

    check_n_trial(n_trial)
    if not tasks:
        raise TunerError("the model has no tunable task")
    own = measure_option is None
    opt = measure_option or make_option()
    chunk = chunk or default_chunk(opt["builder"].n_parallel)
    t0 = time.time()
    logcb = log_to_file(log)  # the one read of the shared log
    kwargs = dict(tuner_kwargs or {})
    extra = list(callbacks or [])
    if knowledge is not None and knowledge is not False:
        from ..knowledge import KnowledgeBase, log_to_knowledge
        from ..tuners import tuner_class

        base = knowledge if isinstance(knowledge, KnowledgeBase) else KnowledgeBase(knowledge, read_once=True)
        if "model" in tuner_class(tuner).knowledge_uses:  # the model-based tuners (declared on the class)
            kwargs["knowledge"] = base  # one object: read once, then kept current by the callback below
        extra.append(log_to_knowledge(base))
    if defaults:  # the untuned kernel of each task, once per machine (a resumed run has it in the log)
        measure_missing_defaults(tasks, opt, logcb)
    tuners = {t.key: get_tuner(tuner, t, seed=seed, **kwargs) for t in tasks}
    for t in tasks:  # resume every task's session from the records read above
        tuners[t.key].load_history(logcb.records(t))
    # heaviest share of the end-to-end latency first (measured where the log has data, FLOPs elsewhere)
    shares = latency_shares(tasks, tuners)
    order = sorted(range(len(tasks)), key=lambda i: -shares[i])
    tasks = [tasks[i] for i in order]
    share_of = {t.key: float(shares[i]) for t, i in zip(tasks, order)}
    used = sum(tu.trials for tu in tuners.values())
    bar = None
    if progress:
        from ..progress import progress as make_progress  # a bar on a terminal, plain lines elsewhere

        bar = make_progress(n_trial, desc="model", unit="trial", initial=min(used, n_trial))
    per_trial = [_TrialProgress(bar, share_of)] if bar is not None else []  # a chunk can take minutes

    def on_chunk(tu, gained: int) -> None:
        if bar is not None:  # the trials the callback did not see (none, unless a tuner reports fewer)
            bar.set_postfix_str(_TrialProgress.postfix(tu, share_of))
            bar.update(max(0, gained - per_trial[0].take()))

    sched = TaskScheduler(tasks, tuners, scheduler, opt, [logcb, *extra, *per_trial], chunk=chunk, seed=seed,
                          on_chunk=on_chunk)
    try:
        sched.run(n_trial)
    finally:
        if bar is not None:
            bar.close()
        if own:
            opt["builder"].close()
            opt["runner"].close()
    return TuneModelResult(tasks, tuners, time.time() - t0, default_ms=default_ms(tasks, logcb))


def default_ms(tasks: list, log) -> dict:
    """Task key -> milliseconds of the fastest successful default-schedule record of this machine
    (``Record.default``) in ``log`` (a :class:`release.measure.records.log_to_file` or a path)."""
    from ..measure.records import log_to_file

    log = log if isinstance(log, log_to_file) else log_to_file(log)
    out = {}
    for t in tasks:
        here = [r.mean_cost for r in log.defaults(t) if r.ok and t.tier(r) == "machine"]
        if here:
            out[t.key] = min(here) * 1e3
    return out


class _TrialProgress(Callback):
    """A tuner callback advancing :func:`tune_model`'s progress once per measured trial (plain lines
    every N trials or T seconds where there is no terminal, :mod:`release.progress`)."""

    def __init__(self, bar, share_of: dict):
        self.bar, self.share_of, self.seen = bar, share_of, 0

    @staticmethod
    def postfix(tu, share_of: dict) -> str:
        """The current task, its trials and best so far, its weight and share of the latency."""
        task = tu.task
        return (f"{task.name}: {tu.trials} trials, best {tu.best_cost * 1e3:.3f} ms ({tu.best_gflops:.2f} GFLOPS), "
                f"weight {task.weight}, {100 * share_of[task.key]:.0f}% of the latency")

    def take(self) -> int:
        """Trials counted since the last call."""
        n, self.seen = self.seen, 0
        return n

    def on_result(self, tuner, inputs, results) -> None:
        """Advance by the results that are trials (a re-check of the best is none)."""
        from ..measure.result import ErrorKind

        n = sum(r.error_kind != ErrorKind.WRONG_OUTPUT for r in results)
        self.seen += n
        self.bar.set_postfix_str(self.postfix(tuner, self.share_of))
        self.bar.update(n)


def tune_with_metaschedule(model: Model, target, n_trial: int, work_dir: str, number: int = 4, repeat: int = 3,
                           min_repeat_ms: int = 50, n_parallel: int | None = None, seed: int = 0,
                           prepack: bool | None = None, progress: bool = False, trial_log: str | None = None,
                           num_trials_per_iter: int | None = None, layout: str | None = None):
    """MetaSchedule's own ``tune_relax`` (evolutionary search, XGBoost model, gradient scheduler)
    with the same total budget, the fast build function and the same evaluator settings, on the
    target's threads, with weights pre-packed as TVM recommends for a CPU (``prepack``, default
    :func:`~release.relax.layout.default_prepack`; compile its database with the same value).

    Parameters
    ----------
    progress : bool
        A progress bar over the ``n_trial`` budget (trials measured, elapsed, estimated time left),
        advanced as each batch's measurements return from the runner (:func:`measured_runner`).
        MetaSchedule's task scheduler hands a batch's results to its database and measure callbacks
        only when it joins the task (when it picks the task again, or at the end: on a first pass
        over 35 tasks, 23 minutes after the first measurement), so a bar moved by a measure
        callback would stand still that long. Default False.
    trial_log : str, optional
        JSON-lines file appended (and flushed) after each joined batch: ``elapsed_s`` since tuning
        started (the join), ``measured_s`` (when the batch's last measurement returned; the
        join's time for a batch with none), ``trials`` joined so far, ``records`` in the database
        (its ``database_tuning_record.json`` lines), ``task_id``. The model benchmark tier reads it
        to place the database's first records on the wall-time axis. Default none.
    num_trials_per_iter : int, optional
        Candidates per MetaSchedule iteration. Default None: ``n_trial / (4 x tasks)`` clipped to
        [8, 64], so a small budget still reaches every task; give 64 for ``tune_relax``'s own default.
    layout : str, optional
        conv2d layout (:func:`~release.relax.extract.extract_tasks`): MetaSchedule tunes the same converted model as our
        tuners; compile its database with the same ``layout``. Default None: as imported (NCHW).

    The callbacks are MetaSchedule's defaults (``MeasureCallback.create("default")``) followed by
    the bookkeeping one above, and the database is the ``JSONDatabase`` in ``work_dir`` that
    ``tune_relax`` would make itself: the search is MetaSchedule's default.

    Returns
    -------
    (database, wall_seconds)
    """
    from tvm.s_tir import meta_schedule as ms

    import functools

    from ..measure._worker import init_runner
    from ..target import ensure_tensor_intrinsics, host_cores, resolve_target
    from ..threads import thread_count

    target = resolve_target(target)
    ensure_tensor_intrinsics(target)
    prepack = default_prepack(model, target) if prepack is None else bool(prepack)
    mod = prepare(model.mod, model.params, target, prepack=prepack, layout=layout)  # TVM's CPU recipe: cpu_weight_prepack
    for name in ("tvm.s_tir.meta_schedule", "tvm.meta_schedule"):
        logging.getLogger(name).setLevel(logging.WARNING)  # its per-iteration XGBoost DEBUG lines
    from ..strategy import fast_builder

    builder = fast_builder(target, max_workers=n_parallel or host_cores(), timeout_sec=120)
    local = ms.runner.LocalRunner(evaluator_config=ms.runner.EvaluatorConfig(
        number=number, repeat=repeat, min_repeat_ms=min_repeat_ms, enable_cpu_cache_flush=False),
        initializer=functools.partial(init_runner, thread_count(target)))  # the target's threads, as ours
    n_tasks = max(1, len(ms.relax_integration.extract_tasks(mod, target)))
    per_iter = int(num_trials_per_iter or min(64, max(8, n_trial // (4 * n_tasks))))  # small budgets reach every task
    os.makedirs(work_dir, exist_ok=True)
    database = ms.database.JSONDatabase(work_dir=work_dir, module_equality="structural")  # tune_relax's "json"
    bar = None
    if progress:
        from ..progress import progress as make_progress

        bar = make_progress(n_trial, desc="ms", unit="trial")
    t0 = time.time()
    measured: dict = {}  # artifact path -> seconds since t0 when its measurement returned
    runner = measured_runner(local, lambda inputs, _futures: _on_measured(inputs, measured, t0, bar))
    callbacks = list(ms.measure_callback.MeasureCallback.create("default"))
    callbacks.append(_trial_callback(t0, database, trial_log, measured))
    try:
        db = ms.relax_integration.tune_relax(mod, None, target, work_dir, max_trials_global=n_trial,
                                             num_trials_per_iter=per_iter, builder=builder, runner=runner,
                                             database=database, measure_callbacks=callbacks, seed=seed)
    finally:
        if bar is not None:
            bar.close()
    return db, time.time() - t0


def _on_measured(inputs, measured: dict, t0: float, bar) -> None:
    """Note when a batch's measurements returned (per artifact) and advance ``bar`` by its size."""
    now = time.time() - t0
    for inp in inputs:
        measured[str(inp.artifact_path)] = now
    if bar is not None:
        bar.update(len(inputs))


def _trial_callback(t0: float, database, trial_log: str | None, measured: dict):
    """A MetaSchedule measure callback: append one line to ``trial_log`` per joined batch (see
    :func:`tune_with_metaschedule`), with the time its measurements returned from ``measured``."""
    import json

    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    @derived_object
    class _Trials(PyMeasureCallback):
        def __init__(self):
            self.trials = 0

        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            n = len(measure_candidates)
            self.trials += n
            now = time.time() - t0
            times = [measured.pop(str(b.artifact_path)) for b in builder_results  # joined: forget them
                     if b.artifact_path is not None and str(b.artifact_path) in measured]
            if trial_log:
                with open(trial_log, "a", encoding="utf-8") as f:
                    f.write(json.dumps({"elapsed_s": now, "measured_s": min(now, max(times, default=now)),
                                        "trials": self.trials, "records": int(len(database)),
                                        "task_id": int(task_id)}) + "\n")
                    f.flush()

    return _Trials()


def measured_runner(runner, on_measured):
    """A MetaSchedule runner that runs ``runner`` and then calls ``on_measured(runner_inputs,
    futures)`` with each batch it was given, as soon as the batch's run call returns.

    MetaSchedule's ``LocalRunner`` (TVM 0.27) times a batch inside ``run`` and returns finished
    futures, so the hook fires when the batch has been measured; the task scheduler reads those
    futures only when it joins the task (``TaskSchedulerNode::JoinRunningTask``), which on a first
    pass over many tasks comes much later. :func:`tune_with_metaschedule` moves its progress bar
    here. Any ``ms.runner.Runner`` can be wrapped; the futures returned are ``runner``'s own.

    Parameters
    ----------
    runner : tvm.s_tir.meta_schedule.runner.Runner
        The runner that measures.
    on_measured : callable
        ``on_measured(list[RunnerInput], list[RunnerFuture])``; its exceptions propagate to the
        task scheduler (keep it to bookkeeping).

    Returns
    -------
    A ``PyRunner``-derived object accepted wherever MetaSchedule takes a runner (``tune_relax``,
    ``tune_tir``, :func:`release.measure.measure_option`).
    """
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.runner import PyRunner

    @derived_object
    class _MeasuredRunner(PyRunner):
        def __init__(self):
            super().__init__()
            self.inner = runner

        def run(self, runner_inputs):
            futures = self.inner.run(runner_inputs)
            on_measured(list(runner_inputs), list(futures))
            return futures

    return _MeasuredRunner()
