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


#: the signals a terminal (Ctrl-C: SIGINT to the process group) and ``docker stop`` (SIGTERM) send
#: to stop a run; worker processes block both, so only the main process decides what stops
INTERRUPT_SIGNALS = ("SIGINT", "SIGTERM")


def without_interrupts(fn):
    """Run ``fn()`` in a helper thread that blocks SIGINT and SIGTERM; return its result or raise its error.

    Worker pools started inside ``fn`` (their threads, and the worker processes those threads start,
    now or later when one is replaced) inherit the blocked signals. A Ctrl-C, which the terminal sends
    to the whole process group, or a SIGTERM sent to the group, then reaches only the main process,
    whose main thread stays interruptible while it waits here and stops the workers itself
    (:func:`stop_workers`) with one line (``release: interrupted``): never a worker halfway through
    ``import tvm`` (whose tracebacks it printed before), and never a worker that dies under a
    measurement, which would be logged as a failed run (``run_error``) before the main process sees
    the signal. Workers of a main process that is gone exit by themselves (their pipe closes).

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
        signal.pthread_sigmask(signal.SIG_BLOCK, {getattr(signal, s) for s in INTERRUPT_SIGNALS})
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



def keep_interrupts() -> None:
    """Make a ``KeyboardInterrupt`` raised inside a Python callback that TVM's FFI calls come back out
    of the FFI as ``KeyboardInterrupt``, not ``RuntimeError('')``.

    Why: MetaSchedule's runners are Python objects called through TVM's FFI (``Runner.run``,
    ``RunnerFuture.result``). A Ctrl-C while such a call waits for its worker raises
    ``KeyboardInterrupt`` inside the Python callback; tvm-ffi 0.1 converts every exception type it has
    not registered to ``RuntimeError`` with an empty message, so the interrupt became a failed
    measurement (``run_error 'RuntimeError'``, never measured again) and the run went on as if no
    Ctrl-C had come. Registering the type (``tvm_ffi.register_error``, tvm-ffi's public API for
    error kinds) keeps it. Idempotent; called where a runner is made.
    """
    import tvm_ffi

    tvm_ffi.register_error("KeyboardInterrupt", KeyboardInterrupt)


def worker_processes(pid: int | None = None) -> list:
    """The TVM pool workers (``python -m tvm.exec.popen_worker``) among the descendants of process
    ``pid`` (default: this process), as ``psutil.Process`` objects; ``[]`` when it is gone."""
    import os

    import psutil

    try:
        children = psutil.Process(pid or os.getpid()).children(recursive=True)
    except psutil.Error:
        return []
    out = []
    for child in children:
        try:
            if "tvm.exec.popen_worker" in child.cmdline():
                out.append(child)
        except psutil.Error:
            pass
    return out


def stop_workers(wait: float = 1.0) -> int:
    """End this process's TVM build and run workers (:func:`worker_processes`) by pid (SIGKILL, as
    ``PopenWorker.kill`` does), and wait up to ``wait`` seconds for them to be gone; returns how many
    were ended. ``wait=0``: end them and return at once.

    After an interrupt: the workers block SIGINT and SIGTERM (:func:`without_interrupts`), so they
    print no traceback and never die under a measurement on their own; ending them here lets the pool
    threads, which Python joins at exit, return at once instead of waiting for a worker's import,
    build or run to finish. All are signalled before any is waited for (a worker of a few hundred MB
    takes a moment to exit on a busy machine). While waiting, a worker that a pool thread started
    after the first sweep is ended too.
    """
    import time

    import psutil

    ended, deadline = 0, time.monotonic() + max(0.0, wait)
    while True:
        procs = worker_processes()
        for p in procs:
            try:
                p.kill()
                ended += 1
            except psutil.Error:
                pass
        left = deadline - time.monotonic()
        if not procs or left <= 0:
            return ended
        psutil.wait_procs(procs, timeout=min(left, 0.25))
