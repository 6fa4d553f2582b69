"""benchmarks/regal/headroom.py --quick and the lower bound on TVM's plan it reports."""

import importlib.util
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("headroom", ROOT / "benchmarks/regal/headroom.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_quick_run_writes_consistent_headroom(tmp_path):
    _script().main(["--quick", "--out", str(tmp_path)])
    doc = json.loads((tmp_path / "results.json").read_text())
    assert (tmp_path / "table.md").read_text().startswith("# Headroom over plain BRKGA")
    assert doc["budgets"] == [500] and doc["seeds"] == [0, 1]
    assert {g["family"] for g in doc["graphs"]} == {"synthetic", "model", "skip-heavy"}
    for g in doc["graphs"]:
        objs = [r["objective"] for r in g["objectives"]]
        assert objs == (["memory-ideal", "runtime-2dev"] if g["family"] == "synthetic"
                        else ["memory-ideal", "memory-tvm", "runtime-2dev"])
        for r in g["objectives"]:
            assert r["prefix_check"] == "ok"
            best = r["best_known"]
            assert best == min(r["candidates"].values())
            assert r["lower_bound"] <= best and r["gap_best_to_bound_pct"] >= 0
            assert best <= min(r["given"], r["greedy"])
            for s in map(str, doc["seeds"]):
                for b, v in r["runs"][s].items():
                    assert best <= v["best"] <= min(r["given"], r["greedy"])  # BRKGA starts from both
                    assert v["seconds"] >= 0
            for b, h in r["headroom_pct"].items():
                assert 0 <= h["min"] <= h["mean"] <= h["max"]
                runs = [r["runs"][s][b]["best"] for s in map(str, doc["seeds"])]
                assert np.isclose(h["mean"], np.mean([100 * (x / best - 1) for x in runs]))


def test_tvm_plan_lower_bound_holds_on_random_orders():
    from release.graph.cli import load_model_graph
    from release.graph.perf_model import PerformanceModel
    from release.graph.tvm_plan import TVMPlanModel

    g, mod = load_model_graph("model:inception", True)
    plan = TVMPlanModel(mod, g)
    lb = plan.lower_bound_bytes()
    assert plan.unplanned_bytes < lb <= plan.given_order_bytes()
    m = PerformanceModel(g, 1, "peak-memory", memory_plan=plan)
    o, _ = m.evaluate_population(np.random.default_rng(0).random((200, g.n)))
    assert lb <= o.min()
