"""Shared fixtures: real TVM tasks and measurement options sized for CI (2 cores)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def private_knowledge_base(tmp_path_factory, monkeypatch):
    """Each test (and every CLI it starts) reads and writes a fresh, empty knowledge base, never the
    user's cache nor another test's: ``RELEASE_KNOWLEDGE`` points to a new folder (tests that need
    another set their own), and the shipped pack is off (``RELEASE_KNOWLEDGE_PACK=off``)."""
    path = str(tmp_path_factory.mktemp("knowledge"))
    monkeypatch.setenv("RELEASE_KNOWLEDGE", path)
    # the shipped pack would warm every "empty base" test; the pack's own tests turn it back on
    monkeypatch.setenv("RELEASE_KNOWLEDGE_PACK", "off")
    return path


@pytest.fixture(scope="session")
def matmul_task():
    """A 64x64x64 float32 matmul on this CPU (``tiny.matmul.1``); its knob space is built once."""
    from release.task import create_task

    task = create_task("tiny.matmul.1", "llvm")
    task.config_space  # noqa: B018 - build once per session
    return task


@pytest.fixture(scope="session")
def conv_task():
    """``resnet18.conv2d.2`` (64->64, 56x56, 3x3) on this CPU, knob space built once."""
    from release.task import create_task

    task = create_task("resnet18.conv2d.2", "llvm")
    task.config_space  # noqa: B018
    return task


@pytest.fixture(scope="session")
def fast_measure():
    """Local builder (2 workers) and a quick runner (number 1, repeat 2): correctness, not speed."""
    from release.measure import LocalBuilder, LocalRunner, measure_option

    opt = measure_option(LocalBuilder(n_parallel=2, timeout=60), LocalRunner(number=1, repeat=2, min_repeat_ms=0,
                                                                              cooldown_interval=0.0))
    yield opt
    opt["builder"].close()
    opt["runner"].close()


@pytest.fixture
def one_torch_thread():
    """PPO on one thread (the machine is shared), set for each test and restored, not at import."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def two_layer_model():
    """A tiny PyTorch model (conv2d 3->8 on 6x6 + ReLU, then a 288->5 linear layer), imported to Relax
    (``release.relax.from_pytorch``), seed 0: whole-model tuning on real builds in seconds."""
    import torch

    from release import relax as M

    class TwoLayers(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.fc = torch.nn.Linear(8 * 6 * 6, 5)

        def forward(self, x):
            return self.fc(torch.relu(self.conv(x)).flatten(1))

    torch.manual_seed(0)
    return M.from_pytorch(TwoLayers().eval(), (torch.randn(1, 3, 6, 6),), name="two-layers")


@pytest.fixture
def connection_attempts(monkeypatch):
    """Every ``socket.create_connection`` of the test, made as usual and noted as ``(port, timeout)``.

    A bad address answers "in bounded time" when each refusal took one attempt with a finite
    timeout: a count, which a loaded machine does not change (a wall-clock limit would)."""
    import socket

    calls: list = []
    real = socket.create_connection

    def noted(address, timeout=socket._GLOBAL_DEFAULT_TIMEOUT, *args, **kwargs):
        calls.append((int(address[1]), timeout))
        return real(address, timeout, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", noted)
    return calls


class Result:
    """What a run of the CLI gave: ``returncode``, ``stdout``, ``stderr`` (as ``subprocess.run``)."""

    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def release_here(capsys, *args, env=None):
    """``release ARGS`` in this process (``release.cli.main``) with stdout and stderr captured: for input
    refused before any work, without a new interpreter's TVM and PyTorch imports.

    ``env`` adds environment variables for the run; the environment is restored afterwards (a command
    sets ``TVM_NUM_THREADS`` for its workers: none of it leaks into later tests). Returns a :class:`Result`.
    """
    import os

    from release.cli import main

    saved = dict(os.environ)
    capsys.readouterr()
    try:
        os.environ.update(env or {})
        try:
            rc = main(list(args))
        except SystemExit as e:  # argparse's own errors
            rc = e.code if isinstance(e.code, int) else 2
    finally:
        os.environ.clear()
        os.environ.update(saved)
    out = capsys.readouterr()
    return Result(rc, out.out, out.err)



@pytest.fixture(scope="session")
def tiny_cnn_run(tmp_path_factory):
    """One run of the documented whole-model command on a model of tiny operators, shared by the tests that
    read its output: ``release tune-model --model tiny-cnn`` (its default layout, NCHWc on a CPU), 16 random
    trials, compared with the untuned build and PyTorch, progress on and stderr a pipe (a log file, CI).
    Returns ``(log path, subprocess.CompletedProcess)``; the run must have succeeded."""
    import subprocess
    import sys

    log = tmp_path_factory.mktemp("tiny-cnn-run") / "m.jsonl"
    p = subprocess.run([sys.executable, "-m", "release.cli", "tune-model", "--model", "tiny-cnn", "--tuner", "random",
                        "--n-trial", "16", "--compare", "untuned,torch", "--log", str(log),
                        "--number", "1", "--repeat", "3", "--min-repeat-ms", "0"],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    return log, p
