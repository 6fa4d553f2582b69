"""Runners: time built artifacts on a device.

Life cycle (called by :class:`release.measure.Measurer`): :meth:`Runner.check_device` once per
task; :meth:`Runner.run` ``(items, target)`` with ``[(artifact_path, args_info), ...]`` -> one
:class:`RunResult` per item, in order; :meth:`Runner.close` stops workers. A runner whose
:attr:`Runner.batched` is True gets a whole batch in one call (its runs spread over devices);
otherwise one item per call, so each result is logged the moment it completes.

Siblings: :class:`LocalRunner` (this machine), :class:`RPCRunner` (devices behind a TVM RPC
tracker), :class:`RetryingRPCRunner` (re-runs what a dying device lost), and
:class:`MetaScheduleRunner` (any MetaSchedule ``Runner``, including ``PyRunner`` subclasses).
"""

from __future__ import annotations

import logging
import time
from typing import Sequence

from ..errors import MeasureError, TunerError, error_line
from ..target import device_type
from ._pool import STARTUP_TIMEOUT, keep_interrupts, set_job_timeout, without_interrupts
from .result import ErrorKind, RunResult

logger = logging.getLogger(__name__)


class Runner:
    """Base class of runners."""

    #: True: :meth:`run` takes a whole batch at once; False: one item per call
    batched: bool = False
    #: concurrent runs (devices); the batch size is at least this
    n_parallel: int = 1
    #: threads the kernels were timed with (0: not known)
    threads: int = 0
    #: AdaTune-style early termination: a candidate whose first repeat costs more than this many
    #: times the task's best mean so far is not repeated further (0: off). A runner that supports it
    #: takes ``run(items, target, cutoff=SECONDS)``; the :class:`release.measure.Measurer` computes
    #: the cutoff.
    early_termination: float = 0.0
    #: costs taken per candidate (0: not known); fewer on a success means its timing was cut short
    repeat: int = 0

    def describe(self) -> str:
        """A short name for logs (``local``, ``rpc:KEY@HOST:PORT``, ...)."""
        return type(self).__name__

    def check_device(self, target) -> None:
        """Raise :class:`MeasureError` if ``target``'s device cannot be reached. Default: nothing."""

    def run(self, items: Sequence[tuple[str, list]], target) -> list[RunResult]:
        """Time each ``(artifact_path, args_info)`` of ``items`` on ``target``'s device."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop worker processes. Default: nothing."""


def _evaluator(number, repeat, min_repeat_ms, enable_cpu_cache_flush):
    from tvm.s_tir.meta_schedule.runner import EvaluatorConfig

    return EvaluatorConfig(number=number, repeat=repeat, min_repeat_ms=min_repeat_ms,
                           enable_cpu_cache_flush=enable_cpu_cache_flush)


def check_early_termination(early_termination) -> float:
    """Validate an early-termination ratio (0 = off, else > 1); return it as a float.

    Raises
    ------
    TunerError
        Not a number, negative, or in (0, 1] (a ratio at most 1 would cut the best config itself).
    """
    try:
        ratio = float(early_termination)
    except (TypeError, ValueError):
        raise TunerError(f"early_termination={early_termination!r} must be a number: 0 (off) or a ratio "
                         "above 1, e.g. 2") from None
    if ratio != 0.0 and not ratio > 1.0:
        raise TunerError(f"early_termination={early_termination!r} must be 0 (off) or a ratio above 1 (e.g. 2: "
                         "cut a candidate whose first repeat is over 2x the best mean so far)")
    return ratio


def _check_run_args(number, repeat, min_repeat_ms, timeout):
    if number < 1 or repeat < 1:
        raise TunerError(f"runner number={number} and repeat={repeat} must be at least 1")
    if min_repeat_ms < 0:
        raise TunerError(f"runner min_repeat_ms={min_repeat_ms} must be >= 0")
    if timeout <= 0:
        raise TunerError(f"runner timeout={timeout} must be positive (seconds)")


