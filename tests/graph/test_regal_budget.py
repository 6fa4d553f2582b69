"""Never worse than the given order or the greedy solution; the policy's share fades with the budget."""

import json

import numpy as np
import pytest

from release.cli import main
from release.graph.baselines import SEARCH_METHODS, run_method, seed_chromosomes
from release.graph.brkga import brkga, policy_fraction_schedule
from release.graph.perf_model import PerformanceModel
from release.graph.synthetic import SyntheticConfig, random_layered_graph


def _graph(seed, n=30):
    return random_layered_graph(SyntheticConfig(n_nodes=n, width=6), seed)


@pytest.mark.parametrize("objective,devices", [("peak-memory", 1), ("runtime", 2)])
@pytest.mark.parametrize("budget", [2, 3, 40, 250])
def test_every_search_never_worse_than_given_or_greedy(objective, devices, budget):
    for s in range(3):
        g = _graph(s)
        m = PerformanceModel(g, devices, objective)
        init = seed_chromosomes(m)
        o, v = m.evaluate_population(init)
        floor = float(o[v <= 0].min())
        for name in SEARCH_METHODS:
            model = PerformanceModel(g, devices, objective)
            r = run_method(name, model, budget, seed=s, initial=init)
            assert r.best_objective <= floor + 1e-9, (name, budget, s)
            assert model.evaluations == r.evaluations <= budget


def test_seed_chromosomes_decode_to_given_order_and_greedy():
    from release.graph.baselines import memory_greedy_schedule

    g = _graph(4)
    m = PerformanceModel(g, 1, "peak-memory")
    init = seed_chromosomes(m)
    assert m.decode(init[0]).order.tolist() == list(range(g.n))
    assert m.decode(init[1]).order.tolist() == memory_greedy_schedule(m)[0].tolist()


def test_policy_fraction_zero_is_plain_brkga_and_one_is_the_full_policy():
    g = _graph(5)
    rng = np.random.default_rng(0)
    G = g.n
    params = dict(alpha=rng.choice([0.5, 1.0, 2.0], G), beta=rng.choice([0.5, 1.0, 2.0], G),
                  rho=rng.choice([0.5, 0.7, 0.9], G))
    plain = brkga(PerformanceModel(g, 1, "peak-memory"), 900, seed=3)
    zero = brkga(PerformanceModel(g, 1, "peak-memory"), 900, seed=3, policy_fraction=0.0, **params)
    assert np.array_equal(plain.curve, zero.curve) and np.array_equal(plain.best_chromosome, zero.best_chromosome)
    full = brkga(PerformanceModel(g, 1, "peak-memory"), 900, seed=3, **params)
    one = brkga(PerformanceModel(g, 1, "peak-memory"), 900, seed=3, policy_fraction=1.0, **params)
    assert np.array_equal(full.curve, one.curve)
    half = brkga(PerformanceModel(g, 1, "peak-memory"), 900, seed=3, policy_fraction=0.5, **params)
    assert half.evaluations == 900


def test_policy_fraction_schedule():
    assert [policy_fraction_schedule(b) for b in (1, 500, 1000, 2000, 3999, 4000, 20000)] == [
        1.0, 1.0, 1.0, 0.5, 1000 / 3999, 0.0, 0.0]


def test_cli_optimize_never_reports_worse_than_given(tmp_path, capsys):
    out = tmp_path / "o.json"
    rc = main(["regal", "optimize", "--graph", "synthetic:3", "--objective", "runtime", "--devices", "2",
               "--budget", "3", "--method", "brkga,tuned-brkga,regal,random,local,greedy,given",
               "--tune-graphs", "1", "--out", str(out)])
    assert rc == 0
    d = json.loads(out.read_text())
    greedy = d["methods"]["greedy"]["objective"]
    assert greedy < d["given_order_objective"]
    for name, r in d["methods"].items():
        assert r["improvement_over_given_pct"] >= 0, name
        if name != "given":
            assert r["objective"] <= greedy + 1e-9, name
