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

from ..errors import MeasureError, error_line  # noqa: F401
from ..measure.runner import LOST_DEVICE, RetryingRPCRunner, lost_device, make_rpc_runner  # noqa: F401
from ..measure.tracker import QUERY_TIMEOUT, KeyStatus, _summary, check_key, free_devices, tracker_status  # noqa: F401

logger = logging.getLogger(__name__)

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

