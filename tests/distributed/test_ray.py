"""Ray: budget split, idempotent shard merging, bad addresses in bounded time, resume without Ray,
and (slow) a real local cluster tuning tiny-cnn's tasks: an actor killed mid-chunk, the gradient
scheduler handing chunks to the actors, a killed coordinator, measurements through an RPC tracker."""

from __future__ import annotations

import json
import os
import signal
import threading

import pytest

from release.distributed.ray_tune import (ClusterError, connect, merge_lines, merge_shards, shard_path,
                                          split_budget, tune_model_ray)
from release.errors import MeasureError, TunerError

from .conftest import free_port

FAST = dict(number=1, repeat=1, min_repeat_ms=0)


class FakeTask:  # only what split_budget reads
    def __init__(self, flop, weight=1):
        self.flop, self.weight = flop, weight


def test_split_budget():
    ts = [FakeTask(100.0), FakeTask(10.0), FakeTask(1.0)]
    assert split_budget(ts, 10) == [4, 3, 3]
    assert split_budget(ts, 3) == [1, 1, 1]
    f = split_budget(ts, 114, "flop")
    assert sum(f) == 114 and f == [101, 11, 2]  # 1 each + 111 spare split 100:10:1
    assert split_budget([FakeTask(1.0, weight=9), FakeTask(1.0)], 12, "flop") == [10, 2]
    with pytest.raises(TunerError, match="fewer than the 3 tasks"):
        split_budget(ts, 2)
    with pytest.raises(TunerError, match="unknown budget split 'x'"):
        split_budget(ts, 9, "x")


def _line(task, config, cost=1e-5, target="{}"):
    return json.dumps({"task": task, "name": task, "target": target, "config": config, "costs": [cost],
                       "error_kind": "", "error_msg": ""})


def test_merge_is_idempotent(tmp_path):
    log = str(tmp_path / "m.jsonl")
    a = [_line("a/1", [0, 1]), _line("a/1", [0, 2])]
    b = [_line("b/2", [0, 1]), _line("a/1", [0, 1], cost=9.0), "not json"]
    assert merge_lines(log, a) == 2
    assert merge_lines(log, a) == 0
    assert merge_lines(log, b) == 1  # (a/1, [0, 1]) is already there: the first record wins
    lines = open(log).read().splitlines()
    assert len(lines) == 3 and json.loads(lines[0])["costs"] == [1e-5]
    os.makedirs(log + ".shards")
    with open(log + ".shards/c.jsonl", "w") as f:
        f.write(_line("c/3", [1]) + "\n" + _line("a/1", [0, 2]) + "\n")
    assert merge_shards(log) == 1 and merge_shards(log) == 0
    assert len(open(log).read().splitlines()) == 4


def test_bad_ray_address_one_line_in_bounded_time(tmp_path, matmul_task, connection_attempts):
    import ray

    from release.measure.tracker import QUERY_TIMEOUT

    assert not ray.is_initialized()
    port = free_port()
    with pytest.raises(ClusterError, match=f"no Ray cluster answers at 127.0.0.1:{port}"):
        connect(f"127.0.0.1:{port}", timeout=2)
    with pytest.raises(ClusterError, match="bad Ray address"):
        connect("nowhere", timeout=2)
    with pytest.raises(ClusterError, match="no Ray cluster answers"):
        tune_model_ray([matmul_task], 2, str(tmp_path / "l.jsonl"), address=f"ray://127.0.0.1:{port}",
                       connect_timeout=2, progress=False)
    with pytest.raises(MeasureError, match="no RPC tracker answers"):  # checked before Ray starts
        tune_model_ray([matmul_task], 2, str(tmp_path / "l.jsonl"), address="local", progress=False,
                       measure_args=dict(runner="rpc", rpc_key="k", rpc_port=port))
    # bounded: one refused attempt per address that reached the port, each with a finite timeout
    # (the given connect timeout, the tracker's query timeout), no retry
    assert [t for p, t in connection_attempts if p == port] == [2, 2, QUERY_TIMEOUT]
    assert not ray.is_initialized()


