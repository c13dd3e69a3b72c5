#!/usr/bin/env bash
# The device-machine script of `taco comm`: build, the comm GPU tests, live collective sweeps, and
# (2+ GPUs) the NCCL anchor through torchrun, in one call. Logs and JSON under $OUT (at most 8
# files come back); a short table is printed last.
#
#   scripts/comm_run.sh single   one GPU: build, comm GPU tests, `taco comm -g 1` (real NCCL, one
#                                rank), loopback runs (2 and 4 virtual ranks on the GPU: every
#                                compressed code path), mpirun -np 1, error paths
#   scripts/comm_run.sh multi    2+ GPUs: build, comm GPU tests, sweeps 1 MiB..1 GiB for NVLink,
#                                NCCL_P2P_DISABLE=1 and NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1, the
#                                algorithms at 256 MiB, mpirun -np 2, nccl_anchor.py per transport
# Environment: TACO_BUILD (build dir, default build-gpu), SIZES_MAX (default 1G), ITERS (20).
# Expects .anchors/nccl_anchor.py (a copy of shared/anchors/nccl_anchor.py) for the anchor.
set -u -o pipefail
MODE=${1:-single}
OUT=${OUT:-$PWD/comm-run-out}
mkdir -p "$OUT"
BUILD=${TACO_BUILD:-build-gpu}
MAXB=${SIZES_MAX:-1G}
ITERS=${ITERS:-20}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
LOG=$OUT/log.txt
: > "$LOG"
say() { echo "== $*" | tee -a "$LOG"; }
SECONDS=0
TACO=$BUILD/bin/taco
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"

say "machine: $(nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>&1 | tr '\n' ';')"
say "nvcc: $(nvcc --version 2>&1 | tail -1); mpirun: $(mpirun --version 2>&1 | head -1)"
say "NCCL (torch): $(python3 -c 'import torch; print(torch.cuda.nccl.version())' 2>&1)"

# ---- build ----
say "build ($BUILD)"
if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTACO_TESTS=ON -DTACO_CUDA=ON \
         -DCMAKE_CUDA_ARCHITECTURES=90-real > "$OUT/build.log" 2>&1 &&
       cmake --build "$BUILD" -j "$(nproc)" --target taco taco_gpu_tests >> "$OUT/build.log" 2>&1; }; then
  say "BUILD FAILED after ${SECONDS}s"
  grep -E "error" "$OUT/build.log" | head -30
  exit 1
fi
say "built in ${SECONDS}s; $(grep -E 'MPI_CXX_FOUND|TACO_HAVE_NCCL' "$OUT/build.log" | tr -s ' ' | tr '\n' ' ')"

# ---- GPU tests of the comm code ----
say "taco_gpu_tests [comm]"
timeout 240 "$BUILD/bin/taco_gpu_tests" "[comm]" --durations yes > "$OUT/gpu_tests.log" 2>&1
TEST_RC=$?
grep -E "passed|failed|FAILED|with expansion|REQUIRE" "$OUT/gpu_tests.log" | head -30
say "taco_gpu_tests [comm] exit code $TEST_RC at ${SECONDS}s"
echo "gpu_tests [comm]: exit $TEST_RC; $(grep -E 'test cases' "$OUT/gpu_tests.log" | tail -1)" >> "$SUMMARY"

# One `taco comm` run: name, then arguments; the table goes to the log, the JSON to $OUT/name.json.
comm() {
  local name=$1; shift
  say "taco comm $* ($name)"
  "$TACO" comm "$@" --json "$OUT/$name.json" >> "$LOG" 2>&1
  local rc=$?
  echo "$name: exit $rc" >> "$SUMMARY"
  say "$name exit code $rc at ${SECONDS}s"
  return $rc
}

