"""Peak memory of the models users deploy, before and after the memory order ``tune-model --memory-order`` applies.

For each model of the model tier (``release bench --tier model``: ResNet-18, ResNet-50, MobileNetV2, the
BERT-base layer, ViT-B/16) and the skip-heavy models (Inception-v3's 35x35 blocks, RandWire with 60 and 200
nodes, a U-Net, a DenseNet-121-like stack), the module is imported and fused as ``tvm.compile`` fuses it, then:

1. ``release.graph.relax_apply.reorder_for_memory`` runs, once per method (``brkga``; ``regal``: BRKGA biased by
   the shipped policy trained on TVM's plan) at ``--budget`` evaluations: the bytes TVM's
   ``StaticPlanBlockMemory`` plans in the given order and in the order kept (kept only when TVM plans it
   smaller), and the search's wall time (import of the graph, the search and TVM's check; seconds);
2. where a method kept an order, the better one is handed to ``release.graph.relax_apply.apply_order``: both
   modules are compiled (TVM's default schedules: the plan does not depend on them), their outputs compared bit
   for bit on random inputs, and each library's peak resident memory measured ``--runs`` times in a child
   process (the Relax VM running it), given and reordered alternately. Where both kept the given order the
   module is unchanged: nothing is compiled or measured.

Naming models reruns only those and keeps the other rows of an earlier ``DIR/memory_order_models.json``.

Usage::

    .venv/bin/python benchmarks/regal/memory_order_models.py [--budget 2000] [--runs 3] [--out DIR] [NAME ...]
    .venv/bin/python benchmarks/regal/memory_order_models.py --quick      # tiny-cnn and the small Inception

Writes ``DIR/memory_order_models.{json,md}`` (default ``runs/regal/memory-order``: git-ignored). The table's
header names the machine, the date and the code revision.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# (family, name, spec): "zoo:NAME" (release.zoo, the model tier), "model:NAME" (release.graph.models) or
# "built:NAME" (headroom.py's skip-heavy models)
MODELS = (
    [("model tier", n, f"zoo:{n}") for n in ("resnet18", "mobilenet_v2", "bert-base-layer", "resnet50", "vit-b16")]
    + [("skip-heavy", n, f"model:{n}") for n in ("inception-v3-35", "randwire-60", "randwire-200")]
    + [("skip-heavy", n, f"built:{n}") for n in ("unet", "densenet121-like")]
)
QUICK = [("model tier", "tiny-cnn", "zoo:tiny-cnn"), ("skip-heavy", "inception", "model:inception")]
METHODS = ("brkga", "regal")
OUT = "runs/regal/memory-order"


def load(spec: str):
    """``(graph, fused Relax module)`` of a spec, as ``release regal apply`` imports it."""
    from release.graph.cli import load_model_graph

    kind, name = spec.split(":", 1)
    if kind == "model":
        return load_model_graph(spec, True)
    from release.relax import load_model

    if kind == "zoo":
        return load_model_graph(load_model(name), True)
    from headroom import built_module

    return load_model_graph(load_model(*built_module(name)), True)


def one(family: str, name: str, spec: str, budget: int, runs: int, out: Path, seed: int = 0) -> dict:
    from release.graph.relax_apply import apply_order, reorder_for_memory

    t0 = time.perf_counter()
    graph, mod = load(spec)
    row = {"family": family, "model": name, "spec": spec, "kernels": int(graph.n),
           "import_s": time.perf_counter() - t0, "methods": {}}
    for method in METHODS:
        _, rep = reorder_for_memory(mod, method, budget, seed)
        row["methods"][method] = {"planned_before": rep.planned_before, "planned_after": rep.planned_after,
                                  "improved": rep.improved, "evaluations": rep.evaluations, "search_s": rep.seconds,
                                  "order": rep.order}
        print(f"  {name}: {rep.line()}", flush=True)
    best = min(METHODS, key=lambda m: (row["methods"][m]["planned_after"], METHODS.index(m)))
    for m in row["methods"].values():
        order = m.pop("order")
        if m is row["methods"][best]:
            kept = order
    row.update(applied=best, planned_before=row["methods"][best]["planned_before"],
               planned_after=row["methods"][best]["planned_after"], vm_peak_before=None, vm_peak_after=None,
               vm_peaks_before=[], vm_peaks_after=[], vm_peak_change="", outputs_identical=None, max_abs_diff=None)
    if not row["methods"][best]["improved"]:  # the given order is kept: the same module, nothing to compare
        row.update(vm_peak_change="given order kept (the module is unchanged)", total_s=time.perf_counter() - t0)
        return row
    ap = apply_order(mod, graph, kept, out / name, measure=runs > 0, seed=seed, runs=runs)
    row.update(planned_before=ap.planned_before, planned_after=ap.planned_after,
               vm_peak_before=ap.vm_peak_before, vm_peak_after=ap.vm_peak_after, vm_peaks_before=ap.vm_peaks_before,
               vm_peaks_after=ap.vm_peaks_after, vm_peak_change=ap.vm_peak_change() if runs > 0 else "",
               outputs_identical=ap.outputs_identical, max_abs_diff=ap.max_abs_diff,
               total_s=time.perf_counter() - t0)
    for f in ap.files.values():  # the libraries embed the weights (hundreds of MB): not kept
        Path(f).unlink(missing_ok=True)
    return row


def pct(before, after) -> str:
    return f"{100.0 * (before - after) / before:.1f}%" if before else "-"


def markdown(result: dict) -> str:
    m = result["machine"]
    lines = [
        "# Peak memory before and after the memory order, per model",
        "",
        f"Machine: {m['cpu']} (LLVM `{m['llvm_mcpu']}`, {m['cores']} cores), {m['date']}, code {m['release']}. "
        f"Command: `{result['command']}` ({result['wall_s']:.0f} s wall).",
        "",
        f"TVM's `StaticPlanBlockMemory` plan of the fused model (bytes, exact: read from the planned IR) in the given "
        f"order and in the order kept by each method at {result['budget']} evaluations (search seconds: the graph's "
        "import, the search and TVM's check of the order). The better order is then compiled: outputs compared bit "
        f"for bit with the given order's, and each library's peak resident memory measured in a child process "
        f"({result['runs']} runs each, alternately; median).",
        "",
        f"1-minute load average after each model: {', '.join(map(str, result.get('load_average', [])))} on "
        f"{m['cores']} cores (search seconds are wall time: a loaded machine lengthens them).",
        "",
        "| family | model | kernels | TVM plan, given (B) | BRKGA: plan (B), search s | REGAL: plan (B), search s "
        "| plan change | VM peak, given (B) | VM peak, reordered (B) | measured change | outputs identical |",
        "|---|---|---:|---:|---|---|---:|---:|---:|---|---|",
    ]
    for r in result["rows"]:
        if "error" in r:
            lines.append(f"| {r['family']} | {r['model']} | - | failed: {r['error']} |||||||")
            continue
        cells = [f"{r['methods'][k]['planned_after']:,}, {r['methods'][k]['search_s']:.1f} s" for k in METHODS]
        peak = (lambda v: f"{v:,}" if v is not None else "-")
        lines.append(f"| {r['family']} | {r['model']} | {r['kernels']} | {r['planned_before']:,} | {cells[0]} | "
                     f"{cells[1]} | {pct(r['planned_before'], r['planned_after'])} lower | {peak(r['vm_peak_before'])}"
                     f" | {peak(r['vm_peak_after'])} | {r['vm_peak_change'] or '-'} | "
                     f"{'-' if r['outputs_identical'] is None else r['outputs_identical']} |")
    ok = [r for r in result["rows"] if "error" not in r]
    moved = [r for r in ok if r["planned_after"] < r["planned_before"]]
    lines += ["", f"{len(moved)} of {len(ok)} models plan fewer bytes in the order kept; "
              + (f"on those, {sum(100.0 * (r['planned_before'] - r['planned_after']) / r['planned_before'] for r in moved) / len(moved):.1f}% "
                 "lower on average. " if moved else "")
              + f"Longest search: {max((m['search_s'] for r in ok for m in r['methods'].values()), default=0):.1f} s."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="models to run (default: all of MODELS)")
    ap.add_argument("--budget", type=int, default=2000, help="evaluations per method (default 2000, "
                    "tune-model --memory-order's default)")
    ap.add_argument("--runs", type=int, default=3, help="VM peak measurements per library (0: none)")
    ap.add_argument("--quick", action="store_true", help="tiny-cnn and the small Inception, 200 evaluations, one run")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args(argv)
    from release.bench import machine

    pool = QUICK if args.quick else MODELS
    rows = [r for r in pool if not args.names or r[1] in args.names]
    unknown = sorted(set(args.names) - {r[1] for r in pool})
    if unknown:
        ap.error(f"unknown model(s) {unknown}: choose from {[r[1] for r in pool]}")
    if args.quick:
        args.budget, args.runs = 200, 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cmd = "python benchmarks/regal/memory_order_models.py " + " ".join(argv if argv is not None else sys.argv[1:])
    t0 = time.perf_counter()
    result = {"command": cmd.strip(), "budget": args.budget, "runs": args.runs, "machine": machine(), "rows": []}
    earlier = out / "memory_order_models.json"
    if args.names and earlier.exists():  # a rerun of some models keeps the others' rows, in MODELS' order
        old = json.loads(earlier.read_text())
        result.update(command=f"{old['command']}; then {result['command']}", rows=old["rows"],
                      load_average=old.get("load_average", []))
        t0 -= old.get("wall_s", 0.0)  # the wall time of every run that made the table
    from release.stderr_capture import capture_stderr

    for family, name, spec in rows:
        print(f"{name} ...", flush=True)
        try:  # TVM logs a 'Scope Saving' line per function when a library is exported: kept in a file
            with capture_stderr(out / f"{name}.stderr.log"):
                row = one(family, name, spec, args.budget, args.runs, out)
        except Exception as e:  # noqa: BLE001 - one model that fails is reported as failed, never dropped
            row = {"family": family, "model": name, "spec": spec, "error": f"{type(e).__name__}: {e}"[:300]}
        result["rows"] = [r for r in result["rows"] if r["model"] != name] + [row]
        result["rows"].sort(key=lambda r: [m[1] for m in MODELS + QUICK].index(r["model"]))
        result["wall_s"] = time.perf_counter() - t0
        result["load_average"] = result.get("load_average", []) + [round(os.getloadavg()[0], 2)]
        (out / "memory_order_models.json").write_text(json.dumps(result, indent=1))  # after every model
        (out / "memory_order_models.md").write_text(markdown(result))
    print(markdown(result))
    print(f"wrote {out / 'memory_order_models.md'} and .json")
    return 0 if all("error" not in r and r["outputs_identical"] is not False for r in result["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
