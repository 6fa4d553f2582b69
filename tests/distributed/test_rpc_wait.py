"""``release rpc server`` started before its tracker: it waits with bounded backoff, says so in one line,
registers once the tracker listens, and gives up after the bound with one line and exit status 2."""

from __future__ import annotations

import pytest

from release.cli import main
from release.distributed import rpc
from release.distributed.rpc import QUERY_TIMEOUT, tracker_status, wait_for_tracker
from release.errors import MeasureError

from .conftest import free_port, kill_tree, spawn, wait_for


@pytest.mark.slow  # a tracker and a server (~18 s); the quick versions: the backoff and give-up tests below
def test_server_started_before_its_tracker_waits_and_registers(tmp_path):
    """A real tracker on localhost, started only once the server said it is waiting for it."""
    port, sport = free_port(), free_port()
    server = spawn(["rpc", "server", "--key", "late", "--tracker", f"127.0.0.1:{port}", "--port", str(sport),
                    "--port-end", str(sport + 1), "--wait", "600"], str(tmp_path / "server.log"))
    tracker = None
    try:
        line = f"waiting for tracker 127.0.0.1:{port} (up to 600 s)"
        # the server's own line is the event (the timeout is a hang guard: imports take up to 96 s when loaded)
        wait_for(lambda: line in (tmp_path / "server.log").read_text() or server.poll() is not None, 300,
                 "the server's waiting line", step=0.1)
        assert server.poll() is None, (tmp_path / "server.log").read_text()
        tracker = spawn(["rpc", "tracker", "--port", str(port)], str(tmp_path / "tracker.log"))

        def registered():
            if server.poll() is not None:
                return True  # reported below
            try:
                st = tracker_status("127.0.0.1", port)
            except MeasureError:  # the tracker is not listening yet
                return False
            return "late" in st and st["late"].devices == 1

        wait_for(registered, 300, "the server to register", step=0.5)
        out = (tmp_path / "server.log").read_text()
        assert server.poll() is None, out
        assert out.splitlines()[0] == line, out
        assert f"server key=late listening on 127.0.0.1:{sport}, registered at tracker 127.0.0.1:{port}" in out
        assert "Traceback" not in out
    finally:
        kill_tree(server)
        if tracker is not None:
            kill_tree(tracker)


class _Clock:
    """``time.monotonic`` and ``time.sleep`` of :mod:`release.distributed.rpc`: a sleep moves the clock on."""

    def __init__(self):
        self.now, self.sleeps = 1000.0, []

    def monotonic(self):
        return self.now

    def sleep(self, s):
        self.sleeps.append(s)
        self.now += s


def test_wait_backs_off_and_is_bounded(monkeypatch, connection_attempts):
    """Against a port nothing listens on: pauses of 0.25 s doubling to 2 s, cut at the bound; each attempt
    bounded by QUERY_TIMEOUT; then one error naming the bound (a count of attempts, not a wall-clock)."""
    clock = _Clock()
    monkeypatch.setattr(rpc, "time", clock)
    dead = free_port()
    waits = []
    with pytest.raises(MeasureError, match=f"no RPC tracker answered at 127.0.0.1:{dead} within 5 s"):
        wait_for_tracker("127.0.0.1", dead, 5.0, on_wait=lambda *a: waits.append(a))
    assert clock.sleeps == [0.25, 0.5, 1.0, 2.0, 1.25]
    assert [t for p, t in connection_attempts if p == dead] == [QUERY_TIMEOUT] * 6
    assert waits == [("127.0.0.1", dead, 5.0)]  # said once
    with pytest.raises(MeasureError, match="must be 0 or more"):
        wait_for_tracker("127.0.0.1", dead, -1)


def test_server_without_tracker_gives_up_with_one_line(monkeypatch, capsys):
    clock = _Clock()
    monkeypatch.setattr(rpc, "time", clock)
    dead = free_port()
    assert main(["rpc", "server", "--key", "k", "--tracker", f"127.0.0.1:{dead}", "--wait", "3"]) == 2
    cap = capsys.readouterr()
    assert cap.out.splitlines() == [f"waiting for tracker 127.0.0.1:{dead} (up to 3 s)"]
    err = cap.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"release: error: no RPC tracker answered at 127.0.0.1:{dead} "
                                               "within 3 s"), err
    assert "--wait" in err[0] and sum(clock.sleeps) == 3.0
