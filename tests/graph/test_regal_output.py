"""What ``release regal optimize`` and ``release regal apply`` print: every comparison with the given
order says "lower" or "higher" in words; measured VM peaks come from several runs with their spread, and
a difference inside it reads "no measurable change"; TVM's warnings are counted in one line and kept in
a file instead of flooding stderr."""

from __future__ import annotations

import json

import pytest

from release.cli import main
from release.graph.cli import vs_given
from release.graph.relax_apply import measured_change


@pytest.mark.parametrize("value, given, want", [
    (749.8, 1344.0, "44.21% lower than given"), (1344.0, 1000.0, "34.40% higher than given"),
    (1344.0, 1344.0, "equal to given")])
def test_vs_given_says_lower_or_higher(value, given, want):
    assert vs_given(value, given, "given") == want


def test_optimize_prints_a_runtime_that_went_down_as_lower(capsys):
    """Two devices halve the runtime of synthetic:0: the line says 'lower than given', with no sign to misread."""
    rc = main(["regal", "optimize", "--graph", "synthetic:0", "--devices", "2", "--budget", "300",
               "--method", "brkga,given"])
    out = capsys.readouterr().out
    brkga = next(line for line in out.splitlines() if line.startswith("brkga"))
    given = next(line for line in out.splitlines() if line.startswith("given"))
    assert rc == 0 and "% lower than given" in brkga and "+" not in brkga.split("us")[1].split("evals")[0]
    assert "equal to given" in given and "vs given" not in out


@pytest.mark.parametrize("before, after, want", [
    ([1000, 1010, 1020], [800, 790, 805], "20.8% lower"),  # every run below every run: measurable (medians)
    ([1000, 1010, 1020], [1200, 1230, 1190], "18.8% higher"),
    ([401408, 397312, 405504], [364544, 462848, 399360], "no measurable change (inside the runs' spread)"),
    ([1000, 1000], [1000, 1000], "no measurable change (inside the runs' spread)"),
    ([1000], [900], "10.0% lower (one run: spread unknown)"),
])
def test_measured_change_is_said_only_outside_the_spread(before, after, want):
    assert measured_change(before, after) == want


def test_apply_counts_tvm_warnings_in_one_line(tmp_path, capfd):
    """A real apply (inception: two compiles, one export, no measurement): TVM's 'Scope Saving' lines go to
    OUT/stderr.log, the output has one line with their count, stderr none of them."""
    out = tmp_path / "apply"
    (tmp_path / "order.json").write_text(json.dumps(list(range(12))))  # the given order
    rc = main(["regal", "apply", "--graph", "model:inception", "--order", str(tmp_path / "order.json"),
               "--no-measure", "--out", str(out)])
    got = capfd.readouterr()
    assert rc == 0, got.err
    assert "Scope Saving" not in got.err and "Warning" not in got.err, got.err
    line = next(x for x in got.out.splitlines() if x.startswith("TVM output:"))
    assert "TVM 'Scope Saving' from runtime/vm/executable.cc" in line and str(out / "stderr.log") in line
    n = int(line.split()[2])
    assert n > 0 and (out / "stderr.log").read_text().count("Scope Saving") >= n - 5
    assert "equal to the given order" in got.out  # the given order applied: no change, said in words
    d = json.loads((out / "apply.json").read_text())
    assert d["stderr"]["warnings"] == n and d["vm_peaks_before"] == [] and d["vm_peak_before"] is None


@pytest.mark.slow  # two compiles, one export and 2 x 2 child processes: ~50 s on a loaded 2-core machine
def test_apply_measures_each_peak_several_times_and_reports_the_spread(tmp_path, capsys):
    out = tmp_path / "apply"
    (tmp_path / "order.json").write_text(json.dumps(list(range(12))))
    rc = main(["regal", "apply", "--graph", "model:inception", "--order", str(tmp_path / "order.json"),
               "--measure-runs", "2", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0
    d = json.loads((out / "apply.json").read_text())
    assert len(d["vm_peaks_before"]) == len(d["vm_peaks_after"]) == 2 and all(v > 0 for v in d["vm_peaks_after"])
    assert d["vm_peak_change"] == measured_change(d["vm_peaks_before"], d["vm_peaks_after"])
    line = next(x for x in text.splitlines() if x.startswith("VM peak"))
    assert "median of 2 runs each" in line and line.endswith(d["vm_peak_change"])


def test_measure_runs_must_be_positive(tmp_path, capsys):
    rc = main(["regal", "apply", "--graph", "model:inception", "--measure-runs", "0", "--out", str(tmp_path / "a")])
    err = capsys.readouterr().err
    assert rc == 2 and "--measure-runs must be a positive integer" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "a").exists()
