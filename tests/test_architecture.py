"""Architecture checks read from the source: ``release/`` imports form no cycle, and the
tuners, optimizers and the strategy discover no capability with ``hasattr``/``getattr``."""

from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.join(os.path.dirname(__file__), os.pardir, "release")


def _modules() -> dict[str, str]:
    """``{dotted module name: file path}`` of every module under ``release/``."""
    out = {}
    for folder, _, files in os.walk(ROOT):
        for f in files:
            if not f.endswith(".py"):
                continue
            rel = os.path.relpath(os.path.join(folder, f), os.path.join(ROOT, os.pardir))
            name = rel[:-3].replace(os.sep, ".")
            if name.endswith(".__init__"):
                name = name[: -len(".__init__")]
            out[name] = os.path.join(folder, f)
    return out


def _lazy_getattr_nodes(tree) -> set:
    """Nodes inside a module-level ``def __getattr__`` (PEP 562: runs only when the attribute is
    asked for, after the module has loaded; how packages re-export lazily)."""
    out = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            out.update(id(n) for n in ast.walk(node))
    return out


def import_graph() -> dict[str, set[str]]:
    """Edges ``module -> imported module`` of ``release/``, from every import statement (module
    level or inside functions: a lazy import is still a dependency; only a package's PEP 562
    ``__getattr__`` re-export is left out), resolved to the most specific module of the package
    (``from .a import b`` names ``a.b`` when ``b`` is a module), plus an edge to every package
    above the imported module (importing ``a.b.c`` runs ``a/b/__init__.py`` first)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.endswith("__init__.py")
        tree = ast.parse(open(path, encoding="utf-8").read(), filename=path)
        lazy = _lazy_getattr_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in lazy:
                continue
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".")
                    base = base if is_pkg else base[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    src = ".".join(base + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in mods else src for a in node.names]
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                while t and t != "release":  # the module, then each package above it
                    if t != mod and not mod.startswith(t + "."):
                        graph[mod].add(t)
                    t = t.rpartition(".")[0]
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of nodes (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_import_graph_is_read_from_source():
    g = import_graph()
    assert "release.session" in g["release.tuners.tuner"]
    assert "release.measure.measure" in g["release.session"]
    assert "release.rl.ppo" in g["release.optimizers.ppo"]  # "from ..rl.ppo import ..."
    assert "release.rl" in g["release.optimizers.ppo"]  # ... which runs release/rl/__init__.py first


def test_optimizers_import_first_in_a_fresh_process():
    """The cycle the graph must see: ``release.optimizers.ppo`` imported before ``release.rl``
    (what ``release tune --tuner release`` does) once failed with a partially initialized module."""
    import subprocess
    import sys

    code = "import release.optimizers.ppo as p, release.rl as r; assert r.RLOptimizer is p.RLOptimizer"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]


def test_release_imports_form_no_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize("folder", ["tuners", "optimizers", "strategy.py", "session.py"])
def test_no_capability_probing(folder):
    """``hasattr``/``getattr`` on a collaborator is how optional capabilities used to be found;
    roles declare them instead (base classes with documented no-op hooks)."""
    path = os.path.join(ROOT, folder)
    files = [path] if path.endswith(".py") else [os.path.join(path, f) for f in os.listdir(path) if f.endswith(".py")]
    found = []
    for f in files:
        tree = ast.parse(open(f, encoding="utf-8").read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr"):
                # looking up a class by name in a module is not capability probing
                first = node.args[0] if node.args else None
                if node.func.id == "getattr" and isinstance(first, ast.Call):
                    continue
                if node.func.id == "getattr" and isinstance(first, ast.Name) and first.id in ("ppo",):
                    continue
                found.append(f"{os.path.basename(f)}:{node.lineno} {node.func.id}")
    assert not found, found


# ---------------------------------------------------------------------- measurement
def test_one_set_of_measurement_defaults():
    """The CLI's flags, the Ray workers' measure_args and the benchmarks share MeasureConfig's defaults."""
    from release.cli import build_parser
    from release.distributed.ray_tune import MEASURE_DEFAULTS, make_measure_option
    from release.measure.config import MeasureConfig

    default = MeasureConfig()
    assert default.min_repeat_ms == 50 and default.number == 4 and default.repeat == 3
    assert MEASURE_DEFAULTS == default.to_dict()
    for argv in (["tune", "--workload", "tiny.matmul.1"], ["tune-model", "--model", "tiny-cnn"]):
        args = build_parser().parse_args(argv)
        assert MeasureConfig.from_args(args) == default, argv
    from release.bench import BenchConfig

    bench = BenchConfig()
    assert (bench.number, bench.repeat, bench.min_repeat_ms) == (default.number, default.repeat, default.min_repeat_ms)
    opt = make_measure_option({}, cpus=1)  # what a Ray worker makes
    try:
        assert (opt["runner"].number, opt["runner"].repeat, opt["runner"].min_repeat_ms) == (4, 3, 50)
        assert opt["builder"].n_parallel == 1
    finally:
        opt["builder"].close()
        opt["runner"].close()


