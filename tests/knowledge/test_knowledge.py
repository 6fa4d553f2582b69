"""Knowledge base: dedup, concurrent and killed writers, target filtering,
corrupt and versioned shards, MetaSchedule database import, and the ``release knowledge`` CLI.

Real data: records cut from committed tuning logs (tests/fixtures/knowledge/, re-made by its
make_fixtures.py); tests that need more records than a fixture holds make distinct copies of them
(:func:`_copies`). Only the MetaSchedule import test builds a TVM task (to have TVM itself write the
JSONDatabase).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import multiprocessing as mp
import os
import signal
from pathlib import Path

import pytest

from release.cli import main
from release.knowledge import KnowledgeBase, KnowledgeError, knowledge_dir, read_ms_database, record_identity
from release.measure.records import Record, load_records

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "knowledge"
XGB = FIXTURES / "resnet18.conv2d.9.xgb.s1.first40.jsonl"  # 40 distinct records, all measured
RANDOM = FIXTURES / "resnet18.conv2d.2.random.s0.first20.jsonl"  # 20 records of another workload


@pytest.fixture(scope="module")
def xgb_records() -> list[Record]:
    recs = load_records(XGB)
    assert len(recs) == 40 and all(r.ok for r in recs)
    return recs


def _copies(recs: list[Record], n: int) -> list[Record]:
    """``n`` distinct records: ``recs`` in turn, the k-th pass's copies with one more (unused) decision in
    their trace, so each pass is new to the base's dedup (:func:`record_identity` hashes the trace)."""
    out = []
    for i in range(n):
        r, k = recs[i % len(recs)], i // len(recs)
        out.append(r if k == 0 else dataclasses.replace(r, trace=[r.trace[0], r.trace[1] + [[-1, k]]]))
    return out


def _other_target(rec: Record, mcpu: str) -> Record:
    d = json.loads(rec.target)
    d["mcpu"] = mcpu
    return dataclasses.replace(rec, target=json.dumps(d, sort_keys=True))


# ---------------------------------------------------------------- dedup and reading
def test_dedup_across_two_adds_and_two_writers(tmp_path, xgb_records):
    kb = KnowledgeBase(tmp_path)
    assert kb.add_log(XGB) == 40
    assert kb.add_log(XGB) == 0  # already held: nothing written
    assert KnowledgeBase(tmp_path).add(xgb_records[:20]) == 0  # a new writer reads what is there first
    # duplicates that reach disk anyway (two writers that started before either wrote) are dropped on read
    kb2 = KnowledgeBase(tmp_path)
    kb2._known = set()  # as if it had read an empty base
    assert kb2.add(xgb_records[:30]) == 30
    assert len(kb.shards()) == 2
    recs = KnowledgeBase(tmp_path).records()
    assert len(recs) == 40
    assert [r.trace for r in recs] == [r.trace for r in xgb_records]  # first copy, in order
    kb3 = KnowledgeBase(tmp_path)
    kb3.records()
    assert kb3.stats["duplicates"] == 30 and kb3.stats["lines"] == 70


def test_identity_ignores_bool_spelling_and_target_key_order(xgb_records):
    rec = xgb_records[0]
    d = json.loads(rec.target)
    shuffled = dataclasses.replace(rec, target=json.dumps(dict(reversed(list(d.items())))))
    assert record_identity(shuffled) == record_identity(rec)
    as_ints = json.loads(json.dumps(rec.trace).replace("true", "1").replace("false", "0"))
    assert json.dumps(as_ints) != json.dumps(rec.trace)
    assert record_identity(dataclasses.replace(rec, trace=as_ints)) == record_identity(rec)
    other = dataclasses.replace(rec, trace=xgb_records[1].trace)
    assert record_identity(other) != record_identity(rec)


