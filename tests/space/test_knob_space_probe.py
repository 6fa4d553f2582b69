"""Compute-location probing samples on the trace prefix instead of replaying whole traces.

A conv2d_transpose spent 95% of building its knob space in full replays, one per probed location
(681 replays of ~0.33 s each here). Probing now replays the trace up to the location's instruction
once per probe setting and samples each location on a copy; the legal sets found must not change.
"""

from __future__ import annotations

import pytest

from release.space import KnobSpace
from release.task import create_task


def _knobs(space):
    return [(k.name, k.kind, tuple(k.choices), tuple(k.spaces)) for k in space.knobs]


@pytest.mark.slow  # ~60 s under load: two knob-space builds
@pytest.mark.parametrize("workload", ["tiny.conv2d.1"])
def test_prefix_probing_finds_the_same_locations_with_fewer_replays(workload, monkeypatch):
    task = create_task(workload, "llvm")
    replays = []
    full_replay = KnobSpace._replay
    monkeypatch.setattr(KnobSpace, "_replay", lambda self, *a, **k: replays.append(1) or full_replay(self, *a, **k))
    fast = KnobSpace(task)
    n_fast = len(replays)
    n_loc = sum(i.kind.name == "SampleComputeLocation" for s in fast.spaces for i in s.sample_insts)
    assert n_loc >= 1, "the workload should have a compute-location decision"
    assert n_fast == n_loc  # one full replay per location instruction (its loop bound), none per probe
    replays.clear()
    monkeypatch.setattr(KnobSpace, "probe_on_prefix", False)
    slow = KnobSpace(task)
    assert len(replays) > 5 * n_fast
    assert _knobs(fast) == _knobs(slow)
    assert any(k.kind == "compute_location" and len(k.choices) > 2 for k in fast.knobs)
