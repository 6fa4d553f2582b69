"""Model benchmark tier: whole models tuned end to end, tuned latency against tuning wall time.

``release bench --tier model`` tunes every model of the tier (ResNet-18, MobileNetV2, the BERT-base
encoder layer; :mod:`release.zoo`) with every tuner of the tier and the same total budget:

- our tuners (``release+``, ``xgb``, ... any name of ``release.tuners.TUNERS``) through
  :func:`release.relax.tune_model` (gradient task scheduler, one log shared by the tasks,
  resumable: ``<out>/logs/<model>.<tuner>.s<seed>.jsonl``);
- ``ms``: MetaSchedule's own ``tune_relax`` (:func:`release.relax.tune_with_metaschedule`: TVM's
  CPU recipe with ``cpu_weight_prepack``, all cores, its default evolutionary search (64 candidates
  per iteration, ``tune_relax``'s default; ``ms_trials_per_iter``), XGBoost
  model and gradient scheduler; only the build function is the fast one), database in
  ``<out>/logs/<model>.ms.s<seed>/``. ``tune_relax`` does not resume: a run killed part-way is
  started again from nothing (its partial database is moved aside).

Warm runs (the whole-model row of the warm-start benchmark): a tuner named ``TUNER:warm`` (a model-based tuner,
``release+:warm``) is that tuner given the knowledge base ``knowledge`` (``--knowledge DIR``) through
:func:`release.relax.tune_model` (transfer-tuning seeds, the default use). Each warm run reads its own
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
``torch.compile`` (inductor; a failure is reported with its reason), ONNX Runtime and OpenVINO (the
model exported once with ``torch.onnx.export``; each runtime in a process of its own, its output
checked against PyTorch's: :func:`release.reference.onnx_references`; a runtime missing or
failing is one line, ``pip install 'release-tvm[bench]'`` when missing), and TVM's untuned build
(default schedules). A flagged reference is printed ``UNRELIABLE``, with why.

Outputs under ``<out>`` (default ``runs/bench/<tier>``: :data:`release.bench.DEFAULT_OUT`, git-ignored): ``results.json``, ``table.md``
(with the exact command), ``curves.png`` (latency against tuning wall time per model).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time

from ..callback import Callback
from .config import MS, ModelBenchConfig, split_tuner
from .metrics import checkpoint_trials, ratio_table
from .model_timing import references, time_model
from .reporting import fmt, reference_cell
from .tier import Tier

logger = logging.getLogger(__name__)


class ModelTier(Tier):
    """A model tier: every model tuned end to end by every tuner with the same budget, timed at
    checkpoints against the tuning's wall time, beside the reference lines.

    Parameters
    ----------
    cfg : ModelBenchConfig
        The tier's configuration (:meth:`ModelBenchConfig.from_tier`).
    """

    title_suffix = " (whole models)"
    libraries = (("TVM", "apache-tvm"), ("PyTorch", "torch"))

    def run(self, progress: bool = True) -> None:
        """Tune (or resume) every (model, tuner, seed) of ``cfg``; runs already at their budget are skipped."""
        from .. import relax as M
        from ..measure import load_records
        from ..target import resolve_target
        from ..threads import thread_count, use_threads

        cfg = self.cfg
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
                        path = cfg.log_path(name, tuner, seed)
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
                            opt = self.measure_option()
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

    def checkpoints(self, retime: bool = False, progress: bool = True, tasks: dict | None = None) -> dict:
        """Compile and time every run at its checkpoints (cached in ``<out>/checkpoints.json``).

        Returns ``{"model|tuner|seed": [{"trials", "wall_s", "latency_ms", "median_ms", ...}]}``.
        """
        from .. import relax as M
        from ..target import resolve_target
        from ..threads import thread_count

        cfg = self.cfg
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
            from ..progress import progress as make_progress  # a bar on a terminal, plain lines elsewhere

            bar = make_progress(len(todo), desc="checkpoints", unit="compile")
        models: dict = {}
        tasks = {} if tasks is None else tasks  # model name -> extracted tasks, shared with the caller
        try:
            for m, t, s, n in todo:
                key = f"{m}|{t}|{s}"
                ck = f"{key}|{n}|{cfg.n_trial[m]}" + ("" if cfg.layout == "NCHW" else f"|{cfg.layout}")
                path = cfg.log_path(m, t, s)
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

    def references(self, model_name: str, progress: bool = True) -> dict:
        """The model's reference lines on the target's threads (:func:`release.bench.model_timing.references`)."""
        return references(self.cfg, model_name, progress=progress)

    def report(self, command: str = "", retime: bool = False, progress: bool = True) -> dict:
        """Checkpoints, references, ratios: write ``results.json``, ``table.md`` and ``curves.png``."""
        from .. import relax as M
        from ..target import resolve_target
        from ..threads import thread_count, use_threads

        cfg = self.cfg
        target = resolve_target(cfg.target)
        threads = thread_count(target)
        use_threads(threads)
        refs_of = {m: self.references(m, progress=progress) for m in cfg.models}  # before TVM's pool runs here
        extracted: dict = {}
        points = self.checkpoints(retime=retime, progress=progress, tasks=extracted)
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
        result = {**self.result_head(command), "threads": threads, "models": per_model}
        self.write(result)
        return result

    @classmethod
    def markdown(cls, result: dict) -> str:
        """The results as Markdown: per model, the curve of each run, the references, the ratios."""
        cfg = result["config"]
        lines = cls.header(result) + [
            cls.threads_line(result["threads"]) + "  ",
            f"Tuners: {', '.join(cfg['tuners'])} (`ms` = MetaSchedule tune_relax); seeds {cfg['seeds']}; "
            f"trials per model {cfg['n_trial']}; curve points every 1/{cfg['checkpoints']} of the budget", "",
            "Latency: fastest of 7 means of 10 runs of the compiled model (output checked against PyTorch); "
            "references the same way (warm-up, fastest of repeats, flagged UNRELIABLE when a second method or "
            "the median disagrees by more than 1.5x; ONNX Runtime and OpenVINO each in a process of its own, "
            "their outputs checked against PyTorch's). Wall time: the tuning's wall clock at that trial "
            "(search, fits, builds, runs).", ""]
        for m, r in result["models"].items():
            refs = r["references"]
            eager = refs.get("eager", {}).get("latency_ms")
            eager_ok = refs.get("eager", {}).get("reliable", False)
            lines += [f"## {m} ({r['tasks']} tasks, {fmt(r['gflop'], 2)} GFLOP, {r['n_trial']} trials)", "",
                      "| tuner | seed | trials | tuning wall s | latency ms | vs PyTorch eager |", "|---|---|---|---|---|---|"]
            for key, pts in r["runs"].items():
                t, s = key.split("|")
                if not pts:
                    lines.append(f"| {t} | {s} | - | - | not run | |")
                for p in pts:
                    vs = f"{eager / p['latency_ms']:.2f}x" if eager and p["latency_ms"] else "n/a"
                    vs += "" if eager_ok or vs == "n/a" else " (eager UNRELIABLE)"
                    lat = reference_cell(p["latency_ms"], 3, unreliable=not p.get("reliable", True), note=p.get("note"))
                    lines.append(f"| {t} | {s} | {p['trials']} | {fmt(p['wall_s'], 0)} | {lat} | {vs} |")
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
                        cells.append(f"{fmt(x['reach_s'], 0)} s ({fmt(x['speedup'])}x)" if x["reached"] else "not reached")
                    lines.append(f"| {a} | " + " | ".join(cells) + " |")
            lines.append("")
        lines += ["A point's time to reach is that of the first checkpoint at or below the latency (first seed; an upper bound: "
                  "the curve is known at its checkpoints only).", ""]
        return "\n".join(lines)

    @classmethod
    def plot(cls, result: dict, out: str) -> None:
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
    from ..measure import load_records
    from ..measure.records import ApplyHistoryBest

    recs = load_records(path)[:n]
    return ApplyHistoryBest(recs).database(tasks), len(recs)


def _ms_database(path: str, n: int):
    """MetaSchedule's database as it was after the batch that reached ``n`` trials (its first
    records, in commit order), the trials, and the seconds since tuning started when those
    batches had all been measured."""
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
    # the prefix was complete when its last batch had been measured (``measured_s``), which on a
    # first pass over many tasks is long before MetaSchedule joined it (``elapsed_s``; logs without
    # ``measured_s`` keep the join's time)
    wall = max((float(t.get("measured_s", t["elapsed_s"])) for t in upto), default=float(last["elapsed_s"]))
    return ms.database.JSONDatabase(work_dir=sub), int(last["trials"]), wall


def _ref_text(r: dict) -> str:
    """A reference line's latency cell: ``<ms> ms``, flagged UNRELIABLE with its note, or ``n/a (why)`` (a
    runtime missing or failing on the model: one line, not an error)."""
    if "error" in r:
        return f"n/a ({r['error']})"
    return reference_cell(r.get("latency_ms"), 3, " ms", unreliable=not r.get("reliable", True), note=r.get("note"))


def log_path(cfg: ModelBenchConfig, model: str, tuner: str, seed: int) -> str:
    """``<out>/logs/<model>.<tuner>.s<seed>[.<layout>].jsonl`` or MetaSchedule's folder
    (:meth:`ModelBenchConfig.log_path`)."""
    return cfg.log_path(model, tuner, seed)


def run(cfg: ModelBenchConfig, progress: bool = True) -> None:
    """Tune (or resume) every (model, tuner, seed) of ``cfg`` (:meth:`ModelTier.run`)."""
    ModelTier(cfg).run(progress=progress)


def checkpoints(cfg: ModelBenchConfig, retime: bool = False, progress: bool = True, tasks: dict | None = None) -> dict:
    """Compile and time every run at its checkpoints (:meth:`ModelTier.checkpoints`)."""
    return ModelTier(cfg).checkpoints(retime=retime, progress=progress, tasks=tasks)


def report(cfg: ModelBenchConfig, command: str = "", retime: bool = False, progress: bool = True) -> dict:
    """Checkpoints, references, ratios: write ``results.json``, ``table.md`` and ``curves.png``
    (:meth:`ModelTier.report`)."""
    return ModelTier(cfg).report(command=command, retime=retime, progress=progress)


def markdown(result: dict) -> str:
    """The results as Markdown (:meth:`ModelTier.markdown`)."""
    return ModelTier.markdown(result)


def plot(result: dict, out: str) -> None:
    """``curves.png`` under ``out`` (:meth:`ModelTier.plot`)."""
    ModelTier.plot(result, out)
