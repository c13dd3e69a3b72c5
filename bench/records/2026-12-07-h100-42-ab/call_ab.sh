#!/usr/bin/env bash
# #42 item 5: same-run A/B of the whole change, d478a3c (old) against HEAD (new), in one device call:
# taco bench rounds old, new, old, new (every run verifies its GPU bytes against its CPU codec); the
# study with --gpu (new) against the CPU (new) and the old binary's --gpu; HEAD's GPU tests when
# .exp_ab/taco_gpu_tests.xz was carried (the 64 MiB carry takes two of the three binaries).
# Expects .exp_ab/{taco_old,taco_new}.xz: sm_90 SASS (90-real, fatbin compressed for size), built
# on the project machine from `git archive` of each commit, carried.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# Outputs gather in /tmp/abo and are re-packed into $OUT/ab.tgz after every phase, so a call cut
# short still brings back what it finished.
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
  timeout ${TESTS_LIMIT:-220} $B/taco_gpu_tests > $O/gpu_tests.txt 2>&1; echo "gpu tests rc=$?"; tail -3 $O/gpu_tests.txt
  grep -B3 -A14 "FAILED" $O/gpu_tests.txt | head -50
fi
pack
stamp bench
CMD="bench -v taco,fp8-g128,mxfp8,fp8-row,fp8-tensor,fp8-col,nvfp4,mxfp4,int4-g32,int4-g32-had --ops encode,decode,decode_reduce,decode_reduce_encode --impl fused --sizes 64M,256M --no-batch --min-samples 5 --max-noise 5 --min-time 0.01 --timeout 0.3"
echo "taco $CMD   (rounds: ${ROUNDS:-2} x (old new))" > $O/bench_cmd.txt
for round in $(seq 1 ${ROUNDS:-2}); do
  for tag in old new; do
    X=$OLD; [ $tag = new ] && X=$NEW
    timeout 80 $X $CMD --json $O/bench_${tag}_$round.json > $O/bench_${tag}_$round.md 2>&1
    echo "bench $tag $round rc=$? verify-failures=$(grep -ciE 'mismatch|VERIFICATION FAILED' $O/bench_${tag}_$round.md)"
  done
done
pack
stamp study
ARGS="study traces/samples --variants taco,fp8-g128,fp8-row,fp8-col,fp8-tensor,nvfp4,mxfp4,int4-g32,int4-g32-had,ef:taco --collectives one_shot,two_shot,ring,all_gather,reduce_scatter --tp 2,4"
echo "taco $ARGS [--gpu] --out <dir>" > $O/study_cmd.txt
timeout 100 $NEW $ARGS --gpu --out /tmp/s_new_gpu > $O/s_new_gpu.txt 2>&1; echo "new --gpu rc=$?"
timeout 100 $NEW $ARGS --out /tmp/s_new_cpu > $O/s_new_cpu.txt 2>&1; echo "new cpu rc=$?"
[ "${OLD_STUDY:-1}" = 1 ] && { timeout 100 $OLD $ARGS --gpu --threads 1 --out /tmp/s_old_gpu > $O/s_old_gpu.txt 2>&1; echo "old --gpu rc=$?"; }
for f in results.csv collectives.csv feedback.csv histograms.csv pareto.csv; do
  cmp -s /tmp/s_new_gpu/$f /tmp/s_new_cpu/$f && r1=identical || r1=DIFFER
  cmp -s /tmp/s_old_gpu/$f /tmp/s_new_gpu/$f && r2=identical || r2=DIFFER
  echo "$f ($(wc -l < /tmp/s_new_gpu/$f) lines): new gpu vs new cpu $r1; old gpu vs new gpu $r2"
done | tee $O/study_ab.txt
# GpuBf16 (new in HEAD; the old binary has no bf16 GPU codec): --gpu against the CPU, new only.
BARGS="study traces/samples --variants bf16,ef:bf16 --collectives one_shot,two_shot,ring,all_gather,reduce_scatter --tp 2,4"
echo "taco $BARGS [--gpu] --out <dir>" >> $O/study_cmd.txt
timeout 60 $NEW $BARGS --gpu --out /tmp/b_gpu > $O/b_gpu.txt 2>&1; echo "bf16 --gpu rc=$?"
timeout 60 $NEW $BARGS --out /tmp/b_cpu > $O/b_cpu.txt 2>&1; echo "bf16 cpu rc=$?"
for f in results.csv collectives.csv feedback.csv; do
  cmp -s /tmp/b_gpu/$f /tmp/b_cpu/$f && r=identical || r=DIFFER
  echo "bf16 $f ($(wc -l < /tmp/b_gpu/$f) lines): new gpu vs new cpu $r"
done | tee -a $O/study_ab.txt
# GpuTahQuant (new in HEAD): the study --gpu against the CPU, and taco bench's own check of the
# GPU bytes against the CPU codec (encode, encode_ef) with its timings.
TARGS="study traces/samples --variants tahquant,ef:tahquant,tahquant:tile=32:hi=6:lo=6 --collectives one_shot,two_shot,ring,all_gather,reduce_scatter --tp 2,4"
echo "taco $TARGS [--gpu] --out <dir>" >> $O/study_cmd.txt
timeout 90 $NEW $TARGS --gpu --out /tmp/t_gpu > $O/t_gpu.txt 2>&1; echo "tahquant --gpu rc=$?"
timeout 90 $NEW $TARGS --out /tmp/t_cpu > $O/t_cpu.txt 2>&1; echo "tahquant cpu rc=$?"
for f in results.csv collectives.csv feedback.csv; do
  cmp -s /tmp/t_gpu/$f /tmp/t_cpu/$f && r=identical || r=DIFFER
  echo "tahquant $f ($(wc -l < /tmp/t_gpu/$f) lines): new gpu vs new cpu $r"
done | tee -a $O/study_ab.txt
TB="bench -v tahquant,tahquant:tile=32:hi=6:lo=6 --ops encode,encode_ef,decode,decode_reduce,decode_reduce_encode --impl fused --sizes 16M,64M --no-batch --min-samples 5 --max-noise 5 --min-time 0.01 --timeout 0.3"
echo "taco $TB" >> $O/bench_cmd.txt
timeout 100 $NEW $TB --json $O/bench_tahquant.json > $O/bench_tahquant.md 2>&1
echo "bench tahquant rc=$? verify-failures=$(grep -ciE 'mismatch|VERIFICATION FAILED' $O/bench_tahquant.md) identical=$(grep -c identical $O/bench_tahquant.md)"
pack
stamp compare
python3 bench/records/2026-12-04-h200-refactor-ab/ab_compare.py $O > $O/ab.txt; tail -1 $O/ab.txt
awk 'NR>1 && ($6 > 1.03 || $6 < 0.97)' $O/ab.txt | head -30
stamp done
pack
