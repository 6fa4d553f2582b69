"""Winograd F(m x m, 3 x 3) convolutions: the blocked compute against PyTorch on odd shapes, the weight transform
(TE and NumPy) and its place at compile time, the operator task, the offered tile sizes, and models that mix
direct and Winograd layers (``layout="NCHWc-winograd4"``), tuned, chosen per layer and matching PyTorch.

Accuracy assertions compare with a float64 PyTorch convolution; none asserts on a timing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from release.errors import ModelError, WorkloadError


def _blocked(x: np.ndarray, b: int) -> np.ndarray:
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // b, b, h, w).transpose(0, 1, 3, 4, 2))


def _blocked_weight(w: np.ndarray, cb: int, kb: int) -> np.ndarray:
    k, c, r, s = w.shape
    return np.ascontiguousarray(w.reshape(k // kb, kb, c // cb, cb, r, s).transpose(0, 2, 4, 5, 3, 1))


def _winograd_conv(xb: np.ndarray, wb: np.ndarray, padding, tile: int) -> np.ndarray:
    """The TE compute built with TVM's default (unscheduled) code, on the TE weight transform's output."""
    import tvm
    from tvm import te

    from release.workloads import conv2d_nchwc_winograd_compute, winograd_weight_transform_nchwc

    w = te.placeholder(wb.shape, name="kernel")
    u = winograd_weight_transform_nchwc(w, tile)
    u_arr = tvm.runtime.empty([int(s) for s in u.shape], "float32", tvm.cpu())
    tvm.compile(te.create_prim_func([w, u]), target="llvm")(tvm.runtime.tensor(wb), u_arr)
    d = te.placeholder(xb.shape, name="data")
    up = te.placeholder(u.shape, name="U")
    out = conv2d_nchwc_winograd_compute(d, up, padding)
    o = tvm.runtime.empty([int(s) for s in out.shape], "float32", tvm.cpu())
    tvm.compile(te.create_prim_func([d, up, out]), target="llvm")(tvm.runtime.tensor(xb), u_arr, o)
    return o.numpy(), u_arr.numpy()


# (N, C, K, H, W, padding (top, left, bottom, right), cb, kb): odd sizes, no padding, asymmetric padding,
# a batch of 2, input and output blocks apart, an output smaller than one tile
SHAPES = [(1, 16, 16, 13, 11, (1, 1, 1, 1), 16, 16), (2, 8, 16, 9, 9, (0, 0, 0, 0), 8, 16),
          (1, 12, 8, 7, 10, (1, 0, 2, 1), 4, 8), (1, 8, 8, 4, 3, (1, 1, 1, 1), 8, 8)]


@pytest.mark.parametrize("tile", [2, 4])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:5])) + f"p{''.join(map(str, s[5]))}")
def test_winograd_compute_matches_pytorch(shape, tile):
    from release.relax.winograd import transform_weight
    from release.workloads import winograd_reference

    n, c, k, h, w, pad, cb, kb = shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c, h, w)).astype("float32")
    wt = (rng.standard_normal((k, c, 3, 3)) / np.sqrt(9 * c)).astype("float32")
    pt, pl, pb, pr = pad
    ref = torch.nn.functional.conv2d(torch.nn.functional.pad(torch.from_numpy(x).double(), (pl, pr, pt, pb)),
                                     torch.from_numpy(wt).double()).numpy()
    want = _blocked(ref, kb)
    got, u = _winograd_conv(_blocked(x, cb), _blocked_weight(wt, cb, kb), list(pad), tile)
    assert got.shape == want.shape == (n, k // kb, h + pt + pb - 2, w + pl + pr - 2, kb)
    scale = np.abs(want).max()
    assert np.abs(got - want).max() / scale < 1e-5
    # the NumPy weight transform (the one models use, in float64) and the TE one agree; the reference does too
    np.testing.assert_allclose(transform_weight(_blocked_weight(wt, cb, kb), tile), u, rtol=1e-5, atol=1e-6)
    assert np.abs(winograd_reference(_blocked(x, cb), u, list(pad)) - want).max() / scale < 1e-5


def test_offered_tile_sizes_are_those_within_the_tolerance():
    """The error of F(m x m, 3 x 3) in FP32 grows with m (interpolation points further from 0); the offered
    tile sizes are those whose error relative to the output's range stays under 1e-5 on a ResNet layer
    (64 -> 64 channels, 28x28: the tier's), measured here against a float64 direct convolution."""
    from release.workloads import WINOGRAD_TILES

    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 64, 28, 28)).astype("float32")
    wt = (rng.standard_normal((64, 64, 3, 3)) / np.sqrt(9 * 64)).astype("float32")
    want = _blocked(torch.nn.functional.conv2d(torch.from_numpy(x).double(), torch.from_numpy(wt).double(),
                                               padding=1).numpy(), 16)
    err = {}
    for m in (2, 4, 6):
        got, _ = _winograd_conv(_blocked(x, 16), _blocked_weight(wt, 16, 16), 1, m)
        err[m] = float(np.abs(got - want).max() / np.abs(want).max())
    assert err[2] < err[4] < err[6], err
    assert WINOGRAD_TILES == tuple(m for m in (2, 4, 6) if err[m] < 1e-5), err


