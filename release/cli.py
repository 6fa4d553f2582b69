"""Command-line interface: ``release <command> ...``.

Commands are registered by modules that expose ``register(subparsers)``; each sets
``func(args) -> int`` as the parser default. A :class:`release.errors.ReleaseError` becomes one
line on stderr and exit status 2; nothing else of the library prints.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from .errors import ReleaseError

# Modules that add sub-commands. Each has ``register(subparsers)``.
COMMAND_MODULES = [
    "release.commands",
    "release.graph.cli",
    "release.distributed.cli",
    "release.knowledge.cli",
    "release.profile",
]


EXAMPLES = """examples:
  release workloads                                    list the registered operator workloads
  release tune --workload resnet18.conv2d.2 --tuner release+ --n-trial 256 --log r.jsonl
                                                       tune one operator (run again to resume the log)
  release tune-model --model tiny-cnn --n-trial 64     tune every task of a model, compile it, time it
  release bench --tier quick                           tuners x workloads x seeds against AutoTVM's XGBTuner
  release profile --model resnet18 --log r18.jsonl     per-operator-kind time against ONNX Runtime
  release regal optimize --help                        REGAL graph optimization (op order, placement)

`release COMMAND --help` lists a command's options and their defaults."""


class _Parser(argparse.ArgumentParser):
    """argparse's parser with its errors on one line: the problem and where the options are listed
    (argparse prints the whole usage block first). Its subcommands' parsers are of this class too."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help lists the options)\n")

    def parse_args(self, args=None, namespace=None):
        """As argparse's, but an unknown flag is refused by the (sub)command it was given to, which
        names that command's ``--help``."""
        args = sys.argv[1:] if args is None else list(args)
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            parser = self
            for token in args:  # the deepest command named on the line
                subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
                if subs and token in subs[0].choices:
                    parser = subs[0].choices[token]
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every registered command."""
    parser = _Parser(
        prog="release",
        description="ReLeASE: fast schedule tuning for Apache TVM (Chameleon) and REGAL graph optimization.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``release`` console script; returns the exit status.

    Ctrl-C (SIGINT) and SIGTERM (``docker stop``) stop any command at any point: the build and run
    workers are ended, ``release: interrupted`` is printed and the status is 130; a measurement in
    flight is not logged, so a resumed run measures it again (see :class:`_Interrupts`). Called with
    ``argv=None`` (the program itself) the process then ends at once (:meth:`_Interrupts.exit`); with a
    list it returns 130.
    """
    with _Interrupts(program=argv is None) as interrupts:
        try:
            return _run(argv)
        except KeyboardInterrupt:
            code = interrupts.stop()
            if interrupts.program:  # the console script or python -m release.cli: end now
                interrupts.exit(code)
            return code


