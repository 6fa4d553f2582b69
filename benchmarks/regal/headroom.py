"""How far plain BRKGA is from the best order known: the headroom a learned policy could win.

Per graph and objective:

* plain BRKGA (``release.graph.brkga.brkga``, default config) seeded as ``release regal optimize`` seeds it (the
  given order and the greedy solution, ``baselines.seed_chromosomes``), one run per seed at the largest budget.
  The result at a smaller budget ``b`` is the best of that run's first ``b`` evaluations: a run with budget ``b``
  draws the same random numbers and evaluates exactly those chromosomes (the last generation is truncated, elites
  are not re-evaluated), so the two are the same search. The script checks this on every graph and objective
  (a separate run at the smallest budget, seed 0, must give the same value) and stops if it does not hold. Wall
  seconds at ``b`` = the run's wall time until its ``b``-th evaluation.
* the best order known = the minimum over: the BRKGA runs above at the largest budget (all seeds), local search
  (``baselines.local_search``, same seeds chromosomes, largest budget, seed 0), and the exact yardsticks:
  ideal peak memory: the frontier DP (``exact_peak_memory``, state cap and time limit), else the CP-SAT order
  model (``exact_peak_memory_cpsat``, time limit, best searched order as incumbent); runtime on 2 devices:
  CP-SAT (``exact_makespan``, time limit); TVM's plan: the TVM-planned bytes of the best ideal-liveness order
  (no exact solver exists for TVM's plan).
* the lower bound: ideal peak memory: the DP optimum, else max(``peak_memory_lower_bound``, CP-SAT's bound);
  runtime: max(CP-SAT's bound, the longest compute path, total compute / 2); TVM's plan:
  ``TVMPlanModel.lower_bound_bytes``.
* headroom at budget ``b`` = BRKGA's best at ``b`` / best known - 1 (per seed; mean, min and max over seeds), and
  the gap of the best known to the lower bound (best known / bound - 1): the true headroom to the optimum lies
  between the two.

Graphs: synthetic layered DAGs (``random_layered_graph``, width 8) at 50 to 2,000 nodes; the built-in models
(``model:NAME``, fused as ``tvm.compile`` fuses them); skip-heavy models: the built-in Inception blocks and RandWire
graphs, plus a U-Net and a DenseNet-121-like stack defined here and imported through the same importer
(``release.relax.load_model`` -> ``cli.load_model_graph``).

Usage: ``.venv/bin/python benchmarks/regal/headroom.py [--quick] [--out DIR]`` -> ``DIR/results.json`` and
``DIR/table.md``, rewritten after every graph (default ``runs/regal/headroom``, git-ignored; the committed run:
``--out benchmarks/regal/results/headroom``). ``--quick``: three tiny graphs, budget 500, two seeds (under a
minute). Single process; run it under ``nice`` on a shared machine.
"""

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

BUDGETS = (500, 2000, 5000, 20000)
SEEDS = (0, 1, 2)
OUT = "runs/regal/headroom"  # default --out: git-ignored, so a run leaves the checkout clean
OBJ_LABEL = {"memory-ideal": "peak memory, ideal liveness, 1 device",
             "memory-tvm": "peak memory, TVM's plan, 1 device",
             "runtime-2dev": "runtime (makespan), 2 devices"}

# (family, name, spec): spec "synthetic:NODES:SEED", "model:NAME" (built-in) or "built:NAME" (defined below)
FULL_GRAPHS = (  # the cheapest first, so a run cut short still covers every family
    [("synthetic", f"synthetic-{n}-s{s}", f"synthetic:{n}:{40_000 + s}")
     for n, seeds in ((50, (0, 1, 2, 3)), (200, (0, 1, 2, 3)), (500, (0, 1))) for s in seeds]
    + [("model", n, f"model:{n}") for n in ("resnet18", "transformer", "resnet18-224", "mobilenet_v2",
                                             "bert-base-layer")]
    + [("skip-heavy", n, f"model:{n}") for n in ("inception", "inception-v3-35", "randwire", "randwire-60")]
    + [("skip-heavy", n, f"built:{n}") for n in ("unet", "densenet121-like")]
    + [("synthetic", f"synthetic-{n}-s{s}", f"synthetic:{n}:{40_000 + s}") for n, s in ((1000, 0), (1000, 1), (2000, 0))]
    + [("skip-heavy", "randwire-200", "model:randwire-200")]
)
QUICK_GRAPHS = [("synthetic", "synthetic-30-s0", "synthetic:30:40000"), ("model", "tiny", "model:tiny"),
                ("skip-heavy", "inception", "model:inception")]


