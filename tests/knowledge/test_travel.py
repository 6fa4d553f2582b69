"""Knowledge that travels: records match by program and ISA class, not by the exact CPU.

Logs and knowledge bases re-labelled to another CPU model of the same ISA class (what a record
written on an Intel Xeon looks like on an AMD Zen 4 with AVX-512, and the reverse) must be used:
seeds in a base, applied schedules with a note, a resumed run that re-tunes instead of counting
another machine's trials. Records of releases that hashed the whole target are migrated on read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import release_here
from release.knowledge import KnowledgeBase, knowledge_records, knowledge_seeds
from release.measure import apply_history_best, load_records, log_to_file
from release.measure.records import ApplyHistoryBest, check_log_for_task
from release.target import isa_class, resolve_target, target_to_json
from release.task import create_task

# 40 records of a log measured on a 2-core emeraldrapids Xeon, keyed as releases before the ISA class keyed
# records (the whole target); cut from benchmarks/results/logs by tests/fixtures/knowledge/make_fixtures.py
XGB = Path(__file__).resolve().parents[1] / "fixtures" / "knowledge" / "resnet18.conv2d.9.xgb.s1.first40.jsonl"
FAST = ["--number", "1", "--repeat", "1", "--min-repeat-ms", "0", "--no-progress", "--no-check"]
HOST = json.loads(target_to_json(resolve_target("llvm")))  # this machine's target: mcpu, num-cores
HOST_CLASS = isa_class(HOST)


def _elsewhere(rec, task, mcpu: str, cores: int = 4, legacy: bool = True):
    """``rec`` as another machine of the same ISA class wrote it: its ``mcpu``, core count and no CPU
    model name; with ``legacy``, keyed as releases before the ISA class keyed records (the whole target)."""
    d = json.loads(rec.target)
    d.update({"mcpu": mcpu, "num-cores": cores})
    target = json.dumps(d, sort_keys=True)
    key = task.key
    if legacy:
        key = f"{task.name}/" + hashlib.sha1(f"{task.structural_hash}|{target}".encode()).hexdigest()[:16]
    return dataclasses.replace(rec, task=key, target=target, machine="")


def _other_cpu(host_class: str, host_mcpu: str | None = None) -> str:
    """An ``mcpu`` of the host's ISA class that is not the host's own (``host_mcpu``, default this
    machine's), "" where none is named: whatever CPU this runs on, records labelled with it are
    another machine's."""
    host_mcpu = HOST.get("mcpu") if host_mcpu is None else host_mcpu
    names = {"llvm x86_64 avx512": ["emeraldrapids", "skylake-avx512"], "llvm x86_64 avx2": ["haswell", "znver3"]}
    return next((m for m in names.get(host_class, []) if m != host_mcpu), "")


def _relabelled(path: Path, task, target: dict, machine: str, out: Path) -> Path:
    """The log at ``path`` as a machine of ``target`` (its ``mcpu``, ``num-cores``) and CPU model name
    ``machine`` wrote it, keyed as releases before the ISA class keyed records (the whole target);
    written to ``out``. The label is explicit, so which machine the test runs on never decides whose
    records they are."""
    text = json.dumps(target, sort_keys=True)
    key = f"{task.name}/" + hashlib.sha1(f"{task.structural_hash}|{text}".encode()).hexdigest()[:16]
    recs = [dataclasses.replace(r, task=key, target=text, machine=machine) for r in load_records(path)]
    out.write_text("".join(r.to_json() + "\n" for r in recs))
    return out


# ---------------------------------------------------------------- identity
def test_task_key_is_program_and_isa_class_not_the_cpu():
    keys = {cpu: create_task("tiny.matmul.1", {"kind": "llvm", "mcpu": cpu, "num-cores": n}).key
            for cpu, n in (("znver4", 4), ("rocketlake", 2), ("emeraldrapids", 8), ("skylake-avx512", 1))}
    assert len(set(keys.values())) == 1, keys  # an AMD Zen 4 and three Xeons with AVX-512: one key
    avx2 = create_task("tiny.matmul.1", {"kind": "llvm", "mcpu": "haswell"})
    assert avx2.key != keys["znver4"] and avx2.isa_class == "llvm x86_64 avx2"
    assert isa_class('{"kind": "llvm", "mcpu": "znver4"}') == "llvm x86_64 avx512"
    assert isa_class({"kind": "llvm", "mcpu": "znver3"}) == "llvm x86_64 avx2"
    assert isa_class({"kind": "cuda", "arch": "sm_90"}) == "cuda sm_90"
    assert isa_class({"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "neoverse-v1"}).startswith("llvm aarch64")
    assert create_task("resnet18.conv2d.12", {"kind": "llvm", "mcpu": "znver4"}).key != keys["znver4"]  # another program


def test_older_log_of_another_cpu_migrates_on_read():
    # the log's program: the weight not pre-packed (prepack=False), as the workload was tuned then
    task = create_task("resnet18.conv2d.9", {"kind": "llvm", "mcpu": "znver4", "num-cores": 2}, prepack=False)
    raw = load_records(XGB)
    assert {json.loads(r.target)["mcpu"] for r in raw} == {"emeraldrapids"}  # the fixture's machine, not this one's
    assert raw[0].task != task.key  # keyed by the Xeon's whole target
    mine = load_records(XGB, task)
    assert len(mine) == 40 and all(r.task == task.key for r in mine)  # migrated to this release's key
    assert {task.tier(r) for r in mine} == {"isa"}  # another machine: seeds, never this machine's trials
    assert len(check_log_for_task(XGB, task)) == 40
    haswell = create_task("resnet18.conv2d.9", {"kind": "llvm", "mcpu": "haswell", "num-cores": 2}, prepack=False)
    assert not any(haswell.owns(r) for r in load_records(XGB))  # AVX-512 records never reach an AVX2 task


# ---------------------------------------------------------------- applying a log elsewhere
@pytest.mark.skipif(not _other_cpu(HOST_CLASS), reason="no other CPU model of this host's ISA class is named")
def test_log_of_another_cpu_applies_with_one_line_naming_it(tmp_path, caplog):
    """The fixture labelled with a CPU model of this host's ISA class that is not this host's (on an
    emeraldrapids Xeon, which wrote it, another one): its schedules apply, with one line naming that machine."""
    import tvm
    from tvm.s_tir.meta_schedule.tir_integration import compile_tir

    task = create_task("resnet18.conv2d.9", "llvm", prepack=False)  # this machine
    other = _other_cpu(HOST_CLASS)
    log = _relabelled(XGB, task, dict(HOST, mcpu=other, **{"num-cores": 2}), "", tmp_path / "other.jsonl")
    hist = apply_history_best(str(log))
    with caplog.at_level(logging.WARNING, logger="release.measure"):
        db = hist.database([task])
    assert [t.key for t in hist.matched] == [task.key] and hist.elsewhere == [task] and not hist.unmatched
    line = hist.report(retune="release tune --workload resnet18.conv2d.9")
    assert "1 of 1 tasks use schedules tuned on another machine" in line and f"{other}/2c" in line
    assert "re-tune them here with: release tune --workload resnet18.conv2d.9" in line
    assert [r.getMessage() for r in caplog.records if "tuned on another machine" in r.getMessage()] == [hist.report()]
    best = hist.best(task)
    assert best.mean_cost == min(r.mean_cost for r in load_records(XGB) if r.ok)
    sch = compile_tir(db, task.mod, task.target)  # a valid schedule here too
    assert sch is not None
    task.check(tvm.compile(sch.mod, target=task.target))


def test_log_of_this_cpu_applies_as_this_machines_without_a_line(tmp_path, caplog):
    """The same fixture labelled with this host's own target (``mcpu``, cores) and CPU model name, as if
    this machine had written it (the case of the emeraldrapids Xeon that did): its records are this
    machine's trials, the best applies, no line about another machine."""
    task = create_task("resnet18.conv2d.9", "llvm", prepack=False)
    log = _relabelled(XGB, task, json.loads(task.target_json), task.machine, tmp_path / "here.jsonl")
    mine = load_records(str(log), task)
    assert len(mine) == 40 and {task.tier(r) for r in mine} == {"machine"}  # migrated, and this machine's
    hist = apply_history_best(str(log))
    with caplog.at_level(logging.WARNING, logger="release.measure"):
        hist.database([task])
    assert [t.key for t in hist.matched] == [task.key] and hist.elsewhere == [] and not hist.unmatched
    assert hist.report() == "" and not [r for r in caplog.records if "another machine" in r.getMessage()]
    assert hist.best(task).mean_cost == min(r.mean_cost for r in load_records(XGB) if r.ok)
    # another CPU model name on the same target: another machine's (the verdict is the label's, not the host's)
    if task.machine:  # this host names its CPU model (/proc/cpuinfo): a record naming another is not this machine's
        other = _relabelled(XGB, task, json.loads(task.target_json), "another CPU model", tmp_path / "other.jsonl")
        assert {task.tier(r) for r in load_records(str(other), task)} == {"isa"}


def test_log_matching_no_task_is_a_loud_warning(matmul_task, caplog):
    hist = ApplyHistoryBest(load_records(XGB))
    with caplog.at_level(logging.WARNING, logger="release.measure"):
        hist.database([matmul_task])
    assert hist.unmatched == [matmul_task] and not hist.matched
    msgs = [r.getMessage() for r in caplog.records]
    assert any("matches none of the 1 tasks" in m and "resnet18.conv2d.9" in m and "default schedules" in m
               for m in msgs), msgs
    assert "1 of 1 tasks have no record" in hist.report()


# ---------------------------------------------------------------- a resumed run, a knowledge base
@pytest.fixture(scope="module")
def here_log(tmp_path_factory):
    """A real random run of tiny.matmul.1 on this machine (8 trials), and its records."""
    from release.measure import LocalBuilder, LocalRunner, measure_option
    from release.tuners import RandomTuner

    path = str(tmp_path_factory.mktemp("travel") / "here.jsonl")
    task = create_task("tiny.matmul.1", "llvm")
    opt = measure_option(LocalBuilder(n_parallel=2, timeout=60),
                         LocalRunner(number=1, repeat=1, min_repeat_ms=0, cooldown_interval=0.0))
    try:
        RandomTuner(task, seed=0).tune(8, opt, callbacks=[log_to_file(path)], check_output=False)
    finally:
        opt["builder"].close()
        opt["runner"].close()
    return task, load_records(path)


def _cost_there(recs) -> dict:
    """Each successful record's config -> its mean cost (seconds)."""
    return {tuple(r.config): r.mean_cost for r in recs if r.ok}


def _best_costs(recs, n: int) -> list:
    """The ``n`` lowest mean costs of the successful records, best first. Seeds are compared by cost,
    not by config: two configs of equal cost (a timer's resolution makes ties) rank in either order."""
    return sorted(_cost_there(recs).values())[:n]


@pytest.mark.skipif(not _other_cpu(HOST_CLASS), reason="no other CPU model of this host's ISA class is named")
def test_resumed_run_counts_another_machines_records_as_seeds_not_trials(tmp_path, here_log, fast_measure):
    from release.tuners import RandomTuner

    task, recs = here_log
    theirs = tmp_path / "theirs.jsonl"
    theirs.write_text("".join(_elsewhere(r, task, _other_cpu(HOST_CLASS)).to_json() + "\n" for r in recs))
    tuner = RandomTuner(create_task("tiny.matmul.1", "llvm"), seed=5)
    tuner.tune(3, fast_measure, callbacks=[log_to_file(str(theirs))], check_output=False)
    assert tuner.trials == 3  # re-tuned here: none of the 8 records of the other machine counted as a trial
    assert tuner.session.seeds_elsewhere == sum(r.ok for r in recs)
    fresh = load_records(str(theirs))[len(recs):]
    # their best configs measured here first (compared by cost: equal costs, a coarse timer's ties, may come in any order)
    assert [_cost_there(recs)[tuple(r.config)] for r in fresh] == _best_costs(recs, 3)
    assert all(task.tier(r) == "machine" and r.machine == task.machine for r in fresh)


@pytest.mark.skipif(not _other_cpu(HOST_CLASS), reason="no other CPU model of this host's ISA class is named")
def test_knowledge_base_of_another_cpu_gives_seeds(tmp_path, here_log):
    task, recs = here_log
    kb = KnowledgeBase(tmp_path / "kb")
    kb.add([_elsewhere(r, task, _other_cpu(HOST_CLASS), cores=16) for r in recs])
    got = knowledge_records(str(tmp_path / "kb"), task)
    assert len(got) == len(recs) and got.source == "base"
    assert f"from 1 machine: {_other_cpu(HOST_CLASS)}/16c {len(recs)}" in got.origin()
    seeds = knowledge_seeds(task, got, 3)
    assert [_cost_there(recs)[c] for c in seeds] == _best_costs(recs, 3)  # ties in any order


@pytest.mark.slow  # a release tune in a fresh interpreter (~16 s); the pack's reading is tested quickly below
# ---------------------------------------------------------------- the shipped pack
def test_pack_is_used_in_a_fresh_home_directory(tmp_path, monkeypatch, capsys):
    """No base, no cache, no settings: the pack shipped with the package starts our tuners warm (or,
    on an ISA class it has nothing of, the line says so)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELEASE_KNOWLEDGE", "XDG_"))}
    env["HOME"] = str(tmp_path / "home")
    p = subprocess.run([sys.executable, "-m", "release.cli", "tune", "--workload", "resnet18.conv2d.12",
                        "--tuner", "release", "--plan-size", "4", "--n-trial", "2", "--log", str(tmp_path / "a.jsonl"),
                        *FAST], capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, p.stderr
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("knowledge "))
    assert str(tmp_path / "home" / ".cache" / "release-tvm" / "knowledge") in line
    if HOST_CLASS == "llvm x86_64 avx512":
        assert "2 seed configs carried over" in line and "(the shipped pack: this base holds none of the class)" in line
        assert "records from 3 machines: " in p.stdout and "rocketlake/2c" in p.stdout
        # the pack's configs are measured first, then added to the user's base (their timings: this machine's)
        here = load_records(str(tmp_path / "a.jsonl"))
        assert len(here) == 2 and all(r.machine == create_task("resnet18.conv2d.12", "llvm").machine for r in here)
    else:
        assert "no shipped pack of it (cold start)" in line
    # the pack's listing, in this process (no new interpreter) with the same environment
    for k in [k for k in os.environ if k.startswith(("RELEASE_KNOWLEDGE", "XDG_"))]:
        monkeypatch.delenv(k)
    p = release_here(capsys, "knowledge", "show", "--pack", env={"HOME": env["HOME"]})
    assert p.returncode == 0 and "shipped pack " in p.stdout and "llvm x86_64 avx512" in p.stdout


def test_damaged_or_newer_pack_is_one_line_and_a_cold_start(tmp_path, monkeypatch, caplog, matmul_task):
    from release.knowledge.pack import pack_records

    for i, text in enumerate(['{"release_knowledge": 99}\n', "not a shard\n"]):
        folder = tmp_path / f"pack{i}"
        folder.mkdir()
        (folder / "pack.jsonl").write_text(text)
        monkeypatch.setenv("RELEASE_KNOWLEDGE_PACK", str(folder))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="release.knowledge"):
            assert pack_records(matmul_task.target_json) == []
            assert knowledge_records(str(tmp_path / "empty"), matmul_task) == []
        msgs = [r.getMessage() for r in caplog.records]
        assert msgs and all("shipped pack" in m and "starting cold" in m for m in msgs), msgs
