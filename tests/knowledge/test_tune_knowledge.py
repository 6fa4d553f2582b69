"""`release tune [--knowledge DIR] / --no-knowledge / --local-search`: real runs of tiny.matmul.1.

Every run here points the knowledge base at a temporary folder (``--knowledge`` or ``RELEASE_KNOWLEDGE``,
set per test by tests/conftest.py), never the user's cache.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import release_here

from release.knowledge import KnowledgeBase
from release.target import isa_class, resolve_target, target_to_json

FAST = ["--number", "1", "--repeat", "1", "--min-repeat-ms", "0", "--no-progress", "--no-check"]
HOST_CLASS = isa_class(target_to_json(resolve_target("llvm")))  # what this machine's runs are keyed by


def release(*args, env=None, timeout=900):
    return subprocess.run([sys.executable, "-m", "release.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def _one_line_error(proc, *fragments):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr.strip().splitlines()
    assert "Traceback" not in proc.stderr and err[-1].startswith("release: error:"), proc.stderr
    for frag in fragments:
        assert frag in err[-1], err[-1]


def test_contradicting_or_bad_knowledge_flags_are_one_line_errors(tmp_path, capsys):
    def release(*args, env=None):  # in this process: each is refused before any work
        return release_here(capsys, *args, env=env)

    base = ["tune", "--workload", "tiny.matmul.1", "--n-trial", "2", "--log", str(tmp_path / "x.jsonl"), *FAST]
    _one_line_error(release(*base, "--knowledge", str(tmp_path / "kb"), "--no-knowledge"),
                    "--no-knowledge", "contradict")
    _one_line_error(release(*base, "--tuner", "random", "--local-search"), "--local-search", "'random'")
    _one_line_error(release(*base, "--tuner", "random", "--knowledge-use", "model"), "--knowledge-use model",
                    "not 'random'")
    _one_line_error(release(*base, "--knowledge", "--no-knowledge"), "--knowledge and --no-knowledge contradict")
    afile = tmp_path / "file"
    afile.write_text("x")
    _one_line_error(release(*base, "--knowledge", str(afile)), str(afile), "not a folder")
    _one_line_error(release(*base, env=dict(RELEASE_KNOWLEDGE=str(afile))), str(afile),
                    "(from $RELEASE_KNOWLEDGE) is a file")
    # a folder that cannot be made (under a file): one line before any work, not a traceback at the first record
    _one_line_error(release(*base, "--knowledge", str(afile / "kb")), str(afile / "kb"), "cannot be written",
                    "--no-knowledge")
    assert not (tmp_path / "x.jsonl").exists()


# slow: four tuning processes, ~42 s; knowledge/test_travel's fresh-home test runs the default base's warm start in make test
@pytest.mark.slow
def test_tune_adds_its_records_to_the_knowledge_base_unless_told_not_to(tmp_path):
    default = tmp_path / "default-kb"
    env = dict(os.environ, RELEASE_KNOWLEDGE=str(default))
    p = release("tune", "--workload", "tiny.matmul.1", "--tuner", "random", "--n-trial", "3",
                "--log", str(tmp_path / "a.jsonl"), *FAST, env=env)
    assert p.returncode == 0, p.stderr
    assert f"knowledge {default} (a new folder): not used by random; this run's records are added" in p.stdout
    assert len(KnowledgeBase(default).records()) == 3
    p = release("tune", "--workload", "tiny.matmul.1", "--tuner", "random", "--n-trial", "2", "--seed", "1",
                "--log", str(tmp_path / "b.jsonl"), "--no-knowledge", *FAST, env=env)
    assert p.returncode == 0, p.stderr
    assert "knowledge off (--no-knowledge): none read, this run's records not added" in p.stdout
    assert len(KnowledgeBase(default).records()) == 3
    # our tuners read the default base without being asked (the CLI's warm start): the first round measures
    # this task's best records of the random run first (plan size 4: 2 seeds), and adds its own
    p = release("tune", "--workload", "tiny.matmul.1", "--tuner", "release", "--plan-size", "4", "--n-trial", "2",
                "--seed", "2", "--log", str(tmp_path / "c.jsonl"), *FAST, env=env)
    assert p.returncode == 0, p.stderr
    assert f"knowledge {default}: 2 seed configs carried over from the best records of 1 workload (3 records of " \
           f"1 workload of {HOST_CLASS}), to be measured first; this run's records are added to it" in p.stdout, p.stdout
    from release.measure import load_records

    cost = {tuple(r.config): r.mean_cost for r in load_records(str(tmp_path / "a.jsonl")) if r.ok}
    # the two best of the first run, compared by cost (a coarse timer's ties may come in either order)
    assert [cost[tuple(r.config)] for r in load_records(str(tmp_path / "c.jsonl"))] == sorted(cost.values())[:2]
    assert len(KnowledgeBase(default).records()) == 3  # the same two configs again: records the base holds


@pytest.mark.slow
def test_baselines_read_the_default_base_only_when_asked_and_ms_takes_only_seeds(tmp_path):
    """The slow rest of the test above (6 more tuning processes): xgb, a baseline, starts cold unless
    asked; an empty base says cold start; a bare ``--knowledge`` reads the default base; MetaSchedule's
    search takes seeds only."""
    default = tmp_path / "default-kb"
    env = dict(os.environ, RELEASE_KNOWLEDGE=str(default))
    p = release("tune", "--workload", "tiny.matmul.1", "--tuner", "random", "--n-trial", "3",
                "--log", str(tmp_path / "a.jsonl"), *FAST, env=env)
    assert p.returncode == 0, p.stderr
    # a baseline (AutoTVM's xgb) starts cold unless asked, says so, and still adds its records
    p = release("tune", "--workload", "tiny.matmul.1", "--tuner", "xgb", "--plan-size", "4", "--n-trial", "1",
                "--seed", "6", "--log", str(tmp_path / "c1.jsonl"), *FAST, env=env)
    assert p.returncode == 0, p.stderr
    assert f"knowledge {default}: not read by xgb, a baseline: it starts cold as its own tuner does (--knowledge " \
           "to start it warm); this run's records are added to it" in p.stdout, p.stdout
    assert "seed configs" not in p.stdout
    # an empty base is a cold start, and says so
    p = release("tune", "--workload", "tiny.matmul.1", "--tuner", "xgb", "--plan-size", "4", "--n-trial", "1",
                "--seed", "2", "--log", str(tmp_path / "c2.jsonl"), "--knowledge", str(tmp_path / "empty"), *FAST)
    assert p.returncode == 0, p.stderr
    assert f"no records of {HOST_CLASS} yet, and no shipped pack of it (cold start)" in p.stdout, p.stdout
    # a bare --knowledge reads the default base ($RELEASE_KNOWLEDGE here): the transferred model has too few
    # records yet to start warm; seeds (the default use) start from this task's own earlier best configs
    p = release("tune", "--workload", "tiny.matmul.1", "--tuner", "xgb", "--plan-size", "4", "--n-trial", "1",
                "--seed", "3", "--log", str(tmp_path / "d.jsonl"), "--knowledge", "--knowledge-use", "model",
                *FAST, env=env)
    assert p.returncode == 0, p.stderr
    assert f"knowledge {default}: " in p.stdout and "too few successful ones to start warm" in p.stdout
    p = release("tune", "--workload", "tiny.matmul.1", "--tuner", "xgb", "--plan-size", "4", "--n-trial", "2",
                "--seed", "4", "--log", str(tmp_path / "e.jsonl"), "--knowledge", *FAST, env=env)
    assert p.returncode == 0, p.stderr
    assert "2 seed configs carried over from the best records of 1 workload (" in p.stdout, p.stdout
    # MetaSchedule's search takes the same seeds (through its database), and nothing else of the knowledge
    ms = ["tune", "--workload", "tiny.matmul.1", "--tuner", "ms-evolutionary", "--plan-size", "4", "--n-trial", "2",
          "--seed", "5", "--log", str(tmp_path / "f.jsonl"), "--knowledge", *FAST]
    p = release(*ms, env=env)
    assert p.returncode == 0, p.stderr
    assert "2 seed configs carried over from the best records of 1 workload (" in p.stdout, p.stdout
    _one_line_error(release(*ms, "--knowledge-use", "model", env=env), "ms-evolutionary", "only as seeds")


@pytest.mark.slow
def test_second_cli_run_starts_warm_and_says_from_what(tmp_path):
    kb = str(tmp_path / "kb")
    p = release("tune", "--workload", "tiny.matmul.1", "--tuner", "random", "--n-trial", "16",
                "--log", str(tmp_path / "a.jsonl"), "--knowledge", kb, *FAST)
    assert p.returncode == 0, p.stderr
    p = release("tune", "--workload", "tiny.matmul.1", "--tuner", "xgb", "--plan-size", "8", "--n-trial", "10",
                "--log", str(tmp_path / "b.jsonl"), "--knowledge", kb, "--knowledge-use", "model", *FAST)
    assert p.returncode == 0, p.stderr
    assert f"starting warm from 16 records of 1 workloads of {HOST_CLASS}" in p.stdout
    assert "knowledge used 16 records of 1 workloads" in p.stdout
    assert "random search" not in p.stdout  # no warm-up note: the model guides the first round
    # its 10 records join (a config the random run already measured is the same record: kept once)
    assert 16 < len(KnowledgeBase(kb).records()) <= 26


def test_which_tuners_start_warm_from_the_knowledge_base_by_default(tmp_path, monkeypatch):
    """`release tune` / `tune-model` (one rule, `_knowledge_for`): ours (rl, release, release+) read the base
    unasked; every baseline only with --knowledge or --knowledge-use; nothing is read with --no-knowledge or
    RELEASE_KNOWLEDGE=off; the folder written to is the same either way; --knowledge-use with a tuner that
    reads no base is an error."""
    from argparse import Namespace

    from release.commands import _knowledge_for
    from release.errors import TunerError
    from release.tuners import MODEL_BASED, SEEDED_ONLY, TUNERS, WARM_BY_DEFAULT

    kb = tmp_path / "kb"
    monkeypatch.setenv("RELEASE_KNOWLEDGE", str(kb))
    assert set(WARM_BY_DEFAULT) == {"rl", "release", "release+"}  # read off the classes' declarations
    assert set(MODEL_BASED) == {"xgb", "sa-as", "rl", "release", "release+"} and SEEDED_ONLY == ("ms-evolutionary",)
    for tuner in TUNERS:
        def ask(knowledge=None, no_knowledge=False, use=None):
            return _knowledge_for(Namespace(tuner=tuner, knowledge=knowledge, no_knowledge=no_knowledge,
                                            knowledge_use=use))

        assert ask() == (str(kb), tuner in WARM_BY_DEFAULT), tuner
        assert ask(knowledge="") == (str(kb), True)
        assert ask(knowledge=str(tmp_path / "other")) == (str(tmp_path / "other"), True)
        if tuner in MODEL_BASED + SEEDED_ONLY:
            assert ask(use="seeds") == (str(kb), True)
        else:  # a tuner that reads no base: --knowledge-use is an error, not silently ignored
            with pytest.raises(TunerError, match=f"--knowledge-use seeds applies to .* not '{tuner}'"):
                ask(use="seeds")
        assert ask(no_knowledge=True) == (None, False)
    monkeypatch.setenv("RELEASE_KNOWLEDGE", "off")
    assert _knowledge_for(Namespace(tuner="release+", knowledge=None, no_knowledge=False, knowledge_use=None)) \
        == (None, False)
