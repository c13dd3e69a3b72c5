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

# ---- 3. error study: TACO against its baselines on the synthetic trace and the real samples ---
# (ranked summary on stdout; results.csv/json, histograms.csv, collectives.csv)
stage "taco study: codecs on the synthetic trace and on real captured TP tensors"
samples=traces/samples/gpt6l512-tp2-step000571.h5
"$taco" study "$out/trace.h5" "$samples" \
  --variants taco,taco-noh,fp8-tensor,fp8-g128,mxfp8,int8-g128-had,nvfp4,bf16 \
  --collectives one_shot,two_shot,ring --tp 2 --out "$out/study" -q
produced "$out/study/results.csv" "error metrics per tensor and variant (docs/results-schema.md)"
produced "$out/study/collectives.csv" "error after simulated compressed all-reduce (one-shot, two-shot, ring)"

# ---- 3b. data-driven selection: the best variant per site within TACO's 1.0625 bytes/element --
stage "taco study --select: best variant per site and direction, and whether Hadamard helps"
"$taco" study "$out/trace.h5" "$samples" --select --budget 1.0625 --no-histograms \
  --out "$out/select" -q | sed -n '/^selection/,$p'
produced "$out/select/selection.json" "per-site choice, reusable with taco study --config"

# ---- 4. figures: paper-style PNG/PDF and an index.html with provenance -----------------------
stage "taco report: figures for the study"
"$taco" report "$out/study"
produced "$out/study/report/index.html" "the report: figures, captions, provenance"

stage "done: outputs in $out/"
for o in "${outputs[@]}"; do echo "  $o"; done
