"""Tuning for CUDA through TVM RPC, with a CPU-only server on 127.0.0.1.

The tuning machine builds CUDA kernels (CUDA C in a device module) and uploads them; a server without a GPU
cannot run them. What must hold: the CUDA build and upload path runs, every trial is logged as a
``run_error`` whose message says why, and the CLI ends with one line and exit status 1 (no
traceback). On the GPU machine the same flow runs against its own GPU in run_device.sh.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

RELEASE = [sys.executable, "-m", "release.cli"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(pred, timeout: float, what: str):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return
        time.sleep(1.0)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def _stop(proc: subprocess.Popen) -> None:
    """End a process we started and its process group (TVM servers fork per session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def cpu_rpc(tmp_path_factory):
    from release.distributed.rpc import tracker_status

    tmp = tmp_path_factory.mktemp("cuda-rpc")
    port, sport, key = _free_port(), _free_port(), "cpu-no-gpu"
    procs = []
    try:
        procs.append(subprocess.Popen(RELEASE + ["rpc", "tracker", "--port", str(port)],
                                      stdout=open(tmp / "tracker.log", "w"), stderr=subprocess.STDOUT,
                                      start_new_session=True))
        _wait(lambda: _listening(port), 120, "the tracker")
        procs.append(subprocess.Popen(RELEASE + ["rpc", "server", "--key", key, "--tracker", f"127.0.0.1:{port}",
                                                 "--port", str(sport), "--port-end", str(sport + 1)],
                                      stdout=open(tmp / "server.log", "w"), stderr=subprocess.STDOUT,
                                      start_new_session=True))

        def registered():
            st = tracker_status("127.0.0.1", port)
            return key in st and st[key].free == 1

        _wait(registered, 180, "the server to register")
        yield port, key, tmp
    finally:
        for p in reversed(procs):
            _stop(p)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.mark.slow
def test_cuda_kernels_build_upload_and_fail_to_run_with_a_clear_error(cpu_rpc, tmp_path):
    import tvm

    port, key, _ = cpu_rpc
    log = tmp_path / "cuda-rpc.jsonl"
    p = subprocess.run(RELEASE + ["tune", "--workload", "tiny.matmul.1", "--target", "cuda", "--tuner", "random",
                                  "--n-trial", "2", "--log", str(log), "--runner", "rpc", "--rpc-key", key,
                                  "--rpc-port", str(port), "--n-parallel", "1", "--timeout", "20", "--no-progress"],
                       capture_output=True, text=True, timeout=900)
    if tvm.cuda(0).exist:  # the GPU machine: the server beside us has the GPU, so the kernels run
        assert p.returncode == 0, p.stdout + p.stderr
        recs = [json.loads(l) for l in log.read_text().splitlines()]
        assert sum(r["error_kind"] == "" and len(r["costs"]) > 0 for r in recs) == 2
        return
    assert p.returncode == 1, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    err = [l for l in p.stderr.splitlines() if l.strip()]
    assert len(err) == 1 and err[0].startswith("no config ran successfully in 2 trials"), p.stderr
    recs = [json.loads(l) for l in log.read_text().splitlines()]
    ran = [r for r in recs if r["error_kind"] != "invalid"]
    assert len(ran) == 2
    for r in ran:
        assert r["error_kind"] == "run_error", r["error_msg"]
        assert r["build_s"] > 0  # built here, so the failure is the remote run's
        assert "cuda" in r["error_msg"].lower() or "device" in r["error_msg"].lower(), r["error_msg"]
        assert json.loads(r["target"])["kind"] == "cuda"
