#!/usr/bin/env bash
# One device call of the sub-4-bit training record (#39): the package's CUDA tests of the new codecs
# beside one set of paired runs under MPS (the 50.7M Llama of 2026-12-03-h200-train-1000, 4
# simulated TP ranks, STEPS steps of its schedule).
# usage: STEPS=500 [THROUGHPUT=v1,v2] bash run_set.sh NAME "CANDIDATES" "SEEDS" "BASELINE_SEEDS" [--null-pair] [--tests]
# Expects .exp/tree (HEAD's python/ and tests/package) and .exp/_C*.so (CPython 3.12, sm_90), carried.
# Writes $OUT/NAME.tgz (every run's train_log.json, metrics.jsonl, train.out), $OUT/NAME.txt, env.
set -uo pipefail
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T=$PWD/.exp/tree
export PYTHONPATH=$T/python PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
name=$1 cands=$2 seeds=$3 bseeds=$4; shift 4
null=""; tests=0
for x in "$@"; do case $x in --null-pair) null=--null-pair;; --tests) tests=1;; esac; done
O=$OUT; t0=$(date +%s); steps=${STEPS:-500}
stamp() { echo "== $1 at $(( $(date +%s) - t0 ))s"; }
cp .exp/_C*.so $T/python/taco/
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import sys,torch;print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
  python3 -c 'import taco._C as c; print("taco", c.version, c.git_commit)'; } > $O/env_$name.txt 2>&1
cat $O/env_$name.txt
if [ -n "${THROUGHPUT:-}" ]; then  # the GPU alone: before the sweep
  stamp throughput
  timeout 120 python3 bench/records/2026-12-06-h100-lowbit/throughput.py --variants "$THROUGHPUT" --sizes 256M,1G \
    --json $O/throughput.json 2>&1 | tee $O/throughput.txt
fi
stamp sweep
nvidia-cuda-mps-control -d && echo "MPS on"
R=/tmp/$name
timeout ${SWEEP_LIMIT:-530} python3 -m taco.train.sweep --out $R --variants "$cands" --seeds "$seeds" --baseline-seeds "$bseeds" $null \
  --parallel 16 -- --tp-sim 4 --device cuda --arch llama --layers 8 --hidden 768 --heads 12 --kv-heads 4 \
  --ffn 2048 --seq 512 --batch 32 --steps $steps --warmup $((steps / 10)) --lr 1.5e-3 --eval-every 100 --eval-batches 16 \
  --log-every 50 --sample-every 100 --data-bytes 64000000 > $O/$name.sweep.log 2>&1 &
SW=$!
if [ $tests = 1 ]; then  # the codecs' CUDA == CPU tests beside the sweep (they time nothing)
  (cd $T/tests/package && timeout 240 python3 -m pytest -q -k "cuda or gpu" test_codec_lowbit.py test_codec.py test_lowrank.py 2>&1 | tail -8) > $O/pkg_tests.txt 2>&1
  stamp tests; cat $O/pkg_tests.txt
fi
wait $SW; echo "sweep rc=$?"
stamp summary
python3 -m taco.train.sweep --summarize $R > $O/$name.txt 2>&1 || {
  last=$(cat $R/*/seed*/metrics.jsonl | python3 -c 'import sys,json,collections
c=collections.Counter(json.loads(l)["step"] for l in sys.stdin if "\"val\"" in l); print(max([s for s,n in c.items() if n==max(c.values())] or [0]))')
  echo "not all finished: compared at step $last" >> $O/$name.txt
  python3 -m taco.train.sweep --summarize $R --at-step $last >> $O/$name.txt 2>&1; }
grep -h "^done\|Error\|error" $R/*/seed*/train.out | head -20
(cd /tmp && tar czf $O/$name.tgz --exclude='*.h5' $name)
cat $O/$name.txt
stamp done
