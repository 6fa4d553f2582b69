"""The thread count kernels are timed and run with: the target's ``num-cores``, in every process.

TVM's runtime thread pool takes ``hardware_concurrency() / 2`` threads on x86 when neither
``TVM_NUM_THREADS`` nor ``OMP_NUM_THREADS`` is set (``src/runtime/threading_backend.cc``,
``MaxConcurrency``: "ignore hyper-threading"), so on a 2-core machine without SMT every kernel
runs on ONE thread while the target says ``num-cores`` 2 and PyTorch uses 2
(shared/reference/kernel-quality.md: the same conv2d kernel at 130 GFLOPS on 1 thread, 250 on 2).
The pool reads that variable once, when it is first used, and caps every later
``runtime.config_threadpool`` call at it. So:

* :func:`thread_count` is the count a target asks for (``num-cores``; the usable cores for a
  target without it).
* :func:`use_threads` sets this process's TVM pool (and, optionally, PyTorch's intra-op pool) to
  ``n`` threads and returns the count TVM reports afterwards. Call it before kernels run: the
  runner's worker processes call it in their initializer, ``release tune``'s final check,
  the whole-model VM and every PyTorch reference call it too.
* Process state is touched only by these explicit calls (no import-time side effects).
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger(__name__)

#: environment variable TVM's runtime reads for its thread-pool size
ENV = "TVM_NUM_THREADS"


def thread_count(target) -> int:
    """Threads a kernel of ``target`` should run with.

    Parameters
    ----------
    target : tvm.target.Target, str or dict
        Anything :func:`release.target.resolve_target` accepts.

    Returns
    -------
    int
        The target's ``num-cores`` attribute (LLVM targets), else the usable cores of this
        machine (:func:`release.target.host_cores`; for a GPU target this is the host's
        thread count, which only its host-side code uses). At least 1.
    """
    from .target import host_cores, resolve_target

    target = resolve_target(target)
    n = target.attrs.get("num-cores") if target.kind.name == "llvm" else None
    try:
        n = int(n) if n is not None else 0
    except (TypeError, ValueError):
        n = 0
    return max(1, n or host_cores())


def runtime_threads() -> int:
    """Threads TVM's runtime pool of this process uses (``tvm.runtime.num_threads()``)."""
    import tvm

    return int(tvm.runtime.num_threads())


def use_threads(n: int, torch_too: bool = False) -> int:
    """Make this process run TVM kernels (and optionally PyTorch ops) on ``n`` threads.

    Sets ``TVM_NUM_THREADS`` (the pool's cap, read once when TVM's pool first starts), then asks
    the running pool for ``n`` workers (``runtime.config_threadpool(0, n)``) when it has another
    count. Child processes started afterwards (build and run workers) inherit the variable.

    Parameters
    ----------
    n : int
        Threads, at least 1.
    torch_too : bool
        Also ``torch.set_num_threads(n)`` (for a PyTorch reference timed beside TVM's kernels).
        Default False.

    Returns
    -------
    int
        The thread count TVM reports afterwards. It is less than ``n`` only when TVM's pool was
        started earlier in this process with a lower cap (a kernel ran before this call); a
        warning then names the fix (set ``TVM_NUM_THREADS`` before the first kernel runs).

    Raises
    ------
    ValueError
        ``n`` < 1.
    """
    import tvm

    n = int(n)
    if n < 1:
        raise ValueError(f"thread count {n} must be at least 1")
    os.environ[ENV] = str(n)
    got = runtime_threads()
    if got != n:
        tvm.get_global_func("runtime.config_threadpool")(0, n)
        got = runtime_threads()
    if got != n:
        logger.warning("TVM's thread pool runs %d threads, not %d: it was started before the thread count was set; "
                       "set %s=%d in the environment before running", got, n, ENV, n)
    if torch_too:
        import torch

        if torch.get_num_threads() != n:
            torch.set_num_threads(n)
    return got


#: environment variable naming the scheduling priority of the processes that time kernels
PRIORITY_ENV = "RELEASE_TIMING_PRIORITY"