if [ "$MODE" = single ]; then
  # Real NCCL with one rank: every collective and dtype (plain rows exact, compressed = copy).
  comm g1 -g 1 --coll all -d bf16,f16,f32,f8e4m3,f8e5m2 -b 1M -e 64M -f 8 -n 10 -w 2
  # Every compressed code path with 2 and 4 virtual ranks on the GPU (device copies, not a network).
  comm loop2 --loopback 2 --coll all -b 64K -e 256M -f 4 --codec taco,fp8-g128,fp8-row -n 5 -w 1 --pipeline 1
  comm loop4 --loopback 4 --coll all_reduce --algo one_shot,two_shot,ring -b 1M -e 64M -f 8 \
       --codec taco,int8-g128-had --pipeline 4 -d bf16,f32 -n 5 -w 1
  # The MPI path with one process (launcher detection, broadcast of the NCCL id, settings hash).
  say "mpirun -np 1"
  mpirun -np 1 --allow-run-as-root "$TACO" comm -b 4M -e 4M --coll all --json "$OUT/mpi1.json" >> "$LOG" 2>&1
  echo "mpi1: exit $?" >> "$SUMMARY"
  # Error paths: bad input exits 2 with one line.
  for bad in "--codec nvfp4" "-d int8" "-o prod" "--algo tree" "-b 0" "--pipeline 0"; do
    "$TACO" comm -g 1 -b 1M -e 1M $bad > /tmp/bad.out 2>&1
    echo "bad input '$bad': exit $? ($(tail -1 /tmp/bad.out | cut -c1-150))" >> "$SUMMARY"
  done
else
  NG=$(nvidia-smi -L | wc -l)
  for t in nvlink shm socket; do
    case $t in
      nvlink) envs="" ;;
      shm) envs="NCCL_P2P_DISABLE=1" ;;
      socket) envs="NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1" ;;
    esac
    if [ $t = nvlink ]; then ITER=$ITERS; MAX=$MAXB; else ITER=5; MAX=256M; fi
    say "anchor $t"
    [ -f .anchors/nccl_anchor.py ] && env $envs TAG=$t timeout 120 torchrun --nproc_per_node="$NG" \
        .anchors/nccl_anchor.py 2>/dev/null | tail -1 >> "$OUT/anchors.txt"
    env $envs "$TACO" comm -g "$NG" -b 1M -e "$MAX" -f 4 -n "$ITER" -w 3 --codec taco --pipeline 4 \
        --transport $t --json "$OUT/sweep_$t.json" >> "$LOG" 2>&1
    echo "sweep_$t: exit $?" >> "$SUMMARY"
  done
  comm algos -g "$NG" -b 256M -e 256M --algo one_shot,two_shot,ring --codec taco,fp8-g128 --pipeline 4 -n 10
  say "mpirun -np $NG"
  mpirun -np "$NG" --allow-run-as-root -x NCCL_NVLS_ENABLE "$TACO" comm -g 1 --coll all -b 1M -e 64M -f 8 \
      --json "$OUT/mpi.json" >> "$LOG" 2>&1
  echo "mpi: exit $?" >> "$SUMMARY"
fi

# ---- short table ----
python3 - "$OUT" <<'EOF' | tee -a "$SUMMARY"
import json, os, sys, glob
out = sys.argv[1]
for p in sorted(glob.glob(os.path.join(out, "*.json"))):
    d = json.load(open(p))
    rows = d["results"]
    wrong = sum((r["nwrong"] or 0) for r in rows)
    print(f"{os.path.basename(p)}: {len(rows)} rows, nranks {d['meta']['nranks']}, NCCL {d['meta']['nccl_version']}, "
          f"#wrong {wrong}")
    for r in rows:
        if r["collective"] == "all_reduce" and r["size"] in (1 << 20, 64 << 20, 256 << 20, 1 << 30):
            sp = r["speedup"]
            print(f"  {r['collective']:>10} {r['size']:>11} {r['type']:>8} {r['codec']:>9} {r['algorithm']:>8} "
                  f"{r['time_us']:10.1f} us busbw {r['busbw']:7.2f} speedup {'-' if sp is None else f'{sp:.2f}'} "
                  f"rel_l2 {r['rel_l2']} hidden {r['hidden_codec_pct']}")
EOF
say "done in ${SECONDS}s"
cat "$SUMMARY"
exit $TEST_RC
