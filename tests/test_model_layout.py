"""conv2d in a channel-blocked layout inside whole models (``layout="NCHWc"``):
tasks extracted blocked, tuned, compiled with the database, run on NCHW inputs and checked
against PyTorch; the layout transforms stay at the blocked region's boundaries."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from release import relax as M
from release.errors import ModelError


class _Blocks(torch.nn.Module):
    """RGB input (3 channels: a smaller input block), 8 -> 16 channels, a 1x1 conv with a residual add,
    pooling and a dense head: every neighbour of a conv2d that ResNet has."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.c3 = torch.nn.Conv2d(16, 16, 1)
        self.fc = torch.nn.Linear(16 * 3 * 3, 5)

    def forward(self, x):
        y = torch.relu(self.c2(torch.relu(self.c1(x))))
        y = torch.relu(self.c3(y) + y)
        return self.fc(torch.nn.functional.max_pool2d(y, 2).flatten(1))


class _Odd(torch.nn.Module):
    """What needs the general compute: a batch norm after a conv (folded into its weights) and one after
    a relu (decomposed, blocked), a depthwise conv (groups = channels: blocked, with its own compute), a
    strided, dilated, asymmetrically padded conv and an output-channel count of 1 (padded to a block)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.c1 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=(1, 2), dilation=2)
        self.bn = torch.nn.BatchNorm2d(16).eval()
        self.bn.running_mean.uniform_(-1, 1)
        self.bn.running_var.uniform_(0.5, 2)
        self.dw = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.bn2 = torch.nn.BatchNorm2d(16).eval()
        self.bn2.running_mean.uniform_(-1, 1)
        self.bn2.running_var.uniform_(0.5, 2)
        self.c2 = torch.nn.Conv2d(16, 1, 1)

    def forward(self, x):
        return self.c2(self.bn2(torch.relu(self.dw(torch.relu(self.bn(self.c1(x)))))))


def _shapes(func) -> list[tuple]:
    return [tuple(int(d) for d in p.shape) for p in func.params]


@pytest.fixture(scope="module")
def blocks():
    return M.from_pytorch(_Blocks(), [torch.randn(1, 3, 6, 6)], name="blocks")


def test_blocked_model_tasks_tuned_compiled_and_equal_to_pytorch(blocks, fast_measure, tmp_path):
    import tvm
    from tvm import tirx

    from release.measure import apply_history_best
    from release.target import resolve_target
    from release.relax.pad import channel_pad
    from release.task import vector_lanes
    from release.workloads import block_sizes

    target = resolve_target("llvm")
    lanes = vector_lanes(target)
    tasks = M.extract_tasks(blocks, target, layout="NCHWc")
    convs = [t for t in tasks if "conv2d" in t.name]
    assert len(convs) == 3 and all("conv2d_NCHWc" in t.name for t in convs), [t.name for t in tasks]
    # the output blocks are the target's vector lanes, the channels padded to whole blocks (8 -> 16 with
    # AVX-512); the RGB conv keeps a 3-channel input block
    weights = sorted(_shapes(t.mod["main"])[1] for t in convs)
    want = []
    for c, k, r in ((3, 8, 3), (8, 16, 3), (16, 16, 1)):
        cb = 3 if c == 3 else lanes
        want.append((channel_pad(k, lanes) // lanes, channel_pad(c, cb) // cb, r, r, cb, lanes))
    assert weights == sorted(want)
    # activations change layout only at the boundaries (input in, before the flatten out); weights
    # were transformed at compile time, so no layout transform has a 6-D (weight) output
    prepared = M.prepare(blocks.mod, blocks.params, target, prepack=True, layout="NCHWc")
    transforms = [_shapes(f) for gv, f in prepared.functions.items()
                  if isinstance(f, tirx.PrimFunc) and "layout_transform" in gv.name_hint]
    kb = block_sizes(16, 16, lanes)[1]
    assert sorted(transforms) == sorted([[(1, 3, 6, 6), (1, 1, 6, 6, 3)], [(1, 16 // kb, 3, 3, kb), (1, 16, 3, 3)]])

    log = str(tmp_path / "blocked.jsonl")
    M.tune_model(tasks, 4 * len(tasks), log, tuner="random", scheduler="round-robin", measure_option=fast_measure,
                 chunk=4, progress=False, defaults=False)  # no default candidate: every task keeps a tuned record
    db = apply_history_best(log).database(tasks)
    blocked = [f for gv, f in prepared.functions.items()
               if isinstance(f, tirx.PrimFunc) and "conv2d_NCHWc" in gv.name_hint]
    assert len(blocked) == 3 and all(db.has_workload(tvm.IRModule({"main": f.with_attr("global_symbol", "main")}))
                                     for f in blocked)  # compile_model finds every tuned blocked conv
    out = M.evaluate(blocks, M.compile_model(blocks, target, db, layout="NCHWc"), number=1, repeat=1,
                     rtol=1e-4, atol=1e-4)  # NCHW input in, NCHW output out; raises if it differs
    assert out["max_abs_err"] < 1e-4


def test_explicit_block_and_padded_convolutions():
    from release.target import resolve_target

    target = resolve_target("llvm")
    m = M.from_pytorch(_Odd(), [torch.randn(1, 8, 9, 9)], name="odd")
    tasks = M.extract_tasks(m, target, layout="NCHW4c", prepack=False)
    names = [t.name for t in tasks]
    blocked = sorted((t for t in tasks if "fused_conv2d_NCHWc" in t.name), key=lambda t: -t.flop)
    assert len(blocked) == 2, names  # the dense convs, the 1-output-channel one padded to a block of 4
    assert _shapes(blocked[0].mod["main"])[1] == (4, 2, 3, 3, 4, 4)  # NCHW4c: blocks of 4, not the target's lanes
    assert _shapes(blocked[1].mod["main"])[1] == (1, 4, 1, 1, 4, 4)  # 16 -> 1 channels padded to 16 -> 4
    depthwise = [t for t in tasks if "depthwise_conv2d_NCHWc" in t.name]
    assert len(depthwise) == 1, names  # the depthwise conv blocked too (OIHW1i4o), its relu in its epilogue
    assert _shapes(depthwise[0].mod["main"])[1] == (4, 1, 3, 3, 1, 4) and "relu" in depthwise[0].name
    assert not any("conv2d" in n and "NCHWc" not in n for n in names), names
    # stride 2, dilation 2, padding (1, 2), the folded and the decomposed batch norms give PyTorch's output
    out = M.evaluate(m, M.compile_model(m, target, layout="NCHW4c", prepack=False), number=1, repeat=1,
                     rtol=1e-4, atol=1e-4)
    assert out["max_abs_err"] < 1e-4
    assert not any("NCHWc" in t.name for t in M.extract_tasks(m, target, layout="NCHW", prepack=False))


class _Activations(torch.nn.Module):
    """A MobileNet-style stack with every activation ConvertLayout has no layout rule for in TVM 0.27
    (clip: ReLU6, Hardtanh, the Hardsigmoid of Hardswish; LeakyReLU) between blocked convolutions,
    depthwise ones included."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.c1 = torch.nn.Conv2d(8, 16, 1)
        self.dw1 = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.c2 = torch.nn.Conv2d(16, 16, 1)
        self.dw2 = torch.nn.Conv2d(16, 16, 3, stride=2, padding=1, groups=16, bias=False)
        self.c3 = torch.nn.Conv2d(16, 8, 1)

    def forward(self, x):
        y = torch.nn.functional.relu6(self.c1(x))
        y = torch.nn.functional.leaky_relu(self.dw1(y), 0.1)
        y = torch.nn.functional.hardtanh(self.c2(y), -1.0, 2.0)
        y = torch.nn.functional.hardswish(self.dw2(y))
        return self.c3(y)


