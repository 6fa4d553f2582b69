"""Weight pre-packing (layout-free weights) and channel-blocked (NCHWc) conv2d tasks: tuned for a
few trials, compiled through TVM's compile_tir from the log, and checked against PyTorch with the
original weights (pre-packed) or the blocked layout (NCHWc)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from release.errors import WorkloadError


def _tune_and_compile(task, opt, path, n_trial=6):
    import tvm
    from tvm.s_tir.meta_schedule.tir_integration import compile_tir

    from release.measure import apply_history_best, load_records, log_to_file
    from release.tuners import RandomTuner

    RandomTuner(task, seed=0).tune(n_trial, opt, callbacks=[log_to_file(str(path))])
    recs = load_records(str(path))
    assert any(r.ok for r in recs), [r.error_msg for r in recs]
    sch = compile_tir(apply_history_best(str(path)).database([task]), task.mod, task.target)
    assert sch is not None
    return recs, tvm.compile(sch.mod, target=task.target)


def test_prepacked_conv_task_tunes_and_matches_with_original_weights(fast_measure, tmp_path):
    from release.task import create_task

    task = create_task("tiny.conv2d.1", "llvm")  # CPU + conv2d: the weight is layout-free by default
    assert task.layout_free == (1,)
    recs, lib = _tune_and_compile(task, fast_measure, tmp_path / "lf.jsonl")
    ok = [r for r in recs if r.ok]
    assert all(r.layout_rewrite for r in ok)  # every measured schedule ran on the pre-packed weight
    # the compiled kernel packs inside: it takes the weight as written (16, 16, 3, 3) and is correct
    assert task.check(lib) < 1e-3


def test_prepack_off_keeps_the_program(tmp_path, fast_measure):
    from release.task import create_task

    lf = create_task("tiny.conv2d.1", "llvm")
    plain = create_task("tiny.conv2d.1", "llvm", prepack=False)
    assert plain.layout_free == () and plain.key != lf.key
    recs, lib = _tune_and_compile(plain, fast_measure, tmp_path / "plain.jsonl", n_trial=3)
    assert not any(r.layout_rewrite for r in recs)
    assert plain.check(lib) < 1e-3
    dense = create_task("bert-base.dense.1", "llvm")
    assert dense.layout_free == (1,)
    assert create_task("tiny.matmul.1", "llvm").layout_free == ()  # a plain matmul has no weight


def test_layout_free_for_programs_is_checked():
    from tvm import te

    from release.task import create_task
    from release.workloads import get_workload

    te_list = get_workload("tiny.conv2d.1").build_te()
    assert create_task(te_list, "llvm", layout_free=[1]).layout_free == (1,)
    assert create_task(te_list, "llvm").layout_free == ()
    with pytest.raises(WorkloadError, match="name no input"):
        create_task(te_list, "llvm", layout_free=[2])  # the output
    with pytest.raises(WorkloadError, match="integers"):
        create_task(te_list, "llvm", layout_free=["kernel"])
    with pytest.raises(WorkloadError, match="layout_free"):
        create_task("tiny.conv2d.1", "llvm", layout_free=[1])
    with pytest.raises(WorkloadError, match="registered workload"):
        create_task(te_list, "llvm", prepack=True)
    del te


def test_blocked_layout_parsing_and_block_sizes():
    from release.workloads import block_sizes, parse_blocked_layout

    assert parse_blocked_layout("NCHW16c") == (16, 16)
    assert parse_blocked_layout("NCHW3c16k") == (3, 16)
    for bad in ("NHWC", "NCHW0c", "NCHWc16", ""):
        with pytest.raises(WorkloadError, match="blocked"):
            parse_blocked_layout(bad)
    assert block_sizes(3, 64, 16) == (3, 16)
    assert block_sizes(64, 128, 8) == (8, 8)
    assert block_sizes(12, 20, 16) == (12, 10)


def test_nchwc_task_shapes_and_reference():
    """(Tuned and checked end to end by tests/test_cli.py::test_tune_blocked_layout_and_the_printed_usage_runs.)"""
    from release.task import create_task, vector_lanes

    lanes = vector_lanes("llvm")
    assert lanes in (4, 8, 16)
    task = create_task("tiny.conv2d.1", "llvm", layout="NCHWc")  # 16 channels in and out
    b = min(16, lanes)
    assert task.name == f"tiny.conv2d.1-NCHW{b}c"
    shapes = [s for s, _ in task.arg_info()]
    assert shapes == [[1, 16 // b, 14, 14, b], [16 // b, 16 // b, 3, 3, b, b], [1, 16 // b, 14, 14, b]]
    # the blocked reference is PyTorch's conv on the unpacked tensors, packed back
    xs = task.random_inputs()
    got = task.reference(xs)
    assert got.shape == (1, 16 // b, 14, 14, b)
    plain = create_task("tiny.conv2d.1", "llvm", prepack=False)
    data = xs[0].transpose(0, 1, 4, 2, 3).reshape(1, 16, 14, 14)
    kernel = xs[1].transpose(0, 5, 1, 4, 2, 3).reshape(16, 16, 3, 3)
    want = plain.reference([data, kernel])  # NCHW output, packed back by hand
    np.testing.assert_allclose(got, want.reshape(1, 16 // b, b, 14, 14).transpose(0, 1, 3, 4, 2), rtol=1e-5, atol=1e-5)
    with pytest.raises(WorkloadError, match="conv2d"):
        create_task("tiny.matmul.1", "llvm", layout="NCHWc")
    with pytest.raises(WorkloadError, match="do not divide"):
        create_task("tiny.conv2d.1", "llvm", layout="NCHW5c")


@pytest.mark.parametrize("layout", [None, "NCHWc"])
def test_depthwise_task_tunes_compiles_and_matches_pytorch(layout, fast_measure, tmp_path):
    """A depthwise workload as an operator task, NCHW (``topi.nn.depthwise_conv2d_nchw``) and blocked
    (``depthwise_conv2d_NCHWc``, the form blocked models run): a few trials, compiled from the log,
    and equal to PyTorch's grouped conv (packed back for the blocked one)."""
    from release.task import create_task, vector_lanes

    task = create_task("tiny.depthwise_conv2d.1", "llvm", layout=layout)  # 32 channels, 14x14
    b = min(32, vector_lanes("llvm"))
    shapes = [s for s, _ in task.arg_info()]
    if layout:
        assert task.name == f"tiny.depthwise_conv2d.1-NCHW{b}c"
        assert shapes == [[1, 32 // b, 14, 14, b], [32 // b, 1, 3, 3, 1, b], [1, 32 // b, 14, 14, b]]
    else:
        assert shapes == [[1, 32, 14, 14], [32, 1, 3, 3], [1, 32, 14, 14]]
    assert task.layout_free == (1,) and abs(task.flop - 2 * 32 * 14 * 14 * 9) < 1
    _, lib = _tune_and_compile(task, fast_measure, tmp_path / "dw.jsonl", n_trial=4)
    assert task.check(lib) < 1e-4  # the reference is PyTorch's conv2d with groups = channels
    with pytest.raises(WorkloadError, match="one channel block"):
        create_task("tiny.depthwise_conv2d.1", "llvm", layout="NCHW4c8k")


def test_fma_count_by_register_width():
    """FMAs are counted by the destination register width (assembly of a real kernel)."""
    import tvm

    from release.task import create_task, fma_by_register

    task = create_task("tiny.conv2d.1", {"kind": "llvm", "mcpu": "znver3", "num-cores": 2}, layout="NCHW8c")
    sp = task.config_space
    counts = []
    for c in sp.sample(40, np.random.default_rng(1)):
        try:
            sch = sp.apply(c)
        except Exception:  # noqa: BLE001 - invalid configs are skipped
            continue
        counts.append(fma_by_register(tvm.compile(sch.mod, target=task.target)))
        if len(counts) >= 8:
            break
    assert counts and all(c["zmm"] == 0 for c in counts)  # znver3 has no AVX-512
    assert any(c["ymm"] + c["xmm"] > 0 for c in counts)


FIXTURE_BLOCKED = os.path.join(os.path.dirname(__file__), "fixtures", "layout",
                               "resnet18.conv2d.2-NCHW16c.xgb.best3.jsonl")


def test_tuned_blocked_kernels_use_the_widest_vector_unit():
    """The 3 best NCHW16c kernels of a real tuning run (fixture: `benchmarks/layout/run.sh`, xgb, 128
    trials, pre-packed, AVX-512 host, 382-423 GFLOPS on 2 threads) put every FMA on the widest
    registers the target has: zmm for an AVX-512 CPU, ymm when the same schedule is built for an
    AVX2 one (built, not run)."""
    import tvm

    from release.measure import load_records
    from release.task import create_task, fma_by_register

    recs = load_records(FIXTURE_BLOCKED)
    assert len(recs) == 3 and all(r.ok for r in recs)
    task = create_task("resnet18.conv2d.2", {"kind": "llvm", "mcpu": "rocketlake", "num-cores": 2},
                       layout="NCHW16c", prepack=True)
    sp = task.config_space
    for rec in recs:
        mod = sp.apply(sp.canonical(rec.config)).mod
        for mcpu, widest in (("rocketlake", "zmm"), ("znver3", "ymm")):
            target = tvm.target.Target({"kind": "llvm", "mcpu": mcpu, "num-cores": 2})
            counts = fma_by_register(tvm.compile(mod, target=target))
            assert counts[widest] > 0, (mcpu, counts)
            assert counts[widest] == sum(counts.values()), (mcpu, counts)