class LocalRunner(Runner):
    """Runs built kernels on this machine through MetaSchedule's ``LocalRunner``.

    Parameters (AutoTVM's defaults)
    ----------
    number : int
        Runs averaged into one cost (default 4).
    repeat : int
        Costs per config (default 3).
    min_repeat_ms : int
        ``number`` is raised until one cost takes this long (default 0).
    timeout : float
        Seconds per run (default 10).
    cooldown_interval : float
        Seconds to sleep between configs (default 0.1).
    enable_cpu_cache_flush : bool
        Flush the CPU cache before each run (default False).
    early_termination : float
        AdaTune-style early termination (Li et al., "AdaTune", NeurIPS 2020: stop timing a
        candidate once it is clearly worse than the best): ratio over the task's best mean cost so
        far above which a candidate's first repeat ends its timing, so its record keeps that one
        cost and says ``cut_short`` (default 0: off, every config gets ``repeat`` costs). The
        :class:`release.measure.Measurer` passes the cutoff (ratio x best mean, seconds) with each
        run; see :func:`release.measure._worker.run_evaluator_cut`.

    Raises
    ------
    TunerError
        ``number`` or ``repeat`` below 1, negative ``min_repeat_ms``, ``timeout`` not positive, or
        ``early_termination`` neither 0 nor above 1.
    """

    def __init__(self, number: int = 4, repeat: int = 3, min_repeat_ms: int = 0, timeout: float = 10.0,
                 cooldown_interval: float = 0.1, enable_cpu_cache_flush: bool = False,
                 early_termination: float = 0.0):
        _check_run_args(number, repeat, min_repeat_ms, timeout)
        self.early_termination = check_early_termination(early_termination)
        self.number, self.repeat, self.min_repeat_ms = int(number), int(repeat), int(min_repeat_ms)
        self.timeout, self.cooldown_interval = float(timeout), float(cooldown_interval)
        self.enable_cpu_cache_flush = bool(enable_cpu_cache_flush)
        self._runner = None
        #: threads the running worker times kernels with (the target's ``num-cores``; 0 = not started)
        self.threads = 0
        #: run workers started so far (1 for a whole tuning run: the worker stays warm across
        #: batches and tasks of one thread count) and the wall seconds spent starting them
        self.starts, self.startup_s = 0, 0.0

    def describe(self) -> str:
        return "local"

    def _ms_runner(self, threads: int = 0):
        """MetaSchedule's runner whose worker runs kernels on ``threads`` threads (0: keep the
        running worker's count, or this machine's usable cores for a new one); a worker of another
        count is replaced."""
        import functools

        from ..target import host_cores
        from . import _worker

        keep_interrupts()  # a Ctrl-C while MetaSchedule's runner waits stays a KeyboardInterrupt
        threads = int(threads) or self.threads or host_cores()
        if self._runner is not None and self.threads != threads:
            self.close()
        if self._runner is None:
            from tvm.s_tir.meta_schedule.runner import LocalRunner as MSLocalRunner

            # MetaSchedule's runner starts its worker in a sanity check bounded by timeout_sec: give
            # start-up a generous limit, then enforce the per-run timeout.
            t0 = time.perf_counter()
            self._runner = without_interrupts(lambda: MSLocalRunner(
                timeout_sec=max(self.timeout, STARTUP_TIMEOUT),
                evaluator_config=_evaluator(self.number, self.repeat, self.min_repeat_ms, self.enable_cpu_cache_flush),
                cooldown_sec=self.cooldown_interval,
                initializer=functools.partial(_worker.init_runner, threads),
            ))
            self.starts += 1
            self.startup_s += time.perf_counter() - t0
            set_job_timeout(self._runner.pool, self.timeout)
            self._runner.timeout_sec = self.timeout  # its timeout message names this limit, not start-up's
            self.threads = threads
        return self._runner

    def worker_threads(self, target) -> int:
        """Threads TVM's runtime reports inside the run worker for ``target`` (starts the worker)."""
        from ..threads import thread_count
        from . import _worker

        runner = self._ms_runner(thread_count(target))
        return int(runner.pool.submit(_worker.runtime_threads).result())

    def check_device(self, target) -> None:
        """Raise :class:`MeasureError` if the target's device is not on this machine."""
        import tvm

        dev = device_type(target)
        if dev != "cpu" and not tvm.device(dev, 0).exist:
            raise MeasureError(
                f"no {dev} device on this machine to run {target.kind.name} kernels: measure through a TVM RPC "
                "tracker (--runner rpc --rpc-key KEY --rpc-host HOST --rpc-port PORT)"
            )

    def run(self, items: Sequence[tuple[str, list]], target, cutoff: float | None = None) -> list[RunResult]:
        """Run built artifacts one at a time (so each run time is its own).

        Parameters
        ----------
        items : list of (artifact_path, args_info)
        target : tvm.target.Target
        cutoff : float, optional
            Seconds: a candidate whose first repeat costs more is not repeated further (its result
            has one cost instead of ``repeat``). None (default): every candidate gets ``repeat``.

        Returns
        -------
        list of RunResult
        """
        import functools

        from tvm.s_tir.meta_schedule.runner import RunnerInput

        from ..threads import thread_count
        from . import _worker

        runner = self._ms_runner(thread_count(target))
        # MetaSchedule's LocalRunner reads f_run_evaluator at each run (a callable is sent to the worker)
        runner.f_run_evaluator = (functools.partial(_worker.run_evaluator_cut, float(cutoff))
                                  if cutoff is not None and self.repeat > 1 else None)
        out = []
        dev = device_type(target)
        for path, args in items:
            t0 = time.perf_counter()
            try:
                (fut,) = runner.run([RunnerInput(path, dev, args)])
                res = fut.result()
            except Exception as err:  # noqa: BLE001 - a broken worker is a failed measurement, not a crash
                kind = ErrorKind.RUN_TIMEOUT if isinstance(err, TimeoutError) else ErrorKind.RUN_ERROR
                out.append(RunResult([], time.perf_counter() - t0, kind, error_line(err) or type(err).__name__))
                continue
            out.append(_runner_result(res, time.perf_counter() - t0))
        return out

    def close(self) -> None:
        if self._runner is not None:
            try:
                self._runner.pool.shutdown(wait=False)
            except Exception:  # noqa: BLE001
                pass
            self._runner = None
            self.threads = 0


