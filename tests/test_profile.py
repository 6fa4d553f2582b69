"""``release profile``: per-operator-kind time of a compiled model beside ONNX Runtime's, and the classifier of
kernel calls and ONNX nodes into kinds (any layout, pre-packed weights included)."""

from __future__ import annotations

import json

import pytest

from release.cli import main
from release.profile import BUSY_SUM_RATIO, KINDS, gap_table, ort_kind, sum_flag, tvm_kind


@pytest.mark.parametrize("symbol,shapes,kind", [
    ("fused_conv2d_add_relu", [(1, 64, 56, 56), (64, 64, 3, 3), (1, 64, 1, 1), (1, 64, 56, 56)], "conv2d 3x3"),
    # NCHWc: blocked activations, a 6-D blocked weight
    ("fused_conv2d_NCHWc_add", [(1, 4, 56, 56, 16), (16, 4, 1, 1, 16, 16), (1, 16, 1, 1, 16), (1, 16, 56, 56, 16)],
     "conv2d 1x1"),
    # a weight pre-packed into a layout of the schedule's own: classed by element count alone
    ("fused_conv2d_NCHWc1_relu", [(1, 8, 28, 28, 16), (4, 2, 3, 8, 3, 16, 16), (1, 8, 28, 28, 16)], "conv2d 3x3"),
    ("fused_conv2d_NCHWc7", [(1, 8, 28, 28, 16), (8, 2, 8, 16, 8), (1, 8, 28, 28, 16)], "conv2d 1x1"),
    ("conv2d", [(1, 3, 224, 224), (64, 3, 7, 7), (1, 64, 112, 112)], "conv2d other kernel"),
    # a residual input of the output's shape is larger than a pre-packed 1x1 weight: not taken for the weight
    ("fused_conv2d_NCHWc5_add5_add8_prepacked", [(1, 6, 14, 14, 16), (4, 6, 1, 1, 16, 16), (1, 4, 1, 1, 16),
                                                 (1, 4, 14, 14, 16), (1, 4, 14, 14, 16)], "conv2d 1x1"),
    # a pre-packed 1x1 weight of six dimensions that are not OIHW{i}i{o}o (144 -> 24 channels): by element count
    ("fused_conv2d_NCHWc5_add4_add6_prepacked", [(1, 9, 56, 56, 16), (2, 3, 2, 3, 8, 12), (2, 12),
                                                 (1, 2, 56, 56, 12), (1, 2, 56, 56, 12)], "conv2d 1x1"),
    ("fused_conv2d3_add_clip", [(1, 96, 56, 56), (96, 1, 3, 3), (1, 96, 1, 1), (1, 96, 56, 56)], "conv2d depthwise"),
    ("fused_conv2d_NCHWc2", [(1, 6, 56, 56, 16), (6, 1, 3, 3, 1, 16), (1, 6, 56, 56, 16)], "conv2d depthwise"),
    ("conv2d5", [(1, 64, 28, 28), (64, 16, 3, 3), (1, 64, 28, 28)], "conv2d grouped"),
    ("fused_matmul_add_gelu", [(1, 128, 768), (768, 3072), (3072,), (1, 128, 3072)], "dense/matmul"),
    ("matmul3", [(1, 12, 128, 64), (1, 12, 64, 128), (1, 12, 128, 128)], "attention (batch matmul)"),
    ("softmax", [(1, 12, 128, 128), (1, 12, 128, 128)], "softmax/layernorm/GELU"),
    ("fused_layer_norm_add", [(1, 128, 768), (768,), (768,), (1, 128, 768)], "softmax/layernorm/GELU"),
    ("layout_transform3", [(1, 64, 56, 56), (1, 4, 56, 56, 16)], "layout transforms"),
    ("max_pool2d", [(1, 64, 112, 112), (1, 64, 56, 56)], "pooling"),
    ("transpose1", [(1, 128, 12, 64), (1, 12, 128, 64)], "copies/reshape"),
    ("fused_batch_norm_relu", [(1, 64, 56, 56), (64,), (1, 64, 56, 56)], "elementwise"),
    ("vm.builtin.alloc_storage", [], "runtime (alloc, shape checks)"),
])
def test_tvm_kernel_kinds(symbol, shapes, kind):
    assert tvm_kind(symbol, shapes) == kind


