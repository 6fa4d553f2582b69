"""Extra: the shipped policies' per-node choices applied on top of the tuned BRKGA config (population, elite and
mutant fractions from ``results/part2-OBJECTIVE.json``; the policy's per-node rho replaces the config's rho).

The policies were trained with the default config, so this measures transfer to another config, not a policy
trained for it. Same 50 held-out graphs, budget 1,000 and seeds 10,000 + i as ``run_part2.py``.

Usage: ``.venv/bin/python benchmarks/regal/regal_on_tuned.py`` -> ``runs/regal/regal_on_tuned.md`` (``--out PATH``;
the committed figures: ``--out benchmarks/regal/results/regal_on_tuned.md``);
``... --objectives runtime --checkpoint PATH --out PATH.md`` evaluates another runtime policy (e.g. one trained
with ``release regal train --brkga-config ...`` against the tuned config).
"""

import argparse

import json
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
warnings.filterwarnings("ignore")
HERE = Path(__file__).resolve().parent


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--objectives", default="runtime,peak-memory")
    ap.add_argument("--checkpoint", default=None, help="policy checkpoint (one objective only)")
    ap.add_argument("--out", default="runs/regal/regal_on_tuned.md", help="the Markdown file written (git-ignored "
                    "by default; committed: benchmarks/regal/results/regal_on_tuned.md)")
    args = ap.parse_args()
    from release.graph.brkga import BRKGAConfig, brkga
    from release.graph.perf_model import PerformanceModel
    from release.graph.policy import load_policy, policy_action, shipped_checkpoint
    from release.graph.synthetic import SyntheticConfig, make_splits

    test = make_splits(32, 0, 100, SyntheticConfig(n_nodes=40, width=8, edge_density=0.15), seed=0).test[:50]
    lines = ["# REGAL choices on top of tuned BRKGA (50 held-out synthetic graphs, budget 1000)", "",
             f"Command: `.venv/bin/python benchmarks/regal/regal_on_tuned.py {' '.join(sys.argv[1:])}`", "",
             "| objective | tuned config | REGAL+tuned vs tuned (mean %) | improved / worse | REGAL+tuned, same rho as tuned (mean %) |",
             "|---|---|---:|---:|---:|"]
    for objective in args.objectives.split(","):
        res = json.loads((HERE / "results" / f"part2-{objective}.json").read_text())["objectives"][objective]
        tuned = BRKGAConfig(**res["tuned"])
        pol, _ = load_policy(args.checkpoint or shipped_checkpoint(objective))
        d = pol.cfg.devices
        rel, rel_rho, better, worse = [], [], 0, 0
        for i, g in enumerate(test):
            p = policy_action(pol, g).brkga_params(pol.cfg, d)
            t = brkga(PerformanceModel(g, d, objective), 1000, tuned, seed=10_000 + i).best_objective
            r = brkga(PerformanceModel(g, d, objective), 1000, tuned, seed=10_000 + i, **p).best_objective
            p2 = {**p, "rho": None}
            r2 = brkga(PerformanceModel(g, d, objective), 1000, tuned, seed=10_000 + i, **p2).best_objective
            rel.append(100 * (t - r) / t)
            rel_rho.append(100 * (t - r2) / t)
            better += r < t
            worse += r > t
        lines.append(f"| {objective} ({d} device(s)) | {res['tuned']} | {np.mean(rel):+.2f} | {better} / {worse} | "
                     f"{np.mean(rel_rho):+.2f} |")
        print(lines[-1], flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
