"""Tune a model's tasks on a Ray cluster: the model's task scheduler hands chunks to one Ray actor per task.

How a run goes (:func:`tune_model_ray`):

1. Resume: shards already on disk (``<log>.shards/``) are merged into the main log; each task's
   trials there (this machine's) resume the coordinator's view of it. So a coordinator killed and
   restarted with the same arguments measures nothing twice.
2. The loop is :class:`release.scheduler.TaskScheduler` with the Ray executor
   (:class:`release.distributed.ray_executor.RayExecutor`): its policy picks a task, the task's
   long-lived actor measures a chunk of trials, up to the cluster's capacity (its CPUs over
   ``cpus_per_task``) chunks at once; when one returns, the policy picks the next task among the
   idle ones. Policies: ``scheduler="gradient"`` or ``"round-robin"`` as in :func:`release.relax.tune_model`;
   without a scheduler (or with ``split="flop"``) budgets fixed up front
   (:class:`release.scheduler.FixedBudgets`, :func:`release.scheduler.split_budget`: ``"equal"``, the
   remainder to the heaviest tasks first, or ``"flop"``, proportional to ``weight * flop``), and a
   task whose log already holds its budget is not started again.
3. An actor rebuilds its :class:`release.task.Task` from the IRModule's TVM JSON and the target JSON
   (same key, checked), writes the records the coordinator holds into its shard, resumes from it
   and makes its own builder and runner (local to its node, or the RPC tracker). Every measurement
   is flushed to the shard as it completes; an actor whose process dies is restarted by Ray
   (``max_retries``) and resumes from its shard.
4. Each chunk returns the shard's new lines; the coordinator appends to the main log those it does
   not have yet (key ``(task, config)``: merging is idempotent). At the end each actor runs its
   task's output check and rejection summary once.

Ray is imported only in :mod:`release.distributed`: without ``--ray`` nothing needs it.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import Sequence

from ..errors import TunerError, check_n_trial
from ..measure.records import Record
from ..scheduler import FixedBudgets, TaskScheduler, split_budget
from .cluster import (ClusterError, _read_lines, connect, make_measure_option, merge_lines, merge_shards,
                      shard_path)
from .ray_executor import RayExecutor, RemoteTask, TaskActor

__all__ = ["ClusterError", "MEASURE_DEFAULTS", "TaskSummary", "connect", "make_measure_option",
           "measure_args_from_cli", "merge_lines", "merge_shards", "shard_path", "split_budget", "summarize",
           "tune_model_ray"]

logger = logging.getLogger(__name__)


def _measure_defaults() -> dict:
    from ..measure.config import MeasureConfig

    return MeasureConfig().to_dict()


#: keys of ``measure_args`` and their defaults: the fields of :class:`release.measure.MeasureConfig`
#: (the CLI's measurement flags; one set of defaults for the CLI, the benchmarks and Ray)
MEASURE_DEFAULTS = _measure_defaults()


def measure_args_from_cli(args) -> dict:
    """``measure_args`` for :func:`tune_model_ray` from ``release tune-model``'s parsed arguments."""
    from ..measure.config import MeasureConfig

    return MeasureConfig.from_args(args).to_dict()


def _tune_one(mod_json: str, target_json: str, name: str, weight: int, key: str, budget: int, tuner: str,
              seed: int, measure_args: dict, shard: str, prior: list, cpus: int, tuner_kwargs: dict) -> dict:
    """One task's actor life in this process (:class:`release.distributed.ray_executor.TaskActor`):
    tune it into its shard up to ``budget`` trials (resumed ones included) in one chunk, then its end;
    returns the shard's records (``lines``), ``resumed``, ``trials``, ``wall_s``, ``pid``, ``node``."""
    actor = TaskActor(mod_json, target_json, name, weight, key, tuner, seed, measure_args, shard, prior, cpus,
                      tuner_kwargs)
    try:
        actor.begin(budget)
        actor.run_chunk(uuid.uuid4().hex, max(0, int(budget) - actor.tuner.trials))
    finally:
        out = actor.finish()
    return {"key": key, "lines": _read_lines(shard), "resumed": out["resumed"], "trials": out["trials"],
            "wall_s": out["wall_s"], "pid": out["pid"], "node": out["node"]}


