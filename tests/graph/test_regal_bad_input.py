"""Bad input to `release regal optimize`: one clear line, exit 2, checked before any method runs.

One test per kind of bad input found on held-out graphs: non-finite link and memory figures, malformed edge ids
in graph JSON, a checkpoint that is not a weights-only torch file, absurd device counts, an empty method list, a
memory-limit list of the wrong length, an infeasible memory limit, options a method cannot take.
"""

import json

import numpy as np
import pytest

from release.cli import main
from release.errors import GraphError
from release.graph.graph import ComputationGraph


def _run(capsys, *args):
    rc = main(["regal", "optimize", *map(str, args)])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _one_line(err, msg):
    assert msg in err, err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("flag,value,msg", [
    ("--bandwidth", "nan", "link bandwidth must be finite and > 0"),
    ("--bandwidth", "inf", "link bandwidth must be finite and > 0"),
    ("--bandwidth", "0", "link bandwidth must be finite and > 0"),
    ("--latency-us", "nan", "link latency must be finite and >= 0"),
    ("--memory-limit", "nan", "memory limit must be finite and > 0"),
    ("--memory-limit", "-1", "memory limit must be finite and > 0"),
    ("--memory-limit", "lots", "--memory-limit must be a number"),
])
def test_non_finite_link_and_memory_figures(flag, value, msg, capsys):
    rc, out, err = _run(capsys, "--graph", "synthetic:1", "--devices", "2", "--budget", "20", flag, value)
    assert rc == 2 and out == ""
    _one_line(err, msg)


@pytest.mark.parametrize("edges,msg", [
    ([[0, 1.5]], "node id 1.5 is not a whole number"),
    ([["0", "1"]], "node id '0' is not an integer"),
    ([[0, 1, 2]], "is not a [producer, consumer] pair"),
    ([[0], [1, 2]], "is not a [producer, consumer] pair"),
    ([[0, {"id": 1}]], "is not an integer"),
    ([[0, True]], "node id True is not an integer"),
    ([[0, 10**30]], "is far beyond any node"),
    ([[0, 1e300]], "is far beyond any node"),
    (7, "must be a list of [producer, consumer] pairs"),
])
def test_malformed_edge_ids_in_graph_json(edges, msg, tmp_path, capsys):
    p = tmp_path / "g.json"
    p.write_text(json.dumps({"nodes": [{"cost_us": 1, "out_bytes": 4}] * 3, "data_edges": edges}))
    rc, out, err = _run(capsys, "--graph", p, "--budget", "10")
    assert rc == 2
    _one_line(err, msg)


def test_whole_float_ids_are_accepted_and_fractions_never_truncated():
    g = ComputationGraph.from_dict({"nodes": [{"cost_us": 1, "out_bytes": 4}] * 3,
                                    "data_edges": [[0.0, 1.0], [1, 2]]})
    assert g.data_edges.tolist() == [[0, 1], [1, 2]] and g.data_edges.dtype == np.int64
    with pytest.raises(GraphError, match="control_edges.*2.7"):
        ComputationGraph([1, 1, 1], [4, 4, 4], [[0, 1]], [[1, 2.7]])


@pytest.mark.parametrize("content", [b"not a torch file at all", b"PK\x03\x04 broken zip"])
def test_checkpoint_that_is_not_a_torch_file(content, tmp_path, capsys):
    ck = tmp_path / "policy.pt"
    ck.write_bytes(content)
    rc, out, err = _run(capsys, "--graph", "synthetic:1", "--budget", "20", "--method", "brkga,regal",
                        "--checkpoint", ck, "--objective", "peak-memory")
    assert rc == 2 and "brkga" not in out  # checked before any method runs
    _one_line(err, "weights_only=True")


def test_checkpoint_with_pickled_code_is_refused(tmp_path, capsys):
    """A checkpoint is a file a user hands in: anything beyond weights and plain values is not unpickled."""
    import torch

    ck = tmp_path / "evil.pt"
    torch.save({"config": {}, "state_dict": {}, "payload": ComputationGraph([1.0], [4.0], [])}, ck)
    rc, out, err = _run(capsys, "--graph", "synthetic:1", "--budget", "20", "--method", "regal",
                        "--checkpoint", ck, "--objective", "peak-memory")
    assert rc == 2
    _one_line(err, "weights_only=True")


def test_shipped_checkpoints_load_weights_only():
    from release.graph.policy import load_policy, shipped_checkpoint

    for objective, devices in (("peak-memory", 1), ("runtime", 2)):
        pol, meta = load_policy(shipped_checkpoint(objective))
        assert pol.cfg.devices == devices and "regal train" in meta["command"]


@pytest.mark.parametrize("devices,msg", [
    ("1000000", "1000000 devices for a graph of 30 nodes"),
    ("31", "use --devices 30 or fewer"),
    ("2000", "at most 1024 are supported"),
])
def test_absurd_device_count(devices, msg, capsys):
    rc, out, err = _run(capsys, "--graph", "synthetic:1", "--devices", devices, "--budget", "20")
    assert rc == 2
    _one_line(err, msg)


@pytest.mark.parametrize("method", ["", ",", " , "])
def test_empty_method_list(method, capsys):
    rc, out, err = _run(capsys, "--graph", "synthetic:1", "--budget", "20", "--method", method)
    assert rc == 2
    _one_line(err, "names no method")


