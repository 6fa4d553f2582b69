"""REGAL part 2: policy network, REINFORCE training, evaluation, `--method regal`, Relax schedule application."""

import json

import numpy as np
import pytest
import torch

from release.cli import main
from release.errors import GraphError
from release.graph.brkga import brkga
from release.graph.graph import ComputationGraph
from release.graph.perf_model import PerformanceModel
from release.graph.policy import (Action, PolicyConfig, RegalPolicy, distributions, graph_tensors, load_policy,
                                  node_features, policy_action, sample_action, save_policy, shipped_checkpoint)
from release.graph.synthetic import SyntheticConfig, make_splits, random_layered_graph
from release.graph.train import TrainConfig, expected_reward, train

from regal_fixtures import two_branch

# PPO and the policy on one torch thread, per test (tests/conftest.py), not set at import;
# FutureWarnings silenced per test, not process-wide
pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.filterwarnings("ignore::FutureWarning")]


def _graphs():
    single = ComputationGraph([3.0], [8.0], [], name="single")
    chain = ComputationGraph([1, 2, 3], [4, 4, 4], [(0, 1), (1, 2)], name="chain")
    ctrl = ComputationGraph([1, 1, 1, 1], [1, 2, 3, 4], [(0, 1), (0, 2)], [(1, 3), (2, 3)], name="ctrl")
    return [single, chain, ctrl, two_branch(),
            random_layered_graph(SyntheticConfig(n_nodes=40, width=8), 1),
            random_layered_graph(SyntheticConfig(n_nodes=250, width=16), 2)]


@pytest.mark.parametrize("devices", [1, 3])
def test_policy_outputs_valid_for_any_graph_size(devices):
    torch.manual_seed(0)
    pol = RegalPolicy(PolicyConfig(devices=devices, hidden=8, layers=2))
    K, R = len(pol.cfg.beta_grid), len(pol.cfg.rho_grid)
    for g in _graphs():
        f = node_features(g)
        assert f.shape == (g.n, 16) and np.all(np.isfinite(f))
        x, e = graph_tensors(g)
        key, rho = pol(x, e)
        assert key.shape == (g.n, pol.cfg.key_types, K) and rho.shape == (g.n, R)
        dk, dr = distributions(pol, x, e)
        assert torch.allclose(dk.probs.sum(-1), torch.ones(g.n, pol.cfg.key_types))
        assert torch.allclose(dr.probs.sum(-1), torch.ones(g.n))
        a, logp, ent = sample_action(pol, x, e, generator=torch.Generator().manual_seed(1))
        assert torch.isfinite(logp) and logp.item() <= 0 and ent.item() > 0
        assert a.key_choice.shape == (g.n, pol.cfg.key_types) and a.key_choice.max() < K
        p = a.brkga_params(pol.cfg, devices)
        n_genes = PerformanceModel(g, devices).n_genes
        for k in ("alpha", "beta", "rho"):
            assert p[k].shape == (n_genes,)
        assert np.all(p["alpha"] > 0) and np.all(p["beta"] > 0)
        assert np.all((p["rho"] >= 0) & (p["rho"] <= 1))
        # the grids' entries, per node: rho of a node's affinity genes equals its priority gene's rho
        if devices > 1:
            assert np.array_equal(p["rho"][g.n:].reshape(g.n, devices), np.repeat(p["rho"][: g.n, None], devices, 1))
        # the chosen parameters run through BRKGA
        r = brkga(PerformanceModel(g, devices), 30, seed=0, **p)
        assert r.evaluations == 30


def test_initial_policy_prefers_plain_choice_and_message_passing_uses_edges():
    torch.manual_seed(0)
    pol = RegalPolicy(PolicyConfig(devices=2, plain_prob=0.5))
    g = random_layered_graph(SyntheticConfig(n_nodes=30), 3)
    x, e = graph_tensors(g)
    dk, dr = distributions(pol, x, e)
    # head biases make choice 0 (plain BRKGA) about 50% likely at the start, the others ~ 1/12 each
    assert 0.4 < dk.probs[..., 0].mean().item() < 0.6
    assert 0.4 < dr.probs[..., 0].mean().item() < 0.6
    # outputs depend on the edges (message passing), not only on node features
    k1, _ = pol(x, e)
    k2, _ = pol(x, e[:0])
    assert not torch.allclose(k1, k2)
    with pytest.raises(GraphError, match="beta_grid"):
        PolicyConfig(beta_grid=[[2.0, 2.0], [1.0, 1.0]]).validate()


