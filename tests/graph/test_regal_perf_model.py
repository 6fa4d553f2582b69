"""Performance model: hand-computed makespans and peak memories, transfers, control edges, memory limits."""

import itertools

import numpy as np
import pytest

from release.errors import GraphError
from release.graph.graph import ComputationGraph
from release.graph.perf_model import PerformanceModel, rank_key
from release.graph.synthetic import SyntheticConfig, random_layered_graph
from regal_fixtures import fork_join, two_branch


def brute_peak(g: ComputationGraph, order) -> float:
    """Independent single-device peak: while the k-th op runs, every tensor produced at a position <= k whose
    last data consumer is at a position >= k (graph outputs: to the end) is live."""
    pos = {v: k for k, v in enumerate(order)}
    peak = 0.0
    for k in range(len(order)):
        live = 0.0
        for u in range(g.n):
            last = max((pos[c] for c in g.data_succ[u]), default=len(order) - 1)
            if pos[u] <= k <= last:
                live += g.out_bytes[u]
        peak = max(peak, live)
    return peak


def test_two_branch_peaks():
    g = two_branch()
    m = PerformanceModel(g, 1, "peak-memory")
    given = m.decode(m.given_order_chromosome())
    assert given.order.tolist() == [0, 1, 2, 3, 4, 5]
    assert given.peak_memory == 21
    best = m.decode(m.chromosome([0, 1, 3, 2, 4, 5]))
    assert best.peak_memory == 12
    assert best.makespan == 6  # one device: sum of costs
    assert best.start.tolist() == [0, 1, 3, 2, 4, 5]


def test_single_device_peak_matches_brute_force_on_random_orders():
    g = random_layered_graph(SyntheticConfig(n_nodes=25, width=5, control_density=0.1), 11)
    m = PerformanceModel(g, 1, "peak-memory")
    rng = np.random.default_rng(0)
    pop = rng.random((30, m.n_genes))
    obj, vio = m.evaluate_population(pop)
    for i in range(30):
        order = m.decode_order(pop[i])
        assert g.is_topological(order)
        assert obj[i] == pytest.approx(brute_peak(g, order))
    assert np.all(vio == 0)
    assert m.evaluations == 30


def test_decoder_takes_the_ready_node_with_highest_priority():
    g = two_branch()
    m = PerformanceModel(g, 1, "peak-memory")
    # priorities: b2 highest, but it is only ready after a
    prio = np.array([0.1, 0.5, 0.9, 0.3, 0.8, 0.0])
    assert m.decode_order(prio) == [0, 2, 4, 1, 3, 5]


def test_fork_join_two_devices_transfer_and_memory():
    g = fork_join()
    m = PerformanceModel(g, 2, "runtime", latency_us=2.0, bandwidth=100.0)
    x = m.chromosome([0, 1, 2, 3], device=[0, 0, 1, 1])
    s = m.decode(x)
    assert s.start.tolist() == [0, 1, 4, 14]
    assert s.finish.tolist() == [1, 11, 14, 15]
    assert s.makespan == 15
    # device 0: a + b; device 1: a's copy + c + b's copy (then c + b's copy + d)
    assert s.device_peak.tolist() == [200, 300]
    # all on one device: 22 us and the single-device peak
    s1 = m.decode(m.chromosome([0, 1, 2, 3], device=[0, 0, 0, 0]))
    assert s1.makespan == 22
    assert s1.device_peak.tolist() == [300, 0]


def test_all_on_one_of_two_devices_equals_single_device_memory():
    g = random_layered_graph(SyntheticConfig(n_nodes=30, width=6, control_density=0.05), 5)
    m1 = PerformanceModel(g, 1, "peak-memory")
    m2 = PerformanceModel(g, 2, "peak-memory")
    rng = np.random.default_rng(1)
    for _ in range(10):
        x = rng.random(g.n)
        x2 = np.concatenate([x, np.tile([0.2, 0.9], g.n)])  # everything on device 1
        assert m2.evaluate_population(x2[None])[0][0] == pytest.approx(m1.evaluate_population(x[None])[0][0])


def test_vectorized_device_peaks_match_event_reference():
    g = random_layered_graph(SyntheticConfig(n_nodes=30, width=6, control_density=0.05), 9)
    m = PerformanceModel(g, 3, "peak-memory", latency_us=3.0, bandwidth=300.0)
    rng = np.random.default_rng(2)
    for _ in range(20):
        x = rng.random(m.n_genes)
        dev = m.devices_of(x[None])[0].tolist()
        order, st, fi, pk = m._simulate(x[: g.n].tolist(), dev)
        assert np.allclose(pk, m._device_peaks_reference(order, st, fi, dev))