@pytest.mark.parametrize("devices,limit", [("1", "1e9,2e9"), ("2", "1e9,1e9,1e9")])
def test_memory_limit_list_of_wrong_length(devices, limit, capsys):
    rc, out, err = _run(capsys, "--graph", "synthetic:1", "--budget", "20", "--devices", devices,
                        "--memory-limit", limit)
    assert rc == 2
    _one_line(err, f"memory limit (--memory-limit) has {len(limit.split(','))} value(s) for {devices} device(s)")


def test_memory_limit_one_per_device_is_accepted(capsys):
    rc, out, err = _run(capsys, "--graph", "synthetic:1", "--budget", "50", "--devices", "2",
                        "--memory-limit", "1e9,2e9", "--method", "given")
    assert rc == 0 and "given" in out


def test_infeasible_memory_limit_below_the_proven_bound(capsys, tmp_path):
    from release.graph.cli import load_graph
    from release.graph.exact import exact_peak_memory

    opt = exact_peak_memory(load_graph("synthetic:1")).objective
    out_json = tmp_path / "o.json"
    rc, out, err = _run(capsys, "--graph", "synthetic:1", "--objective", "peak-memory", "--budget", "50",
                        "--memory-limit", opt - 1, "--method", "brkga", "--out", out_json)
    assert rc == 2 and out == ""
    _one_line(err, f"every schedule peaks at >= {opt:.0f} bytes (proven optimum")


def test_infeasible_memory_limit_after_search_exits_nonzero_with_the_bound(capsys, tmp_path):
    """A limit no method met: exit 1, results still written, the tightest bound named, no comparison with the given order."""
    from release.graph.cli import load_graph
    from release.graph.exact import exact_peak_memory

    opt = exact_peak_memory(load_graph("synthetic:1")).objective
    out_json = tmp_path / "o.json"
    rc, out, err = _run(capsys, "--graph", "synthetic:1", "--objective", "peak-memory", "--budget", "50",
                        "--memory-limit", opt, "--method", "given", "--out", out_json)
    assert rc == 1
    assert "INFEASIBLE" in out and "than given" not in out and "equal to given" not in out
    _one_line(err, f"every schedule peaks at >= {opt:.0f} bytes")
    d = json.loads(out_json.read_text())
    assert d["methods"]["given"]["feasible"] is False and d["peak_memory_lower_bound"]["bytes"] == opt


def test_lower_bound_is_below_every_schedule():
    from release.graph.baselines import random_search
    from release.graph.exact import exact_peak_memory, peak_memory_lower_bound
    from release.graph.perf_model import PerformanceModel
    from release.graph.synthetic import SyntheticConfig, random_layered_graph

    for seed in range(5):
        g = random_layered_graph(SyntheticConfig(n_nodes=14, width=4), seed)
        lb = peak_memory_lower_bound(g)
        opt = exact_peak_memory(g).objective
        assert 0 < lb <= opt
        r = random_search(PerformanceModel(g, 2, "peak-memory"), 200, seed)
        assert peak_memory_lower_bound(g, 2) <= r.best_objective


@pytest.mark.parametrize("args,msg", [
    (["--method", "brkga,exact", "--devices", "2", "--objective", "peak-memory"], "needs --devices 1"),
    (["--method", "brkga,regal", "--devices", "3", "--objective", "runtime"], "trained for 2 device(s), not 3"),
    (["--method", "brkga,exact", "--memory-limit", "1e12"], "does not support --memory-limit"),
])
def test_options_incompatible_with_a_method_are_refused_before_any_method_runs(args, msg, tmp_path, capsys):
    out_json = tmp_path / "o.json"
    rc, out, err = _run(capsys, "--graph", "synthetic:1", "--budget", "20", "--out", out_json, *args)
    assert rc == 2 and out == "" and not out_json.exists()
    _one_line(err, msg)


def test_from_release_graph_import_brkga_is_the_module():
    import types

    from release.graph import brkga

    assert isinstance(brkga, types.ModuleType) and callable(brkga.brkga)
    import release.graph as rg

    assert rg.brkga is brkga and rg.BRKGAConfig is brkga.BRKGAConfig


def test_tuned_brkga_counts_and_reports_its_grid_search(capsys, tmp_path):
    from release.graph.baselines import TuningGrid, tune_brkga
    from release.graph.synthetic import SyntheticConfig, random_layered_graph

    gs = [random_layered_graph(SyntheticConfig(n_nodes=12, width=3), s) for s in range(2)]
    grid = TuningGrid(population=(10,), elite_fraction=(0.2,), mutant_fraction=(0.1, 0.3), rho=(0.7,))
    tr = tune_brkga(gs, "peak-memory", 1, 37, grid)
    assert tr.evaluations == 37 * 2 * (1 + 2)  # reference run + 2 configs, on each of 2 graphs
    out_json = tmp_path / "o.json"
    rc, out, err = _run(capsys, "--graph", "synthetic:1", "--objective", "peak-memory", "--budget", "30",
                        "--method", "tuned-brkga", "--tune-graphs", "2", "--out", out_json)
    assert rc == 0
    d = json.loads(out_json.read_text())["methods"]["tuned-brkga"]
    # grid of 16 configs + the reference run, on 2 training graphs, 30 evaluations each; then 30 on the graph
    assert d["tuning_evaluations"] == 30 * 2 * 17 and d["total_evaluations"] == 30 + 30 * 2 * 17
    assert f"{30 + 30 * 2 * 17} evals" in out and "+1020 tuning evals" in out
