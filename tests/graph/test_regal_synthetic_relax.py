"""Synthetic Relax networks and the REGAL policy trained on TVM's plan.

Real torch.export -> Relax imports and real TVM passes (no mocks): the generator's networks must be planned by
TVMPlanModel exactly as TVM plans them, their order must matter, and the shipped TVM-plan policy must load
weights-only and never return worse than the given order or the greedy solution.
"""

import json
import warnings

import numpy as np
import pytest

from release.cli import main
from release.errors import GraphError

warnings.filterwarnings("ignore")

#: small networks (fast to export): 4-7 blocks at 8x8 or 16x16, 4-16 channels
SMALL = dict(blocks=(4, 7), channels=(4, 8, 12, 16), spatial=(8, 16), stages=2)


@pytest.fixture(scope="module")
def small_nets():
    from release.graph.synthetic_relax import RelaxDAGConfig, make_relax_graph

    cfg = RelaxDAGConfig(**SMALL)
    return [make_relax_graph(s, cfg, orders=32) for s in (3, 11)]


def test_generator_is_seeded_and_builds_what_its_spec_says():
    from release.graph.synthetic_relax import RelaxDAGConfig, random_dag_spec

    cfg = RelaxDAGConfig(**SMALL)
    a, sa = random_dag_spec(cfg, 5)
    b, sb = random_dag_spec(cfg, 5)
    c, _ = random_dag_spec(cfg, 6)
    assert (a, sa) == (b, sb) and a != c
    for i, blk in enumerate(a):
        assert all(p < i for p in blk.preds)  # topological
        assert all(a[p].stage <= blk.stage for p in blk.preds)  # spatial size never grows along an edge
        assert blk.channels in cfg.channels and blk.op in cfg.ops
    with pytest.raises(GraphError, match="unknown block operator"):
        random_dag_spec(RelaxDAGConfig(ops=("conv5x5",)))
    with pytest.raises(GraphError, match="fewer stages"):
        random_dag_spec(RelaxDAGConfig(spatial=(2,), stages=3))


def test_generated_modules_plan_as_tvm_plans_and_order_matters(small_nets):
    """TVMPlanModel == TVM's StaticPlanBlockMemory (exact bytes) on the given and random orders of two generated
    networks, and random orders make TVM plan different bytes (the filter's spread is TVM's own figure)."""
    from release.graph.relax_import import reorder_bindings
    from release.graph.synthetic_relax import random_topological_orders
    from release.graph.tvm_plan import planned_memory_exact

    for rg in small_nets:
        assert rg.plan.given_order_bytes() == planned_memory_exact(rg.mod).total
        tvm_bytes = set()
        for o in random_topological_orders(rg.graph, 4, seed=rg.seed):
            truth = planned_memory_exact(reorder_bindings(rg.mod, rg.graph, o)).total
            assert rg.plan.plan_bytes(o) == truth
            tvm_bytes.add(truth)
        assert rg.graph.n == rg.info["kernels"] >= 5
    assert any(rg.spread > 0 for rg in small_nets)
    assert max(len({rg.plan.plan_bytes(o) for o in random_topological_orders(rg.graph, 16, 1)})
               for rg in small_nets) > 1


def test_split_graphs_are_disjoint_and_filtered():
    from release.graph.synthetic_relax import SPLITS, RelaxDAGConfig, split_graphs

    assert not set(SPLITS["train"]) & set(SPLITS["dev"]) and not set(SPLITS["dev"]) & set(SPLITS["test"])
    nets = split_graphs("dev", 2, RelaxDAGConfig(**SMALL), min_spread=0.0)
    assert len(nets) == 2 and all(n.seed in SPLITS["dev"] for n in nets)
    with pytest.raises(GraphError, match="unknown split"):
        split_graphs("valid", 1)


def test_training_on_tvm_plan_uses_tvm_plan(small_nets):
    """One REINFORCE step on TVM's plan runs, and the BRKGA jobs score TVM's planned bytes (not ideal liveness)."""
    from release.graph.train import BRKGAJob, TrainConfig, train

    graphs, plans = [rg.graph for rg in small_nets], [rg.plan for rg in small_nets]
    cfg = TrainConfig(objective="peak-memory", devices=1, budget=40, steps=1, batch_graphs=2, samples=2,
                      hidden=8, layers=1, memory="tvm")
    _, state = train(graphs, cfg, memory_plans=plans)
    assert state.step == 1 and np.isfinite(state.history[0]["reward"])
    job = BRKGAJob([g.to_dict() for g in graphs], {"devices": 1, "objective": "peak-memory", "memory_plans": plans})
    from release.graph.brkga import brkga
    from release.graph.perf_model import PerformanceModel

    ideal = BRKGAJob([g.to_dict() for g in graphs], {"devices": 1, "objective": "peak-memory"})
    differs = False
    for gi, (g, p) in enumerate(zip(graphs, plans)):
        obj, _ = job((gi, 30, 1, None))
        assert obj == brkga(PerformanceModel(g, 1, "peak-memory", memory_plan=p), 30, seed=1).best_objective
        differs |= obj != ideal((gi, 30, 1, None))[0]
    assert differs  # TVM's plan is not ideal liveness
    with pytest.raises(GraphError, match="one TVMPlanModel per graph"):
        train(graphs, cfg)
    with pytest.raises(GraphError, match="one per graph"):
        train(graphs, cfg, memory_plans=plans[:1])
    with pytest.raises(GraphError, match="one-device peak-memory"):
        TrainConfig(objective="runtime", devices=2, memory="tvm").validate()


