"""The CUDA image's self-check: TVM compiles a tuned-space CUDA kernel with nvcc; on a GPU it also runs it.

    docker run --rm release:cuda python /usr/local/share/release/cuda_check.py              # any machine
    docker run --rm --gpus all release:cuda python /usr/local/share/release/cuda_check.py   # a GPU box

The kernel is a valid config of ``tiny.matmul.1``'s CUDA knob space (a 64x64x64 float32 matmul, the target
``cuda``: sm_90 with H100/H200 limits, or the GPU's own architecture when one is present). TVM generates its
CUDA C and its nvcc driver (``tvm.support.nvcc``, what ``TVM_CUDA_COMPILE_MODE=nvcc`` selects) compiles it
into a fatbin for that architecture. With a GPU the build loads, runs, and is compared with NumPy.
Prints one line per step; exit status 0 when every step passed.
"""

from __future__ import annotations

import sys
import time

import numpy as np


def cuda_target() -> tuple[str, bool]:
    """The target to compile for and whether a GPU is present: the GPU's ``sm_XY``, else ``cuda`` (sm_90)."""
    import tvm

    dev = tvm.cuda(0)
    if dev.exist:
        arch = "sm_" + dev.compute_version.replace(".", "")
        return '{"kind": "cuda", "arch": "%s", "max_num_threads": 1024}' % arch, True
    return "cuda", False


def valid_config(task, tries: int = 400, seed: int = 0) -> tuple:
    """A config of ``task``'s knob space that MetaSchedule's GPU postprocessors accept."""
    rng = np.random.default_rng(seed)
    for c in task.config_space.sample(tries, rng):
        ok, _why = task.config_space.is_valid(c)
        if ok:
            return tuple(int(x) for x in c)
    raise RuntimeError(f"no valid config among {tries} random ones of {task.name}")


def main() -> int:
    """Compile (and, with a GPU, run and check) one CUDA kernel; returns the exit status."""
    import tvm
    from tvm.support import nvcc

    from release.task import create_task, run_module

    target, gpu = cuda_target()
    t0 = time.time()
    task = create_task("tiny.matmul.1", target)
    config = valid_config(task)
    sch = task.config_space.apply(config)
    lib = tvm.compile(sch.mod, target=task.target)
    source = lib.mod.imports[0].inspect_source()
    assert "__global__" in source, "the device module holds no CUDA kernel"
    print(f"generated: {task.name} config {list(config)}, {len(source)} bytes of CUDA C ({time.time() - t0:.0f} s)")
    with task.target:
        t1 = time.time()
        fatbin = nvcc.compile_cuda(source, target_format="fatbin", compiler="nvcc")
    print(f"compiled by nvcc {'.'.join(map(str, nvcc.get_cuda_version()))} ({nvcc.find_cuda_path()}) for "
          f"{task.target.arch}: fatbin of {len(fatbin)} bytes in {time.time() - t1:.1f} s")
    if not gpu:
        print("no GPU here: compiled only (run with --gpus all on a GPU box to run and check it)")
        return 0
    inputs = task.random_inputs(0)
    got = run_module(lib, inputs, task.output_shape(), tvm.cuda(0))
    np.testing.assert_allclose(got, task.reference(inputs), rtol=1e-4, atol=1e-4)
    print(f"ran on {tvm.cuda(0).device_name}: output matches NumPy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
