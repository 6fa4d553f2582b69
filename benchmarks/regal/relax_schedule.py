"""Apply REGAL's single-device peak-memory schedule to real Relax modules and check them with TVM.

For each model, imported after TVM's fusion passes (one node per fused kernel, what TVM runs): BRKGA with the
shipped peak-memory policy's per-node parameters (``--method regal``) and plain BRKGA, both at ``--budget``
evaluations and seed 0; the REGAL order is handed back to TVM (``apply_schedule``: bindings reordered, both
modules compiled for llvm and run on the same random inputs, outputs compared bitwise) and TVM's planned
memory (``estimate_memory_usage`` after StaticPlanBlockMemory) is compared before and after.

Usage: ``.venv/bin/python benchmarks/regal/relax_schedule.py [--budget 1000] [resnet18 transformer randwire inception]``
Writes ``DIR/relax_schedule.md`` (``--out DIR``, default ``runs/regal``, git-ignored; the committed figures: ``--out benchmarks/regal/results``).
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
warnings.filterwarnings("ignore")
HERE = Path(__file__).resolve().parent


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=int, default=1000)
    ap.add_argument("--out", default="runs/regal", help="results folder (committed: benchmarks/regal/results)")
    ap.add_argument("models", nargs="*", default=["resnet18", "transformer", "randwire", "inception"])
    args = ap.parse_args()

    from release.graph.brkga import brkga
    from release.graph.models import build_model
    from release.graph.perf_model import PerformanceModel
    from release.graph.policy import load_policy, policy_action, shipped_checkpoint
    from release.graph.relax_apply import apply_schedule
    from release.graph.relax_import import export_torch, from_relax, fuse_like_tvm

    policy, _ = load_policy(shipped_checkpoint("peak-memory"))
    lines = [f"# REGAL schedule handed to TVM (fused graphs, 1 device, budget {args.budget}, seed 0)", "",
             f"Command: `.venv/bin/python benchmarks/regal/relax_schedule.py --budget {args.budget} "
             f"{' '.join(args.models)}`", "",
             "| model | nodes | model peak given (kB) | model peak plain BRKGA (kB) | model peak REGAL (kB) | "
             "TVM plan given (kB) | TVM plan REGAL order (kB) | outputs identical | seconds |",
             "|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    for name in args.models:
        t0 = time.perf_counter()
        mod = fuse_like_tvm(export_torch(*build_model(name)))
        g = from_relax(mod, name=name)
        params = policy_action(policy, g).brkga_params(policy.cfg, 1)
        m = PerformanceModel(g, 1, "peak-memory")
        reg = brkga(m, args.budget, seed=0, **params)
        plain = brkga(PerformanceModel(g, 1, "peak-memory"), args.budget, seed=0)
        order = m.decode(reg.best_chromosome).order
        rep = apply_schedule(mod, g, order, check=True)
        lines.append(f"| {name} | {g.n} | {rep.model_peak_before / 1e3:.1f} | {plain.best_objective / 1e3:.1f} | "
                     f"{rep.model_peak_after / 1e3:.1f} | {rep.planned_before / 1e3:.1f} | "
                     f"{rep.planned_after / 1e3:.1f} | {rep.outputs_identical} (max diff {rep.max_abs_diff:.1g}) | "
                     f"{time.perf_counter() - t0:.0f} |")
        print(lines[-1], flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "relax_schedule.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
