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
import time
from dataclasses import dataclass, field

from ..errors import MeasureError, error_line  # noqa: F401
from ..measure.runner import LOST_DEVICE, RetryingRPCRunner, lost_device, make_rpc_runner  # noqa: F401
from ..measure.tracker import QUERY_TIMEOUT, KeyStatus, _summary, check_key, free_devices, tracker_status  # noqa: F401

logger = logging.getLogger(__name__)

#: seconds ``release rpc server`` waits for its tracker by default (a tracker in a container takes
#: 7-10 s to listen)
TRACKER_WAIT = 60.0
#: the first pause between two attempts to reach a tracker, doubled after each attempt up to the cap
BACKOFF_FIRST, BACKOFF_CAP = 0.25, 2.0


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


def wait_for_tracker(host: str, port: int, wait: float = TRACKER_WAIT, on_wait=None,
                     timeout: float = QUERY_TIMEOUT) -> dict:
    """Wait up to ``wait`` seconds for a TVM RPC tracker to answer at ``host:port``; its summary.

    A server started right after its tracker (two containers, or two lines of a script) finds
    nothing listening for the tracker's first seconds: each attempt (a connection, then a summary
    request, each bounded by ``timeout`` seconds) that fails is followed by a pause of
    :data:`BACKOFF_FIRST` seconds, doubled after each attempt up to :data:`BACKOFF_CAP` (bounded
    exponential backoff, as TVM's own server retries its tracker connection), until ``wait`` seconds
    have passed since the first attempt.

    Parameters
    ----------
    host, port : str, int
        The tracker's address.
    wait : float
        Seconds to keep trying (default :data:`TRACKER_WAIT`); 0: one attempt.
    on_wait : callable, optional
        ``on_wait(host, port, wait)`` once, when the first attempt failed and the wait begins (the CLI
        prints one line there).
    timeout : float
        Seconds each attempt may take (default :data:`QUERY_TIMEOUT`).

    Returns
    -------
    dict
        The tracker's summary.

    Raises
    ------
    MeasureError
        ``wait`` negative; or no tracker answered within ``wait`` seconds (the last attempt's problem and
        how to start one named).
    """
    if wait < 0:
        raise MeasureError(f"--wait {wait:g}: seconds to wait for the tracker must be 0 or more")
    deadline, pause = time.monotonic() + wait, BACKOFF_FIRST
    while True:
        try:
            return _summary(host, port, timeout)
        except MeasureError as err:
            left = deadline - time.monotonic()
            if wait <= 0:
                raise
            if left <= 0:
                raise MeasureError(f"no RPC tracker answered at {host}:{port} within {wait:g} s (last attempt: {err}); "
                                   "start the tracker first, or give it longer with --wait SECONDS") from None
            if on_wait is not None and pause == BACKOFF_FIRST:
                on_wait(host, port, wait)
            time.sleep(min(pause, left))
            pause = min(2 * pause, BACKOFF_CAP)


def start_server(key: str, tracker: str | tuple | None, host: str = "127.0.0.1", port: int = 9090,
                 port_end: int | None = None, custom_addr: str | None = None, silent: bool = False,
                 wait: float = 0.0, on_wait=None):
    """Start TVM's RPC server (``tvm.rpc.Server``) registered with a tracker under ``key``.

    Parameters
    ----------
    key : str
        Device key, e.g. ``"h200"``; clients ask the tracker for this key.
    tracker : str or (host, port)
        Tracker address ``"HOST:PORT"``; it must answer within ``wait`` seconds (each attempt bounded by
        :data:`QUERY_TIMEOUT` seconds).
    host : str
        Address the server binds (default 127.0.0.1; ``0.0.0.0`` so other machines reach it).
    port, port_end : int
        The server binds the first free port in ``port .. port_end-1`` (default ``port + 100``).
    custom_addr : str, optional
        Address reported to the tracker (for NAT or a container), default the address the tracker sees.
    wait : float
        Seconds to wait for the tracker to answer (:func:`wait_for_tracker`; default 0: one attempt).
    on_wait : callable, optional
        ``on_wait(host, port, wait)`` once when the wait begins.

    Raises
    ------
    MeasureError
        Empty key, no tracker at the address within ``wait`` seconds, or no free port.
    """
    from tvm import rpc

    if not key:
        raise MeasureError("an RPC server needs a device key (--key), e.g. --key cpu or --key h200")
    addr = None
    if tracker:
        addr = parse_address(tracker) if isinstance(tracker, str) else (tracker[0], int(tracker[1]))
        # bounded: TVM's server would retry for a minute, silently
        wait_for_tracker(addr[0], addr[1], wait, on_wait=on_wait)
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