def test_records_filters_workload(tmp_path, xgb_records):
    kb = KnowledgeBase(tmp_path)
    kb.add_log(XGB)
    kb.add_log(RANDOM)
    assert len(kb.records()) == 60
    assert len(kb.records(workload="resnet18.conv2d.2")) == 20
    assert len(kb.records(workload=xgb_records[0].task)) == 40
    assert len(kb.records(workload=xgb_records[0].task.split("/")[1])) == 40


def test_summary_rows(tmp_path, xgb_records):
    kb = KnowledgeBase(tmp_path)
    kb.add(xgb_records)
    (row,) = kb.summary()
    ok = [r for r in xgb_records if r.ok]
    assert row["records"] == 40 and row["ok"] == len(ok)
    assert row["best_gflops"] == pytest.approx(max(r.gflops for r in ok))
    assert row["best_ms"] == pytest.approx(min(r.mean_cost for r in ok) * 1e3)
    assert row["target"] == "llvm x86_64 avx512" and row["tuners"] == ["xgb"]
    assert row["machine"] == "emeraldrapids/2c"


# ---------------------------------------------------------------- targets
def test_other_target_filtered_with_one_line(tmp_path, xgb_records, caplog):
    kb = KnowledgeBase(tmp_path)
    kb.add(xgb_records[:24])
    kb.add([_other_target(r, "haswell") for r in xgb_records[:10]])  # AVX2 records of the same workload
    cuda = [dataclasses.replace(r, target=json.dumps({"arch": "sm_90", "kind": "cuda"})) for r in xgb_records[:7]]
    kb.add(cuda)
    assert len(kb.records()) == 41
    target = xgb_records[0].target
    with caplog.at_level(logging.WARNING, logger="release.knowledge"):
        caplog.clear()
        got = kb.records(target_kind=target)
    assert len(got) == 24 and all(r.target == target for r in got)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, lines
    assert "left out 17 record(s) of other ISA classes" in lines[0]
    assert "10 on llvm x86_64 avx2" in lines[0] and "7 on cuda sm_90" in lines[0]
    # another CPU model of the same ISA class (a Zen 4 beside the Xeon's records) is not left out
    kb.add([_other_target(r, "znver4") for r in xgb_records[24:32]])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="release.knowledge"):
        got = kb.records(target_kind=target)
    assert len(got) == 32 and "left out 17 record(s)" in caplog.records[-1].getMessage()
    caplog.clear()
    assert len(kb.records(target_kind="cuda")) == 7
    assert "left out 42" in caplog.records[-1].getMessage()


# ---------------------------------------------------------------- concurrency and crashes
def _writer(path, recs, one_by_one, counter=None):
    kb = KnowledgeBase(path)
    for i in range(len(recs)) if one_by_one else [None]:
        kb.add([recs[i]] if one_by_one else recs)
        if counter is not None:
            with counter.get_lock():
                counter.value = i + 1


def test_two_concurrent_writer_processes_lose_nothing(tmp_path, xgb_records):
    ctx = mp.get_context("fork")
    many = _copies(xgb_records, 400)
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), many[k * 200:(k + 1) * 200], True))
             for k in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    kb = KnowledgeBase(tmp_path)
    got = kb.records()
    assert len(kb.shards()) == 2
    assert len(got) == 400 and kb.stats["bad_lines"] == 0
    assert {record_identity(r) for r in got} == {record_identity(r) for r in many}


def _endless_writer(path, recs, counter, three_done):
    kb = KnowledgeBase(path)
    kb._known = set()
    i = 0
    while True:  # big batches, so a kill often lands inside a write
        batch = [dataclasses.replace(r, round=i) for r in recs]
        for j, r in enumerate(batch):
            r.config = list(r.config) + [i, j]  # distinct records: identity falls back to config without a trace
            r.trace = None
        kb.add(batch)
        i += 1
        with counter.get_lock():
            counter.value = i
        if i == 3:
            three_done.set()


