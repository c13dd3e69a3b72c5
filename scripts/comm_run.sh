#!/usr/bin/env bash
# The device-machine script of `taco comm`: binaries, the comm GPU tests, live collective sweeps
# and (2+ GPUs) the NCCL anchor through torchrun, in one call. Logs and JSON under $OUT (the device
# tool brings back at most 8 files); a short table is printed last.
#
#   scripts/comm_run.sh multi    2+ GPUs: comm GPU tests (NCCL with every GPU + loopback), sweeps
#                                1 MiB..1 GiB for NVLink (NCCL kernels, then --nccl-ce copy
#                                engines), NCCL_P2P_DISABLE=1 and NCCL_P2P_DISABLE=1
#                                NCCL_SHM_DISABLE=1 (plain bf16 vs taco), the three all-reduce
#                                algorithms at 256 MiB, mpirun -np N, nccl_anchor.py (NVLink)
#   scripts/comm_run.sh single   one GPU: comm GPU tests, `taco comm -g 1` (real NCCL, one rank),
#                                loopback runs (2 and 4 virtual ranks: every compressed code
#                                path), mpirun -np 1, error paths
# Binaries: .commbin/{taco,taco_gpu_tests} when present and loadable there (built elsewhere and
# carried), otherwise a build into $TACO_BUILD (default build-gpu) with the project's CMake.
# Environment: ITERS (timed iterations on NVLink, default 20), MAXB (largest size, default 1G).
# Files in $OUT (8 at most): log.txt summary.txt and one JSON per taco comm run.
# Expects .anchors/nccl_anchor.py (a copy of shared/anchors/nccl_anchor.py) for the anchor.
set -u -o pipefail
MODE=${1:-multi}
OUT=${OUT:-$PWD/comm-run-out}
mkdir -p "$OUT"
BUILD=${TACO_BUILD:-build-gpu}
ITERS=${ITERS:-20}
MAXB=${MAXB:-1G}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
LOG=$OUT/log.txt
SUMMARY=$OUT/summary.txt
: > "$LOG"
: > "$SUMMARY"
say() { echo "== $*" | tee -a "$LOG"; }
SECONDS=0

say "machine: $(nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>&1 | tr '\n' ';')"
say "topology: $(nvidia-smi topo -m 2>&1 | head -3 | tr -s ' \t' ' ' | tr '\n' '|')"
say "nvcc: $(nvcc --version 2>&1 | tail -1); mpirun: $(mpirun --version 2>&1 | head -1)"

# ---- binaries ----
TACO="" TESTS=""
if [ -x .commbin/taco ] && [ -x .commbin/taco_gpu_tests ]; then
  if ldd .commbin/taco | grep -q "libnccl.so.2 => not found"; then
    d=$(python3 -c "import glob, site; print((glob.glob(site.getsitepackages()[0] + '/nvidia/nccl/lib') or [''])[0])")
    [ -n "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
  fi
  missing=$(ldd .commbin/taco .commbin/taco_gpu_tests 2>&1 | grep "not found" | sort -u | tr -s ' \t' ' ')
  if [ -z "$missing" ] && .commbin/taco --version >> "$LOG" 2>&1; then
    TACO=.commbin/taco
    TESTS=.commbin/taco_gpu_tests
    say "carried binaries run here (NCCL: $(ldd $TACO | grep libnccl | tr -s ' \t' ' '))"
  else
    say "carried binaries do not load here ($missing): building"
  fi
fi
if [ -z "$TACO" ]; then
  if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTACO_TESTS=ON -DTACO_CUDA=ON \
           -DCMAKE_CUDA_ARCHITECTURES=90-real >> "$LOG" 2>&1 &&
         cmake --build "$BUILD" -j "$(nproc)" --target taco taco_gpu_tests >> "$LOG" 2>&1; }; then
    say "BUILD FAILED after ${SECONDS}s"
    grep -E "error" "$LOG" | head -30
    exit 1
  fi
  TACO=$BUILD/bin/taco
  TESTS=$BUILD/bin/taco_gpu_tests
  say "built in ${SECONDS}s: $(grep -E 'MPI_CXX_FOUND|TACO_HAVE_NCCL' "$LOG" | tr -s ' ' | tr '\n' ' ')"
