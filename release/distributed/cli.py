"""``release rpc tracker | server | status``: TVM's RPC tracker and servers, and devices per key.

``release rpc tracker`` and ``release rpc server`` run in the foreground until interrupted; each
prints one line with the address it bound (so scripts can read the port).
"""

from __future__ import annotations

import argparse
import sys

from .rpc import TRACKER_WAIT


def register(subparsers) -> None:
    """Add the ``rpc`` command group to the top-level CLI."""
    p = subparsers.add_parser("rpc", help="TVM RPC tracker, servers and device status")
    p.set_defaults(func=lambda args: p.print_help() or 0)
    sub = p.add_subparsers(dest="rpc_command", metavar="RPC_COMMAND")
    fmt = argparse.ArgumentDefaultsHelpFormatter

    t = sub.add_parser("tracker", help="run TVM's RPC tracker (foreground)", formatter_class=fmt)
    t.add_argument("--host", default="127.0.0.1", help="address to bind; 0.0.0.0 to accept other machines")
    t.add_argument("--port", type=int, default=9190, help="port to bind")
    t.add_argument("--port-end", type=int, default=None, help="try ports up to this one (exclusive); default: only --port")
    t.set_defaults(func=cmd_tracker)

    s = sub.add_parser("server", help="run TVM's RPC server for this machine's device (foreground)",
                       formatter_class=fmt)
    s.add_argument("--key", required=True, help="device key clients ask the tracker for (e.g. cpu, h200)")
    s.add_argument("--tracker", required=True, help="tracker address HOST:PORT")
    s.add_argument("--host", default="127.0.0.1", help="address to bind; 0.0.0.0 to accept other machines")
    s.add_argument("--port", type=int, default=9090, help="first port to try")
    s.add_argument("--port-end", type=int, default=None, help="last port to try (exclusive); default --port + 100")
    s.add_argument("--custom-addr", default=None, help="address reported to the tracker (NAT, containers)")
    s.add_argument("--wait", type=float, default=TRACKER_WAIT, metavar="SECONDS",
                   help="seconds to wait for the tracker to answer (retried with backoff; 0: one attempt)")
    s.set_defaults(func=cmd_server)

    q = sub.add_parser("status", help="devices per key at a tracker", formatter_class=fmt)
    q.add_argument("--tracker", default="127.0.0.1:9190", help="tracker address HOST:PORT")
    q.add_argument("--key", default=None, help="only this key; exit status 2 if it has no device")
    q.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the tracker")
    q.set_defaults(func=cmd_status)


def cmd_tracker(args) -> int:
    from .rpc import start_tracker

    tr = start_tracker(args.host, args.port, args.port_end, silent=True)
    print(f"tracker listening on {args.host}:{tr.port}", flush=True)
    try:
        tr.proc.join()
    finally:
        tr.terminate()
    return 0


def cmd_server(args) -> int:
    from .rpc import parse_address, start_server

    def waiting(host, port, wait):
        print(f"waiting for tracker {host}:{port} (up to {wait:g} s)", flush=True)

    addr = parse_address(args.tracker)
    srv = start_server(args.key, addr, args.host, args.port, args.port_end, args.custom_addr, silent=True,
                       wait=args.wait, on_wait=waiting)
    print(f"server key={args.key} listening on {args.host}:{srv.port}, registered at tracker {addr[0]}:{addr[1]}",
          flush=True)
    try:
        srv.proc.join()
    finally:
        srv.terminate()
    return 0


def cmd_status(args) -> int:
    from .rpc import check_key, parse_address, tracker_status

    host, port = parse_address(args.tracker)
    if args.key:
        check_key(host, port, args.key, args.timeout)
    status = tracker_status(host, port, args.timeout)
    rows = [s for k, s in sorted(status.items()) if args.key in (None, k)]
    print(f"tracker {host}:{port}: {sum(s.devices for s in rows)} device(s) under {len(rows)} key(s)")
    if not rows:
        return 0
    width = max(12, *(len(s.key) for s in rows))
    print(f"{'key':<{width}} {'devices':>7} {'free':>5} {'pending':>7}  servers")
    for s in rows:
        addrs = ", ".join(f"{h}:{p}" for h, p in s.servers) or "-"
        print(f"{s.key:<{width}} {s.devices:>7} {s.free:>5} {s.pending:>7}  {addrs}")
    sys.stdout.flush()
    return 0
