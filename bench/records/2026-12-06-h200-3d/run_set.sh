#!/usr/bin/env bash
# The 3D training record (#40) on one GPU: paired 1000-step runs at --tp-sim 2 --pp-sim 2
# --dp-sim 2 --micro-batches 4, PARALLEL (default 8) at once per sweep under MPS, as one or more
# sweeps into one directory /tmp/NAME. MODEL: empty for the 50.7M Llama of
# 2026-12-03-h200-train-1000, `small` for a 24M one with half the sequence.
#
# A set may outlast one device call (600 s): the sweeps start in their own process session, so they
# run on after the call returns while the machine is held; a second call with ATTACH=1 and the
# same NAME, made at once (the machine goes back after 30 s idle), waits for them and collects.
# Each call waits at most WAIT seconds (default 560) and then writes what there is.
# usage: [MODEL=small] [PARALLEL=8] [SWEEP_LIMIT=1200] [WAIT=560] [TESTS='cmd'] \
#          bash run_set.sh NAME 'SWEEP_ARGS' ['SWEEP_ARGS' ...]
#        [WAIT=560] ATTACH=1 bash run_set.sh NAME
#   each SWEEP_ARGS is what goes before `--` of one `python -m taco.train.sweep` (e.g.
#   '--variants none --seeds 1 --baseline-seeds 1,2,3 --null-pair'); they run at the same time.
#   TESTS: a command run beside the sweeps (default: the package's CUDA tests).
# Expects .exp/_C.cpython-312-x86_64-linux-gnu.so.xz (this tree's extension, CPython 3.12, sm_90), carried.
# Writes $OUT/NAME.tgz (every run's train_log.json, metrics.jsonl, train.out), $OUT/NAME.txt
# (the paired summary, at the last step every run reached when some have not finished), env.
set -uo pipefail
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=$PWD/python PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
name=$1; shift
O=$OUT; t0=$(date +%s); steps=${STEPS:-1000}; R=/tmp/$name
stamp() { echo "== $1 at $(( $(date +%s) - t0 ))s"; }
running() { pgrep -f "taco.train.sweep --out $R " > /dev/null; }
if [ -z "${ATTACH:-}" ]; then
  case ${MODEL:-} in
    small) MODEL="--layers 8 --hidden 512 --heads 8 --kv-heads 4 --ffn 1408 --seq 256 --batch 32";;
    "") MODEL="--layers 8 --hidden 768 --heads 12 --kv-heads 4 --ffn 2048 --seq 512 --batch 32";;
  esac
  xz -dc .exp/_C.cpython-312-x86_64-linux-gnu.so.xz > python/taco/_C.cpython-312-x86_64-linux-gnu.so || exit 1
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    python3 -c 'import sys,torch;print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
    python3 -c 'import taco._C as c; print("taco", c.version, c.git_commit)'
    [ -f .exp/COMMIT ] && echo "built from: $(cat .exp/COMMIT)"; } > $O/env_$name.txt 2>&1
  cat $O/env_$name.txt
  nvidia-cuda-mps-control -d && echo "MPS on"
  mkdir -p $R
  stamp sweep
  i=0
  for sw in "$@"; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    setsid timeout ${SWEEP_LIMIT:-1200} python3 -m taco.train.sweep --out $R $sw --parallel ${PARALLEL:-8} -- \
      --tp-sim 2 --pp-sim 2 --dp-sim 2 --micro-batches 4 --device cuda --arch llama $MODEL \
      --steps $steps --warmup $((steps / 10)) --lr 1.5e-3 --threads 2 \
      --eval-every 100 --eval-batches 16 --log-every 50 --data-bytes 64000000 > $R.sweep$i.log 2>&1 < /dev/null &
  done
  # A run that fails in its first minutes stops the set: the device time is not spent on a broken set.
  for _ in $(seq 1 30); do
    sleep 5
    bad=$(grep -l "Traceback\|Error:" $R/*/seed*/train.out 2>/dev/null | head -1)
    if [ -n "$bad" ]; then echo "FAILED: $bad"; tail -30 "$bad"; pkill -f taco.train; break; fi
  done
  TESTS=${TESTS:-'cd tests/package && timeout 200 python3 -m pytest -q -k "cuda" test_codec.py test_dist.py test_plans.py test_codec_lowbit.py 2>&1 | tail -5'}
  [ -z "${bad:-}" ] && (eval "$TESTS") > $O/tests_$name.txt 2>&1
  stamp tests; tail -8 $O/tests_$name.txt 2>/dev/null
fi
while running && [ $(( $(date +%s) - t0 )) -lt ${WAIT:-560} ]; do sleep 5; done
running && echo "still running: collected what there is (call again with ATTACH=1)"
stamp summary
cp $R.sweep*.log $O/ 2>/dev/null
grep -h "^done\|Error" $R/*/seed*/train.out | head -20
tail -n 2 $R/*/seed*/train.out | cut -c1-200
(cd /tmp && tar czf $O/$name.tgz --exclude='*.h5' $name)
python3 -m taco.train.sweep --summarize $R > $O/$name.txt 2>&1 || {
  last=$(cat $R/*/seed*/metrics.jsonl | python3 -c 'import sys,json,collections
c=collections.Counter(json.loads(l)["step"] for l in sys.stdin if "\"val\"" in l); print(max([s for s,n in c.items() if n==max(c.values())] or [0]))')
  echo "not all finished: compared at step $last" >> $O/$name.txt
  python3 -m taco.train.sweep --summarize $R --at-step $last >> $O/$name.txt 2>&1; }
cat $O/$name.txt
stamp done
