#!/usr/bin/env bash
# llgrad on a real NVIDIA GPU: the CUDA test suite and the GPU benchmark, in under 8 minutes.
#
#   bash benchmarks/gpu_check.sh                # results under ./gpu_out
#   OUT=/some/dir bash benchmarks/gpu_check.sh
#
# Meant for a lent H100/H200 that has torch, JAX, CuPy, llvmlite, NumPy, SciPy,
# cuda-bindings and nvidia-cublas and nothing else: it installs nothing, and puts llgrad on
# PYTHONPATH from this checkout. Steps, each under `timeout` and reporting its seconds:
#   1. nvidia-smi -L (and the card's name, memory and clocks);
#   2. llgrad.cuda.is_available() and the device name, with the versions of the libraries;
#   3. pytest -m cuda over tests/ (stops at the first failure; its last 30 lines shown, the
#      whole output in $OUT/logs/pytest.log), while the benchmark's inputs and float64
#      references are prepared on the CPU in the background;
#   4. the copy bandwidth (torch, 2 GiB), then for each workload B1 B6 B8 B2 and each
#      library llgrad torch torch.compile jax.jit one process of benchmarks/gpu_bench.py
#      (`timeout 90` each) appending its record to $OUT/gpu_bench.jsonl; once the budget
#      (GPU_CHECK_BUDGET, 360 s from the start) is spent the remaining cells are skipped,
#      each with a "skipped" record, and the script says so;
#   4b. llgrad variants of its GPU settings (GPU_CHECK_VARIANTS), in 60 s more
#      (GPU_CHECK_VARIANT_BUDGET), one line each;
#   5. benchmarks/gpu_report.py: the table into $OUT/gpu_report.md, printed last.
# Everything printed is also in $OUT/gpu_check.log, each process's stderr in $OUT/logs/.
# There is deliberately no `set -e`: one failing step does not stop the others.
# Knobs: OUT, GPU_CHECK_BUDGET (s), GPU_BENCH_SIZE (scaled|quick), GPU_BENCH_BUDGET (s of
# per-call timing per cell, default 1.0), GPU_BENCH_TIMEOUT (s per process, default 90),
# GPU_CHECK_PYTEST=0 (leave pytest out), PYTHON.
# A dry run without a GPU: LLGRAD_CUDA_EMULATE=1 GPU_BENCH_SIZE=quick GPU_CHECK_PYTEST=0
# (llgrad's cells run on the grid emulator; torch's and JAX's report that they see no GPU).
set -u

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false

OUT="${OUT:-./gpu_out}"
mkdir -p "$OUT/logs"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1

PY="${PYTHON:-python}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
JSONL="$OUT/gpu_bench.jsonl"
REPORT="$OUT/gpu_report.md"
SIZE="${GPU_BENCH_SIZE:-scaled}"
BUDGET="${GPU_CHECK_BUDGET:-360}"
CELL_BUDGET="${GPU_BENCH_BUDGET:-1.0}"
BENCH_TIMEOUT="${GPU_BENCH_TIMEOUT:-90}"
T0=$SECONDS
CACHE="$(mktemp -d "${TMPDIR:-/tmp}/llgrad-gpu-cache.XXXXXX")"
PREP_PID=""
cleanup() {
    if [ -n "$PREP_PID" ]; then kill "$PREP_PID" 2>/dev/null; fi
    rm -rf "$CACHE"
}
trap cleanup EXIT

elapsed() { echo $((SECONDS - T0)); }
begin() { STEP_T=$SECONDS; echo; echo "=== [$(elapsed) s] $*"; }
finish() { echo "--- $1: exit $2, $((SECONDS - STEP_T)) s (total $(elapsed) s)"; }

date
echo "llgrad GPU check in $PWD, results in $OUT, size $SIZE, budget $BUDGET s, python $PY"

begin "1. nvidia-smi"
timeout 20 nvidia-smi -L
rc=$?
timeout 20 nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem,power.limit,driver_version --format=csv
finish "nvidia-smi" "$rc"

begin "2. llgrad.cuda"
timeout 60 "$PY" -c "import llgrad, llgrad.cuda as c; print(c.is_available(), c.get_device_name())"
rc=$?
timeout 30 "$PY" - <<'EOF'
import importlib, platform
print("python", platform.python_version())
for name in ("numpy", "llvmlite", "torch", "jax", "jaxlib", "cupy", "cuda.bindings", "pytest"):
    try:
        mod = importlib.import_module(name)
        print(f"  {name} {getattr(mod, '__version__', '?')}")
    except Exception as e:  # noqa: BLE001
        print(f"  {name}: not importable ({type(e).__name__}: {e})")
EOF
finish "llgrad.cuda" "$rc"

begin "3a. preparing benchmark inputs and float64 references in the background ($CACHE)"
timeout 240 "$PY" -m benchmarks.gpu_bench --prepare --workload all --size "$SIZE" \
    --cache "$CACHE" > "$OUT/logs/prepare.log" 2>&1 &
PREP_PID=$!

begin "3b. pytest -m cuda"
if [ "${GPU_CHECK_PYTEST:-1}" = 0 ]; then
    echo "(skipped: GPU_CHECK_PYTEST=0)"
else
PYTEST_ARGS=(-q -m cuda -x -p no:cacheprovider)
if "$PY" -c "import pytest_timeout" 2>/dev/null; then
    PYTEST_ARGS+=(--timeout 120)
else
    echo "(pytest-timeout is not installed: no per-test timeout, only the step's 150 s)"
