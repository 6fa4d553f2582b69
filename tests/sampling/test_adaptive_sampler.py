"""Adaptive sampling (Chameleon k-means + sample synthesis) on real knob spaces."""

from __future__ import annotations

import numpy as np
import pytest

from release.errors import TunerError
from release.sampling import AdaptiveSampler, AdaptiveSamplingConfig


def _clustered(space, n_clusters: int, per_cluster: int, seed: int) -> list[tuple]:
    """Candidates in ``n_clusters`` tight, well separated groups on the two largest knobs."""
    rng = np.random.default_rng(seed)
    knobs = AdaptiveSampler().cluster_knobs(space.dims)
    grid = int(np.ceil(np.sqrt(n_clusters)))
    spacing = [(int(space.dims[k]) - 4) // grid for k in knobs]
    base = space.sample(1, rng)[0]
    out = []
    for j in range(n_clusters):
        cx = 2 + (j % grid) * spacing[0]
        cy = 2 + (j // grid) * spacing[1]
        for _ in range(per_cluster):
            c = base.copy()
            c[knobs[0]] = cx + rng.integers(-1, 2)
            c[knobs[1]] = cy + rng.integers(-1, 2)
            out.append(space.canonical(c))
    return out


@pytest.mark.parametrize("n_clusters", [8, 16, 24])
def test_recovers_true_cluster_count(matmul_task, n_clusters):
    space = matmul_task.config_space
    cands = _clustered(space, n_clusters, per_cluster=6, seed=n_clusters)
    sampler = AdaptiveSampler(seed=0)
    out = sampler.sample(cands, space, set(), plan_size=64)
    assert sampler.last_k == n_clusters
    assert len(out) == n_clusters  # one config per cluster (all valid in this space)
    # each pick sits inside a distinct true cluster (within 1 of its centre on the clustered knobs)
    knobs = sampler.cluster_knobs(space.dims)
    picked = {(c[knobs[0]], c[knobs[1]]) for c in out}
    assert len(picked) == n_clusters


def test_knee_test_stops_early_on_many_evenly_spread_clusters(matmul_task):
    """A property of the authors' rule, kept: with 40 clusters on a regular grid the loss only
    halves from k=8 to k=16 (below the 2.5x threshold), so k stays 8."""
    space = matmul_task.config_space
    sampler = AdaptiveSampler(seed=0)
    out = sampler.sample(_clustered(space, 40, per_cluster=6, seed=40), space, set(), plan_size=64)
    assert sampler.last_k == 8 and len(out) == 8
    assert sampler.last_losses[8] / sampler.last_losses[16] < 2.5


def test_synthesis_uses_centroid_and_member_mode(matmul_task):
    space = matmul_task.config_space
    cands = _clustered(space, 8, per_cluster=5, seed=3)
    sampler = AdaptiveSampler(seed=0)
    out = sampler.sample(cands, space, set(), plan_size=64)
    other = [p for p in range(space.n_knobs) if p not in set(sampler.cluster_knobs(space.dims))]
    # every candidate shares the non-clustered knobs, so every synthesized config must too
    for c in out:
        assert [c[p] for p in other] == [cands[0][p] for p in other]


def test_never_invalid_visited_duplicate_or_too_many(conv_task):
    space = conv_task.config_space
    rng = np.random.default_rng(1)
    pool = [tuple(int(x) for x in c) for c in space.sample(160, rng)]
    # duplicates in the plan, and half of the plan already visited
    cands = pool[:96] + pool[:32]
    visited = set(space.canonical(c) for c in pool[:48])
    invalid_seen = 0
    for plan_size in (8, 16, 64):
        sampler = AdaptiveSampler(seed=plan_size)
        out = sampler.sample(cands, space, visited, plan_size)
        assert 0 < len(out) <= plan_size
        assert len(set(out)) == len(out)
        assert not set(out) & visited
        assert all(space.is_valid(c)[0] for c in out)
        assert all(c == space.canonical(c) for c in out)
    invalid_seen = sum(not space.is_valid(c)[0] for c in pool[48:96])
    assert invalid_seen > 0  # the test space does contain invalid candidates to avoid


def test_replaces_visited_synthesis_by_cluster_member(matmul_task):
    space = matmul_task.config_space
    cands = _clustered(space, 8, per_cluster=6, seed=5)
    first = AdaptiveSampler(seed=0).sample(cands, space, set(), 8)  # plan_size 8: only k=8 is tried
    # mark the synthesized configs measured: the sampler must now pick other members, still one per cluster
    second = AdaptiveSampler(seed=0).sample(cands, space, set(first), 8)
    assert len(second) == 8 and not set(second) & set(first)
    knobs = AdaptiveSampler().cluster_knobs(space.dims)
    xy = np.array([[c[k] for k in knobs] for c in cands])
    owner = []
    for c in second:  # each pick lies inside the box of one true cluster, a different one each time
        d = np.abs(xy - [c[k] for k in knobs]).max(axis=1)
        assert d.min() <= 1
        owner.append(int(np.argmin(d)) // 6)
    assert len(set(owner)) == 8


def test_small_and_empty_plans(matmul_task):
    space = matmul_task.config_space
    cands = _clustered(space, 2, per_cluster=2, seed=0)
    s = AdaptiveSampler()
    assert sorted(s.sample(cands, space, set(), 64)) == sorted(set(cands))
    assert s.sample(cands, space, set(cands), 64) == []
    assert len(s.sample(cands, space, set(), 3)) == 3


def test_bad_arguments(matmul_task):
    # plan_size is validated where the user gives it (tests/test_input_validation.py), not by sample
    with pytest.raises(TunerError, match="knee_ratio"):
        AdaptiveSampler(AdaptiveSamplingConfig(knee_ratio=1.0))
