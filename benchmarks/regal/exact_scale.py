"""Exact yardsticks on graphs of a few hundred nodes: frontier DP with a time limit, then the
CP-SAT order model with the best searched order as incumbent; gap of each method to the proven optimum or bound.

Usage: ``.venv/bin/python benchmarks/regal/exact_scale.py [--out DIR]`` -> ``DIR/exact_scale.{md,json}`` (default
``runs/regal``, git-ignored; the committed figures: ``--out benchmarks/regal/results``).
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

SIZES = (100, 200, 300)
SEEDS = (0, 1)
DP_LIMIT, CP_LIMIT, BUDGET = 20.0, 40.0, 5000
OUT = "runs/regal"  # default --out: git-ignored, so a run leaves the checkout clean


def main():
    import argparse

    global DP_LIMIT, CP_LIMIT
    ap = argparse.ArgumentParser()
    ap.add_argument("--dp-limit", type=float, default=DP_LIMIT)
    ap.add_argument("--cp-limit", type=float, default=CP_LIMIT)
    ap.add_argument("--out", default=OUT, help="results folder (default runs/regal; committed: benchmarks/regal/results)")
    args = ap.parse_args()
    DP_LIMIT, CP_LIMIT = args.dp_limit, args.cp_limit
    from release.graph.baselines import run_method, seed_chromosomes
    from release.graph.exact import exact_peak_memory, exact_peak_memory_cpsat, peak_memory_lower_bound
    from release.graph.perf_model import PerformanceModel
    from release.graph.synthetic import SyntheticConfig, random_layered_graph

    t0 = time.time()
    rows = []
    for n in SIZES:
        for s in SEEDS:
            g = random_layered_graph(SyntheticConfig(n_nodes=n, width=8), 30_000 + s)
            m0 = PerformanceModel(g, 1, "peak-memory")
            init = seed_chromosomes(m0)
            row = {"nodes": n, "seed": 30_000 + s, "lower_bound": peak_memory_lower_bound(g)}
            best = None
            for name in ("given", "greedy", "brkga", "local"):
                m = PerformanceModel(g, 1, "peak-memory")
                kw = {"initial": init} if name in ("brkga", "local") else {}
                r = run_method(name, m, BUDGET if name in ("brkga", "local") else 1, 0, **kw)
                row[name] = r.best_objective
                if best is None or r.best_objective < best[0]:
                    best = (r.best_objective, m0.decode(r.best_chromosome).order)
            t = time.time()
            dp = exact_peak_memory(g, max_states=10**8, time_limit=DP_LIMIT)
            row["dp"] = {"status": dp.status, "objective": dp.objective, "seconds": time.time() - t}
            if dp.optimal:
                row["optimum"], row["bound"], row["proven_by"] = dp.objective, dp.objective, "DP"
            else:
                t = time.time()
                cp = exact_peak_memory_cpsat(g, CP_LIMIT, hint_order=best[1])
                row["cpsat"] = {"status": cp.status, "objective": cp.objective, "bound": cp.bound,
                                "seconds": time.time() - t}
                row["bound"] = cp.bound
                row["optimum"] = cp.objective if cp.optimal else None
                row["proven_by"] = "CP-SAT" if cp.optimal else None
                row["cpsat_best"] = cp.objective
            rows.append(row)
            print(json.dumps(row), flush=True)
    cmd = "benchmarks/regal/exact_scale.py " + " ".join(sys.argv[1:])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "exact_scale.json").write_text(json.dumps({"command": cmd, "seconds": time.time() - t0, "rows": rows},
                                                    indent=1))
    md = ["# Exact yardsticks at a few hundred nodes (single-device peak memory, ideal liveness)", "",
          f"Command: `.venv/bin/python {cmd}` ({time.time() - t0:.0f} s wall). Synthetic layered graphs (width 8, "
          f"seeds 30000+). Searches: {BUDGET} evaluations, seeded with the given order and the greedy solution. "
          f"Frontier DP with a {DP_LIMIT:.0f} s limit; when it gives up, CP-SAT ({CP_LIMIT:.0f} s, 1 worker) with the "
          "best searched order as incumbent. Gap = (method - optimum or bound) / optimum or bound.", "",
          "| nodes | seed | DP | CP-SAT | optimum (proven) or bound | given | greedy | BRKGA | local |",
          "|---:|---:|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        ref = r["optimum"] if r.get("optimum") else r["bound"]
        kind = f"{ref:,.0f} ({r['proven_by']})" if r.get("optimum") else f">= {ref:,.0f} (bound)"
        cp = r.get("cpsat")
        cps = f"{cp['status']} ({cp['seconds']:.0f} s)" if cp else "-"
        cells = " | ".join(f"{100 * (r[mm] / ref - 1):+.2f}%" for mm in ("given", "greedy", "brkga", "local"))
        md.append(f"| {r['nodes']} | {r['seed']} | {r['dp']['status']} ({r['dp']['seconds']:.0f} s) | {cps} | {kind} | {cells} |")
    (out / "exact_scale.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
