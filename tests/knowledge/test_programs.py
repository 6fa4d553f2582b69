"""The knowledge base stores each workload's program, so tasks no registered name makes (model tasks,
users' TE) can be learned from; ``tune_model(knowledge=...)`` reads the base once and writes to it.

Real TVM builds and measurements of a tiny two-layer PyTorch model ("tune-model has no knowledge
flags"; NCHWc and model tasks "cannot be rebuilt with this key").
"""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

from release import relax as M
from release.cost_model.transfer import KnowledgeSet, rebuild_task
from release.knowledge import KnowledgeBase
from release.measure import load_records


@pytest.fixture(scope="module")
def model_tasks(two_layer_model):
    return M.extract_tasks(two_layer_model, "llvm")


def _user_task():
    from tvm import te

    from release.task import Task

    a = te.placeholder((16, 24), name="A")
    b = te.placeholder((24, 8), name="B")
    k = te.reduce_axis((0, 24), name="k")
    c = te.compute((16, 8), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return Task([a, b, c], "llvm", name="my-matmul")


def test_a_stored_program_rebuilds_the_same_task_and_damage_costs_only_that_workload(tmp_path, caplog):
    kb = KnowledgeBase(tmp_path / "kb")
    task = _user_task()
    assert rebuild_task(task.name, task.key, task.target_json) is None  # no registered name makes it
    assert kb.add_program(task) is True and kb.add_program(task) is False  # once per workload
    got = kb.program(task.key)
    assert got is not None and got.key == task.key and got.name == "my-matmul" and got.flop == task.flop
    assert rebuild_task(task.name, task.key, task.target_json, kb.program).key == task.key
    assert kb.programs() == [task.key.rsplit("/", 1)[1]]
    assert kb.program("other/0123456789abcdef") is None
    path = os.path.join(kb.path, "programs", kb.programs()[0] + ".json")
    with open(path, "w") as f:
        f.write('{"release_program": 1, "mod": "not tvm json"')  # a cut write
    with caplog.at_level(logging.WARNING, logger="release.knowledge.store"):
        assert kb.program(task.key) is None
    assert "unusable" in caplog.text and "its records are not used" in caplog.text
    assert not [n for n in os.listdir(os.path.dirname(path)) if n.endswith(".tmp")]  # no temporary left


def test_records_are_read_once_per_object_and_kept_current_by_its_own_adds(tmp_path, matmul_task):
    from release.measure import Record

    log = os.path.join(os.path.dirname(__file__), "..", "fixtures", "tuners", "replay_matmul.jsonl")
    recs = load_records(log)[:6]
    for r in recs:  # this host's target, so the target filter keeps them
        r.target = matmul_task.target_json
    KnowledgeBase(tmp_path / "kb").add(recs[:4])
    kb = KnowledgeBase(tmp_path / "kb", read_once=True)
    first = kb.records(target_kind=matmul_task.target_json)
    assert len(first) == 4
    KnowledgeBase(tmp_path / "kb").add(recs[4:5])  # another writer: not seen by the object that has read
    assert len(kb.records(target_kind=matmul_task.target_json)) == 4
    kb.add(recs[5:6])  # its own add: seen
    again = kb.records(target_kind=matmul_task.target_json)
    assert len(again) == 5 and again[-1].config == recs[5].config
    assert len(KnowledgeBase(tmp_path / "kb").records(target_kind=matmul_task.target_json)) == 6  # reads every time
    assert isinstance(again[0], Record)


def test_tune_model_with_knowledge_stores_records_and_programs_a_later_run_can_learn_from(
        model_tasks, fast_measure, tmp_path):
    tasks = model_tasks
    assert all(rebuild_task(t.name, t.key, t.target_json) is None for t in tasks)  # model tasks: no registered name
    kdir = tmp_path / "kb"
    log = str(tmp_path / "m.jsonl")
    M.tune_model(tasks, 8 * len(tasks), log, tuner="random", scheduler="round-robin", measure_option=fast_measure,
                 chunk=4, progress=False, knowledge=str(kdir))
    kb = KnowledgeBase(kdir)
    recs = kb.records(target_kind=tasks[0].target_json)
    assert len(recs) == len(load_records(log)) == 8 * len(tasks)
    assert len(kb.programs()) == len(tasks)
    cold = KnowledgeSet(recs)  # without the stored programs every model workload is skipped
    assert cold.workloads == [] and set(cold.skipped) == {t.key for t in tasks}
    warm = KnowledgeSet(recs, programs=kb.program)
    assert set(warm.workloads) == {t.key for t in tasks} and not warm.skipped
    assert warm.features.shape[1] == 329 and np.isfinite(warm.features).all()


def test_cli_tune_model_knowledge_flags_contradicting_are_one_line_before_the_model_is_imported(tmp_path, capsys):
    from release.cli import main

    rc = main(["tune-model", "--model", "tiny-cnn", "--n-trial", "4", "--log", str(tmp_path / "l.jsonl"),
               "--knowledge", str(tmp_path / "kb"), "--no-knowledge"])
    out = capsys.readouterr()
    assert rc == 2 and "importing" not in out.out
    assert out.err.strip().splitlines()[-1].startswith("release: error: --knowledge ")
    assert "contradict" in out.err
    # --knowledge-use with a tuner tune-model does not start from a base: one line, nothing imported
    rc = main(["tune-model", "--model", "tiny-cnn", "--n-trial", "4", "--log", str(tmp_path / "l.jsonl"),
               "--tuner", "ms-evolutionary", "--knowledge-use", "model"])
    out = capsys.readouterr()
    assert rc == 2 and "importing" not in out.out
    assert out.err.strip().splitlines()[-1].startswith("release: error: --knowledge-use model: tune-model starts "
                                                        "only model-based tuners")
