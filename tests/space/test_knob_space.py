"""Knob spaces over MetaSchedule design spaces."""

import re

import numpy as np
import pytest

from release.errors import InvalidConfigError, SpaceError
from release.space import factorizations


def test_factorizations_count_and_order():
    f = factorizations(256, 4, 64)
    assert len(f) == 161  # shared/reference/tvm-0.27.md
    assert all(np.prod(t) == 256 and t[-1] <= 64 for t in f)
    assert list(f) == sorted(f)
    assert factorizations(3, 2, 64) == ((1, 3), (3, 1))


def test_space_of_matmul(matmul_task):
    sp = matmul_task.config_space
    assert len(sp.spaces) == 3
    assert sp.knobs[0].kind == "space"
    kinds = [k.kind for k in sp.knobs]
    assert kinds.count("tile") == 3 and kinds.count("categorical") == 1
    # 3 spaces x 84 x 84 x 7 x 4 (64 = 4-way splits innermost<=64, 2-way reduction, unroll 4)
    assert sp.size == 3 * len(factorizations(64, 4, 64)) ** 2 * len(factorizations(64, 2, 64)) * 4


def test_grid_index_round_trip_and_neighbors(matmul_task):
    sp = matmul_task.config_space
    rng = np.random.default_rng(0)
    for idx in rng.integers(0, sp.size, size=20):
        c = sp.get(int(idx))
        assert sp.index_of(c) == idx
    c = sp.get(0)
    nb = sp.neighbors(c)
    assert all(sum(a != b for a, b in zip(n, c)) == 1 for n in nb)
    assert len(nb) == sum(1 for k in sp.knobs if k.size > 1)  # at index 0 only +1 moves exist


def test_apply_trace_round_trip(matmul_task):
    sp = matmul_task.config_space
    rng = np.random.default_rng(1)
    for c in sp.sample(10, rng):
        sch = sp.apply(c)
        assert sp.from_trace(sch.trace) == sp.canonical(c)


def test_bad_config_shape_is_invalid(matmul_task):
    sp = matmul_task.config_space
    with pytest.raises(InvalidConfigError, match="entries"):
        sp.apply((0, 1))
    with pytest.raises(InvalidConfigError, match="outside"):
        sp.apply(tuple(int(d) for d in sp.dims))


def test_illegal_compute_location_is_reported_not_snapped(conv_task):
    sp = conv_task.config_space
    rng = np.random.default_rng(0)
    configs = sp.sample(40, rng)
    reasons = [sp.is_valid(c)[1] for c in configs]
    invalid = [(c, r) for c, r in zip(configs, reasons) if r]
    assert all("compute location" in r or "postprocessor" in r for _, r in invalid)
    assert 0 < len(invalid) < 40, "a sample of 40 has both legal and illegal compute locations"
    # the reason names the location asked for and the one TVM would move it to: never the same
    moved = [re.search(r"compute location \[(-?\d+)\] .*TVM would use \[(-?\d+)\]", r) for _, r in invalid]
    assert all(m is None or m.group(1) != m.group(2) for m in moved)
    # replaying an illegal config raises with that reason instead of building a snapped program
    c, reason = invalid[0]
    with pytest.raises(InvalidConfigError) as err:
        sp.apply(c)
    assert err.value.reason == reason


@pytest.mark.slow
def test_every_registered_workload_has_a_knob_space_on_llvm():
    _knob_spaces(every=True)


def test_one_workload_per_operator_has_a_knob_space_on_llvm():
    """The default suite's version: the first registered workload of each operator
    (``<model>.<operator>.<n>``); all of them in the slow test above."""
    _knob_spaces(every=False)


def _knob_spaces(every: bool):
    from release.task import create_task
    from release.workloads import list_workloads

    seen = set()
    for w in list_workloads():
        op = w.name.split(".")[1] if w.name.count(".") >= 2 else w.name
        if not every and op in seen:
            continue
        seen.add(op)
        sp = create_task(w.name, "llvm").config_space
        assert sp.n_knobs >= 3, w.name
        assert sp.size > 1000, w.name


def test_space_without_knobs_is_a_clear_error():
    from tvm import te

    from release.task import Task

    a = te.placeholder((1,), name="A")
    b = te.compute((1,), lambda i: a[i] + 1.0, name="B")
    with pytest.raises(SpaceError, match="no knob"):
        Task([a, b], "llvm", name="scalar").config_space  # noqa: B018