def test_restart_after_all_shards_written_measures_nothing(tmp_path, matmul_task):
    """A coordinator killed after its workers finished: the rerun merges the shards and starts no Ray."""
    import ray

    log = str(tmp_path / "r.jsonl")
    shard = shard_path(log, matmul_task)
    os.makedirs(os.path.dirname(shard))
    with open(shard, "w") as f:
        f.write("".join(_line(matmul_task.key, [0, i, 1, 1, 0], target=matmul_task.target_json) + "\n"
                        for i in range(3)))
    res = tune_model_ray([matmul_task], 3, log, address=f"127.0.0.1:{free_port()}", progress=False)
    assert not ray.is_initialized()  # nothing left to tune: the unreachable address is never used
    assert len(open(log).read().splitlines()) == 3
    assert res.tuners[matmul_task.key].trials == 3 and res.tuners[matmul_task.key].best_cost == 1e-5


def test_a_pause_file_holds_one_actor_once_at_a_measurement(tmp_path):
    """``<shard>.pause`` (what the killed-worker test below uses): the first measurement after it appears
    takes it (``<shard>.paused``, holding the pid) and waits until ``.paused`` is removed; the next
    measurement, and a restarted actor's, do not wait. Events: the test waits for the file, not a time."""
    from release.distributed.ray_executor import _PauseFile

    from .conftest import wait_for

    shard = str(tmp_path / "t.jsonl")
    pause = _PauseFile(shard)
    pause.on_result(None, [], [])  # no pause file: returns at once
    open(shard + ".pause", "w").close()
    returned = threading.Event()
    worker = threading.Thread(target=lambda: (pause.on_result(None, [], []), returned.set()), daemon=True)
    worker.start()

    def paused_pid():
        try:
            return int(open(shard + ".paused").read())
        except (OSError, ValueError):
            return 0

    assert wait_for(paused_pid, 60, "the pause to be taken", step=0.05) == os.getpid()
    assert not os.path.exists(shard + ".pause") and not returned.is_set()  # taken, and holding
    os.remove(shard + ".paused")
    assert returned.wait(60)  # released by the removal (the timeout a hang guard only)
    _PauseFile(shard).on_result(None, [], [])  # a restarted actor: the pause was taken once, nothing waits
    assert not os.path.exists(shard + ".paused")


@pytest.mark.slow
def test_an_actor_that_cannot_start_is_one_cluster_error_naming_its_task(tmp_path, matmul_task):
    """The actor's tuner cannot be made: the run ends with one ClusterError naming the task and the
    actor's error, and the local cluster it started is shut down."""
    import ray

    with pytest.raises(ClusterError, match=r"1 task\(s\) failed on the Ray cluster after 0 retries .*"
                                           r"tiny.matmul.1: .*unknown tuner 'nope'"):
        tune_model_ray([matmul_task], 2, str(tmp_path / "f.jsonl"), tuner="nope", max_retries=0, num_cpus=1,
                       measure_args=FAST, progress=False)
    assert not ray.is_initialized()


