"""`release regal ...` subcommands (placeholder, filled in by the REGAL work)."""


def register(subparsers) -> None:
    """Add the ``regal`` command to the top-level CLI's ``subparsers``."""
    p = subparsers.add_parser("regal", help="REGAL graph optimization (op order and device placement)")
    p.set_defaults(func=lambda args: p.print_help() or 0)
