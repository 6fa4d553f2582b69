"""The user-like zoo (:data:`release.zoo.USER_MODELS`): each model built in PyTorch, exported to ONNX as a
user would (:func:`release.zoo.export_onnx`), given to ``release tune-model --model file.onnx`` with the
defaults (a few trials), compiled and exported by the CLI, and the exported library run here on the
model's input must give PyTorch's outputs (every output: the detector has two); no convolution is left
unblocked unless the CLI's line says why.

Each model has a small variant (``build(name, small=True)``: fewer channels and blocks, every kind of layer
kept; 8-15 tasks, most of a run the knob spaces' extraction and two compiles). The default run takes two of
them (:data:`QUICK`); ``@pytest.mark.slow`` takes the other small variants (3.5-8.5 minutes each on a 2-core
machine loaded about 7x over, the six together 36 minutes there) and the full models (longer).
"""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
import torch

from release import zoo
from release.errors import WorkloadError


def _outputs(module, x) -> list[np.ndarray]:
    with torch.no_grad():
        out = module(x)
    return [o.numpy() for o in (out if isinstance(out, (list, tuple)) else (out,))]


def _run_library(lib: str, x: np.ndarray) -> list[np.ndarray]:
    """Every output of the exported library on ``x`` (TVM's Relax VM on this CPU)."""
    import tvm
    from tvm import relax

    vm = relax.VirtualMachine(tvm.runtime.load_module(lib), tvm.cpu())
    out = vm["main"](tvm.runtime.tensor(x, tvm.cpu()))
    if hasattr(out, "numpy"):
        return [out.numpy()]
    return [o.numpy() for o in out]


def _tune_through_cli(name: str, small: bool, tmp_path, n_trial: int = 8) -> None:
    module, (x,) = zoo.build(name, small=small)
    path = zoo.export_onnx(name, str(tmp_path / "net.onnx"), small=small)
    log = tmp_path / "net.jsonl"
    # the defaults (tuner, layout, scheduler, knowledge); only the budget and a quick runner are set
    cmd = [sys.executable, "-m", "release.cli", "tune-model", "--model", path, "--n-trial", str(n_trial),
           "--log", str(log), "--compare", "", "--number", "1", "--repeat", "1", "--min-repeat-ms", "0",
           "--no-progress"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    assert "output matches" in p.stdout, p.stdout
    assert log.read_text().strip(), "no trial recorded"
    _check_layout_lines(p.stdout)
    got = _run_library(str(tmp_path / "net.so"), x.numpy())
    want = _outputs(module, x)
    assert len(got) == len(want), (len(got), len(want))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def _check_layout_lines(stdout: str) -> None:
    """No convolution is left unblocked unless its line says why: ``tune-model``'s first ``layout`` line
    counts the blocked convolutions (``B of N conv2d blocked``) and each other one has its own ``... stays
    NCHW: reason`` line (:func:`release.relax.layout.layout_summary`, where this version has it)."""
    from release.relax import layout as L

    if not hasattr(L, "layout_summary"):
        return
    lines = [ln[len("layout   "):] for ln in stdout.splitlines() if ln.startswith("layout   ")]
    assert lines, stdout
    m = re.match(r"(\d+) of (\d+) conv2d blocked", lines[0])
    assert m, lines
    unblocked = [ln.split(" stays NCHW: ", 1) for ln in lines[1:] if " stays NCHW: " in ln]
    assert int(m.group(1)) + len(unblocked) == int(m.group(2)), lines
    assert all(why.strip() for _, why in unblocked), lines


#: the small variant the default run takes (the Inception-style model: dense convs with concatenations); the
#: others' small variants (the depthwise, squeeze-and-excitation and SiLU of the EfficientNet-style one among them)
#: are slow
QUICK = ("inception-mini",)


@pytest.mark.parametrize("name", [n if n in QUICK else pytest.param(n, marks=pytest.mark.slow)
                                  for n in zoo.USER_MODELS])
def test_small_zoo_model_tunes_through_the_cli_and_matches_pytorch(name, tmp_path):
    _tune_through_cli(name, True, tmp_path)


@pytest.mark.slow
@pytest.mark.full_model  # minutes each at full size: `make test-models`, not CI's make test-slow
@pytest.mark.parametrize("name", zoo.USER_MODELS)
def test_zoo_model_tunes_through_the_cli_and_matches_pytorch(name, tmp_path):
    _tune_through_cli(name, False, tmp_path, n_trial=16)


def test_zoo_models_are_registered_seeded_and_have_small_variants():
    """Every user-like model is a built-in name (``tune-model --model NAME``); a seed gives the same
    weights and input, another seed others; the small variant keeps the output's kind (one output, or the
    detector's two with 4 box coordinates); a model without a small variant is refused in one line."""
    assert set(zoo.USER_MODELS) <= set(zoo.MODEL_NAMES)
    for name in zoo.USER_MODELS:
        (a, (xa,)), (b, (xb,)) = zoo.build(name, small=True), zoo.build(name, small=True)
        assert torch.equal(xa, xb)
        assert all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))
        c, _ = zoo.build(name, seed=1, small=True)
        assert not all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), c.state_dict().values()))
        outs = _outputs(a, xa)
        assert len(outs) == (2 if name == "detector-mini" else 1), name
        assert all(np.isfinite(o).all() for o in outs), name
    with pytest.raises(WorkloadError, match="no small variant"):
        zoo.build("resnet18", small=True)


def test_inception_mini_is_the_issue_model_kind():
    """The full Inception-style model takes the 147x147 input and has what the issue's model had: a strided
    3x3 stem, 1x1, 3x3 and 5x5 convolutions, average pooling and concatenations."""
    from torch import nn

    module, (x,) = zoo.build("inception-mini")
    assert tuple(x.shape) == (1, 3, 147, 147)
    convs = [m for m in module.modules() if isinstance(m, nn.Conv2d)]
    assert convs[0].kernel_size == (3, 3) and convs[0].stride == (2, 2)
    assert {m.kernel_size for m in convs} >= {(1, 1), (3, 3), (5, 5)}
    assert any(isinstance(m, nn.AvgPool2d) for m in module.modules())
