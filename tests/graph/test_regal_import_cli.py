"""Relax/PyTorch importers (real TVM, real torch.export) and the `release regal` CLI."""

import json
import warnings

import numpy as np
import pytest

from release.cli import main
from release.errors import GraphError
from release.graph.exact import exact_peak_memory
from release.graph.models import MODEL_NAMES, build_model, model_graph, watts_strogatz_dag
from release.graph.relax_import import CostConfig, from_relax, load_latencies

warnings.filterwarnings("ignore", category=FutureWarning)


@pytest.fixture(scope="module")
def tiny_mod():
    from release.graph.relax_import import export_torch

    model, inputs = build_model("tiny")
    return export_torch(model, inputs)


def test_tiny_model_import_structure_and_costs(tiny_mod):
    g = from_relax(tiny_mod, name="tiny")
    # conv+bias(reshape, add)+relu twice, concat, conv+bias
    assert g.n == 12
    assert g.ops[0] == "relax.nn.conv2d" and g.ops[8] == "relax.concat"
    # output bytes from shapes and dtypes: conv 1x8x8x8 float32
    assert g.out_bytes[0] == 8 * 8 * 8 * 4
    assert g.out_bytes[8] == 16 * 8 * 8 * 4
    # TVM's FLOP estimate of the 3x3 conv: 2 * 8 * 8 * 8 * 3 * 3 * 3 = 27648, at 50 GFLOP/s + 2 us overhead
    assert g.cost[0] == pytest.approx(27648 / 50e3 + 2.0)
    # the concat reads both relu outputs
    assert sorted(g.data_pred[8]) == [3, 7]
    # given order = binding order
    assert g.topological_order().tolist() == list(range(12))


def test_tiny_model_measured_latencies_override_estimates(tiny_mod, tmp_path):
    g = from_relax(tiny_mod, latencies={"lv": 100.0, "concatenate": 7.5})
    assert g.cost[0] == 100.0
    assert g.cost[8] == 7.5
    # 1x1 conv keeps its estimate; it is memory-bound: (768 B in + 2048 B out) / 20 GB/s > 3072 FLOP / 50 GFLOP/s
    assert g.cost[4] == pytest.approx(max(3072 / 50e3, (768 + 2048) / 20e3) + 2.0)
    log = tmp_path / "log.jsonl"
    log.write_text('{"name": "lv", "run_secs": [0.001, 0.003]}\n{"name": "lv", "latency_us": 1500}\n')
    assert load_latencies(log) == {"lv": 1500.0}
    assert from_relax(tiny_mod, latencies=str(log)).cost[0] == 1500.0
    # this project's tuning log (release.measure.records): costs in seconds, failed records skipped
    rec = tmp_path / "tune.jsonl"
    rec.write_text('{"task": "t1", "name": "conv2d", "costs": [1e-4, 3e-4], "error_kind": ""}\n'
                   '{"task": "t1", "name": "conv2d", "costs": [], "error_kind": "build"}\n')
    lat = load_latencies(rec)
    assert lat["conv2d"] == pytest.approx(200.0) and lat["t1"] == pytest.approx(200.0)
    assert from_relax(tiny_mod, latencies=lat).cost[0] == pytest.approx(200.0)
    g2 = from_relax(tiny_mod, cost=CostConfig(gflops=5.0, overhead_us=0.0))
    assert g2.cost[0] == pytest.approx(27648 / 5e3)


def test_unknown_model_and_bad_latency_file(tmp_path):
    with pytest.raises(GraphError, match="unknown model 'vgg'; choose one of"):
        build_model("vgg")
    with pytest.raises(GraphError, match="does not exist"):
        load_latencies(tmp_path / "none.json")


def test_watts_strogatz_is_seeded_and_a_dag():
    e1 = watts_strogatz_dag(16, 4, 0.75, seed=1)
    assert e1 == watts_strogatz_dag(16, 4, 0.75, seed=1)
    assert e1 != watts_strogatz_dag(16, 4, 0.75, seed=2)
    assert len(e1) == 16 * 4 // 2 and all(u < v for u, v in e1)
    with pytest.raises(GraphError, match="even k"):
        watts_strogatz_dag(8, 3)


@pytest.mark.parametrize("name,min_nodes", [("inception", 20), ("transformer", 40)])
def test_real_models_import(name, min_nodes):
    g = model_graph(name)
    assert g.n >= min_nodes
    assert np.all(g.cost > 0) and g.out_bytes.max() > 0
    r = exact_peak_memory(g, max_states=200_000)
    assert r.optimal
    given = g.topological_order()
    from release.graph.perf_model import PerformanceModel

    m = PerformanceModel(g, 1, "peak-memory")
    assert r.objective <= m.decode(m.given_order_chromosome()).peak_memory
    assert given.tolist() == list(range(g.n))


