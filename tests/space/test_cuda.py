"""Knob spaces and builds for an NVIDIA target (nvcc compiles; no GPU runs them)."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def cuda_task():
    from release.task import create_task

    return create_task("tiny.matmul.1", {"kind": "cuda", "arch": "sm_90"})


def test_cuda_knob_space_and_kernel_compile(cuda_task):
    import tvm

    sp = cuda_task.config_space
    assert sp.n_knobs >= 3
    kinds = {k.kind for k in sp.knobs}
    assert "tile" in kinds
    rng = np.random.default_rng(0)
    valid = []
    reasons = []
    for c in sp.sample(200, rng):
        ok, why = sp.is_valid(c)
        (valid if ok else reasons).append(tuple(c) if ok else why)
        if len(valid) >= 2:
            break
    assert valid, f"no valid CUDA config in 200 samples: {set(reasons)}"
    assert all(reasons)  # every invalid config has a reason
    sch = sp.apply(valid[0])
    lib = tvm.compile(sch.mod, target=cuda_task.target)
    src = lib.mod.imports[0].inspect_source() if lib.mod.imports else ""
    assert "__global__" in src or ".entry" in src or src == ""
    # build through the project's build pool too (what tuning does)
    from release.measure import ErrorKind, LocalBuilder

    b = LocalBuilder(n_parallel=1, timeout=300)
    try:
        (path, secs, kind, msg) = b.build([sch.mod], cuda_task.target_json)[0]
    finally:
        b.close()
    assert kind == ErrorKind.NONE, msg
    assert os.path.getsize(path) > 0


import os  # noqa: E402
