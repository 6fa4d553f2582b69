"""The memory TVM plans (StaticPlanBlockMemory), read exactly and predicted per op order.

Real torch.export -> Relax imports, real TVM passes; the model's prediction must equal TVM's plan byte for byte.
"""

import json
import warnings

import numpy as np
import pytest

from release.cli import main
from release.errors import GraphError

warnings.filterwarnings("ignore")


@pytest.fixture(scope="module")
def tiny():
    from release.graph.models import model_module
    from release.graph.relax_import import from_relax

    mod = model_module("tiny")
    return mod, from_relax(mod, name="tiny")


@pytest.fixture(scope="module")
def randwire():
    from release.graph.models import model_module
    from release.graph.relax_import import from_relax

    mod = model_module("randwire")
    return mod, from_relax(mod, name="randwire")


def test_exact_plan_of_tiny_by_hand(tiny):
    """conv a (1x8x8x8 f32 = 2048 B), conv b (2048 B), concat (1x16x8x8 = 4096 B), conv c -> output (1x4x8x8 =
    1024 B). a and b are both live at the concat, the concat's output needs a third storage, the output is not
    planned: 3 storages of 2048 + 2048 + 4096 bytes and 1024 unplanned = 9216 bytes (TVM's text report says
    8.583e-06 GB: GiB, which the old 1e9 reading put 6.9% low)."""
    from release.graph.tvm_plan import TVMPlanModel, planned_memory_exact

    mod, g = tiny
    p = planned_memory_exact(mod)
    assert sorted(p.storage_bytes) == [2048, 2048, 4096] and p.unplanned_bytes == [1024]
    assert p.total == 9216 and p.planned == 8192
    m = TVMPlanModel(mod, g)
    assert m.plan([0, 1, 2, 3]) == [2048, 2048, 4096] and m.unplanned_bytes == 1024
    assert m.plan_bytes([1, 0, 2, 3]) == 9216


def test_plan_model_matches_tvm_on_random_orders_of_a_real_graph(randwire):
    """RandWire (127 fused kernels): the prediction equals TVM's plan of the reordered module on every order."""
    from release.graph.perf_model import PerformanceModel
    from release.graph.relax_import import reorder_bindings
    from release.graph.tvm_plan import TVMPlanModel, planned_memory_exact

    mod, g = randwire
    m = TVMPlanModel(mod, g)
    assert m.given_order_bytes() == planned_memory_exact(mod).total
    pm = PerformanceModel(g, 1, "peak-memory")
    rng = np.random.default_rng(18)
    seen = set()
    for _ in range(6):
        order = pm.decode_order(rng.random(g.n))
        want = planned_memory_exact(reorder_bindings(mod, g, order)).total
        assert m.plan_bytes(order) == want
        seen.add(want)
    assert len(seen) > 1  # the orders differ in what TVM plans, so the equality is not trivial


def test_tvm_plan_is_not_ideal_liveness(randwire):
    """Over random orders the two objectives disagree on which of two orders is better for some pair."""
    from release.graph.perf_model import PerformanceModel
    from release.graph.tvm_plan import TVMPlanModel

    mod, g = randwire
    plan = TVMPlanModel(mod, g)
    ideal = PerformanceModel(g, 1, "peak-memory")
    rng = np.random.default_rng(0)
    pop = rng.random((60, g.n))
    a = ideal.evaluate_population(pop)[0]
    b = PerformanceModel(g, 1, "peak-memory", memory_plan=plan).evaluate_population(pop)[0]
    da, db = np.sign(a[:, None] - a[None, :]), np.sign(b[:, None] - b[None, :])
    assert np.any(da * db < 0)


def test_plan_model_refuses_a_graph_of_another_module(tiny, randwire):
    from release.graph.perf_model import PerformanceModel
    from release.graph.tvm_plan import TVMPlanModel

    with pytest.raises(GraphError, match="runs 4 kernels but the graph has 127 nodes"):
        TVMPlanModel(tiny[0], randwire[1])
    with pytest.raises(GraphError, match="single-device objective"):
        PerformanceModel(tiny[1], 2, "peak-memory", memory_plan=TVMPlanModel(*tiny))


