"""Every convolution of a model blocked (NCHW{c}c), whatever its channel counts: channels padded to whole
blocks (:func:`release.relax.pad.pad_conv_channels`), concatenation, pooling, resize and elementwise ops kept
blocked, layout transforms only at the model's edges; the compiled model equals PyTorch's."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

from release import relax as M


class _Conv(torch.nn.Module):
    def __init__(self, i, o, k, **kw):
        super().__init__()
        self.c = torch.nn.Conv2d(i, o, k, bias=False, **kw)
        self.bn = torch.nn.BatchNorm2d(o, eps=1e-3).eval()
        self.bn.running_mean.uniform_(-0.5, 0.5)
        self.bn.running_var.uniform_(0.5, 2)

    def forward(self, x):
        return F.relu(self.bn(self.c(x)))


class _Inception(torch.nn.Module):
    """An Inception-v3-style CNN at a tiny width: a strided 3x3 stem from 3 channels, 3x3 and 5x5
    convolutions, 1x1 branches, max and average pooling (count_include_pad as PyTorch's default),
    two concatenations, a global average pool and a dense head. Channel counts (6, 10, 12, 20, ...)
    are what a width divisor leaves: none but a few divide a vector of 16 floats."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.stem = torch.nn.Sequential(_Conv(3, 8, 3, stride=2), _Conv(8, 8, 3), _Conv(8, 12, 3, padding=1))
        self.s4, self.s5 = _Conv(12, 10, 1), _Conv(10, 24, 3)
        self.blocks = torch.nn.ModuleList([self._block(24, 4), self._block(30, 8)])
        self.fc = torch.nn.Linear(34, 10)

    @staticmethod
    def _block(i, pool):
        return torch.nn.ModuleDict({"b1": _Conv(i, 8, 1), "b5a": _Conv(i, 6, 1), "b5b": _Conv(6, 8, 5, padding=2),
                                    "b3a": _Conv(i, 8, 1), "b3b": _Conv(8, 10, 3, padding=1),
                                    "b3c": _Conv(10, 10, 3, padding=1), "bp": _Conv(i, pool, 1)})

    def forward(self, x):
        x = F.max_pool2d(self.stem(x), 3, stride=2)
        x = F.max_pool2d(self.s5(self.s4(x)), 3, stride=2)
        for b in self.blocks:
            x = torch.cat([b["b1"](x), b["b5b"](b["b5a"](x)), b["b3c"](b["b3b"](b["b3a"](x))),
                           b["bp"](F.avg_pool2d(x, 3, stride=1, padding=1))], 1)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class _Odd(torch.nn.Module):
    """What the padding carries and where it stops: a 147-channel output, a concat with a 20-channel
    conv, an average pool that leaves the padding out of its count, a depthwise conv on 167 channels
    (its input's padding), a depthwise conv straight on the 5-channel input (zero-padded first), an
    upsampling, a sigmoid gate by a per-channel constant, a divide; a grouped conv stays NCHW (named)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Conv2d(5, 147, 3, padding=1)
        self.b = torch.nn.Conv2d(5, 20, 1)
        self.dw_in = torch.nn.Conv2d(5, 5, 3, padding=1, groups=5)
        self.dw = torch.nn.Conv2d(167, 167, 3, padding=1, groups=167)
        self.c = torch.nn.Conv2d(167, 21, 1)
        self.d = torch.nn.Conv2d(26, 24, 3, padding=1)
        self.g = torch.nn.Conv2d(24, 24, 3, padding=1, groups=4)
        self.scale = torch.nn.Parameter(torch.rand(1, 21, 1, 1) + 0.5, requires_grad=False)

    def forward(self, x):
        y = torch.cat([F.relu(self.a(x)), self.b(x)], 1)
        y = F.avg_pool2d(y, 3, stride=1, padding=1, count_include_pad=False)
        y = torch.sigmoid(self.c(F.relu(self.dw(y)))) * self.scale / 2.0
        y = F.interpolate(y, scale_factor=2, mode="nearest")
        z = F.interpolate(self.dw_in(x), scale_factor=2, mode="nearest")
        return self.g(F.relu(self.d(torch.cat([y, z], 1))))


def _calls(mod) -> list[str]:
    return re.findall(r"R\.call_tir\((\w+),", mod["main"].script())


@pytest.fixture(scope="module")
def inception():
    return M.from_pytorch(_Inception().eval(), [torch.randn(1, 3, 35, 35)], name="inception")


def test_inception_every_conv_blocked_transforms_at_the_edges_only(inception):
    """19 convolutions, few of whose channel counts divide a block of 16 (or 8 with AVX2):
    every one blocked, 2 activation layout transforms (the NCHW input in, the pooled features out), no
    pooling, concat or elementwise op left between transforms."""
    from release.relax.layout import layout_summary

    s = layout_summary(inception, "llvm", "NCHWc")
    assert (s.blocked, s.convs) == (19, 19) and not s.unblocked, s.lines()
    assert s.transforms == 2, s.lines()
    assert s.lines()[0] == "19 of 19 conv2d blocked (NCHWc); 2 activation layout transforms"
    from release.target import resolve_target

    calls = _calls(M.prepare(inception.mod, inception.params, resolve_target("llvm"), prepack=True, layout="NCHWc"))
    assert sum("layout_transform" in c for c in calls) == 2, calls
    assert sum("conv2d_NCHWc" in c for c in calls) == 19, calls
    assert not any("conv2d" in c and "NCHWc" not in c for c in calls), calls


@pytest.mark.parametrize("route", [pytest.param("pytorch", marks=pytest.mark.slow), "onnx"])  # one route by default
def test_inception_blocked_build_equals_pytorch(route, inception, tmp_path):
    net, x = _Inception().eval(), torch.randn(1, 3, 35, 35)
    if route == "pytorch":
        m = inception
    else:
        torch.onnx.export(net, (x,), str(tmp_path / "inception.onnx"), dynamo=False, input_names=["x"])
        m = M.from_onnx(str(tmp_path / "inception.onnx"))
    out = M.evaluate(m, M.compile_model(m, "llvm", layout="NCHWc"), number=1, repeat=1, rtol=1e-4, atol=1e-4)
    assert out["max_abs_err"] < 1e-4


def test_odd_channels_padded_and_the_grouped_conv_named():
    """147 and 21 output channels, a concat of 147 + 20, depthwise convs on 167 and 5 channels: all
    blocked (padded to whole blocks); the 4-group conv stays NCHW, named with its reason; the build
    equals PyTorch's."""
    from release.relax.layout import layout_summary

    m = M.from_pytorch(_Odd().eval(), [torch.randn(1, 5, 9, 9)], name="odd")
    s = layout_summary(m, "llvm", "NCHWc")
    assert (s.blocked, s.convs) == (6, 7), s.lines()
    assert len(s.unblocked) == 1 and "groups 4" in s.unblocked[0][0] and "grouped" in s.unblocked[0][1], s.lines()
    assert s.lines()[1].startswith("conv2d 3x3 stride 1x1, groups 4: 24 -> 24 channels") and "stays NCHW" in s.lines()[1]
    # the input in (NCHW5c for the dense convs, zero-padded NCHW{lanes}c for the depthwise one) and into
    # the grouped conv; the upsamplings and their concat stay blocked
    assert s.transforms == 3, s.lines()
    out = M.evaluate(m, M.compile_model(m, "llvm", layout="NCHWc", prepack=False), number=1, repeat=1,
                     rtol=1e-4, atol=1e-4)
    assert out["max_abs_err"] < 1e-4


def test_padded_channels_are_exact_at_a_model_output():
    """A model whose last op is a padded convolution (3 output channels): its real channels come back,
    in NCHW, through one layout transform and a take; the output equals PyTorch's."""
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 7, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(7, 3, 1)).eval()
    m = M.from_pytorch(net, [torch.randn(1, 3, 6, 6)], name="head")
    from release.relax.layout import layout_summary

    s = layout_summary(m, "llvm", "NCHW4c")
    assert (s.blocked, s.convs, s.transforms) == (2, 2, 2), s.lines()
    out = M.evaluate(m, M.compile_model(m, "llvm", layout="NCHW4c", prepack=False), number=1, repeat=1,
                     rtol=1e-5, atol=1e-5)
    assert out["max_abs_err"] < 1e-5


@pytest.mark.slow
def test_inception_tunes_a_few_trials_and_compiles(inception, fast_measure, tmp_path):
    """A few trials of every blocked task through tune_model, compiled from the log: PyTorch's output
    (slow: 15 knob spaces to build; the untuned blocked build is checked by the quick tests above)."""
    from release.measure import apply_history_best

    tasks = M.extract_tasks(inception, "llvm", layout="NCHWc")
    convs = [t for t in tasks if "conv2d" in t.name]
    assert convs and all("NCHWc" in t.name for t in convs), [t.name for t in tasks]
    log = str(tmp_path / "inception.jsonl")
    M.tune_model(tasks, 2 * len(tasks), log, tuner="random", scheduler="round-robin", measure_option=fast_measure,
                 chunk=2, progress=False, defaults=False)
    ex = M.compile_model(inception, "llvm", apply_history_best(log).database(tasks), layout="NCHWc")
    assert M.evaluate(inception, ex, number=1, repeat=1, rtol=1e-4, atol=1e-4)["max_abs_err"] < 1e-4