@pytest.mark.parametrize("route", ["pytorch", "onnx"])
def test_activations_stay_blocked_and_fuse_into_the_convolutions(route, tmp_path):
    """Each activation ConvertLayout cannot carry (clip, leaky relu) is written as maximum/minimum, so
    the blocked region runs from the first convolution to the last: two layout transforms in the
    whole model (the NCHW input and output), every activation fused into a convolution's epilogue,
    and the output PyTorch's."""
    import re

    from release.target import resolve_target

    target = resolve_target("llvm")
    net, x = _Activations().eval(), torch.randn(1, 8, 10, 10)
    if route == "pytorch":
        m = M.from_pytorch(net, [x], name="acts")
    else:
        torch.onnx.export(net, (x,), str(tmp_path / "acts.onnx"), dynamo=False, input_names=["x"])
        m = M.from_onnx(str(tmp_path / "acts.onnx"))
    mod = M.prepare(m.mod, m.params, target, layout="NCHW4c")
    calls = re.findall(r"R\.call_tir\((\w+),", mod["main"].script())
    assert sum("layout_transform" in c for c in calls) == 2, calls
    assert all("conv2d_NCHWc" in c for c in calls if "layout_transform" not in c), calls  # nothing runs alone
    assert sum("depthwise_conv2d_NCHWc" in c for c in calls) == 2, calls
    out = M.evaluate(m, M.compile_model(m, target, layout="NCHW4c", prepack=False), number=1, repeat=1,
                     rtol=1e-4, atol=1e-4)
    assert out["max_abs_err"] < 1e-4


