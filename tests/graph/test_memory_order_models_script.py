"""benchmarks/regal/memory_order_models.py --quick: the per-model memory report of the memory order."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("memory_order_models",
                                                  ROOT / "benchmarks/regal/memory_order_models.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow  # a benchmark script's run (~28 s)
def test_quick_run_reports_planned_and_measured_memory(tmp_path):
    assert _script().main(["--quick", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "memory_order_models.json").read_text())
    rows = {r["model"]: r for r in doc["rows"]}
    assert set(rows) == {"tiny-cnn", "inception"} and doc["budget"] == 200
    for r in rows.values():
        assert r["applied"] in ("brkga", "regal")
        kept = r["methods"][r["applied"]]["planned_after"]
        assert r["planned_after"] == kept == min(m["planned_after"] for m in r["methods"].values())
        for m in r["methods"].values():
            assert m["planned_after"] <= m["planned_before"] == r["planned_before"]
            assert m["improved"] == (m["planned_after"] < m["planned_before"])
            assert 0 < m["evaluations"] and m["search_s"] > 0
    # Inception's concatenations: TVM plans fewer bytes in BRKGA's order (1,906,688 -> 1,705,984 B); the
    # reordered module computes the same outputs, bit for bit, and both libraries' peaks were measured
    inc = rows["inception"]
    assert inc["planned_after"] < inc["planned_before"]
    assert inc["outputs_identical"] is True and inc["max_abs_diff"] == 0.0
    assert len(inc["vm_peaks_before"]) == len(inc["vm_peaks_after"]) == 1 and inc["vm_peak_before"] > 0
    # a 3-kernel chain has one order: nothing moves, nothing is compiled or measured
    tiny = rows["tiny-cnn"]
    assert tiny["planned_after"] == tiny["planned_before"] and tiny["outputs_identical"] is None
    assert tiny["vm_peaks_before"] == [] and tiny["vm_peak_change"].startswith("given order kept")
    # a rerun of one model keeps the other's row
    assert _script().main(["--quick", "inception", "--out", str(tmp_path)]) == 0
    again = json.loads((tmp_path / "memory_order_models.json").read_text())
    assert [r["model"] for r in again["rows"]] == ["tiny-cnn", "inception"]
    assert again["rows"][0] == rows["tiny-cnn"]
    md = (tmp_path / "memory_order_models.md").read_text()
    assert md.startswith("# Peak memory before and after the memory order")
    assert "| skip-heavy | inception | 12 | 1,906,688 |" in md
