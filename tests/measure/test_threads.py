"""Kernels are timed and run on the threads the target names (``num-cores``), in every process.

TVM's runtime defaults to half the cores on x86 (1 on a 2-core machine): these tests run in fresh
processes without ``TVM_NUM_THREADS`` so that default would show if a path forgot to set the count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from release.target import host_cores

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _fresh(code: str, timeout: float = 600) -> dict:
    """Run ``code`` in a new interpreter without TVM_NUM_THREADS/OMP_NUM_THREADS; it prints one JSON line."""
    env = {k: v for k, v in os.environ.items() if k not in ("TVM_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_thread_count_is_the_targets_num_cores():
    from release.threads import thread_count

    assert thread_count({"kind": "llvm", "num-cores": 1}) == 1
    assert thread_count({"kind": "llvm", "num-cores": 3}) == 3
    assert thread_count("llvm") == host_cores()


def test_use_threads_rejects_zero():
    from release.threads import use_threads

    with pytest.raises(ValueError, match="at least 1"):
        use_threads(0)


@pytest.mark.skipif(host_cores() < 2, reason="needs 2 usable cores")
def test_runner_worker_and_records_use_target_threads():
    """Inside the run worker TVM reports the target's num-cores (2, and 1 after a target of 1
    core), and each record states the count it was timed with."""
    res = _fresh("""
import json
from release.measure import LocalBuilder, LocalRunner, measure_option
from release.measure.measure import Measurer
from release.measure.records import Record
from release.task import create_task
from release.space import knob_space
import numpy as np
out = {}
runner = LocalRunner(number=1, repeat=1, cooldown_interval=0.0)
out["w2"] = runner.worker_threads({"kind": "llvm", "num-cores": 2})
out["w1"] = runner.worker_threads({"kind": "llvm", "num-cores": 1})
task = create_task("tiny.matmul.1", {"kind": "llvm", "num-cores": 2})
opt = measure_option(LocalBuilder(n_parallel=1, timeout=120), runner)
cfgs = task.config_space.sample(8, np.random.default_rng(0))
res = [r for r in Measurer(task, opt).measure(cfgs) if r.ok]
out["measured"] = [r.threads for r in res]
out["record"] = [Record.from_result(task, r).threads for r in res]
opt["builder"].close(); runner.close()
print(json.dumps(out))
""")
    assert res["w2"] == 2
    assert res["w1"] == 1
    assert res["measured"] and set(res["measured"]) == {2}
    assert set(res["record"]) == {2}


@pytest.mark.skipif(host_cores() < 2, reason="needs 2 usable cores")
def test_compiled_model_runs_on_target_threads():
    """The whole-model VM is timed on the target's num-cores (the CLI passes thread_count(target))."""
    res = _fresh("""
import json
from release import relax as M
from release.threads import thread_count
m = M.load_model("tiny-cnn")
target = {"kind": "llvm", "num-cores": 2}
r = M.evaluate(m, M.compile_model(m, target), number=1, repeat=1, threads=thread_count(target))
print(json.dumps({"threads": r["threads"]}))
""")
    assert res["threads"] == 2


def test_old_records_without_threads_still_load(tmp_path):
    """Logs written before the count was recorded read with ``threads == 0`` (unknown: TVM's default)."""
    from release.measure.records import Record

    line = json.dumps({"task": "k", "name": "n", "target": "{}", "config": [0], "costs": [1e-3]})
    assert Record.from_json(line).threads == 0


def test_timing_priority_values():
    """'normal' and '' leave the process alone; anything else but 'realtime' is refused by name."""
    from release.threads import timing_priority

    assert timing_priority("") == "normal"
    assert timing_priority("normal") == "normal"
    with pytest.raises(ValueError, match="RELEASE_TIMING_PRIORITY='fast'"):
        timing_priority("fast")


@pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="Linux scheduling API")
def test_run_worker_times_at_the_priority_asked_for():
    """With RELEASE_TIMING_PRIORITY=realtime the run worker (which times kernels) runs SCHED_RR when
    the process may raise its priority, and says 'normal' exactly when it may not; the parent is
    left alone."""
    res = _fresh("""
import json, os
os.environ["RELEASE_TIMING_PRIORITY"] = "realtime"
from release.measure import LocalRunner
from release.threads import timing_priority
runner = LocalRunner(number=1, repeat=1, cooldown_interval=0.0)
runner.worker_threads({"kind": "llvm", "num-cores": 1})
pool = runner._ms_runner(1).pool
policy = int(pool.submit(os.sched_getscheduler, 0).result())
runner.close()
parent = os.sched_getscheduler(0)
print(json.dumps({"worker": policy, "parent": parent, "rr": os.SCHED_RR, "other": os.SCHED_OTHER,
                  "can": os.geteuid() == 0}))
""")
    assert res["parent"] == res["other"]
    if res["can"]:
        assert res["worker"] == res["rr"]
    else:
        assert res["worker"] == res["other"]


@pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="Linux scheduling API")
def test_timing_priority_normal_undoes_realtime():
    """``timing_priority("normal")`` puts a process raised to real time back on the normal policy
    (tune-model does so around MetaSchedule's search), ``""`` changes nothing."""
    from release.threads import timing_priority

    got = timing_priority("realtime")
    try:
        assert got == ("realtime" if os.sched_getscheduler(0) == os.SCHED_RR else "normal")
        assert timing_priority("") == "normal"
        assert os.sched_getscheduler(0) == (os.SCHED_RR if got == "realtime" else os.SCHED_OTHER)
    finally:
        assert timing_priority("normal") == "normal"
    assert os.sched_getscheduler(0) == os.SCHED_OTHER


@pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="Linux scheduling API")
def test_timing_priority_covers_a_thread_pool_started_before():
    """Raised after TVM's pool already runs (tune-model times its model at the end), every thread of
    the process takes the policy, not only the caller: a pool left on the normal policy starved
    behind the real-time caller (a 12 ms model timed at 16.5 s)."""
    res = _fresh("""
import json, os
from release.threads import timing_priority, use_threads
use_threads(2)
import tvm, numpy as np
a = tvm.runtime.tensor(np.zeros(4, "float32"))
got = timing_priority("realtime")
tids = [int(t) for t in os.listdir("/proc/self/task")]
pol = sorted({os.sched_getscheduler(t) for t in tids})
timing_priority("normal")
back = sorted({os.sched_getscheduler(t) for t in tids if os.path.exists(f"/proc/self/task/{t}")})
print(json.dumps({"got": got, "pol": pol, "back": back, "rr": os.SCHED_RR, "other": os.SCHED_OTHER,
                  "n": len(tids)}))
""")
    assert res["back"] == [res["other"]]
    if res["got"] == "realtime":
        assert res["pol"] == [res["rr"]] and res["n"] >= 2
