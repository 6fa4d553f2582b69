#!/usr/bin/env bash
# Issue 16, item 2: a channel-blocked layout (NCHWc) with pre-packed weights against PyTorch.
# xgb and release+ on resnet18.conv2d.2 and .6, then every run's best kernels re-timed side by side
# with PyTorch's conv2d on the target's num-cores threads (release bench --remeasure). The NCHW
# programs of the same tuners are the ablation tier's runs, re-timed the same way
# (release bench --tier ablation --report-only --remeasure).
# Usage: bash benchmarks/layout/run.sh [N_TRIAL] [SEEDS...]   (default 128 trials, seed 0)
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-128}; shift || true
SEEDS=${*:-0}
R=".venv/bin/release"
common=(--tier quick --workloads resnet18.conv2d.2 resnet18.conv2d.6 --tuners xgb release+ --seeds $SEEDS
        --n-trial "$N" --no-progress --layout NCHWc --prepack --out benchmarks/results/layout/nchwc)
$R bench "${common[@]}"
$R bench "${common[@]}" --report-only --remeasure