# ----------------------------------------------------------------------------------------- skip-heavy models
def built_module(name):
    """``(torch module, example inputs)`` of the skip-heavy models not in ``release.graph.models``."""
    import torch
    from torch import nn

    torch.manual_seed(0)

    def cbr(cin, cout, k=3):
        return nn.Sequential(nn.Conv2d(cin, cout, k, padding=k // 2, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

    if name == "unet":
        class UNet(nn.Module):
            """U-Net (Ronneberger et al. 2015): 4 levels, base 16 channels, skip concatenations."""

            def __init__(self, c=16, levels=4):
                super().__init__()
                ch = [c * 2 ** i for i in range(levels + 1)]
                self.down = nn.ModuleList([nn.Sequential(cbr(3 if i == 0 else ch[i - 1], ch[i]), cbr(ch[i], ch[i]))
                                           for i in range(levels)])
                self.mid = nn.Sequential(cbr(ch[levels - 1], ch[levels]), cbr(ch[levels], ch[levels]))
                self.up = nn.ModuleList([nn.ConvTranspose2d(ch[i + 1], ch[i], 2, 2) for i in range(levels)])
                self.dec = nn.ModuleList([nn.Sequential(cbr(2 * ch[i], ch[i]), cbr(ch[i], ch[i]))
                                          for i in range(levels)])
                self.head = nn.Conv2d(ch[0], 2, 1)
                self.pool = nn.MaxPool2d(2)

            def forward(self, x):
                skips = []
                for d in self.down:
                    x = d(x)
                    skips.append(x)
                    x = self.pool(x)
                x = self.mid(x)
                for i in reversed(range(len(self.up))):
                    x = self.dec[i](torch.cat([self.up[i](x), skips[i]], 1))
                return self.head(x)

        return UNet().eval(), (torch.randn(1, 3, 64, 64),)
    if name == "densenet121-like":
        class DenseLayer(nn.Module):
            def __init__(self, cin, growth=32, bn_size=4):
                super().__init__()
                self.f = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, bn_size * growth, 1, bias=False),
                                       nn.BatchNorm2d(bn_size * growth), nn.ReLU(),
                                       nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False))

            def forward(self, feats):
                return self.f(torch.cat(feats, 1))

        class DenseNet(nn.Module):
            """DenseNet-121's layout (Huang et al. 2017): blocks of 6, 12, 24, 16 layers, growth 32, each layer
            reading the concatenation of all earlier outputs of its block; on 1x3x64x64."""

            def __init__(self, blocks=(6, 12, 24, 16), growth=32, c0=64):
                super().__init__()
                self.stem = nn.Sequential(nn.Conv2d(3, c0, 7, 2, 3, bias=False), nn.BatchNorm2d(c0), nn.ReLU(),
                                          nn.MaxPool2d(3, 2, 1))
                self.blocks, self.trans = nn.ModuleList(), nn.ModuleList()
                c = c0
                for i, k in enumerate(blocks):
                    self.blocks.append(nn.ModuleList(DenseLayer(c + j * growth, growth) for j in range(k)))
                    c += k * growth
                    if i < len(blocks) - 1:
                        self.trans.append(nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 1, bias=False),
                                                        nn.AvgPool2d(2, 2)))
                        c //= 2
                self.norm = nn.BatchNorm2d(c)

            def forward(self, x):
                x = self.stem(x)
                for i, blk in enumerate(self.blocks):
                    feats = [x]
                    for layer in blk:
                        feats.append(layer(feats))
                    x = torch.cat(feats, 1)
                    if i < len(self.trans):
                        x = self.trans[i](x)
                return torch.relu(self.norm(x)).mean((2, 3))

        return DenseNet().eval(), (torch.randn(1, 3, 64, 64),)
    raise ValueError(f"unknown built model {name!r}")


