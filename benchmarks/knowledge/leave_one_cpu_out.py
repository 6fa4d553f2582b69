"""Leave one CPU out: tuning on a machine whose CPU model no committed record comes from.

The knowledge comes only from other CPU models of this machine's ISA class:

- ``base``: a knowledge base built from the committed logs (``benchmarks/results``) of every CPU model but
  this one, without any record of the held-out layers' programs (each held-out layer is matched by its
  program, NCHW and blocked, pre-packed or not: :meth:`release.task.Task.owns`), so the layer itself is
  unseen and the machine is unseen;
- ``pack``: an empty base, so the pack shipped with the package is what ``release tune`` reads (it may hold
  the layer's schedules from other CPU models: what a new user gets);

against cold AutoTVM XGBTuner (``--no-knowledge``). Rows: ``xgb cold``, ``release+ base``, ``release+ pack``
(our tuner with its default warm start: seeds), run interleaved per layer and seed so load falls on every row
alike. Each run is a ``release tune`` process; its wall time counts from just before the process starts
(knowledge reading and seeding included) to each logged measurement.

The base is indexed once before the runs (:mod:`release.knowledge.index`; the first read of a base builds
its index, as a user's first warm start does), and each ``release+ base`` run gets a copy of it.

Table: per layer and seed, cold xgb's best GFLOPS at ``--n-trial`` is the target; for each warm row the
measurements and wall seconds to reach it, the start-up (process start to first measurement) of both, and
the final bests: as logged, and re-timed side by side (the 3 best configs of every run of a layer measured in
one runner, shuffled, 3 rounds: :func:`holdout.retime_best`). Ratios are cold's figure over the row's for
counts and times (higher favours the row), the row's over cold's for GFLOPS. Written to
``OUT/leave_one_cpu_out.{md,json}``.

Command (the committed figures came from this; ``--out`` defaults outside the checkout)::

    .venv/bin/python benchmarks/knowledge/leave_one_cpu_out.py --layers resnet18.conv2d.6 alexnet.conv2d.4 \\
        --seeds 0 1 2 --n-trial 128 --out /tmp/loco
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RELEASE = [sys.executable, "-m", "release.cli"]
ROWS = ("xgb cold", "release+ base", "release+ pack")


def build_base(folder: Path, held_out: list[str], this_mcpu: str) -> dict:
    """Fill ``folder`` with the committed records of other CPU models, none of the held-out programs."""
    sys.path.insert(0, str(ROOT))
    from release.errors import RecordError
    from release.knowledge import KnowledgeBase
    from release.measure.records import load_records
    from release.task import create_task

    variants = [create_task(n, "llvm", layout=lay, prepack=pp) for n in held_out
                for lay in ("NCHW", "NCHWc") for pp in (True, False)]
    kb = KnowledgeBase(folder)
    kept = left_cpu = left_layer = 0
    machines: dict[str, int] = {}
    for path in sorted((ROOT / "benchmarks" / "results").rglob("*.jsonl")):
        if path.name.endswith((".rejections.jsonl", ".wall.jsonl")):
            continue
        try:
            recs = load_records(path)
        except RecordError:
            continue
        out = []
        for r in recs:
            if not r.target:
                continue
            if json.loads(r.target).get("mcpu") == this_mcpu:
                left_cpu += 1
                continue
            if any(t.owns(r) for t in variants):
                left_layer += 1
                continue
            out.append(r)
            m = json.loads(r.target).get("mcpu", "?")
            machines[m] = machines.get(m, 0) + 1
        kept += kb.add(out)
    kb.close()
    return {"records": kept, "left_out_this_cpu": left_cpu, "left_out_held_out_layers": left_layer,
            "machines": machines}


def run(row: str, layer: str, seed: int, n_trial: int, out: Path, base: Path) -> Path:
    log = out / "logs" / f"{layer}.{row.replace(' ', '_')}.s{seed}.jsonl"
    if log.exists() and sum(1 for _ in open(log)) >= n_trial:
        return log
    log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.pop("RELEASE_KNOWLEDGE_PACK", None)
    args = ["tune", "--workload", layer, "--n-trial", str(n_trial), "--seed", str(seed), "--log", str(log),
            "--no-progress", "--no-check"]
    if row == "xgb cold":
        args += ["--tuner", "xgb", "--no-knowledge"]
    else:
        kdir = Path(tempfile.mkdtemp(prefix="kb-", dir=out))
        if row == "release+ base":
            shutil.rmtree(kdir)
            shutil.copytree(base, kdir)
        args += ["--tuner", "release+", "--knowledge", str(kdir)]
    t0 = time.time()
    p = subprocess.run(RELEASE + args, capture_output=True, text=True, env=env)
    (log.with_suffix(".out")).write_text(p.stdout + p.stderr)
    (log.with_suffix(".start")).write_text(str(t0))
    if p.returncode != 0:
        print(f"  {row} {layer} s{seed} FAILED: {p.stderr.strip().splitlines()[-1:]}", flush=True)
    return log


def index_base(base: Path) -> float:
    """Build the base's shard index (what the first warm start on a base does); returns the seconds it took."""
    from release.knowledge import KnowledgeBase

    t0 = time.time()
    KnowledgeBase(base).best_records("llvm")
    return time.time() - t0


