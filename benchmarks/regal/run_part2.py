"""REGAL part 2: evaluate the shipped policies on held-out synthetic graphs and on real model graphs.

For each objective (peak memory on 1 device; running time on 2 devices, link 5 us + bytes / 10 GB/s):
held-out synthetic graphs are the *test* split of ``make_splits(32, 0, 100, SyntheticConfig(40 nodes,
width 8, edge density 0.15), seed 0)``, the same call ``release regal train --graphs 32`` makes (the
policies trained on its train split; no topology is shared). Real graphs: ResNet-18, the transformer layer,
the Inception block and RandWire, imported unfused as in part 1 (JSON exports in ``results/graphs``; made
with ``release regal export --graph model:NAME`` when missing). Tuned BRKGA is grid-searched (16 configs) on
the first 4 training graphs at the same budget. Seeds: ``10_000 + i`` (never a training seed).

Usage: ``.venv/bin/python benchmarks/regal/run_part2.py [--n-test 50] [--budget 1000] [--workers 1]``
Writes ``DIR/part2.{json,md}`` (``DIR/part2-OBJECTIVE.{json,md}`` with ``--objectives OBJECTIVE``) under ``--out DIR``
(default ``runs/regal``, git-ignored; the committed figures: ``--out benchmarks/regal/results``).
"""

import argparse
import json
import logging
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
warnings.filterwarnings("ignore")
HERE = Path(__file__).resolve().parent
REAL = ("resnet18", "transformer", "inception", "randwire")


def real_graph(name):
    from release.graph.graph import ComputationGraph

    p = HERE / "results" / "graphs" / f"{name}.json"
    if not p.exists():
        from release.graph.models import model_graph

        p.parent.mkdir(parents=True, exist_ok=True)
        model_graph(name).save(p)
    return ComputationGraph.load(p)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-test", type=int, default=50)
    ap.add_argument("--out", default="runs/regal", help="results folder (committed: benchmarks/regal/results)")
    ap.add_argument("--budget", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--objectives", default="peak-memory,runtime")
    ap.add_argument("--match-factor", type=int, default=8)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from release.graph.baselines import TuningGrid, tune_brkga
    from release.graph.evaluate import EvalConfig, evaluate_policy, summarize
    from release.graph.policy import load_policy, shipped_checkpoint
    from release.graph.synthetic import SyntheticConfig, make_splits

    ds = make_splits(32, 0, 100, SyntheticConfig(n_nodes=40, width=8, edge_density=0.15), seed=0)
    test = ds.test[: args.n_test]
    reals = [real_graph(n) for n in REAL]
    out = {"budget": args.budget, "n_test": len(test), "objectives": {}}
    md = [f"# REGAL part 2 evaluation ({args.objectives}) (budget {args.budget} evaluations, {len(test)} held-out synthetic graphs of "
          "40 nodes, 4 real graphs)", "", f"Command: `.venv/bin/python benchmarks/regal/run_part2.py "
          f"--objectives {args.objectives} --n-test {args.n_test} --budget {args.budget} --workers {args.workers}`", ""]
    for objective in args.objectives.split(","):
        t0 = time.perf_counter()
        policy, meta = load_policy(shipped_checkpoint(objective))
        devices = policy.cfg.devices
        grid = TuningGrid(population=(50, 100), elite_fraction=(0.1, 0.25), mutant_fraction=(0.1, 0.3), rho=(0.6, 0.8))
        tuned = tune_brkga(ds.train[:4], objective, devices, args.budget, grid, seed=1).best
        cfg = EvalConfig(objective=objective, devices=devices, budget=args.budget, match_factor=args.match_factor,
                         workers=args.workers)
        syn = evaluate_policy(policy, test, cfg, tuned=tuned)
        real = evaluate_policy(policy, reals, cfg, tuned=tuned)
        secs = time.perf_counter() - t0
        out["objectives"][objective] = {"devices": devices, "tuned": vars(tuned), "synthetic": syn, "real": real,
                                        "summary_synthetic": summarize(syn, args.budget),
                                        "summary_real": summarize(real, args.budget), "seconds": secs,
                                        "checkpoint_meta": {k: v for k, v in meta.items() if k != "train_config"}}
        s = out["objectives"][objective]["summary_synthetic"]
        unit = "kB" if objective == "peak-memory" else "us"
        scale = 1e3 if objective == "peak-memory" else 1.0
        md += [f"## {objective} ({devices} device(s)); tuned BRKGA: {vars(tuned)}; {secs:.0f} s", "",
               "| set | graphs | REGAL vs plain BRKGA (mean %) | vs tuned BRKGA | vs local search | improved / worse "
               "vs plain | plain budget to match REGAL (median x) | never matched in "
               f"{args.match_factor}x | gap to optimum REGAL / plain / tuned / local (%) | inference (ms) |",
               "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
        for name, rows in (("synthetic (held out)", syn), ("real", real)):
            s = summarize(rows, args.budget)
            gap = (f"{s['gap_regal_pct']:.2f} / {s['gap_brkga_pct']:.2f} / {s['gap_tuned_pct']:.2f} / "
                   f"{s['gap_local_pct']:.2f}" if "gap_regal_pct" in s else "n/a")
            md.append(f"| {name} | {s['graphs']} | {s['impr_vs_brkga_pct']:+.2f} | {s['impr_vs_tuned_pct']:+.2f} | "
                      f"{s['impr_vs_local_pct']:+.2f} | {s['improved_pct']:.0f}% / {s['worse_pct']:.0f}% | "
                      f"{s['match_budget_median_x']:.2f} | {s['match_not_reached']} | {gap} | "
                      f"{s['infer_ms_mean']:.1f} |")
        md += ["", f"Real graphs ({unit}):", "",
               "| graph | nodes | REGAL | plain BRKGA | tuned BRKGA | local | optimum | plain evals to match |",
               "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in real:
            ex = f"{r['exact'] / scale:.1f}" if r.get("exact") is not None else "n/a"
            md.append(f"| {r['graph']} | {r['n']} | {r['regal'] / scale:.1f} | {r['brkga'] / scale:.1f} | "
                      f"{r['tuned'] / scale:.1f} | {r['local'] / scale:.1f} | {ex} | {r['match_evals']:.0f} |")
        md.append("")
        print("\n".join(md[-12:]), flush=True)
    stem = "part2" if args.objectives == "peak-memory,runtime" else "part2-" + args.objectives.replace(",", "-")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{stem}.json").write_text(json.dumps(out, indent=1, default=float))
    (out_dir / f"{stem}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
