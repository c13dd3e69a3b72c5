#!/usr/bin/env bash
# Nsight Compute profile of the fused codec kernels on the GPU machine: builds `taco`, then runs
# one `taco bench` launch per (variant, op) under ncu and keeps the sections that say where the
# time goes (speed of light, occupancy, scheduler, warp stalls, instruction mix).
#
#   scripts/gpu_profile.sh [variant:op ...]
#                                  default: taco:encode taco:decode fp8-g128:encode
# Environment: SIZE (bf16 input, default 256M), TACO_BUILD (default build-gpu), OUT (logs),
# REBUILD=0 (use the build as it is), SASS=1 (also the per-instruction execution counts).
set -u -o pipefail
OUT=${OUT:-$PWD/gpu-profile-out}
mkdir -p "$OUT"
BUILD=${TACO_BUILD:-build-gpu}
SIZE=${SIZE:-256M}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
SECONDS=0
if [ ! -x "$BUILD/bin/taco" ] || [ "${REBUILD:-1}" = 1 ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTACO_CUDA=ON -DTACO_TESTS=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90-real > "$OUT/profile_build.log" 2>&1 &&
    cmake --build "$BUILD" -j "$(nproc)" --target taco >> "$OUT/profile_build.log" 2>&1 ||
    { echo "BUILD FAILED"; tail -30 "$OUT/profile_build.log"; exit 1; }
  echo "== built in ${SECONDS}s"
fi
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "no ncu on this machine"; exit 1; }
cases=("$@")
[ ${#cases[@]} -eq 0 ] && cases=(taco:encode taco:decode fp8-g128:encode)
for c in "${cases[@]}"; do
  IFS=: read -r v op <<< "$c"
  case $op in encode) k=group_encode_kernel ;; *) k=group_decode_reduce ;; esac
  f="$OUT/ncu_${v}_${op}.txt"
  timeout 240 "$NCU" --clock-control none -k "regex:$k" -s 2 -c 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
    --section WarpStateStats --section InstructionStats --section MemoryWorkloadAnalysis \
    "$BUILD/bin/taco" bench -v "$v" --ops "$op" --sizes "$SIZE" --impl fused --no-batch --no-verify \
    --min-samples 3 --min-time 0 --timeout 1 -q > "$f" 2>&1
  echo "== $v $op (ncu exit $?, ${SECONDS}s)"
  if [ "${SASS:-0}" = 1 ]; then
    "$NCU" --clock-control none -k "regex:$k" -s 2 -c 1 --section SourceCounters --page source \
      --print-source sass --csv "$BUILD/bin/taco" bench -v "$v" --ops "$op" --sizes "$SIZE" --impl fused \
      --no-batch --no-verify --min-samples 3 --min-time 0 --timeout 1 -q \
      > "$OUT/sass_${v}_${op}.csv" 2>&1
  fi
  grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Registers Per|Achieved Occupancy|Theoretical Occupancy|Executed Ipc Active|Issue Slots Busy|No Eligible|Executed Instructions  |Warp Cycles Per Issued|Block Limit Registers" "$f" | sed 's/  */ /g'
done
echo "== done in ${SECONDS}s"