def curve(log: Path) -> tuple[list[float], list[float]]:
    """(best GFLOPS after each measurement, wall seconds of each) of a log."""
    from release.measure.records import load_records

    t0 = float(log.with_suffix(".start").read_text())
    best, out, wall = 0.0, [], []
    for r in load_records(log):
        if r.error_kind == "invalid":
            continue
        if r.ok and not r.cut_short:
            best = max(best, r.gflops)
        out.append(best)
        wall.append(r.timestamp - t0)
    return out, wall


def main(argv=None) -> int:
    sys.path.insert(0, str(ROOT))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", nargs="+", default=["resnet18.conv2d.6", "alexnet.conv2d.4"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--n-trial", type=int, default=128)
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "release-leave-one-cpu-out")
    a = ap.parse_args(argv)
    from release.target import host_cpu, isa_class, machine_of, resolve_target, target_to_json

    out = a.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    host = target_to_json(resolve_target("llvm"))
    base = out / "base"
    if not base.exists():
        info = build_base(base, a.layers, host_cpu())
        (out / "base.json").write_text(json.dumps(info, indent=1))
    info = json.loads((out / "base.json").read_text())
    if "index_s" not in info:
        info["index_s"] = index_base(base)
        (out / "base.json").write_text(json.dumps(info, indent=1))
    print(f"machine {machine_of(host)} ({isa_class(host)}); base: {info}", flush=True)
    for layer in a.layers:
        for seed in a.seeds:
            for row in ROWS:
                print(f"run {row} {layer} seed {seed}", flush=True)
                run(row, layer, seed, a.n_trial, out, base)
    retime_file = out / "retimed.json"
    retimed = json.loads(retime_file.read_text()) if retime_file.exists() else {}
    for layer in a.layers:
        if layer in retimed:
            continue
        from holdout import retime_best
        from release.task import create_task

        logs = [(f"{row} s{seed}", out / "logs" / f"{layer}.{row.replace(' ', '_')}.s{seed}.jsonl")
                for seed in a.seeds for row in ROWS]
        got, detail = retime_best(create_task(layer, "llvm"), logs)
        retimed[layer] = {"gflops": got, "configs": detail}
        retime_file.write_text(json.dumps(retimed, indent=1))
        print(f"re-timed {layer}: " + ", ".join(f"{k} {v:.1f}" for k, v in got.items()), flush=True)
    results = []
    for layer in a.layers:
        for seed in a.seeds:
            cold, cold_wall = curve(out / "logs" / f"{layer}.xgb_cold.s{seed}.jsonl")
            target = cold[-1]
            rt = retimed[layer]["gflops"]
            for row in ROWS[1:]:
                c, w = curve(out / "logs" / f"{layer}.{row.replace(' ', '_')}.s{seed}.jsonl")
                hit = next((i for i, g in enumerate(c) if g >= target), None)
                t_cold = next(cold_wall[i] for i, g in enumerate(cold) if g >= target)
                results.append({"layer": layer, "seed": seed, "row": row, "cold_best_gflops": target,
                                "best_gflops": c[-1], "final_ratio": c[-1] / target,
                                "meas_to_cold_best": None if hit is None else hit + 1,
                                "cold_meas": next(i for i, g in enumerate(cold) if g >= target) + 1,
                                "wall_to_cold_best_s": None if hit is None else w[hit], "cold_wall_s": t_cold,
                                "startup_s": w[0] if w else None, "cold_startup_s": cold_wall[0],
                                "retimed_gflops": rt.get(f"{row} s{seed}"), "cold_retimed_gflops": rt.get(f"xgb cold s{seed}")})
    import numpy as np

    lines = [f"# Leave one CPU out ({machine_of(host)}, {isa_class(host)}, {time.strftime('%Y-%m-%d')})", "",
             f"Command: `{' '.join([Path(sys.executable).name, 'benchmarks/knowledge/leave_one_cpu_out.py', *sys.argv[1:]])}`",
             f"Base: {info['records']} records of other CPU models {info['machines']}; left out "
             f"{info['left_out_this_cpu']} of this CPU model and {info['left_out_held_out_layers']} of the held-out "
             "layers' programs.", "",
             f"Base index built once before the runs in {info['index_s']:.1f} s.", "",
             "| layer | seed | row | cold xgb best GFLOPS | row best GFLOPS | final ratio | re-timed GFLOPS (cold / row) "
             "| re-timed ratio | measurements to cold's best (cold / row) | wall s to cold's best (cold / row) "
             "| start-up s (cold / row) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        m = "never" if r["meas_to_cold_best"] is None else f"{r['cold_meas']} / {r['meas_to_cold_best']}"
        ws = "never" if r["wall_to_cold_best_s"] is None else f"{r['cold_wall_s']:.0f} / {r['wall_to_cold_best_s']:.0f}"
        su = "-" if r["startup_s"] is None else f"{r['startup_s']:.0f}"
        rc, rr = r["cold_retimed_gflops"], r["retimed_gflops"]
        rts = f"{rc:.1f} / {rr:.1f} | {rr / rc:.3f}" if rc and rr else "- | -"
        lines.append(f"| {r['layer']} | {r['seed']} | {r['row']} | {r['cold_best_gflops']:.1f} | {r['best_gflops']:.1f} "
                     f"| {r['final_ratio']:.3f} | {rts} | {m} | {ws} | {r['cold_startup_s']:.0f} / {su} |")
    lines.append("")
    for row in ROWS[1:]:
        rs = [r for r in results if r["row"] == row]
        meas = [r["cold_meas"] / (r["meas_to_cold_best"] or a.n_trial) for r in rs]
        wall = [r["cold_wall_s"] / (r["wall_to_cold_best_s"] or max(r["cold_wall_s"], 1e-9) * 1e9) if r["wall_to_cold_best_s"] else 0
                for r in rs]
        reached = sum(r["meas_to_cold_best"] is not None for r in rs)
        geo = float(np.exp(np.mean(np.log(meas))))
        wgeo = float(np.exp(np.mean(np.log([x for x in wall if x > 0])))) if any(x > 0 for x in wall) else float("nan")
        fin = float(np.exp(np.mean(np.log([r["final_ratio"] for r in rs]))))
        rfin = [r["retimed_gflops"] / r["cold_retimed_gflops"] for r in rs if r["retimed_gflops"] and r["cold_retimed_gflops"]]
        rgeo = float(np.exp(np.mean(np.log(rfin)))) if rfin else float("nan")
        worse = sum(x < 1 for x in rfin)
        lines.append(f"- {row}: reached cold xgb's best in {reached} of {len(rs)} runs; geomean measurements ratio "
                     f"{geo:.2f}x (a run that never reached it counted at {a.n_trial}), wall ratio {wgeo:.2f}x over the "
                     f"runs that reached it; final best vs cold {fin:.3f} logged, {rgeo:.3f} re-timed side by side "
                     f"({worse} of {len(rfin)} runs below cold re-timed)")
    text = "\n".join(lines) + "\n"
    (out / "leave_one_cpu_out.md").write_text(text)
    (out / "leave_one_cpu_out.json").write_text(json.dumps(results, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
