"""REGAL's policy where the headroom table found room: train there, compare with BRKGA at equal wall time.

The regime (``benchmarks/regal/results/headroom/``): running time on 2 devices on irregular graphs, where plain
BRKGA seeded as ``release regal optimize`` seeds it (given order, greedy solution) stays 5-24% above the best
order known at 500-5,000 evaluations.

``train``: a policy conditioned on the budget (``PolicyConfig.budget_input``) and, through its node features, on
the graph's size, trained with REINFORCE (``release.graph.train.train``) on synthetic layered DAGs (width 8, as in
the headroom table) of 50 to 400 nodes with seeds 60,000+ (the headroom table's graphs use 40,000+), budgets drawn
from 500 and 2,000 per step, every run seeded with the given order and the greedy solution (``seeded``).

``dev``: the trained policy's most likely choices against plain BRKGA at equal evaluations on development graphs
(the training distribution, seeds 70,000+), to pick among trained policies without looking at the evaluation graphs.

``evaluate``: on unseen graphs (held-out seeds: the headroom table's synthetic graphs of 50 to 2,000 nodes; held-out
models: RandWire with 127, 293 and 953 kernels and built-in models, never trained on), per budget and BRKGA seed:

* ``regal``: the trained policy's most likely choices (features and forward pass timed) and BRKGA with them at
  the budget, every gene biased (``policy_fraction=1``); its wall time ``T`` counts inference and search;
* ``brkga@evals``: plain BRKGA at the same budget and seed;
* ``brkga@time`` and ``local@time``: plain BRKGA and local search given the evaluations plain BRKGA completes in
  ``T`` (``ceil(budget x T / T_brkga)``, rate measured on the ``brkga@evals`` run of the same graph, budget and
  seed), i.e. equal wall time, GNN inference included;
* ``shipped``: the shipped runtime policy (``regal-runtime.pt``, trained at 1,000 evaluations on 40-node graphs)
  with its default share schedule, as ``release regal optimize --method regal`` runs it.

All runs start from the same seed chromosomes. The best known and BRKGA's headroom per graph come from the
headroom table's ``results.json`` (graphs not in it have no headroom figure). The table reports, per graph and
budget, each method's objective against ``brkga@time`` (mean over seeds, negative = better than BRKGA), and the
averages over graph-budget cells whose headroom is >= 5% and over the rest.

Usage::

    .venv/bin/python benchmarks/regal/policy_headroom.py train --out DIR [--steps N] [--quick]
    .venv/bin/python benchmarks/regal/policy_headroom.py dev --out DIR [--quick]
    .venv/bin/python benchmarks/regal/policy_headroom.py evaluate --out DIR [--quick]
    .venv/bin/python benchmarks/regal/policy_headroom.py table --out DIR

``DIR`` (default ``runs/regal/policy-headroom``, git-ignored) gets ``policy.pt`` (resumable), ``train.log``,
``results.json`` (rewritten after every graph; a rerun skips graphs already in it) and ``table.md``. ``--quick``:
tiny graphs, few steps, one budget (under a minute; what the test runs).
"""

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

OUT = "runs/regal/policy-headroom"
HEADROOM = Path(__file__).resolve().parent / "results" / "headroom" / "results.json"
TRAIN_SIZES = (50, 100, 200, 400)
TRAIN_PER_SIZE = 6
TRAIN_BUDGETS = (500, 2000)
EVAL_BUDGETS = (500, 2000, 5000)
SEEDS = (0, 1, 2)
EVAL_GRAPHS = ([f"synthetic:{n}:{40_000 + s}" for n, ss in ((50, (0, 1, 2, 3)), (200, (0, 1, 2, 3)), (500, (0, 1)))
                for s in ss]
               + ["model:randwire", "model:randwire-60", "model:resnet18", "model:inception-v3-35"]
               + ["synthetic:1000:40000", "synthetic:1000:40001", "synthetic:2000:40000", "model:randwire-200"])
QUICK = dict(sizes=(20, 30), per_size=2, budgets=(100,), eval_budgets=(100,), seeds=(0,),
             graphs=["synthetic:30:40000", "synthetic:40:40001"], steps=2)


def revision() -> str:
    """The code's git revision (``release.measure.result.provenance``), 7 digits."""
    from release.measure.result import provenance

    return provenance()[1][:7] or "unknown"