@dataclass
class TaskSummary:
    """Per-task result read back from the merged log (what ``TuneModelResult.table`` needs): ``trials``,
    ``best_cost`` (s), ``best_config``, ``best_flops`` (FLOP/s); from the task's actor, where it ran:
    ``wall_s`` (seconds in its chunks), ``resumed`` (shard records at its process's start), ``node`` and ``pid``
    (the process that ran its last chunk: a restarted actor's, when one was killed)."""

    trials: int = 0
    best_cost: float = float("inf")
    best_config: tuple | None = None
    best_flops: float = 0.0
    wall_s: float = 0.0
    resumed: int = 0
    node: str = ""
    pid: int = 0

    @property
    def best_gflops(self) -> float:
        return self.best_flops / 1e9


def summarize(log: str, tasks: Sequence) -> dict:
    """``{task.key: TaskSummary}`` from this machine's records in ``log``.

    ``trials``: measured configs (TVM's default schedule and output re-checks are none); the best is
    :func:`release.measure.records.best_records`' (a config whose output was found wrong is never it),
    as ``tune_model``, ``release tune`` and ``apply_history_best`` define it.
    """
    from ..measure.records import best_records, load_records
    from ..measure.result import ErrorKind

    out = {}
    recs = load_records(log)
    for t in tasks:
        s = TaskSummary()
        mine = [r for r in recs if t.owns(r) and t.tier(r) == "machine"]  # another machine's are seeds
        s.trials = sum(1 for r in mine if not r.default and r.error_kind != ErrorKind.WRONG_OUTPUT)
        best = best_records(mine).get(t.key)
        if best is not None:
            s.best_cost, s.best_config = best.mean_cost, tuple(best.config)
            s.best_flops = t.flop / best.mean_cost if best.mean_cost > 0 else 0.0
        out[t.key] = s
    return out


