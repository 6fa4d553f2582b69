"""The GPU machine's script (benchmarks/cuda), checked without a GPU.

``run_device.sh`` and ``stage.sh`` parse; the wheel parts are joined and checked against their
manifest (and a missing part, the case of a machine that went cold between the two calls, stops
the run with one line); the driver's ``env`` and ``dry-run`` steps run here up to the first CUDA
launch on the smallest workload; its ``tune`` (resumable) and ``retime`` steps run end to end with
this CPU as the device; its PyTorch operators equal each workload's reference. Slow: the watchdog
that ends a search which does not return (a subprocess, ~25 s).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(ROOT, "benchmarks", "cuda")
sys.path.insert(0, SCRIPTS)

import device_bench  # noqa: E402


@pytest.mark.parametrize("script", ["run_device.sh", "stage.sh"])
def test_scripts_parse(script):
    p = subprocess.run(["bash", "-n", os.path.join(SCRIPTS, script)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def _fake_checkout(tmp_path):
    """A directory laid out like the repository root with a copy of run_device.sh."""
    repo = tmp_path / "repo"
    (repo / "benchmarks" / "cuda").mkdir(parents=True)
    shutil.copy(os.path.join(SCRIPTS, "run_device.sh"), repo / "benchmarks" / "cuda")
    return repo


def _stage(repo, payload: dict[str, bytes], split: str):
    """Lay out .cuda-stage/{a,b} the way stage.sh does: the wheel named ``split`` in two parts."""
    a, b = repo / ".cuda-stage" / "a", repo / ".cuda-stage" / "b"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    lines = []
    for name, data in payload.items():
        if name == split:
            (a / f"{name}.part00").write_bytes(data[:1000])
            (b / f"{name}.part01").write_bytes(data[1000:])
            parts = 2
        else:
            (b / name).write_bytes(data)
            parts = 0
        lines.append(f"{hashlib.sha256(data).hexdigest()} {name} {parts}")
    (b / "MANIFEST").write_text("\n".join(lines) + "\n")
    return a, b


def _run(repo, tmp_path, *args):
    env = dict(os.environ, WORK=str(tmp_path / "work"), STAGE_KEEP=str(tmp_path / "keep"))
    return subprocess.run(["bash", str(repo / "benchmarks" / "cuda" / "run_device.sh"), *args],
                          capture_output=True, text=True, env=env, timeout=60)


def test_wheel_parts_are_joined_and_checked(tmp_path):
    rng = np.random.default_rng(0)
    payload = {"apache_tvm-0.27.0.post1-py3-none-any.whl": rng.bytes(2500), "tornado-6.6.1-any.whl": rng.bytes(300)}
    repo = _fake_checkout(tmp_path)
    _stage(repo, payload, split="apache_tvm-0.27.0.post1-py3-none-any.whl")
    p = _run(repo, tmp_path, "assemble")
    assert p.returncode == 0, p.stderr
    for name, data in payload.items():
        assert (tmp_path / "work" / "wheels" / name).read_bytes() == data
    assert sorted(os.listdir(tmp_path / "work" / "wheels")) == sorted(payload)


def test_part_a_kept_by_the_stage_call_is_found_in_the_next_call(tmp_path):
    payload = {"apache_tvm-x.whl": bytes(range(256)) * 10}
    repo = _fake_checkout(tmp_path)
    a, _ = _stage(repo, payload, split="apache_tvm-x.whl")
    assert _run(repo, tmp_path, "stage").returncode == 0
    shutil.rmtree(a)  # call 2 carries only part b; part a survives in STAGE_KEEP
    p = _run(repo, tmp_path, "assemble")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "work" / "wheels" / "apache_tvm-x.whl").read_bytes() == payload["apache_tvm-x.whl"]


def test_missing_or_corrupt_part_stops_with_one_line(tmp_path):
    payload = {"apache_tvm-x.whl": b"x" * 3000}
    repo = _fake_checkout(tmp_path)
    a, b = _stage(repo, payload, split="apache_tvm-x.whl")
    shutil.rmtree(a)  # the machine went cold between the calls
    p = _run(repo, tmp_path, "assemble")
    assert p.returncode == 3
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and "1 of 2 parts" in err[0] and "run call 1 (stage) again" in err[0]
    a.mkdir()
    (a / "apache_tvm-x.whl.part00").write_bytes(b"y" * 1000)  # a stale part from another staging
    p = _run(repo, tmp_path, "assemble")
    assert p.returncode == 3 and "sha256 differs" in p.stderr
    shutil.rmtree(repo / ".cuda-stage")
    p = _run(repo, tmp_path, "stage")
    assert p.returncode == 2 and ".cuda-stage/a is missing" in p.stderr


def test_stage_size_check_reports_each_call():
    p = subprocess.run(["bash", os.path.join(SCRIPTS, "stage.sh"), "--check"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode in (0, 2), p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("working tree that travels: ") and lines[0].endswith(" MiB")
    assert lines[1].startswith("call 1 (tree + .cuda-stage/a): ") and lines[2].startswith("call 2 ")
    if p.returncode == 2:  # too large: it says so and names the folders that weigh
        assert "too large for the device tool" in p.stderr


@pytest.mark.parametrize("workload", ["tiny.matmul.1", "bert-base.dense.1", "tiny.conv2d.1"])
def test_torch_operator_equals_the_workload_reference(workload):
    import torch

    from release.task import create_task

    task = create_task(workload, "llvm")  # the reference does not depend on the target
    inputs = task.random_inputs(1)
    f, _ = device_bench.torch_op(workload, inputs, "cpu")
    with torch.no_grad():
        got = f().numpy()
    np.testing.assert_allclose(got, task.reference(inputs), rtol=1e-4, atol=1e-4)


def test_deadline_callback_ends_a_run_after_its_time():
    d = device_bench.Deadline(0.0)
    d(None, [], [])  # not started: no deadline yet
    d.start(None, 10)
    with pytest.raises(device_bench.RunDeadline):
        d(None, [], [])
    d = device_bench.Deadline(3600.0)
    d.start(None, 10)
    d(None, [], [])


def test_env_and_dry_run_up_to_the_first_cuda_launch(tmp_path):
    out = str(tmp_path / "out")
    assert device_bench.main(["env", "--out", out]) == 0
    env = json.load(open(os.path.join(out, "env.json")))
    assert env["versions"]["apache-tvm"] and json.loads(env["target"])["arch"] == "sm_90"
    assert env["cuda_compile_mode"] in ("nvrtc", "nvcc")
    rc = device_bench.main(["dry-run", "--out", out, "--workloads", "tiny.matmul.1", "--tuners", "xgb",
                            "--n-build", "1", "--no-pool", "--plan-size", "8"])
    res = json.load(open(os.path.join(out, "dryrun.json")))
    assert rc == 0 and res["ok"], res
    w = res["workloads"]["tiny.matmul.1"]
    assert w["valid"] == 1 and w["has_global_kernel"] and w["n_knobs"] >= 3
    assert w["tuners"]["xgb"]["proposed"] >= 1
    assert w["torch_ref_max_abs_err"] < 1e-3
    if env["tvm_cuda"]["exist"]:
        assert w["device_check"].startswith("GPU present")
    else:
        assert w["device_check"].startswith("stops before the first CUDA launch: no cuda device")


def _driver_args(tmp_path, tuners):
    return ["--out", str(tmp_path / "out"), "--logs", str(tmp_path / "logs"), "--target", "llvm",
            "--workloads", "tiny.matmul.1", "--tuners", *tuners, "--n-parallel", "1", "--number", "1",
            "--repeat", "2", "--min-repeat-ms", "0"]


def test_tune_resume_and_retime_steps_run_on_the_cpu(tmp_path):
    """The GPU run's tune and retime steps, with this CPU as the device (llvm target)."""
    from release.measure import load_records

    base = _driver_args(tmp_path, ["random", "xgb"])
    assert device_bench.main(["tune", *base, "--trials", "6", "--plan-size", "3", "--run-seconds", "900"]) == 0
    runs = json.load(open(tmp_path / "out" / "tune.json"))["runs"]
    for t in ("random", "xgb"):
        r = runs[f"tiny.matmul.1|{t}"]
        assert (r["trials"], r["ok"], r["stopped_by"]) == (6, 6, "budget"), r
        assert r["best_gflops"] > 0 and r["best_ms"] > 0
        assert len([x for x in load_records(str(tmp_path / "logs" / f"tiny.matmul.1.{t}.s0.jsonl")) if x.ok]) == 6
    before = os.path.getmtime(tmp_path / "logs" / "tiny.matmul.1.xgb.s0.jsonl")
    assert device_bench.main(["tune", *base, "--trials", "6", "--plan-size", "3"]) == 0  # resumed: all done
    assert os.path.getmtime(tmp_path / "logs" / "tiny.matmul.1.xgb.s0.jsonl") == before
    assert device_bench.main(["retime", *base, "--rounds", "2", "--torch-number", "3"]) == 0
    k = json.load(open(tmp_path / "out" / "retime.json"))["workloads"]["tiny.matmul.1"]["kernels"]
    for name in ("random", "xgb", "torch"):
        assert k[name]["correct"] and k[name]["max_abs_err"] < 1e-3, k[name]
        assert len(k[name]["ms_per_round"]) == 2 and k[name]["median_ms"] > 0
    assert k["torch"]["speedup_vs_torch_fp32"] == 1.0


@pytest.mark.slow
def test_watchdog_ends_a_run_that_does_not_return_and_records_it(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, os.path.join(SCRIPTS, "device_bench.py"), "tune",
                        *_driver_args(tmp_path, ["random"]), "--trials", "4", "--run-seconds", "0", "--grace", "0.2"],
                       capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == device_bench.HARD_CAP_EXIT, p.stdout + p.stderr
    r = json.load(open(tmp_path / "out" / "tune.json"))["runs"]["tiny.matmul.1|random"]
    assert r["stopped_by"].startswith("hard cap: no result for 0 s past the 0 s cap")
    assert "ended by the watchdog" in p.stdout
