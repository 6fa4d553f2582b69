"""ONNX Runtime and OpenVINO as reference lines (:mod:`release.reference`): each timed by the references'
protocol on a real model file, in its own process or in this one, its output checked against the source
model's; a runtime missing, failing or wrong is one line, never an exception. Real runtimes on tiny-cnn
(a conv and a dense layer: each timing a second or two); no figure is judged, only what the result says."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from release import zoo
from release.reference import ONNX_RUNTIMES, onnx_runner, reference_line, time_callable, time_onnx_runtime

pytest.importorskip("onnxruntime")
pytest.importorskip("openvino")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """tiny-cnn as ONNX, its input and PyTorch's output."""
    import torch

    path = zoo.export_onnx("tiny-cnn", str(tmp_path_factory.mktemp("onnx") / "tiny.onnx"))
    module, (x,) = zoo.build("tiny-cnn")
    with torch.no_grad():
        want = module(x).numpy()
    return path, [x.numpy()], [want]


@pytest.mark.parametrize("isolate", [True, False])
@pytest.mark.parametrize("runtime", ONNX_RUNTIMES)
def test_runtime_timed_and_checked(runtime, isolate, tiny):
    path, inputs, want = tiny
    res = time_onnx_runtime(runtime, path, inputs, 2, expected=want, number=2, repeat=3, warmup=1, isolate=isolate)
    assert "error" not in res, res
    assert 0 < res["latency_ms"] <= res["median_ms"] and res["second_ms"] > 0
    assert res["threads"] == 2 and res["isolated"] is isolate and res["max_abs_err"] < 1e-3
    assert (res["number"], res["repeat"]) == (2, 3) and res["version"]
    assert res["one_thread_ms"] > 0  # the oversubscription check ran
    assert res["reliable"] is True or (res["reliable"] is False and res["note"])  # a flagged one says why
    line = reference_line(runtime, res)
    assert line.startswith(f"{runtime} ") and " ms on 2 threads" in line


@pytest.mark.parametrize("runtime", ONNX_RUNTIMES)
def test_runner_outputs_match_pytorch(runtime, tiny):
    path, inputs, want = tiny
    run, version = onnx_runner(runtime, path, inputs, 1)
    outs = run()
    assert len(outs) == 1 and version
    np.testing.assert_allclose(outs[0], want[0], rtol=1e-4, atol=1e-5)  # OpenVINO in f32, not its bf16 default


@pytest.mark.parametrize("runtime", ONNX_RUNTIMES)
def test_failures_are_one_line(runtime, tiny, tmp_path, monkeypatch):
    path, inputs, want = tiny
    label = {"onnxruntime": "ONNX Runtime", "openvino": "OpenVINO"}[runtime]
    wrong = time_onnx_runtime(runtime, path, inputs, 1, expected=[want[0] + 1.0], one_thread=False, isolate=False)
    assert wrong["error"].startswith(f"{label}'s output differs from the source model's (max abs error 1")
    missing = time_onnx_runtime(runtime, str(tmp_path / "none.onnx"), inputs, 1, one_thread=False)
    assert missing["error"].startswith(f"{label} failed: ") and "\n" not in missing["error"]
    assert reference_line(runtime, missing) == f"{runtime} n/a ({missing['error']})"
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    assert time_onnx_runtime(runtime, str(bad), inputs, 1, one_thread=False)["error"].startswith(f"{label} failed: ")
    shapes = time_onnx_runtime(runtime, path, inputs, 1, expected=[want[0][:, :3]], one_thread=False, isolate=False)
    assert "shape" in shapes["error"]
    import release.reference as R

    monkeypatch.setattr(R, "_installed", lambda name: name != runtime)
    assert time_onnx_runtime(runtime, path, inputs, 1) == {
        "error": f"{runtime} is not installed (pip install 'release-tvm[bench]')"}
    assert time_onnx_runtime("tensorrt", path, inputs, 1)["error"].startswith("unknown ONNX runtime 'tensorrt'")


def test_time_callable_counts_its_calls():
    """The protocol: ``warmup`` calls, ``repeat`` x ``number`` timed calls, then the second method's blocks
    (at least three): counted, not timed."""
    calls = []
    t = time_callable(lambda: calls.append(1), 2, number=4, repeat=5, warmup=2)
    assert len(calls) >= 2 + 4 * 5 + 1 + 3
    assert t.threads == 2 and 0 < t.seconds <= t.median


def test_tune_model_compare_prints_each_runtime(capsys):
    """``--compare onnxruntime,openvino``: the built-in model exported once, both runtimes timed on it in
    processes of their own, each checked against PyTorch's output (:func:`release.reference.onnx_references`),
    one line per runtime after the comparisons start, as the printer shows it (the comparison step of
    ``run_tune_model`` on an already-imported model)."""
    from release import relax as M
    from release.commands.tune_model import compare_baselines
    from release.commands.tune_model_render import TuneModelPrinter

    model = M.load_model("tiny-cnn")
    config = SimpleNamespace(compare=("onnxruntime", "openvino"), n_trial=4)
    ms, torch_ref, runtimes = compare_baselines(config, model, 1, 1.0, TuneModelPrinter(progress=False))
    assert ms is None and torch_ref is None and list(runtimes) == list(ONNX_RUNTIMES)
    assert all("latency_ms" in r and r["max_abs_err"] < 1e-3 and r["isolated"] for r in runtimes.values()), runtimes
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "compare  onnxruntime, openvino"
    for rt in ONNX_RUNTIMES:
        (line,) = [ln for ln in lines if ln.startswith(f"{rt} ")]
        assert " ms on 1 threads" in line and "output checked" in line, line


def test_tune_model_refuses_an_unknown_comparison():
    p = subprocess.run([sys.executable, "-m", "release.cli", "tune-model", "--model", "tiny-cnn", "--compare",
                        "onnxruntime,tensorrt"], capture_output=True, text=True, timeout=300)
    assert p.returncode != 0
    assert "unknown --compare entries ['tensorrt']; use untuned, torch, ms, onnxruntime, openvino" in p.stderr + p.stdout


@pytest.mark.parametrize("node_type, shapes, kind", [
    ("Convolution", [(1, 32, 56, 56), (64, 32, 3, 3)], "conv2d 3x3"),
    ("Convolution", [(1, 32, 56, 56), (64, 32, 1, 1)], "conv2d 1x1"),
    ("Convolution", [(1, 32, 56, 56), (64, 32, 5, 5)], "conv2d other kernel"),
    ("GroupConvolution", [(1, 32, 56, 56), (32, 1, 1, 3, 3)], "conv2d depthwise"),
    ("GroupConvolution", [(1, 32, 56, 56), (4, 16, 8, 3, 3)], "conv2d grouped"),
    ("FullyConnected", [(1, 512), (1000, 512)], "dense/matmul"),
    ("MatMul", [(1, 12, 128, 64), (1, 12, 64, 128)], "attention (batch matmul)"),
    ("Reorder", [(1, 3, 224, 224)], "layout transforms"),
    ("MVN", [(1, 128, 768)], "softmax/layernorm/GELU"),
    ("Softmax", [(1, 12, 128, 128)], "softmax/layernorm/GELU"),
    ("Pooling", [(1, 64, 112, 112)], "pooling"),
    ("Concatenation", [(1, 64, 28, 28), (1, 64, 28, 28)], "copies/reshape"),
    ("Eltwise", [(1, 64, 28, 28)], "elementwise"),
])
def test_openvino_node_kinds(node_type, shapes, kind):
    from release.profile import KINDS, ov_kind

    assert ov_kind(node_type, shapes) == kind and kind in KINDS
