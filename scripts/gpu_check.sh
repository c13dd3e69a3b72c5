#!/usr/bin/env bash
# The one script for the GPU machine: build, GPU tests, codec benchmarks and the PyTorch
# baselines in one go, logs under $OUT (or ./gpu-check-out), a short summary printed last.
# Files written (8 at most, the device tool's limit): log.txt build.log gpu_tests.log bench.md
# bench.json bench.csv torch_taco.json torch_anchors.json
#
#   scripts/gpu_check.sh [all|tests|bench] [extra `taco bench` options...]
#
#   all    (default) build, taco_gpu_tests, torch anchors + torch.compile baselines, taco bench
#   tests  build and taco_gpu_tests only
#   bench  build, baselines and taco bench only
# Environment: JOBS (build parallelism, default nproc), REBUILD=0 (skip the build and use the
# binaries already in the build dir), BENCH_SIZES (default
# 1M,4M,8M,64M,256M,512M,1G), BENCH_VARIANTS, TACO_BUILD (build dir, default build-gpu).
# Expects /.anchors/torch_anchors.py (a copy of shared/anchors/torch_anchors.py) when present.
set -u -o pipefail
MODE=${1:-all}
shift || true
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
BUILD=${TACO_BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
LOG=$OUT/log.txt
: > "$LOG"
say() { echo "== $*" | tee -a "$LOG"; }
SECONDS=0

say "machine: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader 2>&1 | head -1)"
say "nvcc: $(nvcc --version 2>&1 | tail -1)"

# ---- PyTorch baselines first, in the background (GPU), while the build uses the CPUs ----
TORCH_PID=""
if [ "$MODE" != tests ]; then
  (
    timeout 150 python3 bench/torch_taco.py --log2n 28 --out "$OUT/torch_taco.json" > /dev/null 2> /tmp/torch_taco.err
    if [ -f .anchors/torch_anchors.py ]; then
      timeout 150 python3 .anchors/torch_anchors.py > "$OUT/torch_anchors.json" 2> /tmp/torch_anchors.err
    fi
  ) &
  TORCH_PID=$!
fi

# ---- build (REBUILD=0: use the binaries in $BUILD/bin as they are, e.g. built elsewhere) ----
if [ "${REBUILD:-1}" = 0 ]; then
  say "prebuilt $BUILD/bin: $("$BUILD/bin/taco" --version 2>&1 | head -1)"
else
  say "build ($BUILD, $JOBS jobs)"
  if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTACO_TESTS=ON -DTACO_CUDA=ON \
           -DCMAKE_CUDA_ARCHITECTURES=90-real > "$OUT/build.log" 2>&1 &&
         cmake --build "$BUILD" -j "$JOBS" --target taco taco_gpu_tests >> "$OUT/build.log" 2>&1; }; then
    say "BUILD FAILED after ${SECONDS}s"
    grep -E "error|Error" "$OUT/build.log" | head -40
    tail -20 "$OUT/build.log"
    [ -n "$TORCH_PID" ] && kill "$TORCH_PID" 2>/dev/null
    exit 1
  fi
  say "built in ${SECONDS}s"
  grep -E "warning" "$OUT/build.log" | grep -E "cuda/|apps/cmd_bench|tests/gpu" | head -10 | tee -a "$LOG"
fi

# Wait for the baselines so that nothing else shares the GPU while we test or time.
if [ -n "$TORCH_PID" ]; then
  wait "$TORCH_PID"
  say "torch baselines done at ${SECONDS}s"
  tail -5 /tmp/torch_taco.err /tmp/torch_anchors.err >> "$LOG" 2>/dev/null
fi

# ---- GPU tests ----
TEST_RC=0
if [ "$MODE" != bench ]; then
  say "taco_gpu_tests"
  timeout ${TEST_TIMEOUT:-150} "$BUILD/bin/taco_gpu_tests" --durations yes > "$OUT/gpu_tests.log" 2>&1
  TEST_RC=$?
  grep -E "passed|failed|FAILED|REQUIRE|CHECK|with expansion|:[0-9]+: |s: " "$OUT/gpu_tests.log" | head -60
  tail -4 "$OUT/gpu_tests.log"
  say "taco_gpu_tests exit code $TEST_RC at ${SECONDS}s"
fi

# ---- benchmarks ----
if [ "$MODE" != tests ]; then
  SIZES=${BENCH_SIZES:-1M,8M,64M,256M,512M,1G}
  VARIANTS=${BENCH_VARIANTS:-taco,fp8-g128,mxfp8,int8-g128-had,fp8-row}
  say "taco bench ($VARIANTS; $SIZES)"
  timeout ${BENCH_TIMEOUT:-200} "$BUILD/bin/taco" bench -v "$VARIANTS" --sizes "$SIZES" --min-samples 10 --max-noise 1 \
    --min-time ${BENCH_MIN_TIME:-0.02} --timeout 2 --json "$OUT/bench.json" --csv "$OUT/bench.csv" "$@" > "$OUT/bench.md" 2>> "$LOG"
  say "taco bench exit code $? at ${SECONDS}s"
  python3 bench/summarize.py "$OUT/bench.json" "$OUT/torch_taco.json" "$OUT/torch_anchors.json" \
    | tee -a "$LOG"
fi
say "done in ${SECONDS}s (tests exit code $TEST_RC)"
exit $TEST_RC