def test_writer_killed_mid_write_loses_nothing_written(tmp_path, xgb_records, caplog):
    ctx = mp.get_context("fork")
    counter, three_done = ctx.Value("i", 0), ctx.Event()
    p = ctx.Process(target=_endless_writer, args=(str(tmp_path), _copies(xgb_records, 64), counter, three_done))
    p.start()
    assert three_done.wait(600), "the writer never finished 3 batches"  # an event; the timeout a hang guard only
    done = counter.value
    os.kill(p.pid, signal.SIGKILL)
    p.join(120)  # a hang guard only: SIGKILL ends it
    assert done >= 3 and p.exitcode == -signal.SIGKILL
    kb = KnowledgeBase(tmp_path)
    with caplog.at_level(logging.WARNING, logger="release.knowledge"):
        got = kb.records()
    # every batch whose add() returned is there, whole, in order; at most one cut line after it
    assert len(got) >= done * 64
    assert [(r.round, r.config[-1]) for r in got] == [(i // 64, i % 64) for i in range(len(got))]
    assert kb.stats["bad_lines"] <= 1
    assert len([r for r in caplog.records if "unreadable" in r.getMessage()]) == kb.stats["bad_lines"]
    # a cut last line (what a kill inside os.write leaves) is skipped with one warning; the next
    # writer opens its own shard, so nothing is ever appended after the cut
    shard = kb.shards()[0]
    with open(shard, "ab") as f:
        f.write(b'{"task":"resnet18.conv2d.9/abc","name":"cut-he')
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="release.knowledge"):
        assert len(kb.records()) == len(got)
    assert kb.stats["bad_lines"] >= 1
    assert len(caplog.records) == 1 and "skipped" in caplog.records[0].getMessage()
    kb2 = KnowledgeBase(tmp_path)
    assert kb2.add(xgb_records[:5]) == 5
    assert kb2.shard != shard and len(kb2.records()) == len(got) + 5


# ---------------------------------------------------------------- corrupt and versioned shards
def test_corrupt_shard_and_line_skipped_with_warning(tmp_path, xgb_records, caplog):
    kb = KnowledgeBase(tmp_path)
    kb.add(xgb_records[:20])
    (tmp_path / "0-garbage.jsonl").write_bytes(b"\x00\x81\xfe not json at all\n\x02\x03\n")
    with open(kb.shard, "a") as f:
        f.write("{this line is broken\n")
    kb.add(xgb_records[20:30])  # written after the broken line, on a whole line
    with caplog.at_level(logging.WARNING, logger="release.knowledge"):
        got = KnowledgeBase(tmp_path).records()
    assert len(got) == 30
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 2
    assert any("0-garbage.jsonl: not a knowledge shard" in m for m in msgs)
    assert any("skipped 1 unreadable line(s)" in m for m in msgs)


@pytest.mark.parametrize("version,advice", [(0, "move the folder aside"), (99, "upgrade release-tvm")])
def test_unreadable_format_version_refused_with_one_line(tmp_path, xgb_records, capsys, version, advice):
    KnowledgeBase(tmp_path).add(xgb_records[:3])
    (tmp_path / "old.jsonl").write_text(json.dumps({"release_knowledge": version}) + "\n" + xgb_records[5].to_json()
                                        + "\n")
    with pytest.raises(KnowledgeError, match=f"format version {version}, this release reads 1..1") as exc:
        KnowledgeBase(tmp_path).records()
    assert advice in str(exc.value) and "\n" not in str(exc.value)
    assert main(["knowledge", "--dir", str(tmp_path), "show"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("release: error: knowledge base") and "old.jsonl" in err


def test_knowledge_dir_precedence(tmp_path, monkeypatch):
    monkeypatch.delenv("RELEASE_KNOWLEDGE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert knowledge_dir() == str(tmp_path / "cache" / "release-tvm" / "knowledge")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert knowledge_dir() == str(tmp_path / "home" / ".cache" / "release-tvm" / "knowledge")
    monkeypatch.setenv("RELEASE_KNOWLEDGE", str(tmp_path / "env"))
    assert knowledge_dir() == str(tmp_path / "env")
    assert knowledge_dir(tmp_path / "explicit") == str(tmp_path / "explicit")
    monkeypatch.setenv("RELEASE_KNOWLEDGE", "off")
    assert knowledge_dir() is None
    with pytest.raises(KnowledgeError, match="knowledge is disabled"):
        KnowledgeBase()
    (tmp_path / "afile").write_text("x")
    with pytest.raises(KnowledgeError, match="is a file, not a folder"):
        KnowledgeBase(tmp_path / "afile")


# ---------------------------------------------------------------- MetaSchedule databases
def test_metaschedule_database_dedups_with_its_log(tmp_path, caplog):
    """TVM writes a JSONDatabase of the same records as a log: importing both keeps one copy each."""
    from tvm.s_tir.meta_schedule.database import JSONDatabase

    from release.measure.records import add_to_database
    from release.task import create_task

    src = load_records(RANDOM)[:20]
    task = create_task("resnet18.conv2d.2", target=json.loads(src[0].target))
    recs = [dataclasses.replace(r, task=task.key) for r in src]  # as a log written by this task today
    log = tmp_path / "tune.jsonl"
    log.write_text("".join(r.to_json() + "\n" for r in recs))
    work = tmp_path / "msdb"
    work.mkdir()
    assert add_to_database(JSONDatabase(work_dir=str(work)), recs, task) == 20

    ms = read_ms_database(work)
    assert len(ms) == 20
    assert [m.task.split("/")[1] for m in ms] == [task.key.split("/")[1]] * 20  # same workload digest
    assert [m.costs for m in ms] == [r.costs for r in recs]
    kb = KnowledgeBase(tmp_path / "kb")
    assert kb.add_log(work) == 20
    assert kb.add_log(log) == 0  # the log's records are the database's
    kb2 = KnowledgeBase(tmp_path / "kb2")
    assert kb2.add_log(log) == 20 and kb2.add_log(work) == 0
    # duplicates on disk (written by writers that did not see each other) collapse on read too
    kb3 = KnowledgeBase(tmp_path / "kb")
    kb3._known = set()
    kb3.add(recs)
    got = KnowledgeBase(tmp_path / "kb").records()
    assert len(got) == 20
    assert all(r.name == "resnet18.conv2d.2" and r.flop == recs[0].flop for r in got)  # filled from the log
    assert max(r.gflops for r in got) == pytest.approx(max(r.gflops for r in recs))


def test_ms_database_failed_run_and_bad_folder(tmp_path):
    work = tmp_path / "ms"
    work.mkdir()
    (work / "database_workload.json").write_text('["123","AAAA"]\n')
    target = {"keys": ["cpu"], "kind": "llvm", "mcpu": "emeraldrapids", "num-cores": 2, "tag": ""}
    (work / "database_tuning_record.json").write_text(
        json.dumps([0, [[[], []], [1e10], target, []]]) + "\n" + json.dumps([0, [[[["X", [], [], []]], []], [0.5],
                                                                                 target, []]]) + "\nnot json\n")
    recs = read_ms_database(work)
    assert [r.ok for r in recs] == [False, True] and recs[0].error_kind == "run_error"
    assert recs[1].target == json.dumps({"kind": "llvm", "mcpu": "emeraldrapids", "num-cores": 2}, sort_keys=True)
    with pytest.raises(KnowledgeError, match="not a MetaSchedule database"):
        read_ms_database(tmp_path)


# ---------------------------------------------------------------- CLI
def test_cli_add_and_show(tmp_path, capsys, xgb_records):
    kdir = str(tmp_path / "kb")
    assert main(["knowledge", "add", str(XGB), str(RANDOM), "--dir", kdir]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{XGB}: 40 new of 40 record(s)"
    assert out[1] == f"{RANDOM}: 20 new of 20 record(s)"
    assert out[2].startswith(f"knowledge base {kdir}: added 60 record(s) to ")
    assert main(["knowledge", "--dir", kdir, "add", str(XGB)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"{XGB}: 0 new of 40 record(s)"

    assert main(["knowledge", "--dir", kdir, "show"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"knowledge base {kdir}: 60 records in 1 shard(s) (0 duplicates dropped, "
                      "0 unreadable lines skipped)")
    assert out[1].split() == ["ISA", "class", "machine", "workload", "records", "ok", "best", "ms", "best", "GFLOPS",
                              "tuners"]
    row = out[3].split()
    assert row[:7] == ["llvm", "x86_64", "avx512", "emeraldrapids/2c", "resnet18.conv2d.9", "40", "40"]
    best = max(r.gflops for r in xgb_records)
    assert float(row[8]) == pytest.approx(best, abs=0.006) and row[9] == "xgb"
    assert out[2].split()[4] == "resnet18.conv2d.2"

    (tmp_path / "empty").mkdir()
    assert main(["knowledge", "show", "--dir", str(tmp_path / "empty")]) == 0
    assert "empty holds no records" in capsys.readouterr().out
    assert main(["knowledge", "show", "--dir", str(tmp_path / "missing")]) == 0
    assert f"{tmp_path / 'missing'} does not exist (nothing imported yet)" in capsys.readouterr().out
    assert not (tmp_path / "missing").exists()  # showing creates nothing
    assert main(["knowledge"]) == 2  # no subcommand: usage, as `release regal`
    assert "KNOWLEDGE_COMMAND" in capsys.readouterr().out


@pytest.mark.parametrize("bad", ["missing.jsonl", "notalog.txt", "folder"])
def test_cli_bad_input_one_line_exit_2_nothing_added(tmp_path, capsys, bad):
    (tmp_path / "notalog.txt").write_text("tuner = xgb\ntrials = 64\n")
    (tmp_path / "folder").mkdir()
    kdir = tmp_path / "kb"
    assert main(["knowledge", "add", str(RANDOM), str(tmp_path / bad), "--dir", str(kdir)]) == 2
    cap = capsys.readouterr()
    assert cap.err.count("\n") == 1 and cap.err.startswith("release: error: ") and bad in cap.err
    assert "MetaSchedule database" in cap.err
    assert not kdir.exists()  # every input is read before anything is added


def _add_in_child(kb, recs):
    kb.add(recs)


def test_forked_child_of_a_writer_writes_its_own_shard(tmp_path, xgb_records):
    """A process forked from a writer (multiprocessing, Ray) never appends to the parent's shard."""
    kb = KnowledgeBase(tmp_path)
    kb.add(xgb_records[:10])
    p = mp.get_context("fork").Process(target=_add_in_child, args=(kb, xgb_records[10:20]))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    kb.add(xgb_records[20:30])  # the parent keeps its own shard
    shards = kb.shards()
    assert len(shards) == 2 and kb.shard in shards
    lines = {s: sum(1 for _ in open(s)) - 1 for s in shards}
    assert lines[kb.shard] == 20 and sum(lines.values()) == 30
    assert len(KnowledgeBase(tmp_path).records()) == 30


def test_workload_name_finds_metaschedule_records_of_it(tmp_path, xgb_records):
    """A record imported from a MetaSchedule database has no name of its own; asking by task name
    finds it once a release record of the same workload is held (in either order)."""
    rec = xgb_records[0]
    digest = rec.task.split("/")[1]
    ms = [dataclasses.replace(r, task=f"task-{digest[:8]}/{digest}", name=f"task-{digest[:8]}", tuner="ms-database",
                              config=[], flop=0.0) for r in xgb_records[30:40]]
    kb = KnowledgeBase(tmp_path)
    kb.add(ms)
    kb.add(xgb_records[:5])
    kb.add(load_records(RANDOM)[:3])
    got = kb.records(workload="resnet18.conv2d.9")
    assert len(got) == 15 and {r.name for r in got} == {"resnet18.conv2d.9"}
    assert all(r.flop == rec.flop for r in got)
    assert len(kb.records(workload="resnet18.conv2d.2")) == 3
    rows = {r["name"]: r for r in kb.summary()}
    assert set(rows) == {"resnet18.conv2d.9", "resnet18.conv2d.2"}
    row = rows["resnet18.conv2d.9"]
    assert row["records"] == 15 and row["tuners"] == ["ms-database", "xgb"]
    assert row["best_gflops"] == pytest.approx(max(r.gflops for r in got))


def test_summary_of_metaschedule_records_alone_has_no_gflops(tmp_path, xgb_records):
    digest = xgb_records[0].task.split("/")[1]
    ms = [dataclasses.replace(r, task=f"task-{digest[:8]}/{digest}", name=f"task-{digest[:8]}", tuner="ms-database",
                              flop=0.0) for r in xgb_records[:4]]
    kb = KnowledgeBase(tmp_path)
    kb.add(ms)
    (row,) = kb.summary()
    assert row["name"] == f"task-{digest[:8]}" and row["best_gflops"] is None
    assert row["best_ms"] == pytest.approx(min(r.mean_cost for r in ms) * 1e3)


def test_threads_of_one_writer_share_its_shard_and_lose_nothing(tmp_path, xgb_records):
    import threading

    kb = KnowledgeBase(tmp_path)
    many = _copies(xgb_records, 200)
    threads = [threading.Thread(target=lambda k=k: [kb.add([r]) for r in many[k * 50:(k + 1) * 50]])
               for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(kb.shards()) == 1
    got = KnowledgeBase(tmp_path).records()
    assert len(got) == 200 and {record_identity(r) for r in got} == {record_identity(r) for r in many}


def test_add_refuses_a_base_it_cannot_read(tmp_path, xgb_records):
    (tmp_path / "a.jsonl").write_text(json.dumps({"release_knowledge": 0}) + "\n")
    with pytest.raises(KnowledgeError, match="format version 0"):
        KnowledgeBase(tmp_path).add(xgb_records[:2])
    assert [p.name for p in tmp_path.iterdir()] == ["a.jsonl"]  # nothing written beside it


def test_cli_show_target_filter(tmp_path, capsys, xgb_records):
    kb = KnowledgeBase(tmp_path)
    kb.add(xgb_records[:10])
    kb.add([_other_target(r, "haswell") for r in xgb_records[:4]])
    assert main(["knowledge", "show", "--dir", str(tmp_path), "--target", "llvm"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"knowledge base {tmp_path}: 14 records") and len(out) == 4
    assert main(["knowledge", "show", "--dir", str(tmp_path), "--target", xgb_records[0].target]) == 0
    cap = capsys.readouterr()
    assert cap.out.splitlines()[0].endswith("4 of other ISA classes left out)") and len(cap.out.splitlines()) == 3
    assert main(["knowledge", "show", "--dir", str(tmp_path), "--target", "cuda"]) == 0
    assert "holds no records for cuda" in capsys.readouterr().out


def test_add_another_knowledge_base_or_one_shard(tmp_path, capsys, xgb_records):
    """A knowledge base copied from another machine or run imports whole, deduplicated."""
    other = KnowledgeBase(tmp_path / "other")
    other.add(xgb_records[:30])
    other2 = KnowledgeBase(tmp_path / "other")
    other2._known = set()
    other2.add(xgb_records[20:40])  # 10 duplicates on disk
    mine = tmp_path / "mine"
    assert main(["knowledge", "add", str(tmp_path / "other"), "--dir", str(mine)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"{tmp_path / 'other'}: 40 new of 40 record(s)"
    assert main(["knowledge", "add", other.shard, "--dir", str(mine)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"{other.shard}: 0 new of 30 record(s)"
    assert len(KnowledgeBase(mine).records()) == 40
