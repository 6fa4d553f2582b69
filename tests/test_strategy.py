"""ReleaseSearchStrategy through MetaSchedule's tune_tir, then compile_tir from its database."""

from __future__ import annotations

import numpy as np
import pytest


pytestmark = pytest.mark.usefixtures("one_torch_thread")


# slow: ~20 s of MetaSchedule tune_tir; the strategy's clone and bad input are checked below in make test
@pytest.mark.slow
def test_tune_tir_with_release_strategy_then_compile_tir(matmul_task, tmp_path, monkeypatch):
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from release.session import TuningSession

    calls = {"ask": 0, "tell": 0}
    for name in calls:  # count the session calls: the strategy asks and tells through its session
        orig = getattr(TuningSession, name)

        def spy(session, *a, _orig=orig, _name=name, **kw):
            calls[_name] += 1
            return _orig(session, *a, **kw)

        monkeypatch.setattr(TuningSession, name, spy)

    from release.rl import PPOConfig
    from release.strategy import ReleaseSearchStrategy, fast_builder
    from release.target import ensure_tensor_intrinsics

    task = matmul_task
    ensure_tensor_intrinsics(task.target)
    strategy = ReleaseSearchStrategy(plan_size=8, seed=0, ppo_config=PPOConfig(n_episodes=32, max_steps=50))
    runner = ms.runner.LocalRunner(evaluator_config=ms.runner.EvaluatorConfig(number=1, repeat=1))
    db = ms.tune_tir(task.mod, task.target, str(tmp_path), max_trials_global=16, num_trials_per_iter=8,
                     strategy=strategy, builder=fast_builder(task.target), runner=runner, cost_model="random",
                     num_tuning_cores=1, seed=0)
    recs = db.get_all_tuning_records()
    assert len(recs) == 16  # 8 random configs, then one round: the agent's plan of 8, adaptive sampling
    assert calls["ask"] >= 2 and calls["tell"] == 2  # two iterations of 8: ask in generate, tell in notify
    # distinct configs, all from the task's knob space
    space = task.config_space
    configs = {space.canonical(space.from_trace(r.trace)) for r in recs}
    assert len(configs) == len(recs)
    ok = [r for r in recs if r.run_secs is not None and float(r.run_secs[0]) < 1e9]
    assert len(ok) >= len(recs) - 2
    sch = ms.tir_integration.compile_tir(db, task.mod, task.target)
    assert sch is not None
    lib = tvm.compile(sch.mod, target=task.target)
    assert task.check(lib) < 1e-3
    # the best record's config is the tuned schedule compile_tir applied
    best = min(ok, key=lambda r: float(np.mean([float(x) for x in r.run_secs])))
    assert space.from_trace(sch.trace) == space.from_trace(best.trace)


def test_strategy_clone_and_bad_input(matmul_task):
    from release.errors import TunerError
    from release.strategy import ReleaseSearchStrategy

    s = ReleaseSearchStrategy(plan_size=16, seed=3)
    assert s._inst.clone().kwargs == s.kwargs and s._inst.clone() is not s._inst
    c = s.clone()  # through TVM's FFI, as tune_tir does
    assert not c.same_as(s)
    for bad, msg in ((dict(optimizer="bogus"), "unknown optimizer 'bogus'; choose one of: ppo, sa"),
                     (dict(sampler="kmeans"), "unknown sampler 'kmeans'"),
                     (dict(plan_size=0), "plan_size=0")):
        with pytest.raises(TunerError, match=msg) as e:
            ReleaseSearchStrategy(**bad)
        assert "\n" not in str(e.value)
