"""Capture what TVM (and Python's ``warnings``) print to the process's stderr while a command works.

TVM's C++ runtime logs warnings straight to file descriptor 2 (``executable.cc: Warning: Scope
Saving: ...`` once per function when a Relax executable is exported: about a hundred lines for
``release regal apply``), out of reach of Python's ``logging`` and ``warnings`` filters. A CLI
command that expects such noise runs its work inside :func:`capture_stderr`, which points fd 2 at a
file for the duration, then prints one line (:meth:`CapturedStderr.summary`): how many warnings,
of which kinds, and where the full text is.

Where a command calls into TVM or a model frontend at several steps (``release tune-model``: the
import, the task extraction, the compiles), it opens one file for the run with :func:`tvm_output_to`
and each step runs inside :func:`quiet` (``release.relax`` marks its own calls so): what TVM and the
frontends print there (TVM's C++ log lines, Python warnings such as the ONNX frontend's "Renaming name
input.1 to input_1") goes to that file under the step's name, counted; progress bars and the project's
own log lines stay on the console. Outside a :func:`tvm_output_to` block, :func:`quiet` does nothing.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
import time
import warnings
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

#: a TVM log line: ``[18:14:51] /project/src/runtime/vm/executable.cc:276: Warning: Scope Saving: ...``
_TVM_LINE = re.compile(r"^\[[\d:.]+\] (?:\S*/)?src/(\S+?):\d+: (Warning|Error|Fatal)?:? ?(.*)$")
#: a Python warning: ``/path/file.py:105: FutureWarning: message``
_PY_LINE = re.compile(r"^\S+:\d+: (\w*Warning): ")


def _first_words(message: str, width: int = 48) -> str:
    """A TVM message's kind: its text before the first ``:``, cut at a word within ``width`` characters
    (``Unknown schedule rule "meta_schedule.pool_max"``, ``Scope Saving``)."""
    words = message.split(":")[0].strip()
    if len(words) > width:
        words = words[:width].rsplit(" ", 1)[0]
    return words


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
        Non-empty lines that are neither (a Python warning's source line, and the indented lines
        under a TVM message, are part of it).
    text : str
        What was captured, as written (filled by :func:`capture_stderr`).
    """

    path: Path
    tvm: Counter = field(default_factory=Counter)
    python: Counter = field(default_factory=Counter)
    other: int = 0
    text: str = ""

    @property
    def warnings(self) -> int:
        """TVM log lines plus Python warnings captured."""
        return sum(self.tvm.values()) + sum(self.python.values())

    def parse(self, text: str) -> None:
        """Count the lines of ``text`` into :attr:`tvm`, :attr:`python` and :attr:`other`."""
        after_py = after_tvm = False
        for line in text.splitlines():
            if not line.strip():
                continue
            if after_py and line[:1].isspace():  # the source line Python prints under its warning
                after_py = False
                continue
            if after_tvm and line[:1].isspace():  # a TVM message's own further lines ("Checked ...:\n  name")
                continue
            after_py = after_tvm = False
            m = _TVM_LINE.match(line)
            if m:
                words = _first_words(m.group(3)) or (m.group(2) or "log")
                self.tvm[(m.group(1), words)] += 1
                after_tvm = True
                continue
            m = _PY_LINE.match(line)
            if m:
                self.python[m.group(1)] += 1
                after_py = True
            else:
                self.other += 1

    def add(self, other: "CapturedStderr") -> None:
        """Add the counts of ``other`` to these."""
        self.tvm.update(other.tvm)
        self.python.update(other.python)
        self.other += other.other

    def kinds(self) -> list[str]:
        """What was counted, most frequent first: ``["30 TVM 'Scope Saving' from runtime/vm/executable.cc",
        "1 Python UserWarning", "2 other lines"]``."""
        kinds = [f"{n} TVM '{words}' from {src}" for (src, words), n in self.tvm.most_common()]
        kinds += [f"{n} Python {cat}" for cat, n in self.python.most_common()]
        if self.other:
            kinds.append(f"{self.other} other line{'s' if self.other != 1 else ''}")
        return kinds

    def summary(self) -> str:
        """One line: the count and kinds of what was captured and the file that has it, e.g.
        ``30 warnings captured (30 TVM 'Scope Saving' from runtime/vm/executable.cc) in OUT/stderr.log``;
        ``no warnings`` when nothing was printed."""
        if not self.warnings and not self.other:
            return "no warnings"
        n = self.warnings
        return f"{n} warning{'s' if n != 1 else ''} captured ({', '.join(self.kinds())}) in {self.path}"


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
        captured.text = f.read().decode(errors="replace")
        captured.parse(captured.text)
        f.close()
        if not keep:
            os.unlink(f.name)


