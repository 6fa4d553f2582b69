"""Tune a model's tasks on a Ray cluster: one Ray task per tuning task, each with its own log shard.

How a run goes (:func:`tune_model_ray`):

1. The trial budget is split over the tasks, fixed up front (every task runs at once, so the
   sequential task schedulers of :mod:`release.scheduler` do not apply): ``split="equal"``
   (default; the remainder goes to the heaviest tasks first) or ``split="flop"`` (proportional to
   ``weight * flop``, at least one trial per task).
2. Resume: shards already on disk (``<log>.shards/``) are merged into the main log, and a task
   with as many records as its budget is not started again. So a coordinator killed and
   restarted with the same arguments measures nothing twice.
3. Each remaining task becomes one Ray task (``num_cpus=cpus_per_task``, ``max_retries``). The Ray
   worker rebuilds the :class:`release.task.Task` from the IRModule's TVM JSON
   (``tvm.ir.save_json`` / ``load_json``) and the target JSON (same key, checked), makes its own
   builder and runner (local to that Ray node, or the RPC tracker), and runs
   ``get_tuner(...).tune(budget, callbacks=[log_to_file(shard)])``. Every measurement is flushed
   to the shard as it completes; a retried Ray task (its worker died) reopens the shard and
   resumes from it. The records the coordinator already holds are handed in too, so a retry on
   another node (no shared disk) still does not re-measure them.
4. As each Ray task finishes it returns its shard's records; the coordinator appends to the main
   log those it does not have yet (key ``(task, config)``: merging is idempotent).

Ray is imported only here: without ``--ray`` nothing needs it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import time
from dataclasses import dataclass
from typing import Sequence

from ..errors import ReleaseError, TunerError, check_n_trial
from ..measure.records import Record

logger = logging.getLogger(__name__)


class ClusterError(ReleaseError):
    """A Ray cluster that cannot be used (no answer at the address, Ray not installed, ...)."""


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


def make_measure_option(measure_args: dict | None, cpus: int = 1) -> dict:
    """Builder and runner from ``measure_args`` (made inside a Ray worker, or to check up front):
    :meth:`release.measure.MeasureConfig.make_option` with the builder's ``n_parallel`` defaulting
    to ``cpus`` (the Ray task's CPUs); an RPC runner's ``n_parallel`` defaults to the key's free
    devices.

    Raises
    ------
    TunerError
        Unknown keys or bad values.
    """
    from ..measure.config import MeasureConfig

    return MeasureConfig.from_dict(measure_args).make_option(cpus=cpus)


def split_budget(tasks: Sequence, n_trial: int, split: str = "equal") -> list[int]:
    """Trials per task (same order as ``tasks``), summing to ``n_trial``.

    ``"equal"``: ``n_trial // len(tasks)`` each, the remainder one by one to the first tasks
    (:func:`release.model.extract_tasks` sorts heaviest first). ``"flop"``: proportional to
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


def shard_path(log: str, task) -> str:
    """``<log>.shards/<task name>.<hash>.jsonl``: the log shard of ``task``."""
    name, _, digest = task.key.rpartition("/")
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:80]
    return os.path.join(f"{log}.shards", f"{safe}.{digest}.jsonl")


def _read_lines(path: str) -> list[str]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        return [l.rstrip("\n") for l in f if l.strip()]


def _ident(line: str):
    try:
        d = json.loads(line)
        return d["task"], tuple(int(x) for x in d["config"])
    except (ValueError, KeyError, TypeError):
        return None


def merge_lines(log: str, lines: Sequence[str]) -> int:
    """Append to ``log`` the record lines whose ``(task, config)`` it does not hold yet.

    Idempotent: merging the same shard twice adds nothing. Unreadable lines are skipped.

    Returns
    -------
    int
        Records appended.
    """
    have = {i for i in map(_ident, _read_lines(log)) if i is not None}
    new = []
    for line in lines:
        i = _ident(line)
        if i is not None and i not in have:
            have.add(i)
            new.append(line)
    if new:
        os.makedirs(os.path.dirname(os.path.abspath(log)), exist_ok=True)
        with open(log, "a", encoding="utf-8") as f:
            f.write("".join(l + "\n" for l in new))
            f.flush()
            os.fsync(f.fileno())
    return len(new)


def merge_shards(log: str) -> int:
    """Merge every shard under ``<log>.shards/`` into ``log``; returns records appended."""
    folder = f"{log}.shards"
    if not os.path.isdir(folder):
        return 0
    n = 0
    for name in sorted(os.listdir(folder)):
        if name.endswith(".jsonl"):
            n += merge_lines(log, _read_lines(os.path.join(folder, name)))
    return n


