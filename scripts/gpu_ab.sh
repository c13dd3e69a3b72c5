#!/usr/bin/env bash
# A/B of two `taco` builds on the GPU machine, in one device call: B's GPU tests and byte checks
# first, then rounds A, B, A, B of the same cold `taco bench` rows, and a table of best-of-rounds
# GB/s, B/A and the share of the same-run copy. Every step has a time limit, so a slow or noisy
# measurement cannot eat the call (the bench's defaults, 15 s per row until 0.5% noise, can).
#
#   scripts/gpu_ab.sh A_TACO B_TACO [B_TESTS]
#
# A_TACO, B_TACO: taco binaries (built elsewhere for sm_90 and carried, or built there); B_TESTS:
# B's taco_gpu_tests, run first when given (the A/B still runs if they fail; the table says so).
# Environment: VARIANTS (default taco,fp8-g128,mxfp8), SIZES (8M,256M), OPS
# (encode,decode,decode_reduce), ROUNDS (2), ROW_TIMEOUT (seconds per bench row, 1.2), OUT.
# Files in $OUT: gpu_tests.log verify.txt ab.txt ab.md.
set -u -o pipefail
[ $# -ge 2 ] || { echo "usage: scripts/gpu_ab.sh A_TACO B_TACO [B_TESTS]" >&2; exit 2; }
A=$1 B=$2 TESTS=${3:-}
OUT=${OUT:-$PWD/gpu-ab-out}
mkdir -p "$OUT"
VARIANTS=${VARIANTS:-taco,fp8-g128,mxfp8}
SIZES=${SIZES:-8M,256M}
OPS=${OPS:-encode,decode,decode_reduce}
ROUNDS=${ROUNDS:-2}
ROW_TIMEOUT=${ROW_TIMEOUT:-1.2}
export NCCL_NVLS_ENABLE=0
SECONDS=0
TEST_RC=-
if [ -n "$TESTS" ]; then
  timeout 180 "$TESTS" > "$OUT/gpu_tests.log" 2>&1
  TEST_RC=$?
  echo "== B gpu tests: exit $TEST_RC, $(grep -E 'All tests|test cases' "$OUT/gpu_tests.log" | tail -1) (${SECONDS}s)"
  grep -E "FAILED|with expansion" -A3 "$OUT/gpu_tests.log" | head -20
fi
# B's own byte checks (GPU vs CPU, fused vs unfused) run on sizes <= 16 MiB.
timeout 90 "$B" bench -v "$VARIANTS" --sizes 16M --ops "$OPS" --impl fused,unfused --no-batch --min-time 0.002 \
  --timeout 0.5 --max-noise 50 > "$OUT/verify.txt" 2>&1
echo "== B byte checks: exit $? (${SECONDS}s)"
grep -iE "identical|differ|mismatch|error" "$OUT/verify.txt" | head -12
: > "$OUT/ab.txt"
for i in $(seq "$ROUNDS"); do
  for side in A B; do
    bin=$A
    [ $side = B ] && bin=$B
    timeout 150 "$bin" bench -v "$VARIANTS" --sizes "$SIZES" --ops "$OPS" --impl fused --no-batch --no-verify \
      --min-samples 10 --min-time 0.02 --max-noise 1 --timeout "$ROW_TIMEOUT" -q 2>&1 |
      grep -E "^\| [a-z0-9-]+ \| (encode|decode)" | sed "s/^/$side /" >> "$OUT/ab.txt"
  done
done
echo "== A/B: $ROUNDS rounds (${SECONDS}s)"
python3 - "$OUT" "$TEST_RC" <<'EOF' | tee "$OUT/ab.md"
import collections, os, sys
out, test_rc = sys.argv[1], sys.argv[2]
best = collections.defaultdict(dict)
for line in open(os.path.join(out, "ab.txt")):
    side, rest = line.split(" ", 1)
    f = [x.strip() for x in rest.split("|")]
    # | variant | op | impl | config | size | mode | median | min | max | noise | samples | GB/s | % copy |
    if len(f) < 14 or f[3] != "fused" or f[6] != "cold":
        continue
    key = (f[1], f[2], f[5])
    gbs, pct = float(f[12]), float(f[13])
    if gbs > best[key].get(side, (0, 0))[0]:
        best[key][side] = (gbs, pct)
print(f"B's GPU tests: exit {test_rc}")
print("| variant | op | size | A GB/s | B GB/s | B/A | A % copy | B % copy |")
print("|---|---|---|---:|---:|---:|---:|---:|")
for (v, op, size), d in best.items():
    if "A" in d and "B" in d:
        (a, ap), (b, bp) = d["A"], d["B"]
        print(f"| {v} | {op} | {size} | {a:.0f} | {b:.0f} | {b / a:.2f} | {ap:.1f} | {bp:.1f} |")
EOF
