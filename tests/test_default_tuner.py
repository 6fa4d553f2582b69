"""With no ``--tuner``, ``release tune``, ``release tune-model``, ``tune_model`` and ``make run`` run ``release+``,
and the first lines say which tuner runs and why (``--tuner release`` for the paper's)."""

import inspect
import json
import os
import re

from conftest import release_here

FAST = ["--number", "1", "--repeat", "1", "--min-repeat-ms", "0", "--no-progress", "--no-check"]
WHY = "tuner    release+ (the default: the paper's ReleaseTuner"


def test_defaults_name_release_plus():
    from release.cli import build_parser
    from release.commands.tune import DEFAULT_TUNER, tuner_why
    from release.relax.tune import tune_model

    assert DEFAULT_TUNER == "release+"
    parser = build_parser()
    assert parser.parse_args(["tune"]).tuner == "release+"
    assert parser.parse_args(["tune-model"]).tuner == "release+"
    assert inspect.signature(tune_model).parameters["tuner"].default == "release+"
    assert "--tuner release for the paper's own" in tuner_why("release+")
    assert "paper's ReleaseTuner" in tuner_why("release") and tuner_why("xgb") == ""
    makefile = open(os.path.join(os.path.dirname(__file__), os.pardir, "Makefile")).read()
    (run,) = re.findall(r"^\t\$\(VENV\)/bin/release tune .*$", makefile, re.M)
    assert "--tuner" not in run  # make run takes the default


def _tuners(log):
    with open(log) as f:
        return {json.loads(line)["tuner"] for line in f if line.strip() and not json.loads(line).get("default")}


def test_tune_without_tuner_runs_release_plus_and_says_why(tmp_path, capsys):
    log = tmp_path / "d.jsonl"
    p = release_here(capsys, "tune", "--workload", "tiny.matmul.1", "--n-trial", "2", "--log", str(log), *FAST)
    assert p.returncode == 0, p.stdout + p.stderr
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith("tuner    ")]
    assert line.startswith(WHY) and "--tuner release for the paper's own), 2 trials" in line, line
    assert _tuners(log) == {"release+"}


def test_tune_model_without_tuner_runs_release_plus_and_says_why(tmp_path, capsys):
    log = tmp_path / "m.jsonl"
    p = release_here(capsys, "tune-model", "--model", "tiny-cnn", "--n-trial", "2", "--compare", "", "--log", str(log),
                     *[a for a in FAST if a != "--no-check"])
    assert p.returncode == 0, p.stdout + p.stderr
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith("tuner    ")]
    assert line.startswith(WHY) and line.endswith(", 2 trials over every task"), line
    assert _tuners(log) == {"release+"}
