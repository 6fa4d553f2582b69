"""One record type: the measurer's result is the record a log stores; ``Record`` and
``MeasureResult`` are one class; logs of earlier versions load unchanged."""

import dataclasses
import json
import os

import numpy as np
import pytest

from release.measure.records import Record, load_records, log_to_file
from release.measure.result import RECORD_VERSION, MeasureResult, provenance

FIXTURES = os.path.join(os.path.dirname(__file__), os.pardir, "fixtures")

#: a line as release wrote it before threads, layout_rewrite and provenance were kept (an old log),
#: with a key this version does not know
OLD_LINE = ('{"task":"tiny.matmul.1/5169ea9674591cbc","name":"tiny.matmul.1","target":"{\\"kind\\": \\"llvm\\"}",'
            '"config":[0,60,33,0,1],"trace":null,"costs":[0.000182442,0.000195356],"error_kind":"","error_msg":"",'
            '"timestamp":1796100042.5,"build_s":0.33,"run_s":0.01,"measure_s":0.4,"search_s":0.0,"fit_s":0.0,'
            '"tuner":"random","flop":524288.0,"round":0,"version":1,"from_the_future":7}')


def test_both_names_are_one_class_everywhere():
    import release.autotvm as autotvm
    import release.measure as measure

    assert Record is MeasureResult is measure.Record is measure.MeasureResult is autotvm.MeasureResult
    assert measure.records.RECORD_VERSION == RECORD_VERSION


def test_an_old_line_loads_unchanged_and_keeps_its_values():
    rec = Record.from_json(OLD_LINE)
    old = json.loads(OLD_LINE)
    for k, v in old.items():
        if k == "config":
            assert rec.config == tuple(v)
        elif k != "from_the_future":
            assert getattr(rec, k) == v, k
    # fields it did not have take the defaults: not run on a known thread count, no provenance
    assert (rec.threads, rec.layout_rewrite, rec.release_version, rec.revision) == (0, False, "", "")
    assert rec.ok and rec.gflops == pytest.approx(524288.0 / ((0.000182442 + 0.000195356) / 2) / 1e9)
    again = json.loads(rec.to_json())
    assert list(again)[:4] == ["task", "name", "target", "config"]  # a line starts as a record does
    assert {k: again[k] for k in old if k != "from_the_future"} == {k: v for k, v in old.items()
                                                                   if k != "from_the_future"}


@pytest.mark.parametrize("log", ["tuners/replay_matmul.jsonl", "cost_model/resnet18.conv2d.2.random.s0.first128.jsonl"])
def test_committed_fixture_logs_load_and_round_trip(log):
    path = os.path.join(FIXTURES, log)
    recs = load_records(path)
    with open(path) as f:
        lines = [line for line in f if line.strip()]
    assert len(recs) == len(lines) > 0
    for rec, line in zip(recs, lines):
        d = json.loads(line)
        assert rec.config == tuple(d["config"]) and rec.costs == d["costs"] and rec.task == d["task"]
        assert Record.from_json(rec.to_json()) == rec


def test_a_measured_result_is_the_record_its_log_stores(matmul_task, fast_measure, tmp_path):
    from release.measure import Measurer
    from release.tuners import RandomTuner

    sp = matmul_task.config_space
    configs = [tuple(c) for c in sp.sample(3, np.random.default_rng(5))]
    results = Measurer(matmul_task, fast_measure).measure(configs)
    version, rev = provenance()
    for r in results:  # stamped by the measurer: a record of its task from the start
        assert (r.task, r.name, r.target, r.flop) == (matmul_task.key, matmul_task.name, matmul_task.target_json,
                                                      matmul_task.flop)
        assert (r.release_version, r.revision) == (version, rev)
        assert isinstance(r.config, tuple)
        if r.ok:
            assert isinstance(r.trace, list) and r.layout_rewrite is False  # trace JSON; no layout-free weight
    assert any(r.ok for r in results)
    tuner = RandomTuner(matmul_task, seed=0)
    cb = log_to_file(tmp_path / "one.jsonl")
    cb.on_result(tuner, [], results)
    kept = cb.records(matmul_task)
    assert all(a is b for a, b in zip(kept, results)) and len(kept) == 3  # no conversion, no copy
    assert all(r.tuner == "random" for r in results)
    assert load_records(tmp_path / "one.jsonl") == results  # what the log holds is the result, field by field


def test_from_result_still_gives_a_stamped_copy(matmul_task):
    res = MeasureResult(config=(0, 1), costs=[1e-3])
    rec = Record.from_result(matmul_task, res, tuner="xgb")
    assert rec is not res and res.task == "" and res.tuner == ""
    assert (rec.task, rec.tuner, rec.flop) == (matmul_task.key, "xgb", matmul_task.flop)
    assert rec.machine == matmul_task.machine and res.machine == ""  # the CPU model name, from the task
    assert dataclasses.replace(rec, task="", name="", target="", flop=0.0, tuner="", release_version="",
                               revision="", machine="") == res
