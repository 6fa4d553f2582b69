"""The knowledge base's shard index: a warm start reads each workload's best records without parsing the base.

Checked against a full read of the same base (:meth:`KnowledgeBase.records`), on committed records of two
workloads and three machines (two re-labelled CPU models of the class, one AVX2 machine left out), with
duplicates across shards, failed measurements, a shard cut by a crash, a shard replaced, a damaged index and
a folder where no index can be written.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import Counter
from pathlib import Path

import pytest

from release.knowledge import KnowledgeBase, knowledge_records, record_identity
from release.knowledge.index import INDEX_DIR, index_path
from release.measure import load_records
from release.target import machine_of
from release.task import create_task

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "knowledge"  # records cut from committed logs
# a task of the records' ISA class (AVX-512), named, not this machine's: the index's verdicts never depend on
# the host (an AVX2 host would filter every record out), nor on whether it is one of the records' CPU models
TARGET = {"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 2}
SOURCES = [FIXTURES / "resnet18.conv2d.9.xgb.s1.first40.jsonl", FIXTURES / "resnet18.conv2d.2.random.s0.first20.jsonl"]


def _as(rec, mcpu: str, machine: str = ""):
    d = json.loads(rec.target)
    d["mcpu"] = mcpu
    return dataclasses.replace(rec, target=json.dumps(d, sort_keys=True), machine=machine)


@pytest.fixture(scope="module")
def records():
    out = []
    for path in SOURCES:
        recs = load_records(path)
        out += recs
        out += [_as(r, "znver4", "AMD EPYC 9R14") for r in recs[:16]]  # another CPU model of the class
        out += [_as(r, "haswell") for r in recs[:10]]  # AVX2: another ISA class
        out += [dataclasses.replace(r, costs=[], error_kind="run_error", trace=[r.trace[0], r.trace[1] + [[1, 1]]])
                for r in recs[:8]]  # failed measurements: never a best record
    return out


def _fill(folder, records):
    """Two shards written by two objects that keep no index; the second repeats the first's last 30 records."""
    a = KnowledgeBase(folder, index=False)
    assert a.add(records[: len(records) // 2]) == len(records) // 2
    a.close()
    b = KnowledgeBase(folder, index=False)
    b.add(records[len(records) // 2 - 30:])
    b.close()
    return folder


def _expected(full, per):
    groups: dict = {}
    for r in full:
        if r.ok:
            groups.setdefault((r.task.rsplit("/", 1)[-1], r.target, r.machine), []).append(r)
    out = set()
    for recs in groups.values():
        out |= {record_identity(r) for r in sorted(recs, key=lambda r: r.mean_cost)[:per]}
    return out


@pytest.mark.parametrize("per", [1, 3])
def test_best_records_are_each_workloads_fastest_of_a_full_read(tmp_path, records, per):
    folder = _fill(tmp_path / "kb", records)
    task = create_task("resnet18.conv2d.9", TARGET)
    full = KnowledgeBase(folder).records(target_kind=task.target_json)
    assert full and all("haswell" not in r.target for r in full)
    best, held = KnowledgeBase(folder).best_records(task.target_json, per=per)
    assert {record_identity(r) for r in best} == _expected(full, per)
    assert len(best) == len({record_identity(r) for r in best})  # a duplicate across shards is read once
    assert held["records"] == len(full)
    assert held["workloads"] == len({r.task for r in full}) == 2
    assert held["machines"] == dict(Counter(machine_of(r.target, r.machine) for r in full))
    assert all(r.trace is not None for r in best)
    # a budget spreads about that many records over the 4 groups (2 workloads x 2 CPU models), at least 2 each
    few, _ = KnowledgeBase(folder).best_records(task.target_json, per=10, budget=4)
    assert {record_identity(r) for r in few} == _expected(full, 2)
    some, _ = KnowledgeBase(folder).best_records(task.target_json, per=10, budget=12)
    assert {record_identity(r) for r in some} == _expected(full, 3)
    # what tuners receive: only the best, but the counts of the whole class
    got = knowledge_records(folder, task, best=per)
    assert got.source == "base" and got.total == len(full) and got.workloads == 2
    assert {record_identity(r) for r in got} == _expected(full, per)
    assert got.origin().startswith(f"{len(full)} records of 2 workloads from 2 machines")


def test_index_is_kept_and_later_reads_parse_only_new_lines(tmp_path, records):
    folder = _fill(tmp_path / "kb", records)
    task = create_task("resnet18.conv2d.9", TARGET)
    first = KnowledgeBase(folder)
    first.best_records(task.target_json)
    assert first.stats["parsed"] == first.stats["lines"] > 0
    shards = KnowledgeBase(folder).shards()
    assert len(shards) == 2 and all(os.path.isfile(index_path(str(folder), s)) for s in shards)
    again = KnowledgeBase(folder)
    before, _ = again.best_records(task.target_json)
    assert again.stats["parsed"] == 0  # nothing parsed: every line is indexed
    # a writer appends to its own shard: the next read parses exactly its new lines
    writer = KnowledgeBase(folder)
    faster = [dataclasses.replace(r, costs=[c / 100 for c in r.costs], trace=[r.trace[0], r.trace[1] + [[0, 0]]])
              for r in records[:5] if r.ok]
    assert writer.add(faster) == len(faster)
    after, held = again.best_records(task.target_json, per=8)
    assert again.stats["parsed"] == len(faster)
    assert {record_identity(r) for r in faster} <= {record_identity(r) for r in after}
    assert held["records"] == len(KnowledgeBase(folder, index=False).records(target_kind=task.target_json))
    # the duplicate check of add() reads the index: the same records are not added twice
    assert KnowledgeBase(folder).add(records) == 0


def test_a_cut_last_line_a_replaced_shard_and_a_damaged_index(tmp_path, records, caplog):
    folder = _fill(tmp_path / "kb", records)
    task = create_task("resnet18.conv2d.9", TARGET)
    kb = KnowledgeBase(folder)
    kb.best_records(task.target_json)
    shard = kb.shards()[0]
    # a writer killed mid-write leaves a cut last line: skipped with a warning, never covered by the index
    with open(shard, "ab") as f:
        f.write(records[0].to_json().encode()[:100])
    caplog.clear()
    got, held = KnowledgeBase(folder).best_records(task.target_json)
    assert "unreadable line" in caplog.text
    assert json.load(open(index_path(str(folder), shard)))["size"] < os.path.getsize(shard)
    # the shard is replaced by another (a new header): its index is rebuilt, not trusted
    new = KnowledgeBase(tmp_path / "other")
    new.add(records[:3])
    new.close()
    os.replace(new.shards()[0], shard)
    fresh = KnowledgeBase(folder)
    got, _ = fresh.best_records(task.target_json, per=100)
    full = KnowledgeBase(folder, index=False).records(target_kind=task.target_json)
    assert {record_identity(r) for r in got} == _expected(full, 100)
    # a damaged index is rebuilt
    with open(index_path(str(folder), shard), "w") as f:
        f.write("{not json")
    again = KnowledgeBase(folder)
    got2, _ = again.best_records(task.target_json, per=100)
    assert {record_identity(r) for r in got2} == _expected(full, 100)
    assert again.stats["parsed"] > 0
    json.load(open(index_path(str(folder), shard)))  # whole again


def test_a_base_where_no_index_can_be_written_is_still_read(tmp_path, records):
    folder = _fill(tmp_path / "kb", records)
    (folder / INDEX_DIR).write_text("a file where the index folder would go")
    task = create_task("resnet18.conv2d.9", TARGET)
    full = KnowledgeBase(folder).records(target_kind=task.target_json)
    kb = KnowledgeBase(folder)
    got, held = kb.best_records(task.target_json, per=2)
    assert {record_identity(r) for r in got} == _expected(full, 2) and held["records"] == len(full)
    got, _ = kb.best_records(task.target_json, per=2)  # the object keeps its index in memory
    assert kb.stats["parsed"] == 0
    with pytest.raises(ValueError, match="at least 1"):
        kb.best_records(task.target_json, per=0)
