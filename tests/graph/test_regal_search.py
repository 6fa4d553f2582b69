"""Exact solvers, BRKGA and baselines: proven optima, budgets, determinism, per-gene parameters."""

import itertools

import numpy as np
import pytest

from release.errors import GraphError
from release.graph.baselines import METHODS, TuningGrid, run_method, tune_brkga
from release.graph.brkga import BRKGAConfig, brkga
from release.graph.exact import exact_makespan, exact_peak_memory
from release.graph.graph import ComputationGraph
from release.graph.perf_model import PerformanceModel
from release.graph.synthetic import SyntheticConfig, random_layered_graph
from regal_fixtures import fork_join, two_branch
from test_regal_perf_model import brute_peak


def all_topological_orders(g: ComputationGraph):
    def rec(prefix, done):
        if len(prefix) == g.n:
            yield list(prefix)
            return
        for v in range(g.n):
            if v not in done and all(p in done for p in g.pred[v]):
                done.add(v)
                prefix.append(v)
                yield from rec(prefix, done)
                prefix.pop()
                done.remove(v)

    yield from rec([], set())


# ---------------------------------------------------------------- exact solvers
def test_exact_peak_memory_hand_made():
    r = exact_peak_memory(two_branch())
    assert r.optimal and r.objective == 12
    r = exact_peak_memory(two_branch(control=[(1, 2), (2, 3)]))
    assert r.objective == 21
    m = PerformanceModel(two_branch(control=[(1, 2), (2, 3)]), 1, "peak-memory")
    assert m.decode(r.chromosome).peak_memory == 21


@pytest.mark.parametrize("seed", range(4))
def test_exact_peak_memory_equals_brute_force(seed):
    g = random_layered_graph(SyntheticConfig(n_nodes=9, width=3, control_density=0.1), seed)
    best = min(brute_peak(g, o) for o in all_topological_orders(g))
    r = exact_peak_memory(g)
    assert r.objective == pytest.approx(best)
    assert PerformanceModel(g, 1, "peak-memory").decode(r.chromosome).peak_memory == pytest.approx(best)


def test_exact_peak_memory_gives_up_on_too_many_states():
    g = random_layered_graph(SyntheticConfig(n_nodes=30, width=6), 0)
    r = exact_peak_memory(g, max_states=50)
    assert r.status == "too-large" and r.objective is None


def test_exact_makespan_fork_join():
    r = exact_makespan(fork_join(), 2, latency_us=2.0, bandwidth=100.0)
    assert r.optimal and r.objective == 15
    r = exact_makespan(fork_join(), 2, latency_us=20.0, bandwidth=100.0)
    assert r.optimal and r.objective == 22
    r = exact_makespan(fork_join(), 1)
    assert r.optimal and r.objective == 22


def test_exact_makespan_control_vs_data_edge():
    ctrl = ComputationGraph([5, 1, 5], [100, 100, 100], [(0, 1)], [(2, 1)])
    data = ComputationGraph([5, 1, 5], [100, 100, 100], [(0, 1), (2, 1)])
    assert exact_makespan(ctrl, 2, 2.0, 100.0).objective == 6
    assert exact_makespan(data, 2, 2.0, 100.0).objective == 9


def test_exact_makespan_matches_enumeration_on_a_small_graph():
    g = random_layered_graph(SyntheticConfig(n_nodes=6, width=3, cost_log_sigma=0.8), 3)
    m = PerformanceModel(g, 2, "runtime", latency_us=2.0, bandwidth=1e4)
    best = np.inf
    for order in all_topological_orders(g):
        for dev in itertools.product((0, 1), repeat=g.n):
            best = min(best, m.decode(m.chromosome(order, dev)).makespan)
    r = exact_makespan(g, 2, 2.0, 1e4)
    assert r.optimal and r.objective == pytest.approx(best)


# ---------------------------------------------------------------- BRKGA
def test_brkga_reaches_proven_optimum_peak_memory():
    for seed in range(3):
        g = random_layered_graph(SyntheticConfig(n_nodes=16, width=5), 100 + seed)
        opt = exact_peak_memory(g).objective
        r = brkga(PerformanceModel(g, 1, "peak-memory"), 2000, seed=seed)
        assert r.best_objective == pytest.approx(opt)


def test_brkga_reaches_proven_optimum_makespan_two_devices():
    m = PerformanceModel(fork_join(), 2, "runtime", latency_us=2.0, bandwidth=100.0)
    assert brkga(m, 1000, seed=0).best_objective == 15
    for seed in range(2):
        g = random_layered_graph(SyntheticConfig(n_nodes=10, width=3), 200 + seed)
        opt = exact_makespan(g, 2, time_limit_s=300)  # proven in seconds; the limit only bounds a stall
        assert opt.optimal
        r = brkga(PerformanceModel(g, 2, "runtime"), 5000, seed=seed)
        assert r.best_objective == pytest.approx(opt.objective, rel=1e-6)


