"""The benchmark harness: metrics on hand-made curves, and a real smoke run."""

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

from release import bench


def curve(gflops, wall, rounds=None, search=None):
    g = np.maximum.accumulate(np.asarray(gflops, float))
    w = np.asarray(wall, float)
    return bench.Curve(g, w, np.asarray(search if search is not None else np.zeros_like(w), float),
                       np.asarray(rounds if rounds is not None else np.zeros(len(w), int)))


def test_time_and_measurements_to_equal_quality():
    base = curve([1, 2, 3, 5, 5, 6], [1, 2, 3, 4, 5, 6])  # reaches its best (6) at measurement 6, t = 6 s
    fast = curve([2, 6, 6], [1, 2, 3])  # reaches 6 at measurement 2, t = 2 s
    m = bench.compare(base, fast)
    assert m["time_speedup"] == pytest.approx(3.0)
    assert m["measure_ratio"] == pytest.approx(3.0)
    assert m["equal_n"] == 3
    assert m["best_ratio_at_equal_n"] == pytest.approx(6 / 3)
    assert m["reached"] is True and (m["reach_n"], m["reach_s"]) == (2, 2.0)


def test_a_run_that_never_reaches_is_censored_not_dropped():
    base = curve([1, 2, 3, 5, 5, 6], [1, 2, 3, 4, 5, 6])  # its best, 6, at t = 6 s
    never = curve([1, 1, 1], [1, 2, 4])  # whole run: 3 measurements, 4 s, never reaches 6
    m = bench.compare(base, never)
    assert m["reached"] is False
    assert m["time_speedup"] == pytest.approx(6 / 4)  # an upper bound: it would need more than 4 s
    assert m["measure_ratio"] == pytest.approx(6 / 3)
    assert math.isnan(bench.compare(base, curve([], []))["time_speedup"])  # an empty run has no bound
    # the summary counts it (with its bound), says how many runs reached, and the table marks the bound
    cfg = bench.BenchConfig(tier="t", workloads=["w"], tuners=["x"], seeds=[0, 1], n_trial=6)
    rows = {"w": {"x": [{**bench.compare(base, never), "seed": 0},
                        {**bench.compare(base, curve([6], [3])), "seed": 1}]}}
    e = bench.summarize(cfg, rows, lambda r: r)["x"]
    assert e["reached"] == [1, 2]
    assert e["time_speedup"]["geomean"] == pytest.approx(math.sqrt(1.5 * 2.0))
    assert "| x | <= 1.73" in "\n".join(bench._summary_table({"x": e}))


def test_round_speedup_uses_refit_counts():
    base = curve([1] * 8, np.arange(1, 9), rounds=[0, 0, 0, 0, 1, 1, 1, 1])  # round 1 starts after 4 s
    other = curve([1] * 4, np.arange(1, 5), rounds=[0, 0, 1, 1])  # after 2 s
    assert bench.compare(base, other, rounds=1)["round_speedup"] == pytest.approx(2.0)
    # a last round cut short by the budget counts as done; a round never started gives no time
    assert bench.compare(base, other, rounds=2)["round_speedup"] == pytest.approx(8 / 4)
    assert math.isnan(bench.compare(base, other, rounds=3)["round_speedup"])
    # a model-free tuner (round 0 throughout) is timed at the baseline's measurement count
    free = curve([1] * 8, np.arange(1, 9) / 2)
    assert bench.compare(base, free, rounds=1)["round_speedup"] == pytest.approx(4 / 2)
    for tier in ("quick", "baselines", "ablation", "paper"):  # every tier's budget holds its rounds
        cfg = bench.BenchConfig.from_tier(tier)
        assert cfg.rounds * 64 <= cfg.n_trial


def test_geomean_and_bootstrap():
    assert bench.geomean([2, 8]) == pytest.approx(4)
    assert bench.geomean([4, float("nan"), -1, None]) == pytest.approx(4)
    est, lo, hi = bench.bootstrap_geomean({"a": [2, 2, 2], "b": [8, 8, 8]})
    assert est == pytest.approx(4) and lo == pytest.approx(4) and hi == pytest.approx(4)
    est, lo, hi = bench.bootstrap_geomean({"a": [1, 4], "b": [4, 4]})
    assert lo <= est <= hi and lo < hi


