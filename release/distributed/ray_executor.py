"""The Ray executor of :class:`release.scheduler.TaskScheduler`: one long-lived Ray actor per tuning task.

The scheduler's policy picks a task; :class:`RayExecutor` hands that task's actor (:class:`TaskActor`)
a chunk of trials; up to the cluster's capacity (its CPUs over ``cpus_per_task``) chunks run at once,
and when one returns the policy picks the next task among the idle ones. The coordinator sees each
task through a :class:`RemoteTask` (trials, best, ``flattened``, whether it has configs left), kept
current from what every chunk returns.

An actor is made the first time its task gets a chunk and lives until the run ends:

- it rebuilds the :class:`release.task.Task` from the IRModule's TVM JSON (``tvm.ir.save_json`` /
  ``load_json``) and the target JSON (same key, checked), writes the records the coordinator
  already holds of the task into its shard (``<log>.shards/<task>.jsonl``), resumes its tuner from
  the shard and makes its own builder and runner (local to its node, or the RPC tracker);
- each chunk runs the tuner's session (:meth:`release.tuners.tuner.Tuner.run_trials`), every
  measurement appended to the shard as it completes; the chunk returns the shard's new lines,
  which the coordinator merges into the main log (idempotent on ``(task, config)``);
- at the end it runs the task's output check and rejection summary once
  (:meth:`release.tuners.tuner.Tuner.end`) and closes its worker pools.

An actor whose process dies is restarted by Ray (``max_restarts``) and resumes from its shard; the
chunk it was running is retried (``max_task_retries``) up to the same total of trials it was
given (kept beside the shard, ``<shard>.chunk``), so nothing is measured twice and no trial is
added. Actors reserve no CPU (an idle one holds none, so a model with more tasks than CPUs never
waits for an actor); the number of chunks at once is what follows the cluster's CPUs.

Ray is imported only in :mod:`release.distributed`.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid

from ..callback import Callback
from ..errors import TunerError
from .cluster import ClusterError, _read_lines, connect, make_measure_option, merge_lines, shard_path

logger = logging.getLogger(__name__)


class TaskActor:
    """Body of one task's Ray actor (wrapped by ``ray.remote`` in :class:`RayExecutor`).

    Parameters
    ----------
    mod_json, target_json : str
        The task's IRModule (``tvm.ir.save_json``) and target (``Task.target_json``).
    name, weight, key : str, int, str
        The task's name, weight and key (the rebuilt task must have this key).
    tuner, seed, tuner_kwargs : str, int, dict
        ``get_tuner(tuner, task, seed=seed, **tuner_kwargs)``.
    measure_args : dict
        :class:`release.measure.MeasureConfig` fields (:func:`release.distributed.cluster.make_measure_option`).
    shard : str
        Absolute path of the task's log shard.
    prior : list[str]
        Record lines of the task the coordinator holds (written into the shard first).
    cpus : int
        The builder's default worker count.

    Raises
    ------
    TunerError
        The rebuilt task's key differs from ``key``.
    """

    def __init__(self, mod_json: str, target_json: str, name: str, weight: int, key: str, tuner: str, seed: int,
                 measure_args: dict, shard: str, prior: list, cpus: int, tuner_kwargs: dict):
        import tvm

        from ..measure.records import log_to_file
        from ..task import Task
        from ..tuners import get_tuner

        task = Task(tvm.ir.load_json(mod_json), json.loads(target_json), name=name, weight=weight)
        if task.key != key:
            raise TunerError(f"task {name} rebuilt on the Ray worker has key {task.key}, expected {key}")
        self.task, self.shard = task, shard
        merge_lines(shard, prior)  # records the coordinator holds; a restart finds its own ones in the shard
        self.resumed = len(_read_lines(shard))
        with open(shard + ".pid", "w") as f:  # lets an operator (or a test) find the worker
            f.write(str(os.getpid()))
        self.log = log_to_file(shard)
        self.tuner = get_tuner(tuner, task, seed=seed, **(tuner_kwargs or {}))
        self.measure_args, self.cpus = measure_args, cpus
        self.opt = self.measurer = None
        self.cbs: list | None = None
        self.sent = 0  # shard lines already returned to the coordinator
        self.wall_s = 0.0

    def begin(self, n: int) -> None:
        """The task's begin, once: resume the tuner from the shard, ``on_start`` (``n``: the trials
        meant), its builder and runner and its measurer."""
        from ..measure import Measurer

        if self.cbs is not None:
            return
        self.cbs = self.tuner.begin([self.log, _PauseFile(self.shard)], n, resume=True)  # resumes from the shard
        self.opt = make_measure_option(self.measure_args, self.cpus)
        self.measurer = Measurer(self.task, self.opt)
        self.tuner.bind_measurer(self.measurer)

    def _upto(self, token: str, n: int) -> int:
        """The total of trials chunk ``token`` runs to: ``trials + n`` when first seen, the same
        total when the chunk is retried after a restart (read back from ``<shard>.chunk``)."""
        path = self.shard + ".chunk"
        try:
            with open(path, encoding="utf-8") as f:
                last = json.load(f)
            if last.get("token") == token:
                return int(last["upto"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        upto = self.tuner.trials + n
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"token": token, "upto": upto}, f)
        return upto

    def state(self, lines: bool = True) -> dict:
        """What the coordinator keeps of the task: trials, best (s), ``flattened``, ``has_next``,
        ``resumed`` (shard lines at this process's start), wall seconds of its chunks, pid and
        node; with ``lines``, the shard's lines not returned yet."""
        tu = self.tuner
        out = {"trials": tu.trials, "best_cost": tu.best_cost, "has_next": bool(tu.has_next()),
               "best_config": tuple(tu.best_config) if tu.best_config is not None else None,
               "flattened": bool(tu.flattened), "resumed": self.resumed, "wall_s": self.wall_s,
               "pid": os.getpid(), "node": _node_ip()}
        if lines:
            all_lines = _read_lines(self.shard)
            out["lines"], self.sent = all_lines[self.sent:], len(all_lines)
        return out

    def run_chunk(self, token: str, n: int) -> dict:
        """Measure up to ``n`` more trials (to the same total when ``token`` is retried); returns :meth:`state`."""
        self.begin(n)
        upto = self._upto(token, n)
        t0 = time.time()
        self.tuner.run_trials(self.measurer, upto, self.cbs)
        self.wall_s += time.time() - t0
        return self.state()

    def finish(self, check_output: bool = True) -> dict:
        """The task's end (output check, rejection summary, ``on_finish``), once; closes the worker
        pools; removes the shard's ``.pid`` and ``.chunk`` files (a finished task has no worker to
        find and no chunk to retry; the shard itself stays); returns :meth:`state`."""
        try:
            if self.cbs is not None:
                cbs, self.cbs = self.cbs, None
                self.tuner.end(cbs, check_output=check_output)
        finally:
            if self.opt is not None:
                self.opt["builder"].close()
                self.opt["runner"].close()
                self.opt = None
        for leftover in (self.shard + ".pid", self.shard + ".chunk", self.shard + ".paused"):
            try:
                os.remove(leftover)
            except OSError:
                pass
        return self.state()


class _PauseFile(Callback):
    """Pauses the actor once at a known point: after a measurement, an actor that finds
    ``<shard>.pause`` takes it (renames it ``<shard>.paused``, then writes its pid into it) and waits,
    checking every 0.1 s, until ``<shard>.paused`` is removed. One actor takes one pause file (the
    rename is atomic), so a restarted actor does not pause again. An operator or a test stops or kills
    one task's worker mid-chunk without a race; without the file it costs one ``os.path.exists`` per
    measurement."""

    def __init__(self, shard: str):
        self.shard = shard

    def on_result(self, tuner, inputs, results) -> None:
        flag, paused = self.shard + ".pause", self.shard + ".paused"
        if not os.path.exists(flag):
            return
        try:
            os.rename(flag, paused)
        except OSError:  # another actor took it
            return
        with open(paused + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(paused + ".tmp", paused)
        while os.path.exists(paused):
            time.sleep(0.1)


def _node_ip() -> str:
    try:
        import ray

        return ray.util.get_node_ip_address()
    except Exception:  # noqa: BLE001
        return "?"


class RemoteTask:
    """The coordinator's view of a task tuned by a :class:`TaskActor` (what the scheduler's policies
    read): ``trials``, ``best_cost`` (s), ``best_config``, ``flattened``, :meth:`has_next`; plus
    ``resumed``, ``wall_s`` and ``node`` for the summary.

    Parameters
    ----------
    task : Task
    trials : int
        Trials the coordinator's log holds of the task (this machine's).
    best_cost : float
        Their best mean run time (s; ``inf`` without one).
    best_config : tuple, optional
    """

    def __init__(self, task, trials: int = 0, best_cost: float = float("inf"), best_config=None):
        self.task, self.trials, self.best_cost, self.best_config = task, int(trials), best_cost, best_config
        self.flattened, self.alive = False, True
        self.resumed, self.wall_s, self.node, self.pid = 0, 0.0, "", 0

    def has_next(self) -> bool:
        """Whether the task may get another chunk (configs left, its actor alive)."""
        return self.alive

    @property
    def best_gflops(self) -> float:
        return self.task.flop / self.best_cost / 1e9 if self.best_config is not None and self.best_cost > 0 else 0.0

    def update(self, state: dict) -> None:
        """Take an actor's :meth:`TaskActor.state`."""
        self.trials, self.best_cost, self.flattened = state["trials"], state["best_cost"], state["flattened"]
        self.best_config = state["best_config"]
        self.resumed, self.wall_s, self.node, self.pid = state["resumed"], state["wall_s"], state["node"], state["pid"]
        self.alive = self.alive and state["has_next"]


class RayExecutor:
    """Executor of :class:`release.scheduler.TaskScheduler` over one :class:`TaskActor` per task.

    Ray is joined (:func:`release.distributed.cluster.connect`) when the first chunk is handed
    out, so a run with nothing left to tune never contacts ``address``.

    Parameters
    ----------
    log : str
        Main log: each chunk's new shard lines are merged into it as the chunk returns.
    tuner, seed, tuner_kwargs : str, int, dict
        Every task's tuner.
    measure_args : dict
        Validated :class:`release.measure.MeasureConfig` fields.
    held : dict
        Task key -> record lines of the task the coordinator holds (handed to its actor).
    address, num_cpus, connect_timeout
        As :func:`release.distributed.cluster.connect`.
    cpus_per_task : int
        CPUs one chunk counts against the cluster's (and the builder's default worker count).
    max_retries : int
        Restarts of a dead actor, and retries of the chunk it was running.

    Raises
    ------
    ClusterError
        From :meth:`submit` (no cluster at ``address``) and :meth:`finish` (tasks that failed for good).
    """

    def __init__(self, log: str, tuner: str, seed: int, measure_args: dict, held: dict,
                 address: str | None = "local", num_cpus: int | None = None, connect_timeout: float = 10.0,
                 cpus_per_task: int = 1, max_retries: int = 3, tuner_kwargs: dict | None = None,
                 check_output: bool = True):
        self.log, self.tuner, self.seed, self.args, self.held = log, tuner, seed, measure_args, held
        self.address, self.num_cpus, self.connect_timeout = address, num_cpus, connect_timeout
        self.cpus, self.max_retries, self.tuner_kwargs = int(cpus_per_task), int(max_retries), tuner_kwargs or {}
        self.check_output = check_output
        self.tasks: list = []
        self.states: list = []
        self.actors: dict[int, object] = {}
        self.inflight: dict = {}  # ObjectRef -> task index
        self.failed: dict[int, str] = {}
        self.started = self.connected = False
        self.run_id = uuid.uuid4().hex[:12]
        self.seq = 0
        self._capacity = 1

    def bind(self, tasks, states) -> None:
        """The scheduler's tasks and their :class:`RemoteTask` s (same order)."""
        self.tasks, self.states = list(tasks), list(states)

    @property
    def capacity(self) -> int:
        """Chunks at once: the cluster's CPUs over ``cpus_per_task`` (at least 1; 1 before Ray is joined)."""
        return self._capacity

    @property
    def begun(self) -> list[int]:
        """Indices of the tasks that have an actor."""
        return sorted(self.actors)

    def _connect(self) -> None:
        import ray

        os.makedirs(f"{self.log}.shards", exist_ok=True)
        self.started = connect(self.address, num_cpus=self.num_cpus, timeout=self.connect_timeout)
        self.connected = True
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self._capacity = max(1, cpus // max(1, self.cpus))
        self._remote = ray.remote(num_cpus=0, max_restarts=self.max_retries, max_task_retries=self.max_retries,
                                  scheduling_strategy="SPREAD")(TaskActor)
        logger.info("ray: %d chunk(s) at once (%d CPUs, %d per task)", self._capacity, cpus, self.cpus)

    def _actor(self, i: int):
        import tvm

        if i not in self.actors:
            t = self.tasks[i]
            shard = os.path.abspath(shard_path(self.log, t))
            self.actors[i] = self._remote.remote(
                tvm.ir.save_json(t.mod), t.target_json, t.name, int(t.weight), t.key, self.tuner, self.seed,
                self.args, shard, self.held.get(t.key, []), self.cpus, self.tuner_kwargs)
        return self.actors[i]

    def submit(self, i: int, n: int) -> None:
        """Hand task ``i``'s actor (made on its first chunk) up to ``n`` more trials."""
        if not self.connected:
            self._connect()
        self.seq += 1
        ref = self._actor(i).run_chunk.remote(f"{self.run_id}:{self.seq}", int(n))
        self.inflight[ref] = i

    def _failure(self, i: int, err: Exception) -> None:
        msg = [l.strip() for l in str(err).splitlines() if l.strip()]
        self.failed[i] = msg[-1][:200] if msg else repr(err)
        self.states[i].alive = False
        logger.warning("ray: %s failed: %s", self.tasks[i].name, self.failed[i])

    def wait(self) -> list[tuple[int, int]]:
        """Block until a chunk returns; merge its new records into the log; ``[(i, trials gained)]``
        (0 for a task whose actor failed for good: it gets no further chunk)."""
        import ray

        ready = []
        while not ready:
            ready, _ = ray.wait(list(self.inflight), num_returns=1, timeout=30.0)
        out = []
        for ref in ready:
            i = self.inflight.pop(ref)
            st = self.states[i]
            try:
                res = ray.get(ref)
            except Exception as err:  # noqa: BLE001 - an actor that died for good, or raised
                self._failure(i, err)
                out.append((i, 0))
                continue
            before = st.trials
            n = merge_lines(self.log, res["lines"])
            st.update(res)
            gained = max(0, st.trials - before)
            if gained == 0:
                st.alive = False  # the tuner has nothing new: no further chunk
            logger.info("ray: %s on %s (pid %d): %d trials (+%d), %d records merged, %.1f s in chunks",
                        self.tasks[i].name, st.node, st.pid, st.trials, gained, n, st.wall_s)
            out.append((i, gained))
        return out

    def finish(self, indices) -> None:
        """Each given task's end in its actor (output check, rejection summary), all at once; their
        records merged; the actors released.

        Raises
        ------
        ClusterError
            Tasks that failed for good (after ``max_retries`` restarts), each named with its error;
            their measured records are kept (in the shards, merged into the log).
        """
        if not self.actors:  # Ray never joined, or no task began
            return
        import ray

        if self.inflight:  # the run was interrupted: no end, release the actors
            self.inflight.clear()
            self._release()
            return
        refs = {self.actors[i].finish.remote(self.check_output): i for i in indices if i not in self.failed}
        for ref, i in refs.items():
            try:
                res = ray.get(ref)
            except Exception as err:  # noqa: BLE001
                self._failure(i, err)
                continue
            merge_lines(self.log, res["lines"])
            self.states[i].update(res)
        self._release()
        if self.failed:
            raise ClusterError(
                f"{len(self.failed)} task(s) failed on the Ray cluster after {self.max_retries} retries "
                f"(their records are kept in {self.log}): "
                + "; ".join(f"{self.tasks[i].name}: {m}" for i, m in sorted(self.failed.items())))

    def _release(self) -> None:
        import ray

        for a in self.actors.values():
            try:
                ray.kill(a, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actors.clear()

    def close(self) -> None:
        """Shut Ray down if this executor started or joined it."""
        if self.started:
            import ray

            ray.shutdown()
            self.started = False