@pytest.mark.parametrize("devices,objective", [(1, "peak-memory"), (2, "runtime")])
def test_uniform_choices_reproduce_plain_brkga_exactly(devices, objective):
    g = random_layered_graph(SyntheticConfig(n_nodes=25, width=5), 4)
    cfg = PolicyConfig(devices=devices)
    params = Action.uniform(g.n, cfg).brkga_params(cfg, devices)
    assert np.all(params["alpha"] == 1) and np.all(params["beta"] == 1) and np.all(params["rho"] == 0.7)
    a = brkga(PerformanceModel(g, devices, objective), 700, seed=3, **params)
    b = brkga(PerformanceModel(g, devices, objective), 700, seed=3)
    assert a.best_objective == b.best_objective
    assert np.array_equal(a.best_chromosome, b.best_chromosome)
    assert np.array_equal(a.curve, b.curve)


def _plain_policy(devices=1):
    """A policy whose most likely (and almost sure) choice is 0 everywhere."""
    torch.manual_seed(0)
    pol = RegalPolicy(PolicyConfig(devices=devices, hidden=8, layers=1))
    with torch.no_grad():
        for head in (pol.key_head, pol.rho_head):
            head.weight.zero_()
            k = head.bias.numel() // (pol.cfg.key_types if head is pol.key_head else 1)
            head.bias.view(-1, k).copy_(torch.tensor([50.0] + [0.0] * (k - 1)))
    return pol


def test_policy_path_with_plain_choices_equals_plain_brkga_through_the_cli(tmp_path, capsys):
    pol = _plain_policy(devices=2)
    g = random_layered_graph(SyntheticConfig(n_nodes=20, width=4), 7)
    a = policy_action(pol, g)
    assert a.key_choice.max() == 0 and a.rho_choice.max() == 0
    ck = tmp_path / "plain.pt"
    save_policy(pol, ck)
    out = tmp_path / "r.json"
    rc = main(["regal", "optimize", "--graph", "synthetic:7", "--nodes", "20", "--objective", "runtime", "--devices",
               "2", "--budget", "400", "--method", "brkga,regal", "--checkpoint", str(ck), "--out", str(out)])
    assert rc == 0
    res = json.loads(out.read_text())["methods"]
    assert res["regal"]["objective"] == res["brkga"]["objective"]
    assert res["regal"]["solution"]["order"] == res["brkga"]["solution"]["order"]
    # a 2-device policy cannot set affinity keys for 3 devices
    with pytest.raises(GraphError, match="trained for 2 device"):
        a.brkga_params(pol.cfg, 3)
    with pytest.raises(GraphError, match="not found"):
        load_policy(tmp_path / "missing.pt")


def test_short_training_raises_mean_reward_and_resumes_identically(tmp_path):
    graphs = make_splits(3, 0, 0, SyntheticConfig(n_nodes=14, width=4), seed=5).train
    cfg = TrainConfig(objective="peak-memory", devices=1, budget=20, steps=30, batch_graphs=3, samples=4,
                      seeds_per_graph=1, lr=0.03, hidden=16, layers=2, seed=0, checkpoint_every=5)
    torch.manual_seed(cfg.seed)
    start = RegalPolicy(PolicyConfig(devices=1, hidden=16, layers=2))  # the same initial weights train() makes
    before = expected_reward(start, graphs, "peak-memory", 1, 20, samples=8)
    pol, state = train(graphs, cfg)
    after = expected_reward(pol, graphs, "peak-memory", 1, 20, samples=8)
    assert len(state.history) == 30
    # the untrained policy's random Beta choices lose against plain BRKGA; training removes (part of) that loss
    assert before < -0.005
    assert after > before + 0.005
    early = np.mean([h["reward"] for h in state.history[:5]])
    late = np.mean([h["reward"] for h in state.history[-5:]])
    assert late > early
    # checkpoint + resume: 3 steps, then resumed to 6 == 6 steps straight
    short = TrainConfig(**{**cfg.__dict__, "steps": 3, "checkpoint_every": 1})
    ck = tmp_path / "ck.pt"
    train(graphs, short, ck)
    p_res, s_res = train(graphs, TrainConfig(**{**short.__dict__, "steps": 6}), ck, resume=True)
    p_str, s_str = train(graphs, TrainConfig(**{**short.__dict__, "steps": 6}))
    assert s_res.step == 6 and len(s_res.history) == 6
    assert [h["reward"] for h in s_res.history] == [h["reward"] for h in s_str.history]
    for a, b in zip(p_res.parameters(), p_str.parameters()):
        assert torch.allclose(a, b)


