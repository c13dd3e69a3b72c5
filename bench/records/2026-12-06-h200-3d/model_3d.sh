#!/usr/bin/env bash
# The step model's TP2 x PP2 x DP2 prediction (GPT-345M, every link 25 Gb/s Ethernet) with each route
# compressed alone and all three together; layer compute measured on an H200 (bench/model/).
# BENCH: codec throughput (default: an H200's, 2026-12-04-h200-refactor-ab/bench_new_1.json, with
# int4-g32-had standing in for the PP codec: model_3d.txt); PP_CODEC: the pipeline codec.
# model_3d_h100.txt: BENCH=the H100 rows of 2026-12-07-h100-42-ab (taco, int4-g32-had and
# tahquant, one call) PP_CODEC=tahquant MODELS='gpt-345m qwen2.5-3b', the codecs the training set ran.
# usage: [BENCH=a.json[,b.json]] [PP_CODEC=V] [DP_CODEC=V] [MODELS='gpt-345m ...'] bash model_3d.sh [TACO_BINARY]
set -euo pipefail
taco=${1:-build/bin/taco}
B=${BENCH:-bench/records/2026-12-04-h200-refactor-ab/bench_new_1.json}
PP=${PP_CODEC:-int4-g32-had}
DP=${DP_CODEC:-int4-g32-had}
L=bench/model/2026-12-03-layer-h200-merged.json
for m in ${MODELS:-gpt-345m}; do
for c in "--codec none" "--codec taco" "--codec none --pp-codec $PP" "--codec none --dp-codec $DP" \
         "--codec taco --pp-codec $PP" "--codec taco --dp-codec $DP" \
         "--codec taco --pp-codec $PP --dp-codec $DP"; do
  echo "== taco model --model $m --tp 2 --pp 2 --dp 2 --tp-link eth-25 --bench $B --layer $L $c"
  # shellcheck disable=SC2086
  "$taco" model --model "$m" --tp 2 --pp 2 --dp 2 --tp-link eth-25 --bench "$B" --layer "$L" $c
done
done
