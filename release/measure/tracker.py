"""Bounded queries of a TVM RPC tracker: which devices a key has, and how many are free.

Used by the RPC runners (:mod:`release.measure.runner`) and by :mod:`release.distributed.rpc`
(which re-exports these names); a wrong address gives one clear error in seconds, never a hang.
"""

from __future__ import annotations

import logging
import socket
import threading
from dataclasses import dataclass, field

from ..errors import MeasureError

logger = logging.getLogger(__name__)

#: Seconds to wait for a tracker to accept a connection and answer a summary request.
QUERY_TIMEOUT = 5.0



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
