"""In-model ranking (release.relax.finish): the top candidates of a model's hottest tasks timed inside the
compiled model, the choice logged beside the tuning log, resumable, applied by apply_history_best."""

import os

from release import relax as M
from release.measure import apply_history_best, load_records
from release.measure.records import IN_MODEL_TUNER, ApplyHistoryBest, in_model_choice, in_model_path
from release.measure.result import MeasureResult
from release.relax.finish import candidate_records, finish_model


def test_finishing_pass_ranks_in_the_model_logs_its_choice_and_resumes(fast_measure, tmp_path):
    model = M.load_model("tiny-cnn")
    layout = M.default_layout("llvm")
    tasks = M.extract_tasks(model, "llvm", layout=layout)
    log = str(tmp_path / "m.jsonl")
    M.tune_model(tasks, 4 * len(tasks), log, tuner="random", scheduler="round-robin", measure_option=fast_measure,
                 chunk=4, progress=False, defaults=False)
    n_log = len(load_records(log))
    seen = []
    res = finish_model(model, tasks, log, layout=layout, n_tasks=1, top_k=3, rounds=2,
                       on_task=lambda name, rows: seen.append(name))
    side = in_model_path(log)
    assert res.log == side and os.path.isfile(side)
    ranked = {r["task"] for r in res.rows}
    assert len(ranked) == 1 and seen == sorted(ranked)  # one task ranked, reported once
    (name,) = ranked
    task = next(t for t in tasks if t.name == name)
    cands = candidate_records(task, load_records(log), 3)
    rows = [r for r in res.rows if r["task"] == name]
    # every candidate timed, in the log's order alone, exactly one chosen
    assert [r["config"] for r in rows] == [list(c.config) for c in cands] and len(rows) >= 2
    assert sum(r["chosen"] for r in rows) == 1
    assert all(r["in_model_ms"] > 0 and r["spread"][0] <= r["in_model_ms"] <= r["spread"][1] for r in rows)
    assert all(r["alone_now_ms"] > 0 and r["ratio_now"] > 0 for r in rows)  # re-timed alone beside the model
    recs = load_records(side)
    assert len(recs) == len(rows) and all(r.tuner == IN_MODEL_TUNER and r.task == task.key for r in recs)
    assert all(len(r.costs) == 2 and r.trace is not None for r in recs)  # one cost per round, applicable
    assert len({r.timestamp for r in recs}) == 1  # one pass
    assert len(load_records(log)) == n_log  # the tuning log itself untouched by the pass
    assert not any(r.tuner == IN_MODEL_TUNER for r in load_records(log))
    # apply_history_best applies the in-model choice
    hist = apply_history_best(log)
    chosen = next(r for r in rows if r["chosen"])
    assert list(hist.best(task).config) == chosen["config"]
    assert list(hist.alone_best(task).config) == rows[0]["config"]
    # resumed: the same candidates are not timed again
    again = finish_model(model, tasks, log, layout=layout, n_tasks=1, top_k=3, rounds=2)
    assert again.resumed == [name] and not again.rows
    assert len(load_records(side)) == len(recs)
    # the model compiled with the chosen records still matches PyTorch
    out = M.evaluate(model, M.compile_model(model, "llvm", hist.database(tasks), layout=layout), number=1, repeat=1)
    assert out["max_abs_err"] < 1e-3


def _rec(task, config, costs, tuner="random", ts=0.0):
    return MeasureResult(task=task.key, name=task.name, target=task.target_json, config=tuple(config), costs=costs,
                         tuner=tuner, timestamp=ts, machine=task.machine, trace=[])


def test_in_model_choice_is_stale_once_tuning_found_a_new_best():
    from release import create_task

    task = create_task("tiny.matmul.1", "llvm")
    cfgs = [task.config_space.get(i) for i in range(3)]
    a, b, c = cfgs
    alone = [_rec(task, a, [1e-3]), _rec(task, b, [1.1e-3])]
    in_model = [_rec(task, a, [2e-3, 2e-3], IN_MODEL_TUNER, 5.0), _rec(task, b, [1.5e-3, 1.6e-3], IN_MODEL_TUNER, 5.0)]
    hist = ApplyHistoryBest(alone, in_model)
    assert hist.best(task).config == b and hist.alone_best(task).config == a
    # a later pass replaces an earlier one
    later = in_model + [_rec(task, a, [1e-3], IN_MODEL_TUNER, 9.0), _rec(task, b, [3e-3], IN_MODEL_TUNER, 9.0)]
    assert in_model_choice(later, task, alone[0]).config == a
    # tuning found c, faster alone, after the pass: the pass no longer covers the best, alone decides
    newer = alone + [_rec(task, c, [0.5e-3])]
    assert ApplyHistoryBest(newer, in_model).best(task).config == c
    assert in_model_choice(in_model, task, None) is None
