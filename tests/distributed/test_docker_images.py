"""The images built and run: docker/build.py's one-line refusals, then (slow, with a Docker engine) the CPU
image built, a tuning run in a container killed and resumed from the host folder, and a container as a TVM RPC
server for tuning runs on the host, killed mid-run.

The slow tests need an engine: a ``docker`` client and a daemon. A daemon that is installed but not running is
started here (as root) and stopped afterwards; without an engine the tests skip and say why.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest

from .conftest import RELEASE, free_port, kill_tree, spawn, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = [sys.executable, os.path.join(ROOT, "docker", "build.py")]
IMAGE = "release:cpu"


def _build(args: list[str], env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(BUILD + args, capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)


def _one_line(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("docker/build.py: "), p.stderr
    return lines[0]


def _daemon_answers(env: dict | None = None) -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, env=env, timeout=60).returncode == 0


# ------------------------------------------------------------------------------- bad input: one line each

def test_no_engine_is_one_line(tmp_path):
    """No ``docker`` on PATH: what to install."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(sys.executable, bin_dir / "python3")
    line = _one_line(_build(["cpu"], env=dict(os.environ, PATH=str(bin_dir))))
    assert "no Docker engine on this machine: install one" in line and "apt-get install docker.io" in line


@pytest.mark.skipif(shutil.which("docker") is None, reason="no docker client installed (apt-get install docker.io)")
def test_no_daemon_is_one_line(tmp_path):
    """A client whose daemon does not answer (a socket nobody listens on): how to start it."""
    env = dict(os.environ, DOCKER_HOST=f"unix://{tmp_path}/no-daemon.sock")
    line = _one_line(_build(["cpu"], env=env))
    assert "its daemon is not running: start it" in line and "dockerd" in line