@pytest.mark.parametrize("name,min_nodes", [("resnet18", 60), ("randwire", 100)])
def test_larger_real_models_import(name, min_nodes):
    g = model_graph(name)  # ~1-2 s each after the first torch/TVM import
    assert g.n >= min_nodes
    assert "relax.nn.conv2d" in g.ops
    if name == "resnet18":  # 20 convolutions: stem, 16 in blocks, 3 downsampling 1x1
        assert g.ops.count("relax.nn.conv2d") == 20


def test_inception_graph_has_four_parallel_branches():
    g = model_graph("inception")
    concat = g.ops.index("relax.concat")
    assert len(g.data_pred[concat]) == 4


# ---------------------------------------------------------------- CLI
def test_cli_optimize_writes_solution(tmp_path, capsys):
    out = tmp_path / "sol.json"
    rc = main(["regal", "optimize", "--graph", "synthetic:3", "--objective", "peak-memory", "--budget", "300",
               "--method", "brkga,greedy,given,exact", "--out", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "brkga" in text and "exact" in text and "[optimal]" in text
    data = json.loads(out.read_text())
    assert set(data["methods"]) == {"brkga", "greedy", "given", "exact"}
    sol = data["best"]
    assert len(sol["order"]) == 30 and sorted(sol["order"]) == list(range(30))
    assert data["methods"]["exact"]["objective"] <= data["methods"]["brkga"]["objective"]
    assert data["methods"]["brkga"]["evaluations"] == 300


def test_cli_two_devices_runtime(capsys):
    rc = main(["regal", "optimize", "--graph", "synthetic:1", "--devices", "2", "--budget", "200",
               "--method", "random,local"])
    assert rc == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("random") and "200 evals" in line for line in lines)


def test_cli_model_graph_export(tmp_path, capsys):
    out = tmp_path / "tiny.json"
    assert main(["regal", "export", "--graph", "model:tiny", "--out", str(out)]) == 0
    from release.graph.graph import ComputationGraph

    assert ComputationGraph.load(out).n == 12
    rc = main(["regal", "optimize", "--graph", str(out), "--objective", "peak-memory", "--budget", "50"])
    assert rc == 0


@pytest.mark.parametrize("args,msg", [
    (["--graph", "model:nope"], "unknown model 'nope'"),
    (["--graph", "synthetic:1", "--devices", "0"], "--devices must be a positive integer, got 0"),
    (["--graph", "synthetic:1", "--budget", "-5"], "--budget must be a positive integer, got -5"),
    (["--graph", "synthetic:x"], "bad synthetic seed 'x'"),
    (["--graph", "CYCLIC"], "has a cycle"),
])
def test_cli_bad_input_one_line_exit_2(args, msg, tmp_path, capsys):
    cyc = tmp_path / "cyc.json"
    cyc.write_text(json.dumps({"nodes": [{"cost_us": 1, "out_bytes": 4}] * 2, "data_edges": [[0, 1], [1, 0]]}))
    args = [str(cyc) if a == "CYCLIC" else a for a in args]
    rc = main(["regal", "optimize", *args])
    err = capsys.readouterr().err
    assert rc == 2
    assert msg in err and len(err.strip().splitlines()) == 1


def test_legalized_module_gives_the_same_graph(tiny_mod):
    from tvm import relax

    g1 = from_relax(tiny_mod)
    g2 = from_relax(relax.transform.LegalizeOps()(tiny_mod))
    assert g2.ops[0] == "call_tir:conv2d"
    assert np.allclose(g1.cost, g2.cost) and np.array_equal(g1.data_edges, g2.data_edges)
    assert np.array_equal(g1.out_bytes, g2.out_bytes)


def test_fused_import_has_one_node_per_fused_kernel():
    plain = model_graph("inception")
    fused = model_graph("inception", fused=True)
    assert fused.name == "inception-fused"
    assert fused.n < plain.n
    assert all(op.startswith("call_tir:") for op in fused.ops)
    assert any("fused_" in op for op in fused.ops)  # batch_norm + relu fused


def test_reorder_bindings_hands_the_order_back_to_tvm(tiny_mod):
    import tvm
    from tvm import relax

    from release.graph.relax_import import reorder_bindings

    g = from_relax(tiny_mod)
    order = [4, 5, 6, 7, 0, 1, 2, 3, 8, 9, 10, 11]  # second branch first
    new = reorder_bindings(tiny_mod, g, order)
    g2 = from_relax(new)
    assert g2.names == [g.names[v] for v in order]
    # the reordered module still compiles and computes what PyTorch computes
    model, inputs = build_model("tiny")
    vm = relax.VirtualMachine(tvm.compile(new, target=tvm.target.Target({"kind": "llvm"})), tvm.cpu())
    out = vm["main"](tvm.runtime.tensor(inputs[0].numpy()))
    assert np.allclose(out[0].numpy(), model(inputs[0]).detach().numpy(), atol=1e-5)
    with pytest.raises(GraphError, match="not a topological order"):
        reorder_bindings(tiny_mod, g, [8] + list(range(8)) + [9, 10, 11])