# slow: ~28 s of tuning and plotting; the quick tests around it cover the report's arithmetic
@pytest.mark.slow
def test_smoke_run_writes_results(tmp_path, fast_measure):
    cfg = bench.BenchConfig.from_tier("smoke", out=str(tmp_path), n_trial=4, number=1, repeat=1, min_repeat_ms=0,
                                      against=["grid"])
    bench.run(cfg, progress=False)
    res = bench.report(cfg, command="test")
    data = json.loads((tmp_path / "results.json").read_text())
    assert set(data) >= {"config", "machine", "per_task", "summary", "pytorch_gflops", "curves", "command"}
    rows = data["per_task"]["tiny.matmul.1"]
    assert {r["measurements"] for t in rows.values() for r in t} == {4}
    grid = rows["grid"][0]
    from release.measure import load_records

    logged = [r for r in load_records(bench.log_path(cfg, "tiny.matmul.1", "grid", 0)) if r.ok]
    assert grid["best_gflops"] == pytest.approx(max(r.gflops for r in logged)) and "time_speedup" in grid
    assert rows["random"][0]["measure_ratio"] == pytest.approx(1.0)  # the baseline against itself
    assert rows["grid"][0]["against"]["grid"]["measure_ratio"] == pytest.approx(1.0)  # second comparator
    assert set(data["summary_against"]) == {"grid"}
    assert data["median_best_gflops"]["tiny.matmul.1"]["grid"] == pytest.approx(grid["best_gflops"])
    table = (tmp_path / "table.md").read_text()
    assert table.startswith("# Benchmark `smoke`")
    assert "### Against random" in table and "### Against grid" in table and "Median best GFLOPS" in table
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # a PNG, not any non-empty file
    # resumable: running again measures nothing more
    bench.run(cfg, progress=False)
    assert len(load_records(bench.log_path(cfg, "tiny.matmul.1", "grid", 0))) == 4
    # re-measuring the runs' best configs together: one GFLOPS per run, in the report
    rem = bench.remeasure(cfg, top=2, rounds=1)
    assert set(rem["tiny.matmul.1"]) == {"random|0", "grid|0"} and min(rem["tiny.matmul.1"].values()) > 0
    again = bench.report(cfg)
    assert again["per_task"]["tiny.matmul.1"]["grid"][0]["remeasured_gflops"] == rem["tiny.matmul.1"]["grid|0"]
    assert "re-measured together" in (tmp_path / "table.md").read_text()
    # tiers share logs: a shorter budget reads the prefix, a longer one extends the same runs
    short = bench.BenchConfig.from_tier("smoke", out=str(tmp_path / "short"), logs=cfg.logs, n_trial=2)
    assert {r["measurements"] for t in bench.report(short)["per_task"]["tiny.matmul.1"].values() for r in t} == {2}
    longer = bench.BenchConfig.from_tier("smoke", out=str(tmp_path), n_trial=6, number=1, repeat=1, min_repeat_ms=0)
    assert longer.logs == cfg.logs
    bench.run(longer, progress=False)
    recs = load_records(bench.log_path(cfg, "tiny.matmul.1", "grid", 0))
    assert len(recs) == 6 == len({tuple(r.config) for r in recs})


def test_rounds_of_a_resumed_pre_fix_log_continue():
    # a log written before the round fix restarts its rounds at 1 on each resume; the report continues them
    assert bench.continued_rounds([0, 0, 1, 1, 2, 1, 1, 2, 1, 2]).tolist() == [0, 0, 1, 1, 2, 3, 3, 4, 5, 6]
    assert bench.continued_rounds([0, 1, 2, 3, 3, 4]).tolist() == [0, 1, 2, 3, 3, 4]  # fixed logs unchanged
    assert bench.continued_rounds([0, 0, 0]).tolist() == [0, 0, 0]  # model-free tuners
    assert bench.continued_rounds([]).tolist() == []
    # so a resumed run has a time for its first 4 rounds (records of rounds 0-3), not n/a
    recs = [SimpleNamespace(gflops=1.0, search_s=0.0, fit_s=0.0, measure_s=1.0, round=r) for r in [0, 1, 2, 1, 2]]
    c = bench.Curve.from_records(recs)
    assert c.wall_at_rounds(4) == pytest.approx(4.0) and c.wall_at_rounds(5) == pytest.approx(5.0)


