"""Reference timings: same threads, fastest repeat, a second method, and a flag when they disagree."""

from __future__ import annotations


def test_reference_timing_reports_threads_and_agrees_on_a_steady_op():
    import torch

    from release.reference import time_torch

    x = torch.randn(64, 64)
    ref = time_torch(lambda: x @ x, threads=1, number=5, repeat=3)
    assert ref.threads == 1
    assert 0 < ref.seconds <= ref.median
    assert ref.second > 0
    assert "on 1 threads" in ref.describe()


def test_a_disturbed_reference_is_flagged_not_reported_as_fact(monkeypatch):
    """A callable whose time swings (as a busy machine makes PyTorch's) is marked unreliable, with why."""
    import types

    from release import reference
    from release.reference import time_torch

    # the swing is on a clock of the test's own (the repeats' clock), so how much it swings does not
    # depend on how the machine schedules real sleeps: every other call 200x slower
    clock, calls = [0.0], [0]
    monkeypatch.setattr(reference, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))

    def jumpy():
        calls[0] += 1
        clock[0] += 0.02 if calls[0] % 2 else 0.0001

    ref = time_torch(jumpy, number=1, repeat=6, warmup=1)
    assert calls[0] > 7  # the warm-up and six repeats, then the second method's calls
    assert ref.median / ref.seconds > 50  # the repeats saw the swing: 0.0001 s, 0.02 s, ...
    assert not ref.reliable
    assert "UNRELIABLE" in ref.describe() and ref.note
