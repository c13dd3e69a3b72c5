#!/usr/bin/env bash
# A paired training set on one GPU (the device machine): `python -m taco.train.sweep` with all runs
# at once under MPS (PARALLEL: default 13 on a card over 100 GB, else 10; the default model takes
# about 7.5 GB a run), with a test command beside them.
#
# A set may outlast one device call (600 s): the sweep starts in its own process session and runs
# on after the call returns while the machine is held; a second call with ATTACH=1 and the same
# NAME, made at once (the machine goes back after 30 s idle), waits for it and collects. Each call
# waits at most WAIT seconds (default 560), writes a snapshot of the runs every minute (a call cut
# off still returns the metrics so far) and then writes what there is.
# usage: [TRAIN_ARGS='...'] [STEPS=1000] [PARALLEL=N] [WAIT=560] [TESTS='cmd'] \
#          bash scripts/train_set.sh NAME SWEEP_ARGS...
#        [WAIT=560] ATTACH=1 bash scripts/train_set.sh NAME
#   SWEEP_ARGS: what goes before `--` of the sweep (--variants ... --seeds ... --null-pair).
#   TRAIN_ARGS: the trainer's model and layout (default: the 50.7M Llama of
#   bench/records/2026-12-03-h200-train-1000 at --tp-sim 4); STEPS, the schedule (warm-up STEPS/10).
#   TESTS: run beside the sweep (default: the package's CUDA tests of the low-bit codecs).
# Expects .exp/_C.cpython-312-x86_64-linux-gnu.so.xz (the extension, CPython 3.12, sm_90), carried.
# Writes $OUT/NAME.tgz (every run's train_log.json, metrics.jsonl, train.out), $OUT/NAME.txt
# (the paired summary; at the last step every run reached when some have not finished), env, tests.
set -uo pipefail
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=$PWD/python PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
name=$1; shift
O=$OUT; t0=$(date +%s); steps=${STEPS:-1000}; R=/tmp/$name
stamp() { echo "== $1 at $(( $(date +%s) - t0 ))s"; }
running() { pgrep -f "taco.train.sweep --out $R " > /dev/null; }
if [ -z "${ATTACH:-}" ]; then
  xz -dc .exp/_C.cpython-312-x86_64-linux-gnu.so.xz > python/taco/_C.cpython-312-x86_64-linux-gnu.so || exit 1
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    python3 -c 'import sys,torch;print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
    python3 -c 'import taco._C as c; print("taco", c.version, c.git_commit)'
    [ -f .exp/COMMIT ] && echo "extension built from: $(cat .exp/COMMIT)"
    echo "tree: $(git rev-parse --short HEAD 2>/dev/null) $(git status --short 2>/dev/null | wc -l) changed files"; } > $O/env_$name.txt 2>&1
  cat $O/env_$name.txt
  mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
  par=${PARALLEL:-$([ "${mem:-0}" -gt 100000 ] && echo 13 || echo 10)}
  nvidia-cuda-mps-control -d && echo "MPS on; $par runs at once"
  mkdir -p $R
  stamp sweep
  TRAIN_ARGS=${TRAIN_ARGS:-"--tp-sim 4 --arch llama --layers 8 --hidden 768 --heads 12 --kv-heads 4 --ffn 2048 --seq 512 --batch 32 --lr 1.5e-3"}
  # shellcheck disable=SC2086
  setsid timeout ${SWEEP_LIMIT:-1500} python3 -m taco.train.sweep --out $R "$@" --parallel $par -- \
    $TRAIN_ARGS --device cuda --steps $steps --warmup $((steps / 10)) --threads 1 \
    --eval-every 100 --eval-batches 16 --log-every 50 --sample-every 100 --data-bytes 64000000 \
    > $R.sweep.log 2>&1 < /dev/null &
  # A run that fails in its first minutes stops the set: the device time is not spent on a broken set.
  for _ in $(seq 1 24); do
    sleep 5
    bad=$(grep -l "Traceback\|Error:" $R/*/seed*/train.out 2>/dev/null | head -1)
    if [ -n "$bad" ]; then echo "FAILED: $bad"; tail -30 "$bad"; pkill -f taco.train; break; fi
  done
  TESTS=${TESTS:-'cd tests/package && timeout 200 python3 -m pytest -q -k cuda test_codec_lowbit.py 2>&1 | tail -5'}
  [ -z "${bad:-}" ] && (eval "$TESTS") > $O/tests_$name.txt 2>&1
  stamp tests; tail -5 $O/tests_$name.txt 2>/dev/null
fi
# Every minute a snapshot of the runs goes to $OUT: a call cut off by the session's device time
# still returns the metrics so far (then `taco.train.sweep --summarize DIR --at-step N` here).
n=0
while running && [ $(( $(date +%s) - t0 )) -lt ${WAIT:-560} ]; do
  sleep 5; n=$((n + 1))
  [ $((n % 12)) = 0 ] && (cd /tmp && tar czf $O/$name.tgz --exclude='*.h5' $name)
done
running && echo "still running: collected what there is (call again with ATTACH=1)"
stamp summary
cp $R.sweep.log $O/$name.sweep.log 2>/dev/null
grep -h "^done\|Error" $R/*/seed*/train.out | head -20
tail -qn 1 $R/*/seed*/train.out | cut -c1-160
(cd /tmp && tar czf $O/$name.tgz --exclude='*.h5' $name)
python3 -m taco.train.sweep --summarize $R > $O/$name.txt 2>&1 || {
  last=$(cat $R/*/seed*/metrics.jsonl | python3 -c 'import sys,json,collections
c=collections.Counter(json.loads(l)["step"] for l in sys.stdin if "\"val\"" in l); print(max([s for s,n in c.items() if n==max(c.values())] or [0]))')
  echo "not all finished: compared at step $last" >> $O/$name.txt
  python3 -m taco.train.sweep --summarize $R --at-step $last >> $O/$name.txt 2>&1; }
cat $O/$name.txt
stamp done