def test_summary_counts_every_run_and_names_exclusions():
    """Geometric means drop NaN/non-positive values, so each cell says how many runs it excludes and why:
    a missing seed and a run without a value both show as excluded k/n."""
    from release import bench

    cfg = bench.BenchConfig.from_tier("smoke", seeds=[0, 1])
    row = {"time_speedup": 2.0, "round_speedup": 1.0, "measure_ratio": 1.0, "reached": True, "search_share": 0.1}
    per_task = {"tiny.matmul.1": {"random": [dict(row, best_ratio_at_equal_n=1.5)],  # seed 1 has no log
                                  "grid": [dict(row, best_ratio_at_equal_n=0.0), dict(row, best_ratio_at_equal_n=1.5)]}}
    s = bench.summarize(cfg, per_task, lambda r: r)
    assert s["random"]["time_speedup"]["runs"] == [1, 2]
    assert "1 without records" in s["random"]["time_speedup"]["excluded"]
    assert s["grid"]["best_ratio_at_equal_n"]["runs"] == [1, 2]
    assert s["grid"]["best_ratio_at_equal_n"]["geomean"] == 1.5
    assert s["grid"]["time_speedup"]["runs"] == [2, 2] and not s["grid"]["time_speedup"]["excluded"]
    table = "\n".join(bench._summary_table(s, 1))
    assert "excluded 1/2: 1 without records" in table
    assert "excluded 1/2: 1 without a value" in table


def _write_log(path, revisions, flop=5.24288e5):
    """A hand-made log of one record per revision label (version, revision), 1, 2, ... ms."""
    import os

    from release.measure.records import Record

    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for i, (version, rev) in enumerate(revisions):
            f.write(Record(task="tiny.matmul.1/0", name="tiny.matmul.1", target='{"kind": "llvm"}', config=[i],
                           costs=[1e-3 * (i + 1)], flop=flop, measure_s=1.0, release_version=version,
                           revision=rev).to_json() + "\n")


def test_report_flags_tables_built_from_logs_of_different_revisions(tmp_path):
    """Records carry the package version and git revision that measured them: a
    table whose logs mix revisions says so in one line under it; one revision gives no line."""
    cfg = bench.BenchConfig.from_tier("smoke", out=str(tmp_path / "mixed"), logs=str(tmp_path / "logs"), n_trial=3,
                                      tuners=["random", "grid"], seeds=[0], against=["grid"])
    one = [("0.1.0", "aaaaaaaaaaaa")] * 3
    _write_log(bench.log_path(cfg, "tiny.matmul.1", "random", 0), one)
    _write_log(bench.log_path(cfg, "tiny.matmul.1", "grid", 0), [("0.1.0", "aaaaaaaaaaaa"), ("0.1.0", "bbbbbbbbbbbb"),
                                                                   ("", "")])
    res = bench.report(cfg)
    assert res["provenance"] == {"tiny.matmul.1": {"0.1.0@aaaaaaaaaaaa": 4, "0.1.0@bbbbbbbbbbbb": 1,
                                                   "unrecorded": 1}}
    table = (tmp_path / "mixed" / "table.md").read_text().splitlines()
    flags = [i for i, line in enumerate(table) if line.startswith("**Mixed code:**")]
    # under both summary tables, the median table and the task's table
    assert len(flags) == 4
    assert all(table[i - 1] == "" or table[i - 1].startswith("|") for i in flags)
    assert ("3 code revisions (records per version@revision: 0.1.0@aaaaaaaaaaaa: 4; 0.1.0@bbbbbbbbbbbb: 1; "
            "unrecorded: 1)") in table[flags[0]]
    # the same logs, truncated to the first record of each run: one revision, no line
    first = bench.BenchConfig.from_tier("smoke", out=str(tmp_path / "one"), logs=cfg.logs, n_trial=1,
                                        tuners=["random", "grid"], seeds=[0], against=["grid"])
    assert bench.report(first)["provenance"] == {"tiny.matmul.1": {"0.1.0@aaaaaaaaaaaa": 2}}
    assert "Mixed code" not in (tmp_path / "one" / "table.md").read_text()


