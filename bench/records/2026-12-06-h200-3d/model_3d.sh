#!/usr/bin/env bash
# The step model's TP2 x PP2 x DP2 prediction (GPT-345M, every link 25 Gb/s Ethernet) with each route
# compressed alone and all three together; codec throughput measured on an H200
# (2026-12-04-h200-refactor-ab/bench_new_1.json), layer compute measured on an H200 (bench/model/). usage: bash model_3d.sh [TACO_BINARY]
set -euo pipefail
taco=${1:-build/bin/taco}
B=bench/records/2026-12-04-h200-refactor-ab/bench_new_1.json
L=bench/model/2026-12-03-layer-h200-merged.json
for c in "--codec none" "--codec taco" "--codec none --pp-codec int4-g32-had" "--codec none --dp-codec int4-g32-had" \
         "--codec taco --pp-codec int4-g32-had" "--codec taco --dp-codec int4-g32-had" \
         "--codec taco --pp-codec int4-g32-had --dp-codec int4-g32-had"; do
  echo "== taco model --model gpt-345m --tp 2 --pp 2 --dp 2 --tp-link eth-25 --bench $B --layer $L $c"
  # shellcheck disable=SC2086
  "$taco" model --model gpt-345m --tp 2 --pp 2 --dp 2 --tp-link eth-25 --bench "$B" --layer "$L" $c
done
