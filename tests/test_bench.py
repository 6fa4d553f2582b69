"""The benchmark harness: metrics on hand-made curves, and a real smoke run."""

import json
import math

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
    never = curve([1, 1, 1, 1, 1, 1], [1, 2, 3, 4, 5, 6])
    assert math.isnan(bench.compare(base, never)["time_speedup"])


def test_round_speedup_uses_refit_counts():
    base = curve([1] * 8, np.arange(1, 9), rounds=[0, 0, 0, 0, 1, 1, 1, 1])  # round 1 starts after 4 s
    other = curve([1] * 4, np.arange(1, 5), rounds=[0, 0, 1, 1])  # after 2 s
    assert bench.compare(base, other, rounds=1)["round_speedup"] == pytest.approx(2.0)


def test_geomean_and_bootstrap():
    assert bench.geomean([2, 8]) == pytest.approx(4)
    assert bench.geomean([4, float("nan"), -1, None]) == pytest.approx(4)
    est, lo, hi = bench.bootstrap_geomean({"a": [2, 2, 2], "b": [8, 8, 8]})
    assert est == pytest.approx(4) and lo == pytest.approx(4) and hi == pytest.approx(4)
    est, lo, hi = bench.bootstrap_geomean({"a": [1, 4], "b": [4, 4]})
    assert lo <= est <= hi and lo < hi


def test_smoke_run_writes_results(tmp_path, fast_measure):
    cfg = bench.BenchConfig.from_tier("smoke", out=str(tmp_path), n_trial=4, number=1, repeat=1, min_repeat_ms=0)
    bench.run(cfg, progress=False)
    res = bench.report(cfg, command="test")
    data = json.loads((tmp_path / "results.json").read_text())
    assert set(data) >= {"config", "machine", "per_task", "summary", "pytorch_gflops", "curves", "command"}
    rows = data["per_task"]["tiny.matmul.1"]
    assert {r["measurements"] for t in rows.values() for r in t} == {4}
    grid = rows["grid"][0]
    assert grid["best_gflops"] > 0 and "time_speedup" in grid
    assert rows["random"][0]["measure_ratio"] == pytest.approx(1.0)  # the baseline against itself
    assert (tmp_path / "table.md").read_text().startswith("# Benchmark `smoke`")
    assert (tmp_path / "curves.png").stat().st_size > 0
    # resumable: running again measures nothing more
    bench.run(cfg, progress=False)
    from release.measure import load_records

    assert len(load_records(bench.log_path(cfg, "tiny.matmul.1", "grid", 0))) == 4
