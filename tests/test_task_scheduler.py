"""The model's tuning loop (release.scheduler.TaskScheduler): chunks per task, one life cycle per task."""

import json
from collections import Counter

import pytest

from release import model as M
from release.callback import Callback
from release.errors import TunerError
from release.measure import load_records


class Lifecycle(Callback):
    """Counts on_start / on_finish per task and the results it sees."""

    def __init__(self):
        self.starts, self.finishes, self.results = Counter(), Counter(), Counter()

    def on_start(self, tuner, n_trial):
        self.starts[tuner.task.key] += 1

    def on_result(self, tuner, inputs, results):
        self.results[tuner.task.key] += len(results)

    def on_finish(self, tuner):
        self.finishes[tuner.task.key] += 1


def test_two_tasks_in_many_chunks_get_one_check_one_summary_one_start_and_finish_each(
        two_layer_model, fast_measure, tmp_path, monkeypatch):
    from release.check import OutputChecker

    checked = Counter()
    real_call = OutputChecker.__call__

    def counting_call(self, config):  # the real check, counted per task
        checked[self.task.key] += 1
        return real_call(self, config)

    monkeypatch.setattr(OutputChecker, "__call__", counting_call)
    tasks = M.extract_tasks(two_layer_model, "llvm")
    assert len(tasks) == 2
    log = str(tmp_path / "m.jsonl")
    life = Lifecycle()
    res = M.tune_model(tasks, 12, log, tuner="random", scheduler="round-robin", measure_option=fast_measure,
                       chunk=2, progress=False, callbacks=[life], defaults=False)
    keys = {t.key for t in tasks}
    trials = Counter(r.task for r in load_records(log) if r.error_kind != "wrong_output")
    assert sum(trials.values()) == 12 and set(trials) == keys
    assert all(n >= 4 for n in trials.values())  # each task got several chunks of 2 ...
    assert life.starts == Counter(dict.fromkeys(keys, 1))  # ... and one life cycle
    assert life.finishes == Counter(dict.fromkeys(keys, 1))
    assert sum(life.results.values()) >= 12
    assert set(checked) == keys and all(n >= 1 for n in checked.values())
    # the check walks down from the best only while outputs are wrong: one call per task when right
    wrong = Counter(r.task for r in load_records(log) if r.error_kind == "wrong_output")
    assert all(checked[k] == 1 + wrong[k] for k in keys)
    rej = tmp_path / "m.rejections.jsonl"
    lines = [json.loads(ln) for ln in rej.read_text().splitlines()] if rej.exists() else []
    assert len(lines) == len({ln["task"] for ln in lines})  # at most one summary line per task
    assert all(res.tuners[k].trials == trials[k] for k in keys)


def test_scheduler_policies_and_errors(two_layer_model, fast_measure, tmp_path):
    from release.scheduler import RoundRobin, TaskScheduler
    from release.tuners import get_tuner

    tasks = M.extract_tasks(two_layer_model, "llvm")
    tuners = {t.key: get_tuner("random", t, seed=0) for t in tasks}
    with pytest.raises(TunerError, match="unknown task scheduler 'fifo'"):
        TaskScheduler(tasks, tuners, "fifo", fast_measure)
    with pytest.raises(TunerError, match="chunk=0"):
        TaskScheduler(tasks, tuners, "gradient", fast_measure, chunk=0)
    sched = TaskScheduler(tasks, tuners, RoundRobin(tasks), fast_measure, chunk=3)
    assert [sched.next_task_id(), sched.next_task_id(), sched.next_task_id()] == [0, 1, 0]
    assert sched.run(6) == 6 and sched.chunks == [1, 1]
    assert [tu.trials for tu in sched.tuners] == [3, 3]
