"""Hand the model's peak-memory-optimal op order back to TVM and compare with TVM's memory plan.

For each model, imported after TVM's fusion passes (one node per fused kernel): the performance model's peak
live bytes of the given order (TVM's binding order) and of the optimal order (frontier DP); then the main
function's bindings are reordered to the optimal order (``reorder_bindings``) and TVM's static memory planner
runs on both modules (ToNonDataflow, RemovePurityChecking, CallTIRRewrite, StaticPlanBlockMemory;
``relax.analysis.estimate_memory_usage``, "with memory planning" total). TVM's figure is the total size of the
planned storage tokens, not the peak of live bytes, so the two need not move together.

Superseded by ``tvm_plan_real.py`` (exact bytes, the plan model, real-size graphs).

Usage: ``.venv/bin/python benchmarks/regal/tvm_memory_plan.py [inception randwire resnet18 transformer]``
"""

import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
warnings.filterwarnings("ignore")


def main(names):

    from release.graph.exact import exact_peak_memory
    from release.graph.models import build_model
    from release.graph.perf_model import PerformanceModel
    from release.graph.relax_import import export_torch, from_relax, fuse_like_tvm, reorder_bindings

    from release.graph.tvm_plan import planned_memory_exact

    def planned(mod) -> float:  # exact bytes (the text report this once parsed prints GiB, not 1e9 bytes)
        return float(planned_memory_exact(mod).total)

    print("| model | nodes | model peak, given order (kB) | model peak, optimal order (kB) | "
          "TVM plan, given order (kB) | TVM plan, optimal order (kB) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in names:
        mod = fuse_like_tvm(export_torch(*build_model(name)))
        g = from_relax(mod, name=name)
        m = PerformanceModel(g, 1, "peak-memory")
        given = m.decode(m.given_order_chromosome()).peak_memory
        ex = exact_peak_memory(g)
        best = m.decode(ex.chromosome)
        new = reorder_bindings(mod, g, best.order)
        print(f"| {name} | {g.n} | {given / 1e3:.1f} | {best.peak_memory / 1e3:.1f} | {planned(mod) / 1e3:.1f} | "
              f"{planned(new) / 1e3:.1f} |")


if __name__ == "__main__":
    main(sys.argv[1:] or ["inception", "randwire", "resnet18", "transformer"])
