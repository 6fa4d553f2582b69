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
