"""Whole-model weight pre-packing (TVM's cpu_weight_prepack recipe): a tiny PyTorch model tuned,
compiled with the layout rewrite folded into its weights, run and checked against PyTorch."""

from __future__ import annotations

import torch


class _ConvDense(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def test_prepacked_model_tuned_compiled_and_matches_pytorch(tmp_path, fast_measure):
    from release import relax as M
    from release.measure import apply_history_best

    m = M.from_pytorch(_ConvDense(), [torch.randn(1, 8, 8, 8)], name="convdense")
    tasks = M.extract_tasks(m, "llvm")  # CPU target, constant weights: pre-packed by default
    assert tasks and any(t.layout_free for t in tasks)
    log = str(tmp_path / "m.jsonl")
    M.tune_model(tasks, 4 * len(tasks), log, tuner="random", measure_option=fast_measure, progress=False,
                 defaults=False)  # every task keeps its tuned, pre-packed kernel
    db = apply_history_best(log).database(tasks)
    ex = M.compile_model(m, "llvm", db)
    res = M.evaluate(m, ex, number=1, repeat=1)  # raises if the output differs from PyTorch's
    assert res["max_abs_err"] < 1e-3
    # the same log does not apply to a build without pre-packing (other task keys); that build is still right
    plain = M.evaluate(m, M.compile_model(m, "llvm", db, prepack=False), number=1, repeat=1)
    assert plain["max_abs_err"] < 1e-3
    assert not any(t.layout_free for t in M.extract_tasks(m, "llvm", prepack=False))
