"""A tuned model compiled twice from one log: GELU and erf with TVM's exact ``erf`` (libm) and with ``fast_erf``.

    .venv/bin/python docs/design/scripts/fast_gelu_ab.py --model bert-base-layer --log LOG.jsonl [--rounds 3]

Both builds use every other fast form (exp, sigmoid, softmax) and the same records, so they differ in the
GELU/erf functions alone (functions without knobs: scheduled by ``schedule_knobless``, not tuned). Per round,
each build's end-to-end latency (fastest of 7 means of 10 runs, output checked) and, from the Relax VM's
instrument hook, the time of the calls whose name holds "gelu" or "erf" (median of 20 inferences per call).
"""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="bert-base-layer")
    ap.add_argument("--log", required=True)
    ap.add_argument("--layout", default="NCHWc")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)

    from release import relax as M
    from release.measure import apply_history_best
    from release.profile import profile_tvm
    from release.relax import fast_math
    from release.target import resolve_target
    from release.threads import thread_count, timing_priority, use_threads

    target = resolve_target("llvm")
    threads = use_threads(thread_count(target))
    model = M.load_model(args.model)
    full = fast_math.fast_math_legalize

    def build(exact_gelu: bool):
        if exact_gelu:  # TVM's own legalization for these two operators
            fast_math.fast_math_legalize = lambda: {k: v for k, v in full().items()
                                                   if k not in ("relax.nn.gelu", "relax.erf")}
        try:
            tasks = M.extract_tasks(model, target, layout=args.layout)
            db = apply_history_best(args.log).database(tasks)
            return M.compile_model(model, target, db, layout=args.layout)
        finally:
            fast_math.fast_math_legalize = full

    builds = {"fast_erf": build(False), "libm erf": build(True)}
    timing_priority()
    for r in range(args.rounds):
        for name, ex in builds.items():
            e2e = M.evaluate(model, ex, threads=threads, number=10, repeat=7)
            prof = profile_tvm(ex, model.inputs, 20)
            gelu = sum(c["ms"] for c in prof["calls"] if "gelu" in c["symbol"] or "erf" in c["symbol"])
            print(f"round {r + 1} {name:9s} end to end {e2e['fastest_ms']:.3f} ms; GELU/erf calls {gelu:.3f} ms "
                  f"(max abs error {e2e['max_abs_err']:.2g})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
