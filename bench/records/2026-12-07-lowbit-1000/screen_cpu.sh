#!/usr/bin/env bash
# The CPU screen that chose the GPU set's candidates (#39): a 2-layer Llama (hidden 128, 4 heads,
# ffn 256, seq 64, batch 8), 150 steps at --tp-sim 4, fp32 (so plain is 4 bytes per element), on
# the development machine (2 cores, Debian's torch 1.13). One seed per candidate (seed 2 for the
# backward low-rank / g256 rows, seed 1 for the rest), then seeds 2 and 3 of the GPU set's three
# candidates. A tiny model, not the protocol: it says which direction breaks first.
# screen_cpu.txt is its summary.
# usage: bash screen_cpu.sh OUT  (run from the repository root; about 20 minutes)
set -euo pipefail
out=$1
R=bench/records/2026-12-07-lowbit-1000
run() {  # SEEDS VARIANTS
  python3 -m taco.train.sweep --out "$out" --variants "$2" --seeds "$1" --baseline-seeds "$1" --parallel 2 -- \
    --tp-sim 4 --device cpu --arch llama --layers 2 --hidden 128 --heads 4 --kv-heads 4 --ffn 256 --seq 64 \
    --batch 8 --steps 150 --warmup 15 --lr 3e-3 --eval-every 50 --eval-batches 4 --log-every 50 \
    --sample-every 50 --data-bytes 2000000 --threads 1
}
run 1 "none,int3-g128-had,int2-g128-had,ef:int2-g128-had,int2:g128:had:T=2.25,ef:int2:g128:had:T=2.25"
run 1 "int2:g128:had:asym:T=4,int3:g128:had:T=4.5,int3-g128-had@bwd=int2-g128-had,int2-g128-had@bwd=int3-g128-had"
run 1 "powersgd:r8@bwd=int3-g128-had,int3:g128:had:sbf16@bwd=int2:g128:had:sbf16"
run 1 "config:$R/mix_attn3.json,config:$R/mix_mlp3.json"
run 2 "none,int3-g128-had@bwd=powersgd:r8,int3-g128-had@bwd=powersgd:r4,int3-g128-had@bwd=int2:g256:had:sbf16"
run 2,3 "none,int3:g128:had:sbf16@bwd=int2:g128:had:sbf16,config:$R/mix_attn3.json,int3-g128-had"
python3 -m taco.train.sweep --summarize "$out"
