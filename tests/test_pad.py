"""Matmul-like loops whose extents do not tile, padded to the vector lanes (release.relax.pad)."""

import numpy as np
import pytest
import torch

from release import relax as M
from release.relax.pad import pad_func, padded_extent, tiles


@pytest.mark.parametrize("extent,lanes,want", [
    (197, 16, 208), (197, 8, 200), (127, 16, 128), (67, 16, 80),  # primes at or above 64
    (384, 16, 384), (196, 16, 196), (1000, 16, 1000), (98, 16, 98),  # a divisor in [8, 64]: tiles
    (61, 16, 61), (13, 16, 13), (1, 16, 1),  # small extents: never padded
])
def test_padded_extent(extent, lanes, want):
    assert padded_extent(extent, lanes) == want
    assert padded_extent(want, lanes) == want  # padding is idempotent


def test_tiles():
    assert tiles(208) and tiles(64) and not tiles(197) and not tiles(2 * 197) and not tiles(7)


def _run(func, arrays):
    import tvm

    lib = tvm.compile(tvm.IRModule({"main": func}), target="llvm")
    args = [tvm.runtime.tensor(a) for a in arrays]
    lib["main"](*args)
    return args[-1].numpy()


def test_batch_matmul_padded_on_every_untileable_axis_and_exact():
    """Attention's Q K^T: both spatial axes (67) and, for a sum of products, the reduction axis (71)
    padded; the result is the unpadded one's, bit for bit up to summation order."""
    from tvm import te

    a = te.placeholder((2, 67, 71), name="A")
    b = te.placeholder((2, 71, 67), name="B")
    k = te.reduce_axis((0, 71), name="k")
    c = te.compute((2, 67, 67), lambda n, i, j: te.sum(a[n, i, k] * b[n, k, j], axis=k), name="C")
    func = te.create_prim_func([a, b, c])
    padded = pad_func(func, 16)
    assert padded is not None
    assert padded.script().count("(2, 80, 80)") >= 2  # A and B padded (and the padded C)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 67, 71), "float32"), rng.standard_normal((2, 71, 67), "float32")
    want = np.einsum("nik,nkj->nij", x, y)
    for f in (func, padded):
        got = _run(f, [x, y, np.zeros((2, 67, 67), "float32")])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_reductions_other_than_a_sum_of_products_are_left_alone():
    """A max over a prime axis would read the padding's zeros as values: never padded. Neither is a
    matmul whose extents tile."""
    from tvm import te

    x = te.placeholder((67, 67), name="X")
    k = te.reduce_axis((0, 67), name="k")
    mx = te.compute((67,), lambda i: te.max(x[i, k], axis=k), name="M")
    assert pad_func(te.create_prim_func([x, mx]), 16) is None
    a, b = te.placeholder((64, 96), name="A"), te.placeholder((96, 48), name="B")
    r = te.reduce_axis((0, 96), name="r")
    c = te.compute((64, 48), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    assert pad_func(te.create_prim_func([a, b, c]), 16) is None


class _Tokens(torch.nn.Module):
    """A linear layer and self-attention scores over 67 tokens (a prime, as ViT's 197)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(32, 48)

    def forward(self, x):
        h = self.fc(x)
        return torch.softmax(h @ h.transpose(-2, -1), -1) @ h


@pytest.mark.slow  # tunes and compiles a model (~15 s); padding's rules are tested quickly above
def test_model_tasks_padded_and_the_tuned_model_matches_pytorch():
    from release.measure import LocalBuilder, LocalRunner, apply_history_best, measure_option
    from release.target import resolve_target

    torch.manual_seed(0)
    model = M.from_pytorch(_Tokens().eval(), (torch.randn(1, 67, 32),), name="tokens")
    target = resolve_target("llvm")
    padded = M.extract_tasks(model, target, pad=True)
    plain = M.extract_tasks(model, target)  # the default: no padding
    by_name = {t.name: t for t in plain}
    assert sorted(by_name) == sorted(t.name for t in padded)
    assert sum("matmul" in t.name for t in padded) == 3  # the linear layer and attention's two batch matmuls
    for p in padded:
        q = by_name[p.name]
        # a padded function is a new workload; the softmax (a max and a sum of exps) is left alone
        assert (p.key != q.key) == ("matmul" in p.name) == ("80" in p.mod.script()), p.name
        assert p.flop == q.flop
    opt = measure_option(LocalBuilder(n_parallel=1), LocalRunner(number=1, repeat=1, min_repeat_ms=0))
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "tokens.jsonl")
        try:
            M.tune_model(padded, 2 * len(padded), log, tuner="random", scheduler="round-robin", chunk=2,
                         measure_option=opt, progress=False, knowledge=None,
                         defaults=False)  # no default candidate: whether it beats 2 random trials depends on load
        finally:
            opt["builder"].close()
            opt["runner"].close()
        hist = apply_history_best(log)
        db = hist.database(padded)
        from release.measure import load_records

        assert {r.task for r in load_records(log)} == {t.key for t in padded}  # every padded task measured
        # the padded records apply to the padded functions: each task has its record in the database
        assert sorted(t.key for t in hist.matched) == sorted(t.key for t in padded) and not hist.unmatched
        assert len(list(db.get_all_tuning_records())) == len(padded)
        ex = M.compile_model(model, target, db, pad=True)
        out = M.evaluate(model, ex, number=1, repeat=1, atol=1e-5, rtol=1e-5)
        assert out["max_abs_err"] < 1e-4


def test_padded_task_counts_the_unpadded_flops():
    from tvm import te

    from release.task import Task

    a, b = te.placeholder((67, 32), name="A"), te.placeholder((32, 48), name="B")
    r = te.reduce_axis((0, 32), name="r")
    c = te.compute((67, 48), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    func = te.create_prim_func([a, b, c])
    assert Task(pad_func(func, 16), "llvm").flop == Task(func, "llvm").flop == 2 * 67 * 32 * 48
