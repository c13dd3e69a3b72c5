#!/usr/bin/env bash
# Capture run for the GPU machine (the device `run` tool): trains a byte-level GPT-2-style model
# from scratch at TP=2 on this Python's own library sources, captures the tensors the TP
# collectives carry at an early, a middle and the last step, and leaves in $OUT:
#   train_log.json   config, environment, loss and validation curves, list of captures
#   train.log        the training output
#   traces-N.tar     the trace files (*.h5), packed into <= 15 MiB parts (the device returns
#                    at most 8 files of 16 MiB)
# TP=2 runs as two simulated ranks in one process (taco.train --tp-sim 2: the numerics of two
# processes, bit for bit). Needs the package's extension (pip install ., or taco/_C*.so in python/).
#
#   bash scripts/capture_run.sh [TRAIN_SECONDS]        # on the GPU machine; default 120 s
#   SMOKE=1 OUT=/tmp/o bash scripts/capture_run.sh 20  # a tiny CPU run of the same script
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:?set OUT to the output directory}
secs=${1:-120}
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 GLOO_SOCKET_IFNAME=lo
py=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ "${SMOKE:-0}" = 1 ]; then
  model=(--device cpu --dtype float32 --layers 3 --hidden 64 --heads 4 --seq 64 --batch 4 --data-bytes 4000000
         --capture-layers 0,2 --warmup 10 --log-every 10 --steps 200)
else
  model=(--device cuda --dtype bfloat16 --layers 6 --hidden 512 --heads 8 --seq 512 --batch 8 --data-bytes 64000000
         --capture-layers 0,2,5 --warmup 100 --log-every 25 --steps 600)
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
fi
"$py" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available() and torch.cuda.get_device_name(0))'
common=(--tp-sim 2 --arch gpt2 "${model[@]}" --lr 2e-3 --seed 1234 --capture-steps 30,300 --capture-last
        --capture-batch 1)

timeout $((secs + 120)) "$py" -m taco.train "${common[@]}" --time-limit "$secs" --out "$work" 2>&1 | tee "$work/train.log"
rc=${PIPESTATUS[0]}
echo "capture_run: exit $rc"

# Pack the traces into tar parts of at most 15 MiB each (a trace file larger than that gets
# a part of its own and does not come back; none is expected at these sizes).
"$py" - "$work" "$out" <<'PY'
import glob, os, shutil, sys, tarfile
work, out = sys.argv[1], sys.argv[2]
limit = 15 << 20
parts, cur, size = [], [], 0
for f in sorted(glob.glob(os.path.join(work, "*.h5"))):
    s = os.path.getsize(f)
    if cur and size + s > limit:
        parts.append(cur); cur, size = [], 0
    cur.append(f); size += s
if cur:
    parts.append(cur)
for i, files in enumerate(parts):
    with tarfile.open(os.path.join(out, f"traces-{i}.tar"), "w") as t:
        for f in files:
            t.add(f, arcname=os.path.basename(f))
for f in ("train_log.json", "metrics.jsonl", "train.log"):
    if os.path.exists(os.path.join(work, f)):
        shutil.copy(os.path.join(work, f), out)
total = sum(os.path.getsize(f) for f in glob.glob(os.path.join(work, "*.h5")))
print(f"capture_run: {sum(map(len, parts))} trace files, {total / 2**20:.1f} MiB, in {len(parts)} tar part(s)")
for f in sorted(os.listdir(out)):
    print(f"  {f} {os.path.getsize(os.path.join(out, f))}")
PY
exit "$rc"
