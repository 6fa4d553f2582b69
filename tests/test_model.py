"""Whole-model tuning: import, task extraction, tuning across tasks, compile, check against PyTorch."""

import json

import numpy as np
import pytest
import torch

from release import relax as M
from release.errors import ModelError, TunerError
from release.measure import apply_history_best, load_records


def test_tune_tiny_pytorch_model_end_to_end(two_layer_model, fast_measure, tmp_path):
    tiny_model = two_layer_model
    import tvm
    from tvm import tirx

    tasks = M.extract_tasks(tiny_model, "llvm")
    names = [t.name for t in tasks]
    assert any("conv2d" in n for n in names) and any("matmul" in n or "dense" in n for n in names)
    assert all(t.weight == 1 and t.flop > 0 for t in tasks)
    log = str(tmp_path / "m.jsonl")
    res = M.tune_model(tasks, 8, log, tuner="random", scheduler="round-robin", measure_option=fast_measure,
                       chunk=4, progress=False)
    recs = load_records(log)
    assert len(recs) == 8
    assert {r.task for r in recs} == {t.key for t in tasks}  # round robin reached every task
    hist = apply_history_best(log)
    db = hist.database(tasks)
    # every tuned function of the prepared module is in the database under the key compile_relax uses,
    # but for those whose default schedule was measured faster here (kept as the untuned build has them)
    assert sorted(t.key for t in hist.matched + hist.defaulted) == sorted(t.key for t in tasks)
    prepared = M.prepare(tiny_model.mod, tiny_model.params, tasks[0].target, prepack=True)  # as extract_tasks on CPU
    tuned = [(f, next(t for t in tasks if gv.name_hint in t.name)) for gv, f in prepared.functions.items()
             if isinstance(f, tirx.PrimFunc) and any(gv.name_hint in t.name for t in tasks)]
    assert tuned and all(db.has_workload(tvm.IRModule({"main": f.with_attr("global_symbol", "main")}))
                         == (t in hist.matched) for f, t in tuned)
    out = M.evaluate(tiny_model, M.compile_model(tiny_model, "llvm", db), number=2, repeat=2)
    # the latency is the median of the timed means, the fastest their minimum: a value that could be wrong
    assert out["max_abs_err"] < 1e-4 and 0 < out["fastest_ms"] <= out["latency_ms"]
    # resume: a larger budget measures only the difference, nothing twice
    M.tune_model(tasks, 12, log, tuner="random", scheduler="gradient", measure_option=fast_measure, chunk=4,
                 progress=False)
    recs = load_records(log)
    assert len(recs) == 12
    assert len({(r.task, tuple(r.config)) for r in recs}) == 12


def test_gradient_scheduler_prefers_the_heavy_task():
    from release.scheduler import GradientBased

    class T:
        def __init__(self, w):
            self.weight = w

    class Tu:  # what the policy reads of a tuner (release.tuners.tuner.Tuner declares each)
        flattened = False

        def __init__(self, trials, cost):
            self.trials, self.best_cost, self.best_config = trials, cost, (0,)

    sched = GradientBased([T(1), T(10)], eps=0.0, seed=0)
    tuners = [Tu(8, 1e-3), Tu(8, 1e-3)]
    sched.warm = 2  # past the warm-up round
    assert sched.next_task(tuners, [0, 1]) == 1  # same latency, 10x the weight
    tuners = [Tu(8, 5e-2), Tu(8, 1e-3)]
    assert sched.next_task(tuners, [0, 1]) == 0  # 50x slower outweighs 10x weight


