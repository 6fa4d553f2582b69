"""Transfer-tuning seeds: another task's best traces carried into a task's knob space.

Real TVM tasks and knob spaces throughout (design spaces built, configs replayed and postprocessed);
the tuner runs answer from :mod:`replay` (real replays, recorded or synthetic run times), so the
counts are deterministic.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from release.errors import InvalidConfigError, TunerError
from release.measure.result import to_py
from release.task import create_task
from release.workloads import Workload

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tuners"))
from replay import ReplayMeasurer  # noqa: E402

TARGET = {"kind": "llvm", "mcpu": "rocketlake", "num-cores": 2}  # AVX-512: the fixtures' machine


def _trace_json(space, config):
    return to_py(space.trace(config).as_json(remove_postproc=False))


@pytest.fixture(scope="module")
def wide_matmul():
    """A matmul of another shape than tiny.matmul.1 (64x64x64): the same schedule structure."""
    return create_task(Workload("test.matmul.wide", "matmul", dict(m=32, k=128, n=96)).build_te(), "llvm")


def test_transplant_of_a_tasks_own_trace_is_the_same_config():
    """Carried onto its own space, every config's trace comes back as that config (every knob kind:
    the design-space choice, tiles, the unroll step, the compute location)."""
    space = create_task("tiny.conv2d.1", TARGET).config_space
    kinds = {k.kind for k in space.knobs}
    assert {"space", "tile", "categorical", "compute_location"} <= kinds
    for c in space.sample(24, np.random.default_rng(3)):
        c = tuple(int(x) for x in c)
        assert space.transplant(_trace_json(space, c)) == space.canonical(c)


def test_transplant_keeps_inner_tiles_and_lets_the_outer_factor_absorb_the_shape(matmul_task, wide_matmul):
    """64x64x64 -> 32x128x96: each tile keeps its inner factors where the new extent allows, the
    outermost factor takes the change (inner factors decide vectorization and register blocking)."""
    src, dst = matmul_task.config_space, wide_matmul.config_space
    checked = 0
    for c in src.sample(16, np.random.default_rng(0)):
        c = tuple(int(x) for x in c)
        got = dst.transplant(_trace_json(src, c))
        assert dst.check(got) == got
        a, b = src.describe(c), dst.describe(got)
        assert a.keys() == b.keys()
        for name, s in a.items():
            if not name.startswith("tile."):
                continue
            t = b[name]
            extent = np.prod(next(k for k in dst.knobs if k.name == name).choices[0])
            assert len(t) == len(s) and np.prod(t) == extent
            ratio = np.prod(t) / np.prod(s)
            if (s[0] * ratio).is_integer() and s[-1] <= max(t):  # the outer factor can absorb it exactly
                assert t[1:] == s[1:] and t[0] == s[0] * ratio, (name, s, t)
                checked += 1
    assert checked >= 16  # most tiles were checked exactly


def test_transplant_refuses_another_operator(matmul_task):
    conv = create_task("tiny.conv2d.1", TARGET).config_space
    trace = _trace_json(conv, conv.get(0))
    with pytest.raises(InvalidConfigError, match="match no design space"):
        matmul_task.config_space.transplant(trace)
    with pytest.raises(InvalidConfigError, match="not a MetaSchedule trace"):
        matmul_task.config_space.transplant({"not": "a trace"})


def _measured(task, n, seed=0):
    """Records of ``n`` configs of ``task``, measured by the replay (synthetic, deterministic costs)."""
    from release.measure.records import log_to_file, load_records
    from release.tuners import get_tuner

    import tempfile

    with tempfile.TemporaryDirectory() as d:
        log = str(Path(d) / "src.jsonl")
        get_tuner("random", task, seed=seed).tune(n, ReplayMeasurer(task), callbacks=[log_to_file(log)])
        return load_records(log)


def test_seeds_are_the_sources_best_first_distinct_and_valid(matmul_task, wide_matmul):
    from release.knowledge import knowledge_seeds

    records = _measured(wide_matmul, 24)
    seeds = knowledge_seeds(matmul_task, records, 6)
    assert 1 <= len(seeds) <= 6 and len(set(seeds)) == len(seeds)
    space = matmul_task.config_space
    assert all(space.is_valid(s)[0] for s in seeds)
    best = max((r for r in records if r.ok), key=lambda r: r.gflops)
    assert seeds[0] == space.transplant(best.trace)  # the best source config first
    # this task's own earlier records come before any other workload's, as they are
    own = _measured(matmul_task, 8, seed=1)
    sources: list = []
    mixed = knowledge_seeds(matmul_task, records + own, 6, sources=sources)
    own_best = max((r for r in own if r.ok), key=lambda r: r.gflops)
    assert mixed[0] == space.canonical(tuple(own_best.config))
    # each seed's source workload, in order: this task's own first, then the other matmul's
    assert len(sources) == len(mixed) and sources[0] == matmul_task.key
    assert set(sources) <= {matmul_task.key, wide_matmul.key}
    conv = create_task("tiny.conv2d.1", TARGET)
    sources = []
    assert knowledge_seeds(conv, records, 6, sources=sources) == [] and sources == []  # another operator: none
    # a base with another operator's records besides: only the workloads the seeds came from are counted
    sources = []
    assert knowledge_seeds(matmul_task, records + _measured(conv, 8), 6, sources=sources)
    assert set(sources) == {wide_matmul.key}


def test_tuner_with_seeds_measures_them_first_then_random_then_its_own_model(matmul_task, wide_matmul):
    """knowledge_use="seeds": the first round is the seeds, then random configs up to plan_size; the cost
    model is AutoTVM's own (not transferred) and fits after that round."""
    from release.tuners import get_tuner

    records = _measured(wide_matmul, 24)
    plan = 8
    tuner = get_tuner("xgb", matmul_task, plan_size=plan, seed=0, knowledge=records, knowledge_use="seeds",
                      seed_explore=0.0)  # the random share beside seeds is tests/tuners/test_seed_explore.py's
    assert 1 <= len(tuner.seeds) <= plan // 2 and not tuner.cost_model.warm
    meas = ReplayMeasurer(matmul_task)
    tuner.tune(2 * plan, meas)
    first = [c for batch in meas.calls for c in batch][:len(tuner.seeds)]
    assert first == tuner.seeds
    assert tuner.rounds >= 1
    cold = get_tuner("xgb", matmul_task, plan_size=plan, seed=0)
    cold.tune(2 * plan, ReplayMeasurer(matmul_task))
    assert tuner.random_picks == cold.random_picks - len(tuner.seeds)  # the seeds replaced warm-up randoms
    with pytest.raises(TunerError, match="knowledge_use='both'"):
        get_tuner("xgb", matmul_task, knowledge=records, knowledge_use="both")


