"""What a benchmark runs: the tier tables and the two configuration dataclasses.

- :data:`TIERS` and :class:`BenchConfig`: operator tiers (tuners x workloads x seeds on one operator
  at a time; :mod:`release.bench.operator_tier`);
- :data:`MODEL_TIERS` and :class:`ModelBenchConfig`: model tiers (whole models tuned end to end;
  :mod:`release.bench.model_tier`).

Each config's ``from_tier(tier, **over)`` takes the tier's values, overrides them with the explicit
ones (None / empty: the tier's) and checks them (unknown tuners, workloads, models, references raise
:class:`release.errors.TunerError` with one line); ``log_path(name, tuner, seed)`` names a run's log.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from ..errors import TunerError, check_n_trial

#: the comparator of the operator tiers' metrics (AutoTVM's XGBTuner); ``--baseline`` names another
BASELINE = "xgb"


#: Where ``release bench`` writes when no ``--out`` is given: ``runs/bench/<tier>`` under the current
#: folder (``runs/`` is git-ignored), so a benchmark never dirties a checkout. The committed results
#: under ``benchmarks/results/`` are refreshed only by naming them (``--out benchmarks/results/<tier>
#: --logs benchmarks/results/logs``).
DEFAULT_OUT = os.path.join("runs", "bench")


TIERS = {
    # Two resnet18 layers, 2 rounds of 64; about 25 minutes of a quiet 2-core machine per seed.
    "quick": dict(workloads=["resnet18.conv2d.2", "resnet18.conv2d.6"], n_trial=128, seeds=[0, 1, 2],
                  rounds=2, tuners=["xgb", "sa-as", "rl", "release", "release+", "ms-evolutionary", "random"]),
    # Chameleon's 26 conv2d tasks, 16 rounds of 64; for a big machine or a GPU box (--target cuda).
    "paper": dict(workloads=None, n_trial=1024, seeds=[0, 1, 2],
                  rounds=16, tuners=["xgb", "sa-as", "rl", "release", "release+", "ms-evolutionary", "random"]),
    # The comparison of the baselines (AutoTVM's XGBTuner and GATuner, MetaSchedule, random).
    "baselines": dict(workloads=["resnet18.conv2d.2", "resnet18.conv2d.6", "resnet18.conv2d.9"], n_trial=256,
                      seeds=[0, 1, 2], rounds=4, tuners=["xgb", "ga", "ms-evolutionary", "random"]),
    # Chameleon's four-way ablation (SA = xgb, RL, SA+AS, RL+AS = release) plus ours (release+).
    "ablation": dict(workloads=["resnet18.conv2d.2", "resnet18.conv2d.6", "resnet18.conv2d.9"], n_trial=512,
                     seeds=[0, 1, 2], rounds=8, tuners=["xgb", "rl", "sa-as", "release", "release+"]),
    # Seconds: checks the harness end to end.
    "smoke": dict(workloads=["tiny.matmul.1"], n_trial=8, seeds=[0], rounds=1, tuners=["random", "grid"],
                  baseline="random"),
}


@dataclass
class BenchConfig:
    """What a benchmark runs. Defaults come from the tier; explicit values override."""

    tier: str = "quick"
    workloads: list = field(default_factory=list)
    tuners: list = field(default_factory=list)
    seeds: list = field(default_factory=list)
    n_trial: int = 0
    target: str = "llvm"
    out: str = ""
    logs: str = ""
    """Folder of the per-run logs. Default: ``runs/bench/logs`` (:data:`DEFAULT_OUT`), shared by every
    tier, or ``<out>/logs`` when ``out`` is given. Every tuner ignores its budget except to stop, so the
    first N records of a longer run are what a run of N would have measured: a tier reads the
    prefix of a longer tier's runs and extends a shorter tier's runs (same target and runner)."""
    rounds: int = 16
    number: int = 4
    repeat: int = 3
    min_repeat_ms: int = 50
    n_parallel: int | None = None
    baseline: str = BASELINE
    against: list = field(default_factory=lambda: ["ms-evolutionary"])
    layout: str = "NCHW"
    """conv2d layout of the tasks (``release.task.create_task``); the committed tiers are NCHW."""
    prepack: bool = False
    """Layout-free weights (pre-packing). Off: the committed tiers' logs were measured on the plain
    program (and a task's key covers the attribute), so a tier resumes and re-times its own runs."""

    @classmethod
    def from_tier(cls, tier: str, **over) -> "BenchConfig":
        """The tier's configuration with ``over``'s values (None / empty: the tier's); ``logs``
        defaults to ``<out>/logs`` when ``out`` is given, else ``runs/bench/logs``.

        Raises
        ------
        TunerError
            Unknown tier, tuner or workload; an empty list option; a baseline or ``against`` tuner
            not among the tuners; a budget below 1.
        """
        if tier not in TIERS:
            raise TunerError(f"unknown tier {tier!r}; choose one of {', '.join(TIERS)}, or a model tier: model, model-smoke")
        base = dict(TIERS[tier])
        if base["workloads"] is None:
            from ..workloads import list_workloads

            base["workloads"] = [w.name for w in list_workloads() if w.op == "conv2d" and not w.name.startswith("tiny")]
        cfg = cls(tier=tier, **base)
        for k, v in over.items():
            if isinstance(v, (list, tuple)) and not v:
                raise TunerError(f"--{k.replace('_', '-')} was given without a value; name at least one, or leave "
                                 f"it out for the tier's default ({', '.join(map(str, getattr(cfg, k)))})")
            if v not in (None, ""):
                setattr(cfg, k, list(v) if isinstance(v, tuple) else v)
        if not cfg.logs:
            cfg.logs = os.path.join(cfg.out, "logs") if cfg.out else os.path.join(DEFAULT_OUT, "logs")
        if not cfg.out:
            cfg.out = os.path.join(DEFAULT_OUT, tier)
        check_n_trial(cfg.n_trial)
        from ..tuners import TUNERS
        from ..workloads import get_workload

        unknown = [t for t in cfg.tuners if t not in TUNERS]
        if unknown:
            raise TunerError(f"unknown tuners {unknown}; choose from {', '.join(TUNERS)}")
        for w in cfg.workloads:
            get_workload(w)  # raises WorkloadError naming the closest registered workload
        if cfg.baseline not in cfg.tuners:
            raise TunerError(f"baseline {cfg.baseline!r} is not among the tuners {cfg.tuners}; add it to --tuners "
                             "or choose one of them with --baseline")
        if over.get("against"):  # the tier's default comparators are used when present; named ones must be
            missing = [a for a in cfg.against if a not in cfg.tuners]
            if missing:
                raise TunerError(f"--against {' '.join(missing)}: not among the tuners {cfg.tuners}; add to --tuners")
        return cfg

    def log_path(self, workload: str, tuner: str, seed: int) -> str:
        """``<logs>/<workload>[-<layout>][-prepack].<tuner>.s<seed>.jsonl`` (the suffixes keep another
        program's runs apart from the NCHW ones)."""
        variant = ("" if self.layout in ("", "NCHW") else f"-{self.layout}") + ("-prepack" if self.prepack else "")
        return os.path.join(self.logs, f"{workload}{variant}.{tuner}.s{seed}.jsonl")


#: tuner name of MetaSchedule's own ``tune_relax`` in this tier
MS = "ms"


#: suffix of a tuner name that starts the tuner warm from ``ModelBenchConfig.knowledge``
WARM = ":warm"


def split_tuner(spec: str) -> tuple[str, bool]:
    """``"release+:warm"`` -> ``("release+", True)``; ``"xgb"`` -> ``("xgb", False)``."""
    return (spec[: -len(WARM)], True) if spec.endswith(WARM) else (spec, False)


REFERENCES = ("eager", "torch.compile", "onnxruntime", "openvino")


MODEL_TIERS = {
    # The whole-model tier: hours on a quiet 2-core machine (docs/design/model-tuning.md).
    "model": dict(models=["resnet18", "resnet50", "mobilenet_v2", "bert-base-layer", "vit-b16"],
                  n_trial={"resnet18": 2000, "resnet50": 2000, "mobilenet_v2": 2000, "bert-base-layer": 1000,
                           "vit-b16": 2000},
                  tuners=["release+", "xgb", MS], seeds=[0], checkpoints=4, references=list(REFERENCES),
                  ms_trials_per_iter=64, layout="NCHWc"),
    # The harness end to end in about a minute: tiny-cnn (2 tasks), a few trials.
    "model-smoke": dict(models=["tiny-cnn"], n_trial={"tiny-cnn": 16}, tuners=["random", MS], seeds=[0],
                        checkpoints=2, references=["eager", "onnxruntime", "openvino"], ms_trials_per_iter=None),
}


@dataclass
class ModelBenchConfig:
    """What a model benchmark runs. Defaults come from the tier; explicit values override."""

    tier: str = "model"
    models: list = field(default_factory=list)
    n_trial: dict = field(default_factory=dict)
    """Total trials per model (over all its tasks), the same for every tuner."""
    tuners: list = field(default_factory=list)
    seeds: list = field(default_factory=list)
    checkpoints: int = 4
    """Points of the curve: the model is compiled and timed after every ``1/checkpoints`` of the budget."""
    references: list = field(default_factory=list)
    target: str = '{"kind": "llvm", "num-cores": 2}'
    out: str = ""
    number: int = 4
    repeat: int = 3
    min_repeat_ms: int = 50
    n_parallel: int | None = None
    scheduler: str = "gradient"
    layout: str = "NCHW"
    """conv2d layout inside the models (:func:`release.relax.model_layout`): ``"NCHWc"`` is the space
    that beats PyTorch on a CPU (docs/design/layouts-and-prepacking.md); every tuner, MetaSchedule included, tunes and compiles the
    same converted model. Logs of another layout are kept apart (the layout is in their names)."""
    ms_trials_per_iter: int | None = 64
    """MetaSchedule's candidates per iteration: 64 is ``tune_relax``'s default (the model tier);
    None lets :func:`release.relax.tune_with_metaschedule` fit it to a small budget (the smoke tier)."""
    knowledge: str = ""
    """Knowledge base folder the ``TUNER:warm`` runs start from (each reads a copy); "" when no run is warm."""

    @classmethod
    def from_tier(cls, tier: str, **over) -> "ModelBenchConfig":
        """The tier's configuration with ``over``'s values (None / empty: the tier's).

        ``n_trial`` may be an int (every model) or a ``{model: trials}`` dict.

        Raises
        ------
        TunerError
            Unknown tier, model, tuner or reference; a budget or checkpoint count below 1.
        """
        if tier not in MODEL_TIERS:
            raise TunerError(f"unknown model tier {tier!r}; choose one of {', '.join(MODEL_TIERS)}")
        base = {k: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v)
                for k, v in MODEL_TIERS[tier].items()}
        from ..target import host_cores

        cfg = cls(tier=tier, target=json.dumps({"kind": "llvm", "num-cores": host_cores()}), **base)
        n_trial = over.pop("n_trial", None)
        for k, v in over.items():
            if isinstance(v, (list, tuple)) and not v:
                raise TunerError(f"--{k.replace('_', '-')} was given without a value; name at least one, or leave "
                                 f"it out for the tier's default ({', '.join(map(str, getattr(cfg, k)))})")
            if v not in (None, ""):
                setattr(cfg, k, list(v) if isinstance(v, tuple) else v)
        from .. import zoo

        unknown = [m for m in cfg.models if m not in zoo.MODEL_NAMES]
        if unknown:
            raise TunerError(f"unknown models {unknown}; choose from {', '.join(zoo.MODEL_NAMES)}")
        if isinstance(n_trial, dict):
            cfg.n_trial = {**cfg.n_trial, **n_trial}
        elif n_trial is not None:
            cfg.n_trial = {m: int(n_trial) for m in cfg.models}
        default = max(cfg.n_trial.values()) if cfg.n_trial else 0
        cfg.n_trial = {m: int(cfg.n_trial.get(m, default)) for m in cfg.models}
        bad = {m: n for m, n in cfg.n_trial.items() if n < 1}
        if bad:
            raise TunerError(f"--n-trial {bad} must be positive integers (trials per model)")
        if cfg.checkpoints < 1:
            raise TunerError(f"--checkpoints {cfg.checkpoints} must be a positive integer")
        from ..tuners import MODEL_BASED, TUNERS

        unknown = [t for t in cfg.tuners if t != MS and split_tuner(t)[0] not in TUNERS]
        if unknown:
            raise TunerError(f"unknown tuners {unknown}; choose from {MS} (MetaSchedule tune_relax), "
                             f"{', '.join(TUNERS)} (a model-based one with '{WARM}': warm from --knowledge)")
        warm = [t for t in cfg.tuners if split_tuner(t)[1]]
        cold_only = [t for t in warm if split_tuner(t)[0] not in MODEL_BASED]
        if cold_only:
            raise TunerError(f"{cold_only}: only model-based tuners ({', '.join(MODEL_BASED)}) start warm from a "
                             "knowledge base")
        if warm and not (cfg.knowledge and os.path.isdir(cfg.knowledge)):
            raise TunerError(f"{warm} start warm from a knowledge base: give --knowledge DIR (a folder made by "
                             f"`release knowledge add LOG...` or by tuning); got {cfg.knowledge or 'none'!r}")
        if cfg.knowledge and not warm:
            raise TunerError(f"--knowledge {cfg.knowledge} is read only by warm runs: name one, e.g. --tuners "
                             f"release+ release+{WARM}")
        unknown = [r for r in cfg.references if r not in REFERENCES]
        if unknown:
            raise TunerError(f"unknown references {unknown}; choose from {', '.join(REFERENCES)}")
        from .. import relax as M

        M.model_layout(cfg.layout)  # a bad layout: its one-line error
        if not cfg.out:
            cfg.out = os.path.join(DEFAULT_OUT, tier)
        return cfg

    @property
    def logs(self) -> str:
        """The runs' logs: ``<out>/logs``."""
        return os.path.join(self.out, "logs")

    def log_path(self, model: str, tuner: str, seed: int) -> str:
        """``<out>/logs/<model>.<tuner>.s<seed>[.<layout>].jsonl`` (our tuners) or the folder
        ``<model>.ms.s<seed>[.<layout>]`` (the layout when not NCHW; ``TUNER:warm`` as ``TUNER-warm``)."""
        name = f"{model}.{tuner.replace(WARM, '-warm')}.s{seed}" + ("" if self.layout == "NCHW" else f".{self.layout}")
        return os.path.join(self.logs, name if tuner == MS else name + ".jsonl")


def parse_trials(text: str):
    """``"2000"`` -> 2000; ``"resnet18=2000,bert-base-layer=1000"`` -> a dict (the CLI's ``--n-trial``).

    Raises
    ------
    TunerError
        Neither form, or a count that is not an integer.
    """
    text = str(text).strip()
    try:
        if "=" not in text:
            return int(text)
        out = {}
        for part in text.split(","):
            name, n = part.split("=")
            out[name.strip()] = int(n)
        return out
    except ValueError:
        raise TunerError(f"--n-trial {text!r}: give an integer (trials per run) or MODEL=N[,MODEL=N] "
                         "for the model tiers") from None