@dataclass
class TvmOutput:
    """What TVM and the model frontends printed over one command (:func:`tvm_output_to`), by step.

    Attributes
    ----------
    path : pathlib.Path
        The file with the full text, each step's under a ``# STEP (HH:MM:SS)`` line; removed at the end
        of the block when nothing was printed.
    total : CapturedStderr
        The counts of every step together.
    steps : collections.Counter
        Warnings and other lines per step name (``import``, ``extract``, ``compile``), in the order
        the steps first printed something.
    """

    path: Path
    total: CapturedStderr = None  # type: ignore[assignment]
    steps: Counter = field(default_factory=Counter)
    _depth: int = 0

    def __post_init__(self):
        if self.total is None:
            self.total = CapturedStderr(self.path)

    @property
    def warnings(self) -> int:
        """TVM log lines plus Python warnings captured, every step together."""
        return self.total.warnings

    def summary(self) -> str:
        """One line: ``5 warnings captured (4 TVM 'Unknown schedule rule "meta_schedule.pool' from
        s_tir/meta_schedule/schedule_rule/apply_custom_rule.cc, 1 Python UserWarning; import 1, extract 2,
        compile 2) in runs/m.warnings.log``; ``no warnings`` when nothing was printed."""
        if not self.total.warnings and not self.total.other:
            return "no warnings"
        n = self.total.warnings
        steps = ", ".join(f"{name} {count}" for name, count in self.steps.items())
        return (f"{n} warning{'s' if n != 1 else ''} captured ({', '.join(self.total.kinds())}; by step: {steps}) "
                f"in {self.path}")


#: the :class:`TvmOutput` of the innermost :func:`tvm_output_to` block (None outside one)
_ACTIVE: list = []


@contextmanager
def tvm_output_to(path):
    """Keep what TVM and the frontends print inside every :func:`quiet` block of this one, in ``path``.

    Parameters
    ----------
    path : str or Path
        The file (overwritten when a step prints something; its folder is created; removed at the end
        when no step printed anything, so a quiet run leaves no file).

    Yields
    ------
    TvmOutput
        Filled as the steps end.
    """
    out = TvmOutput(Path(path))
    out.path.parent.mkdir(parents=True, exist_ok=True)
    out.path.write_bytes(b"")
    _ACTIVE.append(out)
    try:
        yield out
    finally:
        _ACTIVE.remove(out)
        if not out.total.warnings and not out.total.other:
            try:
                out.path.unlink()
            except OSError:
                pass


def _writes_to_fd2(stream) -> bool:
    try:
        return stream.fileno() == 2
    except (AttributeError, OSError, ValueError):
        return False


@contextmanager
def quiet(step: str):
    """Around a call into TVM or a model frontend: inside :func:`tvm_output_to`, what it prints goes to
    that block's file under ``step``, counted; outside one (a Python caller's own use) nothing changes.

    File descriptor 2 points at the file (TVM's C++ log lines), Python warnings are recorded and written
    there in Python's format (the ONNX frontend's ``UserWarning``). Where ``sys.stderr`` writes to fd 2
    (a terminal), it is pointed at the console for the block, so progress bars made inside it and the
    project's own log lines (root logger handlers on that stream) still show. Nested blocks count into
    the outer one's step.

    Parameters
    ----------
    step : str
        The step's name in the counts and the file (``import``, ``extract``, ``compile``, ...).
    """
    out = _ACTIVE[-1] if _ACTIVE else None
    if out is None or out._depth:
        yield
        return
    out._depth += 1
    f = open(out.path, "ab+")  # noqa: SIM115 - closed below
    header = f.tell()
    f.write(f"# {step} ({time.strftime('%H:%M:%S')})\n".encode())
    f.flush()
    start = f.tell()
    py_stderr = sys.stderr
    py_stderr.flush()
    saved = os.dup(2)
    os.dup2(f.fileno(), 2)
    console = handlers = None
    if _writes_to_fd2(py_stderr):  # keep Python's own writes (bars, our log lines) on the console
        console = open(saved, "w", buffering=1, errors="replace", closefd=False)  # noqa: SIM115
        sys.stderr = console
        handlers = [h for h in logging.getLogger().handlers
                    if isinstance(h, logging.StreamHandler) and getattr(h, "stream", None) is py_stderr]
        for h in handlers:
            h.setStream(console)
    try:
        with warnings.catch_warnings(record=True) as caught:  # the filters in force decide what is shown
            yield
    finally:
        if console is not None:
            for h in handlers:
                h.setStream(py_stderr)
            sys.stderr = py_stderr
            console.close()
        os.dup2(saved, 2)
        os.close(saved)
        f.seek(0, os.SEEK_END)
        for w in caught:
            f.write(warnings.formatwarning(w.message, w.category, w.filename, w.lineno, w.line).encode(
                errors="replace"))
        end = f.tell()
        if end == start:  # nothing printed: no header either
            f.truncate(header)
        else:
            f.seek(start)
            got = CapturedStderr(out.path)
            got.parse(f.read().decode(errors="replace"))
            out.total.add(got)
            out.steps[step] += got.warnings + got.other
        f.close()
        out._depth -= 1