def _run(argv: list[str] | None) -> int:
    """Parse ``argv`` and run its command: its status, or 2 with one line for a ``ReleaseError``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ReleaseError as err:
        print(f"release: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into a reader that stopped (`release workloads | head`)
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0


class _Interrupts:
    """SIGINT and SIGTERM while a command runs: a ``KeyboardInterrupt`` in the main thread, and a
    deadline for the exit.

    Inside the ``with`` block both signals raise ``KeyboardInterrupt`` in the main thread (SIGTERM's
    default would end the process at once, leaving its workers to finish their job, and print
    nothing); :meth:`stop` then ends the workers (:func:`release.measure._pool.stop_workers`), prints
    ``release: interrupted`` once and returns 130. A second signal while that happens is ignored.
    A SIGINT ignored when the command started (a background job of a shell) stays ignored.

    The main thread only sees a signal between Python bytecodes: inside a long TVM call (compiling a
    model, extracting tasks) it would see it only when the call returns. So the C-level handler also
    writes the signal to a pipe (``signal.set_wakeup_fd``) that a watcher thread reads: if the main
    thread has not ended the process :data:`GRACE_S` seconds after the first signal (it may also be
    finishing a task's end: the best config's output check compiles it), the watcher ends the workers,
    prints the line and ends the process (``os._exit(130)``): within about 2 s of the signal in all.
    Either way nothing of the measurement in flight reaches the log: the main thread was waiting for it,
    or is elsewhere. Called off the main thread (``release.cli.main`` from a Python caller's thread)
    nothing is installed.

    Parameters
    ----------
    program : bool
        The command is the program (``argv`` None): after a signal the watcher's deadline holds until
        the process ends. False (``main([...])`` called from Python): :meth:`stop` returns 130 to the
        caller, whose process goes on.
    """

    #: seconds the main thread has, after the first signal, to end the process by itself
    GRACE_S = 1.0

    def __init__(self, program: bool = True):
        import threading

        self.program = bool(program)
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._printed = False
        self._signalled = False
        self._saved = {}
        self._wakeup = None
        self._stderr_fd = None

    def __enter__(self):
        import os
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return self
        self._stderr_fd = os.dup(2)  # the terminal's stderr, whatever later redirects fd 2 to a capture file
        for name in ("SIGINT", "SIGTERM"):
            signum = getattr(signal, name, None)
            if signum is None or signal.getsignal(signum) is signal.SIG_IGN:
                continue
            self._saved[signum] = signal.signal(signum, self._on_signal)
        if hasattr(os, "pipe") and self._saved:
            r, w = os.pipe()
            os.set_blocking(w, False)
            try:
                self._wakeup = (signal.set_wakeup_fd(w), r, w)
            except (ValueError, OSError):
                os.close(r), os.close(w)
            else:
                threading.Thread(target=self._watch, args=(r,), name="release-interrupts", daemon=True).start()
        return self

    def __exit__(self, *exc):
        import os
        import signal

        if not (self._signalled and self.program):  # a signalled program: the deadline holds until its end
            self._done.set()
        for signum, handler in self._saved.items():
            signal.signal(signum, handler)
        if self._wakeup is not None:
            previous, r, w = self._wakeup
            signal.set_wakeup_fd(previous)
            os.close(w)  # the watcher reads EOF and ends
        if self._stderr_fd is not None and self._done.is_set():
            os.close(self._stderr_fd)
            self._stderr_fd = None
        return False

    def _on_signal(self, signum, frame):
        if self._signalled:  # the first one is being handled
            return
        self._signalled = True
        self._stop_workers(wait=0.0)  # at once: the run in flight ends unreported, the unwinding finds them gone
        raise KeyboardInterrupt

    def _watch(self, r: int) -> None:
        """Watcher thread: wait for SIGINT or SIGTERM on the wakeup pipe; then give the main thread
        :data:`GRACE_S` seconds to end the process, else end it here."""
        import os

        wanted = {int(s) for s in self._saved}
        try:
            while True:
                data = os.read(r, 64)
                if not data:  # the command ended: its with block closed the pipe
                    return
                if wanted & set(data):
                    break
        except OSError:
            return
        finally:
            os.close(r)
        if not self._done.wait(self.GRACE_S):
            self._say(raw=True)
            self._stop_workers(wait=0.5)
            os._exit(130)

    def _say(self, raw: bool = False) -> None:
        """Print ``release: interrupted`` once: on ``sys.stderr`` from the main thread; with ``raw``
        (the watcher, while the main thread may hold fd 2 redirected to a capture file) on the stderr
        the command started with."""
        import os

        with self._lock:
            if self._printed:
                return
            self._printed = True
        if not raw:
            try:
                print("release: interrupted", file=sys.stderr, flush=True)
            except (OSError, ValueError):
                pass
            return
        try:
            os.write(self._stderr_fd if self._stderr_fd is not None else 2, b"release: interrupted\n")
        except OSError:
            pass

    @staticmethod
    def _stop_workers(wait: float = 1.0) -> None:
        try:
            from .measure._pool import stop_workers

            stop_workers(wait)
        except Exception:  # noqa: BLE001 - stopping is best effort; the exit goes on
            pass

    def stop(self) -> int:
        """After a ``KeyboardInterrupt`` in the main thread: print ``release: interrupted`` once, end
        the workers, return 130 (128 + SIGINT, the shell's status for a job ended by Ctrl-C)."""
        self._signalled = True  # a further signal is ignored while stopping
        self._say()
        self._stop_workers()
        return 130

    @staticmethod
    def exit(code: int) -> None:
        """End the program after :meth:`stop`: flush the standard streams and the logging handlers, run
        the ``atexit`` functions (Ray's shutdown among them), then ``os._exit(code)``. Skipped: joining the
        worker pools' threads (their workers are gone) and the interpreter's teardown of TVM and PyTorch,
        which took seconds after an interrupt on a busy 2-core machine."""
        import atexit
        import os

        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        logging.shutdown()
        try:
            atexit._run_exitfuncs()
        finally:
            os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