@pytest.mark.parametrize("layout", ["NHWC", "NCHW0c", "nchwc", "NCHW8c16k"])
def test_bad_layout_is_refused_with_the_accepted_forms(blocks, layout):
    with pytest.raises(ModelError, match=f"model layout '{layout}' is not NCHW, NCHWc"):
        M.extract_tasks(blocks, "llvm", layout=layout)
    with pytest.raises(ModelError, match=f"'{layout}'"):
        M.compile_model(blocks, "llvm", layout=layout)


class _ConvAttention(torch.nn.Module):
    """A conv stem, then self-attention over its pixels (a ViT's shape): TVM 0.27's ConvertLayout dies
    with std::bad_alloc on nn.MultiheadAttention's graph, as on the BERT-base layer (no conv at all)."""

    def __init__(self, conv: bool = True):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 16, 3, padding=1) if conv else None
        self.attn = torch.nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x):
        y = self.conv(x) if self.conv is not None else x
        z = y.flatten(2).transpose(1, 2)
        return self.attn(z, z, z)[0]


@pytest.mark.parametrize("conv", [True, False], ids=["conv-then-attention", "attention-only"])
def test_blocked_layout_on_a_model_convertlayout_cannot_take(conv, caplog):
    """--layout NCHWc (tune-model's default on a CPU) on a model TVM's ConvertLayout fails on: nothing to
    block (attention only, as BERT): the pass is skipped; a conv beside attention: the whole model keeps
    NCHW with one warning; either way tasks extract and the compiled model equals PyTorch."""
    import logging

    x = torch.randn(1, 3, 4, 4) if conv else torch.randn(1, 16, 16)
    m = M.from_pytorch(_ConvAttention(conv), [x], name="convattn")
    with caplog.at_level(logging.WARNING, logger="release.relax"):
        tasks = M.extract_tasks(m, "llvm", layout="NCHWc", prepack=False)
    assert tasks and not any("NCHWc" in t.name for t in tasks)
    assert any("conv2d" in t.name for t in tasks) == conv
    warned = [r.getMessage() for r in caplog.records if "ConvertLayout failed" in r.getMessage()]
    assert len(warned) == (1 if conv else 0), warned
    if conv:
        assert "its 1 conv2d keep the imported NCHW layout" in warned[0]
    out = M.evaluate(m, M.compile_model(m, "llvm", layout="NCHWc", prepack=False), number=1, repeat=1,
                     rtol=1e-4, atol=1e-4)
    assert out["max_abs_err"] < 1e-4