def _runner_result(res, secs):
    if res.error_msg is not None or res.run_secs is None:
        msg = error_line(res.error_msg or "no result")
        kind = ErrorKind.RUN_TIMEOUT if "timeout" in msg.lower() else ErrorKind.RUN_ERROR
        return RunResult([], secs, kind, msg)
    return RunResult([float(x) for x in res.run_secs], secs)


def check_tracker(host: str, port: int, key: str | None = None, timeout: float = 5.0) -> dict:
    """Check that a TVM RPC tracker answers at ``host:port`` within ``timeout`` seconds.

    Returns
    -------
    dict
        The tracker's summary (``queue_info``: key -> free/pending counts, ``server_info``).

    Raises
    ------
    MeasureError
        Nothing listens there, or ``key`` has no device registered.
    """
    from .tracker import _summary, check_key

    summary = _summary(host, int(port), timeout)  # socket check, then a bounded summary request
    if key is not None:
        # the tracker keeps a key's queue after its last server died: count registered servers
        check_key(host, int(port), key, timeout)
    return summary


class RPCRunner(LocalRunner):
    """Runs built kernels on remote devices through a TVM RPC tracker (MetaSchedule ``RPCRunner``).

    Parameters
    ----------
    key : str
        Device key registered with the tracker.
    host, port : str, int
        Tracker address.
    n_parallel : int
        Concurrent sessions (spread over the key's free devices; default 1).
    session_timeout : float
        Seconds one session may take (upload + run; default 60).
    number, repeat, min_repeat_ms, timeout, cooldown_interval, enable_cpu_cache_flush, early_termination
        As :class:`LocalRunner`; a batch's runs go out at once, so with ``early_termination`` they share
        the cutoff of the best known when the batch started.

    Raises
    ------
    MeasureError
        At construction, if the tracker does not answer within 5 s or has no device for ``key``.
    """

    def __init__(self, key: str, host: str = "127.0.0.1", port: int = 9190, n_parallel: int = 1,
                 session_timeout: float = 60.0, number: int = 4, repeat: int = 3, min_repeat_ms: int = 0,
                 timeout: float = 10.0, cooldown_interval: float = 0.1, enable_cpu_cache_flush: bool = False,
                 priority: int = 1, early_termination: float = 0.0):
        super().__init__(number, repeat, min_repeat_ms, timeout, cooldown_interval, enable_cpu_cache_flush,
                         early_termination)
        if not key:
            raise MeasureError("RPC runner needs a device key (--rpc-key)")
        self.key, self.host, self.port = key, host, int(port)
        self.n_parallel, self.session_timeout, self.priority = int(n_parallel), float(session_timeout), priority
        check_tracker(host, self.port, key)

    batched = True  # every artifact of a batch is submitted at once, spread over the devices

    def describe(self) -> str:
        return f"rpc:{self.key}@{self.host}:{self.port}"

    def check_device(self, target) -> None:  # the device is remote
        return None

    def _ms_runner(self, threads: int = 0):
        """MetaSchedule's RPC runner; its evaluator sets the remote CPU pool to ``threads`` threads
        (``runtime.config_threadpool`` called through the session) before timing."""
        import functools

        from . import _worker

        keep_interrupts()
        threads = int(threads) or self.threads or 1
        if self._runner is not None and self.threads != threads:
            self.close()
        if self._runner is None:
            from tvm.s_tir.meta_schedule.runner import RPCConfig
            from tvm.s_tir.meta_schedule.runner import RPCRunner as MSRPCRunner

            self._runner = MSRPCRunner(
                rpc_config=RPCConfig(tracker_host=self.host, tracker_port=self.port, tracker_key=self.key,
                                     session_priority=self.priority, session_timeout_sec=self.session_timeout),
                evaluator_config=_evaluator(self.number, self.repeat, self.min_repeat_ms, self.enable_cpu_cache_flush),
                cooldown_sec=self.cooldown_interval, max_workers=self.n_parallel,
                f_run_evaluator=functools.partial(_worker.rpc_run_evaluator, threads),
            )
            self.threads = threads
        return self._runner

    def worker_threads(self, target) -> int:
        """Threads of the remote device's runtime pool after the evaluator set them: measured by
        running :meth:`run` is the only way through MetaSchedule's RPC runner, so this returns the
        count the evaluator asks for (the remote caps it at its ``TVM_NUM_THREADS``)."""
        from ..threads import thread_count

        return thread_count(target)

    def run(self, items, target, cutoff: float | None = None):
        """Submit every artifact at once (spread over free devices), then collect; ``cutoff`` as
        :meth:`LocalRunner.run` (one for the whole batch)."""
        import functools

        from tvm.s_tir.meta_schedule.runner import RunnerInput

        from ..threads import thread_count
        from . import _worker

        runner = self._ms_runner(thread_count(target))
        # MetaSchedule's RPCRunner reads f_run_evaluator at each run
        runner.f_run_evaluator = functools.partial(
            _worker.rpc_run_evaluator, self.threads,
            cutoff_s=float(cutoff) if cutoff is not None and self.repeat > 1 else None)
        dev = device_type(target)
        t0 = time.perf_counter()
        futs = runner.run([RunnerInput(path, dev, args) for path, args in items])
        out = []
        for fut in futs:
            res = fut.result()
            out.append(_runner_result(res, 0.0))
        share = (time.perf_counter() - t0) / max(1, len(items))
        return [RunResult(c, share, k, m) for c, _, k, m in out]


