"""``release.stderr_capture``: what goes to file descriptor 2 (C++ and Python alike) is kept in a file
and counted by kind; the process's stderr is restored afterwards, also when the block raises."""

from __future__ import annotations

import os
import sys
import warnings

import pytest

from release.stderr_capture import capture_stderr

_TVM = b"[18:14:51] /project/src/runtime/vm/executable.cc:276: Warning: Scope Saving: main\n"


def _noise(n_tvm: int) -> None:
    for _ in range(n_tvm):
        os.write(2, _TVM)  # as TVM's C++ logging writes: straight to fd 2, past sys.stderr
    # what Python's default warnings.showwarning writes (the test runner records warnings instead)
    sys.stderr.write(warnings.formatwarning("old API", FutureWarning, "lib.py", 3, "  old()"))
    print("a line of its own", file=sys.stderr)


def test_fd2_is_captured_counted_by_kind_and_restored(tmp_path, capfd):
    path = tmp_path / "out" / "stderr.log"
    with capture_stderr(path) as got:
        _noise(5)
    assert capfd.readouterr().err == ""  # nothing reached the terminal
    assert got.tvm == {("runtime/vm/executable.cc", "Scope Saving"): 5}
    assert got.python == {"FutureWarning": 1} and got.other == 1 and got.warnings == 6
    assert got.summary() == (f"6 warnings captured (5 TVM 'Scope Saving' from runtime/vm/executable.cc, "
                             f"1 Python FutureWarning, 1 other line) in {path}")
    assert path.read_bytes().count(b"Scope Saving") == 5
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"  # fd 2 is the terminal's again


def test_nothing_printed_reads_no_warnings_and_a_temporary_file_is_removed(capfd):
    with capture_stderr() as got:
        pass
    assert got.summary() == "no warnings" and not got.path.exists()


def test_an_exception_propagates_with_stderr_restored_and_the_text_kept(tmp_path, capfd):
    path = tmp_path / "stderr.log"
    with pytest.raises(ValueError, match="boom"), capture_stderr(path) as got:
        os.write(2, _TVM)
        raise ValueError("boom")
    assert got.warnings == 1 and b"Scope Saving" in path.read_bytes()
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"
