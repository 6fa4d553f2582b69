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
    seen, clock = [], []

    def note(r):
        seen.append(r)
        clock.append(time.perf_counter())  # read after the measurer stamped r: its clock, not a tolerance

    t0, w0 = time.perf_counter(), time.time()
    results = m.measure(configs, on_result=note)
    assert [r.config for r in results] == [sp.canonical(c) for c in configs]
    assert [id(r) for r in seen] == [id(r) for r in results]  # streamed one by one, in order
    for r in results:
        assert r.ok, r.error_msg
        assert len(r.costs) == 2 and all(0 < c < 1 for c in r.costs)
        assert r.build_s > 0 and r.measure_s > 0
        assert r.run_s >= sum(r.costs)  # the run's wall time holds its two timed repeats (number 1)
        assert w0 <= r.timestamp <= time.time()
        assert r.trace is not None
    # each result's measure_s is the time since the one before (the first: since measure() began), so
    # the batch's add up to at most the span this test saw around them, on one clock, with no tolerance
    assert sum(r.measure_s for r in results) <= clock[-1] - t0
    assert sum(r.measure_s for r in results[1:]) >= clock[-2] - clock[0]


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
