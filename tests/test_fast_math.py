"""GELU, erf, exp, sigmoid and softmax legalized to TVM's vectorizable fast forms (release.relax.fast_math)."""

import numpy as np
import pytest
import torch

from release import relax as M


class _Transcendentals(torch.nn.Module):
    """Every operator the fast forms cover, after a linear layer (so the model has a tunable task)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(32, 48)

    def forward(self, x):
        h = self.fc(x)
        return (torch.nn.functional.gelu(h), torch.softmax(h, -1), torch.sigmoid(h), torch.exp(h.clamp(max=4)),
                torch.special.erf(h))


def _asm(executable) -> str:
    todo, out = [executable.mod], []
    while todo:  # the VM's module imports the compiled kernels' LLVM module
        m = todo.pop()
        todo.extend(m.imports)
        if m.kind == "llvm":
            out.append(m.inspect_source("asm"))
    return "".join(out)


def test_models_compile_without_libm_calls_and_match_pytorch():
    from tvm.s_tir import meta_schedule as ms

    from release.target import resolve_target

    torch.manual_seed(0)
    x = torch.randn(4, 16, 32) * 3
    model = M.from_pytorch(_Transcendentals().eval(), (x,), name="transcendentals")
    target = resolve_target("llvm")
    names = [t.name for t in M.extract_tasks(model, target)]
    assert any("matmul" in n for n in names)
    for db in (None, ms.database.MemoryDatabase()):  # untuned, and knob-less functions scheduled (vectorized)
        ex = M.compile_model(model, target, db)
        asm = _asm(ex)
        assert asm and "erff" not in asm and "expf" not in asm  # no scalar libm call per element
        out = M.evaluate(model, ex, number=1, repeat=1, atol=1e-5, rtol=1e-5)
        assert 0 < out["max_abs_err"] < 1e-4  # evaluate raised above unless within rtol, atol 1e-5


def test_gelu_error_against_pytorch_on_a_wide_range():
    import tvm
    from tvm import relax
    from tvm.script import relax as R

    from release.relax.fast_math import fast_math_legalize

    @tvm.script.ir_module
    class Mod:
        @R.function
        def main(x: R.Tensor((8192,), "float32")):
            return R.nn.gelu(x)

    xs = np.linspace(-8, 8, 8192).astype("float32")
    ref = torch.nn.functional.gelu(torch.from_numpy(xs)).numpy()
    errs = {}
    for name, custom in (("fast", fast_math_legalize()), ("exact", {})):
        mod = relax.transform.LegalizeOps(customize_legalize_map=custom)(Mod)
        ex = tvm.compile(mod, target="llvm")
        vm = relax.VirtualMachine(ex, tvm.cpu())
        errs[name] = float(np.abs(vm["main"](tvm.runtime.tensor(xs)).numpy() - ref).max())
        assert ("erff" in _asm(ex)) == (name == "exact")
    assert errs["fast"] < 2e-6 and errs["exact"] < 2e-6


@pytest.mark.parametrize("dtype", ["float64"])
def test_other_dtypes_keep_tvms_exact_legalization(dtype):
    import tvm
    from tvm import relax
    from tvm.script import relax as R

    from release.relax.fast_math import fast_math_legalize

    @tvm.script.ir_module
    class Mod:
        @R.function
        def main(x: R.Tensor((64,), "float64")):
            a = R.exp(x)
            b = R.nn.softmax(x)
            return (a, b)

    mod = relax.transform.LegalizeOps(customize_legalize_map=fast_math_legalize())(Mod)
    text = mod.script()
    assert "T.exp(" in text  # TVM's own form, exact in float64
    xs = np.linspace(-5, 5, 64)
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    a, b = vm["main"](tvm.runtime.tensor(xs))
    np.testing.assert_allclose(a.numpy(), np.exp(xs), rtol=1e-12)
    e = np.exp(xs - xs.max())
    np.testing.assert_allclose(b.numpy(), e / e.sum(), rtol=1e-12)
