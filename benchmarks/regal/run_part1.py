"""REGAL part 1 benchmark: every method at the same evaluation budget on held-out synthetic graphs and on
real model graphs, for both objectives; gap to the proven optimum and improvement over the given order.

Settings (defaults; all recorded in the JSON output):

* synthetic: ``--n-test`` held-out graphs (default 100) and ``--n-train`` training graphs (default 8, used
  only to grid-search "tuned BRKGA"), layered random DAGs of ``--nodes`` nodes (40) and width ``--width`` (8),
  edge density 0.15, disjoint topologies (``make_splits``), no room-for-improvement filter;
* real graphs: ResNet-18, one transformer encoder layer, an Inception block, RandWire (release.graph.models),
  imported through TVM's Relax frontend with the default roofline cost model (50 GFLOP/s, 20 GB/s, 2 us);
* objectives: peak memory on 1 device (exact: frontier DP), running time on 2 devices with the default link
  (5 us + bytes / 10 GB/s; exact: CP-SAT with ``--cpsat-time`` seconds, 1 worker, counted only when proven);
* methods: brkga (plain, population 100, elite 0.2, mutant 0.2, rho 0.7), tuned-brkga, random, local,
  greedy (1 evaluation), given (1 evaluation), each search method with ``--budget`` evaluations (5000) and
  seed = graph index.

Usage::

    .venv/bin/python benchmarks/regal/run_part1.py            # full run, writes runs/regal/ (--out benchmarks/regal/results: the committed figures)
    .venv/bin/python benchmarks/regal/run_part1.py --quick    # 5 graphs, small budget (smoke test)
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from release.graph.baselines import TuningGrid, run_method, tune_brkga  # noqa: E402
from release.graph.exact import exact_makespan, exact_peak_memory  # noqa: E402
from release.graph.perf_model import PerformanceModel, measure_evals_per_second  # noqa: E402
from release.graph.synthetic import SyntheticConfig, make_splits, random_layered_graph  # noqa: E402

SEARCH = ("brkga", "tuned-brkga", "random", "local", "greedy", "given")
SETTINGS = (("peak-memory", 1), ("runtime", 2))
REAL = ("resnet18", "transformer", "inception", "randwire")
log = logging.getLogger("run_part1")


def exact_for(graph, objective, devices, cpsat_time, dp_states):
    t0 = time.perf_counter()
    if objective == "peak-memory":
        r = exact_peak_memory(graph, dp_states)
    else:
        r = exact_makespan(graph, devices, time_limit_s=cpsat_time, seed=0)
    return {"objective": r.objective, "optimal": bool(r.optimal), "status": r.status, "bound": r.bound,
            "seconds": time.perf_counter() - t0}


def run_graph(graph, objective, devices, budget, seed, tuned_cfg, cpsat_time, dp_states):
    out = {"graph": graph.name, "nodes": graph.n, "objective": objective, "devices": devices, "methods": {}}
    for m in SEARCH:
        model = PerformanceModel(graph, devices, objective)
        kw = {"config": tuned_cfg} if m == "tuned-brkga" else {}
        t0 = time.perf_counter()
        r = run_method(m, model, budget, seed, **kw)
        assert model.evaluations <= budget
        out["methods"][m] = {"objective": r.best_objective, "evaluations": r.evaluations,
                             "seconds": time.perf_counter() - t0}
    out["exact"] = exact_for(graph, objective, devices, cpsat_time, dp_states)
    return out


def evals_per_second(sizes=(100, 1000), width=8):
    rows = []
    for n in sizes:
        g = random_layered_graph(SyntheticConfig(n_nodes=n, width=width, edge_density=0.15), 12345)
        for objective, devices in (("peak-memory", 1), ("runtime", 2), ("peak-memory", 2)):
            m = PerformanceModel(g, devices, objective)
            k = 2000 if n <= 100 else 300
            rate = measure_evals_per_second(m, k, batch=100, seed=0)
            rows.append({"nodes": n, "edges": int(len(g.data_edges) + len(g.control_edges)), "objective": objective,
                         "devices": devices, "evaluations": k, "evals_per_s": rate})
            log.info("evals/s: %d nodes, %s, %d devices: %.0f", n, objective, devices, rate)
    return rows


def summarize(results, setting_key, methods):
    """Per method: mean gap to optimum (proven only), hits, mean improvement over given."""
    rows = {}

    def best_known(r):
        cands = [r["methods"][m]["objective"] for m in methods]
        if r["exact"]["objective"] is not None:
            cands.append(r["exact"]["objective"])
        return min(cands)

    for m in methods:
        gaps, hits, impr, gbk = [], 0, [], []
        for r in results:
            bk = best_known(r)
            gbk.append(100.0 * (r["methods"][m]["objective"] - bk) / bk)
            obj = r["methods"][m]["objective"]
            given = r["methods"]["given"]["objective"]
            impr.append(100.0 * (given - obj) / given)
            ex = r["exact"]
            if ex["optimal"]:
                gaps.append(100.0 * (obj - ex["objective"]) / ex["objective"])
                hits += int(obj <= ex["objective"] * (1 + 1e-9))
        rows[m] = {"gap_mean": float(np.mean(gaps)) if gaps else None,
                   "gap_max": float(np.max(gaps)) if gaps else None, "n_proven": len(gaps), "hits": hits,
                   "impr_mean": float(np.mean(impr)), "impr_median": float(np.median(impr)),
                   "gap_best_known_mean": float(np.mean(gbk))}
    # the exact solver's own improvement over the given order
    ex_impr = [100.0 * (r["methods"]["given"]["objective"] - r["exact"]["objective"]) / r["methods"]["given"]["objective"]
               for r in results if r["exact"]["optimal"]]
    ex_gbk = [100.0 * (r["exact"]["objective"] - best_known(r)) / best_known(r)
              for r in results if r["exact"]["objective"] is not None]
    rows["exact"] = {"gap_best_known_mean": float(np.mean(ex_gbk)) if ex_gbk else None,
                     "gap_mean": 0.0 if ex_impr else None, "gap_max": 0.0 if ex_impr else None,
                     "n_proven": len(ex_impr), "hits": len(ex_impr),
                     "impr_mean": float(np.mean(ex_impr)) if ex_impr else None,
                     "impr_median": float(np.median(ex_impr)) if ex_impr else None}
    return rows


def fmt(x, nd=2):
    return "n/a" if x is None else f"{x:.{nd}f}"


def markdown(report):
    lines = []
    a = report["args"]
    lines.append(f"# REGAL part 1 results ({report['finished']})\n")
    lines.append(f"Command: `{report['command']}`  ")
    lines.append(f"Machine: {report['machine']}; total wall time {report['wall_s']:.0f} s.  ")
    lines.append(f"Budget {a['budget']} evaluations per search method; synthetic test graphs: {a['n_test']} x "
                 f"{a['nodes']} nodes (width {a['width']}); tuned BRKGA grid-searched on {a['n_train']} training "
                 f"graphs.\n")
    lines.append("## Evaluations per second (performance model, batches of 100 random chromosomes)\n")
    lines.append("| nodes | edges | objective | devices | evals/s |")
    lines.append("|---:|---:|---|---:|---:|")
    for r in report["evals_per_second"]:
        lines.append(f"| {r['nodes']} | {r['edges']} | {r['objective']} | {r['devices']} | {r['evals_per_s']:.0f} |")
    for key, s in report["summary"].items():
        objective, devices = key.split("@")
        lines.append(f"\n## {objective}, {devices} device(s)\n")
        syn = s["synthetic"]
        n_proven = syn["brkga"]["n_proven"]
        lines.append(f"Synthetic: gap to the proven optimum on {n_proven} of {a['n_test']} graphs "
                     f"(mean / max %, graphs at the optimum); gap to the best known solution on all graphs (best of "
                     f"every method and the exact solver's incumbent, mean %); improvement over the given order "
                     f"(mean / median %). "
                     f"Real graphs: improvement over the given order %, and gap to the optimum % where proven.\n")
        real_names = list(s["real"].keys())
        head = "| method | syn. gap mean | syn. gap max | at opt. | syn. gap to best known | syn. impr. mean | " \
            "syn. impr. median | " + \
            " | ".join(f"{n} impr. (gap)" for n in real_names) + " |"
        lines.append(head)
        lines.append("|---|" + "---:|" * (6 + len(real_names)))
        for m in list(SEARCH) + ["exact"]:
            row = syn[m]
            cells = [m, fmt(row["gap_mean"]), fmt(row["gap_max"]), f"{row['hits']}/{row['n_proven']}",
                     fmt(row.get("gap_best_known_mean")), fmt(row["impr_mean"]), fmt(row["impr_median"])]
            for n in real_names:
                rr = s["real"][n]
                if m == "exact":
                    ex = rr["exact"]
                    if ex["objective"] is None:
                        cells.append(f"n/a ({ex['status']})")
                    else:
                        g = rr["methods"]["given"]["objective"]
                        cells.append(f"{100 * (g - ex['objective']) / g:.2f} ({ex['status']})")
                    continue
                obj = rr["methods"][m]["objective"]
                g = rr["methods"]["given"]["objective"]
                gap = f" ({100 * (obj - rr['exact']['objective']) / rr['exact']['objective']:.2f})" \
                    if rr["exact"]["optimal"] else ""
                cells.append(f"{100 * (g - obj) / g:.2f}{gap}")
            lines.append("| " + " | ".join(cells) + " |")
        if "tuned_config" in s:
            lines.append(f"\nTuned BRKGA config: {s['tuned_config']}")
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n-test", type=int, default=100)
    p.add_argument("--n-train", type=int, default=8)
    p.add_argument("--nodes", type=int, default=40)
    p.add_argument("--width", type=int, default=8)
    p.add_argument("--budget", type=int, default=5000)
    p.add_argument("--cpsat-time", type=float, default=5.0, help="CP-SAT limit per synthetic graph, s")
    p.add_argument("--cpsat-time-real", type=float, default=30.0, help="CP-SAT limit per real graph, s")
    p.add_argument("--dp-states", type=int, default=3_000_000)
    p.add_argument("--seed", type=int, default=2020)
    p.add_argument("--real", default=",".join(REAL))
    p.add_argument("--out", default="runs/regal",
                   help="results folder (default runs/regal, git-ignored; committed: benchmarks/regal/results)")
    p.add_argument("--tag", default="part1")
    p.add_argument("--quick", action="store_true", help="5 test graphs, 2 training graphs, budget 500")
    p.add_argument("--from-json", default=None, help="only re-render the Markdown table of a results JSON")
    args = p.parse_args(argv)
    if args.from_json:
        report = json.loads(Path(args.from_json).read_text())
        for key, res in report["results"].items():
            report["summary"][key]["synthetic"] = summarize(res["synthetic"], key, SEARCH)
        Path(args.from_json).with_suffix(".json").write_text(json.dumps(report, indent=1, default=float))
        Path(args.from_json).with_suffix(".md").write_text(markdown(report))
        return
    if args.quick:
        args.n_test, args.n_train, args.budget, args.cpsat_time, args.cpsat_time_real = 5, 2, 500, 2.0, 5.0
        args.tag = args.tag + "-quick"
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    warnings.filterwarnings("ignore")
    t_start = time.perf_counter()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {"command": " ".join(["python", *sys.argv]), "args": vars(args),
              "machine": f"{platform.processor() or platform.machine()}, {platform.python_version()}, "
                         f"{__import__('os').cpu_count()} cores (shared)"}

    report["evals_per_second"] = evals_per_second()

    cfg = SyntheticConfig(n_nodes=args.nodes, width=args.width, edge_density=0.15)
    ds = make_splits(args.n_train, 0, args.n_test, cfg, seed=args.seed)
    log.info("synthetic: %d train, %d test graphs (%d duplicate topologies rejected)", len(ds.train),
             len(ds.test), ds.rejected_duplicates)
    real_graphs = []
    if args.real:
        from release.graph.models import model_graph

        for name in args.real.split(","):
            g = model_graph(name)
            real_graphs.append(g)
            log.info("real graph %s", g.summary())
    report["real_graphs"] = {g.name: {"nodes": g.n, "edges": int(len(g.data_edges))} for g in real_graphs}

    grid = TuningGrid()
    report["summary"] = {}
    report["results"] = {}
    for objective, devices in SETTINGS:
        key = f"{objective}@{devices}"
        t0 = time.perf_counter()
        tuned = tune_brkga(ds.train, objective, devices, args.budget, grid, seed=args.seed)
        log.info("%s: tuned %s in %.0f s", key, tuned.best, time.perf_counter() - t0)
        syn = []
        for i, g in enumerate(ds.test):
            syn.append(run_graph(g, objective, devices, args.budget, i, tuned.best, args.cpsat_time, args.dp_states))
            if (i + 1) % 10 == 0:
                log.info("%s: %d/%d synthetic graphs, %.0f s", key, i + 1, len(ds.test), time.perf_counter() - t0)
        real = {}
        for i, g in enumerate(real_graphs):
            real[g.name] = run_graph(g, objective, devices, args.budget, i, tuned.best, args.cpsat_time_real,
                                     args.dp_states)
            log.info("%s: %s done (exact %s)", key, g.name, real[g.name]["exact"]["status"])
        report["results"][key] = {"synthetic": syn, "real": real}
        report["summary"][key] = {
            "synthetic": summarize(syn, key, SEARCH),
            "real": real,
            "tuned_config": str(tuned.best),
            "tuning_scores": [(str(c), s) for c, s in tuned.scores],
        }
    report["wall_s"] = time.perf_counter() - t_start
    report["finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    (out_dir / f"{args.tag}.json").write_text(json.dumps(report, indent=1, default=float))
    (out_dir / f"{args.tag}.md").write_text(markdown(report))
    log.info("wrote %s and %s (%.0f s)", out_dir / f"{args.tag}.json", out_dir / f"{args.tag}.md", report["wall_s"])


if __name__ == "__main__":
    main()
