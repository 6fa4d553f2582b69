"""ReleaseTuner (PPO + adaptive sampling) and the ablation variants, end to end on a real matmul."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from release import autotvm
from release.errors import SpaceError, TunerError
from release.measure import load_records
from release.optimizers.ppo import legacy_agent_checkpoint_path
from release.rl import PPOConfig, RLOptimizer, agent_checkpoint_path
from release.sampling import AdaptiveSampler, PassThroughSampler
from release.tuners import get_tuner
from release.tuners.release_tuner import ReleasePlusTuner, ReleaseTuner, RLTuner, SAASTuner


pytestmark = pytest.mark.usefixtures("one_torch_thread")


SMALL_AGENT = PPOConfig(n_episodes=64, max_steps=100)


def test_release_tuner_64_trials_then_resume(matmul_task, fast_measure, tmp_path):
    log = tmp_path / "release.jsonl"
    # plan_size 16: the first 16 trials are random, then rounds of k in {8, 16} sampled configs
    tuner = ReleaseTuner(matmul_task, plan_size=16, seed=0, feature_type="knob", ppo_config=SMALL_AGENT)
    assert isinstance(tuner.model_optimizer, RLOptimizer) and isinstance(tuner.sampler, AdaptiveSampler)
    tuner.tune(40, fast_measure, callbacks=[autotvm.callback.log_to_file(str(log))])
    recs = load_records(log)
    assert tuner.trials == 40 == len(recs) == len({tuple(r.config) for r in recs})
    assert tuner.train_ct >= 2  # the model was fit and the agent searched at least twice
    assert tuner.model_optimizer.agent.rounds >= tuner.train_ct - 1  # the last fit's plan may be pending
    assert tuner.sampler.last_k in (8, 16)
    first_40 = [tuple(r.config) for r in recs]
    fastest = min((r for r in recs if r.ok), key=lambda r: r.mean_cost)  # the best is the fastest logged
    assert tuner.best_config == tuple(fastest.config) and tuner.best_gflops == pytest.approx(fastest.gflops)
    assert tuner.best_gflops > 0
    # resume to 64 from the log: the 40 count, nothing is measured twice, the new tuner learns from them
    t2 = ReleaseTuner(matmul_task, plan_size=16, seed=1, feature_type="knob", ppo_config=SMALL_AGENT)
    t2.tune(64, fast_measure, callbacks=[autotvm.callback.log_to_file(str(log))])
    recs = load_records(log)
    assert t2.trials == 64 == len(recs) == len({tuple(r.config) for r in recs})
    assert t2.train_ct >= 1 and t2.cost_model.fit_count >= 1
    assert t2.best_gflops >= tuner.best_gflops
    assert t2.best_gflops == pytest.approx(max(r.gflops for r in recs))  # the best of all 64, resumed ones too
    assert [tuple(r.config) for r in recs[:40]] == first_40  # the first run's records kept as written
    assert all(r.tuner == "release" for r in recs)
    # the agent lives beside the log and is resumed with it (the records alone do not rebuild it)
    ckpt = agent_checkpoint_path(str(log), matmul_task.key)
    assert os.path.isfile(ckpt) and ckpt.endswith(".agent.pt")
    saved = torch.load(ckpt, weights_only=True)
    assert saved["rounds"] == t2.model_optimizer.agent.rounds >= 1
    t3 = ReleaseTuner(matmul_task, plan_size=16, seed=2, feature_type="knob", ppo_config=SMALL_AGENT)
    fresh = {k: v.clone() for k, v in t3.model_optimizer.agent.actor.state_dict().items()}
    t3.attach_log(str(log))
    assert t3.agent_checkpoint == ckpt and t3.model_optimizer.agent.rounds == saved["rounds"]
    for k, v in t3.model_optimizer.agent.actor.state_dict().items():
        assert torch.equal(v, saved["actor"][k]) and not torch.equal(v, fresh[k])


def _agent_file(tmp_path, dims, name="other.agent.pt", rounds=0):
    from release.rl import PPOAgent

    agent = PPOAgent(dims, SMALL_AGENT, seed=7)
    agent.rounds = rounds
    path = tmp_path / name
    torch.save(agent.state_dict(), path)
    return path, agent


def test_agent_checkpoint_that_does_not_fit_is_ignored_with_a_warning(matmul_task, tmp_path, caplog):
    log = str(tmp_path / "t.jsonl")
    ckpt = agent_checkpoint_path(log, matmul_task.key)
    folder = tmp_path / os.path.basename(os.path.dirname(ckpt))  # the log's .agents folder
    folder.mkdir()
    dims = list(matmul_task.config_space.dims)
    bad_checkpoints = [
        lambda: _agent_file(folder, [d + 1 for d in dims], os.path.basename(ckpt), rounds=5),  # another task
        lambda: _agent_file(folder, dims + [2], os.path.basename(ckpt), rounds=5),  # another knob count
        lambda: open(ckpt, "wb").write(b"not a checkpoint"),  # damaged file
    ]
    for make in bad_checkpoints:
        make()
        tuner = ReleaseTuner(matmul_task, plan_size=16, seed=0, feature_type="knob", ppo_config=SMALL_AGENT)
        caplog.clear()
        with caplog.at_level("WARNING"):
            tuner.attach_log(log)
        assert tuner.model_optimizer.agent.rounds == 0  # fresh agent
        assert any("agent checkpoint ignored" in r.getMessage() for r in caplog.records)
    # a tuner without an agent keeps nothing beside the log
    sa = ReleaseTuner(matmul_task, optimizer="sa")
    sa.attach_log(log)
    assert sa.agent_checkpoint is None


def test_agent_checkpoint_named_by_an_older_release_key_is_resumed(matmul_task, tmp_path, caplog):
    """Releases before ISA-class keys named the checkpoint by a key over the whole target: it is read, and
    the agent is saved under the current name from then on (the checkpoint of the kind: every old name)."""
    log = str(tmp_path / "t.jsonl")
    older_key = f"{matmul_task.name}/{matmul_task.legacy_digest()}"
    assert older_key != matmul_task.key
    old = legacy_agent_checkpoint_path(log, older_key)  # beside the log, as those releases wrote it
    _agent_file(tmp_path, list(matmul_task.config_space.dims), os.path.basename(old), rounds=6)
    tuner = ReleaseTuner(matmul_task, plan_size=16, seed=0, feature_type="knob", ppo_config=SMALL_AGENT)
    with caplog.at_level("INFO"):
        tuner.attach_log(log)
    assert tuner.model_optimizer.agent.rounds == 6
    assert tuner.agent_checkpoint == agent_checkpoint_path(log, matmul_task.key) != old
    assert not any("agent checkpoint ignored" in r.getMessage() for r in caplog.records)


def test_agent_checkpoint_beside_the_log_moves_into_its_folder_and_is_resumed(matmul_task, tmp_path):
    """Releases before the ``.agents`` folder kept the checkpoint beside the log: a resumed run moves it into
    the log's folder and resumes the agent from it."""
    log = str(tmp_path / "t.jsonl")
    beside = legacy_agent_checkpoint_path(log, matmul_task.key)
    _agent_file(tmp_path, list(matmul_task.config_space.dims), os.path.basename(beside), rounds=4)
    tuner = ReleaseTuner(matmul_task, plan_size=16, seed=0, feature_type="knob", ppo_config=SMALL_AGENT)
    tuner.attach_log(log)
    ckpt = agent_checkpoint_path(log, matmul_task.key)
    assert tuner.model_optimizer.agent.rounds == 4 and tuner.agent_checkpoint == ckpt
    assert os.path.isfile(ckpt) and not os.path.exists(beside)
    assert os.path.dirname(ckpt) == str(tmp_path / "t.agents")


