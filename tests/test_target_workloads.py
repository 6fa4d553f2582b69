"""Targets, workload registry and tasks."""

import json

import numpy as np
import pytest

from release.errors import TargetError, WorkloadError
from release.target import resolve_target, target_to_json
from release.workloads import WORKLOADS, get_workload


def test_llvm_alias_fills_host_cpu_and_cores():
    t = resolve_target("llvm")
    d = json.loads(target_to_json(t))
    assert d["kind"] == "llvm"
    assert d["mcpu"] and d["mcpu"] != "generic"
    assert d["num-cores"] >= 1


def test_cuda_dict_gets_metaschedule_limits():
    t = resolve_target({"kind": "cuda", "arch": "sm_90"})
    assert int(t.attrs["max_threads_per_block"]) == 1024
    assert int(t.attrs["thread_warp_size"]) == 32


@pytest.mark.parametrize("bad", ["", "llvm -mcpu=znver3", "{not json", '{"kind": "nope"}', '{"arch": "sm_90"}', "x/y"])
def test_bad_targets_raise_target_error(bad):
    with pytest.raises(TargetError) as err:
        resolve_target(bad)
    assert str(err.value)  # one readable message


def test_registry_has_the_26_chameleon_conv2d_tasks_and_bert_dense():
    convs = [n for n in WORKLOADS if ".conv2d." in n and not n.startswith("tiny")]
    assert len(convs) == 26
    assert len([n for n in convs if n.startswith("resnet18")]) == 12
    assert len([n for n in WORKLOADS if n.startswith("bert-base.dense.")]) == 3
    w = get_workload("resnet18.conv2d.2")
    assert w.params == dict(n=1, c=64, h=56, w=56, k=64, r=3, s=3, stride=1, pad=1)
    dws = [n for n in WORKLOADS if ".depthwise_conv2d." in n and not n.startswith("tiny")]
    assert len(dws) == 10 and get_workload("mobilenet_v2.depthwise_conv2d.2").params == \
        dict(n=1, c=96, h=112, w=112, k=96, r=3, s=3, stride=2, pad=1)


def test_unknown_workload_suggests_names():
    with pytest.raises(WorkloadError, match="did you mean resnet18.conv2d"):
        get_workload("resnet18.conv2d.13")


def test_task_flops_and_reference(conv_task):
    # 2 * N*K*H*W * C*R*S for the 64->64 56x56 3x3 conv
    assert conv_task.flop == pytest.approx(2 * 64 * 56 * 56 * 64 * 9, rel=0.02)
    import tvm

    lib = tvm.compile(conv_task.mod, target=conv_task.target)
    assert conv_task.check(lib) < 1e-3


def test_task_from_te_and_primfunc_share_a_key():
    from tvm import te

    from release.task import Task

    a = te.placeholder((16, 16), name="A")
    b = te.compute((16, 16), lambda i, j: a[i, j] * 2.0, name="B")
    t1 = Task([a, b], "llvm", name="double")
    t2 = Task(te.create_prim_func([a, b]), "llvm", name="double")
    assert t1.key == t2.key
    assert t1.flop == pytest.approx(256)
    x = t1.random_inputs()[0]
    np.testing.assert_allclose(t1.reference([x]), 2 * x)


def test_public_names_import_from_release_and_autotvm():
    import release
    from release import autotvm

    for name in ("ReleaseTuner", "XGBTuner", "GATuner", "RandomTuner", "GridSearchTuner", "KnobSpace", "Task",
                 "measure_option", "apply_history_best", "ReleaseSearchStrategy"):
        assert getattr(release, name) is not None
    from release.scheduler import TaskScheduler
    from release.session import TuningSession

    assert release.TuningSession is TuningSession and release.TaskScheduler is TaskScheduler
    for name in ("ReleaseTuner", "XGBTuner", "GATuner", "RandomTuner", "GridSearchTuner"):
        assert getattr(autotvm.tuner, name) is getattr(release, name)
    with pytest.raises(AttributeError):
        autotvm.tuner.NoSuchTuner  # noqa: B018
