#!/usr/bin/env bash
# call 7 (#31 review mend): same-run A/B of the whole refactor, previous taco (.exp/old) vs new (.exp/bin): bench rounds ABAB;
# study: new --gpu vs new CPU (every file but results.json's provenance), and previous --gpu vs new --gpu
set -uo pipefail
export NCCL_NVLS_ENABLE=0
O=$OUT; t0=$(date +%s); OLD=$PWD/.exp/premend/taco; NEW=$PWD/.exp/bin/taco
stamp() { echo "== $1 at $(( $(date +%s) - t0 ))s"; }
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; $OLD --version; $NEW --version; nvcc --version 2>/dev/null | tail -1; } > $O/env.txt 2>&1
CMD="bench -v taco,fp8-g128,mxfp8,fp8-row,fp8-tensor,fp8-col,nvfp4,mxfp4,int4-g32,int4-g32-had --ops encode,decode,decode_reduce,decode_reduce_encode --impl fused --sizes 1M,64M,256M --no-batch --min-samples 5 --max-noise 5 --min-time 0.01 --timeout 0.3"
echo "taco $CMD   (rounds: premend new premend new)" > $O/bench_cmd.txt
for round in 1 2; do
  for tag in old new; do
    B=$OLD; [ $tag = new ] && B=$NEW
    timeout 170 $B $CMD --json $O/bench_${tag}_$round.json > $O/bench_${tag}_$round.md 2>&1; echo "bench $tag $round rc=$? verify-failures=$(grep -ciE 'mismatch|differ|FAIL' $O/bench_${tag}_$round.md)"
  done
done
stamp study
ARGS="study traces/samples --variants taco,fp8-g128,fp8-row,fp8-col,fp8-tensor,nvfp4,mxfp4,int4-g32,int4-g32-had,ef:taco --collectives one_shot,two_shot,ring,all_gather,reduce_scatter --tp 2,4"
echo "taco $ARGS [--gpu] --out <dir>" > $O/study_cmd.txt
timeout 120 $NEW $ARGS --gpu --out $O/s_new_gpu > $O/s_new_gpu.txt 2>&1; echo "new --gpu rc=$?"
timeout 120 $NEW $ARGS --out $O/s_new_cpu > $O/s_new_cpu.txt 2>&1; echo "new cpu rc=$?"
for f in results.csv collectives.csv feedback.csv histograms.csv pareto.csv; do
  cmp -s $O/s_new_gpu/$f $O/s_new_cpu/$f && r1=identical || r1=DIFFER
  echo "$f ($(wc -l < $O/s_new_gpu/$f) lines): new gpu vs new cpu $r1"
done
rm -rf $O/s_new_cpu $O/s_new_gpu
stamp compare
python3 .exp/ab_compare.py $O > $O/ab.txt; tail -1 $O/ab.txt
awk 'NR>1 && ($6 > 1.03 || $6 < 0.97)' $O/ab.txt | head -40
stamp done
(cd $O && tar czf /tmp/call7.tgz . && rm -rf ./* && mv /tmp/call7.tgz .)
