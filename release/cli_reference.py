"""The command-line reference (``docs/reference/cli.md``), rendered from the parser itself.

Every command and sub-command of ``release`` is printed with argparse's own help formatter, so the
reference says exactly what ``release COMMAND --help`` says: usage, options, defaults. Regenerate
the committed file after changing an option::

    python -m release.cli_reference > docs/reference/cli.md

``tests/test_cli_reference.py`` fails when the committed file differs from :func:`render`.
"""

from __future__ import annotations

import argparse
import functools
import sys

#: Column width of the rendered help (fixed, so the output does not depend on the terminal).
WIDTH = 100

REGENERATE = "python -m release.cli_reference > docs/reference/cli.md"


def _commands(parser: argparse.ArgumentParser):
    """``parser`` and every sub-command parser below it, depth first, in registration order."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases map to the same parser
                yield from _commands(sub)


def _help(parser: argparse.ArgumentParser, width: int) -> str:
    """``parser.format_help()`` with its own formatter class at a fixed width."""
    formatter_class = parser.formatter_class
    parser.formatter_class = functools.partial(formatter_class, width=width)
    try:
        return parser.format_help()
    finally:
        parser.formatter_class = formatter_class


def python_version() -> str:
    """``major.minor`` of this Python: argparse's layout can differ between versions."""
    return "%d.%d" % sys.version_info[:2]


def _anchor(prog: str) -> str:
    return prog.replace(" ", "-")


def render(width: int = WIDTH) -> str:
    """The Markdown reference of every ``release`` command, from :func:`release.cli.build_parser`."""
    from .cli import build_parser

    parsers = list(_commands(build_parser()))
    out = [
        "# Command-line reference",
        "",
        f"<!-- Generated from the argparse parser by `{REGENERATE}` (Python {python_version()}'s argparse); "
        "do not edit by hand. -->",
        "",
        "Every command's `--help`, as argparse prints it. Tutorials that use them: "
        "[operator](../tutorials/operator.md), [model](../tutorials/model.md), "
        "[remote and Ray](../tutorials/remote-and-ray.md), [knowledge](../tutorials/knowledge.md), "
        "[REGAL](../tutorials/regal.md).",
        "",
    ]
    out += [f"- [`{p.prog}`](#{_anchor(p.prog)})" for p in parsers]
    for p in parsers:
        out += ["", f"## {p.prog}", "", "```text", _help(p, width).rstrip("\n"), "```"]
    return "\n".join(out) + "\n"


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