def test_policy_fraction_table():
    from release.graph.brkga import policy_fraction_schedule

    table = [[500, 1.0], [1000, 0.5], [2000, 0.0]]
    assert [policy_fraction_schedule(b, table=table) for b in (100, 500, 999, 1000, 1999, 2000, 20000)] == [
        1.0, 1.0, 1.0, 0.5, 0.5, 0.0, 0.0]
    assert policy_fraction_schedule(1000, table=None) == 1.0  # the default rule without a table


def test_shipped_tvm_policy_loads_weights_only_and_runs_through_the_cli(tmp_path):
    from release.graph.models import model_module
    from release.graph.policy import load_checkpoint_file, load_policy, shipped_checkpoint
    from release.graph.relax_import import from_relax, reorder_bindings
    from release.graph.tvm_plan import planned_memory_exact

    ck = shipped_checkpoint("peak-memory", "tvm")
    assert ck.name == "regal-peak-memory-tvm.pt"
    d = load_checkpoint_file(ck)  # torch.load(weights_only=True)
    assert d["meta"]["memory"] == "tvm"
    pol, meta = load_policy(ck)
    assert pol.cfg.devices == 1
    table = meta.get("policy_fraction")
    assert table is None or all(0.0 <= s <= 1.0 for _, s in table)
    out = tmp_path / "o.json"
    rc = main(["regal", "optimize", "--graph", "model:tiny", "--objective", "peak-memory", "--memory", "tvm",
               "--method", "brkga,regal", "--budget", "60", "--out", str(out)])
    assert rc == 0
    res = json.loads(out.read_text())
    mod = model_module("tiny")
    g = from_relax(mod)
    r = res["methods"]["regal"]
    assert r["objective"] == planned_memory_exact(reorder_bindings(mod, g, r["solution"]["order"])).total
    assert r["objective"] <= res["given_order_objective"] and r["evaluations"] <= 60


def test_budget_robustness_never_worse_than_given_and_greedy(small_nets):
    """On two held-out networks (never trained on): plain, tuned BRKGA and REGAL with the shipped TVM-plan policy
    (its per-budget share, and the full policy) never return more than the given order or the greedy solution
    plan, at small and larger budgets."""
    from release.graph.baselines import seed_chromosomes
    from release.graph.brkga import BRKGAConfig, brkga, policy_fraction_schedule
    from release.graph.perf_model import PerformanceModel
    from release.graph.policy import load_policy, policy_action, shipped_checkpoint

    pol, meta = load_policy(shipped_checkpoint("peak-memory", "tvm"))
    for rg in small_nets:
        base = PerformanceModel(rg.graph, 1, "peak-memory", memory_plan=rg.plan)
        init = seed_chromosomes(base)
        o, _ = base.evaluate_population(init)
        given, greedy = float(o[0]), float(o[1])
        assert given == rg.plan.given_order_bytes()
        params = policy_action(pol, rg.graph).brkga_params(pol.cfg, 1)
        for b in (3, 150, 600):
            share = policy_fraction_schedule(b, table=meta.get("policy_fraction"))
            for kw in ({}, {"config": BRKGAConfig(population=50, elite_fraction=0.25, mutant_fraction=0.1, rho=0.6)},
                       {"policy_fraction": share, **params}, dict(params)):
                m = PerformanceModel(rg.graph, 1, "peak-memory", memory_plan=rg.plan)
                r = brkga(m, b, seed=7, initial=init, **kw)
                assert r.evaluations == m.evaluations <= b
                assert r.best_objective <= min(given, greedy)


def test_fusion_is_a_fixed_point_so_graph_nodes_are_the_kernels_tvm_plans():
    """Bug found on test network 200006: a second FuseOps run (tvm.compile runs the passes again on the module
    it is given) merged a max_pool2d kernel into its add, so the once-fused graph had one node more than the
    kernels TVM plans and TVMPlanModel refused it. fuse_like_tvm now iterates to a fixed point."""
    import tvm
    from tvm.relax.backend.cpu_generic import pipeline as cpu

    from release.graph.synthetic_relax import make_relax_graph

    rg = make_relax_graph(200006, orders=4)  # raised GraphError (75 kernels, 76 nodes) before the fix
    t = tvm.target.Target({"kind": "llvm"})
    with t:
        again = tvm.transform.Sequential(cpu.library_dispatch_passes(t) + cpu.legalize_passes(t))(rg.mod)
    count = lambda m: sum(len(b.bindings) for b in m["main"].body.blocks)  # noqa: E731
    assert count(again) == count(rg.mod)
    assert rg.graph.n == rg.plan.n == 75
