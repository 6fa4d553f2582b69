#!/usr/bin/env bash
# Issue 16, item 2: a channel-blocked layout (NCHWc) with pre-packed weights against plain NCHW
# (pre-packed too) and PyTorch. xgb and release+ on resnet18.conv2d.2 and .6 in both layouts, tuned
# on this machine with kernels timed on the target's num-cores threads, then every run's best
# kernels re-timed side by side with PyTorch's conv2d on the same threads (release bench --remeasure).
# RELEASE_TIMING_PRIORITY=realtime (release.threads.timing_priority): kernels and PyTorch are timed
# at real-time priority, so other work on a shared machine does not stall TVM's thread pool.
# Usage: bash benchmarks/layout/run.sh [N_TRIAL] [SEEDS...]   (default 128 trials, seed 0)
# Results under $OUT/nchwc and $OUT/nchw (default runs/layout, git-ignored; the committed figures:
# OUT=benchmarks/results/layout).
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-128}; shift || true
SEEDS=${*:-0}
R=".venv/bin/release"
OUT=${OUT:-runs/layout}
export RELEASE_TIMING_PRIORITY=${RELEASE_TIMING_PRIORITY:-realtime}
for layout in NCHWc NCHW; do
  out="$OUT/$(echo "$layout" | tr 'A-Z' 'a-z')"
  common=(--tier quick --workloads resnet18.conv2d.2 resnet18.conv2d.6 --tuners xgb release+ --seeds $SEEDS
          --n-trial "$N" --no-progress --layout "$layout" --prepack --out "$out")
  $R bench "${common[@]}"
done
for layout in NCHWc NCHW; do
  out="$OUT/$(echo "$layout" | tr 'A-Z' 'a-z')"
  $R bench --tier quick --workloads resnet18.conv2d.2 resnet18.conv2d.6 --tuners xgb release+ --seeds $SEEDS \
      --n-trial "$N" --no-progress --layout "$layout" --prepack --out "$out" --report-only --remeasure
done
