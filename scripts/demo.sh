#!/usr/bin/env bash
# The demo: the main job end to end on an embedded default. Extended as the toolkit grows:
# each stage is one `stage` block that writes into $out and adds its files to the summary.
#   usage: scripts/demo.sh [BUILD_DIR]        (make demo runs it on ./build)
set -euo pipefail
build=${1:-build}
taco="$build/bin/taco"
out=demo-out
[ -x "$taco" ] || { echo "demo: $taco not found; build first (make build)" >&2; exit 2; }
mkdir -p "$out"
outputs=()                           # "path: what it is", printed at the end
stage() { echo; echo "== $*"; }      # a section header
produced() { outputs+=("$1: $2"); }  # record an output file

echo "== taco demo: outputs in $out/"
"$taco" --version

# ---- 1. a synthetic TP trace: one step of a 2-layer model at TP 2, forward and backward ------
# (realistic mix: forward partial sums with outlier channels, backward gradients near 1e-7)
stage "taco synth: synthesize a TP trace"
"$taco" synth --out "$out/trace.h5" --hidden 1024 --tokens 512 --layers 2 --tp 2 --steps 0 \
  --directions fwd,bwd --dist realistic --seed 1
produced "$out/trace.h5" "synthetic TP trace (HDF5, traces/README.md)"

# ---- 2. what is in it: metadata and FP8-relevant statistics ---------------------------------
stage "taco info: tensors and statistics"
"$taco" info "$out/trace.h5" | tee "$out/info.txt"
"$taco" info --json "$out/trace.h5" > "$out/info.json"
produced "$out/info.txt" "the table above"
produced "$out/info.json" "the same per tensor, as JSON (docs/synth.md)"

# ---- 3. error study: TACO against its baselines, on the synthetic trace and on real captured
# TP tensors, kept apart (one study each: pooling them would average unlike data). The summary
# ranks variants by median rel_l2 per site; the report's figures draw the same medians.
variants=taco,taco-noh,fp8-tensor,fp8-g128,mxfp8,int8-g128-had,nvfp4,bf16
samples=traces/samples/gpt6l512-tp2-step000571.h5
stage "taco study: codecs on the synthetic trace (2 TP ranks, and 4 with 2 derived)"
"$taco" study "$out/trace.h5" --variants "$variants" \
  --collectives one_shot,two_shot,ring --tp 2,4 --out "$out/study-synth" -q
produced "$out/study-synth/results.csv" "synthetic: error metrics per tensor and variant (docs/results-schema.md)"
produced "$out/study-synth/collectives.csv" "synthetic: error after simulated compressed all-reduce at TP 2 and 4"

stage "taco study: the same codecs on real captured TP tensors ($samples)"
"$taco" study "$samples" --variants "$variants" \
  --collectives one_shot,two_shot,ring --tp 2,4 --out "$out/study-real" -q
produced "$out/study-real/results.csv" "real: error metrics per tensor and variant"
produced "$out/study-real/collectives.csv" "real: error after simulated compressed all-reduce at TP 2 and 4"

# ---- 3b. data-driven selection on the real tensors: the best variant per site within TACO's
# 1.0625 bytes/element
stage "taco study --select: best variant per site and direction on the real tensors, and whether Hadamard helps"
"$taco" study "$samples" --select --budget 1.0625 --no-histograms \
  --out "$out/select" -q | sed -n '/^selection/,$p'
produced "$out/select/selection.json" "per-site choice, reusable with taco study --config"

# ---- 4. figures: paper-style PNG/PDF and an index.html with provenance, one report per study --
stage "taco report: figures for both studies"
"$taco" report "$out/study-synth"
"$taco" report "$out/study-real"
produced "$out/study-synth/report/index.html" "the synthetic study's report: figures, captions, provenance"
produced "$out/study-real/report/index.html" "the real study's report"

stage "done: outputs in $out/"
for o in "${outputs[@]}"; do echo "  $o"; done
