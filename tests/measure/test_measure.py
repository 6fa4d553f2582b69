"""Measurement through the persistent build pool and MetaSchedule runners (real builds, real runs)."""

import os
import socket
import time

import numpy as np
import pytest

from release.errors import MeasureError, TunerError
from release.measure import (ErrorKind, LocalBuilder, LocalRunner, Measurer, RPCRunner, check_tracker,
                             measure_option)


def test_measure_results_carry_costs_times_and_traces(matmul_task, fast_measure):
    sp = matmul_task.config_space
    m = Measurer(matmul_task, fast_measure)
    configs = [tuple(c) for c in sp.sample(4, np.random.default_rng(3))]
    seen = []
    t0 = time.time()
    results = m.measure(configs, on_result=seen.append)
    assert [r.config for r in results] == [sp.canonical(c) for c in configs]
    assert len(seen) == 4  # streamed one by one
    for r in results:
        assert r.ok, r.error_msg
        assert len(r.costs) == 2 and all(0 < c < 1 for c in r.costs)
        assert r.build_s > 0 and r.run_s > 0 and r.measure_s > 0
        assert t0 <= r.timestamp <= time.time()
        assert r.trace is not None
    # the measure_s of a batch add up to its wall time
    assert sum(r.measure_s for r in results) <= time.time() - t0 + 0.05


@pytest.mark.parametrize("n", [pytest.param(200, marks=pytest.mark.slow), 16])
def test_200_random_configs_of_resnet18_conv2_build_and_run_correctly_or_are_invalid(n):
    """Foundation acceptance: every random config builds and computes the right output, or is
    reported invalid with a reason. The plain program: a pre-packed task's measured kernel takes the
    packed weight (its compiled kernel, which packs inside, is checked in tests/test_layout_prepack.py)."""
    import tvm
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    from release.errors import InvalidConfigError
    from release.task import create_task, run_module

    conv_task = create_task("resnet18.conv2d.2", "llvm", prepack=False)

    sp = conv_task.config_space
    configs = [tuple(c) for c in sp.sample(n, np.random.default_rng(2024))]
    valid, invalid = [], []
    for c in configs:
        try:
            valid.append((c, sp.apply(c)))
        except InvalidConfigError as err:
            assert err.reason
            invalid.append(c)
    assert len(valid) > n // 4
    builder = LocalBuilder(n_parallel=2, timeout=120)
    try:
        built = builder.build([s.mod for _, s in valid], conv_task.target_json)
    finally:
        builder.close()
    inputs = conv_task.random_inputs(seed=7)
    want = conv_task.reference(inputs)
    dev = tvm.cpu(0)
    for (c, _), (path, secs, kind, msg) in zip(valid, built):
        assert kind == ErrorKind.NONE, f"{c}: {msg}"
        lib = tvm.runtime.load_module(path)
        got = run_module(lib, inputs, conv_task.output_shape(), dev)
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3, err_msg=str(c))


def test_build_timeout_is_an_error_result(matmul_task):
    opt = measure_option(LocalBuilder(n_parallel=1, timeout=0.001), LocalRunner(number=1, repeat=1))
    m = Measurer(matmul_task, opt)
    try:
        (r,) = m.measure([matmul_task.config_space.get(5)])
    finally:
        m.close()
    assert r.error_kind == ErrorKind.BUILD_TIMEOUT and "timed out" in r.error_msg
    assert not r.ok and r.costs == []


def test_run_timeout_is_an_error_result(conv_task):
    opt = measure_option(LocalBuilder(n_parallel=1), LocalRunner(number=50, repeat=3, timeout=0.001))
    m = Measurer(conv_task, opt)
    sp = conv_task.config_space
    c = next(tuple(c) for c in sp.sample(50, np.random.default_rng(0)) if sp.is_valid(c)[0])
    try:
        (r,) = m.measure([c])
    finally:
        m.close()
    assert r.error_kind == ErrorKind.RUN_TIMEOUT
    assert "killed after 0.001 seconds" in r.error_msg  # the limit given, not the start-up allowance
    assert not r.ok


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_tracker_fails_fast_with_a_clear_message(connection_attempts):
    from release.measure.tracker import QUERY_TIMEOUT

    port = _free_port()
    with pytest.raises(MeasureError, match=f"no RPC tracker answers at 127.0.0.1:{port}"):
        RPCRunner("any", "127.0.0.1", port)
    # fast: one refused connection, with a finite timeout, and no retry (a count, not a wall-clock limit)
    assert [t for p, t in connection_attempts if p == port] == [QUERY_TIMEOUT]


def test_bad_runner_arguments():
    with pytest.raises(TunerError):
        LocalRunner(number=0)
    with pytest.raises(TunerError):
        LocalBuilder(n_parallel=0)
    with pytest.raises(TunerError):
        measure_option(builder="nope")


@pytest.mark.slow  # a CUDA task registers TVM's CUDA tensor intrinsics: 15-60 s of TVMScript parsing
def test_local_cuda_without_gpu_is_a_clear_error():
    from release.task import create_task

    task = create_task("tiny.matmul.1", {"kind": "cuda", "arch": "sm_90"})
    import tvm

    if tvm.cuda(0).exist:  # pragma: no cover - GPU machines
        pytest.skip("a GPU is present")
    with pytest.raises(MeasureError, match="no cuda device"):
        Measurer(task, measure_option())