fi
timeout -k 5 150 "$PY" -m pytest "${PYTEST_ARGS[@]}" tests/test_cuda_runtime.py tests/test_cuda_device.py > "$OUT/logs/pytest.log" 2>&1
rc=$?
tail -30 "$OUT/logs/pytest.log"
case $rc in
    0) ;;
    5) echo "(pytest collected no test marked cuda)";;
    124|137) echo "(pytest ran past 150 s and was stopped)";;
    *) echo "(pytest exit $rc: failures or errors above)";;
esac
finish "pytest -m cuda" "$rc"
fi

begin "3c. waiting for the prepared inputs"
wait "$PREP_PID"
rc=$?
PREP_PID=""
cat "$OUT/logs/prepare.log"
finish "prepare" "$rc"

append_record() {
    # append_record LIB WORKLOAD KEY MESSAGE: a record for a cell whose process wrote none
    local msg
    msg=$(printf '%s' "$4" | tr -d '\000-\037')
    msg=${msg//\\/\\\\}
    msg=${msg//\"/\\\"}
    printf '{"schema": "llgrad-gpu-bench/1", "library": "%s", "workload": "%s", "size": "%s", "device": "cuda", "%s": "%s"}\n' \
        "$1" "$2" "$SIZE" "$3" "$msg" >> "$JSONL"
}

run_cell() {
    # run_cell LIB [WORKLOAD]: one gpu_bench process under the remaining budget
    local lib=$1 w=${2:-} left t before after rc name
    name="${w:-copy}_${lib}"
    left=$((BUDGET - $(elapsed)))
    if [ "$left" -lt 15 ]; then
        echo "SKIPPED ${w:-copy} $lib: the ${BUDGET} s budget is spent (at $(elapsed) s)"
        append_record "$lib" "${w:-copy}" skipped "the script's ${BUDGET} s budget was spent"
        SKIPPED=$((SKIPPED + 1))
        return
    fi
    t=$BENCH_TIMEOUT
    [ "$left" -lt "$t" ] && t=$left
    before=$(wc -l < "$JSONL" 2>/dev/null || echo 0)
    local s=$SECONDS
    if [ -n "$w" ]; then
        timeout -k 5 "$t" "$PY" -m benchmarks.gpu_bench --lib "$lib" --workload "$w" \
            --size "$SIZE" --cache "$CACHE" --budget "$CELL_BUDGET" --json "$JSONL" \
            2> "$OUT/logs/bench_${name}.log"
    else
        timeout -k 5 "$t" "$PY" -m benchmarks.gpu_bench --lib copy --size "$SIZE" \
            --budget "$CELL_BUDGET" --json "$JSONL" 2> "$OUT/logs/bench_${name}.log"
    fi
    rc=$?
    after=$(wc -l < "$JSONL" 2>/dev/null || echo 0)
    if [ "$after" -le "$before" ]; then
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            append_record "$lib" "${w:-copy}" error "timed out after $t s"
        else
            local why
            why=$(grep -m1 "Fatal Python error" "$OUT/logs/bench_${name}.log" 2>/dev/null \
                  || grep -v '^[[:space:]]*$' "$OUT/logs/bench_${name}.log" 2>/dev/null | tail -1)
            [ "$rc" -gt 128 ] && why="killed by signal $((rc - 128)); ${why}"
            append_record "$lib" "${w:-copy}" error "exit $rc without a record: $(printf '%s' "$why" | cut -c1-200)"
        fi
        echo "${w:-copy} $lib: no record (exit $rc); see $OUT/logs/bench_${name}.log"
    fi
    echo "    (${w:-copy} $lib: exit $rc, $((SECONDS - s)) s, total $(elapsed) s)"
}

begin "4. benchmark ($SIZE sizes, ${BENCH_TIMEOUT} s per process, budget ${BUDGET} s in all)"
SKIPPED=0
touch "$JSONL"
run_cell copy
for w in B1 B6 B8 B2; do
    for lib in llgrad torch torch.compile jax.jit; do
        run_cell "$lib" "$w"
    done
done
if [ "$SKIPPED" -gt 0 ]; then
    echo "SKIPPED $SKIPPED benchmark processes: the ${BUDGET} s budget was spent"
fi
finish "benchmark" 0

begin "4b. llgrad variants (GPU_CHECK_VARIANTS: workload:VAR=value,VAR=value ...)"
VARIANTS="${GPU_CHECK_VARIANTS-B1:LLGRAD_GPU_PIECES=1024 B1:LLGRAD_GPU_MATH=libdevice B6:LLGRAD_GPU_ROW_THREADS=256 B6:LLGRAD_GPU_PIECES=1024 B6:LLGRAD_GPU_ROW_THREADS=256,LLGRAD_GPU_PIECES=1024 B8:LLGRAD_GPU_MATH=libdevice}"
VARIANT_BUDGET="${GPU_CHECK_VARIANT_BUDGET:-60}"
for v in $VARIANTS; do
    w=${v%%:*}
    settings=${v#*:}
    if [ $((BUDGET + VARIANT_BUDGET - $(elapsed))) -lt 12 ]; then
        echo "SKIPPED variant $w $settings: the variants' budget is spent"
        continue
    fi
    echo "variant $w $settings:"
    # shellcheck disable=SC2086
    env ${settings//,/ } timeout -k 5 45 "$PY" -m benchmarks.gpu_bench --lib llgrad --workload "$w" \
        --size "$SIZE" --cache "$CACHE" --budget "$CELL_BUDGET" --json "$OUT/variants.jsonl" \
        2>> "$OUT/logs/variants.log" | tail -1
done
finish "variants" 0

begin "5. report"
timeout 60 "$PY" -m benchmarks.gpu_report "$JSONL" --out "$REPORT" > /dev/null
rc=$?
finish "report" "$rc"
echo "total $(elapsed) s; $(date)"
echo
cat "$REPORT" 2>/dev/null || echo "no report (gpu_report exit $rc)"
