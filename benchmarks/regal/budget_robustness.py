"""REGAL against plain and tuned BRKGA at every budget from 500 to 20,000 evaluations (issue 18 item 4).

Held-out graphs: the *test* split of ``make_splits(32, 0, 100, SyntheticConfig(40 nodes, width 8, edge density
0.15), seed 0)`` (the call ``release regal train --graphs 32`` makes; the policies never saw these graphs).
Every method starts from the same two seed chromosomes (the given order and the greedy solution,
``baselines.seed_chromosomes``) and gets the same budget and BRKGA seed (common random numbers).

Methods per (graph, seed, budget):
* ``brkga``: plain BRKGA (population 100, elite 0.2, mutant 0.2, rho 0.7);
* ``tuned``: BRKGA with the config grid-searched in issue 8 at budget 1,000 on training graphs (runtime:
  population 50, elite 0.1, mutant 0.1, rho 0.6; peak memory: population 50, elite 0.25, mutant 0.1, rho 0.6);
* ``regal``: the shipped policy's most likely per-node Beta/rho choices, biasing the share
  ``policy_fraction_schedule(budget) = min(1, 1000 / budget)`` of the population (fading to plain BRKGA);
* ``regal-full``: the same policy biasing the whole population at every budget (what issue 8 shipped).

Ratios are method / plain BRKGA per (graph, seed); the interval is a 95% bootstrap over graphs (resampling
graphs, keeping their seeds together).

Usage: ``.venv/bin/python benchmarks/regal/budget_robustness.py --objective runtime --graphs 16 --seeds 2``
writes ``benchmarks/regal/results/budget-{objective}.{json,md,png}``.
"""

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

BUDGETS = (500, 1000, 2000, 5000, 10000, 20000)
TUNED = {"runtime": dict(population=50, elite_fraction=0.1, mutant_fraction=0.1, rho=0.6),
         "peak-memory": dict(population=50, elite_fraction=0.25, mutant_fraction=0.1, rho=0.6)}
OUT = Path(__file__).resolve().parent / "results"


def _graphs(n):
    from release.graph.synthetic import SyntheticConfig, make_splits

    return make_splits(32, 0, 100, SyntheticConfig(n_nodes=40, width=8, edge_density=0.15), seed=0).test[:n]



def run_one(args):
    gi, seed, objective, budgets = args
    import torch

    torch.set_num_threads(1)
    from release.graph.baselines import seed_chromosomes
    from release.graph.brkga import BRKGAConfig, brkga, policy_fraction_schedule
    from release.graph.policy import load_policy, policy_action, shipped_checkpoint
    from release.graph.perf_model import PerformanceModel

    g = _graphs(gi + 1)[gi]
    devices = 2 if objective == "runtime" else 1
    pol, _ = load_policy(shipped_checkpoint(objective))
    params = policy_action(pol, g).brkga_params(pol.cfg, devices)
    init = seed_chromosomes(PerformanceModel(g, devices, objective))
    opt = None
    if objective == "peak-memory":  # the exact yardstick: frontier DP (CP-SAT when the DP gives up)
        from release.graph.exact import exact_peak_memory, exact_peak_memory_cpsat

        ex = exact_peak_memory(g, time_limit=60)
        if not ex.optimal:
            ex = exact_peak_memory_cpsat(g, 60)
        opt = ex.objective if ex.optimal else None
    rows = []
    for b in budgets:
        def run(**kw):
            m = PerformanceModel(g, devices, objective)
            r = brkga(m, b, seed=seed, initial=init, **kw)
            assert m.evaluations == r.evaluations <= b
            return r.best_objective

        row = {"graph": gi, "seed": seed, "budget": b,
               "brkga": run(),
               "tuned": run(config=BRKGAConfig(**TUNED[objective])),
               "regal": run(policy_fraction=policy_fraction_schedule(b), **params)}
        row["regal-full"] = row["regal"] if policy_fraction_schedule(b) == 1.0 else run(**params)
        row["policy_share"] = policy_fraction_schedule(b)
        row["optimum"] = opt
        m = PerformanceModel(g, devices, objective)
        o, _ = m.evaluate_population(init)
        row["given"], row["greedy"] = float(o[0]), float(o[1])
        rows.append(row)
    return rows


