"""TVM RPC helpers: start a tracker or a server (TVM's own), and ask a tracker which devices it has.

Thin wrappers over ``tvm.rpc.tracker.Tracker`` and ``tvm.rpc.Server`` (what ``python -m
tvm.exec.rpc_tracker`` / ``rpc_server`` run), bound to 127.0.0.1 unless told otherwise, and
bounded queries of a tracker's summary so a wrong address gives one clear error in seconds,
never a hang.

Every device (one RPC server process) registers with the tracker under a *key* (for example
``"h200"``); a client asks the tracker for a session on a key and gets whichever device is free.
MetaSchedule's ``RPCRunner`` with ``max_workers = n`` keeps ``n`` sessions open at once, so
``n = free_devices(...)`` spreads one batch of measurements over every free device of the key.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import dataclass, field

from ..errors import MeasureError, error_line

logger = logging.getLogger(__name__)

#: Seconds to wait for a tracker to accept a connection and answer a summary request.
QUERY_TIMEOUT = 5.0


def parse_address(text: str, default_port: int = 9190, what: str = "tracker") -> tuple[str, int]:
    """``"HOST:PORT"`` (or ``"HOST"``) -> ``(host, port)``.

    Raises
    ------
    MeasureError
        The port is not an integer in 1..65535.
    """
    text = (text or "").strip()
    if not text:
        raise MeasureError(f"empty {what} address; give HOST:PORT such as 127.0.0.1:{default_port}")
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = text, str(default_port)
    try:
        p = int(port)
        if not 0 < p < 65536:
            raise ValueError
    except ValueError:
        raise MeasureError(f"bad {what} address {text!r}: the port must be an integer 1-65535, as in "
                           f"127.0.0.1:{default_port}") from None
    return host.strip("[]") or "127.0.0.1", p


@dataclass
class KeyStatus:
    """Devices of one key at a tracker.

    Attributes
    ----------
    key : str
    servers : list[tuple[str, int]]
        Address of every RPC server registered with this key (one per device).
    free : int
        Devices waiting for a session now (the others are busy measuring).
    pending : int
        Session requests queued for this key.
    """

    key: str
    servers: list = field(default_factory=list)
    free: int = 0
    pending: int = 0

    @property
    def devices(self) -> int:
        return len(self.servers)


def _summary(host: str, port: int, timeout: float) -> dict:
    """The tracker's raw summary, within ``timeout`` seconds (socket check, then the request in a thread)."""
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as err:
        raise MeasureError(
            f"no RPC tracker answers at {host}:{port} ({err.strerror or err}); start one with "
            f"`release rpc tracker --host {host} --port {port}`"
        ) from None
    from tvm import rpc  # imported before the clock starts (seconds on a loaded machine)

    box: dict = {}

    def ask() -> None:
        try:
            box["summary"] = rpc.connect_tracker(host, int(port)).summary()
        except Exception as err:  # noqa: BLE001 - reported below in one line
            box["error"] = err

    th = threading.Thread(target=ask, name="rpc-tracker-summary", daemon=True)
    th.start()
    th.join(timeout)
    if th.is_alive():
        raise MeasureError(f"{host}:{port} accepted a connection but did not answer as a TVM RPC tracker within "
                           f"{timeout:g} s; is it a tracker (`release rpc tracker`)?")
    if "error" in box:
        msg = str(box["error"]).strip().splitlines()
        raise MeasureError(f"{host}:{port} is not a working TVM RPC tracker: {msg[-1] if msg else box['error']!r}")
    return box["summary"]


def tracker_status(host: str, port: int, timeout: float = QUERY_TIMEOUT) -> dict[str, KeyStatus]:
    """Devices per key at the tracker ``host:port``.

    Returns
    -------
    dict[str, KeyStatus]
        By key; a key whose servers all went away is kept with ``devices == 0`` (the tracker keeps
        its queue).

    Raises
    ------
    MeasureError
        Nothing answers at ``host:port`` within ``timeout`` seconds, or it is not a tracker.
    """
    summary = _summary(host, port, timeout)
    out: dict[str, KeyStatus] = {}
    for key, q in (summary.get("queue_info") or {}).items():
        out[key] = KeyStatus(key, free=int(q.get("free", 0)), pending=int(q.get("pending", 0)))
    for info in summary.get("server_info") or []:
        k = str(info.get("key", ""))
        if not k.startswith("server:"):
            continue  # a client's connection
        key = k[len("server:"):]
        addr = info.get("addr") or ["?", 0]
        out.setdefault(key, KeyStatus(key)).servers.append((str(addr[0]), int(addr[1])))
    return out