def load(spec, name):
    """``(graph, TVMPlanModel or None, seconds)`` for a graph spec."""
    t0 = time.perf_counter()
    if spec.startswith("synthetic:"):
        from release.graph.synthetic import SyntheticConfig, random_layered_graph

        _, n, seed = spec.split(":")
        return random_layered_graph(SyntheticConfig(n_nodes=int(n), width=8), int(seed), name=name), None, \
            time.perf_counter() - t0
    from release.graph.cli import load_model_graph
    from release.graph.tvm_plan import TVMPlanModel

    if spec.startswith("model:"):
        g, mod = load_model_graph(spec, True)
    else:
        from release.relax import load_model

        g, mod = load_model_graph(load_model(*built_module(spec.split(":", 1)[1])), True)
        g.name = name
    return g, TVMPlanModel(mod, g), time.perf_counter() - t0


# ----------------------------------------------------------------------------------------- measurement
def perf_model(g, objective, plan):
    from release.graph.perf_model import PerformanceModel

    if objective == "memory-ideal":
        return PerformanceModel(g, 1, "peak-memory")
    if objective == "memory-tvm":
        return PerformanceModel(g, 1, "peak-memory", memory_plan=plan)
    return PerformanceModel(g, 2, "runtime")


def recorded_brkga(g, objective, plan, budget, seed, init, budgets):
    """One plain-BRKGA run at ``budget``; its best and wall seconds after the first ``b`` evaluations, per ``b``."""
    from release.graph.brkga import brkga

    m = perf_model(g, objective, plan)
    objs, marks = [], []
    orig = m.evaluate_population
    t0 = time.perf_counter()

    def evaluate(pop):
        o, v = orig(pop)
        assert not np.any(v > 0)  # no memory limit here: every order is feasible
        objs.extend(o.tolist())
        marks.append((len(objs), time.perf_counter() - t0))
        return o, v

    m.evaluate_population = evaluate
    r = brkga(m, budget, seed=seed, initial=init)
    assert r.evaluations == len(objs) == budget
    best = np.minimum.accumulate(np.array(objs))
    out = {}
    for b in budgets:
        out[b] = {"best": float(best[b - 1]), "seconds": next(t for k, t in marks if k >= b)}
    assert out[budget]["best"] == r.best_objective
    return out, r.best_chromosome


def makespan_floor(g, devices=2):
    """max(longest compute path, total compute / devices): no schedule on ``devices`` identical devices is shorter."""
    longest = np.zeros(g.n)
    for v in g.topological_order().tolist():
        longest[v] = g.cost[v] + max((longest[p] for p in g.pred[v]), default=0.0)
    return float(max(longest.max(), g.cost.sum() / devices))


