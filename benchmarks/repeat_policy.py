"""Choose the repeat policy by ranking fidelity: paired timings of the same kernels.

    .venv/bin/python benchmarks/repeat_policy.py --out benchmarks/results/repeat_policy
        [--workloads resnet18.conv2d.4=LOG resnet18.conv2d.12=LOG tiny.matmul.1]
        [--policies 4,3,50 4,3,10 4,3,0 1,3,0 1,1,0] [--configs 48] [--passes 2]

A tuner ranks candidates by the mean of ``repeat`` costs, each the average of ``number`` runs, with
``number`` grown until one cost takes ``min_repeat_ms`` (TVM's ``time_evaluator``; the CLI's default is
``number=4, repeat=3, min_repeat_ms=50``). The longer the timing, the steadier the ranking and the
higher the wall time per trial (one evaluation of resnet18.conv2d.6's median config took
0.18 s at 50 ms against 0.05 s at 0). This benchmark measures what each policy buys, on the same
built kernels, interleaved so that every policy sees the same machine load:

1. ``--configs`` configs per workload: from a committed log (``NAME=LOG``), the 16 fastest and the
   rest spread evenly over the remaining ranks (a tuner's ranking matters most among the good ones);
   without a log, random valid configs of the space (``--seed``).
2. Each config is built once (the project's :class:`release.measure.LocalBuilder`).
3. ``--passes`` passes; in each, the configs in a new random order, and for each config every policy in
   a rotated order, then the reference (``number`` grown to ``--ref-ms`` ms, ``--ref-repeat`` costs),
   each policy on its own :class:`release.measure.LocalRunner` (its own warm run worker, the target's
   threads; early termination off: it is a separate policy with its own benchmark,
   ``benchmarks/early_termination_fidelity.py``).

The reference cost of a config is the median of all its reference costs over the passes. Per policy
(and for the reference against itself, the noise ceiling), over workloads and passes:

- ``kendall_tau`` of the policy's mean costs against the reference (all configs) and ``tau_top16``
  (the 16 fastest by the reference);
- ``regret``: reference cost of the policy's fastest config / the reference's fastest (1.0 = it found
  the best); ``top5_overlap``;
- ``retest_tau``: the policy's pass 1 against pass 2 (its own noise);
- ``run_s_per_config``: the runner's seconds per config (what a trial's run phase costs).

Nothing here is a timed test: it prints what it measured, on the machine it ran on.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time


def parse_policy(text: str) -> tuple[int, int, int]:
    """``"NUMBER,REPEAT,MIN_REPEAT_MS"`` -> a tuple of ints; raises ``SystemExit`` naming the format."""
    try:
        n, r, ms = (int(x) for x in text.split(","))
    except ValueError:
        raise SystemExit(f"policy {text!r}: give NUMBER,REPEAT,MIN_REPEAT_MS, e.g. 4,3,50") from None
    if n < 1 or r < 1 or ms < 0:
        raise SystemExit(f"policy {text!r}: number and repeat must be >= 1, min_repeat_ms >= 0")
    return n, r, ms


def pick_configs(task, log: str | None, k: int, seed: int) -> list[tuple]:
    """``k`` distinct valid configs of ``task``: from ``log`` (16 fastest + the rest spread over the
    ranks) or random (``seed``)."""
    import numpy as np

    space = task.config_space
    if log:
        from release.measure import load_records

        seen, ranked = set(), []
        for r in sorted((r for r in load_records(log) if r.ok), key=lambda r: r.mean_cost):
            c = space.config_of_record(r.config, r.trace)
            if c not in seen:
                seen.add(c)
                ranked.append(c)
        if len(ranked) < k:
            raise SystemExit(f"{log}: {len(ranked)} distinct successful configs, fewer than --configs {k}")
        top = min(16, k)
        rest = ranked[top:]
        idx = np.linspace(0, len(rest) - 1, k - top).round().astype(int)
        return ranked[:top] + [rest[i] for i in idx]
    rng = np.random.default_rng(seed)
    out: list[tuple] = []
    for _ in range(50 * k):
        c = space.random_config(rng)
        if c not in out and space.is_valid(c)[0]:
            out.append(c)
        if len(out) == k:
            return out
    raise SystemExit(f"{task.name}: found only {len(out)} valid configs of {k}")


def kendall(a, b) -> float:
    from scipy.stats import kendalltau

    t = kendalltau(a, b).statistic
    return float(t) if t == t else 1.0


def fidelity(costs: list[float], ref: list[float]) -> dict:
    """Ranking agreement of ``costs`` with the reference ``ref`` (same configs, same order)."""
    order = sorted(range(len(ref)), key=lambda i: ref[i])
    top = order[:16]
    best = min(range(len(costs)), key=lambda i: costs[i])
    top5 = set(sorted(range(len(costs)), key=lambda i: costs[i])[:5])
    return {"kendall_tau": kendall(costs, ref), "tau_top16": kendall([costs[i] for i in top], [ref[i] for i in top]),
            "regret": ref[best] / ref[order[0]], "top5_overlap": len(top5 & set(order[:5])) / 5}


def measure_workload(name: str, log: str | None, policies, args) -> dict:
    """Build the configs of ``name`` once; time them under every policy and the reference."""
    import numpy as np
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    from release.measure import LocalBuilder, LocalRunner
    from release.task import create_task

    task = create_task(name, args.target)
    configs = pick_configs(task, log, args.configs, args.seed)
    mods, argss = [], []
    for c in configs:
        sch = task.config_space.apply(c)
        mods.append(sch.mod)
        argss.append(ArgInfo.from_entry_func(sch.mod, remove_preproc=True))
    builder = LocalBuilder()
    t0 = time.perf_counter()
    built = builder.build(mods, task.target_json)
    build_wall = time.perf_counter() - t0
    builder.close()
    keep = [i for i, b in enumerate(built) if not b.error_kind]
    if len(keep) < len(configs):
        print(f"{name}: {len(configs) - len(keep)} of {len(configs)} configs did not build; left out", file=sys.stderr)
    names = [",".join(map(str, p)) for p in policies] + ["ref"]
    runners = {nm: LocalRunner(number=p[0], repeat=p[1], min_repeat_ms=p[2], timeout=args.timeout)
               for nm, p in zip(names, list(policies) + [(1, args.ref_repeat, args.ref_ms)])}
    costs = {nm: [[float("inf")] * len(keep) for _ in range(args.passes)] for nm in names}  # mean cost, s
    ref_costs: list = [[] for _ in keep]  # every reference cost of config j, over the passes
    run_s = {nm: [] for nm in names}
    failed = {nm: 0 for nm in names}
    rng = np.random.default_rng(args.seed)
    pol = names[:-1]
    try:
        for p in range(args.passes):
            for step, j in enumerate(rng.permutation(len(keep))):
                path = built[keep[j]].artifact
                k = (step + p) % len(pol)
                for nm in pol[k:] + pol[:k] + ["ref"]:
                    (res,) = runners[nm].run([(path, argss[keep[j]])], task.target)
                    run_s[nm].append(res.seconds)
                    if res.error_kind or not res.costs:
                        failed[nm] += 1
                        continue
                    costs[nm][p][j] = float(np.mean(res.costs))
                    if nm == "ref":
                        ref_costs[j].extend(map(float, res.costs))
            print(f"{name}: pass {p + 1}/{args.passes} done", file=sys.stderr)
    finally:
        for r in runners.values():
            r.close()
        for b in built:
            if b.artifact:
                shutil.rmtree(os.path.dirname(b.artifact), ignore_errors=True)
    ref = [statistics.median(c) if c else float("inf") for c in ref_costs]
    out = {"workload": name, "log": log, "configs": len(keep), "build_wall_s": build_wall,
           "ref_fastest_ms": min(ref) * 1e3, "ref_median_ms": statistics.median(ref) * 1e3,
           "ref_cost_s": ref, "policies": {}}
    for nm in names:
        passes = costs[nm]
        per = [fidelity(passes[p], ref) for p in range(args.passes)]
        row = {k: statistics.mean(d[k] for d in per) for k in per[0]}
        row["retest_tau"] = kendall(passes[0], passes[1]) if args.passes > 1 else None
        row["run_s_per_config"] = statistics.mean(run_s[nm])
        row["failed"] = failed[nm]
        row["mean_cost_s"] = passes
        out["policies"][nm] = row
    return out


def markdown(result: dict) -> str:
    lines = ["# Repeat policy: ranking fidelity against run time", "",
             f"Command: `{result['command']}`  ", f"Machine: {result['machine']['cpu']}, {result['machine']['cores']} cores, "
             f"TVM {result['machine']['versions'].get('apache-tvm')}; kernels timed on {result['threads']} threads", "",
             "Policy = number,repeat,min_repeat_ms; ref = number grown to "
             f"{result['ref_ms']} ms, {result['ref_repeat']} costs, median over {result['passes']} passes. "
             "Fidelity is against ref; the ref row is each pass against the median (its noise ceiling).", ""]
    for w in result["workloads"]:
        lines += [f"## {w['workload']} ({w['configs']} configs; ref fastest {w['ref_fastest_ms']:.3f} ms, "
                  f"median {w['ref_median_ms']:.3f} ms; {'from ' + os.path.basename(w['log']) if w['log'] else 'random configs'})",
                  "", "| policy | Kendall tau | tau top-16 | regret | top-5 overlap | retest tau | run s / config | failed |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for nm, r in w["policies"].items():
            rt = "" if r["retest_tau"] is None else f"{r['retest_tau']:.3f}"
            lines.append(f"| {nm} | {r['kendall_tau']:.3f} | {r['tau_top16']:.3f} | {r['regret']:.3f} | "
                         f"{r['top5_overlap']:.2f} | {rt} | {r['run_s_per_config']:.3f} | {r['failed']} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", nargs="+", default=[
        "resnet18.conv2d.4=benchmarks/results/knowledge/holdout/logs/resnet18.conv2d.4.xgb.cold.s0.jsonl",
        "resnet18.conv2d.12=benchmarks/results/knowledge/holdout/logs/resnet18.conv2d.12.xgb.cold.s0.jsonl",
        "tiny.matmul.1"], help="NAME or NAME=LOG (configs from LOG; else random)")
    ap.add_argument("--policies", nargs="+", default=["4,3,50", "4,3,10", "4,3,0", "1,3,0", "1,1,0"],
                    help="NUMBER,REPEAT,MIN_REPEAT_MS each")
    ap.add_argument("--configs", type=int, default=48)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--ref-ms", type=int, default=200, help="reference: number grown until one cost takes this long")
    ap.add_argument("--ref-repeat", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per run")
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="runs/repeat_policy",
                    help="results folder (default git-ignored; committed: benchmarks/results/repeat_policy)")
    args = ap.parse_args(argv)
    if args.configs < 17:
        raise SystemExit("--configs must be at least 17 (the 16 fastest are a separate figure)")
    policies = [parse_policy(p) for p in args.policies]
    from release.bench import machine
    from release.target import resolve_target
    from release.threads import thread_count

    result = {"command": "python benchmarks/repeat_policy.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "machine": machine(), "threads": thread_count(resolve_target(args.target)),
              "ref_ms": args.ref_ms, "ref_repeat": args.ref_repeat, "passes": args.passes, "seed": args.seed,
              "workloads": []}
    for spec in args.workloads:
        name, _, log = spec.partition("=")
        result["workloads"].append(measure_workload(name, log or None, policies, args))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "repeat_policy.json"), "w") as f:
        json.dump(result, f, indent=1)
    text = markdown(result)
    with open(os.path.join(args.out, "repeat_policy.md"), "w") as f:
        f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
