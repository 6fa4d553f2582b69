"""docs/reference/cli.md is what the parser prints (``release.cli_reference``), not a stale copy."""

import os
import re

import pytest

from release import cli_reference

DOC = os.path.join(os.path.dirname(__file__), os.pardir, "docs", "reference", "cli.md")


def test_committed_cli_reference_is_current():
    with open(DOC, encoding="utf-8") as f:
        committed = f.read()
    made_with = re.search(r"\(Python (\d+\.\d+)'s argparse\)", committed)
    if made_with and made_with.group(1) != cli_reference.python_version():
        pytest.skip(f"docs/reference/cli.md was rendered with Python {made_with.group(1)}'s argparse, this is "
                    f"{cli_reference.python_version()} (argparse lays out help differently across versions)")
    assert committed == cli_reference.render(), (
        "docs/reference/cli.md is stale (an option, default or help text changed): regenerate it with "
        f"`{cli_reference.REGENERATE}`")


def test_every_command_is_in_the_reference():
    """Each command and sub-command has its section, with argparse's usage line."""
    text = cli_reference.render()
    for prog in ("release tune", "release tune-model", "release bench", "release regal optimize",
                 "release rpc server", "release knowledge add", "release profile"):
        assert f"\n## {prog}\n" in text
        assert f"usage: {prog} " in text
