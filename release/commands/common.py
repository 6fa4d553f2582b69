"""What the CLI commands share: argument groups, the knowledge-base choice, the model check, small helpers."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import TunerError
from ..zoo import MODEL_NAMES as ZOO_MODELS


def add_measure_args(p) -> None:
    """Where and how kernels are built and timed: the options ``tune`` and ``tune-model`` share
    (read by :meth:`release.measure.config.MeasureConfig.from_args`)."""
    p.add_argument("--runner", choices=["local", "rpc"], default="local", help="where kernels run")
    p.add_argument("--rpc-key", default=None, help="device key at the RPC tracker (needed with --runner rpc)")
    p.add_argument("--rpc-host", default="127.0.0.1", help="RPC tracker host")
    p.add_argument("--rpc-port", type=int, default=9190, help="RPC tracker port")
    p.add_argument("--n-parallel", type=int, default=None, help="build workers (None: one per usable core)")
    p.add_argument("--number", type=int, default=4, help="runs averaged into one cost")
    p.add_argument("--repeat", type=int, default=3, help="costs per config")
    p.add_argument("--min-repeat-ms", type=int, default=50, help="raise number until one cost takes this long")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per run")
    p.add_argument("--build-timeout", type=float, default=30.0, help="seconds per build")
    p.add_argument("--early-termination", type=float, default=2.0, metavar="RATIO",
                   help="no more repeats for a config whose first repeat is over RATIO x the task's best mean so far "
                        "(AdaTune-style early termination; default 2; 0: every config gets --repeat costs)")
    p.add_argument("--cache-flush", action="store_true",
                   help="flush the CPU caches of a kernel's weights before every repeat (AutoTVM's "
                        "enable_cpu_cache_flush): timed as inside a model, not hot; stored in each record, and a log "
                        "measured with the other setting is not resumed")


def add_knowledge_args(p) -> None:
    """``--knowledge [DIR]`` / ``--no-knowledge`` / ``--knowledge-use``, shared by ``tune`` and ``tune-model``."""
    p.add_argument("--knowledge", nargs="?", const="", default=None, metavar="DIR",
                   help="the knowledge base this run adds its records and programs to and starts warm from (without "
                        "this option, or with no DIR: $RELEASE_KNOWLEDGE, else ~/.cache/release-tvm/knowledge). Our tuners (rl, "
                        "release, release+) always start warm from it; the baselines (xgb, sa-as, and, in release "
                        "tune, ms-evolutionary as seeds in its database) only when --knowledge or --knowledge-use is "
                        "given. An empty base, or one with no records of this target, is a cold start (AutoTVM's). "
                        "RELEASE_KNOWLEDGE=off disables it as --no-knowledge does")
    p.add_argument("--no-knowledge", action="store_true",
                   help="neither read nor write a knowledge base: a cold start, as AutoTVM's tuners")
    p.add_argument("--knowledge-use", choices=["model", "seeds"], default=None,
                   help="how the knowledge base starts the run warm: 'seeds' (used when this is not given) measures the best configs of the knowledge's "
                        "workloads, carried into this task's space, in the first round and keeps AutoTVM's own "
                        "cost model (transfer-tuning); 'model' trains a cost model on the knowledge's program "
                        "features (measured worse than seeds on held-out layers: benchmarks/results/knowledge/holdout/)")


def make_measure_option(args):
    """Build ``measure_option`` from CLI arguments (shared by tune commands): one
    :class:`release.measure.MeasureConfig`, validated once."""
    from ..measure.config import MeasureConfig

    return MeasureConfig.from_args(args).make_option()


def check_tuner_name(name: str) -> None:
    """Refuse a ``--tuner`` that is not registered.

    Raises
    ------
    TunerError
        ``name`` is not in :data:`release.tuners.TUNERS` (the message lists them).
    """
    from ..tuners import TUNERS

    if name not in TUNERS:
        raise TunerError(f"unknown tuner {name!r}; choose one of: {', '.join(TUNERS)}")


@dataclass(frozen=True)
class KnowledgeChoice:
    """The knowledge base of one ``tune`` / ``tune-model`` run, decided once from its flags.

    ``folder`` is the base this run adds its records to (None when disabled); ``warm`` whether the
    tuner starts warm from it (see :func:`knowledge_for`); ``new`` whether the folder did not exist
    before this run (a typo'd ``--knowledge DIR`` shows up as "a new folder"); ``off_reason`` what
    disabled it (``--no-knowledge`` or ``RELEASE_KNOWLEDGE=...``), empty when enabled.
    """

    folder: str | None
    warm: bool
    new: bool
    off_reason: str = ""

    @classmethod
    def from_args(cls, args) -> "KnowledgeChoice":
        """From ``--knowledge``, ``--no-knowledge``, ``--knowledge-use`` and ``--tuner``; raises as
        :func:`knowledge_for` does (and makes the folder, as it does)."""
        new = kdir_is_new(args)
        folder, warm = knowledge_for(args)
        why = "" if folder is not None else (
            "--no-knowledge" if args.no_knowledge else f"RELEASE_KNOWLEDGE={os.environ.get('RELEASE_KNOWLEDGE')}")
        return cls(folder, warm, new, why)

    def off_line(self) -> str:
        """The knowledge line of a run that neither reads nor writes a base (``tune`` and ``tune-model``)."""
        return f"knowledge off ({self.off_reason}): none read, this run's records not added"


def knowledge_for(args):
    """``(folder, warm)`` of ``--knowledge [DIR]`` / ``--no-knowledge`` (``tune`` and ``tune-model``):
    the knowledge base this run adds its records to (``--knowledge DIR``, else the default folder; None
    when disabled: ``--no-knowledge`` or ``RELEASE_KNOWLEDGE=off``), and whether the tuner starts warm
    from it: ours (``Tuner.warm_by_default``: rl, release, release+) always, a baseline (xgb, sa-as,
    ms-evolutionary) only when ``--knowledge`` or ``--knowledge-use`` asks (AutoTVM's and MetaSchedule's
    tuners start cold). The folder is made here (a folder that cannot be made is refused before any work).

    Raises
    ------
    TunerError
        Both flags given; ``--knowledge-use`` with a tuner that reads no base, or with no base read; a
        folder that cannot be made or written.
    KnowledgeError
        ``--knowledge`` (or ``$RELEASE_KNOWLEDGE``) names a file.
    """
    from ..knowledge import KnowledgeBase, knowledge_dir
    from ..tuners import TUNERS, tuner_class

    use = getattr(args, "knowledge_use", None)
    cls = tuner_class(args.tuner)
    if use and not cls.knowledge_uses:
        readers = [n for n in TUNERS if tuner_class(n).knowledge_uses]
        raise TunerError(f"--knowledge-use {use} applies to tuners that start warm from a knowledge base "
                         f"({', '.join(readers)}), not {args.tuner!r}")
    if args.no_knowledge:
        if args.knowledge is not None:
            raise TunerError(f"--knowledge{' ' + args.knowledge if args.knowledge else ''} and --no-knowledge "
                             "contradict each other; give one")
        if use:
            raise TunerError(f"--knowledge-use {use} says how to use a knowledge base, but --no-knowledge reads "
                             "none; drop one of them")
        return None, False
    kdir = knowledge_dir(args.knowledge or None)
    if kdir is None:
        if args.knowledge is not None or use:
            raise TunerError(f"{'--knowledge' if args.knowledge is not None else f'--knowledge-use {use}'} was given "
                             f"but knowledge is disabled (RELEASE_KNOWLEDGE={os.environ.get('RELEASE_KNOWLEDGE')}); "
                             "pass a folder, --knowledge DIR")
        return None, False
    KnowledgeBase(args.knowledge or None)  # a file given as the folder: its one-line error now, before any work
    try:  # a folder that cannot be made or written: one line now, not a traceback at the first record
        os.makedirs(kdir, exist_ok=True)
        if not os.access(kdir, os.W_OK | os.X_OK):
            raise PermissionError(13, "not writable")
    except OSError as err:
        raise TunerError(f"knowledge base {kdir} cannot be written ({err.strerror or err}); pass a folder you can "
                         "write (--knowledge DIR or $RELEASE_KNOWLEDGE), or --no-knowledge") from None
    return kdir, args.knowledge is not None or bool(use) or cls.warm_by_default


def kdir_is_new(args) -> bool:
    """Whether the knowledge folder this run would use does not exist yet (a typo'd ``--knowledge DIR``
    shows up as "a new folder" on the knowledge line)."""
    from ..knowledge import knowledge_dir

    if args.no_knowledge:
        return False
    kdir = knowledge_dir(args.knowledge or None)
    return kdir is not None and not os.path.exists(kdir)


def check_model_arg(spec: str, option: str = "--model") -> None:
    """Refuse, before TVM or PyTorch is imported, a model that is neither built in nor an existing .onnx file.

    Raises
    ------
    ModelError
        ``spec`` ends in ``.onnx`` and is no file (missing, or a folder), or names no built-in model
        (:data:`release.zoo.MODEL_NAMES`).
    """
    from ..errors import ModelError

    if spec.endswith(".onnx"):
        if os.path.isdir(spec):
            raise ModelError(f"{option} {spec} is a folder; give an .onnx file")
        if not os.path.exists(spec):
            raise ModelError(f"ONNX file {spec} does not exist")
    elif spec not in ZOO_MODELS:
        raise ModelError(f"unknown model {spec!r}; built-in models: {', '.join(ZOO_MODELS)} (or an .onnx file)")


def plural(count, noun: str) -> str:
    """``1 workload``, ``2 workloads``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
