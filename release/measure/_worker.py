"""Functions that run inside build worker processes (kept tiny: workers import this module)."""

from __future__ import annotations

import os
import tempfile
import time


def init_worker(target_json: str) -> None:
    """Pool initializer: register only the tensor intrinsics of the target (see release.target)."""
    from release.target import ensure_tensor_intrinsics, resolve_target

    ensure_tensor_intrinsics(resolve_target(target_json))


def ping() -> int:
    """No-op job that makes a pool start its worker processes (imports included)."""
    return os.getpid()


def build(mod, target_json: str) -> tuple[str, float]:
    """Build one scheduled IRModule and export it; returns ``(artifact_path, build_seconds)``.

    Equals MetaSchedule's ``default_build`` + ``default_export`` minus the 45 s
    ``import tvm.s_tir.tensor_intrin`` (shared/reference/tvm-0.27.md).
    """
    import tvm
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock
    from tvm.support.tar import tar

    from release.target import resolve_target

    t0 = time.perf_counter()
    target = resolve_target(target_json)
    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    lib = tvm.compile(mod, target=target)
    path = os.path.join(tempfile.mkdtemp(prefix="release-build-"), "mod." + tar.output_format)
    lib.export_library(path, fcompile=tar)
    return path, time.perf_counter() - t0


def ms_build(mod, target, _params=None):
    """MetaSchedule ``f_build`` signature ``(mod, target, params) -> Module``: ``default_build``
    without the tensor-intrinsic import (for ``tune_tir`` / ``tune_relax`` comparators)."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)


def init_runner(threads: int) -> None:
    """Run-worker initializer: TVM's runtime pool of this worker gets ``threads`` threads (the
    target's ``num-cores``) before any kernel is timed, at the scheduling priority
    ``RELEASE_TIMING_PRIORITY`` asks for (see :mod:`release.threads`)."""
    from release.threads import timing_priority, use_threads

    timing_priority()
    use_threads(threads)


def runtime_threads() -> int:
    """Threads TVM's runtime pool of this worker runs (a job for tests and checks)."""
    import tvm

    return int(tvm.runtime.num_threads())


def rpc_run_evaluator(threads, session, rt_mod, device, evaluator_config, repeated_args, cutoff_s=None):
    """MetaSchedule's RPC ``f_run_evaluator`` that first sets the remote CPU runtime pool to
    ``threads`` threads (``runtime.config_threadpool`` through the session; a GPU's kernels are
    unaffected), then runs MetaSchedule's default evaluator (:func:`run_evaluator_cut` with
    ``cutoff_s`` when given)."""

    # kDLCPU; a device of an RPC session carries 128 x (session index + 1) on top of its type
    if int(device.dlpack_device_type()) % 128 == 1:
        try:
            session.get_function("runtime.config_threadpool")(0, int(threads))
        except Exception:  # noqa: BLE001 - an old remote runtime without it keeps its own count
            pass
    return run_evaluator_cut(cutoff_s, rt_mod, device, evaluator_config, repeated_args)


def run_evaluator_cut(cutoff_s, rt_mod, device, evaluator_config, repeated_args):
    """MetaSchedule's ``f_run_evaluator`` with AdaTune-style early termination: time one repeat; if
    its cost is above ``cutoff_s`` seconds, return that one cost (the candidate is cut short),
    else time the other ``repeat - 1`` repeats and return all ``repeat`` costs.

    Equals MetaSchedule's ``run_evaluator_common`` (one ``time_evaluator`` call with ``number``,
    ``repeat``, ``min_repeat_ms``) split in two calls: the first repeat, then the rest. The second
    call starts from a ``number`` that makes one repeat last about 1.2 x ``min_repeat_ms`` at the
    first repeat's cost (TVM grows ``number`` until a repeat lasts ``min_repeat_ms``, redoing a short
    one, and does not keep it between evaluators), so each cost still averages at least
    ``min_repeat_ms`` of runs; each call has its own warm-up run.
    ``cutoff_s`` None or ``repeat == 1``: exactly ``run_evaluator_common``.
    """
    import math

    from tvm.s_tir.meta_schedule.runner.utils import run_evaluator_common

    if cutoff_s is None or evaluator_config.repeat <= 1:
        return run_evaluator_common(rt_mod, device, evaluator_config, repeated_args)
    preproc = "cache_flush_cpu_non_first_arg" if evaluator_config.enable_cpu_cache_flush else ""
    number, min_ms = int(evaluator_config.number), int(evaluator_config.min_repeat_ms)

    def evaluator(n, repeat):
        return rt_mod.time_evaluator(func_name=rt_mod.entry_name, dev=device, number=n, repeat=repeat,
                                     min_repeat_ms=min_ms, f_preproc=preproc)

    first_eval = evaluator(number, 1)
    costs = []
    for args in repeated_args:
        device.sync()
        first = [float(x) for x in first_eval(*args).results]
        costs += first
        if first[0] > cutoff_s:
            continue  # cut short: far slower than the task's best so far
        # 1.2: a margin so that the rest's repeats reach min_repeat_ms at once (TVM redoes a short one)
        grown = number if min_ms <= 0 or first[0] <= 0 else max(number, math.ceil(1.2 * min_ms / 1e3 / first[0]))
        device.sync()
        costs += [float(x) for x in evaluator(grown, evaluator_config.repeat - 1)(*args).results]
    return costs
