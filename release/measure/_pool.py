"""Worker-pool helpers shared by the builder and the runners.

Both use TVM's ``PopenPoolExecutor`` (MetaSchedule's ``LocalRunner`` keeps one in ``.pool``).
"""

from __future__ import annotations

#: seconds allowed for worker processes to start (import TVM and PyTorch) before the per-job
#: build and run timeouts apply
STARTUP_TIMEOUT = 180.0


def set_job_timeout(pool, seconds: float) -> None:
    """Set the per-job timeout of a started ``tvm.support.popen_pool.PopenPoolExecutor``.

    Why: a pool's workers import TVM (and PyTorch) when they start, 5-20 s here, so a pool is
    created with a generous timeout (:data:`STARTUP_TIMEOUT`) and its workers are started; then
    the per-build or per-run timeout is put in place for every later job. TVM has no public API
    for that: ``PopenPoolExecutor`` reads its private ``_timeout`` attribute for every job it
    submits (TVM 0.25-0.27, ``python/tvm/support/popen_pool.py``). This function is the one
    place that writes it.

    Parameters
    ----------
    pool : tvm.support.popen_pool.PopenPoolExecutor
    seconds : float
        Per-job limit; a job past it is reported as a timeout and its worker replaced.
    """
    pool._timeout = float(seconds)


def without_sigint(fn):
    """Run ``fn()`` in a helper thread that blocks SIGINT; return its result or raise its error.

    Worker pools started inside ``fn`` (their threads, and the worker processes those threads start,
    now or later when one is replaced) inherit the blocked signal. A Ctrl-C, which the terminal sends
    to the whole process group, then reaches only the main process, whose main thread stays
    interruptible while it waits here and stops with one line (``release: interrupted``), never a
    worker halfway through ``import tvm`` (whose tracebacks it printed before).
    Workers exit by themselves when the main process is gone (their pipe closes).

    Parameters
    ----------
    fn : callable
        No arguments; typically creates a ``PopenPoolExecutor`` and starts its workers.

    Returns
    -------
    object
        What ``fn`` returns. Without ``signal.pthread_sigmask`` (Windows) ``fn`` runs here.
    """
    import signal
    import threading

    if not hasattr(signal, "pthread_sigmask"):
        return fn()
    box: dict = {}

    def target():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            box["value"] = fn()
        except BaseException as err:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = err

    t = threading.Thread(target=target, name="release-start-workers", daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
