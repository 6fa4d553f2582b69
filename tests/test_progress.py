"""Progress where no terminal is: plain lines every N trials or T seconds (trials done,
best so far, elapsed, ETA), also logged; a real ``release tune`` with stderr redirected to a file."""

import io
import logging
import re
import subprocess
import sys

import pytest

from release.progress import PlainProgress, progress


def test_plain_lines_every_n_steps_and_at_the_end(caplog):
    out = io.StringIO()
    bar = progress(10, desc="tune x", file=out, every_n=4, every_s=1e9)
    assert isinstance(bar, PlainProgress)  # a StringIO is no terminal
    with caplog.at_level(logging.INFO, logger="release.progress"):
        for i in range(10):
            bar.set_postfix_str(f"best {i:.2f} GFLOPS")
            bar.update(1)
        bar.close()
        bar.close()  # idempotent
    lines = out.getvalue().splitlines()
    assert [ln.split(" trials")[0] for ln in lines] == ["tune x: 4/10", "tune x: 8/10", "tune x: 10/10"]
    assert re.fullmatch(r"tune x: 4/10 trials, best 3\.00 GFLOPS, elapsed \d+:\d\d, ETA \d+:\d\d", lines[0]), lines[0]
    assert lines[-1].endswith("ETA 0:00")
    assert [r.getMessage() for r in caplog.records] == lines  # the same lines in logging


def test_every_t_seconds_and_no_line_twice_when_logging_writes_the_same_stream():
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    lg = logging.getLogger("release.progress")
    lg.addHandler(handler)
    old = lg.level
    lg.setLevel(logging.INFO)
    try:
        bar = progress(100, desc="m", unit="trial", file=out, every_n=1000, every_s=0.0)  # every update: T = 0 s
        bar.update(1)
        bar.update(2)
        bar.close()
    finally:
        lg.removeHandler(handler)
        lg.setLevel(old)
    lines = out.getvalue().splitlines()
    assert [ln.split(" trials")[0] for ln in lines] == ["m: 1/100", "m: 3/100"]  # once each, by the handler
    assert progress(5, disable=True) is None


@pytest.mark.slow  # the quick version: test_tune_model_says_each_trial_in_plain_lines
def test_cli_tune_writes_plain_progress_lines_to_a_redirected_stderr(tmp_path):
    """``release tune`` with stderr a file: the progress_bar callback writes plain lines, not tqdm's."""
    err = tmp_path / "stderr.txt"
    with open(err, "w") as f:
        p = subprocess.run([sys.executable, "-m", "release.cli", "tune", "--workload", "tiny.matmul.1",
                            "--tuner", "random", "--n-trial", "4", "--log", str(tmp_path / "t.jsonl"),
                            "--no-knowledge", "--number", "1", "--repeat", "1", "--min-repeat-ms", "0",
                            "--n-parallel", "1"],
                           stdout=subprocess.PIPE, stderr=f, text=True, timeout=300)
    text = err.read_text()
    assert p.returncode == 0, text
    assert "\r" not in text  # no bar redrawn in place
    lines = [ln for ln in text.splitlines() if ln.startswith("tiny.matmul.1: ")]
    assert [ln.split(" trials")[0] for ln in lines] == [f"tiny.matmul.1: {i}/4" for i in (1, 2, 3, 4)], text
    assert all(" GFLOPS" in ln and ", elapsed " in ln and ", ETA " in ln for ln in lines)
    assert lines[-1].endswith("ETA 0:00")


def test_track_says_a_short_loop_in_one_line():
    from release.progress import track

    out = io.StringIO()
    assert list(track("abc", desc="extract", unit="task", file=out)) == ["a", "b", "c"]
    (line,) = out.getvalue().splitlines()
    assert line.startswith("extract: 3/3 tasks, elapsed ") and line.endswith("ETA 0:00")


def test_tune_model_says_each_trial_in_plain_lines(tmp_path, capsys):
    """``tune_model`` (``release tune-model``, the model tiers of ``bench``) advances per measured trial, not
    per chunk of a task: a plain line for each of 3 trials (every_n = 1 at this budget)."""
    from release import create_task
    from release import relax as M
    from release.measure import LocalBuilder, LocalRunner, measure_option

    opt = measure_option(LocalBuilder(n_parallel=1), LocalRunner(number=1, repeat=1, cooldown_interval=0.0))
    M.tune_model([create_task("tiny.matmul.1", "llvm")], 3, str(tmp_path / "m.jsonl"), tuner="random",
                 measure_option=opt, progress=True)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("model: ")]
    assert [ln.split(" trials")[0] for ln in lines] == ["model: 1/3", "model: 2/3", "model: 3/3"]
    assert all("tiny.matmul.1: " in ln and " GFLOPS), weight 1, " in ln and ", ETA " in ln for ln in lines)
