"""A model task's best schedule from another machine, timed here, against the same task tuned here cold.

    .venv/bin/python docs/design/scripts/schedule_elsewhere_vs_here.py --model mobilenet_v2 \\
        --log benchmarks/results/model-blocked-depthwise/logs/mobilenet_v2.release+.s0.NCHWc.best.jsonl \\
        --tasks fused_conv2d_NCHWc4_add5_maximum3_minimum31,fused_conv2d_NCHWc13_add16_maximum8_minimum81 \\
        --n-trial 96 --out runs/elsewhere

For each named task: XGBTuner (AutoTVM's, seed 0, ``--n-trial`` trials, no knowledge) tunes it here;
then the log's best record (tuned on the machine it names) and the cold run's best are timed here
with ``release tune``'s runner. Prints one line per task; the logs go under ``--out``.
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="mobilenet_v2")
    ap.add_argument("--log", required=True)
    ap.add_argument("--tasks", required=True, help="comma-separated task names without the model prefix")
    ap.add_argument("--layout", default="NCHWc")
    ap.add_argument("--n-trial", type=int, default=96)
    ap.add_argument("--out", default=os.path.join("runs", "elsewhere"))
    args = ap.parse_args(argv)

    import numpy as np

    from release import relax as M
    from release.measure import LocalBuilder, LocalRunner, load_records, log_to_file, measure_option
    from release.measure.measure import Measurer
    from release.target import machine_of, resolve_target
    from release.threads import thread_count, use_threads
    from release.tuners.xgb import XGBTuner

    target = resolve_target("llvm")
    use_threads(thread_count(target))
    tasks = {t.name.split(".", 1)[1]: t for t in M.extract_tasks(M.load_model(args.model), target, layout=args.layout)}
    records = load_records(args.log)
    os.makedirs(args.out, exist_ok=True)
    for name in args.tasks.split(","):
        t = tasks[name]
        other = min((r for r in records if r.ok and t.owns(r)), key=lambda r: r.mean_cost)
        opt = measure_option(LocalBuilder(), LocalRunner(number=4, repeat=3, min_repeat_ms=50))
        try:
            out = os.path.join(args.out, f"{name}.xgb.jsonl")
            XGBTuner(t, seed=0).tune(args.n_trial, opt, callbacks=[log_to_file(out)])
            best = min((r for r in load_records(out) if r.ok and t.tier(r) == "machine"), key=lambda r: r.mean_cost)
            (ro,) = Measurer(t, opt).measure([t.config_space.canonical(other.config)])
            (rb,) = Measurer(t, opt).measure([t.config_space.canonical(best.config)])
        finally:
            opt["builder"].close()
            opt["runner"].close()
        print(f"{name}: {t.flop / 1e6:.1f} MFLOP; best of the log: {other.mean_cost * 1e3:.3f} ms on "
              f"{machine_of(other.target, other.machine)}, {min(ro.costs) * 1e3:.3f} ms here; tuned here cold "
              f"({args.n_trial} xgb trials): {min(rb.costs) * 1e3:.3f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
