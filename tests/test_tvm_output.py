"""What TVM and the model frontends print stays off the console: kept in a file beside the log, counted
(``release.stderr_capture.tvm_output_to`` / ``quiet``); an exported library loads without TVM's
``Scope Loaded`` lines (``release.relax.load_library``); tune-model's deploy lines run as printed; the
files kept beside a log are listed with what each is for, the PPO agents in one folder resumed with it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

from release import relax as M
from release.commands.tune_model_render import deploy_lines, kept_files, tvm_output_path
from release.stderr_capture import quiet, tvm_output_to

#: a line TVM's C++ logging writes, or a Python warning's
CHATTER = re.compile(r"^\[[\d:.]+\] \S*src/|Warning: |Renaming name", re.M)


def _pooling_onnx(path) -> str:
    """A tiny ONNX model with max and average pooling, exported from a torch module (its input is named
    ``input.1``, which TVM's ONNX frontend renames with a UserWarning)."""
    import torch

    class Pooled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.fc = torch.nn.Linear(8, 4)

        def forward(self, x):
            y = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
            return self.fc(torch.nn.functional.adaptive_avg_pool2d(y, 1).flatten(1))

    torch.manual_seed(0)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's note on its legacy exporter
        torch.onnx.export(Pooled().eval(), (torch.randn(1, 3, 8, 8),), str(path), dynamo=False,
                          input_names=["input.1"])  # as the exporter names a module's input in many models
    return str(path)


def test_import_and_extraction_of_an_onnx_model_with_pooling_print_nothing(tmp_path, capfd):
    path = _pooling_onnx(tmp_path / "pool.onnx")
    kept = tmp_path / "m.warnings.log"
    capfd.readouterr()
    with tvm_output_to(kept) as out:
        model = M.load_model(path)
        tasks = M.extract_tasks(model, "llvm")
    err = capfd.readouterr().err
    assert not CHATTER.search(err), err
    assert tasks and model.input_specs() == [("input_1", (1, 3, 8, 8), "float32")]
    text = kept.read_text()
    assert "Renaming name input.1 to input_1" in text and "# import (" in text
    assert 'Unknown schedule rule "meta_schedule.pool_' in text and "# extract (" in text
    assert out.steps["import"] >= 1 and out.steps["extract"] >= 1
    assert out.total.python["UserWarning"] >= 1
    assert any("Unknown schedule rule" in words for _, words in out.total.tvm), out.total.tvm
    assert out.summary().endswith(f" in {kept}") and "by step: import" in out.summary()
    assert model.reference_name == "ONNX Runtime"


def test_quiet_outside_a_run_changes_nothing_and_a_quiet_run_leaves_no_file(tmp_path, capfd):
    with quiet("import"):
        os.write(2, b"[18:14:51] /project/src/x.cc:1: Warning: seen\n")
    assert "Warning: seen" in capfd.readouterr().err
    with tvm_output_to(tmp_path / "w.log") as out, quiet("compile"):
        pass
    assert out.summary() == "no warnings" and not (tmp_path / "w.log").exists()


def test_progress_and_our_own_log_lines_stay_on_the_console(tmp_path):
    """On a terminal-like stderr (fd 2), a block's Python writes (a progress bar made inside it, the
    project's log lines) go to the console; TVM's fd-2 lines and Python warnings go to the file."""
    kept = tmp_path / "w.log"
    script = textwrap.dedent(f"""
        import logging, os, sys, warnings
        from release.stderr_capture import quiet, tvm_output_to
        logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
        with tvm_output_to({str(kept)!r}) as out:
            with quiet("extract"):
                print("extract 1/2 tasks", file=sys.stderr)
                logging.getLogger("release.x").warning("our own line")
                os.write(2, b"[18:14:51] /project/src/s_tir/a.cc:64: Warning: Unknown schedule rule x\\n  more\\n")
                warnings.warn("Renaming name input.1 to input_1")
        print(out.summary(), file=sys.stderr)
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "extract 1/2 tasks" in p.stderr and "WARNING release.x: our own line" in p.stderr
    assert "Unknown schedule rule x" not in p.stderr.replace("'Unknown schedule rule x'", "")
    assert "2 warnings captured (1 TVM 'Unknown schedule rule x' from s_tir/a.cc, 1 Python UserWarning; " \
           "by step: extract 2)" in p.stderr, p.stderr
    text = kept.read_text()
    assert "Unknown schedule rule x" in text and "UserWarning: Renaming name" in text and "our own" not in text


@pytest.fixture(scope="module")
def run_library(tmp_path_factory):
    """tiny-cnn's untuned build, run once in a VM and then exported, as tune-model exports the build it
    timed: ``(model, library path)``."""
    from release.stderr_capture import capture_stderr

    model = M.load_model("tiny-cnn")
    ex = M.compile_model(model, "llvm")
    M.evaluate(model, ex, number=1, repeat=1)
    lib = str(tmp_path_factory.mktemp("lib") / "cnn.so")
    with capture_stderr():
        ex.export_library(lib)
    return model, lib


def _python(code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TVM_NUM_THREADS"}  # a user's shell: none set
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)


def test_the_deploy_lines_run_as_printed_and_load_the_library_quietly(run_library):
    """tune-model's deploy code, as printed, runs the exported library on data of the model's input shape
    (checked here against PyTorch on the same data) and prints nothing on stderr, where TVM's own
    ``load_module`` of the same library prints its ``Scope Loaded`` lines (their source)."""
    import numpy as np
    import torch

    model, lib = run_library
    lines = deploy_lines(model, lib, threads=2)
    assert lines[0].startswith(f"{lib} (weights packed in), on the 2 threads it was tuned on; input 'x' (1, 3, 8, 8) "
                               "float32")
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype("float32")  # the printed code's data
    with torch.no_grad():
        want = model.torch_module(torch.from_numpy(x)).numpy()
    code = "\n".join(lines[1:]) + (
        "\nimport sys; sys.stderr.write('--\\n'); sys.stderr.flush(); tvm.runtime.load_module(" + repr(lib) + ")\n"
        "print('threads', tvm.runtime.num_threads())\n"
        f"print('error', float(np.abs(outs[0].numpy() - np.asarray({want.tolist()!r})).max()))\n")
    run = _python(code)
    assert run.returncode == 0, run.stderr
    printed, plain = run.stderr.split("--\n")
    assert printed == ""  # the deploy code: no Scope Loaded line
    assert "Scope Loaded" in plain, run.stderr  # TVM's own load prints them
    assert "[(1, 10)]" in run.stdout and "threads 2" in run.stdout, run.stdout
    assert float(run.stdout.split("error ")[1].split()[0]) < 1e-4, run.stdout


def test_the_files_beside_a_log_are_listed_with_what_each_is_for(tmp_path):
    log = str(tmp_path / "m.jsonl")
    lib = str(tmp_path / "m.so")
    agents = tmp_path / "m.agents"
    agents.mkdir()
    for name in ("a.1234567890.agent.pt", "b.0987654321.agent.pt"):
        (agents / name).write_bytes(b"")
    (tmp_path / "m.warnings.log").write_text("# import\n")
    assert tvm_output_path(log) == str(tmp_path / "m.warnings.log")
    lines = kept_files(log, lib)
    assert lines[0] == f"{log}: every measurement (the same command resumes it)"
    assert f"{agents}{os.sep}: 2 PPO agent checkpoints, one per task tuned by a PPO tuner; resumed with the log" in lines
    assert any(ln.startswith(str(tmp_path / "m.warnings.log")) for ln in lines)
    assert not any("rejections" in ln for ln in lines)  # only files that exist


FAST = ["--number", "1", "--repeat", "1", "--min-repeat-ms", "0", "--no-progress"]


@pytest.mark.slow  # two tune-model runs: ~3 min on a loaded 2-core machine; the default suite's version is above
def test_tune_model_on_an_onnx_model_with_pooling_is_quiet_and_resumes_its_agents(tmp_path):
    path = _pooling_onnx(tmp_path / "pool.onnx")
    log = tmp_path / "p.jsonl"
    cmd = ["tune-model", "--model", path, "--tuner", "release+", "--plan-size", "4", "--log", str(log),
           "--compare", "untuned,torch", *FAST]
    cli = [sys.executable, "-m", "release.cli"]
    p = subprocess.run([*cli, *cmd, "--n-trial", "16"], capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, p.stdout + p.stderr
    assert not CHATTER.search(p.stderr), p.stderr  # no TVM or frontend line on the console
    out = p.stdout
    assert "output matches ONNX Runtime's" in out and "checked against ONNX Runtime" in out
    said = next(ln for ln in out.splitlines() if ln.startswith("warnings "))
    assert "Python UserWarning" in said and "Unknown schedule rule" in said, said
    assert "Renaming name input.1" in (tmp_path / "p.warnings.log").read_text()
    agents = tmp_path / "p.agents"
    files = [n for n in os.listdir(agents) if n.endswith(".agent.pt")]
    assert files and not list(tmp_path.glob("p.*.agent.pt"))  # in the folder, none beside the log
    assert f"{agents}{os.sep}: {len(files)} PPO agent checkpoint" in out
    # the same command with a larger budget resumes the log and each task's agent from the folder
    again = subprocess.run([*cli, "-v", *cmd, "--n-trial", "24"], capture_output=True, text=True, timeout=1200)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "(resuming)" in again.stdout
    assert f"agent resumed from {agents}{os.sep}" in again.stderr, again.stderr
    assert "agent checkpoint ignored" not in again.stderr


@pytest.mark.slow  # a profile: compile, the VM's hook, ONNX Runtime and OpenVINO each in a process (~40 s)
def test_profile_is_quiet_and_counts_what_tvm_printed(tmp_path):
    """``release profile`` keeps TVM's and the frontends' output off the console as tune-model does: in
    ``<--out stem>.warnings.log``, counted in one line."""
    path = _pooling_onnx(tmp_path / "pool.onnx")
    out = tmp_path / "prof.json"
    p = subprocess.run([sys.executable, "-m", "release.cli", "profile", "--model", path, "--runs", "2",
                        "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr
    assert not CHATTER.search(p.stderr), p.stderr
    kept = tmp_path / "prof.warnings.log"
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("warnings "))
    assert f"in {kept}" in line and "by step: import" in line
    assert "Renaming name input.1 to input_1" in kept.read_text()