def test_train_cli_writes_a_loadable_checkpoint(tmp_path, capsys):
    ck = tmp_path / "p.pt"
    rc = main(["regal", "train", "--objective", "runtime", "--graphs", "2", "--nodes", "12", "--width", "3",
               "--steps", "2", "--budget", "40", "--batch-graphs", "2", "--samples", "2", "--out", str(ck)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "step    2/2" in out and "wrote" in out
    pol, meta = load_policy(ck)
    assert pol.cfg.devices == 2 and "regal train" in meta["command"]
    assert main(["regal", "train", "--steps", "0", "--out", str(ck)]) == 2
    # budget-conditioned, seeded training from the CLI; optimize then conditions the policy on its --budget
    ck2 = tmp_path / "b.pt"
    assert main(["regal", "train", "--objective", "runtime", "--graphs", "2", "--nodes", "12", "--width", "3",
                 "--steps", "2", "--budgets", "30,40", "--seeded", "--batch-graphs", "2", "--samples", "2",
                 "--out", str(ck2)]) == 0
    assert "budgets 30,40" in capsys.readouterr().out
    pol2, meta2 = load_policy(ck2)
    assert pol2.cfg.budget_input and meta2["train_config"]["seeded"] and meta2["train_config"]["budgets"] == [30, 40]
    assert main(["regal", "optimize", "--graph", "synthetic:3", "--objective", "runtime", "--budget", "50",
                 "--method", "regal", "--checkpoint", str(ck2)]) == 0
    assert main(["regal", "train", "--budgets", "500,x", "--steps", "1", "--out", str(tmp_path / "c.pt")]) == 2
    assert "--budgets must be a positive integer, got 'x'" in capsys.readouterr().err
    assert not (tmp_path / "c.pt").exists()


def test_evaluate_graph_rows_are_consistent():
    from release.graph.evaluate import EvalConfig, evaluate_graph, summarize

    g = random_layered_graph(SyntheticConfig(n_nodes=16, width=4), 11)
    cfg = EvalConfig(objective="peak-memory", devices=1, budget=200, match_factor=4)
    pc = PolicyConfig()
    row = evaluate_graph(g, Action.uniform(g.n, pc).brkga_params(pc, 1), cfg, seed=5)
    # uniform choices are plain BRKGA: same result, matched within the same budget; nothing beats the optimum
    assert row["regal"] == row["brkga"]
    assert row["match_evals"] <= 200
    assert row["exact"] <= min(row["regal"], row["local"], row["brkga_big"])
    row["infer_s"] = 0.001
    s = summarize([row], 200)
    assert s["impr_vs_brkga_pct"] == 0.0 and s["improved_pct"] == 0.0 and s["worse_pct"] == 0.0
    assert s["gap_regal_pct"] >= 0


@pytest.mark.parametrize("objective,devices", [("peak-memory", 1), ("runtime", 2)])
def test_shipped_checkpoints_load_and_drive_method_regal(objective, devices, capsys):
    ck = shipped_checkpoint(objective)
    if not ck.exists():
        pytest.fail(f"shipped checkpoint {ck} missing")
    pol, meta = load_policy(ck)
    assert pol.cfg.devices == devices and meta["command"].startswith("release regal train")
    rc = main(["regal", "optimize", "--graph", "synthetic:3", "--nodes", "30", "--objective", objective,
               "--devices", str(devices), "--budget", "300", "--method", "regal"])
    assert rc == 0
    assert "regal" in capsys.readouterr().out


def test_relax_reorder_keeps_outputs_identical():
    from release.graph.models import build_model
    from release.graph.relax_apply import apply_schedule
    from release.graph.relax_import import export_torch, from_relax, fuse_like_tvm

    mod = fuse_like_tvm(export_torch(*build_model("tiny")))
    g = from_relax(mod)
    # put a different valid order: the reverse of a topological order of the reversed graph
    rev = ComputationGraph(g.cost, g.out_bytes, g.data_edges[:, ::-1], g.control_edges[:, ::-1])
    order = rev.topological_order()[::-1].copy()
    assert g.is_topological(order) and order.tolist() != list(range(g.n))
    rep = apply_schedule(mod, g, order, check=True)
    assert rep.outputs_identical is True and rep.max_abs_diff == 0.0
    assert rep.planned_before > 0 and rep.planned_after > 0
    assert from_relax(rep.module).names == [g.names[v] for v in order]
    with pytest.raises(GraphError, match="not a topological order"):
        apply_schedule(mod, g, list(range(g.n))[::-1], check=False)


def test_brkga_runner_processes_match_inline():
    from release.graph.train import BRKGARunner

    graphs = [random_layered_graph(SyntheticConfig(n_nodes=15, width=4), s) for s in (1, 2)]
    pc = PolicyConfig(devices=2)
    torch.manual_seed(0)
    pol = RegalPolicy(pc)
    params = policy_action(pol, graphs[1], greedy=False, seed=3).brkga_params(pc, 2)
    tasks = [(0, 120, 5, None), (1, 120, 6, params), (1, 120, 6, None)]
    inline = BRKGARunner(graphs, "runtime", 2, workers=1).run(tasks)
    pool = BRKGARunner(graphs, "runtime", 2, workers=2)
    try:
        assert pool.run(tasks) == inline
    finally:
        pool.close()
    assert inline[0][0] == brkga(PerformanceModel(graphs[0], 2, "runtime"), 120, seed=5).best_objective


def test_training_against_a_given_brkga_config():
    from release.graph.brkga import BRKGAConfig
    from release.graph.train import BRKGARunner

    g = random_layered_graph(SyntheticConfig(n_nodes=15, width=4), 8)
    conf = {"population": 30, "elite_fraction": 0.1, "mutant_fraction": 0.1, "rho": 0.6}
    pc = PolicyConfig(devices=1)
    uni = Action.uniform(g.n, pc).brkga_params(pc, 1)
    runner = BRKGARunner([g], "peak-memory", 1)
    ref = brkga(PerformanceModel(g, 1, "peak-memory"), 200, BRKGAConfig(**conf), seed=4)
    # the reference run uses the config (its rho); the policy's per-node rho replaces the config's rho
    assert runner.run([(0, 200, 4, None, conf)])[0][0] == ref.best_objective
    tuned_rho = brkga(PerformanceModel(g, 1, "peak-memory"), 200, BRKGAConfig(**{**conf, "rho": 0.7}), seed=4)
    assert runner.run([(0, 200, 4, uni, conf)])[0][0] == tuned_rho.best_objective
    with pytest.raises(GraphError, match="unknown BRKGA config field"):
        TrainConfig(brkga={"pop": 10}).validate()
    with pytest.raises(GraphError, match="population"):
        TrainConfig(brkga={"population": 1}).validate()


def test_budget_conditioned_policy_reads_the_budget_and_requires_it():
    g = random_layered_graph(SyntheticConfig(n_nodes=30, width=6), 3)
    x, e = graph_tensors(g)
    torch.manual_seed(0)
    pol = RegalPolicy(PolicyConfig(devices=2, hidden=8, layers=1, budget_input=True))
    with torch.no_grad():  # the last input column of the heads is the budget: a heavy weight there moves the logits
        pol.key_head.weight[:, -1] = 5.0
        k500, r500 = pol(x, e, 500)
        k5000, r5000 = pol(x, e, 5000)
    assert k500.shape == (30, 3, len(pol.cfg.beta_grid)) and pol.key_head.in_features == 2 * 8 + 1
    assert not torch.allclose(k500, k5000)
    with pytest.raises(GraphError, match="conditioned on the evaluation budget"):
        pol(x, e)
    with pytest.raises(GraphError, match="positive integer"):
        pol(x, e, 0)
    # an unconditioned policy keeps its 2 * hidden heads and ignores a budget
    plain = RegalPolicy(PolicyConfig(devices=2, hidden=8, layers=1))
    assert plain.key_head.in_features == 16
    with torch.no_grad():
        assert torch.equal(plain(x, e)[0], plain(x, e, 700)[0])


def test_training_at_several_budgets_from_seed_chromosomes(tmp_path):
    from release.graph.baselines import seed_chromosomes
    from release.graph.train import BRKGAJob

    graphs = make_splits(3, 0, 0, SyntheticConfig(n_nodes=14, width=4), seed=5).train
    cfg = TrainConfig(objective="runtime", devices=2, budgets=[20, 60], seeded=True, steps=6, batch_graphs=2,
                      samples=2, seeds_per_graph=1, hidden=8, layers=1, seed=0, checkpoint_every=2)
    ck = tmp_path / "b.pt"
    pol, state = train(graphs, cfg, ck)
    assert pol.cfg.budget_input
    assert {h["budget"] for h in state.history} == {20, 60}
    # the plain-BRKGA cache is keyed by graph, seed and budget; a cached value is plain BRKGA from the seeds
    assert {k[2] for k in state.plain} == {20, 60}
    gi, s, b = next(iter(state.plain))
    m = PerformanceModel(graphs[gi], 2, "runtime")
    assert state.plain[(gi, s, b)][0] == brkga(m, b, seed=s, initial=seed_chromosomes(m)).best_objective
    # seeded runs are never worse than the seed chromosomes, whatever the policy chose
    job = BRKGAJob([graphs[gi].to_dict()], {"objective": "runtime", "devices": 2}, seeded=True)
    best_seed = min(job.model(0).evaluate_population(job.initial(0))[0])
    a = policy_action(pol, graphs[gi], budget=20).brkga_params(pol.cfg, 2)
    assert job((0, 20, 1, a))[0] <= best_seed
    # the checkpoint resumes with its budget-keyed cache and drives the CLI with the budget
    loaded, _ = load_policy(ck)
    assert loaded.cfg.budget_input
    _, s2 = train(graphs, TrainConfig(**{**cfg.__dict__, "steps": 7}), ck, resume=True)
    assert s2.step == 7 and set(state.plain) <= set(s2.plain)
    with pytest.raises(GraphError, match="positive integers"):
        TrainConfig(budgets=[100, 0]).validate()


def test_policy_headroom_script_quick(tmp_path):
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "policy_headroom", Path(__file__).resolve().parents[2] / "benchmarks/regal/policy_headroom.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["train", "--quick", "--workers", "1", "--out", str(tmp_path)]) == 0
    assert mod.main(["dev", "--quick", "--workers", "1", "--out", str(tmp_path)]) == 0
    assert set(json.loads((tmp_path / "dev.json").read_text())) == {"100"}
    assert mod.main(["evaluate", "--quick", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "results.json").read_text())
    assert [g["name"] for g in doc["graphs"]] == ["synthetic-30-s0", "synthetic-40-s1"]
    for g in doc["graphs"]:
        m = PerformanceModel(mod.load_graph(g["spec"]), 2, "runtime")
        from release.graph.baselines import seed_chromosomes

        seeded = min(m.evaluate_population(seed_chromosomes(m))[0])
        for r in g["rows"]:
            assert r["equal_time_evals"] >= r["budget"] and r["infer_s"] > 0
            for k in ("regal", "brkga@evals", "brkga@time", "local@time", "shipped"):
                assert r[k] <= seeded  # every method starts from the seed chromosomes
            assert r["brkga@time"] <= r["brkga@evals"]  # a longer prefix of the same run
    table = (tmp_path / "table.md").read_text()
    assert "| synthetic-30-s0 | 30 | 100 |" in table and "headroom unknown | 2 |" in table


def test_policy_share_full_for_a_budget_conditioned_policy_schedule_otherwise():
    from release.graph.brkga import policy_fraction_schedule
    from release.graph.policy import policy_share

    cond = RegalPolicy(PolicyConfig(devices=2, hidden=8, layers=1, budget_input=True))
    plain = RegalPolicy(PolicyConfig(devices=2, hidden=8, layers=1))
    for b in (500, 2000, 8000):
        assert policy_share(cond, {}, b) == 1.0
        assert policy_share(plain, {}, b) == policy_fraction_schedule(b)
    assert policy_share(plain, {}, 8000) == 0.0 and policy_share(plain, {}, 2000) == 0.5
    assert policy_share(plain, {"policy_fraction": [[0, 0.25]]}, 500) == 0.25
