"""Untileable loops padded or not: one ViT-B/16 encoder layer (197 tokens) tuned and compiled both ways.

    .venv/bin/python docs/design/scripts/pad_ab.py --n-trial 300 --out /tmp/pad-ab [--tokens 197] [--rounds 3]
    .venv/bin/python docs/design/scripts/pad_ab.py --only matmul --per-task 200 --out /tmp/pad-ab-kernels

The layer (PyTorch's ``nn.TransformerEncoderLayer``, hidden 768, 12 heads, MLP 3072, GELU, pre-norm, as
``release.zoo``'s ViT) is extracted twice: with ``pad=True`` (the default: :mod:`release.relax.pad` grows the
197-token loops of its dense and attention matmuls to 208) and ``pad=False``. Each is tuned with release+ for
``--n-trial`` trials from a cold start (no knowledge base, ``--seed`` (0), MeasureConfig's defaults), into its own
log under ``--out``; a rerun resumes them. Both builds are then timed alternately, ``--rounds`` times, in
this process (fastest of 7 means of 10 runs, output checked against PyTorch), with ONNX Runtime's time of the
same layer in each round. With ``--only SUBSTRING --per-task N``, only the tasks whose names hold
SUBSTRING are tuned, ``N`` trials each (round-robin), and each one's best GFLOPS (the unpadded FLOPs over its
best time) is printed for both builds; no end-to-end timing.
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-trial", type=int, default=300)
    ap.add_argument("--tokens", type=int, default=197)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default=None)
    ap.add_argument("--per-task", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    import torch

    from release import relax as M
    from release.measure import apply_history_best, load_records
    from release.measure.config import MeasureConfig
    from release.measure.result import provenance
    from release.reference import onnx_exportable, time_torch
    from release.target import host_machine, resolve_target, target_to_json
    from release.threads import thread_count, timing_priority, use_threads

    os.makedirs(args.out, exist_ok=True)
    target = resolve_target("llvm")
    threads = use_threads(thread_count(target))
    budget = (f"release+ {args.per_task} trials per task of '{args.only}'" if args.only
              else f"release+ {args.n_trial} trials per build")
    print(f"machine: {host_machine(target_to_json(target))}; release {' '.join(provenance())}; threads {threads}; "
          f"tokens {args.tokens}; {budget}, seed {args.seed}", flush=True)
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu", batch_first=True,
                                             norm_first=True).eval()
    x = torch.randn(1, args.tokens, 768)
    model = M.from_pytorch(layer, (x,), name=f"vit-layer-{args.tokens}")
    builds = {}
    for pad in (True, False):
        name = "padded" if pad else "as is"
        tasks = M.extract_tasks(model, target, pad=pad)
        log = os.path.join(args.out, f"{'pad' if pad else 'nopad'}.jsonl")
        opt = MeasureConfig().make_option()
        chosen = [t for t in tasks if args.only in t.name] if args.only else tasks
        try:
            if args.only:
                M.tune_model(chosen, args.per_task * len(chosen), log, tuner="release+", scheduler="round-robin",
                             chunk=16, measure_option=opt, seed=args.seed, progress=False, knowledge=None)
            else:
                M.tune_model(tasks, args.n_trial, log, tuner="release+", measure_option=opt, seed=args.seed,
                             progress=False, knowledge=None)
        finally:
            opt["builder"].close()
            opt["runner"].close()
        recs = load_records(log)
        for t in chosen:
            costs = [min(r.costs) for r in recs if r.task == t.key and not r.error_kind]
            if costs:
                print(f"{name:6s} {t.name:50s} {len(costs):4d} trials, best {min(costs) * 1e3:7.3f} ms, "
                      f"{t.flop / min(costs) / 1e9:6.1f} GFLOPS", flush=True)
        if not args.only:
            db = apply_history_best(log).database(tasks)
            builds[name] = M.compile_model(model, target, db, pad=pad)
    if args.only:
        return 0
    import onnxruntime as ort

    path = os.path.join(args.out, "layer.onnx")
    with torch.no_grad():
        torch.onnx.export(onnx_exportable(layer), (x,), path, dynamo=False)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feed = {sess.get_inputs()[0].name: x.numpy()}
    timing_priority()
    for r in range(args.rounds):
        for name, ex in builds.items():
            e = M.evaluate(model, ex, threads=threads, number=10, repeat=7)
            print(f"round {r + 1} {name:6s} {e['fastest_ms']:.3f} ms (max abs error {e['max_abs_err']:.2g})",
                  flush=True)
        o = time_torch(lambda: sess.run(None, feed), threads=threads)
        print(f"round {r + 1} ONNX Runtime {o.seconds * 1e3:.3f} ms{'' if o.reliable else ' (' + o.note + ')'}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
