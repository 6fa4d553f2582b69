#!/usr/bin/env bash
# CUDA for real: install, test, tune and re-time on a lent GPU machine, in one call.
#
# Designed for the device machine (one H200, 16 cores, Python 3.12 with a CUDA PyTorch, nvcc, no
# network), run in a copy of the repository root; what lands under $OUT comes back (at most 8
# files, so the logs come back as one tarball). The machine cannot reach PyPI, and TVM's wheel
# (100 MB) is larger than what one call may carry (64 MiB with the working tree), so the wheels
# travel in parts .cuda-stage/p1..pN prepared here by benchmarks/cuda/stage.sh (N = 2 with a
# working tree under ~11 MiB), one part per call:
#
#   calls 1..N-1  carry [".cuda-stage/pK"]  bash benchmarks/cuda/run_device.sh stage   (seconds)
#   call N        carry [".cuda-stage/pN"]  bash benchmarks/cuda/run_device.sh         (~9 min)
#
# Each call must reach the machine while it is still warm from the previous one (30 s); if a
# part is gone, the last call stops at once and says so. Steps, each under its own timeout inside a total budget (BUDGET_S),
# each printing progress so a cut-short call still returns partial results:
#   1. join the wheels, check their sha256, install them into $SITE (pip --target: the image's
#      python3 is itself a venv, and a venv made from it would not see its CUDA PyTorch); the
#      project runs from the checkout (PYTHONPATH)
#   2. env.json: nvidia-smi, driver, nvcc, TVM/PyTorch versions, whether TVM sees the GPU
#   3. tune WORKLOADS with TUNERS at TRIALS each through the local runner (tune.json, logs.tar.gz)
#   4. re-time every run's best kernel beside PyTorch's cuDNN/cuBLAS op, check outputs (retime.json)
#   5. the CUDA tests, slow ones included (tests/space/test_cuda.py, tests/cuda/), in what time is
#      left (the results come first: a GPU that does not work already shows in env.json and step 3)
#   6. only with RELEASE_CUDA_MODEL=1 and time left: a short ResNet-18 tune-model (model.json)
#
# Modes: `stage` (calls 1..N-1), `assemble` (join and check the wheels only), `run` (default).
# DRY_RUN=1 (any machine, no GPU): the same script up to the first CUDA launch, with the
# project's .venv: env, the default-suite CUDA tests, device_bench.py dry-run (CUDA tasks, knob
# spaces, legality, CUDA C exported through the build pool, each tuner's first proposals, the
# PyTorch reference ops),
# and `release tune` on CUDA, which must stop with one line (no GPU) before launching anything.
set -uo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
HERE=$ROOT/benchmarks/cuda
OUT=${OUT:-$ROOT/runs/cuda-out}
WORK=${WORK:-/tmp/release-cuda-work}
SITE=${SITE:-/tmp/release-site}
STAGE_KEEP=${STAGE_KEEP:-/root/release-cuda-stage}
BUDGET_S=${BUDGET_S:-480}          # the whole run, install included; the call's timeout_s: ~60 s more
TRIALS=${TRIALS:-96}               # equal trial budget of every tuner
PLAN_SIZE=${PLAN_SIZE:-32}         # configs per round (3 rounds at 96 trials)
RUN_SECONDS=${RUN_SECONDS:-35}     # cap of one tuning run (its trials are then reported as reached)
WORKLOADS=${WORKLOADS:-"resnet18.conv2d.6 bert-base.dense.2"}
TUNERS=${TUNERS:-"xgb release+ ms-evolutionary"}
TARGET=${TARGET:-cuda}             # the CLI alias: sm_90, H100/H200 limits (release/target.py)
PYTEST_S=${PYTEST_S:-120}
DRY_RUN=${DRY_RUN:-0}
MODE=${1:-run}

T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(date -u +%H:%M:%S) +$(elapsed)s] $*"; }

