"""Compare the performance model's peak memory of a real graph with what TVM's memory planner allocates.

For each model: peak live bytes of the given order (TVM's binding order) and the optimal order (frontier DP)
under release.graph's performance model (unfused ops), and ``relax.analysis.estimate_memory_usage`` after the
usual preparation (LegalizeOps, AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR, ToNonDataflow,
RemovePurityChecking, CallTIRRewrite, StaticPlanBlockMemory) as in shared/reference/tvm-0.27.md. The two are
not the same quantity: TVM's figure is the total of planned storage after operator fusion.

Usage: ``.venv/bin/python benchmarks/regal/tvm_memory_plan.py [inception ...]``
"""

import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
warnings.filterwarnings("ignore")


def main(names):
    import tvm
    from tvm import relax

    from release.graph.exact import exact_peak_memory
    from release.graph.models import build_model
    from release.graph.perf_model import PerformanceModel
    from release.graph.relax_import import export_torch, from_relax

    prep = tvm.transform.Sequential([
        relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(), relax.transform.FoldConstant(),
        relax.transform.FuseOps(), relax.transform.FuseTIR(), relax.transform.ToNonDataflow(),
        relax.transform.RemovePurityChecking(), relax.transform.CallTIRRewrite(),
        relax.transform.StaticPlanBlockMemory(),
    ])
    for name in names:
        mod = export_torch(*build_model(name))
        g = from_relax(mod, name=name)
        m = PerformanceModel(g, 1, "peak-memory")
        given = m.decode(m.given_order_chromosome()).peak_memory
        best = exact_peak_memory(g).objective
        print(f"{name}: model peak, given order {given / 1e6:.3f} MB, optimal order {best / 1e6:.3f} MB")
        print(relax.analysis.estimate_memory_usage(prep(mod)).strip())


if __name__ == "__main__":
    main(sys.argv[1:] or ["inception"])