@pytest.mark.parametrize("op,shapes,kind", [
    ("Conv", [(1, 64, 56, 56), (64, 64, 3, 3), (64,)], "conv2d 3x3"),
    ("FusedConv", [(1, 64, 56, 56), (256, 64, 1, 1)], "conv2d 1x1"),
    ("Conv", [(1, 96, 56, 56), (96, 1, 3, 3)], "conv2d depthwise"),
    ("MatMul", [(1, 128, 768), (768, 768)], "dense/matmul"),
    ("MatMul", [(1, 12, 128, 64), (1, 12, 64, 128)], "attention (batch matmul)"),
    ("Attention", [(1, 128, 768), (768, 2304)], "attention (fused)"),
    ("SkipLayerNormalization", [(1, 128, 768)], "softmax/layernorm/GELU"),
    ("ReorderInput", [(1, 64, 56, 56)], "layout transforms"),
    ("GlobalAveragePool", [(1, 512, 7, 7)], "pooling"),
    ("Reshape", [(1, 512, 1, 1), (2,)], "copies/reshape"),
    ("Add", [(1, 64, 56, 56), (1, 64, 56, 56)], "elementwise"),
])
def test_onnx_runtime_node_kinds(op, shapes, kind):
    assert ort_kind(op, shapes) == kind