def tune_model_ray(tasks: list, n_trial: int, log: str, tuner: str = "random", measure_args: dict | None = None,
                   address: str | None = "local", split: str = "equal", seed: int = 0, num_cpus: int | None = None,
                   cpus_per_task: int = 1, max_retries: int = 3, progress: bool = True,
                   tuner_kwargs: dict | None = None, connect_timeout: float = 10.0, scheduler: str | None = None):
    """Tune ``tasks`` on a Ray cluster, one long-lived Ray actor per task, chunks handed out by the
    model's task scheduler; resumable from ``log``.

    Parameters
    ----------
    tasks : list[Task]
        From :func:`release.relax.extract_tasks`.
    n_trial : int
        Total measured configs over all tasks (resumed ones included).
    log : str
        Main JSON-lines log; shards live in ``<log>.shards/`` and are merged into it as chunks return.
    tuner : str
        Tuner name for every task.
    measure_args : dict, optional
        Measurement settings made into a builder and runner in each actor: keys of
        :data:`MEASURE_DEFAULTS` (``runner`` ``"local"``: runs on the actor's node; ``"rpc"``:
        through the tracker ``rpc_host:rpc_port`` with ``rpc_key``). See :func:`measure_args_from_cli`.
    address : str
        Ray address, see :func:`connect` (default ``"local"``: a cluster on this machine).
    split : str
        Budgets fixed up front (:func:`release.scheduler.split_budget`): ``"equal"`` (default) or
        ``"flop"``. Used when ``scheduler`` is None; ``"flop"`` is used whatever ``scheduler`` says.
    num_cpus : int, optional
        CPUs of a ``"local"`` cluster (default: all), i.e. how many chunks run at once.
    cpus_per_task : int
        CPUs one running chunk counts against the cluster's (and its builder's default worker count;
        default 1).
    max_retries : int
        Times Ray restarts a task's actor whose process died, and retries the chunk it was running;
        the restart resumes from its shard (default 3).
    scheduler : str, optional
        ``"gradient"`` or ``"round-robin"``: the policy of :class:`release.scheduler.TaskScheduler`
        picks the next task among the idle ones whenever a chunk returns (as in
        :func:`release.relax.tune_model`; the tasks heaviest share of the latency first). None
        (default): the ``split`` budgets.

    Returns
    -------
    release.relax.TuneModelResult
        ``tuners`` maps each task key to a :class:`TaskSummary` read from the merged log.

    Raises
    ------
    TunerError
        Bad ``n_trial``, ``split``, ``scheduler``, ``measure_args``, or no task.
    ClusterError
        Ray missing or no cluster at ``address`` (within ``connect_timeout`` s); a task failed for
        good (after ``max_retries``), named with its error; its measured records are kept.
    MeasureError
        ``runner="rpc"`` with no tracker or no device for the key (checked before any Ray work).
    """
    from ..relax import TuneModelResult, default_chunk, latency_shares

    check_n_trial(n_trial)
    if not tasks:
        raise TunerError("the model has no tunable task")
    if scheduler not in (None, "gradient", "round-robin"):
        raise TunerError(f"unknown scheduler {scheduler!r}")
    if split not in ("equal", "flop"):
        raise TunerError(f"unknown budget split {split!r}; use 'equal' or 'flop'")
    from ..measure.config import MeasureConfig

    fixed = scheduler is None or split == "flop"
    budgets = split_budget(tasks, n_trial, split) if fixed else None
    config = MeasureConfig.from_dict(measure_args)  # validated once, here
    args = config.to_dict()
    if args["runner"] == "rpc":  # fail fast, before starting Ray
        from ..measure.tracker import check_key

        check_key(args["rpc_host"], int(args["rpc_port"]), args["rpc_key"])
    t0 = time.time()
    merged = merge_shards(log)
    if merged:
        logger.info("merged %d records from shards of an earlier run into %s", merged, log)
    held: dict[str, list[str]] = {t.key: [] for t in tasks}
    for line in _read_lines(log):
        try:
            rec = Record.from_json(line)
        except (ValueError, TypeError):
            continue
        owner = next((t for t in tasks if t.owns(rec)), None)  # older releases' keys migrate here
        if owner is not None and owner.tier(rec) == "machine":  # this machine's trials, not another's
            held[owner.key].append(line)
    before = summarize(log, tasks)
    states = {t.key: RemoteTask(t, before[t.key].trials, before[t.key].best_cost, before[t.key].best_config)
              for t in tasks}
    if fixed:
        order, policy = list(tasks), FixedBudgets(tasks, budgets)
        total = sum(max(states[t.key].trials, b) for t, b in zip(tasks, budgets))
        logger.info("ray: %s split: %s", split, budgets)
    else:  # heaviest share of the end-to-end latency first, as tune_model
        shares = latency_shares(tasks, states)
        order = [tasks[i] for i in sorted(range(len(tasks)), key=lambda i: -shares[i])]
        policy, total = scheduler, n_trial
    executor = RayExecutor(log, tuner, seed, args, held, address=address, num_cpus=num_cpus,
                           connect_timeout=connect_timeout, cpus_per_task=cpus_per_task, max_retries=max_retries,
                           tuner_kwargs=tuner_kwargs)
    used = sum(st.trials for st in states.values())
    bar = None
    if progress:
        from ..progress import progress as make_progress

        bar = make_progress(total, desc="ray", unit="trial", initial=min(used, total))

    def on_chunk(state, gained: int) -> None:
        if bar is not None:
            bar.set_postfix_str(f"{state.task.name}: {state.trials} trials")
            bar.update(gained)

    chunk = default_chunk(args.get("n_parallel") or cpus_per_task)
    sched = TaskScheduler(order, states, policy, chunk=chunk, seed=seed, on_chunk=on_chunk, executor=executor)
    try:
        sched.run(total)
    finally:
        if bar is not None:
            bar.close()
        executor.close()
        merge_shards(log)  # anything a failed task measured
    summaries = summarize(log, order)
    for k, st in states.items():
        if st.node:  # an actor reported
            summaries[k].wall_s, summaries[k].resumed, summaries[k].node = st.wall_s, st.resumed, st.node
            summaries[k].pid = st.pid
    return TuneModelResult(list(order), summaries, time.time() - t0)