def test_operator_task_names_its_form_and_checks_its_output(fast_measure, tmp_path):
    """``layout="NCHWc-winograd4"``: a task of its own (name, key), a transformed weight as input, tuned through the
    usual loop; its best config's output checked against the NumPy Winograd reference."""
    from release.measure import log_to_file
    from release.task import create_task
    from release.tuners import RandomTuner

    direct = create_task("tiny.conv2d.1", "llvm", layout="NCHWc")
    task = create_task("tiny.conv2d.1", "llvm", layout="NCHWc-winograd4")
    assert task.name == direct.name + "-winograd4" and task.key != direct.key
    shapes = [tuple(shape) for shape, _ in task.arg_info()]
    assert shapes[1] == (6, 6, 1, 1, 16, 16)  # (alpha, alpha, K/kb, C/cb, cb, kb)
    tuner = RandomTuner(task, seed=0)
    tuner.tune(4, fast_measure, callbacks=[log_to_file(str(tmp_path / "w.jsonl"))])
    assert tuner.best_config is not None
    from release.check import OutputChecker

    assert OutputChecker(task)(tuner.best_config) == ""  # "" : the output matches the reference


@pytest.mark.parametrize("workload, layout, says", [
    ("resnet18.conv2d.3", "NCHWc-winograd4", "3x3 stride-1"),  # a 1x1 convolution
    ("resnet18.conv2d.4", "NCHWc-winograd4", "3x3 stride-1"),  # stride 2
    ("tiny.conv2d.1", "NCHW-winograd4", "blocked layout"),
    ("tiny.conv2d.1", "NCHWc-winograd6", "is not offered"),
    ("tiny.conv2d.1", "NCHWc-wino4", "is not -winograd"),
])
def test_bad_winograd_layouts_are_one_line(workload, layout, says):
    from release.task import create_task

    with pytest.raises(WorkloadError, match=says):
        create_task(workload, "llvm", layout=layout)


def test_model_layout_with_winograd_is_parsed_and_bad_ones_refused():
    from release import relax as M

    assert M.model_layout("NCHWc-winograd4") == 0 and M.model_layout("NCHW8c-winograd2") == 8
    assert M.split_layout("NCHWc-winograd2") == ("NCHWc", 2) and M.split_layout("NCHWc") == ("NCHWc", None)
    for bad, says in (("NCHWc-winograd6", "not offered"), ("NCHW-winograd4", "blocked layout"),
                      ("NCHWc-fft", "is not -winograd")):
        with pytest.raises(ModelError, match=says):
            M.model_layout(bad)