def test_cli_knowledge_use_needs_a_knowledge_base_to_read(tmp_path):
    import os
    import subprocess

    cmd = [sys.executable, "-m", "release.cli", "tune", "--workload", "tiny.matmul.1", "--tuner", "xgb",
           "--knowledge-use", "seeds", "--n-trial", "4"]
    out = subprocess.run(cmd + ["--no-knowledge"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert "--knowledge-use seeds" in out.stderr and "--no-knowledge reads none" in out.stderr
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=dict(os.environ, RELEASE_KNOWLEDGE="off"))
    assert out.returncode == 2, out.stderr
    assert "--knowledge-use seeds was given but knowledge is disabled (RELEASE_KNOWLEDGE=off)" in out.stderr
    assert not list(tmp_path.glob("runs/*.jsonl"))  # nothing ran


def test_ms_evolutionary_takes_the_same_seeds_through_its_database(matmul_task, wide_matmul):
    """MetaSchedule given the knowledge (the fair comparison): the seeds the model-based tuners
    get are measured first and reach MetaSchedule's database (this workload's records, which its
    evolutionary search draws its initial population from) and cost model before the first generation."""
    from release.knowledge import knowledge_seeds
    from release.tuners.ms_evolutionary import MSEvolutionaryTuner

    records = _measured(wide_matmul, 24)
    tuner = MSEvolutionaryTuner(matmul_task, plan_size=8, population_size=48, seed=0, knowledge=records)
    assert tuner.seeds == knowledge_seeds(matmul_task, records, 4) and len(tuner.seeds) >= 1
    assert tuner.knowledge_used == (24, 1)
    meas = ReplayMeasurer(matmul_task)
    offered, in_db_at_start = [], []  # each generation's configs; the database when the first was drawn
    new_generation = tuner._new_generation

    def observed_generation():
        new_generation()
        in_db_at_start.append(len(tuner.database.get_all_tuning_records()))
        offered.append([c for _, c in tuner._gen])

    tuner._new_generation = observed_generation
    tuner.tune(len(tuner.seeds) + 8, meas)
    measured = [c for batch in meas.calls for c in batch]
    first = measured[:len(tuner.seeds)]
    assert first == tuner.seeds
    # the first generation was drawn with the seeds (and only them) in the database, and every config
    # measured after the seeds is a generation's candidate, the first generation's first, in its order.
    # How many generations 8 new configs take is not asserted: it depends on how many candidates
    # repeat a measured config, which MetaSchedule's search does not fix
    assert tuner.generations == len(offered) >= 1 and in_db_at_start[0] == len(tuner.seeds)
    after = measured[len(tuner.seeds):]
    assert len(after) == 8 and len(set(after)) == 8 and not set(after) & set(tuner.seeds)
    own = [c for c in offered[0] if c is not None and c not in tuner.seeds]
    own = list(dict.fromkeys(own))
    assert after[:len(own)] == own[:8]
    assert set(after) <= {c for gen in offered for c in gen}
    space = matmul_task.config_space
    in_db = {space.from_trace(r.trace) for r in tuner.database.get_all_tuning_records()}
    assert set(tuner.seeds) <= in_db
    assert tuner.cost_model.data_size >= len(tuner.seeds)
    cold = MSEvolutionaryTuner(matmul_task, plan_size=8, population_size=48, seed=0)
    assert cold.seeds == [] and cold.knowledge_used == (0, 0)