def test_warm_start_from_another_task_of_the_same_knob_count(matmul_task, tmp_path):
    dims = list(matmul_task.config_space.dims)
    path, other = _agent_file(tmp_path, [d + 3 for d in dims], rounds=9)  # same operator, other shape
    tuner = ReleaseTuner(matmul_task, seed=0, ppo_config=SMALL_AGENT, warm_start=str(path))
    agent = tuner.model_optimizer.agent
    for k, v in agent.actor.state_dict().items():
        assert torch.equal(v, other.actor.state_dict()[k])
    for k, v in agent.critic.state_dict().items():
        assert torch.equal(v, other.critic.state_dict()[k])
    assert agent.rounds == 0 and not agent.optimizer.state_dict()["state"]  # optimizer and count start fresh
    assert get_tuner("rl", matmul_task, seed=0, warm_start=other.state_dict()).model_optimizer.agent.rounds == 0
    # clear errors: another knob count, a missing or damaged file, no agent to warm-start
    wrong, _ = _agent_file(tmp_path, dims + [4], "wrong.agent.pt")
    with pytest.raises(TunerError, match=f"has {len(dims) + 1} knobs, this space has {len(dims)}") as e:
        ReleaseTuner(matmul_task, warm_start=str(wrong))
    assert "\n" not in str(e.value)
    with pytest.raises(TunerError, match="does not exist"):
        ReleaseTuner(matmul_task, warm_start=str(tmp_path / "nope.agent.pt"))
    (tmp_path / "junk.pt").write_bytes(b"junk")
    with pytest.raises(TunerError, match="not readable") as e:
        ReleaseTuner(matmul_task, warm_start=str(tmp_path / "junk.pt"))
    assert "\n" not in str(e.value)
    with pytest.raises(TunerError, match="not a PPO agent checkpoint"):
        ReleaseTuner(matmul_task, warm_start={"weights": 1})
    with pytest.raises(TunerError, match="needs the PPO agent"):
        ReleaseTuner(matmul_task, optimizer="sa", warm_start=str(path))