@pytest.mark.slow
def test_local_ray_cluster_tunes_tiny_cnn_and_resumes_a_killed_worker(tmp_path):
    """Two tasks tune at once on `ray.init(num_cpus=2)`; the worker of one is paused after its first
    record (``<shard>.pause``, an event: no race with the worker finishing) and SIGKILLed there; Ray
    reruns it, the rerun resumes from its shard; the merged log compiles a model that matches PyTorch."""
    import ray

    from release import relax as M
    from release.measure import apply_history_best, load_records

    from .conftest import wait_for

    model = M.load_model("tiny-cnn")
    tasks = M.extract_tasks(model, "llvm")
    assert len(tasks) >= 2
    log = str(tmp_path / "tiny.jsonl")
    n_trial = 6 * len(tasks)
    victim = tasks[0]
    shard = shard_path(log, victim)
    os.makedirs(os.path.dirname(shard))
    open(shard + ".pause", "w").close()  # the victim's actor takes it after a measurement and waits
    killed = {}

    def paused_pid():
        try:
            return int(open(shard + ".paused").read())
        except (OSError, ValueError):
            return 0

    def killer():
        pid = wait_for(paused_pid, 600, "the victim's worker to pause", step=0.1)
        killed.update(pid=pid, records=len(open(shard).read().splitlines()))
        os.kill(pid, signal.SIGKILL)  # paused: still alive, its records on disk

    th = threading.Thread(target=killer, daemon=True)
    th.start()
    try:
        res = tune_model_ray(tasks, n_trial, log, measure_args=FAST, address="local", num_cpus=2, progress=False,
                             max_retries=2)
    finally:
        if ray.is_initialized():
            ray.shutdown()
    th.join(5)
    assert killed, "the victim's worker was never seen"
    recs = load_records(log)
    assert len(recs) == n_trial
    assert len({(r.task, tuple(r.config)) for r in recs}) == n_trial  # nothing measured twice
    assert {r.task for r in recs} == {t.key for t in tasks}
    assert all(sum(r.task == t.key for r in recs) == 6 for t in tasks)
    s = res.tuners[victim.key]
    assert killed["records"] >= 1 and s.resumed >= killed["records"] and s.trials == 6  # resumed from the shard
    assert s.pid and s.pid != killed["pid"]  # the task finished in the restarted worker
    # a finished run leaves the shards (and each task's rejection summary), no worker's .pid, no chunk's .chunk
    left = os.listdir(os.path.dirname(shard))
    assert {os.path.basename(shard_path(log, t)) for t in tasks} <= set(left)
    assert [f for f in left if f.endswith((".pid", ".chunk", ".pause", ".paused"))] == [], left
    db = apply_history_best(log).database(tasks)
    out = M.evaluate(model, M.compile_model(model, "llvm", db), number=2, repeat=2)
    assert out["max_abs_err"] < 1e-4 and 0 < out["fastest_ms"] <= out["latency_ms"]
    # the coordinator run again with the same arguments: everything is done, nothing is measured
    again = tune_model_ray(tasks, n_trial, log, measure_args=FAST, address="local", num_cpus=2, progress=False)
    assert len(load_records(log)) == n_trial and not ray.is_initialized()
    assert [again.tuners[t.key].best_cost for t in tasks] == [res.tuners[t.key].best_cost for t in tasks]


@pytest.mark.slow
def test_under_ray_the_scheduler_hands_chunks_to_long_lived_actors(tmp_path):
    """`scheduler="gradient"` on `ray.init(num_cpus=2)`: both tasks' first chunks (8 trials) run at
    once, the third chunk goes to the task that returned first; each task's actor lives through its
    chunks and runs its rejection summary once."""
    import ray

    from release import relax as M
    from release.measure import load_records

    model = M.load_model("tiny-cnn")
    tasks = M.extract_tasks(model, "llvm")
    log = str(tmp_path / "sched.jsonl")
    try:
        res = tune_model_ray(tasks, 20, log, measure_args=FAST, address="local", num_cpus=2, progress=False,
                             scheduler="gradient")
    finally:
        if ray.is_initialized():
            ray.shutdown()
    recs = [r for r in load_records(log) if r.error_kind != "wrong_output"]
    ids = [(r.task, tuple(r.config)) for r in recs]
    assert len(ids) == 20 and len(set(ids)) == 20
    per_task = sorted(sum(r.task == t.key for r in recs) for t in tasks)
    assert per_task == [8, 12]  # not a split fixed up front: 8 + 8 at once, then the 4 left to one task
    assert [res.tuners[t.key].trials for t in tasks] == [sum(r.task == t.key for r in recs) for t in tasks]
    assert {t.key for t in res.tasks} == {t.key for t in tasks}
    assert all(res.tuners[t.key].node and res.tuners[t.key].wall_s > 0 for t in tasks)  # an actor reported
    rej = tmp_path / "sched.jsonl.shards"
    lines = [json.loads(ln) for p in rej.glob("*.rejections.jsonl") for ln in p.read_text().splitlines()]
    assert len(lines) == len({ln["task"] for ln in lines})  # at most one summary line per task


