#!/bin/bash
# warm start across tasks: release+ on conv2d.6 with the agent of conv2d.2's release+ run (same seed), 256 trials
# Logs under $OUT (default runs/warm_start, git-ignored; the committed ones: OUT=benchmarks/results/warm_start).
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/warm_start}
mkdir -p "$OUT"
for s in 0 1 2; do
  .venv/bin/release tune --workload resnet18.conv2d.6 --tuner release+ --n-trial 256 --seed $s \
    --warm-start benchmarks/results/logs/resnet18.conv2d.2.release+.s$s.*.agent.pt \
    --log "$OUT/resnet18.conv2d.6.release+warm.s$s.jsonl" --no-progress --no-check
done