@pytest.mark.parametrize("bad,fragment", [
    (dict(number=0), "number=0"), (dict(min_repeat_ms=-1), "min_repeat_ms=-1"),
    (dict(runner="ssh"), "runner 'ssh'"), (dict(runner="rpc"), "needs --rpc-key"), (dict(bogus=1), "unknown measure_args"),
])
def test_measure_config_is_validated_once_with_one_line(bad, fragment):
    from release.errors import TunerError
    from release.measure.config import MeasureConfig

    with pytest.raises(TunerError, match=fragment) as e:
        MeasureConfig.from_dict(bad)
    assert "\n" not in str(e.value)


def test_runners_declare_batched_and_results_are_typed():
    from release.measure import LocalRunner, RPCRunner
    from release.measure.result import BuildResult, RunResult
    from release.measure.runner import MetaScheduleRunner, RetryingRPCRunner, Runner

    assert not LocalRunner.batched and RPCRunner.batched and RetryingRPCRunner.batched and MetaScheduleRunner.batched
    assert issubclass(LocalRunner, Runner)
    r = RunResult([1e-3], 0.5)
    costs, secs, kind, msg = r  # still unpacks as the tuples of earlier versions
    assert (costs, secs, kind, msg) == ([1e-3], 0.5, "", "") and BuildResult(None, 1.0, "build_error").error_kind


@pytest.mark.slow  # two MetaSchedule worker pools (~13 s); the runner's contract is tested quickly above
def test_metaschedule_builder_and_runner_are_accepted(matmul_task):
    """Any MetaSchedule Builder/Runner (here its LocalBuilder with the fast build function and its
    LocalRunner) measures through measure_option and the Measurer."""
    from tvm.s_tir import meta_schedule as ms

    from release.measure import Measurer, measure_option
    from release.measure.builder import MetaScheduleBuilder
    from release.measure.runner import MetaScheduleRunner
    from release.strategy import fast_builder

    runner = ms.runner.LocalRunner(evaluator_config=ms.runner.EvaluatorConfig(number=1, repeat=1))
    opt = measure_option(fast_builder(matmul_task.target), runner)
    assert isinstance(opt["builder"], MetaScheduleBuilder) and isinstance(opt["runner"], MetaScheduleRunner)
    sp = matmul_task.config_space
    res = Measurer(matmul_task, opt).measure([sp.get(0), sp.get(1)])
    assert [r.ok for r in res] == [True, True]
    assert [r.config for r in res] == [sp.canonical(sp.get(0)), sp.canonical(sp.get(1))]
    # one timed run each (EvaluatorConfig repeat=1), its cost the record's: seconds, not any positive number
    assert all(len(r.costs) == 1 and r.mean_cost == r.costs[0] and 0 < r.costs[0] < r.run_s for r in res), res
    assert all(r.trace is not None for r in res)  # MetaSchedule's records need the schedule's trace


def test_measured_runner_reports_each_batch_as_it_returns_and_passes_its_futures_on(matmul_task):
    """`release.relax.tune.measured_runner` (the MetaSchedule baseline's progress source): a real
    LocalRunner wrapped, measuring through measure_option; the hook sees each batch's inputs and
    the inner runner's futures, and the results are the ones those futures hold."""
    from tvm.s_tir import meta_schedule as ms

    from release.measure import Measurer, measure_option
    from release.relax.tune import measured_runner
    from release.strategy import fast_builder

    seen = []
    runner = measured_runner(ms.runner.LocalRunner(evaluator_config=ms.runner.EvaluatorConfig(number=1, repeat=1)),
                             lambda inputs, futures: seen.append((inputs, [f.result() for f in futures])))
    assert isinstance(runner, ms.runner.Runner)
    sp = matmul_task.config_space
    res = Measurer(matmul_task, measure_option(fast_builder(matmul_task.target), runner)).measure(
        [sp.get(0), sp.get(1), sp.get(2)])
    assert [r.ok for r in res] == [True, True, True]
    assert sum(len(inputs) for inputs, _ in seen) == 3  # every measured candidate reported, once
    assert all(str(i.artifact_path) for inputs, _ in seen for i in inputs)
    costs = sorted(c for _, results in seen for r in results for c in [float(r.run_secs[0])])
    assert costs == sorted(float(r.costs[0]) for r in res)  # the futures handed on are the ones measured
