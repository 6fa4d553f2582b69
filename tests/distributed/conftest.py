"""Real TVM RPC trackers and servers on 127.0.0.1 (subprocesses of `release rpc ...`), free ports."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

RELEASE = [sys.executable, "-m", "release.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(args: list[str], log_path: str) -> subprocess.Popen:
    """Start ``release <args>`` in its own process group, output to ``log_path``."""
    out = open(log_path, "w")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(RELEASE + args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def kill_tree(proc: subprocess.Popen | int) -> None:
    """SIGKILL a process and every descendant (TVM servers fork one process per session)."""
    pid = proc if isinstance(proc, int) else proc.pid
    try:
        p = psutil.Process(pid)
        procs = p.children(recursive=True) + [p]
    except psutil.NoSuchProcess:
        return
    for q in procs:
        try:
            q.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=10)
    if not isinstance(proc, int):
        proc.wait(timeout=10)


def wait_for(pred, timeout: float, what: str, step: float = 0.5):
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = pred()
        if v:
            return v
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


class RPCCluster:
    """A tracker and ``n`` servers with one key, all on 127.0.0.1."""

    def __init__(self, tmp, key: str = "test-cpu", n: int = 2):
        from release.distributed.rpc import tracker_status

        self.key, self.host = key, "127.0.0.1"
        self.port = free_port()
        self.tracker = spawn(["rpc", "tracker", "--port", str(self.port)], os.path.join(tmp, "tracker.log"))
        wait_for(lambda: _listening(self.port), 120, "the tracker to listen")
        self.servers = {}
        for i in range(n):
            sp = free_port()
            self.servers[sp] = spawn(["rpc", "server", "--key", key, "--tracker", f"127.0.0.1:{self.port}",
                                      "--port", str(sp), "--port-end", str(sp + 1)],
                                     os.path.join(tmp, f"server{i}.log"))

        def registered():
            st = tracker_status(self.host, self.port)
            return key in st and st[key].devices == n and st[key].free == n

        wait_for(registered, 180, f"{n} servers to register", step=1.0)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def close(self) -> None:
        for p in self.servers.values():
            kill_tree(p)
        kill_tree(self.tracker)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def rpc_cluster(tmp_path_factory):
    c = RPCCluster(str(tmp_path_factory.mktemp("rpc")))
    yield c
    c.close()