def test_onnx_model_imports_compiles_and_matches(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 4], list(np.linspace(-1, 1, 32)))
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
                          "g", [x], [y], [w])
    path = str(tmp_path / "ok.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    m = M.load_model(path)
    assert list(m.params) == ["w"]
    out = M.evaluate(m, M.compile_model(m, "llvm"), number=1, repeat=1)
    assert out["max_abs_err"] < 1e-5


def test_evaluate_bounds_the_timing_of_a_slow_executable_by_its_first_call(two_layer_model):
    """A slow model (an untuned VGG-16 here: ~10 s a run) gets fewer runs instead of minutes of
    timing: ``number`` first (down to 1), then ``repeat`` (down to 3); a fast one keeps both."""
    ex = M.compile_model(two_layer_model, "llvm")
    assert {k: v for k, v in M.evaluate(two_layer_model, ex, number=4, repeat=5).items()
            if k in ("number", "repeat")} == {"number": 4, "repeat": 5}  # well under 30 s
    out = M.evaluate(two_layer_model, ex, number=10, repeat=7, max_seconds=1e-9)
    assert (out["number"], out["repeat"]) == (1, 3) and 0 < out["fastest_ms"] <= out["latency_ms"]
    out = M.evaluate(two_layer_model, ex, number=10, repeat=2, max_seconds=1e-9)
    assert (out["number"], out["repeat"]) == (1, 2)  # never more repeats than asked
    out = M.evaluate(two_layer_model, ex, number=3, repeat=2, max_seconds=None)
    assert (out["number"], out["repeat"]) == (3, 2)


class Fft(torch.nn.Module):
    def forward(self, x):
        return torch.fft.rfft(x).abs()


class DataDependent(torch.nn.Module):
    def forward(self, x):
        return x * 2 if x.sum() > 0 else x


def test_bad_models_get_clear_errors(tmp_path):
    with pytest.raises(ModelError, match="does not support.*fft"):
        M.from_pytorch(Fft(), (torch.randn(4, 8),), name="fft")
    with pytest.raises(ModelError, match="does not export with torch.export"):
        M.from_pytorch(DataDependent(), (torch.randn(4, 8),), name="dyn")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"definitely not protobuf")
    with pytest.raises(ModelError, match=f"ONNX file {bad} does not parse"):
        M.load_model(str(bad))
    with pytest.raises(ModelError, match="does not exist"):
        M.load_model(str(tmp_path / "missing.onnx"))
    from release.errors import WorkloadError

    with pytest.raises(WorkloadError, match="unknown model 'resnet19'"):
        M.load_model("resnet19")
    with pytest.raises(TunerError):
        M.tune_model([], 4, str(tmp_path / "x.jsonl"))


