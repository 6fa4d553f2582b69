"""Builders: turn scheduled programs into runnable artifacts.

Life cycle (called by :class:`release.measure.Measurer`, once per batch):
:meth:`Builder.build` ``(mods, target_json)`` -> one :class:`BuildResult` per module, in order;
:attr:`Builder.n_parallel` is the batch size the tuner is asked for (AutoTVM's rule);
:meth:`Builder.close` stops workers. A MetaSchedule ``Builder`` (including ``PyBuilder``
subclasses) is used through :class:`MetaScheduleBuilder`.
"""

from __future__ import annotations

import logging
import time
from typing import Sequence

from ..errors import TunerError, error_line
from ._pool import STARTUP_TIMEOUT, set_job_timeout, without_interrupts
from .result import BuildResult, ErrorKind

logger = logging.getLogger(__name__)


class Builder:
    """Base class of builders."""

    #: builds run at once (the tuner's batch size)
    n_parallel: int = 1

    def build(self, mods: Sequence, target_json: str) -> list[BuildResult]:
        """Build ``mods`` (scheduled ``IRModule`` s) for the target ``target_json``."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop worker processes. Default: nothing."""


class LocalBuilder(Builder):
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
        #: worker pools started so far (1 for a whole tuning run of one target: workers stay warm
        #: across batches) and the wall seconds spent starting them (importing TVM in each worker)
        self.starts, self.startup_s = 0, 0.0

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

            t0 = time.perf_counter()
            pool = without_interrupts(start)
            self.starts += 1
            self.startup_s += time.perf_counter() - t0
            set_job_timeout(pool, self.timeout)
            self._pool, self._pool_target = pool, target_json
        return self._pool

    def build(self, mods: Sequence, target_json: str) -> list[BuildResult]:
        """Build ``mods`` in parallel.

        Returns
        -------
        list of BuildResult
            One per module, in order.
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
                out.append(BuildResult(path, secs))
            elif res.status == StatusKind.TIMEOUT:
                out.append(BuildResult(None, self.timeout, ErrorKind.BUILD_TIMEOUT, f"build timed out after {self.timeout:g} s"))
            else:
                out.append(BuildResult(None, time.perf_counter() - t0, ErrorKind.BUILD_ERROR, error_line(res.value)))
        return out

    def close(self) -> None:
        """Stop the worker processes."""
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None


class MetaScheduleBuilder(Builder):
    """Any MetaSchedule ``Builder`` (``LocalBuilder``, a ``PyBuilder`` subclass, ...) as a builder.

    Parameters
    ----------
    builder : tvm.s_tir.meta_schedule.builder.Builder
    n_parallel : int
        Batch size to report (default 1).
    """

    def __init__(self, builder, n_parallel: int = 1):
        self.builder, self.n_parallel = builder, int(n_parallel)

    def build(self, mods: Sequence, target_json: str) -> list[BuildResult]:
        from tvm.s_tir.meta_schedule.builder import BuilderInput

        from ..target import resolve_target

        if not mods:
            return []
        target = resolve_target(target_json)
        t0 = time.perf_counter()
        res = self.builder.build([BuilderInput(m, target) for m in mods])
        share = (time.perf_counter() - t0) / len(mods)
        return [BuildResult(str(r.artifact_path), share) if r.error_msg is None
                else BuildResult(None, share, ErrorKind.BUILD_ERROR, error_line(r.error_msg)) for r in res]
