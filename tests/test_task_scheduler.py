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


def test_the_ray_summary_uses_the_one_definition_of_best(matmul_task, tmp_path):
    """A config whose output was found wrong is never the best, the default schedule and the
    re-check are no trials: as best_records, tune_model and apply_history_best have it."""
    from release.distributed.ray_tune import summarize
    from release.measure.records import best_records, log_to_file
    from release.measure.result import ErrorKind, MeasureResult

    t = matmul_task
    c = [t.config_space.canonical(t.config_space.get(i)) for i in range(3)]
    recs = [MeasureResult(config=c[0], costs=[1e-4]), MeasureResult(config=c[1], costs=[2e-4]),
            MeasureResult(config=c[2], costs=[3e-4]),
            MeasureResult(config=c[0], error_kind=ErrorKind.WRONG_OUTPUT, error_msg="max |diff| 1"),
            MeasureResult(config=(), costs=[5e-5], default=True)]
    log = log_to_file(str(tmp_path / "r.jsonl"))
    log.append([r.stamp(t, "random") for r in recs])
    s = summarize(str(tmp_path / "r.jsonl"), [t])[t.key]
    assert s.trials == 3
    assert s.best_config == tuple(c[1]) and s.best_cost == pytest.approx(2e-4)
    assert best_records(log.records(t))[t.key].config == s.best_config


def test_a_config_found_wrong_never_reaches_the_database(matmul_task, tmp_path):
    """The database gets a task's records when its tuning ends, without the configs found wrong."""
    from tvm.s_tir.meta_schedule.database import JSONDatabase

    from release.measure import LocalBuilder, LocalRunner, measure_option
    from release.measure.records import log_to_database
    from release.measure.result import ErrorKind, MeasureResult
    from release.tuners import get_tuner

    def stored(folder) -> int:
        return len(JSONDatabase(work_dir=str(folder)).get_all_tuning_records())

    seen = []
    tu = get_tuner("random", matmul_task, seed=1)
    opt = measure_option(LocalBuilder(n_parallel=1), LocalRunner(number=1, repeat=1))
    try:
        tu.tune(3, opt, callbacks=[log_to_database(tmp_path / "db"), lambda tuner, inp, res: seen.extend(res)],
                check_output=False)
    finally:
        opt["builder"].close()
        opt["runner"].close()
    ok = [r for r in seen if r.ok]
    assert ok and stored(tmp_path / "db") == len(ok)  # committed at the end of tune()
    db = log_to_database(tmp_path / "db2")  # the same results, the first one then found wrong
    for r in seen:
        db.on_result(tu, [], [r])
    db.on_result(tu, [], [MeasureResult(config=ok[0].config, error_kind=ErrorKind.WRONG_OUTPUT, error_msg="diff")])
    assert stored(tmp_path / "db2") == 0  # nothing before the task's end
    db.on_finish(tu)
    assert stored(tmp_path / "db2") == len(ok) - 1
