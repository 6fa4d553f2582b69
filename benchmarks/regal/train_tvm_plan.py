"""Train REGAL's peak-memory policy on the memory TVM plans, on synthetic Relax networks.

Training graphs: the first ``--graphs`` kept networks of the *train* split of
:mod:`release.graph.synthetic_relax` (random multi-branch PyTorch DAGs imported through the project's importer,
fused as ``tvm.compile`` fuses them; kept when random orders change TVM's plan by >= 2 %). The objective is
``PerformanceModel(graph, 1, "peak-memory", memory_plan=TVMPlanModel(mod, graph))``; REINFORCE against plain BRKGA
on the same graph, budget and seed (:func:`release.graph.train.train`).

Usage::

    nice -n 19 .venv/bin/python benchmarks/regal/train_tvm_plan.py --graphs 40 --steps 150 --workers 2 \\
        --out release/graph/checkpoints/regal-peak-memory-tvm.pt

The networks are cached (``--cache``, pickles of graphs and plan models this script wrote itself).
"""

import argparse
import logging
import pickle
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def cached_split(split, count, cache_dir):
    """``[(ComputationGraph, TVMPlanModel, info)]`` of ``split``; cached in ``cache_dir`` (files written here)."""
    from release.graph.synthetic_relax import split_graphs

    p = Path(cache_dir) / f"relax-{split}-{count}.pkl"
    if p.exists():
        return pickle.loads(p.read_bytes())
    items = [(rg.graph, rg.plan, {"seed": rg.seed, "spread": rg.spread, **rg.info})
             for rg in split_graphs(split, count)]
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(pickle.dumps(items))
    return items


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", type=int, default=40)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--budget", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--entropy", type=float, default=0.01)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", default="/tmp/regal-relax-cache")
    ap.add_argument("--out", default="release/graph/checkpoints/regal-peak-memory-tvm.pt")
    ap.add_argument("--no-resume", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    from release.graph.train import TrainConfig, train

    t0 = time.time()
    items = cached_split("train", args.graphs, args.cache)
    graphs, plans = [g for g, _, _ in items], [p for _, p, _ in items]
    print(f"{len(graphs)} training networks, {min(g.n for g in graphs)}-{max(g.n for g in graphs)} kernels, "
          f"seeds {items[0][2]['seed']}..{items[-1][2]['seed']} ({time.time() - t0:.0f} s)", flush=True)
    cfg = TrainConfig(objective="peak-memory", devices=1, budget=args.budget, steps=args.steps, batch_graphs=4,
                      samples=4, seeds_per_graph=2, lr=args.lr, entropy=args.entropy, per_node_logp=True,
                      hidden=args.hidden, layers=args.layers, workers=args.workers, seed=args.seed,
                      checkpoint_every=5, memory="tvm")

    def progress(step, steps, rec):
        print(f"step {step}/{steps} reward {rec['reward']:+.4f} max {rec['reward_max']:+.4f} "
              f"entropy {rec['entropy']:.3f} ({rec['seconds']:.1f} s, {time.time() - t0:.0f} s total)", flush=True)

    cmd = "benchmarks/regal/train_tvm_plan.py " + " ".join(sys.argv[1:])
    meta = {"command": cmd, "objective": "peak-memory", "memory": "tvm",
            "training_graphs": f"synthetic_relax train split, first {len(graphs)} kept networks "
                               f"(seeds {[it[2]['seed'] for it in items]})"}
    _, state = train(graphs, cfg, args.out, resume=not args.no_resume, progress=progress, meta=meta,
                     memory_plans=plans)
    print(f"wrote {args.out} (step {state.step}, {state.seconds:.0f} s of training)")


if __name__ == "__main__":
    main()
