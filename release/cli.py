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
    """Entry point of the ``release`` console script; returns the exit status."""
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
    except KeyboardInterrupt:
        print("release: interrupted", file=sys.stderr)
        _stop_workers()
        return 130
    except BrokenPipeError:  # output piped into a reader that stopped (`release workloads | head`)
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0


def _stop_workers() -> None:
    """After Ctrl-C: end this process's own TVM build/run workers (``tvm.exec.popen_worker``), by pid.

    They ignore SIGINT (see ``release.measure.measure.without_sigint``) so they print no traceback;
    ending them here lets the pool threads, which Python joins at exit, return at once instead of
    waiting for a worker's import or build to finish.
    """
    import psutil

    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return
    for child in children:
        try:
            if "tvm.exec.popen_worker" in child.cmdline():
                child.kill()
        except psutil.Error:
            pass


if __name__ == "__main__":
    sys.exit(main())