def test_control_edges_order_without_transfer_or_memory():
    # a(5) and c(5) feed b(1); a -> b is data, c -> b is control (or data in the second graph)
    ctrl = ComputationGraph([5, 1, 5], [100, 100, 100], [(0, 1)], [(2, 1)], names=["a", "b", "c"])
    data = ComputationGraph([5, 1, 5], [100, 100, 100], [(0, 1), (2, 1)], names=["a", "b", "c"])
    for g, expect in ((ctrl, 6), (data, 9)):
        m = PerformanceModel(g, 2, "runtime", latency_us=2.0, bandwidth=100.0)
        s = m.decode(m.chromosome([0, 2, 1], device=[0, 0, 1]))  # a, b on 0; c on 1
        assert s.makespan == expect
    # a control edge does not keep a tensor alive: x -> y (data), x -> z and y -> z (control); while z runs
    # only y (a graph output) and z are live, x died after y
    g = ComputationGraph([1, 1, 1], [100, 100, 100], [(0, 1)], [(0, 2), (1, 2)])
    m = PerformanceModel(g, 1, "peak-memory")
    assert m.decode(m.given_order_chromosome()).peak_memory == 200


def test_two_branch_with_control_edges_forcing_both_branches():
    g = two_branch(control=[(1, 2), (2, 3)])  # b1 before b2 before c1
    m = PerformanceModel(g, 1, "peak-memory")
    rng = np.random.default_rng(0)
    obj, _ = m.evaluate_population(rng.random((200, g.n)))
    assert obj.min() == 21  # no order can avoid b1 and b2 live together


def test_memory_limit_makes_solutions_infeasible_and_rank_last():
    g = two_branch()
    m = PerformanceModel(g, 1, "runtime", memory_limit=15)
    good = m.chromosome([0, 1, 3, 2, 4, 5])  # peak 12
    bad = m.given_order_chromosome()  # peak 21
    obj, vio = m.evaluate_population(np.stack([bad, good]))
    assert obj.tolist() == [6, 6]
    assert vio.tolist() == [6, 0]
    assert rank_key(obj, vio).tolist() == [1, 0]
    # an infeasible solution ranks below a feasible one even with a better objective
    assert rank_key(np.array([1.0, 100.0]), np.array([5.0, 0.0])).tolist() == [1, 0]


def test_per_device_memory_limits():
    g = fork_join()
    m = PerformanceModel(g, 2, "runtime", latency_us=2.0, bandwidth=100.0, memory_limit=[1000, 250])
    s = m.decode(m.chromosome([0, 1, 2, 3], device=[0, 0, 1, 1]))
    assert s.violation == 50 and not s.feasible
    s = m.decode(m.chromosome([0, 1, 2, 3], device=[1, 1, 0, 0]))  # 300 on device 0 fits 1000
    assert s.feasible and s.makespan == 15


@pytest.mark.parametrize("kw,msg", [
    (dict(devices=0), "devices must be a positive integer, got 0"),
    (dict(objective="latency"), "unknown objective 'latency'"),
    (dict(bandwidth=0.0), "bandwidth must be finite and > 0"),
    (dict(memory_limit=-1), "memory limit must be finite and > 0"),
])
def test_bad_model_arguments(kw, msg):
    with pytest.raises(GraphError, match=msg):
        PerformanceModel(two_branch(), **kw)


def test_chromosome_rejects_non_topological_order():
    m = PerformanceModel(two_branch(), 1)
    with pytest.raises(GraphError, match="not a topological order"):
        m.chromosome([1, 0, 2, 3, 4, 5])


def test_round_trip_chromosome_reproduces_schedule():
    g = random_layered_graph(SyntheticConfig(n_nodes=20, width=4), 2)
    m = PerformanceModel(g, 3, "runtime")
    rng = np.random.default_rng(3)
    s = m.decode(rng.random(m.n_genes))
    s2 = m.decode(m.chromosome(s.order, s.device))
    assert s2.order.tolist() == s.order.tolist()
    assert s2.makespan == pytest.approx(s.makespan)
    assert m.evals_per_second() > 0
