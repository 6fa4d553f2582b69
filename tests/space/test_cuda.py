"""Knob spaces and kernels for an NVIDIA target (sm_90, H100/H200 limits); all in the slow suite.

The CUDA tensor intrinsics, which TVM's CUDA design spaces need, take ~45 s to import on 2 cores: more than
any other test of the default suite, for a target no machine of the default suite has. So ``make test-slow``
(and the GPU machine's script) runs: the knob space of a small matmul, the thread-binding legality of the
configs MetaSchedule's GPU postprocessors accept (checked again on the generated CUDA C: launch bounds,
shared memory), one kernel generated as CUDA C (``tvm.compile`` stops there without a GPU: the device module
holds the source; it becomes GPU code when loaded), the tuning build pool (each worker imports TVM and the
CUDA intrinsics), the spaces of the benchmark's conv2d and dense, and, where a GPU is present, the compiled
kernels run and checked against the reference. The default suite keeps the CUDA device script's CPU steps
(``tests/cuda``).
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # the CUDA intrinsics' import (~45 s) is the cost, see above

TARGET = "cuda"  # the CLI alias: sm_90 with H100/H200 limits (release.target)
MAX_THREADS = 1024
MAX_SHARED = 49152


def _valid_configs(space, n: int, tries: int = 400, seed: int = 0):
    """Up to ``n`` valid configs among ``tries`` uniformly random ones (not ``space.sample``, which keeps
    the GPU limits), and the reasons of the invalid ones."""
    rng = np.random.default_rng(seed)
    valid, reasons = [], []
    for c in space.canonicalize((rng.random((tries, space.n_knobs)) * space.dims).astype(np.int64)):
        ok, why = space.is_valid(c)
        if ok:
            valid.append(tuple(int(x) for x in c))
            if len(valid) >= n:
                break
        else:
            reasons.append(why)
    return valid, reasons


def _thread_extents(mod) -> dict[str, int]:
    """Largest extent bound to each thread tag in the scheduled TIR (TVMScript ``T.thread_binding``)."""
    ext: dict[str, int] = {}
    for n, tag in re.findall(r'T\.thread_binding\((\d+), thread="([a-zA-Z.]+)"', mod.script()):
        ext[tag] = max(ext.get(tag, 0), int(n))
    return ext


def _shared_bytes(src: str) -> int:
    """Bytes of ``__shared__`` arrays declared in CUDA C source (float/half/int element types)."""
    size = {"float": 4, "int": 4, "half": 2, "double": 8, "float4": 16, "float2": 8}
    total = 0
    for ty, n in re.findall(r"__shared__\s+(?:__align__\(\d+\)\s+)?(\w+)\s+\w+\[(\d+)\]", src):
        total += size.get(ty, 4) * int(n)
    return total


@pytest.fixture(scope="module")
def cuda_task():
    from release.task import create_task

    task = create_task("tiny.matmul.1", TARGET)
    task.config_space  # noqa: B018 - built once (design spaces + compute-location probing)
    return task


@pytest.fixture(scope="module")
def cuda_valid(cuda_task):
    return _valid_configs(cuda_task.config_space, 3)


def test_cuda_target_has_the_limits_metaschedule_needs(cuda_task):
    t = cuda_task.target
    assert t.kind.name == "cuda"
    assert str(t.attrs["arch"]) == "sm_90"
    assert int(t.attrs["max_threads_per_block"]) == MAX_THREADS
    assert int(t.attrs["max_shared_memory_per_block"]) == MAX_SHARED
    assert int(t.attrs["thread_warp_size"]) == 32


def test_cuda_knob_space_and_legality(cuda_task, cuda_valid):
    sp = cuda_task.config_space
    assert sp.n_knobs >= 3
    assert "tile" in {k.kind for k in sp.knobs}
    valid, reasons = cuda_valid
    assert len(valid) >= 2, f"fewer than 2 valid CUDA configs in 400 samples: {set(reasons)}"
    assert all(isinstance(r, str) and r for r in reasons)  # every invalid config has a reason
    # On GPUs most random configs break a hardware limit; the limits checked on the knobs (or MetaSchedule's
    # GPU checks) say so
    assert any("VerifyGPUCode" in r or "GPU limit" in r or "thread" in r.lower() for r in reasons), set(reasons)
    for c in valid:
        ext = _thread_extents(sp.apply(c).mod)
        assert ext.get("blockIdx.x", 0) >= 1 and ext.get("threadIdx.x", 0) >= 1, ext
        threads = int(np.prod([v for k, v in ext.items() if k.startswith("threadIdx")]))
        assert threads <= MAX_THREADS, (c, ext)


def test_cuda_kernel_compiles_with_the_bindings_it_was_scheduled_with(cuda_task, cuda_valid):
    import tvm

    valid, _ = cuda_valid
    sch = cuda_task.config_space.apply(valid[0])
    ext = _thread_extents(sch.mod)
    lib = tvm.compile(sch.mod, target=cuda_task.target)
    assert lib.mod.imports, "no device module: the kernel was not compiled for CUDA"
    src = lib.mod.imports[0].inspect_source()
    assert "__global__" in src
    threads = int(np.prod([v for k, v in ext.items() if k.startswith("threadIdx")]))
    bounds = [int(n) for n in re.findall(r"__launch_bounds__\((\d+)\)", src)]
    assert bounds and max(bounds) == threads, (bounds, ext)
    assert _shared_bytes(src) <= MAX_SHARED
    # the grid: blockIdx.x covers the 64x64 output with the threads and per-thread tiles
    assert ext["blockIdx.x"] * threads <= 64 * 64


@pytest.mark.slow
def test_cuda_build_pool_and_run_if_a_gpu_is_present(cuda_task, cuda_valid):
    import tvm

    from release.measure import ErrorKind, LocalBuilder
    from release.task import run_module

    valid, _ = cuda_valid
    sp = cuda_task.config_space
    b = LocalBuilder(n_parallel=1, timeout=300)
    try:
        built = b.build([sp.apply(c).mod for c in valid], cuda_task.target_json)
    finally:
        b.close()
    for path, _secs, kind, msg in built:
        assert kind == ErrorKind.NONE, msg
        assert os.path.getsize(path) > 0
    if not tvm.cuda(0).exist:
        pytest.skip("built through the pool; no GPU here to run the kernels")
    inputs = cuda_task.random_inputs(0)
    want = cuda_task.reference(inputs)
    for c in valid:
        lib = tvm.compile(sp.apply(c).mod, target=cuda_task.target)
        got = run_module(lib, inputs, cuda_task.output_shape(), tvm.cuda(0))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["resnet18.conv2d.6", "bert-base.dense.2"])
def test_benchmark_workloads_have_legal_cuda_kernels(workload):
    import tvm

    from release.task import create_task, run_module

    task = create_task(workload, TARGET)
    sp = task.config_space
    assert sp.n_knobs >= 4 and sp.size > 1e6
    valid, reasons = _valid_configs(sp, 1, tries=600)
    assert valid, set(reasons)
    sch = sp.apply(valid[0])
    threads = int(np.prod([v for k, v in _thread_extents(sch.mod).items() if k.startswith("threadIdx")]))
    assert 1 <= threads <= MAX_THREADS
    lib = tvm.compile(sch.mod, target=task.target)
    assert "__global__" in lib.mod.imports[0].inspect_source()
    if tvm.cuda(0).exist:
        inputs = task.random_inputs(0)
        got = run_module(lib, inputs, task.output_shape(), tvm.cuda(0))
        np.testing.assert_allclose(got, task.reference(inputs), rtol=1e-3, atol=1e-3)
