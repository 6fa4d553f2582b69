"""AutoTVM's names beyond the tuner: ``apply_history_best`` as an object and a ``with``
context, ``autotvm.record`` (``load_from_file``, ``decode``, ``encode``, ``pick_best``), builders and runners
with AutoTVM's signatures, ``task.create(func, args)``; what TVM 0.27 cannot do raises ``AliasError``.
Logs are written from replayed configs (real traces, no measurement), kernels really built and run."""

import json

import pytest

from release import autotvm
from release.errors import AliasError, RecordError
from release.measure import MeasureResult, Record


@pytest.fixture(scope="module")
def task():
    return autotvm.task.create("tiny.matmul.1", target="llvm")


def _log(path, task, costs):
    """A log of ``task`` with one record per cost (seconds), configs 0, 1, ... of its space."""
    with open(path, "w") as f:
        for i, cost in enumerate(costs):
            cfg = task.config_space.get(i)
            rec = Record.from_result(task, MeasureResult(config=cfg, costs=[cost],
                                                         trace=task.config_space.apply(cfg).trace))
            f.write(rec.to_json() + "\n")
    return str(path)


def test_apply_history_best_is_a_context_and_an_object(tmp_path, task):
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.tir_integration import compile_tir

    log = _log(tmp_path / "t.jsonl", task, [3e-4, 1e-4, 2e-4])
    best = autotvm.apply_history_best(log)
    assert best.query(task.target, task) == task.config_space.get(1)  # AutoTVM's query(target, workload)
    assert best.query(task.target, task.mod) == task.config_space.get(1)  # the program itself
    assert ms.Database.current() is None
    with autotvm.apply_history_best(log) as ctx:
        assert autotvm.ApplyHistoryBest.current() is ctx
        outer_db = ms.Database.current()
        sch = compile_tir(ms.Database.current(), task.mod, task.target)  # TVM's own call finds the best
        want = task.config_space.apply(task.config_space.get(1)).trace
        assert str(sch.trace) == str(want)
        lib = ctx.build(task)
        with autotvm.apply_history_best(log) as inner:  # nested: the innermost answers, then the outer again
            assert autotvm.ApplyHistoryBest.current() is inner
            assert not ms.Database.current().same_as(outer_db)  # the inner context's own database
        assert autotvm.ApplyHistoryBest.current() is ctx and ms.Database.current().same_as(outer_db)
    assert ms.Database.current() is None and autotvm.ApplyHistoryBest.current() is None
    assert task.check(lib) < 1e-3  # the tuned kernel computes the reference
    other = autotvm.task.create("tiny.conv2d.1", target="llvm")  # not in the log
    assert best.query(other.target, other) is None
    with pytest.raises(RecordError, match="no successful record of tiny.conv2d.1"):
        best.build(other)


def test_record_module_reads_picks_and_writes(tmp_path, task):
    log = _log(tmp_path / "t.jsonl", task, [3e-4, 1e-4])
    pairs = list(autotvm.record.load_from_file(log))
    assert [inp.config for inp, _ in pairs] == [task.config_space.get(0), task.config_space.get(1)]
    inp, res = pairs[1]
    assert inp.task.name == "tiny.matmul.1" and res.costs == [1e-4] and inp.target == task.target_json
    line = autotvm.record.encode(inp, res)
    again_inp, again_res = autotvm.record.decode(line)
    assert again_inp.config == inp.config and again_res.costs == res.costs
    assert autotvm.record.decode("not json") is None
    out = tmp_path / "best.jsonl"
    assert autotvm.record.pick_best(log, out) == 1
    (kept,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert kept["costs"] == [1e-4]
    autotvm_line = json.dumps({"input": ["llvm", "tutorial/matmul", [512, 512, 512, "float32"], {}],
                               "config": {"index": 3, "entity": []}, "result": [[0.1], 0, 1.0, 0], "version": 0.2})
    (tmp_path / "autotvm.log").write_text(autotvm_line + "\n")
    with pytest.raises(RecordError, match="line of an AutoTVM log"):
        list(autotvm.record.load_from_file(tmp_path / "autotvm.log"))
    with pytest.raises(AliasError, match="pickle"):
        autotvm.record.decode(line, protocol="pickle")
    with pytest.raises(RecordError, match="does not exist"):
        autotvm.record.load_from_file(tmp_path / "missing.log")
    with pytest.raises(RecordError, match="does not exist"):
        autotvm.apply_history_best(tmp_path / "missing.log")


def test_builders_and_runners_take_autotvms_arguments():
    runner = autotvm.LocalRunner(5, 4, 2, 100)  # AutoTVM's order: timeout, number, repeat, min_repeat_ms
    assert (runner.timeout, runner.number, runner.repeat, runner.min_repeat_ms) == (5, 4, 2, 100)
    opt = autotvm.measure_option(builder=autotvm.LocalBuilder(timeout=20, n_parallel=1, do_fork=True),
                                 runner=autotvm.LocalRunner(number=2, repeat=1, min_repeat_ms=0, timeout=4))
    assert (opt["builder"].n_parallel, opt["builder"].timeout) == (1, 20)
    run = opt["runner"]
    assert (run.number, run.repeat, run.min_repeat_ms, run.timeout) == (2, 1, 0, 4)
    opt["builder"].close()
    for make, what in [(lambda: autotvm.LocalBuilder(build_func="ndk"), "build_func"),
                       (lambda: autotvm.LocalBuilder(runtime=object()), "runtime"),
                       (lambda: autotvm.LocalRunner(module_loader=object()), "module_loader"),
                       (lambda: autotvm.RPCRunner("k", "127.0.0.1", 9190, module_loader=object()), "module_loader"),
                       (lambda: autotvm.task.create("tiny.matmul.1", target="llvm", target_host="llvm"),
                        "target_host")]:
        with pytest.raises(AliasError, match=what):
            make()


def test_task_create_calls_a_function_with_args():
    from tvm import te

    def matmul(n, dtype):
        a = te.placeholder((n, n), name="A", dtype=dtype)
        b = te.placeholder((n, n), name="B", dtype=dtype)
        k = te.reduce_axis((0, n), name="k")
        return [a, b, te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")]

    t = autotvm.task.create(matmul, args=(16, "float32"), target="llvm")
    assert t.name == "matmul" and t.key.startswith("matmul/") and t.flop == 2 * 16 ** 3
    from release.errors import WorkloadError

    with pytest.raises(WorkloadError, match="args are for a function"):
        autotvm.task.create("tiny.matmul.1", args=(16,), target="llvm")


def test_the_context_serves_a_relax_build(tmp_path):
    """Inside ``with apply_history_best(log)`` the current MetaSchedule database answers TVM's Relax build
    (``MetaScheduleApplyDatabase``): the model's task is found by its program."""
    import torch
    from tvm.s_tir import meta_schedule as ms

    from release import relax as M

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU()).eval()
    model = M.from_pytorch(net, (torch.randn(1, 3, 8, 8),), name="net")
    (task,) = M.extract_tasks(model, "llvm")
    log = _log(tmp_path / "m.jsonl", task, [1e-4])
    with autotvm.apply_history_best(log):
        db = ms.Database.current()
        ex = M.compile_model(model, "llvm", db)
        assert len(db) == 1  # loaded when the build asked for the task's program
    assert M.evaluate(model, ex)["max_abs_err"] < 1e-3
