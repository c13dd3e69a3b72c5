#!/usr/bin/env bash
# #39 goal 3: the step model's prediction for the paper's setting (TP2 x PP2 x DP2, seq 2048,
# micro-batch 8) with the codec of the fewest bytes that trained within +1% on every seed (NVFP4,
# 0.5625 B/elem: bench/records/2026-12-03-h200-train-1000) on the TP collectives, beside TACO and
# int4-g32-had, with every link of a scenario at PCIe Gen5, 100 Gb/s or 25 Gb/s. Codec costs: the
# H100 kernels of bench/records/2026-12-07-h100-42-ab/bench_new_1.json (taco bench, one call; no
# sub-0.5 B/elem codec trained within +1%, and none has taco bench rows). Compute: the layer
# benchmark on an H200.
# usage: bash bench/model/2026-12-07-tp-fewest-bytes.sh [TACO_BINARY] > bench/model/2026-12-07-tp-fewest-bytes.txt
set -euo pipefail
taco=${1:-build/bin/taco}
B=bench/records/2026-12-07-h100-42-ab/bench_new_1.json
L=bench/model/2026-12-03-layer-h200-merged.json
printf '%-11s %-10s %-13s %9s %9s %9s %8s\n' model link codec step_ms tp_comm codec_ms speedup
for m in gpt-345m qwen2.5-3b; do
  for link in pcie-gen5 ib-100 eth-25; do
    for c in taco int4-g32-had nvfp4; do
      "$taco" model --links configs/links.json --model "$m" --tp 2 --pp 2 --dp 2 --tp-link "$link" \
        --bench "$B" --layer "$L" --codec "$c" |
        awk -v m="$m" -v l="$link" -v c="$c" '$1 == "compressed" {
          printf "%-11s %-10s %-13s %9.1f %9.1f %9.1f %8s\n", m, l, c, $2, $5, $6, $11 }'
    done
  done
done
