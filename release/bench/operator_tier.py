"""Operator benchmark tiers: tuners x workloads x seeds, with the metrics of the Chameleon paper.

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
from dataclasses import asdict

import numpy as np

from ..errors import TunerError
from .config import BenchConfig
from .metrics import Curve, compare, summarize
from .reporting import code_label, fmt, reference_cell
from .tier import Tier

logger = logging.getLogger(__name__)


class OperatorTier(Tier):
    """An operator tier: every tuner on every workload and seed, one run at a time, each with its own
    resumable log; metrics against the baseline (and ``against``) from the logs.

    Parameters
    ----------
    cfg : BenchConfig
        The tier's configuration (:meth:`BenchConfig.from_tier`).
    """

    def run(self, progress: bool = True) -> None:
        """Run (or resume) every (workload, tuner, seed) of ``cfg``, seeds outermost; a run whose log
        already holds ``n_trial`` records (of this tier or a longer one) is skipped."""
        from ..measure import load_records, log_to_file
        from ..task import create_task
        from ..tuners import get_tuner
        from ..tuners.callback import progress_bar

        cfg = self.cfg
        os.makedirs(cfg.logs, exist_ok=True)  # tuner names were checked by BenchConfig.from_tier (get_tuner checks too)
        opt = self.measure_option()
        tasks = {w: create_task(w, cfg.target, layout=cfg.layout, prepack=cfg.prepack) for w in cfg.workloads}
        try:
            # Seeds outermost: a benchmark stopped part-way leaves complete seeds over every tuner and task.
            for seed in cfg.seeds:
                for w, task in tasks.items():
                    for tuner_name in cfg.tuners:
                        path = cfg.log_path(w, tuner_name, seed)
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

    def remeasure(self, top: int = 3, rounds: int = 3, seed: int = 0) -> dict:
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
        :meth:`report` reads it.
        """
        from ..measure import load_records
        from ..measure.measure import Measurer
        from ..task import create_task
        from ..threads import thread_count, timing_priority

        cfg = self.cfg
        rng = np.random.default_rng(seed)
        out: dict = {}
        out_median: dict = {}
        refs: dict = {}
        ref_info: dict = {}
        unreliable: dict = {}
        threads = thread_count(cfg.target)
        # PyTorch is timed in this process: the same priority as the run workers (RELEASE_TIMING_PRIORITY)
        priority = timing_priority()
        opt = self.measure_option()
        try:
            for w in cfg.workloads:
                task = create_task(w, cfg.target, layout=cfg.layout, prepack=cfg.prepack)
                space = task.config_space
                items = []
                for t in cfg.tuners:
                    for s in cfg.seeds:
                        run = load_records(cfg.log_path(w, t, s))
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

    def report(self, command: str = "") -> dict:
        """Compute the metrics from the logs and write ``results.json``, ``table.md`` and plots.

        Raises
        ------
        TunerError
            No log of any run of ``cfg`` exists.
        """
        from ..measure import load_records

        cfg = self.cfg
        comparators = [a for a in cfg.against if a in cfg.tuners and a != cfg.baseline]
        if not any(os.path.exists(cfg.log_path(w, t, s)) for w in cfg.workloads for t in cfg.tuners for s in cfg.seeds):
            raise TunerError(f"no logs of these runs in {cfg.logs}/; run the benchmark first (without --report-only), "
                             "or point --logs at the folder that holds them")
        curves: dict = {}
        split: dict = {}  # wall seconds in search, fit and measurement per run
        provenance: dict = {}  # workload -> {code label: records} (package version and git revision)
        for w in cfg.workloads:
            provenance[w] = {}
            for t in cfg.tuners:
                for s in cfg.seeds:
                    recs = load_records(cfg.log_path(w, t, s))[: cfg.n_trial]
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
        summary = summarize(cfg, per_task, lambda r: r)
        summary_against = {a: summarize(cfg, per_task, lambda r, a=a: r["against"].get(a, {})) for a in comparators}
        from ..threads import search_threads, thread_count

        threads = thread_count(cfg.target)
        logged_threads = sorted({int(r.threads) for w in cfg.workloads for t in cfg.tuners for s in cfg.seeds
                                 for r in load_records(cfg.log_path(w, t, s))[: cfg.n_trial] if r.ok})
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
        result = {**self.result_head(command), "baseline": cfg.baseline,
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
        self.write(result)
        return result

    @classmethod
    def markdown(cls, result: dict) -> str:
        """The results as Markdown tables (summary, then per task)."""
        cfg = result["config"]
        lines = cls.header(result) + [
            f"Workloads: {', '.join(cfg['workloads'])}; seeds {cfg['seeds']}; {cfg['n_trial']} trials; "
            f"baseline {result['baseline']}  ", cls.threads_line(result.get("threads")), "",
            f"### Against {result['baseline']}", ""]
        lines += _summary_table(result["summary"], cfg["rounds"]) + cls.provenance_line(result)
        for a, summ in result.get("summary_against", {}).items():
            lines += [f"### Against {a}", ""] + _summary_table(summ, cfg["rounds"]) + cls.provenance_line(result)
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
                lines.append(f"| {t} | " + " | ".join(fmt(med[w].get(t)) for w in ws) + " |")
            lines += ["| PyTorch (eager, this CPU) | " + " | ".join(_ref_cell(result, w) for w in ws) + " |", ""]
            lines += cls.provenance_line(result, ws)
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
                    fmt(rem[w].get(t)) + (f" ({rem[w][t] / refs[w]:.2f}x PyTorch)" if refs.get(w) and rem[w].get(t) else "")
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
                    reach = f"{r['reach_n']}, {fmt(r['reach_s'], 0)}" if r.get("reached") else "not reached"
                    lines.append(f"| {t} | {r['seed']} | {fmt(r['best_gflops'])} | {r['measurements']} | "
                                 f"{fmt(r['wall_s'], 0)} ({fmt(r.get('search_s'), 0)} / {fmt(r.get('fit_s'), 0)} / "
                                 f"{fmt(r.get('measure_s'), 0)}) | {reach} | "
                                 f"{pre}{fmt(r.get('time_speedup'))} | {pre}{fmt(r.get('measure_ratio'))} |")
            lines.append("")
            lines += cls.provenance_line(result, [w])
        return "\n".join(lines)

    @classmethod
    def plot(cls, result: dict, out: str) -> None:
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


def log_path(cfg: BenchConfig, workload: str, tuner: str, seed: int) -> str:
    """``<logs>/<workload>[-<layout>][-prepack].<tuner>.s<seed>.jsonl`` (:meth:`BenchConfig.log_path`)."""
    return cfg.log_path(workload, tuner, seed)


def run(cfg: BenchConfig, progress: bool = True) -> None:
    """Run (or resume) every (workload, tuner, seed) of ``cfg`` (:meth:`OperatorTier.run`)."""
    OperatorTier(cfg).run(progress=progress)


def _measure_option(cfg: BenchConfig) -> dict:
    """The builder and runner every run and re-measurement of ``cfg`` uses (:meth:`Tier.measure_option`)."""
    return OperatorTier(cfg).measure_option()


def remeasure(cfg: BenchConfig, top: int = 3, rounds: int = 3, seed: int = 0) -> dict:
    """Re-time every run's ``top`` best configs side by side (:meth:`OperatorTier.remeasure`)."""
    return OperatorTier(cfg).remeasure(top=top, rounds=rounds, seed=seed)


def report(cfg: BenchConfig, command: str = "") -> dict:
    """Compute the metrics from the logs and write ``results.json``, ``table.md`` and plots
    (:meth:`OperatorTier.report`)."""
    return OperatorTier(cfg).report(command=command)


def markdown(result: dict) -> str:
    """The results as Markdown tables (summary, then per task; :meth:`OperatorTier.markdown`)."""
    return OperatorTier.markdown(result)


def plot(result: dict, out: str) -> None:
    """``curves.png`` and ``speedups.png`` under ``out`` (:meth:`OperatorTier.plot`)."""
    OperatorTier.plot(result, out)


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

    from ..reference import time_torch
    from ..task import create_task
    from ..workloads import get_workload

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


def _summary_table(summary: dict, rounds: int = 16) -> list[str]:
    """The lines of one summary table (:func:`release.bench.metrics.summarize`'s dict), one row per tuner."""
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
            cells.append(f"{pre}{fmt(g)} [{fmt(lo)}, {fmt(hi)}]{excl}")
        cells.insert(1, f"{reached}/{runs}")
        lines.append(f"| {t} | " + " | ".join(cells) + f" | {fmt(100 * e['search_share_mean'], 0)}% |")
    return lines + [""]


def _ref_cell(result: dict, w: str) -> str:
    """The PyTorch reference of ``w`` (GFLOPS), marked when its timing was flagged unreliable."""
    why = result.get("pytorch_unreliable", {}).get(w)
    return reference_cell(result.get("pytorch_gflops", {}).get(w), unreliable=bool(why), note=why)