def test_cli_memory_tvm_reports_what_tvm_plans_for_the_best_order(tmp_path, capsys):
    from release.graph.models import model_module
    from release.graph.relax_import import from_relax, reorder_bindings
    from release.graph.tvm_plan import planned_memory_exact

    out = tmp_path / "o.json"
    rc = main(["regal", "optimize", "--graph", "model:inception", "--objective", "peak-memory", "--memory", "tvm",
               "--method", "given,brkga", "--budget", "300", "--out", str(out)])
    assert rc == 0
    d = json.loads(out.read_text())
    mod = model_module("inception")
    g = from_relax(mod)
    assert d["given_order_objective"] == planned_memory_exact(mod).total
    best = d["methods"]["brkga"]
    assert best["objective"] == planned_memory_exact(reorder_bindings(mod, g, best["solution"]["order"])).total
    assert best["objective"] <= d["given_order_objective"]


@pytest.mark.parametrize("args,msg", [
    (["--graph", "synthetic:1"], "needs --graph model:NAME"),
    (["--graph", "model:tiny", "--devices", "2"], "plans one device"),
    (["--graph", "model:tiny", "--method", "exact"], "drop exact or use --memory ideal"),
])
def test_cli_memory_tvm_bad_combinations(args, msg, capsys):
    rc = main(["regal", "optimize", "--objective", "peak-memory", "--memory", "tvm", "--budget", "10", *args])
    err = capsys.readouterr().err
    assert rc == 2 and msg in err and len(err.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def inception():
    from release.graph.models import model_module
    from release.graph.relax_import import from_relax

    mod = model_module("inception")
    return mod, from_relax(mod, name="inception")


def _orders_by_plan(mod, g, k=40):
    from release.graph.perf_model import PerformanceModel
    from release.graph.tvm_plan import TVMPlanModel

    plan = TVMPlanModel(mod, g)
    pm = PerformanceModel(g, 1, "peak-memory")
    rng = np.random.default_rng(1)
    orders = [pm.decode_order(rng.random(g.n)) for _ in range(k)]
    return sorted(orders, key=plan.plan_bytes), plan


@pytest.mark.slow  # two compiles, two library exports and two child processes: ~40 s on a loaded 2-core machine
def test_apply_writes_a_smaller_plan_with_identical_outputs(inception, tmp_path, capsys):
    """CLI apply with an order file that TVM plans smaller: before/after bytes are TVM's, outputs bitwise equal,
    module and library written, the VM's peak measured in a child process."""
    from release.graph.tvm_plan import planned_memory_exact

    mod, g = inception
    orders, plan = _orders_by_plan(mod, g)
    best = orders[0]
    assert plan.plan_bytes(best) < plan.given_order_bytes()
    (tmp_path / "order.json").write_text(json.dumps({"best": {"order": [int(v) for v in best]}}))
    out = tmp_path / "apply"
    rc = main(["regal", "apply", "--graph", "model:inception", "--order", str(tmp_path / "order.json"),
               "--out", str(out)])
    assert rc == 0
    d = json.loads((out / "apply.json").read_text())
    assert d["improved"] and d["outputs_identical"] and d["max_abs_diff"] == 0
    assert d["planned_before"] == planned_memory_exact(mod).total == plan.given_order_bytes()
    assert d["planned_after"] == plan.plan_bytes(best) < d["planned_before"]
    assert d["order"] == [int(v) for v in best]
    assert isinstance(d["vm_peak_before"], int) and d["vm_peak_before"] > 0 and d["vm_peak_after"] > 0
    assert (out / "reordered.so").stat().st_size > 0 and "def main" in (out / "reordered.py").read_text()
    assert "outputs identical: True" in capsys.readouterr().out


def test_apply_never_returns_an_order_tvm_plans_worse(inception, tmp_path):
    from release.graph.relax_apply import apply_order

    mod, g = inception
    orders, plan = _orders_by_plan(mod, g)
    worst = orders[-1]
    assert plan.plan_bytes(worst) > plan.given_order_bytes()
    rep = apply_order(mod, g, worst, tmp_path, measure=False)
    assert not rep.improved and rep.order == list(range(g.n))
    assert rep.planned_after == rep.planned_before == plan.given_order_bytes()
    assert rep.outputs_identical


@pytest.mark.parametrize("content,msg", [
    ("[0, 1]", "is not a permutation of the graph's 12 nodes"),
    ('{"x": 1}', "holds no order"),
    ("nope", "is not valid JSON"),
])
def test_apply_bad_order_file(content, msg, tmp_path, capsys):
    p = tmp_path / "o.json"
    p.write_text(content)
    rc = main(["regal", "apply", "--graph", "model:inception", "--order", str(p), "--out", str(tmp_path / "a")])
    err = capsys.readouterr().err
    assert rc == 2 and msg in err and len(err.strip().splitlines()) == 1
