#!/usr/bin/env bash
# #39 kernel goals: same-run A/B of the transformed block-scaled encodes before (old: HEAD of the
# session) and after (new) they walk whole groups and prefetch into L2 like TACO's
# (tuning::encode_prefetches), in one device call: the new GPU tests first (TESTS_ARGS, default
# every case but the collectives': every codec kernel against the CPU codec), then `taco bench`
# rounds old, new, old, new (each run checks its GPU bytes against its CPU codec) at the issue's
# sizes (256 MiB, 1 GiB) with the same-run copy; then the new binary's rows of every op the step
# model charges (model_rows.json).
# Expects .exp_ab/{taco_old,taco_new,taco_gpu_tests}.xz: sm_90 SASS (90-real, fatbin compressed
# for size), built on the project machine from a worktree of each side, carried.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
O=/tmp/abo; t0=$(date +%s); B=/tmp/abbin; mkdir -p $B $O
pack() { tar czf $OUT/ab.tgz -C $O .; }
stamp() { echo "== $1 at $(( $(date +%s) - t0 ))s"; }
for f in taco_old taco_new taco_gpu_tests; do
  [ -f .exp_ab/$f.xz ] && xz -dc .exp_ab/$f.xz > $B/$f && chmod +x $B/$f
done
OLD=$B/taco_old; NEW=$B/taco_new
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; $OLD --version; $NEW --version; } > $O/env.txt 2>&1
cat $O/env.txt
if [ -x $B/taco_gpu_tests ]; then
  stamp gpu-tests
  timeout ${TESTS_LIMIT:-200} $B/taco_gpu_tests "${TESTS_ARGS:-~[comm]}" > $O/gpu_tests.txt 2>&1; echo "gpu tests rc=$?"; tail -3 $O/gpu_tests.txt
  grep -B3 -A14 "FAILED" $O/gpu_tests.txt | head -40
fi
pack
stamp bench
V=${VARIANTS:-int3-g128-had,int2-g128-had,int3-g32-had,int2-g64-had,int2-g32,int4-g32-had,int8-g128-had,taco,nvfp4}
CMD="bench -v $V --ops encode,decode --impl fused --sizes ${SIZES:-256M,1G} --no-batch --min-samples 5 --max-noise 5 --min-time 0.01 --timeout 0.3"
echo "taco $CMD   (rounds: ${ROUNDS:-2} x (old new))" > $O/bench_cmd.txt
for round in $(seq 1 ${ROUNDS:-2}); do
  for tag in old new; do
    X=$OLD; [ $tag = new ] && X=$NEW
    timeout 120 $X $CMD --json $O/bench_${tag}_$round.json > $O/bench_${tag}_$round.md 2>&1
    echo "bench $tag $round rc=$? verify-failures=$(grep -ciE 'mismatch|VERIFICATION FAILED|differ' $O/bench_${tag}_$round.md)"
  done
  pack
done
# The GPU bytes against the CPU codec at sizes up to 16 MiB (taco bench verifies those; a size
# must be a whole number of its 4096-column rows).
VCMD="bench -v $V --ops encode --impl fused --sizes 16M,12M,3M,1M --no-batch --min-samples 3 --min-time 0.001 --timeout 0.1"
echo "taco $VCMD   (new: verification)" >> $O/bench_cmd.txt
timeout 100 $NEW $VCMD > $O/verify_new.md 2>&1
echo "verify rc=$? identical=$(grep -c ': identical' $O/verify_new.md) failures=$(grep -c 'VERIFICATION FAILED' $O/verify_new.md)"
pack
# The step model's input for the winner: every op `taco model` charges, at the TP message sizes.
stamp model-rows
[ "${MODEL_ROWS:-1}" = 1 ] && {
MCMD="bench -v ${MODEL_VARIANTS:-int3-g128-had,int2-g128-had,taco} --ops encode,encode_ef,decode,decode_reduce,decode_reduce_encode --impl fused --sizes 16M,64M,256M --no-batch --min-samples 5 --max-noise 5 --min-time 0.01 --timeout 0.3"
echo "taco $MCMD   (new)" >> $O/bench_cmd.txt
timeout 100 $NEW $MCMD --json $O/model_rows.json > $O/model_rows.md 2>&1
echo "model rows rc=$? verify-failures=$(grep -ciE 'mismatch|VERIFICATION FAILED|differ' $O/model_rows.md)"
pack; }
stamp compare
python3 bench/records/2026-12-04-h200-refactor-ab/ab_compare.py $O > $O/ab.txt; tail -1 $O/ab.txt
grep -h "| encode \|| decode " $O/bench_new_2.md | awk -F'|' '{print $2, $3, $6, $14}' | head -40
stamp done
pack
