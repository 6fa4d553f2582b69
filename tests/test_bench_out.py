"""Benchmarks write under --out, by default outside what git tracks: `release bench
--tier smoke` leaves `benchmarks/results/` (the committed figures) alone and the checkout clean."""

import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_default_out_and_logs_are_under_runs_not_benchmarks_results():
    from release import bench

    for tier in ("smoke", "quick"):
        cfg = bench.BenchConfig.from_tier(tier)
        assert cfg.out == os.path.join("runs", "bench", tier) and cfg.logs == os.path.join("runs", "bench", "logs")
    cfg = bench.ModelBenchConfig.from_tier("model-smoke")
    assert cfg.out == os.path.join("runs", "bench", "model-smoke") and cfg.logs.startswith(cfg.out)
    given = bench.BenchConfig.from_tier("smoke", out="elsewhere")  # --out alone keeps its logs beside it
    assert given.logs == os.path.join("elsewhere", "logs")


@pytest.mark.skipif(shutil.which("git") is None or not os.path.isdir(os.path.join(ROOT, ".git")),
                    reason="needs a git checkout")
@pytest.mark.parametrize("cwd", [".", "benchmarks"])
def test_the_default_out_is_git_ignored_wherever_the_command_runs(cwd):
    for path in ("runs/bench/smoke/results.json", "runs/bench/logs/tiny.matmul.1.random.s0.jsonl"):
        p = subprocess.run(["git", "check-ignore", "-q", path], cwd=os.path.join(ROOT, cwd))
        assert p.returncode == 0, f"{cwd}/{path} is not ignored by git"
