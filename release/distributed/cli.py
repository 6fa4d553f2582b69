"""`release rpc ...` commands (placeholder, filled in by the distributed work)."""


def register(subparsers) -> None:
    """Add the ``rpc`` command group to the top-level CLI."""
    p = subparsers.add_parser("rpc", help="TVM RPC tracker, servers and device status")
    p.set_defaults(func=lambda args: p.print_help() or 0)
