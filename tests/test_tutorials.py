"""The tutorials' code blocks run: every ```bash and ```python block of docs/tutorials/*.md.

Conventions of the tutorials (the parser below reads them):

- A block is run in order with the tutorial's other blocks, in one fresh folder (``tmp_path``), so a block may
  read what an earlier one wrote (``r.jsonl``); each ```python block is a complete program of its own.
- ``<!-- not run: REASON -->`` on the line before a block: it is not run (it needs a GPU, Docker, another
  machine, or hours); fewer than a third of all blocks may be marked so.
- ``<!-- quick -->`` on the line before a block: it is also run by the default suite's quick version of the
  tutorial (cheap, self-contained blocks); the whole tutorial runs under ``@pytest.mark.slow``.

Commands are written ``release ...``: a ``release`` on ``PATH`` runs this checkout's package
(``python -m release.cli``). The knowledge base is the test's private one (``RELEASE_KNOWLEDGE``, conftest).
The RPC examples' ports (9190, 9090) are replaced by free ones.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import release
from conftest import release_here

TUTORIALS = ["operator", "model", "deploy", "remote-and-ray", "knowledge", "regal"]
DOCS = Path(__file__).resolve().parent.parent / "docs" / "tutorials"
REPO = Path(release.__file__).resolve().parent.parent  # the checkout whose package this test imports
LANGS = {"bash": "bash", "sh": "bash", "shell": "bash", "python": "python"}
#: per tutorial, environment variables set (a value) or removed (None) for its blocks
ENV = {"knowledge": {"RELEASE_KNOWLEDGE_PACK": None}}  # the knowledge tutorial shows the shipped pack
PORTS = ("9190", "9090")  # the RPC examples' tracker and server ports
BLOCK_TIMEOUT = 900


@dataclass
class Block:
    tutorial: str
    line: int  # 1-based line of the opening fence
    lang: str  # "bash" or "python"
    code: str
    note: str  # "", "quick" or "not run: REASON"

    @property
    def skipped(self) -> bool:
        return self.note.startswith("not run")

    def __str__(self) -> str:
        return f"docs/tutorials/{self.tutorial}.md:{self.line} ({self.lang})"


def blocks(name: str) -> list[Block]:
    """The ```bash / ```python blocks of one tutorial, with the note of the HTML comment just before each."""
    out, lines = [], (DOCS / f"{name}.md").read_text(encoding="utf-8").splitlines()
    previous, i = "", 0
    while i < len(lines):
        fence = re.match(r"^```\s*(\w*)\s*$", lines[i])
        if not fence:
            if lines[i].strip():
                previous = lines[i].strip()
            i += 1
            continue
        start, body = i, []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        i += 1
        lang = LANGS.get(fence.group(1))
        note = re.fullmatch(r"<!--\s*(.*?)\s*-->", previous)
        if lang:
            out.append(Block(name, start + 1, lang, "\n".join(body) + "\n", note.group(1) if note else ""))
        previous = ""
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A folder to run blocks in, a ``release`` command on PATH that runs this checkout, and the environment."""
    work, bin_dir = tmp_path / "work", tmp_path / "bin"
    work.mkdir()
    bin_dir.mkdir()
    shim = bin_dir / "release"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m release.cli "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    # build and run workers (new interpreters) import this checkout's package too
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    return work


def _environment(monkeypatch, tutorial: str) -> None:
    for key, value in ENV.get(tutorial, {}).items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)