class _Mixed(torch.nn.Module):
    """Eligible layers (3x3 stride 1: 12 channels padded to a block, a residual add, no padding) beside
    ineligible ones (stride 2, 1x1, depthwise)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.c1 = torch.nn.Conv2d(3, 12, 3, padding=1)
        self.c2 = torch.nn.Conv2d(12, 12, 3, padding=1)
        self.down = torch.nn.Conv2d(12, 16, 3, stride=2, padding=1)
        self.dw = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.pw = torch.nn.Conv2d(16, 16, 1)
        self.c3 = torch.nn.Conv2d(16, 8, 3)

    def forward(self, x):
        y = torch.relu(self.c1(x))
        y = torch.relu(self.c2(y) + y)
        y = self.pw(torch.relu(self.dw(self.down(y))))
        return self.c3(y)


@pytest.fixture(scope="module")
def mixed():
    from release import relax as M

    return M.from_pytorch(_Mixed().eval(), [torch.randn(1, 3, 11, 9)], name="mixed")


def test_weights_are_transformed_at_compile_time(mixed):
    """The Winograd form's transformed weights are constants of the fused module: no kernel computes them."""
    from tvm import tirx

    from release.relax.extract import prepare
    from release.relax.winograd import WinogradPlan, _fused_calls
    from release.target import resolve_target

    target = resolve_target("llvm")
    pairs: dict = {}
    mod = prepare(mixed.mod, mixed.params, target, prepack=True, layout="NCHWc", winograd=WinogradPlan(4), pairs=pairs)
    names = [gv.name_hint for gv, f in mod.functions.items() if isinstance(f, tirx.PrimFunc)]
    assert sum("winograd" in n for n in names) == 3 and not any("weight" in n for n in names), names
    wino = [shapes for _, keys, shapes in _fused_calls(mod) if any(k in pairs for k in keys)]
    assert len(wino) == 3  # c1, c2, c3: each takes its transformed weight U (6 x 6 x ...) as a constant
    assert all(any(len(s) == 6 and s[:2] == [6, 6] for s in shapes) for shapes in wino), wino


@pytest.mark.slow  # tunes 9 tasks, compiles three builds (~2 min)
def test_model_mixing_direct_and_winograd_tuned_chosen_and_equal_to_pytorch(mixed, fast_measure, tmp_path):
    from release import relax as M
    from release.measure import apply_history_best
    from release.relax.winograd import WinogradPlan
    from release.target import resolve_target

    target = resolve_target("llvm")
    tasks = M.extract_tasks(mixed, target, layout="NCHWc-winograd4")
    wino = [t for t in tasks if "winograd" in t.name]
    assert len(wino) == 3 and len(tasks) == len(M.extract_tasks(mixed, target, layout="NCHWc")) + 3
    log = str(tmp_path / "m.jsonl")
    M.tune_model(tasks, 3 * len(tasks), log, tuner="random", scheduler="round-robin", measure_option=fast_measure,
                 chunk=3, progress=False, defaults=False)
    hist = apply_history_best(log)
    db = hist.database(tasks)
    choice = M.winograd_choice(mixed, target, db, "NCHWc-winograd4", history=hist, tasks=tasks)
    assert [x.shape for x in choice.layers] == ["3->16, 11x9", "16->16, 11x9", "16->16, 6x5"]
    assert all(x.direct_s is not None and x.winograd_s is not None for x in choice.layers)
    assert choice.plan.layers == frozenset(x.key for x in choice.layers if x.winograd_s < x.direct_s)
    assert choice.lines()[0].startswith(f"{len(choice.plan.layers)} of 3 eligible")
    every = WinogradPlan(4, frozenset(x.key for x in choice.layers))
    one = WinogradPlan(4, frozenset([choice.layers[1].key]))
    for plan in (every, one, None):  # all Winograd, mixed, and the choice made from the database
        ex = M.compile_model(mixed, target, db, layout="NCHWc-winograd4", winograd=plan)
        M.evaluate(mixed, ex, number=1, repeat=1, rtol=1e-4, atol=1e-4)  # raises if the output differs


@pytest.mark.slow  # a tune-model run (~40 s)
def test_tune_model_cli_prints_each_layers_form(tmp_path):
    import re
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "release.cli", "tune-model", "--model", "tiny-cnn", "--layout",
                        "NCHWc-winograd4", "--n-trial", "12", "--log", str(tmp_path / "t.jsonl"), "--compare", "",
                        "--no-progress", "--no-knowledge"], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith("winograd "))
    assert re.match(r"winograd [01] of 1 eligible 3x3 stride-1 conv2d layers computed by Winograd F\(4x4, 3x3\)",
                    lines[i])
    assert re.match(r" +3->16, 8x8: direct \d+\.\d{3} ms, winograd \d+\.\d{3} ms -> (direct|winograd) \(",
                    lines[i + 1]), lines[i + 1]
