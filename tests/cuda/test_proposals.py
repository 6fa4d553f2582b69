"""Configs valid by construction on CUDA, and proposers that never replay refused configs without bound.

A GPU knob space reads the target's limits off its design-space traces (threads per block, shared memory
per block: ``release.space.gpu``) and checks them on the knobs; every proposer keeps them, so MetaSchedule's
verifier (replay + GPU postprocessors, ``VerifyGPUCode``) accepts what they propose. Measured here through
the CUDA script's :class:`device_bench.DryMeasurer` (replays and checks every config as the real measurer
does, builds and runs nothing): counts, fixed seeds, no timing.

Everything on a CUDA target pays the CUDA tensor intrinsics' import (45-115 s on 2 cores), so those tests
are ``slow``; the default suite keeps the quick version: the same harness on this CPU, where a knob space
has no limits and its sampling is unchanged.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "cuda"))
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cuda"

import device_bench  # noqa: E402

from release.tuners import Tuner  # noqa: E402

TARGET = "cuda"  # sm_90, H100/H200 limits (release.target)
TUNERS = ["random", "xgb", "sa-as", "rl", "release", "release+"]


# ------------------------------------------------------------------------------ default suite
def test_cpu_spaces_have_no_limits_and_sample_as_before(matmul_task):
    sp = matmul_task.config_space
    assert sp.gpu is None and not sp.constrained
    rng = np.random.default_rng(0)
    want = (np.random.default_rng(0).random((50, sp.n_knobs)) * sp.dims).astype(np.int64)
    np.testing.assert_array_equal(sp.sample(50, rng), sp.canonicalize(want))
    assert sp.feasible(want).all()
    c = tuple(int(x) for x in want[0])
    assert sp.nearest_feasible(c) == sp.canonical(c)


def test_dry_measurer_counts_on_the_cpu(matmul_task):
    r = device_bench.proposal_figures(matmul_task, "random", seed=0, trials=6, batch=3)
    assert r["measured"] == 6 and r["proposed"] >= 6
    assert r["accepted"] + r["refused"] == r["proposed"]  # no limits here: the verifier alone refuses
    assert r["prechecked"] == 0  # no limits on a CPU space: nothing refused before a replay
    assert r["stop_reason"] == "n_trial" and r["error"] == ""


# ------------------------------------------------------------------------------ CUDA (slow)
@pytest.fixture(scope="module")
def cuda_matmul():
    from release.task import create_task

    task = create_task("tiny.matmul.1", TARGET)
    task.config_space  # noqa: B018
    return task


def _uniform(sp, n, seed):
    rng = np.random.default_rng(seed)
    return sp.canonicalize((rng.random((n, sp.n_knobs)) * sp.dims).astype(np.int64))


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["resnet18.conv2d.6", "bert-base.dense.2", "resnet18.conv2d.7"])
def test_limits_read_off_the_trace_agree_with_the_verifier(workload):
    from release.task import create_task

    sp = create_task(workload, TARGET).config_space
    assert sp.constrained and not sp.gpu.skipped, sp.gpu.skipped
    for s, rules in sp.gpu.rules.items():  # MultiLevelTiling's spaces: threads in [32, 1024], shared <= 48 KiB
        assert {(r.name, r.low, r.high) for r in rules} == {("threads", 32, 1024), ("shared memory", 0, 49152)}, s
    draws = _uniform(sp, 120, seed=0)
    inside = sp.feasible(draws)
    assert 0 < inside.sum() < len(draws) // 2  # most uniform configs break a limit
    for c, ok in zip(draws, inside):
        if not ok:  # a config outside the limits is one the verifier refuses too
            assert not device_bench.verifier_accepts(sp, c), sp.describe(c)
            assert sp.gpu.reason(c).startswith("GPU limit: ")
    sampled = sp.sample(40, np.random.default_rng(1))
    assert sp.feasible(sampled).all()
    accepted = sum(device_bench.verifier_accepts(sp, c) for c in sampled)
    assert accepted >= 36, f"{accepted} of 40 configs within the limits accepted"  # >= 90%


@pytest.mark.slow
@pytest.mark.parametrize("tuner", TUNERS)
def test_each_tuners_first_rounds_are_accepted_by_the_verifier(cuda_matmul, tuner):
    r = device_bench.proposal_figures(cuda_matmul, tuner, seed=0, plan_size=16, trials=32, batch=16)
    assert r["error"] == "" and r["measured"] == 32, r
    assert r["accepted"] >= 0.9 * r["proposed"], r  # >= 90% of what it proposed, by the verifier alone
    assert r["refused"] <= 0.1 * r["proposed"] + 1, r


@pytest.mark.slow
def test_transfer_seeds_are_carried_into_the_limits(tmp_path):
    import gzip

    from release.measure.records import load_records
    from release.task import create_task

    # the first GPU run's records of resnet18.conv2d.6 (xgb; tests/fixtures/cuda/make_fixtures.py)
    (tmp_path / "conv6.jsonl").write_bytes(gzip.decompress((FIXTURES / "h200.resnet18.conv2d.6.xgb.s0.jsonl.gz")
                                                          .read_bytes()))
    records = load_records(str(tmp_path / "conv6.jsonl"))
    task = create_task("resnet18.conv2d.7", TARGET)  # a layer that run never tuned (stride 2, 256 filters)
    got = device_bench.seed_figures(task, records, n=8)
    assert got["seeds"] == 8 and got["accepted"] == 8, got


class OutsideTuner(Tuner):
    """Proposes only configs that break the limits (what a careless search would hand in)."""

    name = "outside"

    def next_batch(self, n):
        out = []
        while len(out) < n:
            for c in _uniform(self.space, 64, int(self.rng.integers(1 << 30))):
                c = tuple(int(x) for x in c)
                if not self.space.feasible(c)[0] and c not in self.visited and c not in out:
                    out.append(c)
        return out[:n]


@pytest.mark.slow
def test_refused_configs_are_bounded_and_never_replayed(cuda_matmul):
    from release.errors import TunerError

    sp = cuda_matmul.config_space
    tuner = OutsideTuner(cuda_matmul, seed=0)
    m = device_bench.DryMeasurer(cuda_matmul, batch_size=16)
    before = sp.prechecked
    with pytest.raises(TunerError, match="no valid config in 40 replays in a row"):
        tuner.session.run(m, 8, max_rejected=40)
    assert m.asked == m.refused and 40 <= m.refused <= 40 + 16  # stopped at the bound (within one batch)
    assert sp.prechecked - before == m.refused  # every one refused on the knobs, none replayed
    assert tuner.session.stop_reason == "rejections"


@pytest.mark.slow
@pytest.mark.parametrize("tuner", ["random", "xgb", "release+"])
def test_a_space_with_no_config_within_its_limits_stops_with_a_count(tuner):
    """A GPU whose blocks hold fewer threads than a warp: MultiLevelTiling asks for 32..16 threads, so no
    config is within the limits; every proposer stops without replaying anything."""
    from release.task import create_task

    task = create_task("tiny.matmul.1", {"kind": "cuda", "arch": "sm_90", "max_threads_per_block": 16})
    sp = task.config_space
    assert sp.constrained and not sp.feasible(_uniform(sp, 2000, seed=0)).any()
    r = device_bench.proposal_figures(task, tuner, seed=0, plan_size=8, trials=8, batch=8)
    assert r["measured"] == 0 and r["proposed"] == 0, r  # nothing handed in, so nothing replayed
    assert r["stop_reason"] == "no_new_config", r


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["resnet18.conv2d.6", "bert-base.dense.2"])
def test_every_config_the_h200_ran_is_within_the_limits(workload, tmp_path):
    """The limits refuse no config a GPU ran: every successful record of the 2026-12-04 H200 run (xgb,
    release+ and MetaSchedule's own evolutionary search) is within them."""
    import gzip

    from release.measure.records import load_records
    from release.task import create_task

    sp = create_task(workload, TARGET).config_space
    path = tmp_path / f"{workload}.jsonl"  # the run's successful records (tests/fixtures/cuda/make_fixtures.py)
    path.write_bytes(gzip.decompress((FIXTURES / f"h200-ok.{workload}.jsonl.gz").read_bytes()))
    n = 0
    for r in load_records(str(path)):
        assert r.ok, r
        c = sp.config_of_record(r.config, r.trace)
        assert sp.feasible(c)[0], sp.gpu.reason(c)
        n += 1
    assert n == {"resnet18.conv2d.6": 192, "bert-base.dense.2": 209}[workload]  # 192 records of resnet18.conv2d.6, 209 of bert-base.dense.2