def test_brkga_respects_memory_limit():
    m = PerformanceModel(two_branch(), 1, "runtime", memory_limit=15)
    r = brkga(m, 300, seed=0)
    assert r.best_violation == 0
    assert m.decode(r.best_chromosome).peak_memory <= 15


@pytest.mark.parametrize("budget", [1, 7, 101, 333])
@pytest.mark.parametrize("method", sorted(METHODS))
def test_budget_is_never_exceeded(method, budget):
    g = random_layered_graph(SyntheticConfig(n_nodes=12, width=3), 1)
    m = PerformanceModel(g, 2, "peak-memory")
    r = run_method(method, m, budget, seed=0)
    assert m.evaluations <= budget
    assert r.evaluations == m.evaluations
    if method in ("brkga", "tuned-brkga", "random", "local"):
        assert r.evaluations == budget
    assert r.curve[-1, 0] == r.evaluations


def test_non_positive_budget_is_an_error():
    m = PerformanceModel(two_branch(), 1)
    for method in METHODS:
        with pytest.raises(GraphError, match="budget must be a positive integer, got 0"):
            run_method(method, m, 0)
    with pytest.raises(GraphError, match="unknown method 'sa'"):
        run_method("sa", m, 10)


def test_same_seed_same_result_different_seed_different_search():
    g = random_layered_graph(SyntheticConfig(n_nodes=30, width=6), 4)
    a = brkga(PerformanceModel(g, 2, "runtime"), 700, seed=5)
    b = brkga(PerformanceModel(g, 2, "runtime"), 700, seed=5)
    c = brkga(PerformanceModel(g, 2, "runtime"), 700, seed=6)
    assert np.array_equal(a.best_chromosome, b.best_chromosome)
    assert np.array_equal(a.curve, b.curve)
    assert not np.array_equal(a.best_chromosome, c.best_chromosome)
    for method in ("random", "local"):
        x = run_method(method, PerformanceModel(g, 2, "runtime"), 300, seed=1)
        y = run_method(method, PerformanceModel(g, 2, "runtime"), 300, seed=1)
        assert np.array_equal(x.best_chromosome, y.best_chromosome)


def test_uniform_per_gene_parameters_equal_plain_brkga():
    g = random_layered_graph(SyntheticConfig(n_nodes=20, width=4), 8)
    m = PerformanceModel(g, 2, "peak-memory")
    G = m.n_genes
    plain = brkga(PerformanceModel(g, 2, "peak-memory"), 800, seed=3)
    arrays = brkga(m, 800, seed=3, alpha=np.ones(G), beta=np.ones(G), rho=np.full(G, BRKGAConfig().rho))
    assert np.array_equal(plain.best_chromosome, arrays.best_chromosome)
    assert np.array_equal(plain.curve, arrays.curve)
    # a skewed Beta changes the search
    skew = brkga(PerformanceModel(g, 2, "peak-memory"), 800, seed=3, alpha=np.full(G, 0.5), beta=np.full(G, 2.0))
    assert not np.array_equal(plain.best_chromosome, skew.best_chromosome)


def test_beta_mutants_follow_their_distribution():
    from release.graph.brkga import MutantSampler

    G = 4
    s = MutantSampler(np.array([1.0, 5.0, 0.5, 2.0]), np.array([1.0, 1.0, 0.5, 8.0]), G)
    x = s(np.random.default_rng(0), 20000, G)
    means = x.mean(0)
    assert means == pytest.approx([0.5, 5 / 6, 0.5, 0.2], abs=0.01)
    assert x.min() >= 0 and x.max() <= 1


def test_bad_brkga_parameters():
    m = PerformanceModel(two_branch(), 1)
    with pytest.raises(GraphError, match="elite_fraction"):
        brkga(m, 10, BRKGAConfig(elite_fraction=0.0))
    with pytest.raises(GraphError, match="per-gene rho"):
        brkga(m, 10, rho=np.full(m.n_genes, 1.5))


def test_greedy_and_given_are_single_evaluations_and_correct():
    g = two_branch()
    m = PerformanceModel(g, 1, "peak-memory")
    assert run_method("given", m, 10).best_objective == 21
    assert run_method("greedy", PerformanceModel(g, 1, "peak-memory"), 10).best_objective == 12
    # critical path on the fork-join with a cheap link finds the optimum 15
    fm = PerformanceModel(fork_join(), 2, "runtime", latency_us=2.0, bandwidth=100.0)
    r = run_method("greedy", fm, 10)
    assert r.best_objective == 15 and r.evaluations == 1


def test_tune_brkga_returns_a_config_from_the_grid():
    graphs = [random_layered_graph(SyntheticConfig(n_nodes=15, width=4), s) for s in range(2)]
    grid = TuningGrid(population=(20, 40), elite_fraction=(0.2,), mutant_fraction=(0.2,), rho=(0.6, 0.8))
    res = tune_brkga(graphs, "runtime", 2, 200, grid, seed=0)
    assert res.best in grid.configs()
    assert len(res.scores) == 4
    assert min(s for _, s in res.scores) == dict((str(c), s) for c, s in res.scores)[str(res.best)]