fi

# ---- GPU tests of the comm code ----
say "taco_gpu_tests [comm]"
timeout 200 "$TESTS" "[comm]" --durations yes > /tmp/gpu_tests.log 2>&1
TEST_RC=$?
cat /tmp/gpu_tests.log >> "$LOG"
grep -E "FAILED|failed|with expansion|REQUIRE|CAPTURE|:[0-9]+: " /tmp/gpu_tests.log | head -30
grep -E " s: " /tmp/gpu_tests.log | head -12
say "taco_gpu_tests [comm] exit code $TEST_RC at ${SECONDS}s: $(grep -E 'test cases|All tests' /tmp/gpu_tests.log | tail -1)"
echo "gpu_tests [comm]: exit $TEST_RC; $(grep -E 'test cases|All tests' /tmp/gpu_tests.log | tail -1)" >> "$SUMMARY"

# One `taco comm` run: name, environment (VAR=value ... or -), arguments. The table goes to the
# log, the JSON to $OUT/name.json.
comm() {
  local name=$1 envs=$2
  shift 2
  [ "$envs" = - ] && envs=""
  say "$envs taco comm $* ($name)"
  env $envs timeout 150 "$TACO" comm "$@" --json "$OUT/$name.json" >> "$LOG" 2>&1
  local rc=$?
  echo "$name: exit $rc" >> "$SUMMARY"
  say "$name exit code $rc at ${SECONDS}s"
}

if [ "$MODE" = single ]; then
  comm g1 - -g 1 --coll all -d bf16,f16,f32,f8e4m3,f8e5m2 -b 1M -e 64M -f 8 -n 10 -w 2
  comm loop2 - --loopback 2 --coll all -b 64K -e 256M -f 4 --codec taco,fp8-g128,fp8-row -n 5 -w 1
  comm loop4 - --loopback 4 --algo one_shot,two_shot,ring -b 1M -e 64M -f 8 --codec taco,int8-g128-had \
       --pipeline 4 -d bf16,f32 -n 5 -w 1
  say "mpirun -np 1"
  timeout 60 mpirun -np 1 --allow-run-as-root "$TACO" comm -b 4M -e 4M --coll all --json "$OUT/mpi.json" >> "$LOG" 2>&1
  echo "mpi (1 process): exit $?" >> "$SUMMARY"