#: error messages of a run that lost its device (connection gone), not of a bad kernel. The
#: ``RPCCode::kReturn`` check fails when the server's session died in the middle of a call (seen when
#: the server was killed; a kernel that crashes its session gives it too, and is then re-run once).
LOST_DEVICE = ("sockchannel", "broken pipe", "connection reset", "connection refused", "connection closed",
               "socket closed", "eof", "rpccode::kreturn")


def lost_device(error_msg: str) -> bool:
    """Whether a run error says the device went away (so the config deserves another device)."""
    m = (error_msg or "").lower()
    return any(s in m for s in LOST_DEVICE)


class RetryingRPCRunner(RPCRunner):
    """``RPCRunner`` that re-submits runs whose device died mid-session to the remaining devices.

    After a batch, items whose error is a lost connection (:func:`lost_device`) are run again,
    up to ``retries`` times, while the key still has a device; otherwise their error stands
    (and is logged as ``run_error``). Kernel errors and timeouts are never retried.
    """

    def __init__(self, *args, retries: int = 1, **kwargs):
        super().__init__(*args, **kwargs)
        self.retries = int(retries)
        self.retried = 0  #: runs re-submitted so far

    def run(self, items, target, cutoff: float | None = None):
        from .tracker import check_key

        out = list(super().run(items, target, cutoff=cutoff))
        for _ in range(self.retries):
            redo = [i for i, r in enumerate(out) if r.error_kind == ErrorKind.RUN_ERROR and lost_device(r.error_msg)]
            if not redo:
                break
            try:
                check_key(self.host, self.port, self.key)
            except MeasureError:
                logger.warning("%d run(s) lost their device and no device of key %r is left; recorded as "
                               "errors", len(redo), self.key)
                break
            logger.info("re-running %d config(s) whose device went away", len(redo))
            self.retried += len(redo)
            again = super().run([items[i] for i in redo], target, cutoff=cutoff)
            for i, r in zip(redo, again):
                out[i] = r
        return out


