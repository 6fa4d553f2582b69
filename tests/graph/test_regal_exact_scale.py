"""Exact yardsticks that scale: the frontier DP's time limit and the CP-SAT order model."""

import time

import numpy as np
import pytest

from release.graph.baselines import memory_greedy_schedule
from release.graph.exact import exact_peak_memory, exact_peak_memory_cpsat, peak_memory_lower_bound
from release.graph.perf_model import PerformanceModel
from release.graph.synthetic import SyntheticConfig, random_layered_graph


def test_dp_time_limit_stops_a_large_graph_quickly(monkeypatch):
    g = random_layered_graph(SyntheticConfig(n_nodes=1000, width=16), 0)
    r = exact_peak_memory(g, max_states=10**9, time_limit=1.0)  # on the real clock (the suite's timeout guards it)
    assert r.status == "timeout" and r.objective is None and r.bound == peak_memory_lower_bound(g)
    # quickly: on a clock that is past the deadline from its second reading on, the search stops at
    # its first look at the clock (after 2048 expansions), whatever the machine's speed or load
    readings = []

    def clock():
        readings.append(len(readings))
        return 0.0 if len(readings) == 1 else 2.0

    with monkeypatch.context() as m:
        m.setattr(time, "perf_counter", clock)
        r = exact_peak_memory(g, max_states=10**9, time_limit=1.0)
    assert len(readings) == 2  # the deadline, then the one look that found it passed
    assert r.status == "timeout" and r.objective is None and r.bound == peak_memory_lower_bound(g)


@pytest.mark.parametrize("seed", range(4))
def test_cpsat_order_model_matches_the_dp_optimum(seed):
    g = random_layered_graph(SyntheticConfig(n_nodes=14, width=4), seed)
    dp = exact_peak_memory(g)
    cp = exact_peak_memory_cpsat(g, time_limit=30)
    assert cp.optimal and cp.objective == dp.objective
    m = PerformanceModel(g, 1, "peak-memory")
    assert m.decode(cp.chromosome).peak_memory == dp.objective


def test_cpsat_with_an_incumbent_proves_or_improves_it():
    g = random_layered_graph(SyntheticConfig(n_nodes=16, width=5), 9)
    dp = exact_peak_memory(g)
    m = PerformanceModel(g, 1, "peak-memory")
    greedy = memory_greedy_schedule(m)[0]
    r = exact_peak_memory_cpsat(g, time_limit=30, hint_order=greedy)
    assert r.optimal and r.objective == dp.objective
    opt_order = m.decode(dp.chromosome).order
    r2 = exact_peak_memory_cpsat(g, time_limit=30, hint_order=opt_order)  # nothing strictly better: proven
    assert r2.optimal and r2.objective == dp.objective and r2.status == "optimal"
    assert r.bound <= dp.objective