# --------------------------------------------------------------------------- call 1: stage
if [ "$MODE" = stage ]; then
    parts=$(ls -d .cuda-stage/p* 2>/dev/null)
    if [ -z "$parts" ]; then
        echo "run_device.sh stage: no .cuda-stage/p* here: make them with benchmarks/cuda/stage.sh and name one in carry" >&2
        exit 2
    fi
    mkdir -p "$STAGE_KEEP"
    for d in $parts; do cp -f "$d"/* "$STAGE_KEEP"/; done
    ls -la "$STAGE_KEEP"
    echo "kept in $STAGE_KEEP: $parts; make the next call at once (the machine stays warm 30 s)"
    exit 0
fi

# assemble: the wheels from .cuda-stage/p* (this call's part) and $STAGE_KEEP (the earlier calls'
# parts, kept while the machine stays warm); split ones joined; each checked against MANIFEST
# lines "sha256 name pieces"
assemble() {
    WHL=$WORK/wheels
    rm -rf "$WHL"
    mkdir -p "$WHL"
    local d
    for d in "$STAGE_KEEP" .cuda-stage/p*; do
        if [ -d "$d" ]; then cp -f "$d"/* "$WHL"/ 2>/dev/null; fi
    done
    if [ ! -f "$WHL/MANIFEST" ]; then
        echo "no MANIFEST: the last call must carry the last part, .cuda-stage/pN (made by benchmarks/cuda/stage.sh)" >&2
        return 2
    fi
    local bad=0 sum name parts have
    while read -r sum name parts; do
        if [ "$parts" -gt 0 ]; then
            have=$(find "$WHL" -maxdepth 1 -name "$name.part*" | wc -l)
            if [ "$have" -ne "$parts" ]; then
                echo "wheel $name: $have of $parts pieces here; an earlier call's part is gone (the machine" \
                     "went cold): make the calls again, each at once after the previous one" >&2
                bad=1
                continue
            fi
            cat "$WHL/$name".part* >"$WHL/$name" && rm -f "$WHL/$name".part*
        fi
        if ! echo "$sum  $WHL/$name" | sha256sum -c --quiet - >/dev/null 2>&1; then
            echo "wheel $name: sha256 differs from MANIFEST (a stale or cut part): run stage.sh again" >&2
            bad=1
        fi
    done <"$WHL/MANIFEST"
    rm -f "$WHL/MANIFEST"
    [ "$bad" = 0 ] || return 3
    echo "assembled: $(cd "$WHL" && ls | tr '\n' ' ')"
}

if [ "$MODE" = assemble ]; then
    mkdir -p "$WORK"
    assemble
    exit $?
fi

mkdir -p "$OUT" "$WORK"
STEPS=$OUT/steps.tsv
exec > >(tee -a "$OUT/run.log") 2>&1

# step NAME CAP_S CMD...: run CMD under `timeout` = min(CAP_S, what is left of BUDGET_S);
# record name, exit status and seconds in steps.tsv (124 = cut by its timeout).
step() {
    local name=$1 cap=$2
    shift 2
    local left=$(( BUDGET_S - $(elapsed) ))
    local lim=$(( cap < left ? cap : left ))
    if (( lim < 10 )); then
        say "step $name skipped: ${left}s of the ${BUDGET_S}s budget left"
        printf '%s\t%s\t%s\n' "$name" skipped 0 >>"$STEPS"
        return 0
    fi
    say "step $name: start (limit ${lim}s)"
    local t
    t=$(date +%s)
    timeout --kill-after=10 "$lim" "$@"
    local rc=$?
    printf '%s\t%s\t%s\n' "$name" "$rc" "$(( $(date +%s) - t ))" >>"$STEPS"
    say "step $name: exit $rc after $(( $(date +%s) - t ))s"
    return 0
}

pack_logs() {  # the logs come back as one file (the device tool returns at most 8)
    if [ -d "$WORK/logs" ]; then
        tar -czf "$OUT/logs.tar.gz.tmp" -C "$WORK" logs && mv "$OUT/logs.tar.gz.tmp" "$OUT/logs.tar.gz"
    fi
}

say "run_device.sh $MODE: DRY_RUN=$DRY_RUN, budget ${BUDGET_S}s, trials $TRIALS (plan $PLAN_SIZE, cap ${RUN_SECONDS}s a run)"
say "workloads: $WORKLOADS; tuners: $TUNERS; target: $TARGET; git $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
printf 'step\texit\tseconds\n' >"$STEPS"

# -------------------------------------------------------------------------- 1. install
if [ "$DRY_RUN" = 1 ]; then
    PY=${PYTHON:-$ROOT/.venv/bin/python}
    if [ ! -x "$PY" ]; then echo "DRY_RUN: no $PY; run 'make setup' first or set PYTHON" >&2; exit 2; fi
    export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
else
    PY=${PYTHON:-python3}
    t=$(date +%s)
    assemble || exit $?
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHL"/*.whl
    rc=$?
    printf '%s\t%s\t%s\n' install "$rc" "$(( $(date +%s) - t ))" >>"$STEPS"
    if [ "$rc" != 0 ]; then say "pip install failed ($rc)"; exit 4; fi
    export PYTHONPATH=$SITE:$ROOT${PYTHONPATH:+:$PYTHONPATH}
    # TVM's CUDA runtime links libcudart.so.13: make the toolkit's or PyTorch's copy findable
    libdirs=$("$PY" "$HERE/device_bench.py" libdirs)
    export LD_LIBRARY_PATH=${libdirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    say "install: $(( $(date +%s) - t ))s; LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    if ! "$PY" -c "import tvm, xgboost, release; print('imports: tvm', tvm.__version__, 'xgboost', xgboost.__version__)"; then
        say "the installed packages do not import"
        exit 4
    fi
fi
export PYTHONUNBUFFERED=1
RELEASE=("$PY" -m release.cli)
BENCH=("$PY" "$HERE/device_bench.py")

# ------------------------------------------------------------------------------------- 2. env
if command -v nvidia-smi >/dev/null; then nvidia-smi 2>&1 | sed 's/^/  /'; else say "nvidia-smi: not on this machine"; fi
step env 90 "${BENCH[@]}" env --out "$OUT" --target "$TARGET"

# ------------------------------------------------------------------------- tests (dry run: now)
if [ "$DRY_RUN" = 1 ]; then  # the default suite's CUDA tests (the slow ones are for the GPU machine)
    step pytest "$PYTEST_S" "$PY" -m pytest -q -p no:cacheprovider --durations=0 tests/space/test_cuda.py tests/cuda
fi

if [ "$DRY_RUN" = 1 ]; then
    # ---------------------------------------------------------------- 4-5, dry: up to the launch
    # shellcheck disable=SC2086
    step dry-run 900 "${BENCH[@]}" dry-run --out "$OUT" --target "$TARGET" --workloads $WORKLOADS \
        --tuners $TUNERS --plan-size "$PLAN_SIZE" --ms-population "${DRY_MS_POPULATION:-64}"
    say "release tune on $TARGET here must stop with one line, before any launch:"
    t=$(date +%s)
    "${RELEASE[@]}" tune --workload tiny.matmul.1 --target "$TARGET" --tuner xgb --n-trial 8 \
        --log "$WORK/dry-tune.jsonl" --no-progress >"$WORK/dry-tune.out" 2>&1
    rc=$?
    printf '%s\t%s\t%s\n' release-tune-cuda "$rc" "$(( $(date +%s) - t ))" >>"$STEPS"
    sed 's/^/  /' "$WORK/dry-tune.out"
    say "release tune exit $rc (2 = refused with one line: no GPU here)"
    say "done in $(elapsed)s; steps:"
    column -t "$STEPS" 2>/dev/null || cat "$STEPS"
    exit 0
fi

# ------------------------------------------------------------------------------------- 3. tune
# tune resumes from tune.json: after its watchdog ended a search that did not return (exit 75),
# it is started again for the remaining runs
for attempt in 1 2 3 4; do
    # shellcheck disable=SC2086
    step "tune$attempt" 420 "${BENCH[@]}" tune --out "$OUT" --logs "$WORK/logs" --target "$TARGET" \
        --workloads $WORKLOADS --tuners $TUNERS --trials "$TRIALS" --plan-size "$PLAN_SIZE" \
        --run-seconds "$RUN_SECONDS" --grace "${GRACE_S:-45}"
    pack_logs
    [ "$(tail -1 "$STEPS" | cut -f2)" = 75 ] || break
done

# ----------------------------------------------------------------------------------- 4. retime
# shellcheck disable=SC2086
step retime 90 "${BENCH[@]}" retime --out "$OUT" --logs "$WORK/logs" --target "$TARGET" --workloads $WORKLOADS \
    --tuners $TUNERS

# ------------------------------------------------------------------------------------ 5. tests
step pytest "$PYTEST_S" "$PY" -m pytest -q -p no:cacheprovider --durations=0 -m 'slow or not slow' \
    tests/space/test_cuda.py tests/cuda

# ------------------------------------------------------------------------- 6. optional: a model
if [ "${RELEASE_CUDA_MODEL:-0}" = 1 ]; then
    step model 300 "${BENCH[@]}" model --out "$OUT" --logs "$WORK/logs" --target "$TARGET" \
        --trials "${MODEL_TRIALS:-128}"
    pack_logs
fi
say "done in $(elapsed)s; steps:"
column -t "$STEPS" 2>/dev/null || cat "$STEPS"
ls -la "$OUT"