def _run(block: Block, work: Path, ports: dict[str, str], groups: list) -> None:
    """Run one block in ``work`` as a user would (bash, or a new Python), in a process group of its own.

    What the block leaves running (a tracker or server started with ``&``) keeps running for the next blocks,
    as in a user's shell; ``groups`` collects the groups to end when the tutorial is done."""
    code = block.code
    for old, new in ports.items():
        code = re.sub(rf"\b{old}\b", new, code)
    stem = work / f"_block_{block.line}"
    script = stem.with_suffix(".sh" if block.lang == "bash" else ".py")
    script.write_text(code)
    argv = ["bash", "-euo", "pipefail", str(script)] if block.lang == "bash" else [sys.executable, str(script)]
    # output to a file, not a pipe: a background service keeps its copy open after the block ends
    with open(stem.with_suffix(".out"), "w+") as out:
        proc = subprocess.Popen(argv, cwd=work, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        groups.append(proc.pid)
        try:
            proc.wait(timeout=BLOCK_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        out.seek(0)
        text = out.read()
    assert proc.returncode == 0, f"{block} failed (exit {proc.returncode}):\n{code}\n--- output ---\n{text[-6000:]}"


@pytest.fixture
def process_groups():
    """Process groups of the blocks run; every process left in them is ended after the test."""
    groups: list = []
    yield groups
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _release_commands(code: str) -> list[list[str]] | None:
    """The ``release`` command lines of a block with nothing else of the shell in it, else None."""
    joined = re.sub(r"\\\n", " ", code)
    commands = []
    for line in joined.splitlines():
        if re.search(r"[|&;<>$`]", line.split("#", 1)[0]):
            return None
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] != "release":
            return None
        commands.append(words[1:])
    return commands


def _run_in_process(block: Block, capsys) -> bool:
    """Run a block of plain ``release`` commands in this process (no new interpreter's imports); False if it
    is not one. The current folder is the workspace."""
    commands = _release_commands(block.code) if block.lang == "bash" else None
    if commands is None:
        return False
    for argv in commands:
        r = release_here(capsys, *argv)
        assert r.returncode == 0, f"{block}: release {' '.join(argv)} (exit {r.returncode}):\n{r.stdout[-3000:]}{r.stderr[-3000:]}"
    return True


def _command_lines(code: str) -> list[list[str]]:
    """Every ``release ...`` command of a bash block, as argv after ``release``: also inside ``until ...;
    do``, after ``VAR=value``, before ``&``, ``||`` or ``#``; a ``$(...)`` counts as one word."""
    joined = re.sub(r"\\\n", " ", code)
    joined = re.sub(r"\$\([^)]*\)", "X", joined)
    out = []
    for line in joined.splitlines():
        for part in re.split(r"&&|\|\||[;&|]|\b(?:until|while|do|done|then)\b", line.split(" #", 1)[0]):
            words = shlex.split(part, comments=True)
            while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                words = words[1:]
            if words and words[0] == "release":
                out.append(words[1:])
    return out


def test_tutorial_commands_parse(capsys):
    """Every ``release`` command of every tutorial, run or not, is one the CLI accepts (options, choices):
    the default suite's check of the blocks only the slow tests run."""
    from release.cli import build_parser

    parser = build_parser()
    n = 0
    for name in TUTORIALS:
        for block in (b for b in blocks(name) if b.lang == "bash"):
            for argv in _command_lines(block.code):
                try:
                    parser.parse_args(argv)
                except SystemExit:
                    pytest.fail(f"{block}: `release {' '.join(argv)}` does not parse: {capsys.readouterr().err}")
                n += 1
    assert n >= 30, n


def test_tutorial_blocks_are_run_or_marked():
    """Every tutorial exists, has a quick block, and runs most of its blocks: each one not run says why, and
    fewer than a third of all blocks are not run."""
    every = []
    for name in TUTORIALS:
        found = blocks(name)
        assert found, f"docs/tutorials/{name}.md has no bash or python block"
        assert any(b.note == "quick" for b in found), f"docs/tutorials/{name}.md has no <!-- quick --> block"
        for b in found:
            assert b.note in ("", "quick") or re.fullmatch(r"not run: \S.*", b.note), f"{b}: unknown note {b.note!r}"
        every += found
    skipped = [b for b in every if b.skipped]
    assert 3 * len(skipped) < len(every), f"{len(skipped)} of {len(every)} blocks are not run: " + \
        ", ".join(map(str, skipped))


def test_release_commands_are_recognised():
    assert _command_lines("until release rpc status --key cpu; do sleep 1; done\nX=1 release tune \\\n  -v &\n") == \
        [["rpc", "status", "--key", "cpu"], ["tune", "-v"]]
    assert _command_lines('release tune --warm-start "$(ls a)" || echo no  # note\n') == [["tune", "--warm-start", "X"]]
    assert _release_commands("release tune --workload x \\\n    --n-trial 4   # comment\n\nrelease workloads\n") == \
        [["tune", "--workload", "x", "--n-trial", "4"], ["workloads"]]
    assert _release_commands("release tune || echo no\n") is None
    assert _release_commands("X=1 release tune\n") is None
    assert _release_commands('release tune --warm-start "$(ls a)"\n') is None


@pytest.mark.parametrize("name", TUTORIALS)
def test_tutorial_quick(name, workspace, process_groups, monkeypatch, capsys):
    """The default suite's version: a tutorial's ``<!-- quick -->`` blocks, in order (plain ``release``
    commands in this process)."""
    _environment(monkeypatch, name)
    monkeypatch.chdir(workspace)
    ports = {p: str(_free_port()) for p in PORTS}
    for block in (b for b in blocks(name) if b.note == "quick"):
        if not _run_in_process(block, capsys):
            _run(block, workspace, ports, process_groups)


@pytest.mark.slow
@pytest.mark.tutorial
@pytest.mark.parametrize("name", TUTORIALS)
def test_tutorial(name, workspace, process_groups, monkeypatch):
    """Every block of a tutorial not marked ``not run``, in order, as a user would run them."""
    _environment(monkeypatch, name)
    ports = {p: str(_free_port()) for p in PORTS}
    for block in (b for b in blocks(name) if not b.skipped):
        _run(block, workspace, ports, process_groups)