@pytest.mark.parametrize("target, layout", [("llvm", "NCHWc"), ({"kind": "llvm", "mcpu": "skylake-avx512"}, "NCHWc"),
                                            ({"kind": "cuda", "arch": "sm_80", "max_num_threads": 1024,
                                              "thread_warp_size": 32}, "NCHW")])
def test_tune_model_default_layout_is_blocked_on_a_cpu_only(target, layout):
    """``tune-model --layout auto`` (the default): NCHWc where the blocked space beats PyTorch (a CPU),
    the model as imported elsewhere; the choice is a valid layout for extract_tasks."""
    got = M.default_layout(target)
    assert got == layout
    assert M.model_layout(got) == (0 if layout == "NCHWc" else None)


def test_cli_bad_layout_is_one_line(tmp_path):
    p = subprocess.run([sys.executable, "-m", "release.cli", "tune-model", "--model", "tiny-cnn", "--layout", "NHWC8c",
                        "--n-trial", "4", "--log", str(tmp_path / "x.jsonl")], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 2, p.stdout + p.stderr
    err = p.stderr.strip().splitlines()
    assert "Traceback" not in p.stderr and len(err) == 1 and err[0].startswith("release: error:"), p.stderr
    assert "'NHWC8c'" in err[0] and "NCHWc" in err[0]
    assert not (tmp_path / "x.jsonl").exists()


_TUNER_ARGS = {"xgb": dict(plan_size=4), "ga": dict(pop_size=4), "ms-evolutionary": dict(plan_size=4)}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["random", "grid", "xgb", "ga", "ms-evolutionary", "release", "release+", "rl",
                                  "sa-as"])
def test_every_tuner_tunes_a_blocked_model_task(name, blocks, fast_measure, tmp_path, one_torch_thread):
    from release import autotvm
    from release.measure import load_records
    from release.tuners import get_tuner

    task = next(t for t in M.extract_tasks(blocks, "llvm", layout="NCHWc") if "conv2d_NCHWc1" in t.name)
    log = str(tmp_path / f"{name}.jsonl")
    tuner = get_tuner(name, task, seed=0, **_TUNER_ARGS.get(name, {}))
    tuner.tune(8, fast_measure, callbacks=[autotvm.callback.log_to_file(log)])
    recs = load_records(log)
    assert len(recs) == 8 and all(r.task == task.key for r in recs)
    assert sum(r.ok for r in recs) >= 6 and tuner.best_gflops > 0


@pytest.mark.slow
def test_cli_tune_model_layout_nchwc(tmp_path):
    """`release tune-model --layout NCHWc`: blocked tasks tuned into the log, the compiled model checked."""
    import json

    log = tmp_path / "tiny.jsonl"
    p = subprocess.run([sys.executable, "-m", "release.cli", "tune-model", "--model", "tiny-cnn", "--layout", "NCHWc",
                        "--n-trial", "16", "--log", str(log), "--compare", "untuned", "--number", "1", "--repeat", "1",
                        "--min-repeat-ms", "0", "--no-progress"], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "conv2d layout NCHWc (1 blocked conv2d task)" in p.stdout
    assert "layout   1 of 1 conv2d blocked (NCHWc); 2 activation layout transforms" in p.stdout
    assert "output matches PyTorch's" in p.stdout  # a built-in model's reference, named
    tasks = {json.loads(line)["task"] for line in log.read_text().splitlines() if line.strip()}
    assert any("conv2d_NCHWc" in t for t in tasks), tasks
    assert (tmp_path / "tiny.so").exists()