def measure(g, objective, plan, budgets, seeds, limits, ideal_best_order=None, log=print):
    from release.graph.baselines import local_search, seed_chromosomes
    from release.graph.brkga import brkga

    m0 = perf_model(g, objective, plan)
    t = time.perf_counter()
    init = seed_chromosomes(m0)
    seed_s = time.perf_counter() - t
    o, _ = perf_model(g, objective, plan).evaluate_population(init)
    row = {"objective": objective, "given": float(o[0]), "greedy": float(o[1]), "seed_chromosomes_s": seed_s,
           "budgets": list(budgets), "seeds": list(seeds), "runs": {}}
    bmax = max(budgets)
    cands, xs = {}, {}
    for s in seeds:
        res, x = recorded_brkga(g, objective, plan, bmax, s, init, budgets)
        row["runs"][str(s)] = {str(b): v for b, v in res.items()}
        if res[bmax]["best"] < cands.get("brkga-long", np.inf):
            cands["brkga-long"], xs["brkga-long"] = res[bmax]["best"], x
        log(f"  {objective} seed {s}: " + ", ".join(f"{b}: {v['best']:.6g} ({v['seconds']:.1f} s)"
                                                   for b, v in res.items()))
    # a separate run at the smallest budget must be the same search as the prefix of the long run
    b0 = min(budgets)
    direct = brkga(perf_model(g, objective, plan), b0, seed=seeds[0], initial=init).best_objective
    if direct != row["runs"][str(seeds[0])][str(b0)]["best"]:
        raise RuntimeError(f"{g.name} {objective}: BRKGA at budget {b0} gave {direct}, the long run's first {b0} "
                           f"evaluations {row['runs'][str(seeds[0])][str(b0)]['best']}")
    row["prefix_check"] = "ok"
    t = time.perf_counter()
    ls = local_search(perf_model(g, objective, plan), bmax, seeds[0], initial=init)
    row["local_s"] = time.perf_counter() - t
    cands["local"], xs["local"] = ls.best_objective, ls.best_chromosome
    searched = min(("brkga-long", "local"), key=cands.get)
    best_order = perf_model(g, objective, plan).decode(xs[searched]).order
    proven = False
    if objective == "memory-ideal":
        from release.graph.exact import exact_peak_memory, exact_peak_memory_cpsat, peak_memory_lower_bound

        t = time.perf_counter()
        dp = exact_peak_memory(g, max_states=limits["dp_states"], time_limit=limits["dp_s"])
        row["dp"] = {"status": dp.status, "seconds": time.perf_counter() - t}
        lb = peak_memory_lower_bound(g)
        if dp.optimal:
            cands["exact (DP)"], xs["exact (DP)"] = dp.objective, dp.chromosome
            lb, proven = dp.objective, True
        else:
            t = time.perf_counter()
            cp = exact_peak_memory_cpsat(g, limits["cp_s"], hint_order=best_order)
            row["cpsat"] = {"status": cp.status, "seconds": time.perf_counter() - t, "bound": cp.bound}
            if cp.objective is not None:
                cands["CP-SAT"], xs["CP-SAT"] = cp.objective, cp.chromosome
            lb = max(lb, cp.bound or 0.0)
            proven = cp.optimal
    elif objective == "memory-tvm":
        if ideal_best_order is not None:
            cands["best ideal order"] = float(plan.plan_bytes(ideal_best_order))
        lb = float(plan.lower_bound_bytes())
    else:
        from release.graph.exact import exact_makespan

        t = time.perf_counter()
        ex = exact_makespan(g, 2, time_limit_s=limits["cp_s"])
        row["cpsat"] = {"status": ex.status, "seconds": time.perf_counter() - t, "bound": ex.bound}
        if ex.objective is not None:
            cands["CP-SAT"] = ex.objective
        lb = max(makespan_floor(g), ex.bound or 0.0)
        proven = ex.optimal and ex.objective <= min(cands.values())
    best = min(cands.values())
    # CP-SAT's makespan bound is on durations rounded to its time grid: never let it pass the best known
    lb = min(lb, best)
    row["candidates"] = cands
    row["best_known"] = best
    row["best_source"] = min(cands, key=cands.get)
    if objective == "memory-ideal":
        row["ideal_best_order"] = [int(v) for v in perf_model(g, objective, plan).decode(xs[row["best_source"]]).order]
    row["proven_optimal"] = bool(proven or best <= lb * (1 + 1e-12))
    row["lower_bound"] = float(lb)
    row["gap_best_to_bound_pct"] = max(0.0, 100.0 * (best / lb - 1)) if lb > 0 else None
    row["headroom_pct"] = {}
    for b in budgets:
        h = [100.0 * (row["runs"][str(s)][str(b)]["best"] / best - 1) for s in seeds]
        secs = [row["runs"][str(s)][str(b)]["seconds"] for s in seeds]
        row["headroom_pct"][str(b)] = {"mean": float(np.mean(h)), "min": float(np.min(h)), "max": float(np.max(h)),
                                       "seconds_mean": float(np.mean(secs))}
    log(f"  {objective}: best known {best:.6g} ({row['best_source']}{', proven' if row['proven_optimal'] else ''}), "
        f"bound {lb:.6g}; headroom " + ", ".join(f"{b}: {v['mean']:.2f}%" for b, v in row["headroom_pct"].items()))
    return row


