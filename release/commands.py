"""Operator-level CLI commands (placeholder)."""


def register(subparsers) -> None:
    pass
