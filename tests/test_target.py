"""Targets in every form a user may hand in.

Invalid ``mcpu`` values, ``Target.export()`` dicts, TVM's old string form and ``tvm.target.Target``
objects all go through the same checks as JSON strings.
"""

import json

import pytest

from release.errors import TargetError
from release.target import host_cores, host_cpu, llvm_cpus, resolve_target, target_to_json


def _attrs(target) -> dict:
    return json.loads(target_to_json(target))


@pytest.mark.parametrize("mcpu,close", [("notacpu", []), ("skylake-avx51", ["skylake-avx512"]),
                                        ("znver", ["znver2", "znver3"])])
def test_unknown_mcpu_is_refused_with_close_matches(mcpu, close):
    with pytest.raises(TargetError) as err:
        resolve_target(json.dumps({"kind": "llvm", "mcpu": mcpu}))
    msg = str(err.value)
    assert f"target mcpu {mcpu!r} is not a CPU LLVM knows" in msg
    assert "\n" not in msg
    for name in close:
        assert name in msg.split("close matches:")[1].split(";")[0]
    if not close:
        assert "close matches" not in msg
    assert f"leave mcpu out for this machine's CPU ({host_cpu()})" in msg


def test_mcpu_is_checked_against_the_triple_it_targets():
    t = resolve_target({"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "cortex-a72"})
    assert _attrs(t)["mcpu"] == "cortex-a72"
    assert "mcpu" not in _attrs(resolve_target({"kind": "llvm", "mtriple": "aarch64-linux-gnu"}))  # not the host CPU
    with pytest.raises(TargetError, match="'znver3' is not a CPU LLVM knows for the triple aarch64-linux-gnu"):
        resolve_target({"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "znver3"})
    assert "cortex-a72" in llvm_cpus("aarch64-linux-gnu") and "znver3" not in llvm_cpus("aarch64-linux-gnu")


def test_native_means_the_host_cpu():
    assert _attrs(resolve_target({"kind": "llvm", "mcpu": "native"}))["mcpu"] == host_cpu()


def test_exported_target_dict_is_accepted_and_gets_num_cores():
    """``Target.export()`` writes "tag": "" and "keys" and no num-cores; as a map or as JSON."""
    import tvm

    exported = tvm.target.Target({"kind": "llvm", "mcpu": "znver3"}).export()
    assert "num-cores" not in exported and "keys" in exported
    as_json = json.dumps({k: (list(v) if k == "keys" else v) for k, v in exported.items()})
    for spec in (exported, as_json):
        d = _attrs(resolve_target(spec))
        assert d["num-cores"] == host_cores()
        assert d["mcpu"] == "znver3"
        assert "tag" not in d


@pytest.mark.parametrize("old,equivalent", [
    ("llvm -mcpu=core-avx2", {"kind": "llvm", "mcpu": "core-avx2"}),
    ("llvm -mcpu=skylake-avx512 -num-cores=4 -mattr=+avx2,+fma",
     {"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 4, "mattr": ["+avx2", "+fma"]}),
    ("cuda -arch=sm_80", {"kind": "cuda", "arch": "sm_80"}),
])
def test_old_string_form_is_refused_with_its_json_equivalent(old, equivalent):
    with pytest.raises(TargetError) as err:
        resolve_target(old)
    msg = str(err.value)
    assert "old string form" in msg
    suggested = json.loads(msg.split("give the JSON dict instead: '")[1].rstrip("'"))
    assert suggested == equivalent
    assert resolve_target(suggested).kind.name == equivalent["kind"]  # what we suggest is accepted


def test_target_object_is_validated_like_a_string():
    import tvm

    t = resolve_target(tvm.target.Target({"kind": "llvm"}))
    d = _attrs(t)
    assert d["num-cores"] == host_cores() and d["mcpu"] == host_cpu()
    with pytest.raises(TargetError, match="'notacpu' is not a CPU LLVM knows"):
        resolve_target(tvm.target.Target({"kind": "llvm", "mcpu": "notacpu"}))


def test_task_create_with_a_target_object_builds_its_knob_space():
    """A Target without num-cores used to fail in MetaSchedule with an InternalError."""
    import tvm

    from release import autotvm

    task = autotvm.task.create("tiny.matmul.1", target=tvm.target.Target({"kind": "llvm"}))
    assert int(task.target.attrs["num-cores"]) == host_cores()
    assert task.config_space.size > 1000
