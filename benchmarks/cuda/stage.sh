#!/usr/bin/env bash
# Prepare, on a machine with PyPI, the wheels the GPU machine lacks, in parts that each
# fit one device call beside the working tree, and check what each call would carry.
#
#   bash benchmarks/cuda/stage.sh          # -> .cuda-stage/p1 .. pN; prints the N device calls
#   bash benchmarks/cuda/stage.sh --check  # only the size check of the working tree and the parts
#
# The GPU machine (see benchmarks/cuda/run_device.sh) runs Python 3.12 with a CUDA PyTorch,
# scikit-learn, SciPy, psutil, cloudpickle, tqdm and pytest, but not TVM, apache-tvm-ffi, XGBoost
# or tornado: those are fetched here at the versions pyproject.toml pins (XGBoost as the same
# version's CPU-only wheel, xgboost-cpu: the CUDA one is ~300 MB). A device call carries at most
# 64 MiB, the working tree included, and TVM's wheel alone is ~96 MiB, so the wheels are cut into
# parts of (64 MiB - tree - 1 MiB): with a 9 MiB tree that is 2 parts (2 calls), with a larger
# tree more. The last part holds MANIFEST ("sha256 name pieces" per wheel). .cuda-stage/ is
# ignored through .git/info/exclude, never committed.
set -euo pipefail
cd "$(dirname "$0")/../.."
STAGE=.cuda-stage
LIMIT=$((64 * 1024 * 1024))
MARGIN=$((1024 * 1024))

pin() {  # the version pyproject.toml pins for a package
    sed -n "s/^ *\"$1==\([^\"]*\)\".*/\1/p" pyproject.toml | head -1
}

travel_bytes() {  # tracked + untracked-not-ignored files of the working tree
    { git ls-files -z --cached --others --exclude-standard; } | { xargs -0 stat -c %s 2>/dev/null || true; } \
        | awk '{s+=$1} END {print s+0}'
}

check() {
    local tree worst=0 d n
    tree=$(travel_bytes)
    awk -v t="$tree" 'BEGIN { printf "working tree that travels: %.1f MiB\n", t / 1048576 }'
    for d in "$STAGE"/p*; do
        [ -d "$d" ] || continue
        n=$(du -sb "$d" | cut -f1)
        awk -v t="$tree" -v n="$n" -v d="$d" 'BEGIN { printf "call with %s: %.1f MiB of 64\n", d, (t + n) / 1048576 }'
        (( n > worst )) && worst=$n
    done
    if (( tree + worst > LIMIT || tree + MARGIN * 8 > LIMIT )); then
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

tree=$(travel_bytes)
room=${PART_BYTES:-$(( LIMIT - tree - MARGIN ))}  # PART_BYTES: tests
if [ -z "${PART_BYTES:-}" ] && (( room < 8 * MARGIN )); then
    check || true
    echo "no room for wheels beside a $((tree / 1048576)) MiB working tree: shrink it first" >&2
    exit 2
fi
grep -qx "/$STAGE/" .git/info/exclude 2>/dev/null || echo "/$STAGE/" >>.git/info/exclude
rm -rf "$STAGE"
mkdir -p "$STAGE/dl"
TVM=$(pin apache-tvm); FFI=$(pin apache-tvm-ffi); XGB=$(pin xgboost); TORNADO=$(pin tornado)
echo "fetching apache-tvm==$TVM apache-tvm-ffi==$FFI xgboost-cpu==$XGB tornado==$TORNADO for CPython 3.12"
if [ -n "${STAGE_FROM:-}" ]; then  # wheels already at hand (tests; a machine without PyPI)
    cp "$STAGE_FROM"/*.whl "$STAGE/dl"/
else
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
        -d "$STAGE/dl" "apache-tvm==$TVM" "apache-tvm-ffi==$FFI" "xgboost-cpu==$XGB" "tornado==$TORNADO"
fi

# lay the wheels out in parts of at most `room` bytes (first fit, big wheels cut into pieces)
python3 - "$STAGE" "$room" <<'PY'
import hashlib, os, sys
stage, room = sys.argv[1], int(sys.argv[2])
wheels = sorted((os.path.join(stage, "dl", f) for f in os.listdir(os.path.join(stage, "dl"))),
                key=os.path.getsize, reverse=True)
parts, manifest = [], []          # parts: [free bytes, [(name, data)]]
for w in wheels:
    data = open(w, "rb").read()
    name = os.path.basename(w)
    pieces = [data[i:i + room] for i in range(0, len(data), room)] if len(data) > room else [data]
    for k, piece in enumerate(pieces):
        fname = f"{name}.part{k:02d}" if len(pieces) > 1 else name
        part = next((p for p in parts if p[0] >= len(piece)), None)
        if part is None:
            part = [room, []]
            parts.append(part)
        part[0] -= len(piece)
        part[1].append((fname, piece))
    manifest.append(f"{hashlib.sha256(data).hexdigest()} {name} {len(pieces) if len(pieces) > 1 else 0}")
for i, (_, files) in enumerate(parts, start=1):
    d = os.path.join(stage, f"p{i}")
    os.makedirs(d)
    for fname, piece in files:
        open(os.path.join(d, fname), "wb").write(piece)
open(os.path.join(stage, f"p{len(parts)}", "MANIFEST"), "w").write("\n".join(manifest) + "\n")
print(f"{len(parts)} parts of at most {room / 2**20:.1f} MiB")
PY
rm -rf "$STAGE/dl"
ls -la "$STAGE"/p*
check || true
n=$(ls -d "$STAGE"/p* | wc -l)
echo
echo "Device calls, each within 30 s of the previous one's return (the machine stays warm that long):"
for i in $(seq 1 "$n"); do
    if (( i < n )); then
        echo "  $i. run(carry=[\".cuda-stage/p$i\"], timeout_s=120, command=\"bash benchmarks/cuda/run_device.sh stage\")"
    else
        echo "  $i. run(carry=[\".cuda-stage/p$i\"], timeout_s=560, command=\"bash benchmarks/cuda/run_device.sh\")"
    fi
done