def check_key(host: str, port: int, key: str, timeout: float = QUERY_TIMEOUT) -> KeyStatus:
    """The key's status; raise unless at least one device is registered under ``key``.

    Raises
    ------
    MeasureError
        No tracker at ``host:port`` (within ``timeout`` s), or no server registered with ``key``.
    """
    status = tracker_status(host, port, timeout)
    ks = status.get(key)
    if ks is None or ks.devices == 0:
        known = ", ".join(f"{k} ({s.devices})" for k, s in sorted(status.items()) if s.devices) or "none"
        raise MeasureError(
            f"RPC tracker {host}:{port} has no device with key {key!r} (keys with devices: {known}); start one "
            f"on the device with `release rpc server --key {key} --tracker {host}:{port}`"
        )
    return ks


def free_devices(host: str, port: int, key: str, timeout: float = QUERY_TIMEOUT) -> int:
    """How many devices of ``key`` are free now (at least 1 when the key has any device).

    Use it as the RPC runner's ``n_parallel`` so one batch is spread over every free device.

    Raises
    ------
    MeasureError
        As :func:`check_key`.
    """
    ks = check_key(host, port, key, timeout)
    return max(1, ks.free)


#: error messages of a run that lost its device (connection gone), not of a bad kernel. The
#: ``RPCCode::kReturn`` check fails when the server's session died in the middle of a call (seen when
#: the server was killed; a kernel that crashes its session gives it too, and is then re-run once).
LOST_DEVICE = ("sockchannel", "broken pipe", "connection reset", "connection refused", "connection closed",
               "socket closed", "eof", "rpccode::kreturn")


def lost_device(error_msg: str) -> bool:
    """Whether a run error says the device went away (so the config deserves another device)."""
    m = (error_msg or "").lower()
    return any(s in m for s in LOST_DEVICE)


def _retrying_runner_class():
    from ..measure import RPCRunner
    from ..measure.measure import ErrorKind

    class RetryingRPCRunner(RPCRunner):
        """``RPCRunner`` that re-submits runs whose device died mid-session to the remaining devices.

        After a batch, items whose error is a lost connection (:func:`lost_device`) are run again,
        up to ``retries`` times, while the key still has a device; otherwise their error stands
        (and is logged as ``run_error``). Kernel errors and timeouts are never retried.
        """

        def __init__(self, *args, retries: int = 1, **kwargs):
            super().__init__(*args, **kwargs)
            self.retries = int(retries)
            self.retried = 0  #: runs re-submitted so far

        def run(self, items, target):
            out = list(super().run(items, target))
            for _ in range(self.retries):
                redo = [i for i, (_, _, kind, msg) in enumerate(out)
                        if kind == ErrorKind.RUN_ERROR and lost_device(msg)]
                if not redo:
                    break
                try:
                    check_key(self.host, self.port, self.key)
                except MeasureError:
                    logger.warning("%d run(s) lost their device and no device of key %r is left; recorded as "
                                   "errors", len(redo), self.key)
                    break
                logger.info("re-running %d config(s) whose device went away", len(redo))
                self.retried += len(redo)
                again = super().run([items[i] for i in redo], target)
                for i, r in zip(redo, again):
                    out[i] = r
            return out

    return RetryingRPCRunner


