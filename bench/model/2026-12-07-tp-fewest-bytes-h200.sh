#!/usr/bin/env bash
# #39 goal 3 with the 3-seed 1000-step protocol's result (bench/records/2026-12-07-lowbit-1000):
# the step model's prediction for the paper's setting (TP2 x PP2 x DP2, seq 2048, micro-batch 8)
# with the fewest bytes that met the goal rule (mean <= +1%, no seed above +1.5%): int4 forward
# with int3 backward (int4:g128:had:sbf16, int3:g128:had:sbf16 on attn_qkv:bwd and mlp_fc1:bwd;
# 0.453 B/elem over the four per-layer streams), beside int4 everywhere (0.516) and NVFP4 (0.5625),
# every link of a scenario at PCIe Gen5, 100 Gb/s or 25 Gb/s. Codec costs and compute of one H200:
# taco bench rows of the same call (bench_h200/model_rows.json) and the layer benchmark.
# usage: bash bench/model/2026-12-07-tp-fewest-bytes-h200.sh [TACO_BINARY] > bench/model/2026-12-07-tp-fewest-bytes-h200.txt
set -euo pipefail
taco=${1:-build/bin/taco}
B=bench/records/2026-12-07-lowbit-1000/bench_h200/model_rows.json
L=bench/model/2026-12-03-layer-h200-merged.json
BWD3="attn_qkv:bwd=int3:g128:had:sbf16,mlp_fc1:bwd=int3:g128:had:sbf16"
printf '%-11s %-10s %-22s %9s %9s %9s %8s\n' model link codec step_ms tp_comm codec_ms speedup
for m in gpt-345m qwen2.5-3b; do
  for link in pcie-gen5 ib-100 eth-25; do
    for c in nvfp4 int4:g128:had:sbf16 int4+int3bwd; do
      args=(--codec "$c")
      [ "$c" = int4+int3bwd ] && args=(--codec int4:g128:had:sbf16 --site-codec "$BWD3")
      "$taco" model --links configs/links.json --model "$m" --tp 2 --pp 2 --dp 2 --tp-link "$link" \
        --bench "$B" --layer "$L" "${args[@]}" |
        awk -v m="$m" -v l="$link" -v c="$c" '$1 == "compressed" {
          printf "%-11s %-10s %-22s %9.1f %9.1f %9.1f %8s\n", m, l, c, $2, $5, $6, $11 }'
    done
  done
done
