"""The AutoTVM-style tuner loop: random and grid tuners, logs, resume, early stopping, errors."""

import json

import numpy as np
import pytest

from release import autotvm
from release.errors import RecordError, TunerError
from release.measure import LocalBuilder, LocalRunner, load_records, measure_option


def test_random_tuner_logs_every_trial_and_resumes(matmul_task, fast_measure, tmp_path):
    log = tmp_path / "t.jsonl"
    tuner = autotvm.tuner.RandomTuner(matmul_task, seed=0)
    tuner.tune(6, fast_measure, callbacks=[autotvm.callback.log_to_file(str(log))])
    recs = load_records(log)
    assert len(recs) == 6 == tuner.trials
    assert all(r.ok and r.task == matmul_task.key and r.tuner == "random" for r in recs)
    assert all(r.trace is not None and r.measure_s > 0 for r in recs)
    sp = matmul_task.config_space
    configs = [tuple(r.config) for r in recs]
    assert len(set(configs)) == 6, "no config measured twice"
    # every config is canonical, each knob index inside its legal set, and its trace decodes back to it
    assert all(sp.canonical(c) == c and all(0 <= v < d for v, d in zip(c, sp.dims)) for c in configs)
    assert all(len(c) == sp.n_knobs for c in configs)
    assert [sp.from_trace(sp.apply(c).trace) for c in configs[:2]] == configs[:2]
    best = min(recs, key=lambda r: r.mean_cost)  # the best is the fastest logged record
    assert tuner.best_config == tuple(best.config)
    assert tuner.best_gflops == pytest.approx(max(r.gflops for r in recs)) == pytest.approx(best.gflops)
    # resume: 10 in total, the 6 old ones count and none is measured again
    t2 = autotvm.tuner.RandomTuner(matmul_task, seed=0)  # same seed would re-propose the same configs
    t2.tune(10, fast_measure, callbacks=[autotvm.callback.log_to_file(str(log))])
    recs = load_records(log)
    assert len(recs) == 10 and t2.trials == 10
    assert [tuple(r.config) for r in recs[:6]] == configs  # the first run's records are kept as written
    assert len({tuple(r.config) for r in recs}) == 10  # the resumed run measured none of them again
    assert t2.best_gflops == pytest.approx(max(r.gflops for r in recs))


def test_grid_tuner_walks_grid_order(matmul_task, fast_measure, tmp_path):
    tuner = autotvm.tuner.GridSearchTuner(matmul_task)
    tuner.tune(4, fast_measure)
    sp = matmul_task.config_space
    assert tuner.visited == {sp.canonical(sp.get(i)) for i in range(4)}  # the first 4 grid points, no other
    assert tuner.trials == 4 and not tuner.session.rejections
    assert tuner.best_config in tuner.visited


def test_early_stopping(matmul_task, fast_measure):
    tuner = autotvm.tuner.RandomTuner(matmul_task, seed=1)
    tuner.tune(40, fast_measure, early_stopping=2)
    assert tuner.session.stop_reason == "early_stopping" and tuner.trials < 40
    # checked between batches of 2 (the builder's n_parallel): stops 2 or 3 trials after the best
    assert 1 <= tuner.best_iter and 2 <= tuner.trials - tuner.best_iter <= 3


def test_failed_builds_are_recorded_and_tuning_goes_on(matmul_task, tmp_path):
    log = tmp_path / "fail.jsonl"
    opt = measure_option(LocalBuilder(n_parallel=1, timeout=0.001), LocalRunner(number=1, repeat=1))
    tuner = autotvm.tuner.RandomTuner(matmul_task, seed=0)
    tuner.tune(2, opt, callbacks=[autotvm.callback.log_to_file(str(log))])  # each timeout restarts the build worker
    recs = load_records(log)
    assert len(recs) == 2
    assert all(r.error_kind == "build_timeout" and not r.ok for r in recs)
    assert len({tuple(r.config) for r in recs}) == 2 and tuner.trials == 2  # failures are trials, each once
    assert tuner.best_config is None and tuner.best_gflops == 0


@pytest.mark.parametrize("n", [0, -3, 2.5])
def test_bad_trial_counts(matmul_task, n):
    with pytest.raises(TunerError, match="n_trial"):
        autotvm.tuner.RandomTuner(matmul_task).tune(n)