def make_rpc_runner(key: str, host: str = "127.0.0.1", port: int = 9190, n_parallel: int | None = None,
                    retries: int = 1, **kwargs):
    """An RPC runner whose ``n_parallel`` defaults to the key's free devices, and which re-runs
    configs whose device died mid-session on the remaining devices (``retries`` times; 0 = plain
    :class:`release.measure.RPCRunner`).

    Parameters
    ----------
    key, host, port
        Device key and tracker address.
    n_parallel : int, optional
        Concurrent sessions; default :func:`free_devices` at construction.
    **kwargs
        ``number, repeat, min_repeat_ms, timeout, session_timeout, ...`` of ``RPCRunner``.

    Raises
    ------
    MeasureError
        No tracker, or no device with ``key`` (checked within :data:`QUERY_TIMEOUT` s).
    """
    from ..measure import RPCRunner

    if n_parallel is None:
        n_parallel = free_devices(host, port, key)
    else:
        check_key(host, port, key)
    if retries <= 0:
        return RPCRunner(key, host, port, n_parallel=n_parallel, **kwargs)
    return _retrying_runner_class()(key, host, port, n_parallel=n_parallel, retries=retries, **kwargs)


def start_tracker(host: str = "127.0.0.1", port: int = 9190, port_end: int | None = None, silent: bool = False):
    """Start TVM's RPC tracker (``tvm.rpc.tracker.Tracker``, in its own process).

    Parameters
    ----------
    host : str
        Address to bind (default 127.0.0.1: this machine only; ``0.0.0.0`` for every interface).
    port : int
        Port to bind (default 9190).
    port_end : int, optional
        Try ports ``port .. port_end-1`` (TVM's behaviour); default ``port + 1``, i.e. exactly ``port``.

    Returns
    -------
    tvm.rpc.tracker.Tracker
        ``.port`` is the bound port; ``.proc.join()`` waits for it; ``.terminate()`` stops it.

    Raises
    ------
    MeasureError
        The port (range) is taken.
    """
    from tvm.rpc.tracker import Tracker

    end = port_end if port_end is not None else port + 1
    try:
        return Tracker(host, port=port, port_end=end, silent=silent)
    except Exception as err:  # noqa: BLE001 - TVM raises ValueError/OSError from its worker
        raise MeasureError(f"cannot start an RPC tracker on {host}:{port}-{end - 1}: {error_line(err)}; pick a free "
                           "--port") from None


def start_server(key: str, tracker: str | tuple | None, host: str = "127.0.0.1", port: int = 9090,
                 port_end: int | None = None, custom_addr: str | None = None, silent: bool = False):
    """Start TVM's RPC server (``tvm.rpc.Server``) registered with a tracker under ``key``.

    Parameters
    ----------
    key : str
        Device key, e.g. ``"h200"``; clients ask the tracker for this key.
    tracker : str or (host, port)
        Tracker address ``"HOST:PORT"``; it must answer within :data:`QUERY_TIMEOUT` seconds.
    host : str
        Address the server binds (default 127.0.0.1; ``0.0.0.0`` so other machines reach it).
    port, port_end : int
        The server binds the first free port in ``port .. port_end-1`` (default ``port + 100``).
    custom_addr : str, optional
        Address reported to the tracker (for NAT or a container), default the address the tracker sees.

    Raises
    ------
    MeasureError
        Empty key, no tracker at the address, or no free port.
    """
    from tvm import rpc

    if not key:
        raise MeasureError("an RPC server needs a device key (--key), e.g. --key cpu or --key h200")
    addr = None
    if tracker:
        addr = parse_address(tracker) if isinstance(tracker, str) else (tracker[0], int(tracker[1]))
        _summary(addr[0], addr[1], QUERY_TIMEOUT)  # bounded: TVM's server would retry for a minute
    end = port_end if port_end is not None else port + 100
    # TVM's runtime caps its thread pool at half the cores unless told; raise the cap to every usable
    # core (a user's own TVM_NUM_THREADS is kept) so the tuner's evaluator can run kernels on the
    # target's num-cores threads (release.measure._worker.rpc_run_evaluator)
    from ..target import host_cores
    from ..threads import ENV

    os.environ.setdefault(ENV, str(host_cores()))
    try:
        return rpc.Server(host, port=port, port_end=end, key=key, tracker_addr=addr, custom_addr=custom_addr,
                          silent=silent)
    except Exception as err:  # noqa: BLE001
        raise MeasureError(f"cannot start an RPC server on {host}:{port}-{end - 1}: {error_line(err)}") from None

