"""Capture what TVM (and Python's ``warnings``) print to the process's stderr while a command works.

TVM's C++ runtime logs warnings straight to file descriptor 2 (``executable.cc: Warning: Scope
Saving: ...`` once per function when a Relax executable is exported: about a hundred lines for
``release regal apply``), out of reach of Python's ``logging`` and ``warnings`` filters. A CLI
command that expects such noise runs its work inside :func:`capture_stderr`, which points fd 2 at a
file for the duration, then prints one line (:meth:`CapturedStderr.summary`): how many warnings,
of which kinds, and where the full text is.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

#: a TVM log line: ``[18:14:51] /project/src/runtime/vm/executable.cc:276: Warning: Scope Saving: ...``
_TVM_LINE = re.compile(r"^\[[\d:.]+\] (?:\S*/)?src/(\S+?):\d+: (Warning|Error|Fatal)?:? ?(.*)$")
#: a Python warning: ``/path/file.py:105: FutureWarning: message``
_PY_LINE = re.compile(r"^\S+:\d+: (\w*Warning): ")


@dataclass
class CapturedStderr:
    """What went to stderr inside :func:`capture_stderr` (filled when the block ends).

    Attributes
    ----------
    path : pathlib.Path
        The file holding the full text.
    tvm : collections.Counter
        TVM log lines by ``(source file, first words of the message)``, e.g.
        ``("runtime/vm/executable.cc", "Scope Saving")``.
    python : collections.Counter
        Python warnings by category name (``FutureWarning``).
    other : int
        Non-empty lines that are neither (a Python warning's source line is part of the warning).
    """

    path: Path
    tvm: Counter = field(default_factory=Counter)
    python: Counter = field(default_factory=Counter)
    other: int = 0

    @property
    def warnings(self) -> int:
        """TVM log lines plus Python warnings captured."""
        return sum(self.tvm.values()) + sum(self.python.values())

    def parse(self, text: str) -> None:
        """Count the lines of ``text`` into :attr:`tvm`, :attr:`python` and :attr:`other`."""
        after_py = False
        for line in text.splitlines():
            if not line.strip():
                continue
            if after_py and line[:1].isspace():  # the source line Python prints under its warning
                after_py = False
                continue
            after_py = False
            m = _TVM_LINE.match(line)
            if m:
                words = m.group(3).split(":")[0].strip()[:40] or (m.group(2) or "log")
                self.tvm[(m.group(1), words)] += 1
                continue
            m = _PY_LINE.match(line)
            if m:
                self.python[m.group(1)] += 1
                after_py = True
            else:
                self.other += 1

    def summary(self) -> str:
        """One line: the count and kinds of what was captured and the file that has it, e.g.
        ``30 warnings captured (30 TVM 'Scope Saving' from runtime/vm/executable.cc) in OUT/stderr.log``;
        ``no warnings`` when nothing was printed."""
        if not self.warnings and not self.other:
            return "no warnings"
        kinds = [f"{n} TVM '{words}' from {src}" for (src, words), n in self.tvm.most_common()]
        kinds += [f"{n} Python {cat}" for cat, n in self.python.most_common()]
        if self.other:
            kinds.append(f"{self.other} other line{'s' if self.other != 1 else ''}")
        n = self.warnings
        return f"{n} warning{'s' if n != 1 else ''} captured ({', '.join(kinds)}) in {self.path}"


@contextmanager
def capture_stderr(path=None):
    """Point file descriptor 2 (C++ and Python alike) and ``sys.stderr`` at ``path`` while the block runs.

    Parameters
    ----------
    path : str or Path, optional
        Where the text goes (overwritten; its folder is created). Default: a temporary file, deleted
        when the block ends.

    Yields
    ------
    CapturedStderr
        Counted when the block ends, also when it raises (the exception propagates; the text stays in
        ``path``, so nothing is lost).
    """
    keep = path is not None
    if keep:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        f = open(path, "w+b")  # noqa: SIM115 - closed below
    else:
        f = tempfile.NamedTemporaryFile(prefix="release-stderr-", suffix=".log", delete=False)  # noqa: SIM115
    captured = CapturedStderr(Path(f.name))
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(f.fileno(), 2)
    # Python's own writes too, where sys.stderr is not fd 2 (a test runner's capture, a wrapper)
    saved_py, sys.stderr = sys.stderr, open(f.fileno(), "w", buffering=1, errors="replace", closefd=False)  # noqa: SIM115
    try:
        yield captured
    finally:
        sys.stderr.close()
        sys.stderr = saved_py
        os.dup2(saved, 2)
        os.close(saved)
        f.seek(0)
        captured.parse(f.read().decode(errors="replace"))
        f.close()
        if not keep:
            os.unlink(f.name)
