"""The small things of a model run: a note once; "(weights packed in)" only when they
are; a missing model refused before TVM or PyTorch is imported; help texts naming every accepted model."""

import logging
import os
import subprocess
import sys

import pytest


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "release.cli", *args], capture_output=True, text=True, timeout=300,
                          env=env)


@pytest.mark.parametrize("model, fragment", [("missing.onnx", "ONNX file missing.onnx does not exist"),
                                             ("resnet19", "unknown model 'resnet19'; built-in models: resnet18, ")])
def test_a_missing_model_is_one_line_before_any_import(tmp_path, model, fragment):
    code = ("import sys\nfrom release.cli import main\n"
            f"rc = main(['tune-model', '--model', {model!r}, '--log', {str(tmp_path / 'x.jsonl')!r}])\n"
            "print(rc, 'tvm' in sys.modules, 'torch' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.stdout.split() == ["2", "False", "False"], p.stdout + p.stderr  # nothing heavy imported
    assert p.stderr.strip().splitlines() == [p.stderr.strip()] and fragment in p.stderr


def test_help_texts_name_every_accepted_model():
    """The names come from the registries the loaders read (checked here against the factories)."""
    from release import zoo
    from release.graph import models as graph_models

    assert set(zoo.MODEL_NAMES) == set(zoo._defs())
    graph_names = graph_models.MODEL_NAMES + graph_models.FULL_SIZE_NAMES
    assert set(graph_names) >= set(graph_models._torch_models())
    env = dict(os.environ, COLUMNS="1000")  # argparse wraps at the terminal width: one line per option
    for argv, names in [(["tune-model", "--help"], zoo.MODEL_NAMES), (["bench", "--help"], zoo.MODEL_NAMES),
                        (["regal", "optimize", "--help"], graph_names), (["regal", "apply", "--help"], graph_names),
                        (["regal", "export", "--help"], graph_names)]:
        out = _cli(*argv, env=env).stdout
        assert all(n in out for n in names), (argv, [n for n in names if n not in out])


def _weights_as_inputs_onnx(path):
    """A conv + ReLU exported without its parameters: its weights are graph inputs."""
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)

        def forward(self, x):
            return torch.relu(self.conv(x))

    torch.manual_seed(0)
    torch.onnx.export(Net().eval(), (torch.randn(1, 3, 8, 8),), str(path), export_params=False, dynamo=False)
    return str(path)


def test_the_weights_are_inputs_note_comes_once(tmp_path, caplog):
    from release import relax as M
    from release.notes import forget

    forget()  # another test of this process may have said it
    model = M.load_model(_weights_as_inputs_onnx(tmp_path / "net.onnx"))
    assert not model.params
    with caplog.at_level(logging.WARNING, logger="release.relax"):
        M.extract_tasks(model, "llvm")
        M.compile_model(model, "llvm")
        M.compile_model(model, "llvm")
    notes = [r for r in caplog.records if "weights are runtime inputs" in r.getMessage()]
    assert len(notes) == 1


@pytest.mark.slow
def test_tune_model_with_weights_as_inputs_says_so_once_and_not_packed_in(tmp_path):
    onnx = _weights_as_inputs_onnx(tmp_path / "net.onnx")
    p = _cli("tune-model", "--model", onnx, "--n-trial", "2", "--compare", "", "--no-knowledge", "--number", "1",
             "--repeat", "1", "--min-repeat-ms", "0", "--n-parallel", "1", "--log", str(tmp_path / "m.jsonl"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert (p.stdout + p.stderr).count("weights are runtime inputs") == 1
    assert "(weights not packed in: main takes them as inputs after the data)" in p.stdout
    assert "weights packed in" not in p.stdout
    assert "get no trial" not in p.stdout  # 2 trials of a chunk of 8 still reach the one task


def test_warn_once_says_a_text_once_per_logger(caplog):
    from release.notes import forget, warn_once

    forget()
    log = logging.getLogger("release.test_notes")
    with caplog.at_level(logging.WARNING, logger="release.test_notes"):
        assert warn_once(log, "model %s: %d conv2d keep NCHW", "m", 3)
        assert not warn_once(log, "model %s: %d conv2d keep NCHW", "m", 3)
        assert warn_once(log, "model %s: %d conv2d keep NCHW", "other", 3)  # another text: said
    assert [r.getMessage() for r in caplog.records] == ["model m: 3 conv2d keep NCHW",
                                                        "model other: 3 conv2d keep NCHW"]
