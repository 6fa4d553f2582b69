"""ComputationGraph: validation, structure, JSON round trip; synthetic generator and splits."""

import numpy as np
import pytest

from release.errors import GraphError, ReleaseError
from release.graph.graph import ComputationGraph
from release.graph.synthetic import RoomFilter, SyntheticConfig, make_splits, random_layered_graph
from regal_fixtures import two_branch


def test_cycle_is_a_clear_error():
    with pytest.raises(GraphError, match=r"cycle \(1 -> 2 -> 1\)"):
        ComputationGraph([1, 1, 1], [4, 4, 4], [(0, 1), (1, 2), (2, 1)])


def test_cycle_through_a_control_edge_is_an_error():
    with pytest.raises(GraphError, match="cycle"):
        ComputationGraph([1, 1], [4, 4], [(0, 1)], [(1, 0)])


def test_negative_cost_names_the_node():
    with pytest.raises(GraphError, match=r"node 1 \(y\) has compute cost -2.0"):
        ComputationGraph([1, -2], [4, 4], [(0, 1)], names=["x", "y"])


def test_dangling_edge_names_the_edge():
    with pytest.raises(GraphError, match=r"dangling data edge \(0, 5\)"):
        ComputationGraph([1, 1], [4, 4], [(0, 5)])
    with pytest.raises(GraphError, match="dangling control edge"):
        ComputationGraph([1, 1], [4, 4], [], [(-1, 1)])


def test_graph_error_is_a_release_error():
    assert issubclass(GraphError, ReleaseError)


def test_duplicate_edges_are_merged_and_control_duplicates_of_data_dropped():
    g = ComputationGraph([1, 1, 1], [1, 1, 1], [(0, 1), (0, 1), (1, 2)], [(0, 1), (0, 2)])
    assert g.data_edges.tolist() == [[0, 1], [1, 2]]
    assert g.control_edges.tolist() == [[0, 2]]
    assert g.indegree.tolist() == [0, 1, 2]


def test_topological_order_and_levels():
    g = two_branch()
    assert g.topological_order().tolist() == [0, 1, 2, 3, 4, 5]
    assert g.levels().tolist() == [0, 1, 1, 2, 2, 3]
    assert g.is_topological([0, 2, 4, 1, 3, 5])
    assert not g.is_topological([0, 3, 1, 2, 4, 5])


def test_json_round_trip(tmp_path):
    g = two_branch(control=[(1, 2)])
    p = tmp_path / "g.json"
    g.save(p)
    h = ComputationGraph.load(p)
    assert h.names == g.names and h.data_edges.tolist() == g.data_edges.tolist()
    assert h.control_edges.tolist() == [[1, 2]]
    assert np.array_equal(h.cost, g.cost) and np.array_equal(h.out_bytes, g.out_bytes)


def test_load_bad_file(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text("{not json")
    with pytest.raises(GraphError, match="not valid JSON"):
        ComputationGraph.load(p)
    p.write_text('{"nodes": [{"cost_us": 1}]}')
    with pytest.raises(GraphError, match="out_bytes"):
        ComputationGraph.load(p)


def test_topology_hash_ignores_numbering_and_costs():
    g = ComputationGraph([1, 2, 3], [1, 1, 1], [(0, 1), (0, 2)])
    h = ComputationGraph([9, 9, 9], [5, 5, 5], [(2, 0), (2, 1)])
    k = ComputationGraph([1, 2, 3], [1, 1, 1], [(0, 1), (1, 2)])
    assert g.topology_hash() == h.topology_hash()
    assert g.topology_hash() != k.topology_hash()


def test_synthetic_generator_is_seeded_and_layered():
    cfg = SyntheticConfig(n_nodes=40, width=5)
    a, b = random_layered_graph(cfg, 3), random_layered_graph(cfg, 3)
    c = random_layered_graph(cfg, 4)
    assert a.n == 40
    assert np.array_equal(a.data_edges, b.data_edges) and np.array_equal(a.cost, b.cost)
    assert not (np.array_equal(a.data_edges, c.data_edges) and np.array_equal(a.cost, c.cost))
    assert np.all(a.cost >= 1) and np.all(a.cost == np.rint(a.cost))
    assert np.all(a.out_bytes % 1024 == 0)
    # every edge goes forward (layers are numbered in order)
    assert np.all(a.data_edges[:, 0] < a.data_edges[:, 1])


def test_splits_never_repeat_a_topology():
    # tiny graphs (4 nodes, width 2) have few topologies, so duplicates must be rejected
    ds = make_splits(6, 3, 3, SyntheticConfig(n_nodes=4, width=2, control_density=0.0), seed=1)
    hashes = [g.topology_hash() for g in ds.train + ds.valid + ds.test]
    assert len(hashes) == 12 and len(set(hashes)) == 12
    assert ds.rejected_duplicates > 0
    # the test split does not depend on the training-set size
    ds2 = make_splits(2, 3, 3, SyntheticConfig(n_nodes=4, width=2, control_density=0.0), seed=1)
    assert [g.name for g in ds2.test] == [g.name for g in ds.test]


def test_splits_too_few_topologies_is_an_error():
    with pytest.raises(GraphError, match="graphs after"):
        make_splits(50, 0, 0, SyntheticConfig(n_nodes=2, width=1), seed=0)


def test_room_filter_keeps_only_graphs_with_room():
    cfg = SyntheticConfig(n_nodes=20, width=5)
    f = RoomFilter(objective="runtime", devices=2, low_budget=20, high_budget=400, threshold=0.05)
    ds = make_splits(0, 0, 3, cfg, seed=2, room_filter=f)
    assert len(ds.test) == 3
    from release.graph.brkga import brkga
    from release.graph.perf_model import PerformanceModel

    for g in ds.test:  # re-check the stated criterion on each kept graph
        seed = int(g.name.split("-s")[-1])
        lo = brkga(PerformanceModel(g, 2, "runtime"), 20, seed=seed).best_objective
        hi = brkga(PerformanceModel(g, 2, "runtime"), 400, seed=seed).best_objective
        assert (lo - hi) / lo >= 0.05
