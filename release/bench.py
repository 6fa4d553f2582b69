"""Benchmark harness: tuners x workloads x seeds, with the metrics of the Chameleon paper.

``release bench --tier quick`` runs every tuner on every workload and seed, one at a time (so
measurements do not disturb each other), each with its own resumable log under
``<out>/logs/``; a killed benchmark continues where it stopped. Then it computes, per task and
as a geometric mean over tasks with a bootstrap confidence interval over seeds:

- ``time_speedup``: wall time XGBTuner needs to reach its own final best GFLOPS divided by the
  wall time the tuner needs to reach the same value (optimization-time speed-up at equal
  quality). A run that never gets there is censored, not dropped: it counts with the bound
  XGBTuner's time over the run's whole wall time (it would have needed longer), its row says
  ``reached: false``, and tables mark a geometric mean that includes such bounds with ``<=``;
- ``round_speedup``: wall time of XGBTuner's first ``rounds`` rounds (the paper's 16 in the paper
  tier; each tier sets the rounds its budget holds) over the
  tuner's (rounds = cost-model refits; tuners without a model use XGBTuner's measurement count);
- ``measure_ratio``: measurements XGBTuner needs to reach its final best over the tuner's
  (censored the same way);
- ``best_gflops`` at equal measurements (the smallest trial count both reached) and its ratio;
- ``search_share``: share of wall time spent in search and cost-model fitting.

The same metrics are computed against every tuner of ``BenchConfig.against`` present in the run
(default: MetaSchedule's evolutionary search), so "ReleaseTuner over MetaSchedule" comes from the
same logs.

Wall time of a run = the sum of its records' ``search_s + fit_s + measure_s`` (the tuner's own
accounting), so runs of different tuners compare although they ran one after the other. A
reference line per task: the same operator in PyTorch on this CPU.
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .errors import TunerError, check_n_trial

logger = logging.getLogger(__name__)

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
        if tier not in TIERS:
            raise TunerError(f"unknown tier {tier!r}; choose one of {', '.join(TIERS)}, or a model tier: model, model-smoke")
        base = dict(TIERS[tier])
        if base["workloads"] is None:
            from .workloads import list_workloads

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
        from .tuners import TUNERS
        from .workloads import get_workload

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


def log_path(cfg: BenchConfig, workload: str, tuner: str, seed: int) -> str:
    """``<logs>/<workload>[-<layout>][-prepack].<tuner>.s<seed>.jsonl`` (the suffixes keep another
    program's runs apart from the NCHW ones)."""
    variant = ("" if cfg.layout in ("", "NCHW") else f"-{cfg.layout}") + ("-prepack" if cfg.prepack else "")
    return os.path.join(cfg.logs, f"{workload}{variant}.{tuner}.s{seed}.jsonl")


def run(cfg: BenchConfig, progress: bool = True) -> None:
    """Run (or resume) every (workload, tuner, seed) of ``cfg``."""
    from .measure import load_records, log_to_file
    from .task import create_task
    from .tuners import get_tuner
    from .tuners.callback import progress_bar

    os.makedirs(cfg.logs, exist_ok=True)  # tuner names were checked by BenchConfig.from_tier (get_tuner checks too)
    opt = _measure_option(cfg)
    tasks = {w: create_task(w, cfg.target, layout=cfg.layout, prepack=cfg.prepack) for w in cfg.workloads}
    try:
        # Seeds outermost: a benchmark stopped part-way leaves complete seeds over every tuner and task.
        for seed in cfg.seeds:
            for w, task in tasks.items():
                for tuner_name in cfg.tuners:
                    path = log_path(cfg, w, tuner_name, seed)
                    if os.path.exists(path) and len(load_records(path)) >= cfg.n_trial:
                        continue  # done (by this tier or a longer one): no tuner to build, no model to refit
                    tuner = get_tuner(tuner_name, task, seed=seed)
                    cbs = [log_to_file(path)]
                    if progress:
                        cbs.append(progress_bar(total=cfg.n_trial, prefix=f"{w} {tuner_name} s{seed}"))
                    tuner.tune(cfg.n_trial, opt, callbacks=cbs)
    finally:
        opt["builder"].close()
        opt["runner"].close()


def _measure_option(cfg: BenchConfig) -> dict:
    """The builder and runner every run and re-measurement of ``cfg`` uses: the measurement
    defaults of :class:`release.measure.MeasureConfig` with the tier's settings."""
    from .measure.config import MeasureConfig

    return MeasureConfig(n_parallel=cfg.n_parallel, number=cfg.number, repeat=cfg.repeat,
                         min_repeat_ms=cfg.min_repeat_ms).make_option()


def remeasure(cfg: BenchConfig, top: int = 3, rounds: int = 3, seed: int = 0) -> dict:
    """Re-time every run's ``top`` best logged configs, all runs of a task interleaved in a shuffled
    order, ``rounds`` times, so that every tuner's best kernel is timed under the same machine load
    (runs of different tuners happen hours apart on a shared machine; their logged GFLOPS carry
    that drift). Same builder and runner settings as the runs.

    Kernels run on the target's ``num-cores`` threads, and PyTorch's operator is timed in every round
    on the same threads (the side-by-side reference). A config's figure is its fastest cost over the
    rounds (each cost the mean of ``number`` runs), as the PyTorch reference is the fastest of its
    runs: on a shared machine the fastest time is the least disturbed one (shared/reference/
    kernel-quality.md); the median over rounds is kept too. With ``RELEASE_TIMING_PRIORITY=realtime``
    this process (PyTorch's timings) and the run workers time at real-time priority
    (:func:`release.threads.timing_priority`), for a machine shared with other work.

    Returns ``{workload: {"TUNER|SEED": GFLOPS}}`` (per run the best of its configs) and writes
    ``<out>/remeasure.json`` (also ``gflops_median``, ``pytorch_gflops``, ``threads`` and
    ``timing_priority``);
    :func:`report` reads it.
    """
    from .measure import load_records
    from .measure.measure import Measurer
    from .task import create_task
    from .threads import thread_count, timing_priority

    rng = np.random.default_rng(seed)
    out: dict = {}
    out_median: dict = {}
    refs: dict = {}
    ref_info: dict = {}
    unreliable: dict = {}
    threads = thread_count(cfg.target)
    # PyTorch is timed in this process: the same priority as the run workers (RELEASE_TIMING_PRIORITY)
    priority = timing_priority()
    opt = _measure_option(cfg)
    try:
        for w in cfg.workloads:
            task = create_task(w, cfg.target, layout=cfg.layout, prepack=cfg.prepack)
            space = task.config_space
            items = []
            for t in cfg.tuners:
                for s in cfg.seeds:
                    run = load_records(log_path(cfg, w, t, s))
                    wrong = {tuple(r.config) for r in run if r.error_kind == "wrong_output"}  # failed the output check
                    recs = sorted((r for r in run[: cfg.n_trial] if r.ok and tuple(r.config) not in wrong),
                                  key=lambda r: -r.gflops)
                    items += [(f"{t}|{s}", space.canonical(r.config)) for r in recs[:top]]
            if not items:
                continue
            measurer = Measurer(task, opt)
            costs: dict = {}
            ref: list = []
            for _ in range(rounds):
                order = rng.permutation(len(items))
                for res in measurer.measure(list(dict.fromkeys(items[i][1] for i in order))):
                    if res.ok:
                        costs.setdefault(tuple(res.config), []).extend(res.costs)
                try:
                    g, info = torch_reference(w, threads=threads, task=task)
                    ref.append(g)
                    ref_info.setdefault(w, []).append(info)
                except Exception as err:  # noqa: BLE001 - the reference line is optional
                    logger.warning("no PyTorch reference for %s: %s", w, err)
            best: dict = {}
            best_med: dict = {}
            for run, c in items:
                if tuple(c) in costs:
                    best[run] = max(best.get(run, 0.0), task.flop / float(np.min(costs[tuple(c)])) / 1e9)
                    best_med[run] = max(best_med.get(run, 0.0), task.flop / float(np.median(costs[tuple(c)])) / 1e9)
            out[w], out_median[w] = best, best_med
            if ref:
                refs[w] = float(np.max(ref))
                if not any(i["reliable"] for i in ref_info.get(w, [])):
                    unreliable[w] = "; ".join(i["note"] for i in ref_info[w])
    finally:
        opt["builder"].close()
        opt["runner"].close()
    os.makedirs(cfg.out, exist_ok=True)
    with open(os.path.join(cfg.out, "remeasure.json"), "w") as f:
        json.dump({"top": top, "rounds": rounds, "n_trial": cfg.n_trial, "statistic": "fastest", "gflops": out,
                   "gflops_median": out_median, "pytorch_gflops": refs, "pytorch_unreliable": unreliable,
                   "threads": threads, "timing_priority": priority}, f, indent=1)
    return out


# ---------------------------------------------------------------------------------------- metrics
def continued_rounds(rounds) -> np.ndarray:
    """Round numbers (cost-model refits before each measurement) made non-decreasing across resumes.

    Logs written before the round fix (``Tuner.round_base``, 2026-11-30) restart their rounds at 1
    when a run is resumed, e.g. ``0 0 1 1 2 | 1 1 2``; the resumed segment is shifted to continue after the
    last round, ``0 0 1 1 2 | 3 3 4``, which is what the fixed tuner logs. Logs that never decrease are
    returned unchanged. Shape ``(n,)`` int."""
    out = np.array(rounds, dtype=int)
    offset = 0
    for i in range(1, len(out)):
        raw_prev, raw = rounds[i - 1], rounds[i]
        if raw < raw_prev:  # a resume of a pre-fix log: continue after the last round
            offset = out[i - 1] - raw + 1
        out[i] = raw + offset
    return out


@dataclass
class Curve:
    """Best-so-far curve of one run. Arrays have one entry per measurement, in order."""

    gflops: np.ndarray  # best GFLOPS so far
    wall: np.ndarray  # cumulative seconds (search + fit + measure)
    search: np.ndarray  # cumulative seconds in search + fit
    rounds: np.ndarray  # cost-model refits before each measurement

    @classmethod
    def from_records(cls, recs) -> "Curve":
        g = np.maximum.accumulate(np.array([r.gflops for r in recs], dtype=float)) if recs else np.zeros(0)
        wall = np.cumsum([r.search_s + r.fit_s + r.measure_s for r in recs]) if recs else np.zeros(0)
        search = np.cumsum([r.search_s + r.fit_s for r in recs]) if recs else np.zeros(0)
        rounds = continued_rounds([r.round for r in recs])
        return cls(g, np.asarray(wall, float), np.asarray(search, float), rounds)

    @property
    def best(self) -> float:
        return float(self.gflops[-1]) if len(self.gflops) else 0.0

    def reach(self, target: float) -> tuple[int, float] | None:
        """``(measurements, wall seconds)`` at which the curve first reaches ``target`` GFLOPS."""
        idx = np.nonzero(self.gflops >= target * (1 - 1e-9))[0]
        if not len(idx):
            return None
        i = int(idx[0])
        return i + 1, float(self.wall[i])

    def at(self, n: int) -> float:
        """Best GFLOPS after ``n`` measurements."""
        return float(self.gflops[min(n, len(self.gflops)) - 1]) if n >= 1 and len(self.gflops) else 0.0

    def wall_at_rounds(self, rounds: int) -> float | None:
        """Wall seconds of the first ``rounds`` rounds (records of rounds 0 .. rounds-1; a last round
        cut short by the trial budget counts as done). None if the run never got to round
        ``rounds - 1``."""
        if not len(self.rounds) or self.rounds.max() < rounds - 1:
            return None
        return float(self.wall[int(np.nonzero(self.rounds <= rounds - 1)[0][-1])])


def compare(base: Curve, other: Curve, rounds: int = 16) -> dict:
    """Metrics of ``other`` against the baseline ``base`` (same task, same seed).

    Keys: ``time_speedup``, ``measure_ratio`` (to ``base``'s final best; upper bounds when
    ``reached`` is False, see the module docstring), ``equal_n``, ``best_at_equal_n`` (GFLOPS),
    ``best_ratio_at_equal_n``, ``round_speedup``, ``search_share`` (0-1)."""
    out = {}
    target = base.best
    rb, ro = base.reach(target), other.reach(target)
    out["reached"] = ro is not None
    out["reach_n"], out["reach_s"] = ro if ro else (None, None)  # measurements and wall seconds to base's best
    if ro is None and len(other.gflops):  # censored: it would have needed more than its whole run
        ro = (len(other.gflops), float(other.wall[-1]))
    out["time_speedup"] = rb[1] / ro[1] if rb and ro and ro[1] > 0 else float("nan")
    out["measure_ratio"] = rb[0] / ro[0] if rb and ro else float("nan")
    n = min(len(base.gflops), len(other.gflops))
    out["equal_n"] = n
    out["best_at_equal_n"] = other.at(n)
    out["best_ratio_at_equal_n"] = other.at(n) / base.at(n) if base.at(n) > 0 else float("nan")
    wb, wo = base.wall_at_rounds(rounds), other.wall_at_rounds(rounds)
    if other.rounds.max(initial=0) == 0 and wb is not None:  # model-free tuner: the baseline's measurements
        k = int(np.count_nonzero(base.rounds <= rounds - 1))
        wo = float(other.wall[k - 1]) if 0 < k <= len(other.wall) else None
    out["round_speedup"] = wb / wo if wb and wo else float("nan")
    out["search_share"] = float(other.search[-1] / other.wall[-1]) if len(other.wall) and other.wall[-1] > 0 else 0.0
    return out


def geomean(values) -> float:
    """Geometric mean of the finite positive values (``nan`` if none)."""
    v = np.array([x for x in values if x is not None and np.isfinite(x) and x > 0], dtype=float)
    return float(np.exp(np.mean(np.log(v)))) if len(v) else float("nan")


def bootstrap_geomean(per_task_seed: dict[str, list[float]], n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Geometric mean over tasks of each task's geometric mean over seeds, with a 95% bootstrap
    interval from resampling seeds within each task. Returns ``(estimate, low, high)``."""
    tasks = {k: [x for x in v if np.isfinite(x) and x > 0] for k, v in per_task_seed.items()}
    tasks = {k: v for k, v in tasks.items() if v}
    if not tasks:
        return float("nan"), float("nan"), float("nan")
    est = geomean([geomean(v) for v in tasks.values()])
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        boots.append(geomean([geomean(rng.choice(v, size=len(v), replace=True)) for v in tasks.values()]))
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return est, float(lo), float(hi)


def torch_reference_gflops(workload: str, repeat: int = 30, threads: int | None = None, task=None) -> float:
    """GFLOPS of the same operator in PyTorch (eager, this CPU) from :func:`torch_reference`."""
    return torch_reference(workload, repeat, threads, task)[0]


def torch_reference(workload: str, repeat: int = 30, threads: int | None = None, task=None) -> tuple[float, dict]:
    """The operator in PyTorch timed as carefully as our kernels (:func:`release.reference.time_torch`:
    warm-up, ``threads`` intra-op threads (the benchmark passes the target's ``num-cores``, the count
    TVM's kernels are timed with), fastest of ``repeat`` single calls, checked against a second
    method).

    Returns
    -------
    (GFLOPS, dict)
        The dict is the :class:`release.reference.ReferenceTiming` as JSON (``reliable``, ``note``, ...).
    """
    import torch

    from .reference import time_torch
    from .task import create_task
    from .workloads import get_workload

    w = get_workload(workload)
    task = task if task is not None and task.name == w.name else create_task(workload, prepack=False)  # NCHW inputs
    xs = [torch.from_numpy(x) for x in task.random_inputs()]
    p = w.params
    if w.op in ("conv2d", "depthwise_conv2d"):
        groups = p["c"] if w.op == "depthwise_conv2d" else 1
        f = lambda: torch.nn.functional.conv2d(xs[0], xs[1], stride=p["stride"], padding=p["pad"],  # noqa: E731
                                               groups=groups)
    elif w.op == "dense":
        f = lambda: torch.nn.functional.linear(xs[0], xs[1])  # noqa: E731
    else:
        f = lambda: xs[0] @ xs[1]  # noqa: E731
    ref = time_torch(f, threads=threads, number=1, repeat=repeat)
    return task.flop / ref.seconds / 1e9, asdict(ref)


def machine() -> dict:
    """CPU model, cores, library versions, the date (UTC) and the code's version and git revision
    (:func:`release.measure.result.provenance`), for the results: every committed figure names its
    machine, date and code revision."""
    import datetime
    import importlib.metadata as md

    from .measure.result import provenance

    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), cpu)
    except OSError:
        pass
    from .target import host_cores, host_cpu

    vers = {}
    for pkg in ("apache-tvm", "apache-tvm-ffi", "torch", "xgboost", "scikit-learn", "numpy"):
        try:
            vers[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            vers[pkg] = None
    version, revision = provenance()
    return {"cpu": cpu, "llvm_mcpu": host_cpu(), "cores": host_cores(), "python": platform.python_version(),
            "versions": vers, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            "release": f"{version}@{revision or 'no-git'}"}


def report(cfg: BenchConfig, command: str = "") -> dict:
    """Compute the metrics from the logs and write ``results.json``, ``table.md`` and plots."""
    from .measure import load_records

    comparators = [a for a in cfg.against if a in cfg.tuners and a != cfg.baseline]
    if not any(os.path.exists(log_path(cfg, w, t, s)) for w in cfg.workloads for t in cfg.tuners for s in cfg.seeds):
        raise TunerError(f"no logs of these runs in {cfg.logs}/; run the benchmark first (without --report-only), "
                         "or point --logs at the folder that holds them")
    curves: dict = {}
    split: dict = {}  # wall seconds in search, fit and measurement per run
    provenance: dict = {}  # workload -> {code label: records} (package version and git revision)
    for w in cfg.workloads:
        provenance[w] = {}
        for t in cfg.tuners:
            for s in cfg.seeds:
                recs = load_records(log_path(cfg, w, t, s))[: cfg.n_trial]
                for r in recs:
                    label = code_label(r)
                    provenance[w][label] = provenance[w].get(label, 0) + 1
                if recs:
                    curves[(w, t, s)] = Curve.from_records(recs)
                    split[(w, t, s)] = {k: float(sum(getattr(r, k) for r in recs))
                                        for k in ("search_s", "fit_s", "measure_s")}
    remeasured: dict = {}
    rem_threads = None
    rem_refs: dict = {}
    ref_flags: dict = {}  # workload -> why its PyTorch reference is not to be trusted
    rem_path = os.path.join(cfg.out, "remeasure.json")
    if os.path.exists(rem_path):
        with open(rem_path) as f:
            rem = json.load(f)
        if rem.get("n_trial") == cfg.n_trial:
            remeasured = rem["gflops"]
            rem_threads = rem.get("threads", 0)
            rem_refs = rem.get("pytorch_gflops", {})
            ref_flags.update(rem.get("pytorch_unreliable", {}))
    per_task: dict = {}
    for w in cfg.workloads:
        per_task[w] = {}
        for t in cfg.tuners:
            rows = []
            for s in cfg.seeds:
                c = curves.get((w, t, s))
                if c is None:
                    continue
                row = {"seed": s, "measurements": len(c.gflops), "best_gflops": c.best,
                       "wall_s": float(c.wall[-1]) if len(c.wall) else 0.0, **split[(w, t, s)]}
                if f"{t}|{s}" in remeasured.get(w, {}):
                    row["remeasured_gflops"] = remeasured[w][f"{t}|{s}"]
                b = curves.get((w, cfg.baseline, s))
                if b is not None:
                    row.update(compare(b, c, cfg.rounds))
                row["against"] = {a: compare(curves[(w, a, s)], c, cfg.rounds) for a in comparators
                                  if (w, a, s) in curves}
                rows.append(row)
            per_task[w][t] = rows
    summary = _summary(cfg, per_task, lambda r: r)
    summary_against = {a: _summary(cfg, per_task, lambda r, a=a: r["against"].get(a, {})) for a in comparators}
    from .threads import search_threads, thread_count

    threads = thread_count(cfg.target)
    logged_threads = sorted({int(r.threads) for w in cfg.workloads for t in cfg.tuners for s in cfg.seeds
                             for r in load_records(log_path(cfg, w, t, s))[: cfg.n_trial] if r.ok})
    refs = dict(rem_refs)  # timed beside the kernels in the re-measurement, when there is one
    for w in cfg.workloads:
        if w in refs:
            continue
        try:
            refs[w], info = torch_reference(w, threads=threads)
            if not info["reliable"]:
                ref_flags[w] = info["note"]
        except Exception as err:  # noqa: BLE001 - the reference line is optional
            logger.warning("no PyTorch reference for %s: %s", w, err)
    result = {"config": asdict(cfg), "command": command, "machine": machine(), "baseline": cfg.baseline,
              "per_task": per_task, "summary": summary, "summary_against": summary_against,
              "median_best_gflops": {w: {t: float(np.median([r["best_gflops"] for r in rows]))
                                         for t, rows in per_task[w].items() if rows} for w in cfg.workloads},
              "median_remeasured_gflops": {
                  w: {t: float(np.median([r["remeasured_gflops"] for r in rows]))
                      for t, rows in per_task[w].items() if rows and all("remeasured_gflops" in r for r in rows)}
                  for w in cfg.workloads},
              "pytorch_gflops": refs,
              "pytorch_unreliable": ref_flags,
              # threads: of the logged measurements (0 = runs before the count was set, on TVM's default of
              # half the cores, 1 here), of the side-by-side re-timing, and of the PyTorch reference
              # search: every tuner's search and cost model (release.threads.search_threads, the setting
              # of this process; runs do not record it)
              "threads": {"logged": logged_threads, "remeasured": rem_threads, "pytorch": threads,
                          "search": search_threads()},
              # records per code revision that measured them, per workload (tables flag a mix)
              "provenance": provenance,
              "curves": {f"{w}|{t}|{s}": {"gflops": c.gflops.tolist(), "wall": c.wall.tolist()}
                         for (w, t, s), c in curves.items()}}
    write_results(cfg.out, result, markdown, plot)
    return result


def write_results(out: str, result: dict, markdown, plot) -> None:
    """Write a tier's ``results.json`` (NaN as null), ``table.md`` (``markdown(result)``) and plots
    (``plot(result, out)``; a failing plot is a warning, not an error) under ``out``."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(result, f, indent=1, default=_nan_json)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(markdown(result))
    try:
        plot(result, out)
    except Exception as err:  # noqa: BLE001 - plots are a convenience
        logger.warning("plots not written: %s", err)


def _summary(cfg: BenchConfig, per_task: dict, metrics_of) -> dict:
    """Per tuner: geometric mean over tasks (95% bootstrap interval over seeds) of each metric of
    ``metrics_of(row)``, how many runs reached the comparator's best, and the mean search share."""
    summary = {}
    for t in cfg.tuners:
        rows = [metrics_of(r) for w in cfg.workloads for r in per_task[w].get(t, [])]
        entry = {}
        expected = len(cfg.workloads) * len(cfg.seeds)
        for metric in ("time_speedup", "round_speedup", "measure_ratio", "best_ratio_at_equal_n"):
            data = {w: [metrics_of(r).get(metric, float("nan")) for r in per_task[w].get(t, [])]
                    for w in cfg.workloads}
            est, lo, hi = bootstrap_geomean(data)
            # every run is counted: those without a usable value are excluded from the mean, with a reason
            values = [v for vs in data.values() for v in vs]
            used = sum(1 for v in values if v is not None and np.isfinite(v) and v > 0)
            reasons = []
            if len(values) < expected:
                reasons.append(f"{expected - len(values)} without records")
            if len(values) > used:
                reasons.append(f"{len(values) - used} "
                               + ("without a value (no baseline run of that seed, or nothing measured)" if metric != "round_speedup"
                                  else "shorter than the rounds compared"))
            entry[metric] = {"geomean": est, "ci95": [lo, hi], "runs": [used, expected], "excluded": "; ".join(reasons)}
        entry["reached"] = [sum(bool(m.get("reached")) for m in rows), sum("reached" in m for m in rows)]
        shares = [m.get("search_share", 0.0) for m in rows if m]
        entry["search_share_mean"] = float(np.mean(shares)) if shares else float("nan")
        summary[t] = entry
    return summary


def _nan_json(o):
    return None


def _fmt(x, nd=2) -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{nd}f}"


def _summary_table(summary: dict, rounds: int = 16) -> list[str]:
    lines = [f"| tuner | time speed-up to equal quality | reached | speed-up at {rounds} rounds | measurements ratio | "
             "best GFLOPS ratio at equal measurements | search+fit share |", "|---|---|---|---|---|---|---|"]
    for t, e in summary.items():
        reached, runs = e.get("reached", [0, 0])
        bound = "<= " if reached < runs else ""
        cells = []
        for m in ("time_speedup", "round_speedup", "measure_ratio", "best_ratio_at_equal_n"):
            g, (lo, hi) = e[m]["geomean"], e[m]["ci95"]
            pre = bound if m in ("time_speedup", "measure_ratio") else ""
            used, expected = e[m].get("runs", [0, 0])
            excl = f" (excluded {expected - used}/{expected}: {e[m]['excluded']})" if used < expected else ""
            cells.append(f"{pre}{_fmt(g)} [{_fmt(lo)}, {_fmt(hi)}]{excl}")
        cells.insert(1, f"{reached}/{runs}")
        lines.append(f"| {t} | " + " | ".join(cells) + f" | {_fmt(100 * e['search_share_mean'], 0)}% |")
    return lines + [""]


def _ref_cell(result: dict, w: str) -> str:
    """The PyTorch reference of ``w``, marked when its timing was flagged unreliable."""
    cell = _fmt(result.get("pytorch_gflops", {}).get(w))
    why = result.get("pytorch_unreliable", {}).get(w)
    return f"{cell} (UNRELIABLE: {why})" if why else cell


def code_label(rec) -> str:
    """``"<package version>@<git revision>"`` of the code that measured a record (its
    ``release_version`` and ``revision``); ``"unrecorded"`` for records written before they were kept."""
    if not rec.release_version and not rec.revision:
        return "unrecorded"
    return f"{rec.release_version or '?'}@{rec.revision or 'no-git'}"


def _provenance_line(result: dict, workloads=None) -> list[str]:
    """One line under a table whose logs were measured by more than one code revision (else none).

    ``workloads``: the workloads the table covers (default all). Counts are records per
    :func:`code_label`, most first.
    """
    counts: dict = {}
    for w, labels in result.get("provenance", {}).items():
        if workloads is None or w in workloads:
            for label, n in labels.items():
                counts[label] = counts.get(label, 0) + n
    if len(counts) < 2:
        return []
    shown = "; ".join(f"{label}: {n}" for label, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return [f"**Mixed code:** the logs of this table were measured by {len(counts)} code revisions (records per "
            f"version@revision: {shown}); compare its figures with care, or rerun on one revision.", ""]


def _threads_line(th: dict | None) -> str:
    """One line stating the thread counts a table's figures were measured with."""
    if not th:
        return "Threads: not recorded (results written before thread counts were set: TVM ran on 1 thread here)"
    logged = ", ".join("1 (TVM's default, half the cores; count not recorded)" if n == 0 else str(n)
                       for n in th.get("logged", [])) or "-"
    search = th.get("search")
    search = (f"; every tuner's search and cost model {search} (RELEASE_SEARCH_THREADS when reported)"
              if search else "; tuners' search threads not recorded")
    return (f"Threads: logged measurements {logged}; re-timed side by side {th.get('remeasured') or '-'}; "
            f"PyTorch reference {th.get('pytorch')}{search}")


def markdown(result: dict) -> str:
    """The results as Markdown tables (summary, then per task)."""
    cfg = result["config"]
    lines = [f"# Benchmark `{cfg['tier']}`", "",
             f"Command: `{result['command']}`  ", f"Machine: {result['machine']['cpu']}, "
             f"{result['machine']['cores']} cores, TVM {result['machine']['versions'].get('apache-tvm')}; "
             f"{result['machine'].get('date', 'date not recorded')}, release "
             f"{result['machine'].get('release', 'revision not recorded')}  ",
             f"Workloads: {', '.join(cfg['workloads'])}; seeds {cfg['seeds']}; {cfg['n_trial']} trials; "
             f"baseline {result['baseline']}  ", _threads_line(result.get("threads")), "",
             f"### Against {result['baseline']}", ""]
    lines += _summary_table(result["summary"], cfg["rounds"]) + _provenance_line(result)
    for a, summ in result.get("summary_against", {}).items():
        lines += [f"### Against {a}", ""] + _summary_table(summ, cfg["rounds"]) + _provenance_line(result)
    lines += ["Geometric means over tasks (of geometric means over seeds), 95% bootstrap interval over seeds. "
              "Ratios > 1 favour the tuner over the comparator. `reached`: runs that reached the comparator's "
              "final best; `<=`: the mean includes runs that never did, counted as if they had at their last "
              "measurement (an upper bound).", ""]
    med = result.get("median_best_gflops", {})
    if med:
        ws = list(med)
        lines += ["### Median best GFLOPS over seeds", "", "| tuner | " + " | ".join(ws) + " |",
                  "|---|" + "---|" * len(ws)]
        tuners = list(dict.fromkeys(t for w in ws for t in med[w]))
        for t in tuners:
            lines.append(f"| {t} | " + " | ".join(_fmt(med[w].get(t)) for w in ws) + " |")
        refs = result.get("pytorch_gflops", {})
        lines += ["| PyTorch (eager, this CPU) | " + " | ".join(_ref_cell(result, w) for w in ws) + " |", ""]
        lines += _provenance_line(result, ws)
    rem = {w: v for w, v in result.get("median_remeasured_gflops", {}).items() if v}
    if rem:
        ws = list(rem)
        lines += ["### Median best GFLOPS over seeds, re-measured together (`release bench --remeasure`)", "",
                  "Each run's 3 best configs re-timed, all runs of a task interleaved, 3 rounds: the same "
                  "machine load for every tuner. " + ("Fastest cost over the rounds; the PyTorch row was timed in the "
                  "same rounds on the same threads." if result.get("threads", {}).get("remeasured") else
                  "Median over the rounds."), "", "| tuner | " + " | ".join(ws) + " |", "|---|" + "---|" * len(ws)]
        refs = result.get("pytorch_gflops", {})
        for t in dict.fromkeys(t for w in ws for t in rem[w]):
            lines.append(f"| {t} | " + " | ".join(
                _fmt(rem[w].get(t)) + (f" ({rem[w][t] / refs[w]:.2f}x PyTorch)" if refs.get(w) and rem[w].get(t) else "")
                for w in ws) + " |")
        lines += ["| PyTorch (eager, this CPU) | " + " | ".join(_ref_cell(result, w) for w in ws) + " |", ""]
    for w, tuners in result["per_task"].items():
        ref = result["pytorch_gflops"].get(w)
        lines += [f"## {w}" + (f" (PyTorch: {ref:.1f} GFLOPS)" if ref else ""), "",
                  f"| tuner | seed | best GFLOPS | measurements | wall s (search / fit / measure) | "
                  f"to {result['baseline']}'s best: measurements, s | time speed-up | measurements ratio |",
                  "|---|---|---|---|---|---|---|---|"]
        for t, rows in tuners.items():
            for r in rows:
                pre = "" if r.get("reached", True) else "<= "
                reach = f"{r['reach_n']}, {_fmt(r['reach_s'], 0)}" if r.get("reached") else "not reached"
                lines.append(f"| {t} | {r['seed']} | {_fmt(r['best_gflops'])} | {r['measurements']} | "
                             f"{_fmt(r['wall_s'], 0)} ({_fmt(r.get('search_s'), 0)} / {_fmt(r.get('fit_s'), 0)} / "
                             f"{_fmt(r.get('measure_s'), 0)}) | {reach} | "
                             f"{pre}{_fmt(r.get('time_speedup'))} | {pre}{_fmt(r.get('measure_ratio'))} |")
        lines.append("")
        lines += _provenance_line(result, [w])
    return "\n".join(lines)


def plot(result: dict, out: str) -> None:
    """``curves.png`` (best GFLOPS vs measurements and vs wall time, per task; median over seeds bold,
    each seed faint) and ``speedups.png`` (time speed-up to equal quality, geometric mean, 95% interval)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ws = result["config"]["workloads"]
    tuners = list(result["config"]["tuners"])
    fig, axes = plt.subplots(len(ws), 2, figsize=(11, 3.2 * len(ws)), squeeze=False)
    for i, w in enumerate(ws):
        for j, t in enumerate(tuners):
            runs = [c for key, c in result["curves"].items() if key.split("|")[:2] == [w, t] and c["gflops"]]
            if not runs:
                continue
            # each seed faint, the median over seeds bold (on the wall-time axis: of the step functions)
            color = f"C{j % 10}"
            for c in runs:
                axes[i][0].plot(np.arange(1, len(c["gflops"]) + 1), c["gflops"], color=color, lw=0.6, alpha=0.3)
                axes[i][1].plot(c["wall"], c["gflops"], color=color, lw=0.6, alpha=0.3)
            n = min(len(c["gflops"]) for c in runs)
            axes[i][0].plot(np.arange(1, n + 1), np.median([c["gflops"][:n] for c in runs], axis=0), color=color,
                            lw=1.8, label=t)
            grid = np.linspace(0, min(c["wall"][-1] for c in runs), 200)
            steps = [np.where(grid >= c["wall"][0], np.asarray(c["gflops"])[np.maximum(
                np.searchsorted(c["wall"], grid, side="right") - 1, 0)], 0.0) for c in runs]
            axes[i][1].plot(grid, np.median(steps, axis=0), color=color, lw=1.8)
        ref = result["pytorch_gflops"].get(w)
        for ax in axes[i]:
            if ref:
                ax.axhline(ref, color="k", ls="--", lw=0.8, label="PyTorch")
            ax.set_ylabel("best GFLOPS")
            ax.set_title(w, fontsize=9)
        axes[i][0].set_xlabel("measurements")
        axes[i][1].set_xlabel("wall time (s)")
    axes[0][0].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "curves.png"), dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    names = list(result["summary"])
    vals = [result["summary"][t]["time_speedup"]["geomean"] or 0 for t in names]
    ci = [result["summary"][t]["time_speedup"]["ci95"] for t in names]
    ok = [bool(v) and math.isfinite(v) for v in vals]
    heights = [v if k else 0 for v, k in zip(vals, ok)]
    err = np.array([[max(h - (c[0] or h), 0), max((c[1] or h) - h, 0)] if k else [0, 0]
                    for h, c, k in zip(heights, ci, ok)]).T
    bars = ax.bar(names, heights, yerr=err, capsize=3, color=[f"C{i % 10}" for i in range(len(names))])
    # a tuner whose runs did not all reach the baseline's best has an upper bound, not a speed-up: hatch it
    for bar, t in zip(bars, names):
        k, n = result["summary"][t].get("reached") or (0, 0)
        if n and k < n:
            bar.set_hatch("//")
        if n:
            ax.annotate(f"{k}/{n}", (bar.get_x() + bar.get_width() / 2, 0), xytext=(0, 3),
                        textcoords="offset points", ha="center", va="bottom", fontsize=7,
                        bbox=dict(fc="white", ec="none", pad=1))
    ax.tick_params(axis="x", labelsize=8)
    ax.axhline(1, color="k", lw=0.8)
    ax.set_ylabel(f"time speed-up over {result['baseline']}\n(to equal quality, geomean)")
    ax.set_title("hatched: an upper bound (k/n runs reached the baseline's best)", fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "speedups.png"), dpi=110)
    plt.close(fig)