def test_results_name_their_date_and_code_revision():
    """Every results file names its machine, date and code revision (a table read later, elsewhere,
    says where and from what code its figures came)."""
    import datetime
    import re

    m = bench.machine()
    assert m["date"] == datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    assert re.fullmatch(r"[\w.+-]+@([0-9a-f]{12}|no-git)", m["release"]), m["release"]
    from release.bench import model_tier

    text = model_tier.markdown({"config": {"tier": "model", "tuners": ["random"], "seeds": [0], "n_trial": {},
                                            "checkpoints": 4, "models": []},
                                 "command": "c", "machine": m, "threads": 2, "models": {}})
    assert f"{m['date']}, release {m['release']}" in text


# names of the benchmark modules before they became the package release.bench
OPERATOR_NAMES = ("BASELINE", "DEFAULT_OUT", "TIERS", "BenchConfig", "log_path", "run", "remeasure", "report",
                  "markdown", "plot", "write_results", "machine", "code_label", "continued_rounds", "Curve", "compare",
                  "geomean", "bootstrap_geomean", "torch_reference", "torch_reference_gflops", "_measure_option",
                  "_summary", "_summary_table", "_fmt", "_ref_cell", "_provenance_line", "_threads_line", "_nan_json")
MODEL_NAMES = ("MS", "WARM", "REFERENCES", "MODEL_TIERS", "ModelBenchConfig", "split_tuner", "parse_trials",
               "checkpoint_trials", "time_to_reach", "ratio_table", "time_model")


def test_both_tiers_share_one_base_class_and_the_earlier_names_still_import():
    """`release.bench` is a package: both tiers are subclasses of `Tier`; its module functions are the
    operator tier's; the model tier's configuration and metrics are importable from it too."""
    from release.bench import model_tier, operator_tier

    assert issubclass(bench.OperatorTier, bench.Tier) and issubclass(bench.ModelTier, bench.Tier)
    assert bench.report is operator_tier.report and bench.markdown is operator_tier.markdown
    assert [n for n in OPERATOR_NAMES if not hasattr(bench, n)] == []
    assert [n for n in MODEL_NAMES if not hasattr(bench, n)] == []
    for n in ("WallClock", "run", "report", "markdown", "plot", "log_path", "checkpoints"):
        assert callable(getattr(model_tier, n)), n
    cfg = bench.BenchConfig.from_tier("smoke")
    assert bench.OperatorTier(cfg).log_path("tiny.matmul.1", "grid", 0) == bench.log_path(cfg, "tiny.matmul.1", "grid", 0)


def test_shared_table_helpers():
    """One formatter, one reference cell and one threads line serve both tiers."""
    from release.bench import reporting

    assert reporting.fmt(None) == "n/a" and reporting.fmt(float("inf")) == "n/a" and reporting.fmt(1.234, 1) == "1.2"
    assert reporting.reference_cell(12.345) == "12.35"
    assert reporting.reference_cell(1.5, 3, " ms", unreliable=True, note="busy") == "1.500 ms (UNRELIABLE: busy)"
    assert reporting.reference_cell(None, error="no torch") == "not timed: no torch"
    assert reporting.threads_line(4) == "Threads: every TVM timing, tuning measurement and reference on 4"
    assert reporting.threads_line(None).startswith("Threads: not recorded")
    line = reporting.threads_line({"logged": [0, 2], "remeasured": 2, "pytorch": 2, "search": 1})
    assert line.startswith("Threads: logged measurements 1 (TVM's default") and "PyTorch reference 2" in line
    head = {"config": {"tier": "t"}, "command": "c", "machine": {"cpu": "x", "cores": 2, "versions": {"torch": "2"}}}
    assert bench.ModelTier.header(head)[0] == "# Benchmark `t` (whole models)"
    assert bench.ModelTier.header(head)[-1] == ("Machine: x, 2 cores, TVM None, PyTorch 2; date not recorded, "
                                                "release revision not recorded  ")
    assert bench.OperatorTier.header(head)[:3] == ["# Benchmark `t`", "", "Command: `c`  "]
