#!/usr/bin/env bash
# After the training set (#39), on the same GPU alone: `taco bench` of the codecs the set trained
# (the sbf16 int3 / int2 forms of the mixes beside the sf32 presets): encode / decode at 256 MiB and
# 1 GiB as a share of the same-run copy; every op the step model charges at TP message sizes
# (model_rows.json, `taco model --bench`); and the GPU bytes against the CPU codec (taco bench
# verifies sizes up to 16 MiB).
# Expects .exp_ab/taco_new.xz: the taco CLI of this tree's kernels (sm_90), carried.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
O=$OUT; B=/tmp/wbin; mkdir -p $B
xz -dc .exp_ab/taco_new.xz > $B/taco && chmod +x $B/taco || exit 1
T=$B/taco
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; $T --version; } > $O/bench_env.txt 2>&1
V=${VARIANTS:-int3:g128:had:sbf16,int2:g128:had:sbf16,int3-g128-had,int2-g128-had}
C1="bench -v $V --ops encode,decode --impl fused --sizes 256M,1G --no-batch --min-samples 5 --max-noise 5 --min-time 0.01 --timeout 0.3"
C2="bench -v $V --ops encode,encode_ef,decode,decode_reduce,decode_reduce_encode --impl fused --sizes 16M,64M,256M --no-batch --min-samples 5 --max-noise 5 --min-time 0.01 --timeout 0.3"
C3="bench -v $V --ops encode,decode --impl fused --sizes 16M,12M,3M,1M --no-batch --min-samples 3 --min-time 0.001 --timeout 0.1"
printf 'taco %s\ntaco %s\ntaco %s\n' "$C1" "$C2" "$C3" > $O/bench_cmd.txt
timeout 100 $T $C1 --json $O/bench_throughput.json > $O/bench_throughput.md 2>&1; echo "throughput rc=$?"
timeout 150 $T $C2 --json $O/model_rows.json > $O/model_rows.md 2>&1; echo "model rows rc=$?"
timeout 100 $T $C3 > $O/verify.md 2>&1
echo "verify rc=$? identical=$(grep -c ': identical' $O/verify.md) failures=$(grep -c 'VERIFICATION FAILED' $O/verify.md)"
grep -h " encode \| decode \|^copy" $O/bench_throughput.md | cut -c1-130