def test_wheelhouse_missing_a_pin_is_one_line(tmp_path):
    """A carried-in wheelhouse without one pinned package (``--offline``: nothing is downloaded)."""
    wh = tmp_path / "wheelhouse"
    wh.mkdir()
    sys.path.insert(0, os.path.join(ROOT, "docker"))
    try:
        import build as docker_build
    finally:
        sys.path.pop(0)
    pins = docker_build.pyproject_pins()
    # every pin but torch, as empty files with the wheels' names (the check reads names, pip is not run)
    for pin in pins:
        name, version = pin.split("==")
        if name != "torch":
            (wh / f"{name.replace('-', '_')}-{version}-py3-none-any.whl").write_bytes(b"")
    line = _one_line(_build(["wheelhouse", "--offline", "--wheelhouse", str(wh)]))
    assert "has no wheel of torch==2.13.0 (pinned in pyproject.toml)" in line
    assert "pip download torch==2.13.0 --no-deps -d" in line
    assert docker_build.missing_pins(str(wh), pins) == ["torch==2.13.0"]
    (wh / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    assert docker_build.missing_pins(str(wh), pins) == []  # a local version label is the pinned version


def test_base_that_cannot_be_pulled_is_one_line(docker_engine):
    """``--base`` naming an image the engine has not got and cannot pull: what to do instead."""
    line = _one_line(_build(["cpu", "--offline", "--base", f"release-test/no-such-base:{uuid.uuid4().hex[:8]}"]))
    assert "cannot pull the base image release-test/no-such-base:" in line and "docker load" in line


# -------------------------------------------------------------------------------- slow: the images for real

@pytest.fixture(scope="module")
def docker_engine(tmp_path_factory):
    """An answering Docker daemon: the running one, or one started here (and stopped at the end)."""
    if shutil.which("docker") is None:
        pytest.skip("no Docker engine installed (Debian: apt-get install docker.io); the image tests need one")
    if _daemon_answers():
        yield
        return
    dockerd = shutil.which("dockerd")
    if dockerd is None or os.geteuid() != 0:
        pytest.skip("a docker client but no running daemon, and this test cannot start one "
                    f"({'no dockerd' if dockerd is None else 'not root'}): start it (systemctl start docker)")
    log = tmp_path_factory.mktemp("dockerd") / "dockerd.log"
    proc = None
    for driver in ("overlay2", "vfs"):
        proc = subprocess.Popen([dockerd, f"--storage-driver={driver}"], stdout=open(log, "w"),
                                stderr=subprocess.STDOUT, start_new_session=True)
        t0 = time.time()
        while time.time() - t0 < 60 and proc.poll() is None and not _daemon_answers():
            time.sleep(0.5)
        if proc.poll() is None and _daemon_answers():
            break
        kill_tree(proc)
        proc = None
    if proc is None:
        tail = log.read_text().strip().splitlines()[-1:] or ["(no output)"]
        pytest.skip(f"dockerd did not start (overlay2, then vfs): {tail[0][:200]}")
    try:
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            kill_tree(proc)


@pytest.fixture(scope="module")
def cpu_image(docker_engine):
    """``release:cpu`` built by ``docker/build.py cpu`` (layers the engine already has are reused)."""
    t0 = time.time()
    p = _build(["cpu"], timeout=3600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    print(f"docker/build.py cpu: {time.time() - t0:.0f} s\n{p.stdout[-800:]}")
    return IMAGE


class Containers:
    """Containers started by a test, each removed at the end (``docker rm -f``)."""

    def __init__(self):
        self.names: list[str] = []

    def run(self, args: list[str], detach: bool = True, timeout: float = 1800) -> subprocess.CompletedProcess:
        """``docker run`` a container named here: detached (``-d``), or to its end (its output returned)."""
        name = f"release-test-{uuid.uuid4().hex[:10]}"
        self.names.append(name)
        cmd = ["docker", "run", "--name", name] + (["-d"] if detach else []) + args
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        p.name = name
        if detach:
            assert p.returncode == 0, p.stderr
        return p

    def kill(self, name: str) -> None:
        """SIGKILL the container (its tini and every process in it)."""
        subprocess.run(["docker", "kill", name], capture_output=True, timeout=60)

    def close(self) -> None:
        if self.names:
            subprocess.run(["docker", "rm", "-f"] + self.names, capture_output=True, timeout=120)


@pytest.fixture
def containers():
    c = Containers()
    yield c
    c.close()


def _records(path) -> list[dict]:
    out = []
    if os.path.exists(path):
        for line in open(path):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:  # the line a kill cut short
                pass
    return out


@pytest.mark.slow  # the image build (~5 min the first time) and a 16-trial run in a container, killed and resumed
def test_cpu_image_tunes_and_a_killed_run_resumes_from_the_host_folder(cpu_image, containers, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    log = runs / "tune.jsonl"
    n_trial = 16
    args = ["--rm", "--network", "none", "-v", f"{runs}:/work", "--user", f"{os.getuid()}:{os.getgid()}", cpu_image,
            "tune", "--workload", "resnet18.conv2d.2", "--n-trial", str(n_trial), "--log", "tune.jsonl",
            "--no-progress"]
    first = containers.run(args[1:])  # no --rm: the killed container is removed at the end
    trials = lambda: [r for r in _records(log) if not r.get("default")]  # noqa: E731
    wait_for(lambda: len(trials()) >= 4, 900, "4 records from the container", step=1.0)
    containers.kill(first.name)
    killed_at = len(trials())
    assert killed_at < n_trial, "the run ended before the kill"
    state = subprocess.run(["docker", "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", first.name],
                           capture_output=True, text=True).stdout.split()
    assert state == ["exited", "137"], state  # killed (SIGKILL), not finished

    before = len(trials())
    t0 = time.time()
    second = containers.run(args, detach=False)
    out = second.stdout + second.stderr
    assert second.returncode == 0, out[-3000:]
    assert f"(resuming {before} records)" in out, out[:2000]  # the same machine: the killed run's trials count
    recs = _records(log)
    tuned = [r for r in recs if not r.get("default")]
    assert len(tuned) == n_trial, out[-2000:]  # the killed run's records count: 16 in all, not 16 more
    assert len({tuple(r["config"]) for r in tuned}) == n_trial  # none measured twice
    assert sum(1 for r in tuned if not r["error_kind"]) >= n_trial - 2
    assert sum(bool(r.get("default")) for r in recs) == 1  # TVM's default schedule, once
    assert "best" in out.lower() and "GFLOPS" in out
    # the knowledge base landed in the mounted folder too, and every file there is the caller's
    shards = [f for f in (runs / "knowledge").rglob("*.jsonl")]
    assert shards, sorted(str(p) for p in runs.rglob("*"))
    owners = {(p.stat().st_uid, p.stat().st_gid) for p in runs.rglob("*")}
    assert owners == {(os.getuid(), os.getgid())}, owners
    print(f"killed after {killed_at} of {n_trial} trials; the resumed container ran {time.time() - t0:.0f} s")
    print("\n".join(l for l in out.splitlines() if l.strip())[-1200:])


@pytest.mark.slow  # a tracker here, the server in a container; 12 trials, the container killed and replaced
def test_container_rpc_server_serves_the_host_and_survives_a_kill(cpu_image, containers, tmp_path):
    from release.distributed.rpc import tracker_status

    port, sport, key = free_port(), free_port(), "docker-cpu"
    tracker = spawn(["rpc", "tracker", "--port", str(port)], str(tmp_path / "tracker.log"))
    tune = None
    try:
        wait_for(lambda: "listening" in (tmp_path / "tracker.log").read_text(), 180, "the tracker")
        server = ["--rm", "--network", "host", cpu_image, "server", "--key", key, "--tracker", f"127.0.0.1:{port}",
                  "--port", str(sport), "--port-end", str(sport + 1)]

        def registered():
            st = tracker_status("127.0.0.1", port)
            return key in st and st[key].free == 1

        victim = containers.run(server)
        wait_for(registered, 300, "the container's server to register", step=1.0)

        log = tmp_path / "rpc.jsonl"
        n_trial = 12
        tune = subprocess.Popen(
            RELEASE + ["tune", "--workload", "tiny.matmul.1", "--n-trial", str(n_trial), "--log", str(log),
                       "--runner", "rpc", "--rpc-key", key, "--rpc-port", str(port), "--n-parallel", "1",
                       "--number", "1", "--repeat", "2", "--min-repeat-ms", "150", "--no-progress", "--no-check"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wait_for(lambda: len(_records(log)) >= 2 or tune.poll() is not None, 600, "two records", step=0.5)
        killed_at = len(_records(log))
        containers.kill(victim.name)
        # the key has no server now: the tuner's next request waits in the tracker's queue for a new one
        containers.run(server)
        out, _ = tune.communicate(timeout=900)
        assert tune.returncode == 0, out[-3000:]
        recs = [r for r in _records(log) if not r.get("default")]
        assert len(recs) == n_trial, out[-2000:]  # every measurement, before and after the kill, is in the log
        assert len({tuple(r["config"]) for r in recs}) == n_trial
        for r in recs:
            assert (r["error_kind"] == "" and r["costs"] and all(c > 0 for c in r["costs"])) or \
                (r["error_kind"] in ("run_error", "run_timeout") and r["error_msg"]), r
        ok = [r for r in recs if not r["error_kind"]]
        assert len(ok) >= n_trial - 1, out[-2000:]  # at most the one in flight at the kill (n_parallel = 1)
        assert killed_at < n_trial
        print(f"killed the server's container after {killed_at} records; {len(ok)} of {n_trial} measured; errors: "
              f"{[(r['error_kind'], r['error_msg'][:80]) for r in recs if r['error_kind']]}")

        # a whole model over the same container's server
        wait_for(registered, 300, "the replacement server to be free", step=1.0)
        mlog = tmp_path / "model.jsonl"
        p = subprocess.run(RELEASE + ["tune-model", "--model", "tiny-cnn", "--tuner", "random", "--n-trial", "8",
                                      "--log", str(mlog), "--runner", "rpc", "--rpc-key", key, "--rpc-port",
                                      str(port), "--number", "1", "--repeat", "3", "--min-repeat-ms", "0",
                                      "--no-progress"],
                           capture_output=True, text=True, timeout=1200)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
        mrecs = [r for r in _records(mlog) if not r.get("default")]
        assert len(mrecs) == 8 and all(not r["error_kind"] for r in mrecs), p.stdout[-2000:]
        print("tune-model over the container:\n" + "\n".join(p.stdout.strip().splitlines()[-12:]))
    finally:
        if tune is not None and tune.poll() is None:
            kill_tree(tune)
        kill_tree(tracker)


@pytest.mark.slow  # the CUDA image build (~5 min the first time, its first stage shares nothing with the CPU image's)
def test_cuda_image_builds_and_tvm_compiles_a_kernel_with_nvcc(docker_engine):
    """No GPU needed: TVM generates a CUDA kernel of the knob space and nvcc (CUDA 13.0, in the image) compiles
    it for sm_90; the script would also run and check it where ``--gpus all`` gives the container a GPU."""
    t0 = time.time()
    p = _build(["cuda"], timeout=3600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    print(f"docker/build.py cuda: {time.time() - t0:.0f} s; {p.stdout.strip().splitlines()[-1]}")
    p = subprocess.run(["docker", "run", "--rm", "--network", "none", "release:cuda", "python",
                        "/usr/local/share/release/cuda_check.py"], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert "__global__" not in p.stdout  # one line per step, not the source
    lines = p.stdout.strip().splitlines()
    assert lines[0].startswith("generated: tiny.matmul.1 config")
    assert lines[1].startswith("compiled by nvcc 13.0") and "for sm_90: fatbin of" in lines[1]
    assert int(lines[1].split("fatbin of ")[1].split()[0]) > 1000
    print("\n".join(lines))