def bootstrap(ratio_by_graph: dict, reps: int = 2000, seed: int = 0):
    keys = sorted(ratio_by_graph)
    per = np.array([np.mean(ratio_by_graph[k]) for k in keys])
    rng = np.random.default_rng(seed)
    means = per[rng.integers(0, len(per), size=(reps, len(per)))].mean(1)
    return float(per.mean()), float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--objective", choices=("runtime", "peak-memory"), default="runtime")
    ap.add_argument("--graphs", type=int, default=16)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--first", type=int, default=0, help="index of the first test graph (default 0)")
    ap.add_argument("--tag", default="", help="suffix of the result files")
    args = ap.parse_args()
    t0 = time.time()
    jobs = [(gi, 20_000 + s, args.objective, BUDGETS) for gi in range(args.first, args.first + args.graphs)
            for s in range(args.seeds)]
    rows = []
    with ProcessPoolExecutor(args.workers) as ex:
        for r in ex.map(run_one, jobs):
            rows.extend(r)
            print(f"graph {r[0]['graph']} seed {r[0]['seed']} done ({time.time() - t0:.0f} s)", flush=True)
    methods = ("tuned", "regal", "regal-full")
    table = []
    for b in BUDGETS:
        sub = [r for r in rows if r["budget"] == b]
        line = {"budget": b, "n": len(sub)}
        for m in methods:
            by_g: dict = {}
            for r in sub:
                by_g.setdefault(r["graph"], []).append(r[m] / r["brkga"])
            mean, lo, hi = bootstrap(by_g)
            rat = np.array([r[m] / r["brkga"] for r in sub])
            line[m] = {"mean": mean, "lo": lo, "hi": hi, "better": int((rat < 1 - 1e-12).sum()),
                       "worse": int((rat > 1 + 1e-12).sum())}
        line["brkga_vs_given"] = float(np.mean([r["brkga"] / r["given"] for r in sub]))
        proven = [r for r in sub if r.get("optimum")]
        if proven:
            line["gap_to_optimum_pct"] = {m: float(np.mean([100 * (r[m] / r["optimum"] - 1) for r in proven]))
                                          for m in ("brkga", "tuned", "regal", "regal-full")}
            line["at_optimum"] = {m: int(sum(r[m] <= r["optimum"] + 1e-9 for r in proven))
                                  for m in ("brkga", "tuned", "regal", "regal-full")}
            line["proven"] = len(proven)
        line["brkga_vs_greedy"] = float(np.mean([r["brkga"] / r["greedy"] for r in sub]))
        line["never_worse_than_seeds"] = all(r[m] <= min(r["given"], r["greedy"]) + 1e-9
                                             for r in sub for m in ("brkga", "tuned", "regal", "regal-full"))
        table.append(line)
    name = f"budget-{args.objective}{args.tag}"
    OUT.mkdir(parents=True, exist_ok=True)
    cmd = "benchmarks/regal/budget_robustness.py " + " ".join(sys.argv[1:])
    (OUT / f"{name}.json").write_text(json.dumps({"command": cmd, "seconds": time.time() - t0, "rows": rows,
                                                  "table": table}, indent=1))
    md = [f"# REGAL vs plain BRKGA per budget, {args.objective} "
          f"({'2 devices' if args.objective == 'runtime' else '1 device'})", "",
          f"Command: `.venv/bin/python {cmd}` ({time.time() - t0:.0f} s wall, {args.workers} workers). "
          f"{args.graphs} held-out graphs (test split {args.first}..{args.first + args.graphs - 1}) x {args.seeds} seeds; "
          "REGAL's policy share is `policy_fraction_schedule(budget)` as of this run. Ratio = method / plain BRKGA (lower is better); "
          "[95% bootstrap over graphs]; better/worse = (graph, seed) pairs.", "",
          "| budget | policy share | REGAL (faded) | better/worse | REGAL (full policy) | better/worse | tuned BRKGA | "
          "better/worse | BRKGA / given | never worse than given & greedy |",
          "|---:|---:|---|---:|---|---:|---|---:|---:|---|"]
    from release.graph.brkga import policy_fraction_schedule

    for line in table:
        cells = []
        for m in ("regal", "regal-full", "tuned"):
            c = line[m]
            cells += [f"{c['mean']:.4f} [{c['lo']:.4f}, {c['hi']:.4f}]", f"{c['better']}/{c['worse']}"]
        md.append(f"| {line['budget']} | {policy_fraction_schedule(line['budget']):.2f} | " + " | ".join(cells)
                  + f" | {line['brkga_vs_given']:.3f} | {'yes' if line['never_worse_than_seeds'] else 'NO'} |")
    if any("gap_to_optimum_pct" in l for l in table):
        md += ["", "Gap to the proven optimum (frontier DP, CP-SAT order model when the DP gives up), mean % over the "
               "(graph, seed) pairs with a proven optimum, and how many reached it:", "",
               "| budget | proven | BRKGA | tuned BRKGA | REGAL (schedule) | REGAL (full policy) |", "|---:|---:|---|---|---|---|"]
        for l in table:
            if "gap_to_optimum_pct" in l:
                gp, at = l["gap_to_optimum_pct"], l["at_optimum"]
                md.append(f"| {l['budget']} | {l['proven']} | " + " | ".join(
                    f"{gp[m]:.2f}% ({at[m]})" for m in ("brkga", "tuned", "regal", "regal-full")) + " |")
    (OUT / f"{name}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for m, c in (("regal", "C0"), ("regal-full", "C1"), ("tuned", "C2")):
            y = [l[m]["mean"] for l in table]
            lo = [l[m]["lo"] for l in table]
            hi = [l[m]["hi"] for l in table]
            ax.plot(BUDGETS, y, "o-", color=c, label={"regal": "REGAL (policy share: schedule)",
                                                      "regal-full": "REGAL (full policy, issue 8)",
                                                      "tuned": "tuned BRKGA"}[m])
            ax.fill_between(BUDGETS, lo, hi, color=c, alpha=0.15)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("evaluation budget")
        ax.set_ylabel("objective / plain BRKGA")
        ax.set_title(f"{args.objective}: {args.graphs} held-out graphs x {args.seeds} seeds")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(OUT / f"{name}.png", dpi=120)
    except ImportError:
        print("matplotlib missing: no plot")


if __name__ == "__main__":
    main()
