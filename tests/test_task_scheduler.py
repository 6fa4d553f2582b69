"""The model's tuning loop (release.scheduler.TaskScheduler): chunks per task, one life cycle per task."""

import json
from collections import Counter

import pytest

from release import relax as M
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


class _Stand:
    """A task's state as a remote executor keeps it: what the policies read."""

    def __init__(self):
        self.trials, self.best_cost, self.best_config, self.flattened = 0, float("inf"), None, False

    def has_next(self):
        return True


class _TwoAtOnce:
    """An executor running two chunks at once; a chunk returns in the order it was handed out and
    books its trials (the best improving with them)."""

    capacity = 2

    def bind(self, tasks, tuners):
        self.tuners, self.queue, self.handed, self.finished = tuners, [], [], None

    @property
    def begun(self):
        return sorted({i for i, _ in self.handed})

    def submit(self, i, n):
        assert i not in [j for j, _ in self.queue], "a task with a chunk in flight got another"
        self.queue.append((i, n))
        self.handed.append((i, n))

    def wait(self):
        i, n = self.queue.pop(0)
        tu = self.tuners[i]
        tu.trials += n
        tu.best_config, tu.best_cost = (0,), 1.0 / tu.trials
        return [(i, n)]

    def finish(self, indices):
        self.finished = list(indices)


class _Named:
    def __init__(self, key, flop=1.0, weight=1):
        self.key, self.name, self.flop, self.weight = key, key, flop, weight


def test_an_executor_with_capacity_runs_chunks_at_once_and_the_policy_picks_among_the_idle():
    """Two chunks in flight; when one returns, the policy picks the next task among the idle ones;
    in-flight trials count against the budget; each begun task ends once."""
    from release.scheduler import FixedBudgets, TaskScheduler

    tasks = [_Named("a"), _Named("b"), _Named("c")]
    ex = _TwoAtOnce()
    sched = TaskScheduler(tasks, {t.key: _Stand() for t in tasks}, "round-robin", chunk=3, executor=ex)
    assert sched.run(10) == 10
    assert ex.handed == [(0, 3), (1, 3), (2, 3), (0, 1)]
    assert ex.finished == [0, 1, 2] and sched.chunks == [2, 1, 1]
    # budgets fixed up front: each task's chunks stop at its budget
    ex = _TwoAtOnce()
    sched = TaskScheduler(tasks, {t.key: _Stand() for t in tasks}, FixedBudgets(tasks, [5, 2, 3]), chunk=3,
                          executor=ex)
    assert sched.run(10) == 10
    assert ex.handed == [(0, 3), (1, 2), (0, 2), (2, 3)]
    with pytest.raises(TunerError, match="2 budgets for 3 tasks"):
        FixedBudgets(tasks, [1, 2])