# ----------------------------------------------------------------------------------------- report
def table_md(doc):
    budgets = doc["budgets"]
    lines = [f"# Headroom over plain BRKGA ({'quick' if doc['quick'] else 'full'} run)", "",
             f"Command: `{doc['command']}`; revision {doc['revision']}; {doc['date']}; {doc['machine']}; "
             f"seeds {doc['seeds']}; {doc['seconds']:.0f} s wall.", "",
             "Headroom = plain BRKGA's best at the budget / best order known - 1, mean over seeds [worst seed]; "
             "(s) = mean wall seconds of one BRKGA run to that budget. Best known: min of BRKGA "
             f"({len(doc['seeds'])} seeds x largest budget), local search (largest budget) and the exact yardstick "
             "(DP / CP-SAT with time limits); `*` = proven optimal; `=seed` = the best known is the better of the given "
             "order and the greedy solution every BRKGA run starts from: without `*`, headroom 0 there only says that "
             "no search beat that seed. Bound gap = best known / lower bound - 1: the "
             "true headroom to the optimum is at most headroom + bound gap (relative). `-` = budget not run.", ""]
    for obj in ("memory-ideal", "memory-tvm", "runtime-2dev"):
        rows = [(g, r) for g in doc["graphs"] for r in g["objectives"] if r["objective"] == obj]
        if not rows:
            continue
        lines += [f"## {OBJ_LABEL[obj]}", "",
                  "| family | graph | nodes | best known (source) | bound gap | " +
                  " | ".join(f"@{b:,}" for b in budgets) + " |",
                  "|---|---|---:|---|---:|" + "---:|" * len(budgets)]
        for g, r in rows:
            cells = []
            for b in budgets:
                h = r["headroom_pct"].get(str(b))
                cells.append("-" if h is None else f"{h['mean']:.2f}% [{h['max']:.2f}] ({h['seconds_mean']:.1f} s)")
            gap = "-" if r["gap_best_to_bound_pct"] is None else f"{r['gap_best_to_bound_pct']:.2f}%"
            lines.append(f"| {g['family']} | {g['name']} | {g['nodes']} | {r['best_known']:,.6g} "
                         f"({r['best_source']}){' *' if r['proven_optimal'] else ''}"
                         f"{' =seed' if r['best_known'] >= min(r['given'], r['greedy']) else ''} | {gap} | "
                         + " | ".join(cells) + " |")
        lines.append("")
    big = [(g["name"], r["objective"], b, h["mean"]) for g in doc["graphs"] for r in g["objectives"]
           for b, h in r["headroom_pct"].items() if h["mean"] >= 5.0]
    lines += ["Cells with mean headroom >= 5%: " + ("; ".join(f"{n} {o} @{b} ({h:.1f}%)" for n, o, b, h in big)
                                                    if big else "none") + ".", ""]
    if doc.get("not_run"):
        lines += ["Not run: " + "; ".join(doc["not_run"]) + ".", ""]
    return "\n".join(lines)


