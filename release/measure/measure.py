"""Measurement: builders, runners and ``measure_option`` on top of MetaSchedule's machinery.

Matches AutoTVM's ``autotvm.measure_option(builder=LocalBuilder(), runner=LocalRunner())``.
Building uses a pool of worker processes that lives across batches (MetaSchedule's LocalBuilder
starts a new pool on every call: 3-4 s each). Running uses MetaSchedule's ``LocalRunner`` or
``RPCRunner`` (``EvaluatorConfig``: ``number`` runs averaged into one cost, ``repeat`` costs,
``number`` raised until a cost takes ``min_repeat_ms``).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from typing import Sequence

from ..errors import InvalidConfigError, MeasureError, TunerError, error_line
from ..target import device_type

logger = logging.getLogger(__name__)


#: seconds allowed for worker processes to start (import TVM and PyTorch) before the per-job
#: build and run timeouts apply
STARTUP_TIMEOUT = 180.0


class ErrorKind:
    """Error kinds of a :class:`MeasureResult` (strings, stored in records)."""

    NONE = ""
    INVALID = "invalid"  # the config is not a legal program (never built, never counted as a trial)
    BUILD_ERROR = "build_error"
    BUILD_TIMEOUT = "build_timeout"
    RUN_ERROR = "run_error"
    RUN_TIMEOUT = "run_timeout"


@dataclass
class MeasureResult:
    """Outcome of measuring one config.

    Attributes
    ----------
    config : tuple[int, ...]
        The config measured (canonical form).
    costs : list[float]
        Run times in seconds, one per ``repeat`` (empty on error).
    error_kind : str
        One of :class:`ErrorKind` (``""`` = success).
    error_msg : str
        Reason of the error, or ``""``.
    build_s, run_s : float
        Seconds spent building (in the worker) and running this config.
    measure_s : float
        Wall seconds of measurement attributed to this config: the time from the previous
        result's completion (or the batch start) to this one's, so the ``measure_s`` of a batch
        add up to its wall time (replay, parallel builds, runs, dispatch).
    timestamp : float
        Unix time at which the result completed.
    trace : object
        The MetaSchedule trace (with postprocessing) of the scheduled program, or None.
    search_s, fit_s : float
        Set by the tuner: its search and cost-model fitting time attributed to this config.
    round : int
        Set by the tuner: cost-model refits done before this config was proposed (AutoTVM's
        rounds; 0 for tuners without a model).
    threads : int
        Threads the kernel was timed with (the target's ``num-cores``; 0 = not run).
    """

    config: tuple
    costs: list = field(default_factory=list)
    error_kind: str = ErrorKind.NONE
    error_msg: str = ""
    build_s: float = 0.0
    run_s: float = 0.0
    measure_s: float = 0.0
    timestamp: float = 0.0
    trace: object = None
    search_s: float = 0.0
    fit_s: float = 0.0
    round: int = 0
    threads: int = 0

    @property
    def ok(self) -> bool:
        return self.error_kind == ErrorKind.NONE and bool(self.costs)

    @property
    def mean_cost(self) -> float:
        """Mean run time in seconds (``inf`` on error)."""
        return sum(self.costs) / len(self.costs) if self.ok else float("inf")


def without_sigint(fn):
    """Run ``fn()`` in a helper thread that blocks SIGINT; return its result or raise its error.

    Worker pools started inside ``fn`` (their threads, and the worker processes those threads start,
    now or later when one is replaced) inherit the blocked signal. A Ctrl-C, which the terminal sends
    to the whole process group, then reaches only the main process, whose main thread stays
    interruptible while it waits here and stops with one line (``release: interrupted``), never a
    worker halfway through ``import tvm`` (whose tracebacks it printed before; issue 19, item 4).
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


class LocalBuilder:
    """Builds scheduled programs in worker processes that persist across batches.

    Parameters
    ----------
    n_parallel : int, optional
        Worker processes; default = usable cores. Also the tuner's batch size (AutoTVM rule).
    timeout : float
        Seconds per build before the worker is killed (default 30, MetaSchedule's default).
    max_uses : int
        Builds per worker process before it is replaced (bounds TVM's worker memory growth,
        the reason MetaSchedule restarts its pool; default 256).
    """

    def __init__(self, n_parallel: int | None = None, timeout: float = 30.0, max_uses: int = 256):
        from ..target import host_cores

        if n_parallel is not None and n_parallel < 1:
            raise TunerError(f"builder n_parallel={n_parallel} must be at least 1")
        if timeout <= 0:
            raise TunerError(f"builder timeout={timeout} must be positive (seconds)")
        self.n_parallel = int(n_parallel or host_cores())
        self.timeout = float(timeout)
        self.max_uses = int(max_uses)
        self._pool = None
        self._pool_target = None

    def _get_pool(self, target_json: str):
        from tvm.support.popen_pool import PopenPoolExecutor

        from . import _worker

        if self._pool is None or self._pool_target != target_json:
            self.close()
            def start():
                pool = PopenPoolExecutor(
                    max_workers=self.n_parallel, timeout=max(self.timeout, STARTUP_TIMEOUT),
                    initializer=_worker.init_worker, initargs=(target_json,), maximum_process_uses=self.max_uses,
                )
                # Start every worker (importing TVM takes 5-20 s with torch installed) under a generous
                # limit, so the first builds are not killed by the per-build timeout; then enforce it.
                list(pool.map_with_error_catching(lambda _: _worker.ping(), range(self.n_parallel)))
                return pool

            pool = without_sigint(start)
            pool._timeout = self.timeout  # PopenPoolExecutor reads it for every job
            self._pool, self._pool_target = pool, target_json
        return self._pool

    def build(self, mods: Sequence, target_json: str) -> list[tuple[str | None, float, str, str]]:
        """Build ``mods`` in parallel.

        Returns
        -------
        list of (artifact_path or None, build_seconds, error_kind, error_msg)
        """
        from tvm.support.popen_pool import StatusKind

        from . import _worker

        if not mods:
            return []
        pool = self._get_pool(target_json)
        out = []
        t0 = time.perf_counter()
        for res in pool.map_with_error_catching(lambda m: _worker.build(m, target_json), list(mods)):
            if res.status == StatusKind.COMPLETE:
                path, secs = res.value
                out.append((path, secs, ErrorKind.NONE, ""))
            elif res.status == StatusKind.TIMEOUT:
                out.append((None, self.timeout, ErrorKind.BUILD_TIMEOUT, f"build timed out after {self.timeout:g} s"))
            else:
                out.append((None, time.perf_counter() - t0, ErrorKind.BUILD_ERROR, error_line(res.value)))
        return out

    def close(self) -> None:
        """Stop the worker processes."""
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None


def _evaluator(number, repeat, min_repeat_ms, enable_cpu_cache_flush):
    from tvm.s_tir.meta_schedule.runner import EvaluatorConfig

    return EvaluatorConfig(number=number, repeat=repeat, min_repeat_ms=min_repeat_ms,
                           enable_cpu_cache_flush=enable_cpu_cache_flush)


def _check_run_args(number, repeat, min_repeat_ms, timeout):
    if number < 1 or repeat < 1:
        raise TunerError(f"runner number={number} and repeat={repeat} must be at least 1")
    if min_repeat_ms < 0:
        raise TunerError(f"runner min_repeat_ms={min_repeat_ms} must be >= 0")
    if timeout <= 0:
        raise TunerError(f"runner timeout={timeout} must be positive (seconds)")


class LocalRunner:
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
    """

    def __init__(self, number: int = 4, repeat: int = 3, min_repeat_ms: int = 0, timeout: float = 10.0,
                 cooldown_interval: float = 0.1, enable_cpu_cache_flush: bool = False):
        _check_run_args(number, repeat, min_repeat_ms, timeout)
        self.number, self.repeat, self.min_repeat_ms = int(number), int(repeat), int(min_repeat_ms)
        self.timeout, self.cooldown_interval = float(timeout), float(cooldown_interval)
        self.enable_cpu_cache_flush = bool(enable_cpu_cache_flush)
        self._runner = None
        #: threads the running worker times kernels with (the target's ``num-cores``; 0 = not started)
        self.threads = 0

    def describe(self) -> str:
        return "local"

    def _ms_runner(self, threads: int = 0):
        """MetaSchedule's runner whose worker runs kernels on ``threads`` threads (0: keep the
        running worker's count, or this machine's usable cores for a new one); a worker of another
        count is replaced."""
        import functools

        from ..target import host_cores
        from . import _worker

        threads = int(threads) or self.threads or host_cores()
        if self._runner is not None and self.threads != threads:
            self.close()
        if self._runner is None:
            from tvm.s_tir.meta_schedule.runner import LocalRunner as MSLocalRunner

            # MetaSchedule's runner starts its worker in a sanity check bounded by timeout_sec: give
            # start-up a generous limit, then enforce the per-run timeout.
            self._runner = without_sigint(lambda: MSLocalRunner(
                timeout_sec=max(self.timeout, STARTUP_TIMEOUT),
                evaluator_config=_evaluator(self.number, self.repeat, self.min_repeat_ms, self.enable_cpu_cache_flush),
                cooldown_sec=self.cooldown_interval,
                initializer=functools.partial(_worker.init_runner, threads),
            ))
            self._runner.pool._timeout = self.timeout
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

    def run(self, items: Sequence[tuple[str, list]], target) -> list[tuple[list, float, str, str]]:
        """Run built artifacts one at a time (so each run time is its own).

        Parameters
        ----------
        items : list of (artifact_path, args_info)
        Returns
        -------
        list of (costs in seconds, run_seconds, error_kind, error_msg)
        """
        from tvm.s_tir.meta_schedule.runner import RunnerInput

        from ..threads import thread_count

        runner = self._ms_runner(thread_count(target))
        out = []
        dev = device_type(target)
        for path, args in items:
            t0 = time.perf_counter()
            try:
                (fut,) = runner.run([RunnerInput(path, dev, args)])
                res = fut.result()
            except Exception as err:  # noqa: BLE001 - a broken worker is a failed measurement, not a crash
                kind = ErrorKind.RUN_TIMEOUT if isinstance(err, TimeoutError) else ErrorKind.RUN_ERROR
                out.append(([], time.perf_counter() - t0, kind, error_line(err) or type(err).__name__))
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
        return [], secs, kind, msg
    return [float(x) for x in res.run_secs], secs, ErrorKind.NONE, ""


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
    from ..distributed.rpc import _summary

    summary = _summary(host, int(port), timeout)  # socket check, then a bounded summary request
    if key is not None:
        # the tracker keeps a key's queue after its last server died: count registered servers
        from ..distributed.rpc import check_key

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
    number, repeat, min_repeat_ms, timeout, cooldown_interval, enable_cpu_cache_flush
        As :class:`LocalRunner`.

    Raises
    ------
    MeasureError
        At construction, if the tracker does not answer within 5 s or has no device for ``key``.
    """

    def __init__(self, key: str, host: str = "127.0.0.1", port: int = 9190, n_parallel: int = 1,
                 session_timeout: float = 60.0, number: int = 4, repeat: int = 3, min_repeat_ms: int = 0,
                 timeout: float = 10.0, cooldown_interval: float = 0.1, enable_cpu_cache_flush: bool = False,
                 priority: int = 1):
        super().__init__(number, repeat, min_repeat_ms, timeout, cooldown_interval, enable_cpu_cache_flush)
        if not key:
            raise MeasureError("RPC runner needs a device key (--rpc-key)")
        self.key, self.host, self.port = key, host, int(port)
        self.n_parallel, self.session_timeout, self.priority = int(n_parallel), float(session_timeout), priority
        check_tracker(host, self.port, key)

    def describe(self) -> str:
        return f"rpc:{self.key}@{self.host}:{self.port}"

    def check_device(self, target) -> None:  # the device is remote
        return None

    def _ms_runner(self, threads: int = 0):
        """MetaSchedule's RPC runner; its evaluator sets the remote CPU pool to ``threads`` threads
        (``runtime.config_threadpool`` called through the session) before timing."""
        import functools

        from . import _worker

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

    def run(self, items, target):
        """Submit every artifact at once (spread over free devices), then collect."""
        from tvm.s_tir.meta_schedule.runner import RunnerInput

        from ..threads import thread_count

        runner = self._ms_runner(thread_count(target))
        dev = device_type(target)
        t0 = time.perf_counter()
        futs = runner.run([RunnerInput(path, dev, args) for path, args in items])
        out = []
        for fut in futs:
            res = fut.result()
            out.append(_runner_result(res, 0.0))
        share = (time.perf_counter() - t0) / max(1, len(items))
        return [(c, share, k, m) for c, _, k, m in out]


