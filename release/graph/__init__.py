"""REGAL (graph level): computation graphs, performance model, BRKGA, baselines, exact optima, importers.

Modules
-------
graph         :class:`ComputationGraph` (nodes with cost in us and output bytes; data and control edges)
perf_model    :class:`PerformanceModel`: random-key decoder, makespan and peak-memory simulation
brkga         :func:`brkga` with per-gene Beta mutants and per-gene rho (REGAL), :class:`BRKGAConfig`
baselines     random search, local search, greedy heuristics, given order, tuned BRKGA (grid search)
exact         frontier DP (single-device peak memory) and CP-SAT (makespan with placement)
synthetic     seeded layered random DAGs, disjoint train/valid/test splits, room-for-improvement filter
relax_import  Relax IRModule / PyTorch -> ComputationGraph (TVM FLOP estimate or measured latencies)
models        ResNet-18, transformer encoder layer, Inception block, RandWire (``model:NAME``)
policy        REGAL's GNN policy: per-node Beta(alpha, beta) / rho choices for BRKGA (PyTorch)
train         REINFORCE (contextual bandit) training of the policy, BRKGA runs in worker processes
evaluate      policy vs plain / tuned BRKGA, local search and optima on held-out graphs
relax_apply   apply a single-device schedule to a Relax module, check outputs, compare TVM's memory plan
cli           ``release regal optimize|export|train``

Names below are imported lazily so that ``import release.graph`` does not import TVM or PyTorch. A name that is
also a submodule (``brkga``) is the submodule: ``from release.graph import brkga`` returns the module, and
``from release.graph.brkga import brkga`` the function.
"""

_LAZY = {
    "ComputationGraph": "release.graph.graph",
    "PerformanceModel": "release.graph.perf_model",
    "Solution": "release.graph.perf_model",
    "BRKGAConfig": "release.graph.brkga",
    "SearchResult": "release.graph.brkga",
    "run_method": "release.graph.baselines",
    "tune_brkga": "release.graph.baselines",
    "METHODS": "release.graph.baselines",
    "exact_peak_memory": "release.graph.exact",
    "exact_makespan": "release.graph.exact",
    "SyntheticConfig": "release.graph.synthetic",
    "random_layered_graph": "release.graph.synthetic",
    "make_splits": "release.graph.synthetic",
    "from_relax": "release.graph.relax_import",
    "from_torch": "release.graph.relax_import",
    "model_graph": "release.graph.models",
    "RegalPolicy": "release.graph.policy",
    "PolicyConfig": "release.graph.policy",
    "load_policy": "release.graph.policy",
    "policy_action": "release.graph.policy",
    "TrainConfig": "release.graph.train",
    "train": "release.graph.train",
    "EvalConfig": "release.graph.evaluate",
    "evaluate_policy": "release.graph.evaluate",
    "apply_schedule": "release.graph.relax_apply",
    "planned_memory": "release.graph.relax_apply",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'release.graph' has no attribute {name!r}")