def machine():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")), "")
    except OSError:
        model = platform.processor()
    import os

    return f"{model or platform.machine()}, {os.cpu_count()} cores"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="three tiny graphs, budget 500, seeds 0 and 1 (< 1 min)")
    ap.add_argument("--out", default=OUT, help=f"results folder (default {OUT}, git-ignored)")
    ap.add_argument("--graphs", default="", help="comma-separated graph names to run (default: all of the set)")
    ap.add_argument("--budgets", default=None, help="comma-separated budgets (default 500,2000,5000,20000)")
    ap.add_argument("--seeds", default=None, help="comma-separated BRKGA seeds (default 0,1,2)")
    ap.add_argument("--max-nodes-largest", type=int, default=10**9,
                    help="graphs with more nodes skip the largest budget (default: none skip)")
    ap.add_argument("--dp-s", type=float, default=10.0, help="frontier-DP time limit, s (default 10)")
    ap.add_argument("--dp-states", type=int, default=2_000_000, help="frontier-DP state cap (default 2e6)")
    ap.add_argument("--cp-s", type=float, default=15.0, help="CP-SAT time limit, s (default 15)")
    ap.add_argument("--retable", action="store_true", help="only rewrite table.md from the results.json in --out")
    args = ap.parse_args(argv)
    t_start = time.time()
    if args.retable:
        doc = json.loads((Path(args.out) / "results.json").read_text())
        (Path(args.out) / "table.md").write_text(table_md(doc))
        return doc
    graphs = QUICK_GRAPHS if args.quick else FULL_GRAPHS
    if args.graphs:
        want = [x.strip() for x in args.graphs.split(",") if x.strip()]
        graphs = [x for x in graphs if x[1] in want]
    budgets = tuple(int(b) for b in args.budgets.split(",")) if args.budgets else ((500,) if args.quick else BUDGETS)
    seeds = tuple(int(s) for s in args.seeds.split(",")) if args.seeds else ((0, 1) if args.quick else SEEDS)
    limits = {"dp_s": args.dp_s, "dp_states": args.dp_states, "cp_s": args.cp_s}
    if args.quick and not args.budgets:
        limits.update(dp_s=min(args.dp_s, 2.0), cp_s=min(args.cp_s, 2.0))
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parent).stdout.strip()
    except OSError:
        rev = "unknown"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"command": "benchmarks/regal/headroom.py " + " ".join(sys.argv[1:] if argv is None else argv),
           "quick": args.quick, "budgets": list(budgets), "seeds": list(seeds), "limits": limits,
           "max_nodes_largest": args.max_nodes_largest, "revision": rev,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(), "graphs": [],
           "not_run": [], "seconds": 0.0}

    def log(msg):
        print(f"[{time.time() - t_start:6.0f} s] {msg}", flush=True)

    for family, name, spec in graphs:
        g, plan, load_s = load(spec, name)
        bs = tuple(b for b in budgets if b < max(budgets) or g.n <= args.max_nodes_largest)
        if len(bs) < len(budgets):
            doc["not_run"].append(f"{name}: budget {max(budgets):,} (more than {args.max_nodes_largest} nodes)")
        log(f"{family} {name}: {g.n} nodes, {len(g.data_edges)} data edges (loaded in {load_s:.1f} s)")
        entry = {"family": family, "name": name, "spec": spec, "nodes": int(g.n), "load_s": load_s, "objectives": []}
        objectives = ("memory-ideal",) + (("memory-tvm",) if plan is not None else ()) + ("runtime-2dev",)
        ideal_order = None
        for obj in objectives:
            t = time.perf_counter()
            r = measure(g, obj, plan, bs, seeds, limits, ideal_order, log)
            r["seconds"] = time.perf_counter() - t
            ideal_order = r.pop("ideal_best_order", ideal_order)
            entry["objectives"].append(r)
        doc["graphs"].append(entry)
        doc["seconds"] = time.time() - t_start
        (out / "results.json").write_text(json.dumps(doc, indent=1))
        (out / "table.md").write_text(table_md(doc))
    doc["seconds"] = time.time() - t_start
    (out / "results.json").write_text(json.dumps(doc, indent=1))
    (out / "table.md").write_text(table_md(doc))
    print(table_md(doc))
    log(f"wrote {out / 'results.json'} and {out / 'table.md'}")
    return doc


if __name__ == "__main__":
    main()
