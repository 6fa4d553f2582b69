"""Process-wide state is explicit: the tensor-intrinsics shortcut is set at the
entry points only, no test module changes torch's thread count at import, and REGAL's policy and
training keep no module globals."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RELEASE = os.path.join(REPO, "release")

#: every function of release/ that calls ensure_tensor_intrinsics (its docstring lists them)
ENTRY_POINTS = {
    "release.task.Task.__init__",
    "release.measure._worker.init_worker",
    "release.relax.extract.prepare",
    "release.relax.compile._compile_model",  # compile_model's body, run inside the capture of TVM's output
    "release.relax.tune.tune_with_metaschedule",
    "release.strategy.fast_builder",
}


def _py_files(root):
    for folder, _, files in os.walk(root):
        for f in sorted(files):
            if f.endswith(".py"):
                yield os.path.join(folder, f)


def _module_name(path):
    rel = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".")
    return rel[: -len(".__init__")] if rel.endswith(".__init__") else rel


def _callers(name: str) -> set[str]:
    """Dotted names of the functions in release/ whose body calls ``name(...)``."""
    out = set()
    for path in _py_files(RELEASE):
        tree = ast.parse(open(path, encoding="utf-8").read())
        mod = _module_name(path)

        def visit(node, prefix):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    visit(child, prefix + [child.name])
                    continue
                if isinstance(child, ast.Call):
                    f = child.func
                    called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                    if called == name:
                        out.add(".".join([mod] + prefix))
                visit(child, prefix)

        visit(tree, [])
    return out


def test_tensor_intrinsics_are_set_at_the_documented_entry_points_only():
    from release.target import ensure_tensor_intrinsics

    callers = _callers("ensure_tensor_intrinsics")
    assert callers == ENTRY_POINTS, f"new: {sorted(callers - ENTRY_POINTS)}, gone: {sorted(ENTRY_POINTS - callers)}"
    doc = " ".join(ensure_tensor_intrinsics.__doc__.split())
    for entry in ENTRY_POINTS:
        short = entry.rsplit(".", 2)[-2] if entry.endswith("__init__") else entry.rsplit(".", 1)[-1]
        assert short in doc, f"{entry} is not named in ensure_tensor_intrinsics' docstring"


_CHECK = """
import sys
{setup}
import tvm
from tvm.s_tir import TensorIntrin
pkg = sys.modules["tvm.s_tir.tensor_intrin"]
print(sorted(m for m in sys.modules if m.startswith("tvm.s_tir.tensor_intrin.")))
TensorIntrin.get("dot_16x4_avx512")  # registered by the x86 submodule (raises if not)
import tvm.s_tir.tensor_intrin  # what MetaSchedule's TuneContext and default builder do: a no-op now
assert "tvm.s_tir.tensor_intrin.cuda" not in sys.modules
print("ok")
"""


@pytest.mark.parametrize("setup", [
    # task creation
    "from release import create_task; create_task('tiny.matmul.1', {'kind': 'llvm', 'mcpu': 'znver3'})",
    # a build worker's initializer (before any task exists in that process)
    "from release.measure import _worker; _worker.init_worker('{\"kind\": \"llvm\", \"mcpu\": \"znver3\"}')",
], ids=["task-creation", "build-worker"])
def test_each_entry_point_registers_only_the_targets_intrinsics(setup):
    code = _CHECK.format(setup=setup)
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.split("\n")
    assert lines[0] == "['tvm.s_tir.tensor_intrin.x86']" and lines[1] == "ok", out.stdout


def _module_level_calls(path: str, name: str) -> list[int]:
    """Line numbers of calls to ``name`` that run at import (outside every def and class body's defs)."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    lines = []

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Call):
                f = child.func
                if (f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)) == name:
                    lines.append(child.lineno)
            visit(child)

    visit(tree)
    return lines


def test_no_test_module_sets_torch_threads_at_import():
    """One module's ``torch.set_num_threads(1)`` at import changed every later test's thread count;
    tests use the ``one_torch_thread`` fixture (tests/conftest.py), set per test and restored."""
    found = {}
    for path in list(_py_files(HERE)) + list(_py_files(RELEASE)):
        for name in ("set_num_threads", "set_num_interop_threads"):
            lines = _module_level_calls(path, name)
            if lines:
                found[os.path.relpath(path, REPO)] = lines
    assert not found, f"set at import: {found}"


@pytest.mark.parametrize("module", ["release/graph/train.py", "release/graph/policy.py"])
def test_regal_modules_keep_no_module_globals(module):
    """Module-level names are constants (UPPER_CASE), the logger, classes and functions; nothing is
    rebound with ``global``."""
    tree = ast.parse(open(os.path.join(REPO, module), encoding="utf-8").read())
    assert not [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Global)]
    bad = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        for t in targets:
            name = t.id if isinstance(t, ast.Name) else ast.dump(t)
            if not (name.isupper() or name in ("logger", "__all__")):
                bad.append((name, node.lineno))
    assert not bad, bad


def test_regal_policy_is_a_class():
    import torch

    from release.graph.policy import PolicyConfig, RegalPolicy

    assert isinstance(RegalPolicy, type) and issubclass(RegalPolicy, torch.nn.Module)
    torch.manual_seed(0)
    a = RegalPolicy(PolicyConfig(devices=2, hidden=8, layers=1))
    torch.manual_seed(0)
    b = RegalPolicy(PolicyConfig(devices=2, hidden=8, layers=1))
    assert type(a) is type(b) is RegalPolicy
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert RegalPolicy().cfg == PolicyConfig()  # the default config, as the function gave


def test_inline_brkga_runners_do_not_share_state():
    """Two inline runners on different graphs, used in turn, give what each gives alone (they
    once shared module globals, so the later one's graphs replaced the earlier one's)."""
    from release.graph.synthetic import SyntheticConfig, random_layered_graph
    from release.graph.train import BRKGARunner

    g1, g2 = (random_layered_graph(SyntheticConfig(n_nodes=12, width=3), s) for s in (1, 2))
    alone = BRKGARunner([g1], "runtime", 2).run([(0, 80, 3, None)])
    first = BRKGARunner([g1], "runtime", 2)
    second = BRKGARunner([g2], "peak-memory", 1)
    other = second.run([(0, 80, 3, None)])
    assert first.run([(0, 80, 3, None)]) == alone
    assert other != alone
