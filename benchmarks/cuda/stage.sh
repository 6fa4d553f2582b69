#!/usr/bin/env bash
# Prepare, on a machine with PyPI, the wheels the GPU machine lacks (issue 20), in two parts that
# each fit one device call, and check that each call's load fits the device tool's 64 MiB.
#
#   bash benchmarks/cuda/stage.sh          # -> .cuda-stage/a (call 1), .cuda-stage/b (call 2)
#   bash benchmarks/cuda/stage.sh --check  # only the size check (what would travel per call)
#
# The GPU machine (see benchmarks/cuda/run_device.sh) runs Python 3.12 with a CUDA PyTorch,
# scikit-learn, SciPy, psutil, cloudpickle, tqdm and pytest, but not TVM, apache-tvm-ffi, XGBoost
# or tornado: those are fetched here at the versions pyproject.toml pins (XGBoost as the same
# version's CPU-only wheel, xgboost-cpu: the CUDA one is ~300 MB). TVM's wheel (~100 MB) is split
# between the two parts. .cuda-stage/ is ignored through .git/info/exclude, never committed.
set -euo pipefail
cd "$(dirname "$0")/../.."
STAGE=.cuda-stage
LIMIT=$((64 * 1024 * 1024))
SPLIT=${SPLIT:-52m}

pin() {  # the version pyproject.toml pins for a package
    sed -n "s/^ *\"$1==\([^\"]*\)\".*/\1/p" pyproject.toml | head -1
}

travel_bytes() {  # tracked + untracked-not-ignored files of the working tree, plus shared/ if any
    { git ls-files -z --cached --others --exclude-standard; } | { xargs -0 stat -c %s 2>/dev/null || true; } \
        | awk '{s+=$1} END {print s+0}'
}

check() {
    local tree a b
    tree=$(travel_bytes)
    a=$( (du -sb "$STAGE/a" 2>/dev/null || echo 0) | cut -f1)
    b=$( (du -sb "$STAGE/b" 2>/dev/null || echo 0) | cut -f1)
    awk -v t="$tree" -v a="$a" -v b="$b" 'BEGIN {
        printf "working tree that travels: %.1f MiB\n", t / 1048576
        printf "call 1 (tree + .cuda-stage/a): %.1f MiB of 64\n", (t + a) / 1048576
        printf "call 2 (tree + .cuda-stage/b): %.1f MiB of 64\n", (t + b) / 1048576 }'
    if (( tree + a > LIMIT || tree + b > LIMIT )); then
        echo "too large for the device tool (64 MiB a call): the working tree alone is $((tree / 1048576)) MiB;" \
             "tracked MiB by folder:" >&2
        git ls-files -z | { xargs -0 stat -c '%s %n' 2>/dev/null || true; } \
            | awk '{n=split($2, p, "/"); d=(n>3 ? p[1] "/" p[2] "/" p[3] : p[1]); s[d]+=$1}
                   END {for (d in s) if (s[d] > 1048576) printf "  %6.1f  %s\n", s[d]/1048576, d}' | sort -rn >&2
        return 2
    fi
}

if [ "${1:-}" = --check ]; then
    check
    exit $?
fi

grep -qx "/$STAGE/" .git/info/exclude 2>/dev/null || echo "/$STAGE/" >>.git/info/exclude
rm -rf "$STAGE"
mkdir -p "$STAGE/dl" "$STAGE/a" "$STAGE/b"
TVM=$(pin apache-tvm); FFI=$(pin apache-tvm-ffi); XGB=$(pin xgboost); TORNADO=$(pin tornado)
echo "fetching apache-tvm==$TVM apache-tvm-ffi==$FFI xgboost-cpu==$XGB tornado==$TORNADO for CPython 3.12"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    -d "$STAGE/dl" "apache-tvm==$TVM" "apache-tvm-ffi==$FFI" "xgboost-cpu==$XGB" "tornado==$TORNADO"

# MANIFEST lines: sha256 name parts (parts > 0: the wheel travels split, part files name.partNN)
: >"$STAGE/b/MANIFEST"
for w in "$STAGE"/dl/*.whl; do
    name=$(basename "$w")
    sum=$(sha256sum "$w" | cut -d' ' -f1)
    case "$name" in
        apache_tvm-*)
            split -b "$SPLIT" -d "$w" "$STAGE/b/$name.part"
            mv "$STAGE/b/$name.part00" "$STAGE/a/"
            parts=$(ls "$STAGE/a/$name".part* "$STAGE/b/$name".part* | wc -l)
            ;;
        *) cp "$w" "$STAGE/b/"; parts=0 ;;
    esac
    echo "$sum $name $parts" >>"$STAGE/b/MANIFEST"
done
cp "$STAGE/b/MANIFEST" "$STAGE/a/MANIFEST.a"
rm -rf "$STAGE/dl"
ls -la "$STAGE/a" "$STAGE/b"
check || true
cat <<'EOF'

Device calls (the second within 30 s of the first's return, while the machine is warm):
  1. run(carry=[".cuda-stage/a"], timeout_s=120, command="bash benchmarks/cuda/run_device.sh stage")
  2. run(carry=[".cuda-stage/b"], timeout_s=560, command="OUT=$OUT bash benchmarks/cuda/run_device.sh")
EOF
