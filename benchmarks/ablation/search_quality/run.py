"""Search quality under a fixed cost model: simulated annealing vs the PPO agent and our variants.

No hardware in the loop: an XGBoost cost model (knob features, AutoTVM's hyperparameters) is fit
once on a real tuning log; each optimizer then proposes ``plan_size`` unvisited configs for
``rounds`` consecutive calls (the agent persists across calls, SA's chains too, as in tuning),
excluding the measured configs. Reported per optimizer: mean and max *predicted* score of each
plan (normalized throughput; 1.0 = the best measured config), reward queries and seconds per call.

    python benchmarks/ablation/search_quality/run.py --log benchmarks/ablation/search_quality/resnet18.conv2d.2.xgb.s0.jsonl

Writes ``--out`` (JSON) and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--log", required=True)
    p.add_argument("--workload", default="resnet18.conv2d.2")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--plan-size", type=int, default=64)
    p.add_argument("--only", nargs="*", default=None, help="variant names to run (default: all)")
    p.add_argument("--out", default="runs/search_quality.json",
                   help="the JSON written (default git-ignored; committed: benchmarks/ablation/search_quality/"
                        "search_quality.json)")
    args = p.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    from release.cost_model import XGBoostCostModel
    from release.measure import load_records
    from release.rl import PPOConfig, RLOptimizer
    from release.task import create_task
    from release.tuners.sa import SimulatedAnnealingOptimizer

    task = create_task(args.workload, "llvm")
    space = task.config_space
    recs = [r for r in load_records(args.log) if r.error_kind != "invalid"]
    xs = np.array([space.canonical(r.config) for r in recs], dtype=np.int64)
    ys = np.array([r.gflops if r.ok else 0.0 for r in recs])
    visited = set(map(tuple, xs.tolist()))
    variants = {}
    all_variants = {
        "sa": lambda s: SimulatedAnnealingOptimizer(space, seed=s),
        "ppo (paper)": lambda s: RLOptimizer(space, seed=s),
        "ppo + start at best measured": lambda s: RLOptimizer(space, seed=s, start_from_measured=0.5),
        "ppo + improvement reward": lambda s: RLOptimizer(space, PPOConfig(reward="improvement"), seed=s),
        "ppo + pushed-boundary stop": lambda s: RLOptimizer(space, PPOConfig(boundary="pushed"), seed=s),
        "ppo + 16k queries per call": lambda s: RLOptimizer(space, seed=s, min_queries=16000),
        "ppo + all three (start, pushed, 16k)": lambda s: RLOptimizer(
            space, PPOConfig(boundary="pushed"), seed=s, start_from_measured=0.5, min_queries=16000),
        "ppo + all three, <= 64 minibatches per update": lambda s: RLOptimizer(
            space, PPOConfig(boundary="pushed", max_minibatches=64), seed=s, start_from_measured=0.5,
            min_queries=16000),
    }
    variants = {k: v for k, v in all_variants.items() if not args.only or k in args.only}
    out = {"log": args.log, "n_measured": len(xs), "rounds": args.rounds, "plan_size": args.plan_size, "results": {}}
    rows = []
    for name, make in variants.items():
        per_seed = []
        for seed in args.seeds:
            model = XGBoostCostModel(task, feature_type="knob", seed=seed)
            model.fit(xs, ys, args.plan_size)
            best_measured = float(model.predict(xs[[int(np.argmax(ys))]])[0])
            opt = make(seed)
            if hasattr(opt, "observe"):
                opt.observe(xs, ys)
            calls = []
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                plan = opt.find_maximums(model, args.plan_size, visited)
                secs = time.perf_counter() - t0
                pred = model.predict(np.array(plan, dtype=np.int64)) if plan else np.zeros(1)
                st = getattr(opt, "last_stats", None)
                queries = st["queries"] if isinstance(st, dict) else (st.extra.get("queries") if st else None)
                calls.append(dict(mean=float(pred.mean()), max=float(pred.max()), n=len(plan), seconds=secs,
                                  queries=queries, best_measured_pred=best_measured))
            per_seed.append(calls)
        out["results"][name] = per_seed
        last = [c[-1] for c in per_seed]
        first = [c[0] for c in per_seed]
        rows.append((name, np.mean([c["mean"] for c in first]), np.mean([c["mean"] for c in last]),
                     np.mean([max(x["max"] for x in c) for c in per_seed]),
                     np.mean([x["best_measured_pred"] for x in first]),
                     np.mean([x["queries"] or 0 for c in per_seed for x in c]),
                     np.mean([x["seconds"] for c in per_seed for x in c])))
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"Fixed XGBoost (knob) model fit on {len(xs)} measured configs of {args.workload}; "
          f"{args.rounds} calls of plan size {args.plan_size}; seeds {args.seeds}")
    print("| optimizer | plan mean pred., call 1 | plan mean pred., call %d | best pred. found | pred. of best measured | "
          "queries / call | s / call |" % args.rounds)
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]:.3f} | {r[2]:.3f} | {r[3]:.3f} | {r[4]:.3f} | {r[5]:.0f} | {r[6]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
