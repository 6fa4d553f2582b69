"""The GPU machine's script (benchmarks/cuda), checked without a GPU.

``run_device.sh`` and ``stage.sh`` parse; ``stage.sh`` cuts wheels into parts that fit a device
call and the device calls join them and check them against the manifest (a part lost between
calls, the case of a machine that went cold, stops the last call with one line); the driver's ``env`` and ``dry-run`` steps run here up to the first CUDA
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


def _staged(tmp_path, payload: dict[str, bytes], part_bytes: int):
    """Run the real stage.sh in a scratch git checkout on ``payload`` (name -> wheel bytes),
    parts of ``part_bytes``; returns (checkout, sorted part folders, stage.sh output)."""
    repo = tmp_path / "repo"
    (repo / "benchmarks" / "cuda").mkdir(parents=True)
    for f in ("stage.sh", "run_device.sh"):
        shutil.copy(os.path.join(SCRIPTS, f), repo / "benchmarks" / "cuda")
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), repo)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for name, data in payload.items():
        (wheels / name).write_bytes(data)
    env = dict(os.environ, STAGE_FROM=str(wheels), PART_BYTES=str(part_bytes))
    p = subprocess.run(["bash", str(repo / "benchmarks" / "cuda" / "stage.sh")], capture_output=True, text=True,
                       env=env, cwd=repo, timeout=120)
    assert p.returncode == 0, p.stderr
    parts = sorted((repo / ".cuda-stage").glob("p*"), key=lambda d: int(d.name[1:]))
    return repo, parts, p.stdout


def _device_call(repo, tmp_path, part, mode):
    """One device call: a fresh copy of the checkout that holds only the carried ``part``."""
    dev = tmp_path / f"device-{part.name}-{mode}"
    shutil.copytree(repo / "benchmarks", dev / "benchmarks", dirs_exist_ok=True)
    shutil.copytree(part, dev / ".cuda-stage" / part.name, dirs_exist_ok=True)
    env = dict(os.environ, WORK=str(tmp_path / "work"), STAGE_KEEP=str(tmp_path / "keep"))
    return subprocess.run(["bash", str(dev / "benchmarks" / "cuda" / "run_device.sh"), mode],
                          capture_output=True, text=True, env=env, timeout=60)


def test_stage_cuts_wheels_into_parts_and_the_device_calls_join_them(tmp_path):
    rng = np.random.default_rng(0)
    payload = {"apache_tvm-0.27.0.post1-py3-none-any.whl": rng.bytes(2500), "tornado-6.6.1-any.whl": rng.bytes(300),
               "xgboost_cpu-3.2.0-any.whl": rng.bytes(700)}
    repo, parts, out = _staged(tmp_path, payload, part_bytes=1000)
    assert [d.name for d in parts] == ["p1", "p2", "p3", "p4"]  # 2500 B in 3 pieces + 2 small wheels
    assert all(sum(f.stat().st_size for f in d.iterdir() if f.name != "MANIFEST") <= 1000 for d in parts)
    assert (parts[-1] / "MANIFEST").exists()
    calls = [l.strip() for l in out.splitlines() if l.strip().startswith(("1.", "2.", "3.", "4."))]
    assert len(calls) == 4 and calls[0].endswith('run_device.sh stage")') and calls[-1].endswith('run_device.sh")')
    for d in parts[:-1]:
        assert _device_call(repo, tmp_path, d, "stage").returncode == 0
    p = _device_call(repo, tmp_path, parts[-1], "assemble")
    assert p.returncode == 0, p.stderr
    got = tmp_path / "work" / "wheels"
    assert sorted(os.listdir(got)) == sorted(payload)
    for name, data in payload.items():
        assert (got / name).read_bytes() == data


def test_a_part_lost_between_calls_stops_the_last_call_with_one_line(tmp_path):
    rng = np.random.default_rng(1)
    payload = {"apache_tvm-x.whl": rng.bytes(2500)}
    repo, parts, _ = _staged(tmp_path, payload, part_bytes=1000)
    assert len(parts) == 3
    assert _device_call(repo, tmp_path, parts[0], "stage").returncode == 0  # the machine went cold after call 1
    p = _device_call(repo, tmp_path, parts[-1], "assemble")
    assert p.returncode == 3
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and "2 of 3 pieces here" in err[0] and "make the calls again" in err[0]
    keep = tmp_path / "keep"
    (keep / "apache_tvm-x.whl.part01").write_bytes(b"y" * 1000)  # a stale piece from another staging
    p = _device_call(repo, tmp_path, parts[-1], "assemble")
    assert p.returncode == 3 and "sha256 differs" in p.stderr
    bare = tmp_path / "bare"
    shutil.copytree(repo / "benchmarks", bare / "benchmarks")
    p = subprocess.run(["bash", str(bare / "benchmarks" / "cuda" / "run_device.sh"), "stage"], capture_output=True,
                       text=True, timeout=60, env=dict(os.environ, STAGE_KEEP=str(keep)))
    assert p.returncode == 2 and "no .cuda-stage/p* here" in p.stderr


def test_stage_size_check_of_this_checkout():
    p = subprocess.run(["bash", os.path.join(SCRIPTS, "stage.sh"), "--check"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode in (0, 2), p.stderr
    first = p.stdout.splitlines()[0]
    assert first.startswith("working tree that travels: ") and first.endswith(" MiB")
    mib = float(first.split(": ")[1].split()[0])
    if mib > 56:  # 64 MiB a call, at least 8 of them kept for the wheels
        assert p.returncode == 2
    if p.returncode == 2:  # too large: it says so and names the folders that weigh
        assert "too large for the device tool" in p.stderr and "MiB by folder" in p.stderr


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


@pytest.mark.slow  # a tuning run on the CPU (~8 s); the quick version: test_tune_resume_and_retime_steps_run_on_the_cpu
def test_run_seconds_ends_a_tuning_run_through_tune_callbacks(tmp_path):
    """--run-seconds ends a run from inside Tuner.tune (its Deadline's on_start starts the clock),
    before the trial budget and long before the watchdog: on the H200 every run went to the
    watchdog's hard cap because the clock never started."""
    from release.measure import load_records

    base = _driver_args(tmp_path, ["random"])
    assert device_bench.main(["tune", *base, "--trials", "12", "--plan-size", "3", "--run-seconds", "0",
                              "--grace", "600"]) == 0
    r = json.load(open(tmp_path / "out" / "tune.json"))["runs"]["tiny.matmul.1|random"]
    assert r["stopped_by"] == "time cap 0 s", r  # the cap, not the budget nor the watchdog, ended it
    assert 1 <= r["trials"] <= 3  # one round (plan size 3) at most, not 12 trials: a count, whatever the load
    assert len(load_records(str(tmp_path / "logs" / "tiny.matmul.1.random.s0.jsonl"))) == r["trials"]


@pytest.mark.slow  # ~120 s (the CUDA intrinsics import); the quick version: test_tune_resume_and_retime_steps_run_on_the_cpu
def test_env_and_dry_run_up_to_the_first_cuda_launch(tmp_path):
    out = str(tmp_path / "out")
    assert device_bench.main(["env", "--out", out]) == 0
    env = json.load(open(os.path.join(out, "env.json")))
    assert env["versions"]["apache-tvm"] and json.loads(env["target"])["arch"] == "sm_90"
    assert env["cuda_compile_mode"].split()[0] in ("nvrtc", "nvcc")
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
        ok = [x for x in load_records(str(tmp_path / "logs" / f"tiny.matmul.1.{t}.s0.jsonl")) if x.ok]
        assert len(ok) == 6
        best = min(ok, key=lambda x: x.mean_cost)  # the summary is the log's best record, not any positive number
        assert r["best_ms"] == pytest.approx(best.mean_cost * 1e3)
        assert r["best_gflops"] == pytest.approx(2 * 64**3 / best.mean_cost / 1e9)  # a 64x64x64 matmul's FLOPs
    before = os.path.getmtime(tmp_path / "logs" / "tiny.matmul.1.xgb.s0.jsonl")
    assert device_bench.main(["tune", *base, "--trials", "6", "--plan-size", "3"]) == 0  # resumed: all done
    assert os.path.getmtime(tmp_path / "logs" / "tiny.matmul.1.xgb.s0.jsonl") == before
    assert device_bench.main(["retime", *base, "--rounds", "2", "--torch-number", "3"]) == 0
    k = json.load(open(tmp_path / "out" / "retime.json"))["workloads"]["tiny.matmul.1"]["kernels"]
    for name in ("random", "xgb", "torch"):
        assert k[name]["correct"] and k[name]["max_abs_err"] < 1e-3, k[name]
        assert len(k[name]["ms_per_round"]) == 2 and k[name]["median_ms"] == pytest.approx(
            float(np.median(k[name]["ms_per_round"])))
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
