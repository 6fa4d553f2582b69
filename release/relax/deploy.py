"""Deployment: an exported model library loaded without TVM's load-time warnings.

``release tune-model`` exports the chosen build with ``export_library`` as ``<log without .jsonl>.so``;
:func:`load_library` loads it as ``tvm.runtime.load_module`` does. Where the lines come from: a Relax
executable that has run in a ``VirtualMachine`` (``tune-model`` times both builds before it exports
the faster) holds its constants (the weights folded into it) with a memory scope set, and TVM 0.27's
runtime then logs one ``executable.cc: Warning: Scope Saving:`` line per constant to file descriptor
2 when it is exported and one ``Scope Loaded:`` line per constant each time the library is loaded
(4 for ``tiny-cnn``, a dozen and more for a real model): debugging output that says nothing to act
on. :func:`load_library` keeps the load-time lines off the terminal and passes anything else TVM
prints through (the export's lines go to ``<lib>.export.log``).
"""

from __future__ import annotations

import os
import sys

from ..errors import ModelError

#: the words of the load-time line TVM's runtime prints per constant (``runtime/vm/executable.cc``)
SCOPE_LOADED = "Scope Loaded"


def load_library(path):
    """``tvm.runtime.load_module(path)`` with TVM's ``Scope Loaded`` warnings dropped.

    Use it where ``tvm.runtime.load_module`` would be used::

        vm = relax.VirtualMachine(load_library("runs/net.onnx.release+.NCHWc.so"), tvm.cpu())

    Parameters
    ----------
    path : str or os.PathLike
        A library written by ``export_library`` (``release tune-model`` writes ``<log without .jsonl>.so``).

    Returns
    -------
    tvm.runtime.Module
        The loaded module (for a Relax model: give it to ``relax.VirtualMachine``).

    Raises
    ------
    ModelError
        ``path`` is not a file.
    Exception
        Whatever ``tvm.runtime.load_module`` raises on a file it cannot load; what TVM printed
        meanwhile is written to stderr first.
    """
    import tvm

    from ..stderr_capture import capture_stderr

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ModelError(f"library {path} does not exist; give the .so that `release tune-model` exported "
                         "beside its log")
    captured = None
    try:
        with capture_stderr() as captured:
            return tvm.runtime.load_module(path)
    finally:
        if captured is not None:
            _pass_through(captured.text)


def _pass_through(text: str) -> None:
    """Write the lines of ``text`` that are not TVM's ``Scope Loaded`` warnings (nor their indented
    continuation lines) to ``sys.stderr``."""
    keep, dropping = [], False
    for line in text.splitlines():
        if SCOPE_LOADED in line:
            dropping = True
            continue
        if dropping and line[:1].isspace():
            continue
        dropping = False
        keep.append(line)
    if any(line.strip() for line in keep):
        sys.stderr.write("\n".join(keep) + "\n")
        sys.stderr.flush()