def test_corrupt_log_lines_are_skipped_with_a_warning_and_kept(matmul_task, fast_measure, tmp_path, caplog):
    log = tmp_path / "c.jsonl"
    autotvm.tuner.RandomTuner(matmul_task, seed=3).tune(2, fast_measure,
                                                         callbacks=[autotvm.callback.log_to_file(str(log))])
    with open(log, "a") as f:
        f.write("{this is not json\n")
        f.write('{"half": \n')
    before = log.read_text()
    with caplog.at_level("WARNING"):
        recs = load_records(log)
    assert len(recs) == 2
    assert "skipped 2 unreadable line" in caplog.text
    t = autotvm.tuner.RandomTuner(matmul_task, seed=4)
    t.tune(3, fast_measure, callbacks=[autotvm.callback.log_to_file(str(log))])
    assert log.read_text().startswith(before)  # nothing lost
    assert len(load_records(log)) == 3


def test_log_of_another_task_is_refused(matmul_task, tmp_path):
    from release.measure import check_log_for_task

    log = tmp_path / "other.jsonl"
    log.write_text(json.dumps({"task": "resnet18.conv2d.6/abc", "name": "resnet18.conv2d.6", "target": "{}",
                               "config": [0]}) + "\n")
    with pytest.raises(RecordError, match="written for another task"):
        check_log_for_task(log, matmul_task)


def test_database_from_log_compiles_with_compile_tir(matmul_task, fast_measure, tmp_path):
    import tvm
    from tvm.s_tir.meta_schedule.database import JSONDatabase
    from tvm.s_tir.meta_schedule.tir_integration import compile_tir

    log, dbdir = tmp_path / "d.jsonl", tmp_path / "db"
    tuner = autotvm.tuner.RandomTuner(matmul_task, seed=5)
    tuner.tune(3, fast_measure, callbacks=[autotvm.callback.log_to_file(str(log)),
                                           autotvm.callback.log_to_database(str(dbdir))])
    # the JSON database on disk, read back by MetaSchedule itself
    db = JSONDatabase(work_dir=str(dbdir))
    assert len(db.get_all_tuning_records()) == 3
    sch = compile_tir(db, matmul_task.mod, matmul_task.target)
    lib = tvm.compile(sch.mod, target=matmul_task.target)
    assert matmul_task.check(lib) < 1e-3
    # the best record from the log is the database's best
    best = autotvm.apply_history_best(str(log)).best(matmul_task)
    assert tuple(best.config) == tuner.best_config


def test_records_of_another_knob_layout_resume_through_their_traces(matmul_task, fast_measure, tmp_path):
    """A log whose config vectors do not fit the current knob space (an older layout) resumes
    by replaying the stored traces; no config is measured twice."""
    log = tmp_path / "old.jsonl"
    autotvm.tuner.RandomTuner(matmul_task, seed=11).tune(3, fast_measure,
                                                          callbacks=[autotvm.callback.log_to_file(str(log))])
    rows = [json.loads(l) for l in log.read_text().splitlines()]
    truth = [tuple(r["config"]) for r in rows]
    for r in rows:
        r["config"] = r["config"] + [0, 0]  # as if written with two more knobs
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    t = autotvm.tuner.RandomTuner(matmul_task, seed=11)  # same seed: would propose the same configs again
    assert t.load_history(load_records(log)) == 3
    assert t.visited == set(truth) and t.trials == 3  # the configs the traces encode, nothing else


def test_callback_hooks_are_called_and_a_callable_object_with_its_own_hooks_is_refused(matmul_task, fast_measure):
    """A Callback's on_start/on_result/on_finish run in order; a plain callable object whose hooks
    would be dropped (a Deadline with ``start`` instead of ``on_start`` never fired) is refused."""
    from release.callback import Callback, as_callback

    seen = []

    class Spy(Callback):
        def on_start(self, tuner, n_trial):
            seen.append(("start", n_trial, tuner.trials))

        def on_result(self, tuner, inputs, results):
            seen.append(("result", len(inputs), len(results)))

        def on_finish(self, tuner):
            seen.append(("finish", tuner.trials))

    autotvm.tuner.RandomTuner(matmul_task).tune(3, fast_measure, callbacks=[Spy()])
    assert seen[0] == ("start", 3, 0) and seen[-1] == ("finish", 3)
    assert seen[1:-1] == [("result", 1, 1)] * 3

    for hook in ("start", "on_start", "on_finish", "records", "finish"):
        obj = type("Timer", (), {"__call__": lambda self, t, i, r: None, hook: lambda self, *a: None})()
        with pytest.raises(TunerError, match=rf"Timer defines {hook} but is not a release.callback.Callback"):
            as_callback(obj)
        with pytest.raises(TunerError, match="subclass release.callback.Callback"):
            autotvm.tuner.RandomTuner(matmul_task).tune(2, fast_measure, callbacks=[obj])
    plain = []
    as_callback(lambda t, i, r: plain.append(1))(None, [], [])  # AutoTVM's function form still works
    assert plain == [1]
