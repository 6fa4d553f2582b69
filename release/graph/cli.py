"""``release regal ...``: REGAL graph optimization from the command line.

``release regal optimize --graph PATH|MODEL.onnx|synthetic:SEED|model:NAME --objective peak-memory|runtime
--devices N --budget EVALS --method brkga,random,...`` runs each method on the same performance model and
budget, prints one line per method (objective, evaluations, evaluations/s, the objective against the given order's
in words: "35.29% lower than given")
and writes the best solution of every method (device per node, op order, times) as JSON.

``release regal export --graph ... --out graph.json`` writes the graph itself as JSON.

``release regal apply --graph MODEL.onnx|model:NAME --out DIR`` reorders the model's Relax module so TVM plans
less memory. An ONNX file goes through ``tune-model``'s importer (:func:`release.relax.from_onnx`); from Python,
:func:`load_model_graph` also takes a :class:`release.relax.Model` (``release.relax.load_model(module, inputs)``
for a PyTorch module).

Heavy imports (TVM, PyTorch) happen only for model graphs.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from ..errors import GraphError
from ..stderr_capture import capture_stderr

logger = logging.getLogger(__name__)


def vs_given(value: float, given: float, what: str = "the given order") -> str:
    """``value`` against the given order's, in words: ``"35.29% lower than the given order"``,
    ``"4.00% higher than ..."`` or ``"equal to ..."`` (for every objective here, runtime and
    memory alike, lower is better; a sign alone was read the wrong way round)."""
    if value == given or not given:
        return f"equal to {what}" if value == given else f"{value:.6g} vs {what}'s 0"
    pct = 100.0 * abs(value - given) / abs(given)
    return f"{pct:.2f}% {'lower' if value < given else 'higher'} than {what}"

METHOD_CHOICES = ("brkga", "tuned-brkga", "regal", "random", "local", "greedy", "given", "exact")


def load_graph(spec, nodes: int = 30, width: int = 4, gflops: float = 50.0, latencies: str | None = None,
               fused: bool = False):
    """Resolve ``PATH`` (graph JSON), ``MODEL.onnx``, ``synthetic:SEED``, ``model:NAME`` or a
    :class:`release.relax.Model` to a ComputationGraph.

    Raises
    ------
    GraphError
        For a missing file, a bad seed or an unknown model name.
    ModelError
        An ONNX file that does not import (:func:`release.relax.from_onnx`).
    """
    from .graph import ComputationGraph

    if not isinstance(spec, str) or spec.endswith(".onnx"):
        return load_model_graph(spec, fused, gflops, latencies)[0]

    if spec.startswith("synthetic:"):
        from .synthetic import SyntheticConfig, random_layered_graph

        s = spec.split(":", 1)[1]
        try:
            seed = int(s)
        except ValueError:
            raise GraphError(f"bad synthetic seed {s!r}; use synthetic:INTEGER, e.g. synthetic:7") from None
        return random_layered_graph(SyntheticConfig(n_nodes=nodes, width=width), seed, name=f"synthetic-{seed}")
    if spec.startswith("model:"):
        return load_model_graph(spec, fused, gflops, latencies)[0]
    return ComputationGraph.load(spec)


def load_model_graph(spec, fused: bool = True, gflops: float = 50.0, latencies: str | None = None):
    """A model -> (ComputationGraph, the Relax module it was imported from).

    Parameters
    ----------
    spec : str or release.relax.Model
        ``model:NAME[@BATCH]`` (:mod:`release.graph.models`), an ONNX file ``PATH.onnx``, or a model
        already imported with ``tune-model``'s importers (:func:`release.relax.load_model`: a PyTorch
        module with example inputs, an ONNX file, a built-in name), weights bound as constants.
    fused : bool
        Import after TVM's fusion passes (:func:`release.graph.relax_import.fuse_like_tvm`: one node per
        kernel the compiled VM runs). Default True.

    Raises
    ------
    GraphError
        For a spec that is none of these, or an unknown model name.
    ModelError
        An ONNX file or PyTorch module that does not import.
    """
    from .relax_import import CostConfig, from_relax

    if not isinstance(spec, str) or spec.endswith(".onnx"):
        from ..relax import Model, from_onnx
        from .relax_import import bound_module, fuse_like_tvm

        model = spec if isinstance(spec, Model) else from_onnx(spec) if isinstance(spec, str) else None
        if model is None:
            raise GraphError(f"cannot import a graph from a {type(spec).__name__}; give a release.relax.Model "
                             "(release.relax.load_model(module, example_inputs)), an .onnx path or model:NAME")
        mod = bound_module(model)
        mod = fuse_like_tvm(mod) if fused else mod
        name = os.path.splitext(model.name)[0]
        g = from_relax(mod, name=name + ("-fused" if fused else ""), cost=CostConfig(gflops=gflops),
                       latencies=latencies)
        return g, mod
    if not spec.startswith("model:"):
        raise GraphError(f"--graph {spec!r} has no Relax module; TVM's memory plan (--memory tvm, apply) needs "
                         "--graph model:NAME or MODEL.onnx")
    from .models import model_module

    name = spec.split(":", 1)[1]
    mod = model_module(name, fused=fused)
    g = from_relax(mod, name=name + ("-fused" if fused else ""), cost=CostConfig(gflops=gflops), latencies=latencies)
    return g, mod


def _positive_int(name: str):
    def parse(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise GraphError(f"{name} must be a positive integer, got {s!r}") from None
        if v <= 0:
            raise GraphError(f"{name} must be a positive integer, got {v}; use {name} 1 or more")
        return v

    return parse


def _methods(s: str) -> list[str]:
    out = [m.strip() for m in s.split(",") if m.strip()]
    if not out:
        raise GraphError(f"--method {s!r} names no method; give one or more of {', '.join(METHOD_CHOICES)} "
                         "(comma-separated) or 'all'")
    if out == ["all"]:
        return list(METHOD_CHOICES)
    for m in out:
        if m not in METHOD_CHOICES:
            raise GraphError(f"unknown method {m!r}; choose from {', '.join(METHOD_CHOICES)} or 'all'")
    return list(dict.fromkeys(out))


def _float_list(name: str, s):
    """``"1e6"`` -> 1e6, ``"1e6,2e6"`` -> [1e6, 2e6]; None stays None; a GraphError names a bad entry."""
    if s is None:
        return None
    parts = [p.strip() for p in str(s).split(",")]
    try:
        vals = [float(p) for p in parts]
    except ValueError:
        raise GraphError(f"{name} must be a number or comma-separated numbers (one per device), got {s!r}") from None
    return vals[0] if len(vals) == 1 else vals


def _number(name: str, s) -> float:
    try:
        return float(s)
    except (TypeError, ValueError):
        raise GraphError(f"{name} must be a number, got {s!r}") from None


def _prepare_methods(methods, args, graph, devices, mkw):
    """Check every option against every method before any method runs; load what they need.

    Returns
    -------
    dict
        ``{"regal": (params, seconds of inference, checkpoint)}`` when regal is among ``methods``.

    Raises
    ------
    GraphError
        For an option a method cannot take (exact with a memory limit or peak memory on several devices, a regal
        policy for another device count, an unreadable checkpoint), or a memory limit below the tightest lower
        bound on peak memory that can be proven cheaply.
    """
    prep = {}
    if "exact" in methods:
        if mkw.get("memory_limit") is not None:
            raise GraphError("--method exact does not support --memory-limit; drop one of them")
        if args.objective == "peak-memory" and devices != 1:
            raise GraphError(f"--method exact for peak memory needs --devices 1 (frontier DP), got --devices "
                             f"{devices}; drop exact or use --devices 1")
    if "regal" in methods:
        from .policy import load_policy, policy_action, policy_share, shipped_checkpoint

        ck = args.checkpoint or shipped_checkpoint(args.objective, getattr(args, "memory", "ideal"))
        policy, meta = load_policy(ck)
        if devices > 1 and policy.cfg.devices != devices:
            use = "--devices 1" if policy.cfg.devices == 1 else f"--devices {policy.cfg.devices} or 1"
            raise GraphError(f"--method regal: policy {str(ck)!r} was trained for {policy.cfg.devices} device(s), "
                             f"not {devices}; use {use}, or train one with `release regal train --devices {devices}`")
        t0 = time.perf_counter()
        budget = _positive_int("--budget")(args.budget)
        params = policy_action(policy, graph, budget=budget).brkga_params(policy.cfg, devices)
        prep["regal"] = (params, time.perf_counter() - t0, str(ck))
        prep["policy_fraction"] = policy_share(policy, meta, budget)
    if mkw["memory_limit"] is not None:
        import numpy as np

        from .exact import exact_peak_memory, peak_memory_lower_bound

        lim = np.broadcast_to(np.asarray(mkw["memory_limit"], dtype=float), (devices,))
        lb, how = peak_memory_lower_bound(graph, devices), "largest operator working set"
        if devices == 1:
            ex = exact_peak_memory(graph, args.exact_states, time_limit=min(5.0, args.exact_time_limit))
            if ex.optimal:
                lb, how = ex.objective, "proven optimum, frontier DP"
        prep["lower_bound"] = (lb, how)
        if lb > lim.max():
            raise GraphError(f"--memory-limit {lim.max():.0f} bytes is infeasible: every schedule peaks at >= "
                             f"{lb:.0f} bytes ({how}); raise the limit to at least {lb:.0f}")
    return prep


def _optimize(args) -> int:
    from .baselines import SEARCH_METHODS, TuningGrid, run_method, seed_chromosomes, tune_brkga
    from .exact import exact_makespan, exact_peak_memory
    from .perf_model import PerformanceModel

    budget = _positive_int("--budget")(args.budget)
    devices = _positive_int("--devices")(args.devices)
    methods = _methods(args.method)
    mkw = dict(latency_us=_number("--latency-us", args.latency_us), bandwidth=_number("--bandwidth", args.bandwidth),
               memory_limit=_float_list("--memory-limit", args.memory_limit))
    if args.memory == "tvm":
        if args.objective != "peak-memory":
            raise GraphError("--memory tvm applies to --objective peak-memory; add --objective peak-memory")
        if devices != 1:
            raise GraphError(f"--memory tvm plans one device, got --devices {devices}; use --devices 1")
        if "exact" in methods:
            raise GraphError("--method exact minimizes ideal liveness (frontier DP), not TVM's plan; drop exact "
                             "or use --memory ideal")
        from .tvm_plan import TVMPlanModel

        graph, mod = load_model_graph(args.graph, True, args.gflops, args.latencies)
        mkw["memory_plan"] = TVMPlanModel(mod, graph)
    else:
        graph = load_graph(args.graph, args.nodes, args.width, args.gflops, args.latencies, args.fused)
    given = PerformanceModel(graph, devices, args.objective, **mkw)  # validates the set-up before any work
    prep = _prepare_methods(methods, args, graph, devices, mkw)
    unit = "us" if args.objective == "runtime" else "bytes"
    print(f"graph {graph.summary()}")
    print(f"objective {args.objective} ({unit}), {devices} device(s), budget {budget} evaluations, seed {args.seed}")
    given_obj = given.decode(given.given_order_chromosome()).objective(args.objective)
    seeds = seed_chromosomes(given)  # every search starts from the given order and the greedy solution
    results = {}
    for name in methods:
        model = PerformanceModel(graph, devices, args.objective, **mkw)
        t0 = time.perf_counter()
        extra_evals = 0
        if name == "exact":
            if args.objective == "peak-memory":
                # frontier DP (half the time limit), then the CP-SAT order model hinted with the greedy order
                ex = exact_peak_memory(graph, args.exact_states, time_limit=args.exact_time_limit / 2)
                if not ex.optimal:
                    from .exact import exact_peak_memory_cpsat

                    done = [r for r in results.values() if r.get("objective") is not None and r["violation"] <= 0]
                    best_so_far = min(done, key=lambda r: r["objective"])["solution"]["order"] if done else None
                    hint = (best_so_far if best_so_far is not None
                            else PerformanceModel(graph, 1, "peak-memory").decode(seeds[1]).order)
                    dp_status = ex.status
                    ex = exact_peak_memory_cpsat(graph, args.exact_time_limit / 2, hint_order=hint, seed=args.seed)
                    ex.status = f"DP {dp_status}; CP-SAT {ex.status}, bound {ex.bound:.0f}"
            else:
                ex = exact_makespan(graph, devices, mkw["latency_us"], mkw["bandwidth"], args.exact_time_limit,
                                    seed=args.seed)
            if ex.chromosome is None:
                bound = f"; lower bound {ex.bound:.1f} {unit}" if ex.bound is not None else ""
                print(f"{'exact':12s} gave up ({ex.status}{bound})")
                results[name] = {"objective": None, "status": ex.status, "bound": ex.bound}
                continue
            chrom, obj, vio, evals, status = ex.chromosome, ex.objective, 0.0, 0, ex.status
        elif name == "regal":
            import scipy.special  # noqa: F401  (Beta inverse CDF; imported before the search clock starts)

            from .brkga import brkga

            params, t_inf, ck = prep["regal"]
            logger.info("regal policy %s: inference %.3f s", ck, t_inf)
            t0 = time.perf_counter()  # search time only; loading and inference are reported separately
            r = brkga(model, budget, seed=args.seed, initial=seeds, policy_fraction=prep["policy_fraction"], **params)
            chrom, obj, vio, evals, status = (r.best_chromosome, r.best_objective, r.best_violation,
                                              r.evaluations, f"policy inference {1e3 * t_inf:.0f} ms")
        else:
            kw = {}
            status = ""
            if name == "tuned-brkga":
                from .synthetic import SyntheticConfig, make_splits

                train = make_splits(args.tune_graphs, 0, 0, SyntheticConfig(n_nodes=graph.n, width=args.width),
                                    seed=args.seed + 1).train
                grid = TuningGrid(population=(50, 100), elite_fraction=(0.1, 0.25), mutant_fraction=(0.1, 0.3),
                                  rho=(0.6, 0.8))
                tkw = {k: v for k, v in mkw.items() if k != "memory_plan"}
                tr = tune_brkga(train, args.objective, devices, budget, grid, args.seed, tkw)
                kw["config"] = tr.best
                extra_evals = tr.evaluations
                status = f"+{extra_evals} tuning evals on {len(train)} training graphs"
                logger.info("tuned BRKGA config: %s", kw["config"])
            if name in SEARCH_METHODS:
                kw["initial"] = seeds
            r = run_method(name, model, budget, args.seed, **kw)
            chrom, obj, vio, evals, status = (r.best_chromosome, r.best_objective, r.best_violation,
                                              r.evaluations, status)
            assert model.evaluations <= budget
        secs = time.perf_counter() - t0
        sol = PerformanceModel(graph, devices, args.objective, **mkw).decode(chrom)
        rate = evals / secs if secs > 0 and evals else 0.0
        impr = 100.0 * (given_obj - obj) / given_obj if given_obj > 0 else 0.0
        extra = f" [{status}]" if status else ""
        rate_s = f"{rate:9.0f}" if evals > 1 else f"{'-':>9s}"
        vs = vs_given(obj, given_obj, "given") if vio <= 0 else f"INFEASIBLE (+{vio:.0f} bytes over limit)"
        total = evals + extra_evals
        print(f"{name:12s} {obj:14.1f} {unit}  {vs:<27s}  {total:6d} evals  "
              f"{rate_s} evals/s  {secs:6.2f} s{extra}")
        results[name] = {"objective": obj, "violation": vio, "evaluations": evals,
                         "tuning_evaluations": extra_evals, "total_evaluations": total, "seconds": secs,
                         "improvement_over_given_pct": impr if vio <= 0 else None, "feasible": bool(vio <= 0),
                         "solution": sol.to_dict(graph)}
    found = {k: v for k, v in results.items() if v.get("objective") is not None}
    feasible = [k for k, v in found.items() if v["violation"] <= 0]
    if args.out:
        out = {"graph": graph.name, "objective": args.objective, "unit": unit, "devices": devices,
               "budget": budget, "seed": args.seed, "given_order_objective": given_obj, "methods": results}
        if "lower_bound" in prep:
            out["peak_memory_lower_bound"] = {"bytes": prep["lower_bound"][0], "source": prep["lower_bound"][1]}
        if found:
            best = min(found, key=lambda k: (found[k]["violation"], found[k]["objective"]))
            out["best_method"] = best
            out["best"] = found[best]["solution"]
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=1, default=float))
        print(f"wrote {args.out}")
    if mkw["memory_limit"] is not None and found and not feasible:
        lb, how = prep["lower_bound"]
        import sys

        print(f"error: no method found a schedule within --memory-limit {args.memory_limit} bytes; every schedule "
              f"peaks at >= {lb:.0f} bytes ({how}); raise the limit or the budget", file=sys.stderr)
        return 1
    return 0


def training_graphs(spec: str, nodes: int, width: int, edge_density: float, data_seed: int):
    """``N`` -> the train split of :func:`make_splits` (N graphs; the test split, generated first, is held out);
    otherwise comma-separated graph specs as for ``--graph``."""
    from .synthetic import SyntheticConfig, make_splits

    try:
        count = int(spec)
    except ValueError:
        return [load_graph(s.strip(), nodes, width) for s in spec.split(",") if s.strip()]
    if count <= 0:
        raise GraphError(f"--graphs must be a positive count or a list of graphs, got {count}")
    cfg = SyntheticConfig(n_nodes=nodes, width=width, edge_density=edge_density)
    return make_splits(count, 0, HELD_OUT_TEST, cfg, seed=data_seed).train


#: Test graphs generated (and skipped) before the training split, so the two never share a topology.
HELD_OUT_TEST = 100


def _brkga_config(spec):
    """``population=50,elite_fraction=0.1,...`` -> dict (None for None)."""
    if not spec:
        return None
    out = {}
    for part in spec.split(","):
        k, _, v = part.partition("=")
        try:
            out[k.strip()] = int(v) if k.strip() == "population" else float(v)
        except ValueError:
            raise GraphError(f"bad --brkga-config entry {part!r}; use NAME=NUMBER, e.g. population=50") from None
    return out


def _train(args) -> int:
    import sys

    from .train import TrainConfig, train

    steps = _positive_int("--steps")(args.steps)
    budget = _positive_int("--budget")(args.budget)
    workers = _positive_int("--workers")(args.workers)
    devices = _positive_int("--devices")(args.devices) if args.devices else (2 if args.objective == "runtime" else 1)
    graphs = training_graphs(args.graphs, args.nodes, args.width, args.edge_density, args.data_seed)
    budgets = ([_positive_int("--budgets")(b.strip()) for b in args.budgets.split(",")]
               if args.budgets is not None else None)
    cfg = TrainConfig(objective=args.objective, devices=devices, budget=budget, steps=steps, budgets=budgets,
                      seeded=args.seeded,
                      batch_graphs=args.batch_graphs, samples=args.samples, lr=args.lr, entropy=args.entropy,
                      per_node_logp=args.per_node_logp, brkga=_brkga_config(args.brkga_config), workers=workers, seed=args.seed)
    cfg.validate()
    print(f"training on {len(graphs)} graphs ({graphs[0].n} nodes first), objective {args.objective}, "
          f"{devices} device(s), {'budgets ' + args.budgets if budgets else f'budget {budget}'}, {steps} steps, "
          f"{workers} worker(s)")
    t0 = time.perf_counter()

    def progress(step, total, rec):
        print(f"step {step:4d}/{total}  reward {rec['reward']:+.4f}  best {rec['reward_max']:+.4f}  "
              f"entropy {rec['entropy']:.3f}  {rec['seconds']:.1f} s  ({time.perf_counter() - t0:.0f} s)", flush=True)

    meta = {"command": "release regal " + " ".join(sys.argv[sys.argv.index("train"):]) if "train" in sys.argv
            else "release regal train"}
    _, state = train(graphs, cfg, args.out, resume=not args.no_resume, progress=progress, meta=meta)
    print(f"wrote {args.out} (step {state.step}, {state.seconds:.0f} s of training)")
    return 0


def _read_order(path: str, n: int) -> list[int]:
    """An order from ``optimize --out`` JSON (its ``best`` solution) or a plain JSON list of node indices."""
    p = Path(path)
    if not p.is_file():
        raise GraphError(f"--order file {path!r} does not exist; give the JSON written by `release regal optimize --out`")
    try:
        d = json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise GraphError(f"--order file {path!r} is not valid JSON ({err})") from None
    if isinstance(d, dict):
        d = (d.get("best") or {}).get("order", d.get("order"))
    if not isinstance(d, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in d):
        raise GraphError(f"--order file {path!r} holds no order: give optimize's --out JSON or a list of node indices")
    if sorted(d) != list(range(n)):
        raise GraphError(f"--order in {path!r} is not a permutation of the graph's {n} nodes; was it written for "
                         "this graph (same model, batch and --fused)?")
    return d


def _apply(args) -> int:
    from .baselines import SEARCH_METHODS, run_method, seed_chromosomes
    from .perf_model import PerformanceModel
    from .relax_apply import apply_order
    from .tvm_plan import TVMPlanModel

    budget = _positive_int("--budget")(args.budget)
    runs = _positive_int("--measure-runs")(args.measure_runs)
    methods = _methods(args.method)
    bad = [m for m in methods if m not in SEARCH_METHODS + ("regal", "greedy", "given")]
    if bad:
        raise GraphError(f"--method {bad[0]} cannot search TVM's plan; use {', '.join(SEARCH_METHODS)}, regal, "
                         "greedy or given")
    spec = args.graph
    if spec.endswith(".onnx"):  # imported before --out is made: a file that does not import writes nothing
        from ..relax import from_onnx

        spec = from_onnx(spec)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    # TVM's runtime logs a 'Scope Saving' warning per function to stderr when a library is exported
    # (about a hundred lines): kept in a file, counted in one line
    with capture_stderr(out_dir / "stderr.log") as captured:
        graph, mod = load_model_graph(spec, True)
        plan = TVMPlanModel(mod, graph)
        prep = {}
        if "regal" in methods and not args.order:  # the policy trained on TVM's plan (or --checkpoint)
            args.objective, args.memory = "peak-memory", "tvm"
            prep = _prepare_methods(["regal"], args, graph, 1, {"memory_limit": None})
        print(f"graph {graph.summary()}")
        if args.order:
            order, how = _read_order(args.order, graph.n), f"order from {args.order}"
        else:
            model = PerformanceModel(graph, 1, "peak-memory", memory_plan=plan)
            seeds = seed_chromosomes(model)
            best = None
            for name in methods:
                m = PerformanceModel(graph, 1, "peak-memory", memory_plan=plan)
                kw = {"initial": seeds} if name in SEARCH_METHODS else {}
                if name == "regal":
                    from .brkga import brkga

                    r = brkga(m, budget, seed=args.seed, initial=seeds, policy_fraction=prep["policy_fraction"],
                              **prep["regal"][0])
                else:
                    r = run_method(name, m, budget, args.seed, **kw)
                print(f"{name:12s} {r.best_objective:14.0f} bytes (model of TVM's plan)  {r.evaluations} evals")
                if best is None or r.best_objective < best[1]:
                    best = (name, r.best_objective, r.best_chromosome)
            order = PerformanceModel(graph, 1, "peak-memory").decode(best[2]).order.tolist()
            how = f"best of {', '.join(methods)} at budget {budget} ({best[0]})"
        rep = apply_order(mod, graph, order, args.out, measure=not args.no_measure, seed=args.seed, runs=runs)
    pct = 100.0 * (rep.planned_before - rep.planned_after) / rep.planned_before if rep.planned_before else 0.0
    print(f"TVM plan, given order   {rep.planned_before:14d} bytes")
    print(f"TVM plan, applied order {rep.planned_after:14d} bytes  ({vs_given(rep.planned_after, rep.planned_before)}; "
          f"{how}{'' if rep.improved else '; TVM plans it no smaller: the given order is kept'})")
    if rep.vm_peaks_before:
        def spread(runs_: list) -> str:
            if len(runs_) == 1:
                return "one run"
            return "every run" if min(runs_) == max(runs_) else f"runs {min(runs_):,}-{max(runs_):,}"

        print(f"VM peak (measured, child process RSS, median of {len(rep.vm_peaks_before)} run"
              f"{'s' if len(rep.vm_peaks_before) != 1 else ''} each): given {rep.vm_peak_before:,} bytes "
              f"({spread(rep.vm_peaks_before)}), applied {rep.vm_peak_after:,} bytes ({spread(rep.vm_peaks_after)}): "
              f"{rep.vm_peak_change()}")
    print(f"TVM output: {captured.summary()}")
    print(f"outputs identical: {rep.outputs_identical} (max |diff| {rep.max_abs_diff:.3g})")
    d = rep.to_dict()
    d.update(graph=graph.name, source=how, reduction_pct=pct, vm_peak_change=rep.vm_peak_change(),
             stderr={"warnings": captured.warnings, "file": str(captured.path)})
    Path(args.out, "apply.json").write_text(json.dumps(d, indent=1))
    print(f"wrote {rep.files['module']}, {rep.files['library']}, {Path(args.out, 'apply.json')}")
    if not rep.outputs_identical:
        import sys

        print("error: the reordered module's outputs differ from the given module's; please report this", file=sys.stderr)
        return 1
    return 0


def _export(args) -> int:
    graph = load_graph(args.graph, args.nodes, args.width, args.gflops, args.latencies, args.fused)
    graph.save(args.out)
    print(f"{graph.summary()}\nwrote {args.out}")
    return 0


def _model_names() -> str:
    """The accepted ``model:NAME`` names, from the registry (:mod:`release.graph.models`)."""
    from .models import FULL_SIZE_NAMES, MODEL_NAMES

    return ", ".join(MODEL_NAMES + FULL_SIZE_NAMES)


def _add_graph_args(p) -> None:
    p.add_argument("--graph", required=True, help="PATH (graph JSON), MODEL.onnx, synthetic:SEED or "
                   f"model:NAME[@BATCH] ({_model_names()})")
    p.add_argument("--nodes", type=int, default=30, help="nodes of a synthetic graph (default 30)")
    p.add_argument("--width", type=int, default=4, help="largest layer of a synthetic graph (default 4)")
    p.add_argument("--gflops", type=float, default=50.0,
                   help="assumed compute rate (GFLOP/s) turning TVM's FLOP estimate into microseconds (default 50)")
    p.add_argument("--fused", action="store_true",
                   help="import model graphs after TVM's fusion passes (one node per fused kernel)")
    p.add_argument("--latencies", default=None,
                   help="measured per-op latencies (JSON {name: us} or JSON-lines tuning log) for model graphs")


def register(subparsers) -> None:
    """Add the ``regal`` command to the top-level CLI's ``subparsers``."""
    p = subparsers.add_parser("regal", help="REGAL graph optimization (op order and device placement)")
    sub = p.add_subparsers(dest="regal_command", metavar="SUBCOMMAND")
    p.set_defaults(func=lambda args: p.print_help() or 2)

    o = sub.add_parser("optimize", help="optimize op order / device placement of a graph with each method")
    _add_graph_args(o)
    o.add_argument("--objective", choices=("peak-memory", "runtime"), default="runtime")
    o.add_argument("--devices", default="1", help="number of identical devices (default 1)")
    o.add_argument("--budget", default="5000", help="objective evaluations per method (default 5000)")
    o.add_argument("--method", default="brkga", help=f"comma-separated: {', '.join(METHOD_CHOICES)}, or all")
    o.add_argument("--seed", type=int, default=0)
    o.add_argument("--memory", choices=("ideal", "tvm"), default="ideal",
                   help="peak memory as ideal per-tensor liveness (default) or as the bytes TVM's StaticPlanBlockMemory "
                        "plans for the order (needs --graph model:NAME; imports it fused)")
    o.add_argument("--memory-limit", default=None,
                   help="per-device memory limit, bytes: one value, or comma-separated, one per device")
    o.add_argument("--latency-us", default=5.0, help="cross-device transfer latency, us (default 5)")
    o.add_argument("--bandwidth", default=1e4,
                   help="cross-device bandwidth, bytes per us (default 1e4 = 10 GB/s)")
    o.add_argument("--exact-time-limit", type=float, default=30.0,
                   help="time limit of the exact methods (CP-SAT, frontier DP), s (default 30)")
    o.add_argument("--exact-states", type=int, default=2_000_000, help="frontier-DP state cap (default 2e6)")
    o.add_argument("--tune-graphs", type=int, default=4, help="synthetic training graphs for tuned-brkga")
    o.add_argument("--checkpoint", default=None,
                   help="policy checkpoint for --method regal (default: the one shipped for --objective and --memory)")
    o.add_argument("--out", default=None, help="write every method's solution as JSON here")
    o.set_defaults(func=_optimize)

    t = sub.add_parser("train", help="train REGAL's policy (GNN + REINFORCE) on synthetic or given graphs")
    t.add_argument("--objective", choices=("peak-memory", "runtime"), default="peak-memory")
    t.add_argument("--devices", default=None, help="devices (default: 1 for peak-memory, 2 for runtime)")
    t.add_argument("--graphs", default="32", help="N synthetic training graphs, or comma-separated graph specs "
                   "(PATH, synthetic:SEED, model:NAME); default 32")
    t.add_argument("--nodes", type=int, default=40, help="nodes per synthetic graph (default 40)")
    t.add_argument("--width", type=int, default=8, help="largest layer of a synthetic graph (default 8)")
    t.add_argument("--edge-density", type=float, default=0.15, help="synthetic extra-edge density (default 0.15)")
    t.add_argument("--data-seed", type=int, default=0, help="seed of the synthetic splits (default 0)")
    t.add_argument("--steps", default="150", help="policy-gradient steps (default 150)")
    t.add_argument("--budget", default="1000", help="BRKGA evaluations per run (default 1000)")
    t.add_argument("--budgets", default=None,
                   help="comma-separated budgets, one drawn per step; the policy is then conditioned on the budget "
                        "(replaces --budget; e.g. 500,2000)")
    t.add_argument("--seeded", action="store_true",
                   help="start every BRKGA run from the given order and the greedy solution, as optimize does")
    t.add_argument("--batch-graphs", type=int, default=4, help="graphs per step (default 4)")
    t.add_argument("--samples", type=int, default=4, help="sampled choice sets per graph and step (default 4)")
    t.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate (default 3e-3)")
    t.add_argument("--entropy", type=float, default=0.01, help="entropy bonus weight (default 0.01)")
    t.add_argument("--per-node-logp", action="store_true",
                   help="divide each sample's log-probability by its node count (keeps the entropy bonus effective)")
    t.add_argument("--brkga-config", default=None,
                   help="BRKGA config for policy and reference runs, e.g. population=50,elite_fraction=0.1 "
                        "(default: plain BRKGA)")
    t.add_argument("--workers", default="1", help="processes running BRKGA (default 1)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--out", required=True, help="checkpoint path (.pt); resumed when it exists")
    t.add_argument("--no-resume", action="store_true", help="start over even when --out exists")
    t.set_defaults(func=_train)

    a = sub.add_parser("apply", help="reorder a model's Relax module so TVM plans less memory; write module and "
                       "library, check outputs, measure the VM's peak")
    a.add_argument("--graph", required=True, help=f"MODEL.onnx or model:NAME[@BATCH] ({_model_names()}); "
                   "imported fused, as tvm.compile runs it")
    a.add_argument("--order", default=None, help="apply this order (JSON from `optimize --out`, or a list); "
                   "default: search TVM's plan with --method")
    a.add_argument("--method", default="brkga,local", help="search methods when no --order (default brkga,local; "
                   "regal uses the policy trained on TVM's plan, or --checkpoint)")
    a.add_argument("--checkpoint", default=None, help="REGAL policy for --method regal (default: the shipped "
                   "regal-peak-memory-tvm.pt)")
    a.add_argument("--budget", default="5000", help="evaluations per method (default 5000)")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--no-measure", action="store_true", help="skip measuring the compiled VM's peak memory")
    a.add_argument("--measure-runs", default="3", help="VM peak measurements of each library, each in a fresh "
                   "process; a change inside their spread is reported as no measurable change (default 3)")
    a.add_argument("--out", required=True, help="folder for reordered.py, reordered.so (weights embedded) and apply.json")
    a.set_defaults(func=_apply)

    e = sub.add_parser("export", help="write a graph (synthetic or imported model) as JSON")
    _add_graph_args(e)
    e.add_argument("--out", required=True)
    e.set_defaults(func=_export)
