"""An AutoTVM tuning script written as TVM's tutorials wrote theirs (``tests/fixtures/autotvm_tutorial.py``:
create a task, measure option, tuner, tune with callbacks, apply the best, build, run) runs with only
its import line changed: to ``from release import autotvm``, or to the ``tvm.autotvm`` alias. Real
builds and runs of a 32x32 matmul, 4 trials; each in a fresh interpreter (the alias changes ``tvm``)."""

import ast
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "fixtures", "autotvm_tutorial.py")


@pytest.mark.parametrize("import_line", [
    "import release.tvm_autotvm; from tvm import autotvm",
    pytest.param("from release import autotvm", marks=pytest.mark.slow),  # the same calls; make test-slow
])
def test_autotvm_tutorial_runs_with_only_the_import_line_changed(tmp_path, import_line):
    with open(SCRIPT, encoding="utf-8") as f:
        text = f.read()
    assert text.count("from release import autotvm  # IMPORT") == 1
    script = tmp_path / "tutorial.py"
    script.write_text(text.replace("from release import autotvm  # IMPORT", import_line))
    log = tmp_path / "matmul.log"
    p = subprocess.run([sys.executable, str(script), str(log)], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    out = p.stdout.splitlines()
    assert out[0].startswith("KnobSpace(matmul, ")  # print(task.config_space)
    best = ast.literal_eval(out[out.index("Best config:") + 1])  # a config: knob indices
    assert out[-1] == "tuned schedule: True records: 4"
    from release.measure import load_records

    recs = load_records(log)
    assert len(recs) == 4 == len({tuple(r.config) for r in recs})  # 4 trials, 4 distinct configs
    assert best == tuple(min((r for r in recs if r.ok), key=lambda r: r.mean_cost).config)  # the fastest logged
    # the progress_bar callback, its stderr a pipe: plain lines, the last one at 4 of 4 trials
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("matmul: ")]
    assert lines and lines[-1].startswith("matmul: 4/4 trials, best ") and "ETA 0:00" in lines[-1], p.stderr