def connect(address: str | None = "local", num_cpus: int | None = None, timeout: float = 10.0) -> bool:
    """Connect to (or start) a Ray cluster; returns True if this call started/connected Ray.

    Parameters
    ----------
    address : str
        ``"local"`` (a new cluster on this machine with ``num_cpus`` CPUs), ``"auto"`` (the cluster
        started on this machine by ``ray start``), ``"HOST:PORT"`` (a cluster's GCS address) or
        ``"ray://HOST:PORT"`` (Ray client). If Ray is already initialized it is used as is.
    timeout : float
        Seconds to wait for ``HOST:PORT`` to accept a connection.

    Raises
    ------
    ClusterError
        Ray missing, nothing answers at the address within ``timeout`` s, or Ray fails to connect.
    """
    try:
        import ray
    except ImportError:
        raise ClusterError("--ray needs Ray: pip install 'release[ray]'") from None
    if ray.is_initialized():
        return False
    address = address or "local"
    kwargs = dict(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    if address == "local":
        ray.init(num_cpus=num_cpus, **kwargs)
        return True
    if address != "auto":
        hostport = address.split("://", 1)[-1]
        host, _, port = hostport.rpartition(":")
        if not port.isdigit() or not host:
            raise ClusterError(f"bad Ray address {address!r}: give HOST:PORT (e.g. 10.0.0.5:6379), 'auto' or 'local'")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                pass
        except OSError as err:
            raise ClusterError(
                f"no Ray cluster answers at {address} ({err.strerror or err}) within {timeout:g} s; start one with "
                f"`ray start --head --port {port}` or use --ray local"
            ) from None
    try:
        if address.startswith("ray://"):
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
        else:
            ray.init(address=address, **kwargs)
    except Exception as err:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ...
        msg = [l.strip() for l in str(err).splitlines() if l.strip()]
        raise ClusterError(f"cannot join the Ray cluster at {address}: {msg[0][:300] if msg else err!r}") from None
    return True


def _tune_one(mod_json: str, target_json: str, name: str, weight: int, key: str, budget: int, tuner: str,
              seed: int, measure_args: dict, shard: str, prior: list, cpus: int, tuner_kwargs: dict) -> dict:
    """Body of the Ray task: tune one task into its shard; returns the shard's records and a summary."""
    import tvm

    from ..measure.records import log_to_file
    from ..task import Task
    from ..tuners import get_tuner

    task = Task(tvm.ir.load_json(mod_json), json.loads(target_json), name=name, weight=weight)
    if task.key != key:
        raise TunerError(f"task {name} rebuilt on the Ray worker has key {task.key}, expected {key}")
    merge_lines(shard, prior)  # records the coordinator holds; a retry finds its own ones in the shard
    resumed = len(_read_lines(shard))
    with open(shard + ".pid", "w") as f:  # lets an operator (or a test) find the worker
        f.write(str(os.getpid()))
    opt = make_measure_option(measure_args, cpus)
    tu = get_tuner(tuner, task, seed=seed, **(tuner_kwargs or {}))
    t0 = time.time()
    try:
        tu.tune(budget, opt, callbacks=[log_to_file(shard)])
    finally:
        opt["builder"].close()
        opt["runner"].close()
    return {"key": key, "lines": _read_lines(shard), "resumed": resumed, "trials": tu.trials,
            "wall_s": time.time() - t0, "pid": os.getpid(), "node": _node_ip()}


def _node_ip() -> str:
    try:
        import ray

        return ray.util.get_node_ip_address()
    except Exception:  # noqa: BLE001
        return "?"


@dataclass
class TaskSummary:
    """Per-task result read back from the merged log (what ``TuneModelResult.table`` needs)."""

    trials: int = 0
    best_cost: float = float("inf")
    best_config: tuple | None = None
    best_flops: float = 0.0
    wall_s: float = 0.0
    resumed: int = 0
    node: str = ""

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
    """Tune ``tasks`` on a Ray cluster, one Ray task per tuning task; resumable from ``log``.

    Parameters
    ----------
    tasks : list[Task]
        From :func:`release.model.extract_tasks`.
    n_trial : int
        Total measured configs over all tasks, split by ``split`` (see :func:`split_budget`).
    log : str
        Main JSON-lines log; shards live in ``<log>.shards/`` and are merged into it.
    tuner : str
        Tuner name for every task.
    measure_args : dict, optional
        Measurement settings made into a builder and runner on each Ray worker: keys of
        :data:`MEASURE_DEFAULTS` (``runner`` ``"local"``: runs on the worker's node; ``"rpc"``:
        through the tracker ``rpc_host:rpc_port`` with ``rpc_key``). See :func:`measure_args_from_cli`.
    address : str
        Ray address, see :func:`connect` (default ``"local"``: a cluster on this machine).
    num_cpus : int, optional
        CPUs of a ``"local"`` cluster (default: all), i.e. how many tasks tune at once.
    cpus_per_task : int
        CPUs each Ray task reserves (and its builder's default worker count; default 1).
    max_retries : int
        Times Ray reruns a task whose worker died; the rerun resumes from its shard (default 3).
    scheduler : str, optional
        Accepted for ``tune_model`` compatibility and ignored: all tasks run at once.

    Returns
    -------
    release.model.TuneModelResult
        ``tuners`` maps each task key to a :class:`TaskSummary` read from the merged log.

    Raises
    ------
    TunerError
        Bad ``n_trial``, ``split``, ``measure_args``, or no task.
    ClusterError
        Ray missing or no cluster at ``address`` (within ``connect_timeout`` s); a task failed for
        good (after ``max_retries``), named with its error; its measured records are kept.
    MeasureError
        ``runner="rpc"`` with no tracker or no device for the key (checked before any Ray work).
    """
    from ..model import TuneModelResult

    check_n_trial(n_trial)
    if not tasks:
        raise TunerError("the model has no tunable task")
    if scheduler not in (None, "gradient", "round-robin"):
        raise TunerError(f"unknown scheduler {scheduler!r}")
    from ..measure.config import MeasureConfig

    budgets = split_budget(tasks, n_trial, split)
    args = MeasureConfig.from_dict(measure_args).to_dict()  # validated once, here
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
    todo = [(t, b) for t, b in zip(tasks, budgets) if len(held[t.key]) < b]
    logger.info("ray: %d of %d tasks to tune (%s split: %s)", len(todo), len(tasks), split, budgets)
    extra: dict[str, dict] = {}
    if todo:
        os.makedirs(f"{log}.shards", exist_ok=True)
        started = connect(address, num_cpus=num_cpus, timeout=connect_timeout)
        try:
            extra = _run(todo, held, log, tuner, seed, args, cpus_per_task, max_retries, progress, tuner_kwargs)
        finally:
            if started:
                import ray

                ray.shutdown()
    merge_shards(log)  # anything a failed task measured
    summaries = summarize(log, tasks)
    for k, e in extra.items():
        summaries[k].wall_s, summaries[k].resumed, summaries[k].node = e["wall_s"], e["resumed"], e["node"]
    return TuneModelResult(list(tasks), summaries, time.time() - t0)


def _run(todo, held, log, tuner, seed, args, cpus, max_retries, progress, tuner_kwargs):
    import ray
    import tvm

    remote = ray.remote(num_cpus=cpus, max_retries=max_retries, retry_exceptions=False)(_tune_one)
    refs = {}
    for t, budget in todo:
        shard = os.path.abspath(shard_path(log, t))
        ref = remote.remote(tvm.ir.save_json(t.mod), t.target_json, t.name, int(t.weight), t.key, int(budget),
                            tuner, seed, args, shard, held[t.key], cpus, tuner_kwargs or {})
        refs[ref] = t
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(refs), desc="ray tasks", unit="task", dynamic_ncols=True)
    out, failed = {}, []
    pending = list(refs)
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=30.0)
            for ref in ready:
                t = refs[ref]
                try:
                    res = ray.get(ref)
                except Exception as err:  # noqa: BLE001 - a task that failed for good
                    msg = [l.strip() for l in str(err).splitlines() if l.strip()]
                    failed.append(f"{t.name}: {msg[-1][:200] if msg else err!r}")
                    continue
                n = merge_lines(log, res["lines"])
                out[t.key] = res
                logger.info("ray: %s done on %s (pid %d): %d trials, %d resumed, %d new records merged, %.1f s",
                            t.name, res["node"], res["pid"], res["trials"], res["resumed"], n, res["wall_s"])
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        if pending:
            for ref in pending:
                ray.cancel(ref, force=True)
    if failed:
        raise ClusterError(f"{len(failed)} task(s) failed on the Ray cluster after {max_retries} retries "
                           f"(their records are kept in {log}): " + "; ".join(failed))
    return out