def test_cli_tune_model_bad_input_one_line(tmp_path):
    import subprocess
    import sys

    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"nope")
    p = subprocess.run([sys.executable, "-m", "release.cli", "tune-model", "--model", str(bad), "--n-trial", "4",
                        "--log", str(tmp_path / "l.jsonl")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1].startswith(f"release: error: ONNX file {bad} does not parse")
    assert "Traceback" not in p.stderr
    # a log whose exported model (<stem>.so) would shadow an installed module: refused before any work
    for stem in ("ray", "numpy"):
        p = subprocess.run([sys.executable, "-m", "release.cli", "tune-model", "--model", "tiny-cnn", "--n-trial",
                            "4", "--log", str(tmp_path / f"{stem}.jsonl")], capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 2, p.stderr
        last = p.stderr.strip().splitlines()[-1]
        assert f"exported as {stem}.so" in last and f"{stem}-model.jsonl" in last, last
        assert not (tmp_path / f"{stem}.jsonl").exists() and not (tmp_path / f"{stem}.so").exists()


class _TransposeThenLinear(torch.nn.Module):
    """A transpose + add (a purely spatial function: no knob to tune), a reshape, then a linear layer."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(32, 8)

    def forward(self, x):
        y = x.transpose(1, 2) + 1.0  # (2, 16, 32) -> (2, 32, 16)
        return self.fc(y.reshape(2, 16, 32))


def test_knobless_functions_get_metaschedules_schedule_tunable_ones_do_not():
    """Functions extract_tasks drops (no knob) get MetaSchedule's one design-space candidate when a database
    is applied, as tune_relax's database would give them (parallel loops instead of TVM's serial default);
    tunable functions without a record, and pure reshapes, are left alone; the untuned build is unchanged."""
    import tvm
    from tvm import relax, tirx
    from tvm.s_tir import meta_schedule as ms

    from release.target import resolve_target

    torch.manual_seed(0)
    model = M.from_pytorch(_TransposeThenLinear().eval(), (torch.randn(2, 16, 32),), name="tl")
    target = resolve_target("llvm")
    tasks = M.extract_tasks(model, target)
    assert tasks and all("transpose" not in t.name for t in tasks)  # the transpose has no knob: not a task
    mod = relax.transform.BindParams("main", model.params)(model.mod)
    with target, tvm.transform.PassContext(opt_level=3):
        fused = tvm.transform.Sequential(M.layout._fuse_passes(target, True))(mod)
        done = M.schedule_knobless(fused, target)
    funcs = {gv.name_hint: f for gv, f in done.functions_items() if isinstance(f, tirx.PrimFunc)}
    before = {gv.name_hint: f for gv, f in fused.functions_items() if isinstance(f, tirx.PrimFunc)}
    scheduled = {n for n, f in funcs.items() if f.attrs is not None and f.attrs.get("tir.is_scheduled")}
    transposes = {n for n in funcs if "transpose" in n}
    assert transposes and transposes <= scheduled
    for n in transposes:
        assert "T.parallel" in funcs[n].script() and "T.parallel" not in before[n].script()
        assert funcs[n].attrs.get("global_symbol") == (before[n].attrs or {}).get("global_symbol")  # as fused
    assert not any(n in scheduled for n in funcs if any(n in t.name for t in tasks))  # tunable: untouched
    assert not any(relax.analysis.has_reshape_pattern(before[n]) for n in scheduled)
    for db in (None, ms.database.MemoryDatabase()):  # untuned build, and the knob-less ones scheduled
        out = M.evaluate(model, M.compile_model(model, target, db), number=2, repeat=2)
        assert out["max_abs_err"] < 1e-4


def test_importing_a_pytorch_model_shows_no_warning_from_torch_internals():
    """Every torch.export import went through TVM's ``run_decompositions``, whose deepcopy raised torch's
    ``LeafSpec`` FutureWarning on the user's stderr: nothing they could act on. A model with a residual
    add, a flatten and a classifier (several module-call-graph entries) imports with no warning at all."""
    import warnings

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(4, 4, 3, padding=1)
            self.fc = torch.nn.Linear(4 * 5 * 5, 3)

        def forward(self, x):
            return self.fc(torch.flatten(torch.relu(self.conv(x)) + x, 1))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = M.from_pytorch(Block(), (torch.randn(1, 4, 5, 5),), name="block")
    assert [str(w.message) for w in caught] == []
    assert model.params  # the import did its work: the weights came out as parameters


def test_constant_index_gathers_are_exact_and_quiet_and_data_gathers_keep_fast_mode(capfd):
    """TVM's frontends emit every gather as ``take(mode="fast")``: ``x[:, -1]`` read out of bounds (fast mode
    does not wrap negatives: garbage out), and ``topi.take`` logged "Fast mode segfaults when there are
    out-of-bounds indices" on stderr each time one was lowered (ViT's class token printed it into every
    ``tune-model``). Constant indices (first, middle, last, negative, a list) are wrapped and become
    ``clip``: outputs match PyTorch and nothing is printed; a gather by data (an embedding lookup) keeps
    ``fast``."""
    from tvm import relax

    class Heads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(16, 8)

        def forward(self, x):  # class token, a middle row, the last row, rows picked by a list
            return self.fc(x[:, 0]) + self.fc(x[:, 3]) + 2 * self.fc(x[:, -1]) + self.fc(x[:, [1, -2]].sum(1))

    class Lookup(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(10, 8)

        def forward(self, ids, x):
            return self.emb(ids).sum(1) + x[:, -1]

    def take_modes(model):
        modes = []
        for func in model.mod.functions.values():
            if isinstance(func, relax.Function):
                relax.analysis.post_order_visit(func, lambda e: modes.append(str(e.attrs.mode))
                                                if isinstance(e, relax.Call) and getattr(e.op, "name", "") == "relax.take"
                                                else None)
        return modes

    capfd.readouterr()
    heads = M.from_pytorch(Heads(), (torch.randn(1, 5, 16),), name="heads")
    out = M.evaluate(heads, M.compile_model(heads, "llvm"), number=1, repeat=1)
    assert out["max_abs_err"] < 1e-4
    assert "Fast mode segfaults" not in capfd.readouterr().err
    assert len(take_modes(heads)) >= 4 and set(take_modes(heads)) == {"clip"}
    lookup = M.from_pytorch(Lookup(), (torch.tensor([[1, 7, 9]]), torch.randn(1, 4, 8)), name="lookup")
    out = M.evaluate(lookup, M.compile_model(lookup, "llvm"), number=1, repeat=1)
    assert out["max_abs_err"] < 1e-4
    assert "Fast mode segfaults" in capfd.readouterr().err  # the embedding gather: by data, kept fast
    assert sorted(take_modes(lookup)) == ["clip", "fast"]