def timing_priority(value: str | None = None) -> str:
    """Raise this process's CPU scheduling priority for timing kernels, when asked to.

    On a machine shared with other work, TVM's thread pool times a multi-threaded kernel badly
    even when the other work runs at ``nice 19``: a pool thread that waits at a barrier yields its
    core, and the other process keeps it until the next scheduler tick, so every parallel region
    can cost milliseconds (measured here, conv2d kernels of 250-330 GFLOPS timed at 65-80 with
    four nice-19 test runs beside them; PyTorch's OpenMP pool was unaffected). With
    ``RELEASE_TIMING_PRIORITY=realtime`` the run workers (and the benchmark's re-timing) run
    under ``SCHED_RR`` priority 1, which ordinary processes cannot take the core from; the
    kernel's threads inherit it. Linux only, and it needs root or ``CAP_SYS_NICE``; the kernel's
    real-time throttling (``sched_rt_runtime_us``, 95% by default) still leaves the rest of the
    machine a share. Meant for benchmarks on shared machines; off by default.

    Parameters
    ----------
    value : str or None
        ``"realtime"``; ``"normal"`` (a process raised earlier goes back to the normal policy);
        ``""`` (no change); None reads ``RELEASE_TIMING_PRIORITY``.

    Returns
    -------
    str
        The priority in force: ``"realtime"`` or ``"normal"`` (also when raising it failed: a
        warning then says why).

    Raises
    ------
    ValueError
        Another value.
    """
    value = (os.environ.get(PRIORITY_ENV, "") if value is None else value).strip().lower()
    if value in ("", "normal"):
        if value == "normal" and hasattr(os, "sched_getscheduler") and os.sched_getscheduler(0) != os.SCHED_OTHER:
            _all_threads(os.SCHED_OTHER, 0)  # back from real-time
        return "normal"
    if value != "realtime":
        raise ValueError(f"{PRIORITY_ENV}={value!r} is not a timing priority: use 'realtime' or 'normal'")
    try:
        _all_threads(os.SCHED_RR, 1)
    except (AttributeError, OSError) as err:
        logger.warning("could not time kernels at real-time priority (%s): timing at normal priority", err)
        return "normal"
    return "realtime"


def _all_threads(policy: int, priority: int) -> None:
    """Set the scheduling policy of every thread of this process (Linux: ``/proc/self/task``), not
    only the caller's: a thread pool started earlier (TVM's, PyTorch's) must not stay on the normal
    policy while the calling thread spins at real-time priority waiting for it (it starved: a
    12 ms ResNet-18 timed at 16.5 s). Threads started later inherit the caller's policy."""
    task = "/proc/self/task"
    tids = [int(t) for t in os.listdir(task)] if os.path.isdir(task) else [0]
    os.sched_setscheduler(0, policy, os.sched_param(priority))  # the caller first: a refusal raises here
    for tid in tids:
        try:
            os.sched_setscheduler(tid, policy, os.sched_param(priority))
        except ProcessLookupError:  # the thread ended meanwhile
            pass


#: environment variable that sets :func:`search_threads` (every tuner's search and cost model)
SEARCH_ENV = "RELEASE_SEARCH_THREADS"


def search_threads() -> int:
    """Threads of every tuner's search and cost model: one setting for all tuners alike.

    Our XGBoost cost model (``nthread``), MetaSchedule's evolutionary search (``TuneContext``
    ``num_threads`` and its ``XGBModel``'s ``num_tuning_cores``) and the PPO agent's PyTorch work
    (``torch.set_num_threads`` around its search, restored after) all take this count, so no tuner
    gets more cores for its search than another. TVM's and AutoTVM's defaults are all cores;
    the default here is 1: kernels are timed on the target's cores while the search runs, and on
    a loaded machine OpenMP threads spin on each other (a 30-round XGBoost fit took 0.02 s on 1
    thread, several seconds on 2, with 4 processes on 2 cores). Set ``RELEASE_SEARCH_THREADS``
    to change it for every tuner at once; the benchmark tables state the count.

    Returns
    -------
    int
        ``RELEASE_SEARCH_THREADS`` if set to a positive integer, else 1.

    Raises
    ------
    release.errors.TunerError
        ``RELEASE_SEARCH_THREADS`` set to anything but a positive integer.
    """
    raw = os.environ.get(SEARCH_ENV, "").strip()
    if not raw:
        return 1
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        from .errors import TunerError

        raise TunerError(f"{SEARCH_ENV}={raw!r} must be a positive integer (threads of every tuner's search and "
                         "cost model); unset it for 1")
    return n


class torch_search_threads:
    """Context manager: PyTorch's intra-op pool on :func:`search_threads` threads, restored on exit."""

    def __enter__(self):
        import torch

        self._before = torch.get_num_threads()
        torch.set_num_threads(search_threads())
        return self

    def __exit__(self, *exc):
        import torch

        torch.set_num_threads(self._before)
        return False
