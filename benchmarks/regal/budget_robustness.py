"""REGAL against plain and tuned BRKGA at every budget from 500 to 20,000 evaluations.

Held-out graphs: the *test* split of ``make_splits(32, 0, 100, SyntheticConfig(40 nodes, width 8, edge density
0.15), seed 0)`` (the call ``release regal train --graphs 32`` makes; the policies never saw these graphs).
Every method starts from the same two seed chromosomes (the given order and the greedy solution,
``baselines.seed_chromosomes``) and gets the same budget and BRKGA seed (common random numbers).

Methods per (graph, seed, budget):
* ``brkga``: plain BRKGA (population 100, elite 0.2, mutant 0.2, rho 0.7);
* ``tuned``: BRKGA with the config grid-searched at budget 1,000 on training graphs (runtime:
  population 50, elite 0.1, mutant 0.1, rho 0.6; peak memory: population 50, elite 0.25, mutant 0.1, rho 0.6);
* ``regal``: the shipped policy's most likely per-node Beta/rho choices, biasing the share
  ``policy_fraction_schedule(budget) = min(1, 1000 / budget)`` of the population (fading to plain BRKGA);
* ``regal-full``: the same policy biasing the whole population at every budget (what was shipped first).

Ratios are method / plain BRKGA per (graph, seed); the interval is a 95% bootstrap over graphs (resampling
graphs, keeping their seeds together).

``--objective peak-memory-tvm`` (the memory TVM plans): peak memory is the bytes
``StaticPlanBlockMemory`` plans (``PerformanceModel(..., memory_plan=TVMPlanModel)``), the policy is
``regal-peak-memory-tvm.pt`` and the graphs are synthetic Relax networks (:mod:`release.graph.synthetic_relax`,
``--split test`` by default; the policy was trained on the train split and its share chosen on ``dev``) plus the
real models named by ``--models`` (``model:NAME`` specs, imported fused). Budget 20,000 is skipped on graphs of
more than ``--max-nodes-20000`` kernels. Imported graphs and plan models are cached in ``--cache``.

``--choose-shares 0.25,0.5,1`` (development runs only): runs REGAL at each share as well, and picks per budget
the share with the lowest mean ratio to plain BRKGA (0, i.e. plain BRKGA, unless a share is below 1; with
``--rule significant`` only among shares whose 95% interval lies below 1, so noise is not chased); with
``--write-checkpoint`` the chosen table is stored in the checkpoint as ``policy_fraction``
(:func:`release.graph.brkga.policy_fraction_schedule` ``table=``, used by the CLI).

Usage: ``.venv/bin/python benchmarks/regal/budget_robustness.py --objective runtime --graphs 16 --seeds 2``
writes ``DIR/budget-{objective}{tag}.{json,md,png}`` (``--out DIR``, default ``runs/regal``, git-ignored; the committed
figures: ``--out benchmarks/regal/results``).
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
OUT = "runs/regal"  # default --out: git-ignored, so a run leaves the checkout clean


def _graphs(n):
    from release.graph.synthetic import SyntheticConfig, make_splits

    return make_splits(32, 0, 100, SyntheticConfig(n_nodes=40, width=8, edge_density=0.15), seed=0).test[:n]



def cached_graph(key, cache):
    """``(graph, TVMPlanModel)`` of ``("relax", split, index)`` or ``("model", spec)``, from ``cache`` (pickles
    this script wrote itself; built on first use)."""
    import pickle

    p = Path(cache) / ("relax-{}-{}.pkl".format(*key[1:]) if key[0] == "relax" else
                       "model-{}.pkl".format(key[1].replace(":", "_").replace("@", "_b")))
    if p.exists():
        return pickle.loads(p.read_bytes())
    if key[0] == "relax":  # the split's first key[2] + 1 kept networks, as split_graphs keeps them
        from release.graph.synthetic_relax import split_graphs

        Path(cache).mkdir(parents=True, exist_ok=True)
        for k, rg in enumerate(split_graphs(key[1], key[2] + 1)):
            q = Path(cache) / f"relax-{key[1]}-{k}.pkl"
            if not q.exists():
                q.write_bytes(pickle.dumps((rg.graph, rg.plan)))
        return pickle.loads(p.read_bytes())
    from release.graph.cli import load_model_graph
    from release.graph.tvm_plan import TVMPlanModel

    g, mod = load_model_graph(key[1], True)
    item = (g, TVMPlanModel(mod, g))
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(pickle.dumps(item))
    return item


def run_one(args):
    gi, seed, objective, budgets = args[:4]
    opts = args[4] if len(args) > 4 else {}
    import torch

    torch.set_num_threads(1)
    from release.graph.baselines import seed_chromosomes
    from release.graph.brkga import BRKGAConfig, brkga, policy_fraction_schedule
    from release.graph.policy import load_policy, policy_action, shipped_checkpoint
    from release.graph.perf_model import PerformanceModel

    tvm = objective == "peak-memory-tvm"
    mkw = {}
    if tvm:
        g, plan = cached_graph(gi, opts["cache"])
        mkw["memory_plan"] = plan
        objective = "peak-memory"
    else:
        g = _graphs(gi + 1)[gi]
    devices = 2 if objective == "runtime" else 1
    pol, meta = load_policy(opts.get("checkpoint") or shipped_checkpoint(objective, "tvm" if tvm else "ideal"))
    table = None if opts.get("default_schedule") else meta.get("policy_fraction")
    params = policy_action(pol, g).brkga_params(pol.cfg, devices)
    init = seed_chromosomes(PerformanceModel(g, devices, objective, **mkw))
    opt = None
    if tvm:
        budgets = [b for b in budgets if b < 20_000 or g.n <= opts.get("max_nodes_20000", 500)]
    if objective == "peak-memory" and not tvm and not opts.get("shares"):  # the exact yardstick: frontier DP (CP-SAT when the DP gives up)
        from release.graph.exact import exact_peak_memory, exact_peak_memory_cpsat

        ex = exact_peak_memory(g, time_limit=60)
        if not ex.optimal:
            ex = exact_peak_memory_cpsat(g, 60)
        opt = ex.objective if ex.optimal else None
    rows = []
    for b in budgets:
        def run(**kw):
            m = PerformanceModel(g, devices, objective, **mkw)
            r = brkga(m, b, seed=seed, initial=init, **kw)
            assert m.evaluations == r.evaluations <= b
            return r.best_objective

        share = policy_fraction_schedule(b, table=table)
        gname = gi if not tvm else (gi[1] if gi[0] == "model" else ":".join(map(str, gi)))
        row = {"graph": gname, "nodes": g.n, "seed": seed, "budget": b,
               "brkga": run()}
        if not opts.get("shares"):  # development runs (choosing shares) skip tuned BRKGA
            row["tuned"] = run(config=BRKGAConfig(**TUNED[objective]))
        row["regal"] = row["brkga"] if share == 0 else run(policy_fraction=share, **params)
        row["regal-full"] = row["regal"] if share == 1.0 else run(**params)
        for f in opts.get("shares", ()):
            row[f"share-{f:g}"] = (row["regal-full"] if f == 1 else row["brkga"] if f == 0 else
                                   row["regal"] if f == share else run(policy_fraction=f, **params))
        row["policy_share"] = share
        row["optimum"] = opt
        m = PerformanceModel(g, devices, objective, **mkw)
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


def summarize(rows, methods):  # noqa: C901
    """Per budget: each method's ratio to plain BRKGA (mean, 95% bootstrap over graphs), better/worse pairs,
    ratios to the given order, gap to the proven optimum where there is one, never worse than the seeds."""
    table = []
    for b in sorted({r["budget"] for r in rows}):
        sub = [r for r in rows if r["budget"] == b and all(m in r for m in methods)]
        if not sub:
            continue
        line = {"budget": b, "n": len(sub), "graphs": len({r["graph"] for r in sub})}
        for m in methods:
            by_g: dict = {}
            for r in sub:
                by_g.setdefault(r["graph"], []).append(r[m] / r["brkga"])
            mean, lo, hi = bootstrap(by_g)
            rat = np.array([r[m] / r["brkga"] for r in sub])
            line[m] = {"mean": mean, "lo": lo, "hi": hi, "better": int((rat < 1 - 1e-12).sum()),
                       "worse": int((rat > 1 + 1e-12).sum())}
        line["brkga_vs_given"] = float(np.mean([r["brkga"] / r["given"] for r in sub]))
        line["regal_vs_given"] = float(np.mean([r["regal"] / r["given"] for r in sub]))
        line["policy_share"] = float(np.mean([r["policy_share"] for r in sub]))
        proven = [r for r in sub if r.get("optimum")]
        if proven:
            line["gap_to_optimum_pct"] = {m: float(np.mean([100 * (r[m] / r["optimum"] - 1) for r in proven]))
                                          for m in ("brkga", "tuned", "regal", "regal-full")}
            line["at_optimum"] = {m: int(sum(r[m] <= r["optimum"] + 1e-9 for r in proven))
                                  for m in ("brkga", "tuned", "regal", "regal-full")}
            line["proven"] = len(proven)
        line["brkga_vs_greedy"] = float(np.mean([r["brkga"] / r["greedy"] for r in sub]))
        line["never_worse_than_seeds"] = all(r[m] <= min(r["given"], r["greedy"]) + 1e-9
                                             for r in sub for m in ("brkga",) + methods)
        table.append(line)
    return table


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--objective", choices=("runtime", "peak-memory", "peak-memory-tvm"), default="runtime")
    ap.add_argument("--split", choices=("dev", "test"), default="test",
                    help="peak-memory-tvm: synthetic Relax split (default test)")
    ap.add_argument("--models", default="", help="peak-memory-tvm: comma-separated model:NAME specs added as graphs")
    ap.add_argument("--cache", default="/tmp/regal-relax-cache", help="peak-memory-tvm: cache of imported graphs")
    ap.add_argument("--max-nodes-20000", type=int, default=500,
                    help="peak-memory-tvm: skip budget 20,000 on graphs with more kernels (default 500)")
    ap.add_argument("--checkpoint", default=None, help="policy (default: the shipped one for the objective)")
    ap.add_argument("--default-schedule", action="store_true",
                    help="ignore the checkpoint's policy_fraction table (use the default schedule)")
    ap.add_argument("--budgets", default=",".join(map(str, BUDGETS)), help="comma-separated budgets")
    ap.add_argument("--choose-shares", default="", help="development runs: shares to compare, e.g. 0.25,0.5,1")
    ap.add_argument("--rule", choices=("mean", "significant"), default="mean",
                    help="with --choose-shares: pick the share with the lowest mean ratio (mean), or only a share "
                         "whose 95%% interval lies below 1 (significant; else 0)")
    ap.add_argument("--write-checkpoint", action="store_true",
                    help="with --choose-shares: store the chosen per-budget shares in the checkpoint")
    ap.add_argument("--graphs", type=int, default=16)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--first", type=int, default=0, help="index of the first test graph (default 0)")
    ap.add_argument("--tag", default="", help="suffix of the result files")
    ap.add_argument("--out", default=OUT, help="results folder (default runs/regal; committed: benchmarks/regal/results)")
    args = ap.parse_args()
    t0 = time.time()
    shares = tuple(float(x) for x in args.choose_shares.split(",") if x.strip())
    opts = {"cache": args.cache, "max_nodes_20000": args.max_nodes_20000, "checkpoint": args.checkpoint,
            "default_schedule": args.default_schedule, "shares": shares}
    if args.objective == "peak-memory-tvm":
        keys = [("relax", args.split, gi) for gi in range(args.first, args.first + args.graphs)]
        keys += [("model", m.strip()) for m in args.models.split(",") if m.strip()]
        first_build = ([("relax", args.split, args.first + args.graphs - 1)] if args.graphs else []) + keys[args.graphs:]
        for k in first_build:  # build the caches once, before the workers read them
            cached_graph(k, args.cache)
            print(f"cached {k} ({time.time() - t0:.0f} s)", flush=True)
        # the largest graphs first, so the pool is not left waiting on them at the end
        keys.sort(key=lambda k: -cached_graph(k, args.cache)[0].n)
    else:
        keys = list(range(args.first, args.first + args.graphs))
    budgets = tuple(int(b) for b in args.budgets.split(","))
    jobs = [(gi, 20_000 + s, args.objective, budgets, opts) for gi in keys for s in range(args.seeds)]
    rows = []
    with ProcessPoolExecutor(args.workers) as ex:
        for r in ex.map(run_one, jobs):
            rows.extend(r)
            print(f"graph {r[0]['graph']} seed {r[0]['seed']} done ({time.time() - t0:.0f} s)", flush=True)
    methods = ("regal", "regal-full") + (() if shares else ("tuned",)) + tuple(f"share-{f:g}" for f in shares)
    groups = {"all": rows}
    if args.objective == "peak-memory-tvm":
        groups = {"all": rows, "synthetic": [r for r in rows if str(r["graph"]).startswith("relax")],
                  "real": [r for r in rows if str(r["graph"]).startswith("model")]}
        groups = {k: v for k, v in groups.items() if v}
    tables = {k: summarize(v, methods) for k, v in groups.items()}
    table = tables["all"]
    chosen = None
    if shares:  # per budget, the share with the lowest mean ratio to plain BRKGA (0 unless one is below 1)
        chosen = []
        for line in table:
            cand = [(1.0, 0.0)] + [(line[f"share-{f:g}"]["mean"], f) for f in shares
                                   if args.rule == "mean" or line[f"share-{f:g}"]["hi"] < 1.0]
            chosen.append([line["budget"], min(cand)[1]])
        print("chosen shares:", chosen)
        if args.write_checkpoint:
            import torch

            from release.graph.policy import load_checkpoint_file, shipped_checkpoint

            ck = Path(args.checkpoint or shipped_checkpoint(
                "peak-memory" if args.objective != "runtime" else "runtime",
                "tvm" if args.objective == "peak-memory-tvm" else "ideal"))
            d = load_checkpoint_file(ck)
            merged = {int(b): float(f) for b, f in d.setdefault("meta", {}).get("policy_fraction") or []}
            merged.update({int(b): float(f) for b, f in chosen})  # runs at other budgets keep their entries
            d["meta"]["policy_fraction"] = [[b, merged[b]] for b in sorted(merged)]
            d["meta"]["policy_fraction_source"] = (d["meta"].get("policy_fraction_source", "") +
                                                   " chosen on the development graphs by `.venv/bin/python "
                                                   "benchmarks/regal/budget_robustness.py " + " ".join(sys.argv[1:]) + "`;").strip()
            torch.save(d, str(ck))
            print(f"wrote policy_fraction to {ck}")
    name = f"budget-{args.objective}{args.tag}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cmd = "benchmarks/regal/budget_robustness.py " + " ".join(sys.argv[1:])
    (out / f"{name}.json").write_text(json.dumps({"command": cmd, "seconds": time.time() - t0, "rows": rows,
                                                  "table": table, "tables": tables, "chosen_shares": chosen},
                                                 indent=1))
    tvm = args.objective == "peak-memory-tvm"
    what = (f"{args.graphs} held-out synthetic Relax networks ({args.split} split {args.first}..{args.first + args.graphs - 1})"
            + (f" and {args.models}" if args.models else "") if tvm else
            f"{args.graphs} held-out graphs (test split {args.first}..{args.first + args.graphs - 1})")
    md = [f"# REGAL vs plain BRKGA per budget, {args.objective} "
          f"({'2 devices' if args.objective == 'runtime' else '1 device'})", "",
          f"Command: `.venv/bin/python {cmd}` ({time.time() - t0:.0f} s wall, {args.workers} workers, on a loaded "
          f"2-core machine). {what} x {args.seeds} seeds; "
          "REGAL's policy share per budget is the checkpoint's `policy_fraction` table when it has one (else "
          "`policy_fraction_schedule(budget)`), as of this run. Ratio = method / plain BRKGA (lower is better); "
          "[95% bootstrap over graphs, seeds kept together]; better/worse = (graph, seed) pairs.", ""]
    if tvm:
        md += ["Peak memory here is the bytes TVM's `StaticPlanBlockMemory` plans for the order "
               "(`TVMPlanModel`, exact against TVM on every order checked), not ideal liveness. Tuned BRKGA uses "
               "the shipped peak-memory config (tuned at 1,000 on ideal liveness), not re-tuned for TVM's plan.", ""]
    for gname, tab in tables.items():
        if len(tables) > 1:
            md += [f"## {gname} graphs ({tab[0]['graphs']} graphs)" if tab else f"## {gname}", ""]
        shown = [m for m in ("regal", "regal-full", "tuned") + tuple(f"share-{f:g}" for f in shares) if m in methods]
        label = {"regal": "REGAL", "regal-full": "REGAL (full policy)", "tuned": "tuned BRKGA"}
        head = ["budget", "policy share"] + sum(([label.get(m, m.replace("-", " ")), "better/worse"] for m in shown), []) + [
                "BRKGA / given", "REGAL / given", "pairs", "never worse than given & greedy"]
        md += ["| " + " | ".join(head) + " |", "|" + "---:|" * 2 + "---|---:|" * len(shown) + "---:|---:|---:|---|"]
        for line in tab:
            cells = []
            for m in shown:
                c = line[m]
                cells += [f"{c['mean']:.4f} [{c['lo']:.4f}, {c['hi']:.4f}]", f"{c['better']}/{c['worse']}"]
            md.append(f"| {line['budget']} | {line['policy_share']:.2f} | " + " | ".join(cells)
                      + f" | {line['brkga_vs_given']:.4f} | {line['regal_vs_given']:.4f} | {line['n']} | "
                      f"{'yes' if line['never_worse_than_seeds'] else 'NO'} |")
        md.append("")
    if chosen:
        md += [f"Chosen policy share per budget (rule {args.rule}: lowest mean ratio"
               f"{' among shares whose interval lies below 1' if args.rule == 'significant' else ''}; 0 = plain BRKGA): "
               f"{chosen}", ""]
    if tvm and any(str(r["graph"]).startswith("model") for r in rows):
        md += ["Per real graph (mean over seeds): TVM-planned bytes of the given order, plain BRKGA and REGAL:", "",
               "| graph | kernels | budget | given | BRKGA | REGAL | REGAL / BRKGA |", "|---|---:|---:|---:|---:|---:|---:|"]
        for gname in sorted({r["graph"] for r in rows if str(r["graph"]).startswith("model")}):
            for b in sorted({r["budget"] for r in rows}):
                sub = [r for r in rows if r["graph"] == gname and r["budget"] == b]
                if sub:
                    md.append(f"| {gname} | {sub[0]['nodes']} | {b} | {np.mean([r['given'] for r in sub]):,.0f} | "
                              f"{np.mean([r['brkga'] for r in sub]):,.0f} | {np.mean([r['regal'] for r in sub]):,.0f} | "
                              f"{np.mean([r['regal'] / r['brkga'] for r in sub]):.4f} |")
        md.append("")
    if any("gap_to_optimum_pct" in l for l in table):
        md += ["", "Gap to the proven optimum (frontier DP, CP-SAT order model when the DP gives up), mean % over the "
               "(graph, seed) pairs with a proven optimum, and how many reached it:", "",
               "| budget | proven | BRKGA | tuned BRKGA | REGAL (schedule) | REGAL (full policy) |", "|---:|---:|---|---|---|---|"]
        for l in table:
            if "gap_to_optimum_pct" in l:
                gp, at = l["gap_to_optimum_pct"], l["at_optimum"]
                md.append(f"| {l['budget']} | {l['proven']} | " + " | ".join(
                    f"{gp[m]:.2f}% ({at[m]})" for m in ("brkga", "tuned", "regal", "regal-full")) + " |")
    (out / f"{name}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for m, c in (("regal", "C0"), ("regal-full", "C1"), ("tuned", "C2")):
            if m not in table[0]:
                continue
            y = [l[m]["mean"] for l in table]
            lo = [l[m]["lo"] for l in table]
            hi = [l[m]["hi"] for l in table]
            bx = [l["budget"] for l in table]
            ax.plot(bx, y, "o-", color=c, label={"regal": "REGAL (policy share: schedule)",
                                                      "regal-full": "REGAL (full policy)",
                                                      "tuned": "tuned BRKGA"}[m])
            ax.fill_between(bx, lo, hi, color=c, alpha=0.15)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("evaluation budget")
        ax.set_ylabel("objective / plain BRKGA")
        ax.set_title(f"{args.objective}: {table[0]['graphs']} held-out graphs x {args.seeds} seeds", fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / f"{name}.png", dpi=120)
    except ImportError:
        print("matplotlib missing: no plot")


if __name__ == "__main__":
    main()
