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
from release.relax import load_model


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


def test_compile_model_reorders_kernel_calls_for_tvms_memory_plan():
    """The hook of ``tune-model --memory-order``: inside the build pipeline, right before lowering; TVM plans the
    kept order smaller and the outputs are bitwise those of TVM's order."""
    import numpy as np

    from release.errors import GraphError
    from release.graph.relax_apply import memory_order_pass, reorder_for_memory, run_module
    from release.relax import compile_model

    module, inputs = build_model("inception")
    model = load_model(module, inputs)
    reports: list = []
    ex = compile_model(model, "llvm", before_lowering=memory_order_pass("brkga", 500, reports))
    rep = reports[0]
    assert rep.method == "brkga" and rep.nodes >= 5 and 0 < rep.evaluations <= 500
    assert rep.improved and rep.planned_after < rep.planned_before  # four branches into a concat: order matters
    assert f"{rep.planned_after:,} bytes reordered by brkga" in rep.line()
    given = compile_model(model, "llvm")
    xs = [np.asarray(x) for x in model.inputs]
    for a, b in zip(run_module(None, xs, executable=given), run_module(None, xs, executable=ex)):
        assert np.array_equal(a, b)
    with pytest.raises(GraphError, match="use brkga or regal"):
        reorder_for_memory(None, "anneal")


def test_tune_model_memory_budget_is_checked_before_any_work(capsys):
    rc = main(["tune-model", "--model", "tiny-cnn", "--memory-order", "brkga", "--memory-budget", "0"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.splitlines() == [err] and "--memory-budget 0" in err


@pytest.mark.slow  # a tuned model compiled three times and six child processes measuring the VM's peak: ~1 min
def test_tune_model_memory_order_on_a_users_onnx_model(inception_onnx, tmp_path, capsys):
    log = tmp_path / "inception.jsonl"
    rc = main(["tune-model", "--model", str(inception_onnx), "--tuner", "random", "--n-trial", "4", "--compare", "",
               "--no-knowledge", "--no-progress", "--log", str(log), "--memory-order", "brkga", "--memory-budget",
               "500", "--number", "1", "--repeat", "1", "--min-repeat-ms", "0"])
    out = capsys.readouterr().out
    assert rc == 0, out
    lines = [ln for ln in out.splitlines() if ln.startswith("memory")]
    assert "reordered by brkga" in lines[0] and "lower than" in lines[0], lines
    assert "VM peak measured" in lines[1] and "outputs identical" in lines[1], lines
    assert (tmp_path / "inception.so").stat().st_size > 0
