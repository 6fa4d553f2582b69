"""Reference timings (PyTorch) taken as carefully as our kernels, and flagged when they look wrong.

A PyTorch figure printed beside a tuned kernel is only worth printing if it was measured on the
same threads, after warm-up, as the fastest of repeats (the least disturbed on a shared machine),
and if a second measurement agrees with it. On a busy 2-core machine PyTorch's intra-op threads
spin and a single protocol can be off by 100x (a 0.026 ms model once printed as 16 ms): such a
figure is reported with ``reliable=False`` and the reason, never as a plain fact.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

#: a reference is flagged when its two methods, or its median and fastest repeat, differ by more
RELIABLE_SPREAD = 1.5


@dataclass
class ReferenceTiming:
    """One reference timing.

    Attributes
    ----------
    seconds : float
        Fastest of ``repeat`` means of ``number`` calls (s): the figure reported.
    median : float
        Median of the same repeats (s).
    second : float
        A second method: the median of ``torch.utils.benchmark.Timer.blocked_autorange`` (s),
        PyTorch's own timer (its own warm-up and block sizes).
    threads : int
        PyTorch intra-op threads during the timing.
    reliable : bool
        False when the median is over ``RELIABLE_SPREAD`` x the fastest repeat, or the two methods
        disagree by more than that: the machine was busy; do not trust the figure.
    note : str
        Why it is unreliable ("" when reliable).
    """

    seconds: float
    median: float
    second: float
    threads: int
    reliable: bool
    note: str = ""

    def describe(self, unit_ms: bool = True) -> str:
        """``"0.031 ms on 2 threads"``, with ``" (UNRELIABLE: ...)"`` appended when flagged."""
        text = f"{self.seconds * 1e3:.3f} ms on {self.threads} threads"
        return text if self.reliable else f"{text} (UNRELIABLE: {self.note})"


def time_torch(fn: Callable[[], object], threads: int | None = None, number: int = 10, repeat: int = 7,
               warmup: int = 3) -> ReferenceTiming:
    """Time a PyTorch callable the way kernels are timed: warm-up, fixed threads, fastest repeat,
    checked against a second method.

    Parameters
    ----------
    fn : callable
        Runs the operator or model once (no arguments); called under ``torch.no_grad()``.
    threads : int, optional
        ``torch.set_num_threads`` for the timing (give the target's ``num-cores``, as TVM's kernels
        run with); default None keeps PyTorch's count.
    number, repeat : int
        ``repeat`` means of ``number`` calls each (defaults 10 and 7).
    warmup : int
        Calls before timing (default 3: oneDNN picks and caches its kernels on the first calls).

    Returns
    -------
    ReferenceTiming
    """
    import torch
    import torch.utils.benchmark as tb

    if threads is not None:
        torch.set_num_threads(int(threads))
    with torch.no_grad():
        for _ in range(max(0, warmup)):
            fn()
        means = []
        for _ in range(max(1, repeat)):
            t0 = time.perf_counter()
            for _ in range(max(1, number)):
                fn()
            means.append((time.perf_counter() - t0) / max(1, number))
        second = float(tb.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
                       .blocked_autorange(min_run_time=0.2).median)
    fastest, median = float(np.min(means)), float(np.median(means))
    notes = []
    if median > RELIABLE_SPREAD * fastest:
        notes.append(f"median of repeats {median / fastest:.1f}x the fastest")
    ratio = max(second, fastest) / max(min(second, fastest), 1e-12)
    if ratio > RELIABLE_SPREAD:
        notes.append(f"torch.utils.benchmark gives {second * 1e3:.3f} ms, {ratio:.1f}x apart")
    return ReferenceTiming(fastest, median, second, torch.get_num_threads(), not notes,
                           "; ".join(notes) + ("; the machine looks busy" if notes else ""))
