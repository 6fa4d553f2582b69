"""Users' models into REGAL: an ONNX file on the command line and a PyTorch module from Python, through the
importers ``tune-model`` uses; a file that does not import is one line, exit 2, nothing written."""

from __future__ import annotations

import json

import pytest
import torch

from release.cli import main
from release.graph.cli import load_graph, load_model_graph
from release.graph.models import build_model
from release.graph.tvm_plan import TVMPlanModel, planned_memory_exact
from release.model import load_model


@pytest.fixture(scope="module")
def inception_onnx(tmp_path_factory):
    """The registered Inception-like block (four branches concatenated) written as ONNX by the exporter that
    works offline (TorchScript's)."""
    module, inputs = build_model("inception")
    path = tmp_path_factory.mktemp("onnx") / "inception_block.onnx"
    torch.onnx.export(module.eval(), tuple(inputs), str(path), dynamo=False, input_names=["x"])
    return path


def test_onnx_file_and_pytorch_module_import_as_graphs_whose_plan_is_tvms(inception_onnx):
    g, mod = load_model_graph(str(inception_onnx))
    assert g.name == "inception_block-fused" and g.n >= 5
    plan = TVMPlanModel(mod, g)
    assert plan.given_order_bytes() == planned_memory_exact(mod).total > 0
    assert load_graph(str(inception_onnx), fused=True).n == g.n  # the same graph through the optimize/export path
    assert load_graph(str(inception_onnx)).n > g.n  # unfused (optimize without --fused): one node per Relax op
    module, inputs = build_model("inception")
    g2, mod2 = load_model_graph(load_model(module, inputs))  # a PyTorch module: tune-model's importer
    g3, mod3 = load_model_graph("model:inception")  # the same module by its registered name
    assert g2.n == g3.n and g2.ops == g3.ops  # (the ONNX export folds batch norms into the convs: fewer nodes)
    assert TVMPlanModel(mod2, g2).given_order_bytes() == TVMPlanModel(mod3, g3).given_order_bytes() > 0


def test_cli_optimize_and_apply_an_onnx_file(inception_onnx, tmp_path, capsys):
    rc = main(["regal", "optimize", "--graph", str(inception_onnx), "--objective", "peak-memory", "--memory", "tvm",
               "--method", "brkga", "--budget", "200"])
    out = capsys.readouterr().out
    assert rc == 0 and "graph inception_block-fused" in out and "brkga" in out
    rc = main(["regal", "apply", "--graph", str(inception_onnx), "--budget", "200", "--no-measure",
               "--out", str(tmp_path / "apply")])
    assert rc == 0, capsys.readouterr()
    d = json.loads((tmp_path / "apply" / "apply.json").read_text())
    assert d["outputs_identical"] and d["planned_after"] <= d["planned_before"]
    assert (tmp_path / "apply" / "reordered.so").stat().st_size > 0


def test_an_onnx_file_that_does_not_import_is_one_line_and_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"not a protobuf")
    for argv in (["regal", "apply", "--graph", str(bad), "--out", str(tmp_path / "out")],
                 ["regal", "optimize", "--graph", str(bad), "--objective", "peak-memory"],
                 ["regal", "apply", "--graph", str(tmp_path / "missing.onnx"), "--out", str(tmp_path / "out")]):
        rc = main(argv)
        err = capsys.readouterr().err.strip()
        assert rc == 2 and len(err.splitlines()) == 1 and "onnx" in err.lower(), err
        assert not (tmp_path / "out").exists()