def measure_option(builder=None, runner=None) -> dict:
    """AutoTVM's ``measure_option``: ``{"builder": LocalBuilder, "runner": LocalRunner|RPCRunner}``.

    ``builder`` may be ``"local"``/None (a :class:`LocalBuilder` with defaults); ``runner`` may be
    ``"local"``/None (a :class:`LocalRunner` with defaults).
    """
    if builder is None or builder == "local":
        builder = LocalBuilder()
    if runner is None or runner == "local":
        runner = LocalRunner()
    if not isinstance(builder, LocalBuilder):
        raise TunerError(f"builder {builder!r} is not a release LocalBuilder")
    if not isinstance(runner, LocalRunner):
        raise TunerError(f"runner {runner!r} is not a release LocalRunner or RPCRunner")
    return {"builder": builder, "runner": runner}


class Measurer:
    """Measures configs of one task: replay + postprocessors, build, run.

    Parameters
    ----------
    task : release.task.Task
    option : dict
        From :func:`measure_option`.

    Notes
    -----
    Invalid configs (see :meth:`release.space.KnobSpace.apply`) come back with
    ``error_kind == "invalid"`` and are never built.
    """

    def __init__(self, task, option: dict):
        self.task = task
        self.builder: LocalBuilder = option["builder"]
        self.runner: LocalRunner = option["runner"]
        self.runner.check_device(task.target)
        #: wall seconds per phase, summed over calls: replay (+postprocessors), build (parallel
        #: phase), run (all runs), total (whole measure calls); and counts
        self.stats = {"replay": 0.0, "build": 0.0, "run": 0.0, "total": 0.0, "configs": 0, "measured": 0,
                      "batches": 0}

    @property
    def batch_size(self) -> int:
        """Configs per batch: the build workers, or the RPC devices if there are more of them."""
        return max(self.builder.n_parallel, getattr(self.runner, "n_parallel", 1))

    def measure(self, configs: Sequence[Sequence[int]], on_result=None) -> list[MeasureResult]:
        """Measure ``configs``; one :class:`MeasureResult` per config, in order.

        Parameters
        ----------
        configs : list of config tuples
        on_result : callable, optional
            ``on_result(result)`` is called as soon as each result completes (invalid configs at
            once, build failures after the parallel build, runs one by one), so a caller can log
            every measurement before the next one starts.
        """
        from tvm.s_tir.meta_schedule.arg_info import ArgInfo

        clock = [time.perf_counter()]

        def done(r: MeasureResult) -> None:
            now = time.perf_counter()
            r.timestamp = time.time()
            r.measure_s = now - clock[0]
            clock[0] = now
            if on_result is not None:
                on_result(r)

        space = self.task.config_space
        t_start = time.perf_counter()
        results: list[MeasureResult] = []
        todo = []  # (index, mod, args)
        for c in configs:
            c = space.canonical(c)
            r = MeasureResult(config=c)
            results.append(r)
            try:
                sch = space.apply(c)
            except InvalidConfigError as err:
                r.error_kind, r.error_msg = ErrorKind.INVALID, err.reason
                done(r)
                continue
            r.trace = sch.trace
            todo.append((len(results) - 1, sch.mod, ArgInfo.from_entry_func(sch.mod, remove_preproc=True)))
        t_replayed = time.perf_counter()
        built = self.builder.build([m for _, m, _ in todo], self.task.target_json)
        t_built = time.perf_counter()
        to_run = []
        for (i, _, args), (path, secs, kind, msg) in zip(todo, built):
            r = results[i]
            r.build_s = secs
            if kind:
                r.error_kind, r.error_msg = kind, msg
                done(r)
            else:
                to_run.append((i, path, args))
        if isinstance(self.runner, RPCRunner):
            ran = self.runner.run([(p, a) for _, p, a in to_run], self.task.target) if to_run else []
            pairs = zip(to_run, ran)
        else:
            pairs = ((item, self.runner.run([(item[1], item[2])], self.task.target)[0]) for item in to_run)
        for (i, path, _), (costs, secs, kind, msg) in pairs:
            r = results[i]
            r.costs, r.run_s, r.error_kind, r.error_msg = costs, secs, kind, msg
            r.threads = self.runner.threads
            shutil.rmtree(os.path.dirname(path), ignore_errors=True)
            done(r)
        t_end = time.perf_counter()
        st = self.stats
        st["replay"] += t_replayed - t_start
        st["build"] += t_built - t_replayed
        st["run"] += sum(r.run_s for r in results)
        st["total"] += t_end - t_start
        st["configs"] += len(results)
        st["measured"] += len(todo)
        st["batches"] += 1
        return results

    def close(self) -> None:
        self.builder.close()
        self.runner.close()