def machine() -> str:
    """This CPU's model name (``release.target.host_machine``) and core count."""
    import os

    from release.target import host_machine, resolve_target, target_to_json

    return f"{host_machine(target_to_json(resolve_target('llvm'))) or platform.machine()}, {os.cpu_count()} cores"


def load_graph(spec: str):
    """A graph from ``synthetic:NODES:SEED`` (width 8, as the headroom table) or ``model:NAME`` (fused)."""
    if spec.startswith("synthetic:"):
        from release.graph.synthetic import SyntheticConfig, random_layered_graph

        _, n, seed = spec.split(":")
        return random_layered_graph(SyntheticConfig(n_nodes=int(n), width=8), int(seed),
                                    name=f"synthetic-{n}-s{int(seed) - 40_000}" if int(seed) >= 40_000 else None)
    from release.graph.cli import load_model_graph

    g, _ = load_model_graph(spec, True)
    g.name = spec.split(":", 1)[1]
    return g


# ----------------------------------------------------------------------------------------------- train
def train_main(args) -> int:
    from release.graph.synthetic import SyntheticConfig, random_layered_graph
    from release.graph.train import TrainConfig, train

    q = QUICK if args.quick else None
    sizes, per = (q["sizes"], q["per_size"]) if q else (TRAIN_SIZES, TRAIN_PER_SIZE)
    graphs = [random_layered_graph(SyntheticConfig(n_nodes=n, width=8), 60_000 + 100 * i + k)
              for i, n in enumerate(sizes) for k in range(per)]
    cfg = TrainConfig(objective="runtime", devices=2, steps=q["steps"] if q else args.steps,
                      budgets=list(q["budgets"] if q else TRAIN_BUDGETS), seeded=True, batch_graphs=4, samples=4,
                      lr=args.lr, entropy=args.entropy, per_node_logp=True, workers=args.workers, seed=0,
                      checkpoint_every=5)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = open(out / "train.log", "a", buffering=1)
    t0 = time.perf_counter()

    def progress(step, total, rec):
        line = (f"step {step:4d}/{total}  budget {rec['budget']:5d}  reward {rec['reward']:+.4f}  best "
                f"{rec['reward_max']:+.4f}  entropy {rec['entropy']:.3f}  {rec['seconds']:.1f} s  "
                f"({time.perf_counter() - t0:.0f} s)")
        print(line, flush=True)
        log.write(line + "\n")

    meta = {"command": " ".join(["benchmarks/regal/policy_headroom.py"] + sys.argv[1:]), "revision": revision(),
            "machine": machine(), "training_graphs": f"random_layered_graph(width 8) sizes {list(sizes)}, "
            f"{per} each, seeds 60000 + 100 * size index + k", "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                                       time.gmtime())}
    _, state = train(graphs, cfg, out / "policy.pt", progress=progress, meta=meta)
    log.write(f"wrote {out / 'policy.pt'} (step {state.step}, {state.seconds:.0f} s of training)\n")
    print(f"wrote {out / 'policy.pt'} (step {state.step}, {state.seconds:.0f} s of training)")
    return 0


def dev_main(args) -> int:
    """Greedy-choice reward on development graphs (training distribution, seeds 70,000+, never the evaluation's):
    the figure that picks among trained policies before the held-out evaluation. Prints one line per budget."""
    import torch

    from release.graph.policy import load_policy, policy_action
    from release.graph.synthetic import SyntheticConfig, random_layered_graph
    from release.graph.train import BRKGARunner, reward

    torch.set_num_threads(1)
    policy, _ = load_policy(Path(args.out) / "policy.pt")
    q = QUICK if args.quick else None
    sizes, budgets = (q["sizes"], q["budgets"]) if q else (TRAIN_SIZES, TRAIN_BUDGETS)
    graphs = [random_layered_graph(SyntheticConfig(n_nodes=n, width=8), 70_000 + 100 * i + k)
              for i, n in enumerate(sizes) for k in range(2)]
    runner = BRKGARunner(graphs, "runtime", 2, args.workers, seeded=True)
    out = {}
    try:
        for b in budgets:
            acts = [policy_action(policy, g, budget=b).brkga_params(policy.cfg, 2) for g in graphs]
            tasks = [(gi, b, s, None) for gi in range(len(graphs)) for s in (0, 1)]
            plain = runner.run(tasks)
            ours = runner.run([(gi, b, s, acts[gi]) for gi, _, s, _ in tasks])
            r = [reward(p, o) for p, o in zip(plain, ours)]
            out[b] = float(np.mean(r))
            print(f"dev budget {b}: mean reward {100 * out[b]:+.2f}% over {len(r)} runs "
                  f"({sum(x > 0 for x in r)} better, {sum(x < 0 for x in r)} worse)", flush=True)
    finally:
        runner.close()
    (Path(args.out) / "dev.json").write_text(json.dumps(out))
    return 0


# -------------------------------------------------------------------------------------------- evaluate
def headroom_rows() -> dict:
    """``{graph name: {"best_known": float, "headroom": {budget: mean %}}}`` for runtime on 2 devices."""
    if not HEADROOM.is_file():
        return {}
    out = {}
    for g in json.loads(HEADROOM.read_text())["graphs"]:
        for o in g.get("objectives", []):
            if o["objective"] == "runtime-2dev":
                out[g["name"]] = {"best_known": o["best_known"],
                                  "headroom": {int(b): v["mean"] for b, v in o["headroom_pct"].items()}}
    return out


def evaluate_graph(g, policy, shipped, budgets, seeds) -> list[dict]:
    from release.graph.baselines import local_search, seed_chromosomes
    from release.graph.brkga import brkga, policy_fraction_schedule
    from release.graph.perf_model import PerformanceModel
    from release.graph.policy import policy_action

    def model():
        return PerformanceModel(g, 2, "runtime")

    init = seed_chromosomes(model())
    t0 = time.perf_counter()
    sp = policy_action(shipped[0], g).brkga_params(shipped[0].cfg, 2)  # the shipped policy reads no budget
    shipped_infer = time.perf_counter() - t0
    rows = []
    for b in budgets:
        for s in seeds:
            t0 = time.perf_counter()
            params = policy_action(policy, g, budget=b).brkga_params(policy.cfg, 2)
            infer = time.perf_counter() - t0
            regal = brkga(model(), b, seed=s, initial=init, **params)
            t_regal = time.perf_counter() - t0
            t0 = time.perf_counter()
            plain = brkga(model(), b, seed=s, initial=init)
            t_plain = time.perf_counter() - t0
            b_eq = max(b, math.ceil(b * t_regal / t_plain))
            t0 = time.perf_counter()
            plain_eq = brkga(model(), b_eq, seed=s, initial=init)
            t_plain_eq = time.perf_counter() - t0
            t0 = time.perf_counter()
            local_eq = local_search(model(), b_eq, seed=s, initial=init)
            t_local_eq = time.perf_counter() - t0
            t0 = time.perf_counter()
            shp = brkga(model(), b, seed=s, initial=init,
                        policy_fraction=policy_fraction_schedule(b, table=shipped[1]), **sp)
            t_shp = time.perf_counter() - t0 + shipped_infer
            rows.append({"budget": b, "seed": s, "infer_s": infer, "equal_time_evals": b_eq,
                         "regal": regal.best_objective, "regal_s": t_regal,
                         "brkga@evals": plain.best_objective, "brkga@evals_s": t_plain,
                         "brkga@time": plain_eq.best_objective, "brkga@time_s": t_plain_eq,
                         "local@time": local_eq.best_objective, "local@time_s": t_local_eq,
                         "shipped": shp.best_objective, "shipped_s": t_shp})
    return rows


def evaluate_main(args) -> int:
    import torch

    from release.graph.policy import load_policy, shipped_checkpoint

    torch.set_num_threads(1)
    out = Path(args.out)
    res_path = out / "results.json"
    policy, meta = load_policy(out / "policy.pt")
    shipped, smeta = load_policy(shipped_checkpoint("runtime"))
    q = QUICK if args.quick else None
    budgets, seeds = (q["eval_budgets"], q["seeds"]) if q else (EVAL_BUDGETS, SEEDS)
    specs = q["graphs"] if q else EVAL_GRAPHS
    d = json.loads(res_path.read_text()) if res_path.is_file() else {
        "command": " ".join(["benchmarks/regal/policy_headroom.py"] + sys.argv[1:]), "revision": revision(),
        "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "policy": {k: meta.get(k) for k in ("command", "revision", "training_graphs", "date")},
        "budgets": list(budgets), "seeds": list(seeds), "graphs": []}
    done = {g["spec"] for g in d["graphs"]}
    hr = headroom_rows()
    t_all = time.perf_counter()
    for spec in specs:
        if spec in done:
            continue
        g = load_graph(spec)
        t0 = time.perf_counter()
        rows = evaluate_graph(g, policy, (shipped, smeta.get("policy_fraction")), budgets, seeds)
        h = hr.get(g.name, {})
        d["graphs"].append({"spec": spec, "name": g.name, "nodes": g.n, "best_known": h.get("best_known"),
                            "headroom_pct": h.get("headroom"), "load_avg": list(__import__("os").getloadavg()),
                            "seconds": time.perf_counter() - t0, "rows": rows})
        res_path.write_text(json.dumps(d, indent=1))
        print(f"{g.name} ({g.n} nodes): {time.perf_counter() - t0:.0f} s", flush=True)
    d["seconds"] = d.get("seconds", 0.0) + time.perf_counter() - t_all
    res_path.write_text(json.dumps(d, indent=1))
    (out / "table.md").write_text(table(d))
    print(table(d))
    return 0


METHODS = ("regal", "brkga@evals", "local@time", "shipped")


def table(d: dict) -> str:
    """Markdown: per graph and budget, each method against ``brkga@time`` (%, mean over seeds); averages."""
    lines = [f"Methods against plain BRKGA at equal wall time (`brkga@time`), % (mean over seeds {d['seeds']}; "
             "negative = better than BRKGA). Headroom = plain BRKGA's gap to the best known at that budget "
             "(headroom table).", "",
             "| graph | nodes | budget | headroom % | evals at equal time | " + " | ".join(METHODS) + " |",
             "|---|---:|---:|---:|---:|" + "---:|" * len(METHODS)]
    groups = {"headroom >= 5%": {m: [] for m in METHODS}, "headroom < 5%": {m: [] for m in METHODS},
              "headroom unknown": {m: [] for m in METHODS}}
    for g in d["graphs"]:
        for b in d["budgets"]:
            rs = [r for r in g["rows"] if r["budget"] == b]
            if not rs:
                continue
            h = (g.get("headroom_pct") or {}).get(str(b), (g.get("headroom_pct") or {}).get(b))
            rel = {m: float(np.mean([r[m] / r["brkga@time"] - 1 for r in rs])) * 100 for m in METHODS}
            key = "headroom unknown" if h is None else ("headroom >= 5%" if h >= 5 else "headroom < 5%")
            for m in METHODS:
                groups[key][m].append(rel[m])
            ev = int(np.mean([r["equal_time_evals"] for r in rs]))
            lines.append(f"| {g['name']} | {g['nodes']} | {b:,} | {'-' if h is None else f'{h:.1f}'} | {ev:,} | "
                         + " | ".join(f"{rel[m]:+.2f}" for m in METHODS) + " |")
    lines += ["", "| cells | count | " + " | ".join(METHODS) + " |", "|---|---:|" + "---:|" * len(METHODS)]
    for k, v in groups.items():
        n = len(v["regal"])
        if n:
            lines.append(f"| {k} | {n} | " + " | ".join(f"{np.mean(v[m]):+.2f}" for m in METHODS) + " |")
    wins = sum(1 for g in d["graphs"] for r in g["rows"] if r["regal"] < r["brkga@time"])
    losses = sum(1 for g in d["graphs"] for r in g["rows"] if r["regal"] > r["brkga@time"])
    lines += ["", f"regal against brkga@time, runs: {wins} better, {losses} worse, "
              f"{sum(len(g['rows']) for g in d['graphs']) - wins - losses} equal."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("step", choices=("train", "dev", "evaluate", "table"))
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--lr", type=float, default=5e-3)
    ap.add_argument("--entropy", type=float, default=0.01, help="entropy bonus weight (default 0.01)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.step == "train":
        return train_main(args)
    if args.step == "dev":
        return dev_main(args)
    if args.step == "evaluate":
        return evaluate_main(args)
    d = json.loads((Path(args.out) / "results.json").read_text())
    (Path(args.out) / "table.md").write_text(table(d))
    print(table(d))
    return 0


if __name__ == "__main__":
    sys.exit(main())