else
  NG=$(nvidia-smi -L | wc -l)
  say "anchor (nvlink): torchrun --nproc_per_node=$NG nccl_anchor.py"
  [ -f .anchors/nccl_anchor.py ] && TAG=nvlink timeout 90 torchrun --nproc_per_node="$NG" .anchors/nccl_anchor.py \
      2>> "$LOG" | tail -1 | tee -a "$SUMMARY"
  # Plain bf16 and taco (pipelined) per transport, 1 MiB .. 1 GiB.
  comm nvlink - -g "$NG" -b 1M -e "$MAXB" -f 2 -n "$ITERS" -w 5 --codec taco --pipeline 4 --transport nvlink
  # The same with the compressed messages as copy-engine transfers (--nccl-ce, docs/comm.md).
  comm nvlink_ce - -g "$NG" -b 1M -e "$MAXB" -f 2 -n "$ITERS" -w 5 --codec taco --pipeline 4 --nccl-ce \
       --transport nvlink
  comm shm NCCL_P2P_DISABLE=1 -g "$NG" -b 1M -e "$MAXB" -f 4 -n 5 -w 2 --codec taco --pipeline 4 --transport shm
  comm socket "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1" -g "$NG" -b 1M -e "$MAXB" -f 4 -n 3 -w 1 --codec taco \
       --pipeline 4 --transport socket
  # The algorithms at 256 MiB over NVLink, unpipelined and pipelined.
  comm algos - -g "$NG" -b 256M -e 256M --algo one_shot,two_shot,ring --codec taco,fp8-g128 -n 10 --transport nvlink
  comm algos_p4 - -g "$NG" -b 256M -e 256M --algo one_shot,two_shot,ring --codec taco,fp8-g128 --pipeline 4 -n 10 \
       --transport nvlink
  say "every collective at 64 MiB; blocking NCCL (-T 0) at 1..64 MiB"
  timeout 60 "$TACO" comm -g "$NG" --coll all -b 64M -e 64M --codec taco --pipeline 4 -n 10 --transport nvlink \
      >> "$LOG" 2>&1
  echo "colls: exit $?" >> "$SUMMARY"
  timeout 60 "$TACO" comm -g "$NG" -T 0 -b 1M -e 64M -f 8 --codec taco --transport nvlink >> "$LOG" 2>&1
  echo "blocking (-T 0): exit $?" >> "$SUMMARY"
  say "mpirun -np $NG"
  timeout 90 mpirun -np "$NG" --allow-run-as-root -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH "$TACO" comm -g 1 \
      --coll all_reduce,all_gather -b 1M -e 64M -f 8 --transport nvlink --json "$OUT/mpi.json" >> "$LOG" 2>&1
  echo "mpi ($NG processes): exit $?" >> "$SUMMARY"
  # Failure paths: ranks that disagree on the settings, and a stalled peer (fault injection).
  say "mpirun: settings mismatch"
  timeout 60 mpirun --allow-run-as-root -x LD_LIBRARY_PATH -np 1 "$TACO" comm -g 1 -b 1M -e 1M : \
      -np 1 "$TACO" comm -g 1 -b 2M -e 2M >> "$LOG" 2>&1
  echo "mismatch: exit $? (want 2)" >> "$SUMMARY"
  say "mpirun: stalled peer (TACO_COMM_STALL_RANK=1, -T 8)"
  t0=$SECONDS
  timeout 90 mpirun --allow-run-as-root -x LD_LIBRARY_PATH -x TACO_COMM_STALL_RANK=1 -x TACO_COMM_STALL_S=120 \
      -np "$NG" "$TACO" comm -g 1 -T 8 -b 1M -e 1M >> "$LOG" 2>&1
  echo "stalled peer: exit $? after $((SECONDS - t0)) s (want non-zero, ~10 s)" >> "$SUMMARY"
  grep -E "taco: error" "$LOG" | tail -4 | cut -c1-300 >> "$SUMMARY"
fi

# ---- short table ----
python3 - "$OUT" <<'EOF' | tee -a "$SUMMARY"
import glob, json, math, os, sys
out = sys.argv[1]
for p in sorted(glob.glob(os.path.join(out, "*.json"))):
    try:
        d = json.load(open(p))
    except Exception as e:
        print(f"{os.path.basename(p)}: unreadable ({e})"); continue
    rows = d["results"]
    wrong = sum((r["nwrong"] or 0) for r in rows)
    print(f"{os.path.basename(p)}: {len(rows)} rows, nranks {d['meta']['nranks']}, NCCL {d['meta']['nccl_version']}, "
          f"#wrong {wrong}")
    sp = sorted((r["size"], r["speedup"]) for r in rows
                if r["collective"] == "all_reduce" and r["codec"] != "none" and r["speedup"])
    cross = next((s for i, (s, v) in enumerate(sp) if all(x >= 1 for _, x in sp[i:])), None)
    if sp: print(f"  all_reduce crossover (speedup >= 1 from here on): {cross}")
    g = lambda v, f: "-" if v is None else format(v, f)
    for r in rows:
        if r["size"] >= (64 << 20) or len(rows) <= 12:
            print(f"  {r['collective']:>14} {r['size'] >> 20:>5}M {r['type']:>8} {r['codec']:>8} {r['algorithm']:>8} "
                  f"p{r['pipeline']} {r['time_us']:9.1f}us busbw {r['busbw']:7.2f} x{g(r['speedup'], '.2f')} "
                  f"rel {g(r['rel_l2'], '.3g')} hid {g(r['hidden_codec_pct'], '.0f')} wrong {r['nwrong']}")
EOF
say "done in ${SECONDS}s"
cat "$SUMMARY"
exit $TEST_RC
