"""Model benchmark tier: whole models tuned end to end, tuned latency against tuning wall time.

``release bench --tier model`` tunes every model of the tier (ResNet-18, MobileNetV2, the BERT-base
encoder layer; :mod:`release.zoo`) with every tuner of the tier and the same total budget:

- our tuners (``release+``, ``xgb``, ... any name of ``release.tuners.TUNERS``) through
  :func:`release.model.tune_model` (gradient task scheduler, one log shared by the tasks,
  resumable: ``<out>/logs/<model>.<tuner>.s<seed>.jsonl``);
- ``ms``: MetaSchedule's own ``tune_relax`` (:func:`release.model.tune_with_metaschedule`: TVM's
  CPU recipe with ``cpu_weight_prepack``, all cores, its default evolutionary search (64 candidates
  per iteration, ``tune_relax``'s default; ``ms_trials_per_iter``), XGBoost
  model and gradient scheduler; only the build function is the fast one), database in
  ``<out>/logs/<model>.ms.s<seed>/``. ``tune_relax`` does not resume: a run killed part-way is
  started again from nothing (its partial database is moved aside).

Warm runs (the whole-model row of the warm-start benchmark): a tuner named ``TUNER:warm`` (a model-based tuner,
``release+:warm``) is that tuner given the knowledge base ``knowledge`` (``--knowledge DIR``) through
:func:`release.model.tune_model` (transfer-tuning seeds, the default use). Each warm run reads its own
copy of the base (``<out>/kb-runs/<log name>``), made before its first trial, so no run learns from
another run's records; its log is ``<model>.<tuner>-warm.s<seed>...``. Listed beside the cold tuner
(``--tuners release+ release+:warm``), the ratio table gives the time the warm run needs to reach the
cold run's final latency.

Layout: the ``model`` tier tunes the models with conv2d in NCHWc (channel blocks of the target's
vector lanes, weights transformed at compile time; the space that beats PyTorch eager on a CPU,
docs/design/layouts-and-prepacking.md), every tuner and MetaSchedule on the same converted model (``--layout``; ``model-smoke``: NCHW).
Logs of a layout other than NCHW carry it in their names (``<model>.<tuner>.s<seed>.NCHWc.jsonl``).

The curve: at ``checkpoints`` fractions of the budget (default every 25%), the model is compiled
with the best record of each task among the run's first N trials (our log's first N records;
MetaSchedule's first database records up to the batch that reached N trials) and timed on the
target's threads. Its wall time is the tuning wall-clock time at that trial, from a per-trial
file written beside the log (``<log>.wall.jsonl``; MetaSchedule's ``trials.jsonl``, written by a
measure callback after each batch): both include everything the tuner does (search, cost-model
fits, builds, runs). Checkpoint results are cached in ``<out>/checkpoints.json`` (a killed report
continues; ``--retime`` times them again).

Reference lines, timed in the same invocation on the same threads after warm-up, fastest of
repeats, with :func:`release.reference.time_torch`'s reliability flag: PyTorch eager,
``torch.compile`` (inductor; a failure is reported with its reason), ONNX Runtime (the model
exported with ``torch.onnx.export``; ``pip install 'release[bench]'`` when it is missing), and
TVM's untuned build (default schedules). A flagged reference is printed ``UNRELIABLE``, with why.

Outputs under ``<out>`` (default ``runs/bench/<tier>``: :data:`release.bench.DEFAULT_OUT`, git-ignored): ``results.json``, ``table.md``
(with the exact command), ``curves.png`` (latency against tuning wall time per model).
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .callback import Callback
from .errors import TunerError

logger = logging.getLogger(__name__)

#: tuner name of MetaSchedule's own ``tune_relax`` in this tier
MS = "ms"
#: suffix of a tuner name that starts the tuner warm from ``ModelBenchConfig.knowledge``
WARM = ":warm"


def split_tuner(spec: str) -> tuple[str, bool]:
    """``"release+:warm"`` -> ``("release+", True)``; ``"xgb"`` -> ``("xgb", False)``."""
    return (spec[: -len(WARM)], True) if spec.endswith(WARM) else (spec, False)

REFERENCES = ("eager", "torch.compile", "onnxruntime")

MODEL_TIERS = {
    # The whole-model tier: hours on a quiet 2-core machine (docs/design/model-tuning.md).
    "model": dict(models=["resnet18", "resnet50", "mobilenet_v2", "bert-base-layer", "vit-b16"],
                  n_trial={"resnet18": 2000, "resnet50": 2000, "mobilenet_v2": 2000, "bert-base-layer": 1000,
                           "vit-b16": 2000},
                  tuners=["release+", "xgb", MS], seeds=[0], checkpoints=4, references=list(REFERENCES),
                  ms_trials_per_iter=64, layout="NCHWc"),
    # The harness end to end in about a minute: tiny-cnn (2 tasks), a few trials.
    "model-smoke": dict(models=["tiny-cnn"], n_trial={"tiny-cnn": 16}, tuners=["random", MS], seeds=[0],
                        checkpoints=2, references=["eager", "onnxruntime"], ms_trials_per_iter=None),
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
    """conv2d layout inside the models (:func:`release.model.model_layout`): ``"NCHWc"`` is the space
    that beats PyTorch on a CPU (docs/design/layouts-and-prepacking.md); every tuner, MetaSchedule included, tunes and compiles the
    same converted model. Logs of another layout are kept apart (the layout is in their names)."""
    ms_trials_per_iter: int | None = 64
    """MetaSchedule's candidates per iteration: 64 is ``tune_relax``'s default (the model tier);
    None lets :func:`release.model.tune_with_metaschedule` fit it to a small budget (the smoke tier)."""
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
        from .target import host_cores

        cfg = cls(tier=tier, target=json.dumps({"kind": "llvm", "num-cores": host_cores()}), **base)
        n_trial = over.pop("n_trial", None)
        for k, v in over.items():
            if isinstance(v, (list, tuple)) and not v:
                raise TunerError(f"--{k.replace('_', '-')} was given without a value; name at least one, or leave "
                                 f"it out for the tier's default ({', '.join(map(str, getattr(cfg, k)))})")
            if v not in (None, ""):
                setattr(cfg, k, list(v) if isinstance(v, tuple) else v)
        from . import zoo

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
        from .tuners import MODEL_BASED, TUNERS

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
        from . import model as M

        M.model_layout(cfg.layout)  # a bad layout: its one-line error
        if not cfg.out:
            from .bench import DEFAULT_OUT

            cfg.out = os.path.join(DEFAULT_OUT, tier)
        return cfg

    @property
    def logs(self) -> str:
        return os.path.join(self.out, "logs")


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


def log_path(cfg: ModelBenchConfig, model: str, tuner: str, seed: int) -> str:
    """``<out>/logs/<model>.<tuner>.s<seed>[.<layout>].jsonl`` (our tuners) or the folder
    ``<model>.ms.s<seed>[.<layout>]`` (the layout when not NCHW)."""
    name = f"{model}.{tuner.replace(WARM, '-warm')}.s{seed}" + ("" if cfg.layout == "NCHW" else f".{cfg.layout}")
    return os.path.join(cfg.logs, name if tuner == MS else name + ".jsonl")


class WallClock(Callback):
    """Tuner callback: appends ``{"trials", "elapsed_s"}`` to ``<log>.wall.jsonl`` after every
    measurement (flushed), continuing the count and the clock of an earlier, killed run of the
    same log, so the curve's wall-time axis survives a resume (the time between the runs is not
    counted).

    Parameters
    ----------
    path : str
        The sidecar file.
    trials : int
        Records already in the tuning log (the resumed ones).
    """

    def __init__(self, path: str, trials: int):
        self.path = path
        prev = _read_jsonl(path)
        self.offset = float(prev[-1]["elapsed_s"]) if prev else 0.0
        self.trials = int(trials)
        self.t0 = time.time()

    def on_result(self, tuner, inputs, results) -> None:
        """Count the results and append the elapsed time (flushed)."""
        self.trials += len(results)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"trials": self.trials, "elapsed_s": self.offset + time.time() - self.t0}) + "\n")
            f.flush()


def _read_jsonl(path: str) -> list:
    if not os.path.exists(path):
        return []
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut by a kill
    return out


def _ms_done(path: str) -> dict | None:
    done = os.path.join(path, "done.json")
    if os.path.exists(done):
        with open(done) as f:
            return json.load(f)
    return None


def run(cfg: ModelBenchConfig, progress: bool = True) -> None:
    """Tune (or resume) every (model, tuner, seed) of ``cfg``; runs already at their budget are skipped."""
    from . import model as M
    from .measure import load_records
    from .measure.config import MeasureConfig
    from .target import resolve_target
    from .threads import thread_count, use_threads

    target = resolve_target(cfg.target)
    use_threads(thread_count(target))  # before any worker starts: they inherit TVM_NUM_THREADS
    os.makedirs(cfg.logs, exist_ok=True)
    opt = None
    try:
        for seed in cfg.seeds:
            for name in cfg.models:
                n = cfg.n_trial[name]
                model = tasks = None
                for tuner in cfg.tuners:
                    path = log_path(cfg, name, tuner, seed)
                    if tuner == MS:
                        done = _ms_done(path)
                        if done and done.get("n_trial", 0) >= n:
                            continue
                        if os.path.exists(path):  # tune_relax does not resume: keep the partial run aside
                            aside = f"{path}.partial-{int(time.time())}"
                            logger.warning("%s: MetaSchedule run incomplete (tune_relax does not resume); "
                                           "moved to %s and started again", path, aside)
                            shutil.move(path, aside)
                        model = model or M.load_model(name)
                        logger.info("%s: MetaSchedule tune_relax, %d trials", name, n)
                        _, wall = M.tune_with_metaschedule(model, target, n, path, number=cfg.number,
                                                           repeat=cfg.repeat, min_repeat_ms=cfg.min_repeat_ms,
                                                           n_parallel=cfg.n_parallel, seed=seed, progress=progress,
                                                           trial_log=os.path.join(path, "trials.jsonl"),
                                                           num_trials_per_iter=cfg.ms_trials_per_iter,
                                                           layout=cfg.layout)
                        with open(os.path.join(path, "done.json"), "w") as f:
                            json.dump({"n_trial": n, "wall_s": wall}, f)
                        continue
                    have = len(load_records(path)) if os.path.exists(path) else 0
                    if have >= n:
                        continue
                    if opt is None:
                        opt = MeasureConfig(n_parallel=cfg.n_parallel, number=cfg.number, repeat=cfg.repeat,
                                            min_repeat_ms=cfg.min_repeat_ms).make_option()
                    if tasks is None:
                        model = model or M.load_model(name)
                        tasks = M.extract_tasks(model, target, progress=progress, layout=cfg.layout)
                    name_t, warm = split_tuner(tuner)
                    kb = None
                    if warm:  # its own copy of the base, made once: no run learns from another's records
                        kb = os.path.join(cfg.out, "kb-runs", os.path.basename(path)[: -len(".jsonl")])
                        if not os.path.exists(kb):
                            shutil.copytree(cfg.knowledge, kb)
                    M.tune_model(tasks, n, path, tuner=name_t, scheduler=cfg.scheduler, measure_option=opt,
                                 seed=seed, progress=progress, callbacks=[WallClock(path + ".wall.jsonl", have)],
                                 knowledge=kb, defaults=False)  # the tuners' search alone: its curve
    finally:
        if opt is not None:
            opt["builder"].close()
            opt["runner"].close()


def checkpoint_trials(n_trial: int, checkpoints: int) -> list[int]:
    """Trial counts of the curve's points: ``n_trial * k / checkpoints``, k = 1..checkpoints
    (rounded, distinct, the last = ``n_trial``)."""
    return sorted({max(1, int(round(n_trial * k / checkpoints))) for k in range(1, checkpoints + 1)})


def _wall_at(wall: list, n: int) -> float:
    """Elapsed seconds when the run had measured ``n`` trials (the first entry reaching ``n``;
    the last one when it never did). ``nan`` without entries."""
    for w in wall:
        if int(w["trials"]) >= n:
            return float(w["elapsed_s"])
    return float(wall[-1]["elapsed_s"]) if wall else float("nan")


def _our_database(path: str, n: int, tasks):
    """A MetaSchedule database of each task's best record among the log's first ``n`` records,
    and how many records that was."""
    from .measure import load_records
    from .measure.records import ApplyHistoryBest

    recs = load_records(path)[:n]
    return ApplyHistoryBest(recs).database(tasks), len(recs)


def _ms_database(path: str, n: int):
    """MetaSchedule's database as it was after the batch that reached ``n`` trials (its first
    records, in commit order), the trials and the elapsed seconds there."""
    from tvm.s_tir import meta_schedule as ms

    trials = _read_jsonl(os.path.join(path, "trials.jsonl"))
    done = _ms_done(path) or {}
    # the run's last point is its end (MetaSchedule's last batch may overshoot the budget)
    upto = trials if n >= int(done.get("n_trial", n + 1)) else [t for t in trials if int(t["trials"]) <= n] or trials[:1]
    last = upto[-1] if upto else {"records": 0, "trials": 0, "elapsed_s": float("nan")}
    with open(os.path.join(path, "database_tuning_record.json")) as f:
        lines = [l for l in f if l.strip()][: int(last["records"])]
    sub = os.path.join(path, f"prefix-{n}")
    os.makedirs(sub, exist_ok=True)
    shutil.copy(os.path.join(path, "database_workload.json"), os.path.join(sub, "database_workload.json"))
    with open(os.path.join(sub, "database_tuning_record.json"), "w") as f:
        f.writelines(lines)
    return ms.database.JSONDatabase(work_dir=sub), int(last["trials"]), float(last["elapsed_s"])


def time_model(model, executable, threads: int, number: int = 10, repeat: int = 7) -> dict:
    """Check ``executable`` against the reference and time it (fastest of ``repeat`` means of
    ``number`` runs, after :func:`release.model.evaluate`'s first call as warm-up; fewer runs for a
    slow executable, bounded to ~30 s and said in ``note``)."""
    from . import model as M

    from .reference import RELIABLE_SPREAD

    res = M.evaluate(model, executable, number=number, repeat=repeat, threads=threads)
    out = {"latency_ms": res["fastest_ms"], "median_ms": res["latency_ms"], "max_abs_err": res["max_abs_err"],
           "threads": res["threads"], "reliable": True, "note": ""}
    if (res["number"], res["repeat"]) != (number, repeat):  # a slow executable: the timing was bounded
        out["note"] = f"slow: {res['repeat']} means of {res['number']} run(s)"
    if res["latency_ms"] > RELIABLE_SPREAD * res["fastest_ms"]:  # the same test as the references'
        busy = f"median of repeats {res['latency_ms'] / res['fastest_ms']:.1f}x the fastest; the machine looks busy"
        out.update(reliable=False, note="; ".join(x for x in (out["note"], busy) if x))
    return out


def checkpoints(cfg: ModelBenchConfig, retime: bool = False, progress: bool = True, tasks: dict | None = None) -> dict:
    """Compile and time every run at its checkpoints (cached in ``<out>/checkpoints.json``).

    Returns ``{"model|tuner|seed": [{"trials", "wall_s", "latency_ms", "median_ms", ...}]}``.
    """
    from . import model as M
    from .target import resolve_target
    from .threads import thread_count

    target = resolve_target(cfg.target)
    threads = thread_count(target)
    cache_path = os.path.join(cfg.out, "checkpoints.json")
    cache = {} if retime or not os.path.exists(cache_path) else json.load(open(cache_path))
    os.makedirs(cfg.out, exist_ok=True)
    out: dict = {}
    todo = [(m, t, s, n) for s in cfg.seeds for m in cfg.models for t in cfg.tuners
            for n in checkpoint_trials(cfg.n_trial[m], cfg.checkpoints)]
    bar = None
    if progress:
        from .progress import progress as make_progress  # a bar on a terminal, plain lines elsewhere

        bar = make_progress(len(todo), desc="checkpoints", unit="compile")
    models: dict = {}
    tasks = {} if tasks is None else tasks  # model name -> extracted tasks, shared with the caller
    try:
        for m, t, s, n in todo:
            key = f"{m}|{t}|{s}"
            ck = f"{key}|{n}|{cfg.n_trial[m]}" + ("" if cfg.layout == "NCHW" else f"|{cfg.layout}")
            path = log_path(cfg, m, t, s)
            if ck not in cache and os.path.exists(path):
                if m not in models:
                    models[m] = M.load_model(m)
                if t == MS:
                    if _ms_done(path) is None:
                        logger.warning("%s: MetaSchedule run not finished; no checkpoints", path)
                        db = None
                    else:
                        db, trials, wall = _ms_database(path, n)
                else:
                    if m not in tasks:
                        tasks[m] = M.extract_tasks(models[m], target, layout=cfg.layout)
                    db, trials = _our_database(path, n, tasks[m])
                    wall = _wall_at(_read_jsonl(path + ".wall.jsonl"), trials)
                if db is not None and trials > 0:
                    t0 = time.time()
                    ex = M.compile_model(models[m], target, db, layout=cfg.layout)
                    point = {"trials": trials, "wall_s": wall, "compile_s": time.time() - t0,
                             **time_model(models[m], ex, threads)}
                    cache[ck] = point
                    with open(cache_path, "w") as f:  # a killed report keeps what it timed
                        json.dump(cache, f, indent=1)
            if ck in cache:
                out.setdefault(key, []).append(cache[ck])
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return out


def references(cfg: ModelBenchConfig, model_name: str, progress: bool = True) -> dict:
    """The model's reference lines on the target's threads: ``{name: {"latency_ms", "median_ms",
    "reliable", "note", "threads"}}`` or ``{name: {"error": why}}``; ``untuned`` is TVM's build with
    default schedules."""
    from . import model as M
    from .reference import RELIABLE_SPREAD, time_torch
    from .target import resolve_target
    from .threads import thread_count

    import torch

    target = resolve_target(cfg.target)
    threads = thread_count(target)
    model = M.load_model(model_name)
    xs = [torch.from_numpy(x) for x in model.inputs]
    out: dict = {}

    def timed(fn, one_thread_fn=None) -> dict:
        """``fn`` timed on the target's threads; ``one_thread_fn`` (default ``fn`` with PyTorch on
        one thread) the same work on one thread, for the oversubscription check."""
        r = time_torch(fn, threads=threads)
        res = {"latency_ms": r.seconds * 1e3, "median_ms": r.median * 1e3, "second_ms": r.second * 1e3,
               "reliable": r.reliable, "note": r.note, "threads": r.threads}
        if threads > 1:  # more threads slower than one: an oversubscribed machine, not the library's speed
            one = time_torch(one_thread_fn or fn, threads=1, repeat=5)
            res["one_thread_ms"] = one.seconds * 1e3
            if r.seconds > RELIABLE_SPREAD * one.seconds:
                res["reliable"] = False
                res["note"] = "; ".join(x for x in (res["note"], f"{threads} threads {r.seconds / one.seconds:.1f}x "
                                                    f"slower than 1 thread ({one.seconds * 1e3:.3f} ms): the "
                                                    "machine looks busy") if x)
            torch.set_num_threads(threads)
        return res

    # PyTorch first: TVM's thread pool spins a while after each run and would compete with PyTorch's threads
    if "eager" in cfg.references:
        out["eager"] = timed(lambda: model.torch_module(*xs))
    if "torch.compile" in cfg.references:
        try:
            t0 = time.time()
            compiled = torch.compile(model.torch_module)
            with torch.no_grad():
                compiled(*xs)  # the compile itself (inductor), outside the timing
            out["torch.compile"] = {**timed(lambda: compiled(*xs)), "compile_s": time.time() - t0}
        except Exception as err:  # noqa: BLE001 - report why it does not work on this CPU
            from .errors import error_line

            out["torch.compile"] = {"error": f"torch.compile failed: {error_line(err, first=True)}"}
    if "onnxruntime" in cfg.references:
        out["onnxruntime"] = _onnxruntime(cfg, model, xs, threads, timed)
    out["untuned"] = time_model(model, M.compile_model(model, target), threads)  # TVM's defaults, as imported
    return out


def _onnxruntime(cfg, model, xs, threads, timed) -> dict:
    try:
        import onnxruntime as ort
    except ImportError:
        return {"error": "onnxruntime is not installed: pip install 'release[bench]'"}
    import torch

    from .errors import error_line

    path = os.path.join(cfg.logs, f"{model.name}.onnx")
    try:
        os.makedirs(cfg.logs, exist_ok=True)
        from .reference import onnx_exportable

        exported = onnx_exportable(model.torch_module)  # transformer layers with explicit attention: exportable
        with torch.no_grad():
            # the TorchScript exporter: the torch.export-based one needs onnxscript, not a dependency
            torch.onnx.export(exported, tuple(xs), path, dynamo=False)
        def session(n: int):
            so = ort.SessionOptions()
            so.intra_op_num_threads = n  # the target's threads, as TVM and PyTorch
            so.inter_op_num_threads = 1
            return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

        sess, sess1 = session(threads), session(1)
        feed = {i.name: x.numpy() for i, x in zip(sess.get_inputs(), xs)}
        got = sess.run(None, feed)[0]
        ref = model.reference()[0]
        if not np.allclose(got, ref, rtol=1e-3, atol=1e-3):
            return {"error": f"ONNX Runtime's output differs from PyTorch's (max abs error "
                             f"{float(np.max(np.abs(got - ref))):.3g})"}
        res = timed(lambda: sess.run(None, feed), lambda: sess1.run(None, feed))
        res["threads"] = threads
        res["version"] = ort.__version__
        if exported is not model.torch_module:
            res["export"] = "transformer layers exported with explicit attention (release.reference.onnx_exportable)"
        return res
    except Exception as err:  # noqa: BLE001 - a reference line is optional; say why it is missing
        return {"error": f"ONNX Runtime failed: {error_line(err, first=True)}"}


def time_to_reach(points: list, latency_ms: float) -> float:
    """Wall seconds of the first checkpoint at or below ``latency_ms`` (``nan`` if none): an upper
    bound on the time the run needed (the curve is known at its checkpoints only)."""
    for p in points:
        if p["latency_ms"] <= latency_ms:
            return float(p["wall_s"])
    return float("nan")


def ratio_table(runs: dict) -> dict:
    """For every ordered pair (a, b) of runs of one model: the time a needs to reach b's final
    latency and b's whole tuning time over it (> 1: a got there faster than b finished).

    Parameters
    ----------
    runs : dict
        ``{tuner: [checkpoint points, in trial order]}``.

    Returns
    -------
    dict
        ``{a: {b: {"reach_s", "b_wall_s", "speedup", "reached"}}}``; ``reach_s`` and ``speedup``
        are ``nan`` when a never got to b's latency.
    """
    out: dict = {}
    for a, pa in runs.items():
        for b, pb in runs.items():
            if a == b or not pa or not pb:
                continue
            reach = time_to_reach(pa, pb[-1]["latency_ms"])
            bw = float(pb[-1]["wall_s"])
            out.setdefault(a, {})[b] = {"reach_s": reach, "b_wall_s": bw, "reached": math.isfinite(reach),
                                        "speedup": bw / reach if math.isfinite(reach) and reach > 0 else float("nan")}
    return out


def report(cfg: ModelBenchConfig, command: str = "", retime: bool = False, progress: bool = True) -> dict:
    """Checkpoints, references, ratios: write ``results.json``, ``table.md`` and ``curves.png``."""
    from . import model as M
    from .bench import machine, write_results
    from .target import resolve_target
    from .threads import thread_count, use_threads

    target = resolve_target(cfg.target)
    threads = thread_count(target)
    use_threads(threads)
    refs_of = {m: references(cfg, m, progress=progress) for m in cfg.models}  # before TVM's pool runs here
    extracted: dict = {}
    points = checkpoints(cfg, retime=retime, progress=progress, tasks=extracted)
    per_model: dict = {}
    for m in cfg.models:
        if m not in extracted:
            extracted[m] = M.extract_tasks(M.load_model(m), target, layout=cfg.layout)
        tasks = extracted[m]
        refs = refs_of[m]
        runs = {f"{t}|{s}": points.get(f"{m}|{t}|{s}", []) for t in cfg.tuners for s in cfg.seeds}
        by_tuner = {t: runs[f"{t}|{cfg.seeds[0]}"] for t in cfg.tuners if runs.get(f"{t}|{cfg.seeds[0]}")}
        per_model[m] = {"tasks": len(tasks), "gflop": sum(t.flop * t.weight for t in tasks) / 1e9,
                        "n_trial": cfg.n_trial[m], "runs": runs, "references": refs,
                        "ratios": ratio_table(by_tuner)}
    result = {"config": asdict(cfg), "command": command, "machine": machine(), "threads": threads,
              "models": per_model}
    write_results(cfg.out, result, markdown, plot)
    return result


def _f(x, nd=2) -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{nd}f}"


def _ref_text(r: dict) -> str:
    if "error" in r:
        return f"not timed: {r['error']}"
    text = f"{_f(r['latency_ms'], 3)} ms"
    return text if r.get("reliable", True) else f"{text} (UNRELIABLE: {r.get('note')})"


def markdown(result: dict) -> str:
    """The results as Markdown: per model, the curve of each run, the references, the ratios."""
    cfg = result["config"]
    mach = result["machine"]
    lines = [f"# Benchmark `{cfg['tier']}` (whole models)", "", f"Command: `{result['command']}`  ",
             f"Machine: {mach['cpu']}, {mach['cores']} cores, TVM {mach['versions'].get('apache-tvm')}, "
             f"PyTorch {mach['versions'].get('torch')}; {mach.get('date', 'date not recorded')}, "
             f"release {mach.get('release', 'revision not recorded')}  ",
             f"Threads: every TVM timing, tuning measurement and reference on {result['threads']}  ",
             f"Tuners: {', '.join(cfg['tuners'])} (`ms` = MetaSchedule tune_relax); seeds {cfg['seeds']}; "
             f"trials per model {cfg['n_trial']}; curve points every 1/{cfg['checkpoints']} of the budget", "",
             "Latency: fastest of 7 means of 10 runs of the compiled model (output checked against PyTorch); "
             "references the same way (warm-up, fastest of repeats, flagged UNRELIABLE when a second method or "
             "the median disagrees by more than 1.5x). Wall time: the tuning's wall clock at that trial "
             "(search, fits, builds, runs).", ""]
    for m, r in result["models"].items():
        refs = r["references"]
        eager = refs.get("eager", {}).get("latency_ms")
        eager_ok = refs.get("eager", {}).get("reliable", False)
        lines += [f"## {m} ({r['tasks']} tasks, {_f(r['gflop'], 2)} GFLOP, {r['n_trial']} trials)", "",
                  "| tuner | seed | trials | tuning wall s | latency ms | vs PyTorch eager |", "|---|---|---|---|---|---|"]
        for key, pts in r["runs"].items():
            t, s = key.split("|")
            if not pts:
                lines.append(f"| {t} | {s} | - | - | not run | |")
            for p in pts:
                vs = f"{eager / p['latency_ms']:.2f}x" if eager and p["latency_ms"] else "n/a"
                vs += "" if eager_ok or vs == "n/a" else " (eager UNRELIABLE)"
                lat = _f(p["latency_ms"], 3) + ("" if p.get("reliable", True) else f" (UNRELIABLE: {p.get('note')})")
                lines.append(f"| {t} | {s} | {p['trials']} | {_f(p['wall_s'], 0)} | {lat} | {vs} |")
        lines += ["", "| reference | latency | threads |", "|---|---|---|"]
        for name, ref in refs.items():
            label = "TVM untuned (default schedules)" if name == "untuned" else name
            lines.append(f"| {label} | {_ref_text(ref)} | {ref.get('threads', '')} |")
        ratios = r.get("ratios", {})
        if ratios:
            names = list(ratios)
            lines += ["", "Time to reach the other's final latency (s; its total tuning time over that, > 1 = faster):",
                      "", "| tuner | " + " | ".join(f"to {b}'s final" for b in names) + " |",
                      "|---|" + "---|" * len(names)]
            for a in names:
                cells = []
                for b in names:
                    if b == a or b not in ratios[a]:
                        cells.append("-")
                        continue
                    x = ratios[a][b]
                    cells.append(f"{_f(x['reach_s'], 0)} s ({_f(x['speedup'])}x)" if x["reached"] else "not reached")
                lines.append(f"| {a} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["A point's time to reach is that of the first checkpoint at or below the latency (first seed; an upper bound: "
              "the curve is known at its checkpoints only).", ""]
    return "\n".join(lines)


def plot(result: dict, out: str) -> None:
    """``curves.png``: per model, tuned latency (ms, log scale) against tuning wall time (s), one
    line per run, the references as horizontal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(result["models"])
    fig, axes = plt.subplots(1, len(models), figsize=(5.5 * len(models), 3.6), squeeze=False)
    for ax, m in zip(axes[0], models):
        r = result["models"][m]
        for j, (key, pts) in enumerate(r["runs"].items()):
            if pts:
                ax.plot([p["wall_s"] for p in pts], [p["latency_ms"] for p in pts], marker="o", color=f"C{j}",
                        label=key.replace("|", " s"))
        for k, (name, ref) in enumerate(r["references"].items()):
            if "latency_ms" in ref:
                ls = ":" if not ref.get("reliable", True) else "--"
                ax.axhline(ref["latency_ms"], color=f"C{k + 5}", ls=ls, lw=0.9,
                           label=name + ("" if ref.get("reliable", True) else " (unreliable)"))
        ax.set_yscale("log")
        ax.set_xlabel("tuning wall time (s)")
        ax.set_ylabel("latency (ms)")
        ax.set_title(f"{m}, {r['n_trial']} trials", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "curves.png"), dpi=110)
    plt.close(fig)