COORDINATOR = """
import sys
from release import relax as M
from release.distributed.ray_tune import tune_model_ray
model = M.load_model("tiny-cnn")
tasks = M.extract_tasks(model, "llvm")
tune_model_ray(tasks, int(sys.argv[2]), sys.argv[1], measure_args=dict(number=1, repeat=1, min_repeat_ms=0),
               address="local", num_cpus=2, progress=False)
print("DONE", flush=True)
"""


@pytest.mark.slow
def test_coordinator_killed_and_restarted_resumes_without_remeasuring(tmp_path):
    """SIGKILL the coordinator (and the local Ray cluster it started) once records are on disk, while
    one task's worker is paused after its first record (``<shard>.pause``: the run cannot end before the
    kill, whatever the machine's speed); the same command again finishes the run and measures no config
    twice."""
    import subprocess
    import sys

    from release import relax as M
    from release.measure import load_records

    from .conftest import kill_tree, wait_for

    log = str(tmp_path / "c.jsonl")
    n_trial = 12
    cmd = [sys.executable, "-c", COORDINATOR, log, str(n_trial)]
    held = shard_path(log, M.extract_tasks(M.load_model("tiny-cnn"), "llvm")[0])  # the coordinator's first task
    os.makedirs(os.path.dirname(held))
    open(held + ".pause", "w").close()

    def paused() -> bool:
        try:
            return int(open(held + ".paused").read()) > 0
        except (OSError, ValueError):
            return False

    def on_disk():
        ids = set()
        for p in [log] + [os.path.join(log + ".shards", f) for f in (os.listdir(log + ".shards")
                                                                       if os.path.isdir(log + ".shards") else [])]:
            if p.endswith(".jsonl") and os.path.exists(p):
                ids |= {(r.task, tuple(r.config)) for r in load_records(p)}
        return ids

    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: (paused() and len(on_disk()) >= 3) or first.poll() is not None, 600,
                 "a paused worker and three records", step=0.3)
        assert first.poll() is None, first.stdout.read()  # it cannot have ended: a worker is paused
        kill_tree(first)
    finally:
        if first.poll() is None:
            kill_tree(first)
    before = on_disk()
    assert 3 <= len(before) < n_trial
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=500)
    assert second.returncode == 0 and "DONE" in second.stdout, second.stdout[-2000:] + second.stderr[-2000:]
    recs = load_records(log)
    ids = [(r.task, tuple(r.config)) for r in recs]
    assert len(ids) == n_trial and len(set(ids)) == n_trial  # nothing measured twice, nothing lost
    assert before <= set(ids)  # every record of the killed run is in the merged log


@pytest.mark.slow
def test_ray_tasks_measure_through_the_rpc_tracker(rpc_cluster, tmp_path):
    """`measure_args` runner="rpc": each Ray task builds on its worker and runs on the tracker's devices."""
    import ray

    from release import relax as M
    from release.measure import load_records

    model = M.load_model("tiny-cnn")
    tasks = M.extract_tasks(model, "llvm")
    log = str(tmp_path / "rpc-ray.jsonl")
    args = dict(FAST, runner="rpc", rpc_key=rpc_cluster.key, rpc_host=rpc_cluster.host, rpc_port=rpc_cluster.port)
    try:
        res = tune_model_ray(tasks, 3 * len(tasks), log, measure_args=args, address="local", num_cpus=2,
                             progress=False)
    finally:
        if ray.is_initialized():
            ray.shutdown()
    recs = load_records(log)
    assert len(recs) == 3 * len(tasks) and all(r.ok and r.run_s > 0 for r in recs)
    assert all(res.tuners[t.key].trials == 3 and res.tuners[t.key].best_cost < 1 for t in tasks)