def make_rpc_runner(key: str, host: str = "127.0.0.1", port: int = 9190, n_parallel: int | None = None,
                    retries: int = 1, **kwargs):
    """An RPC runner whose ``n_parallel`` defaults to the key's free devices, and which re-runs
    configs whose device died mid-session on the remaining devices (``retries`` times; 0 = plain
    :class:`RPCRunner`).

    Parameters
    ----------
    key, host, port
        Device key and tracker address.
    n_parallel : int, optional
        Concurrent sessions; default :func:`release.measure.tracker.free_devices` at construction.
    **kwargs
        ``number, repeat, min_repeat_ms, timeout, session_timeout, ...`` of ``RPCRunner``.

    Raises
    ------
    MeasureError
        No tracker, or no device with ``key`` (checked within ``QUERY_TIMEOUT`` s).
    """
    from .tracker import check_key, free_devices

    if n_parallel is None:
        n_parallel = free_devices(host, port, key)
    else:
        check_key(host, port, key)
    if retries <= 0:
        return RPCRunner(key, host, port, n_parallel=n_parallel, **kwargs)
    return RetryingRPCRunner(key, host, port, n_parallel=n_parallel, retries=retries, **kwargs)


class MetaScheduleRunner(Runner):
    """Any MetaSchedule ``Runner`` (``LocalRunner``, ``RPCRunner``, a ``PyRunner`` subclass) as a runner.

    Parameters
    ----------
    runner : tvm.s_tir.meta_schedule.runner.Runner
    n_parallel : int
        Concurrent runs it manages (default 1).
    """

    batched = True

    def __init__(self, runner, n_parallel: int = 1):
        self.runner, self.n_parallel = runner, int(n_parallel)

    def run(self, items, target) -> list[RunResult]:
        from tvm.s_tir.meta_schedule.runner import RunnerInput

        if not items:
            return []
        keep_interrupts()
        dev = device_type(target)
        t0 = time.perf_counter()
        futs = self.runner.run([RunnerInput(path, dev, args) for path, args in items])
        out = [_runner_result(f.result(), 0.0) for f in futs]
        share = (time.perf_counter() - t0) / len(items)
        return [RunResult(r.costs, share, r.error_kind, r.error_msg) for r in out]