def test_call_flop_counts_multiply_adds_twice():
    from release.profile import call_flop

    # 3x3 conv 64 -> 64 on 56x56: 2 * (64*56*56) * (64*9)
    assert call_flop("conv2d 3x3", [(1, 64, 56, 56), (64, 64, 3, 3), (1, 64, 56, 56)]) == 2 * 64 * 56 * 56 * 64 * 9
    # the same in NCHWc with a pre-packed weight: the same count
    assert call_flop("conv2d 3x3", [(1, 4, 56, 56, 16), (4, 2, 3, 8, 3, 16, 16 // 4), (1, 4, 56, 56, 16)]) == \
        2 * 64 * 56 * 56 * (4 * 2 * 3 * 8 * 3 * 16 * 4 / 64)
    assert call_flop("dense/matmul", [(1, 128, 768), (768, 3072), (1, 128, 3072)]) == 2 * 128 * 3072 * 768
    assert call_flop("elementwise", [(1, 64), (1, 64)]) == 0


def test_fma_peak_multiplies_what_the_machine_reports():
    from release.target import FMA_UNITS, fma_peak

    p = fma_peak({"kind": "llvm", "mcpu": "znver4", "num-cores": 4})
    assert p["lanes"] == 16 and p["fma_units"] == FMA_UNITS["znver4"] == 1 and p["cores"] == 4
    if p["ghz"]:
        assert p["gflops"] == pytest.approx(16 * 1 * 2 * p["ghz"] * 4)
    assert fma_peak({"kind": "llvm", "mcpu": "haswell", "num-cores": 1})["lanes"] == 8


def test_fma_units_trust_server_flags_over_a_client_family_name():
    """A KVM guest on a Sapphire Rapids Xeon is named rocketlake by LLVM (a client part, one FMA port);
    its AMX flag says it is a server part with two."""
    from release.target import fma_units

    assert fma_units("rocketlake") == (1, "the CPU family rocketlake")
    units, why = fma_units("rocketlake", ["avx512f", "amx_tile", "avx512_fp16"])
    assert units == 2 and "amx_tile" in why and "rocketlake" in why
    assert fma_units("znver4", ["amx_tile"])[0] == 1  # an AMD family's entry is not overridden
    assert fma_units("sapphirerapids", ["amx_tile"]) == (2, "assumed: sapphirerapids not in the table")


def test_gap_table_shares_the_gap_between_kinds():
    rows = gap_table({"conv2d 3x3": 6.0, "elementwise": 1.0}, {"conv2d 3x3": 3.0, "elementwise": 2.0})
    by = {r["kind"]: r for r in rows}
    assert by["conv2d 3x3"]["gap_ms"] == 3.0 and by["conv2d 3x3"]["share"] == pytest.approx(1.5)
    assert by["elementwise"]["share"] == pytest.approx(-0.5)  # a kind where TVM is ahead takes from the gap
    assert [r["kind"] for r in rows] == ["conv2d 3x3", "elementwise"]  # the order of KINDS
    assert all(r["share"] is None for r in gap_table({"elementwise": 1.0}, {"elementwise": 2.0}))


def test_a_side_whose_kernels_sum_past_its_end_to_end_time_is_flagged():
    """The ONNX Runtime profile seen on a busy VM (nodes 74.0 ms beside 42.2 ms end to end) is flagged
    with both figures and the fix; a quiet one (41.9 beside 41.5) and either side without an end-to-end
    time are not."""
    line = sum_flag("ONNX Runtime", 74.005, 42.154)
    assert line and "74.005 ms" in line and "1.76x" in line and "42.154 ms" in line and "quiet machine" in line
    assert line.startswith("ONNX Runtime's")
    assert sum_flag("TVM", 41.934, 41.458) is None
    assert sum_flag("TVM", BUSY_SUM_RATIO * 10.0, 10.0) is None and sum_flag("TVM", 13.01, 10.0)
    assert sum_flag("ONNX Runtime", 5.0, 0.0) is None  # no end-to-end time (ONNX Runtime failed): nothing to hold it to


def test_profile_cli_on_tiny_cnn(tmp_path, capsys):
    out = tmp_path / "prof" / "tiny.json"
    rc = main(["profile", "--model", "tiny-cnn", "--runs", "3", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    d = json.loads(out.read_text())
    calls = d["tvm"]["calls"]
    assert calls and all(c["kind"] in KINDS and c["ms"] >= 0 for c in calls)
    assert {"conv2d 3x3", "dense/matmul"} <= {c["kind"] for c in calls}  # tiny-cnn: a 3x3 conv and a dense layer
    assert d["tvm"]["total_ms"] == pytest.approx(sum(d["tvm"]["kinds"].values()))
    nodes = d["onnxruntime"]["nodes"]
    assert {"conv2d 3x3", "dense/matmul"} <= {n["kind"] for n in nodes}
    assert {r["kind"] for r in d["rows"]} <= set(KINDS)
    assert "| operator kind | TVM ms | ONNX Runtime ms" in text and (tmp_path / "prof" / "tiny.md").exists()
    assert "hottest  " in text and d["peak"]["lanes"] in (4, 8, 16)
    md = (tmp_path / "prof" / "tiny.md").read_text()
    # the flags are exactly what the recorded figures give (none on a quiet machine, either side on a busy
    # one): recomputed from the JSON, so the verdict holds at any load and a missing or wrong flag fails
    kernels_ms = sum(v for k, v in d["tvm"]["kinds"].items() if k != KINDS[-1])
    expected = [f for f in (sum_flag("TVM", kernels_ms, d["tvm"]["fastest_ms"]),
                            sum_flag("ONNX Runtime", d["onnxruntime"]["total_ms"], d["onnxruntime"]["fastest_ms"]))
                if f]
    assert d["flags"] == expected
    assert [ln for ln in text.splitlines() if ln.startswith("FLAG ")] == [f"FLAG     {f}" for f in expected]
    assert md.count("**Flagged:**") == len(expected) and all(f in md for f in expected)


@pytest.mark.parametrize("argv,msg", [
    (["--runs", "0"], "--runs 0"),
    (["--log", "no/such.jsonl"], "does not exist"),
    (["--model", "nosuchmodel"], "unknown model"),
])
def test_profile_bad_input_is_one_line(argv, msg, capsys):
    rc = main(["profile", "--model", "tiny-cnn", *argv] if "--model" not in argv else ["profile", *argv])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and msg in err, err


def _side_by_side():
    """``benchmarks/profile/logs_side_by_side.py`` imported from the checkout (benchmarks/ is not a package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "profile" / "logs_side_by_side.py"
    spec = importlib.util.spec_from_file_location("logs_side_by_side", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow  # a benchmark script's rounds with ONNX Runtime (~20 s)
def test_logs_side_by_side_times_every_log_and_onnx_runtime_each_round(tmp_path, capsys):
    """The side-by-side script compiles each named log and times it beside ONNX Runtime in every round; the
    first log is the baseline of the ratios."""
    log = tmp_path / "tiny.jsonl"
    rc = main(["tune-model", "--model", "tiny-cnn", "--tuner", "random", "--n-trial", "8", "--compare", "",
               "--log", str(log), "--number", "1", "--repeat", "1", "--min-repeat-ms", "0", "--no-progress"])
    assert rc == 0
    out = tmp_path / "sbs"
    assert _side_by_side().main(["--model", "tiny-cnn", "--logs", f"a={log}", f"b={log}", "--rounds", "2",
                                 "--out", str(out)]) == 0
    got = json.loads((out / "side_by_side.json").read_text())
    assert list(got["builds"]) == ["a", "b", "onnxruntime"]
    for name, row in got["builds"].items():
        assert len(row["per_round_ms"]) == 2 and all(t > 0 for t in row["per_round_ms"]), name
        assert row["fastest_ms"] == min(row["per_round_ms"])
    assert got["builds"]["a"]["over_first_median"] == 1.0
    assert got["builds"]["onnxruntime"]["over_ort_median"] == 1.0
    assert "| b |" in (out / "side_by_side.md").read_text()


@pytest.mark.parametrize("logs,msg", [
    (["a"], "give NAME=LOG"),
    (["a=/no/such.jsonl"], "does not exist"),
])
def test_logs_side_by_side_bad_logs_are_one_line(logs, msg, tmp_path):
    with pytest.raises(SystemExit, match=msg):
        _side_by_side().main(["--logs", *logs, "--out", str(tmp_path)])