def test_refit_after_each_k_not_after_plan_size(matmul_task, fast_measure):
    tuner = ReleaseTuner(matmul_task, plan_size=32, seed=0, feature_type="knob", ppo_config=SMALL_AGENT)
    tuner.tune(32 + 31, fast_measure)
    # the first 32 are random (no model); after that each round measures k (8, 16 or 24) then refits,
    # so a second refit happens before 32 more measurements (AutoTVM's rule would refit only at 64)
    assert tuner.train_ct >= 2
    assert tuner.cost_model.fit_count == tuner.train_ct


def test_variants_by_name(matmul_task):
    assert isinstance(get_tuner("release", matmul_task, seed=0), ReleaseTuner)
    rl = get_tuner("rl", matmul_task, seed=0)
    assert isinstance(rl, RLTuner) and isinstance(rl.model_optimizer, RLOptimizer)
    assert isinstance(rl.sampler, PassThroughSampler)  # the whole plan (None in earlier versions)
    saas = get_tuner("sa-as", matmul_task, seed=0)
    assert isinstance(saas, SAASTuner) and isinstance(saas.sampler, AdaptiveSampler)
    assert type(saas.model_optimizer).__name__ == "SimulatedAnnealingOptimizer"
    assert autotvm.tuner.ReleaseTuner is ReleaseTuner
    sa_as = ReleaseTuner(matmul_task, optimizer="sa")
    assert type(sa_as.model_optimizer).__name__ == "SimulatedAnnealingOptimizer"
    # release+ is ReleaseTuner with our four search settings, each overridable
    plus = get_tuner("release+", matmul_task, seed=0)
    assert isinstance(plus, ReleasePlusTuner) and isinstance(plus.sampler, AdaptiveSampler)
    opt = plus.model_optimizer
    assert (opt.start_from_measured, opt.min_queries) == (0.5, 16000)
    assert (opt.agent.cfg.boundary, opt.agent.cfg.max_minibatches) == ("pushed", 64)
    assert autotvm.tuner.ReleasePlusTuner is ReleasePlusTuner
    assert get_tuner("release+", matmul_task, seed=0, min_queries=0).model_optimizer.min_queries == 0
    paper = get_tuner("release", matmul_task, seed=0).model_optimizer
    assert (paper.start_from_measured, paper.min_queries) == (0.0, 0)
    assert paper.agent.cfg.boundary != "pushed"


def test_bad_input_one_clear_line(matmul_task):
    with pytest.raises(TunerError, match="unknown optimizer 'evolution'; choose one of: ppo, sa") as e:
        ReleaseTuner(matmul_task, optimizer="evolution")
    assert "\n" not in str(e.value)
    with pytest.raises(TunerError, match="unknown sampler 'kmeans'") as e:
        ReleaseTuner(matmul_task, sampler="kmeans")
    assert "\n" not in str(e.value)
    with pytest.raises(TunerError, match="plan_size=0"):
        ReleaseTuner(matmul_task, plan_size=0)


def test_task_without_knobs_is_refused():
    from tvm import te

    from release.task import Task

    a = te.placeholder((4,), name="a")
    b = te.compute((4,), lambda i: a[i] + 1.0, name="b")
    task = Task([a, b], "llvm", name="add4")
    with pytest.raises(SpaceError, match="no knob to tune") as e:
        ReleaseTuner(task)
    assert "\n" not in str(e.value)
